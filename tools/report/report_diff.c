/* report_diff.c — `cnnc report-diff A.json B.json`: reads two compile reports (a small JSON
 * reader, enough for what report.c writes and any valid JSON) and prints what changed:
 * totals, per-shard memory, pipeline balance, added/removed ops, and per op its shard,
 * kernel and estimated time. */
#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "common/cm.h"
#include "passes/passes.h"
#include "tools/report/report.h"

/* ---- a small JSON reader ------------------------------------------------------------------ */
typedef enum { J_NULL, J_BOOL, J_NUM, J_STR, J_ARR, J_OBJ } jtype;
typedef struct jv {
  jtype t;
  double num;
  char *str;         /* J_STR */
  int n;             /* J_ARR / J_OBJ members */
  char **keys;       /* J_OBJ */
  struct jv **items;
} jv;

typedef struct jp { const char *p; int depth; const char *err; } jp;

static void jv_free(jv *v) {
  if (!v) return;
  for (int i = 0; i < v->n; i++) {
    if (v->keys) free(v->keys[i]);
    jv_free(v->items[i]);
  }
  free(v->keys);
  free(v->items);
  free(v->str);
  free(v);
}

static void ws(jp *j) {
  while (isspace((unsigned char)*j->p)) j->p++;
}

static jv *jnew(jtype t) {
  jv *v = calloc(1, sizeof *v);
  if (!v) abort();
  v->t = t;
  return v;
}

static char *parse_str(jp *j) {
  if (*j->p != '"') return j->err = "expected a string", NULL;
  j->p++;
  size_t cap = 32, n = 0;
  char *s = malloc(cap);
  if (!s) abort();
  while (*j->p != '"') {
    char c = *j->p++;
    if (!c || (unsigned char)c < 0x20) return free(s), j->err = "unterminated string", NULL;
    if (c == '\\') {
      char e = *j->p++;
      const char *map = strchr("\"\"\\\\//b\bf\fn\nr\rt\t", e);
      if (e == 'u') {
        unsigned u = 0;
        for (int k = 0; k < 4; k++) {
          if (!isxdigit((unsigned char)j->p[k])) return free(s), j->err = "bad \\u escape", NULL;
          u = u * 16 + (unsigned)(isdigit((unsigned char)j->p[k]) ? j->p[k] - '0' : (tolower(j->p[k]) - 'a' + 10));
        }
        j->p += 4;
        c = u < 0x80 ? (char)u : '?';
      } else if (map && ((map - "\"\"\\\\//b\bf\fn\nr\rt\t") % 2 == 0)) {
        c = map[1];
      } else {
        return free(s), j->err = "bad escape", NULL;
      }
    }
    if (n + 2 > cap) {
      char *t = realloc(s, cap *= 2);
      if (!t) abort();
      s = t;
    }
    s[n++] = c;
  }
  j->p++;
  s[n] = 0;
  return s;
}

static jv *parse_value(jp *j);

static jv *parse_list(jp *j, int is_obj) {
  jv *v = jnew(is_obj ? J_OBJ : J_ARR);
  int cap = 0;
  char close = is_obj ? '}' : ']';
  j->p++;
  ws(j);
  if (*j->p == close) return j->p++, v;
  for (;;) {
    char *key = NULL;
    ws(j);
    if (is_obj) {
      if (!(key = parse_str(j))) return jv_free(v), NULL;
      ws(j);
      if (*j->p++ != ':') return free(key), jv_free(v), j->err = "expected ':'", NULL;
    }
    jv *item = parse_value(j);
    if (!item) return free(key), jv_free(v), NULL;
    if (v->n == cap) {
      cap = cap ? cap * 2 : 8;
      v->items = realloc(v->items, (size_t)cap * sizeof *v->items);
      if (is_obj) v->keys = realloc(v->keys, (size_t)cap * sizeof *v->keys);
      if (!v->items || (is_obj && !v->keys)) abort();
    }
    if (is_obj) v->keys[v->n] = key;
    v->items[v->n++] = item;
    ws(j);
    if (*j->p == ',') {
      j->p++;
      continue;
    }
    if (*j->p == close) return j->p++, v;
    jv_free(v);
    return j->err = is_obj ? "expected ',' or '}'" : "expected ',' or ']'", NULL;
  }
}

static jv *parse_value(jp *j) {
  ws(j);
  if (++j->depth > 64) return j->err = "nested too deeply", NULL;
  jv *v = NULL;
  char c = *j->p;
  if (c == '{' || c == '[') v = parse_list(j, c == '{');
  else if (c == '"') {
    char *s = parse_str(j);
    if (s) v = jnew(J_STR), v->str = s;
  } else if (!strncmp(j->p, "true", 4) || !strncmp(j->p, "false", 5)) {
    v = jnew(J_BOOL), v->num = c == 't';
    j->p += c == 't' ? 4 : 5;
  } else if (!strncmp(j->p, "null", 4)) {
    v = jnew(J_NULL), j->p += 4;
  } else if (c == '-' || isdigit((unsigned char)c)) {
    char *end;
    double d = strtod(j->p, &end);
    if (end == j->p) j->err = "bad number";
    else v = jnew(J_NUM), v->num = d, j->p = end;
  } else {
    j->err = "unexpected character";
  }
  j->depth--;
  return v;
}

static jv *load(const char *path, char *err, size_t n) {
  char why[256];
  size_t got; /* a regular file (a directory's ftell was LONG_MAX: malloc failed, abort) */
  char *text = cm_read_regular(path, (uint64_t)1 << 30, &got, why, sizeof why);
  if (!text) return snprintf(err, n, "%s: cannot read: %s", path, why), NULL;
  jp j = {text, 0, NULL};
  jv *v = parse_value(&j);
  if (v) {
    ws(&j);
    if (*j.p) jv_free(v), v = NULL, j.err = "trailing characters";
  }
  if (!v) snprintf(err, n, "%s: not valid JSON at byte %ld: %s", path, (long)(j.p - text), j.err ? j.err : "?");
  else if (v->t != J_OBJ) jv_free(v), v = NULL, snprintf(err, n, "%s: not a cnnc report (not an object)", path);
  free(text);
  return v;
}

static const jv *get(const jv *o, const char *key) {
  if (!o || o->t != J_OBJ) return NULL;
  for (int i = 0; i < o->n; i++)
    if (!strcmp(o->keys[i], key)) return o->items[i];
  return NULL;
}
static double num(const jv *o, const char *key) {
  const jv *v = get(o, key);
  return v && v->t == J_NUM ? v->num : NAN;
}
static const char *str(const jv *o, const char *key) {
  const jv *v = get(o, key);
  return v && v->t == J_STR ? v->str : "";
}
static const jv *at(const jv *a, int i) { return a && a->t == J_ARR && i < a->n ? a->items[i] : NULL; }
static int len(const jv *a) { return a && a->t == J_ARR ? a->n : 0; }

/* ---- the diff ----------------------------------------------------------------------------- */
/* Prints "  label: a -> b (+x%)" when they differ (or always with all). */
static int num_line(FILE *out, const char *label, double a, double b, int all) {
  if (a == b || (isnan(a) && isnan(b))) {
    if (all) fprintf(out, "  %-28s %.6g (same)\n", label, a);
    return 0;
  }
  char sa[32] = "none", sb[32] = "none"; /* absent or null: none */
  if (!isnan(a)) snprintf(sa, sizeof sa, "%.6g", a);
  if (!isnan(b)) snprintf(sb, sizeof sb, "%.6g", b);
  fprintf(out, "  %-28s %s -> %s", label, sa, sb);
  if (a != 0 && !isnan(a) && !isnan(b)) fprintf(out, " (%+.1f%%)", (b - a) / fabs(a) * 100);
  fprintf(out, "\n");
  return 1;
}

/* Prints "  label: a -> b" when two strings differ. */
static int str_line(FILE *out, const char *label, const char *a, const char *b) {
  if (!strcmp(a, b)) return 0;
  fprintf(out, "  %-28s %s -> %s\n", label, a[0] ? a : "none", b[0] ? b : "none");
  return 1;
}

static void diff_totals(const jv *a, const jv *b, FILE *out) {
  fprintf(out, "totals:\n");
  str_line(out, "mode", str(a, "mode"), str(b, "mode"));
  num_line(out, "shards", num(a, "n_shards"), num(b, "n_shards"), 1);
  num_line(out, "batch_size", num(a, "batch_size"), num(b, "batch_size"), 0);
  const jv *ta = get(a, "totals"), *tb = get(b, "totals");
  static const char *const keys[] = {"flops", "est_ms", "n_ops", "n_kernels", "weights", "arena", "io"};
  for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) num_line(out, keys[i], num(ta, keys[i]), num(tb, keys[i]), 1);
  const jv *ba = get(a, "balance"), *bb = get(b, "balance");
  num_line(out, "balance max/mean flops", num(ba, "max_over_mean"), num(bb, "max_over_mean"), 1);
  num_line(out, "slowest stage est_ms", num(ba, "pipeline_est_ms"), num(bb, "pipeline_est_ms"), 1);
  if (get(a, "training") || get(b, "training")) { /* training: schedule and its simulation */
    const jv *ra = get(a, "training"), *rb = get(b, "training");
    str_line(out, "pipeline_schedule", str(ra, "pipeline_schedule"), str(rb, "pipeline_schedule"));
    str_line(out, "recompute", str(ra, "recompute"), str(rb, "recompute"));
    num_line(out, "gradient_accumulation", num(ra, "gradient_accumulation"), num(rb, "gradient_accumulation"), 0);
    num_line(out, "replicas", num(ra, "replicas"), num(rb, "replicas"), 0);
    num_line(out, "stages", len(get(ra, "stages")), len(get(rb, "stages")), 0);
    num_line(out, "bottleneck shard", num(ba, "bottleneck_shard"), num(bb, "bottleneck_shard"), 0);
    num_line(out, "update est_ms", num(ba, "update_est_ms"), num(bb, "update_est_ms"), 1);
    num_line(out, "optimizer est_ms", num(ba, "optimizer_est_ms"), num(bb, "optimizer_est_ms"), 0);
    num_line(out, "idle fraction", num(ba, "idle_fraction"), num(bb, "idle_fraction"), 1);
  }
  num_line(out, "memory_limit", num(a, "memory_limit"), num(b, "memory_limit"), 0);
  num_line(out, "compile seconds", num(get(a, "compile_seconds"), "total"), num(get(b, "compile_seconds"), "total"), 1);
}

static void diff_shards(const jv *a, const jv *b, FILE *out) {
  const jv *sa = get(a, "shards"), *sb = get(b, "shards");
  int n = len(sa) > len(sb) ? len(sa) : len(sb);
  static const char *const keys[] = {"total",     "limited",     "weights",     "activations", "stash",
                                     "optimizer_state", "io", "temporaries", "gaps",        "arena",
                                     "peak_live", "limit",       "headroom",
                                     /* training */
                                     "accumulators", "stash_per_micro_batch", "io_per_micro_batch", "frames",
                                     "micro_batches_in_flight", "stash_in_flight"};
  static const char *const progs[] = {"forward", "backward", "optimizer"};
  fprintf(out, "shards: %d -> %d%s\n", len(sa), len(sb), len(sa) != len(sb) ? " (shard count changed)" : "");
  for (int s = 0; s < n; s++) {
    const jv *x = at(sa, s), *y = at(sb, s);
    if (!x || !y) {
      const jv *z = x ? x : y;
      fprintf(out, " shard %d %s: %s .. %s, memory %.6g bytes, %.6g GFLOP\n", s, x ? "removed" : "added",
              str(z, "first_layer"), str(z, "last_layer"), num(get(z, "memory"), "total"), num(z, "flops") / 1e9);
      continue;
    }
    fprintf(out, " shard %d: %s .. %s -> %s .. %s\n", s, str(x, "first_layer"), str(x, "last_layer"),
            str(y, "first_layer"), str(y, "last_layer"));
    int changed = num_line(out, "flops", num(x, "flops"), num(y, "flops"), 0);
    changed += num_line(out, "est_ms", num(x, "est_ms"), num(y, "est_ms"), 0);
    for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) {
      char label[48];
      snprintf(label, sizeof label, "memory.%s", keys[k]);
      changed += num_line(out, label, num(get(x, "memory"), keys[k]), num(get(y, "memory"), keys[k]), 0);
    }
    for (int p = 0; p < 3; p++) {
      const jv *px = get(get(x, "programs"), progs[p]), *py = get(get(y, "programs"), progs[p]);
      if (!px && !py) continue;
      char label[48];
      changed += str_line(out, progs[p], str(px, "stage"), str(py, "stage"));
      snprintf(label, sizeof label, "%s.flops", progs[p]);
      changed += num_line(out, label, num(px, "flops"), num(py, "flops"), 0);
      snprintf(label, sizeof label, "%s.est_ms", progs[p]);
      changed += num_line(out, label, num(px, "est_ms"), num(py, "est_ms"), 0);
      snprintf(label, sizeof label, "%s.scratch", progs[p]);
      changed += num_line(out, label, num(px, "scratch"), num(py, "scratch"), 0);
    }
    changed += num_line(out, "available_memory_proportion", num(x, "available_memory_proportion"),
                        num(y, "available_memory_proportion"), 0);
    changed += num_line(out, "working_set_budget", num(x, "working_set_budget"), num(y, "working_set_budget"), 0);
    const jv *fa = get(get(x, "memory"), "fits"), *fb = get(get(y, "memory"), "fits");
    if (fa && fb && fa->t == J_BOOL && fb->t == J_BOOL && fa->num != fb->num)
      changed++, fprintf(out, "  %-28s %s -> %s\n", "fits the memory limit", fa->num ? "yes" : "no", fb->num ? "yes" : "no");
    if (!changed) fprintf(out, "  (no change)\n");
  }
}

static const jv *find_op(const jv *ops, const char *name, int hint) {
  const jv *h = at(ops, hint);
  if (h && !strcmp(str(h, "name"), name)) return h;
  for (int i = 0; i < len(ops); i++)
    if (!strcmp(str(at(ops, i), "name"), name)) return at(ops, i);
  return NULL;
}

/* The kind of kernel `name` in report r (names carry shard and node ids; kinds compare). */
static const char *kernel_kind(const jv *r, const char *name) {
  const jv *k = get(r, "kernels");
  for (int i = 0; i < len(k); i++)
    if (!strcmp(str(at(k, i), "name"), name)) return str(at(k, i), "kind");
  return "";
}

#define MAX_LINES 40
static void limited(FILE *out, int *count, const char *fmt, ...) {
  if ((*count)++ >= MAX_LINES) return;
  va_list ap;
  va_start(ap, fmt);
  vfprintf(out, fmt, ap);
  va_end(ap);
}

static void diff_ops(const jv *a, const jv *b, FILE *out) {
  const jv *oa = get(a, "ops"), *ob = get(b, "ops");
  int added = 0, removed = 0, moved = 0, kern = 0, slower = 0, budget = 0;
  fprintf(out, "ops: %d -> %d\n", len(oa), len(ob));
  for (int i = 0; i < len(ob); i++)
    if (!find_op(oa, str(at(ob, i), "name"), i)) limited(out, &added, "  added %s (%s)\n", str(at(ob, i), "name"), str(at(ob, i), "op"));
  for (int i = 0; i < len(oa); i++)
    if (!find_op(ob, str(at(oa, i), "name"), i)) limited(out, &removed, "  removed %s (%s)\n", str(at(oa, i), "name"), str(at(oa, i), "op"));
  for (int i = 0; i < len(oa); i++) {
    const jv *x = at(oa, i), *y = find_op(ob, str(x, "name"), i);
    if (!y) continue;
    if (num(x, "shard") != num(y, "shard") || strcmp(str(x, "stage"), str(y, "stage")))
      limited(out, &moved, "  %s: shard %.0f%s%s%s -> %.0f%s%s%s\n", str(x, "name"), num(x, "shard"), get(x, "stage") ? " (" : "",
              str(x, "stage"), get(x, "stage") ? ")" : "", num(y, "shard"), get(y, "stage") ? " (" : "", str(y, "stage"),
              get(y, "stage") ? ")" : "");
    const char *ka = kernel_kind(a, str(x, "kernel")), *kb = kernel_kind(b, str(y, "kernel"));
    if (strcmp(ka, kb) || strcmp(str(x, "fusion"), str(y, "fusion")))
      limited(out, &kern, "  %s: kernel %s (%s) -> %s (%s)\n", str(x, "name"), ka[0] ? ka : "-", str(x, "fusion"),
              kb[0] ? kb : "-", str(y, "fusion"));
    double wa = num(x, "working_set_budget"), wb = num(y, "working_set_budget");
    if (!isnan(wa) && !isnan(wb) && wa != wb)
      limited(out, &budget, "  %s: working-set budget %.6g -> %.6g bytes\n", str(x, "name"), wa, wb);
    double ba = num(x, "block_working_set"), bb = num(y, "block_working_set");
    if (!isnan(ba) && !isnan(bb) && ba != bb)
      limited(out, &budget, "  %s: block working set %.6g -> %.6g bytes (%.0f -> %.0f tiles)\n", str(x, "name"), ba, bb,
              num(x, "tile_block"), num(y, "tile_block"));
    double ea = num(x, "est_ms"), eb = num(y, "est_ms");
    if (fabs(eb - ea) > 0.05 * fabs(ea) && fabs(eb - ea) > 1e-4)
      limited(out, &slower, "  %s: est %.4g ms -> %.4g ms\n", str(x, "name"), ea, eb);
  }
  int more = 0;
  int counts[6] = {added, removed, moved, kern, slower, budget};
  for (int i = 0; i < 6; i++) more += counts[i] > MAX_LINES ? counts[i] - MAX_LINES : 0;
  if (more) fprintf(out, "  ... and %d more lines\n", more);
  fprintf(out, "  %d added, %d removed, %d moved to another shard, %d kernel changes, %d estimate changes, %d budget "
               "changes\n", added, removed, moved, kern, slower, budget);
}

int rp_report_diff(const char *a_path, const char *b_path, FILE *out, char *err, size_t err_size) {
  jv *a = load(a_path, err, err_size);
  if (!a) return -1;
  jv *b = load(b_path, err, err_size);
  if (!b) return jv_free(a), -1;
  if (!get(a, "cnnc_report") || !get(b, "cnnc_report")) {
    snprintf(err, err_size, "%s: not a cnnc report (no \"cnnc_report\" key)", get(a, "cnnc_report") ? b_path : a_path);
    jv_free(a), jv_free(b);
    return -1;
  }
  fprintf(out, "report-diff %s -> %s\nmodel: %s -> %s\n", a_path, b_path, str(a, "model"), str(b, "model"));
  diff_totals(a, b, out);
  diff_shards(a, b, out);
  diff_ops(a, b, out);
  jv_free(a);
  jv_free(b);
  return 0;
}
