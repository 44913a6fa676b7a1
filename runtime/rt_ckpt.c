/* rt_ckpt.c — training checkpoints as safetensors: every state tensor but the gradient
 * accumulators, by name, plus "step" (I64 scalar).  Saving writes a temporary file beside the
 * target and renames it; loading checks every name, dtype and shape before it touches the
 * state, so a refused file leaves the model as it was. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rt_internal.h"

#define RT_MAX_HEADER ((uint64_t)1 << 28)

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

static cnnrt_status rt_write_ckpt(cnnrt_model *m, FILE *f, const rt_str *h) {
  const cnnc_abi_train *t = m->tr->t;
  int ok = rt_write_le64(f, h->n) && fwrite(h->s, 1, h->n, f) == h->n;
  for (int i = 0; ok && i < t->n_state; i++)
    if (rt_saved(&t->state[i])) /* little-endian host: x86-64 / aarch64 */
      ok = fwrite((char *)m->tr->state + t->state[i].offset, 1, (size_t)t->state[i].bytes, f) == (size_t)t->state[i].bytes;
  ok = ok && rt_write_le64(f, (uint64_t)m->tr->step);
  ok = ok && fflush(f) == 0 && fsync(fileno(f)) == 0;
  return ok ? CNNRT_OK : CNNRT_IO;
}

CNNRT_API cnnrt_status cnnrt_save_checkpoint(cnnrt_model *m, const char *path) {
  rt_clear_error();
  if (!m || !m->tr) {
    if (!m) return rt_fail(CNNRT_INVALID_ARGUMENT, "cnnrt_save_checkpoint: model is NULL");
    return rt_fail(CNNRT_UNSUPPORTED, "cnnrt_save_checkpoint: %s is not a training model", m->path);
  }
  if (!path || !*path) return rt_fail(CNNRT_INVALID_ARGUMENT, "cnnrt_save_checkpoint: no path");
  size_t n = strlen(path) + 32;
  char *tmp = malloc(n);
  rt_str h = {0};
  pthread_mutex_lock(&m->lock);
  rt_header(m, &h);
  cnnrt_status s = CNNRT_OK;
  if (!tmp || h.oom) s = rt_fail(CNNRT_OUT_OF_MEMORY, "%s: out of memory", path);
  FILE *f = NULL;
  if (s == CNNRT_OK) {
    snprintf(tmp, n, "%s.tmp.%ld", path, (long)getpid());
    if (!(f = fopen(tmp, "wb"))) s = rt_fail(CNNRT_IO, "%s: cannot create: %s", tmp, strerror(errno));
  }
  if (s == CNNRT_OK && rt_write_ckpt(m, f, &h) != CNNRT_OK) s = rt_fail(CNNRT_IO, "%s: write error: %s", tmp, strerror(errno));
  pthread_mutex_unlock(&m->lock);
  if (f && fclose(f) != 0 && s == CNNRT_OK) s = rt_fail(CNNRT_IO, "%s: write error: %s", tmp, strerror(errno));
  if (s == CNNRT_OK && rename(tmp, path) != 0) s = rt_fail(CNNRT_IO, "%s: cannot rename %s to it: %s", path, tmp, strerror(errno));
  if (s != CNNRT_OK && f) remove(tmp);
  free(tmp);
  free(h.s);
  return s;
}

/* ---- a JSON reader for safetensors headers ---------------------------------------------- */
typedef struct rt_jp {
  const char *p, *end;
  int bad;
} rt_jp;

typedef struct rt_entry {
  char name[256], dtype[8];
  int rank;
  int64_t dims[8];
  int64_t begin, end;
} rt_entry;

static void rt_ws(rt_jp *j) {
  while (j->p < j->end && (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r')) j->p++;
}

static int rt_eat(rt_jp *j, char c) {
  rt_ws(j);
  if (j->p < j->end && *j->p == c) {
    j->p++;
    return 1;
  }
  return 0;
}

/* A string into out (truncated to size-1; \u escapes become '?'). */
static void rt_jstr(rt_jp *j, char *out, size_t size) {
  size_t n = 0;
  if (!rt_eat(j, '"')) {
    j->bad = 1;
    return;
  }
  while (j->p < j->end && *j->p != '"') {
    char c = *j->p++;
    if (c == '\\' && j->p < j->end) {
      c = *j->p++;
      if (c == 'u') j->p += 4, c = '?';
      else if (c == 'n') c = '\n';
      else if (c == 't') c = '\t';
    }
    if (n + 1 < size) out[n++] = c;
  }
  if (size) out[n] = '\0';
  if (j->p >= j->end) j->bad = 1;
  else j->p++;
}

static int64_t rt_jint(rt_jp *j) {
  rt_ws(j);
  int64_t v = 0;
  const char *s = j->p;
  while (j->p < j->end && *j->p >= '0' && *j->p <= '9' && v < (1ll << 55)) v = v * 10 + (*j->p++ - '0');
  if (j->p == s) j->bad = 1;
  return v;
}

static void rt_jskip(rt_jp *j, int depth) {
  char tmp[8];
  rt_ws(j);
  if (j->p >= j->end || depth > 8) {
    j->bad = 1;
    return;
  }
  if (*j->p == '"') {
    rt_jstr(j, tmp, sizeof tmp);
  } else if (*j->p == '{' || *j->p == '[') {
    char close = *j->p == '{' ? '}' : ']';
    int obj = *j->p++ == '{';
    if (rt_eat(j, close)) return;
    do {
      if (obj) {
        rt_jstr(j, tmp, sizeof tmp);
        if (!rt_eat(j, ':')) j->bad = 1;
      }
      rt_jskip(j, depth + 1);
    } while (!j->bad && rt_eat(j, ','));
    if (!rt_eat(j, close)) j->bad = 1;
  } else {
    while (j->p < j->end && *j->p != ',' && *j->p != '}' && *j->p != ']') j->p++;
  }
}

static void rt_jentry(rt_jp *j, rt_entry *e) {
  int got_offsets = 0;
  if (!rt_eat(j, '{')) {
    j->bad = 1;
    return;
  }
  do {
    char key[32];
    rt_jstr(j, key, sizeof key);
    if (!rt_eat(j, ':')) j->bad = 1;
    if (j->bad) return;
    if (!strcmp(key, "dtype")) rt_jstr(j, e->dtype, sizeof e->dtype);
    else if (!strcmp(key, "shape") || !strcmp(key, "data_offsets")) {
      int shape = key[0] == 's', n = 0;
      int64_t v[8];
      if (!rt_eat(j, '[')) j->bad = 1;
      if (!j->bad && !rt_eat(j, ']')) {
        do v[n < 8 ? n : 7] = rt_jint(j), n++;
        while (!j->bad && rt_eat(j, ','));
        if (!rt_eat(j, ']') || n > 8) j->bad = 1;
      }
      if (shape) e->rank = n, memcpy(e->dims, v, sizeof v);
      else if (n == 2) e->begin = v[0], e->end = v[1], got_offsets = 1;
      else j->bad = 1;
    } else rt_jskip(j, 1);
  } while (!j->bad && rt_eat(j, ','));
  if (!rt_eat(j, '}') || !got_offsets) j->bad = 1;
}

/* The entries of a header (without __metadata__) into *out (malloc, caller frees). */
static int rt_parse_header(const char *h, size_t n, rt_entry **out, int *count) {
  rt_jp j = {h, h + n, 0};
  int cap = 0;
  *out = NULL;
  *count = 0;
  if (!rt_eat(&j, '{')) return -1;
  if (rt_eat(&j, '}')) return 0;
  do {
    char name[256];
    rt_jstr(&j, name, sizeof name);
    if (!rt_eat(&j, ':')) j.bad = 1;
    if (j.bad) break;
    if (!strcmp(name, "__metadata__")) {
      rt_jskip(&j, 1);
      continue;
    }
    if (*count == cap) {
      rt_entry *q = realloc(*out, (size_t)(cap = cap ? 2 * cap : 64) * sizeof *q);
      if (!q) return -1;
      *out = q;
    }
    rt_entry *e = &(*out)[(*count)++];
    memset(e, 0, sizeof *e);
    snprintf(e->name, sizeof e->name, "%s", name);
    rt_jentry(&j, e);
  } while (!j.bad && rt_eat(&j, ','));
  if (!j.bad && !rt_eat(&j, '}')) j.bad = 1;
  return j.bad ? -1 : 0;
}

/* ---- load ------------------------------------------------------------------------------- */
typedef struct rt_ckpt {
  unsigned char *buf;
  size_t size, data; /* file size, offset of the data section */
  rt_entry *e;
  int n;
} rt_ckpt;

static void rt_ckpt_free(rt_ckpt *c) {
  free(c->buf);
  free(c->e);
}

static cnnrt_status rt_ckpt_read(const char *path, rt_ckpt *c) {
  memset(c, 0, sizeof *c);
  FILE *f = fopen(path, "rb");
  if (!f) return rt_fail(CNNRT_IO, "%s: cannot open: %s", path, strerror(errno));
  struct stat st;
  if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) { /* a directory's "size" is LONG_MAX */
    fclose(f);
    return rt_fail(CNNRT_IO, "%s: not a regular file (a checkpoint is one .safetensors file)", path);
  }
  long sz = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
  if (sz >= 0) rewind(f);
  c->buf = sz > 0 ? malloc((size_t)sz) : NULL;
  int ok = c->buf && fread(c->buf, 1, (size_t)sz, f) == (size_t)sz;
  fclose(f);
  if (sz < 8) return rt_fail(CNNRT_BAD_MODEL, "%s: %ld bytes, too few for a safetensors file", path, sz);
  if (!ok) return rt_fail(CNNRT_IO, "%s: read error (or out of memory)", path);
  c->size = (size_t)sz;
  uint64_t hn = 0;
  for (int k = 7; k >= 0; k--) hn = hn << 8 | c->buf[k];
  if (hn > RT_MAX_HEADER || hn > c->size - 8)
    return rt_fail(CNNRT_BAD_MODEL, "%s: header length %llu does not fit in the %zu-byte file (truncated or not safetensors)",
                   path, (unsigned long long)hn, c->size);
  c->data = 8 + (size_t)hn;
  if (rt_parse_header((const char *)c->buf + 8, (size_t)hn, &c->e, &c->n) != 0)
    return rt_fail(CNNRT_BAD_MODEL, "%s: malformed safetensors header", path);
  for (int i = 0; i < c->n; i++)
    if (c->e[i].begin < 0 || c->e[i].end < c->e[i].begin || (uint64_t)c->e[i].end > c->size - c->data)
      return rt_fail(CNNRT_BAD_MODEL, "%s: tensor '%s': data_offsets [%lld, %lld] outside the %zu data bytes (truncated?)",
                     path, c->e[i].name, (long long)c->e[i].begin, (long long)c->e[i].end, c->size - c->data);
  return CNNRT_OK;
}

static cnnrt_status rt_ckpt_step(const char *path, const rt_ckpt *c, int64_t *step) {
  for (int i = 0; i < c->n; i++) {
    const rt_entry *e = &c->e[i];
    if (strcmp(e->name, "step")) continue;
    if (strcmp(e->dtype, "I64") || e->rank != 0 || e->end - e->begin != 8)
      return rt_fail(CNNRT_SHAPE_MISMATCH, "%s: 'step' must be an I64 scalar", path);
    uint64_t v = 0;
    for (int k = 7; k >= 0; k--) v = v << 8 | c->buf[c->data + (size_t)e->begin + (size_t)k];
    *step = (int64_t)v;
    return CNNRT_OK;
  }
  return rt_fail(CNNRT_SHAPE_MISMATCH, "%s: no 'step' tensor (not a cnnc checkpoint)", path);
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

static cnnrt_status rt_ckpt_check(const cnnrt_model *m, const char *path, const rt_ckpt *c, int *map) {
  const cnnc_abi_train *t = m->tr->t;
  for (int i = 0; i < c->n; i++) {
    if (!strcmp(c->e[i].name, "step")) {
      map[i] = -1;
      continue;
    }
    int k = rt_state_find(t, c->e[i].name);
    if (k < 0 || !rt_saved(&t->state[k]))
      return rt_fail(CNNRT_SHAPE_MISMATCH, "%s: tensor '%s' is not in the state of model %s (a checkpoint of another model?)",
                     path, c->e[i].name, m->d->model_name);
    cnnrt_status s = rt_ckpt_match(path, &c->e[i], &t->state[k]);
    if (s != CNNRT_OK) return s;
    for (int j = 0; j < i; j++)
      if (map[j] == k) return rt_fail(CNNRT_BAD_MODEL, "%s: tensor '%s' appears twice", path, c->e[i].name);
    map[i] = k;
  }
  for (int k = 0; k < t->n_state; k++) {
    int found = !rt_saved(&t->state[k]);
    for (int i = 0; i < c->n && !found; i++) found = map[i] == k;
    if (!found)
      return rt_fail(CNNRT_SHAPE_MISMATCH, "%s: the checkpoint lacks state tensor '%s' of model %s", path, t->state[k].name,
                     m->d->model_name);
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
  int64_t step = 0;
  cnnrt_status s = rt_ckpt_read(path, &c);
  int *map = s == CNNRT_OK ? malloc(((size_t)c.n + 1) * sizeof *map) : NULL;
  if (s == CNNRT_OK && !map) s = rt_fail(CNNRT_OUT_OF_MEMORY, "%s: out of memory", path);
  if (s == CNNRT_OK) s = rt_ckpt_step(path, &c, &step);
  if (s == CNNRT_OK) s = rt_ckpt_check(m, path, &c, map);
  if (s == CNNRT_OK) {
    pthread_mutex_lock(&m->lock);
    for (int i = 0; i < c.n; i++)
      if (map[i] >= 0)
        memcpy((char *)m->tr->state + m->tr->t->state[map[i]].offset, c.buf + c.data + c.e[i].begin,
               (size_t)(c.e[i].end - c.e[i].begin));
    m->tr->step = step;
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
  cnnrt_status s = rt_ckpt_read(path, &c);
  if (s == CNNRT_OK) s = rt_ckpt_step(path, &c, step);
  rt_ckpt_free(&c);
  return s;
}
