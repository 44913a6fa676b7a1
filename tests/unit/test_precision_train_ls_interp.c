/* test_precision_train_ls_interp.c — --auto-loss-scaling (docs/precision.md): the reference
 * interpreter's training step skips non-finite updates as the compiled runtime does
 * (runtime/rt_train.c): a small conv/groupnorm/dense model, 16.32 fp16, momentum, initial
 * scale 2^22 and growth interval 3, 12 steps compiled (cnnrt_train_step) and interpreted
 * (ir_train_step on the same passed graph) on the same batches:
 *  - after every step the loss scale {S, good steps, skipped steps} is the same in both, the
 *    run has skipped steps (overflow) and later good steps with at least one growth;
 *  - a skipped step leaves weights and momentum bitwise as they were (in the interpreter too);
 *  - every step starts both from the interpreter's state (copied into the model), and after it
 *    every state tensor matches within 5e-3 (relative to the larger of the element and the
 *    tensor's mean magnitude: about 10 fp16 ulps);
 *  - with --enable-half-partials too (the kernels' 16-bit partials, mirrored).
 * Why per step: 16.32 rounds activations (and half partials the partial sums) to fp16, and the
 * kernels' f32 sums before a rounding are not in the interpreter's order, so a near-tie can
 * round the other way: one fp16 ulp (2^-11..2^-10 of the element) in a gradient, up to ~2e-3
 * of a momentum tensor's mean where the new gradient cancels the old momentum.  Run free, 12
 * steps amplify those flips chaotically at any vector width (other data seeds, cgt_rng + k:
 * 0.38 relative at V = 8 (AVX2), 0.26 at V = 16; 2.5e-3 without half partials, so the old 1e-3
 * after 12 steps held for this seed only).  From a shared state, seeds k = 0..7: worst step
 * 1.7e-3 without / 1.9e-3 with half partials at V = 16, 1.7e-3 / 1.4e-3 at V = 8; an
 * interpreter lr 1 % off fails (9e-3 on gn1/beta after the first good step). */
#include <math.h>

#include "frontend/fe.h"
#include "ir/grad_train.h"
#include "runtime/cnnrt.h"
#include "test_codegen_harness.h"

static const char *yml =
    "name: ls_interp\n"
    "input: {shape: [2, 10, 10], dtype: f32, classes: 4}\n"
    "layers:\n"
    "  - {name: c1, op: conv, filters: 8, kernel: 3, padding: 1}\n"
    "  - {name: gn1, op: groupnorm, groups: 2}\n"
    "  - {name: r1, op: relu}\n"
    "  - {name: c2, op: conv, filters: 8, kernel: 3, stride: 2, padding: 1}\n"
    "  - {name: r2, op: relu}\n"
    "  - {name: f, op: flatten}\n"
    "  - {name: d1, op: dense, units: 4}\n";

enum { BATCH = 4, STEPS = 12 };

/* Every trainable param and optimizer target of g, concatenated (malloc'd), *n floats. */
static float *weights_of(const ir_graph *g, long *n) {
  float *w = NULL;
  long k = 0;
  for (int v = 0; v < g->n_values; v++) {
    const ir_value *p = &g->values[v];
    if (p->kind != IR_VAL_PARAM || !p->data || strstr(p->name, "running_") || !strcmp(p->name, "optimizer/loss_scale"))
      continue;
    long m = (long)ir_shape_numel(&p->shape);
    w = realloc(w, (size_t)(k + m) * 4);
    memcpy(w + k, p->data, (size_t)m * 4);
    k += m;
  }
  *n = k;
  return w;
}

/* Copies the interpreter's f32 state (params, momentum, loss scale) into m. */
static void sync_state(cnnrt_model *m, const ir_graph *g) {
  for (int i = 0; i < cnnrt_num_state(m); i++) {
    cnnrt_state_info si;
    if (cnnrt_state_info_at(m, i, &si) != CNNRT_OK || si.dtype != CNNRT_F32) continue;
    int v = ir_find_value(g, si.name);
    if (v >= 0 && g->values[v].data && (size_t)ir_shape_numel(&g->values[v].shape) * 4 == si.bytes)
      cnnrt_set_state(m, si.name, g->values[v].data, si.bytes);
  }
}

/* Compares every state tensor of m with the interpreter's after step; returns how many. */
static int compare_state(cnnrt_model *m, const ir_graph *g, int half_partials, int step) {
  int seen = 0;
  for (int i = 0; i < cnnrt_num_state(m); i++) {
    cnnrt_state_info si;
    if (cnnrt_state_info_at(m, i, &si) != CNNRT_OK) continue;
    int v = ir_find_value(g, si.name);
    if (v < 0 || !g->values[v].data) continue;
    int64_t n = ir_shape_numel(&g->values[v].shape);
    float *got = malloc(si.bytes);
    if (cnnrt_get_state(m, si.name, got, si.bytes) == CNNRT_OK) {
      char l[300];
      snprintf(l, sizeof l, "hp %d after step %d: %s", half_partials, step, si.name);
      cgt_failures += cgt_compare(l, got, g->values[v].data, n, 5e-3);
      seen++;
    }
    free(got);
  }
  return seen;
}

static void run_case(const char *path, int half_partials) {
  char so[512];
  snprintf(so, sizeof so, "%s/ls%d.so", cgt_dir, half_partials);
  const char *const kv[][2] = {{"mode", "training"}, {"batch-size", "4"}, {"optimizer", "momentum"}, {"seed", "3"},
                               {"precision", "16.32"}, {"half-type", "fp16"}, {"auto-loss-scaling", "1"},
                               {"loss-scaling", "4194304"}, {"loss-scaling-interval", "3"},
                               {"enable-half-partials", "1"}};
  int nkv = half_partials ? 10 : 9;
  fe_options o;
  fe_options_init(&o);
  ir_diag d = {0};
  for (int i = 0; i < nkv; i++)
    if (fe_option_set(&o, fe_option_find(kv[i][0]), kv[i][1], &d)) {
      ir_diag_print(&d, stderr);
      cgt_failures++;
      return;
    }
  ir_graph *g = fe_load(path, &o, &d);
  if (!g || cnnc_build_model(ct_g(g), &o, so, NULL, 0, &d)) {
    ir_diag_print(&d, stderr);
    cgt_failures++;
    ir_graph_free(g);
    return;
  }
  cnnrt_model *m = NULL;
  if (cnnrt_open(so, NULL, &m) != CNNRT_OK) {
    fprintf(stderr, "cnnrt_open: %s\n", cnnrt_last_error());
    cgt_failures++;
    ir_graph_free(g);
    return;
  }
  const float lr = 0.05f;
  cnnrt_set_learning_rate(m, lr);
  int ls = ir_find_value(g, "optimizer/loss_scale");
  CGT_CHECK(ls >= 0, "no optimizer/loss_scale in the graph");
  int64_t nx = ir_shape_numel(&g->values[g->input].shape);
  float *x = malloc((size_t)nx * 4), labels[BATCH];
  int skips = 0, goods = 0, growths = 0;
  for (int s = 0; s < STEPS && ls >= 0; s++) {
    for (int64_t i = 0; i < nx; i++) x[i] = cgt_uniform(-1.0f, 1.0f);
    for (int b = 0; b < BATCH; b++) labels[b] = (float)cgt_int(0, 3);
    long n0, n1;
    float *w0 = weights_of(g, &n0), loss, acc;
    float before[4];
    memcpy(before, g->values[ls].data, sizeof before);
    sync_state(m, g);
    if (cnnrt_train_step(m, x, (size_t)nx * 4, labels, 1, &loss, &acc) != CNNRT_OK) {
      fprintf(stderr, "cnnrt_train_step: %s\n", cnnrt_last_error());
      cgt_failures++;
      free(w0);
      break;
    }
    ir_interp_free(g, ir_train_step(g, x, labels, lr));
    const float *S = g->values[ls].data;
    double sc;
    int64_t sk;
    cnnrt_loss_scale(m, &sc, &sk);
    int skipped = S[2] > before[2];
    skips += skipped, goods += !skipped, growths += S[0] > before[0];
    fprintf(stderr, "hp %d step %2d: loss %.6g, scale compiled %g interpreter %g, skipped compiled %lld interpreter %g\n",
            half_partials, s + 1, loss, sc, (double)S[0], (long long)sk, (double)S[2]);
    CGT_CHECK(sc == S[0] && sk == (int64_t)S[2], "step %d: loss scale %g / %g, skipped %lld / %g", s + 1, sc, (double)S[0],
              (long long)sk, (double)S[2]);
    float *w1 = weights_of(g, &n1);
    if (skipped) CGT_CHECK(n0 == n1 && !memcmp(w0, w1, (size_t)n0 * 4), "step %d: the interpreter's skipped update changed the state", s + 1);
    else CGT_CHECK(memcmp(w0, w1, (size_t)n0 * 4) != 0, "step %d: a good step left the state unchanged", s + 1);
    free(w0), free(w1);
    int seen = compare_state(m, g, half_partials, s + 1);
    CGT_CHECK(seen > 5, "only %d state tensors compared", seen);
  }
  fprintf(stderr, "hp %d: %d steps: %d skipped, %d good, %d growths\n", half_partials, STEPS, skips, goods, growths);
  CGT_CHECK(skips >= 3 && goods >= 3 && growths >= 1, "want skipped steps, good steps and a growth: %d / %d / %d", skips,
            goods, growths);
  free(x);
  cnnrt_close(m);
  unlink(so);
  ir_graph_free(g);
}

int main(void) {
  cgt_init_dir();
  char path[512];
  if (cgt_write_tmp(path, "ls_interp.yml", yml)) return 1;
  run_case(path, 0);
  run_case(path, 1);
  unlink(path);
  return cgt_done("test_precision_train_ls_interp");
}
