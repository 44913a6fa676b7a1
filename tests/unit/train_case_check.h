/* train_case_check.h — shared by the training codegen tests (test_codegen_train*.c): one YAML
 * training case compiled and stepped against the interpreter (ir_train_step), 1 vs 2 threads
 * bitwise, and the eval program against the model in inference mode (run_case, run_yml); with
 * the kernel-kind checks of train_kind_check.h and the finite differences of train_fd_check.h.
 * The one include of such a test. */
#ifndef TRAIN_CASE_CHECK_H
#define TRAIN_CASE_CHECK_H

#include <stdarg.h>

#include "ir/grad_train.h"
#include "test_codegen_harness.h"
#include "train_codegen_check.h"

enum { KSTEPS = 2 }; /* momentum steps of run_case */

/* The last layers of the test models: a global average pool, flatten, a dense layer of units
 * (a string literal) outputs. */
#define TCC_HEAD(units) \
  "  - {name: p, op: global_avgpool}\n  - {name: f, op: flatten}\n  - {name: d, op: dense, units: " units "}\n"

static const char *tcc_seed = "5"; /* the seed of the cases' initial weights */
static int tcc_eval = 1;           /* run_case checks the eval program */

/* The model at path for training with momentum at batch size batch. */
static inline ir_graph *load_case(const char *path, int batch, fe_options *o) {
  char b[16];
  snprintf(b, sizeof b, "%d", batch);
  const char *const kv[][2] = {{"mode", "training"}, {"batch-size", b}, {"optimizer", "momentum"}, {"seed", tcc_seed}};
  return cgt_load(path, kv, 4, o);
}

/* yml written to path = <cgt_dir>/<name>.yml (512 bytes; the caller removes it) and loaded as
 * load_case does; NULL on failure. */
static inline ir_graph *load_yml(const char *name, const char *yml, int batch, char *path, fe_options *o) {
  snprintf(path, 512, "%s/%s.yml", cgt_dir, name);
  return cgt_write_file(path, yml) ? NULL : load_case(path, batch, o);
}

/* Compiled (1 and 2 threads) vs ir_train_step for KSTEPS momentum steps of the model at path:
 * every step's loss, then every state tensor (1e-4, and bitwise between the thread counts);
 * with tcc_eval the eval program on the last batch vs the interpreter in inference mode. */
static inline int run_case(const char *name, const char *path, int batch) {
  char so[512], label[160];
  snprintf(so, sizeof so, "%s/%s_b%d.so", cgt_dir, name, batch);
  snprintf(label, sizeof label, "%s batch %d", name, batch);
  fe_options o;
  ir_graph *gc = load_case(path, batch, &o), *gr = load_case(path, batch, &o);
  cnnrt_model *m[2] = {gc && gr ? tct_build(gr, gc, &o, "momentum", so, NULL, label) : NULL, NULL};
  if (!m[0]) {
    fprintf(stderr, "  %s: setup failed\n", label);
    if (gc) ir_graph_free(gc);
    if (gr) ir_graph_free(gr);
    return 1;
  }
  int bad = 0;
  if (cnnrt_open(so, NULL, &m[1]) != CNNRT_OK) m[1] = NULL;
  for (int t = 0; t < 2; t++)
    if (!m[t] || cnnrt_set_threads(m[t], -1, t + 1) != CNNRT_OK) {
      fprintf(stderr, "  %s: open / %d threads: %s\n", name, t + 1, cnnrt_last_error());
      bad++;
    }
  tct_batch b = tct_batch_alloc(gr);
  if (!bad) bad += tct_steps_n(m, 2, gr, &b, KSTEPS, 0.05f, label);
  int n_state = bad ? 0 : cnnrt_num_state(m[0]), seen = 0;
  if (n_state > 0) bad += tct_compare_state(m[0], m[1], gr, KSTEPS, label, &seen);
  CGT_CHECK(seen > 0 && seen == n_state, "%s: %d of %d state tensors checked", label, seen, n_state);
  bad += !(seen > 0 && seen == n_state);
  if (!bad && tcc_eval) /* the eval program (cnnrt_evaluate: running statistics, no dropout) on the last batch */
    bad += tct_check_eval(m[1], &b, tct_eval_loss(load_case(path, batch, &o), gr, b.x, b.labels), label);
  if (m[1]) cnnrt_close(m[1]);
  return tct_free(&b, m[0], so, gc, gr, label, bad);
}

static inline int run_yml(const char *name, const char *yml, int batch) {
  char path[512];
  snprintf(path, sizeof path, "%s/%s.yml", cgt_dir, name);
  int bad = cgt_write_file(path, yml) ? 1 : run_case(name, path, batch);
  unlink(path);
  return bad;
}

/* run_yml at each batch size of the list that ends with 0, in order. */
static inline int run_ymls(const char *name, const char *yml, ...) {
  va_list ap;
  va_start(ap, yml);
  int bad = 0;
  for (int batch; (batch = va_arg(ap, int)) > 0;) bad += run_yml(name, yml, batch);
  va_end(ap);
  return bad;
}

/* yml (as <cgt_dir>/<name>.yml, removed after) built for training at batch to out (emit: NULL
 * a .so, "llvm" the module's LLVM IR): 0, or nonzero with the reason on stderr. */
static inline int tcc_build(const char *name, const char *yml, int batch, const char *emit, const char *out) {
  char path[512];
  fe_options o;
  ir_diag d = {0};
  ir_graph *g = load_yml(name, yml, batch, path, &o);
  int rc = !g || cnnc_build_model(ct_g(g), &o, out, emit, 0, &d);
  if (rc) ir_diag_print(&d, stderr);
  if (g) ir_graph_free(g);
  unlink(path);
  return rc;
}

/* yml's training module at batch as LLVM IR text (malloc'd), NULL on failure. */
static inline char *tcc_module_ir(const char *name, const char *yml, int batch) {
  char nm[128], ll[512];
  snprintf(nm, sizeof nm, "%s_k", name);
  snprintf(ll, sizeof ll, "%s/%s.ll", cgt_dir, nm);
  char *text = tcc_build(nm, yml, batch, "llvm", ll) ? NULL : cgt_read_file(ll, NULL);
  unlink(ll);
  return text;
}

#include "train_fd_check.h"   /* interp_loss, fd_case */
#include "train_kind_check.h" /* has_kinds, lacks_kind */

#endif
