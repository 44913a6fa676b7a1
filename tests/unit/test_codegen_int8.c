/* test_codegen_int8.c — the int8 conv route (--precision int8; conv/bf16.c with 4 channels a
 * dword, vpdpbusd; docs/matrix.md "int8 kernels").
 *  1. input -> quantize8 (u8 0..255 or s8 -128..127, inv 20) -> conv (integer weights in
 *     -127..127, no bias) as the graph output: bitwise the exact integer sum converted to f32
 *     (a C model in int64), 1 and 2 threads: flat 1x1s (Cin 5, 64, 37: a short last dword),
 *     3x3 s1 / s2, 1x1 s2, 7x7 s2 pad 3 on 3 channels, maps narrower than a vector, spanned
 *     pixel vectors, gathered panels (tune bf16_gather=1); s8 inputs exercise the +128 storage
 *     and the weights' compensation (padding reads 0, stored as 128).  Emulated (tune int8=2) on
 *     AVX2, natively on a host with avx512vnni (else said so).
 *     The vpmaddwd kernels (2 s16 channels a dword; tune int8=1 without VNNI): the same cases on
 *     x86-64-v3 (natively on any AVX2 host), some on x86-64-v4 where the host has AVX-512.
 *     AMX tdpbsud emulated (tune amx=2, `__avx2_amx8emu`): the same cases; natively (`__amxint8`)
 *     on a host with amx-int8, bitwise too (integer sums are exact in any order).
 *  2. The route: tune int8=0 keeps the f32 kernels; a target without avx512vnni takes
 *     vpmaddwd (`__avx512_pmaddwd`, `__avx2_pmaddwd`), znver4 `__avx512vnni`, sapphirerapids
 *     AMX `__amxint8` (tune amx=0: `__avx512vnni`; tune int8=3: vpmaddwd). */
#include "test_codegen_harness.h"

#include "bf16_case_check.h"

typedef struct icase { int n, cin, cout, h, w, k, s, p, s8; } icase;

static ir_graph *case_graph(const icase *k) {
  ir_graph *g = ir_graph_new("int8conv", k->n);
  ir_shape xs = {.rank = 4, .dim = {k->n, k->cin, k->h, k->w}};
  ir_shape ws = {.rank = 4, .dim = {k->cout, k->cin, k->k, k->k}};
  int x = ir_add_input(g, "input", IR_F32, xs);
  ir_attr qa = {.quantize8 = {20.0f, k->s8 ? -128 : 0, k->s8 ? 127 : 255}};
  int q = cgt_node(g, IR_OP_quantize8, "q", &x, 1, &qa);
  int w = ir_add_param(g, "c/weight", ws, 1);
  for (int64_t i = 0; i < ir_shape_numel(&ws); i++) g->values[w].data[i] = (float)cgt_int(-127, 127);
  ir_attr ca = {.conv2d = {{k->k, k->k}, {k->s, k->s}, {k->p, k->p, k->p, k->p}, {1, 1}, 1}};
  int in[2] = {q, w};
  int y = cgt_node(g, IR_OP_conv2d, "c", in, 2, &ca);
  g->outputs[g->n_outputs++] = y;
  return g;
}

typedef conv_kinds kinds;
static kinds compile_kinds(ir_graph *g, const cg_target *t) { return conv_kinds_of(g, t, "_int8_"); }

static void check_case(const cg_target *t, const char *tn, const icase *k, const char *want_isa) {
  char label[200];
  snprintf(label, sizeof label, "%s %dx%dx%dx%d k%d s%d p%d -> %d %s", tn, k->n, k->cin, k->h, k->w, k->k, k->s, k->p, k->cout,
           k->s8 ? "s8" : "u8");
  ir_graph *g = case_graph(k);
  kinds ks = compile_kinds(g, t);
  CGT_CHECK(ks.n == 1 && ks.hit == 1 && strstr(ks.kind, want_isa), "%s: not on the int8 route (%s)", label, ks.kind);
  fprintf(stderr, "%s: %s\n", label, ks.kind);
  int oh = (k->h + 2 * k->p - k->k) / k->s + 1, ow = (k->w + 2 * k->p - k->k) / k->s + 1, taps = k->k * k->k;
  int64_t nx = (int64_t)k->n * k->cin * k->h * k->w, ny = (int64_t)k->n * k->cout * oh * ow;
  float *x = malloc((size_t)nx * 4), *want = malloc((size_t)ny * 4);
  for (int64_t i = 0; i < nx; i++) x[i] = cgt_uniform(k->s8 ? -7.0f : -1.0f, 14.0f); /* beyond both clamps */
  const float *w = g->values[ir_find_value(g, "c/weight")].data;
  const ir_quantize8_attr *qa = &g->nodes[0].attr.quantize8;
  for (int b = 0; b < k->n; b++)
    for (int co = 0; co < k->cout; co++)
      for (int oy = 0; oy < oh; oy++)
        for (int ox = 0; ox < ow; ox++) {
          int64_t acc = 0;
          for (int ci = 0; ci < k->cin; ci++)
            for (int tap = 0; tap < taps; tap++) {
              int iy = oy * k->s + tap / k->k - k->p, ix = ox * k->s + tap % k->k - k->p;
              if (iy < 0 || iy >= k->h || ix < 0 || ix >= k->w) continue;
              float q = ir_quantize8_f32(x[(((int64_t)b * k->cin + ci) * k->h + iy) * k->w + ix], qa->inv, qa->lo, qa->hi);
              acc += (int64_t)q * (int64_t)w[((int64_t)co * k->cin + ci) * taps + tap];
            }
          want[(((int64_t)b * k->cout + co) * oh + oy) * ow + ox] = (float)acc;
        }
  cgt_so s;
  if (cgt_so_open(&s, g, t, label)) {
    cgt_failures++;
  } else {
    for (int nth = 1; nth <= 2; nth++) {
      float *got = cgt_run_copy(s.m, x, nx, nth);
      int64_t diff = 0, first = -1;
      for (int64_t i = 0; i < ny; i++)
        if (memcmp(&got[i], &want[i], 4) && diff++ == 0) first = i;
      CGT_CHECK(diff == 0, "%s, %d thread(s): %lld of %lld outputs differ from the exact sum (first %lld: %.9g vs %.9g)", label,
                nth, (long long)diff, (long long)ny, (long long)first, first >= 0 ? got[first] : 0.0, first >= 0 ? want[first] : 0.0);
      free(got);
    }
    cgt_so_close(&s);
  }
  free(x), free(want);
  ir_graph_free(g);
}

static const icase cases[] = {
    {2, 5, 40, 9, 11, 1, 1, 0, 0},    /* flat 1x1, Cin 5: one whole and one short dword, 99 px */
    {1, 64, 100, 14, 14, 1, 1, 0, 1}, /* flat, s8 inputs */
    {3, 37, 17, 4, 4, 1, 1, 0, 1},    /* 16 px, 17 channels */
    {2, 17, 97, 9, 11, 3, 1, 1, 0},   /* 3x3 pad 1, Cin 17 */
    {1, 16, 100, 14, 14, 3, 2, 1, 1}, /* stride 2, s8: padding stored as 128 */
    {2, 37, 96, 13, 13, 1, 2, 0, 0},  /* strided 1x1 */
    {2, 3, 64, 20, 20, 7, 2, 3, 1},   /* a 3-channel 7x7 s2 stem, s8 */
    {3, 16, 96, 3, 3, 3, 1, 1, 0},    /* 9 px maps */
    {3, 16, 96, 7, 7, 3, 1, 1, 1},    /* 7x7 maps: spanned */
    {1, 64, 64, 14, 14, 3, 1, 1, 0},  /* 64 -> 64 3x3 */
};

int main(void) {
  cgt_init_dir();
  cg_target avx2, host, v4, spr, zn4;
  if (cgt_target(&avx2, "x86-64-v3") || cgt_target(&host, NULL) || cgt_target(&v4, "x86-64-v4") ||
      cgt_target(&spr, "sapphirerapids") || cgt_target(&zn4, "znver4"))
    return 1;
  int nc = (int)(sizeof cases / sizeof cases[0]);
  ct_tune("int8=2");
  for (int i = 0; i < nc; i++) check_case(&avx2, "avx2 emulated", &cases[i], "_avx2_vnniemu");
  ct_tune("bf16_gather=1");
  check_case(&avx2, "avx2 emulated, gathers", &cases[4], "_avx2_vnniemu");
  ct_tune("bf16_gather=0");
  /* vpmaddwd on 16-bit pairs: natively on every AVX2 host (x86-64-v3, and zmm on x86-64-v4 where the host has AVX-512) */
  ct_tune("int8=1");
  for (int i = 0; i < nc; i++) check_case(&avx2, "avx2 pmaddwd", &cases[i], "_avx2_pmaddwd");
  ct_tune("bf16_gather=1");
  check_case(&avx2, "avx2 pmaddwd, gathers", &cases[4], "_avx2_pmaddwd");
  ct_tune("bf16_gather=0");
  if (host.vec_f32 >= 16)
    for (int i = 0; i < nc; i += 3) check_case(&v4, "x86-64-v4 pmaddwd", &cases[i], "_avx512_pmaddwd");
  else
    fprintf(stderr, "host without AVX-512 (cpu %s): x86-64-v4 pmaddwd cases skipped\n", host.cpu);
  /* AMX tdpbsud, emulated (tune amx=2): 16-row tiles, K padded to 16 dwords of 4 bytes */
  ct_tune("amx=2");
  for (int i = 0; i < nc; i++) check_case(&avx2, "avx2 AMX int8 emulated", &cases[i], "_avx2_amx8emu");
  ct_tune("amx=1");
  /* 2. the route */
  ct_tune("int8=0");
  {
    ir_graph *g = case_graph(&cases[0]);
    kinds k = compile_kinds(g, &spr);
    CGT_CHECK(k.n == 1 && k.hit == 0, "tune int8=0: %s", k.kind);
    ir_graph_free(g);
  }
  ct_tune("int8=1");
  {
    ir_graph *g = case_graph(&cases[1]);
    kinds k = compile_kinds(g, &v4);
    CGT_CHECK(k.n == 1 && strstr(k.kind, "_int8_s8_") && strstr(k.kind, "__avx512_pmaddwd"), "x86-64-v4 (no avx512vnni): %s", k.kind);
    k = compile_kinds(g, &spr);
    CGT_CHECK(k.n == 1 && strstr(k.kind, "_int8_s8_") && strstr(k.kind, "__amxint8"), "sapphirerapids: %s", k.kind);
    ct_tune("amx=0");
    k = compile_kinds(g, &spr);
    CGT_CHECK(k.n == 1 && strstr(k.kind, "_int8_s8_") && strstr(k.kind, "__avx512vnni"), "sapphirerapids, tune amx=0: %s", k.kind);
    ct_tune("amx=1");
    k = compile_kinds(g, &zn4);
    CGT_CHECK(k.n == 1 && strstr(k.kind, "__avx512vnni"), "znver4: %s", k.kind);
    ct_tune("int8=3");
    k = compile_kinds(g, &spr);
    CGT_CHECK(k.n == 1 && strstr(k.kind, "__avx512_pmaddwd"), "sapphirerapids, tune int8=3: %s", k.kind);
    ct_tune("int8=1");
    ir_graph_free(g);
  }
  CGT_CHECK(!v4.has_avx512vnni && spr.has_avx512vnni && zn4.has_avx512vnni && !avx2.has_avx512vnni, "has_avx512vnni: v4 %d spr %d znver4 %d avx2 %d",
            v4.has_avx512vnni, spr.has_avx512vnni, zn4.has_avx512vnni, avx2.has_avx512vnni);
  CGT_CHECK(spr.has_amx_int8 && !zn4.has_amx_int8 && !v4.has_amx_int8, "has_amx_int8: spr %d znver4 %d v4 %d", spr.has_amx_int8,
            zn4.has_amx_int8, v4.has_amx_int8);
  if (host.has_amx_int8)
    for (int i = 0; i < nc; i++) check_case(&host, "host AMX int8", &cases[i], "__amxint8");
  else
    fprintf(stderr, "host without amx-int8 (cpu %s): native tdpbsud cases skipped\n", host.cpu);
  ct_tune("amx=0");
  if (host.has_avx512vnni)
    for (int i = 0; i < nc; i++) check_case(&host, "host avx512vnni", &cases[i], "__avx512vnni");
  else
    fprintf(stderr, "host without avx512vnni (cpu %s): native cases skipped\n", host.cpu);
  ct_tune("amx=1");
  cg_target_dispose(&avx2), cg_target_dispose(&host), cg_target_dispose(&v4), cg_target_dispose(&spr), cg_target_dispose(&zn4);
  return cgt_done("test_codegen_int8");
}
