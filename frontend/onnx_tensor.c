/* onnx_tensor.c — the ONNX converters of dense layers and tensor shapes (split from
 * onnx_ops.c, which dispatches to them): Gemm, MatMul (by a constant, batched), Flatten,
 * Reshape, Transpose, ReduceMean, and Softmax / Hardmax / LogSoftmax over any axis.  The rules
 * for ops across dim 0: docs/onnx.md "Dim 0".  Each converter returns 0 or -1 (x->d filled). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onnx_int.h"

/* ---- dense ------------------------------------------------------------------------------- */
/* y = x W^T + b with W [Out, In] (the IR's layout). */
/* The dense of A [M, K] by constant B (and C): the node's result, or with part (a suffix) a
 * part node whose value id is returned. */
static int dense_part(ox_ctx *x, int xin, const ox_const *w, int trans_b, double alpha, const ox_const *c, double beta,
                      const char *part) {
  const ir_shape *xs = ox_shape(x, xin);
  if (xs->rank != 2) return ox_err(x, "input A must be [N, K] (rank 2); it has rank %d", xs->rank);
  if (w->rank != 2) return ox_err(x, "input B must be a rank-2 constant");
  int64_t K = trans_b ? w->dims[1] : w->dims[0], N = trans_b ? w->dims[0] : w->dims[1];
  if (K != xs->dim[1])
    return ox_err(x, "A is [%lld, %lld] but B gives K = %lld", (long long)xs->dim[0], (long long)xs->dim[1], (long long)K);
  if (N < 1 || N > FE_MAX_UNITS) return ox_err(x, "%lld output units (1 to %d)", (long long)N, FE_MAX_UNITS);
  int64_t dims[2] = {N, K};
  ox_const *wt = ox_const_new(x, 2, dims, 0);
  for (int64_t o = 0; o < N; o++)
    for (int64_t k = 0; k < K; k++) {
      int64_t src = trans_b ? o * K + k : k * N + o;
      wt->f[o * K + k] = (float)(alpha * (w->is_int ? (double)w->i[src] : w->f[src]));
    }
  ir_attr a = {0};
  a.dense.units = (int)N;
  int in[3] = {xin, ox_param(x, "weight", wt, 1, 0, NULL), -1}, n_in = 2;
  if (in[1] < 0) return -1;
  if (c && c->rank == 2 && c->dims[0] != 1) { /* C [M, N] or [M, 1]: row m is added to output row m */
    if (c->dims[0] != xs->dim[0] || (c->dims[1] != N && c->dims[1] != 1))
      return ox_err(x, "input C is [%lld, %lld]; the output is [%lld, %lld]", (long long)c->dims[0], (long long)c->dims[1],
                    (long long)xs->dim[0], (long long)N);
    if (ox_cross_dim0(x, "a bias C with one row per row of A")) return -1;
    ox_const *cm = ox_const_new(x, 2, c->dims, 0);
    for (int64_t i = 0; i < c->numel; i++) cm->f[i] = (float)(beta * (c->is_int ? (double)c->i[i] : c->f[i]));
    int y = ox_part_node(x, "gemm", IR_OP_dense, in, n_in, &a);
    int add[2] = {y, y < 0 ? -1 : ox_param(x, "bias", cm, 1, 0, NULL)};
    return add[1] < 0 ? -1 : part ? ox_part_node(x, part, IR_OP_add, add, 2, NULL) : ox_node(x, IR_OP_add, add, 2, NULL);
  }
  if (c) {
    int ok = c->numel == N || c->numel == 1;
    if (!ok || c->rank > 2)
      return ox_err(x, "input C must have shape [%lld], [1, %lld], [M, %lld], [M, 1] or be a scalar", (long long)N,
                    (long long)N, (long long)N);
    ox_const *bias = ox_const_new(x, 1, &N, 0);
    for (int64_t o = 0; o < N; o++) {
      int64_t s = c->numel == 1 ? 0 : o;
      bias->f[o] = (float)(beta * (c->is_int ? (double)c->i[s] : c->f[s]));
    }
    if ((in[n_in++] = ox_param(x, "bias", bias, 1, 0, NULL)) < 0) return -1;
  }
  return part ? ox_part_node(x, part, IR_OP_dense, in, n_in, &a) : ox_node(x, IR_OP_dense, in, n_in, &a);
}
static int dense(ox_ctx *x, int xin, const ox_const *w, int trans_b, double alpha, const ox_const *c, double beta) {
  return dense_part(x, xin, w, trans_b, alpha, c, beta, NULL);
}

int ox_op_gemm(ox_ctx *x) {
  if (ox_check_attrs(x, x->opset < 7 ? "alpha,beta,transA,transB,broadcast" : "alpha,beta,transA,transB")) return -1;
  double alpha, beta;
  int64_t ta, tb;
  if (ox_attr_float(x, "alpha", 1, &alpha) < 0 || ox_attr_float(x, "beta", 1, &beta) < 0 ||
      ox_attr_int(x, "transA", 0, &ta) < 0 || ox_attr_int(x, "transB", 0, &tb) < 0)
    return -1;
  int a = ox_act(x, 0);
  if (a < 0) return -1;
  if (ta) { /* A [K, M]: its transpose is the [M, K] input (a transpose of dims 0 and 1) */
    if (ox_shape(x, a)->rank != 2) return ox_err(x, "input A must be [K, M] (rank 2) with transA 1");
    if (ox_cross_dim0(x, "Gemm with transA 1")) return -1;
    ir_attr t = {.transpose = {{1, 0}}};
    if ((a = ox_part_node(x, "transA", IR_OP_transpose, &a, 1, &t)) < 0) return -1;
  }
  const ox_const *b = ox_need_const(x, 1, "the weight B"), *c = NULL;
  if (!b || (ox_has_input(x, 2) && !(c = ox_need_const(x, 2, "the bias C")))) return -1;
  return dense(x, a, b, tb != 0, alpha, c, beta);
}

/* MatMul of A [..., M, K] by a constant B [..., K, N] with the same leading dims (rank 3 or
 * 4): A as [L, M, K], each of its L matrices sliced out, a dense by its B, the results
 * concatenated and reshaped to [..., M, N].  It crosses dim 0 (docs/onnx.md "Dim 0"). */
static int batched_matmul(ox_ctx *x, int a, const ox_const *b) {
  const ir_shape *as = ox_shape(x, a);
  int r = as->rank;
  if (b->rank != r) return ox_err(x, "B has rank %d; a batched MatMul needs B of A's rank %d (or a rank-2 B)", b->rank, r);
  int64_t L = 1, M = as->dim[r - 2], K = as->dim[r - 1], N = b->dims[r - 1];
  for (int i = 0; i < r - 2; i++) {
    if (b->dims[i] != as->dim[i]) return ox_err(x, "A's and B's leading dims differ (broadcasting is not supported)");
    L *= as->dim[i];
  }
  if (b->dims[r - 2] != K) return ox_err(x, "A is [..., %lld, %lld] but B is [..., %lld, %lld]", (long long)M, (long long)K,
                                         (long long)b->dims[r - 2], (long long)N);
  if (L > 4096) return ox_err(x, "%lld matrices (at most 4096)", (long long)L);
  if (ox_cross_dim0(x, "a batched MatMul")) return -1;
  ir_attr ra = {0};
  ra.reshape.shape = (ir_shape){3, {L, M, K}};
  int a3 = ox_part_node(x, "rows", IR_OP_reshape, &a, 1, &ra), acc = -1;
  if (a3 < 0) return -1;
  for (int64_t l = 0; l < L; l++) {
    ir_attr sa = {0}, m2 = {0}, da = {0}, m3 = {0};
    sa.slice = (ir_slice_attr){0, l, 1};
    m2.reshape.shape = (ir_shape){2, {M, K}};
    int v = ox_part_node(x, ir_fmt(x->a, "a%lld", (long long)l), IR_OP_slice, &a3, 1, &sa);
    if (v < 0 || (v = ox_part_node(x, ir_fmt(x->a, "a%lld/2d", (long long)l), IR_OP_reshape, &v, 1, &m2)) < 0) return -1;
    int64_t wd[2] = {N, K};
    ox_const *wt = ox_const_new(x, 2, wd, 0);
    if (!wt) return -1;
    for (int64_t n = 0; n < N; n++)
      for (int64_t k = 0; k < K; k++) {
        int64_t src = (l * K + k) * N + n;
        wt->f[n * K + k] = b->is_int ? (float)b->i[src] : b->f[src];
      }
    int in[2] = {v, ox_param(x, ir_fmt(x->a, "weight%lld", (long long)l), wt, 1, 0, NULL)};
    da.dense.units = (int)N;
    if (in[1] < 0 || (v = ox_part_node(x, ir_fmt(x->a, "mm%lld", (long long)l), IR_OP_dense, in, 2, &da)) < 0) return -1;
    m3.reshape.shape = (ir_shape){3, {1, M, N}};
    if ((v = ox_part_node(x, ir_fmt(x->a, "mm%lld/3d", (long long)l), IR_OP_reshape, &v, 1, &m3)) < 0) return -1;
    if (acc < 0) {
      acc = v;
      continue;
    }
    ir_attr ca = {.concat = {0}};
    int cat[2] = {acc, v};
    if ((acc = ox_part_node(x, ir_fmt(x->a, "cat%lld", (long long)l), IR_OP_concat, cat, 2, &ca)) < 0) return -1;
  }
  int64_t dims[IR_MAX_RANK];
  for (int i = 0; i < r; i++) dims[i] = as->dim[i];
  dims[r - 1] = N;
  return ox_reshape_to(x, acc, dims, r);
}

int ox_op_matmul(ox_ctx *x) {
  if (ox_check_attrs(x, "")) return -1;
  int a = ox_act(x, 0);
  if (a < 0) return -1;
  const ox_const *b = ox_need_const(x, 1, "the weight B");
  if (!b) return -1;
  const ir_shape *as = ox_shape(x, a);
  if (as->rank > 2 && b->rank > 2) return batched_matmul(x, a, b);
  if (as->rank > 2 && b->rank == 2) { /* A [..., M, K] as [rows, K] rows, the dense, reshaped back */
    int64_t dims[IR_MAX_RANK], rows = ir_shape_numel(as) / as->dim[as->rank - 1];
    for (int i = 0; i < as->rank; i++) dims[i] = as->dim[i];
    dims[as->rank - 1] = b->dims[1];
    if (rows != as->dim[0] && ox_cross_dim0(x, "a MatMul of a rank > 2 A")) return -1;
    ir_attr ra = {0};
    ra.reshape.shape = (ir_shape){2, {rows, as->dim[as->rank - 1]}};
    int a2 = ox_part_node(x, "rows", IR_OP_reshape, &a, 1, &ra);
    if (a2 < 0) return -1;
    int y = dense_part(x, a2, b, 0, 1.0, NULL, 0, "dense");
    return y < 0 ? -1 : ox_reshape_to(x, y, dims, as->rank);
  }
  return dense(x, a, b, 0, 1.0, NULL, 0);
}

/* ---- shape -------------------------------------------------------------------------------- */
int ox_cross_dim0(ox_ctx *x, const char *what) {
  if (x->dim0_free) return x->crossed = 1, 0;
  return ox_err(x, "%s crosses dim 0, which cnnc keeps as the batch here (%s): only an inference graph whose input "
                   "has a fixed dim 0 computes across it", what,
                x->training ? "--mode training" : "the input's dim 0 is symbolic");
}

int ox_reshape_to(ox_ctx *x, int in, const int64_t *dims, int rank) {
  if (rank < 1 || rank > IR_MAX_RANK) return ox_err(x, "the result would have rank %d (1 to %d)", rank, IR_MAX_RANK);
  const ir_shape *s = ox_shape(x, in);
  if (dims[0] != s->dim[0] &&
      ox_cross_dim0(x, ir_fmt(x->a, "a reshape of dim 0 (%lld to %lld)", (long long)s->dim[0], (long long)dims[0])))
    return -1;
  if (s->rank == rank && !memcmp(s->dim, dims, (size_t)rank * sizeof *dims))
    return ox_bind(x, x->node->output[0], in, NULL); /* the same shape: an alias */
  ir_attr a = {0};
  a.reshape.shape.rank = rank;
  for (int i = 0; i < rank; i++) a.reshape.shape.dim[i] = dims[i];
  return ox_node(x, IR_OP_reshape, &in, 1, &a);
}

/* Flatten at axis: [d0 .. d(axis-1)] x [d(axis) ..] (axis 0: [1, all]). */
int ox_op_flatten(ox_ctx *x) {
  if (ox_check_attrs(x, "axis")) return -1;
  int in = ox_act(x, 0);
  if (in < 0) return -1;
  const ir_shape *s = ox_shape(x, in);
  int64_t axis;
  if (ox_attr_int(x, "axis", 1, &axis) < 0) return -1;
  if (axis < 0) axis += s->rank;
  if (axis < 0 || axis > s->rank) return ox_err(x, "attribute 'axis' is out of range for rank %d", s->rank);
  int64_t dims[2] = {1, 1};
  for (int k = 0; k < s->rank; k++) dims[k >= axis] *= s->dim[k];
  return ox_reshape_to(x, in, dims, 2);
}

int ox_op_reshape(ox_ctx *x) {
  if (ox_check_attrs(x, x->opset < 5 ? "shape" : "allowzero")) return -1;
  const ox_val *src = ox_input(x, 0);
  if (!src) return -1;
  int folded = src->c && src->ir < 0, in = folded ? -1 : ox_act(x, 0);
  if (!folded && in < 0) return -1;
  const ox_const *sc = ox_need_const(x, 1, "the shape");
  if (!sc) return -1;
  int64_t allowzero;
  if (ox_attr_int(x, "allowzero", 0, &allowzero) < 0) return -1;
  if (!sc->is_int || sc->rank != 1 || sc->numel < 1 || sc->numel > OX_MAX_RANK)
    return ox_err(x, "the shape must be a list of 1 to %d integers", OX_MAX_RANK);
  int64_t in_dims[OX_MAX_RANK], dims[OX_MAX_RANK], known = 1, numel = 1;
  int in_rank = folded ? src->c->rank : ox_shape(x, in)->rank;
  for (int i = 0; i < in_rank; i++) {
    in_dims[i] = folded ? src->c->dims[i] : ox_shape(x, in)->dim[i];
    numel *= in_dims[i];
  }
  int infer = -1, rank = (int)sc->numel;
  for (int i = 0; i < rank; i++) {
    int64_t d = sc->i[i];
    if (d == 0 && !allowzero) {
      if (i >= in_rank) return ox_err(x, "shape item %d is 0 (copy) but the input has rank %d", i, in_rank);
      d = in_dims[i];
    }
    if (d == -1) {
      if (infer >= 0) return ox_err(x, "the shape has more than one -1");
      infer = i;
      dims[i] = 1;
      continue;
    }
    if (d < 0 || (d == 0 && !folded) || d > ((int64_t)1 << 40)) return ox_err(x, "shape item %d is %lld", i, (long long)d);
    dims[i] = d;
    known *= d;
  }
  if (infer >= 0) {
    if (numel % known) return ox_err(x, "cannot reshape %lld elements with the known dims' product %lld", (long long)numel, (long long)known);
    dims[infer] = numel / known;
  } else if (known != numel) {
    return ox_err(x, "the shape has %lld elements, the input %lld", (long long)known, (long long)numel);
  }
  if (folded) return ox_fold_reshape(x, src->c, dims, rank);
  /* ShuffleNet's channel shuffle: [N,C,H,W] -> [N,G,C/G,H,W] -> Transpose 1<->2 -> [N,C,H,W] */
  if (src->view == 1) return ox_err(x, "reshaping a [N, G, C/G, H, W] view again is not supported");
  if (src->view == 2) {
    if (rank != 4 || memcmp(dims, in_dims, 4 * sizeof *dims))
      return ox_err(x, "a transposed [N, C/G, G, H, W] view is supported only when reshaped back to [N, C, H, W]");
    ir_attr a = {0};
    a.channel_shuffle.groups = src->view_groups;
    return ox_node(x, IR_OP_channel_shuffle, &in, 1, &a);
  }
  if (rank == 5 && in_rank == 4 && dims[0] == in_dims[0] && dims[1] * dims[2] == in_dims[1] && dims[3] == in_dims[2] &&
      dims[4] == in_dims[3]) {
    if (dims[1] > INT32_MAX) return ox_err(x, "%lld groups", (long long)dims[1]);
    if (ox_bind(x, x->node->output[0], in, NULL)) return -1;
    ox_val *v = ox_find(x, x->node->output[0]);
    v->view = 1;
    v->view_groups = (int)dims[1];
    return 0;
  }
  return ox_reshape_to(x, in, dims, rank);
}

/* Transpose: of a constant (folded); the channel shuffle's swap of dims 1 and 2 of a
 * [N, G, C/G, H, W] view; any other permutation of an activation (rank <= 4) an IR transpose
 * (one that moves dim 0 only when x->dim0_free). */
int ox_op_transpose(ox_ctx *x) {
  if (ox_check_attrs(x, "perm")) return -1;
  ox_val *v = ox_input(x, 0);
  int64_t perm[8];
  int n;
  if (!v || ox_attr_ints(x, "perm", 8, perm, &n) < 0) return -1;
  if (v->c && v->ir < 0) return ox_fold_transpose(x, v->c, perm, n);
  if (ox_act(x, 0) < 0) return -1;
  static const int64_t swap12[5] = {0, 2, 1, 3, 4};
  if (v->view == 1 && n == 5 && !memcmp(perm, swap12, sizeof swap12)) {
    if (ox_bind(x, x->node->output[0], v->ir, NULL)) return -1;
    ox_val *t = ox_find(x, x->node->output[0]);
    t->view = 2;
    t->view_groups = v->view_groups;
    return 0;
  }
  if (v->view)
    return ox_err(x, "a [N, G, C/G, H, W] view is supported only as the channel shuffle pattern: Reshape [N,C,H,W] -> "
                     "[N,G,C/G,H,W], Transpose perm [0,2,1,3,4], Reshape back to [N,C,H,W]");
  int in = v->ir, rank = ox_shape(x, in)->rank;
  if (!ox_attr(x, "perm")) /* the default: the dims reversed */
    for (n = 0; n < rank; n++) perm[n] = rank - 1 - n;
  if (n != rank) return ox_err(x, "attribute 'perm' has %d items for a rank-%d input", n, rank);
  ir_attr a = {0};
  unsigned seen = 0;
  int same = 1;
  for (int i = 0; i < rank; i++) {
    if (perm[i] < 0 || perm[i] >= rank || (seen >> perm[i] & 1u))
      return ox_err(x, "attribute 'perm' is not a permutation of 0..%d", rank - 1);
    seen |= 1u << perm[i];
    a.transpose.perm[i] = (int)perm[i];
    same &= perm[i] == i;
  }
  if (same) return ox_bind(x, x->node->output[0], in, NULL);
  if (perm[0] != 0 && ox_cross_dim0(x, "a transpose that moves dim 0")) return -1;
  return ox_node(x, IR_OP_transpose, &in, 1, &a);
}

/* ReduceMean over the two spatial dims of [N, C, H, W]: global average pooling (other axes: a reduce). */
int ox_op_reduce_mean(ox_ctx *x) {
  if (ox_check_attrs(x, x->opset < 18 ? "axes,keepdims" : "keepdims,noop_with_empty_axes")) return -1;
  int in = ox_act(x, 0);
  if (in < 0) return -1;
  int64_t axes[8], keep;
  int n;
  if (ox_attr_ints(x, "axes", 8, axes, &n) < 0 || ox_attr_int(x, "keepdims", 1, &keep) < 0) return -1;
  const ir_shape *s = ox_shape(x, in);
  for (int i = 0; i < n; i++) axes[i] += axes[i] < 0 ? s->rank : 0;
  int hw = s->rank == 4 && n == 2 && ((axes[0] == 2 && axes[1] == 3) || (axes[0] == 3 && axes[1] == 2));
  if (!hw) return ox_reduce(x, IR_REDUCE_MEAN); /* any other axes: onnx_reduce.c */
  if (keep) return ox_node(x, IR_OP_global_avgpool, &in, 1, NULL);
  int g = ox_part_node(x, "pool", IR_OP_global_avgpool, &in, 1, NULL);
  if (g < 0) return -1;
  int64_t dims[2] = {s->dim[0], s->dim[1]};
  return ox_reshape_to(x, g, dims, 2);
}

/* Softmax, Hardmax and LogSoftmax: IR ops over the last axis.  Before opset 13 the input is
 * coerced to 2-D at axis: one op over all the dims from axis on, i.e. over the last axis of a
 * reshape that merges them (dims before axis kept).  From opset 13 over the axis itself: the
 * same reshape when the dims after it are 1, else a transpose swapping axis and the last dim,
 * the op, and the same transpose back.  Axis 0 crosses dim 0 (x->dim0_free). */
static int softmax_like(ox_ctx *x, ir_op op) {
  if (ox_check_attrs(x, "axis")) return -1;
  int in = ox_act(x, 0);
  if (in < 0) return -1;
  const ir_shape *s = ox_shape(x, in);
  int64_t axis;
  if (ox_attr_int(x, "axis", x->opset >= 13 ? -1 : 1, &axis) < 0) return -1;
  if (axis < 0) axis += s->rank;
  if (axis < 0 || axis >= s->rank) return ox_err(x, "axis is out of range for rank %d", s->rank);
  if (axis == s->rank - 1) return ox_node(x, op, &in, 1, NULL);
  if (axis == 0 && ox_cross_dim0(x, ir_fmt(x->a, "%s over axis 0", x->node->op_type))) return -1;
  int merge = 1;
  for (int k = (int)axis + 1; k < s->rank && x->opset >= 13; k++) merge &= s->dim[k] == 1;
  int64_t dims[IR_MAX_RANK];
  memcpy(dims, s->dim, sizeof(int64_t) * (size_t)s->rank);
  int rank = s->rank;
  if (!merge) {
    ir_attr t = {0};
    for (int k = 0; k < rank; k++) t.transpose.perm[k] = k == axis ? rank - 1 : k == rank - 1 ? (int)axis : k;
    int tr = ox_part_node(x, "to_last", IR_OP_transpose, &in, 1, &t);
    int y = tr < 0 ? -1 : ox_part_node(x, ir_ops[op].name, op, &tr, 1, NULL);
    return y < 0 ? -1 : ox_node(x, IR_OP_transpose, &y, 1, &t);
  }
  ir_attr a = {0};
  a.reshape.shape.rank = (int)axis + 1;
  for (int k = 0; k < rank; k++) a.reshape.shape.dim[k < axis ? k : axis] = k <= axis ? s->dim[k] : a.reshape.shape.dim[axis] * s->dim[k];
  int flat = ox_part_node(x, "flat", IR_OP_reshape, &in, 1, &a);
  if (flat < 0) return -1;
  int sm = ox_part_node(x, ir_ops[op].name, op, &flat, 1, NULL);
  if (sm < 0) return -1;
  return ox_reshape_to(x, sm, dims, rank);
}
int ox_op_softmax(ox_ctx *x) { return softmax_like(x, IR_OP_softmax); }
int ox_op_hardmax(ox_ctx *x) { return softmax_like(x, IR_OP_hardmax); }
int ox_op_log_softmax(ox_ctx *x) { return softmax_like(x, IR_OP_log_softmax); }
