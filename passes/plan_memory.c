/* plan_memory.c — scratch arena planner: plain usage records {first_step, last_step, bytes,
 * align} in, offsets out.  Largest buffers first, each at the lowest offset that does not
 * collide with an already placed buffer alive at an overlapping step (as XNNPACK/TFLite).
 * Also the element size of the gradient accumulators (16-bit with half partials). */
#include <stdlib.h>
#include <string.h>

#include "passes/passes.h"

static int overlaps_in_time(const pass_usage *a, const pass_usage *b) {
  return a->first_step <= b->last_step && b->first_step <= a->last_step;
}

static int64_t align_up(int64_t x, int64_t a) { return (x + a - 1) / a * a; }

/* Lowest aligned offset for u that collides with none of the placed records. */
static int64_t first_fit(const pass_usage *u, const pass_usage *all, const int *placed, int n_placed) {
  int64_t off = 0;
  for (int changed = 1; changed;) {
    changed = 0;
    for (int i = 0; i < n_placed; i++) {
      const pass_usage *p = &all[placed[i]];
      if (!overlaps_in_time(u, p)) continue;
      if (off < p->offset + p->bytes && p->offset < off + u->bytes) {
        off = align_up(p->offset + p->bytes, u->align);
        changed = 1;
      }
    }
  }
  return off;
}

typedef struct by_size { int64_t bytes; int idx; } by_size;
static int by_size_desc(const void *a, const void *b) {
  const by_size *x = a, *y = b;
  if (x->bytes != y->bytes) return x->bytes > y->bytes ? -1 : 1;
  return x->idx - y->idx;
}

int64_t pass_plan_memory(pass_usage *u, int n) {
  int m = n > 0 ? n : 1;
  int *order = malloc((size_t)m * sizeof *order);
  by_size *keys = malloc((size_t)m * sizeof *keys);
  if (!order || !keys) abort();
  for (int i = 0; i < n; i++) {
    if (u[i].align < 1) u[i].align = 1;
    keys[i] = (by_size){u[i].bytes, i};
  }
  qsort(keys, (size_t)n, sizeof *keys, by_size_desc);
  for (int i = 0; i < n; i++) order[i] = keys[i].idx;
  free(keys);
  int64_t total = 0;
  for (int k = 0; k < n; k++) {
    pass_usage *r = &u[order[k]];
    r->offset = first_fit(r, u, order, k);
    if (r->offset + r->bytes > total) total = r->offset + r->bytes;
  }
  free(order);
  return align_up(total, 64);
}

int pass_acc_elem_bytes(const ir_graph *g, int half_partials) {
  return half_partials > 0 && !ir_tune(g)->half_partials_f32 ? 2 : 4;
}
