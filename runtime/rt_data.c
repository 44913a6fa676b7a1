/* rt_data.c — image classification datasets in memory (u8 [N, C, H, W] + u8 labels): idx
 * files (MNIST, Fashion-MNIST; gzip through zlib when built with it), CIFAR-10 and CIFAR-100
 * binary batches, and a synthetic separable problem; seeded shuffling and u8 -> f32 (x/255)
 * conversion; the dataset calls that image folders (rt_folder.c) share.  Every malformed file
 * gives CNNRT_IO / CNNRT_BAD_MODEL naming the file. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/cm.h"
#include "rt_internal.h"

#ifdef CNNRT_HAVE_ZLIB
#include <zlib.h>
#endif

#define RT_CIFAR_RECORD 3073 /* CIFAR-10: label, 3x32x32 */
#define RT_CIFAR100_RECORD 3074 /* CIFAR-100: coarse label, fine label, 3x32x32 */
#define RT_MAX_FILE ((size_t)1 << 34)
#define RT_MAX_CIFAR_RECORDS 60000 /* per batch file: all of CIFAR-10 (a batch holds 10000) */

typedef struct rt_blob {
  uint8_t *p;
  size_t n;
} rt_blob;

static uint32_t rt_be32(const uint8_t *p);

/* How far to read: an idx file (ndim > 0) up to what its header promises plus one byte (which
 * shows trailing data), a CIFAR-10 batch (ndim 0) up to RT_MAX_CIFAR_RECORDS records plus one. */
static size_t rt_read_limit(const rt_blob *b, int ndim) {
  size_t hdr = 4 + 4 * (size_t)ndim;
  if (ndim == 0) return (size_t)RT_MAX_CIFAR_RECORDS * RT_CIFAR100_RECORD + 1;
  if (b->n < hdr) return hdr;
  if (b->p[0] || b->p[1] || b->p[2] != 0x08 || b->p[3] != ndim) return b->n; /* rt_idx_check says what is wrong */
  uint64_t count = 1;
  for (int k = 0; k < ndim; k++) {
    uint64_t d = rt_be32(b->p + 4 + 4 * k);
    if (d < 1 || d > (1 << 28) || (count *= d) > RT_MAX_FILE) return b->n; /* refused by rt_idx_check */
  }
  return hdr + (size_t)count + 1;
}

/* The file, gunzipped if it is gzip, read only as far as rt_read_limit allows: a gzip bomb
 * stops at what the header promises.  A regular file only (opened without blocking: a FIFO is
 * refused, not waited on).  CNNRT_IO naming path on failure. */
static cnnrt_status rt_read_file(const char *path, rt_blob *b, int ndim) {
  b->p = NULL;
  b->n = 0;
  char why[256];
  int fd = cm_open_regular(path, NULL, why, sizeof why);
  if (fd < 0) return rt_fail(CNNRT_IO, "%s: cannot open: %s", path, why);
#ifdef CNNRT_HAVE_ZLIB
  gzFile f = gzdopen(fd, "rb");
#else
  FILE *f = fdopen(fd, "rb");
#endif
  if (!f) {
    close(fd);
    return rt_fail(CNNRT_OUT_OF_MEMORY, "%s: out of memory", path);
  }
  cnnrt_status s = CNNRT_OK;
  size_t cap = 0, limit = rt_read_limit(b, ndim);
  while (b->n < limit) {
    if (b->n == cap) {
      size_t want = cap ? cap * 2 : 1 << 16;
      if (want > limit) want = limit;
      uint8_t *q = realloc(b->p, want);
      if (!q) {
        s = rt_fail(CNNRT_OUT_OF_MEMORY, "%s: out of memory", path);
        break;
      }
      b->p = q, cap = want;
    }
    size_t room = (limit < cap ? limit : cap) - b->n, chunk = room > (1u << 30) ? (1u << 30) : room;
#ifdef CNNRT_HAVE_ZLIB
    int got = gzread(f, b->p + b->n, (unsigned)chunk);
    if (got < 0) {
      int e;
      s = rt_fail(CNNRT_IO, "%s: read error: %s (corrupt gzip?)", path, gzerror(f, &e));
      break;
    }
#else
    size_t got = fread(b->p + b->n, 1, chunk, f);
    if (ferror(f)) {
      s = rt_fail(CNNRT_IO, "%s: read error", path);
      break;
    }
#endif
    if (got == 0) break;
    b->n += (size_t)got;
    limit = rt_read_limit(b, ndim);
  }
#ifdef CNNRT_HAVE_ZLIB
  int zerr = Z_OK;
  if (s == CNNRT_OK) gzerror(f, &zerr);
  if (zerr == Z_BUF_ERROR) /* a gzip stream cut short: the data so far came back without an error */
    s = rt_fail(CNNRT_IO, "%s: truncated gzip file (unexpected end of the compressed stream)", path);
  gzclose(f);
#else
  fclose(f);
  if (s == CNNRT_OK && b->n >= 2 && b->p[0] == 0x1f && b->p[1] == 0x8b)
    s = rt_fail(CNNRT_UNSUPPORTED, "%s: gzip file, but libcnnrt was built without zlib", path);
#endif
  if (s == CNNRT_OK && ndim == 0 && b->n >= limit)
    s = rt_fail(CNNRT_BAD_MODEL, "%s: more than %d CIFAR records (a CIFAR-10 batch file holds 10000, CIFAR-100's train.bin 50000)",
                path, RT_MAX_CIFAR_RECORDS);
  if (s != CNNRT_OK) free(b->p), b->p = NULL;
  return s;
}

static uint32_t rt_be32(const uint8_t *p) { return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3]; }

/* An idx file of u8 with ndim dims: checks magic and exact size; dims into dims[]. */
static cnnrt_status rt_idx_check(const char *path, const rt_blob *b, int ndim, int64_t *dims) {
  if (b->n < 4 || b->p[0] || b->p[1] || b->p[2] != 0x08 || b->p[3] != ndim)
    return rt_fail(CNNRT_BAD_MODEL, "%s: not an idx%d u8 file (magic %02x %02x %02x %02x, expected 00 00 08 %02x)", path, ndim,
                   b->n > 0 ? b->p[0] : 0, b->n > 1 ? b->p[1] : 0, b->n > 2 ? b->p[2] : 0, b->n > 3 ? b->p[3] : 0, ndim);
  size_t hdr = 4 + 4 * (size_t)ndim;
  if (b->n < hdr) return rt_fail(CNNRT_BAD_MODEL, "%s: truncated idx header (%zu bytes)", path, b->n);
  uint64_t count = 1;
  for (int k = 0; k < ndim; k++) {
    dims[k] = rt_be32(b->p + 4 + 4 * k);
    if (dims[k] < 1 || dims[k] > (1 << 28)) return rt_fail(CNNRT_BAD_MODEL, "%s: idx dimension %d is %lld", path, k, (long long)dims[k]);
    count *= (uint64_t)dims[k];
    if (count > RT_MAX_FILE) /* 2^28-bounded dims can still wrap 64 bits: 256 x 2^28 x 2^28 = 2^64 */
      return rt_fail(CNNRT_BAD_MODEL, "%s: idx dimensions promise more than %zu bytes of data (corrupt header?)", path,
                     RT_MAX_FILE);
  }
  if (b->n - hdr < count)
    return rt_fail(CNNRT_BAD_MODEL, "%s: truncated: the header promises %llu bytes of data, the file has %zu", path,
                   (unsigned long long)count, b->n - hdr);
  if (b->n - hdr > count) /* rt_read_file stopped one byte after the promise */
    return rt_fail(CNNRT_BAD_MODEL, "%s: trailing bytes: the header promises %llu bytes of data, the file has more", path,
                   (unsigned long long)count);
  return CNNRT_OK;
}

/* dir/name or dir/name.gz, whichever exists (into buf). */
static const char *rt_find(const char *dir, const char *name, char *buf, size_t size) {
  struct stat st; /* stat, not fopen: opening a FIFO would block */
  snprintf(buf, size, "%s/%s", dir, name);
  if (stat(buf, &st) == 0) return buf;
  snprintf(buf, size, "%s/%s.gz", dir, name);
  if (stat(buf, &st) == 0) return buf;
  snprintf(buf, size, "%s/%s", dir, name); /* for the error message */
  return buf;
}

static cnnrt_status rt_finish(cnnrt_dataset *ds, const char *what) {
  int maxl = 0;
  for (int64_t i = 0; i < ds->n; i++)
    if (ds->labels[i] > maxl) maxl = ds->labels[i];
  if (ds->classes == 0) ds->classes = maxl + 1;
  if (maxl >= ds->classes)
    return rt_fail(CNNRT_BAD_MODEL, "%s: label %d, the dataset has %d classes", what, maxl, ds->classes);
  if (!(ds->order = malloc((size_t)ds->n * sizeof *ds->order))) return rt_fail(CNNRT_OUT_OF_MEMORY, "%s: out of memory", what);
  for (int64_t i = 0; i < ds->n; i++) ds->order[i] = i;
  return CNNRT_OK;
}

static cnnrt_status rt_open_idx(cnnrt_dataset *ds, const char *dir, int test) {
  char ip[4200], lp[4200];
  rt_find(dir, test ? "t10k-images-idx3-ubyte" : "train-images-idx3-ubyte", ip, sizeof ip);
  rt_find(dir, test ? "t10k-labels-idx1-ubyte" : "train-labels-idx1-ubyte", lp, sizeof lp);
  rt_blob bi, bl = {NULL, 0};
  int64_t di[3] = {0}, dl[1] = {0};
  cnnrt_status s = rt_read_file(ip, &bi, 3);
  if (s == CNNRT_OK) s = rt_idx_check(ip, &bi, 3, di);
  if (s == CNNRT_OK) s = rt_read_file(lp, &bl, 1);
  if (s == CNNRT_OK) s = rt_idx_check(lp, &bl, 1, dl);
  if (s == CNNRT_OK && dl[0] != di[0])
    s = rt_fail(CNNRT_BAD_MODEL, "%s: %lld labels, but %s has %lld images", lp, (long long)dl[0], ip, (long long)di[0]);
  if (s == CNNRT_OK) {
    ds->n = di[0];
    ds->c = 1, ds->h = (int)di[1], ds->w = (int)di[2];
    ds->images = malloc((size_t)(bi.n - 16));
    ds->labels = malloc((size_t)ds->n);
    if (!ds->images || !ds->labels) s = rt_fail(CNNRT_OUT_OF_MEMORY, "%s: out of memory", ip);
  }
  if (s == CNNRT_OK) {
    memcpy(ds->images, bi.p + 16, bi.n - 16);
    memcpy(ds->labels, bl.p + 8, (size_t)ds->n);
    s = rt_finish(ds, lp);
  }
  free(bi.p);
  free(bl.p);
  return s;
}

/* Appends the records of one CIFAR-10 (rec RT_CIFAR_RECORD) or CIFAR-100 (RT_CIFAR100_RECORD:
 * the fine label is taken) batch file. */
static cnnrt_status rt_cifar_file(cnnrt_dataset *ds, const char *path, int rec) {
  rt_blob b;
  const char *kind = rec == RT_CIFAR_RECORD ? "CIFAR-10" : "CIFAR-100";
  int classes = rec == RT_CIFAR_RECORD ? 10 : 100, px = 3 * 32 * 32;
  cnnrt_status s = rt_read_file(path, &b, 0);
  if (s != CNNRT_OK) return s;
  if (b.n == 0 || b.n % (size_t)rec) {
    free(b.p);
    return rt_fail(CNNRT_BAD_MODEL, "%s: %zu bytes is not a whole number of %d-byte %s records%s", path, b.n, rec, kind,
                   b.n ? " (truncated?)" : "");
  }
  int64_t k = (int64_t)(b.n / (size_t)rec);
  if (ds->n + k > RT_MAX_CIFAR_RECORDS * 6) {
    free(b.p);
    return rt_fail(CNNRT_BAD_MODEL, "%s: more than %d %s records in all", path, RT_MAX_CIFAR_RECORDS * 6, kind);
  }
  uint8_t *im = realloc(ds->images, (size_t)(ds->n + k) * (size_t)px);
  if (im) ds->images = im;
  uint8_t *lb = im ? realloc(ds->labels, (size_t)(ds->n + k)) : NULL;
  if (lb) ds->labels = lb;
  if (!im || !lb) {
    free(b.p);
    return rt_fail(CNNRT_OUT_OF_MEMORY, "%s: out of memory", path);
  }
  for (int64_t i = 0; i < k; i++) {
    const uint8_t *r = b.p + (size_t)i * (size_t)rec;
    if (rec == RT_CIFAR100_RECORD && r[0] > 19) {
      int label = r[0];
      free(b.p);
      return rt_fail(CNNRT_BAD_MODEL, "%s: record %lld has coarse label %d, CIFAR-100's are 0..19", path, (long long)i, label);
    }
    int label = r[rec - px - 1];
    if (label >= classes) {
      free(b.p);
      return rt_fail(CNNRT_BAD_MODEL, "%s: record %lld has label %d, %s labels are 0..%d", path, (long long)i, label, kind,
                     classes - 1);
    }
    ds->labels[ds->n + i] = (uint8_t)label;
    memcpy(ds->images + (size_t)(ds->n + i) * (size_t)px, r + rec - px, (size_t)px);
  }
  ds->n += k;
  free(b.p);
  return CNNRT_OK;
}

static cnnrt_status rt_open_cifar(cnnrt_dataset *ds, const char *dir, int test) {
  char sub[4096], path[4200];
  snprintf(sub, sizeof sub, "%s/cifar-10-batches-bin/%s", dir, test ? "test_batch.bin" : "data_batch_1.bin");
  struct stat st;
  if (stat(sub, &st) == 0) snprintf(sub, sizeof sub, "%s/cifar-10-batches-bin", dir);
  else snprintf(sub, sizeof sub, "%s", dir);
  ds->c = 3, ds->h = 32, ds->w = 32, ds->classes = 10;
  for (int k = test ? 0 : 1; k <= (test ? 0 : 5); k++) {
    if (test) snprintf(path, sizeof path, "%s/test_batch.bin", sub);
    else snprintf(path, sizeof path, "%s/data_batch_%d.bin", sub, k);
    cnnrt_status s = rt_cifar_file(ds, path, RT_CIFAR_RECORD);
    if (s != CNNRT_OK) return s;
  }
  return rt_finish(ds, path);
}

static cnnrt_status rt_open_cifar100(cnnrt_dataset *ds, const char *dir, int test) {
  char path[4200];
  const char *name = test ? "test.bin" : "train.bin";
  struct stat st;
  snprintf(path, sizeof path, "%s/cifar-100-binary/%s", dir, name);
  if (stat(path, &st) != 0) snprintf(path, sizeof path, "%s/%s", dir, name);
  ds->c = 3, ds->h = 32, ds->w = 32, ds->classes = 100;
  cnnrt_status s = rt_cifar_file(ds, path, RT_CIFAR100_RECORD);
  return s == CNNRT_OK ? rt_finish(ds, path) : s;
}

uint64_t rt_splitmix(uint64_t *x) {
  uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

CNNRT_API cnnrt_status cnnrt_dataset_synthetic(int64_t n, int c, int h, int w, int classes, uint64_t seed,
                                               cnnrt_dataset **out) {
  rt_clear_error();
  if (!out) return rt_fail(CNNRT_INVALID_ARGUMENT, "cnnrt_dataset_synthetic: out is NULL");
  *out = NULL;
  if (n < 1 || c < 1 || h < 1 || w < 1 || classes < 2 || classes > 256 || classes > h || n > (1ll << 32) / ((int64_t)c * h * w))
    return rt_fail(CNNRT_INVALID_ARGUMENT, "cnnrt_dataset_synthetic: %lld samples of %dx%dx%d, %d classes (need 2..min(256,h))",
                   (long long)n, c, h, w, classes);
  cnnrt_dataset *ds = calloc(1, sizeof *ds);
  size_t per = (size_t)c * (size_t)h * (size_t)w;
  if (ds) ds->images = malloc((size_t)n * per), ds->labels = malloc((size_t)n);
  if (!ds || !ds->images || !ds->labels) {
    cnnrt_dataset_close(ds);
    return rt_fail(CNNRT_OUT_OF_MEMORY, "cnnrt_dataset_synthetic: out of memory");
  }
  ds->n = n, ds->c = c, ds->h = h, ds->w = w, ds->classes = classes;
  uint64_t x = seed;
  for (int64_t i = 0; i < n; i++) {
    int label = (int)(rt_splitmix(&x) % (uint64_t)classes);
    ds->labels[i] = (uint8_t)label;
    for (size_t p = 0; p < per; p++) {
      int row = (int)(p / (size_t)w % (size_t)h);
      int band = row * classes / h; /* class k owns rows [k h / classes, (k+1) h / classes) */
      ds->images[(size_t)i * per + p] = (uint8_t)(rt_splitmix(&x) % 100 + (band == label ? 150 : 0));
    }
  }
  cnnrt_status s = rt_finish(ds, "synthetic");
  if (s != CNNRT_OK) cnnrt_dataset_close(ds);
  else *out = ds;
  return s;
}

CNNRT_API cnnrt_status cnnrt_dataset_open(const char *kind, const char *dir, int test, cnnrt_dataset **out) {
  rt_clear_error();
  if (!out || !kind) return rt_fail(CNNRT_INVALID_ARGUMENT, "cnnrt_dataset_open: NULL argument");
  *out = NULL;
  if (!strcmp(kind, "synthetic")) return cnnrt_dataset_synthetic(test ? 256 : 1024, 1, 28, 28, 10, test ? 2 : 1, out);
  int idx = !strcmp(kind, "mnist") || !strcmp(kind, "fashion-mnist"), c100 = !strcmp(kind, "cifar100");
  if (!strcmp(kind, "folder") || !strcmp(kind, "tfrecord"))
    return rt_fail(CNNRT_INVALID_ARGUMENT, "dataset %s: open it with cnnrt_dataset_open_%s (it needs the sample shape)", kind,
                   kind);
  if (!idx && !c100 && strcmp(kind, "cifar10"))
    return rt_fail(CNNRT_INVALID_ARGUMENT, "unknown dataset '%s' (mnist, fashion-mnist, cifar10, cifar100, folder, tfrecord, synthetic)",
                   kind);
  if (!dir || !*dir) return rt_fail(CNNRT_INVALID_ARGUMENT, "dataset %s: no data directory", kind);
  cnnrt_dataset *ds = calloc(1, sizeof *ds);
  if (!ds) return rt_fail(CNNRT_OUT_OF_MEMORY, "out of memory");
  if (idx) ds->classes = 10;
  cnnrt_status s = idx ? rt_open_idx(ds, dir, test) : c100 ? rt_open_cifar100(ds, dir, test) : rt_open_cifar(ds, dir, test);
  if (s != CNNRT_OK) cnnrt_dataset_close(ds);
  else *out = ds;
  return s;
}

CNNRT_API void cnnrt_folder_options_init(cnnrt_folder_options *o) {
  if (!o) return;
  memset(o, 0, sizeof *o);
  o->augment = CNNRT_AUGMENT_IMAGENET;
  o->threads = -1; /* the default: cores / 2, at least 1 (rt_folder_open) */
}

static cnnrt_status rt_open_images(const char *dir, int test, int tfrecord, const cnnrt_folder_options *o,
                                   cnnrt_dataset **out) {
  rt_clear_error();
  if (!out || !dir || !o) return rt_fail(CNNRT_INVALID_ARGUMENT, "cnnrt_dataset_open_folder: NULL argument");
  *out = NULL;
  if (!*dir) return rt_fail(CNNRT_INVALID_ARGUMENT, "dataset folder: no data directory");
  if (tfrecord && (o->classes < 1 || o->classes > 1 << 24 || o->label_base < -(1 << 24) || o->label_base > 1 << 24))
    return rt_fail(CNNRT_INVALID_ARGUMENT, "dataset tfrecord %s: %d classes, label base %d (classes 1..2^24 required)", dir,
                   o->classes, o->label_base);
  if ((o->channels != 1 && o->channels != 3) || o->height < 1 || o->width < 1 || o->height > 8192 || o->width > 8192)
    return rt_fail(CNNRT_INVALID_ARGUMENT, "dataset folder %s: samples of %dx%dx%d (1 or 3 channels, 1..8192 pixels a side)",
                   dir, o->channels, o->height, o->width);
  if (o->augment != CNNRT_AUGMENT_IMAGENET && o->augment != CNNRT_AUGMENT_NONE)
    return rt_fail(CNNRT_INVALID_ARGUMENT, "dataset folder %s: augment %d (IMAGENET 0 or NONE 1)", dir, (int)o->augment);
  if (o->threads < -1 || o->threads > 256)
    return rt_fail(CNNRT_INVALID_ARGUMENT, "dataset folder %s: %d decoder threads (0..256, -1 the default)", dir, o->threads);
  cnnrt_dataset *ds = calloc(1, sizeof *ds);
  if (!ds) return rt_fail(CNNRT_OUT_OF_MEMORY, "out of memory");
  cnnrt_status s = rt_folder_open(ds, dir, test, tfrecord, o);
  if (s == CNNRT_OK && !(ds->order = malloc((size_t)ds->n * sizeof *ds->order)))
    s = rt_fail(CNNRT_OUT_OF_MEMORY, "dataset folder %s: out of memory", dir);
  if (s != CNNRT_OK) {
    cnnrt_dataset_close(ds);
    return s;
  }
  for (int64_t i = 0; i < ds->n; i++) ds->order[i] = i;
  *out = ds;
  return CNNRT_OK;
}

CNNRT_API cnnrt_status cnnrt_dataset_open_folder(const char *dir, int test, const cnnrt_folder_options *o,
                                                 cnnrt_dataset **out) {
  return rt_open_images(dir, test, 0, o, out);
}

CNNRT_API cnnrt_status cnnrt_dataset_open_tfrecord(const char *dir, int test, const cnnrt_folder_options *o,
                                                   cnnrt_dataset **out) {
  return rt_open_images(dir, test, 1, o, out);
}

CNNRT_API const char *cnnrt_dataset_class_name(const cnnrt_dataset *ds, int k) {
  static const char *const digits[] = {"0", "1", "2", "3", "4", "5", "6", "7", "8", "9"};
  if (!ds || k < 0 || k >= ds->classes) return NULL;
  if (ds->folder) return rt_folder_class(ds->folder, k);
  return k < 10 ? digits[k] : NULL;
}

CNNRT_API void cnnrt_dataset_stats_get(const cnnrt_dataset *ds, cnnrt_dataset_stats *out) {
  if (!out) return;
  memset(out, 0, sizeof *out);
  if (ds && ds->folder) rt_folder_stats(ds->folder, out);
}

CNNRT_API void cnnrt_dataset_close(cnnrt_dataset *ds) {
  if (!ds) return;
  rt_folder_close(ds->folder);
  free(ds->pick);
  free(ds->images);
  free(ds->labels);
  free(ds->order);
  free(ds);
}

CNNRT_API int64_t cnnrt_dataset_size(const cnnrt_dataset *ds) { return ds ? ds->n : 0; }

CNNRT_API void cnnrt_dataset_shape(const cnnrt_dataset *ds, int *c, int *h, int *w, int *classes) {
  if (c) *c = ds ? ds->c : 0;
  if (h) *h = ds ? ds->h : 0;
  if (w) *w = ds ? ds->w : 0;
  if (classes) *classes = ds ? ds->classes : 0;
}

CNNRT_API cnnrt_status cnnrt_dataset_limit(cnnrt_dataset *ds, int64_t n) {
  rt_clear_error();
  if (!ds || n < 1 || n > ds->n)
    return rt_fail(CNNRT_INVALID_ARGUMENT, "cnnrt_dataset_limit: %lld samples, the dataset has %lld", (long long)n,
                   (long long)(ds ? ds->n : 0));
  if (ds->folder) { /* sorted by class: n files spread over all of them */
    rt_folder_quiesce(ds->folder);
    int64_t *pick = malloc((size_t)n * sizeof *pick);
    if (!pick) return rt_fail(CNNRT_OUT_OF_MEMORY, "cnnrt_dataset_limit: out of memory");
    for (int64_t i = 0; i < n; i++) {
      int64_t f = (int64_t)((__int128)i * ds->n / n);
      pick[i] = ds->pick ? ds->pick[f] : f;
    }
    free(ds->pick);
    ds->pick = pick;
  }
  ds->n = n;
  for (int64_t i = 0; i < n; i++) ds->order[i] = i;
  return CNNRT_OK;
}

CNNRT_API void cnnrt_dataset_shuffle(cnnrt_dataset *ds, uint64_t seed) {
  if (!ds) return;
  if (ds->folder) rt_folder_quiesce(ds->folder);
  ds->seed = seed;
  for (int64_t i = 0; i < ds->n; i++) ds->order[i] = i;
  if (seed == 0) return;
  uint64_t x = seed;
  for (int64_t i = ds->n - 1; i > 0; i--) {
    int64_t j = (int64_t)(rt_splitmix(&x) % (uint64_t)(i + 1));
    int64_t t = ds->order[i];
    ds->order[i] = ds->order[j];
    ds->order[j] = t;
  }
}

CNNRT_API cnnrt_status cnnrt_dataset_read(const cnnrt_dataset *ds, int64_t first, int64_t count, cnnrt_dtype dtype,
                                          void *images, float *labels) {
  rt_clear_error();
  if (!ds || !images || !labels || first < 0 || count < 0 || first > ds->n - count)
    return rt_fail(CNNRT_INVALID_ARGUMENT, "cnnrt_dataset_read: samples %lld..+%lld of %lld (or NULL buffers)",
                   (long long)first, (long long)count, (long long)(ds ? ds->n : 0));
  if (dtype != CNNRT_U8 && dtype != CNNRT_F32)
    return rt_fail(CNNRT_UNSUPPORTED, "cnnrt_dataset_read: images as dtype %d; u8 or f32 only", (int)dtype);
  if (ds->folder) return rt_folder_read(ds, first, count, dtype, images, labels);
  size_t per = (size_t)ds->c * (size_t)ds->h * (size_t)ds->w;
  for (int64_t i = 0; i < count; i++) {
    int64_t s = ds->order[first + i];
    const uint8_t *src = ds->images + (size_t)s * per;
    labels[i] = (float)ds->labels[s];
    if (dtype == CNNRT_U8) memcpy((uint8_t *)images + (size_t)i * per, src, per);
    else
      for (size_t p = 0; p < per; p++) ((float *)images)[(size_t)i * per + p] = src[p] / 255.0f;
  }
  return CNNRT_OK;
}
