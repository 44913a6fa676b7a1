/* test_image.c — runtime/rt_image.c on images encoded here (TurboJPEG, libspng): every PNG
 * colour type and depth and JPEG grey / colour / CMYK / scaled decoding read back; each
 * transform's geometry on gradient images; determinism in the seed and the flip; the same
 * samples from two threads; and corrupt, truncated, oversized and empty files refused with
 * messages naming the file.  Linked against cnnrt_static (rt_image_load is internal). */
#include <math.h>
#include <pthread.h>
#include <spng.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <turbojpeg.h>

#include "runtime/rt_image.h"

#include "check.h"

typedef struct blob {
  uint8_t *p;
  size_t n;
} blob;

/* An RGB gradient: R = x, G = y (scaled to 0..255), B = (x + y) pattern. */
static uint8_t *gradient(int w, int h) {
  uint8_t *p = malloc((size_t)w * h * 3);
  for (int y = 0; y < h; y++)
    for (int x = 0; x < w; x++) {
      uint8_t *q = p + 3 * ((size_t)y * w + x);
      q[0] = (uint8_t)(x * 255 / (w > 1 ? w - 1 : 1));
      q[1] = (uint8_t)(y * 255 / (h > 1 ? h - 1 : 1));
      q[2] = (uint8_t)((x * 7 + y * 3) & 255);
    }
  return p;
}

static blob png(const void *img, int w, int h, int color_type, int depth, const struct spng_plte *plte) {
  spng_ctx *ctx = spng_ctx_new(SPNG_CTX_ENCODER);
  spng_set_option(ctx, SPNG_ENCODE_TO_BUFFER, 1);
  struct spng_ihdr ih = {(uint32_t)w, (uint32_t)h, (uint8_t)depth, (uint8_t)color_type, 0, 0, 0};
  spng_set_ihdr(ctx, &ih);
  if (plte) spng_set_plte(ctx, (struct spng_plte *)plte);
  int ch = color_type == 0 || color_type == 3 ? 1 : color_type == 4 ? 2 : color_type == 2 ? 3 : 4;
  size_t len = ((size_t)w * ch * depth + 7) / 8 * h;
  int e = spng_encode_image(ctx, img, len, SPNG_FMT_PNG, SPNG_ENCODE_FINALIZE);
  blob b = {NULL, 0};
  if (!e) b.p = spng_get_png_buffer(ctx, &b.n, &e);
  if (e) fprintf(stderr, "png encode: %s\n", spng_strerror(e)), exit(2);
  spng_ctx_free(ctx);
  return b;
}

static blob jpeg(const uint8_t *img, int w, int h, int pf, int sub, int q) {
  tjhandle tj = tjInitCompress();
  unsigned char *buf = NULL;
  unsigned long n = 0;
  if (tjCompress2(tj, img, w, 0, h, pf, &buf, &n, sub, q, 0) != 0) fprintf(stderr, "jpeg: %s\n", tjGetErrorStr2(tj)), exit(2);
  tjDestroy(tj);
  blob b = {malloc(n), n};
  memcpy(b.p, buf, n);
  tjFree(buf);
  return b;
}

/* rt_image_load to a fresh buffer (NULL and the message in err on failure). */
static uint8_t *load(const blob *b, const char *name, const rt_xform *x, uint64_t seed, cnnrt_status *st) {
  uint8_t *out = malloc((size_t)x->out_c * x->out_h * x->out_w);
  *st = rt_image_load(b->p, b->n, name, x, seed, out);
  if (*st != CNNRT_OK) free(out), out = NULL;
  return out;
}

static double mean_diff_rgb(const uint8_t *chw, const uint8_t *hwc, int w, int h) {
  double s = 0;
  for (int c = 0; c < 3; c++)
    for (int i = 0; i < w * h; i++) s += abs(chw[c * w * h + i] - hwc[3 * i + c]);
  return s / (3.0 * w * h);
}

static int max_diff_rgb(const uint8_t *chw, const uint8_t *hwc, int w, int h, int grey) {
  int m = 0;
  for (int c = 0; c < 3; c++)
    for (int i = 0; i < w * h; i++) {
      int want = grey ? hwc[i] : hwc[3 * i + c], d = abs(chw[c * w * h + i] - want);
      if (d > m) m = d;
    }
  return m;
}

/* Every PNG colour type and depth, read back at its own size (RESIZE to w x h is the
 * identity): colour exactly, grey replicated, alpha dropped, 16 bits as the high byte. */
static void test_png_variants(void) {
  int w = 13, h = 7, n = w * h;
  uint8_t *rgb = gradient(w, h), grey[13 * 7], buf[13 * 7 * 8];
  for (int i = 0; i < n; i++) grey[i] = (uint8_t)(rgb[3 * i] ^ rgb[3 * i + 1]);
  rt_xform x;
  rt_xform_default(&x, RT_XFORM_RESIZE, 3, h, w);
  cnnrt_status st;
  struct { const char *what; int type, depth, grey; } cases[] = {
      {"rgb8", 2, 8, 0}, {"rgba8", 6, 8, 0}, {"rgb16", 2, 16, 0}, {"rgba16", 6, 16, 0}, {"g8", 0, 8, 1},
      {"ga8", 4, 8, 1},  {"g16", 0, 16, 1},  {"ga16", 4, 16, 1},  {"palette", 3, 8, 0}, {"g4", 0, 4, 1}};
  for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
    int t = cases[k].type, d = cases[k].depth, ch = t == 0 ? 1 : t == 4 ? 2 : t == 2 ? 3 : t == 6 ? 4 : 1;
    struct spng_plte pl = {0};
    uint8_t want[13 * 7 * 3];
    memset(buf, 0, sizeof buf);
    for (int i = 0; i < n; i++) {
      uint8_t v[4] = {rgb[3 * i], rgb[3 * i + 1], rgb[3 * i + 2], (uint8_t)(i * 5)};
      if (cases[k].grey) v[0] = grey[i], v[1] = (uint8_t)(i * 5);
      if (t == 3) { /* palette: entry i % 200 holds the pixel's colour */
        int e = i % 200;
        pl.entries[e].red = v[0], pl.entries[e].green = v[1], pl.entries[e].blue = v[2];
        if ((uint32_t)e + 1 > pl.n_entries) pl.n_entries = (uint32_t)e + 1;
        buf[i] = (uint8_t)e;
      } else if (d == 4) { /* 4-bit grey: the pixel's high nibble, scaled back by 17 */
        buf[i / 2] |= (uint8_t)((grey[i] >> 4) << (i % 2 ? 0 : 4));
        v[0] = (uint8_t)((grey[i] >> 4) * 17);
        if (i % 2 == 0 && i + 1 < n && (i + 1) / 2 != i / 2) buf[i / 2 + 1] = 0;
      } else {
        for (int c = 0; c < ch; c++) {
          if (d == 8) buf[i * ch + c] = v[c];
          else { /* host-endian 16 bits; the low byte must not matter */
            uint16_t s = (uint16_t)(v[c] << 8 | (uint8_t)(i * 37 + c));
            memcpy(buf + 2 * (i * ch + c), &s, 2);
          }
        }
      }
      for (int c = 0; c < 3; c++) want[3 * i + c] = cases[k].grey ? v[0] : v[c];
    }
    if (d == 4) { /* rows are byte-aligned: repack 13 pixels per row */
      memset(buf, 0, sizeof buf);
      int rowb = (w + 1) / 2;
      for (int y = 0; y < h; y++)
        for (int xx = 0; xx < w; xx++) buf[y * rowb + xx / 2] |= (uint8_t)((grey[y * w + xx] >> 4) << (xx % 2 ? 0 : 4));
    }
    blob b = png(buf, w, h, t, d, t == 3 ? &pl : NULL);
    uint8_t *out = load(&b, "v.png", &x, 1, &st);
    CHECK(out, "png %s: %s", cases[k].what, cnnrt_last_error());
    if (out) CHECK(max_diff_rgb(out, want, w, h, 0) == 0, "png %s: max diff %d", cases[k].what, max_diff_rgb(out, want, w, h, 0));
    int pw, ph, pc;
    CHECK(rt_image_probe(b.p, b.n, "v.png", &pw, &ph, &pc) == CNNRT_OK && pw == w && ph == h &&
              pc == (cases[k].grey ? (t == 4 ? 4 : 1) : t == 6 ? 4 : 3),
          "probe png %s: %d x %d x %d", cases[k].what, pw, ph, pc);
    free(out);
    free(b.p);
  }
  free(rgb);
}

static void test_jpeg_variants(void) {
  int w = 64, h = 48, n = w * h;
  uint8_t *rgb = gradient(w, h), *grey = malloc((size_t)n), *cmyk = malloc((size_t)n * 4);
  for (int i = 0; i < n; i++) {
    grey[i] = rgb[3 * i + 1];
    cmyk[4 * i] = rgb[3 * i], cmyk[4 * i + 1] = rgb[3 * i + 1], cmyk[4 * i + 2] = rgb[3 * i + 2], cmyk[4 * i + 3] = 255;
  }
  rt_xform x;
  rt_xform_default(&x, RT_XFORM_RESIZE, 3, h, w);
  cnnrt_status st;
  blob b[4] = {jpeg(rgb, w, h, TJPF_RGB, TJSAMP_444, 98), jpeg(rgb, w, h, TJPF_RGB, TJSAMP_420, 98),
               jpeg(grey, w, h, TJPF_GRAY, TJSAMP_GRAY, 98), jpeg(cmyk, w, h, TJPF_CMYK, TJSAMP_444, 98)};
  const char *what[4] = {"444", "420", "grey", "cmyk (inverted, as Adobe)"};
  int tol[4] = {6, 255, 4, 8}; /* 4:2:0 blurs the blue sawtooth: its mean is checked */
  for (int k = 0; k < 4; k++) {
    uint8_t *out = load(&b[k], "v.jpg", &x, 1, &st);
    CHECK(out, "jpeg %s: %s", what[k], cnnrt_last_error());
    int d = out ? max_diff_rgb(out, k == 2 ? grey : rgb, w, h, k == 2) : 0;
    CHECK(!out || d <= tol[k], "jpeg %s: max diff %d", what[k], d);
    CHECK(!out || k == 2 || mean_diff_rgb(out, rgb, w, h) < 6, "jpeg %s: mean diff %.1f", what[k], mean_diff_rgb(out, rgb, w, h));
    int pw, ph, pc;
    CHECK(rt_image_probe(b[k].p, b[k].n, "v.jpg", &pw, &ph, &pc) == CNNRT_OK && pw == w && ph == h && pc == (k == 2 ? 1 : 3),
          "probe jpeg %s", what[k]);
    free(out);
  }
  /* grey sample from colour: PIL's L = (19595 R + 38470 G + 7471 B + 2^15) >> 16 */
  rt_xform_default(&x, RT_XFORM_RESIZE, 1, h, w);
  uint8_t *out = load(&b[0], "v.jpg", &x, 1, &st), *out3 = NULL;
  rt_xform_default(&x, RT_XFORM_RESIZE, 3, h, w);
  out3 = load(&b[0], "v.jpg", &x, 1, &st);
  int bad = 0;
  for (int i = 0; out && out3 && i < n; i++) {
    unsigned l = (out3[i] * 19595u + out3[n + i] * 38470u + out3[2 * n + i] * 7471u + 0x8000u) >> 16;
    bad += out[i] != l;
  }
  CHECK(out && out3 && bad == 0, "grey from colour: %d pixels differ from the luma of the colour sample", bad);
  free(out), free(out3);
  for (int k = 0; k < 4; k++) free(b[k].p);
  /* scaled DCT decoding: a 1024x768 image to 96x72 decodes at 1/8 and still matches */
  int W = 1024, H = 768;
  uint8_t *big = gradient(W, H);
  blob bb = jpeg(big, W, H, TJPF_RGB, TJSAMP_444, 95);
  rt_xform_default(&x, RT_XFORM_RESIZE, 3, 72, 96);
  out = load(&bb, "big.jpg", &x, 1, &st);
  CHECK(out, "scaled jpeg: %s", cnnrt_last_error());
  int m = 0;
  for (int y = 0; out && y < 72; y++)
    for (int xx = 0; xx < 96; xx++) {
      int sx = (int)((xx + 0.5) * W / 96), sy = (int)((y + 0.5) * H / 72);
      int dr = abs(out[y * 96 + xx] - big[3 * (sy * W + sx)]), dg = abs(out[72 * 96 + y * 96 + xx] - big[3 * (sy * W + sx) + 1]);
      if (dr > m) m = dr;
      if (dg > m) m = dg;
    }
  CHECK(!out || m <= 4, "scaled jpeg: gradient off by %d", m);
  free(out), free(big), free(bb.p), free(rgb), free(grey), free(cmyk);
}

/* The gradient's red (x) and green (y) values at fractional source coordinates. */
static double grad_at(double v, int size) {
  if (v < 0) v = 0;
  if (v > size - 1) v = size - 1;
  return v * 255.0 / (size - 1);
}

/* Each transform on a smooth 400x300 gradient: output column j / row i shows the source
 * coordinate the geometry maps it to (within rounding of the integer gradient). */
static void test_geometry(void) {
  int W = 400, H = 300;
  uint8_t *g = gradient(W, H);
  blob b = png(g, W, H, 2, 8, NULL);
  rt_xform x;
  cnnrt_status st;
  /* RESIZE 400x300 -> 80x50 */
  rt_xform_default(&x, RT_XFORM_RESIZE, 3, 50, 80);
  uint8_t *out = load(&b, "g.png", &x, 0, &st);
  double m = 0;
  for (int i = 0; out && i < 50; i++)
    for (int j = 0; j < 80; j++) {
      double dr = out[i * 80 + j] - grad_at((j + 0.5) * 5 - 0.5, W), dg = out[4000 + i * 80 + j] - grad_at((i + 0.5) * 6 - 0.5, H);
      m = fabs(dr) > m ? fabs(dr) : m, m = fabs(dg) > m ? fabs(dg) : m;
    }
  CHECK(out && m <= 1.5, "resize geometry off by %.1f", m);
  free(out);
  /* CENTER: short side 300 -> 64 (long 85), centre crop 56x56 at (round(29/2) = 14, 4) */
  rt_xform_default(&x, RT_XFORM_CENTER, 3, 56, 56);
  CHECK(x.resize_short == 64, "default resize_short %d", x.resize_short);
  out = load(&b, "g.png", &x, 0, &st);
  m = 0;
  double sx = 400.0 / 85, sy = 300.0 / 64;
  for (int i = 0; out && i < 56; i++)
    for (int j = 0; j < 56; j++) {
      double dr = out[i * 56 + j] - grad_at((14 + j + 0.5) * sx - 0.5, W), dg = out[3136 + i * 56 + j] - grad_at((4 + i + 0.5) * sy - 0.5, H);
      m = fabs(dr) > m ? fabs(dr) : m, m = fabs(dg) > m ? fabs(dg) : m;
    }
  CHECK(out && m <= 1.5, "center geometry off by %.1f", m);
  free(out);
  /* TRAIN: the crop rt_xform_train_crop reports, mirrored when it says so */
  rt_xform_default(&x, RT_XFORM_TRAIN, 3, 32, 32);
  int flips = 0, fallback = 0;
  for (uint64_t seed = 0; seed < 200; seed++) {
    int x0, y0, cw, ch, fl;
    rt_xform_train_crop(&x, W, H, seed, &x0, &y0, &cw, &ch, &fl);
    flips += fl;
    double area = (double)cw * ch / (W * H), r = (double)cw / ch;
    int full = cw == W && ch == H;
    fallback += full;
    CHECK(x0 >= 0 && y0 >= 0 && x0 + cw <= W && y0 + ch <= H, "seed %llu: crop outside", (unsigned long long)seed);
    CHECK(full || (area > 0.079 && area < 1.001 && r > 0.74 && r < 1.34), "seed %llu: crop %dx%d", (unsigned long long)seed, cw, ch);
    if (seed >= 20) continue;
    out = load(&b, "g.png", &x, seed, &st);
    m = 0;
    for (int i = 0; out && i < 32; i++)
      for (int j = 0; j < 32; j++) {
        int jj = fl ? 31 - j : j;
        double ex = x0 + (jj + 0.5) * cw / 32.0 - 0.5, ey = y0 + (i + 0.5) * ch / 32.0 - 0.5;
        if (ex < x0) ex = x0;
        if (ex > x0 + cw - 1) ex = x0 + cw - 1;
        if (ey < y0) ey = y0;
        if (ey > y0 + ch - 1) ey = y0 + ch - 1;
        double dr = out[i * 32 + j] - grad_at(ex, W), dg = out[1024 + i * 32 + j] - grad_at(ey, H);
        m = fabs(dr) > m ? fabs(dr) : m, m = fabs(dg) > m ? fabs(dg) : m;
      }
    CHECK(out && m <= 2, "train seed %llu (crop %d,%d %dx%d flip %d) off by %.1f", (unsigned long long)seed, x0, y0, cw, ch, fl, m);
    free(out);
  }
  CHECK(flips > 70 && flips < 130, "%d flips in 200 seeds", flips);
  CHECK(fallback < 10, "%d fallback crops in 200 seeds", fallback);
  free(b.p), free(g);
}

/* Same seed, same bytes; other seeds, other crops; the flip mirrors the sample exactly (a
 * crop fixed to the whole image: scale 1, ratio w/h). */
static void test_seed_flip(void) {
  int W = 120, H = 90;
  uint8_t *g = gradient(W, H);
  blob b = jpeg(g, W, H, TJPF_RGB, TJSAMP_420, 90);
  rt_xform x;
  cnnrt_status st;
  rt_xform_default(&x, RT_XFORM_TRAIN, 3, 40, 40);
  uint8_t *a = load(&b, "s.jpg", &x, 7, &st), *a2 = load(&b, "s.jpg", &x, 7, &st);
  int differ = 0;
  for (uint64_t s = 8; s < 12; s++) {
    uint8_t *o = load(&b, "s.jpg", &x, s, &st);
    differ += o && a && memcmp(o, a, 4800) != 0;
    free(o);
  }
  CHECK(a && a2 && memcmp(a, a2, 4800) == 0, "same seed, different samples");
  CHECK(differ == 4, "only %d of 4 other seeds give other samples", differ);
  free(a), free(a2);
  x.scale_lo = x.scale_hi = 1, x.ratio_lo = x.ratio_hi = (double)W / H;
  uint8_t *o[2] = {NULL, NULL};
  for (uint64_t s = 0; s < 64 && (!o[0] || !o[1]); s++) {
    int x0, y0, cw, ch, fl;
    rt_xform_train_crop(&x, W, H, s, &x0, &y0, &cw, &ch, &fl);
    CHECK(cw == W && ch == H, "full crop %dx%d", cw, ch);
    if (!o[fl]) o[fl] = load(&b, "s.jpg", &x, s, &st);
  }
  int bad = 0;
  for (int c = 0; o[0] && o[1] && c < 3; c++)
    for (int i = 0; i < 40; i++)
      for (int j = 0; j < 40; j++) bad += o[0][c * 1600 + i * 40 + j] != o[1][c * 1600 + i * 40 + 39 - j];
  CHECK(o[0] && o[1] && bad == 0, "flip: %d pixels are not mirrored", bad);
  free(o[0]), free(o[1]), free(b.p), free(g);
}

typedef struct job {
  const blob *b;
  uint8_t out[16][3 * 24 * 24];
} job;

static void *run_job(void *p) {
  job *j = p;
  rt_xform x;
  rt_xform_default(&x, RT_XFORM_TRAIN, 3, 24, 24);
  for (int k = 0; k < 16; k++) rt_image_load(j->b->p, j->b->n, "t.jpg", &x, (uint64_t)k * 1000003u, j->out[k]);
  return NULL;
}

static void test_threads(void) {
  uint8_t *g = gradient(200, 150);
  blob b = jpeg(g, 200, 150, TJPF_RGB, TJSAMP_420, 90);
  static job j[3];
  pthread_t t[2];
  for (int k = 0; k < 3; k++) j[k].b = &b;
  for (int k = 0; k < 2; k++) pthread_create(&t[k], NULL, run_job, &j[k]);
  run_job(&j[2]);
  for (int k = 0; k < 2; k++) pthread_join(t[k], NULL);
  CHECK(!memcmp(j[0].out, j[2].out, sizeof j[0].out) && !memcmp(j[1].out, j[2].out, sizeof j[0].out),
        "threads give other samples");
  free(b.p), free(g);
}

static uint32_t crc32_png(const uint8_t *p, size_t n) {
  uint32_t c = 0xffffffffu;
  for (size_t i = 0; i < n; i++) {
    c ^= p[i];
    for (int k = 0; k < 8; k++) c = c & 1 ? 0xedb88320u ^ (c >> 1) : c >> 1;
  }
  return ~c;
}

static void expect_refusal(const blob *b, const char *name, const char *what, const char *words) {
  rt_xform x;
  rt_xform_default(&x, RT_XFORM_TRAIN, 3, 16, 16);
  uint8_t out[3 * 16 * 16];
  cnnrt_status s = rt_image_load(b->p, b->n, name, &x, 3, out);
  const char *e = cnnrt_last_error();
  CHECK(s == CNNRT_BAD_MODEL && strstr(e, name) && strstr(e, words), "%s: status %d, message \"%s\" (want \"%s\")", what, (int)s, e,
        words);
}

static void test_refusals(void) {
  uint8_t *g = gradient(64, 64);
  blob j = jpeg(g, 64, 64, TJPF_RGB, TJSAMP_420, 90), p = png(g, 64, 64, 2, 8, NULL);
  blob e = {(uint8_t *)"", 0}, t = {(uint8_t *)"GIF89a hello", 12};
  expect_refusal(&e, "dir/empty.jpg", "empty", "empty");
  expect_refusal(&t, "dir/x.gif", "not an image", "not a JPEG or PNG");
  blob cut = {j.p, j.n / 2};
  expect_refusal(&cut, "dir/cut.jpg", "truncated jpeg", "truncated JPEG");
  cut.n = 5;
  expect_refusal(&cut, "dir/cut5.jpg", "jpeg header only", "JPEG");
  blob cutp = {p.p, p.n - 20};
  expect_refusal(&cutp, "dir/cut.png", "truncated png", "PNG");
  cutp.n = 20;
  expect_refusal(&cutp, "dir/cut20.png", "png signature only", "PNG");
  uint8_t *bad = malloc(p.n);
  memcpy(bad, p.p, p.n);
  bad[p.n / 2] ^= 0x55; /* inside IDAT: CRC mismatch */
  blob badp = {bad, p.n};
  expect_refusal(&badp, "dir/crc.png", "png crc", "PNG");
  memcpy(bad, p.p, p.n); /* IHDR width 40000 with a right CRC */
  bad[16] = 0, bad[17] = 0, bad[18] = 0x9c, bad[19] = 0x40;
  uint32_t c = crc32_png(bad + 12, 17);
  bad[29] = (uint8_t)(c >> 24), bad[30] = (uint8_t)(c >> 16), bad[31] = (uint8_t)(c >> 8), bad[32] = (uint8_t)c;
  expect_refusal(&badp, "dir/wide.png", "oversized png", "PNG");
  free(bad);
  bad = malloc(j.n); /* the SOF0 frame's size to 30000 x 30000 (over RT_IMAGE_MAX_PIXELS) */
  memcpy(bad, j.p, j.n);
  size_t sof = 2;
  while (sof + 9 < j.n && !(bad[sof] == 0xff && bad[sof + 1] == 0xc0)) sof++;
  bad[sof + 5] = 0x75, bad[sof + 6] = 0x30, bad[sof + 7] = 0x75, bad[sof + 8] = 0x30;
  blob badj = {bad, j.n};
  expect_refusal(&badj, "dir/huge.jpg", "oversized jpeg", "pixels");
  free(bad);
  /* junk before the SOS marker: libjpeg's "extraneous bytes" warning (which stops the first
   * decode) keeps the image, as in PIL */
  size_t sos = 2;
  while (sos + 1 < j.n && !(j.p[sos] == 0xff && j.p[sos + 1] == 0xda)) sos++;
  uint8_t *junk = malloc(j.n + 3);
  memcpy(junk, j.p, sos), memcpy(junk + sos, "\x00\x11\x22", 3), memcpy(junk + sos + 3, j.p + sos, j.n - sos);
  rt_xform x;
  rt_xform_default(&x, RT_XFORM_CENTER, 3, 16, 16);
  uint8_t out[3 * 16 * 16], ref[3 * 16 * 16];
  CHECK(rt_image_load(j.p, j.n, "dir/ok.jpg", &x, 0, ref) == CNNRT_OK && rt_image_load(junk, j.n + 3, "dir/junk.jpg", &x, 0, out) == CNNRT_OK &&
            !memcmp(out, ref, sizeof out),
        "junk before SOS: %s", cnnrt_last_error());
  free(junk);
  x.out_c = 2;
  CHECK(rt_image_load(j.p, j.n, "dir/ok.jpg", &x, 0, out) == CNNRT_INVALID_ARGUMENT && strstr(cnnrt_last_error(), "dir/ok.jpg"),
        "out_c 2 accepted: %s", cnnrt_last_error());
  free(j.p), free(p.p), free(g);
}

int main(void) {
  test_png_variants();
  test_jpeg_variants();
  test_geometry();
  test_seed_flip();
  test_threads();
  test_refusals();
  return check_done("test_image", g_failures);
}
