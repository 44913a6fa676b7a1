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
 * CNNC_TEST_QUICK=1 (quick mode): each case on one of the three targets (round
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

/* In --emit llvm of g for t: *pool = a kernel named ..._avgpool_..., *scale = ..._se_...;
 * -1 when g does not compile. */
static int se_kernels(ir_graph *g, const cg_target *t, int *pool, int *scale) {
  cgt_ir ir;
  int rc = cgt_ir_open(&ir, g, t, "se");
  *pool = *scale = 0;
  while (cgt_ir_next(&ir)) {
    if (strncmp(ir.line, "define", 6)) continue;
    *pool |= strstr(ir.line, "conv2d_dw") && strstr(ir.line, "_avgpool_");
    *scale |= strstr(ir.line, "conv2d_1x1") && strstr(ir.line, "_se_");
  }
  return rc;
}

/* CNNC_TEST_QUICK: case i only in pass i % 3 (test_codegen_harness.h cgt_quick_skip). */
static void run_cases(const cg_target *t, const char *pfx, int pass) {
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    if (cgt_quick_skip(i, pass, 3)) continue;
    const se_case *k = &cases[i];
    ir_graph *g = dw_se_graph("se", k->n, k->c, k->h, k->w, k->k, k->stride, k->sq, k->cout, k->resid);
    cgt_random_params(g, 0.5f);
    char label[200];
    snprintf(label, sizeof label, "%s se n%d c%d %dx%d k%d s%d sq%d cout%d%s", pfx, k->n, k->c, k->h, k->w, k->k,
             k->stride, k->sq, k->cout, k->resid ? " resid" : "");
    int pool = -1, scale = -1;
    CGT_CHECK(se_kernels(g, t, &pool, &scale) == 0, "%s: does not compile", label);
    CGT_CHECK(pool == k->pool, "%s: pool fused %d, expected %d", label, pool, k->pool);
    CGT_CHECK(scale == 1, "%s: SE scale not fused into the project conv", label);
    dw_se_check(g, t, label, !k->pool);
    ir_graph_free(g);
  }
}

int main(void) { return dw_main("test_codegen_se", run_cases, 0); }
