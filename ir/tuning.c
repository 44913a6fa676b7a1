/* tuning.c — the tuning table of tuning.def: defaults, parsing "name=value" items with range
 * checks (a bad item is an error, never a silent default), the JSON record and the help. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ir/ir.h"
#include "ir/tuning.h"

const ir_tune_info ir_tune_table[IR_TUNE_COUNT] = {
#define TUNE(field, type, def, lo, hi, help) {#field, #type, help, def, lo, hi},
#include "ir/tuning.def"
};

const ir_tuning ir_tune_defaults = {
#define TUNE(field, type, def, lo, hi, help) .field = def,
#include "ir/tuning.def"
};

const ir_tuning *ir_tune(const ir_graph *g) { return g && g->tune ? g->tune : &ir_tune_defaults; }

static int *field(ir_tuning *t, int k) { return (int *)t + k; }
_Static_assert(sizeof(ir_tuning) == IR_TUNE_COUNT * sizeof(int), "ir_tuning is an array of int");

int ir_tune_find(const char *name) {
  for (int k = 0; k < IR_TUNE_COUNT; k++)
    if (!strcmp(name, ir_tune_table[k].name)) return k;
  return -1;
}

static int parse_value(const ir_tune_info *r, const char *v, int *out) {
  if (!strcmp(r->type, "BOOL")) {
    if (!strcmp(v, "1") || !strcmp(v, "true") || !strcmp(v, "on")) return *out = 1, 0;
    if (!strcmp(v, "0") || !strcmp(v, "false") || !strcmp(v, "off")) return *out = 0, 0;
    return -1;
  }
  char *end;
  errno = 0;
  long long x = strtoll(v, &end, 10);
  if (!*v || *end || errno || x < r->lo || x > r->hi) return -1;
  *out = (int)x;
  return 0;
}

static int set_one(ir_tuning *t, const char *item, size_t len, ir_diag *d) {
  char buf[128];
  if (len >= sizeof buf) return ir_diag_set(d, (ir_loc){0}, NULL, "tune item '%.40s...' is too long", item);
  memcpy(buf, item, len);
  buf[len] = 0;
  char *eq = strchr(buf, '=');
  if (!eq) return ir_diag_set(d, (ir_loc){0}, NULL, "tune item '%s' is not name=value (cnnc --help-tune lists the names)", buf);
  *eq = 0;
  int k = ir_tune_find(buf);
  if (k < 0) return ir_diag_set(d, (ir_loc){0}, NULL, "unknown tune knob '%s' (cnnc --help-tune lists them)", buf);
  const ir_tune_info *r = &ir_tune_table[k];
  if (parse_value(r, eq + 1, field(t, k))) {
    if (!strcmp(r->type, "BOOL"))
      return ir_diag_set(d, (ir_loc){0}, NULL, "tune knob '%s' takes 0 or 1 (got '%s')", buf, eq + 1);
    return ir_diag_set(d, (ir_loc){0}, NULL, "tune knob '%s' takes a whole number in %d..%d (got '%s')", buf, r->lo, r->hi,
                       eq + 1);
  }
  return 0;
}

int ir_tune_set(ir_tuning *t, const char *items, ir_diag *d) {
  const char *p = items ? items : "";
  while (*p) {
    size_t n = strcspn(p, ",");
    if (n == 0) return ir_diag_set(d, (ir_loc){0}, NULL, "empty tune item in '%s'", items);
    if (set_one(t, p, n, d)) return -1;
    p += n;
    if (*p == ',') {
      p++;
      if (!*p) return ir_diag_set(d, (ir_loc){0}, NULL, "empty tune item in '%s'", items);
    }
  }
  return 0;
}

char *ir_tune_json(const ir_tuning *t) {
  size_t cap = 64 + (size_t)IR_TUNE_COUNT * 48, n = 0;
  char *s = malloc(cap);
  if (!s) return NULL;
  n += (size_t)snprintf(s + n, cap - n, "{");
  for (int k = 0; k < IR_TUNE_COUNT; k++)
    n += (size_t)snprintf(s + n, cap - n, "%s\"%s\": %d", k ? ", " : "", ir_tune_table[k].name, field((ir_tuning *)t, k)[0]);
  snprintf(s + n, cap - n, "}");
  return s;
}

void ir_tune_help(FILE *f) {
  fprintf(f, "Tuning knobs (--tune name=value[,name=value...]; a model's compile: section takes a\n"
             "tune: map; CNNC_TUNE in the environment is read first, --tune wins).  The defaults\n"
             "are the measured best; the others are A/B experiments and test switches:\n\n");
  for (int k = 0; k < IR_TUNE_COUNT; k++) {
    const ir_tune_info *r = &ir_tune_table[k];
    char range[48];
    if (!strcmp(r->type, "BOOL")) snprintf(range, sizeof range, "0|1");
    else snprintf(range, sizeof range, "%d..%d", r->lo, r->hi);
    fprintf(f, "  %-26s %-13s default %-5d %s\n", r->name, range, r->def, r->help);
  }
}
