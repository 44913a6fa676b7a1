/* gen_shape.c — shape-only ops.  reshape keeps the elements in order (logical layout is
 * contiguous), so its kernel is a parallel copy; concat, slice and slice_grad copy blocks:
 * for each of `outer` rows (the dims before the axis), a contiguous run of elements. */
#include "codegen/cg_internal.h"

LLVMValueRef cg_gen_reshape(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind) {
  return cg_gen_unary(c, n, fn_name, kind, "reshape_copy");
}

/* One block copy: dst[o*dst_row + dst_off + r] = src[o*src_row + src_off + r] (0 when src is
 * NULL) for o < outer, r < len. */
typedef struct blk { LLVMValueRef src, dst; int64_t len, src_row, src_off, dst_row, dst_off; LLVMValueRef so, dof; } blk;

static void blk_body(cg_ctx *c, LLVMValueRef j, int w, void *user) {
  blk *b = user;
  LLVMValueRef v = b->src ? cg_load_v(c, b->src, LLVMBuildAdd(c->b, b->so, j, ""), w) : cg_fzero(c, w);
  cg_store_v(c, v, b->dst, LLVMBuildAdd(c->b, b->dof, j, ""), w);
}

static void copy_block(cg_ctx *c, blk *b, int64_t outer, LLVMValueRef tid, LLVMValueRef nth) {
  LLVMBuilderRef B = c->b;
  int w = c->target->vec_f32;
  LLVMValueRef lo, hi;
  cg_loop L;
  if (b->len % w == 0) { /* whole vectors: split the block's vectors over the threads */
    cg_thread_range(c, cg_i64(c, outer * b->len / w), tid, nth, &lo, &hi);
    LLVMValueRef v = cg_loop_begin(c, &L, lo, hi, cg_i64(c, 1), "v");
    LLVMValueRef e = LLVMBuildMul(B, v, cg_i64(c, w), "");
    LLVMValueRef o = outer == 1 ? cg_i64(c, 0) : LLVMBuildUDiv(B, e, cg_i64(c, b->len), "o");
    LLVMValueRef r = LLVMBuildSub(B, e, LLVMBuildMul(B, o, cg_i64(c, b->len), ""), "r");
    b->so = LLVMBuildAdd(B, LLVMBuildMul(B, o, cg_i64(c, b->src_row), ""), cg_i64(c, b->src_off), "");
    b->dof = LLVMBuildAdd(B, LLVMBuildMul(B, o, cg_i64(c, b->dst_row), ""), cg_i64(c, b->dst_off), "");
    blk_body(c, r, w, b);
    cg_loop_end(c, &L);
    return;
  }
  cg_thread_range(c, cg_i64(c, outer), tid, nth, &lo, &hi); /* rows over the threads */
  LLVMValueRef o = cg_loop_begin(c, &L, lo, hi, cg_i64(c, 1), "o");
  b->so = LLVMBuildAdd(B, LLVMBuildMul(B, o, cg_i64(c, b->src_row), ""), cg_i64(c, b->src_off), "");
  b->dof = LLVMBuildAdd(B, LLVMBuildMul(B, o, cg_i64(c, b->dst_row), ""), cg_i64(c, b->dst_off), "");
  cg_inner_loop(c, b->len, blk_body, b);
  cg_loop_end(c, &L);
}

static void split_at(const ir_shape *s, int axis, int64_t *outer, int64_t *inner) {
  *outer = *inner = 1;
  for (int k = 0; k < axis; k++) *outer *= s->dim[k];
  for (int k = axis + 1; k < s->rank; k++) *inner *= s->dim[k];
}

LLVMValueRef cg_gen_concat(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind) {
  LLVMValueRef f, a[IR_MAX_IN + 3], op[IR_MAX_IN];
  int n_act = cg_kernel_begin_ops(c, n, fn_name, &f, a, op);
  const ir_shape *os = &c->g->values[n->out].shape;
  int ax = n->attr.concat.axis;
  int64_t outer, inner, off = 0;
  split_at(os, ax, &outer, &inner);
  for (int i = 0; i < n->n_in; i++) {
    int64_t len = c->g->values[n->in[i]].shape.dim[ax] * inner;
    blk b = {op[i], a[n_act], len, len, 0, os->dim[ax] * inner, off, NULL, NULL};
    copy_block(c, &b, outer, a[n_act + 1], a[n_act + 2]);
    off += len;
  }
  cg_kernel_end(c);
  *kind = cg_kind(c, "concat", NULL);
  return f;
}

LLVMValueRef cg_gen_concat_inplace(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind) {
  LLVMValueRef f, a[IR_MAX_IN + 3], op[IR_MAX_IN];
  cg_kernel_begin_ops(c, n, fn_name, &f, a, op);
  cg_kernel_end(c);
  *kind = cg_kind(c, "concat_inplace", NULL);
  return f;
}

/* One plane copy per output channel: out channel i*G + j <- in channel j*(C/G) + i. */
LLVMValueRef cg_gen_channel_shuffle(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind) {
  LLVMValueRef f, a[IR_MAX_IN + 3], op[IR_MAX_IN];
  int n_act = cg_kernel_begin_ops(c, n, fn_name, &f, a, op);
  const ir_shape *s = &c->g->values[n->in[0]].shape;
  int64_t outer, plane, C = s->dim[1], G = n->attr.channel_shuffle.groups;
  split_at(s, 1, &outer, &plane);
  LLVMBuilderRef B = c->b;
  LLVMValueRef lo, hi;
  cg_thread_range(c, cg_i64(c, outer * C), a[n_act + 1], a[n_act + 2], &lo, &hi); /* output planes */
  cg_loop L;
  LLVMValueRef p = cg_loop_begin(c, &L, lo, hi, cg_i64(c, 1), "plane");
  LLVMValueRef o = LLVMBuildUDiv(B, p, cg_i64(c, C), ""), ch = LLVMBuildURem(B, p, cg_i64(c, C), "");
  LLVMValueRef i = LLVMBuildUDiv(B, ch, cg_i64(c, G), ""), j = LLVMBuildURem(B, ch, cg_i64(c, G), "");
  LLVMValueRef src = LLVMBuildAdd(B, LLVMBuildMul(B, o, cg_i64(c, C), ""),
                                  LLVMBuildAdd(B, LLVMBuildMul(B, j, cg_i64(c, C / G), ""), i, ""), "");
  blk b = {op[0], a[n_act], plane, 0, 0, 0, 0, LLVMBuildMul(B, src, cg_i64(c, plane), ""),
           LLVMBuildMul(B, p, cg_i64(c, plane), "")};
  cg_inner_loop(c, plane, blk_body, &b);
  cg_loop_end(c, &L);
  cg_kernel_end(c);
  *kind = cg_kind(c, "channel_shuffle", NULL);
  return f;
}

/* A slice with a step (ir_slice_step != 1): one output row (outer index o, slice index i) of
 * `inner` elements per work item, read from row start + i*step. */
static void slice_rows(cg_ctx *c, const ir_slice_attr *s, int64_t outer, int64_t inner, int64_t dim, LLVMValueRef src,
                       LLVMValueRef dst, LLVMValueRef tid, LLVMValueRef nth) {
  LLVMBuilderRef B = c->b;
  LLVMValueRef lo, hi;
  cg_thread_range(c, cg_i64(c, outer * s->len), tid, nth, &lo, &hi);
  cg_loop L;
  LLVMValueRef r = cg_loop_begin(c, &L, lo, hi, cg_i64(c, 1), "row");
  LLVMValueRef o = LLVMBuildUDiv(B, r, cg_i64(c, s->len), ""), i = LLVMBuildURem(B, r, cg_i64(c, s->len), "");
  LLVMValueRef at = LLVMBuildAdd(B, cg_i64(c, s->start), LLVMBuildMul(B, i, cg_i64(c, ir_slice_step(s)), ""), "");
  LLVMValueRef so = LLVMBuildMul(B, LLVMBuildAdd(B, LLVMBuildMul(B, o, cg_i64(c, dim), ""), at, ""), cg_i64(c, inner), "");
  blk b = {src, dst, inner, 0, 0, 0, 0, so, LLVMBuildMul(B, r, cg_i64(c, inner), "")};
  cg_inner_loop(c, inner, blk_body, &b);
  cg_loop_end(c, &L);
}

LLVMValueRef cg_gen_slice(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind) {
  LLVMValueRef f, a[IR_MAX_IN + 3], op[IR_MAX_IN];
  int n_act = cg_kernel_begin_ops(c, n, fn_name, &f, a, op);
  const ir_slice_attr *s = &n->attr.slice;
  int64_t outer, inner, dim = c->g->values[n->in[0]].shape.dim[s->axis];
  split_at(&c->g->values[n->in[0]].shape, s->axis, &outer, &inner);
  if (ir_slice_step(s) != 1) {
    slice_rows(c, s, outer, inner, dim, op[0], a[n_act], a[n_act + 1], a[n_act + 2]);
  } else {
    blk b = {op[0], a[n_act], s->len * inner, dim * inner, s->start * inner, s->len * inner, 0, NULL, NULL};
    copy_block(c, &b, outer, a[n_act + 1], a[n_act + 2]);
  }
  cg_kernel_end(c);
  *kind = cg_kind(c, ir_slice_step(s) != 1 ? "slice_step" : "slice", NULL);
  return f;
}

/* dx: dy copied to the slice, zeros written around it (each element written once).  With a
 * step: per dx row (outer index o, index j along the axis), dy's row i when j = start + i*step,
 * else zeros. */
LLVMValueRef cg_gen_slice_grad(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind) {
  LLVMValueRef f, a[IR_MAX_IN + 3], op[IR_MAX_IN];
  int n_act = cg_kernel_begin_ops(c, n, fn_name, &f, a, op);
  const ir_slice_attr *s = &n->attr.slice_grad.slice;
  const ir_shape *xs = &n->attr.slice_grad.x_shape;
  int64_t outer, inner;
  split_at(xs, s->axis, &outer, &inner);
  int64_t dim = xs->dim[s->axis], st = ir_slice_step(s);
  if (st != 1) {
    LLVMBuilderRef B = c->b;
    LLVMValueRef lo, hi;
    cg_thread_range(c, cg_i64(c, outer * dim), a[n_act + 1], a[n_act + 2], &lo, &hi);
    cg_loop L;
    LLVMValueRef r = cg_loop_begin(c, &L, lo, hi, cg_i64(c, 1), "row");
    LLVMValueRef o = LLVMBuildUDiv(B, r, cg_i64(c, dim), ""), j = LLVMBuildURem(B, r, cg_i64(c, dim), "");
    LLVMValueRef dd = LLVMBuildSub(B, j, cg_i64(c, s->start), ""); /* i*step when j is in the slice */
    LLVMValueRef i = LLVMBuildSDiv(B, dd, cg_i64(c, st), "");
    LLVMValueRef hit = LLVMBuildAnd(B, LLVMBuildICmp(B, LLVMIntEQ, LLVMBuildSRem(B, dd, cg_i64(c, st), ""), cg_i64(c, 0), ""),
                                    LLVMBuildAnd(B, LLVMBuildICmp(B, LLVMIntSGE, i, cg_i64(c, 0), ""),
                                                 LLVMBuildICmp(B, LLVMIntSLT, i, cg_i64(c, s->len), ""), ""), "hit");
    LLVMValueRef dof = LLVMBuildMul(B, r, cg_i64(c, inner), "");
    cg_if fi;
    cg_if_begin(c, &fi, hit);
    LLVMValueRef so = LLVMBuildMul(B, LLVMBuildAdd(B, LLVMBuildMul(B, o, cg_i64(c, s->len), ""), i, ""), cg_i64(c, inner), "");
    blk b = {op[0], a[n_act], inner, 0, 0, 0, 0, so, dof};
    cg_inner_loop(c, inner, blk_body, &b);
    cg_if_else(c, &fi);
    blk z = {NULL, a[n_act], inner, 0, 0, 0, 0, NULL, dof};
    cg_inner_loop(c, inner, blk_body, &z);
    cg_if_end(c, &fi);
    cg_loop_end(c, &L);
    cg_kernel_end(c);
    *kind = cg_kind(c, "slice_grad_step", NULL);
    return f;
  }
  int64_t row = dim * inner, a0 = s->start * inner, len = s->len * inner, a1 = a0 + len;
  blk mid = {op[0], a[n_act], len, len, 0, row, a0, NULL, NULL};
  copy_block(c, &mid, outer, a[n_act + 1], a[n_act + 2]);
  if (a0 > 0) {
    blk z = {NULL, a[n_act], a0, 0, 0, row, 0, NULL, NULL};
    copy_block(c, &z, outer, a[n_act + 1], a[n_act + 2]);
  }
  if (a1 < row) {
    blk z = {NULL, a[n_act], row - a1, 0, 0, row, a1, NULL, NULL};
    copy_block(c, &z, outer, a[n_act + 1], a[n_act + 2]);
  }
  cg_kernel_end(c);
  *kind = cg_kind(c, "slice_grad", NULL);
  return f;
}

/* transpose: one output row (the last output dim) per work item; its source is contiguous
 * (a block copy) when perm keeps the last dim last, else a strided gather. */
LLVMValueRef cg_gen_transpose(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind) {
  LLVMValueRef f, a[IR_MAX_IN + 3], op[IR_MAX_IN];
  int n_act = cg_kernel_begin_ops(c, n, fn_name, &f, a, op);
  const ir_shape *xs = &c->g->values[n->in[0]].shape;
  const int *perm = n->attr.transpose.perm;
  int r = xs->rank;
  int64_t st[IR_MAX_RANK], od[IR_MAX_RANK], os[IR_MAX_RANK], rows = 1;
  for (int k = r - 1, s = 1; k >= 0; s *= (int)xs->dim[k], k--) st[k] = s;
  for (int i = 0; i < r; i++) od[i] = xs->dim[perm[i]], os[i] = st[perm[i]]; /* os: input stride of out dim i */
  for (int i = 0; i < r - 1; i++) rows *= od[i];
  int64_t inner = od[r - 1], s_in = os[r - 1];
  LLVMBuilderRef B = c->b;
  LLVMValueRef lo, hi;
  cg_thread_range(c, cg_i64(c, rows), a[n_act + 1], a[n_act + 2], &lo, &hi);
  cg_loop L;
  LLVMValueRef row = cg_loop_begin(c, &L, lo, hi, cg_i64(c, 1), "row");
  LLVMValueRef src = cg_i64(c, 0), rest = row;
  for (int i = r - 2; i >= 0; i--) { /* row = ((o0 * od1) + o1) * od2 + o2 ... */
    LLVMValueRef oi = i ? LLVMBuildURem(B, rest, cg_i64(c, od[i]), "") : rest;
    if (i) rest = LLVMBuildUDiv(B, rest, cg_i64(c, od[i]), "");
    src = LLVMBuildAdd(B, src, LLVMBuildMul(B, oi, cg_i64(c, os[i]), ""), "");
  }
  LLVMValueRef dst = LLVMBuildMul(B, row, cg_i64(c, inner), "");
  if (s_in == 1) {
    blk b = {op[0], a[n_act], inner, 0, 0, 0, 0, src, dst};
    cg_inner_loop(c, inner, blk_body, &b);
  } else {
    cg_loop J;
    LLVMValueRef j = cg_loop_begin(c, &J, cg_i64(c, 0), cg_i64(c, inner), cg_i64(c, 1), "j");
    LLVMValueRef v = cg_load_f32(c, op[0], LLVMBuildAdd(B, src, LLVMBuildMul(B, j, cg_i64(c, s_in), ""), ""));
    cg_store_f32(c, v, a[n_act], LLVMBuildAdd(B, dst, j, ""));
    cg_loop_end(c, &J);
  }
  cg_loop_end(c, &L);
  cg_kernel_end(c);
  *kind = cg_kind(c, s_in == 1 ? "transpose_rows" : "transpose_gather", NULL);
  return f;
}
