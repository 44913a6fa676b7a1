/* test_codegen_bf16_kxk.c — the bf16 dot-product route for kxk / strided / padded convs
 * (codegen/gen_conv_bf16.c, gathered im2col panels; docs/matrix.md "bf16 kernels").
 *  1. Bitwise: input -> round16 -> conv (+bias) as the graph output: the compiled result equals
 *     a C model of the kernel's arithmetic — pair k = (tap k / kpc, channels 2 (k % kpc), +1),
 *     per pair acc = ftz(fma(x[odd], w[odd], acc)) then ftz(fma(x[even], w[even], acc)), padding
 *     read as 0 — on an AVX2 target with vdpbf16ps emulated (tune bf16_emulate=1), 1 and 2
 *     threads: 3x3 stride 1 and 2 (pad 1), 1x1 stride 2, 7x7 stride 2 pad 3, odd Cin, short
 *     last channel tiles, partial last vectors, maps narrower than a vector, several chunks,
 *     an unpadded 3x3 s1 (row segments apart), a 64 -> 64 3x3, a 3 -> 64 7x7 s2 stem
 *     (BF16_LOAD_MIN_CIN / _COUT); panels of
 *     row-segment loads, and every other case again with tune bf16_gather=1 (gathered panels:
 *     bitwise the same); a 3-channel stem, and with gathers a 64 -> 64 3x3, keep the f32
 *     kernels (BF16_GATHER_MIN_CIN / _COUT).  Pixel vectors across images (span_plan): 7x7 maps
 *     3x3 s1 / s2 and 1x1 s2 spanned (and not with tune bf16_span=0), once with gathers, and
 *     three earlier cases again with tune bf16_span_force=1; a 10x10 case spans on 16 lanes only; a
 *     flat 1x1 s1 on 17-pixel maps spanned (row-segment panels; tune bf16_flat_span=0: not).
 *     On a host with avx512bf16 the same cases also run natively (vdpbf16ps) against the model.
 *  2. The same graphs vs the interpreter within 5e-3 (docs/precision.md, bf16 route).
 *  3. tune bf16_kxk=0: these convs keep the f32 kernels (the A/B switch), 1x1 s1 ones not. */
#include "test_codegen_harness.h"

#include "bf16_case_check.h"

typedef bf16_case kcase;

static ir_graph *case_graph(const kcase *k) {
  ir_graph *g = bf16_conv_graph("bf16kxk", k->n, k->cin, k->h, k->w, k->cout, k->k, k->s, k->p);
  ir_diag d = {0};
  if (g) {
    cgt_random_params(g, 0.5f);
    if (pass_precision(g, "16.16", "bf16", 0, &d) <= 0) ir_diag_print(&d, stderr), ir_graph_free(g), g = NULL;
  }
  return g;
}

typedef struct kinds { int n, bf16; char kind[160]; } kinds;
static void kinds_layout(void *ctx, const cg_report_kernel *k, int n_k, const struct pass_fusion *plan, const cg_report_buffer *b, int n_b,
                         const int64_t *sb, int ns, const int *tv, int nt) {
  kinds *s = ctx;
  for (int i = 0; i < n_k; i++)
    if (!strncmp(k[i].kind, "conv2d", 6)) {
      s->n++;
      s->bf16 += strstr(k[i].kind, "_bf16_") != NULL;
      snprintf(s->kind, sizeof s->kind, "%s", k[i].kind);
    }
}
static kinds compile_kinds(ir_graph *g, const cg_target *t) {
  kinds s = {0};
  cg_report_sink rs = {&s, kinds_layout, NULL, NULL};
  if (bf16_compile_report(g, t, &rs)) s.n = -1;
  return s;
}

/* The kernel's arithmetic in C (see the header); out [n][cout][oh][ow]. */
static void model(const kcase *k, const float *x, const float *wt, const float *bs, int oh, int ow, float *out) {
  bf16_pairs_model(k, x, wt, bs, oh, ow, out, 0);
}

static void bitwise_case(const cg_target *t, const char *tn, const kcase *k) {
  char label[160];
  snprintf(label, sizeof label, "%s %dx%dx%dx%d k%d s%d p%d -> %d", tn, k->n, k->cin, k->h, k->w, k->k, k->s, k->p, k->cout);
  ir_graph *g = case_graph(k);
  if (!g) {
    cgt_failures++;
    return;
  }
  kinds ks = compile_kinds(g, t);
  CGT_CHECK(ks.n == 1 && ks.bf16 == 1, "%s: the conv is not on the bf16 route (%s)", label, ks.kind);
  fprintf(stderr, "%s: %s\n", label, ks.kind);
  bf16_check_case(g, t, k, model, label, sizeof label); /* 1. bitwise the model, 2. vs the interpreter */
  ir_graph_free(g);
}

static const kcase cases[] = {
    {2, 17, 97, 9, 11, 3, 1, 1},   /* odd Cin, 99 px: partial last vector */
    {1, 16, 100, 14, 14, 3, 2, 1}, /* stride 2: 7x7 out, short last tile */
    {2, 37, 96, 13, 13, 1, 2, 0},  /* strided 1x1 downsample, odd Cin */
    {1, 64, 130, 15, 15, 3, 1, 1}, /* 225 px: several tiles */
    {1, 64, 96, 60, 60, 3, 2, 1},  /* 900 px: several chunks, a short last one */
    {2, 19, 99, 17, 17, 7, 2, 3},  /* 7x7 stride 2 pad 3, odd Cin */
    {3, 16, 105, 3, 3, 3, 1, 1},   /* 9 px: the map is narrower than a vector */
    {2, 18, 96, 12, 13, 3, 1, 0},  /* stride 1 unpadded: row segments 11 wide, 2 inputs apart */
    {1, 64, 64, 14, 14, 3, 1, 1},  /* 64 out channels: the route with row-segment panels */
    {2, 3, 64, 20, 20, 7, 2, 3},   /* a 3-channel stem, row-segment panels (3 segments at 16 lanes) */
    {1, 16, 96, 40, 3, 3, 2, 1},   /* 2-wide output rows: > 4 segments per vector, the automatic gathers */
    {3, 16, 96, 7, 7, 3, 1, 1},    /* 7x7 maps (layer4-like): pixel vectors span images (span_plan) */
    {3, 20, 96, 14, 14, 3, 2, 1},  /* stride 2 to 7x7, spanned: per image and row segments */
    {3, 21, 100, 13, 13, 1, 2, 0}, /* 1x1 s2 to 7x7, spanned, odd Cin, short last tile */
    {3, 21, 100, 1, 17, 1, 1, 0},  /* flat 1x1 s1, 17 px: spanned (by 15 points), row-segment panels, odd Cin */
    {2, 18, 96, 10, 10, 3, 1, 1},  /* 100 px: spanned at 16 lanes only (96 vs 89 % of the lanes; 8: 100 vs 96 %) */
};
/* cases [SPAN0, nc) take spanned panels on AVX2 (8 lanes); the last one on 16 lanes only */
#define SPAN0 11

int main(void) {
  cgt_init_dir();
  ct_tune("bf16=2"); /* the bf16 kernels wherever the ISA has them: this test checks the kernels, not the route choice (codegen/cores.def) */
  cg_target avx2, host;
  if (cgt_target(&avx2, "x86-64-v3") || cgt_target(&host, NULL)) return 1;
  int nc = (int)(sizeof cases / sizeof cases[0]);
  ct_tune("bf16_emulate=1");
  for (int i = 0; i < nc; i++) bitwise_case(&avx2, "avx2 emulated", &cases[i]);
  /* spanned panels: taken where they fill the lanes better, never with tune bf16_span=0 */
  for (int i = SPAN0; i < nc; i++) {
    ir_graph *g = case_graph(&cases[i]);
    kinds k = g ? compile_kinds(g, &avx2) : (kinds){-1, 0, ""};
    CGT_CHECK(k.n == 1 && (strstr(k.kind, "_span") != NULL) == (i < nc - 1), "case %d spanned or not as planned: %s", i, k.kind);
    ct_tune("bf16_span=0");
    k = g ? compile_kinds(g, &avx2) : (kinds){-1, 0, ""};
    CGT_CHECK(k.n == 1 && !strstr(k.kind, "_span"), "bf16_span=0, case %d: %s", i, k.kind);
    ct_tune("bf16_span=1");
    if (cases[i].k == 1 && cases[i].s == 1) { /* a flat 1x1: tune bf16_flat_span=0 keeps the flat kernel */
      ct_tune("bf16_flat_span=0");
      k = g ? compile_kinds(g, &avx2) : (kinds){-1, 0, ""};
      CGT_CHECK(k.n == 1 && !strncmp(k.kind, "conv2d_1x1_", 11), "bf16_flat_span=0, case %d: %s", i, k.kind);
      ct_tune("bf16_flat_span=1");
    }
    ir_graph_free(g);
  }
  ct_tune("bf16_span_force=1"); /* spanned wherever allowed (n > 1, hw >= lanes): 3x3 s1 pad 1 (2 image */
  const int forced[3] = {0, 7, 9};   /* segments), unpadded (rows apart, and images), the 7x7 s2 stem */
  for (int i = 0; i < 3; i++) {
    ir_graph *g = case_graph(&cases[forced[i]]);
    kinds k = g ? compile_kinds(g, &avx2) : (kinds){-1, 0, ""};
    CGT_CHECK(k.n == 1 && strstr(k.kind, "_span"), "bf16_span_force=1, case %d not spanned: %s", forced[i], k.kind);
    ir_graph_free(g);
    bitwise_case(&avx2, "avx2 emulated, spanned", &cases[forced[i]]);
  }
  ct_tune("bf16_span_force=0");
  /* 3. the A/B switch: kxk / strided convs back on the f32 kernels */
  ct_tune("bf16_kxk=0");
  for (int i = 0; i < nc; i += 2) {
    if (cases[i].k == 1 && cases[i].s == 1) continue; /* flat 1x1s stay on the route */
    ir_graph *g = case_graph(&cases[i]);
    kinds k = g ? compile_kinds(g, &avx2) : (kinds){-1, 0, ""};
    CGT_CHECK(k.n == 1 && k.bf16 == 0, "bf16_kxk=0, case %d: %s", i, k.kind);
    ir_graph_free(g);
  }
  ct_tune("bf16_kxk=1");
  /* tune bf16_gather=1: the gathered panels, bitwise the same model (the odd-numbered cases) */
  ct_tune("bf16_gather=1");
  for (int i = 1; i < nc; i += 2)
    if (cases[i].cin >= 16 && cases[i].cout >= 96) bitwise_case(&avx2, "avx2 emulated, gathers", &cases[i]);
  {
    ir_graph *g = case_graph(&cases[SPAN0]);
    kinds k = g ? compile_kinds(g, &avx2) : (kinds){-1, 0, ""};
    CGT_CHECK(k.n == 1 && strstr(k.kind, "_span"), "bf16_gather=1, case %d not spanned: %s", SPAN0, k.kind);
    ir_graph_free(g);
  }
  bitwise_case(&avx2, "avx2 emulated, gathers, spanned", &cases[SPAN0]);
  /* fewer than 16 input or (gathered panels) 96 output channels: the f32 kernels */
  const kcase small[2] = {{1, 3, 96, 16, 16, 7, 2, 3}, {1, 64, 64, 14, 14, 3, 1, 1}};
  for (int i = 0; i < 2; i++) {
    ir_graph *gs = case_graph(&small[i]);
    kinds ks = gs ? compile_kinds(gs, &avx2) : (kinds){-1, 0, ""};
    CGT_CHECK(ks.n == 1 && ks.bf16 == 0, "%d -> %d %dx%d conv on the bf16 route (%s)", small[i].cin, small[i].cout,
              small[i].k, small[i].k, ks.kind);
    ir_graph_free(gs);
  }
  ct_tune("bf16_gather=0");
  ct_tune("bf16_kxk=0");
  kcase flat = {1, 16, 16, 8, 8, 1, 1, 0};
  ir_graph *g = case_graph(&flat);
  kinds kf = g ? compile_kinds(g, &avx2) : (kinds){-1, 0, ""};
  CGT_CHECK(kf.n == 1 && kf.bf16 == 1, "bf16_kxk=0: the flat 1x1 left the route (%s)", kf.kind);
  ir_graph_free(g);
  ct_tune("bf16_kxk=1,bf16_emulate=0");
  if (host.has_avx512bf16) /* the same cases on vdpbf16ps */
    for (int i = 0; i < nc; i++) bitwise_case(&host, "host avx512bf16", &cases[i]);
  else
    fprintf(stderr, "host without avx512bf16: native cases skipped\n");
  cg_target_dispose(&avx2);
  cg_target_dispose(&host);
  return cgt_done("test_codegen_bf16_kxk");
}
