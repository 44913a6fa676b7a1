/* dw_case_check.h — shared by the depthwise tests (test_codegen_dw.c, test_codegen_dw_rows.c,
 * test_codegen_se*.c): the one-conv depthwise test graph (conv [+ bias] [+ inference BN] [+ add
 * input] [+ swish | relu]) and its case label, the probe telling gen_dwconv.c's row-tiled
 * kernel from the flat-plane one (both are named conv2d_dw_plane; the row-tiled one carries the
 * "cnnc-dw-rows" attribute in --emit llvm), the squeeze-excite block and its checks, and the
 * tests' main().  Include after test_codegen_harness.h. */
#ifndef DW_CASE_CHECK_H
#define DW_CASE_CHECK_H

#include "ct_tune.h"

/* The geometry and epilogue of one case; post: 0 none, 1 swish, 2 relu, 3 add input + relu. */
typedef struct dw_geom {
  int n, c, h, w, kh, kw, stride, pad[4], dil, bias, bn, post;
} dw_geom;

static inline ir_graph *dw_build_graph(const dw_geom *k) {
  ir_graph *g = ir_graph_new("t", k->n);
  int x = ir_add_input(g, "x", IR_F32, SHAPE(k->n, k->c, k->h, k->w));
  int in[3] = {x, cgt_param(g, "dw/weight", SHAPE(k->c, 1, k->kh, k->kw)), 0};
  if (k->bias) in[2] = cgt_param(g, "dw/bias", SHAPE(k->c));
  ir_attr a = {.conv2d = {{k->kh, k->kw}, {k->stride, k->stride}, {k->pad[0], k->pad[1], k->pad[2], k->pad[3]},
                          {k->dil, k->dil}, k->c}};
  int y = cgt_node(g, IR_OP_conv2d, "dw", in, k->bias ? 3 : 2, &a);
  if (k->bn) y = cgt_add_bn(g, "bn", y, k->c);
  ir_attr none = {0};
  if (k->post == 3) {
    int in2[2] = {y, x};
    y = cgt_node(g, IR_OP_add, "add", in2, 2, NULL);
  }
  if (k->post == 1) y = cgt_node(g, IR_OP_swish, "act", &y, 1, &none);
  if (k->post >= 2) y = cgt_node(g, IR_OP_relu, "act", &y, 1, &none);
  g->outputs[g->n_outputs++] = y;
  g->n_shards = 1;
  return g;
}

/* The case k as a graph with random params; its label "<pfx> dw n.. c.. HxW k.. s.. p.. d..". */
static inline ir_graph *dw_case_graph(const dw_geom *k, const char *pfx, char *label, size_t cap) {
  snprintf(label, cap, "%s dw n%d c%d %dx%d k%dx%d s%d p%d,%d,%d,%d d%d%s%s post%d", pfx, k->n, k->c, k->h, k->w, k->kh,
           k->kw, k->stride, k->pad[0], k->pad[1], k->pad[2], k->pad[3], k->dil, k->bias ? " bias" : "", k->bn ? " bn" : "",
           k->post);
  ir_graph *g = dw_build_graph(k);
  cgt_random_params(g, 0.5f);
  return g;
}

/* The end of a case: g vs the interpreter, 1 and 2 threads (1e-4); g freed. */
static inline void dw_case_done(ir_graph *g, const cg_target *t, const char *label) {
  CGT_CHECK(cgt_check_graph(g, t, label, 1e-4, NULL) == 0, "%s: compiled result differs from the interpreter", label);
  ir_graph_free(g);
}

/* 1 if g's depthwise kernel for t is the row-tiled one, 0 if not, -1 when g does not compile
 * or has no depthwise kernel. */
static inline int dw_is_rows_kernel(ir_graph *g, const cg_target *t) {
  cgt_ir ir;
  int found = 0, conv = 0, rc = cgt_ir_open(&ir, g, t, "rows");
  while (cgt_ir_next(&ir)) {
    found |= strstr(ir.line, "\"cnnc-dw-rows\"") != NULL;
    conv |= strstr(ir.line, "conv2d_dw") != NULL;
  }
  return rc || !conv ? -1 : found;
}

/* ---- squeeze-excite (test_codegen_se.c, test_codegen_se_big.c) ---------------------------- */
/* Depthwise conv (k x k, stride s, padding k/2) + BN + swish -> global_avgpool -> fc1 (sq
 * channels) + swish -> fc2 + sigmoid -> mul -> project 1x1 conv (cout) + BN [+ x]. */
static inline ir_graph *dw_se_graph(const char *name, int n, int c, int h, int w, int k, int s, int sq, int cout, int resid) {
  ir_graph *g = ir_graph_new(name, n);
  ir_attr none = {0};
  int x = ir_add_input(g, "x", IR_F32, SHAPE(n, c, h, w));
  int in[2] = {x, cgt_param(g, "dw/weight", SHAPE(c, 1, k, k))};
  ir_attr a = {.conv2d = {{k, k}, {s, s}, {k / 2, k / 2, k / 2, k / 2}, {1, 1}, c}};
  int y = cgt_node(g, IR_OP_conv2d, "dw", in, 2, &a);
  y = cgt_node(g, IR_OP_swish, "dw/act", (int[]){cgt_add_bn(g, "dw/bn", y, c)}, 1, &none);
  int p = cgt_node(g, IR_OP_global_avgpool, "se/avgpool", &y, 1, &none);
  ir_attr a1 = {.conv2d = {{1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1}};
  int f1[3] = {p, cgt_param(g, "se/fc1/weight", SHAPE(sq, c, 1, 1)), cgt_param(g, "se/fc1/bias", SHAPE(sq))};
  int sw = cgt_node(g, IR_OP_swish, "se/act", (int[]){cgt_node(g, IR_OP_conv2d, "se/fc1", f1, 3, &a1)}, 1, &none);
  int f2[3] = {sw, cgt_param(g, "se/fc2/weight", SHAPE(c, sq, 1, 1)), cgt_param(g, "se/fc2/bias", SHAPE(c))};
  sw = cgt_node(g, IR_OP_sigmoid, "se/gate", (int[]){cgt_node(g, IR_OP_conv2d, "se/fc2", f2, 3, &a1)}, 1, &none);
  int m = cgt_node(g, IR_OP_mul, "se/scale", (int[]){y, sw}, 2, NULL);
  int pj[2] = {m, cgt_param(g, "project/weight", SHAPE(cout, c, 1, 1))};
  y = cgt_add_bn(g, "project/bn", cgt_node(g, IR_OP_conv2d, "project", pj, 2, &a1), cout);
  if (resid) y = cgt_node(g, IR_OP_add, "add", (int[]){y, x}, 2, NULL);
  g->outputs[g->n_outputs++] = y;
  g->n_shards = 1;
  return g;
}

/* Output 0 of g for t on a fixed input with nth threads (malloc'd), or NULL. */
static inline float *dw_se_run(ir_graph *g, const cg_target *t, int nth) {
  cgt_so s;
  if (cgt_so_open(&s, g, t, g->name)) return NULL;
  int64_t nx = s.m->tensors[s.m->input].bytes / 4;
  float *x = malloc((size_t)nx * sizeof *x);
  for (int64_t i = 0; i < nx; i++) x[i] = (float)((i * 7919) % 2001) / 1000.0f - 1.0f;
  float *out = cgt_run_copy(s.m, x, nx, nth);
  free(x);
  cgt_so_close(&s);
  return out;
}

/* The SE block g for t vs the interpreter (1e-4), 1 vs 2 threads bitwise, and vs the tune
 * se_fusion=0 build: bitwise when exact (the pool not fused either), else within 1e-5. */
static inline void dw_se_check(ir_graph *g, const cg_target *t, const char *label, int exact) {
  CGT_CHECK(cgt_check_graph(g, t, label, 1e-4, NULL) == 0, "%s: compiled result differs from the interpreter", label);
  int64_t n = ir_shape_numel(&g->values[g->outputs[0]].shape);
  float *o1 = dw_se_run(g, t, 1), *o2 = dw_se_run(g, t, 2);
  ct_tune("se_fusion=0");
  float *u = dw_se_run(g, t, 2);
  ct_tune("se_fusion=1");
  CGT_CHECK(o1 && o2 && u, "%s: build or run failed", label);
  if (o1 && o2 && u) {
    CGT_CHECK(memcmp(o1, o2, (size_t)n * sizeof *o1) == 0, "%s: 1 and 2 threads differ", label);
    if (exact) CGT_CHECK(memcmp(o2, u, (size_t)n * sizeof *o2) == 0, "%s: differs from the se_fusion=0 build", label);
    else CGT_CHECK(cgt_compare(label, o2, u, n, 1e-5) == 0, "%s: differs from the se_fusion=0 build", label);
  }
  free(o1), free(o2), free(u);
}

/* main() of the depthwise tests: run(t, name, pass) for the host, AVX2 (x86-64-v3) and SSE
 * (x86-64) as passes 0, 1, 2, then with nan set pass 3 on AVX2 with NaN inputs (cgt_nan_every
 * = 7: they propagate to the pixels that read them, not through padding). */
static inline int dw_main(const char *test, void (*run)(const cg_target *t, const char *pfx, int pass), int nan) {
  cgt_init_dir();
  cg_target t[3];
  const char *cpu[3] = {NULL, "x86-64-v3", "x86-64"}, *name[3] = {"host", "avx2", "sse"};
  for (int i = 0; i < 3; i++)
    if (cgt_target(&t[i], cpu[i])) return 1;
  for (int i = 0; i < 3; i++) run(&t[i], name[i], i);
  cgt_nan_every = 7;
  if (nan) run(&t[1], "avx2 nan", 3);
  cgt_nan_every = 0;
  for (int i = 0; i < 3; i++) cg_target_dispose(&t[i]);
  return cgt_done(test);
}

#endif
