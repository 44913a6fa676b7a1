/* ref_reduce.c — reference reductions over any dims (reduce: sum, mean, max; reduce_max_grad),
 * max_unpool (a scatter by flat indices) and cast (integer tensors as exact f32 values,
 * docs/onnx.md "Integer tensors"). */
#include <math.h>
#include <stdlib.h>

#include "ref_util.h"

/* Row-major walk of x's elements with the flat index of each one's group in the reduced
 * shape s (same rank, dims x's or 1): calls visit(i, o) in increasing i. */
typedef struct red_walk { const ir_shape *x, *s; int64_t st[IR_MAX_RANK], idx[IR_MAX_RANK], o; } red_walk;

static void walk_init(red_walk *w, const ir_shape *x, const ir_shape *s) {
  w->x = x, w->s = s, w->o = 0;
  int64_t k = 1;
  for (int d = x->rank - 1; d >= 0; d--) {
    w->st[d] = s->dim[d] == 1 ? 0 : k; /* stride of dim d in the result (0: reduced) */
    k *= s->dim[d];
    w->idx[d] = 0;
  }
}

static void walk_next(red_walk *w) {
  for (int d = w->x->rank - 1; d >= 0; d--) {
    w->o += w->st[d];
    if (++w->idx[d] < w->x->dim[d]) return;
    w->o -= w->st[d] * w->idx[d];
    w->idx[d] = 0;
  }
}

/* in: x; out [attr shape]: the sum (in double), the mean (that sum / the group's size) or the
 * max (a NaN wins) of each group. */
void ir_ref_reduce(const ir_graph *g, const ir_node *n, const float *const *in, float *out) {
  const ir_reduce_attr *a = &n->attr.reduce;
  const ir_shape *xs = ref_in_shape(g, n, 0);
  int64_t nx = ir_shape_numel(xs), ny = ir_shape_numel(&a->shape);
  double *acc = calloc((size_t)ny, sizeof *acc);
  if (!acc) abort();
  if (a->mode == IR_REDUCE_MAX)
    for (int64_t o = 0; o < ny; o++) acc[o] = -INFINITY;
  red_walk w;
  walk_init(&w, xs, &a->shape);
  for (int64_t i = 0; i < nx; i++, walk_next(&w)) {
    double v = in[0][i];
    if (a->mode != IR_REDUCE_MAX) acc[w.o] += v;
    else if (v > acc[w.o] || isnan(v)) acc[w.o] = v;
  }
  double count = (double)(nx / ny);
  for (int64_t o = 0; o < ny; o++) out[o] = (float)(a->mode == IR_REDUCE_MEAN ? acc[o] / count : acc[o]);
  free(acc);
}

/* in: dy [attr shape], x, y = the reduce max of x; out dx (x's shape): dy of each group at its
 * first element (row-major) equal to y (a NaN y: its first NaN), 0 elsewhere. */
void ir_ref_reduce_max_grad(const ir_graph *g, const ir_node *n, const float *const *in, float *out) {
  const ir_reduce_attr *a = &n->attr.reduce_max_grad;
  const ir_shape *xs = ref_in_shape(g, n, 1);
  int64_t nx = ir_shape_numel(xs), ny = ir_shape_numel(&a->shape);
  unsigned char *done = calloc((size_t)ny, 1);
  if (!done) abort();
  red_walk w;
  walk_init(&w, xs, &a->shape);
  for (int64_t i = 0; i < nx; i++, walk_next(&w)) {
    float x = in[1][i], y = in[2][w.o];
    int hit = !done[w.o] && (x == y || (isnan(x) && isnan(y)));
    out[i] = hit ? in[0][w.o] : 0.0f;
    done[w.o] |= (unsigned char)hit;
  }
  free(done);
}

/* in: x, idx (x's shape); out [attr shape]: zeros, then x[k] at flat index idx[k] for k in
 * order (a later k overwrites an earlier); an index that is not an integer in [0, numel)
 * (NaN too) places nothing. */
void ir_ref_max_unpool(const ir_graph *g, const ir_node *n, const float *const *in, float *out) {
  int64_t nx = ir_shape_numel(ref_in_shape(g, n, 0)), ny = ir_shape_numel(ref_out_shape(g, n));
  for (int64_t j = 0; j < ny; j++) out[j] = 0.0f;
  for (int64_t k = 0; k < nx; k++) {
    float t = in[1][k];
    if (t >= 0.0f && t < (float)ny && t == floorf(t)) out[(int64_t)t] = in[0][k];
  }
}

/* The value of f32 x as the integer type: truncated toward 0; u8 and i8 wrap modulo 256
 * (t - floor(t/256)*256 is exact for every finite t: a power-of-two scaling, and a difference
 * of two floats within a factor of two); i32 and i64 saturate; NaN and infinities give 0. */
float ir_cast_f32(float x, int type) {
  if (!isfinite(x)) return 0.0f;
  float t = truncf(x);
  switch (type) {
  case IR_U8: case IR_I8: {
    float r = t - floorf(t * (1.0f / 256.0f)) * 256.0f; /* in [0, 256) */
    return type == IR_I8 && r >= 128.0f ? r - 256.0f : r;
  }
  case IR_I32: return t < -0x1p31f ? -0x1p31f : t > 0x1p31f ? 0x1p31f : t;
  case IR_I64: return t < -0x1p63f ? -0x1p63f : t > 0x1p63f ? 0x1p63f : t;
  default: return x;
  }
}

/* in: x (an integer dtype: the interpreter holds its values as f32) or f32; out: the values
 * cast gives (an integer-dtype result holds them as f32 here too). */
void ir_ref_cast(const ir_graph *g, const ir_node *n, const float *const *in, float *out) {
  const ir_cast_attr *a = &n->attr.cast;
  int64_t k = ir_shape_numel(ref_out_shape(g, n));
  int type = a->to != IR_F32 ? a->to : a->wrap, from_int = g->values[n->in[0]].dtype != IR_F32;
  for (int64_t i = 0; i < k; i++) out[i] = from_int ? in[0][i] : ir_cast_f32(in[0][i], type);
}
