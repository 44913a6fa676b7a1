/* test_codegen_vc_imgpanel.c — two routes of codegen/gen_conv_vc.c that move data, not
 * arithmetic: image panels of strided per-row 1x1 channel-vector convs (vc_img_panel: every
 * output row's gathered input kept for the image, one key per row, so later blocks of channel
 * tiles read it back instead of gathering again) and the weight prefetch of the K-blocked 1x1
 * rows (vc_w_pf_dist), the next-block weight prefetch spread over a block's tiles
 * (vc_w_spread: K-blocked 1x1 rows and 3x3 plane tiles) and the block-variant buffer pointer
 * of the K-blocked 1x1 rows (vc_kb_buf).  Each case is compiled with its route on (default)
 * and off (tune vc_img_panel=0 / tune vc_w_prefetch=0 / tune vc_w_spread=0 /
 * tune vc_kbuf_hoist=1); the LLVM IR must show the route's mark (the per-row keys /
 * llvm.prefetch / the %wspf prefetches / the %kbuf_kb pointer) only when on; both builds run with 1 and 2 threads, must
 * match the interpreter, and the four outputs must be bitwise equal.  Cases: several blocks of channel tiles (rows revisited across blocks), batch 1
 * and 2-3 (a new image must re-gather every row), odd maps, channels not multiples of 8 (a
 * remainder channel tile), bias only / BN + relu / BN + residual add + relu, stride 2 and 3,
 * AVX2 (V = 8) and SSE (V = 4) targets. */
#include "test_codegen_harness.h"

#include "conv_case_check.h"

static const double TOL = 1e-4;

typedef struct ip_case {
  int n, cin, cout, h, w, s, sw; /* sw: which switch (0 image panel, 1 weight prefetch, 2 spread prefetch, 3 kbuf pointer) */
  int epi; /* 0 bias only, 1 bn + relu, 2 bn + residual add (a second conv of x) + relu */
  const char *what;
  int k; /* kernel size (0: 1), padding k/2 */
} ip_case;

static const ip_case cases[] = {
    {1, 256, 300, 28, 28, 2, 0, 1, "28x28 -> 14x14, 19 channel tiles in blocks (rows revisited), rem tile of 12"},
    {3, 256, 300, 27, 25, 2, 0, 2, "odd map 27x25 -> 14x13, residual, batch 3"},
    {3, 37, 21, 31, 33, 2, 0, 0, "odd channels 37 -> 21 (rem tile of 5), 31x33 -> 16x17, bias only, batch 3"},
    {1, 20, 44, 46, 50, 3, 0, 1, "stride 3, 46x50 -> 16x17"},
    {2, 512, 64, 28, 28, 2, 0, 2, "512 -> 64 on 28x28 -> 14x14, residual, batch 2"},
    /* weight prefetch of the K-blocked rows: 7x7 GEMMs (K-blocked, one block), a sub conv */
    {1, 1040, 40, 7, 7, 1, 1, 2, "7x7 1x1 GEMM, K-blocked panel, rem tile of 8, residual"},
    {3, 37, 29, 7, 7, 1, 1, 1, "7x7 1x1 GEMM, odd channels, batch 3"},
    {3, 600, 50, 14, 14, 2, 1, 2, "sub conv 14x14 -> 7x7, K-blocked, residual, batch 3"},
    {1, 30, 27, 15, 15, 2, 1, 0, "sub conv 15x15 -> 8x8 (odd map), bias only"},
    /* spread prefetch of the next block's weights: K-blocked 1x1 rows, sub convs, 3x3 planes */
    {1, 1040, 40, 7, 7, 1, 2, 2, "7x7 1x1 GEMM, K-blocked panel, rem tile of 8, residual", 0},
    {3, 600, 50, 14, 14, 2, 2, 1, "sub conv 14x14 -> 7x7, K-blocked, batch 3", 0},
    {2, 256, 40, 14, 14, 2, 2, 1, "3x3 s2 14x14 -> 7x7, plane tiles in blocks, rem tile of 8, batch 2", 3},
    {1, 130, 24, 13, 13, 1, 2, 2, "3x3 s1 13x13, plane tiles in blocks of odd size, residual", 3},
    /* the K-blocked rows' buffer pointer varying with the block */
    {3, 600, 50, 14, 14, 2, 3, 2, "sub conv 14x14 -> 7x7, K-blocked, residual, batch 3", 0},
};

/* The case's graph: a kxk conv (padding k/2) with the epilogue epi (cgt_conv_epi). */
static ir_graph *case_graph(const ip_case *k) {
  int kk = k->k ? k->k : 1, pd = kk / 2;
  cgt_conv c = {"ip", "conv", NULL, NULL, k->n, k->cin, k->cout, k->h, k->w, kk, kk, k->s, {pd, pd, pd, pd}, 1};
  cgt_conv_epi(&c, k->epi);
  return cgt_conv_graph(&c);
}

static const char *const sw_off[4] = {"vc_img_panel=0", "vc_w_prefetch=0", "vc_w_spread=0", "vc_kbuf_hoist=1"};
static const char *const sw_def[4] = {"vc_img_panel=1", "vc_w_prefetch=1", "vc_w_spread=1", "vc_kbuf_hoist=0"};
static const char *const sw_mark[4] = {"vcpanel_keys", "@llvm.prefetch", "%wspf", "%kbuf_kb"};
static const char *const sw_name[4] = {"image panel", "weight prefetch", "spread prefetch", "kbuf pointer"};

/* Whether the LLVM IR of g for t has the mark of switch sw's route. */
static int has_route(ir_graph *g, const cg_target *t, int sw) {
  cgt_ir ir;
  int found = cgt_ir_open(&ir, g, t, "ip");
  while (cgt_ir_next(&ir)) found |= strstr(ir.line, sw_mark[sw]) != NULL;
  return found;
}

static void check_case(const ip_case *k, const cg_target *t, const char *pfx, int strict) {
  char label[300];
  snprintf(label, sizeof label, "%s: %s (n%d %d->%d %dx%d s%d)", pfx, k->what, k->n, k->cin, k->cout, k->h, k->w, k->s);
  ir_graph *g = case_graph(k);
  cgt_random_params(g, 0.5f);
  cgt_ref r = cgt_ref_make(g);
  float *out[2] = {NULL, NULL}; /* route off/on, 1 thread */
  for (int on = 0; on <= 1; on++) {
    if (!on) ct_tune(sw_off[k->sw]);
    if (k->sw == 1) ct_tune("vc_w_spread=0");  /* its mark: the other prefetches only */
    if (k->k > 1) ct_tune("vc_plane_force=1"); /* plane tiles whatever the L2 budget */
    char l2[360];
    snprintf(l2, sizeof l2, "%s [%s %s]", label, sw_name[k->sw], on ? "on" : "off");
    int has = has_route(g, t, k->sw);
    /* AVX2: every case takes its route; SSE (V = 4, other tile sizes) may make a case a sub
     * conv (no image panel), but never shows the keys with the route off */
    CGT_CHECK(strict ? has == on : has >= 0 && has <= on, "%s: route's mark in the IR: %d, want %d", l2, has, on);
    out[on] = malloc((size_t)r.ny * sizeof(float)); /* 1 and 2 threads vs the interpreter, bitwise equal */
    if (cgt_check_so(g, t, l2, &r, TOL, 2, out[on])) free(out[on]), out[on] = NULL;
    ct_tune(sw_def[k->sw]);
    ct_tune("vc_w_spread=1,vc_plane_force=0");
  }
  if (out[0] && out[1])
    CGT_CHECK(memcmp(out[0], out[1], (size_t)r.ny * sizeof(float)) == 0, "%s: %s on/off not bitwise equal", label, sw_name[k->sw]);
  free(out[0]), free(out[1]);
  cgt_free_case(g, &r);
}

int main(void) {
  cgt_init_dir();
  cg_target avx2, sse;
  if (cgt_target(&avx2, "x86-64-v3") || cgt_target(&sse, "x86-64")) return 1;
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) check_case(&cases[i], &avx2, "avx2", 1);
  /* SSE: the odd image-panel cases (time); its 7x7 GEMMs may take pixel vectors, whose flat
   * convs prefetch too, so weight-prefetch cases run on AVX2 only */
  for (size_t i = 1; i <= 2; i++) check_case(&cases[i], &sse, "sse", 0);
  cg_target_dispose(&avx2);
  cg_target_dispose(&sse);
  return cgt_done("test_codegen_vc_imgpanel");
}
