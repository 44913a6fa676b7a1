/* onnx_reduce.c — ONNX converters of reductions and of ops built from them: ReduceMax,
 * ReduceSum and ReduceMean over any axes (IR reduce), Exp / Sqrt / Neg, Div of two activations,
 * BatchNormalization with training_mode 1 (batch statistics from reduces, inference), and
 * MaxUnpool.  A reduction over dim 0 crosses it (docs/onnx.md "Dim 0").  Each converter
 * returns 0 or -1 (x->d filled). */
#include <math.h>
#include <string.h>

#include "onnx_int.h"

/* Marks the dims of axes (c's integers, or the attribute's; none: all dims) in red[]; -1 on
 * error.  *any: some dim is reduced. */
static int read_axes(ox_ctx *x, const int64_t *ax, int n, int rank, unsigned char *red, int *any) {
  memset(red, 0, IR_MAX_RANK);
  *any = 0;
  for (int i = 0; i < n; i++) {
    int64_t a = ax[i] < 0 ? ax[i] + rank : ax[i];
    if (a < 0 || a >= rank || red[a]) return ox_err(x, "axis %lld is out of range for rank %d or repeated", (long long)ax[i], rank);
    red[a] = 1;
  }
  for (int d = 0; d < rank; d++) {
    if (!n) red[d] = 1;
    *any |= red[d];
  }
  return 0;
}

/* x reduced (mode) over the marked dims, as the node's result (keepdims) or reshaped without
 * them; part != NULL: a part node of that name, keepdims, its value returned. */
static int reduce_dims(ox_ctx *x, int in, const unsigned char *red, int mode, int keep, const char *part) {
  const ir_shape *s = ox_shape(x, in);
  if (red[0] && ox_cross_dim0(x, ir_fmt(x->a, "%s over axis 0", part ? "a batch statistic" : x->node->op_type))) return -1;
  ir_attr a = {0};
  a.reduce.shape = *s;
  a.reduce.mode = mode;
  int64_t dims[IR_MAX_RANK];
  int r = 0;
  for (int d = 0; d < s->rank; d++) {
    if (red[d]) a.reduce.shape.dim[d] = 1;
    else dims[r++] = s->dim[d];
  }
  if (part) return ox_part_node(x, part, IR_OP_reduce, &in, 1, &a);
  if (keep) return ox_node(x, IR_OP_reduce, &in, 1, &a);
  int y = ox_part_node(x, "reduce", IR_OP_reduce, &in, 1, &a);
  if (!r) dims[r++] = 1; /* a scalar: one element */
  return y < 0 ? -1 : ox_reshape_to(x, y, dims, r);
}

/* ReduceMax, ReduceMean (axes an attribute) and ReduceSum (axes an input from opset 13;
 * noop_with_empty_axes); integers only through ReduceMax (exact: it picks an element). */
int ox_reduce(ox_ctx *x, int mode) {
  int sum_input = mode == IR_REDUCE_SUM && x->opset >= 13;
  if (ox_check_attrs(x, sum_input ? "keepdims,noop_with_empty_axes" : "axes,keepdims")) return -1;
  int in = ox_act(x, 0);
  if (in < 0) return -1;
  if (ox_find(x, x->node->input[0])->itype && mode != IR_REDUCE_MAX)
    return ox_err(x, "%s of an integer tensor is not supported (a sum could pass 2^24, where f32 stops being exact)", x->node->op_type);
  int64_t ax[OX_MAX_RANK], keep, noop;
  int n = 0;
  if (ox_attr_int(x, "keepdims", 1, &keep) < 0 || ox_attr_int(x, "noop_with_empty_axes", 0, &noop) < 0) return -1;
  if (sum_input && ox_has_input(x, 1)) {
    const ox_const *c = ox_need_const(x, 1, "the axes");
    if (!c) return -1;
    if (!c->is_int || c->rank > 1 || c->numel > OX_MAX_RANK) return ox_err(x, "the axes must be at most %d integers", OX_MAX_RANK);
    for (int64_t i = 0; i < c->numel; i++) ax[n++] = c->i[i];
  } else if (!sum_input && ox_attr_ints(x, "axes", OX_MAX_RANK, ax, &n) < 0) {
    return -1;
  }
  if (!n && noop) return ox_bind(x, x->node->output[0], in, NULL);
  unsigned char red[IR_MAX_RANK];
  int any;
  if (read_axes(x, ax, n, ox_shape(x, in)->rank, red, &any)) return -1;
  return reduce_dims(x, in, red, mode, keep != 0, NULL);
}
int ox_op_reduce_max(ox_ctx *x) { return ox_reduce(x, IR_REDUCE_MAX); }
int ox_op_reduce_sum(ox_ctx *x) { return ox_reduce(x, IR_REDUCE_SUM); }

static int unary(ox_ctx *x, ir_op op) {
  if (ox_check_attrs(x, "")) return -1;
  int in = ox_act(x, 0);
  return in < 0 ? -1 : ox_node(x, op, &in, 1, NULL);
}
int ox_op_exp(ox_ctx *x) { return unary(x, IR_OP_exp); }
int ox_op_sqrt(ox_ctx *x) { return unary(x, IR_OP_sqrt); }
int ox_op_neg(ox_ctx *x) { return unary(x, IR_OP_neg); }

/* a / b of two activations (b broadcast to a: the softmax's exp / its sum). */
int ox_div_act(ox_ctx *x) {
  int in[2] = {ox_act(x, 0), ox_act(x, 1)};
  if (in[0] < 0 || in[1] < 0) return -1;
  const ir_shape *a = ox_shape(x, in[0]), *b = ox_shape(x, in[1]);
  int ok = b->rank <= a->rank;
  for (int i = 1; ok && i <= b->rank; i++) ok = b->dim[b->rank - i] == 1 || b->dim[b->rank - i] == a->dim[a->rank - i];
  if (!ok) return ox_err(x, "the divisor's shape must broadcast to the dividend's (a larger divisor is not supported)");
  return ox_node(x, IR_OP_div, in, 2, NULL);
}

/* A frozen parameter [1, C, 1, ...] (rank r) holding f(c) for each channel of constant c. */
static int chan_param(ox_ctx *x, const char *suffix, const ox_const *c, int r, double mul, double add) {
  int64_t dims[OX_MAX_RANK];
  for (int d = 0; d < r; d++) dims[d] = d == 1 ? c->numel : 1;
  ox_const *p = ox_const_new(x, r, dims, 0);
  for (int64_t i = 0; i < c->numel; i++) p->f[i] = (float)((c->is_int ? (double)c->i[i] : c->f[i]) * mul + add);
  return ox_param(x, suffix, p, 0, 0, NULL);
}

/* BatchNormalization training_mode 1 (opset 14+): Y normalised with the batch's mean and
 * (population) variance over every dim but 1, and the running statistics updated as
 * m * input + (1 - m) * batch.  Inference only: the statistics cross dim 0; cnnc trains its
 * own batchnorm from an eval export (--mode training). */
int ox_bn_training(ox_ctx *x, double eps, double mom) {
  int in = ox_act(x, 0);
  if (in < 0) return -1;
  const ir_shape *s = ox_shape(x, in);
  int r = s->rank;
  if (r < 2) return ox_err(x, "the input must be [N, C, ...]");
  const ox_const *c[4];
  static const char *const what[] = {"the scale", "the bias", "the mean", "the variance"};
  for (int i = 0; i < 4; i++) {
    if (!(c[i] = ox_need_const(x, i + 1, what[i]))) return -1;
    if (c[i]->numel != s->dim[1]) return ox_err(x, "%s has %lld values, one per channel (%lld) expected", what[i], (long long)c[i]->numel, (long long)s->dim[1]);
  }
  unsigned char red[IR_MAX_RANK] = {0};
  for (int d = 0; d < r; d++) red[d] = d != 1;
  int mean = reduce_dims(x, in, red, IR_REDUCE_MEAN, 1, "mean");
  int nm = mean < 0 ? -1 : ox_part_node(x, "neg_mean", IR_OP_neg, &mean, 1, NULL);
  int cen[2] = {in, nm}, dx = nm < 0 ? -1 : ox_part_node(x, "centred", IR_OP_add, cen, 2, NULL);
  int sq[2] = {dx, dx}, d2 = dx < 0 ? -1 : ox_part_node(x, "squares", IR_OP_mul, sq, 2, NULL);
  int var = d2 < 0 ? -1 : reduce_dims(x, d2, red, IR_REDUCE_MEAN, 1, "var");
  ox_const one = {1, {1}, 1, 0, (float[]){0}, NULL};
  int ve[2] = {var, var < 0 ? -1 : chan_param(x, "eps", &one, r, 0.0, eps)};
  int vs = ve[1] < 0 ? -1 : ox_part_node(x, "var_eps", IR_OP_add, ve, 2, NULL);
  int sd = vs < 0 ? -1 : ox_part_node(x, "std", IR_OP_sqrt, &vs, 1, NULL);
  int q[2] = {dx, sd}, nx = sd < 0 ? -1 : ox_part_node(x, "normalised", IR_OP_div, q, 2, NULL);
  int ms[2] = {nx, nx < 0 ? -1 : chan_param(x, "gamma", c[0], r, 1.0, 0.0)};
  int sc = ms[1] < 0 ? -1 : ox_part_node(x, "scaled", IR_OP_mul, ms, 2, NULL);
  int ab[2] = {sc, sc < 0 ? -1 : chan_param(x, "beta", c[1], r, 1.0, 0.0)};
  if (ab[1] < 0 || ox_node(x, IR_OP_add, ab, 2, NULL)) return -1;
  for (int k = 1; k <= 2 && k < (int)x->node->n_output; k++) { /* running mean, running variance */
    if (!x->node->output[k][0]) continue;
    int st = k == 1 ? mean : var;
    int m1[2] = {st, chan_param(x, k == 1 ? "one_minus_m_mean" : "one_minus_m_var", &one, r, 0.0, 1.0 - mom)};
    int t = m1[1] < 0 ? -1 : ox_part_node(x, k == 1 ? "batch_mean_part" : "batch_var_part", IR_OP_mul, m1, 2, NULL);
    int a2[2] = {t, t < 0 ? -1 : chan_param(x, k == 1 ? "running_mean_part" : "running_var_part", c[k + 1], r, mom, 0.0)};
    int u = a2[1] < 0 ? -1 : ox_part_node(x, k == 1 ? "running_mean" : "running_var", IR_OP_add, a2, 2, NULL);
    int64_t cdim = s->dim[1];
    ir_attr ra = {.reshape = {{1, {cdim}}}}; /* the ONNX shape [C] */
    int v = u < 0 ? -1 : ox_part_node(x, k == 1 ? "running_mean_c" : "running_var_c", IR_OP_reshape, &u, 1, &ra);
    if (v < 0 || ox_bind(x, x->node->output[k], v, NULL)) return -1;
  }
  return 0;
}

/* MaxUnpool (opset 9, 11): X, the flat indices I (a constant or MaxPool's Indices), optional
 * output_shape; the default output size (in - 1) * stride + kernel - pads per spatial dim. */
int ox_op_max_unpool(ox_ctx *x) {
  if (ox_check_attrs(x, "kernel_shape,pads,strides")) return -1;
  int in[2] = {ox_act(x, 0), -1};
  if (in[0] < 0) return -1;
  const ir_shape *s = ox_shape(x, in[0]);
  int nd = s->rank - 2;
  if (nd < 1 || nd > 2) return ox_err(x, "cnnc imports 1-D and 2-D MaxUnpool ([N, C, L] or [N, C, H, W] inputs)");
  int64_t k[8], st[8], p[8];
  int nk, ns, np;
  if (ox_attr_ints(x, "kernel_shape", 8, k, &nk) < 0 || ox_attr_ints(x, "strides", 8, st, &ns) < 0 || ox_attr_ints(x, "pads", 8, p, &np) < 0)
    return -1;
  if (nk != nd || (ns && ns != nd) || (np && np != 2 * nd))
    return ox_err(x, "attributes kernel_shape (required), strides and pads must have %d, %d and %d items", nd, nd, 2 * nd);
  ir_shape out = *s;
  for (int i = 0; i < nd; i++) {
    int64_t sd = ns ? st[i] : 1, p0 = np ? p[i] : 0, p1 = np ? p[nd + i] : 0;
    if (k[i] < 1 || k[i] > FE_MAX_K || sd < 1 || sd > FE_MAX_K) return ox_err(x, "kernel_shape and strides must be 1 to %d", FE_MAX_K);
    if (p0 < 0 || p1 < 0 || p0 >= k[i] || p1 >= k[i]) return ox_err(x, "pads must be 0 to kernel_shape - 1 (%lld)", (long long)k[i] - 1);
    out.dim[2 + i] = (s->dim[2 + i] - 1) * sd + k[i] - p0 - p1; /* dims <= 2^30, sd and k <= FE_MAX_K: no overflow */
  }
  ir_shape big = out; /* output_shape: the default result with zeros after it (the ONNX reference's) */
  if (ox_has_input(x, 2)) {
    const ox_const *os = ox_need_const(x, 2, "the output shape");
    if (!os) return -1;
    if (!os->is_int || os->numel != s->rank) return ox_err(x, "output_shape must be %d integers", s->rank);
    for (int i = 0; i < s->rank; i++) {
      if (i < 2 ? os->i[i] != s->dim[i] : os->i[i] < out.dim[i] || os->i[i] > FE_MAX_DIM)
        return ox_err(x, "output_shape item %d is %lld (N and C stay; spatial dims from the default %lld to %d)", i,
                      (long long)os->i[i], (long long)out.dim[i], FE_MAX_DIM);
      big.dim[i] = os->i[i];
    }
  }
  for (int i = 2; i < s->rank; i++)
    if (out.dim[i] < 1 || out.dim[i] > FE_MAX_DIM) return ox_err(x, "output dim %d is %lld (1 to %d)", i, (long long)out.dim[i], FE_MAX_DIM);
  if (ir_shape_numel(&big) > IR_F32_EXACT_INT) return ox_err(x, "the output has over 2^24 elements (its flat indices are f32 values)");
  if (ox_cross_dim0(x, "MaxUnpool's flat indices (which address the whole tensor, dim 0 included)")) return -1;
  const ox_val *iv = ox_input(x, 1);
  if (!iv) return -1;
  if (iv->ir < 0 && iv->c && !iv->c->is_int) return ox_err(x, "the indices must be integers");
  if ((in[1] = ox_act(x, 1)) < 0) return -1;
  ir_attr a = {.max_unpool = {out}};
  if (ir_shape_eq(&out, &big)) return ox_node(x, IR_OP_max_unpool, in, 2, &a);
  int v = ox_part_node(x, "scatter", IR_OP_max_unpool, in, 2, &a);
  for (int i = 2; i < s->rank && v >= 0; i++) {
    if (big.dim[i] == out.dim[i]) continue;
    ir_attr z = {0};
    z.slice_grad.slice = (ir_slice_attr){i, 0, out.dim[i]};
    z.slice_grad.x_shape = *ox_shape(x, v);
    z.slice_grad.x_shape.dim[i] = big.dim[i];
    v = ox_part_node(x, ir_fmt(x->a, "grow%d", i), IR_OP_slice_grad, &v, 1, &z);
  }
  return v < 0 ? -1 : ox_bind(x, x->node->output[0], v, NULL);
}
