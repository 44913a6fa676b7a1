/* test_ref_init.c — ir_init_params (roles from names and consumers, distributions, seed
 * determinism, independence of other layers) and ir_interp on a small multi-node training
 * graph (buffer wiring, params read in place, running statistics updated). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir.h"

#include "test_codegen_harness.h" /* CHECK (check.h), cgt_node */

static int param(ir_graph *g, const char *layer, const char *what, ir_shape s, int trainable) {
  char name[128];
  snprintf(name, sizeof name, "%s/%s", layer, what);
  return ir_add_param(g, name, s, trainable);
}

/* x[2,3,8,8] -> [extra conv] -> c1 conv3x3(16)+bias -> bn (training) -> relu -> gap ->
 * flatten -> fc dense(10)+bias -> softmax_xent with labels.  The last param "odd" is
 * consumed as a running_var but named unconventionally. */
static ir_graph *build(int with_extra_layer) {
  ir_graph *g = ir_graph_new("small", 2);
  int x = ir_add_input(g, "input", IR_F32, SHAPE(2, 3, 8, 8)), y = ir_add_label(g, "labels");
  ir_attr a = {0};
  a.conv2d = (ir_conv2d_attr){{3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1};
  if (with_extra_layer) {
    int w0 = param(g, "c0", "weight", SHAPE(3, 3, 3, 3), 1);
    x = cgt_node(g, IR_OP_conv2d, "c0", (int[]){x, w0}, 2, &a);
  }
  int w = param(g, "c1", "weight", SHAPE(16, 3, 3, 3), 1), b = param(g, "c1", "bias", SHAPE(16), 1);
  int h = cgt_node(g, IR_OP_conv2d, "c1", (int[]){x, w, b}, 3, &a);
  int bn[5] = {h, param(g, "bn", "gamma", SHAPE(16), 1), param(g, "bn", "beta", SHAPE(16), 1),
               param(g, "bn", "running_mean", SHAPE(16), 0), ir_add_param(g, "odd", SHAPE(16), 0)};
  a.batchnorm = (ir_batchnorm_attr){1e-5f, 0.1f, 1};
  h = cgt_node(g, IR_OP_batchnorm, "bn", bn, 5, &a);
  h = cgt_node(g, IR_OP_relu, "relu", &h, 1, NULL);
  h = cgt_node(g, IR_OP_global_avgpool, "gap", &h, 1, NULL);
  a.reshape.shape = SHAPE(2, -1);
  h = cgt_node(g, IR_OP_reshape, "flatten", &h, 1, &a);
  int fw = param(g, "fc", "weight", SHAPE(10, 16), 1), fb = param(g, "fc", "bias", SHAPE(10), 1);
  a.dense.units = 10;
  h = cgt_node(g, IR_OP_dense, "fc", (int[]){h, fw, fb}, 3, &a);
  memset(&a, 0, sizeof a);
  cgt_node(g, IR_OP_softmax_xent, "loss", (int[]){h, y}, 2, &a);
  return g;
}

static const float *data_of(const ir_graph *g, const char *name) {
  int v = ir_find_value(g, name);
  return v >= 0 ? g->values[v].data : NULL;
}

static void expect_const(const ir_graph *g, const char *name, float want) {
  const ir_value *v = &g->values[ir_find_value(g, name)];
  for (int64_t i = 0; i < ir_shape_numel(&v->shape); i++)
    CHECK(v->data[i] == want, "%s[%lld] = %g, want %g", name, (long long)i, v->data[i], want);
}

static int same_data(const ir_graph *a, const ir_graph *b, const char *name) {
  const ir_value *va = &a->values[ir_find_value(a, name)];
  return memcmp(va->data, data_of(b, name), (size_t)ir_shape_numel(&va->shape) * sizeof(float)) == 0;
}

/* Every element in [-bound, bound]; spread over most of it (the extremes near the bounds for
 * n >= 100, at least half the range apart for a few elements); mean near 0. */
static void expect_uniform(const ir_graph *g, const char *name, double bound) {
  const ir_value *v = &g->values[ir_find_value(g, name)];
  int64_t n = ir_shape_numel(&v->shape);
  double lo = 1e9, hi = -1e9, s = 0;
  for (int64_t i = 0; i < n; i++) lo = fmin(lo, v->data[i]), hi = fmax(hi, v->data[i]), s += v->data[i];
  int spread = n >= 100 ? lo < -0.9 * bound && hi > 0.9 * bound : hi - lo > bound;
  CHECK(lo >= -bound && hi <= bound && spread, "%s range [%g, %g], want within +-%g and spread over it", name, lo, hi, bound);
  CHECK(fabs(s / (double)n) < 4 * bound / sqrt(3.0 * (double)n), "%s mean %g", name, s / (double)n);
}

static void test_init_roles_and_distributions(void) {
  ir_graph *g = build(0);
  ir_init_params(g, 42);
  expect_const(g, "bn/gamma", 1);
  expect_const(g, "bn/beta", 0);
  expect_const(g, "bn/running_mean", 0);
  expect_const(g, "odd", 1); /* role from its use as batchnorm operand 4 */
  /* PyTorch defaults: conv/dense weights and biases uniform(+-1/sqrt(fan_in)); conv fan_in =
   * 3*3*3 = 27 (bound 0.19245), dense fan_in = 16 (bound 0.25) */
  expect_uniform(g, "c1/weight", 1.0 / sqrt(27.0));
  expect_uniform(g, "c1/bias", 1.0 / sqrt(27.0));
  expect_uniform(g, "fc/weight", 0.25);
  expect_uniform(g, "fc/bias", 0.25);
  ir_graph_free(g);
}

static void test_init_determinism(void) {
  ir_graph *a = build(0), *b = build(0), *c = build(0), *extra = build(1);
  ir_init_params(a, 7);
  ir_init_params(b, 7);
  ir_init_params(c, 8);
  ir_init_params(extra, 7);
  CHECK(same_data(a, b, "c1/weight") && same_data(a, b, "fc/weight"), "same seed gave different weights");
  CHECK(!same_data(a, c, "c1/weight") && !same_data(a, c, "fc/weight"), "seeds 7 and 8 gave equal weights");
  CHECK(same_data(a, extra, "c1/weight") && same_data(a, extra, "fc/weight"),
        "adding layer c0 changed the weights of other layers");
  CHECK(memcmp(data_of(a, "c1/weight"), data_of(a, "fc/weight"), 10 * sizeof(float)) != 0,
        "two params share one random stream");
  ir_graph_free(a), ir_graph_free(b), ir_graph_free(c), ir_graph_free(extra);
}

static void test_interp_graph(void) {
  ir_graph *g = build(0);
  ir_init_params(g, 1);
  float x[2 * 3 * 8 * 8], labels[2] = {3, 9};
  for (int i = 0; i < 384; i++) x[i] = (float)((i * 37) % 101) / 50.0f - 1.0f;
  float **v = ir_interp(g, x, labels);
  CHECK(memcmp(v[g->input], x, sizeof x) == 0, "input buffer is not a copy of x");
  CHECK(v[g->label][0] == 3 && v[g->label][1] == 9, "label buffer is not a copy of labels");
  for (int i = 0; i < g->n_values; i++) {
    if (g->values[i].kind == IR_VAL_PARAM) CHECK(v[i] == NULL, "param %s has a buffer", g->values[i].name);
    else CHECK(v[i] != NULL, "value %s has no buffer", g->values[i].name);
  }
  const float *bn = v[ir_find_value(g, "bn")], *relu = v[ir_find_value(g, "relu")];
  for (int i = 0; i < 2 * 16 * 64; i++) CHECK(relu[i] == fmaxf(bn[i], 0), "relu[%d] is not max(bn, 0)", i);
  float loss = v[ir_find_value(g, "loss")][0];
  CHECK(isfinite(loss) && loss > 0, "loss %g", loss);
  /* training batchnorm moved the running statistics away from 0 / 1 */
  const float *rm = data_of(g, "bn/running_mean"), *rv = data_of(g, "odd");
  int moved = 0;
  for (int c = 0; c < 16; c++) moved += rm[c] != 0 && rv[c] != 1;
  CHECK(moved == 16, "running statistics updated for %d of 16 channels", moved);
  ir_interp_free(g, v);
  ir_graph_free(g);
}

int main(void) {
  test_init_roles_and_distributions();
  test_init_determinism();
  test_interp_graph();
  return check_done("test_ref_init", g_failures);
}
