/* rt_mix.c — mixup and cutmix (timm's Mixup, batch mode) for models compiled with cnnc
 * --mixed-labels, whose loss takes rows (a, b, lam): the batch mixing, its deterministic
 * draws (Beta through two Gammas), and the runtime's side of the mixed labels (width, checks,
 * class ids widened to (y, y, 1)). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "rt_internal.h"

/* ---- the model's labels ---------------------------------------------------------------- */
int rt_label_width(const cnnrt_model *m) {
  const cnnc_abi_train *t = m->tr->t;
  return t->tensors[t->labels].bytes == 12 * (int64_t)m->d->batch_size ? 3 : 1;
}

CNNRT_API int cnnrt_mixed_labels(const cnnrt_model *m) { return m && m->tr && rt_label_width(m) == 3; }

cnnrt_status rt_check_mixed_labels(const char *fn, const float *labels, int64_t n, int64_t k) {
  for (int64_t i = 0; i < n; i++) {
    const float *r = labels + 3 * i;
    for (int j = 0; j < 2; j++)
      if (!(r[j] >= 0 && r[j] < (float)k && r[j] == floorf(r[j])))
        return rt_fail(CNNRT_INVALID_ARGUMENT, "%s: mixed label %lld: class %c is %g, not a class id in 0..%lld", fn,
                       (long long)i, "ab"[j], (double)r[j], (long long)(k - 1));
    if (!(r[2] >= 0 && r[2] <= 1))
      return rt_fail(CNNRT_INVALID_ARGUMENT, "%s: mixed label %lld: weight %g is not in [0, 1]", fn, (long long)i,
                     (double)r[2]);
  }
  return CNNRT_OK;
}

const float *rt_labels_widen(cnnrt_model *m, const float *labels, int64_t n) {
  rt_trainer *tr = m->tr;
  if (rt_label_width(m) == 1) return labels;
  if ((size_t)n > SIZE_MAX / 12) return NULL;
  if (tr->wide_n < (size_t)n * 3) {
    float *w = realloc(tr->wide, (size_t)n * 3 * sizeof *w);
    if (!w) return NULL;
    tr->wide = w, tr->wide_n = (size_t)n * 3;
  }
  for (int64_t i = 0; i < n; i++) tr->wide[3 * i] = tr->wide[3 * i + 1] = labels[i], tr->wide[3 * i + 2] = 1.0f;
  return tr->wide;
}

CNNRT_API cnnrt_status cnnrt_train_step_mixed(cnnrt_model *m, const void *images, size_t images_bytes,
                                              const float *labels, int n, float *loss, float *accuracy) {
  rt_clear_error();
  return rt_train_step(m, "cnnrt_train_step_mixed", images, images_bytes, labels, 3, n, loss, accuracy);
}

/* ---- draws: splitmix64 from (seed, index) -------------------------------------------------- */
typedef struct mix_rng { uint64_t s; } mix_rng;

static uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}
static uint64_t rng_next(mix_rng *r) { return mix64(r->s += 0x9e3779b97f4a7c15ULL); }
/* uniform in [0, 1) with 53 bits */
static double rng_unit(mix_rng *r) { return (double)(rng_next(r) >> 11) * 0x1.0p-53; }
/* uniform integer in [0, n), n >= 1 (rejection: no modulo bias) */
static int64_t rng_below(mix_rng *r, int64_t n) {
  uint64_t lim = UINT64_MAX - UINT64_MAX % (uint64_t)n, x;
  while ((x = rng_next(r)) >= lim) {
  }
  return (int64_t)(x % (uint64_t)n);
}
static double rng_normal(mix_rng *r) { /* Box-Muller, one of the pair */
  double u = 1.0 - rng_unit(r), v = rng_unit(r);
  return sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v);
}
/* Gamma(a, 1), a > 0: Marsaglia and Tsang; a < 1 through Gamma(a + 1) U^(1/a). */
static double rng_gamma(mix_rng *r, double a) {
  if (a < 1.0) {
    double u = 1.0 - rng_unit(r);
    return rng_gamma(r, a + 1.0) * pow(u, 1.0 / a);
  }
  double d = a - 1.0 / 3.0, c = 1.0 / sqrt(9.0 * d);
  for (;;) {
    double x = rng_normal(r), v = 1.0 + c * x;
    if (v <= 0) continue;
    v = v * v * v;
    double u = 1.0 - rng_unit(r);
    if (log(u) < 0.5 * x * x + d - d * v + d * log(v)) return d * v;
  }
}
/* Beta(a, a) as X / (X + Y) of two Gamma(a) draws; 0.5 if both underflow. */
static double rng_beta(mix_rng *r, double a) {
  double x = rng_gamma(r, a), y = rng_gamma(r, a);
  return x + y > 0 ? x / (x + y) : 0.5;
}

/* ---- mixing ------------------------------------------------------------------------------- */
static void mix_pair_u8(uint8_t *x, uint8_t *y, size_t e, float la, float lb) {
  for (size_t k = 0; k < e; k++) {
    float a = (float)x[k], b = (float)y[k];
    float p = a * la, q = b * lb, r = b * la, s = a * lb;
    float u = rintf(p + q), v = rintf(r + s); /* in [0, 255]: la + lb rounds to about 1 */
    x[k] = (uint8_t)(u > 255 ? 255 : u < 0 ? 0 : u), y[k] = (uint8_t)(v > 255 ? 255 : v < 0 ? 0 : v);
  }
}
static void mix_pair_f32(float *x, float *y, size_t e, float la, float lb) {
  for (size_t k = 0; k < e; k++) {
    float a = x[k], b = y[k];
    float p = a * la, q = b * lb, r = b * la, s = a * lb;
    x[k] = p + q, y[k] = r + s;
  }
}

/* Swaps box rows [y0,y1) x columns [x0,x1) of every channel between samples x and y. */
static void swap_box(uint8_t *x, uint8_t *y, int c, int h, int w, size_t esz, int y0, int y1, int x0, int x1) {
  uint8_t tmp[256];
  for (int ch = 0; ch < c; ch++)
    for (int r = y0; r < y1; r++) {
      size_t off = (((size_t)ch * (size_t)h + (size_t)r) * (size_t)w + (size_t)x0) * esz, len = (size_t)(x1 - x0) * esz;
      for (size_t done = 0; done < len; done += sizeof tmp) {
        size_t k = len - done < sizeof tmp ? len - done : sizeof tmp;
        memcpy(tmp, x + off + done, k), memcpy(x + off + done, y + off + done, k), memcpy(y + off + done, tmp, k);
      }
    }
}

static int64_t clip64(int64_t v, int64_t lo, int64_t hi) { return v < lo ? lo : v > hi ? hi : v; }

CNNRT_API cnnrt_status cnnrt_mix_batch(const cnnrt_mix_options *o, uint64_t index, cnnrt_dtype dtype, void *images, int n,
                                       int c, int h, int w, const float *labels, float *mixed, double *lam_out,
                                       cnnrt_mix_kind *kind_out) {
  rt_clear_error();
  if (!o || !images || !labels || !mixed || n < 1 || c < 1 || h < 1 || w < 1)
    return rt_fail(CNNRT_INVALID_ARGUMENT, "cnnrt_mix_batch: NULL buffer or options, or n %d, shape %dx%dx%d not >= 1", n, c,
                   h, w);
  if (!(o->mixup_alpha >= 0 && o->mixup_alpha <= 1e6) || !(o->cutmix_alpha >= 0 && o->cutmix_alpha <= 1e6))
    return rt_fail(CNNRT_INVALID_ARGUMENT, "cnnrt_mix_batch: alphas %g and %g must be in [0, 1e6]", o->mixup_alpha,
                   o->cutmix_alpha);
  if (dtype != CNNRT_U8 && dtype != CNNRT_F32)
    return rt_fail(CNNRT_INVALID_ARGUMENT, "cnnrt_mix_batch: images must be u8 or f32 (dtype %d)", (int)dtype);
  mix_rng r = {mix64(o->seed ^ mix64(index ^ 0x6d69787570ULL))}; /* "mixup" */
  double lam = 1.0;
  cnnrt_mix_kind kind = CNNRT_MIX_NONE;
  if (o->mixup_alpha > 0 && o->cutmix_alpha > 0) {
    kind = rng_unit(&r) < 0.5 ? CNNRT_MIX_CUTMIX : CNNRT_MIX_MIXUP;
    lam = rng_beta(&r, kind == CNNRT_MIX_CUTMIX ? o->cutmix_alpha : o->mixup_alpha);
  } else if (o->mixup_alpha > 0) {
    kind = CNNRT_MIX_MIXUP, lam = rng_beta(&r, o->mixup_alpha);
  } else if (o->cutmix_alpha > 0) {
    kind = CNNRT_MIX_CUTMIX, lam = rng_beta(&r, o->cutmix_alpha);
  }
  size_t esz = dtype == CNNRT_U8 ? 1 : 4, e = (size_t)c * (size_t)h * (size_t)w, per = e * esz;
  uint8_t *x = images;
  if (kind == CNNRT_MIX_CUTMIX) { /* timm's rand_bbox + the area-corrected lam */
    double ratio = sqrt(1.0 - lam);
    int64_t ch = (int64_t)(h * ratio), cw = (int64_t)(w * ratio);
    int64_t cy = rng_below(&r, h), cx = rng_below(&r, w);
    int64_t y0 = clip64(cy - ch / 2, 0, h), y1 = clip64(cy + ch / 2, 0, h);
    int64_t x0 = clip64(cx - cw / 2, 0, w), x1 = clip64(cx + cw / 2, 0, w);
    lam = 1.0 - (double)((y1 - y0) * (x1 - x0)) / ((double)h * (double)w);
    for (int i = 0; i < n / 2; i++)
      swap_box(x + (size_t)i * per, x + (size_t)(n - 1 - i) * per, c, h, w, esz, (int)y0, (int)y1, (int)x0, (int)x1);
  } else if (kind == CNNRT_MIX_MIXUP) {
    float la = (float)lam, lb = (float)(1.0 - lam);
    for (int i = 0; i < (n + 1) / 2; i++) { /* the middle sample of an odd batch mixes with itself, as in timm */
      uint8_t *a = x + (size_t)i * per, *b = x + (size_t)(n - 1 - i) * per;
      if (dtype == CNNRT_U8) mix_pair_u8(a, b, a == b ? 0 : e, la, lb);
      else mix_pair_f32((float *)(void *)a, (float *)(void *)b, a == b ? 0 : e, la, lb);
      if (a == b && dtype == CNNRT_U8)
        for (size_t k = 0; k < e; k++) {
          float v = rintf((float)a[k] * la + (float)a[k] * lb);
          a[k] = (uint8_t)(v > 255 ? 255 : v < 0 ? 0 : v);
        }
      else if (a == b)
        for (size_t k = 0; k < e; k++) ((float *)(void *)a)[k] = ((float *)(void *)a)[k] * la + ((float *)(void *)a)[k] * lb;
    }
  }
  for (int i = 0; i < n; i++)
    mixed[3 * i] = labels[i], mixed[3 * i + 1] = labels[n - 1 - i], mixed[3 * i + 2] = (float)lam;
  if (lam_out) *lam_out = lam;
  if (kind_out) *kind_out = kind;
  return CNNRT_OK;
}
