/* test_codegen_stem.c — the bf16 stem conv (codegen/gen_conv_stem.c; docs/matrix.md "Stem").
 *  1. Bitwise: input -> round16 (a bf16 value, as 16-bit storage leaves it) -> conv (+bias) as
 *     the graph output equals a C model of the kernel's arithmetic — K order ky (rows inside
 *     the map only), channel, tap pair (2j, 2j + 1; a missing tap 0), per pair
 *     acc = ftz(fma(x[odd], w[odd], acc)) then ftz(fma(x[even], w[even], acc)), columns outside
 *     the map read as 0 — on an AVX2 target with vdpbf16ps emulated (tune bf16_emulate=1) and,
 *     on a host with avx512bf16, natively; 1 and 2 threads.  Shapes: the ResNet stem's rows (224 wide,
 *     112 outputs in segments of 4 + 3 or 2 vectors), odd maps, outputs narrower than a vector, kw 5 / 4 / 3,
 *     pads 0..3, 4 input channels, batch 1..3, Cout 64 / 68 / 128.
 *  2. The same graphs vs the interpreter within 5e-3.
 *  3. tune stem_gen=0: the gen_conv_bf16.c kernel (the A/B switch; the first two cases).
 *  4. A stem + BN + relu + maxpool + 1x1 model through the driver (16-bit storage: the stem
 *     writes bf16): logits within 5e-3 of the tune stem_gen=0 build's, 1 vs 2 threads
 *     bitwise. */
#include "test_codegen_harness.h"

#include "bf16_case_check.h"

typedef bf16_case scase;

/* The case's conv alone, its input stored in bf16 (what pass_store16_infer decides for it). */
static ir_graph *case_graph(const scase *k) {
  ir_graph *g = bf16_conv_graph("stem", k->n, k->cin, k->h, k->w, k->cout, k->k, k->s, k->p);
  ir_diag d = {0};
  if (!g) return NULL;
  cgt_random_params(g, 0.5f);
  if (pass_precision(g, "16.16", "bf16", 0, &d) <= 0) {
    ir_diag_print(&d, stderr);
    ir_graph_free(g);
    return NULL;
  }
  for (int i = 0; i < g->n_nodes; i++)
    if (g->nodes[i].op == IR_OP_conv2d) g->values[g->nodes[i].in[0]].dtype = IR_BF16;
  return g;
}

static void kind_of(void *ctx, const cg_report_kernel *k, int n_k, const struct pass_fusion *plan, const cg_report_buffer *b, int n_b, const int64_t *sb,
                    int ns, const int *tv, int nt) {
  char *s = ctx;
  for (int i = 0; i < n_k; i++)
    if (!strncmp(k[i].kind, "conv2d_", 7) && strstr(k[i].kind, "x16") && !*s) snprintf(s, 160, "%s", k[i].kind);
}
static void compile_kind(ir_graph *g, const cg_target *t, char *kind) {
  kind[0] = 0;
  cg_report_sink rs = {kind, kind_of, NULL, NULL};
  if (bf16_compile_report(g, t, &rs)) snprintf(kind, 160, "(compile failed)");
}

/* The kernel's arithmetic in C (see the header); out [n][cout][oh][ow]. */
static void model(const scase *k, const float *x, const float *wt, const float *bs, int oh, int ow, float *out) {
  int npx = (k->k + 1) / 2;
  for (int b = 0; b < k->n; b++)
    for (int co = 0; co < k->cout; co++)
      for (int oy = 0; oy < oh; oy++)
        for (int ox = 0; ox < ow; ox++) {
          float a = 0;
          for (int ky = 0; ky < k->k; ky++) {
            int iy = oy * k->s + ky - k->p;
            if (iy < 0 || iy >= k->h) continue;
            for (int ci = 0; ci < k->cin; ci++)
              for (int j = 0; j < npx; j++) {
                int kx0 = 2 * j, kx1 = kx0 + 1, ix0 = ox * k->s + kx0 - k->p, ix1 = ix0 + 1;
                const float *xr = x + (((int64_t)b * k->cin + ci) * k->h + iy) * k->w;
                const float *wr = wt + (((int64_t)co * k->cin + ci) * k->k + ky) * k->k;
                float x0 = ix0 >= 0 && ix0 < k->w ? bf16_in(xr[ix0]) : 0.0f;
                float x1 = kx1 < k->k && ix1 >= 0 && ix1 < k->w ? bf16_in(xr[ix1]) : 0.0f;
                float w0 = ftz(wr[kx0]), w1 = kx1 < k->k ? ftz(wr[kx1]) : 0.0f;
                a = ftz(fmaf(x1, w1, a)), a = ftz(fmaf(x0, w0, a));
              }
          }
          out[(((int64_t)b * k->cout + co) * oh + oy) * ow + ox] = a + bs[co];
        }
}

static void bitwise_case(const cg_target *t, const char *tn, const scase *k, int ab) {
  char label[160], kind[160];
  snprintf(label, sizeof label, "%s %dx%dx%dx%d k%d s%d p%d -> %d", tn, k->n, k->cin, k->h, k->w, k->k, k->s, k->p, k->cout);
  ir_graph *g = case_graph(k);
  if (!g) {
    cgt_failures++;
    return;
  }
  compile_kind(g, t, kind);
  CGT_CHECK(strstr(kind, "_stem_") != NULL, "%s: not the stem kernel (%s)", label, kind);
  fprintf(stderr, "%s: %s\n", label, kind);
  bf16_check_case(g, t, k, model, label, sizeof label); /* 1. bitwise the model, 2. vs the interpreter */
  if (ab) { /* 3. the A/B switch */
    ct_tune("stem_gen=0");
    compile_kind(g, t, kind);
    ct_tune("stem_gen=1");
    CGT_CHECK(!strstr(kind, "_stem_") && strstr(kind, "_bf16_"), "%s: stem_gen=0 gives %s", label, kind);
  }
  ir_graph_free(g);
}

static const scase cases[] = {
    {1, 3, 64, 40, 224, 7, 2, 3},  /* ResNet's stem rows: 112 outputs, 7 vectors (16 lanes: 4 + 3, 8 lanes: 14 in 2s) */
    {2, 3, 68, 37, 45, 7, 2, 3},   /* odd map: 23 outputs, a partial last vector; 17 channel groups */
    {3, 4, 64, 30, 70, 5, 2, 2},   /* 4 channels, kw 5 (a half pair), batch 3 */
    {1, 3, 128, 33, 64, 4, 2, 1},  /* kw 4: whole pairs; 32 outputs, the last reads the right pad */
    {2, 3, 64, 20, 40, 3, 2, 0},   /* unpadded */
    {1, 3, 64, 41, 27, 7, 2, 3},   /* 14 outputs: narrower than 16 lanes */
};

/* 4. The driver with 16-bit storage: the stem writes bf16, read by the maxpool. */
static void model_case(const char *cpu, const char *tn) {
  static const char text[] =
      "name: stemnet\ninput: {shape: [3, 58, 62], classes: 10}\nlayers:\n"
      "  - {name: conv1, op: conv, filters: 64, kernel: 7, stride: 2, padding: 3, bias: false}\n"
      "  - {name: bn1, op: norm}\n  - {name: relu, op: act}\n"
      "  - {name: pool, op: maxpool, kernel: 3, stride: 2, padding: 1}\n"
      "  - {name: conv2, op: conv, filters: 64, kernel: 1, bias: false}\n";
  float *out[2] = {NULL, NULL};
  int64_t ny = 0;
  for (int v = 0; v < 2; v++) {
    ir_graph *g = cgt_load_text(text, "stemnet", 2);
    if (!g) {
      cgt_failures++;
      return;
    }
    fe_options o;
    fe_options_init(&o);
    ir_diag d = {0};
    const char *kv[][2] = {{"batch-size", "2"}, {"seed", "5"}, {"precision", "16.16"}, {"half-type", "bf16"}, {"target-cpu", cpu}};
    for (int i = 0; i < (cpu ? 5 : 4); i++) fe_option_set(&o, fe_option_find(kv[i][0]), kv[i][1], &d);
    char so[512], kind[160] = "";
    snprintf(so, sizeof so, "%s/m%d.so", cgt_dir, v);
    if (v) ct_tune("stem_gen=0");
    cg_report_sink rs = {kind, kind_of, NULL, NULL};
    int rc = cnnc_build_model_report(ct_g(g), &o, so, NULL, 0, &rs, &d);
    ct_tune("stem_gen=1");
    if (rc) {
      ir_diag_print(&d, stderr);
      cgt_failures++;
      ir_graph_free(g);
      return;
    }
    CGT_CHECK((strstr(kind, "_stem_") != NULL) == !v && strstr(kind, "_o16_"), "%s model build %d: first conv %s", tn, v, kind);
    fprintf(stderr, "%s model build %d: %s\n", tn, v, kind);
    void *hd = dlopen(so, RTLD_NOW | RTLD_LOCAL);
    const cnnc_abi_model *m = hd ? dlsym(hd, CNNC_ABI_SYMBOL) : NULL;
    CGT_CHECK(m != NULL, "%s: cannot load", tn);
    if (m) {
      int64_t nx = m->tensors[m->input].bytes / 4;
      float *x = malloc((size_t)nx * sizeof *x);
      uint64_t saved = cgt_rng;
      cgt_rng = 77;
      for (int64_t i = 0; i < nx; i++) x[i] = cgt_uniform(-1.0f, 1.0f);
      cgt_rng = saved;
      ny = m->tensors[m->outputs[0]].bytes / 4;
      out[v] = cgt_run_copy(m, x, nx, 1);
      float *y2 = cgt_run_copy(m, x, nx, 2);
      CGT_CHECK(!memcmp(out[v], y2, (size_t)ny * 4), "%s build %d: 1 vs 2 threads differ", tn, v);
      free(y2), free(x);
    }
    if (hd) dlclose(hd);
    unlink(so);
    ir_graph_free(g);
  }
  if (out[0] && out[1]) {
    double mx = 0, e = 0;
    for (int64_t i = 0; i < ny; i++) mx = fmax(mx, fabs(out[1][i])), e = fmax(e, fabs(out[0][i] - out[1][i]));
    fprintf(stderr, "%s model: max |stem - stem_gen=0| / max |y| = %.3g\n", tn, e / mx);
    CGT_CHECK(mx > 0 && e / mx < 5e-3, "%s model: stem vs stem_gen=0 %.3g of %.3g", tn, e, mx);
  }
  free(out[0]), free(out[1]);
}

int main(void) {
  cgt_init_dir();
  ct_tune("bf16=2"); /* the bf16 kernels wherever the ISA has them: this test checks the kernels, not the route choice (codegen/cores.def) */
  cg_target avx2, host;
  if (cgt_target(&avx2, "x86-64-v3") || cgt_target(&host, NULL)) return 1;
  int nc = (int)(sizeof cases / sizeof cases[0]);
  /* CNNC_TEST_QUICK=1 (quick mode): each case on one of the two targets (round robin),
   * the driver case on the host only (emulated when the host lacks avx512bf16) */
  int np = host.has_avx512bf16 ? 2 : 1, quick = cgt_quick();
  ct_tune("bf16_emulate=1");
  for (int i = 0; i < nc; i++)
    if (!cgt_quick_skip_home((size_t)i, 0, np, -1)) bitwise_case(&avx2, "avx2 emulated", &cases[i], i < 2);
  if (!quick || np == 1) model_case("x86-64-v3", "avx2 emulated");
  ct_tune("bf16_emulate=0");
  if (host.has_avx512bf16) {
    for (int i = 0; i < nc; i++)
      if (!cgt_quick_skip_home((size_t)i, 1, np, -1)) bitwise_case(&host, "host", &cases[i], i < 2);
    model_case(NULL, "host");
    const char *const names[] = {"avx2 emulated", "host"};
    CGT_CHECK(cgt_quick_report("test_codegen_stem", names, np) == (quick ? nc : 2 * nc), "cases skipped");
  } else
    fprintf(stderr, "host without avx512bf16: the native cases skipped\n");
  cg_target_dispose(&avx2);
  cg_target_dispose(&host);
  return cgt_done("test_codegen_stem");
}
