/* rt_ckpt.c — training checkpoints as safetensors: every state tensor but the gradient
 * accumulators, by name, plus "step" (I64 scalar) and __metadata__ {format, model, step}.
 * Saving writes PATH.tmp.PID, fsyncs, renames and fsyncs the directory (common/cm.h).  Loading
 * checks the whole file before it touches the state, so a refused file leaves the model as it
 * was: a regular file (never blocks on a FIFO); a header of strict JSON followed only by the
 * padding spaces, every tensor entry exactly {dtype, shape, data_offsets}, typed metadata; the
 * data offsets contiguous from 0 to the end of the file (no gap, overlap or trailing bytes);
 * every name, dtype and shape the model's; step >= 0; values finite and batch-norm running
 * variances >= 0 unless cnnrt_options.allow_nonfinite.  Every message names the file and the
 * tensor. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/cm.h"
#include "rt_internal.h"

#define RT_MAX_HEADER ((uint64_t)1 << 28)
#define RT_MAX_NAME 256

static int rt_saved(const cnnc_abi_state_tensor *x) { return x->kind != CNNC_ABI_STATE_GRAD_ACCUM; }

/* ---- save ------------------------------------------------------------------------------- */
static void rt_header(const cnnrt_model *m, rt_str *h) {
  const cnnc_abi_train *t = m->tr->t;
  rt_str_printf(h, "{\"__metadata__\":{\"format\":\"cnnc-checkpoint\",\"model\":");
  rt_str_json_string(h, m->d->model_name ? m->d->model_name : "");
  rt_str_printf(h, ",\"step\":\"%lld\"}", (long long)m->tr->step);
  int64_t off = 0;
  for (int i = 0; i < t->n_state; i++) {
    const cnnc_abi_state_tensor *x = &t->state[i];
    if (!rt_saved(x)) continue;
    rt_str_printf(h, ",");
    rt_str_json_string(h, x->name);
    rt_str_printf(h, ":{\"dtype\":\"%s\",\"shape\":[", x->dtype == CNNC_ABI_I32 ? "I32" : "F32");
    for (int k = 0; k < x->rank; k++) rt_str_printf(h, "%s%lld", k ? "," : "", (long long)x->dims[k]);
    rt_str_printf(h, "],\"data_offsets\":[%lld,%lld]}", (long long)off, (long long)(off + x->bytes));
    off += x->bytes;
  }
  rt_str_printf(h, ",\"step\":{\"dtype\":\"I64\",\"shape\":[],\"data_offsets\":[%lld,%lld]}}", (long long)off,
                (long long)off + 8);
  while (!h->oom && (h->n % 8) != 0) rt_str_printf(h, " ");
}

static int rt_write_le64(FILE *f, uint64_t v) {
  unsigned char b[8];
  for (int k = 0; k < 8; k++) b[k] = (unsigned char)(v >> (8 * k));
  return fwrite(b, 1, 8, f) == 8;
}

static int rt_write_ckpt(cnnrt_model *m, FILE *f, const rt_str *h) {
  const cnnc_abi_train *t = m->tr->t;
  int ok = rt_write_le64(f, h->n) && fwrite(h->s, 1, h->n, f) == h->n;
  for (int i = 0; ok && i < t->n_state; i++)
    if (rt_saved(&t->state[i])) /* little-endian host: x86-64 / aarch64 */
      ok = fwrite((char *)m->tr->state + t->state[i].offset, 1, (size_t)t->state[i].bytes, f) == (size_t)t->state[i].bytes;
  return ok && rt_write_le64(f, (uint64_t)m->tr->step);
}

CNNRT_API cnnrt_status cnnrt_save_checkpoint(cnnrt_model *m, const char *path) {
  rt_clear_error();
  if (!m || !m->tr) {
    if (!m) return rt_fail(CNNRT_INVALID_ARGUMENT, "cnnrt_save_checkpoint: model is NULL");
    return rt_fail(CNNRT_UNSUPPORTED, "cnnrt_save_checkpoint: %s is not a training model", m->path);
  }
  if (!path || !*path) return rt_fail(CNNRT_INVALID_ARGUMENT, "cnnrt_save_checkpoint: no path");
  cm_out out;
  char why[512];
  if (cm_out_open(&out, path, 0666, why, sizeof why)) return rt_fail(CNNRT_IO, "%s: %s", path, why);
  rt_str h = {0};
  pthread_mutex_lock(&m->lock);
  rt_header(m, &h);
  int ok = !h.oom && rt_write_ckpt(m, out.f, &h);
  int e = errno;
  pthread_mutex_unlock(&m->lock);
  free(h.s);
  if (!ok) {
    cm_out_abort(&out);
    if (h.oom) return rt_fail(CNNRT_OUT_OF_MEMORY, "%s: out of memory", path);
    return rt_fail(CNNRT_IO, "%s: write error: %s (nothing was written)", path, strerror(e ? e : EIO));
  }
  if (cm_out_commit(&out, why, sizeof why)) return rt_fail(CNNRT_IO, "%s: %s", path, why);
  return CNNRT_OK;
}

/* ---- the header: strict JSON (rt_json_valid) first, then this schema ---------------------- */
typedef struct rt_jp {
  const char *p;
  const char *err; /* what is wrong; NULL while fine */
} rt_jp;

typedef struct rt_entry {
  char name[RT_MAX_NAME], dtype[8];
  int rank;
  int64_t dims[8];
  int64_t begin, end;
} rt_entry;

static void rt_ws(rt_jp *j) {
  while (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r') j->p++;
}

static int rt_eat(rt_jp *j, char c) {
  rt_ws(j);
  if (*j->p != c) return 0;
  j->p++;
  return 1;
}

/* A JSON string (valid: rt_json_valid has seen it) into out; \u escapes other than ASCII
 * become '?'.  Too long for out is an error, never a truncation (two names could meet). */
static void rt_jstr(rt_jp *j, char *out, size_t size, const char *what) {
  size_t n = 0;
  rt_ws(j);
  if (*j->p != '"') {
    if (!j->err) j->err = what;
    return;
  }
  for (j->p++; *j->p != '"'; n++) {
    char c = *j->p++;
    if (c == '\\') {
      c = *j->p++;
      if (c == 'u') {
        unsigned v = (unsigned)strtoul((char[5]){j->p[0], j->p[1], j->p[2], j->p[3], 0}, NULL, 16);
        c = v >= 0x20 && v < 0x7f ? (char)v : '?';
        j->p += 4;
      } else {
        c = c == 'n' ? '\n' : c == 't' ? '\t' : c == 'r' ? '\r' : c == 'b' ? '\b' : c == 'f' ? '\f' : c;
      }
    }
    if (n + 1 < size) out[n] = c;
  }
  j->p++;
  if (n + 1 > size && !j->err) j->err = size == RT_MAX_NAME ? "a name longer than 255 bytes" : "a string too long for its key";
  out[n < size ? n : size - 1] = 0;
}

/* A non-negative integer below 2^53 (no sign, fraction or exponent). */
static int64_t rt_jint(rt_jp *j, const char *what) {
  rt_ws(j);
  int64_t v = 0;
  const char *s = j->p;
  while (*j->p >= '0' && *j->p <= '9' && v < ((int64_t)1 << 53)) v = v * 10 + (*j->p++ - '0');
  if (j->p == s || v >= ((int64_t)1 << 53) || *j->p == '.' || *j->p == 'e' || *j->p == 'E')
    if (!j->err) j->err = what;
  return v;
}

/* [a, b, ...] of up to max integers into v; the count. */
static int rt_jints(rt_jp *j, int64_t *v, int max, const char *what) {
  int n = 0;
  if (!rt_eat(j, '[')) {
    if (!j->err) j->err = what;
    return 0;
  }
  if (rt_eat(j, ']')) return 0;
  do {
    int64_t x = rt_jint(j, what);
    if (n < max) v[n] = x;
    n++;
  } while (!j->err && rt_eat(j, ','));
  if (!rt_eat(j, ']') && !j->err) j->err = what;
  if (n > max && !j->err) j->err = what;
  return n;
}

/* {"dtype": S, "shape": [..], "data_offsets": [b, e]}, each key once and no other. */
static void rt_jentry(rt_jp *j, rt_entry *e) {
  int seen[3] = {0, 0, 0};
  if (!rt_eat(j, '{')) {
    j->err = "a tensor entry must be an object";
    return;
  }
  if (rt_eat(j, '}')) {
    j->err = "an empty tensor entry";
    return;
  }
  do {
    char key[32];
    rt_jstr(j, key, sizeof key, "a key");
    if (!rt_eat(j, ':') && !j->err) j->err = "':'";
    int k = !strcmp(key, "dtype") ? 0 : !strcmp(key, "shape") ? 1 : !strcmp(key, "data_offsets") ? 2 : -1;
    if (j->err) return;
    if (k < 0 || seen[k]++) {
      j->err = k < 0 ? "a tensor entry has a key other than dtype, shape and data_offsets" : "a tensor entry repeats a key";
      return;
    }
    int64_t off[2];
    if (k == 0) rt_jstr(j, e->dtype, sizeof e->dtype, "'dtype' must be a short string");
    else if (k == 1) e->rank = rt_jints(j, e->dims, 8, "'shape' must be a list of at most 8 non-negative integers");
    else if (rt_jints(j, off, 2, "'data_offsets' must be two non-negative integers") == 2) e->begin = off[0], e->end = off[1];
    else if (!j->err) j->err = "'data_offsets' must be two non-negative integers";
  } while (!j->err && rt_eat(j, ','));
  if (!j->err && !rt_eat(j, '}')) j->err = "'}' after a tensor entry";
  if (!j->err && (!seen[0] || !seen[1] || !seen[2])) j->err = "a tensor entry lacks dtype, shape or data_offsets";
}

typedef struct rt_ckpt {
  const char *path;
  int fd;
  uint64_t size, data;       /* file size, offset of the data section */
  char *hdr;                 /* the header, NUL-terminated */
  rt_entry *e;
  int n, step_entry, has_meta;
  char format[32], meta_step[32];
  int64_t step;
  unsigned char *buf;        /* the data section, when loaded */
} rt_ckpt;

/* "__metadata__": an object of string values; "format" must be cnnc-checkpoint, "step" digits. */
static void rt_jmeta(rt_jp *j, rt_ckpt *c) {
  if (c->has_meta++) j->err = "'__metadata__' appears twice";
  if (!rt_eat(j, '{') && !j->err) j->err = "'__metadata__' must be an object";
  if (j->err || rt_eat(j, '}')) return;
  do {
    char key[RT_MAX_NAME], val[RT_MAX_NAME];
    rt_jstr(j, key, sizeof key, "a metadata key");
    if (!rt_eat(j, ':') && !j->err) j->err = "':'";
    rt_jstr(j, val, sizeof val, "__metadata__ values must be strings");
    if (!strcmp(key, "format")) snprintf(c->format, sizeof c->format, "%.31s", val);
    else if (!strcmp(key, "step")) snprintf(c->meta_step, sizeof c->meta_step, "%.31s", val[0] ? val : "?");
  } while (!j->err && rt_eat(j, ','));
  if (!j->err && !rt_eat(j, '}')) j->err = "'}' after __metadata__";
}

static cnnrt_status rt_parse_header(rt_ckpt *c) {
  rt_jp j = {c->hdr, NULL};
  int cap = 0;
  char name[RT_MAX_NAME] = "";
  c->step_entry = -1;
  if (!rt_json_valid(c->hdr, 1))
    return rt_fail(CNNRT_BAD_MODEL, "%s: the header is not one strict JSON object (followed only by spaces)", c->path);
  rt_eat(&j, '{');
  if (!rt_eat(&j, '}')) do {
      rt_jstr(&j, name, sizeof name, "a tensor name");
      if (!rt_eat(&j, ':') && !j.err) j.err = "':'";
      if (j.err) break;
      if (!strcmp(name, "__metadata__")) {
        rt_jmeta(&j, c);
        continue;
      }
      if (c->n == cap) {
        rt_entry *q = realloc(c->e, (size_t)(cap = cap ? 2 * cap : 64) * sizeof *q);
        if (!q) return rt_fail(CNNRT_OUT_OF_MEMORY, "%s: out of memory", c->path);
        c->e = q;
      }
      rt_entry *e = &c->e[c->n++];
      memset(e, 0, sizeof *e);
      snprintf(e->name, sizeof e->name, "%s", name);
      rt_jentry(&j, e);
    } while (!j.err && rt_eat(&j, ','));
  if (j.err) return rt_fail(CNNRT_BAD_MODEL, "%s: bad safetensors header%s%s%s: %s", c->path, name[0] ? " at '" : "", name,
                            name[0] ? "'" : "", j.err);
  if (!c->has_meta || strcmp(c->format, "cnnc-checkpoint"))
    return rt_fail(CNNRT_BAD_MODEL, "%s: __metadata__ has no \"format\": \"cnnc-checkpoint\" (not a cnnc checkpoint)", c->path);
  return CNNRT_OK;
}

/* ---- layout ----------------------------------------------------------------------------- */
static size_t rt_ckpt_dtype_size(const char *d) {
  return !strcmp(d, "F32") || !strcmp(d, "I32") ? 4 : !strcmp(d, "I64") ? 8 : 0;
}

/* Each entry's dtype known and bytes = its shape; the offsets tile [0, data bytes) exactly. */
static cnnrt_status rt_ckpt_layout(rt_ckpt *c) {
  uint64_t data = c->size - c->data;
  for (int i = 0; i < c->n; i++) {
    rt_entry *e = &c->e[i];
    size_t es = rt_ckpt_dtype_size(e->dtype);
    if (!es) return rt_fail(CNNRT_BAD_MODEL, "%s: tensor '%s': dtype '%s' (a checkpoint holds F32, I32 and I64)", c->path, e->name, e->dtype);
    int64_t bytes = (int64_t)es;
    for (int k = 0; k < e->rank; k++) bytes = e->dims[k] <= ((int64_t)1 << 40) / (bytes ? bytes : 1) ? bytes * e->dims[k] : -1;
    if (e->end < e->begin || (uint64_t)e->end > data)
      return rt_fail(CNNRT_BAD_MODEL, "%s: tensor '%s': data_offsets [%lld, %lld] outside the %llu data bytes (truncated?)", c->path,
                     e->name, (long long)e->begin, (long long)e->end, (unsigned long long)data);
    if (bytes != e->end - e->begin)
      return rt_fail(CNNRT_BAD_MODEL, "%s: tensor '%s': data_offsets [%lld, %lld] hold %lld bytes, its dtype and shape need %lld", c->path,
                     e->name, (long long)e->begin, (long long)e->end, (long long)(e->end - e->begin), (long long)bytes);
    for (int k = 0; k < i; k++)
      if (!strcmp(c->e[k].name, e->name)) return rt_fail(CNNRT_BAD_MODEL, "%s: tensor '%s' appears twice", c->path, e->name);
    if (!strcmp(e->name, "step")) c->step_entry = i;
  }
  cm_span *sp = malloc(((size_t)c->n + 1) * sizeof *sp);
  if (!sp) return rt_fail(CNNRT_OUT_OF_MEMORY, "%s: out of memory", c->path);
  for (int i = 0; i < c->n; i++) sp[i] = (cm_span){(uint64_t)c->e[i].begin, (uint64_t)c->e[i].end, i};
  int at;
  uint64_t end;
  cm_tile_fault fault = cm_spans_tile(sp, c->n, data, &at, &end); /* common/cm_span.c */
  const rt_entry *b = fault == CM_TILE_OVERLAP || fault == CM_TILE_GAP ? &c->e[sp[at].id] : NULL;
  const char *prev = fault == CM_TILE_OVERLAP ? c->e[sp[at - 1].id].name : "";
  free(sp);
  if (fault == CM_TILE_OVERLAP)
    return rt_fail(CNNRT_BAD_MODEL, "%s: tensor '%s': data_offsets [%lld, %lld] overlap those of tensor '%s'", c->path, b->name,
                   (long long)b->begin, (long long)b->end, prev);
  if (fault == CM_TILE_GAP)
    return rt_fail(CNNRT_BAD_MODEL, "%s: tensor '%s': data_offsets [%lld, %lld] leave bytes %llu..%lld unused", c->path, b->name,
                   (long long)b->begin, (long long)b->end, (unsigned long long)end, (long long)b->begin);
  if (fault == CM_TILE_TRAILING)
    return rt_fail(CNNRT_BAD_MODEL, "%s: %llu bytes after the last tensor's data (the data section has %llu bytes)", c->path,
                   (unsigned long long)(data - end), (unsigned long long)data);
  return CNNRT_OK;
}

/* "step": an I64 scalar >= 0, equal to __metadata__'s "step" when that is given. */
static cnnrt_status rt_ckpt_step(rt_ckpt *c) {
  if (c->step_entry < 0) return rt_fail(CNNRT_SHAPE_MISMATCH, "%s: no 'step' tensor (not a cnnc checkpoint)", c->path);
  const rt_entry *e = &c->e[c->step_entry];
  if (strcmp(e->dtype, "I64") || e->rank != 0) return rt_fail(CNNRT_SHAPE_MISMATCH, "%s: tensor 'step' must be an I64 scalar", c->path);
  unsigned char b[8];
  if (pread(c->fd, b, 8, (off_t)(c->data + (uint64_t)e->begin)) != 8)
    return rt_fail(CNNRT_IO, "%s: tensor 'step': read error: %s", c->path, strerror(errno ? errno : EIO));
  uint64_t v = 0;
  for (int k = 7; k >= 0; k--) v = v << 8 | b[k];
  c->step = (int64_t)v;
  if (c->step < 0) return rt_fail(CNNRT_BAD_MODEL, "%s: tensor 'step' is %lld; a step count must be >= 0", c->path, (long long)c->step);
  char want[32];
  snprintf(want, sizeof want, "%lld", (long long)c->step);
  if (c->meta_step[0] && strcmp(c->meta_step, want))
    return rt_fail(CNNRT_BAD_MODEL, "%s: __metadata__ says step \"%s\", tensor 'step' holds %s", c->path, c->meta_step, want);
  return CNNRT_OK;
}

/* ---- load ------------------------------------------------------------------------------- */
static void rt_ckpt_free(rt_ckpt *c) {
  if (c->fd >= 0) close(c->fd);
  free(c->hdr);
  free(c->e);
  free(c->buf);
}

/* Opens, reads and checks the header, the layout and the step (not the data). */
static cnnrt_status rt_ckpt_open(const char *path, rt_ckpt *c) {
  memset(c, 0, sizeof *c);
  c->path = path;
  char why[256];
  if ((c->fd = cm_open_regular(path, &c->size, why, sizeof why)) < 0) return rt_fail(CNNRT_IO, "%s: %s", path, why);
  unsigned char b[8];
  if (c->size < 8 || pread(c->fd, b, 8, 0) != 8)
    return rt_fail(CNNRT_BAD_MODEL, "%s: %llu bytes, too few for a safetensors file", path, (unsigned long long)c->size);
  uint64_t hn = 0;
  for (int k = 7; k >= 0; k--) hn = hn << 8 | b[k];
  if (hn == 0 || hn > RT_MAX_HEADER || hn > c->size - 8)
    return rt_fail(CNNRT_BAD_MODEL, "%s: header length %llu does not fit in the %llu-byte file (truncated or not safetensors)", path,
                   (unsigned long long)hn, (unsigned long long)c->size);
  c->data = 8 + hn;
  if (!(c->hdr = malloc((size_t)hn + 1))) return rt_fail(CNNRT_OUT_OF_MEMORY, "%s: out of memory", path);
  if (pread(c->fd, c->hdr, (size_t)hn, 8) != (ssize_t)hn) return rt_fail(CNNRT_IO, "%s: read error (truncated?)", path);
  c->hdr[hn] = 0;
  if (strlen(c->hdr) != hn) return rt_fail(CNNRT_BAD_MODEL, "%s: a NUL byte inside the header", path);
  cnnrt_status s = rt_parse_header(c);
  if (s == CNNRT_OK) s = rt_ckpt_layout(c);
  if (s == CNNRT_OK) s = rt_ckpt_step(c);
  return s;
}

static void rt_shape_text(char *buf, size_t size, int rank, const int64_t *dims) {
  int n = snprintf(buf, size, "[");
  for (int k = 0; k < rank && n > 0 && (size_t)n < size; k++) n += snprintf(buf + n, size - (size_t)n, "%s%lld", k ? "," : "", (long long)dims[k]);
  if (n > 0 && (size_t)n < size) snprintf(buf + n, size - (size_t)n, "]");
}

/* Entry e matches state tensor x (dtype and shape), else SHAPE_MISMATCH naming both. */
static cnnrt_status rt_ckpt_match(const char *path, const rt_entry *e, const cnnc_abi_state_tensor *x) {
  const char *want = x->dtype == CNNC_ABI_I32 ? "I32" : "F32";
  int same = !strcmp(e->dtype, want) && e->rank == x->rank && e->end - e->begin == x->bytes;
  for (int k = 0; same && k < x->rank; k++) same = e->dims[k] == x->dims[k];
  if (same) return CNNRT_OK;
  char a[96], b[96];
  rt_shape_text(a, sizeof a, e->rank, e->dims);
  rt_shape_text(b, sizeof b, x->rank, x->dims);
  return rt_fail(CNNRT_SHAPE_MISMATCH, "%s: tensor '%s' is %s %s in the checkpoint, the model has %s %s", path, e->name,
                 e->dtype, a, want, b);
}

static cnnrt_status rt_ckpt_check(const cnnrt_model *m, const rt_ckpt *c, int *map) {
  const cnnc_abi_train *t = m->tr->t;
  for (int i = 0; i < c->n; i++) {
    map[i] = -1;
    if (i == c->step_entry) continue;
    int k = rt_state_find(t, c->e[i].name);
    if (k < 0 || !rt_saved(&t->state[k]))
      return rt_fail(CNNRT_SHAPE_MISMATCH, "%s: tensor '%s' is not in the state of model %s (a checkpoint of another model?)",
                     c->path, c->e[i].name, m->d->model_name);
    cnnrt_status s = rt_ckpt_match(c->path, &c->e[i], &t->state[k]);
    if (s != CNNRT_OK) return s;
    map[i] = k;
  }
  for (int k = 0; k < t->n_state; k++) {
    int found = !rt_saved(&t->state[k]);
    for (int i = 0; i < c->n && !found; i++) found = map[i] == k;
    if (!found)
      return rt_fail(CNNRT_SHAPE_MISMATCH, "%s: the checkpoint lacks state tensor '%s' of model %s", c->path, t->state[k].name,
                     m->d->model_name);
  }
  return CNNRT_OK;
}

/* F32 values finite, and a batch-norm running variance >= 0 (rt_ckpt.c's header comment). */
static cnnrt_status rt_ckpt_values(const rt_ckpt *c, const rt_entry *e) {
  if (strcmp(e->dtype, "F32")) return CNNRT_OK;
  size_t n = (size_t)(e->end - e->begin) / 4, len = strlen(e->name);
  int var = len >= 12 && !strcmp(e->name + len - 12, "running_var");
  const unsigned char *p = c->buf + e->begin;
  for (size_t i = 0; i < n; i++) {
    float v;
    memcpy(&v, p + 4 * i, 4);
    if (!isfinite(v) || (var && v < 0))
      return rt_fail(CNNRT_BAD_MODEL, "%s: tensor '%s': element %zu is %g%s (cnnrun --allow-nonfinite, cnnrt_options.allow_nonfinite, "
                     "loads it anyway)", c->path, e->name, i, (double)v, isfinite(v) ? ", a negative variance" : "");
  }
  return CNNRT_OK;
}

/* The data section (its size is the model's: every tensor was matched) and its values. */
static cnnrt_status rt_ckpt_data(const cnnrt_model *m, rt_ckpt *c, const int *map) {
  size_t n = (size_t)(c->size - c->data);
  if (!(c->buf = malloc(n ? n : 1))) return rt_fail(CNNRT_OUT_OF_MEMORY, "%s: out of memory", c->path);
  for (size_t got = 0; got < n;) {
    ssize_t k = pread(c->fd, c->buf + got, n - got, (off_t)(c->data + got));
    if (k <= 0) return rt_fail(CNNRT_IO, "%s: read error: %s", c->path, k < 0 ? strerror(errno) : "the file shrank");
    got += (size_t)k;
  }
  for (int i = 0; i < c->n && !m->opts.allow_nonfinite; i++) {
    cnnrt_status s = map[i] >= 0 ? rt_ckpt_values(c, &c->e[i]) : CNNRT_OK;
    if (s != CNNRT_OK) return s;
  }
  return CNNRT_OK;
}

CNNRT_API cnnrt_status cnnrt_load_checkpoint(cnnrt_model *m, const char *path) {
  rt_clear_error();
  if (!m || !m->tr) {
    if (!m) return rt_fail(CNNRT_INVALID_ARGUMENT, "cnnrt_load_checkpoint: model is NULL");
    return rt_fail(CNNRT_UNSUPPORTED, "cnnrt_load_checkpoint: %s is not a training model", m->path);
  }
  if (!path) return rt_fail(CNNRT_INVALID_ARGUMENT, "cnnrt_load_checkpoint: path is NULL");
  rt_ckpt c;
  cnnrt_status s = rt_ckpt_open(path, &c);
  int *map = s == CNNRT_OK ? malloc(((size_t)c.n + 1) * sizeof *map) : NULL;
  if (s == CNNRT_OK && !map) s = rt_fail(CNNRT_OUT_OF_MEMORY, "%s: out of memory", path);
  if (s == CNNRT_OK) s = rt_ckpt_check(m, &c, map);
  if (s == CNNRT_OK) s = rt_ckpt_data(m, &c, map);
  if (s == CNNRT_OK) {
    pthread_mutex_lock(&m->lock);
    for (int i = 0; i < c.n; i++)
      if (map[i] >= 0)
        memcpy((char *)m->tr->state + m->tr->t->state[map[i]].offset, c.buf + c.e[i].begin, (size_t)(c.e[i].end - c.e[i].begin));
    m->tr->step = c.step;
    pthread_mutex_unlock(&m->lock);
  }
  free(map);
  rt_ckpt_free(&c);
  return s;
}

CNNRT_API cnnrt_status cnnrt_checkpoint_step(const char *path, int64_t *step) {
  rt_clear_error();
  if (!path || !step) return rt_fail(CNNRT_INVALID_ARGUMENT, "cnnrt_checkpoint_step: NULL argument");
  rt_ckpt c;
  cnnrt_status s = rt_ckpt_open(path, &c);
  if (s == CNNRT_OK) *step = c.step;
  rt_ckpt_free(&c);
  return s;
}
