/* weights.c — safetensors I/O for model parameters (fe_load_safetensors, fe_save_safetensors).
 * File layout: u64 little-endian header length N, N bytes of JSON header
 *   {"<name>": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]}, ...,
 *    "__metadata__": {"<key>": "<string>", ...}}
 * (possibly padded with trailing spaces), then the data section; offsets are relative to it.
 * The header parser below is self-contained and schema-driven: it accepts exactly that shape
 * of JSON and reports anything else with the file and the tensor named.  Never aborts. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/cm.h"
#include "weights.h"

#define ST_MAX_HEADER 100000000ull /* the reference implementation's limit */
#define ST_MAX_RANK 8
#define ST_MAX_DIM (1ull << 40)    /* keeps numel * element size far from overflow */

/* I32 and I64 only in a cnnc training checkpoint, for the tensors it ignores (counters). */
typedef enum st_dtype { ST_F32, ST_F16, ST_BF16, ST_I32, ST_I64, ST_UNSUPPORTED } st_dtype;

typedef struct st_tensor {
  const char *name;      /* NUL-terminated, inside the decoded header copy */
  const char *dtype_name;
  st_dtype dtype;
  int rank;
  uint64_t dim[ST_MAX_RANK];
  uint64_t begin, end;   /* data_offsets, relative to the data section */
} st_tensor;

typedef struct st_file {
  const char *path;
  ir_diag *d;
  char *hdr;             /* header copy, decoded in place; NUL-terminated at hdr[len] */
  size_t len, pos;
  st_tensor *t;
  int n, cap;
  uint64_t data_len;     /* bytes after the header */
  int ckpt;              /* __metadata__ "format": "cnnc-checkpoint" (cnnrun train's checkpoints) */
  char step[32];         /* its __metadata__ "step", if any */
  char *note;            /* fe_load_safetensors_note's buffer (may be NULL) */
  size_t note_n;
} st_file;

/* Formats the message and records it against the file (no line/column: binary file). */
static int st_err(st_file *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int st_err(st_file *f, const char *fmt, ...) {
  char buf[700];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  ir_loc loc = {f->path, 0, 0};
  return ir_diag_set(f->d, loc, NULL, "%s", buf);
}

static size_t dtype_size(st_dtype t) { return t == ST_I64 ? 8 : t == ST_F32 || t == ST_I32 ? 4 : 2; }

/* ---- JSON header parser ------------------------------------------------------------------ */

static void skip_ws(st_file *f) {
  while (f->pos < f->len) {
    char c = f->hdr[f->pos];
    if (c != ' ' && c != '\t' && c != '\n' && c != '\r') break;
    f->pos++;
  }
}

/* Describes the current position for "expected X" errors. */
static int json_err(st_file *f, const char *expected) {
  if (f->pos >= f->len)
    return st_err(f, "bad JSON header: expected %s at byte %zu, found the end of the header",
                  expected, f->pos);
  unsigned char c = (unsigned char)f->hdr[f->pos];
  if (c >= 0x20 && c < 0x7f)
    return st_err(f, "bad JSON header: expected %s at byte %zu, found '%c'", expected, f->pos, c);
  return st_err(f, "bad JSON header: expected %s at byte %zu, found byte 0x%02x", expected, f->pos, c);
}

static int expect(st_file *f, char c, const char *what) {
  skip_ws(f);
  if (f->pos >= f->len || f->hdr[f->pos] != c) return json_err(f, what);
  f->pos++;
  return 0;
}

/* Consumes c if it comes next (after white space); 1 if it did. */
static int accept(st_file *f, char c) {
  skip_ws(f);
  if (f->pos >= f->len || f->hdr[f->pos] != c) return 0;
  f->pos++;
  return 1;
}

/* A JSON object or array: list_open consumes its opening character (open) and returns 1 when
 * an element follows, 0 when close follows at once (consumed too); list_next, after an element,
 * consumes the ',' (1: another element follows) or close (0).  Both return -1 (the error set,
 * what naming the expected text) otherwise.  Loop: for (r = list_open(..); r > 0; r = list_next(..)). */
static int list_open(st_file *f, char open, char close, const char *what) {
  if (expect(f, open, what) < 0) return -1;
  return !accept(f, close);
}

static int list_next(st_file *f, char close, const char *what) {
  if (accept(f, ',')) return 1;
  return expect(f, close, what) < 0 ? -1 : 0;
}

static int hexval(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

static int read_hex4(st_file *f, size_t at, unsigned *out) {
  unsigned v = 0;
  if (at + 4 > f->len) return -1;
  for (int k = 0; k < 4; k++) {
    int h = hexval(f->hdr[at + k]);
    if (h < 0) return -1;
    v = v * 16 + (unsigned)h;
  }
  *out = v;
  return 0;
}

/* Parses a JSON string at the current position and decodes it in place (the decoded form is
 * never longer than the source).  *out points into f->hdr, NUL-terminated. */
static int parse_string(st_file *f, char **out) {
  skip_ws(f);
  if (f->pos >= f->len || f->hdr[f->pos] != '"') return json_err(f, "a string");
  size_t start = f->pos++;
  char *w = f->hdr + f->pos, *begin = w;
  for (;;) {
    if (f->pos >= f->len)
      return st_err(f, "bad JSON header: string starting at byte %zu is not terminated", start);
    unsigned char c = (unsigned char)f->hdr[f->pos];
    if (c == '"') { f->pos++; break; }
    if (c < 0x20)
      return st_err(f, "bad JSON header: control character 0x%02x inside a string at byte %zu", c, f->pos);
    if (c != '\\') { *w++ = (char)c; f->pos++; continue; }
    if (f->pos + 1 >= f->len)
      return st_err(f, "bad JSON header: string starting at byte %zu is not terminated", start);
    char e = f->hdr[f->pos + 1];
    f->pos += 2;
    switch (e) {
    case '"': *w++ = '"'; break;
    case '\\': *w++ = '\\'; break;
    case '/': *w++ = '/'; break;
    case 'b': *w++ = '\b'; break;
    case 'f': *w++ = '\f'; break;
    case 'n': *w++ = '\n'; break;
    case 'r': *w++ = '\r'; break;
    case 't': *w++ = '\t'; break;
    case 'u': {
      unsigned cp, lo;
      if (read_hex4(f, f->pos, &cp) < 0)
        return st_err(f, "bad JSON header: bad \\u escape at byte %zu", f->pos - 2);
      f->pos += 4;
      if (cp >= 0xDC00 && cp <= 0xDFFF)
        return st_err(f, "bad JSON header: unpaired surrogate \\u%04X at byte %zu", cp, f->pos - 6);
      if (cp >= 0xD800 && cp <= 0xDBFF) {
        if (f->pos + 2 > f->len || f->hdr[f->pos] != '\\' || f->hdr[f->pos + 1] != 'u' ||
            read_hex4(f, f->pos + 2, &lo) < 0 || lo < 0xDC00 || lo > 0xDFFF)
          return st_err(f, "bad JSON header: unpaired surrogate \\u%04X at byte %zu", cp, f->pos - 6);
        f->pos += 6;
        cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
      }
      if (cp == 0) return st_err(f, "bad JSON header: \\u0000 inside a string at byte %zu", f->pos - 6);
      if (cp < 0x80) {
        *w++ = (char)cp;
      } else if (cp < 0x800) {
        *w++ = (char)(0xC0 | (cp >> 6));
        *w++ = (char)(0x80 | (cp & 0x3F));
      } else if (cp < 0x10000) {
        *w++ = (char)(0xE0 | (cp >> 12));
        *w++ = (char)(0x80 | ((cp >> 6) & 0x3F));
        *w++ = (char)(0x80 | (cp & 0x3F));
      } else {
        *w++ = (char)(0xF0 | (cp >> 18));
        *w++ = (char)(0x80 | ((cp >> 12) & 0x3F));
        *w++ = (char)(0x80 | ((cp >> 6) & 0x3F));
        *w++ = (char)(0x80 | (cp & 0x3F));
      }
      break;
    }
    default:
      return st_err(f, "bad JSON header: invalid escape '\\%c' at byte %zu", e, f->pos - 2);
    }
  }
  /* w <= position of the closing quote, which has been consumed: safe to terminate here. */
  *w = '\0';
  *out = begin;
  return 0;
}

/* A non-negative JSON integer (no sign, fraction, exponent or leading zero) that fits u64. */
static int parse_u64(st_file *f, uint64_t *v, const char *tensor, const char *field) {
  skip_ws(f);
  size_t at = f->pos;
  if (f->pos >= f->len || f->hdr[f->pos] < '0' || f->hdr[f->pos] > '9') {
    if (f->pos < f->len && f->hdr[f->pos] == '-')
      return st_err(f, "tensor '%s': %s must be non-negative (byte %zu)", tensor, field, at);
    return json_err(f, "a non-negative integer");
  }
  uint64_t x = 0;
  while (f->pos < f->len && f->hdr[f->pos] >= '0' && f->hdr[f->pos] <= '9') {
    unsigned dgt = (unsigned)(f->hdr[f->pos] - '0');
    if (x > (UINT64_MAX - dgt) / 10)
      return st_err(f, "tensor '%s': %s value at byte %zu is too large", tensor, field, at);
    x = x * 10 + dgt;
    f->pos++;
  }
  if (f->pos - at > 1 && f->hdr[at] == '0')
    return st_err(f, "bad JSON header: number with a leading zero at byte %zu", at);
  if (f->pos < f->len && (f->hdr[f->pos] == '.' || f->hdr[f->pos] == 'e' || f->hdr[f->pos] == 'E'))
    return st_err(f, "tensor '%s': %s must be integers (byte %zu)", tensor, field, at);
  *v = x;
  return 0;
}

static st_dtype dtype_from_name(const char *s) {
  if (!strcmp(s, "F32")) return ST_F32;
  if (!strcmp(s, "F16")) return ST_F16;
  if (!strcmp(s, "BF16")) return ST_BF16;
  if (!strcmp(s, "I32")) return ST_I32;
  if (!strcmp(s, "I64")) return ST_I64;
  return ST_UNSUPPORTED;
}

/* {"dtype": "F32", "shape": [..], "data_offsets": [b, e]}; each key exactly once. */
static int parse_tensor_info(st_file *f, st_tensor *t) {
  int seen_dtype = 0, seen_shape = 0, seen_off = 0, r;
  for (r = list_open(f, '{', '}', "'{' (tensor info)"); r > 0; r = list_next(f, '}', "',' or '}' (tensor info)")) {
    char *key;
    if (parse_string(f, &key) < 0 || expect(f, ':', "':'") < 0) return -1;
    if (!strcmp(key, "dtype")) {
      char *dt;
      if (seen_dtype++) return st_err(f, "tensor '%s': 'dtype' given twice", t->name);
      if (parse_string(f, &dt) < 0) return -1;
      t->dtype_name = dt;
      t->dtype = dtype_from_name(dt);
    } else if (!strcmp(key, "shape")) {
      if (seen_shape++) return st_err(f, "tensor '%s': 'shape' given twice", t->name);
      int rs;
      for (rs = list_open(f, '[', ']', "'[' (shape)"); rs > 0; rs = list_next(f, ']', "',' or ']' (shape)")) {
        uint64_t dim;
        if (parse_u64(f, &dim, t->name, "shape") < 0) return -1;
        if (t->rank == ST_MAX_RANK)
          return st_err(f, "tensor '%s': rank above %d is not supported", t->name, ST_MAX_RANK);
        if (dim > ST_MAX_DIM)
          return st_err(f, "tensor '%s': dimension %llu is too large", t->name, (unsigned long long)dim);
        t->dim[t->rank++] = dim;
      }
      if (rs < 0) return -1;
    } else if (!strcmp(key, "data_offsets")) {
      if (seen_off++) return st_err(f, "tensor '%s': 'data_offsets' given twice", t->name);
      if (expect(f, '[', "'[' (data_offsets)") < 0 ||
          parse_u64(f, &t->begin, t->name, "data_offsets") < 0 ||
          expect(f, ',', "',' (data_offsets has two entries)") < 0 ||
          parse_u64(f, &t->end, t->name, "data_offsets") < 0 ||
          expect(f, ']', "']' (data_offsets has two entries)") < 0)
        return -1;
    } else {
      return st_err(f, "tensor '%s': unknown key '%s' (expected dtype, shape, data_offsets)",
                    t->name, key);
    }
  }
  if (r < 0) return -1;
  if (!seen_dtype || !seen_shape || !seen_off)
    return st_err(f, "tensor '%s': missing '%s'", t->name,
                  !seen_dtype ? "dtype" : !seen_shape ? "shape" : "data_offsets");
  return 0;
}

/* "__metadata__": an object of string values (checked; "format" and "step" kept). */
static int parse_metadata(st_file *f) {
  int r;
  for (r = list_open(f, '{', '}', "'{' (__metadata__)"); r > 0; r = list_next(f, '}', "',' or '}' (__metadata__)")) {
    char *k, *v;
    if (parse_string(f, &k) < 0 || expect(f, ':', "':'") < 0) return -1;
    skip_ws(f);
    if (f->pos >= f->len || f->hdr[f->pos] != '"')
      return st_err(f, "__metadata__: value of '%s' must be a string", k);
    if (parse_string(f, &v) < 0) return -1;
    if (!strcmp(k, "format")) f->ckpt = !strcmp(v, "cnnc-checkpoint");
    if (!strcmp(k, "step")) snprintf(f->step, sizeof f->step, "%s", v);
  }
  return r;
}

static int parse_header(st_file *f) {
  int seen_meta = 0, r;
  for (r = list_open(f, '{', '}', "'{' at the start of the header"); r > 0; r = list_next(f, '}', "',' or '}'")) {
    char *key;
    if (parse_string(f, &key) < 0 || expect(f, ':', "':'") < 0) return -1;
    if (!strcmp(key, "__metadata__")) {
      if (seen_meta++) return st_err(f, "'__metadata__' given twice");
      if (parse_metadata(f) < 0) return -1;
    } else {
      if (!key[0]) return st_err(f, "bad JSON header: empty tensor name");
      if (f->n == f->cap) {
        int cap = f->cap ? 2 * f->cap : 64;
        st_tensor *nt = realloc(f->t, (size_t)cap * sizeof *nt);
        if (!nt) return st_err(f, "out of memory reading the header");
        f->t = nt;
        f->cap = cap;
      }
      st_tensor *t = &f->t[f->n++];
      memset(t, 0, sizeof *t);
      t->name = key;
      if (parse_tensor_info(f, t) < 0) return -1;
    }
  }
  if (r < 0) return -1;
  skip_ws(f);
  if (f->pos != f->len)
    return st_err(f, "bad JSON header: unexpected data after the header object at byte %zu", f->pos);
  return 0;
}

/* ---- validation ---------------------------------------------------------------------------- */

static char *fmt_dims(const uint64_t *dim, int rank, char *buf, size_t n) {
  size_t k = 0;
  k += (size_t)snprintf(buf + k, n - k, "[");
  for (int i = 0; i < rank && k < n; i++)
    k += (size_t)snprintf(buf + k, n - k, "%s%llu", i ? "," : "", (unsigned long long)dim[i]);
  if (k < n) snprintf(buf + k, n - k, "]");
  return buf;
}

static int cmp_name(const void *a, const void *b) {
  return strcmp(((const st_tensor *)a)->name, ((const st_tensor *)b)->name);
}

/* Bytes of a dtype/shape, or UINT64_MAX when that does not fit 64 bits. */
static uint64_t tensor_bytes(const st_tensor *t) {
  uint64_t bytes = dtype_size(t->dtype);
  for (int k = 0; k < t->rank; k++)
    if (t->dim[k] == 0) return 0;
  for (int k = 0; k < t->rank; k++) {
    if (bytes > UINT64_MAX / t->dim[k]) return UINT64_MAX;
    bytes *= t->dim[k];
  }
  return bytes;
}

/* Per-tensor checks (dtype, offsets, size) and file-wide ones (duplicates, overlaps). */
static int check_tensors(st_file *f) {
  char sb[160];
  for (int i = 0; i < f->n; i++) {
    st_tensor *t = &f->t[i];
    if (t->dtype == ST_UNSUPPORTED || ((t->dtype == ST_I32 || t->dtype == ST_I64) && !f->ckpt))
      return st_err(f, "tensor '%s': dtype '%s' is not supported (F32, F16 or BF16)", t->name, t->dtype_name);
    if (t->begin > t->end)
      return st_err(f, "tensor '%s': data_offsets [%llu, %llu] end before they begin", t->name,
                    (unsigned long long)t->begin, (unsigned long long)t->end);
    if (t->end > f->data_len)
      return st_err(f, "tensor '%s': data_offsets [%llu, %llu] out of range: the data section has "
                    "%llu bytes (truncated file?)", t->name, (unsigned long long)t->begin,
                    (unsigned long long)t->end, (unsigned long long)f->data_len);
    uint64_t bytes = tensor_bytes(t);
    if (bytes != t->end - t->begin)
      return st_err(f, "tensor '%s': data_offsets [%llu, %llu] hold %llu bytes but %s %s needs %llu%s",
                    t->name, (unsigned long long)t->begin, (unsigned long long)t->end,
                    (unsigned long long)(t->end - t->begin), t->dtype_name,
                    fmt_dims(t->dim, t->rank, sb, sizeof sb), (unsigned long long)bytes,
                    bytes == UINT64_MAX ? " or more" : "");
  }
  if (f->n > 1) qsort(f->t, (size_t)f->n, sizeof *f->t, cmp_name); /* f->t is NULL for "{}" */
  for (int i = 1; i < f->n; i++)
    if (!strcmp(f->t[i - 1].name, f->t[i].name))
      return st_err(f, "tensor '%s' appears twice in the header", f->t[i].name);
  cm_span *sp = malloc(((size_t)(unsigned)f->n + 1) * sizeof *sp);
  if (!sp) return st_err(f, "out of memory");
  for (int i = 0; i < f->n; i++) sp[i] = (cm_span){f->t[i].begin, f->t[i].end, i};
  /* the tensors' bytes back to back, as the reference implementation requires (cm_span.c) */
  int at, rc = 0;
  uint64_t end;
  cm_tile_fault fault = cm_spans_tile(sp, f->n, f->data_len, &at, &end);
  const st_tensor *b = fault == CM_TILE_OVERLAP || fault == CM_TILE_GAP ? &f->t[sp[at].id] : NULL;
  const st_tensor *a = fault == CM_TILE_OVERLAP ? &f->t[sp[at - 1].id] : NULL;
  if (fault == CM_TILE_OVERLAP)
    rc = st_err(f, "tensor '%s': data_offsets [%llu, %llu] overlap those of tensor '%s' [%llu, %llu]", b->name,
                (unsigned long long)b->begin, (unsigned long long)b->end, a->name, (unsigned long long)a->begin,
                (unsigned long long)a->end);
  else if (fault == CM_TILE_GAP)
    rc = st_err(f, "tensor '%s': data_offsets [%llu, %llu] leave bytes %llu..%llu of the data section unused", b->name,
                (unsigned long long)b->begin, (unsigned long long)b->end, (unsigned long long)end,
                (unsigned long long)b->begin);
  else if (fault == CM_TILE_TRAILING)
    rc = st_err(f, "%llu bytes after the last tensor's data (the data section has %llu bytes)",
                (unsigned long long)(f->data_len - end), (unsigned long long)f->data_len);
  free(sp);
  return rc;
}

static const st_tensor *find_tensor(const st_file *f, const char *name) {
  st_tensor key;
  key.name = name;
  return f->n > 0 ? bsearch(&key, f->t, (size_t)f->n, sizeof *f->t, cmp_name) : NULL;
}

/* Appends "'name'" to a comma-separated list in buf, eliding after the buffer fills. */
static void list_add(char *buf, size_t n, int *count, const char *name) {
  size_t k = strlen(buf);
  if (*count < 8 && k + strlen(name) + 8 < n)
    snprintf(buf + k, n - k, "%s'%s'", *count ? ", " : "", name);
  (*count)++;
}

static void list_finish(char *buf, size_t n, int count) {
  size_t k = strlen(buf);
  if (count > 8) snprintf(buf + k, n - k, " and %d more", count - 8);
}

/* In a cnnc training checkpoint, tensor name that is not a model parameter but optimizer
 * state or a counter: "step", "optimizer/..." (Adam's step, the loss scale), and P/momentum,
 * P/rms, P/m, P/v of a parameter P of g (passes/optimizer.c). */
static int ckpt_ignored(const st_file *f, const ir_graph *g, const char *name) {
  static const char *const suffix[] = {"/momentum", "/rms", "/m", "/v"};
  if (!f->ckpt) return 0;
  if (!strcmp(name, "step") || !strncmp(name, "optimizer/", 10)) return 1;
  size_t n = strlen(name);
  for (int k = 0; k < 4; k++) {
    size_t sl = strlen(suffix[k]);
    if (n <= sl || strcmp(name + n - sl, suffix[k])) continue;
    char base[512];
    if (n - sl >= sizeof base) continue;
    memcpy(base, name, n - sl), base[n - sl] = 0;
    int v = ir_find_value(g, base);
    if (v >= 0 && g->values[v].kind == IR_VAL_PARAM) return 1;
  }
  return 0;
}

/* The note of a checkpoint load: what was taken and what ignored. */
static void ckpt_note(st_file *f, const ir_graph *g) {
  if (!f->ckpt || !f->note || !f->note_n) return;
  int params = 0, stats = 0, ignored = 0, counter = 0;
  char list[300] = "";
  for (int v = 0; v < g->n_values; v++) {
    const ir_value *p = &g->values[v];
    if (p->kind != IR_VAL_PARAM) continue;
    size_t n = strlen(p->name);
    int st = (n >= 13 && !strcmp(p->name + n - 13, "/running_mean")) || (n >= 12 && !strcmp(p->name + n - 12, "/running_var"));
    st ? stats++ : params++;
  }
  for (int i = 0; i < f->n; i++) {
    if (ir_find_value(g, f->t[i].name) >= 0) continue;
    if (!strcmp(f->t[i].name, "step")) counter = 1;
    else list_add(list, sizeof list, &ignored, f->t[i].name);
  }
  list_finish(list, sizeof list, ignored);
  snprintf(f->note, f->note_n, "%s: a cnnc training checkpoint%s%s%s: took %d parameter%s and %d batch-norm statistic%s; ignored "
           "%d optimizer-state tensor%s%s%s%s%s", f->path, f->step[0] ? " (step " : "", f->step, f->step[0] ? ")" : "",
           params, params == 1 ? "" : "s", stats, stats == 1 ? "" : "s", ignored, ignored == 1 ? "" : "s",
           ignored ? " (" : "", list, ignored ? ")" : "", counter ? " and the step counter" : "");
}

/* Every graph param present with its exact shape; no tensor without a param (but the optimizer
 * state and counters of a checkpoint, ckpt_ignored). */
static int match_params(st_file *f, const ir_graph *g) {
  char list[400] = "", sa[160], sb[160];
  int missing = 0;
  for (int v = 0; v < g->n_values; v++) {
    const ir_value *p = &g->values[v];
    if (p->kind != IR_VAL_PARAM) continue;
    if (!find_tensor(f, p->name)) list_add(list, sizeof list, &missing, p->name);
  }
  if (missing) {
    list_finish(list, sizeof list, missing);
    return st_err(f, "%d parameter%s of model '%s' missing: %s", missing, missing > 1 ? "s" : "",
                  g->name ? g->name : "?", list);
  }
  for (int v = 0; v < g->n_values; v++) {
    const ir_value *p = &g->values[v];
    if (p->kind != IR_VAL_PARAM) continue;
    const st_tensor *t = find_tensor(f, p->name);
    int same = t->rank == p->shape.rank;
    for (int k = 0; same && k < t->rank; k++) same = (int64_t)t->dim[k] == p->shape.dim[k];
    if (!same)
      return st_err(f, "tensor '%s': shape %s does not match the model's %s", t->name,
                    fmt_dims(t->dim, t->rank, sa, sizeof sa), ir_shape_str(&p->shape, sb, sizeof sb));
    if (t->dtype == ST_I32 || t->dtype == ST_I64)
      return st_err(f, "tensor '%s': dtype '%s' is not supported for a parameter (F32, F16 or BF16)", t->name, t->dtype_name);
  }
  int extra = 0;
  for (int i = 0; i < f->n; i++) {
    int v = ir_find_value(g, f->t[i].name);
    if ((v < 0 || g->values[v].kind != IR_VAL_PARAM) && !ckpt_ignored(f, g, f->t[i].name))
      list_add(list, sizeof list, &extra, f->t[i].name);
  }
  if (extra) {
    list_finish(list, sizeof list, extra);
    return st_err(f, "%d tensor%s not parameters of model '%s': %s", extra,
                  extra > 1 ? "s are" : " is", g->name ? g->name : "?", list);
  }
  return 0;
}

/* ---- data ----------------------------------------------------------------------------------- */

static int host_is_le(void) {
  uint16_t x = 1;
  unsigned char c;
  memcpy(&c, &x, 1);
  return c == 1;
}

static float f16_to_f32(uint16_t h) {
  uint32_t s = (uint32_t)(h >> 15) << 31, e = (h >> 10) & 0x1f, m = h & 0x3ff, bits;
  if (e == 0 && m == 0) {
    bits = s;
  } else if (e == 0) { /* subnormal: value m * 2^-24; normalise the mantissa */
    e = 127 - 15 + 1;
    while (!(m & 0x400)) { m <<= 1; e--; }
    bits = s | (e << 23) | ((m & 0x3ff) << 13);
  } else if (e == 31) {
    bits = s | 0x7f800000u | (m << 13);
  } else {
    bits = s | ((e + 127 - 15) << 23) | (m << 13);
  }
  float out;
  memcpy(&out, &bits, 4);
  return out;
}

static float bf16_to_f32(uint16_t h) {
  uint32_t bits = (uint32_t)h << 16;
  float out;
  memcpy(&out, &bits, 4);
  return out;
}

/* Reads tensor t (already validated) into dst as f32.  fp is positioned anywhere. */
static int read_tensor(st_file *f, FILE *fp, uint64_t data_start, const st_tensor *t, float *dst) {
  uint64_t numel = (t->end - t->begin) / dtype_size(t->dtype);
  if (fseeko(fp, (off_t)(data_start + t->begin), SEEK_SET) != 0)
    return st_err(f, "tensor '%s': seek failed: %s", t->name, strerror(errno));
  if (t->dtype == ST_F32) {
    if (numel && fread(dst, 4, (size_t)numel, fp) != numel)
      return st_err(f, "tensor '%s': read failed (file changed or truncated?)", t->name);
    if (!host_is_le())
      for (uint64_t i = 0; i < numel; i++) {
        unsigned char *b = (unsigned char *)&dst[i], c0 = b[0], c1 = b[1];
        b[0] = b[3]; b[1] = b[2]; b[2] = c1; b[3] = c0;
      }
    return 0;
  }
  enum { CHUNK = 1 << 14 };
  unsigned char buf[2 * CHUNK];
  for (uint64_t done = 0; done < numel;) {
    size_t k = numel - done < CHUNK ? (size_t)(numel - done) : CHUNK;
    if (fread(buf, 2, k, fp) != k)
      return st_err(f, "tensor '%s': read failed (file changed or truncated?)", t->name);
    for (size_t i = 0; i < k; i++) {
      uint16_t h = (uint16_t)(buf[2 * i] | (buf[2 * i + 1] << 8));
      dst[done + i] = t->dtype == ST_F16 ? f16_to_f32(h) : bf16_to_f32(h);
    }
    done += k;
  }
  return 0;
}

/* Every value finite and a batch-norm running variance >= 0 (a NaN weight gives NaN logits). */
static int check_values(st_file *f, const ir_value *p) {
  int64_t n = ir_shape_numel(&p->shape);
  size_t len = strlen(p->name);
  int var = len >= 12 && !strcmp(p->name + len - 12, "/running_var");
  for (int64_t i = 0; i < n; i++)
    if (!isfinite(p->data[i]) || (var && p->data[i] < 0))
      return st_err(f, "tensor '%s': element %lld is %g%s (--allow-nonfinite loads it anyway)", p->name, (long long)i,
                    (double)p->data[i], isfinite(p->data[i]) ? ", a negative variance" : "");
  return 0;
}

int fe_load_safetensors(ir_graph *g, const char *path, int allow_nonfinite, ir_diag *d) {
  return fe_load_safetensors_note(g, path, allow_nonfinite, NULL, 0, d);
}

int fe_load_safetensors_note(ir_graph *g, const char *path, int allow_nonfinite, char *note, size_t note_n, ir_diag *d) {
  st_file f = {.path = path, .d = d, .note = note, .note_n = note_n};
  if (note && note_n) note[0] = 0;
  unsigned char lenb[8];
  int rc = -1;
  char why[256];
  uint64_t size;
  int fd = cm_open_regular(path, &size, why, sizeof why); /* never blocks on a FIFO */
  FILE *fp = fd >= 0 ? fdopen(fd, "rb") : NULL;
  if (!fp) {
    if (fd >= 0) close(fd);
    return st_err(&f, "cannot open weights file: %s", fd >= 0 ? strerror(errno) : why);
  }
  if (size < 8) {
    st_err(&f, "file has %llu bytes, too few for a safetensors header (truncated file?)",
           (unsigned long long)size);
    goto done;
  }
  if (fread(lenb, 1, 8, fp) != 8) { st_err(&f, "read failed: %s", strerror(errno)); goto done; }
  uint64_t n = 0;
  for (int i = 7; i >= 0; i--) n = n << 8 | lenb[i];
  if (n == 0) { st_err(&f, "bad JSON header: header length is 0"); goto done; }
  if (n > ST_MAX_HEADER) {
    st_err(&f, "header length %llu is above the %llu-byte limit (not a safetensors file?)",
           (unsigned long long)n, ST_MAX_HEADER);
    goto done;
  }
  if (n > size - 8) {
    st_err(&f, "header length %llu exceeds the %llu bytes after the length field (truncated file?)",
           (unsigned long long)n, (unsigned long long)(size - 8));
    goto done;
  }
  f.len = (size_t)n;
  f.data_len = size - 8 - n;
  f.hdr = malloc(f.len + 1);
  if (!f.hdr) { st_err(&f, "out of memory for a %zu-byte header", f.len); goto done; }
  if (fread(f.hdr, 1, f.len, fp) != f.len) { st_err(&f, "read failed (truncated file?)"); goto done; }
  f.hdr[f.len] = '\0';
  if (parse_header(&f) < 0 || check_tensors(&f) < 0 || match_params(&f, g) < 0) goto done;
  for (int v = 0; v < g->n_values; v++) {
    ir_value *p = &g->values[v];
    if (p->kind != IR_VAL_PARAM) continue;
    if (!p->data) { st_err(&f, "parameter '%s' has no storage in the graph", p->name); goto done; }
    if (read_tensor(&f, fp, 8 + n, find_tensor(&f, p->name), p->data) < 0) goto done;
    if (!allow_nonfinite && check_values(&f, p) < 0) goto done;
  }
  ckpt_note(&f, g);
  rc = 0;
done:
  fclose(fp);
  free(f.hdr);
  free(f.t);
  return rc;
}

/* ---- writer ----------------------------------------------------------------------------------- */

typedef struct st_buf { char *p; size_t n, cap; int oom; } st_buf;

static void buf_put(st_buf *b, const char *s, size_t k) {
  if (b->oom) return;
  if (b->n + k + 1 > b->cap) {
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->n + k + 1) cap *= 2;
    char *np = realloc(b->p, cap);
    if (!np) { b->oom = 1; return; }
    b->p = np;
    b->cap = cap;
  }
  memcpy(b->p + b->n, s, k);
  b->n += k;
  b->p[b->n] = '\0';
}

#define BUF_LIT(b, lit) buf_put(b, lit, sizeof lit - 1)

static void buf_printf(st_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void buf_printf(st_buf *b, const char *fmt, ...) {
  char tmp[256];
  va_list ap;
  va_start(ap, fmt);
  int k = vsnprintf(tmp, sizeof tmp, fmt, ap);
  va_end(ap);
  if (k > 0) buf_put(b, tmp, (size_t)k < sizeof tmp ? (size_t)k : sizeof tmp - 1);
}

static void buf_json_string(st_buf *b, const char *s) {
  BUF_LIT(b, "\"");
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\') {
      char e[2] = {'\\', (char)c};
      buf_put(b, e, 2);
    } else if (c < 0x20) {
      buf_printf(b, "\\u%04x", c);
    } else {
      buf_put(b, (const char *)&c, 1);
    }
  }
  BUF_LIT(b, "\"");
}

/* Header for every param of g in value order, padded with spaces to a multiple of 8. */
static int build_header(const ir_graph *g, st_buf *b, uint64_t *data_bytes) {
  uint64_t off = 0;
  BUF_LIT(b, "{\"__metadata__\":{\"format\":\"cnnc\"");
  if (g->name) {
    BUF_LIT(b, ",\"model\":");
    buf_json_string(b, g->name);
  }
  BUF_LIT(b, "}");
  for (int v = 0; v < g->n_values; v++) {
    const ir_value *p = &g->values[v];
    if (p->kind != IR_VAL_PARAM) continue;
    uint64_t bytes = 4 * (uint64_t)ir_shape_numel(&p->shape);
    BUF_LIT(b, ",");
    buf_json_string(b, p->name);
    BUF_LIT(b, ":{\"dtype\":\"F32\",\"shape\":[");
    for (int k = 0; k < p->shape.rank; k++) buf_printf(b, "%s%lld", k ? "," : "", (long long)p->shape.dim[k]);
    buf_printf(b, "],\"data_offsets\":[%llu,%llu]}", (unsigned long long)off,
               (unsigned long long)(off + bytes));
    off += bytes;
  }
  BUF_LIT(b, "}");
  while (b->n % 8) BUF_LIT(b, " ");
  *data_bytes = off;
  return b->oom ? -1 : 0;
}

static int write_all(FILE *fp, const void *p, size_t n) { return n == 0 || fwrite(p, 1, n, fp) == n ? 0 : -1; }

int fe_save_safetensors(const ir_graph *g, const char *path, ir_diag *d) {
  st_file f = {.path = path, .d = d};
  st_buf hdr = {0};
  uint64_t data_bytes;
  char tmp[4096];
  FILE *fp = NULL;
  int fd = -1, rc = -1;
  for (int v = 0; v < g->n_values; v++)
    if (g->values[v].kind == IR_VAL_PARAM && !g->values[v].data && ir_shape_numel(&g->values[v].shape))
      return st_err(&f, "parameter '%s' has no data", g->values[v].name);
  if (build_header(g, &hdr, &data_bytes) < 0) { st_err(&f, "out of memory"); goto fail; }
  for (int attempt = 0; fd < 0 && attempt < 100; attempt++) {
    if ((size_t)snprintf(tmp, sizeof tmp, "%s.tmp%ld.%d", path, (long)getpid(), attempt) >= sizeof tmp) {
      st_err(&f, "path too long");
      goto fail;
    }
    fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL, 0666);
    if (fd < 0 && errno != EEXIST) { st_err(&f, "cannot create '%s': %s", tmp, strerror(errno)); goto fail; }
  }
  if (fd < 0) { st_err(&f, "cannot create a temporary file next to it"); goto fail; }
  fp = fdopen(fd, "wb");
  if (!fp) { st_err(&f, "fdopen failed: %s", strerror(errno)); close(fd); goto fail_unlink; }
  unsigned char lenb[8];
  for (int i = 0; i < 8; i++) lenb[i] = (unsigned char)((uint64_t)hdr.n >> (8 * i));
  if (write_all(fp, lenb, 8) < 0 || write_all(fp, hdr.p, hdr.n) < 0) goto write_err;
  int le = host_is_le();
  for (int v = 0; v < g->n_values; v++) {
    const ir_value *p = &g->values[v];
    if (p->kind != IR_VAL_PARAM) continue;
    size_t numel = (size_t)ir_shape_numel(&p->shape);
    if (le) {
      if (write_all(fp, p->data, numel * 4) < 0) goto write_err;
      continue;
    }
    for (size_t i = 0; i < numel; i++) {
      unsigned char b[4], s[4];
      memcpy(s, &p->data[i], 4);
      b[0] = s[3]; b[1] = s[2]; b[2] = s[1]; b[3] = s[0];
      if (write_all(fp, b, 4) < 0) goto write_err;
    }
  }
  if (fflush(fp) != 0 || fsync(fileno(fp)) != 0) goto write_err;
  if (fclose(fp) != 0) { fp = NULL; goto write_err; }
  fp = NULL;
  if (rename(tmp, path) != 0) { st_err(&f, "cannot rename '%s' to it: %s", tmp, strerror(errno)); goto fail_unlink; }
  rc = 0;
  goto fail;
write_err:
  st_err(&f, "write failed: %s", strerror(errno));
  if (fp) fclose(fp);
fail_unlink:
  unlink(tmp);
fail:
  free(hdr.p);
  (void)data_bytes;
  return rc;
}
