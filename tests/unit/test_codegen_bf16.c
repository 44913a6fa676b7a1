/* test_codegen_bf16.c — the bf16 dot-product conv route (codegen/gen_conv_bf16.c) on a CPU
 * without avx512bf16: the same kernels with every vdpbf16ps emulated (tune bf16_emulate=1),
 * for an AVX2 (x86-64-v3) target.
 *  1. Bitwise: input -> round16 -> 1x1 conv (+bias) as the graph output (f32, not rounded):
 *     the compiled result equals a C model of the instruction's arithmetic (per lane acc =
 *     ftz(fma(x[2k+1], w[2k+1], acc)), then ftz(fma(x[2k], w[2k], acc)), bf16 inputs read with
 *     denormals as zero), 1 and 2 threads, on shapes with odd Cin, short last channel tiles,
 *     partial last vectors and several chunks, with inputs that provoke DAZ and FTZ.  The same
 *     model with the even element first must differ somewhere (the check can fail).
 *  2. tests/bf16/bottleneck_bf16.yml at --precision 16.16 bf16: every flat 1x1 conv takes the
 *     route (kind ..._bf16_..._bf16emu), compiled vs the interpreter running the same graph
 *     (tolerance 5e-3 as test_precision: only the f32 summation order differs), vs the f32
 *     kernels' 16.16 build, and vs fp32 (32.32): max |diff| / max |output| printed, < 0.1.
 *     tests/bf16/span_bf16.yml (3x6 maps, batch 3): every 1x1 conv's pixel vectors span images,
 *     one with a fused residual add; logits bitwise equal to tune bf16_flat_span=0's and
 *     tune bf16_span_add=0's, each vs the interpreter (AVX2 emulated; natively on avx512bf16).
 *     On a host with avx512bf16, both models through cg_build_model (bf16 storage): the conv
 *     results narrowed by vcvtneps2bf16 give the logits of tune bf16_sw_narrow=1's integer rounding.
 *  3. No conv takes the route without tune bf16_emulate=1, in 32.32, with fp16, or on a
 *     target without FMA (SSE: the emulation would need fmaf). */
#include "test_codegen_harness.h"

#include "bf16_case_check.h"

/* ---- kernel kinds through the report sink ---- */
typedef struct kinds { int n, bf16, emu, span, span_add; char first[160]; } kinds;
static void kinds_layout(void *ctx, const cg_report_kernel *k, int n_k, const struct pass_fusion *plan, const cg_report_buffer *b, int n_b,
                         const int64_t *sb, int ns, const int *tv, int nt) {
  kinds *s = ctx;
  for (int i = 0; i < n_k; i++) {
    if (strncmp(k[i].kind, "conv2d", 6)) continue;
    s->n++;
    if (strstr(k[i].kind, "_bf16_")) {
      s->bf16++;
      s->emu += strstr(k[i].kind, "_bf16emu") != NULL;
      s->span += strstr(k[i].kind, "conv2d_1x1s1_span") != NULL;
      s->span_add += strstr(k[i].kind, "conv2d_1x1s1_span") && strstr(k[i].kind, "_add");
      if (!s->first[0]) snprintf(s->first, sizeof s->first, "%s", k[i].kind);
    }
  }
}
static kinds compile_kinds(ir_graph *g, const cg_target *t) {
  kinds s = {0};
  cg_report_sink rs = {&s, kinds_layout, NULL, NULL};
  if (bf16_compile_report(g, t, &rs)) s.n = -1;
  return s;
}

/* ---- 1. bitwise against the instruction's arithmetic ---- */
static void bitwise_case(const cg_target *t, const char *tn, int n, int cin, int cout, int h, int w) {
  char label[128];
  snprintf(label, sizeof label, "%s %dx%dx%dx%d -> %d", tn, n, cin, h, w, cout);
  ir_graph *g = bf16_conv_graph("bf16conv", n, cin, h, w, cout, 1, 1, 0);
  if (!g) {
    cgt_failures++;
    return;
  }
  cgt_random_params(g, 0.5f);
  ir_diag d = {0};
  CGT_CHECK(pass_precision(g, "16.16", "bf16", 0, &d) > 0, "%s: pass_precision: %s", label, d.msg);
  kinds k = compile_kinds(g, t);
  CGT_CHECK(k.n == 1 && k.emu == 1, "%s: the conv is not on the emulated bf16 route (%d of %d)", label, k.emu, k.n);
  int wv = ir_find_value(g, "c/weight"), bv = ir_find_value(g, "c/bias");
  const float *wt = g->values[wv].data, *bs = g->values[bv].data;
  int64_t hw = (int64_t)h * w, nx = (int64_t)n * cin * hw, ny = (int64_t)n * cout * hw;
  float *x = malloc((size_t)nx * 4), *want = malloc((size_t)ny * 4), *even_first = malloc((size_t)ny * 4);
  for (int64_t i = 0; i < nx; i++) {
    x[i] = cgt_uniform(-1.0f, 1.0f);
    int64_t ci = i / hw % cin, p = i % hw;
    if (ci == 1 && p % 7 == 0) x[i] *= 1e-38f; /* bf16 denormals: read as zero (DAZ) */
    if (p % 11 == 3) x[i] *= 1e-25f;          /* products near 1e-26..1e-39: denormal sums (FTZ) */
  }
  if (cout > 0) { /* a weight row of tiny values so that whole sums land in the denormals */
    float *wm = g->values[wv].data;
    for (int ci = 0; ci < cin; ci++) wm[ci] = ir_round16_f32(wm[ci] * 1e-13f, IR_HALF_BF16);
    g->values[bv].data[0] = 0; /* its sums stay visible */
  }
  for (int b = 0; b < n; b++)
    for (int co = 0; co < cout; co++)
      for (int64_t p = 0; p < hw; p++) {
        float a = 0, e = 0;
        for (int k = 0; 2 * k < cin; k++) {
          float x0 = bf16_in(x[((int64_t)b * cin + 2 * k) * hw + p]), w0 = ftz(wt[co * cin + 2 * k]);
          float x1 = 2 * k + 1 < cin ? bf16_in(x[((int64_t)b * cin + 2 * k + 1) * hw + p]) : 0.0f;
          float w1 = 2 * k + 1 < cin ? ftz(wt[co * cin + 2 * k + 1]) : 0.0f;
          a = ftz(fmaf(x1, w1, a)), a = ftz(fmaf(x0, w0, a));
          e = ftz(fmaf(x0, w0, e)), e = ftz(fmaf(x1, w1, e));
        }
        want[((int64_t)b * cout + co) * hw + p] = a + bs[co];
        even_first[((int64_t)b * cout + co) * hw + p] = e + bs[co];
      }
  int64_t diff = bf16_check_model(g, t, label, x, nx, want, ny, "the vdpbf16ps model"), differs = 0, tiny = 0;
  for (int64_t i = 0; i < ny; i++) {
    differs += bits(even_first[i]) != bits(want[i]);
    tiny += fabsf(want[i] - bs[i / hw % cout]) < 1e-30f;
  }
  if (diff >= 0) {
    fprintf(stderr, "%s: %lld outputs bitwise the model; the even-first order differs on %lld; %lld sums under 1e-30\n",
            label, (long long)(ny - diff), (long long)differs, (long long)tiny);
    if (cin >= 16) CGT_CHECK(differs > 0, "%s: the element order is not observable on this data", label);
  }
  free(x), free(want), free(even_first);
  ir_graph_free(g);
}

/* ---- 2. the bottleneck model ---- */
/* 16.16 fp16 with tune bf16_emulate=1 (target with F16C): not a bf16 input, no route */
static kinds compile_kinds_model(const cg_target *t, const char *label) {
  kinds k = {0};
  cg_target f16c;
  ir_diag d = {0};
  ir_graph *g = cgt_load_batch(CNNC_TEST_SRC "/tests/bf16/bottleneck_bf16.yml", 1);
  if (!g || cg_target_init(&f16c, NULL, NULL, "+avx2,+fma,+f16c", &d) || pass_precision(g, "16.16", "fp16", 0, &d) <= 0) {
    fprintf(stderr, "%s: setup failed\n", label);
    cgt_failures++;
    ir_graph_free(g);
    return k;
  }
  ct_tune("bf16_emulate=1");
  k = compile_kinds(g, &f16c);
  ct_tune("bf16_emulate=0");
  CGT_CHECK(k.n == 7, "%s: %d convs compiled", label, k.n);
  cg_target_dispose(&f16c);
  ir_graph_free(g);
  return k;
}
static float *run_model_yml(const char *yml, const cg_target *t, const char *prec, const char *half, int emulate,
                            const char *label, kinds *k, int vs_interp) {
  char path[1024];
  snprintf(path, sizeof path, "%s/tests/bf16/%s", CNNC_TEST_SRC, yml);
  ir_graph *g = cgt_load_batch(path, 3);
  if (!g) {
    cgt_failures++;
    return NULL;
  }
  ir_diag d = {0};
  if (strcmp(prec, "32.32")) CGT_CHECK(pass_precision(g, prec, half, 0, &d) > 0, "%s: %s", label, d.msg);
  ct_tune(emulate ? "bf16_emulate=1" : "bf16_emulate=0");
  *k = compile_kinds(g, t);
  float *out = NULL;
  /* vs the interpreter on the same graph: 5e-3 as test_precision (a sum whose f32 order
   * differs can round to the other bf16 neighbour in a later layer) */
  CGT_CHECK(cgt_check_graph(g, t, label, vs_interp ? 5e-3 : 1e-4, &out) == 0, "%s: compiled differs from the interpreter", label);
  ct_tune("bf16_emulate=0");
  ir_graph_free(g);
  return out;
}

static float *run_model_file(const cg_target *t, const char *prec, const char *half, int emulate, const char *label,
                             kinds *k, int vs_interp) {
  return run_model_yml("bottleneck_bf16.yml", t, prec, half, emulate, label, k, vs_interp);
}

/* tests/bf16/span_bf16.yml at batch 3: every 1x1 conv spanned (span_plan), one with a fused
 * residual add (span_load); bitwise the same logits as with tune bf16_flat_span=0 (the
 * same sums per output, only the pixel vectors differ), and tune bf16_span_add=0 keeps
 * the add's conv unspanned (the same logits again); each vs the interpreter within 5e-3. */
static void span_case(const cg_target *t, const char *tn, int emulate) {
  char l[3][96];
  kinds ks, kn, ka;
  snprintf(l[0], 96, "%s span_bf16 spanned", tn);
  snprintf(l[1], 96, "%s span_bf16 bf16_flat_span=0", tn);
  snprintf(l[2], 96, "%s span_bf16 bf16_span_add=0", tn);
  float *a = run_model_yml("span_bf16.yml", t, "16.16", "bf16", emulate, l[0], &ks, 1);
  ct_tune("bf16_flat_span=0");
  float *b = run_model_yml("span_bf16.yml", t, "16.16", "bf16", emulate, l[1], &kn, 1);
  ct_tune("bf16_flat_span=1");
  ct_tune("bf16_span_add=0");
  float *c = run_model_yml("span_bf16.yml", t, "16.16", "bf16", emulate, l[2], &ka, 1);
  ct_tune("bf16_span_add=1");
  fprintf(stderr, "%s: %d of %d convs spanned (%d with a residual add), e.g. %s\n", l[0], ks.span, ks.n, ks.span_add, ks.first);
  CGT_CHECK(ks.n == 4 && ks.bf16 == 4 && ks.span == 4 && ks.span_add == 1, "%s: %d convs, %d bf16, %d spanned, %d with an add",
            l[0], ks.n, ks.bf16, ks.span, ks.span_add);
  CGT_CHECK(kn.bf16 == 4 && kn.span == 0, "%s: %d bf16, %d spanned", l[1], kn.bf16, kn.span);
  CGT_CHECK(ka.bf16 == 4 && ka.span == 3 && ka.span_add == 0, "%s: %d bf16, %d spanned, %d with an add", l[2], ka.bf16, ka.span,
            ka.span_add);
  if (a && b && c) {
    int diff = 0;
    for (int i = 0; i < 3 * 10; i++) diff += memcmp(&a[i], &b[i], 4) != 0 || memcmp(&a[i], &c[i], 4) != 0;
    CGT_CHECK(diff == 0, "%s: %d of 30 logits differ from the unspanned kernels'", l[0], diff);
  } else cgt_failures++;
  free(a), free(b), free(c);
}

/* Native narrowing (narrow_out, avx512bf16 hosts only): tests/bf16/<yml> at batch 3 through
 * cg_build_model (the driver's hook: 16-bit storage, so the conv epilogues store bf16; flat
 * full and masked stores, spanned stores in span_bf16.yml) with vcvtneps2bf16 and with
 * tune bf16_sw_narrow=1 (integer rounding): bitwise equal logits, and .so files that differ. */
static float *build_run(const char *yml, const char *label, long *so_bytes) {
  char path[1024], so[512];
  snprintf(path, sizeof path, "%s/tests/bf16/%s", CNNC_TEST_SRC, yml);
  snprintf(so, sizeof so, "%s/narrow.so", cgt_dir);
  const char *const kv[][2] = {{"batch-size", "3"}, {"seed", "5"}, {"precision", "16.16"}, {"half-type", "bf16"}};
  if (cgt_build(path, kv, 4, so, NULL)) {
    CGT_CHECK(0, "%s: build failed", label);
    return NULL;
  }
  long len = 0; /* FNV-1a of the .so: builds of the same code are byte-identical */
  unsigned char *bytes = (unsigned char *)cgt_read_file(so, &len);
  uint64_t hs = 1469598103934665603ull;
  for (long i = 0; bytes && i < len; i++) hs = (hs ^ (uint64_t)bytes[i]) * 1099511628211ull;
  free(bytes);
  *so_bytes = (long)(hs >> 1);
  void *h = dlopen(so, RTLD_NOW | RTLD_LOCAL);
  const cnnc_abi_model *m = h ? dlsym(h, CNNC_ABI_SYMBOL) : NULL;
  float *y = NULL;
  if (m) {
    int64_t nx = m->tensors[m->input].bytes / 4;
    float *x = malloc((size_t)nx * sizeof *x);
    for (int64_t i = 0; i < nx; i++) x[i] = cgt_uniform(-2.0f, 2.0f);
    y = cgt_run_copy(m, x, nx, 2);
    free(x);
  } else CGT_CHECK(0, "%s: cannot load", label);
  if (h) dlclose(h);
  unlink(so);
  return y;
}
static void narrow_case(const char *yml) {
  char l[2][128];
  long b0, b1;
  snprintf(l[0], 128, "host %s vcvtneps2bf16", yml);
  snprintf(l[1], 128, "host %s bf16_sw_narrow=1", yml);
  cgt_rng = 11;
  float *a = build_run(yml, l[0], &b0);
  ct_tune("bf16_sw_narrow=1");
  cgt_rng = 11;
  float *b = build_run(yml, l[1], &b1);
  ct_tune("bf16_sw_narrow=0");
  if (a && b) {
    int diff = 0;
    for (int i = 0; i < 30; i++) diff += memcmp(&a[i], &b[i], 4) != 0;
    CGT_CHECK(diff == 0, "%s: %d of 30 logits differ from the integer rounding's", l[0], diff);
    CGT_CHECK(b0 != b1, "%s: the same .so with and without bf16_sw_narrow=1", l[0]);
    fprintf(stderr, "%s: logits bitwise equal to bf16_sw_narrow=1's (the .so differs)\n", l[0]);
  }
  free(a), free(b);
}

static double max_rel(const float *a, const float *b, int64_t n) {
  double s = 0, e = 0;
  for (int64_t i = 0; i < n; i++) s = fmax(s, fabs(b[i]));
  for (int64_t i = 0; i < n; i++) e = fmax(e, fabs(a[i] - b[i]));
  return s > 0 ? e / s : e;
}

static void model_case(const cg_target *t, const char *tn) {
  char l[4][96];
  kinds ke, kf, k32, kh;
  snprintf(l[0], 96, "%s bottleneck 16.16 bf16 emulated", tn);
  snprintf(l[1], 96, "%s bottleneck 16.16 bf16 f32 kernels", tn);
  snprintf(l[2], 96, "%s bottleneck 32.32", tn);
  snprintf(l[3], 96, "%s bottleneck 16.16 fp16 emulate set", tn);
  float *e = run_model_file(t, "16.16", "bf16", 1, l[0], &ke, 1);
  float *f = run_model_file(t, "16.16", "bf16", 0, l[1], &kf, 1);
  float *r = run_model_file(t, "32.32", "bf16", 1, l[2], &k32, 0);
  float *h = NULL;
  kh = compile_kinds_model(t, l[3]);
  CGT_CHECK(ke.n == 7 && ke.emu == 6, "%s: %d of %d convs on the emulated route, want 6 of 7", l[0], ke.emu, ke.n);
  fprintf(stderr, "%s: %d of %d convs on the route, e.g. %s\n", l[0], ke.emu, ke.n, ke.first);
  CGT_CHECK(kf.bf16 == 0 && k32.bf16 == 0 && kh.bf16 == 0, "%s: bf16 kernels without the emulation (%d), in 32.32 (%d) or fp16 (%d)",
            tn, kf.bf16, k32.bf16, kh.bf16);
  if (e && f && r) {
    int64_t n = 3 * 10;
    double ef = max_rel(e, f, n), er = max_rel(e, r, n), fr = max_rel(f, r, n);
    fprintf(stderr, "%s: max |diff| / max |logit|: bf16 route vs f32 kernels (16.16) %.3g, bf16 route vs fp32 %.3g, "
            "f32 kernels 16.16 vs fp32 %.3g\n", tn, ef, er, fr);
    CGT_CHECK(er < 0.1 && er > 0, "%s: bf16 route vs fp32 %.3g (want 0 < e < 0.1)", tn, er);
    CGT_CHECK(ef < 5e-3, "%s: bf16 route vs the f32 kernels' 16.16 %.3g (want < 5e-3)", tn, ef);
  }
  free(e), free(f), free(r), free(h);
}

int main(void) {
  cgt_init_dir();
  ct_tune("bf16=2"); /* the bf16 kernels wherever the ISA has them: this test checks the kernels, not the route choice (codegen/cores.def) */
  cg_target avx2, sse;
  if (cgt_target(&avx2, "x86-64-v3") || cgt_target(&sse, "x86-64")) return 1;
  ir_diag d = {0};
  CGT_CHECK(!avx2.has_avx512bf16 && !sse.has_avx512bf16, "x86-64-v3 / x86-64 report avx512bf16");
  ct_tune("bf16_emulate=1");
  /* V = 8 (AVX2) and 4 (SSE): odd Cin, short last tiles, partial vectors, several chunks */
  bitwise_case(&avx2, "avx2", 2, 5, 7, 5, 5);
  bitwise_case(&avx2, "avx2", 1, 37, 19, 14, 14);
  bitwise_case(&avx2, "avx2", 3, 64, 40, 9, 13);
  bitwise_case(&avx2, "avx2", 1, 300, 13, 30, 31); /* 930 pixels: several chunks */
  /* without FMA (SSE) the emulation is refused: the f32 kernels */
  ir_graph *g = cgt_load_batch(CNNC_TEST_SRC "/tests/bf16/bottleneck_bf16.yml", 1);
  if (g && pass_precision(g, "16.16", "bf16", 0, &d) > 0) {
    kinds k = compile_kinds(g, &sse);
    CGT_CHECK(k.n == 7 && k.bf16 == 0, "sse: %d of %d convs on the bf16 route (want 0 of 7)", k.bf16, k.n);
  } else cgt_failures++;
  ir_graph_free(g);
  ct_tune("bf16_emulate=0");
  model_case(&avx2, "avx2");
  span_case(&avx2, "avx2 emulated", 1);
  cg_target host;
  if (!cg_target_init(&host, NULL, NULL, NULL, &d)) {
    if (host.has_avx512bf16) { /* on vdpbf16ps, 16 lanes */
      span_case(&host, "host avx512bf16", 0);
      narrow_case("bottleneck_bf16.yml");
      narrow_case("span_bf16.yml");
    }
    cg_target_dispose(&host);
  }
  cg_target_dispose(&avx2);
  cg_target_dispose(&sse);
  return cgt_done("test_codegen_bf16");
}
