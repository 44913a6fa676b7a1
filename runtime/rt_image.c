/* rt_image.c — one JPEG (TurboJPEG, scaled DCT decoding when the crop allows) or PNG
 * (libspng) file to one u8 CHW sample through the torchvision recipes' transforms
 * (RandomResizedCrop + flip, Resize + CenterCrop, Resize), resampled exactly as PIL's
 * bilinear resize (fixed point, 22 fraction bits).  Random choices: splitmix64 of the seed. */
#include <math.h>
#include <spng.h>
#include <stdlib.h>
#include <string.h>
#include <turbojpeg.h>

#include "rt_image.h"
#include "rt_internal.h"

#define RT_IMG_PREC 22 /* PIL's PRECISION_BITS (32 - 8 - 2) */
#define RT_IMG_MAX_TAPS ((size_t)1 << 26) /* filter taps of one call (refused beyond: absurd xforms) */

/* A decoded image: packed rows, grey (c 1: one byte a pixel) or colour (c 3: RGBX, four bytes
 * a pixel, the fourth ignored, so the horizontal pass works on whole 32-bit pixels). */
typedef struct rt_img {
  uint8_t *p;
  int w, h, c;
} rt_img;

static size_t rt_ps(const rt_img *im) { return im->c == 3 ? 4 : 1; }

/* One axis of the resample: the output window [off, off + n) of a virtual resize of the
 * source box [in0, in1) to N pixels; filter taps stay inside [lo, hi) (the region that
 * plays PIL's whole image: the crop for TRAIN, the image otherwise). */
typedef struct rt_axis {
  double in0, in1;
  int lo, hi, N, off, n;
} rt_axis;

typedef struct rt_taps {
  int *first, *count; /* [n] first source index and number of taps */
  int32_t *k;         /* [n][ksize] weights, sum ~ 1 << RT_IMG_PREC */
  int ksize;
} rt_taps;

/* ---- random choices: splitmix64 ------------------------------------------------------------ */
/* Draw i of a sample is splitmix64's output for state seed + (i + 1) * golden gamma: a counter
 * based stream, so draws depend on the seed and their index only. */
static double rt_uniform(uint64_t seed, int i) {
  uint64_t z = seed + (uint64_t)(i + 1) * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return (double)(z >> 11) * 0x1.0p-53;
}

void rt_xform_default(rt_xform *x, rt_xform_kind kind, int out_c, int out_h, int out_w) {
  memset(x, 0, sizeof *x);
  x->kind = kind;
  x->out_c = out_c, x->out_h = out_h, x->out_w = out_w;
  x->scale_lo = 0.08, x->scale_hi = 1.0;
  x->ratio_lo = 3.0 / 4.0, x->ratio_hi = 4.0 / 3.0;
  x->flip = kind == RT_XFORM_TRAIN;
  int side = out_h < out_w ? out_h : out_w;
  x->resize_short = (int)lrint(side * 256.0 / 224.0);
}

/* torchvision 0.14 RandomResizedCrop.get_params on a w x h image; draws 1.. of seed (draw 0
 * is the flip).  Python's round() is half-to-even: rint in the default rounding mode. */
void rt_xform_train_crop(const rt_xform *x, int w, int h, uint64_t seed, int *x0, int *y0, int *cw, int *ch, int *flip) {
  double area = (double)w * h, lr0 = log(x->ratio_lo), lr1 = log(x->ratio_hi);
  *flip = x->flip && rt_uniform(seed, 0) < 0.5;
  for (int t = 0; t < 10; t++) {
    double target = area * (x->scale_lo + (x->scale_hi - x->scale_lo) * rt_uniform(seed, 1 + 4 * t));
    double ar = exp(lr0 + (lr1 - lr0) * rt_uniform(seed, 2 + 4 * t));
    double fw = rint(sqrt(target * ar)), fh = rint(sqrt(target / ar));
    if (fw > 0 && fw <= w && fh > 0 && fh <= h) {
      *cw = (int)fw, *ch = (int)fh;
      *y0 = (int)(rt_uniform(seed, 3 + 4 * t) * (h - *ch + 1));
      *x0 = (int)(rt_uniform(seed, 4 + 4 * t) * (w - *cw + 1));
      return;
    }
  }
  double in_ratio = (double)w / h;
  if (in_ratio < x->ratio_lo) *cw = w, *ch = (int)rint(w / x->ratio_lo);
  else if (in_ratio > x->ratio_hi) *ch = h, *cw = (int)rint(h * x->ratio_hi);
  else *cw = w, *ch = h;
  if (*cw < 1) *cw = 1;
  if (*ch < 1) *ch = 1;
  if (*cw > w) *cw = w;
  if (*ch > h) *ch = h;
  *y0 = (h - *ch) / 2, *x0 = (w - *cw) / 2;
}

static cnnrt_status rt_xform_check(const rt_xform *x, const char *name) {
  if (!x) return rt_fail(CNNRT_INVALID_ARGUMENT, "%s: no transform", name);
  if ((x->out_c != 1 && x->out_c != 3) || x->out_h < 1 || x->out_w < 1 || x->out_h > RT_IMAGE_MAX_SIDE ||
      x->out_w > RT_IMAGE_MAX_SIDE)
    return rt_fail(CNNRT_INVALID_ARGUMENT, "%s: bad sample shape %d x %d x %d", name, x->out_c, x->out_h, x->out_w);
  if (x->kind == RT_XFORM_TRAIN) {
    if (!(x->scale_lo > 0 && x->scale_lo <= x->scale_hi && x->scale_hi <= 1) ||
        !(x->ratio_lo > 0 && x->ratio_lo <= x->ratio_hi && x->ratio_hi < 1e6))
      return rt_fail(CNNRT_INVALID_ARGUMENT, "%s: bad crop ranges scale %g-%g ratio %g-%g", name, x->scale_lo, x->scale_hi,
                     x->ratio_lo, x->ratio_hi);
  } else if (x->kind == RT_XFORM_CENTER) {
    if (x->resize_short < 1 || x->resize_short > RT_IMAGE_MAX_SIDE)
      return rt_fail(CNNRT_INVALID_ARGUMENT, "%s: bad resize_short %d", name, x->resize_short);
  } else if (x->kind != RT_XFORM_RESIZE) {
    return rt_fail(CNNRT_INVALID_ARGUMENT, "%s: unknown transform kind %d", name, (int)x->kind);
  }
  return CNNRT_OK;
}

/* CenterCrop of out from a resized side of N: torchvision's offset int(round((N - out) / 2)),
 * or, when out > N, the zero padding's left part (negative offset). */
static int rt_center_off(int N, int out) {
  if (out > N) return -((out - N) / 2);
  return (int)rint((N - out) / 2.0);
}

/* The two axes in the stored image's coordinates (w x h) and the flip. */
static void rt_plan(const rt_xform *x, int w, int h, uint64_t seed, rt_axis *ax, rt_axis *ay, int *flip) {
  *ax = (rt_axis){0, w, 0, w, x->out_w, 0, x->out_w};
  *ay = (rt_axis){0, h, 0, h, x->out_h, 0, x->out_h};
  *flip = 0;
  if (x->kind == RT_XFORM_TRAIN) {
    int x0, y0, cw, ch;
    rt_xform_train_crop(x, w, h, seed, &x0, &y0, &cw, &ch, flip);
    *ax = (rt_axis){x0, x0 + cw, x0, x0 + cw, x->out_w, 0, x->out_w};
    *ay = (rt_axis){y0, y0 + ch, y0, y0 + ch, x->out_h, 0, x->out_h};
  } else if (x->kind == RT_XFORM_CENTER) {
    int s = x->resize_short, rw, rh; /* torchvision: the long side int(s * long / short) */
    if (w <= h) rw = s, rh = (int)((double)s * h / w);
    else rh = s, rw = (int)((double)s * w / h);
    if (rw < 1) rw = 1;
    if (rh < 1) rh = 1;
    ax->N = rw, ax->off = rt_center_off(rw, x->out_w);
    ay->N = rh, ay->off = rt_center_off(rh, x->out_h);
  }
}

/* The axis in the coordinates of an image decoded at scale num/den (size sz). */
static void rt_axis_scale(rt_axis *a, int num, int den, int sz) {
  if (num == den) return;
  double s = (double)num / den;
  a->in0 *= s, a->in1 *= s;
  a->lo = (int)floor(a->lo * s);
  a->hi = (int)ceil(a->hi * s);
  if (a->hi > sz) a->hi = sz;
  if (a->lo >= a->hi) a->lo = a->hi - 1;
}

/* ---- PIL's bilinear resample ----------------------------------------------------------------- */
static size_t rt_ksize(const rt_axis *a) {
  double scale = (a->in1 - a->in0) / a->N;
  return (size_t)ceil(scale < 1 ? 1 : scale) * 2 + 1;
}

/* PIL's precompute_coeffs + normalize_coeffs_8bpc (Resample.c) for the window of a, taps
 * relative to the region [lo, hi); zero weights at either end are dropped. */
static void rt_taps_make(const rt_axis *a, rt_taps *t, double *tmp) {
  double scale = (a->in1 - a->in0) / a->N, fs = scale < 1 ? 1 : scale, support = fs, ss = 1.0 / fs;
  int size = a->hi - a->lo;
  double in0 = a->in0 - a->lo;
  for (int j = 0; j < a->n; j++) {
    int v = a->off + j;
    int32_t *k = t->k + (size_t)j * t->ksize;
    t->first[j] = a->lo, t->count[j] = 0;
    if (v < 0 || v >= a->N) continue; /* CenterCrop's zero padding */
    double center = in0 + (v + 0.5) * scale, ww = 0;
    int xmin = (int)(center - support + 0.5), xmax = (int)(center + support + 0.5);
    if (xmin < 0) xmin = 0;
    if (xmax > size) xmax = size;
    xmax -= xmin;
    for (int x = 0; x < xmax; x++) {
      double d = fabs((x + xmin - center + 0.5) * ss);
      tmp[x] = d < 1 ? 1 - d : 0;
      ww += tmp[x];
    }
    int lo = 0, hi = xmax;
    for (int x = 0; x < xmax; x++) {
      if (ww != 0) tmp[x] /= ww;
      k[x] = (int32_t)(0.5 + tmp[x] * (1 << RT_IMG_PREC));
    }
    while (lo < hi && k[lo] == 0) lo++;
    while (hi > lo && k[hi - 1] == 0) hi--;
    if (lo) memmove(k, k + lo, (size_t)(hi - lo) * sizeof *k);
    t->first[j] = a->lo + xmin + lo, t->count[j] = hi - lo;
  }
}

static inline uint8_t rt_clip8(int32_t v) {
  if (v >= (int32_t)1 << (RT_IMG_PREC + 8)) return 255;
  if (v <= 0) return 0;
  return (uint8_t)(v >> RT_IMG_PREC);
}

/* Horizontal pass of one RGBX row into dst (n RGB pixels): a pixel's four lanes as one GCC
 * vector (an AVX2 clone where the CPU has it). */
typedef int32_t rt_v4si __attribute__((vector_size(16)));

/* The AVX2 builds of the two passes are chosen at run time by rt_img_avx2 (not with
 * target_clones: its IFUNC resolvers run inside the dynamic loader's relocation of libcnnrt,
 * before a sanitizer runtime is ready, and crash the ASan/fuzz builds). */
static int rt_img_avx2(void) {
  static _Atomic int have = -1;
  int h = atomic_load_explicit(&have, memory_order_relaxed);
  if (h < 0) {
    __builtin_cpu_init();
    h = __builtin_cpu_supports("avx2") != 0;
    atomic_store_explicit(&have, h, memory_order_relaxed);
  }
  return h;
}

static inline __attribute__((always_inline)) void rt_hrow4_body(const uint8_t *row, const rt_taps *t, int n, uint8_t *dst) {
  const rt_v4si half = {1 << (RT_IMG_PREC - 1), 1 << (RT_IMG_PREC - 1), 1 << (RT_IMG_PREC - 1), 1 << (RT_IMG_PREC - 1)};
  for (int j = 0; j < n; j++) {
    const int32_t *k = t->k + (size_t)j * t->ksize;
    const uint8_t *s = row + (size_t)t->first[j] * 4;
    rt_v4si a = half;
    for (int x = 0; x < t->count[j]; x++, s += 4) {
      rt_v4si v = {s[0], s[1], s[2], s[3]};
      a += v * k[x];
    }
    a >>= RT_IMG_PREC; /* weights and pixels are >= 0: only the top needs clipping */
    rt_v4si over = a > 255;
    a = (a & ~over) | (over & 255);
    dst[3 * j] = (uint8_t)a[0], dst[3 * j + 1] = (uint8_t)a[1], dst[3 * j + 2] = (uint8_t)a[2];
  }
}
__attribute__((target("avx2"))) static void rt_hrow4_avx2(const uint8_t *row, const rt_taps *t, int n, uint8_t *dst) {
  rt_hrow4_body(row, t, n, dst);
}
static void rt_hrow4_base(const uint8_t *row, const rt_taps *t, int n, uint8_t *dst) { rt_hrow4_body(row, t, n, dst); }
static void rt_hrow4(const uint8_t *row, const rt_taps *t, int n, uint8_t *dst) {
  (rt_img_avx2() ? rt_hrow4_avx2 : rt_hrow4_base)(row, t, n, dst);
}

/* Horizontal pass of source row r into dst (n pixels of im->c bytes). */
static void rt_hpass(const rt_img *im, int r, const rt_taps *t, int n, uint8_t *dst) {
  const uint8_t *row = im->p + (size_t)r * im->w * rt_ps(im);
  if (im->c == 3) {
    rt_hrow4(row, t, n, dst);
  } else {
    for (int j = 0; j < n; j++) {
      const int32_t *k = t->k + (size_t)j * t->ksize;
      const uint8_t *s = row + t->first[j];
      int32_t a0 = 1 << (RT_IMG_PREC - 1);
      for (int x = 0; x < t->count[j]; x++) a0 += s[x] * k[x];
      dst[j] = rt_clip8(a0);
    }
  }
}

/* One output row of the vertical pass: res[e] = clip8(2^21 + sum_y rows[y][e] * k[y]) for e <
 * n (a multiple of 16; rows `stride` bytes apart).  Blocks of 16 so GCC vectorises at -O2;
 * an AVX2 clone where the CPU has it (PIL's arithmetic either way). */
static inline __attribute__((always_inline)) void rt_vrow_body(const uint8_t *rows, size_t stride, const int32_t *k, int count,
                                                              size_t n, uint8_t *res) {
  for (size_t e = 0; e < n; e += 16) {
    int32_t a[16];
    for (int u = 0; u < 16; u++) a[u] = 1 << (RT_IMG_PREC - 1);
    for (int y = 0; y < count; y++) {
      const uint8_t *s = rows + (size_t)y * stride + e;
      int32_t w = k[y];
      for (int u = 0; u < 16; u++) a[u] += s[u] * w;
    }
    for (int u = 0; u < 16; u++) {
      int32_t v = a[u] < 0 ? 0 : a[u];
      v = v > (1 << (RT_IMG_PREC + 8)) - 1 ? (1 << (RT_IMG_PREC + 8)) - 1 : v;
      res[e + u] = (uint8_t)(v >> RT_IMG_PREC);
    }
  }
}
__attribute__((target("avx2"))) static void rt_vrow_avx2(const uint8_t *rows, size_t stride, const int32_t *k, int count,
                                                          size_t n, uint8_t *res) {
  rt_vrow_body(rows, stride, k, count, n, res);
}
static void rt_vrow_base(const uint8_t *rows, size_t stride, const int32_t *k, int count, size_t n, uint8_t *res) {
  rt_vrow_body(rows, stride, k, count, n, res);
}
static void rt_vrow(const uint8_t *rows, size_t stride, const int32_t *k, int count, size_t n, uint8_t *res) {
  (rt_img_avx2() ? rt_vrow_avx2 : rt_vrow_base)(rows, stride, k, count, n, res);
}

/* Resamples im over the axes into out (planar out_c x ay->n x ax->n), mirrored if flip: the
 * horizontal pass (rounded to u8, as PIL) over the source rows the window needs, then the
 * vertical pass. */
static cnnrt_status rt_resample(const rt_img *im, const rt_axis *ax, const rt_axis *ay, int flip, int out_c, uint8_t *out,
                                const char *name) {
  size_t kx = rt_ksize(ax), ky = rt_ksize(ay), nx = (size_t)ax->n, ny = (size_t)ay->n, c = (size_t)im->c;
  if (kx * nx + ky * ny > RT_IMG_MAX_TAPS)
    return rt_fail(CNNRT_UNSUPPORTED, "%s: %zu filter taps for a %dx%d image (resize out of range)", name, kx * nx + ky * ny,
                   im->w, im->h);
  size_t kmax = kx > ky ? kx : ky, rowb = nx * c, stride = (rowb + 15) & ~(size_t)15;
  size_t bytes = (kx * nx + ky * ny) * sizeof(int32_t) + 2 * (nx + ny) * sizeof(int) + kmax * sizeof(double) + stride;
  char *mem = malloc(bytes);
  if (!mem) return rt_fail(CNNRT_OUT_OF_MEMORY, "%s: out of memory (%zu bytes of filter taps)", name, bytes);
  double *tmp = (double *)mem; /* doubles first: malloc's alignment */
  char *q = mem + kmax * sizeof(double);
  rt_taps tx = {(int *)q, (int *)q + nx, NULL, (int)kx}, ty = {(int *)q + 2 * nx, (int *)q + 2 * nx + ny, NULL, (int)ky};
  q += 2 * (nx + ny) * sizeof(int);
  tx.k = (int32_t *)q, q += kx * nx * sizeof(int32_t);
  ty.k = (int32_t *)q, q += ky * ny * sizeof(int32_t);
  uint8_t *res = (uint8_t *)q;
  rt_taps_make(ax, &tx, tmp);
  rt_taps_make(ay, &ty, tmp);
  int y0 = im->h, y1 = 0; /* the source rows the window reads */
  for (size_t i = 0; i < ny; i++)
    if (ty.count[i]) {
      if (ty.first[i] < y0) y0 = ty.first[i];
      if (ty.first[i] + ty.count[i] > y1) y1 = ty.first[i] + ty.count[i];
    }
  if (y1 < y0) y1 = y0 = 0;
  uint8_t *mid = calloc(stride * (size_t)(y1 - y0) + 1, 1); /* rows padded to 16 bytes (zeros) */
  if (!mid) {
    free(mem);
    return rt_fail(CNNRT_OUT_OF_MEMORY, "%s: out of memory", name);
  }
  for (int r = y0; r < y1; r++) rt_hpass(im, r, &tx, (int)nx, mid + stride * (size_t)(r - y0));
  size_t plane = nx * ny;
  for (size_t i = 0; i < ny; i++) {
    rt_vrow(ty.count[i] ? mid + stride * (size_t)(ty.first[i] - y0) : mid, stride, ty.k + i * ty.ksize, ty.count[i], stride, res);
    uint8_t *o = out + i * nx;
    if (c == 3) {
      for (size_t j = 0; j < nx; j++) {
        size_t jj = flip ? nx - 1 - j : j;
        o[jj] = res[3 * j], o[plane + jj] = res[3 * j + 1], o[2 * plane + jj] = res[3 * j + 2];
      }
    } else {
      for (int ch = 0; ch < out_c; ch++)
        for (size_t j = 0; j < nx; j++) o[(size_t)ch * plane + (flip ? nx - 1 - j : j)] = res[j];
    }
  }
  free(mid);
  free(mem);
  return CNNRT_OK;
}

/* PIL's "RGB" -> "L" (Convert.c L24), in place. */
static void rt_to_grey(rt_img *im) {
  size_t n = (size_t)im->w * im->h;
  for (size_t i = 0; i < n; i++) {
    const uint8_t *s = im->p + 4 * i;
    im->p[i] = (uint8_t)((s[0] * 19595u + s[1] * 38470u + s[2] * 7471u + 0x8000u) >> 16);
  }
  im->c = 1;
}

/* ---- decoding ------------------------------------------------------------------------------- */
typedef enum { RT_FMT_NONE, RT_FMT_JPEG, RT_FMT_PNG } rt_fmt;

static rt_fmt rt_format(const uint8_t *d, size_t n) {
  static const uint8_t png[8] = {0x89, 'P', 'N', 'G', 0x0d, 0x0a, 0x1a, 0x0a};
  if (n >= 3 && d[0] == 0xff && d[1] == 0xd8 && d[2] == 0xff) return RT_FMT_JPEG;
  if (n >= 8 && !memcmp(d, png, 8)) return RT_FMT_PNG;
  return RT_FMT_NONE;
}

static cnnrt_status rt_check_size(const char *name, const char *what, int64_t w, int64_t h) {
  if (w < 1 || h < 1 || w > RT_IMAGE_MAX_SIDE || h > RT_IMAGE_MAX_SIDE || w * h > RT_IMAGE_MAX_PIXELS)
    return rt_fail(CNNRT_BAD_MODEL, "%s: %s image of %lld x %lld pixels (at most %d a side and %lld pixels)", name, what,
                   (long long)w, (long long)h, RT_IMAGE_MAX_SIDE, (long long)RT_IMAGE_MAX_PIXELS);
  return CNNRT_OK;
}

/* A TurboJPEG failure: fatal errors and the warnings that mean missing pixels (a file cut
 * short, a marker inside entropy-coded data) refuse the image; the other warnings (extraneous
 * bytes, a JFIF version) keep it, as PIL does.  Returns OK for a kept warning. */
static int rt_tj_benign(tjhandle tj) {
  const char *msg = tjGetErrorStr2(tj);
  return msg && tjGetErrorCode(tj) == TJERR_WARNING && !strstr(msg, "remature end") && !strstr(msg, "ad Huffman") &&
         !strstr(msg, "resync") && !strstr(msg, "ad arithmetic");
}

static cnnrt_status rt_tj_fail(tjhandle tj, const char *name, const char *what) {
  const char *msg = tjGetErrorStr2(tj);
  if (!msg) msg = "unknown error";
  if (rt_tj_benign(tj)) return CNNRT_OK;
  if (strstr(msg, "remature end")) return rt_fail(CNNRT_BAD_MODEL, "%s: truncated JPEG (%s: %s)", name, what, msg);
  return rt_fail(CNNRT_BAD_MODEL, "%s: corrupt JPEG (%s: %s)", name, what, msg);
}

typedef struct rt_jpeg {
  tjhandle tj;
  int w, h, cs;
} rt_jpeg;

static cnnrt_status rt_jpeg_header(rt_jpeg *j, const uint8_t *data, size_t n, const char *name) {
  int sub = 0;
  if (!(j->tj = tjInitDecompress())) return rt_fail(CNNRT_OUT_OF_MEMORY, "%s: out of memory (JPEG decoder)", name);
  if (tjDecompressHeader3(j->tj, data, (unsigned long)n, &j->w, &j->h, &sub, &j->cs) != 0) {
    cnnrt_status s = rt_tj_fail(j->tj, name, "header");
    if (s != CNNRT_OK) return s;
    if (j->w <= 0 || j->h <= 0) return rt_fail(CNNRT_BAD_MODEL, "%s: corrupt JPEG header", name);
  }
  return rt_check_size(name, "JPEG", j->w, j->h);
}

/* The smallest TurboJPEG scale below 1 at which both axes' source boxes still hold at least
 * their virtual output size (no upsampling after a scaled decode); 1/1 otherwise. */
static void rt_jpeg_pick_scale(const rt_axis *ax, const rt_axis *ay, int *num, int *den) {
  int nf = 0;
  tjscalingfactor *sf = tjGetScalingFactors(&nf);
  *num = *den = 1;
  for (int i = 0; sf && i < nf; i++) {
    if (sf[i].num >= sf[i].denom) continue;
    double s = (double)sf[i].num / sf[i].denom;
    if ((ax->in1 - ax->in0) * s >= ax->N && (ay->in1 - ay->in0) * s >= ay->N && s < (double)*num / *den)
      *num = sf[i].num, *den = sf[i].denom;
  }
}

/* Adobe CMYK (stored inverted, as Photoshop and PIL write it) to RGBX as PIL's cmyk2rgb. */
static void rt_cmyk_to_rgb(uint8_t *p, size_t n) {
  for (size_t i = 0; i < n; i++) {
    const uint8_t *s = p + 4 * i;
    uint32_t nk = s[3], r[3];
    for (int c = 0; c < 3; c++) {
      uint32_t t = (255u - s[c]) * nk + 128u;
      r[c] = nk - (((t >> 8) + t) >> 8);
    }
    p[4 * i] = (uint8_t)r[0], p[4 * i + 1] = (uint8_t)r[1], p[4 * i + 2] = (uint8_t)r[2];
  }
}

static cnnrt_status rt_jpeg_decode(rt_jpeg *j, const uint8_t *data, size_t n, const char *name, int num, int den, rt_img *im) {
  int pf = TJPF_RGBX, ps = 4;
  if (j->cs == TJCS_GRAY) pf = TJPF_GRAY, ps = 1;
  else if (j->cs == TJCS_CMYK || j->cs == TJCS_YCCK) pf = TJPF_CMYK, ps = 4;
  im->w = (j->w * num + den - 1) / den, im->h = (j->h * num + den - 1) / den;
  im->c = ps == 1 ? 1 : 3;
  size_t bytes = (size_t)im->w * im->h * ps;
  if (!(im->p = malloc(bytes)))
    return rt_fail(CNNRT_OUT_OF_MEMORY, "%s: out of memory (%zu bytes for a %dx%d JPEG)", name, bytes, im->w, im->h);
  /* Stop at the first warning, so a file cut short (or a hostile header promising a huge
   * image) costs no full decode; a benign first warning decodes again without stopping. */
  int rc = tjDecompress2(j->tj, data, (unsigned long)n, im->p, im->w, im->w * ps, im->h, pf,
                         TJFLAG_LIMITSCANS | TJFLAG_STOPONWARNING);
  if (rc != 0 && rt_tj_benign(j->tj))
    rc = tjDecompress2(j->tj, data, (unsigned long)n, im->p, im->w, im->w * ps, im->h, pf, TJFLAG_LIMITSCANS);
  if (rc != 0) {
    cnnrt_status s = rt_tj_fail(j->tj, name, "data");
    if (s != CNNRT_OK) return s;
  }
  if (pf == TJPF_CMYK) rt_cmyk_to_rgb(im->p, (size_t)im->w * im->h);
  return CNNRT_OK;
}

static cnnrt_status rt_spng_fail(const char *name, int e) {
  return rt_fail(CNNRT_BAD_MODEL, "%s: corrupt PNG: %s", name, spng_strerror(e));
}

/* A libspng decoder over data with limits set and the header read into ih. */
static cnnrt_status rt_png_header(spng_ctx **ctx, const uint8_t *data, size_t n, const char *name, struct spng_ihdr *ih) {
  if (!(*ctx = spng_ctx_new(0))) return rt_fail(CNNRT_OUT_OF_MEMORY, "%s: out of memory (PNG decoder)", name);
  int e = spng_set_image_limits(*ctx, RT_IMAGE_MAX_SIDE, RT_IMAGE_MAX_SIDE);
  if (!e) e = spng_set_chunk_limits(*ctx, (size_t)1 << 26, (size_t)1 << 26);
  if (!e) e = spng_set_png_buffer(*ctx, data, n);
  if (!e) e = spng_get_ihdr(*ctx, ih);
  if (e) return rt_spng_fail(name, e);
  return rt_check_size(name, "PNG", ih->width, ih->height);
}

/* RGBA8 (as RGBX) for colour and palette images; grey (+ alpha, 16 bits) as one byte: the 8-bit grey or
 * the high byte; alpha and tRNS are dropped (as PIL's convert("RGB") drops them). */
static cnnrt_status rt_png_decode(spng_ctx *ctx, const struct spng_ihdr *ih, const char *name, rt_img *im) {
  int grey = ih->color_type == SPNG_COLOR_TYPE_GRAYSCALE || ih->color_type == SPNG_COLOR_TYPE_GRAYSCALE_ALPHA;
  int fmt = !grey ? SPNG_FMT_RGBA8 : ih->color_type == SPNG_COLOR_TYPE_GRAYSCALE && ih->bit_depth <= 8 ? SPNG_FMT_G8 : SPNG_FMT_PNG;
  size_t bytes = 0, px = (size_t)ih->width * ih->height;
  int e = spng_decoded_image_size(ctx, fmt, &bytes);
  if (e) return rt_spng_fail(name, e);
  size_t per = bytes / px; /* bytes per pixel: 4 (RGBA8), 1, 2 (grey16, GA8) or 4 (GA16) */
  if (bytes % px || per < 1 || per > 4) return rt_fail(CNNRT_BAD_MODEL, "%s: unsupported PNG layout", name);
  im->w = (int)ih->width, im->h = (int)ih->height, im->c = grey ? 1 : 3;
  if (!(im->p = malloc(bytes)))
    return rt_fail(CNNRT_OUT_OF_MEMORY, "%s: out of memory (%zu bytes for a %dx%d PNG)", name, bytes, im->w, im->h);
  if ((e = spng_decode_image(ctx, im->p, bytes, fmt, 0))) return rt_spng_fail(name, e);
  if (fmt == SPNG_FMT_PNG) { /* host-endian 16-bit samples, or GA8 byte pairs */
    int sixteen = ih->bit_depth == 16;
    for (size_t i = 0; i < px; i++) {
      const uint8_t *s = im->p + i * per;
      if (sixteen) {
        uint16_t v;
        memcpy(&v, s, 2);
        im->p[i] = (uint8_t)(v >> 8);
      } else {
        im->p[i] = s[0];
      }
    }
  }
  return CNNRT_OK;
}

/* ---- the API -------------------------------------------------------------------------------- */
cnnrt_status rt_image_probe(const uint8_t *data, size_t n, const char *name, int *w, int *h, int *c) {
  if (!name) name = "image";
  if (!data && n) return rt_fail(CNNRT_INVALID_ARGUMENT, "%s: no data", name);
  cnnrt_status s;
  rt_fmt f = rt_format(data, n);
  if (f == RT_FMT_JPEG) {
    rt_jpeg j = {0};
    s = rt_jpeg_header(&j, data, n, name);
    if (s == CNNRT_OK) *w = j.w, *h = j.h, *c = j.cs == TJCS_GRAY ? 1 : 3;
    if (j.tj) tjDestroy(j.tj);
    return s;
  }
  if (f == RT_FMT_PNG) {
    spng_ctx *ctx = NULL;
    struct spng_ihdr ih;
    s = rt_png_header(&ctx, data, n, name, &ih);
    if (s == CNNRT_OK) {
      *w = (int)ih.width, *h = (int)ih.height;
      *c = ih.color_type == SPNG_COLOR_TYPE_GRAYSCALE ? 1 : ih.color_type == SPNG_COLOR_TYPE_GRAYSCALE_ALPHA ? 4 : 3;
      if (ih.color_type == SPNG_COLOR_TYPE_TRUECOLOR_ALPHA) *c = 4;
    }
    spng_ctx_free(ctx);
    return s;
  }
  if (n == 0) return rt_fail(CNNRT_BAD_MODEL, "%s: empty file (not a JPEG or PNG image)", name);
  return rt_fail(CNNRT_BAD_MODEL, "%s: not a JPEG or PNG image", name);
}

cnnrt_status rt_image_load(const uint8_t *data, size_t n, const char *name, const rt_xform *x, uint64_t seed, uint8_t *out) {
  if (!name) name = "image";
  cnnrt_status s = rt_xform_check(x, name);
  if (s != CNNRT_OK) return s;
  if ((!data && n) || !out) return rt_fail(CNNRT_INVALID_ARGUMENT, "%s: no data or no output buffer", name);
  rt_fmt f = rt_format(data, n);
  if (f == RT_FMT_NONE) return rt_image_probe(data, n, name, &(int){0}, &(int){0}, &(int){0});
  rt_img im = {NULL, 0, 0, 0};
  rt_axis ax, ay;
  int flip = 0;
  if (f == RT_FMT_JPEG) {
    rt_jpeg j = {0};
    int num = 1, den = 1;
    s = rt_jpeg_header(&j, data, n, name);
    if (s == CNNRT_OK) {
      rt_plan(x, j.w, j.h, seed, &ax, &ay, &flip);
      rt_jpeg_pick_scale(&ax, &ay, &num, &den);
      s = rt_jpeg_decode(&j, data, n, name, num, den, &im);
    }
    if (j.tj) tjDestroy(j.tj);
    if (s == CNNRT_OK) rt_axis_scale(&ax, num, den, im.w), rt_axis_scale(&ay, num, den, im.h);
  } else {
    spng_ctx *ctx = NULL;
    struct spng_ihdr ih;
    s = rt_png_header(&ctx, data, n, name, &ih);
    if (s == CNNRT_OK) {
      rt_plan(x, (int)ih.width, (int)ih.height, seed, &ax, &ay, &flip);
      s = rt_png_decode(ctx, &ih, name, &im);
    }
    spng_ctx_free(ctx);
  }
  if (s == CNNRT_OK) {
    if (x->out_c == 1 && im.c == 3) rt_to_grey(&im);
    s = rt_resample(&im, &ax, &ay, flip, x->out_c, out, name);
  }
  free(im.p);
  return s;
}
