/* gen_eltwise.c — element-wise kernels: relu, sigmoid, swish, clip, hardsigmoid, hardswish, exp, sqrt, neg,
 * dropout (inference: copy), add/mul/div with numpy broadcasting of the second operand, input normalisation (u8 or
 * f32 -> f32).  Vectorised over the innermost contiguous run at the target width, work split
 * over (tid, nthreads) in whole vectors (cg_foreach_elem, cg_inner_loop: cg_util.c). */
#include <string.h>

#include "codegen/cg_internal.h"
#include "codegen/gen_round16.h"

/* ---- unary ------------------------------------------------------------------------------ */
/* 16-bit inference storage (passes/store16.c): x and out in their dtypes (widened on load,
 * narrowed in the store; f32 otherwise). */
typedef struct unary_ctx { ir_op op; LLVMValueRef x, out; const ir_node *n; ir_dtype xdt, odt; } unary_ctx;

static void unary_body(cg_ctx *c, LLVMValueRef idx, int w, void *user) {
  unary_ctx *u = user;
  LLVMValueRef x = cg_act_load(c, u->n, u->x, idx, w, u->xdt), y = cg_activation(c, u->n, x, w);
  if (!y) y = x; /* copy */
  cg_act_store(c, u->n, y, u->out, idx, w, u->odt);
}

/* Kernel (x, out, tid, nth) applying a unary op; also the copy used by reshape/dropout. */
LLVMValueRef cg_gen_unary(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind, const char *opname) {
  LLVMValueRef a[4], op[1], f;
  int na = cg_kernel_begin_ops(c, n, fn_name, &f, a, op); /* a param operand: a module constant */
  unary_ctx u = {n->op, op[0], a[na], n, c->g->values[n->in[0]].dtype, c->g->values[n->out].dtype};
  char tile[24];
  snprintf(tile, sizeof tile, "v%d%s", c->target->vec_f32, u.xdt == IR_BF16 ? "_bf16" : u.xdt == IR_F16 ? "_fp16" : "");
  cg_foreach_elem(c, cg_numel(c, n->out), a[na + 1], a[na + 2], unary_body, &u);
  cg_kernel_end(c);
  *kind = cg_kind(c, opname, tile);
  return f;
}

LLVMValueRef cg_gen_relu(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind) {
  return cg_gen_unary(c, n, fn_name, kind, "relu");
}
LLVMValueRef cg_gen_sigmoid(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind) {
  return cg_gen_unary(c, n, fn_name, kind, "sigmoid");
}
LLVMValueRef cg_gen_swish(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind) {
  return cg_gen_unary(c, n, fn_name, kind, "swish");
}
LLVMValueRef cg_gen_clip(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind) {
  return cg_gen_unary(c, n, fn_name, kind, "clip");
}
LLVMValueRef cg_gen_quantize8(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind) {
  return cg_gen_unary(c, n, fn_name, kind, "quantize8");
}
LLVMValueRef cg_gen_hardsigmoid(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind) {
  return cg_gen_unary(c, n, fn_name, kind, "hardsigmoid");
}
LLVMValueRef cg_gen_leaky_relu(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind) {
  return cg_gen_unary(c, n, fn_name, kind, "leaky_relu");
}
LLVMValueRef cg_gen_hardswish(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind) {
  return cg_gen_unary(c, n, fn_name, kind, "hardswish");
}
LLVMValueRef cg_gen_dropout(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind) {
  if (n->attr.dropout.training && n->attr.dropout.rate > 0.0f)
    return cg_fail(c, n, "training-mode dropout is not supported in inference codegen");
  return cg_gen_unary(c, n, fn_name, kind, "dropout_copy");
}

/* ---- binary with broadcasting ---------------------------------------------------------- */
/* a's dims merged into runs where b is either broadcast (stride 0) or contiguous with the
 * next run; the last run is the vectorised inner loop. */
typedef struct bcast { int rank; int64_t dim[IR_MAX_RANK], bst[IR_MAX_RANK]; } bcast;

static bcast broadcast_plan(const ir_shape *a, const ir_shape *b) {
  int64_t st[IR_MAX_RANK], s = 1;
  for (int d = a->rank - 1; d >= 0; d--) {
    int bd = d - (a->rank - b->rank);
    if (bd < 0 || b->dim[bd] == 1) st[d] = 0;
    else st[d] = s, s *= b->dim[bd];
  }
  bcast p = {0, {0}, {0}};
  for (int d = 0; d < a->rank; d++) {
    if (a->dim[d] == 1) continue; /* size-1 dims contribute nothing */
    int k = p.rank - 1;
    if (k >= 0 && ((p.bst[k] == 0 && st[d] == 0) || (p.bst[k] != 0 && st[d] != 0 && p.bst[k] == st[d] * a->dim[d]))) {
      p.dim[k] *= a->dim[d];
      p.bst[k] = st[d];
    } else {
      p.dim[p.rank] = a->dim[d];
      p.bst[p.rank++] = st[d];
    }
  }
  if (p.rank == 0) p.dim[p.rank++] = 1;
  return p;
}

typedef struct binary_ctx {
  ir_op op;
  LLVMValueRef a, b, out, arow, brow;
  int bvec;
  const ir_node *n;
  ir_dtype adt, bdt, odt; /* 16-bit inference storage: operands and result in their dtypes */
} binary_ctx;

static void binary_body(cg_ctx *c, LLVMValueRef j, int w, void *user) {
  binary_ctx *u = user;
  LLVMValueRef ai = LLVMBuildAdd(c->b, u->arow, j, "");
  LLVMValueRef x = cg_act_load(c, u->n, u->a, ai, w, u->adt);
  LLVMValueRef y = u->bvec ? cg_act_load(c, u->n, u->b, LLVMBuildAdd(c->b, u->brow, j, ""), w, u->bdt)
                           : cg_splat(c, cg_act_load(c, u->n, u->b, u->brow, 1, u->bdt), w);
  LLVMValueRef r = u->op == IR_OP_add ? LLVMBuildFAdd(c->b, x, y, "") : u->op == IR_OP_mul ? LLVMBuildFMul(c->b, x, y, "")
                                                                         : LLVMBuildFDiv(c->b, x, y, "");
  if (w == 1 && u->odt == IR_F32) cg_store_f32(c, r, u->out, ai); /* as cg_store_v */
  else cg_act_store(c, u->n, r, u->out, ai, w, u->odt);
}

static LLVMValueRef gen_binary(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind) {
  const ir_shape *as = &c->g->values[n->in[0]].shape, *bs = &c->g->values[n->in[1]].shape;
  LLVMValueRef a[5], op[2], f;
  int n_act = cg_kernel_begin_ops(c, n, fn_name, &f, a, op); /* training: params by pointer */
  LLVMValueRef out = a[n_act], tid = a[n_act + 1], nth = a[n_act + 2];
  binary_ctx u = {n->op, op[0], op[1], out, NULL, NULL, 1, n, c->g->values[n->in[0]].dtype, c->g->values[n->in[1]].dtype,
                  c->g->values[n->out].dtype};
  int h16 = u.adt != IR_F32 || u.bdt != IR_F32;
  const char *opname = n->op == IR_OP_add ? (h16 ? "add_h16" : "add") : n->op == IR_OP_mul ? (h16 ? "mul_h16" : "mul") : "div";
  char tile[32];
  if (ir_shape_eq(as, bs)) {
    u.arow = u.brow = cg_i64(c, 0);
    cg_foreach_elem(c, ir_shape_numel(as), tid, nth, binary_body, &u);
    snprintf(tile, sizeof tile, "v%d", c->target->vec_f32);
  } else {
    bcast p = broadcast_plan(as, bs);
    int64_t inner = p.dim[p.rank - 1], rows = ir_shape_numel(as) / inner;
    LLVMValueRef lo, hi;
    cg_thread_range(c, cg_i64(c, rows), tid, nth, &lo, &hi);
    cg_loop L;
    LLVMValueRef r = cg_loop_begin(c, &L, lo, hi, cg_i64(c, 1), "row");
    LLVMValueRef boff = cg_i64(c, 0), rem = r;
    for (int d = p.rank - 2; d >= 0; d--) { /* row index -> b offset */
      LLVMValueRef id = LLVMBuildSRem(c->b, rem, cg_i64(c, p.dim[d]), "");
      rem = LLVMBuildSDiv(c->b, rem, cg_i64(c, p.dim[d]), "");
      boff = LLVMBuildAdd(c->b, boff, LLVMBuildMul(c->b, id, cg_i64(c, p.bst[d]), ""), "");
    }
    u.arow = LLVMBuildMul(c->b, r, cg_i64(c, inner), "arow");
    u.brow = boff;
    u.bvec = p.bst[p.rank - 1] != 0;
    cg_inner_loop(c, inner, binary_body, &u);
    cg_loop_end(c, &L);
    snprintf(tile, sizeof tile, "bcast_v%d", c->target->vec_f32);
  }
  cg_kernel_end(c);
  *kind = cg_kind(c, opname, tile);
  return f;
}

LLVMValueRef cg_gen_add(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind) {
  return gen_binary(c, n, fn_name, kind);
}
LLVMValueRef cg_gen_mul(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind) {
  return gen_binary(c, n, fn_name, kind);
}
LLVMValueRef cg_gen_div(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind) {
  return gen_binary(c, n, fn_name, kind);
}
LLVMValueRef cg_gen_exp(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind) {
  return cg_gen_unary(c, n, fn_name, kind, "exp");
}
LLVMValueRef cg_gen_sqrt(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind) {
  return cg_gen_unary(c, n, fn_name, kind, "sqrt");
}
LLVMValueRef cg_gen_neg(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind) {
  return cg_gen_unary(c, n, fn_name, kind, "neg");
}

/* ---- normalize ------------------------------------------------------------------------- */
typedef struct norm_ctx { LLVMValueRef x, out, base, scale, mean, sd; int u8, copy; } norm_ctx;

static void norm_body(cg_ctx *c, LLVMValueRef j, int w, void *user) {
  norm_ctx *u = user;
  LLVMValueRef i = LLVMBuildAdd(c->b, u->base, j, "");
  LLVMValueRef x;
  if (u->u8) {
    LLVMTypeRef bt = w == 1 ? c->t_i8 : LLVMVectorType(c->t_i8, (unsigned)w);
    LLVMValueRef l = LLVMBuildLoad2(c->b, bt, LLVMBuildInBoundsGEP2(c->b, c->t_i8, u->x, &i, 1, ""), "");
    LLVMSetAlignment(l, 1);
    x = LLVMBuildUIToFP(c->b, l, cg_vtype(c, w), "");
  } else {
    x = cg_load_v(c, u->x, i, w);
  }
  if (u->copy) { /* folded into the conv (pass_fold_normalize): the raw values */
    cg_store_v(c, x, u->out, i, w);
    return;
  }
  LLVMValueRef y = LLVMBuildFSub(c->b, LLVMBuildFMul(c->b, x, cg_splat(c, u->scale, w), ""), cg_splat(c, u->mean, w), "");
  cg_store_v(c, LLVMBuildFDiv(c->b, y, cg_splat(c, u->sd, w), ""), u->out, i, w);
}

LLVMValueRef cg_gen_normalize(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind) {
  const ir_normalize_attr *at = &n->attr.normalize;
  const ir_value *xv = &c->g->values[n->in[0]];
  if (xv->dtype != IR_U8 && xv->dtype != IR_F32)
    return cg_fail(c, n, "normalize of %s input is not supported", ir_dtype_name(xv->dtype));
  int64_t nb = xv->shape.dim[0], nc = xv->shape.rank > 1 ? xv->shape.dim[1] : 1;
  int64_t s = ir_shape_numel(&xv->shape) / (nb * nc);
  float *tab = ir_alloc(c->arena, (size_t)(2 * nc) * sizeof(float));
  for (int64_t k = 0; k < nc; k++) {
    int known = k < at->channels && k < IR_MAX_CHANNELS_NORMALIZE;
    tab[k] = known ? at->mean[k] : 0.0f;
    tab[nc + k] = known ? at->std[k] : 1.0f;
  }
  LLVMValueRef a[4];
  LLVMValueRef f = cg_kernel_begin(c, fn_name, 1, a);
  LLVMValueRef t = cg_blob_const(c, "normalize.tab", tab, (size_t)(2 * nc) * sizeof(float));
  LLVMValueRef lo, hi;
  cg_thread_range(c, cg_i64(c, nb * nc), a[2], a[3], &lo, &hi);
  cg_loop L;
  LLVMValueRef p = cg_loop_begin(c, &L, lo, hi, cg_i64(c, 1), "plane");
  LLVMValueRef ch = LLVMBuildSRem(c->b, p, cg_i64(c, nc), "c");
  norm_ctx u = {a[0], a[1], LLVMBuildMul(c->b, p, cg_i64(c, s), ""), cg_f32(c, at->scale), cg_load_f32(c, t, ch),
                cg_load_f32(c, t, LLVMBuildAdd(c->b, ch, cg_i64(c, nc), "")), xv->dtype == IR_U8, at->folded == 1};
  cg_inner_loop(c, s, norm_body, &u);
  cg_loop_end(c, &L);
  cg_kernel_end(c);
  *kind = cg_kind(c, at->folded == 1 ? "normalize_u8_folded" : at->folded == 2 ? "normalize_u8_centred"
                     : xv->dtype == IR_U8 ? "normalize_u8" : "normalize", NULL);
  return f;
}
