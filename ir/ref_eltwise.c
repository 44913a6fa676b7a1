/* ref_eltwise.c — reference elementwise ops: relu, sigmoid, swish, add/mul with numpy
 * broadcasting of in[1] to in[0]'s shape, dropout (deterministic hash mask), reshape (a
 * copy) and input normalisation (x*scale - mean[c]) / std[c] over channel dim 1. */
#include <math.h>
#include <string.h>

#include "ref_util.h"

static int64_t out_numel(const ir_graph *g, const ir_node *n) {
  return ir_shape_numel(ref_out_shape(g, n));
}

static double sigmoid(double x) {
  return 1.0 / (1.0 + exp(-x));
}

void ir_ref_relu(const ir_graph *g, const ir_node *n, const float *const *in, float *out) {
  int64_t k = out_numel(g, n);
  for (int64_t i = 0; i < k; i++) out[i] = in[0][i] > 0.0f || isnan(in[0][i]) ? in[0][i] : 0.0f; /* NaN stays */
}

void ir_ref_sigmoid(const ir_graph *g, const ir_node *n, const float *const *in, float *out) {
  int64_t k = out_numel(g, n);
  for (int64_t i = 0; i < k; i++) out[i] = (float)sigmoid(in[0][i]);
}

float ir_clip_f32(float x, float lo, float hi) { return x < lo ? lo : x > hi ? hi : x; }
float ir_hardsigmoid_f32(float x, float alpha, float beta) {
  float t = fmaf(alpha, x, beta);
  return t < 0.0f ? 0.0f : t > 1.0f ? 1.0f : t; /* NaN stays */
}

float ir_quantize8_f32(float x, float inv, int lo, int hi) {
  float t = rintf(x * inv); /* the default rounding mode: to nearest, ties to even */
  if (t != t) return 0.0f;
  return t < (float)lo ? (float)lo : t > (float)hi ? (float)hi : t;
}

void ir_ref_quantize8(const ir_graph *g, const ir_node *n, const float *const *in, float *out) {
  int64_t k = out_numel(g, n);
  const ir_quantize8_attr *a = &n->attr.quantize8;
  for (int64_t i = 0; i < k; i++) out[i] = ir_quantize8_f32(in[0][i], a->inv, a->lo, a->hi);
}

void ir_ref_clip(const ir_graph *g, const ir_node *n, const float *const *in, float *out) {
  int64_t k = out_numel(g, n);
  for (int64_t i = 0; i < k; i++) out[i] = ir_clip_f32(in[0][i], n->attr.clip.lo, n->attr.clip.hi);
}

void ir_ref_hardsigmoid(const ir_graph *g, const ir_node *n, const float *const *in, float *out) {
  int64_t k = out_numel(g, n);
  for (int64_t i = 0; i < k; i++) out[i] = ir_hardsigmoid_f32(in[0][i], n->attr.hardsigmoid.alpha, n->attr.hardsigmoid.beta);
}

void ir_ref_leaky_relu(const ir_graph *g, const ir_node *n, const float *const *in, float *out) {
  int64_t k = out_numel(g, n);
  float a = n->attr.leaky_relu.alpha;
  for (int64_t i = 0; i < k; i++) out[i] = in[0][i] > 0.0f || isnan(in[0][i]) ? in[0][i] : a * in[0][i];
}

void ir_ref_hardswish(const ir_graph *g, const ir_node *n, const float *const *in, float *out) {
  int64_t k = out_numel(g, n);
  for (int64_t i = 0; i < k; i++) out[i] = in[0][i] * ir_hardsigmoid_f32(in[0][i], IR_HARDSWISH_ALPHA, IR_HARDSWISH_BETA);
}

void ir_ref_swish(const ir_graph *g, const ir_node *n, const float *const *in, float *out) {
  int64_t k = out_numel(g, n);
  for (int64_t i = 0; i < k; i++) out[i] = (float)(in[0][i] * sigmoid(in[0][i]));
}

/* Strides of b's elements seen through a's shape (numpy broadcasting, right-aligned ranks):
 * 0 where b has size 1 or no dimension, the row-major stride otherwise. */
static void broadcast_strides(const ir_shape *a, const ir_shape *b, int64_t st[IR_MAX_RANK]) {
  int64_t s = 1;
  for (int d = a->rank - 1; d >= 0; d--) {
    int bd = d - (a->rank - b->rank); /* b's dimension aligned with a's d */
    if (bd < 0 || b->dim[bd] == 1) {
      st[d] = 0;
    } else {
      st[d] = s;
      s *= b->dim[bd];
    }
  }
}

/* Index into b of a's linear element i. */
static int64_t broadcast_index(const ir_shape *a, const int64_t st[IR_MAX_RANK], int64_t i) {
  int64_t j = 0;
  for (int d = a->rank - 1; d >= 0; d--) {
    j += (i % a->dim[d]) * st[d];
    i /= a->dim[d];
  }
  return j;
}

typedef enum { BIN_ADD, BIN_MUL, BIN_DIV } binop;

static void binary(const ir_graph *g, const ir_node *n, const float *const *in, float *out, binop op) {
  const ir_shape *as = ref_in_shape(g, n, 0), *bs = ref_in_shape(g, n, 1);
  int64_t st[IR_MAX_RANK], k = ir_shape_numel(as);
  broadcast_strides(as, bs, st);
  for (int64_t i = 0; i < k; i++) {
    float b = in[1][broadcast_index(as, st, i)];
    out[i] = op == BIN_ADD ? in[0][i] + b : op == BIN_MUL ? in[0][i] * b : in[0][i] / b;
  }
}

/* in: a [shape], b broadcastable to a; out [shape]. */
void ir_ref_add(const ir_graph *g, const ir_node *n, const float *const *in, float *out) {
  binary(g, n, in, out, BIN_ADD);
}

void ir_ref_mul(const ir_graph *g, const ir_node *n, const float *const *in, float *out) {
  binary(g, n, in, out, BIN_MUL);
}

/* in[0] / in[1] (IEEE f32 division: x/0 is +-inf, 0/0 NaN). */
void ir_ref_div(const ir_graph *g, const ir_node *n, const float *const *in, float *out) {
  binary(g, n, in, out, BIN_DIV);
}

/* Strides of x's elements seen through the larger shape s of the same rank (0 where x has
 * size 1): expand's reading of x. */
static void expand_strides(const ir_shape *s, const ir_shape *x, int64_t st[IR_MAX_RANK]) {
  int64_t k = 1;
  for (int d = s->rank - 1; d >= 0; d--) {
    st[d] = x->dim[d] == 1 ? 0 : k;
    k *= x->dim[d];
  }
}

/* in: x; out [attr shape] = scale * x broadcast. */
void ir_ref_expand(const ir_graph *g, const ir_node *n, const float *const *in, float *out) {
  const ir_shape *ys = ref_out_shape(g, n);
  int64_t st[IR_MAX_RANK], k = ir_shape_numel(ys);
  float scale = ir_expand_scale(&n->attr.expand);
  expand_strides(ys, ref_in_shape(g, n, 0), st);
  for (int64_t i = 0; i < k; i++) out[i] = in[0][broadcast_index(ys, st, i)] * scale;
}

REF_VECTORIZE void ir_ref_exp(const ir_graph *g, const ir_node *n, const float *const *in, float *out) {
  int64_t k = out_numel(g, n);
  for (int64_t i = 0; i < k; i++) out[i] = (float)exp((double)in[0][i]);
}

REF_VECTORIZE void ir_ref_sqrt(const ir_graph *g, const ir_node *n, const float *const *in, float *out) {
  int64_t k = out_numel(g, n);
  for (int64_t i = 0; i < k; i++) out[i] = sqrtf(in[0][i]); /* correctly rounded (IEEE), NaN below 0 */
}

REF_VECTORIZE void ir_ref_neg(const ir_graph *g, const ir_node *n, const float *const *in, float *out) {
  int64_t k = out_numel(g, n);
  for (int64_t i = 0; i < k; i++) out[i] = -in[0][i];
}

/* Dropout mask: element i (row-major index in the whole tensor) is kept iff
 *   u = (ref_mix64(key ^ ref_mix64(i)) >> 40) * 2^-24  >=  rate
 * (ref_mix64 = splitmix64 finaliser, see ref_util.h); kept elements are scaled by
 * 1/(1-rate).  key = seed without a step operand; with the optional in[1] = the step counter
 * "optimizer/step" t (a whole number in f32, read before this step's increment; wired by
 * passes/optimizer.c) key = ref_mix64(seed ^ ref_mix64(t)), so every step draws a new mask.
 * Compiled kernels (codegen/gen_train.c) must reproduce exactly this formula. */
static uint64_t dropout_key(uint64_t seed, const float *step) {
  return step ? ref_mix64(seed ^ ref_mix64((uint64_t)(int64_t)step[0])) : seed;
}

static int dropout_keep(uint64_t key, uint64_t i, float rate) {
  uint64_t h = ref_mix64(key ^ ref_mix64(i));
  float u = (float)(h >> 40) * (1.0f / 16777216.0f);
  return u >= rate;
}

void ir_ref_dropout(const ir_graph *g, const ir_node *n, const float *const *in, float *out) {
  const ir_dropout_attr *a = &n->attr.dropout;
  int64_t k = out_numel(g, n);
  if (!a->training || a->rate <= 0.0f) {
    memcpy(out, in[0], (size_t)k * sizeof *out);
    return;
  }
  uint64_t key = dropout_key(a->seed, n->n_in > 1 ? in[1] : NULL);
  float scale = a->rate < 1.0f ? 1.0f / (1.0f - a->rate) : 0.0f;
  for (int64_t i = 0; i < k; i++) out[i] = dropout_keep(key, (uint64_t)i, a->rate) ? in[0][i] * scale : 0.0f;
}

/* Same elements, new shape: a copy. */
/* concat and slice: outer = product of the dims before the axis, inner = after it. */
static void split_at(const ir_shape *s, int axis, int64_t *outer, int64_t *inner) {
  *outer = *inner = 1;
  for (int k = 0; k < axis; k++) *outer *= s->dim[k];
  for (int k = axis + 1; k < s->rank; k++) *inner *= s->dim[k];
}

void ir_ref_concat(const ir_graph *g, const ir_node *n, const float *const *in, float *out) {
  const ir_shape *os = ref_out_shape(g, n);
  int64_t outer, inner, off = 0;
  split_at(os, n->attr.concat.axis, &outer, &inner);
  int64_t row = os->dim[n->attr.concat.axis] * inner;
  for (int i = 0; i < n->n_in; i++) {
    int64_t len = g->values[n->in[i]].shape.dim[n->attr.concat.axis] * inner;
    for (int64_t o = 0; o < outer; o++) memcpy(out + o * row + off, in[i] + o * len, (size_t)len * sizeof *out);
    off += len;
  }
}

/* transpose: out[o] = in[sum o_i * stride_in(perm[i])]. */
void ir_ref_transpose(const ir_graph *g, const ir_node *n, const float *const *in, float *out) {
  const ir_shape *xs = &g->values[n->in[0]].shape;
  int r = xs->rank;
  int64_t st[IR_MAX_RANK], od[IR_MAX_RANK], idx[IR_MAX_RANK] = {0}, total = ir_shape_numel(xs);
  for (int k = r - 1, s = 1; k >= 0; s *= (int)xs->dim[k], k--) st[k] = s;
  for (int i = 0; i < r; i++) od[i] = xs->dim[n->attr.transpose.perm[i]];
  for (int64_t o = 0; o < total; o++) {
    int64_t src = 0;
    for (int i = 0; i < r; i++) src += idx[i] * st[n->attr.transpose.perm[i]];
    out[o] = in[0][src];
    for (int i = r - 1; i >= 0 && ++idx[i] == od[i]; i--) idx[i] = 0;
  }
}

void ir_ref_channel_shuffle(const ir_graph *g, const ir_node *n, const float *const *in, float *out) {
  const ir_shape *s = &g->values[n->in[0]].shape;
  int64_t outer, plane, C = s->dim[1], G = n->attr.channel_shuffle.groups;
  split_at(s, 1, &outer, &plane);
  for (int64_t o = 0; o < outer; o++)
    for (int64_t i = 0; i < C / G; i++)
      for (int64_t j = 0; j < G; j++)
        memcpy(out + (o * C + i * G + j) * plane, in[0] + (o * C + j * (C / G) + i) * plane, (size_t)plane * sizeof *out);
}

void ir_ref_slice(const ir_graph *g, const ir_node *n, const float *const *in, float *out) {
  const ir_slice_attr *s = &n->attr.slice;
  const ir_shape *xs = &g->values[n->in[0]].shape;
  int64_t outer, inner;
  split_at(xs, s->axis, &outer, &inner);
  int64_t row = xs->dim[s->axis] * inner, st = ir_slice_step(s);
  for (int64_t o = 0; o < outer; o++)
    for (int64_t i = 0; i < s->len; i++)
      memcpy(out + (o * s->len + i) * inner, in[0] + o * row + (s->start + i * st) * inner, (size_t)inner * sizeof *out);
}

void ir_ref_slice_grad(const ir_graph *g, const ir_node *n, const float *const *in, float *out) {
  const ir_slice_attr *s = &n->attr.slice_grad.slice;
  const ir_shape *xs = &n->attr.slice_grad.x_shape;
  int64_t outer, inner;
  split_at(xs, s->axis, &outer, &inner);
  int64_t row = xs->dim[s->axis] * inner, st = ir_slice_step(s);
  memset(out, 0, (size_t)(outer * row) * sizeof *out);
  for (int64_t o = 0; o < outer; o++)
    for (int64_t i = 0; i < s->len; i++)
      memcpy(out + o * row + (s->start + i * st) * inner, in[0] + (o * s->len + i) * inner, (size_t)inner * sizeof *out);
}

void ir_ref_reshape(const ir_graph *g, const ir_node *n, const float *const *in, float *out) {
  memcpy(out, in[0], (size_t)out_numel(g, n) * sizeof *out);
}

/* in: x [N,C,...] (u8 images arrive as f32 0..255); out f32 [N,C,...]. */
void ir_ref_normalize(const ir_graph *g, const ir_node *n, const float *const *in, float *out) {
  const ir_normalize_attr *a = &n->attr.normalize;
  const ir_shape *xs = ref_in_shape(g, n, 0);
  int64_t nb = xs->dim[0], nc = ref_dim(xs, 1), s = ref_inner(xs, 2);
  for (int64_t b = 0; b < nb; b++)
    for (int64_t c = 0; c < nc; c++) {
      int known = c < a->channels && c < IR_MAX_CHANNELS_NORMALIZE;
      float mean = known ? a->mean[c] : 0.0f, sd = known ? a->std[c] : 1.0f;
      for (int64_t i = 0; i < s; i++) {
        int64_t k = (b * nc + c) * s + i;
        out[k] = (in[0][k] * a->scale - mean) / sd;
      }
    }
}
