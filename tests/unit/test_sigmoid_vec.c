/* test_sigmoid_vec.c — the compiled sigmoid and swish (cg_sigmoid: exp polynomial + rcpps and
 * one Newton-Raphson step on x86, docs/codegen.md "Fused epilogues") against double-precision
 * references, over a dense sweep: every 4099th float bit pattern (all exponents, both signs,
 * denormals, NaNs), a fine linear sweep of [-20, 20], [-110, 110], and -inf, +inf, NaN, +-0,
 * the smallest denormals, +-88, +-100, FLT_MAX.  Compiled for the host (8 or 16 lanes), x86-64-v3
 * and x86-64 (4 lanes, SSE rcpps); the element count is not a multiple of 8, so the scalar
 * tail runs too.  Error: |got - want| / max(|want|, 1e-29) (relative, absolute below 1e-29:
 * sigmoid below 2^-126 is flushed to 0 by rcpps, swish there is < 1.1e-36); NaN exactly where
 * the reference is NaN, infinities equal.  Fails above MAX_REL; prints the worst case. */
#include <float.h>

#include "test_codegen_harness.h"

#define MAX_REL 1e-6

static double ref_sigmoid(double x) { return 1.0 / (1.0 + exp(-x)); } /* as ir/ref_eltwise.c */

static float *inputs(int64_t *n_out) {
  int64_t cap = (int64_t)(4294967296.0 / 4099) + 400001 + 220001 + 64, n = 0;
  float *x = malloc((size_t)cap * sizeof *x);
  for (uint64_t u = 0; u < 4294967296ull; u += 4099) {
    uint32_t b = (uint32_t)u;
    memcpy(&x[n++], &b, 4);
  }
  for (int i = -200000; i <= 200000; i++) x[n++] = (float)i * 1e-4f;
  for (int i = -110000; i <= 110000; i++) x[n++] = (float)i * 1e-3f;
  const float special[] = {-INFINITY, INFINITY, NAN, -NAN, 0.0f, -0.0f, 1e-45f, -1e-45f, FLT_MIN, -FLT_MIN,
                           88.0f, -88.0f, 100.0f, -100.0f, 87.0f, -87.0f, 87.5f, -87.5f, 88.7f, -88.7f,
                           103.0f, -103.0f, 16.0f, -16.0f, 17.0f, -17.0f, FLT_MAX, -FLT_MAX, 1e-20f, -1e-20f,
                           0.5f, -0.5f, 1.0f, -1.0f, 3.0f};
  for (size_t i = 0; i < sizeof special / sizeof *special; i++) x[n++] = special[i];
  *n_out = n;
  return x;
}

typedef struct worst { double err; float x, got; double want; int64_t nan_bad; } worst;

static void score(worst *w, float x, float got, double want) {
  double e;
  if (isnan(want) || isnan(got)) {
    if (isnan(want) != isnan(got)) w->nan_bad++;
    return;
  }
  if (isinf(want) || isinf(got)) e = (double)got == want ? 0 : INFINITY;
  else e = fabs((double)got - want) / fmax(fabs(want), 1e-29);
  if (e > w->err) w->err = e, w->x = x, w->got = got, w->want = want;
}

static void run(const cg_target *t, const char *label, const float *x, int64_t n) {
  ir_graph *g = ir_graph_new("sig", 1);
  int in = ir_add_input(g, "x", IR_F32, (ir_shape){2, {1, n}});
  ir_diag d = {0};
  int s = ir_add_node(g, IR_OP_sigmoid, "sig", (ir_loc){0}, &in, 1, NULL, &d);
  int w = ir_add_node(g, IR_OP_swish, "swish", (ir_loc){0}, &in, 1, NULL, &d);
  if (s < 0 || w < 0) {
    ir_diag_print(&d, stderr);
    cgt_failures++;
    return;
  }
  g->outputs[g->n_outputs++] = s;
  g->outputs[g->n_outputs++] = w;
  g->n_shards = 1;
  char so[512];
  snprintf(so, sizeof so, "%s/%s.so", cgt_dir, label);
  cg_options o = {so, NULL, label, "{\"test\": true}", 2, 0};
  if (cg_compile(ct_g(g), t, &o, &d)) {
    fprintf(stderr, "  %s: compile failed: ", label);
    ir_diag_print(&d, stderr);
    cgt_failures++;
    ir_graph_free(g);
    return;
  }
  void *h = dlopen(so, RTLD_NOW | RTLD_LOCAL);
  CGT_CHECK(h != NULL, "%s: dlopen: %s", label, dlerror());
  const cnnc_abi_model *m = h ? dlsym(h, CNNC_ABI_SYMBOL) : NULL;
  if (m && m->n_outputs == 2) {
    void *bufs[64];
    for (int i = 0; i < m->n_tensors; i++) bufs[i] = calloc(1, (size_t)m->tensors[i].bytes + 64);
    memcpy(bufs[m->input], x, (size_t)n * sizeof *x);
    cgt_run_model(m, bufs, 1);
    const float *ys = bufs[m->outputs[0]], *yw = bufs[m->outputs[1]];
    worst ws = {0}, ww = {0};
    for (int64_t i = 0; i < n; i++) {
      double r = ref_sigmoid(x[i]);
      score(&ws, x[i], ys[i], r);
      score(&ww, x[i], yw[i], (double)x[i] * r);
    }
    fprintf(stderr, "%s: %lld inputs: sigmoid max rel err %.3g at x=%.9g (got %.9g want %.9g); "
            "swish max rel err %.3g at x=%.9g (got %.9g want %.9g)\n", label, (long long)n, ws.err, ws.x, ws.got,
            ws.want, ww.err, ww.x, ww.got, ww.want);
    CGT_CHECK(ws.err <= MAX_REL && ws.nan_bad == 0, "%s: sigmoid error %.3g (bound %g), %lld NaN mismatches", label,
              ws.err, MAX_REL, (long long)ws.nan_bad);
    CGT_CHECK(ww.err <= MAX_REL && ww.nan_bad == 0, "%s: swish error %.3g (bound %g), %lld NaN mismatches", label,
              ww.err, MAX_REL, (long long)ww.nan_bad);
    /* exact values at the ends: +inf -> 1 / +inf, -inf -> 0 / NaN (the reference: -inf * 0),
     * +-0 -> 0.5 / 0, x >= 17 -> 1 (1 - e^-17 rounds to 1), x <= -104 -> 0, never outside [0, 1] */
    int64_t bad = 0;
    for (int64_t i = 0; i < n; i++) {
      float xi = x[i], s1 = ys[i], w1 = yw[i];
      int ok = 1;
      if (isinf(xi) && xi > 0) ok = s1 == 1.0f && w1 == INFINITY;
      else if (isinf(xi)) ok = s1 == 0.0f && isnan(w1);
      else if (xi == 0.0f) ok = s1 == 0.5f && w1 == 0.0f;
      else if (xi >= 17.0f) ok = s1 == 1.0f;
      else if (xi <= -104.0f) ok = s1 == 0.0f;
      if (!isnan(xi) && !(s1 >= 0.0f && s1 <= 1.0f)) ok = 0;
      if (!ok && bad++ < 5) fprintf(stderr, "  %s: sigmoid/swish(%.9g) = %.9g / %.9g\n", label, xi, s1, w1);
    }
    CGT_CHECK(bad == 0, "%s: %lld wrong values at the ends (listed above, first 5)", label, (long long)bad);
    for (int i = 0; i < m->n_tensors; i++) free(bufs[i]);
  } else {
    CGT_CHECK(0, "%s: bad descriptor", label);
  }
  if (h) dlclose(h);
  unlink(so);
  ir_graph_free(g);
}

int main(void) {
  cgt_init_dir();
  int64_t n;
  float *x = inputs(&n);
  static const char *cpus[3] = {NULL, "x86-64-v3", "x86-64"}, *labels[3] = {"host", "x86-64-v3", "x86-64"};
  for (int i = 0; i < 3; i++) {
    cg_target t;
    ir_diag d = {0};
    if (cg_target_init(&t, NULL, cpus[i], NULL, &d)) {
      ir_diag_print(&d, stderr);
      return 1;
    }
    run(&t, labels[i], x, n);
    cg_target_dispose(&t);
  }
  free(x);
  return cgt_done("test_sigmoid_vec");
}
