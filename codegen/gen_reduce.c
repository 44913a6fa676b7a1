/* gen_reduce.c — kernels of reductions over any set of dims (reduce: sum, mean, max, as
 * ir/ref_reduce.c; reduce_max_grad), expand (a broadcast copy), max_unpool (a scatter by flat
 * indices) and cast (integer storage <-> f32, docs/onnx.md "Integer tensors").  Work: the
 * result's groups (reduce), elements (expand, cast) or thread 0 alone (max_unpool's scatter, in
 * the interpreter's order).  Inference and training graphs (cg_kernel_begin_ops). */
#include "codegen/cg_internal.h"

/* The reduced dims of x (shape s: x's rank, dims x's or 1): a walk over one group. */
typedef struct red_plan {
  int rank, n_red, red[IR_MAX_RANK];
  int64_t xst[IR_MAX_RANK], sst[IR_MAX_RANK], xd[IR_MAX_RANK], sd[IR_MAX_RANK];
} red_plan;

static red_plan red_plan_of(const ir_shape *x, const ir_shape *s) {
  red_plan p = {x->rank, 0, {0}, {0}, {0}, {0}, {0}};
  int64_t kx = 1, ks = 1;
  for (int d = x->rank - 1; d >= 0; d--) {
    p.xst[d] = kx, p.sst[d] = ks, p.xd[d] = x->dim[d], p.sd[d] = s->dim[d];
    kx *= x->dim[d], ks *= s->dim[d];
  }
  for (int d = 0; d < x->rank; d++)
    if (s->dim[d] == 1 && x->dim[d] != 1) p.red[p.n_red++] = d;
  return p;
}

/* x offset of group o's first element (o a flat index in s). */
static LLVMValueRef group_base(cg_ctx *c, const red_plan *p, LLVMValueRef o) {
  LLVMValueRef base = cg_i64(c, 0);
  for (int d = 0; d < p->rank; d++) {
    if (p->sd[d] == 1) continue;
    LLVMValueRef id = LLVMBuildSRem(c->b, LLVMBuildSDiv(c->b, o, cg_i64(c, p->sst[d]), ""), cg_i64(c, p->sd[d]), "");
    base = LLVMBuildAdd(c->b, base, LLVMBuildMul(c->b, id, cg_i64(c, p->xst[d]), ""), "");
  }
  return base;
}

/* Opens the nested loops over group o's elements (reduced dims in order: row-major); returns
 * the x index of the element.  Close with close_group. */
static LLVMValueRef open_group(cg_ctx *c, const red_plan *p, cg_loop *L, LLVMValueRef base) {
  LLVMValueRef at = base;
  for (int k = 0; k < p->n_red; k++) {
    int d = p->red[k];
    LLVMValueRef i = cg_loop_begin(c, &L[k], cg_i64(c, 0), cg_i64(c, p->xd[d]), cg_i64(c, 1), "r");
    at = LLVMBuildAdd(c->b, at, LLVMBuildMul(c->b, i, cg_i64(c, p->xst[d]), ""), "");
  }
  return at;
}
static void close_group(cg_ctx *c, const red_plan *p, cg_loop *L) {
  for (int k = p->n_red - 1; k >= 0; k--) cg_loop_end(c, &L[k]);
}

/* Group's loop over this thread's share of the result's elements. */
static LLVMValueRef par_groups(cg_ctx *c, cg_loop *G, int64_t n, LLVMValueRef tid, LLVMValueRef nth) {
  LLVMValueRef lo, hi;
  cg_thread_range(c, cg_i64(c, n), tid, nth, &lo, &hi);
  return cg_loop_begin(c, G, lo, hi, cg_i64(c, 1), "group");
}

/* sum and mean in double (the interpreter's sums), max in f32 with a NaN winning.  Also the
 * backward reduce_sum's kernel where its kept dims are not one block (gen_train.c). */
LLVMValueRef cg_gen_reduce_to(cg_ctx *c, const ir_node *n, const ir_reduce_attr *ra, const char *fn_name, const char **kind) {
  const ir_shape *xs = &c->g->values[n->in[0]].shape;
  red_plan p = red_plan_of(xs, &ra->shape);
  int is_max = ra->mode == IR_REDUCE_MAX;
  LLVMTypeRef dt = LLVMDoubleTypeInContext(c->llc), at = is_max ? c->t_f32 : dt;
  LLVMValueRef a[5], op[1], f;
  int na = cg_kernel_begin_ops(c, n, fn_name, &f, a, op);
  LLVMValueRef acc = cg_entry_alloca(c, at, "acc");
  cg_loop G, L[IR_MAX_RANK];
  LLVMValueRef o = par_groups(c, &G, ir_shape_numel(&ra->shape), a[na + 1], a[na + 2]);
  LLVMBuildStore(c->b, is_max ? cg_f32(c, -__builtin_inff()) : LLVMConstReal(dt, 0.0), acc);
  LLVMValueRef i = open_group(c, &p, L, group_base(c, &p, o));
  LLVMValueRef v = cg_load_f32(c, op[0], i), m = LLVMBuildLoad2(c->b, at, acc, "");
  if (is_max) {
    LLVMValueRef take = LLVMBuildOr(c->b, LLVMBuildFCmp(c->b, LLVMRealOGT, v, m, ""), LLVMBuildFCmp(c->b, LLVMRealUNO, v, v, ""), "");
    LLVMBuildStore(c->b, LLVMBuildSelect(c->b, take, v, m, ""), acc);
  } else {
    LLVMBuildStore(c->b, LLVMBuildFAdd(c->b, m, LLVMBuildFPExt(c->b, v, dt, ""), ""), acc);
  }
  close_group(c, &p, L);
  LLVMValueRef r = LLVMBuildLoad2(c->b, at, acc, "");
  if (ra->mode == IR_REDUCE_MEAN) r = LLVMBuildFDiv(c->b, r, LLVMConstReal(dt, (double)(ir_shape_numel(xs) / ir_shape_numel(&ra->shape))), "");
  if (!is_max) r = LLVMBuildFPTrunc(c->b, r, c->t_f32, "");
  cg_store_f32(c, r, a[na], o);
  cg_loop_end(c, &G);
  cg_kernel_end(c);
  static const char *const names[] = {"reduce_sum", "reduce_mean", "reduce_max"};
  *kind = cg_kind(c, names[ra->mode], "any_dims");
  return f;
}
LLVMValueRef cg_gen_reduce(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind) {
  return cg_gen_reduce_to(c, n, &n->attr.reduce, fn_name, kind);
}

/* dy, x, y -> dx: per group, dy at its first element equal to y (or NaN with a NaN y), 0 at
 * the others (every element of dx written by its group's thread). */
LLVMValueRef cg_gen_reduce_max_grad(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind) {
  const ir_reduce_attr *ra = &n->attr.reduce_max_grad;
  red_plan p = red_plan_of(&c->g->values[n->in[1]].shape, &ra->shape);
  LLVMValueRef a[7], op[3], f;
  int na = cg_kernel_begin_ops(c, n, fn_name, &f, a, op);
  LLVMValueRef done = cg_entry_alloca(c, c->t_i1, "done");
  cg_loop G, L[IR_MAX_RANK];
  LLVMValueRef o = par_groups(c, &G, ir_shape_numel(&ra->shape), a[na + 1], a[na + 2]);
  LLVMValueRef dy = cg_load_f32(c, op[0], o), y = cg_load_f32(c, op[2], o);
  LLVMBuildStore(c->b, LLVMConstInt(c->t_i1, 0, 0), done);
  LLVMValueRef i = open_group(c, &p, L, group_base(c, &p, o));
  LLVMValueRef x = cg_load_f32(c, op[1], i), dn = LLVMBuildLoad2(c->b, c->t_i1, done, "");
  LLVMValueRef same = LLVMBuildOr(c->b, LLVMBuildFCmp(c->b, LLVMRealOEQ, x, y, ""),
                                  LLVMBuildAnd(c->b, LLVMBuildFCmp(c->b, LLVMRealUNO, x, x, ""), LLVMBuildFCmp(c->b, LLVMRealUNO, y, y, ""), ""), "");
  LLVMValueRef hit = LLVMBuildAnd(c->b, same, LLVMBuildNot(c->b, dn, ""), "hit");
  cg_store_f32(c, LLVMBuildSelect(c->b, hit, dy, cg_f32(c, 0.0f), ""), a[na], i);
  LLVMBuildStore(c->b, LLVMBuildOr(c->b, dn, hit, ""), done);
  close_group(c, &p, L);
  cg_loop_end(c, &G);
  cg_kernel_end(c);
  *kind = cg_kind(c, "reduce_max_grad", NULL);
  return f;
}

/* y[i] = scale * x[the broadcast index of i]. */
LLVMValueRef cg_gen_expand(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind) {
  const ir_shape *xs = &c->g->values[n->in[0]].shape, *ys = &n->attr.expand.shape;
  float scale = ir_expand_scale(&n->attr.expand);
  LLVMValueRef a[4], op[1], f;
  int na = cg_kernel_begin_ops(c, n, fn_name, &f, a, op);
  cg_loop G;
  LLVMValueRef i = par_groups(c, &G, ir_shape_numel(ys), a[na + 1], a[na + 2]);
  LLVMValueRef src = cg_i64(c, 0), rem = i;
  int64_t k = 1;
  for (int d = ys->rank - 1; d >= 0; d--) {
    LLVMValueRef id = LLVMBuildSRem(c->b, rem, cg_i64(c, ys->dim[d]), "");
    rem = LLVMBuildSDiv(c->b, rem, cg_i64(c, ys->dim[d]), "");
    if (xs->dim[d] != 1) src = LLVMBuildAdd(c->b, src, LLVMBuildMul(c->b, id, cg_i64(c, k), ""), "");
    k *= xs->dim[d];
  }
  LLVMValueRef v = cg_load_f32(c, op[0], src);
  if (scale != 1.0f) v = LLVMBuildFMul(c->b, v, cg_f32(c, scale), "");
  cg_store_f32(c, v, a[na], i);
  cg_loop_end(c, &G);
  cg_kernel_end(c);
  *kind = cg_kind(c, "expand", NULL);
  return f;
}

/* x, idx -> zeros, then x[k] at idx[k] for k in order (thread 0; the others return). */
LLVMValueRef cg_gen_max_unpool(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind) {
  int64_t nx = cg_numel(c, n->in[0]), ny = cg_numel(c, n->out);
  LLVMValueRef a[5], op[2], f;
  int na = cg_kernel_begin_ops(c, n, fn_name, &f, a, op);
  cg_if T;
  cg_if_begin(c, &T, LLVMBuildICmp(c->b, LLVMIntEQ, a[na + 1], cg_i32(c, 0), ""));
  cg_loop Z, K;
  LLVMValueRef j = cg_loop_begin(c, &Z, cg_i64(c, 0), cg_i64(c, ny), cg_i64(c, 1), "z");
  cg_store_f32(c, cg_f32(c, 0.0f), a[na], j);
  cg_loop_end(c, &Z);
  LLVMValueRef k = cg_loop_begin(c, &K, cg_i64(c, 0), cg_i64(c, nx), cg_i64(c, 1), "k");
  LLVMValueRef t = cg_load_f32(c, op[1], k);
  LLVMValueRef in = LLVMBuildAnd(c->b, LLVMBuildFCmp(c->b, LLVMRealOGE, t, cg_f32(c, 0.0f), ""),
                                 LLVMBuildFCmp(c->b, LLVMRealOLT, t, cg_f32(c, (float)ny), ""), "");
  LLVMValueRef j64 = LLVMBuildFPToSI(c->b, t, c->t_i64, ""); /* poison outside the range: selected away */
  LLVMValueRef whole = LLVMBuildFCmp(c->b, LLVMRealOEQ, LLVMBuildSIToFP(c->b, j64, c->t_f32, ""), t, "");
  cg_if P;
  cg_if_begin(c, &P, LLVMBuildSelect(c->b, in, LLVMBuildFreeze(c->b, whole, ""), LLVMConstInt(c->t_i1, 0, 0), ""));
  cg_store_f32(c, cg_load_f32(c, op[0], k), a[na], j64);
  cg_if_end(c, &P);
  cg_loop_end(c, &K);
  cg_if_end(c, &T);
  cg_kernel_end(c);
  *kind = cg_kind(c, "max_unpool", NULL);
  return f;
}

/* trunc and floor of an f32 without libm (llvm.trunc / llvm.floor become calls on targets
 * without SSE4.1): |x| >= 2^23 is an integer already. */
static LLVMValueRef trunc_f(cg_ctx *c, LLVMValueRef x) {
  LLVMTypeRef ft = c->t_f32;
  LLVMValueRef small = LLVMBuildFCmp(c->b, LLVMRealOLT, cg_intrinsic(c, "llvm.fabs", &ft, 1, &x, 1), cg_f32(c, 0x1p23f), "");
  LLVMValueRef t = LLVMBuildSIToFP(c->b, LLVMBuildFreeze(c->b, LLVMBuildFPToSI(c->b, x, c->t_i32, ""), ""), ft, "");
  LLVMValueRef sg[2] = {t, x}; /* -0.5 -> -0, as truncf */
  t = cg_intrinsic(c, "llvm.copysign", &ft, 1, sg, 2);
  return LLVMBuildSelect(c->b, small, t, x, "trunc");
}
static LLVMValueRef floor_f(cg_ctx *c, LLVMValueRef x) {
  LLVMValueRef t = trunc_f(c, x);
  return LLVMBuildSelect(c->b, LLVMBuildFCmp(c->b, LLVMRealOLT, x, t, ""), LLVMBuildFSub(c->b, t, cg_f32(c, 1.0f), ""), t, "floor");
}

/* ir_cast_f32 in f32 arithmetic (exact: see ir/ref_reduce.c): trunc, then u8 / i8 wrap. */
static LLVMValueRef wrap8(cg_ctx *c, LLVMValueRef x, int type) {
  LLVMTypeRef ft = c->t_f32;
  LLVMValueRef fin = LLVMBuildFCmp(c->b, LLVMRealOLT, cg_intrinsic(c, "llvm.fabs", &ft, 1, &x, 1), cg_f32(c, __builtin_inff()), "");
  LLVMValueRef t = trunc_f(c, x);
  if (type == IR_U8 || type == IR_I8) {
    LLVMValueRef q = floor_f(c, LLVMBuildFMul(c->b, t, cg_f32(c, 1.0f / 256.0f), ""));
    t = LLVMBuildFSub(c->b, t, LLVMBuildFMul(c->b, q, cg_f32(c, 256.0f), ""), "");
    if (type == IR_I8)
      t = LLVMBuildSelect(c->b, LLVMBuildFCmp(c->b, LLVMRealOGE, t, cg_f32(c, 128.0f), ""), LLVMBuildFSub(c->b, t, cg_f32(c, 256.0f), ""), t, "");
  }
  return LLVMBuildSelect(c->b, fin, t, cg_f32(c, 0.0f), "cast"); /* NaN, inf -> 0 */
}

/* One element: an integer-dtype x to f32, or an f32 x to its ir_cast_f32 value, stored as f32
 * or in the integer storage dtype (i32 / i64 saturated). */
LLVMValueRef cg_gen_cast(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind) {
  const ir_cast_attr *ca = &n->attr.cast;
  int xt = c->g->values[n->in[0]].dtype, type = ca->to != IR_F32 ? ca->to : ca->wrap;
  LLVMTypeRef it[7] = {0};
  it[IR_U8] = it[IR_I8] = c->t_i8, it[IR_I32] = c->t_i32, it[IR_I64] = c->t_i64;
  LLVMValueRef a[4], op[1], f;
  int na = cg_kernel_begin_ops(c, n, fn_name, &f, a, op);
  cg_loop G;
  LLVMValueRef i = par_groups(c, &G, cg_numel(c, n->out), a[na + 1], a[na + 2]), v;
  if (xt != IR_F32) { /* integer storage -> its value */
    LLVMValueRef l = LLVMBuildLoad2(c->b, it[xt], LLVMBuildInBoundsGEP2(c->b, it[xt], op[0], &i, 1, ""), "");
    LLVMSetAlignment(l, (unsigned)ir_dtype_size((ir_dtype)xt));
    v = xt == IR_U8 ? LLVMBuildUIToFP(c->b, l, c->t_f32, "") : LLVMBuildSIToFP(c->b, l, c->t_f32, "");
    cg_store_f32(c, v, a[na], i);
  } else {
    v = wrap8(c, cg_load_f32(c, op[0], i), type);
    if (ca->to == IR_F32) {
      cg_store_f32(c, v, a[na], i);
    } else {
      LLVMValueRef s;
      if (ca->to == IR_I32 || ca->to == IR_I64) { /* saturate: fptosi of an out-of-range value is poison */
        float lim = ca->to == IR_I32 ? 0x1p31f : 0x1p63f;
        LLVMValueRef hi = LLVMBuildFCmp(c->b, LLVMRealOGE, v, cg_f32(c, lim), ""), lo = LLVMBuildFCmp(c->b, LLVMRealOLT, v, cg_f32(c, -lim), "");
        LLVMValueRef cl = LLVMBuildSelect(c->b, LLVMBuildOr(c->b, hi, lo, ""), cg_f32(c, 0.0f), v, "");
        int bits = ca->to == IR_I32 ? 32 : 64;
        unsigned long long mx = bits == 32 ? 0x7fffffffull : 0x7fffffffffffffffull;
        s = LLVMBuildFPToSI(c->b, cl, it[ca->to], "");
        s = LLVMBuildSelect(c->b, hi, LLVMConstInt(it[ca->to], mx, 0), s, "");
        s = LLVMBuildSelect(c->b, lo, LLVMConstInt(it[ca->to], mx + 1, 0), s, "");
      } else { /* u8 / i8: the wrapped value fits */
        s = LLVMBuildTrunc(c->b, LLVMBuildFPToSI(c->b, v, c->t_i32, ""), c->t_i8, "");
      }
      LLVMValueRef st = LLVMBuildStore(c->b, s, LLVMBuildInBoundsGEP2(c->b, it[ca->to], a[na], &i, 1, ""));
      LLVMSetAlignment(st, (unsigned)ir_dtype_size((ir_dtype)ca->to));
    }
  }
  cg_loop_end(c, &G);
  cg_kernel_end(c);
  *kind = cg_kind(c, "cast", ir_fmt(c->arena, "%s_to_%s%s%s", ir_dtype_name((ir_dtype)xt), ir_dtype_name((ir_dtype)ca->to),
                                    ca->wrap != IR_F32 ? "_wrap_" : "", ca->wrap != IR_F32 ? ir_dtype_name((ir_dtype)ca->wrap) : ""));
  return f;
}
