/* cnnc.c — the compiler driver: `cnnc MODEL.yml|MODEL.onnx [options] -o OUT.so`.  Parses the command
 * line (driver flags plus every option of frontend/options.def as --name VALUE or
 * --name=VALUE), loads the model (fe_load), and prints a summary, dumps the IR, or hands the
 * graph to code generation (cnnc_build_model, tools/compile.c).  Exit status: 0 ok, 1 model/compile error,
 * 2 usage error. */
#include <llvm-c/Core.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cnnc_config.h"
#include "codegen/cg.h"
#include "common/cm.h"
#include "tools/compile.h"
#include "frontend/fe.h"
#include "passes/passes.h"
#include "tools/report/report.h"

enum { EXIT_MODEL = 1, EXIT_USAGE = 2 };

typedef struct driver {
  const char *model, *output, *emit, *report;
  int summary, verbose, help, help_tune, version;
  double load_seconds;
  fe_options o;
} driver;

static const char *const emit_kinds[] = {"ir", "llvm", "asm", "obj", "plan", "yaml"};
#define N_EMIT (int)(sizeof emit_kinds / sizeof *emit_kinds)

/* The driver's own flags: a value flag stores into the string at str_off, a switch sets the
 * int at int_off.  Also the source of their --help lines and of flag suggestions. */
typedef struct dflag {
  const char *short_name, *long_name, *meta, *help;
  size_t str_off, int_off;
} dflag;
#define STR_FLAG(f) offsetof(driver, f), 0
#define INT_FLAG(f) 0, offsetof(driver, f)
static const dflag driver_flags[] = {
    {"-o", "--output", "FILE", "write the .so (or the --emit dump) to FILE (as FILE.tmp.PID,\n"
                               "renamed when complete; never over the model or weights)", STR_FLAG(output)},
    {NULL, "--emit", "KIND", "ir, ir-after=PASS, plan, llvm, asm, obj or yaml: dump that\n"
                             "stage instead of linking (plan: one line per kernel, its route\n"
                             "and tile; ir-after: the IR after precision, autodiff, optimizer,\n"
                             "split, recompute or store16; yaml: the model as a YAML file, -o,\n"
                             "its weights beside it in .safetensors)\n"
                             "(ir and text dumps go to stdout without -o)", STR_FLAG(emit)},
    {NULL, "--report", "FILE", "compile report: FILE.json and FILE.html (FILE may end in\n"
                               ".json or .html; both are written); docs/reports.md", STR_FLAG(report)},
    {NULL, "--summary", NULL, "per-layer table (output shape per sample, params, MACs)\n"
                              "and totals, for one image", INT_FLAG(summary)},
    {"-v", "--verbose", NULL, "progress and timings on stderr", INT_FLAG(verbose)},
    {"-h", "--help", NULL, "this help", INT_FLAG(help)},
    {NULL, "--help-tune", NULL, "the tuning knobs of --tune, their defaults and ranges", INT_FLAG(help_tune)},
    {NULL, "--version", NULL, "version of cnnc and LLVM", INT_FLAG(version)},
};
#define N_DFLAGS (int)(sizeof driver_flags / sizeof driver_flags[0])

/* ---- usage errors ------------------------------------------------------------------------ */
static int usage_error(const char *fmt, const char *a, const char *b) {
  fprintf(stderr, "cnnc: error: ");
  fprintf(stderr, fmt, a, b);
  fprintf(stderr, "\nTry 'cnnc --help'.\n");
  return -1;
}

/* Edit distance for flag suggestions (small strings only). */
static int dist(const char *a, const char *b) {
  int n = (int)strlen(a), m = (int)strlen(b), row[80];
  if (n > 78 || m > 78) return 99;
  for (int j = 0; j <= m; j++) row[j] = j;
  for (int i = 1; i <= n; i++) {
    int diag = row[0];
    row[0] = i;
    for (int j = 1; j <= m; j++) {
      int up = row[j], best = diag + (a[i - 1] != b[j - 1]);
      if (up + 1 < best) best = up + 1;
      if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
      row[j] = best, diag = up;
    }
  }
  return row[m];
}

static int unknown_flag(const char *flag) {
  char name[96];
  snprintf(name, sizeof name, "%.*s", (int)strcspn(flag, "="), flag);
  const char *best = NULL;
  int best_d = 4;
  for (int k = 0; k < FE_OPT_COUNT + N_DFLAGS; k++) {
    char cand[96];
    if (k < FE_OPT_COUNT) snprintf(cand, sizeof cand, "--%s", fe_opt_table[k].long_name);
    else snprintf(cand, sizeof cand, "%s", driver_flags[k - FE_OPT_COUNT].long_name);
    int d = dist(name, cand);
    if (d < best_d) best_d = d, best = k < FE_OPT_COUNT ? fe_opt_table[k].long_name : driver_flags[k - FE_OPT_COUNT].long_name;
  }
  if (!best) return usage_error("unknown option '%s'%s", name, "");
  char hint[128];
  snprintf(hint, sizeof hint, " (did you mean '%s%s'?)", best[0] == '-' ? "" : "--", best);
  return usage_error("unknown option '%s'%s", name, hint);
}

/* ---- option parsing ---------------------------------------------------------------------- */
static int set_opt(driver *D, int k, const char *text) {
  ir_diag d = {0};
  if (fe_option_set(&D->o, k, text, &d) == 0) return 0;
  return usage_error("%s%s", d.msg, "");
}

static int is_model_path(const char *s) {
  size_t n = strlen(s);
  return (n > 4 && !strcmp(s + n - 4, ".yml")) || (n > 5 && !strcmp(s + n - 5, ".yaml")) || fe_is_onnx_path(s);
}

/* A list option: --name=a,b,c (split in place: argv strings are writable and live as long
 * as the options) or --name a b c (following arguments up to the next flag; a .yml path is
 * left as the model while none is given). */
static int parse_list(driver *D, int k, char *eq, int argc, char **argv, int *i) {
  ir_diag d = {0};
  if (!D->o.set[k] && fe_option_set(&D->o, k, NULL, &d)) return usage_error("%s%s", d.msg, ""); /* implemented? */
  if (eq) {
    char *save = NULL;
    for (char *t = strtok_r(eq, ",", &save); t; t = strtok_r(NULL, ",", &save))
      if (set_opt(D, k, t)) return -1;
    return 0;
  }
  int n = 0;
  while (*i + 1 < argc && argv[*i + 1][0] != '-' && !(is_model_path(argv[*i + 1]) && !D->model)) {
    if (set_opt(D, k, argv[++*i])) return -1;
    n++;
  }
  return n ? 0 : usage_error("--%s needs at least one value%s", fe_opt_table[k].long_name, "");
}

static int parse_option(driver *D, char *arg, int argc, char **argv, int *i) {
  char name[96];
  char *eq = strchr(arg, '=');
  snprintf(name, sizeof name, "%.*s", (int)(eq ? eq - arg - 2 : (long)strlen(arg) - 2), arg + 2);
  if (eq) eq++;
  int k = fe_option_find(name);
  if (k < 0 || strchr(name, '_')) return unknown_flag(arg);
  switch (fe_opt_table[k].type) {
  case OPT_FLAG: return set_opt(D, k, eq);
  case OPT_LIST: return parse_list(D, k, eq, argc, argv, i);
  default:
    if (eq) return set_opt(D, k, eq);
    if (*i + 1 >= argc) return usage_error("%s needs a value%s", arg, "");
    return set_opt(D, k, argv[++*i]);
  }
}

/* The value of driver flag f in arg ("-o F", "-oF", "--emit K", "--emit=K"), or NULL if arg is
 * not f.  *i advances past a separate value. */
static const char *flag_value(const dflag *f, const char *arg, int argc, char **argv, int *i, int *err) {
  size_t ln = strlen(f->long_name);
  if (!strcmp(arg, f->long_name) || (f->short_name && !strcmp(arg, f->short_name))) {
    if (*i + 1 < argc) return argv[++*i];
    *err = usage_error("%s needs a value%s", arg, "");
    return NULL;
  }
  if (!strncmp(arg, f->long_name, ln) && arg[ln] == '=') return arg + ln + 1;
  if (f->short_name && !strncmp(arg, f->short_name, 2)) return arg + 2;
  return NULL;
}

/* Driver flags; returns 1 if arg was one, 0 if not, -1 on error. */
static int parse_driver_flag(driver *D, const char *arg, int argc, char **argv, int *i) {
  for (int k = 0; k < N_DFLAGS; k++) {
    const dflag *f = &driver_flags[k];
    if (!f->meta) {
      if (strcmp(arg, f->long_name) && (!f->short_name || strcmp(arg, f->short_name))) continue;
      *(int *)((char *)D + f->int_off) = 1;
      return 1;
    }
    int err = 0;
    const char *v = flag_value(f, arg, argc, argv, i, &err);
    if (err) return -1;
    if (!v) continue;
    *(const char **)((char *)D + f->str_off) = v;
    return 1;
  }
  return 0;
}

static int parse_args(driver *D, int argc, char **argv) {
  int only_positional = 0;
  for (int i = 1; i < argc; i++) {
    char *a = argv[i];
    if (!only_positional && !strcmp(a, "--")) {
      only_positional = 1;
      continue;
    }
    if (!only_positional && a[0] == '-' && a[1]) {
      int r = parse_driver_flag(D, a, argc, argv, &i);
      if (r < 0) return -1;
      if (r > 0) continue;
      if (a[1] != '-') return unknown_flag(a);
      if (parse_option(D, a, argc, argv, &i)) return -1;
      continue;
    }
    if (D->model) return usage_error("unexpected argument '%s' (the model is '%s')", a, D->model);
    D->model = a;
  }
  return 0;
}

static int check_emit(const driver *D) {
  if (!D->emit) return 0;
  for (int k = 0; k < N_EMIT; k++)
    if (!strcmp(D->emit, emit_kinds[k])) return 0;
  if (!strncmp(D->emit, "ir-after=", 9)) return 0; /* the pass name is checked by the pipeline */
  return usage_error("--emit takes ir, ir-after=PASS, plan, llvm, asm, obj or yaml (got '%s')%s", D->emit, "");
}

/* ---- help -------------------------------------------------------------------------------- */
static void print_help(void) {
  printf("usage: cnnc MODEL.yml|MODEL.onnx [options] -o OUT.so\n"
         "       cnnc MODEL.yml --summary\n"
         "       cnnc MODEL.yml --emit ir|ir-after=PASS|plan|llvm|asm|obj [-o FILE]\n"
         "       cnnc MODEL.yml -o OUT.so --report FILE\n"
         "       cnnc report-diff A.json B.json\n\n"
         "Compiles a CNN described in YAML (docs/model-format.md) ahead of time into a shared\n"
         "object that libcnnrt runs.\n\n"
         "Driver:\n");
  for (int k = 0; k < N_DFLAGS; k++) {
    const dflag *f = &driver_flags[k];
    char head[64];
    snprintf(head, sizeof head, "%s%s%s%s%s", f->short_name ? f->short_name : "", f->short_name ? ", " : "",
             f->long_name, f->meta ? " " : "", f->meta ? f->meta : "");
    printf("  %-26s", head);
    for (const char *p = f->help; *p; p++) /* continuation lines line up with the first */
      *p == '\n' ? printf("\n%28s", "") : putchar(*p);
    printf("\n");
  }
  printf("\n"
         "Compile options (--name VALUE or --name=VALUE; a model's compile: section sets them\n"
         "as name_with_underscores, and the command line wins):\n");
  for (int k = 0; k < FE_OPT_COUNT; k++) {
    const fe_opt_info *t = &fe_opt_table[k];
    char head[96];
    const char *meta = t->type == OPT_INT ? " N" : t->type == OPT_FLOAT ? " X" : t->type == OPT_STR ? " S"
                       : t->type == OPT_LIST ? " NAME..." : "";
    if (k == FE_OPTK_memory_limit) meta = " BYTES"; /* sizes with K/M/G/T (docs/cli.md) */
    if (k == FE_OPTK_available_memory_proportion) meta = " P[,P...]";
    char vals[256];
    if (t->type == OPT_ENUM) snprintf(head, sizeof head, "--%s %s", t->long_name, fe_opt_values(k, vals, sizeof vals));
    else snprintf(head, sizeof head, "--%s%s", t->long_name, meta);
    printf("  %-26s%s%s", head, strlen(head) > 25 ? "\n                            " : "", t->help);
    if (t->def[0] && t->type != OPT_FLAG) printf(" (default %s)", t->def);
    printf("%s\n", t->implemented ? "" : " [not implemented yet]");
  }
  printf("\nList options take the following arguments up to the next flag, or a comma-separated\n"
         "--name=a,b,c.  Numbers are decimal and range-checked (docs/cli.md).  Exit status: 0\n"
         "success, 1 error in the model, a file or while compiling, 2 usage error.\n");
}

static void print_version(void) {
  unsigned maj, min, patch;
  LLVMGetVersion(&maj, &min, &patch);
  printf("cnnc %s (LLVM %u.%u.%u)\n", CNNC_VERSION, maj, min, patch);
}

/* ---- summary ----------------------------------------------------------------------------- */
static char *commas(int64_t v, char *buf, size_t n) {
  char tmp[32];
  int len = snprintf(tmp, sizeof tmp, "%lld", (long long)(v < 0 ? -v : v)), k = 0;
  if (v < 0 && (size_t)k + 1 < n) buf[k++] = '-';
  for (int i = 0; i < len && (size_t)k + 2 < n; i++) {
    if (i && (len - i) % 3 == 0) buf[k++] = ',';
    buf[k++] = tmp[i];
  }
  buf[k] = 0;
  return buf;
}

static const char *sample_shape(const ir_value *v, char *buf, size_t n) {
  ir_shape s = v->shape;
  if (s.rank > 1) {
    memmove(s.dim, s.dim + 1, (size_t)(s.rank - 1) * sizeof s.dim[0]);
    s.rank--;
  }
  return ir_shape_str(&s, buf, n);
}

static int64_t node_params(const ir_graph *g, const ir_node *n) {
  int64_t p = 0;
  for (int k = 0; k < n->n_in; k++) {
    const ir_value *v = &g->values[n->in[k]];
    if (v->kind == IR_VAL_PARAM && v->trainable) p += ir_shape_numel(&v->shape);
  }
  return p;
}

/* "4.089" for 4.089e9: at least four significant digits. */
static void print_giga(FILE *f, double macs) {
  double x = macs / 1e9;
  int digits = 3;
  for (double t = 1; x > 0 && x < t && digits < 12; t /= 10) digits++;
  fprintf(f, "%.*f G", digits, x);
}

static void print_summary(const ir_graph *g, FILE *f) {
  int w = 5;
  for (int i = 0; i < g->n_nodes; i++) {
    int l = (int)strlen(g->nodes[i].name);
    if (l > w) w = l < 48 ? l : 48;
  }
  char b1[96], b2[32], b3[32];
  const ir_value *in = &g->values[g->input];
  fprintf(f, "Model: %s (input %s %s, per image)\n\n", g->name, sample_shape(in, b1, sizeof b1),
          ir_dtype_name(in->dtype));
  fprintf(f, "%-*s  %-14s  %-16s  %12s  %16s\n", w, "Layer", "Op", "Output shape", "Params", "MACs");
  double macs = 0;
  for (int i = 0; i < g->n_nodes; i++) {
    const ir_node *n = &g->nodes[i];
    ir_cost c;
    ir_node_cost(g, n, &c);
    macs += c.macs;
    fprintf(f, "%-*s  %-14s  %-16s  %12s  %16s\n", w, n->name, ir_ops[n->op].name,
            sample_shape(&g->values[n->out], b1, sizeof b1), commas(node_params(g, n), b2, sizeof b2),
            commas((int64_t)(c.macs + 0.5), b3, sizeof b3));
  }
  int64_t all = ir_param_count(g, 0), trainable = ir_param_count(g, 1);
  fprintf(f, "\nTotal params: %s\n", commas(trainable, b2, sizeof b2));
  fprintf(f, "Trainable params: %s\n", commas(trainable, b2, sizeof b2));
  fprintf(f, "Non-trainable values: %s (batch-norm running statistics)\n", commas(all - trainable, b2, sizeof b2));
  fprintf(f, "MACs/image: ");
  print_giga(f, macs / g->batch);
  fprintf(f, " (%s)\n", commas((int64_t)(macs / g->batch + 0.5), b2, sizeof b2));
}

/* ---- actions ----------------------------------------------------------------------------- */
static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static ir_graph *load(driver *D, fe_options *o) {
  ir_diag d = {0};
  double t0 = now_ms();
  ir_graph *g = fe_load(D->model, o, &d);
  if (!g) {
    ir_diag_print(&d, stderr);
    return NULL;
  }
  if (o->mixed_labels && g->label >= 0 && ir_label_width(&g->values[g->label].shape) != 3) {
    fprintf(stderr, "cnnc: error: --mixed-labels: %s: the model's label input is not the mixed [N, 3] rows\n", D->model);
    ir_graph_free(g);
    return NULL;
  }
  D->load_seconds = (now_ms() - t0) / 1e3;
  if (o->weights_note[0]) fprintf(stderr, "cnnc: note: %s\n", o->weights_note);
  if (D->verbose)
    fprintf(stderr, "cnnc: %s: %d layers, %d values, batch %d, loaded in %.1f ms\n", D->model, g->n_nodes,
            g->n_values, g->batch, now_ms() - t0);
  return g;
}

/* The summary is per image: the model is loaded again with batch 1 if needed. */
static int summary(driver *D, const ir_graph *g) {
  if (g->batch == 1) {
    print_summary(g, stdout);
    return 0;
  }
  fe_options o1 = D->o;
  o1.batch_size = 1;
  o1.set[FE_OPTK_batch_size] = 1;
  ir_graph *g1 = load(D, &o1);
  if (!g1) return -1;
  print_summary(g1, stdout);
  ir_graph_free(g1);
  return 0;
}

static int copy_to_stdout(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return -1;
  char buf[65536];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, f)) > 0) fwrite(buf, 1, n, stdout);
  fclose(f);
  return 0;
}

/* ---- reports (docs/reports.md) ------------------------------------------------------------ */
/* "out" -> out.json + out.html; "r.json" or "r.html" -> r.json + r.html. */
static void report_paths(const char *arg, char *json, char *html, size_t n) {
  size_t len = strlen(arg);
  int ext = (len > 5 && !strcmp(arg + len - 5, ".json")) || (len > 5 && !strcmp(arg + len - 5, ".html")) ? 5 : 0;
  snprintf(json, n, "%.*s.json", (int)(len - (size_t)ext), arg);
  snprintf(html, n, "%.*s.html", (int)(len - (size_t)ext), arg);
}

static int write_one(const char *path, const rp_report *r, int (*fn)(const rp_report *, FILE *)) {
  cm_out out;
  char why[512] = "";
  int rc = cm_out_open(&out, path, 0666, why, sizeof why);
  if (!rc && fn(r, out.f)) rc = -1, cm_out_abort(&out);
  if (!rc) rc = cm_out_commit(&out, why, sizeof why);
  if (rc) fprintf(stderr, "cnnc: error: cannot write the report '%s'%s%s\n", path, why[0] ? ": " : "", why);
  return rc;
}

static int write_report(driver *D, rp_report *r, double compile_seconds) {
  char json[4096], html[4096];
  report_paths(D->report, json, html, sizeof json);
  rp_report_phase(r, "total", compile_seconds + D->load_seconds);
  if (write_one(json, r, rp_report_write_json) || write_one(html, r, rp_report_write_html)) return -1;
  if (D->verbose) fprintf(stderr, "cnnc: wrote %s and %s\n", json, html);
  return 0;
}

/* cnnc report-diff A.json B.json */
static int report_diff(int argc, char **argv) {
  if (argc != 4) return usage_error("usage: cnnc report-diff A.json B.json%s%s", "", ""), EXIT_USAGE;
  char err[512];
  if (rp_report_diff(argv[2], argv[3], stdout, err, sizeof err)) {
    fprintf(stderr, "cnnc: error: %s\n", err);
    return EXIT_MODEL;
  }
  return 0;
}

/* Every output is checked before the compile starts: not a directory, not an input of this
 * compile (the model, the weights), its directory writable (common/cm.h). */
static int check_outputs(const driver *D) {
  const char *in[2] = {D->model, D->o.weights[0] ? D->o.weights : NULL};
  char json[4096], html[4096], why[512];
  if (D->report) report_paths(D->report, json, html, sizeof json);
  const char *out[3] = {D->output, D->report ? json : NULL, D->report ? html : NULL};
  for (int k = 0; k < 3; k++)
    if (out[k] && cm_check_output(out[k], in, 2, why, sizeof why))
      return fprintf(stderr, "cnnc: error: output '%s' %s\n", out[k], why), -1;
  return 0;
}

/* Messages about the temporary file name the output it becomes. */
static void name_output(ir_diag *d, const char *part, const char *output) {
  char *at = strstr(d->msg, part), buf[sizeof d->msg];
  if (!at) return;
  snprintf(buf, sizeof buf, "%.*s%s%s", (int)(at - d->msg), d->msg, output, at + strlen(part));
  snprintf(d->msg, sizeof d->msg, "%s", buf);
}

/* llvm/asm/obj dumps and .so output via codegen; text dumps without -o go to stdout.  -o is
 * written as OUT.tmp.PID and renamed over OUT once complete (common/cm.h). */
static int build(driver *D, ir_graph *g) {
  ir_diag d = {0};
  char tmp[] = "/tmp/cnnc-emit-XXXXXX", part[4200], why[512], target[4096];
  const char *final = cm_out_target(D->output, target, sizeof target); /* a symbolic link's file */
  int atomic = D->output && !cm_out_direct(D->output); /* not over /dev/null or a FIFO */
  const char *out = atomic ? cm_tmp_name(final, part, sizeof part) : D->output;
  if (!out) {
    if (!strcmp(D->emit, "obj")) return usage_error("--emit obj needs -o FILE%s%s", "", ""), EXIT_USAGE;
    int fd = mkstemp(tmp);
    if (fd < 0) return fprintf(stderr, "cnnc: error: cannot create a temporary file\n"), EXIT_MODEL;
    close(fd);
    out = tmp;
  }
  double t0 = now_ms();
  rp_report *rep = D->report ? rp_report_new(g, D->o.memory_limit) : NULL;
  cg_report_sink sink;
  if (rep) rp_report_sink(rep, &sink), rp_report_phase(rep, "load", D->load_seconds);
  if (rep) rp_report_set_proportion(rep, D->o.available_memory_proportion);
  if (rep)
    rp_report_set_training(rep, (int)D->o.gradient_accumulation, (int)D->o.replicas, fe_optval_text(D->o.pipeline_schedule),
                           fe_optval_text(D->o.recompute));
  if (rep) rp_report_set_half_partials(rep, D->o.enable_half_partials ? fe_optval_text(D->o.half_type) : NULL);
  int rc = cnnc_build_model_report(g, &D->o, out, D->emit, D->verbose, rep ? &sink : NULL, &d);
  if (!rc && atomic && cm_commit_file(part, final, why, sizeof why))
    rc = -1, ir_diag_set(&d, (ir_loc){0}, NULL, "cannot write %s: %s", D->output, why);
  else if (rc && atomic)
    unlink(part), name_output(&d, part, D->output);
  if (rep && !rc) rc = write_report(D, rep, (now_ms() - t0) / 1e3);
  rp_report_free(rep);
  if (rc) ir_diag_print(&d, stderr);
  else if (out == tmp) copy_to_stdout(tmp);
  if (out == tmp) unlink(tmp);
  if (!rc && D->verbose && !D->output) fprintf(stderr, "cnnc: wrote stdout in %.1f ms\n", now_ms() - t0);
  return rc ? EXIT_MODEL : 0;
}

/* --target-cpu, --target-features and --mtriple given on the command line are checked with
 * LLVM before the model is read: a name LLVM does not know is a usage error (exit 2). */
static int check_target(const driver *D) {
  if (!D->o.set[FE_OPTK_target_cpu] && !D->o.set[FE_OPTK_target_features] && !D->o.set[FE_OPTK_mtriple]) return 0;
  cg_target t;
  ir_diag d = {0};
  if (cg_target_init(&t, D->o.mtriple, D->o.target_cpu, D->o.target_features, &d)) return usage_error("%s%s", d.msg, "");
  cg_target_dispose(&t);
  return 0;
}

static int run(driver *D) {
  if ((D->output || D->report) && check_outputs(D)) return EXIT_MODEL; /* again after the load: weights: */
  ir_graph *g = load(D, &D->o);
  if (!g) return EXIT_MODEL;
  int rc = (D->output || D->report) && check_outputs(D) ? EXIT_MODEL : 0;
  if (!rc && D->summary && summary(D, g)) rc = EXIT_MODEL;
  /* --emit ir: the graph after the first pass (precision: round16 nodes for 16.x) */
  if (!rc && D->emit && !strcmp(D->emit, "ir")) D->emit = "ir-after=precision";
  if (!rc && D->emit && !strcmp(D->emit, "yaml")) { /* the model as YAML + safetensors (docs/onnx.md) */
    ir_diag d = {0};
    if (!D->output) rc = (usage_error("--emit yaml needs -o MODEL.yml (the weights go beside it)%s%s", "", ""), EXIT_USAGE);
    else {
      const char *in[2] = {D->model, D->o.weights[0] ? D->o.weights : NULL};
      if (fe_emit_yaml(g, D->output, in, 2, &d)) ir_diag_print(&d, stderr), rc = EXIT_MODEL;
    }
    ir_graph_free(g);
    return rc;
  }
  if (!rc && (D->emit || D->output)) rc = build(D, g);
  ir_graph_free(g);
  return rc;
}

/* Everything after CNNC_TUNE is read; tune_copy (the items' storage, may be NULL) is the
 * caller's to free after the compile. */
static int drive(driver *D, int argc, char **argv, char *tune_copy, const char *env_tune) {
  int no_arg = 0;
  if (tune_copy && parse_list(D, FE_OPTK_tune, tune_copy, 0, argv, &no_arg)) {
    fprintf(stderr, "cnnc: (from CNNC_TUNE='%s' in the environment)\n", env_tune);
    return EXIT_USAGE;
  }
  if (parse_args(D, argc, argv) || check_emit(D)) return EXIT_USAGE;
  if (D->help) return print_help(), 0;
  if (D->help_tune) return ir_tune_help(stdout), 0;
  if (D->version) return print_version(), 0;
  if (!D->model) return usage_error("no model file given%s%s", "", ""), EXIT_USAGE;
  if (!D->summary && !D->emit && !D->output)
    return usage_error("nothing to do: give -o OUT.so, --emit KIND or --summary%s%s", "", ""), EXIT_USAGE;
  if (D->report && ((!D->output && !D->emit) || (D->emit && !strcmp(D->emit, "ir"))))
    return usage_error("--report needs a compile: -o OUT.so (or --emit llvm|asm|obj)%s%s", "", ""), EXIT_USAGE;
  if (check_target(D)) return EXIT_USAGE;
  return run(D);
}

int main(int argc, char **argv) {
  driver D = {0};
  if (argc >= 2 && !strcmp(argv[1], "report-diff")) return report_diff(argc, argv);
  fe_options_init(&D.o);
  D.o.tmpdir = getenv("TMPDIR");
  /* CNNC_TUNE=name=value,...: tuning knobs for scripts, as if given first with --tune */
  const char *env_tune = getenv("CNNC_TUNE");
  char *tune_copy = env_tune && *env_tune ? strdup(env_tune) : NULL;
  int rc = drive(&D, argc, argv, tune_copy, env_tune);
  free(tune_copy);
  return rc;
}
