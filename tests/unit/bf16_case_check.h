/* bf16_case_check.h — shared by the bf16 kernel tests (test_codegen_bf16.c,
 * test_codegen_bf16_kxk.c, test_codegen_stem.c; bits / from_bits also test_precision.c): float
 * bits, the instruction's view of a bf16 input (denormals as zero), one conv layer as a YAML
 * model, compiling with a report sink (the kernel kinds), and the bitwise check of a compiled
 * conv against a C model of its arithmetic.  Include after test_codegen_harness.h. */
#ifndef CNNC_TEST_BF16_CASE_CHECK_H
#define CNNC_TEST_BF16_CASE_CHECK_H

#include <stdint.h>

#include "ir/ir.h"

static inline uint32_t bits(float x) {
  uint32_t u;
  memcpy(&u, &x, 4);
  return u;
}

static inline float from_bits(uint32_t u) {
  float x;
  memcpy(&x, &u, 4);
  return x;
}

/* x with a denormal flushed to a signed zero. */
static inline float ftz(float x) { return (bits(x) & 0x7f800000u) == 0 ? from_bits(bits(x) & 0x80000000u) : x; }

/* bf16 value of x (nearest even), as vdpbf16ps reads it (denormal -> signed zero). */
static inline float bf16_in(float x) { return ftz(ir_round16_f32(x, IR_HALF_BF16)); }

/* One conv layer c (cin x h x w -> cout, k x k, stride s, padding p, bias) as the model name at
 * batch n (cgt_load_text); NULL on failure. */
static inline ir_graph *bf16_conv_graph(const char *name, int n, int cin, int h, int w, int cout, int k, int s, int p) {
  char text[512];
  snprintf(text, sizeof text,
           "name: %s\ninput: {shape: [%d, %d, %d], classes: 10}\nlayers:\n"
           "  - {name: c, op: conv, filters: %d, kernel: %d, stride: %d, padding: %d, bias: true}\n",
           name, cin, h, w, cout, k, s, p);
  return cgt_load_text(text, name, n);
}

/* Compiles g for t with the report sink rs (the kernels' kinds), the .so removed: 0, or
 * nonzero with the diagnostic on stderr. */
static inline int bf16_compile_report(ir_graph *g, const cg_target *t, const cg_report_sink *rs) {
  char so[512];
  snprintf(so, sizeof so, "%s/kinds.so", cgt_dir);
  cg_options o = {so, NULL, "kinds", "{}", 2, 0, rs};
  ir_diag d = {0};
  int rc = cg_compile(ct_g(g), t, &o, &d);
  if (rc) ir_diag_print(&d, stderr);
  unlink(so);
  return rc;
}

/* The conv kernels' kinds of a compile: n convs, hit of them whose kind contains tag, the last
 * conv kind (test_codegen_amx.c, test_codegen_int8.c). */
typedef struct conv_kinds { int n, hit; const char *tag; char kind[160]; } conv_kinds;
static inline void conv_kinds_layout(void *ctx, const cg_report_kernel *k, int n_k, const struct pass_fusion *plan,
                                     const cg_report_buffer *b, int n_b, const int64_t *sb, int ns, const int *tv, int nt) {
  conv_kinds *s = ctx;
  for (int i = 0; i < n_k; i++)
    if (!strncmp(k[i].kind, "conv2d", 6)) {
      s->n++;
      s->hit += strstr(k[i].kind, s->tag) != NULL;
      snprintf(s->kind, sizeof s->kind, "%s", k[i].kind);
    }
}
/* g compiled for t (n = -1 when the compile fails). */
static inline conv_kinds conv_kinds_of(ir_graph *g, const cg_target *t, const char *tag) {
  conv_kinds s = {0, 0, tag, ""};
  cg_report_sink rs = {&s, conv_kinds_layout, NULL, NULL};
  if (bf16_compile_report(g, t, &rs)) s.n = -1;
  return s;
}

/* g compiled for t, run on x (nx floats) with 1 and 2 threads: every output bitwise want[0..ny),
 * the C model of the kernel (what names it in the message).  Returns the number of outputs that
 * differ with 1 thread (-1: not run). */
static inline int64_t bf16_check_model(ir_graph *g, const cg_target *t, const char *label, const float *x, int64_t nx,
                                       const float *want, int64_t ny, const char *what) {
  cgt_so s;
  if (cgt_so_open(&s, g, t, label)) return cgt_failures++, -1;
  int64_t diff1 = 0;
  for (int nth = 1; nth <= 2; nth++) {
    float *got = cgt_run_copy(s.m, x, nx, nth);
    int64_t diff = 0, first = -1;
    for (int64_t i = 0; i < ny; i++)
      if (bits(got[i]) != bits(want[i]) && diff++ == 0) first = i;
    CGT_CHECK(diff == 0, "%s, %d thread(s): %lld of %lld outputs differ from %s (first %lld: %a vs %a)", label, nth,
              (long long)diff, (long long)ny, what, (long long)first, first >= 0 ? got[first] : 0.0,
              first >= 0 ? want[first] : 0.0);
    if (nth == 1) diff1 = diff;
    free(got);
  }
  cgt_so_close(&s);
  return diff1;
}

/* ---- one conv case against a C model of its kernel (test_codegen_bf16_kxk.c, _stem.c) ---- */
typedef struct bf16_case { int n, cin, cout, h, w, k, s, p; } bf16_case;

/* The kernel's arithmetic in C: out [n][cout][oh][ow] of x with the weights wt and bias bs. */
typedef void bf16_model_fn(const bf16_case *k, const float *x, const float *wt, const float *bs, int oh, int ow, float *out);

/* The route's arithmetic in C (test_codegen_bf16_kxk.c, test_codegen_amx.c): out [n][cout][oh]
 * [ow] of x with the weights wt and bias bs — pair k = (tap k / kpc, channels 2 (k % kpc), +1),
 * per pair acc = ftz(fma(x[odd], w[odd], acc)) then ftz(fma(x[even], w[even], acc)), padding
 * read as 0; pad16 (the AMX tiles): then zero pairs up to the next multiple of 16 (acc + 0: a
 * -0 sum becomes +0). */
static inline void bf16_pairs_model(const bf16_case *k, const float *x, const float *wt, const float *bs, int oh, int ow,
                                    float *out, int pad16) {
  int kpc = (k->cin + 1) / 2, taps = k->k * k->k, kp = kpc * taps, kpr = pad16 ? (kp + 15) / 16 * 16 : kp;
  for (int b = 0; b < k->n; b++)
    for (int co = 0; co < k->cout; co++)
      for (int oy = 0; oy < oh; oy++)
        for (int ox = 0; ox < ow; ox++) {
          float a = 0;
          for (int tap = 0; tap < taps; tap++) {
            int iy = oy * k->s + tap / k->k - k->p, ix = ox * k->s + tap % k->k - k->p;
            int in = iy >= 0 && iy < k->h && ix >= 0 && ix < k->w;
            for (int cp = 0; cp < kpc; cp++) {
              int c0 = 2 * cp, c1 = c0 + 1;
              float x0 = in ? bf16_in(x[(((int64_t)b * k->cin + c0) * k->h + iy) * k->w + ix]) : 0.0f;
              float x1 = in && c1 < k->cin ? bf16_in(x[(((int64_t)b * k->cin + c1) * k->h + iy) * k->w + ix]) : 0.0f;
              float w0 = ftz(wt[((int64_t)co * k->cin + c0) * taps + tap]);
              float w1 = c1 < k->cin ? ftz(wt[((int64_t)co * k->cin + c1) * taps + tap]) : 0.0f;
              a = ftz(fmaf(x1, w1, a)), a = ftz(fmaf(x0, w0, a));
            }
          }
          for (int z = kp; z < kpr; z++) a = ftz(fmaf(0.0f, 0.0f, a)), a = ftz(fmaf(0.0f, 0.0f, a));
          out[(((int64_t)b * k->cout + co) * oh + oy) * ow + ox] = a + bs[co];
        }
}

/* g (the conv c of k) for t on a random input, every 13th value a bf16 denormal (read as
 * zero): bitwise model's result with 1 and 2 threads (bf16_check_model); then g vs the
 * interpreter within 5e-3 on its own input, label extended by " vs interpreter". */
static inline void bf16_check_case(ir_graph *g, const cg_target *t, const bf16_case *k, bf16_model_fn *model, char *label,
                                   size_t cap) {
  int oh = (k->h + 2 * k->p - k->k) / k->s + 1, ow = (k->w + 2 * k->p - k->k) / k->s + 1;
  int64_t nx = (int64_t)k->n * k->cin * k->h * k->w, ny = (int64_t)k->n * k->cout * oh * ow;
  float *x = malloc((size_t)nx * 4), *want = malloc((size_t)ny * 4);
  for (int64_t i = 0; i < nx; i++) {
    x[i] = cgt_uniform(-1.0f, 1.0f);
    if (i % 13 == 5) x[i] *= 1e-38f; /* bf16 denormals: read as zero */
  }
  model(k, x, g->values[ir_find_value(g, "c/weight")].data, g->values[ir_find_value(g, "c/bias")].data, oh, ow, want);
  bf16_check_model(g, t, label, x, nx, want, ny, "the model");
  snprintf(label + strlen(label), cap - strlen(label), " vs interpreter");
  CGT_CHECK(cgt_check_graph(g, t, label, 5e-3, NULL) == 0, "%s: differs", label);
  free(x), free(want);
}

#endif
