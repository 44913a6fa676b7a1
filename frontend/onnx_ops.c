/* onnx_ops.c — one converter per ONNX operator: attributes read and checked against the
 * opset's defaults, operands made IR values or constants, one IR node added (or none: Identity
 * and Dropout are aliases, Constant and ops on constants fold at import).  Fusions that the
 * IR has ops for: Mul(x, Sigmoid(x)) -> swish, Mul(x, HardSigmoid(x; 1/6, 1/2)) -> hardswish.
 * Each converter returns 0 or -1 (x->d filled). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "onnx_int.h"


/* One output, which later nodes may read; a second (optional) output must be unused. */
static int only_first_output(ox_ctx *x) {
  for (size_t i = 1; i < x->node->n_output; i++)
    if (x->node->output[i][0] && ox_uses(x, x->node->output[i]))
      return ox_err(x, "output %zu ('%s') is used, but cnnc computes only the first output of this operator", i,
                    x->node->output[i]);
  return 0;
}

/* ---- windows: Conv, MaxPool, AveragePool ------------------------------------------------ */
typedef struct window {
  int k[2], s[2], d[2], pad[4]; /* pad: top, left, bottom, right (IR order) */
} window;

/* kernel_shape (or kshape from the weight), strides, dilations, pads / auto_pad of a 2-D
 * window over input [N, C, H, W], or of a 1-D window over [N, C, L] (nd = 1: read as a 2-D
 * window of height 1 over [N, C, 1, L]; see lift()). */
static int read_window(ox_ctx *x, const ir_shape *in, const int64_t *kshape, window *w) {
  int64_t v[8];
  int n, nd = in->rank - 2, o = 2 - nd; /* o: the 2-D dims the file does not give (H of a 1-D window) */
  if (nd != 1 && nd != 2)
    return ox_err(x, "cnnc imports 1-D and 2-D windows ([N, C, L] or [N, C, H, W] inputs); this input has rank %d",
                  in->rank);
  for (int i = 0; i < 2; i++) w->k[i] = w->s[i] = w->d[i] = 1;
  memset(w->pad, 0, sizeof w->pad);
  if (ox_attr_ints(x, "kernel_shape", 8, v, &n) < 0) return -1;
  if (!n && !kshape) return ox_err(x, "attribute 'kernel_shape' is required");
  if (n && n != nd) return ox_err(x, "attribute 'kernel_shape' has %d items for a %d-D window", n, nd);
  for (int i = 0; i < nd; i++) {
    int64_t k = n ? v[i] : kshape[i];
    if (k < 1 || k > FE_MAX_K) return ox_err(x, "kernel size %lld is out of range (1 to %d)", (long long)k, FE_MAX_K);
    if (n && kshape && v[i] != kshape[i]) return ox_err(x, "attribute 'kernel_shape' does not match the weight's shape");
    w->k[o + i] = (int)k;
  }
  static const char *const names[] = {"strides", "dilations"};
  for (int a = 0; a < 2; a++) {
    if (ox_attr_ints(x, names[a], 8, v, &n) < 0) return -1;
    if (n && n != nd) return ox_err(x, "attribute '%s' has %d items (%d expected)", names[a], n, nd);
    for (int i = 0; i < nd; i++) {
      int64_t t = n ? v[i] : 1;
      if (t < 1 || t > FE_MAX_K) return ox_err(x, "attribute '%s' item %d is %lld (1 to %d)", names[a], i, (long long)t, FE_MAX_K);
      (a ? w->d : w->s)[o + i] = (int)t;
    }
  }
  const char *ap;
  if (ox_attr_str(x, "auto_pad", "NOTSET", &ap) < 0 || ox_attr_ints(x, "pads", 8, v, &n) < 0) return -1;
  if (!strcmp(ap, "NOTSET")) {
    if (n && n != 2 * nd) return ox_err(x, "attribute 'pads' has %d items (%d expected: the begins, then the ends)", n, 2 * nd);
    for (int i = 0; i < 2 * nd; i++) {
      int64_t t = n ? v[i] : 0;
      if (t < 0 || t > FE_MAX_K) return ox_err(x, "attribute 'pads' item %d is %lld (0 to %d)", i, (long long)t, FE_MAX_K);
      w->pad[(i / nd) * 2 + o + i % nd] = (int)t; /* [b0.., e0..] -> top, left, bottom, right */
    }
  } else if (!strcmp(ap, "VALID")) {
  } else if (!strcmp(ap, "SAME_UPPER") || !strcmp(ap, "SAME_LOWER")) {
    for (int i = o; i < 2; i++) {
      int64_t len = in->dim[2 + i - o], out = (len + w->s[i] - 1) / w->s[i];
      int64_t total = (out - 1) * w->s[i] + (int64_t)(w->k[i] - 1) * w->d[i] + 1 - len;
      if (total < 0) total = 0;
      int64_t small = total / 2, big = total - small;
      int upper = ap[5] == 'U';
      w->pad[i] = (int)(upper ? small : big);
      w->pad[i + 2] = (int)(upper ? big : small);
    }
  } else {
    return ox_err(x, "attribute 'auto_pad' is '%s' (NOTSET, SAME_UPPER, SAME_LOWER or VALID)", ap);
  }
  return 0;
}

/* A 1-D window's input [N, C, L] as [N, C, 1, L] (an IR reshape named "<layer>/lift"); a rank-4
 * input as it is.  -1 on error. */
static int lift(ox_ctx *x, int in) {
  const ir_shape *s = ox_shape(x, in);
  if (s->rank != 3) return in;
  ir_attr a = {0};
  a.reshape.shape = (ir_shape){4, {s->dim[0], s->dim[1], 1, s->dim[2]}};
  return ox_part_node(x, "lift", IR_OP_reshape, &in, 1, &a);
}

/* The op on a lifted 1-D input: the 2-D result ("<layer>/2d") reshaped back to [N, C, L]. */
static int node_1d(ox_ctx *x, int lifted_rank3, ir_op op, const int *in, int n_in, const ir_attr *a) {
  if (!lifted_rank3) return ox_node(x, op, in, n_in, a);
  int y = ox_part_node(x, "2d", op, in, n_in, a);
  if (y < 0) return -1;
  const ir_shape *s = ox_shape(x, y);
  ir_attr r = {0};
  r.reshape.shape = (ir_shape){3, {s->dim[0], s->dim[1], s->dim[3]}};
  return ox_node(x, IR_OP_reshape, &y, 1, &r);
}

/* Adds a folded Pad of input 0 (see pad()) to window w. */
static void add_folded_pad(ox_ctx *x, window *w) {
  const ox_val *v = ox_find(x, x->node->input[0]);
  for (int i = 0; v && v->padded && i < 4; i++) w->pad[i] += v->pad[i];
}

/* Conv, and ConvInteger (onnx_integer.c: the zero points subtracted, an exact conv). */
static int conv(ox_ctx *x) {
  if (ox_check_attrs(x, "auto_pad,dilations,group,kernel_shape,pads,strides")) return -1;
  int integer = !strcmp(x->node->op_type, "ConvInteger");
  ox_const *wi = NULL;
  int in[3] = {integer ? ox_int_operands(x, 2, 3, 0, &wi) : ox_act(x, 0), -1, -1}, n_in = 2;
  if (in[0] < 0) return -1;
  const ox_const *w = integer ? wi : ox_need_const(x, 1, "the weight"), *b = NULL;
  if (!w) return -1;
  int is1d = ox_shape(x, in[0])->rank == 3;
  if (w->rank != (is1d ? 3 : 4))
    return ox_err(x, "the weight has rank %d; cnnc imports 1-D and 2-D convolutions (rank 3 or 4 weights for rank 3 "
                     "or 4 inputs)", w->rank);
  if (!integer && ox_has_input(x, 2) && !(b = ox_need_const(x, 2, "the bias"))) return -1;
  ir_attr a = {0};
  window win;
  if (read_window(x, ox_shape(x, in[0]), w->dims + 2, &win) || (in[0] = lift(x, in[0])) < 0) return -1;
  const ir_shape *xs = ox_shape(x, in[0]);
  add_folded_pad(x, &win);
  int64_t group;
  if (ox_attr_int(x, "group", 1, &group) < 0) return -1;
  if (group < 1 || group > FE_MAX_CH || xs->dim[1] % group || w->dims[0] % group || w->dims[1] * group != xs->dim[1])
    return ox_err(x, "group %lld does not fit input channels %lld and weight [%lld, %lld, ...]", (long long)group,
                  (long long)xs->dim[1], (long long)w->dims[0], (long long)w->dims[1]);
  if (b && (b->rank != 1 || b->dims[0] != w->dims[0]))
    return ox_err(x, "the bias must have shape [%lld]", (long long)w->dims[0]);
  ir_conv2d_attr *ca = &a.conv2d;
  memcpy(ca->kernel, win.k, sizeof win.k);
  memcpy(ca->stride, win.s, sizeof win.s);
  memcpy(ca->dilation, win.d, sizeof win.d);
  memcpy(ca->pad, win.pad, sizeof win.pad);
  ca->groups = (int)group;
  ca->exact = integer;
  int64_t wd[4] = {w->dims[0], w->dims[1], is1d ? 1 : w->dims[2], is1d ? w->dims[2] : w->dims[3]};
  if ((in[1] = ox_param(x, "weight", w, 1, 4, wd)) < 0) return -1;
  if (b && (in[n_in++] = ox_param(x, "bias", b, 1, 0, NULL)) < 0) return -1;
  if (node_1d(x, is1d, IR_OP_conv2d, in, n_in, &a)) return -1;
  if (integer) ox_find(x, x->node->output[0])->itype = OX_INT32;
  return 0;
}

static int pool(ox_ctx *x, ir_op op) {
  int avg = op == IR_OP_avgpool;
  if (ox_check_attrs(x, avg ? "auto_pad,ceil_mode,count_include_pad,kernel_shape,pads,strides,dilations"
                            : "auto_pad,ceil_mode,dilations,kernel_shape,pads,storage_order,strides"))
    return -1;
  int in = ox_act(x, 0);
  if (in < 0 || (avg && only_first_output(x))) return -1;
  window w;
  int is1d = ox_shape(x, in)->rank == 3;
  if (read_window(x, ox_shape(x, in), NULL, &w) || (in = lift(x, in)) < 0) return -1;
  if (avg && (w.d[0] != 1 || w.d[1] != 1)) return ox_err(x, "AveragePool has no dilations before opset 19");
  int64_t ceil_mode, cip, order;
  if (ox_attr_int(x, "ceil_mode", 0, &ceil_mode) < 0 || ox_attr_int(x, "count_include_pad", 0, &cip) < 0 ||
      ox_attr_int(x, "storage_order", 0, &order) < 0)
    return -1;
  const ox_val *src = ox_find(x, x->node->input[0]);
  if (src && src->padded) { /* the Pad's zeros are elements: counted, as count_include_pad counts pads */
    if (!avg) return ox_err(x, "internal: a Pad was folded into a max pool");
    if (!cip && (w.pad[0] || w.pad[1] || w.pad[2] || w.pad[3]))
      return ox_err(x, "a zero Pad before an AveragePool that pads itself without counting the pads is not supported");
    add_folded_pad(x, &w);
    cip = 1;
  }
  if (order != 0 && order != 1) return ox_err(x, "attribute 'storage_order' is %lld (0 or 1)", (long long)order);
  ir_attr a = {0};
  ir_pool_attr *pa = &a.maxpool;
  memcpy(pa->kernel, w.k, sizeof w.k);
  memcpy(pa->stride, w.s, sizeof w.s);
  memcpy(pa->pad, w.pad, sizeof w.pad);
  pa->ceil_mode = ceil_mode != 0;
  pa->count_include_pad = avg && cip != 0;
  memcpy(pa->dilation, w.d, sizeof w.d);
  const char *idx = x->node->n_output > 1 ? x->node->output[1] : "";
  if (idx[0] && ox_uses(x, idx)) { /* the Indices output: flat indices over the whole tensor */
    if (ox_cross_dim0(x, "MaxPool's Indices output (flat indices over the whole tensor, dim 0 included)")) return -1;
    if (x->o->precision != FE_PRECISION_32_32) /* round16 would round the indices (passes/precision.c) */
      return ox_err(x, "MaxPool's Indices output is an integer tensor, computed exactly in f32: --precision 32.32 only");
    ir_attr ia = a;
    ia.maxpool_index.storage_order = (int)order;
    int v = ox_part_node(x, "indices", IR_OP_maxpool_index, &in, 1, &ia);
    if (v >= 0 && is1d) {
      const ir_shape *s = ox_shape(x, v);
      ir_attr r = {.reshape = {{3, {s->dim[0], s->dim[1], s->dim[3]}}}};
      v = ox_part_node(x, "indices_1d", IR_OP_reshape, &v, 1, &r);
    }
    if (v < 0 || ox_bind(x, idx, v, NULL)) return -1;
    ox_find(x, idx)->itype = OX_INT64;
  }
  return node_1d(x, is1d, op, &in, 1, &a);
}

/* ---- ConvTranspose --------------------------------------------------------------------- */
/* x [N, C, H, W] with zeros inserted: [N, C, H*sh, W*sw], x[iy, ix] at (iy*sh, ix*sw) (each pixel
 * followed by sw-1 zero columns and each row by sh-1 zero rows).  Per dim: reshape so the dim
 * to spread is followed by a dim of 1, slice_grad into s places along it (x at place 0, exact
 * zeros elsewhere, its gradient the slice back), reshape back; dim 0 stays the batch. */
static int spread_zeros(ox_ctx *x, int in, int sh, int sw) {
  for (int d = 1; d >= 0; d--) { /* width first, then height */
    int s = d ? sw : sh;
    if (s == 1) continue;
    const ir_shape *xs = ox_shape(x, in);
    int64_t n = xs->dim[0], c = xs->dim[1], h = xs->dim[2], w = xs->dim[3];
    if (ir_shape_numel(xs) * s > OX_MAX_CONST_NUMEL) return ox_err(x, "the input with the stride's zeros would have over 2^30 elements");
    ir_attr r = {0}, z = {0};
    r.reshape.shape = d ? (ir_shape){4, {n, c * h, w, 1}} : (ir_shape){4, {n, c * h, 1, w}};
    z.slice_grad.slice = (ir_slice_attr){d ? 3 : 2, 0, 1};
    z.slice_grad.x_shape = d ? (ir_shape){4, {n, c * h, w, s}} : (ir_shape){4, {n, c * h, s, w}};
    int v = ox_part_node(x, d ? "cols" : "rows", IR_OP_reshape, &in, 1, &r);
    if (v < 0 || (v = ox_part_node(x, d ? "spread_cols" : "spread_rows", IR_OP_slice_grad, &v, 1, &z)) < 0) return -1;
    r.reshape.shape = d ? (ir_shape){4, {n, c, h, w * s}} : (ir_shape){4, {n, c, h * s, w}};
    if ((in = ox_part_node(x, d ? "up_cols" : "up_rows", IR_OP_reshape, &v, 1, &r)) < 0) return -1;
  }
  return in;
}

/* ConvTranspose (1-D and 2-D): y[oy] = sum over iy, ky with oy = iy*s - pad_begin + ky*d of
 * x[iy] w[ky].  It is a stride-1 conv2d over x with zeros spread between its pixels
 * (spread_zeros) and the weight flipped, input and output channels swapped per group; padded
 * by d(k-1) - pad_begin before and d(k-1) - pad_end + output_padding after (less the s-1
 * zeros spread_zeros leaves at the end; a negative amount crops the spread input).  Made of
 * reshape, slice_grad, slice and conv2d, it infers and trains with their kernels. */
static int conv_transpose(ox_ctx *x) {
  if (ox_check_attrs(x, "auto_pad,dilations,group,kernel_shape,output_padding,output_shape,pads,strides")) return -1;
  int in = ox_act(x, 0);
  if (in < 0) return -1;
  const ox_const *w = ox_need_const(x, 1, "the weight"), *b = NULL;
  if (!w) return -1;
  if (ox_has_input(x, 2) && !(b = ox_need_const(x, 2, "the bias"))) return -1;
  const ir_shape *xs0 = ox_shape(x, in);
  int nd = xs0->rank - 2, o = 2 - nd;
  if ((nd != 1 && nd != 2) || w->rank != nd + 2)
    return ox_err(x, "cnnc imports 1-D and 2-D transposed convolutions ([N, C, L] or [N, C, H, W] inputs, weights of the "
                     "same rank); this input has rank %d, the weight %d", xs0->rank, w->rank);
  int64_t group;
  if (ox_attr_int(x, "group", 1, &group) < 0) return -1;
  if (group < 1 || group > FE_MAX_CH || w->dims[0] != xs0->dim[1] || w->dims[0] % group ||
      w->dims[1] * group > FE_MAX_CH)
    return ox_err(x, "group %lld does not fit input channels %lld and weight [%lld, %lld, ...]", (long long)group,
                  (long long)xs0->dim[1], (long long)w->dims[0], (long long)w->dims[1]);
  int64_t cout = w->dims[1] * group, cin_g = w->dims[0] / group, cout_g = w->dims[1];
  if (b && (b->rank != 1 || b->dims[0] != cout)) return ox_err(x, "the bias must have shape [%lld]", (long long)cout);
  /* attributes per spatial dim (2-D order; a 1-D window is the W dim of height 1) */
  int64_t k[2] = {1, 1}, s[2] = {1, 1}, dl[2] = {1, 1}, op[2] = {0, 0}, pb[2] = {0, 0}, pe[2] = {0, 0}, v[8], in_len[2] = {1, 1};
  int n;
  for (int i = 0; i < nd; i++) {
    k[o + i] = w->dims[2 + i];
    in_len[o + i] = xs0->dim[2 + i];
  }
  static const char *const names[] = {"kernel_shape", "strides", "dilations", "output_padding"};
  int64_t *dst[] = {k, s, dl, op};
  for (int a = 0; a < 4; a++) {
    if (ox_attr_ints(x, names[a], 8, v, &n) < 0) return -1;
    if (!n) continue;
    if (n != nd) return ox_err(x, "attribute '%s' has %d items (%d expected)", names[a], n, nd);
    for (int i = 0; i < nd; i++) {
      if (v[i] < (a == 3 ? 0 : 1) || v[i] > FE_MAX_K)
        return ox_err(x, "attribute '%s' item %d is %lld (%d to %d)", names[a], i, (long long)v[i], a == 3 ? 0 : 1, FE_MAX_K);
      if (a == 0 && v[i] != w->dims[2 + i]) return ox_err(x, "attribute 'kernel_shape' does not match the weight's shape");
      dst[a][o + i] = v[i];
    }
  }
  for (int i = o; i < 2; i++)
    if (op[i] >= s[i] && op[i] >= dl[i])
      return ox_err(x, "attribute 'output_padding' item %d is %lld (less than the stride or the dilation)", i - o, (long long)op[i]);
  const char *ap;
  int64_t oshape[8];
  int n_os;
  if (ox_attr_str(x, "auto_pad", "NOTSET", &ap) < 0 || ox_attr_ints(x, "output_shape", 8, oshape, &n_os) < 0 ||
      ox_attr_ints(x, "pads", 8, v, &n) < 0)
    return -1;
  int same = !strcmp(ap, "SAME_UPPER") || !strcmp(ap, "SAME_LOWER");
  if (!same && strcmp(ap, "NOTSET") && strcmp(ap, "VALID"))
    return ox_err(x, "attribute 'auto_pad' is '%s' (NOTSET, SAME_UPPER, SAME_LOWER or VALID)", ap);
  if (n_os && n_os != nd) return ox_err(x, "attribute 'output_shape' has %d items (%d expected)", n_os, nd);
  if (n_os || same) { /* the pads that give output_shape (SAME: the input's size times the stride) */
    for (int i = o; i < 2; i++) {
      int64_t want = n_os ? oshape[i - o] : in_len[i] * s[i];
      if (want < 1 || want > FE_MAX_DIM) return ox_err(x, "output size %lld is out of range (1 to %d)", (long long)want, FE_MAX_DIM);
      int64_t total = s[i] * (in_len[i] - 1) + op[i] + (k[i] - 1) * dl[i] + 1 - want;
      int upper = !strcmp(ap, "SAME_UPPER");
      int64_t half = total >= 0 ? total / 2 : -((1 - total) / 2); /* floor(total / 2): a negative total adds at the end */
      pb[i] = upper ? half : total - half;
      pe[i] = total - pb[i];
    }
  } else if (!strcmp(ap, "NOTSET") && n) {
    if (n != 2 * nd) return ox_err(x, "attribute 'pads' has %d items (%d expected: the begins, then the ends)", n, 2 * nd);
    for (int i = 0; i < 2 * nd; i++) {
      if (v[i] < 0 || v[i] > FE_MAX_K) return ox_err(x, "attribute 'pads' item %d is %lld (0 to %d)", i, (long long)v[i], FE_MAX_K);
      (i < nd ? pb : pe)[o + i % nd] = v[i];
    }
  }
  int64_t P[4]; /* conv pads: top, left, bottom, right */
  for (int i = 0; i < 2; i++) {
    P[i] = (k[i] - 1) * dl[i] - pb[i];
    P[i + 2] = (k[i] - 1) * dl[i] - pe[i] + op[i] - (s[i] - 1);
  }
  if ((in = lift(x, in)) < 0 || (in = spread_zeros(x, in, (int)s[0], (int)s[1])) < 0) return -1;
  for (int i = 0; i < 2; i++) { /* a negative pad: crop the spread input */
    const ir_shape *us = ox_shape(x, in);
    int64_t len = us->dim[2 + i], c0 = P[i] < 0 ? -P[i] : 0, c1 = P[i + 2] < 0 ? -P[i + 2] : 0;
    if (!c0 && !c1) continue;
    if (c0 + c1 >= len) return ox_err(x, "the pads leave no input along spatial dim %d", i);
    ir_attr sa = {0};
    sa.slice = (ir_slice_attr){2 + i, c0, len - c0 - c1};
    if ((in = ox_part_node(x, i ? "crop_cols" : "crop_rows", IR_OP_slice, &in, 1, &sa)) < 0) return -1;
    P[i] += c0, P[i + 2] += c1;
  }
  for (int i = 0; i < 4; i++)
    if (P[i] > FE_MAX_K) return ox_err(x, "padding %lld is out of range", (long long)P[i]);
  int64_t wd[4] = {cout, cin_g, k[0], k[1]};
  ox_const *wc = ox_const_new(x, 4, wd, 0);
  if (!wc) return -1;
  for (int64_t g = 0; g < group; g++)
    for (int64_t co = 0; co < cout_g; co++)
      for (int64_t ci = 0; ci < cin_g; ci++)
        for (int64_t y = 0; y < k[0]; y++)
          for (int64_t xx = 0; xx < k[1]; xx++) {
            int64_t src = (((g * cin_g + ci) * cout_g + co) * k[0] + (k[0] - 1 - y)) * k[1] + (k[1] - 1 - xx);
            wc->f[(((g * cout_g + co) * cin_g + ci) * k[0] + y) * k[1] + xx] = w->is_int ? (float)w->i[src] : w->f[src];
          }
  ir_attr a = {0};
  ir_conv2d_attr *ca = &a.conv2d;
  for (int i = 0; i < 2; i++) {
    ca->kernel[i] = (int)k[i];
    ca->stride[i] = 1;
    ca->dilation[i] = (int)dl[i];
  }
  for (int i = 0; i < 4; i++) ca->pad[i] = (int)P[i];
  ca->groups = (int)group;
  int cin[3] = {in, ox_param(x, "weight", wc, 1, 0, NULL), -1}, n_in = 2;
  if (cin[1] < 0) return -1;
  if (b && (cin[n_in++] = ox_param(x, "bias", b, 1, 0, NULL)) < 0) return -1;
  return node_1d(x, nd == 1, IR_OP_conv2d, cin, n_in, &a);
}

/* ---- normalisation ------------------------------------------------------------------------ */
static int batchnorm(ox_ctx *x) {
  if (ox_check_attrs(x, "epsilon,momentum,training_mode,spatial,is_test,consumed_inputs")) return -1;
  double eps, mom;
  int64_t tm, spatial;
  if (ox_attr_float(x, "epsilon", 1e-5, &eps) < 0 || ox_attr_float(x, "momentum", 0.9, &mom) < 0 ||
      ox_attr_int(x, "training_mode", 0, &tm) < 0 || ox_attr_int(x, "spatial", 1, &spatial) < 0)
    return -1;
  if (!spatial) return ox_err(x, "spatial 0 (per-element statistics) is not supported");
  if (!(eps > 0 && eps < 1)) return ox_err(x, "attribute 'epsilon' is %g (0 < epsilon < 1)", eps);
  if (!(mom >= 0 && mom <= 1)) return ox_err(x, "attribute 'momentum' is %g (0 to 1)", mom);
  if (tm && x->training)
    return ox_err(x, "training_mode 1 (an export in training mode) is inference-only here; export in eval mode and "
                     "compile with --mode training to train");
  if (tm) return ox_bn_training(x, eps, mom); /* onnx_reduce.c */
  int in[5] = {ox_act(x, 0)};
  if (in[0] < 0 || only_first_output(x)) return -1;
  int is1d = ox_shape(x, in[0])->rank == 3;
  if (ox_shape(x, in[0])->rank < 3) return ox_err(x, "the input must be [N, C, L] or [N, C, H, W]");
  if ((in[0] = lift(x, in[0])) < 0) return -1;
  const ir_shape *xs = ox_shape(x, in[0]);
  static const char *const names[] = {"gamma", "beta", "running_mean", "running_var"};
  static const char *const what[] = {"the scale", "the bias", "the mean", "the variance"};
  for (int i = 0; i < 4; i++) {
    const ox_const *c = ox_need_const(x, i + 1, what[i]);
    if (!c) return -1;
    if (c->numel != xs->dim[1] || c->rank != 1)
      return ox_err(x, "%s has %lld values, one per channel (%lld) expected", what[i], (long long)c->numel,
                    (long long)xs->dim[1]);
    if ((in[i + 1] = ox_param(x, names[i], c, i < 2, 0, NULL)) < 0) return -1;
  }
  ir_attr a = {0};
  a.batchnorm.eps = (float)eps;
  a.batchnorm.momentum = (float)(1.0 - mom); /* ONNX: running = m*running + (1-m)*batch */
  a.batchnorm.training = x->training;
  return node_1d(x, is1d, IR_OP_batchnorm, in, 5, &a);
}

/* ---- element-wise ------------------------------------------------------------------------ */
static int unary(ox_ctx *x, ir_op op) {
  if (ox_check_attrs(x, "")) return -1;
  int in = ox_act(x, 0);
  return in < 0 ? -1 : ox_node(x, op, &in, 1, NULL);
}

/* Is the current node's output read once, by a Mul of it and the node's input?  Then the
 * node is not emitted and the Mul becomes swish (Sigmoid) or hardswish (HardSigmoid). */
static int gate_of_mul(ox_ctx *x) {
  const char *out = x->node->output[0], *src = x->node->input[0];
  int slot, k = ox_uses(x, out) == 1 ? ox_next_reader(x, out, &slot) : -1;
  if (k < 0) return 0;
  const Onnx__NodeProto *p = x->graph->node[k];
  return p->op_type && !strcmp(p->op_type, "Mul") && p->n_input == 2 && !strcmp(p->input[1 - slot], src);
}

static int fold_gate(ox_ctx *x, int in, ir_op op) {
  const char *out = x->node->output[0];
  if (ox_bind(x, out, -1, NULL)) return -1;
  ox_find(x, out)->swish_of = in + 1;
  ox_find(x, out)->gate = op;
  return 0;
}

static int sigmoid(ox_ctx *x) {
  if (ox_check_attrs(x, "")) return -1;
  int in = ox_act(x, 0);
  if (in < 0) return -1;
  if (gate_of_mul(x)) return fold_gate(x, in, IR_OP_swish);
  return ox_node(x, IR_OP_sigmoid, &in, 1, NULL);
}

static int hardsigmoid(ox_ctx *x) {
  if (ox_check_attrs(x, "alpha,beta,consumed_inputs")) return -1;
  int in = ox_act(x, 0);
  double alpha, beta;
  if (in < 0 || ox_attr_float(x, "alpha", 0.2, &alpha) < 0 || ox_attr_float(x, "beta", 0.5, &beta) < 0) return -1;
  /* x * HardSigmoid(x; 1/6, 1/2) is hardswish (how torch.onnx exports nn.Hardswish at opset < 14) */
  if (fabs(alpha - 1.0 / 6.0) < 1e-7 && beta == 0.5 && gate_of_mul(x)) return fold_gate(x, in, IR_OP_hardswish);
  ir_attr a = {0};
  a.hardsigmoid.alpha = (float)alpha;
  a.hardsigmoid.beta = (float)beta;
  return ox_node(x, IR_OP_hardsigmoid, &in, 1, &a);
}

/* Clip: bounds are attributes before opset 11, optional constant inputs from 11. */
static int clip(ox_ctx *x) {
  if (ox_check_attrs(x, x->opset < 11 ? "min,max,consumed_inputs" : "")) return -1;
  int in = ox_act(x, 0);
  if (in < 0) return -1;
  double b[2] = {-INFINITY, INFINITY};
  for (int i = 0; i < 2; i++) {
    if (x->opset < 11) {
      if (ox_attr_float(x, i ? "max" : "min", b[i], &b[i]) < 0) return -1;
    } else if (ox_has_input(x, i + 1)) {
      const ox_const *c = ox_need_const(x, i + 1, i ? "max" : "min");
      if (!c) return -1;
      if (c->numel != 1) return ox_err(x, "input %d (%s) must be a single value", i + 1, i ? "max" : "min");
      if (c->is_int && (c->i[0] > IR_F32_EXACT_INT || c->i[0] < -IR_F32_EXACT_INT))
        return ox_err(x, "input %d (%s) is %lld: beyond 2^24, not an exact f32", i + 1, i ? "max" : "min", (long long)c->i[0]);
      b[i] = c->is_int ? (double)c->i[0] : c->f[0];
    }
  }
  if (!(b[0] <= b[1])) return ox_err(x, "min (%g) exceeds max (%g)", b[0], b[1]);
  ir_attr a = {0};
  a.clip.lo = (float)b[0];
  a.clip.hi = (float)b[1];
  return ox_node(x, IR_OP_clip, &in, 1, &a);
}

/* Add and Mul: IR broadcasting goes from in[1] to in[0], so the larger operand comes first.
 * Before opset 7 broadcasting was explicit (broadcast=1) and aligned B at attribute axis
 * (default: B's dims are A's last dims): a constant B is given trailing 1s to match. */
int ox_binary(ox_ctx *x, ir_op op) {
  if (ox_check_attrs(x, x->opset < 7 ? "broadcast,axis,consumed_inputs" : "")) return -1;
  if (x->node->n_input != 2) return ox_err(x, "takes 2 inputs (got %zu)", x->node->n_input);
  ox_val *u = ox_input(x, 0), *v = ox_input(x, 1);
  if (!u || !v) return -1;
  if (op == IR_OP_mul && (u->swish_of || v->swish_of)) { /* Mul(x, Sigmoid(x)): see gate_of_mul() */
    const ox_val *gate = u->swish_of ? u : v;
    int in = gate->swish_of - 1;
    return ox_node(x, (ir_op)gate->gate, &in, 1, NULL);
  }
  int a = ox_act(x, 0);
  if (a < 0) return -1;
  int64_t bc, axis;
  if (ox_attr_int(x, "broadcast", 0, &bc) < 0 || ox_attr_int(x, "axis", -1, &axis) < 0) return -1;
  int b;
  if (x->opset < 7 && bc && ox_attr(x, "axis")) {
    const ox_const *c = ox_need_const(x, 1, "B broadcast at an axis");
    const ir_shape *as = ox_shape(x, a);
    if (!c) return -1;
    if (axis < 0) axis += as->rank;
    if (axis < 0 || axis + c->rank > as->rank) return ox_err(x, "axis %lld does not fit B's rank %d in A's rank %d", (long long)axis, c->rank, as->rank);
    int64_t dims[IR_MAX_RANK];
    int r = as->rank - (int)axis;
    for (int i = 0; i < r; i++) dims[i] = i < c->rank ? c->dims[i] : 1;
    if ((b = ox_param(x, "const1", c, 0, r, dims)) < 0) return -1;
  } else if ((b = ox_act(x, 1)) < 0) {
    return -1;
  }
  if (x->opset < 7 && !bc && !ir_shape_eq(ox_shape(x, a), ox_shape(x, b)))
    return ox_err(x, "the operands' shapes differ but attribute 'broadcast' is not 1");
  if (ir_shape_numel(ox_shape(x, a)) < ir_shape_numel(ox_shape(x, b)) ||
      (x->g->values[a].kind == IR_VAL_PARAM && x->g->values[b].kind != IR_VAL_PARAM)) {
    int t = a;
    a = b;
    b = t;
  }
  int in[2] = {a, b};
  return ox_node(x, op, in, 2, NULL);
}


/* ---- aliases and constants ------------------------------------------------------------- */
/* Identity, Dropout: the input under the output's name.  Dropout's mask (output 1, when read)
 * is all true in inference: ones (a frozen [1, ..]) expanded to the input's shape, BOOL. */
static int alias(ox_ctx *x, const char *attrs) {
  int drop = !strcmp(x->node->op_type, "Dropout");
  if (ox_check_attrs(x, attrs) || (!drop && only_first_output(x))) return -1;
  ox_val *v = ox_input(x, 0);
  if (!v) return -1;
  const char *mask = drop && x->node->n_output > 1 ? x->node->output[1] : "";
  if (mask[0] && ox_uses(x, mask)) {
    int in = ox_act(x, 0);
    if (in < 0) return -1;
    ir_attr e = {.expand = {*ox_shape(x, in), 0}};
    int64_t ones[IR_MAX_RANK];
    for (int d = 0; d < e.expand.shape.rank; d++) ones[d] = 1;
    ox_const *c = ox_const_new(x, e.expand.shape.rank, ones, 0);
    c->f[0] = 1.0f;
    int p = ox_param(x, "ones", c, 0, 0, NULL), m = p < 0 ? -1 : ox_part_node(x, "mask", IR_OP_expand, &p, 1, &e);
    if (m < 0 || ox_bind(x, mask, m, NULL)) return -1;
    ox_find(x, mask)->itype = OX_BOOL;
  }
  if (!strcmp(x->node->op_type, "Dropout") && ox_has_input(x, 2)) {
    const ox_val *t = ox_input(x, 2);
    if (!t) return -1;
    if (!t->c) return ox_err(x, "input 2 (training_mode) must be a constant");
    if ((t->c->is_int ? t->c->i[0] != 0 : t->c->f[0] != 0))
      return ox_err(x, "training_mode true is not supported (export in eval mode)");
  }
  return ox_bind(x, x->node->output[0], v->ir, v->c);
}

static int constant(ox_ctx *x) {
  if (ox_check_attrs(x, "value,value_float,value_floats,value_int,value_ints,sparse_value,value_string,value_strings"))
    return -1;
  if (x->node->n_attribute != 1) return ox_err(x, "needs exactly one value attribute (got %zu)", x->node->n_attribute);
  const Onnx__AttributeProto *at = x->node->attribute[0];
  const char *nm = at->name;
  ox_const *c = NULL;
  if (!strcmp(nm, "value")) {
    if (!at->t) return ox_err(x, "attribute 'value' holds no tensor");
    c = ox_tensor(x, at->t, "constant");
  } else if (!strcmp(nm, "value_float")) {
    c = ox_const_new(x, 0, NULL, 0);
    c->f[0] = at->f;
  } else if (!strcmp(nm, "value_int")) {
    c = ox_const_new(x, 0, NULL, 1);
    c->i[0] = at->i;
  } else if (!strcmp(nm, "value_floats") || !strcmp(nm, "value_ints")) {
    int isint = nm[6] == 'i';
    int64_t n = isint ? (int64_t)at->n_ints : (int64_t)at->n_floats;
    c = ox_const_new(x, 1, &n, isint);
    for (int64_t k = 0; k < n; k++) {
      if (isint) c->i[k] = at->ints[k];
      else c->f[k] = at->floats[k];
    }
  } else {
    return ox_err(x, "attribute '%s' (sparse or string constants) is not supported", nm);
  }
  return c ? ox_bind(x, x->node->output[0], -1, c) : -1;
}

/* ---- dispatch ---------------------------------------------------------------------------- */
typedef struct ox_op { const char *name; int (*fn)(ox_ctx *); } ox_op;

static int op_relu(ox_ctx *x) { return unary(x, IR_OP_relu); }
static int op_maxpool(ox_ctx *x) { return pool(x, IR_OP_maxpool); }
static int op_avgpool(ox_ctx *x) { return pool(x, IR_OP_avgpool); }
static int op_gap(ox_ctx *x) {
  if (ox_check_attrs(x, "")) return -1;
  int in = ox_act(x, 0);
  if (in < 0) return -1;
  if (ox_shape(x, in)->rank != 4) return ox_err(x, "the input must be [N, C, H, W]");
  return ox_node(x, IR_OP_global_avgpool, &in, 1, NULL);
}
/* GlobalMaxPool: a max pool whose window is the whole plane. */
static int op_global_maxpool(ox_ctx *x) {
  if (ox_check_attrs(x, "")) return -1;
  int in = ox_act(x, 0);
  if (in < 0) return -1;
  const ir_shape *s = ox_shape(x, in);
  if (s->rank != 4) return ox_err(x, "the input must be [N, C, H, W]");
  if (s->dim[2] > FE_MAX_K || s->dim[3] > FE_MAX_K) return ox_err(x, "a plane larger than %dx%d is not supported", FE_MAX_K, FE_MAX_K);
  ir_attr a = {0};
  a.maxpool.kernel[0] = a.maxpool.stride[0] = (int)s->dim[2];
  a.maxpool.kernel[1] = a.maxpool.stride[1] = (int)s->dim[3];
  return ox_node(x, IR_OP_maxpool, &in, 1, &a);
}

static int op_hardswish(ox_ctx *x) { return unary(x, IR_OP_hardswish); }
static int op_leaky_relu(ox_ctx *x) {
  if (ox_check_attrs(x, "alpha")) return -1;
  int in = ox_act(x, 0);
  double alpha;
  if (in < 0 || ox_attr_float(x, "alpha", 0.01, &alpha) < 0) return -1;
  ir_attr a = {0};
  a.leaky_relu.alpha = (float)alpha;
  return ox_node(x, IR_OP_leaky_relu, &in, 1, &a);
}
/* LRN (opsets 1, 13): size required; alpha, beta, bias as ir_lrn_check allows. */
static int op_lrn(ox_ctx *x) {
  if (ox_check_attrs(x, "size,alpha,beta,bias")) return -1;
  int in = ox_act(x, 0);
  if (in < 0) return -1;
  int64_t size;
  double alpha, beta, bias;
  int has_size = ox_attr_int(x, "size", 0, &size);
  if (has_size < 0 || ox_attr_float(x, "alpha", 1e-4, &alpha) < 0 ||
      ox_attr_float(x, "beta", 0.75, &beta) < 0 || ox_attr_float(x, "bias", 1.0, &bias) < 0)
    return -1;
  if (!has_size) return ox_err(x, "attribute 'size' is required");
  if (size < 1 || size > IR_LRN_MAX_SIZE) return ox_err(x, "attribute 'size' (%lld) is out of range (1 to %d)", (long long)size, IR_LRN_MAX_SIZE);
  if (!isfinite(alpha) || alpha < 0 || alpha > 1e30) return ox_err(x, "attribute 'alpha' (%g) must be finite and >= 0", alpha);
  if (!isfinite(beta) || fabs(beta) > 1e30) return ox_err(x, "attribute 'beta' (%g) must be finite", beta);
  if (!isfinite(bias) || !(bias > 0) || bias > 1e30) return ox_err(x, "attribute 'bias' (%g) must be finite and > 0", bias);
  const ir_shape *s = &x->g->values[in].shape;
  if (s->rank < 3) return ox_err(x, "LRN needs an [N, C, ...] input of rank >= 3; this input has rank %d", s->rank);
  ir_attr a = {0};
  a.lrn = (ir_lrn_attr){(int)size, (float)alpha, (float)beta, (float)bias};
  return ox_node(x, IR_OP_lrn, &in, 1, &a);
}
static int op_identity(ox_ctx *x) { return alias(x, ""); }
static int op_dropout(ox_ctx *x) { return alias(x, "ratio,seed,is_test,consumed_inputs"); }

static const ox_op ops[] = {
    {"AveragePool", op_avgpool}, {"BatchNormalization", batchnorm}, {"Constant", constant},
    {"Conv", conv},              {"Dropout", op_dropout},           {"Flatten", ox_op_flatten},
    {"Gemm", ox_op_gemm},              {"GlobalAveragePool", op_gap},     {"Identity", op_identity},
    {"MatMul", ox_op_matmul},          {"MaxPool", op_maxpool},           {"Mul", ox_op_mul},
    {"Relu", op_relu},           {"Reshape", ox_op_reshape},              {"Sigmoid", sigmoid},
    {"Softmax", ox_op_softmax},        {"Add", ox_op_add},                   {"Sub", ox_op_sub},
    {"Div", ox_op_div},             {"Shape", ox_op_shape_op},               {"Gather", ox_op_gather},
    {"Unsqueeze", ox_op_unsqueeze}, {"Squeeze", ox_op_squeeze},           {"Cast", ox_op_cast},
    {"Concat", ox_op_concat},          {"Clip", clip},                    {"HardSigmoid", hardsigmoid},
    {"HardSwish", op_hardswish}, {"Slice", ox_op_slice},                  {"Split", ox_op_split},
    {"ConstantOfShape", ox_op_constant_of_shape}, {"LeakyRelu", op_leaky_relu}, {"LRN", op_lrn},
    {"GlobalMaxPool", op_global_maxpool},
    {"ConvInteger", conv},        {"MatMulInteger", ox_op_matmul_integer}, {"ReduceMax", ox_op_reduce_max},
    {"ReduceSum", ox_op_reduce_sum}, {"Exp", ox_op_exp}, {"Sqrt", ox_op_sqrt}, {"Neg", ox_op_neg}, {"MaxUnpool", ox_op_max_unpool},
    {"Pad", ox_op_pad},                {"Transpose", ox_op_transpose},          {"Hardmax", ox_op_hardmax},   {"ConvTranspose", conv_transpose},   {"LogSoftmax", ox_op_log_softmax},          {"ReduceMean", ox_op_reduce_mean},
};

const char *ox_supported(void) {
  static char buf[1024];
  if (!buf[0]) {
    const char *names[sizeof ops / sizeof *ops];
    int n = (int)(sizeof ops / sizeof *ops);
    for (int i = 0; i < n; i++) names[i] = ops[i].name;
    for (int i = 1; i < n; i++) /* sorted for the message */
      for (int j = i; j > 0 && strcmp(names[j - 1], names[j]) > 0; j--) {
        const char *t = names[j];
        names[j] = names[j - 1];
        names[j - 1] = t;
      }
    size_t off = 0;
    for (int i = 0; i < n && off < sizeof buf; i++) off += (size_t)snprintf(buf + off, sizeof buf - off, "%s%s", i ? ", " : "", names[i]);
  }
  return buf;
}

/* Integer activations (docs/onnx.md "Integer tensors") may be read by: ops that move or pick
 * elements (their result the same integer type), the integer arithmetic and products
 * (onnx_integer.c, which type their results), Shape, and MaxUnpool's indices. */
static const char *const int_movers[] = {"Identity", "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Transpose", "Slice", "Concat",
                                         "Split", "Pad", "MaxPool", "Clip", "Relu", "ReduceMax", NULL};
static const char *const int_readers[] = {"Add", "Sub", "Mul", "Div", "ConvInteger", "MatMulInteger", "Shape", "MaxUnpool", NULL};

static int in_list(const char *const *l, const char *op) {
  for (; *l; l++)
    if (!strcmp(*l, op)) return 1;
  return 0;
}

int ox_convert(ox_ctx *x) {
  const char *op = x->node->op_type;
  for (size_t i = 0; i < sizeof ops / sizeof *ops; i++)
    if (!strcmp(ops[i].name, op)) {
      if (x->node->n_output < 1 || !x->node->output[0][0]) return ox_err(x, "the node has no output");
      int itype = 0, mover = in_list(int_movers, op);
      for (size_t k = 0; k < x->node->n_input; k++) {
        const ox_val *v = x->node->input[k][0] ? ox_find(x, x->node->input[k]) : NULL;
        if (!v || v->ir < 0 || !v->itype) continue;
        if ((!mover && !in_list(int_readers, op)) || (!strcmp(op, "MaxUnpool") && k != 1))
          return ox_err(x, "input %zu '%s' is an integer tensor, which cnnc's %s does not take (integer tensors: docs/onnx.md)", k,
                        v->name, op);
        if (!strcmp(op, "Clip") || !strcmp(op, "Pad")) /* the result stays an integer tensor: integer bounds / value only */
          for (size_t q = 1; q < x->node->n_input; q++) {
            const ox_val *c = x->node->input[q][0] ? ox_find(x, x->node->input[q]) : NULL;
            if (c && c->ir < 0 && c->c && !c->c->is_int)
              for (int64_t e = 0; e < c->c->numel; e++)
                if (c->c->f[e] != floorf(c->c->f[e]))
                  return ox_err(x, "input %zu is %g, not an integer: %s of the integer tensor '%s' would not be one", q,
                                (double)c->c->f[e], op, v->name);
          }
        if (!itype) itype = v->itype;
      }
      if (ops[i].fn(x)) return -1;
      for (size_t k = 0; mover && itype && k < x->node->n_output; k++) { /* the result keeps the type */
        ox_val *v = x->node->output[k][0] ? ox_find(x, x->node->output[k]) : NULL;
        if (v && v->ir >= 0 && !v->itype) v->itype = itype;
      }
      return 0;
    }
  return ox_err(x, "operator not supported (supported: %s)", ox_supported());
}
