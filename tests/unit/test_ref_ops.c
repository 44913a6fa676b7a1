/* test_ref_ops.c — the reference kernels on tiny cases whose results were worked out by hand
 * (or with a pocket calculator), one-node graphs run through ir_interp; plus
 * test_op_table_hooks, which fails when a row of ops.def lacks an infer, cost or ref hook. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir.h"

#include "check.h"

/* One operand of a test node: shape and (f32) contents. */
typedef struct operand {
  ir_shape shape;
  const float *data;
} operand;

#define SHAPE(...) ((ir_shape){sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t), {__VA_ARGS__}})

/* Builds a one-node graph: ops[0] is the graph input, operand 1 of softmax_xent the label,
 * every other operand a parameter holding a copy of its data.  Runs ir_interp and returns a
 * malloc'd copy of the result.  If keep is non-NULL the graph is returned there (the caller
 * frees it), else freed. */
static float *run_node(ir_op op, const ir_attr *attr, const operand *ops, int n_ops, ir_graph **keep) {
  ir_graph *g = ir_graph_new("t", (int)ops[0].shape.dim[0]);
  int in[IR_MAX_IN];
  const float *labels = NULL;
  in[0] = ir_add_input(g, "x", IR_F32, ops[0].shape);
  for (int i = 1; i < n_ops; i++) {
    char name[32];
    if (op == IR_OP_softmax_xent && i == 1) {
      in[i] = ir_add_label(g, "labels");
      labels = ops[i].data;
      continue;
    }
    snprintf(name, sizeof name, "p%d", i);
    in[i] = ir_add_param(g, name, ops[i].shape, 1);
    memcpy(g->values[in[i]].data, ops[i].data, (size_t)ir_shape_numel(&ops[i].shape) * sizeof(float));
  }
  ir_diag d = {0};
  int out = ir_add_node(g, op, "node", (ir_loc){0}, in, n_ops, attr, &d);
  if (out < 0) {
    ir_diag_print(&d, stderr);
    abort();
  }
  float **vals = ir_interp(g, ops[0].data, labels);
  int64_t k = ir_shape_numel(&g->values[out].shape);
  float *res = malloc((size_t)k * sizeof *res);
  memcpy(res, vals[out], (size_t)k * sizeof *res);
  ir_interp_free(g, vals);
  if (keep) *keep = g;
  else ir_graph_free(g);
  return res;
}

/* Compares got[0..k) with want within tol (absolute, plus tol relative to |want|). */
static void expect_near(const char *what, const float *got, const float *want, int k, double tol) {
  for (int i = 0; i < k; i++) {
    double err = fabs((double)got[i] - (double)want[i]);
    CHECK(err <= tol * (1.0 + fabs(want[i])), "%s[%d]: got %.7g, want %.7g", what, i, got[i], want[i]);
  }
}

/* Runs op and compares its whole result (free'd here). */
static void expect_op(const char *what, ir_op op, const ir_attr *attr, const operand *ops, int n_ops,
                      const float *want, int k, double tol) {
  float *got = run_node(op, attr, ops, n_ops, NULL);
  expect_near(what, got, want, k, tol);
  free(got);
}

static const float x9[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9}; /* [1,1,3,3] */

static ir_attr conv_attr(int k, int s, int pt, int pl, int pb, int pr, int dil, int groups) {
  ir_attr a = {0};
  a.conv2d = (ir_conv2d_attr){{k, k}, {s, s}, {pt, pl, pb, pr}, {dil, dil}, groups};
  return a;
}

static void test_conv2d(void) {
  const float diag[4] = {1, 0, 0, 1}, ones[4] = {1, 1, 1, 1}, bias[1] = {0.5f};
  ir_attr a = conv_attr(2, 1, 0, 0, 0, 0, 1, 1);
  operand o[3] = {{SHAPE(1, 1, 3, 3), x9}, {SHAPE(1, 1, 2, 2), diag}, {SHAPE(1), bias}};
  /* y[i,j] = x[i,j] + x[i+1,j+1] + 0.5 */
  expect_op("conv2d plain+bias", IR_OP_conv2d, &a, o, 3, (const float[]){6.5f, 8.5f, 12.5f, 14.5f}, 4, 1e-6);
  /* stride 2, pad top/left 1 only: windows start at (-1,-1), (-1,1), (1,-1), (1,1) */
  a = conv_attr(2, 2, 1, 1, 0, 0, 1, 1);
  expect_op("conv2d stride2 asym pad", IR_OP_conv2d, &a, o, 2, (const float[]){1, 3, 7, 14}, 4, 1e-6);
  /* dilation 2: the four corners */
  a = conv_attr(2, 1, 0, 0, 0, 0, 2, 1);
  o[1].data = ones;
  expect_op("conv2d dilated", IR_OP_conv2d, &a, o, 2, (const float[]){20}, 1, 1e-6);
  /* depthwise: each channel scaled by its own 1x1 weight */
  const float xd[8] = {1, 2, 3, 4, 10, 20, 30, 40}, wd[2] = {2, -1};
  operand od[2] = {{SHAPE(1, 2, 2, 2), xd}, {SHAPE(2, 1, 1, 1), wd}};
  a = conv_attr(1, 1, 0, 0, 0, 0, 1, 2);
  expect_op("conv2d depthwise", IR_OP_conv2d, &a, od, 2, (const float[]){2, 4, 6, 8, -10, -20, -30, -40}, 8, 1e-6);
  /* groups 2 of 2 channels: y0 = x0 + x1, y1 = x2 - x3 */
  const float xg[4] = {1, 2, 3, 4}, wg[4] = {1, 1, 1, -1};
  operand og[2] = {{SHAPE(1, 4, 1, 1), xg}, {SHAPE(2, 2, 1, 1), wg}};
  expect_op("conv2d grouped", IR_OP_conv2d, &a, og, 2, (const float[]){3, -1}, 2, 1e-6);
}

static void test_batchnorm_inference(void) {
  const float x[4] = {1, 3, 2, 4}, gamma[2] = {2, 1}, beta[2] = {0, 1}, mean[2] = {2, 0}, var[2] = {4, 1};
  ir_attr a = {0};
  a.batchnorm = (ir_batchnorm_attr){1e-5f, 0.1f, 0};
  operand o[5] = {{SHAPE(1, 2, 1, 2), x}, {SHAPE(2), gamma}, {SHAPE(2), beta}, {SHAPE(2), mean}, {SHAPE(2), var}};
  /* ch0: (x-2)/sqrt(4+eps)*2; ch1: x/sqrt(1+eps)+1 */
  expect_op("batchnorm inference", IR_OP_batchnorm, &a, o, 5,
            (const float[]){-0.99999875f, 0.99999875f, 2.99999f, 4.99998f}, 4, 1e-6);
}

static void test_batchnorm_training(void) {
  const float x[4] = {1, 2, 3, 4}, one[1] = {1}, zero[1] = {0};
  ir_attr a = {0};
  a.batchnorm = (ir_batchnorm_attr){1e-5f, 0.1f, 1};
  operand o[5] = {{SHAPE(2, 1, 1, 2), x}, {SHAPE(1), one}, {SHAPE(1), zero}, {SHAPE(1), zero}, {SHAPE(1), one}};
  ir_graph *g;
  float *y = run_node(IR_OP_batchnorm, &a, o, 5, &g);
  /* batch mean 2.5, biased var 1.25 */
  expect_near("batchnorm training", y, (const float[]){-1.3416354f, -0.4472118f, 0.4472118f, 1.3416354f}, 4, 1e-6);
  /* running_mean 0.9*0 + 0.1*2.5; running_var 0.9*1 + 0.1*(5/3) (unbiased) */
  expect_near("running_mean", g->values[ir_find_value(g, "p3")].data, (const float[]){0.25f}, 1, 1e-6);
  expect_near("running_var", g->values[ir_find_value(g, "p4")].data, (const float[]){1.0666667f}, 1, 1e-6);
  free(y);
  ir_graph_free(g);
}

static void test_groupnorm(void) {
  const float x[4] = {1, 2, 3, 4}, gamma[4] = {1, 1, 2, 2}, beta[4] = {0, 0, 0, 1};
  ir_attr a = {0};
  a.groupnorm = (ir_groupnorm_attr){2, 1e-5f};
  operand o[3] = {{SHAPE(1, 4, 1, 1), x}, {SHAPE(4), gamma}, {SHAPE(4), beta}};
  /* groups {1,2} and {3,4}: mean ±0.5 around, var 0.25 -> ±1/sqrt(1+4e-5) */
  const float u = 0.99998f;
  expect_op("groupnorm", IR_OP_groupnorm, &a, o, 3, (const float[]){-u, u, -2 * u, 2 * u + 1}, 4, 1e-6);
}

static void test_activations(void) {
  const float x[3] = {-1, 0, 2}, l3[2] = {0, 1.0986123f}; /* ln 3 */
  ir_attr a = {0};
  operand o[1] = {{SHAPE(3), x}};
  expect_op("relu", IR_OP_relu, &a, o, 1, (const float[]){0, 0, 2}, 3, 0);
  o[0] = (operand){SHAPE(2), l3};
  expect_op("sigmoid", IR_OP_sigmoid, &a, o, 1, (const float[]){0.5f, 0.75f}, 2, 1e-6);
  expect_op("swish", IR_OP_swish, &a, o, 1, (const float[]){0, 0.8239592f}, 2, 1e-6);
  const float y[5] = {-4, -1, 0.5f, 2, 7};
  o[0] = (operand){SHAPE(5), y};
  a.clip = (ir_clip_attr){0, 6};
  expect_op("clip 0..6 (relu6)", IR_OP_clip, &a, o, 1, (const float[]){0, 0, 0.5f, 2, 6}, 5, 0);
  a.hardsigmoid = (ir_hsig_attr){0.2f, 0.5f};
  expect_op("hardsigmoid", IR_OP_hardsigmoid, &a, o, 1, (const float[]){0, 0.3f, 0.6f, 0.9f, 1}, 5, 1e-6);
  a.leaky_relu = (ir_leaky_attr){0.5f};
  expect_op("leaky_relu", IR_OP_leaky_relu, &a, o, 1, (const float[]){-2, -0.5f, 0.5f, 2, 7}, 5, 0);
  a = (ir_attr){0};
  /* x * relu6(x + 3) / 6: -4 -> 0, -1 -> -1/3, 0.5 -> 0.2917, 2 -> 5/3, 7 -> 7 */
  expect_op("hardswish", IR_OP_hardswish, &a, o, 1, (const float[]){0, -1.0f / 3, 0.29166667f, 5.0f / 3, 7}, 5, 1e-6);
}

static void test_shape_ops(void) {
  const float x[8] = {0, 1, 2, 3, 4, 5, 6, 7}, y[4] = {10, 11, 12, 13};
  operand o[2] = {{SHAPE(1, 2, 2, 2), x}, {SHAPE(1, 1, 2, 2), y}};
  ir_attr a = {.concat = {1}};
  expect_op("concat channels", IR_OP_concat, &a, o, 2, (const float[]){0, 1, 2, 3, 4, 5, 6, 7, 10, 11, 12, 13}, 12, 0);
  o[1] = (operand){SHAPE(1, 2, 2, 1), y};
  a.concat.axis = 3;
  expect_op("concat width", IR_OP_concat, &a, o, 2, (const float[]){0, 1, 10, 2, 3, 11, 4, 5, 12, 6, 7, 13}, 12, 0);
  a = (ir_attr){.slice = {2, 1, 1}};
  expect_op("slice rows", IR_OP_slice, &a, o, 1, (const float[]){2, 3, 6, 7}, 4, 0);
  /* transpose by hand: [2, 3] -> [3, 2]; [2, 2, 2] perm (2, 0, 1): out[i][j][k] = x[j][k][i] */
  o[0] = (operand){{2, {2, 3}}, x};
  a = (ir_attr){.transpose = {{1, 0}}};
  expect_op("transpose 2-D", IR_OP_transpose, &a, o, 1, (const float[]){0, 3, 1, 4, 2, 5}, 6, 0);
  o[0] = (operand){{3, {2, 2, 2}}, x};
  a = (ir_attr){.transpose = {{2, 0, 1}}};
  expect_op("transpose 3-D", IR_OP_transpose, &a, o, 1, (const float[]){0, 2, 4, 6, 1, 3, 5, 7}, 8, 0);
  /* log_softmax: rows (0, log 3) -> log(1/4), log(3/4) */
  const float lx[2] = {0, 1.0986123f};
  o[0] = (operand){{2, {1, 2}}, lx};
  a = (ir_attr){0};
  expect_op("log_softmax", IR_OP_log_softmax, &a, o, 1, (const float[]){-1.3862944f, -0.2876821f}, 2, 1e-6);
  /* hardmax: rows (3, 1, 3) -> first max; (-1, -5) -> 0; a NaN after the max never wins */
  const float hx[7] = {3, 1, 3, -1, -5, 2, NAN};
  o[0] = (operand){{2, {2, 3}}, hx};
  a = (ir_attr){0};
  expect_op("hardmax", IR_OP_hardmax, &a, o, 1, (const float[]){1, 0, 0, 0, 0, 1}, 6, 0);
  o[0] = (operand){{2, {1, 2}}, hx + 5};
  expect_op("hardmax NaN", IR_OP_hardmax, &a, o, 1, (const float[]){1, 0}, 2, 0);
  /* along dim 0 (ONNX import, docs/onnx.md "Dim 0"): [2, 2, 2] and [1, 2, 2] stacked */
  o[0] = (operand){{3, {2, 2, 2}}, x};
  o[1] = (operand){{3, {1, 2, 2}}, y};
  a = (ir_attr){.concat = {0}};
  expect_op("concat dim 0", IR_OP_concat, &a, o, 2, (const float[]){0, 1, 2, 3, 4, 5, 6, 7, 10, 11, 12, 13}, 12, 0);
  a = (ir_attr){.slice = {0, 1, 1}};
  expect_op("slice dim 0", IR_OP_slice, &a, o, 1, (const float[]){4, 5, 6, 7}, 4, 0);
  /* steps: [8] from 6 back by 2 -> 6, 4, 2; from 1 by 3 -> 1, 4, 7; slice_grad puts them back */
  o[0] = (operand){{1, {8}}, x};
  a = (ir_attr){.slice = {0, 6, 3, -2}};
  expect_op("slice step -2", IR_OP_slice, &a, o, 1, (const float[]){6, 4, 2}, 3, 0);
  a = (ir_attr){.slice = {0, 1, 3, 3}};
  expect_op("slice step 3", IR_OP_slice, &a, o, 1, (const float[]){1, 4, 7}, 3, 0);
  o[0] = (operand){{2, {1, 3}}, x + 1}; /* 1, 2, 3 */
  a = (ir_attr){.slice_grad = {{1, 6, 3, -2}, {2, {1, 8}}}};
  expect_op("slice_grad step -2", IR_OP_slice_grad, &a, o, 1, (const float[]){0, 0, 3, 0, 2, 0, 1, 0}, 8, 0);
  o[0] = (operand){SHAPE(1, 4, 1, 2), x};
  a = (ir_attr){.channel_shuffle = {2}}; /* channels 0 1 2 3 -> 0 2 1 3 */
  expect_op("channel_shuffle 2", IR_OP_channel_shuffle, &a, o, 1, (const float[]){0, 1, 4, 5, 2, 3, 6, 7}, 8, 0);
  o[0] = (operand){SHAPE(1, 1, 2, 2), y};
  a = (ir_attr){.slice_grad = {{1, 1, 1}, SHAPE(1, 3, 2, 2)}};
  expect_op("slice_grad", IR_OP_slice_grad, &a, o, 1, (const float[]){0, 0, 0, 0, 10, 11, 12, 13, 0, 0, 0, 0}, 12, 0);
  /* lrn by hand: x = 1, 2, 3 over channels; size 3, alpha 3 (alpha/size = 1), beta 1, bias 1:
   * s = 1 + (1+4), 1 + (1+4+9), 1 + (4+9); size 2 (ONNX: the channel and the next), alpha 3:
   * s = 1 + 1.5 (1+4), 1 + 1.5 (4+9), 1 + 1.5 * 9 */
  const float x3[3] = {1, 2, 3};
  o[0] = (operand){SHAPE(1, 3, 1, 1), x3};
  a = (ir_attr){.lrn = {3, 3.0f, 1.0f, 1.0f}};
  expect_op("lrn size 3", IR_OP_lrn, &a, o, 1, (const float[]){1.0f / 6, 2.0f / 15, 3.0f / 14}, 3, 1e-7);
  a = (ir_attr){.lrn = {2, 3.0f, 1.0f, 1.0f}};
  expect_op("lrn size 2", IR_OP_lrn, &a, o, 1, (const float[]){1 / 8.5f, 2 / 20.5f, 3 / 14.5f}, 3, 1e-7);
  a = (ir_attr){.lrn = {3, 3.0f, 0.5f, 3.0f}}; /* beta 0.5: x / sqrt(s), s = 8, 17, 16 */
  expect_op("lrn beta 0.5", IR_OP_lrn, &a, o, 1, (const float[]){0.35355339f, 0.48507125f, 0.75f}, 3, 1e-7);
}

static void test_broadcast(void) {
  const float x[8] = {0, 1, 2, 3, 4, 5, 6, 7}, bc[2] = {10, 20}, bw[2] = {1, -1}, same[8] = {1, 1, 1, 1, 1, 1, 1, 1};
  ir_attr a = {0};
  operand o[2] = {{SHAPE(1, 2, 2, 2), x}, {SHAPE(2, 1, 1), bc}}; /* lower rank, per channel */
  expect_op("add [1,2,2,2]+[2,1,1]", IR_OP_add, &a, o, 2, (const float[]){10, 11, 12, 13, 24, 25, 26, 27}, 8, 0);
  o[1] = (operand){SHAPE(1, 2, 1, 1), bc}; /* SE gate */
  expect_op("mul [1,2,2,2]*[1,2,1,1]", IR_OP_mul, &a, o, 2, (const float[]){0, 10, 20, 30, 80, 100, 120, 140}, 8,
            0);
  o[1] = (operand){SHAPE(2), bw}; /* along W */
  expect_op("mul [1,2,2,2]*[2]", IR_OP_mul, &a, o, 2, (const float[]){0, -1, 2, -3, 4, -5, 6, -7}, 8, 0);
  o[1] = (operand){SHAPE(1, 2, 2, 2), same};
  expect_op("add same shape", IR_OP_add, &a, o, 2, (const float[]){1, 2, 3, 4, 5, 6, 7, 8}, 8, 0);
}

static ir_attr pool_attr(int k, int s, int pad, int count_include_pad, int ceil_mode) {
  ir_attr a = {0};
  a.maxpool = (ir_pool_attr){{k, k}, {s, s}, {pad, pad, pad, pad}, count_include_pad, ceil_mode};
  return a;
}

static void test_pools(void) {
  float neg[9];
  for (int i = 0; i < 9; i++) neg[i] = -x9[i];
  operand o[1] = {{SHAPE(1, 1, 3, 3), x9}};
  ir_attr a = pool_attr(2, 2, 0, 1, 0);
  expect_op("maxpool floor", IR_OP_maxpool, &a, o, 1, (const float[]){5}, 1, 0);
  a = pool_attr(2, 2, 0, 1, 1);
  expect_op("maxpool ceil_mode", IR_OP_maxpool, &a, o, 1, (const float[]){5, 6, 8, 9}, 4, 0);
  /* ceil_mode windows clipped at the border: divisors 4, 2, 2, 1 */
  expect_op("avgpool ceil_mode", IR_OP_avgpool, &a, o, 1, (const float[]){3, 4.5f, 7.5f, 9}, 4, 1e-6);
  a = pool_attr(2, 2, 1, 1, 0);
  expect_op("avgpool pad count_include_pad", IR_OP_avgpool, &a, o, 1, (const float[]){0.25f, 1.25f, 2.75f, 7}, 4,
            1e-6);
  a = pool_attr(2, 2, 1, 0, 0);
  expect_op("avgpool pad exclude_pad", IR_OP_avgpool, &a, o, 1, (const float[]){1, 2.5f, 5.5f, 7}, 4, 1e-6);
  o[0].data = neg; /* padding must not win a max of negative numbers */
  expect_op("maxpool pad is -inf", IR_OP_maxpool, &a, o, 1, (const float[]){-1, -2, -4, -5}, 4, 0);
  const float x[4] = {1, 2, 3, 5};
  o[0] = (operand){SHAPE(1, 2, 1, 2), x};
  expect_op("global_avgpool", IR_OP_global_avgpool, &a, o, 1, (const float[]){1.5f, 4}, 2, 1e-6);
}

static void test_dense(void) {
  const float x[6] = {1, 2, 3, 0, 1, 0}, w[6] = {1, 0, -1, 2, 2, 2}, b[2] = {0.5f, -1};
  ir_attr a = {0};
  a.dense.units = 2;
  operand o[3] = {{SHAPE(2, 3), x}, {SHAPE(2, 3), w}, {SHAPE(2), b}};
  expect_op("dense+bias", IR_OP_dense, &a, o, 3, (const float[]){-1.5f, 11, 0.5f, 1}, 4, 1e-6);
  expect_op("dense", IR_OP_dense, &a, o, 2, (const float[]){-2, 12, 0, 2}, 4, 1e-6);
}

static void test_softmax(void) {
  const float x[4] = {0, 1.0986123f, 1000, 1001.0986123f};
  ir_attr a = {0};
  operand o[1] = {{SHAPE(2, 2), x}};
  /* the second row overflows exp() unless the max is subtracted */
  expect_op("softmax", IR_OP_softmax, &a, o, 1, (const float[]){0.25f, 0.75f, 0.25f, 0.75f}, 4, 1e-4);
}

static void test_softmax_xent(void) {
  const float logits[4] = {0, 1.0986123f, 0, 0}, labels[2] = {1, 0};
  ir_attr a = {0};
  operand o[2] = {{SHAPE(2, 2), logits}, {SHAPE(2), labels}};
  /* mean(-ln .75, -ln .5) */
  expect_op("softmax_xent", IR_OP_softmax_xent, &a, o, 2, (const float[]){0.4904146f}, 1, 1e-6);
  /* smoothing 0.2: 0.8*(-ln .75) + 0.2*mean(-ln .25, -ln .75), and -ln .5 for the other */
  a.softmax_xent.label_smoothing = 0.2f;
  expect_op("softmax_xent smoothing", IR_OP_softmax_xent, &a, o, 2, (const float[]){0.5453452f}, 1, 1e-6);
}

static void test_dropout(void) {
  enum { K = 4000 };
  float *x = malloc(K * sizeof *x);
  for (int i = 0; i < K; i++) x[i] = 1.0f + (float)i;
  ir_attr a = {0};
  a.dropout = (ir_dropout_attr){0.25f, 0, 7};
  operand o[1] = {{SHAPE(1, K), x}};
  expect_op("dropout inference is identity", IR_OP_dropout, &a, o, 1, x, K, 0);
  a.dropout.training = 1;
  float *y1 = run_node(IR_OP_dropout, &a, o, 1, NULL), *y2 = run_node(IR_OP_dropout, &a, o, 1, NULL);
  a.dropout.seed = 8;
  float *y3 = run_node(IR_OP_dropout, &a, o, 1, NULL);
  int kept = 0, bad = 0, same = 0, differ = 0;
  for (int i = 0; i < K; i++) {
    kept += y1[i] != 0;
    bad += y1[i] != 0 && fabsf(y1[i] - x[i] / 0.75f) > 1e-6f * x[i];
    same += y1[i] == y2[i];
    differ += (y1[i] != 0) != (y3[i] != 0);
  }
  /* binomial(4000, 0.75): mean 3000, sd 27 */
  CHECK(kept > 2850 && kept < 3150, "dropout kept %d of %d at rate 0.25", kept, K);
  CHECK(bad == 0, "dropout: %d kept elements not scaled by 1/(1-rate)", bad);
  CHECK(same == K, "dropout not deterministic for a fixed seed");
  CHECK(differ > 1000, "dropout masks of seeds 7 and 8 differ in only %d places", differ);
  free(y1), free(y2), free(y3), free(x);
}

static void test_reshape_normalize(void) {
  const float x[4] = {0, 255, 51, 102};
  ir_attr a = {0};
  a.reshape.shape = SHAPE(1, -1);
  operand o[1] = {{SHAPE(1, 2, 1, 2), x}};
  expect_op("reshape", IR_OP_reshape, &a, o, 1, x, 4, 0);
  memset(&a, 0, sizeof a);
  a.normalize = (ir_normalize_attr){1.0f / 255.0f, 2, {0.5f, 0.2f}, {0.5f, 0.2f}};
  expect_op("normalize", IR_OP_normalize, &a, o, 1, (const float[]){-1, 1, 0, 1}, 4, 1e-6);
}

/* The ops of the ONNX import's second round: exp, sqrt, neg, div, reduce (sum, mean, max over
 * any dims), reduce_max_grad, expand, maxpool_index, dilated maxpool, max_unpool, cast. */
static void test_onnx_ops(void) {
  ir_attr a = {0};
  operand o[3] = {{SHAPE(1, 4), (const float[]){0, 1, -1, 0.6931472f}}};
  expect_op("exp", IR_OP_exp, &a, o, 1, (const float[]){1, 2.7182818f, 0.36787944f, 2}, 4, 1e-6);
  o[0].data = (const float[]){4, 2.25f, 0, 1e-4f};
  expect_op("sqrt", IR_OP_sqrt, &a, o, 1, (const float[]){2, 1.5f, 0, 0.01f}, 4, 1e-7);
  o[0].data = (const float[]){4, -2.25f, 0, 1e-4f};
  expect_op("neg", IR_OP_neg, &a, o, 1, (const float[]){-4, 2.25f, 0, -1e-4f}, 4, 0);
  const float r6[6] = {1, 5, 3, -2, 7, 0};
  o[0] = (operand){SHAPE(2, 3), r6};
  o[1] = (operand){SHAPE(2, 1), (const float[]){2, -4}};
  expect_op("div broadcast", IR_OP_div, &a, o, 2, (const float[]){0.5f, 2.5f, 1.5f, 0.5f, -1.75f, -0.0f}, 6, 1e-7);
  a.reduce = (ir_reduce_attr){SHAPE(2, 1), IR_REDUCE_SUM};
  expect_op("reduce sum dim 1", IR_OP_reduce, &a, o, 1, (const float[]){9, 5}, 2, 0);
  a.reduce.mode = IR_REDUCE_MEAN;
  expect_op("reduce mean dim 1", IR_OP_reduce, &a, o, 1, (const float[]){3, 5.0f / 3.0f}, 2, 1e-7);
  a.reduce = (ir_reduce_attr){SHAPE(1, 3), IR_REDUCE_MAX};
  expect_op("reduce max dim 0", IR_OP_reduce, &a, o, 1, (const float[]){1, 7, 3}, 3, 0);
  a.reduce = (ir_reduce_attr){SHAPE(1, 1), IR_REDUCE_MAX};
  expect_op("reduce max all", IR_OP_reduce, &a, o, 1, (const float[]){7}, 1, 0);
  /* [2,2,2]: dims 0 and 2 reduced, dim 1 kept (batch norm's statistics) */
  const float r8[8] = {1, 2, 10, 20, 3, 4, 30, 40};
  o[0] = (operand){SHAPE(2, 2, 2), r8};
  a.reduce = (ir_reduce_attr){SHAPE(1, 2, 1), IR_REDUCE_SUM};
  expect_op("reduce sum dims 0 and 2", IR_OP_reduce, &a, o, 1, (const float[]){10, 100}, 2, 0);
  /* reduce_max_grad: ties go to the first of each column */
  o[0] = (operand){SHAPE(1, 3), (const float[]){10, 20, 30}};
  o[1] = (operand){SHAPE(2, 3), (const float[]){1, 7, 3, 1, 7, 0}};
  o[2] = (operand){SHAPE(1, 3), (const float[]){1, 7, 3}};
  a.reduce_max_grad = (ir_reduce_attr){SHAPE(1, 3), IR_REDUCE_MAX};
  expect_op("reduce_max_grad ties", IR_OP_reduce_max_grad, &a, o, 3, (const float[]){10, 20, 30, 0, 0, 0}, 6, 0);
  memset(&a, 0, sizeof a);
  o[0] = (operand){SHAPE(2, 1), (const float[]){1, -2}};
  a.expand = (ir_expand_attr){SHAPE(2, 3), 0};
  expect_op("expand", IR_OP_expand, &a, o, 1, (const float[]){1, 1, 1, -2, -2, -2}, 6, 0);
  a.expand.scale = 0.25f;
  expect_op("expand scaled", IR_OP_expand, &a, o, 1, (const float[]){0.25f, 0.25f, 0.25f, -0.5f, -0.5f, -0.5f}, 6, 0);
  /* maxpool_index: flat indices in the whole tensor (sample 1 adds 9) */
  const float m18[18] = {1, 9, 2, 8, 3, 4, 5, 6, 7, 1, 9, 2, 8, 3, 4, 5, 6, 7};
  o[0] = (operand){SHAPE(2, 1, 3, 3), m18};
  a = pool_attr(2, 1, 0, 0, 0);
  expect_op("maxpool_index", IR_OP_maxpool_index, &a, o, 1, (const float[]){1, 1, 3, 8, 10, 10, 12, 17}, 8, 0);
  /* dilation 2 over a 4x4 ramp (ONNX's test_maxpool_2d_dilations) */
  float ramp[16];
  for (int i = 0; i < 16; i++) ramp[i] = (float)(i + 1);
  o[0] = (operand){SHAPE(1, 1, 4, 4), ramp};
  a = pool_attr(2, 1, 0, 0, 0);
  a.maxpool.dilation[0] = a.maxpool.dilation[1] = 2;
  expect_op("maxpool dilation 2", IR_OP_maxpool, &a, o, 1, (const float[]){11, 12, 15, 16}, 4, 0);
  expect_op("maxpool_index dilation 2", IR_OP_maxpool_index, &a, o, 1, (const float[]){10, 11, 14, 15}, 4, 0);
  /* max_unpool: indices out of range, not integers or NaN place nothing; a later one wins */
  memset(&a, 0, sizeof a);
  o[0] = (operand){SHAPE(1, 6), (const float[]){5, 6, 7, 8, 9, 10}};
  o[1] = (operand){SHAPE(1, 6), (const float[]){5, 7, 8, 2.5f, NAN, 7}};
  a.max_unpool.shape = SHAPE(1, 9);
  expect_op("max_unpool", IR_OP_max_unpool, &a, o, 2, (const float[]){0, 0, 0, 0, 0, 5, 0, 10, 7}, 9, 0);
  /* cast: truncation, u8 / i8 wrap modulo 256, i32 saturation; NaN -> 0 */
  memset(&a, 0, sizeof a);
  o[0] = (operand){SHAPE(1, 6), (const float[]){300, -1, 255.9f, -0.5f, NAN, 3.7f}};
  a.cast = (ir_cast_attr){IR_F32, IR_U8};
  expect_op("cast wrap u8", IR_OP_cast, &a, o, 1, (const float[]){44, 255, 255, 0, 0, 3}, 6, 0);
  o[0].data = (const float[]){128, -129, 200, -3.9f, 127, -128};
  a.cast = (ir_cast_attr){IR_F32, IR_I8};
  expect_op("cast wrap i8", IR_OP_cast, &a, o, 1, (const float[]){-128, 127, -56, -3, 127, -128}, 6, 0);
  o[0].data = (const float[]){3e9f, -3e9f, -7.9f, 16777216, 0, INFINITY};
  a.cast = (ir_cast_attr){IR_I32, IR_F32};
  expect_op("cast to i32", IR_OP_cast, &a, o, 1, (const float[]){0x1p31f, -0x1p31f, -7, 16777216, 0, 0}, 6, 0);
  CHECK(ir_cast_f32(-256.0f * 3 + 5, IR_U8) == 5.0f && ir_cast_f32(1e30f, IR_U8) == 0.0f, "ir_cast_f32 wraps large values");
}

/* Every row of ops.def must have a name and all three hooks, and round-trip by name. */
static void test_op_table_hooks(void) {
  for (int i = 0; i < IR_OP_COUNT; i++) {
    const ir_op_info *op = &ir_ops[i];
    CHECK(op->name != NULL, "op %d has no name", i);
    if (!op->name) continue;
    CHECK(op->infer != NULL, "op %s has no infer hook", op->name);
    CHECK(op->cost != NULL, "op %s has no cost hook", op->name);
    CHECK(op->ref != NULL, "op %s has no ref hook", op->name);
    CHECK(ir_op_from_name(op->name) == (ir_op)i, "ir_op_from_name(\"%s\") != %d", op->name, i);
  }
}

int main(void) {
  test_op_table_hooks();
  test_conv2d();
  test_batchnorm_inference();
  test_batchnorm_training();
  test_groupnorm();
  test_activations();
  test_shape_ops();
  test_broadcast();
  test_pools();
  test_dense();
  test_softmax();
  test_softmax_xent();
  test_dropout();
  test_reshape_normalize();
  test_onnx_ops();
  return check_done("test_ref_ops", g_failures);
}
