/* test_autodiff_optim.c — passes/optimizer.c semantics on a tiny training graph
 * (dense -> batchnorm(training) -> softmax_xent), two steps of ir_train_step, against the
 * formulas recomputed here from the gradients of each step: decoupled weight decay vs coupled
 * L2 with momentum, norm-parameter exemption, loss scaling (gradients scaled, weights not),
 * lr = 0 leaves weights alone, Adam's step counter, grad/ and state names. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "ir/grad_train.h"
#include "passes/passes.h"


enum { N = 4, IN = 3, OUT = 5, KW = OUT * IN };
static const float X[N * IN] = {0.3f, -1.2f, 0.8f, 1.1f, 0.4f, -0.7f, -0.5f, 0.9f, 0.2f, 0.6f, -0.3f, -1.0f};
static const float LABELS[N] = {1, 4, 0, 2};

static ir_graph *build(const pass_optim_cfg *cfg, float loss_scale) {
  ir_graph *g = ir_graph_new("opt", N);
  ir_diag d = {0};
  int x = ir_add_input(g, "x", IR_F32, (ir_shape){2, {N, IN}});
  int w = ir_add_param(g, "fc/weight", (ir_shape){2, {OUT, IN}}, 1);
  for (int i = 0; i < KW; i++) g->values[w].data[i] = (float)sin(1.7 * i + 0.3);
  int y = ir_add_node(g, IR_OP_dense, "fc", (ir_loc){0}, (int[]){x, w}, 2, &(ir_attr){.dense = {OUT}}, &d);
  int bn[5] = {y, ir_add_param(g, "bn/gamma", (ir_shape){1, {OUT}}, 1), ir_add_param(g, "bn/beta", (ir_shape){1, {OUT}}, 1),
               ir_add_param(g, "bn/running_mean", (ir_shape){1, {OUT}}, 0), ir_add_param(g, "bn/running_var", (ir_shape){1, {OUT}}, 0)};
  for (int c = 0; c < OUT; c++) g->values[bn[1]].data[c] = 1.0f + 0.1f * c, g->values[bn[4]].data[c] = 1.0f;
  int z = ir_add_node(g, IR_OP_batchnorm, "bn", (ir_loc){0}, bn, 5, &(ir_attr){.batchnorm = {1e-5f, 0.1f, 1}}, &d);
  int lab = ir_add_label(g, "label");
  int loss = ir_add_node(g, IR_OP_softmax_xent, "loss", (ir_loc){0}, (int[]){z, lab}, 2, &(ir_attr){.softmax_xent = {0}}, &d);
  g->outputs[g->n_outputs++] = loss;
  if (loss < 0 || pass_autodiff(g, loss_scale, &d) != 3 || pass_optimizer(g, cfg, &d) != 3 || ir_verify(g, &d)) {
    fprintf(stderr, "build: %s\n", d.msg);
    abort();
  }
  return g;
}

static float *param(ir_graph *g, const char *name) {
  int v = ir_find_value(g, name);
  return v >= 0 ? g->values[v].data : NULL;
}

/* Runs two steps; returns w0, the gradients g1, g2 and w2 of `name` (k elements). */
static void two_steps(ir_graph *g, const char *name, float lr, float *w0, float *g1, float *g2, float *w2, int k) {
  char gname[64];
  snprintf(gname, sizeof gname, "grad/%s", name);
  memcpy(w0, param(g, name), (size_t)k * sizeof *w0);
  float *grads[2] = {g1, g2};
  for (int s = 0; s < 2; s++) {
    float **vals = ir_train_step(g, X, LABELS, lr);
    memcpy(grads[s], vals[ir_find_value(g, gname)], (size_t)k * sizeof(float));
    ir_interp_free(g, vals);
  }
  memcpy(w2, param(g, name), (size_t)k * sizeof *w2);
}

static double max_diff(const float *a, const double *b, int k) {
  double m = 0;
  for (int i = 0; i < k; i++) m = fmax(m, fabs(a[i] - b[i]));
  return m;
}

/* momentum with decoupled weight decay or coupled L2; gamma exempt when exempt_norm. */
static void test_decay_vs_l2(int decoupled, int exempt) {
  const float lr = 0.1f, mu = 0.9f, lam = 0.05f;
  pass_optim_cfg c = {"momentum", mu, 0, 0, 0, 0, decoupled ? lam : 0, decoupled ? 0 : lam, 1, exempt};
  ir_graph *g = build(&c, 1.0f);
  const char *names[2] = {"fc/weight", "bn/gamma"};
  int sizes[2] = {KW, OUT};
  float w0[KW], g1[KW], g2[KW], w2[KW];
  for (int p = 0; p < 2; p++) {
    ir_graph *h = p ? build(&c, 1.0f) : g;
    int k = sizes[p];
    two_steps(h, names[p], lr, w0, g1, g2, w2, k);
    double l = (p == 1 && exempt) ? 0.0 : lam, want[KW];
    for (int i = 0; i < k; i++) {
      double v = 0, w = w0[i];
      const float *gs[2] = {g1, g2};
      for (int s = 0; s < 2; s++) {
        v = mu * v + gs[s][i] + (decoupled ? 0.0 : l * w);
        w = w - lr * (v + (decoupled ? l * w : 0.0));
      }
      want[i] = w;
    }
    double e = max_diff(w2, want, k);
    CHECK(e < 1e-5, "momentum %s%s: %s after 2 steps off by %g", decoupled ? "weight decay" : "L2",
          exempt ? " (norm exempt)" : "", names[p], e);
    if (p) ir_graph_free(h);
  }
  ir_graph_free(g);
}

/* The same model with loss scaling 1024: gradients x1024, weights as without. */
static void test_loss_scaling(void) {
  pass_optim_cfg c = {"sgd", 0, 0, 0, 0, 0, 0, 0, 1024, 0};
  pass_optim_cfg c1 = c;
  c1.loss_scale = 1;
  ir_graph *a = build(&c, 1024.0f), *b = build(&c1, 1.0f);
  float w0[KW], ga[KW], ga2[KW], wa[KW], gb[KW], gb2[KW], wb[KW];
  two_steps(a, "fc/weight", 0.1f, w0, ga, ga2, wa, KW);
  two_steps(b, "fc/weight", 0.1f, w0, gb, gb2, wb, KW);
  double eg = 0, ew = 0;
  for (int i = 0; i < KW; i++) eg = fmax(eg, fabs(ga[i] / 1024.0 - gb[i])), ew = fmax(ew, fabs(wa[i] - wb[i]));
  CHECK(eg < 1e-6 && ew < 1e-6, "loss scaling: gradient/1024 off by %g, weights off by %g", eg, ew);
  ir_graph_free(a), ir_graph_free(b);
}

/* lr = 0: no weight moves (the lr input is read); Adam counts its steps. */
static void test_lr_and_adam(void) {
  pass_optim_cfg c = {"adam", 0, 0, 0, 0, 0, 0, 0, 1, 0};
  ir_graph *g = build(&c, 1.0f);
  float w0[KW], g1[KW], g2[KW], w2[KW];
  two_steps(g, "fc/weight", 0.0f, w0, g1, g2, w2, KW);
  CHECK(!memcmp(w0, w2, sizeof w0), "lr = 0 changed fc/weight");
  CHECK(param(g, "optimizer/step") && param(g, "optimizer/step")[0] == 2.0f, "Adam step counter is not 2 after 2 steps");
  CHECK(param(g, "fc/weight/m") && param(g, "fc/weight/v") && ir_find_value(g, "lr") >= 0, "Adam state or lr input missing");
  CHECK(g->values[ir_find_value(g, "lr")].kind == IR_VAL_INPUT, "lr is not an INPUT");
  two_steps(g, "fc/weight", 1e-2f, w0, g1, g2, w2, KW);
  int moved = 0;
  for (int i = 0; i < KW; i++) moved += w0[i] != w2[i];
  CHECK(moved == KW, "Adam with lr 1e-2 moved only %d of %d weights", moved, KW);
  ir_graph_free(g);
  ir_diag d = {0};
  pass_optim_cfg bad = {"adagrad", 0, 0, 0, 0, 0, 0, 0, 1, 0};
  ir_graph *h = ir_graph_new("x", 1);
  CHECK(pass_optimizer(h, &bad, &d) < 0 && strstr(d.msg, "unknown optimizer 'adagrad'"), "bad optimizer: '%s'", d.msg);
  ir_graph_free(h);
}

int main(void) {
  test_decay_vs_l2(1, 0);
  test_decay_vs_l2(0, 0);
  test_decay_vs_l2(0, 1);
  test_decay_vs_l2(1, 1);
  test_loss_scaling();
  test_lr_and_adam();
  return check_done("test_autodiff_optim", g_failures);
}
