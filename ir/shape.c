/* shape.c — shape inference hooks (ir_infer_<op>), one per row of ops.def.  Each checks its
 * operands' ranks/shapes and attributes and returns 0 with *out set, or -1 with a message in
 * d (the caller adds the layer name and source location). */
#include <math.h>
#include <stdio.h>

#include "ir.h"

#define X(i) (&g->values[n->in[i]].shape)

#define FAIL(d, ...) ir_diag_set(d, (ir_loc){0}, NULL, __VA_ARGS__)

static int need_rank(const ir_shape *s, int rank, const char *what, ir_diag *d) {
  char buf[96];
  if (s->rank != rank)
    return FAIL(d, "%s must have rank %d, got shape %s", what, rank,
                       ir_shape_str(s, buf, sizeof buf));
  return 0;
}

/* Checks that parameter operand i is a vector of length c. */
static int need_vec(const ir_graph *g, const ir_node *n, int i, int64_t c, const char *what, ir_diag *d) {
  char buf[96];
  const ir_shape *s = X(i);
  if (s->rank != 1 || s->dim[0] != c)
    return FAIL(d, "%s must have shape [%lld], got %s", what, (long long)c,
                       ir_shape_str(s, buf, sizeof buf));
  return 0;
}

/* Output extent of a sliding window (PyTorch formula, incl. ceil_mode). */
static int64_t window_out(int64_t in, int k, int s, int p0, int p1, int dil, int ceil_mode) {
  int64_t span = in + p0 + p1 - (int64_t)dil * (k - 1) - 1;
  if (span < 0) return 0;
  int64_t o = ceil_mode ? (span + s - 1) / s + 1 : span / s + 1;
  if (ceil_mode && (o - 1) * s >= in + p0) o--;
  return o;
}

int ir_infer_conv2d(const ir_graph *g, const ir_node *n, ir_shape *out, ir_diag *d) {
  const ir_conv2d_attr *a = &n->attr.conv2d;
  char b1[96], b2[96];
  if (need_rank(X(0), 4, "conv input", d) || need_rank(X(1), 4, "conv weight", d)) return -1;
  if (a->groups < 1 || a->stride[0] < 1 || a->stride[1] < 1 || a->dilation[0] < 1 || a->dilation[1] < 1)
    return FAIL(d, "stride, dilation and groups must be >= 1");
  for (int i = 0; i < 4; i++)
    if (a->pad[i] < 0) return FAIL(d, "padding must be >= 0");
  const ir_shape *x = X(0), *w = X(1);
  int64_t cin = x->dim[1], cout = w->dim[0];
  if (cin % a->groups || cout % a->groups)
    return FAIL(d, "groups (%d) must divide input channels (%lld) and filters (%lld)",
                       a->groups, (long long)cin, (long long)cout);
  if (w->dim[1] != cin / a->groups || w->dim[2] != a->kernel[0] || w->dim[3] != a->kernel[1])
    return FAIL(d, "weight shape %s does not match input %s (expected [%lld,%lld,%d,%d])",
                       ir_shape_str(w, b1, sizeof b1), ir_shape_str(x, b2, sizeof b2), (long long)cout,
                       (long long)(cin / a->groups), a->kernel[0], a->kernel[1]);
  if (n->n_in == 3 && need_vec(g, n, 2, cout, "conv bias", d)) return -1;
  int64_t oh = window_out(x->dim[2], a->kernel[0], a->stride[0], a->pad[0], a->pad[2], a->dilation[0], 0);
  int64_t ow = window_out(x->dim[3], a->kernel[1], a->stride[1], a->pad[1], a->pad[3], a->dilation[1], 0);
  if (oh < 1 || ow < 1)
    return FAIL(d, "kernel %dx%d does not fit input %s with this padding/dilation",
                       a->kernel[0], a->kernel[1], ir_shape_str(x, b1, sizeof b1));
  *out = (ir_shape){4, {x->dim[0], cout, oh, ow}};
  return 0;
}

static int infer_norm_params(const ir_graph *g, const ir_node *n, int first, int count, ir_diag *d) {
  int64_t c = X(0)->dim[1];
  static const char *const what[] = {"gamma", "beta", "running_mean", "running_var"};
  for (int i = 0; i < count; i++)
    if (need_vec(g, n, first + i, c, what[i], d)) return -1;
  return 0;
}

int ir_infer_batchnorm(const ir_graph *g, const ir_node *n, ir_shape *out, ir_diag *d) {
  if (X(0)->rank != 4 && X(0)->rank != 2) return need_rank(X(0), 4, "batchnorm input", d);
  if (n->attr.batchnorm.eps <= 0) return FAIL(d, "eps must be > 0");
  if (infer_norm_params(g, n, 1, 4, d)) return -1;
  *out = *X(0);
  return 0;
}

int ir_infer_groupnorm(const ir_graph *g, const ir_node *n, ir_shape *out, ir_diag *d) {
  if (need_rank(X(0), 4, "groupnorm input", d)) return -1;
  int gr = n->attr.groupnorm.groups;
  if (gr < 1 || X(0)->dim[1] % gr)
    return FAIL(d, "groups (%d) must divide the channels (%lld)", gr,
                       (long long)X(0)->dim[1]);
  if (n->attr.groupnorm.eps <= 0) return FAIL(d, "eps must be > 0");
  if (infer_norm_params(g, n, 1, 2, d)) return -1;
  *out = *X(0);
  return 0;
}

static int same_shape(const ir_graph *g, const ir_node *n, ir_shape *out) {
  *out = *X(0);
  return 0;
}
int ir_infer_relu(const ir_graph *g, const ir_node *n, ir_shape *out, ir_diag *d) { return same_shape(g, n, out); }
int ir_infer_sigmoid(const ir_graph *g, const ir_node *n, ir_shape *out, ir_diag *d) { return same_shape(g, n, out); }
int ir_infer_exp(const ir_graph *g, const ir_node *n, ir_shape *out, ir_diag *d) { return same_shape(g, n, out); }
int ir_infer_sqrt(const ir_graph *g, const ir_node *n, ir_shape *out, ir_diag *d) { return same_shape(g, n, out); }
int ir_infer_neg(const ir_graph *g, const ir_node *n, ir_shape *out, ir_diag *d) { return same_shape(g, n, out); }
int ir_infer_clip(const ir_graph *g, const ir_node *n, ir_shape *out, ir_diag *d) {
  if (!(n->attr.clip.lo <= n->attr.clip.hi)) return FAIL(d, "clip bounds must satisfy lo <= hi (got %g, %g)", n->attr.clip.lo, n->attr.clip.hi);
  return same_shape(g, n, out);
}
int ir_infer_quantize8(const ir_graph *g, const ir_node *n, ir_shape *out, ir_diag *d) {
  const ir_quantize8_attr *a = &n->attr.quantize8;
  if (!isfinite(a->inv) || !(a->inv > 0)) return FAIL(d, "quantize8 inv must be finite and > 0 (got %g)", a->inv);
  if (!((a->lo == 0 && a->hi == 255) || (a->lo == -128 && a->hi == 127)))
    return FAIL(d, "quantize8 range must be 0..255 (u8) or -128..127 (s8) (got %d..%d)", a->lo, a->hi);
  return same_shape(g, n, out);
}
int ir_infer_hardsigmoid(const ir_graph *g, const ir_node *n, ir_shape *out, ir_diag *d) {
  if (!isfinite(n->attr.hardsigmoid.alpha) || !isfinite(n->attr.hardsigmoid.beta)) return FAIL(d, "alpha and beta must be finite");
  return same_shape(g, n, out);
}
int ir_infer_leaky_relu(const ir_graph *g, const ir_node *n, ir_shape *out, ir_diag *d) {
  if (!isfinite(n->attr.leaky_relu.alpha)) return FAIL(d, "alpha must be finite");
  return same_shape(g, n, out);
}
int ir_infer_hardswish(const ir_graph *g, const ir_node *n, ir_shape *out, ir_diag *d) { return same_shape(g, n, out); }
int ir_infer_swish(const ir_graph *g, const ir_node *n, ir_shape *out, ir_diag *d) { return same_shape(g, n, out); }
int ir_infer_softmax(const ir_graph *g, const ir_node *n, ir_shape *out, ir_diag *d) { return same_shape(g, n, out); }

int ir_infer_dropout(const ir_graph *g, const ir_node *n, ir_shape *out, ir_diag *d) {
  if (!(n->attr.dropout.rate >= 0 && n->attr.dropout.rate < 1)) return FAIL(d, "rate must be in [0, 1)");
  if (n->n_in > 1 && ir_shape_numel(X(1)) != 1) return FAIL(d, "the step operand must have one element"); /* training: "optimizer/step" */
  return same_shape(g, n, out);
}

/* in[1] broadcasts to in[0] (numpy rules, right-aligned); the result has in[0]'s shape. */
static int infer_broadcast(const ir_graph *g, const ir_node *n, ir_shape *out, ir_diag *d) {
  const ir_shape *a = X(0), *b = X(1);
  char b1[96], b2[96];
  int ok = b->rank <= a->rank;
  for (int i = 1; ok && i <= b->rank; i++) {
    int64_t da = a->dim[a->rank - i], db = b->dim[b->rank - i];
    ok = db == da || db == 1;
  }
  if (!ok)
    return FAIL(d, "shapes %s and %s do not match (the second must broadcast to the first)",
                       ir_shape_str(a, b1, sizeof b1), ir_shape_str(b, b2, sizeof b2));
  *out = *a;
  return 0;
}
int ir_infer_add(const ir_graph *g, const ir_node *n, ir_shape *out, ir_diag *d) { return infer_broadcast(g, n, out, d); }
int ir_infer_div(const ir_graph *g, const ir_node *n, ir_shape *out, ir_diag *d) { return infer_broadcast(g, n, out, d); }
int ir_infer_mul(const ir_graph *g, const ir_node *n, ir_shape *out, ir_diag *d) { return infer_broadcast(g, n, out, d); }

static int infer_pool(const ir_graph *g, const ir_node *n, ir_shape *out, ir_diag *d) {
  const ir_pool_attr *a = &n->attr.maxpool;
  char b1[96];
  if (need_rank(X(0), 4, "pool input", d)) return -1;
  if (a->kernel[0] < 1 || a->kernel[1] < 1 || a->stride[0] < 1 || a->stride[1] < 1)
    return FAIL(d, "kernel and stride must be >= 1");
  for (int i = 0; i < 4; i++) /* every window overlaps the input (ONNX allows pads over half the kernel) */
    if (a->pad[i] < 0 || a->pad[i] >= (int64_t)(a->kernel[i & 1] - 1) * ir_pool_dilation(a, i & 1) + 1)
      return FAIL(d, "padding must be >= 0 and less than the (dilated) kernel");
  if (n->op == IR_OP_avgpool && (ir_pool_dilation(a, 0) != 1 || ir_pool_dilation(a, 1) != 1))
    return FAIL(d, "avgpool has no dilation");
  if (a->storage_order && n->op != IR_OP_maxpool_index) return FAIL(d, "storage_order is maxpool_index's");
  const ir_shape *x = X(0);
  int64_t oh = window_out(x->dim[2], a->kernel[0], a->stride[0], a->pad[0], a->pad[2], ir_pool_dilation(a, 0), a->ceil_mode);
  int64_t ow = window_out(x->dim[3], a->kernel[1], a->stride[1], a->pad[1], a->pad[3], ir_pool_dilation(a, 1), a->ceil_mode);
  if (oh < 1 || ow < 1)
    return FAIL(d, "pool window %dx%d does not fit input %s", a->kernel[0], a->kernel[1],
                       ir_shape_str(x, b1, sizeof b1));
  *out = (ir_shape){4, {x->dim[0], x->dim[1], oh, ow}};
  return 0;
}
int ir_infer_maxpool(const ir_graph *g, const ir_node *n, ir_shape *out, ir_diag *d) { return infer_pool(g, n, out, d); }
/* The indices are f32 values: exact integers only below 2^24. */
int ir_infer_maxpool_index(const ir_graph *g, const ir_node *n, ir_shape *out, ir_diag *d) {
  if (infer_pool(g, n, out, d)) return -1;
  if (ir_shape_numel(X(0)) > IR_F32_EXACT_INT)
    return FAIL(d, "maxpool_index: the input has %lld elements; its flat indices are exact f32 values only up to 2^24",
                (long long)ir_shape_numel(X(0)));
  return 0;
}
int ir_infer_avgpool(const ir_graph *g, const ir_node *n, ir_shape *out, ir_diag *d) { return infer_pool(g, n, out, d); }

int ir_infer_global_avgpool(const ir_graph *g, const ir_node *n, ir_shape *out, ir_diag *d) {
  if (need_rank(X(0), 4, "global_avgpool input", d)) return -1;
  *out = (ir_shape){4, {X(0)->dim[0], X(0)->dim[1], 1, 1}};
  return 0;
}

int ir_infer_dense(const ir_graph *g, const ir_node *n, ir_shape *out, ir_diag *d) {
  char b1[96], b2[96];
  if (need_rank(X(0), 2, "dense input (flatten it first)", d) || need_rank(X(1), 2, "dense weight", d)) return -1;
  const ir_shape *x = X(0), *w = X(1);
  if (w->dim[1] != x->dim[1])
    return FAIL(d, "weight %s does not match input %s", ir_shape_str(w, b1, sizeof b1),
                       ir_shape_str(x, b2, sizeof b2));
  if (n->attr.dense.units && n->attr.dense.units != w->dim[0])
    return FAIL(d, "units (%d) does not match weight rows (%lld)", n->attr.dense.units,
                       (long long)w->dim[0]);
  if (n->n_in == 3 && need_vec(g, n, 2, w->dim[0], "dense bias", d)) return -1;
  *out = (ir_shape){2, {x->dim[0], w->dim[0]}};
  return 0;
}

int ir_infer_softmax_xent(const ir_graph *g, const ir_node *n, ir_shape *out, ir_diag *d) {
  if (need_rank(X(0), 2, "loss logits", d)) return -1;
  if (!ir_label_width(X(1))) return FAIL(d, "labels must be [N] class ids or [N,3] mixed labels");
  if (X(1)->dim[0] != X(0)->dim[0]) return FAIL(d, "labels and logits disagree on the batch size");
  float s = n->attr.softmax_xent.label_smoothing;
  if (!(s >= 0 && s < 1)) return FAIL(d, "label_smoothing must be in [0, 1)");
  *out = (ir_shape){1, {1}};
  return 0;
}

int ir_infer_concat(const ir_graph *g, const ir_node *n, ir_shape *out, ir_diag *d) {
  const ir_shape *a = X(0);
  int ax = n->attr.concat.axis;
  char b1[96], b2[96];
  if (ax < 0 || ax >= a->rank) return FAIL(d, "concat axis %d must be 0..%d", ax, a->rank - 1);
  *out = *a;
  for (int i = 1; i < n->n_in; i++) {
    const ir_shape *b = X(i);
    int ok = b->rank == a->rank;
    for (int k = 0; ok && k < a->rank; k++) ok = k == ax || b->dim[k] == a->dim[k];
    if (!ok) return FAIL(d, "concat operand %d has shape %s, operand 0 %s (equal except on axis %d)", i,
                         ir_shape_str(b, b1, sizeof b1), ir_shape_str(a, b2, sizeof b2), ax);
    out->dim[ax] += b->dim[ax];
  }
  return 0;
}

/* transpose: perm a permutation of the input's dims (entries past the rank 0). */
int ir_infer_transpose(const ir_graph *g, const ir_node *n, ir_shape *out, ir_diag *d) {
  const ir_shape *x = X(0);
  const int *p = n->attr.transpose.perm;
  unsigned seen = 0;
  for (int i = 0; i < IR_MAX_RANK; i++) {
    if (i >= x->rank) {
      if (p[i]) return FAIL(d, "transpose perm entry %d is %d past the rank %d (must be 0)", i, p[i], x->rank);
      continue;
    }
    if (p[i] < 0 || p[i] >= x->rank || (seen >> p[i] & 1u))
      return FAIL(d, "transpose perm is not a permutation of the %d dims", x->rank);
    seen |= 1u << p[i];
  }
  *out = *x;
  for (int i = 0; i < x->rank; i++) out->dim[i] = x->dim[p[i]];
  return 0;
}

int ir_infer_hardmax(const ir_graph *g, const ir_node *n, ir_shape *out, ir_diag *d) { return same_shape(g, n, out); }
int ir_infer_log_softmax(const ir_graph *g, const ir_node *n, ir_shape *out, ir_diag *d) { return same_shape(g, n, out); }

int ir_infer_channel_shuffle(const ir_graph *g, const ir_node *n, ir_shape *out, ir_diag *d) {
  const ir_shape *x = X(0);
  int gr = n->attr.channel_shuffle.groups;
  if (x->rank < 2) return FAIL(d, "channel_shuffle needs channels (rank >= 2)");
  if (gr < 1 || x->dim[1] % gr) return FAIL(d, "channel_shuffle groups %d must divide the %lld channels", gr, (long long)x->dim[1]);
  *out = *x;
  return 0;
}

/* lrn: the ONNX/PyTorch attribute ranges (the window never empty, s > 0). */
int ir_lrn_check(const ir_lrn_attr *a, char *msg, size_t len) {
  if (a->size < 1 || a->size > IR_LRN_MAX_SIZE)
    return snprintf(msg, len, "lrn size %d must be in [1, %d]", a->size, IR_LRN_MAX_SIZE), -1;
  if (!isfinite(a->alpha) || a->alpha < 0) return snprintf(msg, len, "lrn alpha %g must be finite and >= 0", a->alpha), -1;
  if (!isfinite(a->beta)) return snprintf(msg, len, "lrn beta %g must be finite", a->beta), -1;
  if (!isfinite(a->bias) || !(a->bias > 0)) return snprintf(msg, len, "lrn bias %g must be finite and > 0", a->bias), -1;
  return 0;
}
int ir_infer_lrn(const ir_graph *g, const ir_node *n, ir_shape *out, ir_diag *d) {
  char msg[128];
  if (ir_lrn_check(&n->attr.lrn, msg, sizeof msg)) return FAIL(d, "%s", msg);
  if (X(0)->rank < 3) return FAIL(d, "lrn needs [N, C, spatial...] (rank >= 3), got rank %d", X(0)->rank);
  *out = *X(0);
  return 0;
}

/* The slice's elements lie inside dim (0 or -1 with why in msg). */
int ir_slice_check(const ir_slice_attr *s, int64_t dim, char *msg, size_t len) {
  int64_t st = ir_slice_step(s), last = s->start + (s->len - 1) * st;
  if (s->len < 1 || s->start < 0 || s->start >= dim || last < 0 || last >= dim || s->len > dim)
    return snprintf(msg, len, "slice start %lld, %lld elements, step %lld is not inside dim %d of size %lld",
                    (long long)s->start, (long long)s->len, (long long)st, s->axis, (long long)dim), -1;
  return 0;
}

int ir_infer_slice(const ir_graph *g, const ir_node *n, ir_shape *out, ir_diag *d) {
  const ir_slice_attr *s = &n->attr.slice;
  const ir_shape *x = X(0);
  char msg[160];
  if (s->axis < 0 || s->axis >= x->rank) return FAIL(d, "slice axis %d must be 0..%d", s->axis, x->rank - 1);
  if (ir_slice_check(s, x->dim[s->axis], msg, sizeof msg)) return FAIL(d, "%s", msg);
  *out = *x;
  out->dim[s->axis] = s->len;
  return 0;
}

int ir_infer_reshape(const ir_graph *g, const ir_node *n, ir_shape *out, ir_diag *d) {
  ir_shape s = n->attr.reshape.shape;
  char b1[96], b2[96];
  int64_t known = 1, numel = ir_shape_numel(X(0));
  int infer_at = -1;
  if (s.rank < 1 || s.rank > IR_MAX_RANK) return FAIL(d, "reshape target must have rank 1..4");
  for (int i = 0; i < s.rank; i++) {
    if (s.dim[i] == -1 && infer_at < 0) infer_at = i;
    else if (s.dim[i] < 1) return FAIL(d, "reshape dims must be >= 1 (one may be -1)");
    else known *= s.dim[i];
  }
  if (infer_at >= 0 && numel % known == 0) s.dim[infer_at] = numel / known;
  if (ir_shape_numel(&s) != numel || (infer_at >= 0 && numel % known))
    return FAIL(d, "cannot reshape %s to %s", ir_shape_str(X(0), b1, sizeof b1),
                       ir_shape_str(&n->attr.reshape.shape, b2, sizeof b2));
  *out = s;
  return 0;
}

int ir_infer_normalize(const ir_graph *g, const ir_node *n, ir_shape *out, ir_diag *d) {
  const ir_normalize_attr *a = &n->attr.normalize;
  if (need_rank(X(0), 4, "normalize input", d)) return -1;
  if (a->channels != X(0)->dim[1] || a->channels > IR_MAX_CHANNELS_NORMALIZE)
    return FAIL(d, "mean/std have %d entries but the input has %lld channels (max %d)",
                       a->channels, (long long)X(0)->dim[1], IR_MAX_CHANNELS_NORMALIZE);
  for (int c = 0; c < a->channels; c++)
    if (!(a->std[c] > 0)) return FAIL(d, "std must be > 0");
  *out = *X(0);
  return 0;
}

/* round16 (docs/precision.md): same shape; the format must be bf16 or fp16. */
int ir_infer_round16(const ir_graph *g, const ir_node *n, ir_shape *out, ir_diag *d) {
  if (n->attr.round16.format != IR_HALF_BF16 && n->attr.round16.format != IR_HALF_FP16)
    return FAIL(d, "round16 format must be bf16 or fp16");
  return same_shape(g, n, out);
}

/* narrow16 / widen16 (16-bit storage, passes/store16.c): same shape; bf16 or fp16. */
static int infer_store16(const ir_graph *g, const ir_node *n, ir_shape *out, ir_diag *d) {
  if (n->attr.narrow16.format != IR_HALF_BF16 && n->attr.narrow16.format != IR_HALF_FP16)
    return FAIL(d, "narrow16/widen16 format must be bf16 or fp16");
  return same_shape(g, n, out);
}
int ir_infer_narrow16(const ir_graph *g, const ir_node *n, ir_shape *out, ir_diag *d) {
  if (g->values[n->in[0]].dtype != IR_F32) return FAIL(d, "narrow16 reads an f32 value");
  return infer_store16(g, n, out, d);
}
int ir_infer_widen16(const ir_graph *g, const ir_node *n, ir_shape *out, ir_diag *d) {
  ir_dtype want = n->attr.widen16.format == IR_HALF_FP16 ? IR_F16 : IR_BF16;
  if (g->values[n->in[0]].dtype != want) return FAIL(d, "widen16 reads a %s value", ir_dtype_name(want));
  return infer_store16(g, n, out, d);
}

/* reduce: attr shape has x's rank, each dim x's or 1 (the reduced dims); mode sum, mean, max. */
int ir_infer_reduce(const ir_graph *g, const ir_node *n, ir_shape *out, ir_diag *d) {
  const ir_reduce_attr *a = &n->attr.reduce;
  char b1[96], b2[96];
  if (a->mode != IR_REDUCE_SUM && a->mode != IR_REDUCE_MEAN && a->mode != IR_REDUCE_MAX)
    return FAIL(d, "reduce mode %d (sum 0, mean 1, max 2)", a->mode);
  int ok = a->shape.rank == X(0)->rank;
  for (int i = 0; ok && i < a->shape.rank; i++) ok = a->shape.dim[i] == 1 || a->shape.dim[i] == X(0)->dim[i];
  if (!ok)
    return FAIL(d, "cannot reduce %s to %s (same rank, dims equal or 1)", ir_shape_str(X(0), b1, sizeof b1),
                ir_shape_str(&a->shape, b2, sizeof b2));
  *out = a->shape;
  return 0;
}

/* expand: x's dims equal the shape's or 1 (the same rank); a finite scale. */
int ir_infer_expand(const ir_graph *g, const ir_node *n, ir_shape *out, ir_diag *d) {
  const ir_expand_attr *a = &n->attr.expand;
  char b1[96], b2[96];
  if (!isfinite(a->scale)) return FAIL(d, "expand scale must be finite");
  int ok = a->shape.rank == X(0)->rank && a->shape.rank >= 1;
  for (int i = 0; ok && i < a->shape.rank; i++) ok = a->shape.dim[i] >= 1 && (X(0)->dim[i] == 1 || a->shape.dim[i] == X(0)->dim[i]);
  if (!ok)
    return FAIL(d, "cannot expand %s to %s (same rank, each dim equal or 1)", ir_shape_str(X(0), b1, sizeof b1),
                ir_shape_str(&a->shape, b2, sizeof b2));
  *out = a->shape;
  return 0;
}

/* max_unpool: x and idx of one shape; the result attr shape (at most 2^24 elements: the flat
 * indices are f32 values). */
int ir_infer_max_unpool(const ir_graph *g, const ir_node *n, ir_shape *out, ir_diag *d) {
  const ir_shape *s = &n->attr.max_unpool.shape;
  char b1[96], b2[96];
  if (!ir_shape_eq(X(0), X(1)))
    return FAIL(d, "max_unpool: x %s and the indices %s differ in shape", ir_shape_str(X(0), b1, sizeof b1), ir_shape_str(X(1), b2, sizeof b2));
  if (s->rank < 1 || s->rank > IR_MAX_RANK) return FAIL(d, "max_unpool needs the result's shape");
  for (int i = 0; i < s->rank; i++)
    if (s->dim[i] < 1) return FAIL(d, "max_unpool: result dims must be >= 1");
  if (ir_shape_numel(s) > IR_F32_EXACT_INT) return FAIL(d, "max_unpool: the result has over 2^24 elements (f32 indices)");
  if (s->dim[0] != X(0)->dim[0]) return FAIL(d, "max_unpool: the result keeps x's dim 0");
  *out = *s;
  return 0;
}

int ir_dtype_is_int(int t) { return t == IR_U8 || t == IR_I8 || t == IR_I32 || t == IR_I64; }

/* cast: an integer-dtype x (not i64) to f32 (wrap none); an f32 x to f32 wrapped as u8 or i8,
 * or to an integer storage dtype (wrap that dtype or none). */
int ir_infer_cast(const ir_graph *g, const ir_node *n, ir_shape *out, ir_diag *d) {
  const ir_cast_attr *a = &n->attr.cast;
  int xt = g->values[n->in[0]].dtype;
  int ok = xt == IR_F32 ? (a->to == IR_F32 ? a->wrap == IR_U8 || a->wrap == IR_I8 : ir_dtype_is_int(a->to) && (a->wrap == IR_F32 || a->wrap == a->to))
                        : ir_dtype_is_int(xt) && xt != IR_I64 && a->to == IR_F32 && a->wrap == IR_F32;
  if (!ok)
    return FAIL(d, "cast of %s to %s with wrap %s is not a conversion cast has (integer to f32; f32 to f32 wrapped "
                "as u8 or i8; f32 to an integer dtype)", ir_dtype_name((ir_dtype)xt), ir_dtype_name((ir_dtype)a->to), ir_dtype_name((ir_dtype)a->wrap));
  return same_shape(g, n, out);
}
