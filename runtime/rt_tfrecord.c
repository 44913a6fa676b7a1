/* rt_tfrecord.c — TFRecord shard sets of ImageNet-style datasets (rt_tfrecord.h): the
 * shards of a split listed and indexed at open, records read with pread, CRC32C-checked, and
 * their tf.train.Example decoded by hand (proto3 wire format, fixed nesting: no recursion).
 * Everything read is untrusted: each length is checked against the bytes that remain. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* pread, strndup */
#endif
#include "rt_tfrecord.h"

#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/cm.h"
#include "rt_internal.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <nmmintrin.h>
#define RT_TFR_HAVE_SSE42 1
#endif

#define RT_TFR_HDR 12 /* uint64 length + uint32 masked CRC of it */
#define RT_TFR_DIGITS 5

struct rt_tfr {
  char *dir;           /* as given, trailing '/' removed */
  const char *split;   /* "train" or "validation" */
  char stem[256];      /* the shards' names before -NNNNN-of-MMMMM: SPLIT, or TFDS's NAME-SPLIT.tfrecord */
  int m;               /* shards in the set (MMMMM) */
  int64_t *first;      /* [m + 1]: index of each shard's first record; first[m] = n */
  uint64_t *off;       /* [n]: byte offset of the record's header in its shard */
  uint32_t *len;       /* [n]: data bytes (<= RT_TFR_MAX_RECORD) */
  int64_t n, cap;
};

/* ---- CRC32C ------------------------------------------------------------------------------ */
static uint32_t rt_tfr_tab[256];
static int rt_tfr_hw;
static pthread_once_t rt_tfr_once = PTHREAD_ONCE_INIT;

static void rt_tfr_crc_init(void) {
  for (uint32_t i = 0; i < 256; i++) {
    uint32_t c = i;
    for (int k = 0; k < 8; k++) c = c & 1 ? (c >> 1) ^ 0x82F63B78u : c >> 1;
    rt_tfr_tab[i] = c;
  }
#ifdef RT_TFR_HAVE_SSE42
  __builtin_cpu_init();
  rt_tfr_hw = __builtin_cpu_supports("sse4.2") != 0;
#endif
}

static uint32_t rt_tfr_crc_sw(uint32_t c, const uint8_t *p, size_t n) {
  while (n--) c = rt_tfr_tab[(c ^ *p++) & 0xff] ^ (c >> 8);
  return c;
}

#ifdef RT_TFR_HAVE_SSE42
__attribute__((target("sse4.2"))) static uint32_t rt_tfr_crc_hw(uint32_t c, const uint8_t *p, size_t n) {
  uint64_t c64 = c;
  for (; n >= 8; p += 8, n -= 8) {
    uint64_t w;
    memcpy(&w, p, 8);
    c64 = _mm_crc32_u64(c64, w);
  }
  c = (uint32_t)c64;
  while (n--) c = _mm_crc32_u8(c, *p++);
  return c;
}
#endif

uint32_t rt_tfr_crc32c_table(uint32_t crc, const void *p, size_t n) {
  pthread_once(&rt_tfr_once, rt_tfr_crc_init);
  return ~rt_tfr_crc_sw(~crc, p, n);
}

uint32_t rt_tfr_crc32c(uint32_t crc, const void *p, size_t n) {
  pthread_once(&rt_tfr_once, rt_tfr_crc_init);
#ifdef RT_TFR_HAVE_SSE42
  if (rt_tfr_hw) return ~rt_tfr_crc_hw(~crc, p, n);
#endif
  return ~rt_tfr_crc_sw(~crc, p, n);
}

uint32_t rt_tfr_mask(uint32_t c) { return ((c >> 15) | (c << 17)) + 0xa282ead8u; }

static uint64_t rt_le64(const uint8_t *p) {
  uint64_t v = 0;
  for (int k = 7; k >= 0; k--) v = v << 8 | p[k];
  return v;
}
static uint32_t rt_le32(const uint8_t *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }

/* ---- tf.train.Example ---------------------------------------------------------------------- */
/* The fields used (everything else is skipped by wire type):
 *   Example { Features features = 1; }   Features { map<string, Feature> feature = 1; }
 *   map entry { string key = 1; Feature value = 2; }
 *   Feature { oneof { BytesList bytes_list = 1; FloatList float_list = 2; Int64List int64_list = 3; } }
 *   BytesList { repeated bytes value = 1; }   Int64List { repeated int64 value = 1; } (packed or not) */
typedef struct rt_pb {
  const uint8_t *base; /* the Example's first byte: offsets in messages are from here */
  const char *what;
} rt_pb;

typedef struct rt_pb_field {
  uint32_t num;
  int wt;              /* 0 varint, 1 fixed64, 2 length-delimited, 5 fixed32 */
  uint64_t v;          /* wire type 0 */
  const uint8_t *data; /* wire type 2 */
  size_t len;
  const uint8_t *at;   /* the tag */
} rt_pb_field;

static cnnrt_status rt_pb_bad(const rt_pb *c, const uint8_t *at, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static cnnrt_status rt_pb_bad(const rt_pb *c, const uint8_t *at, const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return rt_fail(CNNRT_BAD_MODEL, "%s: malformed tf.train.Example at its byte %zu: %s", c->what, (size_t)(at - c->base), msg);
}

/* A varint at *p (before end): 0 with *v, -1 if it runs past end, -2 if it exceeds 64 bits. */
static int rt_pb_varint(const uint8_t **p, const uint8_t *end, uint64_t *v) {
  uint64_t x = 0;
  const uint8_t *q = *p;
  for (int k = 0; k < 10; k++) {
    if (q >= end) return -1;
    uint8_t b = *q++;
    if (k == 9 && b > 1) return -2;
    x |= (uint64_t)(b & 0x7f) << (7 * k);
    if (!(b & 0x80)) {
      *p = q;
      *v = x;
      return 0;
    }
  }
  return -2;
}

/* The field at *p inside msg (which ends at end) into f; *p moves past it. */
static cnnrt_status rt_pb_next(const rt_pb *c, const char *msg, const uint8_t **p, const uint8_t *end, rt_pb_field *f) {
  uint64_t tag, v;
  f->at = *p;
  int r = rt_pb_varint(p, end, &tag);
  if (r) return rt_pb_bad(c, f->at, "%s: field tag %s", msg, r == -1 ? "cut short by the end of the message" : "overflows 64 bits");
  f->num = (uint32_t)(tag >> 3);
  f->wt = (int)(tag & 7);
  if (tag >> 3 == 0 || tag >> 3 > 0x1fffffff)
    return rt_pb_bad(c, f->at, "%s: field number %llu (valid: 1..536870911)", msg, (unsigned long long)(tag >> 3));
  switch (f->wt) {
  case 0:
    r = rt_pb_varint(p, end, &f->v);
    if (r) return rt_pb_bad(c, f->at, "%s: field %u: varint %s", msg, f->num, r == -1 ? "cut short by the end of the message" : "overflows 64 bits");
    return CNNRT_OK;
  case 1:
  case 5: {
    size_t w = f->wt == 1 ? 8 : 4;
    if ((size_t)(end - *p) < w)
      return rt_pb_bad(c, f->at, "%s: field %u: %zu-byte value cut short (%zu bytes left)", msg, f->num, w, (size_t)(end - *p));
    *p += w;
    return CNNRT_OK;
  }
  case 2:
    r = rt_pb_varint(p, end, &v);
    if (r) return rt_pb_bad(c, f->at, "%s: field %u: length %s", msg, f->num, r == -1 ? "cut short by the end of the message" : "overflows 64 bits");
    if (v > (uint64_t)(end - *p))
      return rt_pb_bad(c, f->at, "%s: field %u: length %llu runs past the end of the message (%zu bytes left)", msg, f->num,
                       (unsigned long long)v, (size_t)(end - *p));
    f->data = *p;
    f->len = (size_t)v;
    *p += v;
    return CNNRT_OK;
  case 3:
  case 4: return rt_pb_bad(c, f->at, "%s: field %u is a group (wire type %d): not supported", msg, f->num, f->wt);
  default: return rt_pb_bad(c, f->at, "%s: field %u has the invalid wire type %d", msg, f->num, f->wt);
  }
}

static const char *const rt_pb_kinds[4] = {"no value", "bytes_list", "float_list", "int64_list"};

/* The wanted feature's Feature message (data, len), known to be kind want (1 bytes, 3 int64):
 * its one value, as a span (bytes) or in *label (int64). */
static cnnrt_status rt_pb_feature(const rt_pb *c, const char *key, const uint8_t *data, size_t len, int want,
                                  const uint8_t **span, size_t *span_len, int64_t *label) {
  const uint8_t *p = data, *end = data + len, *list = NULL;
  size_t list_len = 0;
  int kind = 0, kinds = 0;
  char msg[96];
  snprintf(msg, sizeof msg, "feature %s", key);
  while (p < end) {
    rt_pb_field f;
    cnnrt_status s = rt_pb_next(c, msg, &p, end, &f);
    if (s != CNNRT_OK) return s;
    if (f.num < 1 || f.num > 3) continue;
    if (f.wt != 2) return rt_pb_bad(c, f.at, "%s: its %s has wire type %d, expected 2", msg, rt_pb_kinds[f.num], f.wt);
    kind = (int)f.num, kinds++, list = f.data, list_len = f.len;
  }
  if (kinds == 0) return rt_pb_bad(c, data, "%s has no value (an empty Feature)", msg);
  if (kinds > 1) return rt_pb_bad(c, data, "%s holds %d lists (a Feature holds one)", msg, kinds);
  if (kind != want)
    return rt_pb_bad(c, data, "%s holds %s %s, expected %s", msg, kind == 3 ? "an" : "a", rt_pb_kinds[kind],
                     want == 1 ? "a bytes_list" : "an int64_list");
  int64_t count = 0;
  p = list, end = list + list_len;
  while (p < end) {
    rt_pb_field f;
    cnnrt_status s = rt_pb_next(c, msg, &p, end, &f);
    if (s != CNNRT_OK) return s;
    if (f.num != 1) continue;
    if (want == 1) {
      if (f.wt != 2) return rt_pb_bad(c, f.at, "%s: a bytes value with wire type %d, expected 2", msg, f.wt);
      *span = f.data, *span_len = f.len;
      count++;
    } else if (f.wt == 0) {
      *label = (int64_t)f.v;
      count++;
    } else if (f.wt == 2) { /* packed */
      const uint8_t *q = f.data, *qend = f.data + f.len;
      while (q < qend) {
        uint64_t v;
        const uint8_t *at = q;
        int r = rt_pb_varint(&q, qend, &v);
        if (r) return rt_pb_bad(c, at, "%s: packed int64 %s", msg, r == -1 ? "cut short by the end of the list" : "overflows 64 bits");
        *label = (int64_t)v;
        count++;
      }
    } else {
      return rt_pb_bad(c, f.at, "%s: an int64 value with wire type %d, expected 0 or 2 (packed)", msg, f.wt);
    }
  }
  if (count != 1) return rt_pb_bad(c, list, "%s holds %lld values, expected one", msg, (long long)count);
  if (want == 1 && *span_len == 0) return rt_pb_bad(c, list, "%s is empty (0 bytes)", msg);
  return CNNRT_OK;
}

cnnrt_status rt_tfr_parse_example(const uint8_t *p, size_t n, const char *what, size_t *img_off, size_t *img_len,
                                  int64_t *label) {
  /* TensorFlow's build_imagenet_data.py keys, and TensorFlow Datasets' (image, label) */
  static const char k_img[] = "image/encoded", k_label[] = "image/class/label", k_img2[] = "image", k_label2[] = "label";
  rt_pb c = {p, what};
  const uint8_t *ex = p, *ex_end = p + n;
  const uint8_t *img = NULL;
  size_t ilen = 0;
  int have_img = 0, have_label = 0;
  int64_t lab = 0;
  while (ex < ex_end) { /* Example */
    rt_pb_field fe;
    cnnrt_status s = rt_pb_next(&c, "Example", &ex, ex_end, &fe);
    if (s != CNNRT_OK) return s;
    if (fe.num != 1) continue;
    if (fe.wt != 2) return rt_pb_bad(&c, fe.at, "Example: features (field 1) has wire type %d, expected 2", fe.wt);
    const uint8_t *fs = fe.data, *fs_end = fe.data + fe.len;
    while (fs < fs_end) { /* Features (several occurrences merge, as in protobuf) */
      rt_pb_field fm;
      if ((s = rt_pb_next(&c, "Features", &fs, fs_end, &fm)) != CNNRT_OK) return s;
      if (fm.num != 1) continue;
      if (fm.wt != 2) return rt_pb_bad(&c, fm.at, "Features: a feature map entry with wire type %d, expected 2", fm.wt);
      const uint8_t *me = fm.data, *me_end = fm.data + fm.len, *key = NULL, *val = NULL;
      size_t key_len = 0, val_len = 0;
      int keys = 0, vals = 0;
      while (me < me_end) { /* map entry */
        rt_pb_field f;
        if ((s = rt_pb_next(&c, "feature map entry", &me, me_end, &f)) != CNNRT_OK) return s;
        if (f.num != 1 && f.num != 2) continue;
        if (f.wt != 2) return rt_pb_bad(&c, f.at, "feature map entry: its %s has wire type %d, expected 2", f.num == 1 ? "key" : "value", f.wt);
        if (f.num == 1) key = f.data, key_len = f.len, keys++;
        else val = f.data, val_len = f.len, vals++;
      }
#define RT_KEY_IS(k) (key_len == sizeof k - 1 && !memcmp(key, k, key_len))
      int which = RT_KEY_IS(k_img) || RT_KEY_IS(k_img2) ? 1 : RT_KEY_IS(k_label) || RT_KEY_IS(k_label2) ? 3 : 0;
      const char *name = RT_KEY_IS(k_img) ? k_img : RT_KEY_IS(k_img2) ? k_img2 : RT_KEY_IS(k_label) ? k_label : k_label2;
#undef RT_KEY_IS
      if (!which) continue;
      if (keys > 1 || vals > 1) return rt_pb_bad(&c, fm.data, "feature %s: a map entry with %d keys and %d values", name, keys, vals);
      if (which == 1 ? have_img : have_label)
        return rt_pb_bad(&c, fm.data, "feature %s appears twice (%s)", name, which == 1 ? "image/encoded or image" : "image/class/label or label");
      if (!val) return rt_pb_bad(&c, fm.data, "feature %s has no value (a map entry without one)", name);
      if ((s = rt_pb_feature(&c, name, val, val_len, which, &img, &ilen, &lab)) != CNNRT_OK) return s;
      if (which == 1) have_img = 1;
      else have_label = 1;
    }
  }
  if (!have_img || !have_label)
    return rt_fail(CNNRT_BAD_MODEL, "%s: the tf.train.Example (%zu bytes) has no feature %s%s%s", what, n,
                   have_img ? "" : "image/encoded (or image)", !have_img && !have_label ? " and no feature " : "",
                   have_label ? "" : "image/class/label (or label)");
  *img_off = (size_t)(img - p);
  *img_len = ilen;
  *label = lab;
  return CNNRT_OK;
}

/* ---- shards -------------------------------------------------------------------------------- */
static void rt_tfr_path(const rt_tfr *t, int s, char *buf, size_t n) {
  snprintf(buf, n, "%s/%s-%05d-of-%05d", t->dir, t->stem, s, t->m);
}

/* The shard holding record i (0 <= i < n): the last with first[s] <= i (empty shards skipped). */
static int rt_tfr_shard_of(const rt_tfr *t, int64_t i) {
  int lo = 0, hi = t->m - 1;
  while (lo < hi) {
    int mid = lo + (hi - lo + 1) / 2;
    if (t->first[mid] <= i) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

void rt_tfr_describe(const rt_tfr *t, int64_t i, char *buf, size_t n) {
  if (!buf || !n) return;
  buf[0] = 0;
  if (!t || i < 0 || i >= t->n) return;
  int s = rt_tfr_shard_of(t, i);
  snprintf(buf, n, "%s/%s-%05d-of-%05d record %lld", t->dir, t->stem, s, t->m, (long long)(i - t->first[s]));
}

/* pread of exactly n bytes at off: 0, 1 if the file ends first (*got bytes read), -1 (errno). */
static int rt_pread_full(int fd, void *buf, size_t n, uint64_t off, size_t *got) {
  size_t k = 0;
  while (k < n) {
    ssize_t r = pread(fd, (uint8_t *)buf + k, n - k, (off_t)(off + k));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return -1;
    if (r == 0) break;
    k += (size_t)r;
  }
  if (got) *got = k;
  return k < n;
}

/* Parses STEM-NNNNN-of-MMMMM (exactly 5 digits each) where STEM is split (TensorFlow's
 * build_imagenet_data.py: train-00000-of-01024) or NAME-split.tfrecord (TensorFlow Datasets:
 * imagenet2012-train.tfrecord-00000-of-01024): 0 with *k, *m and the stem's length, else -1. */
static int rt_tfr_name(const char *name, const char *split, int *k, int *m, size_t *stem_len) {
  size_t nl = strlen(name), sl = strlen(split), tail = 2 * RT_TFR_DIGITS + 5; /* "-NNNNN-of-MMMMM" */
  if (nl <= tail) return -1;
  size_t st = nl - tail;
  static const char tfds[] = ".tfrecord";
  size_t tl = sizeof tfds - 1;
  int plain = st == sl && !strncmp(name, split, sl);
  int named = st > sl + tl + 1 && !strncmp(name + st - tl, tfds, tl) && !strncmp(name + st - tl - sl, split, sl) &&
              name[st - tl - sl - 1] == '-';
  if (!plain && !named) return -1;
  const char *p = name + st;
  if (*p++ != '-') return -1;
  int v[2] = {0, 0};
  for (int part = 0; part < 2; part++) {
    for (int d = 0; d < RT_TFR_DIGITS; d++, p++) {
      if (*p < '0' || *p > '9') return -1;
      v[part] = v[part] * 10 + (*p - '0');
    }
    if (part == 0 && strncmp(p, "-of-", 4)) return -1;
    p += part == 0 ? 4 : 0;
  }
  if (*p) return -1;
  *k = v[0], *m = v[1], *stem_len = st;
  return 0;
}

static cnnrt_status rt_tfr_list(rt_tfr *t) {
  DIR *d = opendir(t->dir);
  if (!d) return rt_fail(CNNRT_IO, "%s: cannot list the TFRecord directory: %s", t->dir, strerror(errno));
  uint8_t *have = NULL;
  int found = 0, k, m;
  char first_name[256] = "";
  cnnrt_status s = CNNRT_OK;
  struct dirent *e;
  errno = 0;
  size_t stem_len;
  while (s == CNNRT_OK && (e = readdir(d))) {
    if (rt_tfr_name(e->d_name, t->split, &k, &m, &stem_len) || stem_len >= sizeof t->stem) continue;
    if (m == 0) {
      s = rt_fail(CNNRT_BAD_MODEL, "%s/%s: a shard of a set of 0 files", t->dir, e->d_name);
    } else if (!have) {
      t->m = m;
      snprintf(first_name, sizeof first_name, "%s", e->d_name);
      snprintf(t->stem, sizeof t->stem, "%.*s", (int)stem_len, e->d_name);
      if (!(have = calloc((size_t)m, 1))) s = rt_fail(CNNRT_OUT_OF_MEMORY, "%s: out of memory", t->dir);
    } else if (m != t->m || stem_len != strlen(t->stem) || strncmp(e->d_name, t->stem, stem_len)) {
      s = rt_fail(CNNRT_BAD_MODEL, "%s: shards of two sets: %s and %s (one name and MMMMM expected)", t->dir, first_name, e->d_name);
    }
    if (s == CNNRT_OK && k >= m) s = rt_fail(CNNRT_BAD_MODEL, "%s/%s: shard number %d is outside its set of %d (0..%d)", t->dir, e->d_name, k, m, m - 1);
    if (s == CNNRT_OK) found += !have[k], have[k] = 1;
    errno = 0;
  }
  if (s == CNNRT_OK && errno) s = rt_fail(CNNRT_IO, "%s: cannot list the TFRecord directory: %s", t->dir, strerror(errno));
  closedir(d);
  if (s == CNNRT_OK && !have)
    s = rt_fail(CNNRT_IO, "%s: no TFRecord shards named %s-NNNNN-of-MMMMM or NAME-%s.tfrecord-NNNNN-of-MMMMM", t->dir,
                t->split, t->split);
  for (int j = 0; s == CNNRT_OK && j < t->m; j++)
    if (!have[j])
      s = rt_fail(CNNRT_IO, "%s: shard %s-%05d-of-%05d of the set is missing (%d of %d present)", t->dir, t->stem, j, t->m,
                  found, t->m);
  free(have);
  return s;
}

static cnnrt_status rt_tfr_index_shard(rt_tfr *t, int sh) {
  char path[4200], why[256];
  rt_tfr_path(t, sh, path, sizeof path);
  uint64_t size = 0;
  int fd = cm_open_regular(path, &size, why, sizeof why);
  if (fd < 0) return rt_fail(CNNRT_IO, "%s: cannot open: %s", path, why);
  cnnrt_status s = CNNRT_OK;
  uint64_t off = 0;
  int64_t k = 0;
  t->first[sh] = t->n;
  while (s == CNNRT_OK && off < size) {
    uint8_t h[RT_TFR_HDR];
    size_t got = 0;
    int r = rt_pread_full(fd, h, sizeof h, off, &got);
    if (r < 0) {
      s = rt_fail(CNNRT_IO, "%s record %lld (byte offset %llu): read error: %s", path, (long long)k, (unsigned long long)off, strerror(errno));
      break;
    }
    if (r > 0) {
      s = rt_fail(CNNRT_BAD_MODEL, "%s record %lld (byte offset %llu): truncated shard: %zu bytes of a 12-byte record header", path,
                  (long long)k, (unsigned long long)off, got);
      break;
    }
    uint64_t len = rt_le64(h);
    uint32_t want = rt_le32(h + 8), crc = rt_tfr_mask(rt_tfr_crc32c(0, h, 8));
    if (want != crc)
      s = rt_fail(CNNRT_BAD_MODEL, "%s record %lld (byte offset %llu): header CRC mismatch (stored 0x%08x, computed 0x%08x): corrupt, or not a TFRecord file",
                  path, (long long)k, (unsigned long long)off, want, crc);
    else if (len > RT_TFR_MAX_RECORD)
      s = rt_fail(CNNRT_BAD_MODEL, "%s record %lld (byte offset %llu): claims %llu bytes (at most %llu: 64 MiB)", path, (long long)k,
                  (unsigned long long)off, (unsigned long long)len, (unsigned long long)RT_TFR_MAX_RECORD);
    else if (len + RT_TFR_HDR + 4 > size - off)
      s = rt_fail(CNNRT_BAD_MODEL, "%s record %lld (byte offset %llu): truncated shard: the record needs %llu bytes, the file has %llu from there", path,
                  (long long)k, (unsigned long long)off, (unsigned long long)(len + RT_TFR_HDR + 4), (unsigned long long)(size - off));
    else if (k >= RT_TFR_MAX_SHARD_RECORDS)
      s = rt_fail(CNNRT_BAD_MODEL, "%s: more than %lld records in one shard", path, (long long)RT_TFR_MAX_SHARD_RECORDS);
    else if (t->n >= RT_TFR_MAX_RECORDS)
      s = rt_fail(CNNRT_BAD_MODEL, "%s: more than %lld records in the set", path, (long long)RT_TFR_MAX_RECORDS);
    if (s != CNNRT_OK) break;
    if (t->n == t->cap) {
      int64_t cap = t->cap ? t->cap * 2 : 1024;
      uint64_t *o = realloc(t->off, (size_t)cap * sizeof *o);
      if (o) t->off = o;
      uint32_t *l = o ? realloc(t->len, (size_t)cap * sizeof *l) : NULL;
      if (l) t->len = l;
      if (!o || !l) {
        s = rt_fail(CNNRT_OUT_OF_MEMORY, "%s: out of memory indexing %lld records", path, (long long)t->n);
        break;
      }
      t->cap = cap;
    }
    t->off[t->n] = off;
    t->len[t->n] = (uint32_t)len;
    t->n++, k++;
    off += len + RT_TFR_HDR + 4;
  }
  close(fd);
  t->first[sh + 1] = t->n;
  return s;
}

cnnrt_status rt_tfr_open(const char *dir, int test, rt_tfr **out, int64_t *n_records) {
  if (out) *out = NULL;
  if (n_records) *n_records = 0;
  if (!dir || !*dir || !out || !n_records) return rt_fail(CNNRT_INVALID_ARGUMENT, "rt_tfr_open: NULL argument or empty directory");
  size_t dl = strlen(dir);
  while (dl > 1 && dir[dl - 1] == '/') dl--;
  if (dl > 4000) return rt_fail(CNNRT_INVALID_ARGUMENT, "%.100s...: directory name too long (%zu bytes)", dir, dl);
  rt_tfr *t = calloc(1, sizeof *t);
  if (!t || !(t->dir = strndup(dir, dl))) {
    free(t);
    return rt_fail(CNNRT_OUT_OF_MEMORY, "%s: out of memory", dir);
  }
  t->split = test ? "validation" : "train";
  cnnrt_status s = rt_tfr_list(t);
  if (s == CNNRT_OK && !(t->first = calloc((size_t)t->m + 1, sizeof *t->first)))
    s = rt_fail(CNNRT_OUT_OF_MEMORY, "%s: out of memory", dir);
  for (int sh = 0; s == CNNRT_OK && sh < t->m; sh++) s = rt_tfr_index_shard(t, sh);
  if (s == CNNRT_OK && t->n == 0)
    s = rt_fail(CNNRT_BAD_MODEL, "%s: the %d %s shards hold no records", t->dir, t->m, t->split);
  if (s != CNNRT_OK) {
    rt_tfr_close(t);
    return s;
  }
  *out = t;
  *n_records = t->n;
  return CNNRT_OK;
}

cnnrt_status rt_tfr_sample(rt_tfr *t, int64_t i, uint8_t **image, size_t *n, int64_t *label) {
  if (image) *image = NULL;
  if (n) *n = 0;
  if (!t || !image || !n || !label || i < 0 || i >= t->n)
    return rt_fail(CNNRT_INVALID_ARGUMENT, "rt_tfr_sample: record %lld of %lld (or a NULL argument)", (long long)i,
                   (long long)(t ? t->n : 0));
  char what[4300], path[4200], why[256];
  int sh = rt_tfr_shard_of(t, i);
  rt_tfr_path(t, sh, path, sizeof path);
  uint64_t off = t->off[i];
  size_t len = t->len[i], total = len + RT_TFR_HDR + 4;
  snprintf(what, sizeof what, "%s record %lld (byte offset %llu)", path, (long long)(i - t->first[sh]), (unsigned long long)off);
  int fd = cm_open_regular(path, NULL, why, sizeof why);
  if (fd < 0) return rt_fail(CNNRT_IO, "%s: cannot open: %s", what, why);
  uint8_t *b = malloc(total);
  if (!b) {
    close(fd);
    return rt_fail(CNNRT_OUT_OF_MEMORY, "%s: out of memory (%zu bytes)", what, total);
  }
  size_t got = 0;
  int r = rt_pread_full(fd, b, total, off, &got);
  int err = errno;
  close(fd);
  cnnrt_status s = CNNRT_OK;
  if (r < 0) s = rt_fail(CNNRT_IO, "%s: read error: %s", what, strerror(err));
  else if (r > 0) s = rt_fail(CNNRT_IO, "%s: the file ends after %zu of the record's %zu bytes (changed since it was indexed?)", what, got, total);
  else if (rt_le64(b) != len || rt_le32(b + 8) != rt_tfr_mask(rt_tfr_crc32c(0, b, 8)))
    s = rt_fail(CNNRT_IO, "%s: the record header changed since the shard was indexed", what);
  if (s == CNNRT_OK) {
    uint32_t want = rt_le32(b + RT_TFR_HDR + len), crc = rt_tfr_mask(rt_tfr_crc32c(0, b + RT_TFR_HDR, len));
    if (want != crc)
      s = rt_fail(CNNRT_BAD_MODEL, "%s: data CRC mismatch (stored 0x%08x, computed 0x%08x over %zu bytes): corrupt record", what, want, crc, len);
  }
  size_t img_off = 0, img_len = 0;
  if (s == CNNRT_OK) s = rt_tfr_parse_example(b + RT_TFR_HDR, len, what, &img_off, &img_len, label);
  if (s != CNNRT_OK) {
    free(b);
    return s;
  }
  memmove(b, b + RT_TFR_HDR + img_off, img_len);
  uint8_t *shrunk = realloc(b, img_len);
  *image = shrunk ? shrunk : b;
  *n = img_len;
  return CNNRT_OK;
}

void rt_tfr_close(rt_tfr *t) {
  if (!t) return;
  free(t->dir);
  free(t->first);
  free(t->off);
  free(t->len);
  free(t);
}
