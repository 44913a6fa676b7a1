/* test_precision_train_partials.c — --enable-half-partials (docs/precision.md): fmnist_cnn
 * batch 8, 16.32 bf16 and fp16, momentum, --gradient-accumulation 2 --replicas 2 (4 partial
 * sums per update), compiled with and without half partials from the same initial weights:
 *  - after 3 steps the weights differ (the partials were rounded) but the weight change
 *    differs from the f32-partials run by a small relative error (norm), printed: the figure
 *    docs/precision.md quotes;
 *  - without accumulation (no partial buffers) only the kernels' own partials are 16-bit (the
 *    conv grad_weight lane partials): the update still differs, by less (bf16, printed);
 *  - --enable-half-partials with 32.32 is rejected with a message naming --precision. */
#include <math.h>

#include "test_codegen_harness.h"

enum { BATCH = 8, NX = BATCH * 28 * 28, STEPS = 3, MB = 4 };

static int build(const char *const (*kv)[2], int nkv, const char *so_name, char *so) {
  return cgt_build_at("models/fmnist_cnn.yml", kv, nkv, so_name, so, NULL);
}

static unsigned char imgs[STEPS][MB][NX];
static float labels[STEPS][MB][BATCH];

/* Runs STEPS updates of mb micro-batches each; returns the params (concatenated, malloc'd)
 * before (*w0) and after. */
static float *run(const char *so, int mb, float **w0, long *n) {
  cnnrt_model *m = NULL;
  if (cnnrt_open(so, NULL, &m) != CNNRT_OK) {
    fprintf(stderr, "cnnrt_open: %s\n", cnnrt_last_error());
    return NULL;
  }
  cnnrt_set_learning_rate(m, 0.05);
  float *out[2] = {NULL, NULL};
  for (int pass = 0; pass < 2; pass++) {
    long k = 0;
    for (int i = 0; i < cnnrt_num_state(m); i++) {
      cnnrt_state_info si;
      if (cnnrt_state_info_at(m, i, &si) != CNNRT_OK || si.kind != CNNRT_STATE_PARAM) continue;
      out[pass] = realloc(out[pass], (size_t)(k + (long)si.bytes / 4) * 4);
      cnnrt_get_state(m, si.name, out[pass] + k, si.bytes);
      k += (long)si.bytes / 4;
    }
    *n = k;
    for (int s = 0; pass == 0 && s < STEPS; s++) {
      float loss, acc;
      if (cnnrt_train_step(m, imgs[s], (size_t)mb * NX, &labels[s][0][0], 1, &loss, &acc) != CNNRT_OK) { /* one update of mb micro-batches */
        fprintf(stderr, "cnnrt_train_step: %s\n", cnnrt_last_error());
        cgt_failures++;
      }
    }
  }
  cnnrt_close(m);
  *w0 = out[0];
  return out[1];
}

static void compare(const char *half, int no_accum_check) {
  char sf[512], sh[512], s1f[512], s1h[512];
  const char *const kf[][2] = {{"mode", "training"}, {"batch-size", "8"}, {"optimizer", "momentum"}, {"seed", "7"},
                               {"precision", "16.32"}, {"half-type", half}, {"gradient-accumulation", "2"}, {"replicas", "2"}};
  const char *const kh[][2] = {{"mode", "training"}, {"batch-size", "8"}, {"optimizer", "momentum"}, {"seed", "7"},
                               {"precision", "16.32"}, {"half-type", half}, {"gradient-accumulation", "2"}, {"replicas", "2"},
                               {"enable-half-partials", "1"}};
  const char *const k1h[][2] = {{"mode", "training"}, {"batch-size", "8"}, {"optimizer", "momentum"}, {"seed", "7"},
                                {"precision", "16.32"}, {"half-type", half}, {"enable-half-partials", "1"}};
  const char *const k1f[][2] = {{"mode", "training"}, {"batch-size", "8"}, {"optimizer", "momentum"}, {"seed", "7"},
                                {"precision", "16.32"}, {"half-type", half}};
  if (build(kf, 8, "pf.so", sf) || build(kh, 9, "ph.so", sh) ||
      (no_accum_check && (build(k1f, 6, "p1f.so", s1f) || build(k1h, 7, "p1h.so", s1h)))) {
    cgt_failures++;
    return;
  }
  long n = 0, n2 = 0;
  float *w0f, *w0h, *wf = run(sf, MB, &w0f, &n), *wh = run(sh, MB, &w0h, &n2);
  if (!wf || !wh || n != n2 || n < 1000) {
    cgt_failures++;
  } else {
    double dd = 0, d2 = 0;
    long differ = 0, init_differ = 0;
    for (long i = 0; i < n; i++) {
      init_differ += w0f[i] != w0h[i];
      double df = (double)wf[i] - w0f[i], dh = (double)wh[i] - w0h[i];
      dd += (dh - df) * (dh - df), d2 += df * df;
      differ += wf[i] != wh[i];
    }
    double rel = sqrt(dd / (d2 > 0 ? d2 : 1));
    fprintf(stderr, "%s half partials, gradient accumulation 2 x replicas 2, %d steps: %ld of %ld weights differ from "
            "f32 partials; |dw_half - dw_f32| / |dw_f32| = %.3g\n", half, STEPS, differ, n, rel);
    CGT_CHECK(init_differ == 0, "%s: different initial weights", half);
    CGT_CHECK(differ > n / 100, "%s: half partials changed only %ld of %ld weights", half, differ, n);
    /* free-running: from step 2 on the two runs' weights differ, so their bf16/fp16
     * activations can round to other neighbours (maxpool argmax / relu gate flips, as in
     * test_precision part 3) and the figure depends on the data: fp16 3.8e-3 (default data),
     * 5.5e-3, 7.5e-3, 8.5e-3, 3.6e-3 (CNNC_TEST_RNG=0x9e3779b97f4a7c15, 0x1a03c68561aa436f,
     * 0x2545f4914f6cdd1d, 0xdeadbeef12345), bf16 8.1e-3 .. 1.4e-2; the bounds keep a 2.4x /
     * 3.5x margin over the worst seen and still fail an unrounded (0) or wrongly rounded (~1)
     * partial */
    CGT_CHECK(rel > 0 && rel < (strcmp(half, "fp16") ? 0.05 : 0.02), "%s: update error %.3g vs f32 partials", half, rel);
  }
  free(wf), free(wh), free(w0f), free(w0h);
  unlink(sf), unlink(sh);
  if (!no_accum_check) return;
  /* no accumulation: no partial buffers, but the conv grad_weight kernels' own lane partials
   * (test_half_partials_kernels.c) are 16-bit: the update differs a little */
  float *a0, *b0, *a = run(s1f, 1, &a0, &n), *b = run(s1h, 1, &b0, &n2);
  if (!a || !b || n != n2) {
    cgt_failures++;
  } else {
    double dd = 0, d2 = 0;
    for (long i = 0; i < n; i++) {
      double df = (double)a[i] - a0[i], dh = (double)b[i] - b0[i];
      dd += (dh - df) * (dh - df), d2 += df * df;
    }
    double rel = sqrt(dd / (d2 > 0 ? d2 : 1));
    fprintf(stderr, "%s half partials without accumulation (kernel partials only), %d steps: |dw_half - dw_f32| / "
            "|dw_f32| = %.3g\n", half, STEPS, rel);
    /* 1.2e-2 (default data), 1.1e-2 .. 2.3e-2 on the four streams above */
    CGT_CHECK(rel > 0 && rel < 0.05, "%s: kernel partials only: update error %.3g vs f32 partials", half, rel);
  }
  free(a), free(b), free(a0), free(b0);
  unlink(s1f), unlink(s1h);
}

int main(void) {
  cgt_init_dir();
  const char *rng = getenv("CNNC_TEST_RNG"); /* another data stream (images, labels) */
  if (rng && *rng) cgt_rng = strtoull(rng, NULL, 0);
  for (int s = 0; s < STEPS; s++)
    for (int b = 0; b < MB; b++) {
      for (int i = 0; i < NX; i++) imgs[s][b][i] = (unsigned char)cgt_int(0, 255);
      for (int j = 0; j < BATCH; j++) labels[s][b][j] = (float)cgt_int(0, 9);
    }
  compare("bf16", 1);
  compare("fp16", 0);
  char so[512];
  const char *const bad[][2] = {{"mode", "training"}, {"enable-half-partials", "1"}};
  fprintf(stderr, "(an expected error follows)\n");
  CGT_CHECK(build(bad, 2, "bad.so", so) != 0, "--enable-half-partials with 32.32 must be rejected");
  return cgt_done("test_precision_train_partials");
}
