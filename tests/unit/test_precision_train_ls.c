/* test_precision_train_ls.c — --auto-loss-scaling (docs/precision.md), fmnist_cnn batch 8,
 * momentum, 16.32 fp16:
 *  1. from a huge initial scale (2^40) the fp16 gradients overflow: the updates are skipped
 *     (weights and momentum unchanged, bitwise), the scale halves each time and the skips are
 *     counted (cnnrt_loss_scale); the run ends with finite weights bitwise equal to a run
 *     compiled with the scale it backed off to, fed the batches after the skipped ones;
 *  2. growth: with --loss-scaling-interval 2 and an initial scale of 1 the scale doubles
 *     every 2 good steps;
 *  3. errors: --auto-loss-scaling with 32.32, or for inference; cnnrt_loss_scale on a model
 *     compiled without it is CNNRT_UNSUPPORTED. */
#include <math.h>

#include "test_codegen_harness.h"

enum { BATCH = 8, NX = BATCH * 28 * 28, STEPS = 28 };
static unsigned char imgs[STEPS][NX];
static float labels[STEPS][BATCH];

static int build(const char *const (*kv)[2], int nkv, const char *so_name, char *so) {
  return cgt_build_at("models/fmnist_cnn.yml", kv, nkv, so_name, so, NULL);
}

static cnnrt_model *open_model(const char *so) {
  cnnrt_model *m = cgt_rt_open(so, 0);
  if (m) cnnrt_set_learning_rate(m, 0.05);
  return m;
}

/* PARAM and OPTIMIZER state concatenated (malloc'd), *n floats. */
static float *weights(cnnrt_model *m, long *n) {
  float *w = NULL;
  long k = 0;
  for (int i = 0; i < cnnrt_num_state(m); i++) {
    cnnrt_state_info si;
    if (cnnrt_state_info_at(m, i, &si) != CNNRT_OK || (si.kind != CNNRT_STATE_PARAM && si.kind != CNNRT_STATE_OPTIMIZER))
      continue;
    w = realloc(w, (size_t)(k + (long)si.bytes / 4) * 4);
    cnnrt_get_state(m, si.name, w + k, si.bytes);
    k += (long)si.bytes / 4;
  }
  *n = k;
  return w;
}

static int step(cnnrt_model *m, int s) {
  float loss, acc;
  if (cnnrt_train_step(m, imgs[s], NX, labels[s], 1, &loss, &acc) == CNNRT_OK) return 0;
  fprintf(stderr, "cnnrt_train_step: %s\n", cnnrt_last_error());
  cgt_failures++;
  return -1;
}

#define COMMON {"mode", "training"}, {"batch-size", "8"}, {"optimizer", "momentum"}, {"seed", "7"}, \
               {"precision", "16.32"}, {"half-type", "fp16"}, {"auto-loss-scaling", "1"}

static void test_backoff(void) {
  char sa[512], sb[512], sval[64];
  const char *const ka[][2] = {COMMON, {"loss-scaling", "1099511627776"}, {"loss-scaling-interval", "1000000"}};
  if (build(ka, 9, "lsa.so", sa)) {
    cgt_failures++;
    return;
  }
  cnnrt_model *a = open_model(sa);
  if (!a) {
    cgt_failures++;
    return;
  }
  long n0, n1;
  float *w0 = weights(a, &n0);
  double scale[STEPS + 1];
  int64_t skipped[STEPS + 1];
  CGT_CHECK(cnnrt_loss_scale(a, &scale[0], &skipped[0]) == CNNRT_OK && scale[0] == 1099511627776.0 && skipped[0] == 0,
            "initial loss scale %g, skipped %lld", scale[0], (long long)skipped[0]);
  int k = -1; /* the first step that was not skipped */
  for (int s = 0; s < STEPS; s++) {
    if (step(a, s)) break;
    cnnrt_loss_scale(a, &scale[s + 1], &skipped[s + 1]);
    if (k < 0 && skipped[s + 1] == skipped[s]) k = s;
    if (s == 0) { /* the first step overflows: nothing changed */
      float *w1 = weights(a, &n1);
      CGT_CHECK(skipped[1] == 1 && scale[1] == scale[0] / 2, "step 1 from 2^40: skipped %lld, scale %g",
                (long long)skipped[1], scale[1]);
      CGT_CHECK(n1 == n0 && !memcmp(w0, w1, (size_t)n0 * 4), "a skipped step changed the weights or the momentum");
      free(w1);
    }
  }
  long na;
  float *wa = weights(a, &na);
  long nonfinite = 0;
  for (long i = 0; i < na; i++) nonfinite += !isfinite(wa[i]);
  fprintf(stderr, "auto loss scaling fp16 from 2^40: %lld of %d updates skipped, first good step %d at scale %g, "
          "final scale %g; %ld non-finite state elements\n", (long long)skipped[STEPS], STEPS, k + 1, k >= 0 ? scale[k] : 0.0,
          scale[STEPS], nonfinite);
  CGT_CHECK(k >= 5 && k < STEPS - 3, "first good step %d: expected several skips then good steps", k);
  CGT_CHECK(nonfinite == 0, "%ld non-finite weights", nonfinite);
  CGT_CHECK(scale[STEPS] == 1099511627776.0 / pow(2, (double)skipped[STEPS]), "scale %g after %lld skips", scale[STEPS],
            (long long)skipped[STEPS]);
  /* a run that starts at the scale the first good step used, on the batches from there on */
  if (k >= 0) {
    snprintf(sval, sizeof sval, "%.17g", scale[k]);
    const char *const kb[][2] = {COMMON, {"loss-scaling", sval}, {"loss-scaling-interval", "1000000"}};
    cnnrt_model *b = build(kb, 9, "lsb.so", sb) ? NULL : open_model(sb);
    if (!b) {
      cgt_failures++;
    } else {
      for (int s = k; s < STEPS; s++)
        if (step(b, s)) break;
      long nb;
      double sc;
      int64_t sk;
      float *wb = weights(b, &nb);
      long differ = 0;
      for (long i = 0; i < nb && nb == na; i++) differ += memcmp(&wa[i], &wb[i], 4) != 0;
      cnnrt_loss_scale(b, &sc, &sk);
      fprintf(stderr, "run started at scale %s on batches %d..%d: %ld of %ld state elements differ; final scale %g, "
              "%lld skipped\n", sval, k + 1, STEPS, differ, nb, sc, (long long)sk);
      CGT_CHECK(nb == na && differ == 0, "the backed-off run differs from the run started at the final scale in %ld", differ);
      CGT_CHECK(sc == scale[STEPS] && sk == skipped[STEPS] - k, "scale %g / %g, skipped %lld / %lld", sc, scale[STEPS],
                (long long)sk, (long long)(skipped[STEPS] - k));
      free(wb);
      cnnrt_close(b);
      unlink(sb);
    }
  }
  free(w0), free(wa);
  cnnrt_close(a);
  unlink(sa);
}

static void test_growth(void) {
  char so[512];
  const char *const kc[][2] = {COMMON, {"loss-scaling-interval", "2"}, {"loss-scaling", "0.125"}};
  cnnrt_model *c = build(kc, 9, "lsc.so", so) ? NULL : open_model(so);
  if (!c) {
    cgt_failures++;
    return;
  }
  double sc = 0;
  int64_t sk = -1;
  for (int s = 0; s < 6; s++)
    if (step(c, s)) break;
  cnnrt_loss_scale(c, &sc, &sk);
  fprintf(stderr, "growth: scale 0.125, interval 2, 6 steps: scale %g, %lld skipped\n", sc, (long long)sk);
  CGT_CHECK(sk == 0 && sc == 1.0, "growth: scale %g (want 1 = 0.125 * 2^3), skipped %lld", sc, (long long)sk);
  cnnrt_close(c);
  unlink(so);
}

static void test_errors(void) {
  char so[512];
  const char *const a[][2] = {{"mode", "training"}, {"auto-loss-scaling", "1"}};
  const char *const b[][2] = {{"precision", "16.16"}, {"auto-loss-scaling", "1"}};
  const char *const c[][2] = {{"mode", "training"}, {"precision", "16.32"}};
  fprintf(stderr, "(two expected errors follow)\n");
  CGT_CHECK(build(a, 2, "e1.so", so) != 0, "--auto-loss-scaling with 32.32 must be rejected");
  CGT_CHECK(build(b, 2, "e2.so", so) != 0, "--auto-loss-scaling for inference must be rejected");
  cnnrt_model *m = build(c, 2, "e3.so", so) ? NULL : open_model(so);
  double sc;
  CGT_CHECK(m && cnnrt_loss_scale(m, &sc, NULL) == CNNRT_UNSUPPORTED && strstr(cnnrt_last_error(), "--auto-loss-scaling"),
            "cnnrt_loss_scale without --auto-loss-scaling: %s", cnnrt_last_error());
  cnnrt_close(m);
  unlink(so);
}

int main(void) {
  cgt_init_dir();
  for (int s = 0; s < STEPS; s++) {
    for (int i = 0; i < NX; i++) imgs[s][i] = (unsigned char)cgt_int(0, 255);
    for (int b = 0; b < BATCH; b++) labels[s][b] = (float)cgt_int(0, 9);
  }
  test_backoff();
  test_growth();
  test_errors();
  return cgt_done("test_precision_train_ls");
}
