/* options.c — the compile options of options.def: the table (fe_opt_table), defaults,
 * lookup by long or field name, typed setting from text with range checks and "not
 * implemented yet" for options a build does not support, and the JSON form embedded in
 * the generated .so. */
#include <errno.h>
#include <float.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cm.h"
#include "fe_int.h"

const fe_opt_info fe_opt_table[FE_OPT_COUNT] = {
#define OPT(field, lname, type, def, values, help, impl) {#field, lname, type, def, values, help, impl},
#include "options.def"
};

/* The OPT_VALUE rows: the option each belongs to and its text (index = enum fe_optval). */
static const struct { int k; const char *text; } fe_values[FE_N_VALUES] = {
#define OPT(field, lname, type, def, values, help, impl)
#define OPT_VALUE(field, name, text) {FE_OPTK_##field, text},
#include "options.def"
};

const char *fe_optval_text(fe_optval v) { return v >= 0 && v < FE_N_VALUES ? fe_values[v].text : "?"; }

const char *fe_opt_values(int k, char *buf, size_t size) {
  size_t n = 0;
  if (size) buf[0] = 0;
  for (int v = 0; v < FE_N_VALUES && size; v++)
    if (fe_values[v].k == k) n += (size_t)snprintf(buf + (n < size ? n : size - 1), n < size ? size - n : 1, "%s%s", n ? "|" : "", fe_values[v].text);
  return buf;
}

static const size_t opt_offset[FE_OPT_COUNT] = {
#define OPT(field, lname, type, def, values, help, impl) offsetof(fe_options, field),
#include "options.def"
};

/* Ranges of numeric options (CM_NUM_LO_OPEN / CM_NUM_HI_OPEN: an open end); an option not
 * listed takes any value of its type (any int64, any finite double).  Every value is parsed by
 * cm_num_parse (common/cm.h), as the model file's numbers are. */
static const struct { int k; double lo, hi; int flags; } opt_range[] = {
    {FE_OPTK_batch_size, 1, 65536, 0},
    {FE_OPTK_shards, 0, 1024, 0},
    {FE_OPTK_seed, 0, (double)INT64_MAX, 0},
    {FE_OPTK_label_smoothing, 0, 0.999999, 0},
    {FE_OPTK_gradient_accumulation, 1, 1 << 20, 0},
    {FE_OPTK_replicas, 1, 4096, 0},
    {FE_OPTK_memory_limit, 0, 9.2e18, 0},
    {FE_OPTK_momentum, 0, 1, 0},
    {FE_OPTK_weight_decay, 0, FLT_MAX, 0},
    {FE_OPTK_l2_regularization, 0, FLT_MAX, 0},
    {FE_OPTK_loss_scaling, 0, FLT_MAX, CM_NUM_LO_OPEN},
    {FE_OPTK_loss_scaling_interval, 1, 1000000000, 0},
};

static void *field_ptr(fe_options *o, int k) { return (char *)o + opt_offset[k]; }
static const void *cfield_ptr(const fe_options *o, int k) { return (const char *)o + opt_offset[k]; }

/* Sets option k from text without the implemented check (defaults use it too). */
static int set_raw(fe_options *o, int k, const char *text, const char *label, ir_diag *d);

void fe_options_init(fe_options *o) {
  memset(o, 0, sizeof *o);
  for (int k = 0; k < FE_OPT_COUNT; k++)
    if (fe_opt_table[k].type != OPT_LIST) set_raw(o, k, fe_opt_table[k].def, "", NULL);
}

void fe_options_mode_defaults(fe_options *o) {
  if (o->mode == FE_MODE_TRAINING && !o->set[FE_OPTK_batch_size]) o->batch_size = FE_TRAIN_BATCH_DEFAULT;
}

int fe_option_find(const char *name) {
  for (int k = 0; k < FE_OPT_COUNT; k++) {
    const char *l = fe_opt_table[k].long_name;
    if (!strcmp(name, fe_opt_table[k].field) || !strcmp(name, l)) return k;
  }
  return -1;
}

/* The range of option k: its opt_range row, else the whole type. */
static void range_of(int k, double *lo, double *hi, int *flags) {
  *lo = -INFINITY, *hi = INFINITY, *flags = 0;
  for (size_t i = 0; i < sizeof opt_range / sizeof opt_range[0]; i++)
    if (opt_range[i].k == k) *lo = opt_range[i].lo, *hi = opt_range[i].hi, *flags = opt_range[i].flags;
}

static int check_range(int k, double x, const char *text, const char *label, ir_diag *d) {
  double lo, hi;
  int flags;
  range_of(k, &lo, &hi, &flags);
  if ((flags & CM_NUM_LO_OPEN ? x > lo : x >= lo) && (flags & CM_NUM_HI_OPEN ? x < hi : x <= hi)) return 0;
  char rule[160];
  return ir_diag_set(d, (ir_loc){0}, NULL, "%s must be %s (got %s)", label,
                     cm_num_rule(lo, hi, flags | (fe_opt_table[k].type == OPT_INT ? CM_NUM_INTEGER : 0), rule, sizeof rule), text);
}

/* OPT_INT and OPT_FLOAT: cm_num_parse with the option's range. */
static int set_number(fe_options *o, int k, const char *text, const char *label, ir_diag *d) {
  double lo, hi, v;
  int flags;
  int64_t iv;
  char why[256];
  range_of(k, &lo, &hi, &flags);
  if (fe_opt_table[k].type == OPT_INT) {
    flags |= CM_NUM_INTEGER;
    if (isinf(lo)) lo = (double)INT64_MIN;
    if (isinf(hi)) hi = (double)INT64_MAX;
  }
  if (cm_num_parse(text, lo, hi, flags, &v, &iv, why, sizeof why))
    return ir_diag_set(d, (ir_loc){0}, NULL, "%s %s", label, why);
  if (fe_opt_table[k].type == OPT_INT) *(int64_t *)field_ptr(o, k) = iv;
  else *(double *)field_ptr(o, k) = v;
  return 0;
}

static int set_enum(fe_options *o, int k, const char *text, const char *label, ir_diag *d) {
  const char *cand[FE_N_VALUES];
  int n = 0;
  for (int v = 0; v < FE_N_VALUES; v++) {
    if (fe_values[v].k != k) continue;
    if (!strcmp(fe_values[v].text, text)) {
      *(fe_optval *)field_ptr(o, k) = (fe_optval)v;
      return 0;
    }
    cand[n++] = fe_values[v].text;
  }
  char vals[256];
  const char *best = fe_closest(text, cand, n);
  return ir_diag_set(d, (ir_loc){0}, NULL, "%s must be one of %s (got '%s')%s%s%s", label, fe_opt_values(k, vals, sizeof vals),
                     text, best ? " (did you mean '" : "", best ? best : "", best ? "'?)" : "");
}

static int set_flag(fe_options *o, int k, const char *text, const char *label, ir_diag *d) {
  int v;
  if (!text || !strcmp(text, "1") || !strcmp(text, "true")) v = 1;
  else if (!strcmp(text, "0") || !strcmp(text, "false")) v = 0;
  else return ir_diag_set(d, (ir_loc){0}, NULL, "%s takes true or false (got '%s')", label, text);
  *(int *)field_ptr(o, k) = v;
  return 0;
}

static int set_list(fe_options *o, int k, const char *text, const char *label, ir_diag *d) {
  fe_list *l = field_ptr(o, k);
  if (!text || !*text) return ir_diag_set(d, (ir_loc){0}, NULL, "%s: empty list item", label);
  if (l->n >= FE_MAX_LIST) return ir_diag_set(d, (ir_loc){0}, NULL, "%s takes at most %d items", label, FE_MAX_LIST);
  l->v[l->n++] = text;
  return 0;
}

/* --memory-limit: a whole number of bytes, or a number with a binary suffix K, M, G or T
 * (optionally followed by "iB" or "B"): "65536", "64M", "1.5G", "512KiB". */
static int set_bytes(fe_options *o, int k, const char *text, const char *label, ir_diag *d) {
  static const char units[] = "KMGT";
  char *end;
  errno = 0;
  double v = text && *text && !strchr(" \t+-", *text) ? strtod(text, &end) : NAN;
  if (!isnan(v) && end == text) v = NAN; /* no digits ("K") */
  const char *u = isnan(v) || errno || !isfinite(v) ? NULL : strchr(units, end[0] & ~0x20);
  double scale = 1;
  if (u && end[0]) {
    for (const char *p = units; p <= u; p++) scale *= 1024;
    end++;
    if (*end == 'i' && end[1] == 'B') end += 2;
    else if (*end == 'B') end++;
  } else if (!isnan(v) && end[0] == 'B' && !end[1]) {
    end++;
  }
  if (isnan(v) || errno || !isfinite(v) || *end || (scale == 1 && v != floor(v)))
    return ir_diag_set(d, (ir_loc){0}, NULL,
                       "%s takes a size in bytes: a whole number or a number with K, M, G or T (x1024), e.g. 64M or 1.5G"
                       " (got '%s')", label, text ? text : "");
  v = floor(v * scale);
  if (check_range(k, v, text, label, d)) return -1;
  *(int64_t *)field_ptr(o, k) = (int64_t)v;
  return 0;
}

/* --available-memory-proportion: one proportion 0 < P <= 1, or a comma-separated list of them
 * (one per shard; the count is checked against the shards in codegen/cg_budget.c). */
static int set_proportions(fe_options *o, int k, const char *text, const char *label, ir_diag *d) {
  const char *p = text ? text : "";
  int n = 0;
  for (;;) {
    char *end;
    errno = 0;
    double v = strtod(p, &end);
    if (end == p || errno || !isfinite(v) || (*end && *end != ','))
      return ir_diag_set(d, (ir_loc){0}, NULL, "%s takes a proportion 0 < P <= 1, or one per shard separated by "
                         "commas such as 0.6,0.3 (got '%s')", label, text ? text : "");
    if (!(v > 0 && v <= 1))
      return ir_diag_set(d, (ir_loc){0}, NULL, "%s: every proportion must be > 0 and <= 1 (got %g in '%s')", label, v,
                         text);
    n++;
    if (!*end) break;
    p = end + 1;
  }
  if (n > FE_MAX_LIST) return ir_diag_set(d, (ir_loc){0}, NULL, "%s takes at most %d values", label, FE_MAX_LIST);
  *(const char **)field_ptr(o, k) = text;
  return 0;
}

/* --target-cache L2,L3: two sizes, digits with an optional K, M or G (codegen/cg_budget.c
 * cg_target_set_cache applies it and checks the ranges). */
static int set_target_cache(fe_options *o, int k, const char *text, const char *label, ir_diag *d) {
  const char *p = text ? text : "";
  for (int i = 0; i < 2; i++) {
    if (*p < '0' || *p > '9') break;
    while (*p >= '0' && *p <= '9') p++;
    if (*p == 'K' || *p == 'M' || *p == 'G') p++;
    if (i == 0 && *p == ',') p++;
    else if (i == 0) break;
    else if (!*p) return *(const char **)field_ptr(o, k) = text, 0;
  }
  return ir_diag_set(d, (ir_loc){0}, NULL, "%s takes the per-core L2 and L3 cache sizes as L2,L3, each digits with an "
                     "optional K, M or G, e.g. 2M,4M (got '%s')", label, text ? text : "");
}

/* --tune name=value: checked against ir/tuning.def now, applied by fe_options_tuning. */
static int set_tune(fe_options *o, int k, const char *text, const char *label, ir_diag *d) {
  ir_tuning t = ir_tune_defaults;
  ir_diag sub = {0};
  if (text && ir_tune_set(&t, text, &sub)) return ir_diag_set(d, (ir_loc){0}, NULL, "%s: %s", label, sub.msg);
  return set_list(o, k, text, label, d);
}

static int set_raw(fe_options *o, int k, const char *text, const char *label, ir_diag *d) {
  if (k == FE_OPTK_tune) return set_tune(o, k, text, label, d);
  if (k == FE_OPTK_target_cache && text && *text) return set_target_cache(o, k, text, label, d);
  if (k == FE_OPTK_memory_limit) return set_bytes(o, k, text, label, d);
  if (k == FE_OPTK_available_memory_proportion) return set_proportions(o, k, text, label, d);
  switch (fe_opt_table[k].type) {
  case OPT_INT:
  case OPT_FLOAT: return set_number(o, k, text, label, d);
  case OPT_STR: *(const char **)field_ptr(o, k) = text ? text : ""; return 0;
  case OPT_ENUM: return set_enum(o, k, text, label, d);
  case OPT_FLAG: return set_flag(o, k, text, label, d);
  case OPT_LIST: return set_list(o, k, text, label, d);
  }
  return -1;
}

/* label: how the option is named in messages ("--batch-size" or "compile: 'batch_size'"). */
int fe_option_set_as(fe_options *o, int k, const char *text, const char *label, ir_diag *d) {
  if (k < 0 || k >= FE_OPT_COUNT) return ir_diag_set(d, (ir_loc){0}, NULL, "unknown option");
  if (!fe_opt_table[k].implemented) return ir_diag_set(d, (ir_loc){0}, NULL, "%s: not implemented yet", label);
  if (fe_opt_table[k].type == OPT_LIST && !text) { /* clear: the list is given anew */
    ((fe_list *)field_ptr(o, k))->n = 0;
    o->set[k] = 1;
    return 0;
  }
  if (fe_opt_table[k].type != OPT_FLAG && (!text || !*text)) /* --weights "" is not "no weights" */
    return ir_diag_set(d, (ir_loc){0}, NULL, "%s needs a value (got an empty one)", label);
  if (set_raw(o, k, text, label, d)) return -1;
  o->set[k] = 1;
  return 0;
}

int fe_option_set(fe_options *o, int k, const char *text, ir_diag *d) {
  char label[64];
  snprintf(label, sizeof label, "--%s", k >= 0 && k < FE_OPT_COUNT ? fe_opt_table[k].long_name : "?");
  return fe_option_set_as(o, k, text, label, d);
}

void fe_options_rehome(fe_options *o, const unsigned char *which, ir_arena *a) {
  for (int k = 0; k < FE_OPT_COUNT; k++) {
    if (!which[k]) continue;
    fe_opt_type t = fe_opt_table[k].type;
    if (t == OPT_STR) {
      const char **p = field_ptr(o, k);
      *p = ir_strdup(a, *p);
    } else if (t == OPT_LIST) {
      fe_list *l = field_ptr(o, k);
      for (int i = 0; i < l->n; i++) l->v[i] = ir_strdup(a, l->v[i]);
    }
  }
}

/* ---- JSON ---------------------------------------------------------------------------- */
typedef struct sbuf { char *p; size_t n, cap; } sbuf;

static void put(sbuf *b, const char *s, size_t n) {
  if (b->n + n + 1 > b->cap) {
    b->cap = (b->n + n + 1) * 2;
    b->p = realloc(b->p, b->cap);
    if (!b->p) abort();
  }
  memcpy(b->p + b->n, s, n);
  b->n += n;
  b->p[b->n] = 0;
}
static void puts_(sbuf *b, const char *s) { put(b, s, strlen(s)); }

static void put_json_str(sbuf *b, const char *s) {
  puts_(b, "\"");
  for (; *s; s++) {
    char esc[8];
    unsigned char ch = (unsigned char)*s;
    if (ch == '"' || ch == '\\') snprintf(esc, sizeof esc, "\\%c", ch);
    else if (ch < 0x20) snprintf(esc, sizeof esc, "\\u%04x", ch);
    else esc[0] = (char)ch, esc[1] = 0;
    puts_(b, esc);
  }
  puts_(b, "\"");
}

/* Shortest decimal that reads back as the same double (0.6, not 0.59999999999999998). */
static void json_double(char *buf, size_t n, double v) {
  for (int prec = 6; prec <= 17; prec++) {
    snprintf(buf, n, "%.*g", prec, v);
    if (strtod(buf, NULL) == v) return;
  }
}

static void put_value(sbuf *b, const fe_options *o, int k, const ir_tuning *tune) {
  char num[64];
  if (k == FE_OPTK_tune) { /* every knob's value, not just the items given */
    char *j = ir_tune_json(tune);
    puts_(b, j ? j : "{}");
    free(j);
    return;
  }
  const void *p = cfield_ptr(o, k);
  switch (fe_opt_table[k].type) {
  case OPT_INT: snprintf(num, sizeof num, "%lld", (long long)*(const int64_t *)p); puts_(b, num); break;
  case OPT_FLOAT: json_double(num, sizeof num, *(const double *)p); puts_(b, num); break;
  case OPT_FLAG: puts_(b, *(const int *)p ? "true" : "false"); break;
  case OPT_STR: put_json_str(b, *(const char *const *)p); break;
  case OPT_ENUM: put_json_str(b, fe_optval_text(*(const fe_optval *)p)); break;
  case OPT_LIST: {
    const fe_list *l = p;
    puts_(b, "[");
    for (int i = 0; i < l->n; i++) {
      if (i) puts_(b, ", ");
      put_json_str(b, l->v[i]);
    }
    puts_(b, "]");
  } break;
  }
}

int fe_options_tuning(const fe_options *o, ir_tuning *t, ir_diag *d) {
  for (int i = 0; i < o->tune.n; i++)
    if (ir_tune_set(t, o->tune.v[i], d)) return -1;
  return 0;
}

char *fe_options_json(const fe_options *o) {
  ir_tuning t = ir_tune_defaults;
  fe_options_tuning(o, &t, NULL);
  return fe_options_json_tuned(o, &t);
}

char *fe_options_json_tuned(const fe_options *o, const ir_tuning *tune) {
  sbuf b = {0};
  puts_(&b, "{");
  for (int k = 0; k < FE_OPT_COUNT; k++) {
    puts_(&b, k ? ", " : "");
    put_json_str(&b, fe_opt_table[k].field);
    puts_(&b, ": ");
    put_value(&b, o, k, tune);
  }
  puts_(&b, "}");
  return b.p;
}
