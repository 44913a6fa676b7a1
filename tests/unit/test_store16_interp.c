/* test_store16_interp.c — 16-bit storage of the training stash in the IR and the interpreter
 * (passes/store16.c, ir/ref_round16.c; docs/precision.md "16-bit storage"):
 *  1. ir_narrow16_f32: round16 on grid and off-grid values, keep_sign keeps positive
 *     underflows positive (bf16 2^-133, fp16 2^-24), negatives and NaN as round16.
 *  2. cifar_resnet8 (batch norm, residual adds), 16.32 bf16 and fp16 training: after
 *     pass_store16_train every stash value is a narrow16 result (bf16/f16 dtype) read only by
 *     widen16 nodes, the stash bytes (pass_mem_is_stash) are exactly half the f32-storage
 *     graph's apart from the f32 logits and the weights' 16-bit copies (re-rounded, not
 *     stashed), and 2 interpreter training steps (ir_train_step)
 *     leave every state tensor BITWISE equal to the graph without the pass; also with 2
 *     shards and --recompute pipeline. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "frontend/fe.h"
#include "ir/grad_train.h"
#include "passes/passes.h"

static float fl(uint32_t u) {
  float x;
  memcpy(&x, &u, 4);
  return x;
}

static void test_scalar(void) {
  for (int f = 0; f < 2; f++) {
    float xs[] = {1.0f, 3.14159f, -2.5e-3f, 65504.0f, 1e-30f, -1e-30f, fl(0x3f808000u), fl(0x00000001u)};
    for (size_t i = 0; i < sizeof xs / sizeof xs[0]; i++) {
      float r = ir_round16_f32(xs[i], f), n = ir_narrow16_f32(xs[i], f, 0), k = ir_narrow16_f32(xs[i], f, 1);
      CHECK(memcmp(&r, &n, 4) == 0, "format %d: narrow16(%g) = %g, round16 %g", f, xs[i], n, r);
      if (xs[i] > 0) CHECK(k > 0, "format %d: keep_sign narrow16(%g) = %g, must stay > 0", f, xs[i], k);
      if (r != 0 || xs[i] <= 0) CHECK(memcmp(&r, &k, 4) == 0, "format %d: keep_sign changed %g", f, xs[i]);
    }
    CHECK(ir_narrow16_f32(fl(0x00000001u), f, 1) == (f ? 0x1p-24f : 0x1p-133f), "format %d: smallest positive", f);
    CHECK(ir_narrow16_f32(-1e-45f, f, 1) == 0 && signbit(ir_narrow16_f32(-1e-45f, f, 1)), "format %d: -tiny -> -0", f);
    CHECK(isnan(ir_narrow16_f32(NAN, f, 1)), "format %d: NaN", f);
  }
}

static ir_graph *load(void) {
  char path[1024];
  snprintf(path, sizeof path, "%s/models/cifar_resnet8.yml", CNNC_TEST_SRC);
  fe_options o;
  fe_options_init(&o);
  ir_diag d = {0};
  fe_option_set(&o, fe_option_find("batch-size"), "2", &d);
  fe_option_set(&o, fe_option_find("seed"), "5", &d);
  fe_option_set(&o, fe_option_find("mode"), "training", &d);
  ir_graph *g = fe_load(path, &o, &d);
  if (!g) ir_diag_print(&d, stderr);
  return g;
}

/* precision + autodiff + optimizer + split (+ recompute) (+ store16); NULL on error. */
static ir_graph *prepare(const char *half, int shards, const char *recompute, int store, pass_store16_stats *st) {
  ir_graph *g = load();
  ir_diag d = {0};
  pass_optim_cfg cfg = {0};
  cfg.optimizer = "momentum", cfg.momentum = 0.9f, cfg.loss_scale = 1.0f;
  if (!g || pass_precision(g, "16.32", half, 1, &d) <= 0 || pass_autodiff(g, 1.0f, &d) < 0 ||
      pass_optimizer(g, &cfg, &d) < 0 || pass_split_train(g, NULL, 0, shards, &d) ||
      pass_recompute(g, recompute, &d) < 0 || (store && pass_store16_train(g, pass_precision_format(half), st, &d) < 0)) {
    ir_diag_print(&d, stderr);
    CHECK(0, "preparing the graph (%s, %d shards, recompute %s, store %d)", half, shards, recompute, store);
    return NULL;
  }
  return g;
}

static int64_t stash_bytes(const ir_graph *g) {
  int64_t b = 0;
  for (int v = 0; v < g->n_values; v++)
    if (pass_mem_is_stash(g, v)) b += ir_shape_numel(&g->values[v].shape) * (int64_t)ir_dtype_size(g->values[v].dtype);
  return b;
}

static void run_case(const char *half, int shards, const char *recompute) {
  pass_store16_stats st = {0};
  ir_graph *ref = prepare(half, 1, "none", 0, NULL), *g = prepare(half, shards, recompute, 1, &st);
  if (!ref || !g) return;
  int n_narrow = 0, n_widen = 0;
  ir_dtype want = !strcmp(half, "fp16") ? IR_F16 : IR_BF16;
  for (int i = 0; i < g->n_nodes; i++) {
    const ir_node *n = &g->nodes[i];
    if (n->op == IR_OP_narrow16) {
      n_narrow++;
      CHECK(g->values[n->out].dtype == want, "%s: result dtype %d", n->name, g->values[n->out].dtype);
    }
    if (n->op == IR_OP_widen16) n_widen++;
    for (int j = 0; j < n->n_in; j++)
      if (g->values[n->in[j]].dtype != IR_F32 && g->values[n->in[j]].kind == IR_VAL_ACT)
        CHECK(n->op == IR_OP_widen16, "%s reads the 16-bit value %s", n->name, g->values[n->in[j]].name);
  }
  fprintf(stderr, "%s, %d shard(s), recompute %s: %d narrow16, %d widen16; %d values (%d keep-sign), %lld f32 bytes; "
          "%d left f32 (%lld bytes)\n", half, shards, recompute, n_narrow, n_widen, st.values, st.keep_sign,
          (long long)st.bytes32, st.f32_values, (long long)st.f32_bytes);
  CHECK(n_narrow == st.values && n_narrow > 0 && n_widen >= n_narrow, "narrow16 %d, widen16 %d, values %d", n_narrow,
        n_widen, st.values);
  if (!strcmp(recompute, "none")) {
    CHECK(st.keep_sign > 0, "batchnorm -> relu pre-activations must be stored keep-sign");
    /* every stash value but the f32 logits is 16-bit: exactly half of the f32-storage stash */
    int64_t s16 = stash_bytes(g), s32 = stash_bytes(ref), logits = 2 * 10 * 4;
    /* the weights' 16-bit copies are re-rounded in the backward, not stashed */
    CHECK(2 * s16 - (s32 - st.recomputed_bytes) == logits && st.f32_values == 0 && st.recomputed > 0,
          "stash %lld vs f32 storage %lld (logits %lld, weight copies %lld), %d left f32", (long long)s16,
          (long long)s32, (long long)logits, (long long)st.recomputed_bytes, st.f32_values);
  }
  /* two interpreter steps: bitwise the graph without the pass */
  int64_t nx = ir_shape_numel(&g->values[g->input].shape);
  float *x = malloc((size_t)nx * sizeof *x), labels[2] = {3, 7};
  srand(11);
  for (int step = 0; step < 2; step++) {
    for (int64_t i = 0; i < nx; i++) x[i] = (float)rand() / RAND_MAX * 2 - 1;
    ir_interp_free(ref, ir_train_step(ref, x, labels, 0.1f));
    ir_interp_free(g, ir_train_step(g, x, labels, 0.1f));
  }
  free(x);
  int n_state = 0, n_diff = 0;
  for (int v = 0; v < ref->n_values; v++) {
    const ir_value *a = &ref->values[v];
    if (a->kind != IR_VAL_PARAM) continue;
    int w = ir_find_value(g, a->name);
    if (w < 0) continue;
    n_state++;
    n_diff += memcmp(a->data, g->values[w].data, (size_t)ir_shape_numel(&a->shape) * 4) != 0;
  }
  CHECK(n_state > 20 && n_diff == 0, "%s %d shards %s: %d of %d state tensors differ after 2 steps", half, shards,
        recompute, n_diff, n_state);
  ir_graph_free(ref), ir_graph_free(g);
}

int main(void) {
  test_scalar();
  run_case("bf16", 1, "none");
  run_case("fp16", 1, "none");
  run_case("bf16", 2, "pipeline");
  printf("%d checks, %d failures\n", g_checks, g_failures);
  return g_failures != 0;
}
