/* test_codegen_se.c — squeeze-excite fusion (passes/fuse.c, codegen/gen_conv_se.c,
 * codegen/gen_dwconv.c): a MBConv-like block, depthwise conv + BN + swish -> global_avgpool ->
 * fc1 (swish) -> fc2 (sigmoid) -> mul -> project 1x1 conv + BN [+ residual], compiled vs the
 * reference interpreter for the host, AVX2 and SSE targets, 1 and 2 threads bitwise equal,
 * and vs the same graph built with tune se_fusion=0 (the scale fused into the project conv
 * rounds as the mul kernel: bitwise equal when the pool is not fused either).  Cases: odd
 * channel counts, stride 2, 3x3 / 5x5, batch 1 and 3, flat-plane (7x7, 14x14) and row-tiled
 * (28, 56, 112 wide) depthwise kernels, pixel-vector and channel-vector project convs; each
 * checks in --emit llvm that the pool went into the depthwise kernel (`_avgpool`) and the
 * scale into the project conv (`_se_`), or not, for shapes the plan refuses.
 * CNNC_TEST_QUICK=1 (CI's sanitizer stage): each case on one of the three targets (round
 * robin, test_codegen_harness.h cgt_quick_skip). */
#include "test_codegen_harness.h"

#include "dw_case_check.h"

typedef struct se_case {
  int n, c, h, w, k, stride, sq, cout, resid;
  int pool; /* 1: the pool must be fused into the depthwise kernel; 0: must not be */
} se_case;

static const se_case cases[] = {
    {1, 16, 7, 7, 3, 1, 4, 24, 0, 1},     /* 7x7 flat plane; channel-vector project conv */
    {3, 13, 7, 7, 5, 1, 3, 13, 1, 1},     /* odd channels, residual, batch 3 */
    {1, 40, 14, 14, 5, 1, 8, 16, 0, 1},   /* 14x14 flat plane, pixel-vector project conv */
    {3, 21, 14, 14, 5, 2, 5, 11, 0, 1},   /* stride 2 through phase planes -> 7x7 */
    {1, 24, 28, 28, 3, 1, 6, 24, 1, 1},   /* row-tiled depthwise, residual */
    {3, 9, 29, 31, 5, 2, 2, 10, 0, 1},    /* row-tiled stride 2, odd map */
    {1, 8, 56, 56, 3, 1, 2, 12, 0, 1},    /* row-tiled 56 wide */
    {1, 5, 112, 112, 3, 2, 2, 7, 0, 1},   /* 112 -> 56 3x3 stride 2: the row-tiled kernel with a pool */
    {1, 6, 20, 20, 3, 3, 2, 6, 0, 0},     /* stride 3: no plane kernel, the pool keeps its kernel */
};

static ir_attr conv_attr(int k, int s, int groups) {
  int p = k / 2;
  ir_attr a = {.conv2d = {{k, k}, {s, s}, {p, p, p, p}, {1, 1}, groups}};
  return a;
}

static int bn(ir_graph *g, const char *pfx, int x, int c) {
  const char *sfx[4] = {"gamma", "beta", "running_mean", "running_var"};
  char nm[4][64], name[64];
  int b[5] = {x};
  for (int i = 0; i < 4; i++) {
    snprintf(nm[i], sizeof nm[i], "%s/%s", pfx, sfx[i]);
    b[i + 1] = cgt_param(g, nm[i], SHAPE(c));
  }
  ir_attr ba = {.batchnorm = {1e-5f, 0.1f, 0}};
  snprintf(name, sizeof name, "%s/bn", pfx);
  return cgt_node(g, IR_OP_batchnorm, name, b, 5, &ba);
}

static ir_graph *se_graph(const se_case *k) {
  ir_graph *g = ir_graph_new("se", k->n);
  ir_attr none = {0};
  int x = ir_add_input(g, "x", IR_F32, SHAPE(k->n, k->c, k->h, k->w));
  int in[3] = {x, cgt_param(g, "dw/weight", SHAPE(k->c, 1, k->k, k->k))};
  ir_attr a = conv_attr(k->k, k->stride, k->c);
  int y = cgt_node(g, IR_OP_conv2d, "dw", in, 2, &a);
  y = cgt_node(g, IR_OP_swish, "dw/act", (int[]){bn(g, "dw", y, k->c)}, 1, &none);
  int p = cgt_node(g, IR_OP_global_avgpool, "se/avgpool", &y, 1, &none);
  ir_attr a1 = conv_attr(1, 1, 1);
  int f1[3] = {p, cgt_param(g, "se/fc1/weight", SHAPE(k->sq, k->c, 1, 1)), cgt_param(g, "se/fc1/bias", SHAPE(k->sq))};
  int s = cgt_node(g, IR_OP_swish, "se/act", (int[]){cgt_node(g, IR_OP_conv2d, "se/fc1", f1, 3, &a1)}, 1, &none);
  int f2[3] = {s, cgt_param(g, "se/fc2/weight", SHAPE(k->c, k->sq, 1, 1)), cgt_param(g, "se/fc2/bias", SHAPE(k->c))};
  s = cgt_node(g, IR_OP_sigmoid, "se/gate", (int[]){cgt_node(g, IR_OP_conv2d, "se/fc2", f2, 3, &a1)}, 1, &none);
  int m = cgt_node(g, IR_OP_mul, "se/scale", (int[]){y, s}, 2, NULL);
  int pj[2] = {m, cgt_param(g, "project/weight", SHAPE(k->cout, k->c, 1, 1))};
  y = bn(g, "project", cgt_node(g, IR_OP_conv2d, "project", pj, 2, &a1), k->cout);
  if (k->resid) y = cgt_node(g, IR_OP_add, "add", (int[]){y, x}, 2, NULL);
  g->outputs[g->n_outputs++] = y;
  g->n_shards = 1;
  return g;
}

/* In --emit llvm of g for t: *pool = a kernel named ..._avgpool_..., *scale = ..._se_...;
 * -1 when g does not compile. */
static int se_kernels(ir_graph *g, const cg_target *t, int *pool, int *scale) {
  char ll[512], line[4096];
  FILE *f = cgt_llvm_of(g, t, "se", ll, sizeof ll);
  if (!f) return -1;
  *pool = *scale = 0;
  while (fgets(line, sizeof line, f)) {
    if (strncmp(line, "define", 6)) continue;
    *pool |= strstr(line, "conv2d_dw") && strstr(line, "_avgpool_");
    *scale |= strstr(line, "conv2d_1x1") && strstr(line, "_se_");
  }
  fclose(f);
  unlink(ll);
  return 0;
}

/* Output 0 of g for t, nth threads (malloc'd), or NULL. */
static float *se_run(ir_graph *g, const cg_target *t, int nth) {
  static int counter;
  char so[512];
  snprintf(so, sizeof so, "%s/se%d.so", cgt_dir, counter++);
  cg_options o = {so, NULL, "se", "{\"test\": true}", 2, 0};
  ir_diag d = {0};
  if (cg_compile(ct_g(g), t, &o, &d)) {
    ir_diag_print(&d, stderr);
    return NULL;
  }
  void *h = dlopen(so, RTLD_NOW | RTLD_LOCAL);
  unlink(so);
  if (!h) return NULL;
  const cnnc_abi_model *m = dlsym(h, CNNC_ABI_SYMBOL);
  void *bufs[64];
  for (int i = 0; i < m->n_tensors; i++) bufs[i] = calloc(1, (size_t)m->tensors[i].bytes + 64);
  float *x = bufs[m->input];
  for (int64_t i = 0; i < m->tensors[m->input].bytes / 4; i++) x[i] = (float)((i * 7919) % 2001) / 1000.0f - 1.0f;
  cgt_run_model(m, bufs, nth);
  int64_t n = m->tensors[m->outputs[0]].bytes / 4;
  float *out = malloc((size_t)n * sizeof *out);
  memcpy(out, bufs[m->outputs[0]], (size_t)n * sizeof *out);
  for (int i = 0; i < m->n_tensors; i++) free(bufs[i]);
  dlclose(h);
  return out;
}

/* CNNC_TEST_QUICK: case i only in pass i % npasses (test_codegen_harness.h cgt_quick_skip). */
static void run_cases(const cg_target *t, const char *pfx, int pass, int npasses) {
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    if (cgt_quick_skip(i, pass, npasses)) continue;
    const se_case *k = &cases[i];
    ir_graph *g = se_graph(k);
    cgt_random_params(g, 0.5f);
    char label[200];
    snprintf(label, sizeof label, "%s se n%d c%d %dx%d k%d s%d sq%d cout%d%s", pfx, k->n, k->c, k->h, k->w, k->k,
             k->stride, k->sq, k->cout, k->resid ? " resid" : "");
    int pool = -1, scale = -1;
    CGT_CHECK(se_kernels(g, t, &pool, &scale) == 0, "%s: does not compile", label);
    CGT_CHECK(pool == k->pool, "%s: pool fused %d, expected %d", label, pool, k->pool);
    CGT_CHECK(scale == 1, "%s: SE scale not fused into the project conv", label);
    CGT_CHECK(cgt_check_graph(g, t, label, 1e-4, NULL) == 0, "%s: compiled result differs from the interpreter", label);
    int64_t n = ir_shape_numel(&g->values[g->outputs[0]].shape);
    float *o1 = se_run(g, t, 1), *o2 = se_run(g, t, 2);
    ct_tune("se_fusion=0");
    float *u = se_run(g, t, 2);
    ct_tune("se_fusion=1");
    CGT_CHECK(o1 && o2 && u, "%s: build or run failed", label);
    if (o1 && o2 && u) {
      CGT_CHECK(memcmp(o1, o2, (size_t)n * sizeof *o1) == 0, "%s: 1 and 2 threads differ", label);
      if (!k->pool) CGT_CHECK(memcmp(o2, u, (size_t)n * sizeof *o2) == 0, "%s: differs from the unfused build", label);
      else CGT_CHECK(cgt_compare(label, o2, u, n, 1e-5) == 0, "%s: differs from the unfused build", label);
    }
    free(o1), free(o2), free(u);
    ir_graph_free(g);
  }
}

int main(void) {
  (void)dw_build_graph, (void)dw_is_rows_kernel; /* dw_case_check.h: only its helpers are used here */
  cgt_init_dir();
  cg_target host, avx2, sse;
  if (dw_target(&host, NULL) || dw_target(&avx2, "x86-64-v3") || dw_target(&sse, "x86-64")) return 1;
  run_cases(&host, "host", 0, 3);
  run_cases(&avx2, "avx2", 1, 3);
  run_cases(&sse, "sse", 2, 3);
  cg_target_dispose(&host);
  cg_target_dispose(&avx2);
  cg_target_dispose(&sse);
  cgt_cleanup_dir();
  if (cgt_failures) fprintf(stderr, "test_codegen_se: %d failure(s)\n", cgt_failures);
  else fprintf(stderr, "test_codegen_se: ok\n");
  return cgt_failures != 0;
}
