/* arena.c — bump allocator for compile-time objects (IR nodes, names, diagnostics),
 * plus the small diagnostic and type helpers every module shares. */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "ir.h"

typedef struct ir_chunk {
  struct ir_chunk *next;
  size_t used, cap;
  _Alignas(16) unsigned char data[];
} ir_chunk;

struct ir_arena {
  ir_chunk *head;
};

ir_arena *ir_arena_new(void) { return calloc(1, sizeof(ir_arena)); }

void ir_arena_free(ir_arena *a) {
  if (!a) return;
  for (ir_chunk *c = a->head, *n; c; c = n) {
    n = c->next;
    free(c);
  }
  free(a);
}

void *ir_alloc(ir_arena *a, size_t n) {
  n = (n + 15) & ~(size_t)15;
  ir_chunk *c = a->head;
  if (!c || c->cap - c->used < n) {
    size_t cap = n > (1u << 20) ? n : (1u << 20);
    c = malloc(sizeof(ir_chunk) + cap);
    if (!c) {
      fprintf(stderr, "cnnc: out of memory allocating %zu bytes\n", n);
      abort();
    }
    c->used = 0;
    c->cap = cap;
    c->next = a->head;
    a->head = c;
  }
  void *p = c->data + c->used;
  c->used += n;
  memset(p, 0, n);
  return p;
}

void *ir_calloc(size_t n, size_t size) {
  void *p = calloc(n ? n : 1, size);
  if (!p) abort();
  return p;
}

char *ir_strdup(ir_arena *a, const char *s) {
  size_t n = strlen(s) + 1;
  char *p = ir_alloc(a, n);
  memcpy(p, s, n);
  return p;
}

char *ir_fmt(ir_arena *a, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  char *p = ir_alloc(a, (size_t)n + 1);
  va_start(ap, fmt);
  vsnprintf(p, (size_t)n + 1, fmt, ap);
  va_end(ap);
  return p;
}

int ir_diag_set(ir_diag *d, ir_loc loc, const char *layer, const char *fmt, ...) {
  if (!d || d->failed) return -1;
  d->failed = 1;
  d->loc = loc;
  snprintf(d->layer, sizeof d->layer, "%s", layer ? layer : "");
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(d->msg, sizeof d->msg, fmt, ap);
  va_end(ap);
  return -1;
}

void ir_diag_print(const ir_diag *d, FILE *f) {
  if (d->loc.file) {
    fprintf(f, "%s:", d->loc.file);
    if (d->loc.line > 0) fprintf(f, "%d:%d:", d->loc.line, d->loc.col);
    fputc(' ', f);
  }
  fprintf(f, "error: ");
  if (d->layer[0]) fprintf(f, "layer '%s': ", d->layer);
  fprintf(f, "%s\n", d->msg);
}

const char *ir_dtype_name(ir_dtype t) {
  static const char *const names[] = {"f32", "bf16", "f16", "u8", "i32", "i8", "i64"};
  return (unsigned)t < sizeof names / sizeof names[0] ? names[t] : "?";
}

size_t ir_dtype_size(ir_dtype t) {
  static const size_t sizes[] = {4, 2, 2, 1, 4, 1, 8};
  return (unsigned)t < sizeof sizes / sizeof sizes[0] ? sizes[t] : 0;
}

int64_t ir_shape_numel(const ir_shape *s) {
  int64_t n = 1;
  for (int i = 0; i < s->rank; i++) n *= s->dim[i];
  return n;
}

int64_t ir_shape_bytes_bounded(const ir_shape *s, size_t elem) {
  int64_t n = (int64_t)elem;
  for (int i = 0; i < s->rank; i++) {
    if (s->dim[i] < 0 || (s->dim[i] > 0 && n > IR_MAX_TENSOR_BYTES / s->dim[i])) return -1;
    n *= s->dim[i];
  }
  return n;
}

int ir_shape_eq(const ir_shape *a, const ir_shape *b) {
  if (a->rank != b->rank) return 0;
  for (int i = 0; i < a->rank; i++)
    if (a->dim[i] != b->dim[i]) return 0;
  return 1;
}

char *ir_shape_str(const ir_shape *s, char *buf, size_t n) {
  size_t k = 0;
  k += (size_t)snprintf(buf + k, n - k, "[");
  for (int i = 0; i < s->rank && k < n; i++)
    k += (size_t)snprintf(buf + k, n - k, "%s%lld", i ? "," : "", (long long)s->dim[i]);
  if (k < n) snprintf(buf + k, n - k, "]");
  return buf;
}
