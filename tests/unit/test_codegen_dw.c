/* test_codegen_dw.c — the depthwise flat-plane kernel (codegen/gen_dwconv.c) vs the reference
 * interpreter, 1 and 2 threads, host and AVX2 (x86-64-v3) and SSE (4 lanes) targets: planes of
 * one partial vector, of whole and partial last vectors, tiles of balanced width (4+3, 4x4+3x3
 * vectors), 3x3/5x5/3x1 kernels, dilation, asymmetric padding, stride 2 (phase planes, odd
 * maps), batches, fused BN + swish / relu and a fused residual add (masked on the last vector).  Each case also checks that the
 * kernel really is `conv2d_dw_plane` (or, for the shapes it must refuse, that it is not: those
 * now take the row-tiled kernel of the same name, which carries "cnnc-dw-rows").
 * CNNC_TEST_QUICK=1 (quick mode): each case on one of the three targets (round
 * robin, test_codegen_harness.h cgt_quick_skip). */
#include "test_codegen_harness.h"

#include "dw_case_check.h"

typedef struct dw_case {
  int n, c, h, w, kh, kw, pad[4], dil, bias, bn, post; /* post: 0 none, 1 swish, 2 relu, 3 add input + relu */
  int plane; /* 1: must be conv2d_dw_plane; 2: with 8+ lanes only (4 lanes: too many vectors);
              * 0: must not be; 3: must not be with 8+ lanes (4 lanes: more vectors, either) */
  int stride; /* 0 = 1 */
  int vmax;   /* 1 and 2 only up to this many lanes (0: any): a stride-2 plane pays for its phase split
               * (h*w copies) with its vector FMAs, half as many on 16 lanes (gen_dwconv.c dw_flat_ok) */
} dw_case;

static const dw_case cases[] = {
    {1, 5, 7, 7, 5, 5, {2, 2, 2, 2}, 1, 0, 1, 1, 1},     /* 7x7 5x5: 7 vectors = 4+3 (EfficientNet features/6) */
    {1, 3, 7, 7, 3, 3, {1, 1, 1, 1}, 1, 1, 0, 0, 1},     /* 7x7 3x3, conv bias */
    {2, 3, 14, 14, 3, 3, {1, 1, 1, 1}, 1, 0, 1, 1, 1},   /* 196 px: 25 vectors (last 4 lanes), batch 2 */
    {1, 4, 14, 14, 5, 5, {2, 2, 2, 2}, 1, 1, 1, 3, 2},   /* residual add, masked on the last vector; 7 tiles */
    {1, 3, 9, 9, 3, 3, {2, 2, 2, 2}, 2, 1, 0, 2, 1},     /* dilation 2 */
    {1, 3, 8, 10, 3, 3, {0, 1, 2, 1}, 1, 0, 1, 2, 1},    /* asymmetric rows: oh = h, ow = w */
    {1, 3, 6, 5, 3, 3, {1, 1, 0, 1}, 1, 1, 0, 0, 1},     /* oh = h - 1 (bottom pad 0) */
    {3, 2, 2, 3, 3, 3, {1, 1, 1, 1}, 1, 1, 1, 1, 1},     /* plane of 6 px: one partial vector; 6 items */
    {1, 4, 12, 1, 3, 1, {1, 0, 1, 0}, 1, 0, 0, 0, 1},    /* 3x1 kernel on a 1-wide map */
    {1, 3, 5, 16, 1, 5, {0, 2, 0, 2}, 1, 1, 1, 1, 1},    /* 1x5 kernel */
    /* stride 2 through the four phase planes (5x5: enough taps to pay for the split) */
    {1, 3, 14, 14, 5, 5, {2, 2, 2, 2}, 1, 0, 1, 1, 1, 2},  /* 14 -> 7 (EfficientNet features/6/0) */
    {2, 2, 28, 28, 5, 5, {2, 2, 2, 2}, 1, 1, 1, 1, 2, 2, 8}, /* 28 -> 14, 25 vectors, batch 2 */
    {1, 3, 15, 15, 5, 5, {2, 2, 2, 2}, 1, 1, 0, 2, 1, 2, 8}, /* odd map: 15 -> 8 (short odd phases), relu */
    {1, 4, 14, 14, 5, 5, {1, 1, 2, 2}, 1, 0, 1, 1, 1, 2},  /* asymmetric "same" padding */
    {1, 2, 10, 12, 5, 5, {4, 4, 4, 4}, 2, 0, 0, 0, 1, 2, 8}, /* dilation 2: 10x12 -> 5x6 */
    /* the same paths with 49 taps, enough for the split on 16 lanes too */
    {1, 3, 15, 15, 7, 7, {3, 3, 3, 3}, 1, 1, 0, 2, 2, 2},  /* odd map: 15 -> 8 (4 lanes: too many vectors) */
    {1, 2, 10, 12, 7, 7, {6, 6, 6, 6}, 2, 0, 1, 1, 1, 2},  /* dilation 2: 10x12 -> 5x6 */
    /* refused: the per-row engine keeps them */
    {1, 2, 28, 28, 5, 5, {2, 2, 2, 2}, 1, 0, 1, 1, 0},   /* plane too large to unroll (98 vectors x 25 taps) */
    {1, 3, 10, 10, 3, 3, {0, 0, 0, 0}, 1, 0, 0, 0, 0},   /* valid padding: ow != w */
    {1, 3, 13, 13, 3, 3, {0, 0, 0, 0}, 1, 0, 0, 0, 0, 2}, /* stride 2, valid: ow 6 != 7 */
    {1, 2, 112, 112, 3, 3, {1, 1, 1, 1}, 1, 0, 1, 1, 0, 2}, /* stride 2, 56x56 out: too many vectors */
    {1, 3, 28, 28, 3, 3, {1, 1, 1, 1}, 1, 0, 1, 1, 3, 2},   /* stride 2, 3x3 28 -> 14: the split costs more than it saves */
};

/* The first kernel's name of g compiled for t (malloc'd), NULL on failure. */
static char *first_kernel(ir_graph *g, const cg_target *t) {
  cgt_so s;
  if (cgt_so_open(&s, g, t, "kname")) return NULL;
  char *name = s.m->n_shards > 0 && s.m->shards[0].n_ops > 0 ? strdup(s.m->shards[0].kernel_names[0]) : NULL;
  cgt_so_close(&s);
  return name;
}

/* Passes 0..2: the targets (CNNC_TEST_QUICK: case i only in pass i % 3, test_codegen_harness.h
 * cgt_quick_skip); pass 3, NaN inputs: the first 4 cases. */
static void run_cases(const cg_target *t, const char *pfx, int pass) {
  size_t ncases = pass == 3 ? 4 : sizeof cases / sizeof *cases;
  for (size_t i = 0; i < ncases; i++) {
    if (pass < 3 && cgt_quick_skip(i, pass, 3)) continue;
    const dw_case *k = &cases[i];
    dw_geom d = {k->n, k->c, k->h, k->w, k->kh, k->kw, k->stride ? k->stride : 1, {k->pad[0], k->pad[1], k->pad[2], k->pad[3]},
                 k->dil, k->bias, k->bn, k->post};
    char label[200];
    ir_graph *g = dw_case_graph(&d, pfx, label, sizeof label);
    char *kn = first_kernel(g, t);
    CGT_CHECK(kn != NULL, "%s: no kernel name", label);
    if (kn) {
      int is_plane = strstr(kn, "conv2d_dw_plane") != NULL && dw_is_rows_kernel(g, t) != 1, want = k->plane == 2 ? t->vec_f32 >= 8 : k->plane;
      if (k->plane == 3) want = t->vec_f32 >= 8 ? 0 : is_plane;
      if (k->vmax && t->vec_f32 > k->vmax) want = 0;
      CGT_CHECK(is_plane == want, "%s: kernel %s, expected %s", label, kn, want ? "conv2d_dw_plane" : "another kernel");
      free(kn);
    }
    dw_case_done(g, t, label);
  }
}

int main(void) { return dw_main("test_codegen_dw", run_cases, 1); }
