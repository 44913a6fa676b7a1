/* conv_case_check.h — the one-conv test graph of the conv kernel tests (test_codegen_vc*.c,
 * test_codegen_wino.c, test_codegen_flat*.c, test_codegen_split.c: a conv with its epilogue:
 * bias, inference BN, a residual add of a second conv, relu or swish) and the flat (1x1
 * stride-1 GEMM) tests' build-and-run check.  Include after test_codegen_harness.h. */
#ifndef CNNC_TEST_CONV_CASE_CHECK_H
#define CNNC_TEST_CONV_CASE_CHECK_H

#include "ct_tune.h"

/* x [n, cin, h, w] -> conv (kh x kw, stride s, pad {top, left, bottom, right}, groups; params
 * "<conv>/weight" and, with bias, "<conv>/bias") -> [inference BN named bn] -> [+ a 1x1 stride-s
 * conv named down of x, whose output must have the conv's shape] -> [relu | swish]. */
typedef struct cgt_conv {
  const char *graph, *conv, *bn, *down; /* names; bn, down NULL: none */
  int n, cin, cout, h, w, kh, kw, s, pad[4], groups, bias;
  int act; /* 0 none, 1 relu, 2 swish */
} cgt_conv;

static inline ir_graph *cgt_conv_graph(const cgt_conv *c) {
  ir_graph *g = ir_graph_new(c->graph, c->n);
  char wn[96], bn[96];
  snprintf(wn, sizeof wn, "%s/weight", c->conv);
  snprintf(bn, sizeof bn, "%s/bias", c->conv);
  int x = ir_add_input(g, "x", IR_F32, SHAPE(c->n, c->cin, c->h, c->w));
  int in[3] = {x, cgt_param(g, wn, SHAPE(c->cout, c->cin / c->groups, c->kh, c->kw)), 0};
  if (c->bias) in[2] = cgt_param(g, bn, SHAPE(c->cout));
  ir_attr a = {.conv2d = {{c->kh, c->kw}, {c->s, c->s}, {c->pad[0], c->pad[1], c->pad[2], c->pad[3]}, {1, 1}, c->groups}};
  int y = cgt_node(g, IR_OP_conv2d, c->conv, in, c->bias ? 3 : 2, &a);
  if (c->bn) y = cgt_add_bn(g, c->bn, y, c->cout);
  if (c->down) {
    snprintf(wn, sizeof wn, "%s/weight", c->down);
    int in2[2] = {x, cgt_param(g, wn, SHAPE(c->cout, c->cin, 1, 1))};
    ir_attr a2 = {.conv2d = {{1, 1}, {c->s, c->s}, {0, 0, 0, 0}, {1, 1}, 1}};
    int add[2] = {y, cgt_node(g, IR_OP_conv2d, c->down, in2, 2, &a2)};
    const ir_shape *ys = &g->values[add[0]].shape, *rs = &g->values[add[1]].shape;
    for (int i = 0; i < 4; i++)
      if (ys->dim[i] != rs->dim[i]) abort(); /* the case table must give matching shapes */
    y = cgt_node(g, IR_OP_add, "add", add, 2, NULL);
  }
  ir_attr none = {0};
  if (c->act == 1) y = cgt_node(g, IR_OP_relu, "relu", &y, 1, &none);
  if (c->act == 2) y = cgt_node(g, IR_OP_swish, "swish", &y, 1, &none);
  g->outputs[g->n_outputs++] = y;
  g->n_shards = 1;
  return g;
}

/* The epilogue codes of the channel-vector tests' case tables: 0 bias only, 1 BN + relu, 2 BN +
 * residual add (a 1x1 conv "down" of x) + relu, 3 BN + swish. */
static inline void cgt_conv_epi(cgt_conv *c, int epi) {
  c->bias = epi == 0, c->bn = epi ? "bn" : NULL, c->down = epi == 2 ? "down" : NULL, c->act = epi == 3 ? 2 : epi > 0;
}

/* The flat tests' graph: conv a (1x1, cin -> cout) [+ BN a/bn] [+ conv b of x] [+ relu]. */
static inline ir_graph *cgt_flat_graph(int n, int cin, int cout, int h, int w, int bn, int resid, int relu) {
  cgt_conv c = {"t", "a", bn ? "a/bn" : NULL, resid ? "b" : NULL, n, cin, cout, h, w, 1, 1, 1, {0, 0, 0, 0}, 1, 0, relu};
  return cgt_conv_graph(&c);
}

/* main() of a conv test: run(i, t, name) for every case i < ncases and, inside, the host and
 * AVX2 (x86-64-v3) targets; then cgt_done(test). */
static inline int cgt_sweep_main(const char *test, size_t ncases, void (*run)(size_t i, const cg_target *t, const char *name)) {
  cg_target t[2];
  const char *cpu[2] = {NULL, "x86-64-v3"}, *name[2] = {"host", "avx2"};
  cgt_init_dir();
  for (int j = 0; j < 2; j++)
    if (cgt_target(&t[j], cpu[j])) return 1;
  for (size_t i = 0; i < ncases; i++)
    for (int j = 0; j < 2; j++) run(i, &t[j], name[j]);
  for (int j = 0; j < 2; j++) cg_target_dispose(&t[j]);
  return cgt_done(test);
}

/* Compiles g for t (the knobs as ct_tune set them; reset, unless NULL, is set right after the
 * compile), checks that a kernel is a flat conv (conv2d_1x1_, with a fused add if add) and, if
 * kernel0 is set, that the first kernel's name holds it; runs it with 1..max_nth threads
 * against r (1e-4), each run bitwise equal to the first, whose output goes to got (off16:
 * cgt_so_runs).  Returns 0 when it ran, -1 (a failure) when not. */
static inline int flat_build_run(ir_graph *g, const cg_target *t, const char *label, const char *reset, int add,
                                 const char *kernel0, int max_nth, int off16, const cgt_ref *r, float *got) {
  cgt_so s;
  int rc = cgt_so_open(&s, g, t, label);
  if (reset) ct_tune(reset);
  if (rc) return cgt_failures++, -1;
  const char *k0 = s.m->shards[0].kernel_names[0];
  CGT_CHECK(cgt_so_kernel(&s, "conv2d_1x1_", add ? "_add_" : NULL), "%s: no flat conv kernel%s (%s)", label,
            add ? " with a fused add" : "", k0);
  if (kernel0) CGT_CHECK(strstr(k0, kernel0) != NULL, "%s: kernel %s, want %s", label, k0, kernel0);
  cgt_so_runs(&s, r, 1e-4, max_nth, off16, label, got);
  cgt_so_close(&s);
  return 0;
}

/* The two builds of a flat conv variant's A/B switch: g compiled with the knob items tune[v]
 * (reset after each compile) and run against one input (flat_build_run, 1..3 threads), "<label>
 * <tag[v]>"; the two builds bitwise equal. */
static inline void flat_ab(ir_graph *g, const cg_target *t, const char *label, const char *const tag[2],
                           const char *const tune[2], const char *reset) {
  cgt_ref r = cgt_ref_make(g);
  float *y[2];
  int rc[2];
  for (int v = 0; v < 2; v++) {
    char l[256];
    snprintf(l, sizeof l, "%s %s", label, tag[v]);
    y[v] = malloc((size_t)r.ny * sizeof(float));
    ct_tune(tune[v]);
    rc[v] = flat_build_run(g, t, l, reset, 0, NULL, 3, 0, &r, y[v]);
  }
  if (!rc[0] && !rc[1]) CGT_CHECK(!memcmp(y[0], y[1], (size_t)r.ny * sizeof(float)), "%s: the two builds are not bitwise equal", label);
  cgt_ref_free(g, &r);
  free(y[0]), free(y[1]);
}

#endif
