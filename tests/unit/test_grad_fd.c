/* test_grad_fd.c — every gradient rule (passes/autodiff.c) against central finite
 * differences.  Each case is a tiny graph whose operands are all trainable params (so the
 * input gets a gradient too), one forward op y, and the scalar L = sum(y * R) for a fixed
 * random R: pass_autodiff_seed(y, R) builds dL/dP for every P, the reference interpreter
 * evaluates it, and (L(P+h) - L(P-h)) / 2h is computed for up to FD_SAMPLES elements of each
 * P.  Also: the rule table covers every forward op (a forward op without an exercised rule
 * fails), backward ops have no rule, and the comparison rejects a slightly wrong gradient. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "ir/grad_train.h"
#include "passes/passes.h"

#define SHAPE(...) ((ir_shape){sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t), {__VA_ARGS__}})
#define FD_SAMPLES 24
#define FD_H 1e-2
#define FD_TOL 2e-3 /* |analytic - fd| <= FD_TOL * (1 + |fd|) */

static int g_cases;
static int covered[IR_OP_COUNT];

static uint64_t g_rng = 12345;
static double urand(void) { /* [0,1) splitmix64 */
  uint64_t z = (g_rng += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return (double)((z ^ (z >> 31)) >> 11) * 0x1p-53;
}
static double nrand(void) { return sqrt(-2.0 * log(1.0 - urand())) * cos(6.283185307179586 * urand()); }

/* ---- graph building ------------------------------------------------------------------------ */
static ir_graph *G;

static int P(const char *name, ir_shape s, float scale, float offset) {
  int v = ir_add_param(G, name, s, 1);
  for (int64_t i = 0; i < ir_shape_numel(&s); i++) G->values[v].data[i] = (float)(nrand() * scale) + offset;
  return v;
}

/* Values away from zero (|x| in [0.1, 1.6]): no kink of relu within h. */
static int P_nozero(const char *name, ir_shape s) {
  int v = ir_add_param(G, name, s, 1);
  for (int64_t i = 0; i < ir_shape_numel(&s); i++)
    G->values[v].data[i] = (float)((0.1 + 1.5 * urand()) * (urand() < 0.5 ? -1 : 1));
  return v;
}

/* Distinct values spaced 0.05 apart in random order: no two within 2h (maxpool ties). */
static int P_distinct(const char *name, ir_shape s) {
  int v = ir_add_param(G, name, s, 1);
  int64_t k = ir_shape_numel(&s);
  float *d = G->values[v].data;
  for (int64_t i = 0; i < k; i++) d[i] = (float)(0.05 * (double)(i - k / 2));
  for (int64_t i = k - 1; i > 0; i--) {
    int64_t j = (int64_t)(urand() * (double)(i + 1));
    float t = d[i];
    d[i] = d[j], d[j] = t;
  }
  return v;
}

static int C(const char *name, ir_shape s, float lo, float hi) {
  int v = ir_add_param(G, name, s, 0);
  for (int64_t i = 0; i < ir_shape_numel(&s); i++) G->values[v].data[i] = (float)(lo + (hi - lo) * urand());
  return v;
}

static int NODE(ir_op op, const char *name, const int *in, int n, const ir_attr *a) {
  ir_diag d = {0};
  ir_attr z = {0};
  int v = ir_add_node(G, op, name, (ir_loc){0}, in, n, a ? a : &z, &d);
  if (v < 0) {
    ir_diag_print(&d, stderr);
    abort();
  }
  covered[op]++;
  return v;
}

/* ---- the check ------------------------------------------------------------------------------ */
static double loss_of(int y, int r, const float *labels) {
  float **vals = ir_interp(G, NULL, labels);
  double l = 0.0;
  for (int64_t i = 0; i < ir_shape_numel(&G->values[y].shape); i++) l += (double)vals[y][i] * G->values[r].data[i];
  ir_interp_free(G, vals);
  return l;
}

/* Compares analytic gradient a (of param p) with central differences; corrupt != 0 perturbs
 * a first (the self-test).  Returns the number of mismatching elements. */
static int compare_param(const char *label, int p, const float *a, int y, int r, const float *labels, int corrupt) {
  int64_t k = ir_shape_numel(&G->values[p].shape), step = k > FD_SAMPLES ? k / FD_SAMPLES : 1;
  int bad = 0;
  for (int64_t i = 0; i < k; i += step) {
    float *w = &G->values[p].data[i], orig = *w;
    *w = (float)(orig + FD_H);
    double hp = (double)*w - orig, lp = loss_of(y, r, labels);
    *w = (float)(orig - FD_H);
    double hm = orig - (double)*w, lm = loss_of(y, r, labels);
    *w = orig;
    double fd = (lp - lm) / (hp + hm), an = a[i] * (corrupt ? 1.02 : 1.0) + (corrupt ? 0.01 : 0.0);
    if (!(fabs(an - fd) <= FD_TOL * (1.0 + fabs(fd)))) {
      if (!corrupt && bad < 3)
        fprintf(stderr, "  %s: d/d%s[%lld]: analytic %.6g, finite difference %.6g\n", label, G->values[p].name,
                (long long)i, an, fd);
      bad++;
    }
  }
  return bad;
}

/* Builds the backward graph of y seeded with a random R and checks every trainable param. */
static void check_case(const char *label, int y, const float *labels) {
  g_cases++;
  int n_params = G->n_values;
  int r = C("R", G->values[y].shape, -1.0f, 1.0f);
  ir_diag d = {0};
  G->outputs[G->n_outputs++] = y;
  if (pass_autodiff_seed(G, y, r, &d) < 0 || ir_verify(G, &d) < 0) {
    CHECK(0, "%s: autodiff failed: %s", label, d.msg);
    ir_graph_free(G);
    return;
  }
  float **vals = ir_interp(G, NULL, labels);
  for (int p = 0; p < n_params; p++) {
    const ir_value *v = &G->values[p];
    if (v->kind != IR_VAL_PARAM || !v->trainable) continue;
    int gv = ir_find_value(G, ir_fmt(G->arena, "grad/%s", v->name));
    CHECK(gv >= 0, "%s: no value grad/%s", label, v->name);
    if (gv < 0) continue;
    CHECK(ir_shape_eq(&G->values[gv].shape, &v->shape), "%s: grad/%s has the wrong shape", label, v->name);
    int bad = compare_param(label, p, vals[gv], y, r, labels, 0);
    CHECK(bad == 0, "%s: %d element(s) of grad/%s differ from finite differences", label, bad, v->name);
  }
  ir_interp_free(G, vals);
  ir_graph_free(G);
}

/* The verifier wants an image input; the cases feed everything through params. */
static void new_graph(int batch) {
  G = ir_graph_new("fd", batch);
  ir_add_input(G, "unused_input", IR_F32, (ir_shape){2, {batch, 1}});
}

/* ---- cases ------------------------------------------------------------------------------------ */
typedef struct conv_case { int n, cin, h, w, cout, kh, kw, sh, sw, pad[4], dh, dw, groups, bias; } conv_case;

static void test_conv(void) {
  static const conv_case cases[] = {
      {2, 3, 5, 5, 4, 3, 3, 1, 1, {1, 1, 1, 1}, 1, 1, 1, 1},  /* dense 3x3 pad 1, bias */
      {1, 2, 7, 6, 3, 3, 3, 2, 2, {1, 0, 0, 1}, 1, 1, 1, 0},  /* stride 2, asymmetric pad */
      {1, 2, 7, 7, 2, 3, 3, 1, 1, {2, 2, 2, 2}, 2, 2, 1, 1},  /* dilation 2 */
      {2, 4, 5, 4, 6, 3, 2, 1, 2, {1, 0, 1, 1}, 1, 1, 2, 1},  /* groups 2, 3x2 kernel */
      {1, 3, 6, 6, 3, 3, 3, 2, 2, {1, 1, 1, 1}, 1, 1, 3, 0},  /* depthwise stride 2 */
      {1, 2, 5, 5, 4, 3, 3, 1, 1, {1, 1, 1, 1}, 1, 1, 2, 1},  /* depthwise, multiplier 2 */
      {2, 5, 3, 3, 3, 1, 1, 1, 1, {0, 0, 0, 0}, 1, 1, 1, 1},  /* 1x1 */
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    const conv_case *c = &cases[i];
    char label[96];
    snprintf(label, sizeof label, "conv2d case %zu (groups %d stride %d dil %d)", i, c->groups, c->sh, c->dh);
    new_graph(c->n);
    int in[3] = {P("x", SHAPE(c->n, c->cin, c->h, c->w), 1, 0), P("w", SHAPE(c->cout, c->cin / c->groups, c->kh, c->kw), 0.5f, 0),
                 c->bias ? P("b", SHAPE(c->cout), 0.5f, 0) : -1};
    ir_attr a = {.conv2d = {{c->kh, c->kw}, {c->sh, c->sw}, {c->pad[0], c->pad[1], c->pad[2], c->pad[3]}, {c->dh, c->dw}, c->groups}};
    check_case(label, NODE(IR_OP_conv2d, "conv", in, c->bias ? 3 : 2, &a), NULL);
  }
}

static void norm_params(int *in, int64_t c, int with_running) {
  in[1] = P("gamma", SHAPE(c), 0.3f, 1.0f);
  in[2] = P("beta", SHAPE(c), 0.5f, 0.0f);
  if (with_running) {
    in[3] = C("running_mean", SHAPE(c), -0.3f, 0.3f);
    in[4] = C("running_var", SHAPE(c), 0.5f, 1.5f);
  }
}

static void test_norms(void) {
  static const struct { ir_shape s; int training; } bn[] = {
      {{4, {3, 2, 3, 2}}, 1}, {{2, {5, 3}}, 1}, {{4, {2, 3, 2, 2}}, 0}};
  for (size_t i = 0; i < sizeof bn / sizeof *bn; i++) {
    char label[64];
    snprintf(label, sizeof label, "batchnorm rank %d training=%d", bn[i].s.rank, bn[i].training);
    new_graph((int)bn[i].s.dim[0]);
    int in[5] = {P("x", bn[i].s, 1.5f, 0.3f)};
    norm_params(in, bn[i].s.dim[1], 1);
    ir_attr a = {.batchnorm = {1e-3f, 0.1f, bn[i].training}};
    check_case(label, NODE(IR_OP_batchnorm, "bn", in, 5, &a), NULL);
  }
  static const struct { ir_shape s; int groups; } gn[] = {{{4, {2, 4, 3, 2}}, 2}, {{4, {1, 3, 2, 2}}, 3}, {{4, {2, 2, 2, 3}}, 1}};
  for (size_t i = 0; i < sizeof gn / sizeof *gn; i++) {
    char label[64];
    snprintf(label, sizeof label, "groupnorm groups=%d", gn[i].groups);
    new_graph((int)gn[i].s.dim[0]);
    int in[3] = {P("x", gn[i].s, 1.5f, 0.3f)};
    norm_params(in, gn[i].s.dim[1], 0);
    ir_attr a = {.groupnorm = {gn[i].groups, 1e-3f}};
    check_case(label, NODE(IR_OP_groupnorm, "gn", in, 3, &a), NULL);
  }
}

static void test_eltwise(void) {
  const ir_op acts[] = {IR_OP_relu, IR_OP_sigmoid, IR_OP_swish};
  for (int i = 0; i < 3; i++) {
    new_graph(2);
    int x = P_nozero("x", SHAPE(2, 3, 2, 2));
    check_case(ir_ops[acts[i]].name, NODE(acts[i], "act", &x, 1, NULL), NULL);
  }
  /* clip (the positive values clipped), hardsigmoid (kink at x = -0.5), hardswish */
  const ir_attr kinks[] = {{.clip = {-2.0f, 0.05f}}, {.hardsigmoid = {0.4f, 0.2f}}, {.relu = {0}}, {.leaky_relu = {0.2f}}};
  const ir_op kops[] = {IR_OP_clip, IR_OP_hardsigmoid, IR_OP_hardswish, IR_OP_leaky_relu};
  for (int i = 0; i < 4; i++) {
    new_graph(2);
    int x = P_nozero("x", SHAPE(2, 3, 2, 2));
    check_case(ir_ops[kops[i]].name, NODE(kops[i], "act", &x, 1, &kinks[i]), NULL);
  }
  /* broadcasting add/mul: the second operand's gradient is reduced to its shape */
  static const ir_shape bs[] = {{4, {2, 3, 2, 2}}, {3, {3, 1, 1}}, {1, {2}}, {1, {1}}, {4, {1, 3, 2, 1}}};
  const ir_op bins[] = {IR_OP_add, IR_OP_mul};
  for (int o = 0; o < 2; o++)
    for (size_t i = 0; i < sizeof bs / sizeof *bs; i++) {
      char label[64], buf[48];
      snprintf(label, sizeof label, "%s [2,3,2,2] with %s", ir_ops[bins[o]].name, ir_shape_str(&bs[i], buf, sizeof buf));
      new_graph(2);
      int in[2] = {P("a", SHAPE(2, 3, 2, 2), 1, 0), P("b", bs[i], 1, 0)};
      check_case(label, NODE(bins[o], "bin", in, 2, NULL), NULL);
    }
  /* one value used twice (gradients accumulated): mul(x, x) */
  new_graph(2);
  int x = P("x", SHAPE(2, 5), 1, 0), xx[2] = {x, x};
  check_case("mul(x, x) (accumulation)", NODE(IR_OP_mul, "sq", xx, 2, NULL), NULL);
  /* dropout in training: linear with its hash mask */
  new_graph(2);
  x = P("x", SHAPE(2, 3, 4, 4), 1, 0);
  ir_attr a = {.dropout = {0.3f, 1, 77}};
  check_case("dropout rate 0.3", NODE(IR_OP_dropout, "drop", &x, 1, &a), NULL);
  new_graph(2);
  x = P("x", SHAPE(2, 3, 2, 2), 1, 0);
  a = (ir_attr){.reshape = {SHAPE(2, 12)}};
  check_case("reshape", NODE(IR_OP_reshape, "flat", &x, 1, &a), NULL);
  new_graph(2);
  x = P("x", SHAPE(2, 3, 2, 2), 50, 128);
  a = (ir_attr){.normalize = {1.0f / 255.0f, 3, {0.4f, 0.5f, 0.6f}, {0.2f, 0.25f, 0.3f}}};
  check_case("normalize", NODE(IR_OP_normalize, "norm", &x, 1, &a), NULL);
}

static void test_pools(void) {
  static const ir_pool_attr pa[] = {
      {{2, 2}, {2, 2}, {0, 0, 0, 0}, 0, 0}, {{3, 3}, {2, 2}, {1, 1, 1, 1}, 0, 0},
      {{3, 3}, {2, 2}, {1, 1, 1, 1}, 1, 0}, {{2, 2}, {2, 2}, {0, 0, 0, 0}, 0, 1} /* ceil_mode */,
      {{3, 2}, {1, 2}, {1, 0, 1, 1}, 0, 0}, {{3, 3}, {1, 1}, {2, 2, 2, 2}, 0, 0} /* pads over half the kernel */,
      {{3, 3}, {2, 2}, {2, 1, 2, 2}, 1, 1}};
  for (int op = 0; op < 2; op++)
    for (size_t i = 0; i < sizeof pa / sizeof *pa; i++) {
      char label[80];
      ir_op o = op ? IR_OP_avgpool : IR_OP_maxpool;
      snprintf(label, sizeof label, "%s k%dx%d s%d pad %d cip %d ceil %d", ir_ops[o].name, pa[i].kernel[0],
               pa[i].kernel[1], pa[i].stride[0], pa[i].pad[0], pa[i].count_include_pad, pa[i].ceil_mode);
      new_graph(2);
      int x = P_distinct("x", SHAPE(2, 2, 5, 5));
      ir_attr a = {.maxpool = pa[i]};
      check_case(label, NODE(o, "pool", &x, 1, &a), NULL);
    }
  new_graph(2);
  int x = P("x", SHAPE(2, 3, 3, 2), 1, 0);
  check_case("global_avgpool", NODE(IR_OP_global_avgpool, "gap", &x, 1, NULL), NULL);
}

static void test_dense_softmax(void) {
  new_graph(3);
  int in[3] = {P("x", SHAPE(3, 7), 1, 0), P("w", SHAPE(4, 7), 0.5f, 0), P("b", SHAPE(4), 0.5f, 0)};
  ir_attr a = {.dense = {4}};
  check_case("dense with bias", NODE(IR_OP_dense, "fc", in, 3, &a), NULL);
  new_graph(3);
  int x = P("x", SHAPE(3, 5), 2, 0);
  check_case("softmax", NODE(IR_OP_softmax, "sm", &x, 1, NULL), NULL);
  const float labels[4] = {2, 0, 4, 1};
  const float smooth[] = {0.0f, 0.1f, 0.3f};
  for (int i = 0; i < 3; i++) {
    char label[64];
    snprintf(label, sizeof label, "softmax_xent label_smoothing=%g", smooth[i]);
    new_graph(4);
    int lin[2] = {P("logits", SHAPE(4, 5), 2, 0), ir_add_label(G, "label")};
    ir_attr xa = {.softmax_xent = {smooth[i]}};
    check_case(label, NODE(IR_OP_softmax_xent, "loss", lin, 2, &xa), labels);
  }
}

/* Mixed labels [N,3] (a, b, lam) of mixup: a != b, a == b, lam 0 and 1.  Run last: its draws
 * leave the other cases' random values as they were. */
static void test_xent_mixed(void) {
  const float mixed[12] = {2, 0, 0.7f, 3, 3, 0.25f, 4, 1, 0.0f, 1, 2, 1.0f};
  const float smooth[] = {0.0f, 0.3f};
  for (int i = 0; i < 2; i++) {
    char label[64];
    snprintf(label, sizeof label, "softmax_xent mixed labels, label_smoothing=%g", smooth[i]);
    new_graph(4);
    int lin[2] = {P("logits", SHAPE(4, 5), 2, 0), ir_add_label_mixed(G, "label")};
    ir_attr xa = {.softmax_xent = {smooth[i]}};
    check_case(label, NODE(IR_OP_softmax_xent, "loss", lin, 2, &xa), mixed);
  }
}

/* conv -> bn(training) -> relu -> add(x) -> global_avgpool -> reshape -> dense: a residual
 * block, where x has two consumers. */
static void test_block(void) {
  new_graph(3);
  int x = P("x", SHAPE(3, 2, 4, 4), 1, 0);
  int cin[2] = {x, P("conv/weight", SHAPE(2, 2, 3, 3), 0.4f, 0)};
  ir_attr ca = {.conv2d = {{3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1}};
  int bin[5] = {NODE(IR_OP_conv2d, "conv", cin, 2, &ca)};
  norm_params(bin, 2, 1);
  ir_attr ba = {.batchnorm = {1e-3f, 0.1f, 1}};
  int r = NODE(IR_OP_relu, "relu", (int[]){NODE(IR_OP_batchnorm, "bn", bin, 5, &ba)}, 1, NULL);
  int s = NODE(IR_OP_add, "add", (int[]){r, x}, 2, NULL);
  int p = NODE(IR_OP_global_avgpool, "gap", &s, 1, NULL);
  ir_attr ra = {.reshape = {SHAPE(3, 2)}};
  int f = NODE(IR_OP_reshape, "flat", &p, 1, &ra);
  int din[3] = {f, P("fc/weight", SHAPE(3, 2), 0.5f, 0), P("fc/bias", SHAPE(3), 0.1f, 0)};
  ir_attr da = {.dense = {3}};
  check_case("residual block (x used twice)", NODE(IR_OP_dense, "fc", din, 3, &da), NULL);
}

/* ---- table checks --------------------------------------------------------------------------- */
static void test_rule_table(void) {
  for (int op = 0; op < IR_OP_COUNT; op++) {
    CHECK(pass_grad_rules[op] != NULL, "op %s has no gradient rule entry", ir_ops[op].name);
    if (pass_grad_is_forward((ir_op)op))
      CHECK(covered[op] > 0, "forward op %s: its gradient rule is not checked by a finite-difference case", ir_ops[op].name);
  }
  /* backward ops have no rule: differentiating through one is an error, not a wrong graph */
  new_graph(2);
  int in[2] = {P("dy", SHAPE(2, 3), 1, 0), P("x", SHAPE(2, 3), 1, 0)};
  int y = NODE(IR_OP_relu_grad, "rg", in, 2, NULL);
  ir_diag d = {0};
  CHECK(pass_autodiff_seed(G, y, C("R", SHAPE(2, 3), -1, 1), &d) < 0 && strstr(d.msg, "no gradient rule"),
        "differentiating relu_grad should fail with 'no gradient rule', got '%s'", d.msg);
  ir_graph_free(G);
  /* a graph without a loss output */
  new_graph(2);
  int x = P("x", SHAPE(2, 3), 1, 0);
  G->outputs[G->n_outputs++] = NODE(IR_OP_relu, "r", &x, 1, NULL);
  memset(&d, 0, sizeof d);
  CHECK(pass_autodiff(G, 1.0f, &d) < 0 && strstr(d.msg, "softmax_xent"), "pass_autodiff without a loss: '%s'", d.msg);
  ir_graph_free(G);
}

/* The comparison must reject a gradient that is 2% (+0.01) off. */
static void test_checker_rejects(void) {
  new_graph(2);
  int in[2] = {P("x", SHAPE(2, 4), 1, 0), P("w", SHAPE(3, 4), 0.5f, 0)};
  ir_attr a = {.dense = {3}};
  int y = NODE(IR_OP_dense, "fc", in, 2, &a), r = C("R", SHAPE(2, 3), -1, 1);
  ir_diag d = {0};
  G->outputs[G->n_outputs++] = y;
  CHECK(pass_autodiff_seed(G, y, r, &d) >= 0, "autodiff: %s", d.msg);
  float **vals = ir_interp(G, NULL, NULL);
  int bad = compare_param("self-test", in[1], vals[ir_find_value(G, "grad/w")], y, r, NULL, 1);
  CHECK(bad > 0, "the finite-difference check accepted a corrupted gradient");
  ir_interp_free(G, vals);
  ir_graph_free(G);
}

/* After the other cases: their random draws leave the earlier cases' values as they were. */
static void test_shape_ops(void) {
  /* concat (x used twice: accumulated), slice, channel_shuffle */
  new_graph(2);
  int xa = P("a", SHAPE(2, 3, 2, 2), 1, 0), xb = P("b", SHAPE(2, 2, 2, 2), 1, 0);
  ir_attr ca = {.concat = {1}};
  int cat_in[3] = {xa, xb, xa};
  check_case("concat", NODE(IR_OP_concat, "cat", cat_in, 3, &ca), NULL);
  new_graph(2);
  xa = P("a", SHAPE(2, 3, 4, 2), 1, 0);
  ir_attr sa = {.slice = {2, 1, 2}};
  check_case("slice", NODE(IR_OP_slice, "sl", &xa, 1, &sa), NULL);
  /* transpose: 2-D, 3-D and 4-D permutations, dim 0 moved too */
  static const struct { ir_shape s; int perm[4]; } tc[] = {
      {{2, {3, 4}}, {1, 0}}, {{3, {2, 3, 4}}, {2, 0, 1}}, {{4, {2, 3, 2, 2}}, {0, 2, 3, 1}}, {{4, {2, 3, 2, 2}}, {3, 1, 0, 2}}};
  for (int i = 0; i < 4; i++) {
    new_graph(2);
    xa = P("a", tc[i].s, 1, 0);
    ir_attr ta = {.transpose = {{tc[i].perm[0], tc[i].perm[1], tc[i].perm[2], tc[i].perm[3]}}};
    char label[32];
    snprintf(label, sizeof label, "transpose case %d", i);
    check_case(label, NODE(IR_OP_transpose, "tr", &xa, 1, &ta), NULL);
  }
  /* hardmax: piecewise constant, its gradient 0 (distinct values 0.05 apart: no tie within
   * the finite-difference step) */
  new_graph(2);
  xa = P_distinct("a", SHAPE(2, 3, 2, 5));
  check_case("hardmax", NODE(IR_OP_hardmax, "hm", &xa, 1, NULL), NULL);
  /* log_softmax: rows of 5 and of 1 (a row of one: log_softmax 0, gradient 0) */
  new_graph(2);
  xa = P("a", SHAPE(2, 3, 2, 5), 1, 0);
  check_case("log_softmax", NODE(IR_OP_log_softmax, "ls", &xa, 1, NULL), NULL);
  new_graph(2);
  xa = P("a", SHAPE(2, 3, 1), 1, 0);
  check_case("log_softmax rows of 1", NODE(IR_OP_log_softmax, "ls", &xa, 1, NULL), NULL);
  /* concat and slice along dim 0 (ONNX import, docs/onnx.md "Dim 0") */
  new_graph(2);
  xa = P("a", SHAPE(2, 3, 2, 2), 1, 0), xb = P("b", SHAPE(1, 3, 2, 2), 1, 0);
  ir_attr c0 = {.concat = {0}};
  int cat0_in[3] = {xa, xb, xa};
  check_case("concat dim 0", NODE(IR_OP_concat, "cat", cat0_in, 3, &c0), NULL);
  new_graph(2);
  xa = P("a", SHAPE(3, 3, 2, 2), 1, 0);
  ir_attr s0 = {.slice = {0, 1, 2}};
  check_case("slice dim 0", NODE(IR_OP_slice, "sl", &xa, 1, &s0), NULL);
  /* slices with steps (forward, backward, along dim 0 and a middle dim) */
  static const ir_slice_attr ss[] = {{1, 4, 3, -2}, {2, 0, 2, 3}, {0, 2, 3, -1}};
  for (int i = 0; i < 3; i++) {
    new_graph(2);
    xa = P("a", SHAPE(3, 5, 4, 2), 1, 0);
    ir_attr sa2 = {.slice = ss[i]};
    char label[32];
    snprintf(label, sizeof label, "slice step case %d", i);
    check_case(label, NODE(IR_OP_slice, "sl", &xa, 1, &sa2), NULL);
  }
  /* slice_grad as a forward op (zeros around x: ONNX ConvTranspose's spread input) */
  new_graph(2);
  xa = P("a", SHAPE(2, 3, 2, 1), 1, 0);
  ir_attr zg = {.slice_grad = {{3, 0, 1}, SHAPE(2, 3, 2, 3)}};
  check_case("slice_grad forward", NODE(IR_OP_slice_grad, "spread", &xa, 1, &zg), NULL);
  new_graph(2);
  xa = P("a", SHAPE(2, 6, 2, 2), 1, 0);
  ir_attr sh = {.channel_shuffle = {3}};
  check_case("channel_shuffle", NODE(IR_OP_channel_shuffle, "sh", &xa, 1, &sh), NULL);
  /* lrn: odd and even windows (ONNX's, clamped at both channel ends), large alpha so the
   * cross-channel terms matter, negative beta, rank 3 */
  static const struct { ir_shape s; ir_lrn_attr a; } lc[] = {
      {{4, {2, 6, 2, 3}}, {5, 1.5f, 0.75f, 1.0f}}, {{4, {1, 5, 2, 2}}, {3, 2.0f, 1.3f, 0.7f}},
      {{4, {1, 4, 2, 2}}, {2, 1.0f, 0.6f, 2.0f}},  {{3, {2, 5, 3}}, {7, 0.8f, -0.5f, 1.2f}}};
  for (int i = 0; i < 4; i++) {
    new_graph(2);
    xa = P("a", lc[i].s, 1, 0);
    ir_attr la = {.lrn = lc[i].a};
    char label[32];
    snprintf(label, sizeof label, "lrn case %d", i);
    check_case(label, NODE(IR_OP_lrn, "lrn", &xa, 1, &la), NULL);
  }
}

/* An inference-only op: differentiating through it is an error naming why, not a graph. */
static void check_refused(const char *label, int y, const char *want) {
  g_cases++;
  int r = C("R", G->values[y].shape, -1.0f, 1.0f);
  ir_diag d = {0};
  CHECK(pass_autodiff_seed(G, y, r, &d) < 0 && strstr(d.msg, want), "%s: autodiff should fail with '%s', got '%s'", label, want, d.msg);
  ir_graph_free(G);
}

/* The ops of the ONNX import's second round (exp, sqrt, neg, div, reduce, expand, dilated
 * maxpool) and the inference-only ones (after the other cases: their draws stay). */
static void test_onnx_ops(void) {
  new_graph(2);
  int xa = P("a", SHAPE(2, 3, 4), 1, 0);
  check_case("exp", NODE(IR_OP_exp, "exp", &xa, 1, NULL), NULL);
  new_graph(2);
  xa = P("a", SHAPE(2, 3, 4), 0.3f, 1.5f); /* away from 0 */
  check_case("sqrt", NODE(IR_OP_sqrt, "sqrt", &xa, 1, NULL), NULL);
  new_graph(2);
  xa = P("a", SHAPE(2, 5), 1, 0);
  check_case("neg", NODE(IR_OP_neg, "neg", &xa, 1, NULL), NULL);
  /* div: same shapes, b broadcast along the last dim and from a lower rank; b away from 0 (negative once) */
  static const ir_shape bs[] = {{3, {2, 3, 4}}, {3, {2, 3, 1}}, {1, {4}}};
  for (int i = 0; i < 3; i++) {
    new_graph(2);
    int in[2] = {P("a", SHAPE(2, 3, 4), 1, 0), P("b", bs[i], 0.3f, i == 1 ? -1.5f : 1.5f)};
    char label[32];
    snprintf(label, sizeof label, "div case %d", i);
    check_case(label, NODE(IR_OP_div, "div", in, 2, NULL), NULL);
  }
  /* reduce: sum, mean, max over one dim, two dims apart (batch norm's statistics), all dims */
  static const ir_shape rs[] = {{4, {2, 3, 2, 1}}, {4, {1, 3, 1, 1}}, {4, {1, 1, 1, 1}}, {4, {2, 1, 2, 4}}};
  for (int m = 0; m < 3; m++)
    for (int i = 0; i < 4; i++) {
      new_graph(2);
      xa = P_distinct("a", SHAPE(2, 3, 2, 4)); /* max: no ties within the step */
      ir_attr ra = {.reduce = {rs[i], m}};
      char label[48];
      snprintf(label, sizeof label, "reduce mode %d case %d", m, i);
      check_case(label, NODE(IR_OP_reduce, "red", &xa, 1, &ra), NULL);
    }
  new_graph(2);
  xa = P("a", SHAPE(2, 1, 3, 1), 1, 0);
  ir_attr ea = {.expand = {SHAPE(2, 4, 3, 2), 0}};
  check_case("expand", NODE(IR_OP_expand, "ex", &xa, 1, &ea), NULL);
  /* dilated max pooling (ONNX MaxPool dilations): its gradient goes to the pick */
  new_graph(2);
  xa = P_distinct("x", SHAPE(2, 2, 7, 6));
  ir_attr pa = {.maxpool = {{3, 2}, {1, 2}, {1, 0, 2, 1}, 0, 0, {2, 3}}};
  check_case("maxpool dilation 2x3", NODE(IR_OP_maxpool, "pool", &xa, 1, &pa), NULL);
  /* inference-only: maxpool_index, max_unpool, cast */
  new_graph(2);
  xa = P_distinct("x", SHAPE(2, 2, 4, 4));
  ir_attr ia = {.maxpool_index = {{2, 2}, {2, 2}, {0, 0, 0, 0}, 0, 0, {0, 0}}};
  check_refused("maxpool_index", NODE(IR_OP_maxpool_index, "idx", &xa, 1, &ia), "inference-only");
  new_graph(2);
  int un[2] = {P("x", SHAPE(2, 3), 1, 0), C("i", SHAPE(2, 3), 0, 0)};
  ir_attr ua = {.max_unpool = {SHAPE(2, 6)}};
  check_refused("max_unpool", NODE(IR_OP_max_unpool, "unpool", un, 2, &ua), "inference-only");
  new_graph(2);
  xa = P("x", SHAPE(2, 3), 4, 0);
  ir_attr ka = {.cast = {IR_F32, IR_U8}};
  check_refused("cast", NODE(IR_OP_cast, "wrap", &xa, 1, &ka), "inference-only");
}

int main(void) {
  test_conv();
  test_norms();
  test_eltwise();
  test_pools();
  test_dense_softmax();
  test_block();
  test_shape_ops();
  test_onnx_ops();
  test_rule_table();
  test_checker_rejects();
  test_xent_mixed();
  if (g_failures) {
    fprintf(stderr, "test_grad_fd: %d check(s) failed (%d cases)\n", g_failures, g_cases);
    return 1;
  }
  printf("test_grad_fd: all checks passed (%d cases)\n", g_cases);
  return 0;
}
