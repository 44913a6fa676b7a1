/* cnnrun_infer.c — `cnnrun MODEL.so infer`: samples from raw or idx(.gz) files, run in calls of
 * --batches micro-batches (one instance, --replicas instances on core groups, or under mpirun
 * one instance per rank with the outputs gathered on rank 0: docs/mpi.md), written raw
 * (--output) or as top-k classes and accuracy (--top, --labels). */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cnnrun.h"
#include "common/cm.h"

#ifdef CNNRUN_HAVE_ZLIB
#include <zlib.h>
#endif

static size_t dtype_size(cnnrt_dtype t) {
  return t == CNNRT_U8 || t == CNNRT_I8 ? 1 : t == CNNRT_BF16 || t == CNNRT_F16 ? 2 : t == CNNRT_I64 ? 8 : 4;
}

/* ---- files ------------------------------------------------------------------------------ */
typedef struct blob {
  unsigned char *p;
  size_t n;
} blob;

/* Input files: samples or labels, at most this many bytes once decompressed. */
#define MAX_INPUT_BYTES ((size_t)1 << 32)

static size_t idx_elem_size(int type);

/* The bytes an idx file whose first h bytes (h >= 4) are at p needs in all, or 0 while its
 * header is incomplete or not idx; SIZE_MAX when its dimensions promise too much. */
static size_t idx_total(const unsigned char *p, size_t h) {
  if (p[0] || p[1] || !idx_elem_size(p[2]) || p[3] < 1 || p[3] > 4 || h < 4 + 4 * (size_t)p[3]) return 0;
  size_t total = idx_elem_size(p[2]);
  for (int k = 0; k < p[3]; k++) {
    const unsigned char *d = p + 4 + 4 * k;
    size_t dim = (size_t)d[0] << 24 | (size_t)d[1] << 16 | (size_t)d[2] << 8 | d[3];
    if (dim && total > MAX_INPUT_BYTES / dim) return SIZE_MAX;
    total *= dim;
  }
  return total + 4 + 4 * (size_t)p[3];
}

/* The whole file, gunzipped if it is gzip (with zlib): a regular file (never a FIFO or a device
 * such as /dev/zero: opened without blocking and refused), at most MAX_INPUT_BYTES.  A
 * compressed idx file is read only as far as its header promises (a gzip bomb stops there);
 * with idx_bound 0 (--format raw) the bound is MAX_INPUT_BYTES. */
static blob read_file(const char *path, int idx_bound) {
  blob b = {NULL, 0};
  char why[256];
  uint64_t size;
  int fd = cm_open_regular(path, &size, why, sizeof why);
  if (fd < 0) die("%s: %s", path, why);
  unsigned char magic[2] = {0, 0};
  int gz = pread(fd, magic, 2, 0) == 2 && magic[0] == 0x1f && magic[1] == 0x8b;
  if (!gz && size > MAX_INPUT_BYTES) die("%s: %llu bytes, more than cnnrun reads (%zu)", path, (unsigned long long)size, MAX_INPUT_BYTES);
#ifdef CNNRUN_HAVE_ZLIB
  gzFile f = gzdopen(fd, "rb");
  if (!f) die("%s: out of memory", path);
#else
  if (gz) die("%s: gzip file, but cnnrun was built without zlib", path);
  FILE *f = fdopen(fd, "rb");
  if (!f) die("%s: %s", path, strerror(errno));
#endif
  size_t cap = 1 << 16, limit = MAX_INPUT_BYTES + 1, promised = 0;
  for (;;) {
    if (!b.p || b.n == cap) {
      if (b.p) cap = cap * 2 < limit ? cap * 2 : limit;
      if (!(b.p = realloc(b.p, cap))) die("%s: out of memory", path);
    }
#ifdef CNNRUN_HAVE_ZLIB
    int got = gzread(f, b.p + b.n, (unsigned)(cap - b.n > (1u << 30) ? (1u << 30) : cap - b.n));
    if (got < 0) {
      int e;
      die("%s: %s", path, gzerror(f, &e));
    }
#else
    size_t got = fread(b.p + b.n, 1, cap - b.n, f);
    if (ferror(f)) die("%s: read error", path);
#endif
    if (got == 0) break;
    b.n += (size_t)got;
    if (gz && idx_bound && !promised && b.n >= 4 && (promised = idx_total(b.p, b.n)) != 0)
      limit = promised == SIZE_MAX ? MAX_INPUT_BYTES + 1 : promised + 1; /* one more byte shows trailing data */
    if (b.n >= limit) break;
  }
#ifdef CNNRUN_HAVE_ZLIB
  gzclose(f);
#else
  fclose(f);
#endif
  if (b.n > MAX_INPUT_BYTES) die("%s: more than %zu bytes%s", path, MAX_INPUT_BYTES, gz ? " once decompressed" : "");
  if (promised && promised != SIZE_MAX && b.n > promised)
    die("%s: more data than its idx header promises (%zu bytes) once decompressed", path, promised);
  return b;
}

/* An idx file (yann.lecun.com/exdb/mnist): 0 0 type ndim, ndim big-endian u32 dims, data. */
typedef struct idx {
  int type, ndim;
  int64_t dims[4], count; /* count = product of dims */
  const unsigned char *data;
} idx;

static size_t idx_elem_size(int type) {
  switch (type) {
  case 0x08: case 0x09: return 1;
  case 0x0B: return 2;
  case 0x0C: case 0x0D: return 4;
  case 0x0E: return 8;
  }
  return 0;
}

/* Nonzero if b is a well-formed idx file (the size must match its header exactly). */
static int idx_parse(const blob *b, idx *x) {
  if (b->n < 4 || b->p[0] || b->p[1] || !idx_elem_size(b->p[2]) || b->p[3] < 1 || b->p[3] > 4) return 0;
  x->type = b->p[2];
  x->ndim = b->p[3];
  size_t hdr = 4 + 4 * (size_t)x->ndim;
  if (b->n < hdr) return 0;
  x->count = 1;
  for (int k = 0; k < x->ndim; k++) {
    const unsigned char *d = b->p + 4 + 4 * k;
    x->dims[k] = (int64_t)d[0] << 24 | d[1] << 16 | d[2] << 8 | d[3];
    x->count *= x->dims[k];
    if (x->count > (int64_t)b->n) return 0; /* also keeps the product from overflowing */
  }
  x->data = b->p + hdr;
  return b->n - hdr == (size_t)x->count * idx_elem_size(x->type) ? 1 : -1; /* -1: an idx header, another size */
}

/* Element i of an idx array as a double (big-endian data). */
static double idx_value(const idx *x, int64_t i) {
  size_t es = idx_elem_size(x->type);
  const unsigned char *p = x->data + (size_t)i * es;
  uint64_t u = 0;
  for (size_t k = 0; k < es; k++) u = u << 8 | p[k];
  switch (x->type) {
  case 0x08: return p[0];
  case 0x09: return (int8_t)p[0];
  case 0x0B: return (int16_t)u;
  case 0x0C: return (int32_t)u;
  case 0x0D: { uint32_t w = (uint32_t)u; float f; memcpy(&f, &w, 4); return f; }
  default: { double d; memcpy(&d, &u, 8); return d; }
  }
}

/* ---- infer ------------------------------------------------------------------------------ */
typedef struct samples {
  unsigned char *data; /* n samples in the model's input dtype */
  int64_t n;
} samples;

/* idx -> the model's input: u8 stays u8 (u8 models); for f32 models u8 becomes x/255, other
 * types their value. */
static samples idx_samples(const char *path, const idx *x, const cnnrt_tensor_info *in, int64_t per) {
  samples s = {NULL, x->dims[0]};
  if (x->count / (x->dims[0] ? x->dims[0] : 1) != per)
    die("%s: idx samples have %lld values, the model input '%s' takes %lld per sample", path,
        (long long)(x->dims[0] ? x->count / x->dims[0] : 0), in->name, (long long)per);
  if (in->dtype != CNNRT_U8 && in->dtype != CNNRT_F32)
    die("the model input is %s; idx files feed u8 or f32 inputs (--format raw feeds any dtype)", dtype_name(in->dtype));
  if (in->dtype == CNNRT_U8 && x->type != 0x08) die("%s: the model takes u8 images, the idx file is not u8", path);
  s.data = malloc((size_t)x->count * dtype_size(in->dtype) + 1);
  if (!s.data) die("%s: out of memory", path);
  for (int64_t i = 0; i < x->count; i++) {
    if (in->dtype == CNNRT_U8) s.data[i] = x->data[i];
    else ((float *)s.data)[i] = (float)(x->type == 0x08 ? x->data[i] / 255.0 : idx_value(x, i));
  }
  return s;
}

static samples load_samples(const opts *o, const cnnrt_tensor_info *in, int batch) {
  int64_t per = (int64_t)(in->bytes / dtype_size(in->dtype)) / batch; /* values per sample */
  blob b = read_file(o->input, strcmp(o->format, "raw") != 0);
  idx x;
  int is_idx = strcmp(o->format, "raw") != 0 ? idx_parse(&b, &x) : 0;
  if (!strcmp(o->format, "idx") && is_idx != 1) die("%s: not an idx file (bad header or size)", o->input);
  if (is_idx < 0) /* auto: never read an idx file with the wrong size as raw bytes in silence */
    die("%s: an idx header (type 0x%02x, %d dims) promising %lld bytes of data, but the file holds %zu (truncated, or "
        "trailing data?); --format raw reads it as raw samples", o->input, x.type, x.ndim,
        (long long)(x.count * (int64_t)idx_elem_size(x.type)), b.n - (4 + 4 * (size_t)x.ndim));
  if (is_idx) {
    samples s = idx_samples(o->input, &x, in, per);
    free(b.p);
    return s;
  }
  size_t sb = in->bytes / (size_t)batch;
  if (b.n == 0 || b.n % sb != 0)
    die("%s: %zu bytes is not a whole number of samples of %zu bytes (%s, %lld values each)", o->input, b.n, sb,
        dtype_name(in->dtype), (long long)per);
  return (samples){b.p, (int64_t)(b.n / sb)};
}

/* Labels: idx1 u8, or raw bytes, one per sample. */
static unsigned char *load_labels(const char *path, int64_t n) {
  blob b = read_file(path, 1);
  idx x;
  const unsigned char *p = b.p;
  size_t count = b.n;
  int is_idx = idx_parse(&b, &x);
  if (is_idx < 0)
    die("%s: an idx header promising %lld labels' bytes, but the file holds %zu after it (truncated, or trailing data?)", path,
        (long long)(x.count * (int64_t)idx_elem_size(x.type)), b.n - (4 + 4 * (size_t)x.ndim));
  if (is_idx) {
    if (x.type != 0x08 || x.ndim != 1) die("%s: labels must be a 1-d u8 idx file", path);
    p = x.data;
    count = (size_t)x.count;
  }
  if ((int64_t)count != n) die("%s: %zu labels for %lld samples", path, count, (long long)n);
  unsigned char *l = malloc(count + 1);
  if (!l) die("%s: out of memory", path);
  memcpy(l, p, count);
  free(b.p);
  return l;
}

/* Runs every sample (the last micro-batch padded with zeros); out receives per output k a
 * contiguous [n, ...] block. */
/* Runs micro-batches [mb0, mb1) of the samples through m into out (every output, [samples, ...]
 * per output in order). */
static void run_samples(const opts *o, cnnrt_model *m, const samples *s, unsigned char *out, int64_t mb0, int64_t mb1) {
  int b = cnnrt_batch_size(m), no = cnnrt_num_outputs(m);
  size_t ib = cnnrt_input_bytes(m), ob = cnnrt_output_bytes(m), sib = ib / (size_t)b;
  unsigned char *in = calloc((size_t)o->batches, ib), *res = malloc((size_t)o->batches * ob);
  if (!in || !res) die("out of memory for %d micro-batches", o->batches);
  for (int64_t first = mb0; first < mb1; first += o->batches) {
    int nb = (int)(mb1 - first < o->batches ? mb1 - first : o->batches);
    int64_t s0 = first * b, ns = s->n - s0 < (int64_t)nb * b ? s->n - s0 : (int64_t)nb * b;
    memset(in, 0, (size_t)nb * ib);
    memcpy(in, s->data + (size_t)s0 * sib, (size_t)ns * sib);
    if (cnnrt_infer(m, in, (size_t)nb * ib, res, (size_t)nb * ob, nb) != CNNRT_OK) die("%s", cnnrt_last_error());
    size_t off = 0, base = 0; /* offset of output k inside a micro-batch / inside out */
    for (int k = 0; k < no; k++) {
      cnnrt_tensor_info t;
      cnnrt_output_info(m, k, &t);
      size_t per = t.bytes / (size_t)b;
      for (int64_t j = 0; j < ns; j++)
        memcpy(out + base + (size_t)(s0 + j) * per, res + (size_t)(j / b) * ob + off + (size_t)(j % b) * per, per);
      off += t.bytes;
      base += per * (size_t)s->n;
    }
  }
  free(in);
  free(res);
}

typedef struct replica_run {
  const opts *o;
  cnnrt_model **ms;
  const samples *s;
  unsigned char *out;
  int64_t nmb;
} replica_run;

/* Replica i: its contiguous share of the micro-batches. */
static void run_replica(int i, void *p) {
  const replica_run *r = p;
  int R = r->o->replicas;
  run_samples(r->o, r->ms[i], r->s, r->out, r->nmb * i / R, r->nmb * (i + 1) / R);
}

/* Prints the top-k classes of each sample of output 0; returns the number of top-1 hits. */
static int64_t print_top(const opts *o, const float *y, int64_t n, int64_t classes, const unsigned char *labels) {
  int k = o->top < classes ? o->top : (int)classes;
  int64_t hits = 0;
  for (int64_t i = 0; i < n; i++) {
    const float *row = y + i * classes;
    int64_t best = 0;
    for (int64_t c = 1; c < classes; c++)
      if (row[c] > row[best]) best = c;
    hits += labels && labels[i] == best;
    if (!o->top) continue;
    printf("sample %lld:", (long long)i);
    unsigned char *used = calloc((size_t)classes, 1);
    for (int r = 0; r < k && used; r++) {
      int64_t c = -1;
      for (int64_t j = 0; j < classes; j++)
        if (!used[j] && (c < 0 || row[j] > row[c])) c = j;
      used[c] = 1;
      printf(" %lld (%.4g)", (long long)c, row[c]);
    }
    free(used);
    if (labels) printf("  label %d", labels[i]);
    printf("\n");
  }
  return hits;
}

/* Written as PATH.tmp.PID and renamed into place (common/cm.h): a full disk leaves no file. */
static void write_output(const char *path, const void *p, size_t n) {
  cm_out out;
  char why[512];
  if (cm_out_open(&out, path, 0666, why, sizeof why)) die("%s: %s", path, why);
  if (fwrite(p, 1, n, out.f) != n) {
    int e = errno;
    cm_out_abort(&out);
    die("%s: write error: %s (nothing was written)", path, strerror(e));
  }
  if (cm_out_commit(&out, why, sizeof why)) die("%s: %s", path, why);
}

/* Checks every output path of the command before its work starts (common/cm.h): not a
 * directory, not one of its inputs, its directory writable. */
void check_outputs(const opts *o) {
  const char *in[] = {o->model, o->input, o->labels, o->restore, o->checkpoint};
  const char *out[] = {o->output, o->trace};
  char why[512];
  for (int k = 0; k < 2; k++)
    if (out[k] && cm_check_output(out[k], in, 5, why, sizeof why)) die("%s %s", out[k], why);
}

int cmd_infer(const opts *o) {
  cnnrt_model *m = open_model(o);
  cnnrt_tensor_info in, out0;
  cnnrt_input_info(m, &in);
  cnnrt_output_info(m, 0, &out0);
  int b = cnnrt_batch_size(m);
  samples s = load_samples(o, &in, b);
  if (s.n == 0) die("%s: no samples", o->input);
  unsigned char *labels = o->labels ? load_labels(o->labels, s.n) : NULL;
  size_t total = cnnrt_output_bytes(m) / (size_t)b * (size_t)s.n;
  unsigned char *out = malloc(total);
  if (!out) die("out of memory for the outputs of %lld samples", (long long)s.n);
  int64_t nmb = (s.n + b - 1) / b;
  const cnnrt_comm *cm = dist_comm_get();
  if (cm) { /* under mpirun: rank r runs micro-batches [nmb r/N, nmb (r+1)/N), rank 0 gathers the outputs */
    if (o->replicas > 1) die("infer under mpirun: every rank is one model instance; --replicas is for one process");
    int N = cm->size, me = cm->rank;
    run_samples(o, m, &s, out, nmb * me / N, nmb * (me + 1) / N);
    size_t base = 0;
    for (int k = 0; k < cnnrt_num_outputs(m); k++) {
      cnnrt_tensor_info t;
      cnnrt_output_info(m, k, &t);
      size_t per = t.bytes / (size_t)b;
      for (int r = 1; r < N; r++) {
        int64_t s0 = nmb * r / N * b, s1 = nmb * (r + 1) / N * b;
        if (s1 > s.n) s1 = s.n;
        if (s0 >= s1 || (me != 0 && me != r)) continue;
        unsigned char *p = out + base + (size_t)s0 * per;
        size_t bytes = (size_t)(s1 - s0) * per;
        if (me ? cm->send(cm->ctx, p, bytes, 0) : cm->recv(cm->ctx, p, bytes, r))
          die("infer: the outputs of rank %d: %s", r, cm->last_error(cm->ctx));
      }
      base += per * (size_t)s.n;
    }
    if (me) { /* rank 0 writes and prints */
      free(labels), free(out), free(s.data);
      close_model(o, m);
      return 0;
    }
  } else if (o->replicas > 1) { /* the micro-batches split in contiguous shares, one per instance */
    cnnrt_model *ms[1024];
    open_replicas(o, ms);
    replica_run rr = {o, ms, &s, out, nmb};
    run_parallel(o->replicas, run_replica, &rr);
    for (int i = 0; i < o->replicas; i++) cnnrt_close(ms[i]);
  } else {
    run_samples(o, m, &s, out, 0, nmb);
  }
  if (o->output) write_output(o->output, out, total);
  if ((o->top || labels) && out0.dtype != CNNRT_F32) die("output '%s' is %s, not f32", out0.name, dtype_name(out0.dtype));
  int64_t classes = (int64_t)(out0.bytes / 4) / b;
  int64_t hits = (o->top || labels) ? print_top(o, (const float *)out, s.n, classes, labels) : 0;
  if (labels) printf("accuracy %.4f (%lld/%lld)\n", (double)hits / (double)s.n, (long long)hits, (long long)s.n);
  fprintf(stderr, "cnnrun: %lld samples%s%s\n", (long long)s.n, o->output ? ", outputs written to " : "",
          o->output ? o->output : "");
  free(labels);
  free(out);
  free(s.data);
  close_model(o, m);
  return 0;
}
