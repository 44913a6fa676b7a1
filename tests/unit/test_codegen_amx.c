/* test_codegen_amx.c — the AMX microkernel of the bf16 conv route (conv/bf16.c amx_tile,
 * cg_isa.c cg_amx_*; docs/matrix.md "AMX"), on any host.
 *  1. Emulated (tune amx=2) on an AVX2 (x86-64-v3) target: input -> round16 -> conv (+bias)
 *     as the graph output, bitwise a C model of the emulation's arithmetic — pair k in order
 *     (tap-major, as the vdpbf16ps route), per pair acc = ftz(fma(x[odd], w[odd], acc)) then
 *     ftz(fma(x[even], w[even], acc)), then the zero pairs up to the next multiple of 16 (the
 *     K padding of the tiles: acc + 0, so a -0 sum becomes +0) — with 1 and 2 threads, and vs
 *     the interpreter within 5e-3: flat 1x1s with odd Cin (K padded), Cout of 16, 17, 40 and
 *     100 (one A tile, a short second one, short last channel tiles), 1, 2 and partial pixel
 *     vectors, several chunks; kxk / strided / padded convs with row-segment and gathered
 *     panels and pixel vectors spanning images.  The model without the padding steps must
 *     differ on a case with a -0 sum (the check can fail).
 *  2. The route: tune amx=0 gives the vdpbf16ps kernels back (kind without "amx"); a
 *     sapphirerapids target (AMX-BF16 in LLVM's CPU definition) takes the native kernels
 *     (kind "_amxbf16"), and not with --target-features -amx-bf16... (has_amx_bf16 0).
 *  3. On a host with AMX (has_amx_bf16): the cases natively (tdpbf16ps), each output within
 *     5 * 2^-24 * sum |x w| + 2^-24 |out| of the exact sum (AMX's order is not reproducible;
 *     docs/precision.md), and 1 and 2 threads bitwise equal.  Elsewhere: printed as skipped. */
#include "test_codegen_harness.h"

#include "bf16_case_check.h"

typedef bf16_case kcase;

static ir_graph *case_graph(const kcase *k) {
  ir_graph *g = bf16_conv_graph("amx", k->n, k->cin, k->h, k->w, k->cout, k->k, k->s, k->p);
  ir_diag d = {0};
  if (g) {
    cgt_random_params(g, 0.5f);
    if (pass_precision(g, "16.16", "bf16", 0, &d) <= 0) ir_diag_print(&d, stderr), ir_graph_free(g), g = NULL;
  }
  return g;
}

typedef conv_kinds kinds;
static kinds compile_kinds(ir_graph *g, const cg_target *t) { return conv_kinds_of(g, t, "amx"); }

static int g_pad = 1; /* the model adds the K padding's zero steps */

/* The emulated kernel's arithmetic (see the header; without the padding steps when g_pad is 0). */
static void model(const kcase *k, const float *x, const float *wt, const float *bs, int oh, int ow, float *out) {
  bf16_pairs_model(k, x, wt, bs, oh, ow, out, g_pad);
}

static void emulated_case(const cg_target *t, const char *tn, const kcase *k) {
  char label[200];
  snprintf(label, sizeof label, "%s %dx%dx%dx%d k%d s%d p%d -> %d", tn, k->n, k->cin, k->h, k->w, k->k, k->s, k->p, k->cout);
  ir_graph *g = case_graph(k);
  if (!g) {
    cgt_failures++;
    return;
  }
  kinds ks = compile_kinds(g, t);
  CGT_CHECK(ks.n == 1 && ks.hit == 1 && strstr(ks.kind, "_amxemu"), "%s: the conv is not on the emulated AMX kernels (%s)", label, ks.kind);
  fprintf(stderr, "%s: %s\n", label, ks.kind);
  bf16_check_case(g, t, k, model, label, sizeof label); /* bitwise the model, then vs the interpreter */
  ir_graph_free(g);
}

/* Native AMX: every output within the bound of the exact (double) sum; 1 and 2 threads equal. */
static void native_case(const cg_target *t, const kcase *k) {
  char label[160];
  snprintf(label, sizeof label, "native AMX %dx%dx%dx%d k%d s%d p%d -> %d", k->n, k->cin, k->h, k->w, k->k, k->s, k->p, k->cout);
  ir_graph *g = case_graph(k);
  if (!g) {
    cgt_failures++;
    return;
  }
  kinds ks = compile_kinds(g, t);
  CGT_CHECK(ks.n == 1 && strstr(ks.kind, "_amxbf16"), "%s: not on the AMX kernels (%s)", label, ks.kind);
  int oh = (k->h + 2 * k->p - k->k) / k->s + 1, ow = (k->w + 2 * k->p - k->k) / k->s + 1, taps = k->k * k->k;
  int64_t nx = (int64_t)k->n * k->cin * k->h * k->w, ny = (int64_t)k->n * k->cout * oh * ow;
  float *x = malloc((size_t)nx * 4);
  for (int64_t i = 0; i < nx; i++) x[i] = cgt_uniform(-1.0f, 1.0f);
  const float *wt = g->values[ir_find_value(g, "c/weight")].data, *bs = g->values[ir_find_value(g, "c/bias")].data;
  cgt_so s;
  if (cgt_so_open(&s, g, t, label)) {
    cgt_failures++;
    free(x), ir_graph_free(g);
    return;
  }
  float *got1 = cgt_run_copy(s.m, x, nx, 1), *got2 = cgt_run_copy(s.m, x, nx, 2);
  int64_t bad = 0, diff = 0;
  for (int b = 0; b < k->n; b++)
    for (int co = 0; co < k->cout; co++)
      for (int oy = 0; oy < oh; oy++)
        for (int ox = 0; ox < ow; ox++) {
          double sum = 0, mag = 0;
          for (int tap = 0; tap < taps; tap++) {
            int iy = oy * k->s + tap / k->k - k->p, ix = ox * k->s + tap % k->k - k->p;
            if (iy < 0 || iy >= k->h || ix < 0 || ix >= k->w) continue;
            for (int ci = 0; ci < k->cin; ci++) {
              double p = (double)bf16_in(x[(((int64_t)b * k->cin + ci) * k->h + iy) * k->w + ix]) *
                         (double)ftz(wt[((int64_t)co * k->cin + ci) * taps + tap]);
              sum += p, mag += fabs(p);
            }
          }
          int64_t o = (((int64_t)b * k->cout + co) * oh + oy) * ow + ox;
          double want = sum + bs[co], bound = 5.0 * ldexp(mag, -24) + ldexp(fabs(want), -24) + 1e-37;
          if (fabs((double)got1[o] - want) > bound && bad++ < 3)
            fprintf(stderr, "%s: output %lld: %.9g vs %.9g (bound %.3g)\n", label, (long long)o, got1[o], want, bound);
          diff += bits(got1[o]) != bits(got2[o]);
        }
  CGT_CHECK(bad == 0, "%s: %lld of %lld outputs outside the AMX error bound", label, (long long)bad, (long long)ny);
  CGT_CHECK(diff == 0, "%s: %lld outputs differ between 1 and 2 threads", label, (long long)diff);
  free(got1), free(got2), free(x);
  cgt_so_close(&s);
  ir_graph_free(g);
}

static const kcase cases[] = {
    {2, 37, 40, 9, 11, 1, 1, 0},    /* flat 1x1, odd Cin (19 pairs: padded to 32), 99 px: a partial vector, short second A tile */
    {1, 64, 100, 14, 14, 1, 1, 0},  /* 32 pairs (2 K steps), 196 px, a short last channel tile (100 = 3 x 32 + 4) */
    {3, 5, 17, 4, 4, 1, 1, 0},      /* 16 px per image, 17 channels: one pixel vector (P 1), one and a short A tile */
    {1, 32, 16, 60, 60, 1, 1, 0},   /* 3600 px: several chunks, one A tile (R 16) */
    {2, 17, 97, 9, 11, 3, 1, 1},    /* 3x3 pad 1, odd Cin, row-segment panel */
    {1, 16, 100, 14, 14, 3, 2, 1},  /* stride 2 */
    {2, 37, 96, 13, 13, 1, 2, 0},   /* strided 1x1 */
    {2, 19, 99, 17, 17, 7, 2, 3},   /* 7x7 stride 2 pad 3 */
    {3, 16, 96, 7, 7, 3, 1, 1},     /* 7x7 maps: pixel vectors span images */
    {1, 64, 64, 14, 14, 3, 1, 1},   /* 64 -> 64 3x3 (288 pairs: 18 K steps) */
};

int main(void) {
  cgt_init_dir();
  cg_target avx2, spr, host;
  if (cgt_target(&avx2, "x86-64-v3") || cgt_target(&spr, "sapphirerapids") || cgt_target(&host, NULL)) return 1;
  int nc = (int)(sizeof cases / sizeof cases[0]);
  /* 1. emulated tiles */
  ct_tune("amx=2");
  for (int i = 0; i < nc; i++) emulated_case(&avx2, "avx2, AMX emulated", &cases[i]);
  ct_tune("bf16_gather=1"); /* gathered panels under the tiles (Cin >= 16, Cout >= 96) */
  emulated_case(&avx2, "avx2, AMX emulated, gathers", &cases[5]);
  ct_tune("bf16_gather=0");
  { /* the padding steps are seen: channel 0's products are negative denormals (1e-20 x
     * -1e-20), each step flushes them to -0, so its sums are -0 until the padding's +0 steps
     * make them +0; with bias -0 the outputs keep the sign: the model without the padding steps
     * must differ (5 channels: 3 pairs, 13 padding pairs) */
    const kcase k = {1, 5, 16, 4, 4, 1, 1, 0};
    ir_graph *g = case_graph(&k);
    float *w = g ? g->values[ir_find_value(g, "c/weight")].data : NULL;
    if (w) {
      float *bs = g->values[ir_find_value(g, "c/bias")].data, x[5 * 16], want[16 * 16];
      for (int ci = 0; ci < 5; ci++) w[ci] = ir_round16_f32(-1e-20f, IR_HALF_BF16);
      bs[0] = -0.0f;
      for (int i = 0; i < 5 * 16; i++) x[i] = 1e-20f;
      g_pad = 0;
      model(&k, x, w, bs, 4, 4, want);
      g_pad = 1;
      CGT_CHECK(bits(want[0]) == 0x80000000u, "the no-padding model's channel 0 is not -0 (%a)", want[0]);
      int f0 = cgt_failures;
      fprintf(stderr, "expected to differ (the check can fail):\n");
      int64_t d = bf16_check_model(g, &avx2, "no-padding model", x, 5 * 16, want, 16 * 16, "the model without the padding");
      cgt_failures = f0;
      CGT_CHECK(d > 0, "the model without the K padding steps matched: the check cannot fail");
      model(&k, x, w, bs, 4, 4, want);
      bf16_check_model(g, &avx2, "zero sums", x, 5 * 16, want, 16 * 16, "the model");
      ir_graph_free(g);
    } else
      cgt_failures++;
  }
  /* 2. the route */
  ct_tune("amx=0,bf16=2,bf16_emulate=1");
  {
    ir_graph *g = case_graph(&cases[0]);
    kinds k = g ? compile_kinds(g, &avx2) : (kinds){-1, 0, NULL, ""};
    CGT_CHECK(k.n == 1 && k.hit == 0 && strstr(k.kind, "_bf16_"), "tune amx=0: %s", k.kind);
    ir_graph_free(g);
  }
  ct_tune("amx=1,bf16=1,bf16_emulate=0");
  CGT_CHECK(spr.has_amx_bf16 && !avx2.has_amx_bf16, "has_amx_bf16: sapphirerapids %d, x86-64-v3 %d", spr.has_amx_bf16, avx2.has_amx_bf16);
  for (int i = 0; i < nc; i += 3) { /* compiled for the AMX target (not run here): the native kernels */
    ir_graph *g = case_graph(&cases[i]);
    kinds k = g ? compile_kinds(g, &spr) : (kinds){-1, 0, NULL, ""};
    CGT_CHECK(k.n == 1 && strstr(k.kind, "_amxbf16"), "sapphirerapids, case %d: %s", i, k.kind);
    ir_graph_free(g);
  }
  {
    cg_target noamx;
    ir_diag d = {0};
    if (cg_target_init(&noamx, NULL, "sapphirerapids", "-amx-bf16", &d)) {
      ir_diag_print(&d, stderr);
      cgt_failures++;
    } else {
      CGT_CHECK(!noamx.has_amx_bf16, "sapphirerapids with -amx-bf16 still has AMX");
      cg_target_dispose(&noamx);
    }
  }
  /* 3. natively */
  if (host.has_amx_bf16)
    for (int i = 0; i < nc; i++) native_case(&host, &cases[i]);
  else
    fprintf(stderr, "host without AMX (cpu %s): native cases skipped; the emulated kernels and the compile for sapphirerapids ran\n", host.cpu);
  cg_target_dispose(&avx2);
  cg_target_dispose(&spr);
  cg_target_dispose(&host);
  return cgt_done("test_codegen_amx");
}
