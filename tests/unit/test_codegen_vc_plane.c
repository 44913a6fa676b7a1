/* test_codegen_vc_plane.c — the K-blocked plane route of kxk channel-vector convs
 * (codegen/gen_conv_vc.c, kind conv2d_vcp: one work item per (image, channel tile) plane):
 * plane tiles (the plane as one row of compile-time pixel tiles spanning output rows, taps
 * outside the input dropped) and, under tune vc_plane_tiles=0, row tiles over the plane.
 * Each case is compiled three ways: plane tiles, plane rows (both forced with tune vc_plane_force=1
 * on these small shapes; the .so must name a conv2d_vcp kernel) and the row kernels
 * (tune vc_plane=0; no conv2d_vcp kernel); each runs with 1 and 2 threads against the
 * interpreter and bitwise 1 vs 2 threads.  With tune vc_split=0 (no second accumulator set,
 * every accumulator summed in (ci, ky, kx) order on every route) the three routes must also
 * be bitwise equal to each other.  Stride 1 and 2, padded and unpadded, odd maps and
 * channels (remainder tiles), several K blocks, batch 1 and 3, fused residual / swish; AVX2
 * (V = 8) and SSE (V = 4). */
#include "test_codegen_harness.h"

#include "conv_case_check.h"

static const double TOL = 1e-4;

typedef struct pl_case {
  int n, cin, cout, h, w, k, s, pad;
  int epi; /* 0 bias only, 1 bn + relu, 2 bn + residual add (1x1 stride s conv of x) + relu, 3 bn + swish */
  const char *what;
} pl_case;

static const pl_case cases[] = {
    {1, 64, 32, 14, 14, 3, 2, 1, 1, "3x3 stride 2 14x14 -> 7x7 (layer4/0 shape), 3 K blocks"},
    {3, 70, 29, 14, 14, 3, 2, 1, 2, "3x3 stride 2 -> 7x7, rem tile of 13, residual, batch 3"},
    {1, 40, 24, 15, 13, 3, 2, 1, 3, "3x3 stride 2 odd map 15x13 -> 8x7, swish"},
    {1, 33, 16, 7, 7, 3, 1, 1, 1, "3x3 stride 1 7x7, odd channels, 2 K blocks"},
    {3, 20, 40, 14, 14, 3, 1, 1, 2, "3x3 stride 1 14x14, residual, batch 3"},
    {1, 30, 17, 9, 11, 3, 1, 0, 0, "3x3 stride 1 unpadded 9x11 -> 7x9, bias, rem tile of 1"},
    {1, 12, 16, 16, 16, 3, 2, 0, 1, "3x3 stride 2 unpadded 16x16 -> 7x7"},
    {1, 9, 8, 11, 11, 5, 2, 2, 1, "5x5 stride 2 padded 11x11 -> 6x6"},
};

/* Compiles the case (one route, chosen by the knobs: ct_tune), runs it with 1 and 2 threads
 * against the interpreter, checks 1 vs 2 threads bitwise and the route (the .so names a
 * conv2d_vcp kernel or not); the 1-thread output is returned (ny floats, malloc'd; NULL on
 * failure). */
static float *run_case(const pl_case *k, const cg_target *t, const char *pfx, int want_plane, int64_t *ny_out) {
  char label[300];
  snprintf(label, sizeof label, "%s: %s (n%d %d->%d %dx%d k%d s%d p%d)", pfx, k->what, k->n, k->cin, k->cout, k->h, k->w,
           k->k, k->s, k->pad);
  cgt_rng = 0x1234567u; /* the same parameters and input for every route */
  cgt_conv c = {"vcp", "conv", NULL, NULL, k->n, k->cin, k->cout, k->h, k->w, k->k, k->k, k->s, {k->pad, k->pad, k->pad, k->pad}, 1};
  cgt_conv_epi(&c, k->epi);
  ir_graph *g = cgt_conv_graph(&c);
  cgt_random_params(g, 0.5f);
  cgt_ref r = cgt_ref_make(g);
  float *y1 = malloc((size_t)r.ny * sizeof *y1);
  cgt_so s;
  if (cgt_so_open(&s, g, t, label)) {
    cgt_failures++;
    free(y1), y1 = NULL;
  } else {
    CGT_CHECK(cgt_file_has(s.path, "conv2d_vcp") == want_plane, "%s: conv2d_vcp kernel %s", label, want_plane ? "missing" : "present");
    cgt_so_runs(&s, &r, TOL, 2, 0, label, y1);
    cgt_so_close(&s);
  }
  *ny_out = r.ny;
  cgt_free_case(g, &r);
  return y1;
}

/* The three routes of one case; nosplit: they must be bitwise equal. */
static void check_case(const pl_case *k, const cg_target *t, const char *tname, int nosplit) {
  char pfx[64];
  float *y[3] = {NULL, NULL, NULL};
  int64_t ny = 0;
  static const char *route[3] = {"plane tiles", "plane rows", "row kernels"};
  for (int r = 0; r < 3; r++) {
    ct_tune("vc_plane_force=1");
    if (r >= 1) ct_tune("vc_plane_tiles=0");
    if (r == 2) ct_tune("vc_plane=0");
    snprintf(pfx, sizeof pfx, "%s%s %s", tname, nosplit ? " no split" : "", route[r]);
    y[r] = run_case(k, t, pfx, r < 2, &ny);
    ct_tune("vc_plane_force=0,vc_plane_tiles=1,vc_plane=1");
  }
  if (nosplit && y[0] && y[1] && y[2]) {
    CGT_CHECK(memcmp(y[0], y[2], (size_t)ny * sizeof(float)) == 0, "%s: %s: plane tiles and row kernels not bitwise equal", tname, k->what);
    CGT_CHECK(memcmp(y[1], y[2], (size_t)ny * sizeof(float)) == 0, "%s: %s: plane rows and row kernels not bitwise equal", tname, k->what);
  }
  for (int r = 0; r < 3; r++) free(y[r]);
}

int main(void) {
  cgt_init_dir();
  cg_target avx2, sse;
  if (cgt_target(&avx2, "x86-64-v3") || cgt_target(&sse, "x86-64")) return 1;
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) check_case(&cases[i], &avx2, "avx2", 0);
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) check_case(&cases[i], &sse, "sse", 0);
  ct_tune("vc_split=0");
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) check_case(&cases[i], &avx2, "avx2", 1);
  ct_tune("vc_split=1");
  cg_target_dispose(&avx2);
  cg_target_dispose(&sse);
  return cgt_done("test_codegen_vc_plane");
}
