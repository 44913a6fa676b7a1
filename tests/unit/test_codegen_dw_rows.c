/* test_codegen_dw_rows.c — the row-tiled depthwise kernel of codegen/gen_dwconv.c (large
 * maps, stride 1 and stride 2 through split even/odd rows) vs the reference interpreter, 1
 * and 2 threads, host, AVX2 (x86-64-v3) and SSE (4 lanes): EfficientNet-B0's shapes (112 and
 * 56 wide 3x3, 56 -> 28 and 28 wide 5x5, 28 -> 14 3x3), odd maps (row-tile remainders, odd
 * phases, partial last vectors), maps shorter than a row tile, valid / asymmetric padding,
 * dilation, 3x1 / 1x5 / 7x7 kernels, fused BN + swish / relu / residual add, NaN inputs.
 * Each case checks that the kernel is (or, for refused shapes, is not) the row-tiled one:
 * it carries the "cnnc-dw-rows" function attribute in --emit llvm. */
#include "test_codegen_harness.h"

#include "dw_case_check.h"

typedef struct rows_case {
  int n, c, h, w, kh, kw, stride, pad[4], dil, bias, bn, post; /* post: 0 none, 1 swish, 2 relu, 3 add input + relu */
  int rows; /* 1: must be the row-tiled kernel; 0: must not be; 2: only with 8+ lanes (with 4,
             * small stride-2 planes have few enough taps per copy for the flat-plane kernel) */
} rows_case;

static const rows_case cases[] = {
    /* EfficientNet-B0 */
    {1, 2, 112, 112, 3, 3, 1, {1, 1, 1, 1}, 1, 0, 1, 1, 1},  /* features/1/0 */
    {2, 2, 112, 112, 3, 3, 2, {1, 1, 1, 1}, 1, 0, 1, 1, 0},  /* features/2/0: 112 -> 56 (3x3 s2 over 64 wide: refused) */
    {1, 2, 64, 64, 3, 3, 2, {1, 1, 1, 1}, 1, 0, 1, 1, 1},    /* 64 -> 32 */
    {1, 3, 56, 56, 3, 3, 1, {1, 1, 1, 1}, 1, 0, 1, 1, 1},    /* features/2/1 */
    {1, 2, 56, 56, 5, 5, 2, {2, 2, 2, 2}, 1, 0, 1, 1, 1},    /* features/3/0: 56 -> 28 */
    {1, 2, 28, 28, 5, 5, 1, {2, 2, 2, 2}, 1, 0, 1, 1, 1},    /* features/3/1 */
    {1, 3, 28, 28, 3, 3, 2, {1, 1, 1, 1}, 1, 0, 1, 1, 2},    /* features/4/0: 28 -> 14 (4 lanes: the flat plane) */
    /* odd maps: row-tile remainders (oh % 4, oh % 2), partial last vectors, odd phases.  The
     * stride-1 planes have over gen_dwconv.c's DW_MAX_VECTOR_TAPS (vectors x taps) on 16 lanes
     * too, so that the flat-plane kernel does not take them on AVX-512 */
    {1, 3, 37, 41, 3, 3, 1, {1, 1, 1, 1}, 1, 1, 0, 2, 1},
    {1, 2, 30, 27, 3, 3, 2, {1, 1, 1, 1}, 1, 0, 1, 1, 2},    /* 27 wide: ow 14, the odd phase 13 */
    {2, 2, 33, 37, 5, 5, 2, {2, 2, 2, 2}, 1, 1, 1, 2, 1},    /* 17 x 19 out */
    {1, 2, 3, 100, 7, 7, 1, {3, 3, 3, 3}, 1, 0, 1, 1, 1},    /* oh 3 < row tile 4 */
    {1, 2, 2, 61, 3, 3, 2, {1, 1, 1, 1}, 1, 0, 0, 0, 2},     /* one output row */
    /* padding, dilation, kernel shapes */
    {1, 3, 20, 20, 3, 3, 1, {0, 0, 0, 0}, 1, 0, 0, 0, 1},    /* valid: 18 x 18 */
    {1, 3, 21, 21, 3, 3, 2, {0, 0, 0, 0}, 1, 1, 0, 0, 1},    /* valid stride 2: 10 x 10 */
    {1, 2, 36, 40, 3, 3, 1, {0, 1, 2, 1}, 1, 0, 1, 1, 1},    /* asymmetric rows */
    {1, 2, 24, 40, 5, 5, 2, {1, 1, 2, 2}, 1, 0, 1, 1, 1},    /* asymmetric "same" stride 2 */
    {1, 2, 40, 40, 3, 3, 1, {2, 2, 2, 2}, 2, 1, 0, 2, 1},    /* dilation 2 */
    {1, 2, 50, 60, 5, 5, 2, {4, 4, 4, 4}, 2, 0, 1, 1, 1},    /* dilation 2, stride 2 */
    {1, 2, 60, 60, 3, 1, 1, {1, 0, 1, 0}, 1, 0, 0, 0, 1},    /* 3x1 */
    {1, 2, 17, 45, 1, 5, 2, {0, 2, 0, 2}, 1, 1, 1, 1, 1},    /* 1x5 stride 2 */
    {1, 2, 30, 33, 7, 7, 1, {3, 3, 3, 3}, 1, 0, 1, 1, 1},    /* 7x7: 49 taps */
    {1, 3, 42, 30, 3, 3, 1, {1, 1, 1, 1}, 1, 1, 1, 3, 1},    /* residual add, masked last vector */
    {1, 2, 200, 200, 3, 3, 1, {1, 1, 1, 1}, 1, 0, 1, 1, 2}, /* 25 vectors a row (50 with 4 lanes: refused) */
    /* refused */
    {1, 2, 20, 20, 3, 3, 3, {1, 1, 1, 1}, 1, 0, 0, 0, 0},    /* stride 3 */
    {1, 2, 4, 600, 3, 3, 1, {1, 1, 1, 1}, 1, 0, 0, 0, 0},    /* 600 wide: too many vectors to unroll */
    {1, 2, 14, 14, 3, 3, 1, {1, 1, 1, 1}, 1, 0, 1, 1, 0},    /* small plane: the flat-plane kernel */
};

static void run_cases(const cg_target *t, const char *pfx, int pass) {
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    const rows_case *k = &cases[i];
    dw_geom d = {k->n, k->c, k->h, k->w, k->kh, k->kw, k->stride, {k->pad[0], k->pad[1], k->pad[2], k->pad[3]}, k->dil, k->bias,
                 k->bn, k->post};
    char label[200];
    ir_graph *g = dw_case_graph(&d, pfx, label, sizeof label);
    int want = k->rows == 2 ? t->vec_f32 >= 8 : k->rows, got = dw_is_rows_kernel(g, t);
    CGT_CHECK(got == want, "%s: row-tiled kernel %d, expected %d", label, got, want);
    dw_case_done(g, t, label);
  }
}

int main(void) { return dw_main("test_codegen_dw_rows", run_cases, 1); }
