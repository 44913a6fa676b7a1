/* gen_round16.c — compiled round16 (issue 6, docs/precision.md): y = x rounded to bf16 or
 * fp16 and widened back to f32, bit-identical to ir/ref_round16.c.
 *   bf16: integer ops on <w x i32>: u + 0x7fff + ((u >> 16) & 1), low 16 bits cleared; NaN
 *         lanes (x != x) become (u | 0x00400000) & 0xffff0000 (quiet).
 *   fp16: LLVM fptrunc <w x float> -> <w x half>, fpext back (F16C vcvtps2ph / vcvtph2ps on
 *         x86; both round to nearest even, keep subnormals, overflow to inf).  Needs a target
 *         with native half conversions (the .so imports no libcalls): +f16c on x86.
 * Operands: inference x is an activation; in training every operand is a pointer (a param
 * read through round16 is its compute copy, the master stays in the state buffer).  The
 * rounding itself, cg_round16_v, is in cg_util.c (the fused epilogues use it too). */
#include <string.h>

#include "codegen/cg_internal.h"
#include "codegen/gen_round16.h"

typedef struct r16_ctx { const ir_node *n; LLVMValueRef x, out; } r16_ctx;

/* ---- 16-bit storage (gen_store16.c) ----------------------------------------------------- */
LLVMValueRef cg_narrow16_v(cg_ctx *c, const ir_node *n, LLVMValueRef x, int format, int keep_sign, int w) {
  LLVMBuilderRef b = c->b;
  LLVMTypeRef i16 = LLVMInt16TypeInContext(c->llc), st = w == 1 ? i16 : LLVMVectorType(i16, (unsigned)w);
  LLVMValueRef h;
  if (format != IR_HALF_FP16) { /* as round_bf16, keeping the top half */
    LLVMTypeRef it = w == 1 ? c->t_i32 : LLVMVectorType(c->t_i32, (unsigned)w);
    LLVMValueRef u = LLVMBuildBitCast(b, x, it, "u");
    LLVMValueRef lsb = LLVMBuildAnd(b, LLVMBuildLShr(b, u, cg_splat_i32(c, 16, w), ""), cg_splat_i32(c, 1, w), "lsb");
    LLVMValueRef r = LLVMBuildAdd(b, LLVMBuildAdd(b, u, cg_splat_i32(c, 0x7fff, w), ""), lsb, "");
    LLVMValueRef q = LLVMBuildOr(b, u, cg_splat_i32(c, 0x00400000u, w), "qnan");
    LLVMValueRef nan = LLVMBuildFCmp(b, LLVMRealUNO, x, x, "isnan");
    r = LLVMBuildLShr(b, LLVMBuildSelect(b, nan, q, r, ""), cg_splat_i32(c, 16, w), "hi");
    h = LLVMBuildTrunc(b, r, st, "bf16");
  } else {
    if (!cg_has_f16c(c->target)) {
      cg_fail(c, n, "%s", CG_NO_F16C_MSG);
      return LLVMGetPoison(st);
    }
    LLVMTypeRef ht = w == 1 ? LLVMHalfTypeInContext(c->llc) : LLVMVectorType(LLVMHalfTypeInContext(c->llc), (unsigned)w);
    h = LLVMBuildBitCast(b, LLVMBuildFPTrunc(b, x, ht, "half"), st, "fp16");
  }
  if (keep_sign) { /* x > 0 rounded to +0: the smallest positive value (relu_grad reads x > 0 only) */
    LLVMValueRef zero = LLVMConstNull(st), one = LLVMConstInt(i16, 1, 0), e[64];
    if (w > 1) {
      for (int i = 0; i < w; i++) e[i] = one;
      one = LLVMConstVector(e, (unsigned)w);
    }
    LLVMValueRef pos = LLVMBuildFCmp(b, LLVMRealOGT, x, LLVMConstNull(cg_vtype(c, w)), "pos");
    LLVMValueRef z = LLVMBuildICmp(b, LLVMIntEQ, h, zero, "");
    h = LLVMBuildSelect(b, LLVMBuildAnd(b, pos, z, ""), one, h, "kept");
  }
  return h;
}

/* bf16 narrowing by one vcvtneps2bf16 (fptrunc to bfloat; avx512bf16 targets only), bitwise
 * cg_narrow16_v's (nearest even, NaN quiet).  The instruction reads f32 denormals as zero, so a
 * vector with a nonzero |x| < 2^-126 lane (rare) branches to the integer rounding for those lanes:
 * the common path costs and, sub, compare, kortest and a branch instead of 9 instructions. */
LLVMValueRef cg_narrow_bf16_native(cg_ctx *c, const ir_node *n, LLVMValueRef x, int w) {
  LLVMBuilderRef b = c->b;
  LLVMTypeRef i16v = LLVMVectorType(LLVMInt16TypeInContext(c->llc), (unsigned)w);
  LLVMTypeRef it = LLVMVectorType(c->t_i32, (unsigned)w), iw = LLVMIntTypeInContext(c->llc, (unsigned)w);
  LLVMValueRef h = LLVMBuildFPTrunc(b, x, LLVMVectorType(LLVMBFloatTypeInContext(c->llc), (unsigned)w), "bf16");
  h = LLVMBuildBitCast(b, h, i16v, "");
  LLVMValueRef mag = LLVMBuildAnd(b, LLVMBuildBitCast(b, x, it, "u"), cg_splat_i32(c, 0x7fffffff, w), "");
  LLVMValueRef den = LLVMBuildICmp(b, LLVMIntULT, LLVMBuildSub(b, mag, cg_splat_i32(c, 1, w), ""),
                                   cg_splat_i32(c, 0x007fffff, w), "denorm");
  LLVMValueRef any = LLVMBuildICmp(b, LLVMIntNE, LLVMBuildBitCast(b, den, iw, ""), LLVMConstNull(iw), "");
  LLVMTypeRef i1 = LLVMInt1TypeInContext(c->llc);
  LLVMValueRef ea[2] = {any, LLVMConstNull(i1)};
  any = cg_intrinsic(c, "llvm.expect", &i1, 1, ea, 2);
  LLVMBasicBlockRef from = LLVMGetInsertBlock(b), fn_bb = from;
  LLVMValueRef fn = LLVMGetBasicBlockParent(fn_bb);
  LLVMBasicBlockRef slow = LLVMAppendBasicBlockInContext(c->llc, fn, "narrow.denorm");
  LLVMBasicBlockRef done = LLVMAppendBasicBlockInContext(c->llc, fn, "narrow.done");
  LLVMBuildCondBr(b, any, slow, done);
  LLVMPositionBuilderAtEnd(b, slow);
  LLVMValueRef s = LLVMBuildSelect(b, den, cg_narrow16_v(c, n, x, IR_HALF_BF16, 0, w), h, "");
  LLVMBasicBlockRef slow_end = LLVMGetInsertBlock(b);
  LLVMBuildBr(b, done);
  LLVMPositionBuilderAtEnd(b, done);
  LLVMValueRef phi = LLVMBuildPhi(b, i16v, "h16");
  LLVMValueRef vals[2] = {h, s};
  LLVMBasicBlockRef bbs[2] = {from, slow_end};
  LLVMAddIncoming(phi, vals, bbs, 2);
  return phi;
}

LLVMValueRef cg_widen16_v(cg_ctx *c, const ir_node *n, LLVMValueRef h, int format, int w) {
  LLVMBuilderRef b = c->b;
  if (format != IR_HALF_FP16) {
    LLVMTypeRef it = w == 1 ? c->t_i32 : LLVMVectorType(c->t_i32, (unsigned)w);
    LLVMValueRef u = LLVMBuildShl(b, LLVMBuildZExt(b, h, it, ""), cg_splat_i32(c, 16, w), "");
    return LLVMBuildBitCast(b, u, cg_vtype(c, w), "");
  }
  if (!cg_has_f16c(c->target)) {
    cg_fail(c, n, "%s", CG_NO_F16C_MSG);
    return LLVMGetPoison(cg_vtype(c, w));
  }
  LLVMTypeRef ht = w == 1 ? LLVMHalfTypeInContext(c->llc) : LLVMVectorType(LLVMHalfTypeInContext(c->llc), (unsigned)w);
  return LLVMBuildFPExt(b, LLVMBuildBitCast(b, h, ht, ""), cg_vtype(c, w), "");
}

/* ---- stochastic rounding (16.16 weight updates, gen_train_optim.c) ------------------------ */
static LLVMValueRef sp_i(cg_ctx *c, LLVMTypeRef t, uint64_t v, int w) {
  LLVMValueRef s = LLVMConstInt(t, v, 0);
  if (w == 1) return s;
  LLVMValueRef e[64];
  for (int i = 0; i < w; i++) e[i] = s;
  return LLVMConstVector(e, (unsigned)w);
}

/* bf16: the low 16 bits of |x| are the distance to the grid value below (toward zero) in
 * units of 2^-16 ulp; adding 16 uniform bits carries into the kept half with exactly that
 * probability (the carry crosses binades and reaches inf like a rounding carry). */
static LLVMValueRef sr_bf16(cg_ctx *c, LLVMValueRef x, LLVMValueRef u24, int w) {
  LLVMBuilderRef b = c->b;
  LLVMTypeRef it = w == 1 ? c->t_i32 : LLVMVectorType(c->t_i32, (unsigned)w);
  LLVMValueRef u = LLVMBuildBitCast(b, x, it, "u");
  LLVMValueRef r = LLVMBuildAdd(b, u, LLVMBuildLShr(b, u24, cg_splat_i32(c, 8, w), ""), "");
  r = LLVMBuildAnd(b, r, cg_splat_i32(c, 0xffff0000u, w), "sr");
  LLVMValueRef q = LLVMBuildAnd(b, LLVMBuildOr(b, u, cg_splat_i32(c, 0x00400000u, w), ""), cg_splat_i32(c, 0xffff0000u, w), "qnan");
  LLVMValueRef nan = LLVMBuildFCmp(b, LLVMRealUNO, x, x, "isnan");
  return LLVMBuildBitCast(b, LLVMBuildSelect(b, nan, q, r, ""), cg_vtype(c, w), "");
}

/* fp16: a = |x|, its grid neighbours lo <= a < hi from the nearest-even half h (h - 1 or
 * h + 1 in the bit pattern), hi with probability (a - lo) / (hi - lo) (both exact in f32);
 * hi = inf counts as probability 0 (finite values above 65504 give 65504), inf/NaN stay. */
static LLVMValueRef sr_fp16(cg_ctx *c, LLVMValueRef x, LLVMValueRef u24, int w) {
  LLVMBuilderRef b = c->b;
  LLVMTypeRef vt = cg_vtype(c, w), h = LLVMHalfTypeInContext(c->llc), i16 = LLVMInt16TypeInContext(c->llc);
  LLVMTypeRef ht = w == 1 ? h : LLVMVectorType(h, (unsigned)w), st = w == 1 ? i16 : LLVMVectorType(i16, (unsigned)w);
  LLVMTypeRef it = w == 1 ? c->t_i32 : LLVMVectorType(c->t_i32, (unsigned)w);
  LLVMValueRef a = cg_intrinsic(c, "llvm.fabs", &vt, 1, &x, 1);
  LLVMValueRef hh = LLVMBuildFPTrunc(b, a, ht, "half");
  LLVMValueRef hb = LLVMBuildBitCast(b, hh, st, "");
  LLVMValueRef up = LLVMBuildFCmp(b, LLVMRealOGT, LLVMBuildFPExt(b, hh, vt, ""), a, "rn_up");
  LLVMValueRef lo = LLVMBuildSelect(b, up, LLVMBuildSub(b, hb, sp_i(c, i16, 1, w), ""), hb, "");
  LLVMValueRef hi = LLVMBuildSelect(b, up, hb, LLVMBuildAdd(b, hb, sp_i(c, i16, 1, w), ""), "");
  LLVMValueRef lof = LLVMBuildFPExt(b, LLVMBuildBitCast(b, lo, ht, ""), vt, "lo");
  LLVMValueRef hif = LLVMBuildFPExt(b, LLVMBuildBitCast(b, hi, ht, ""), vt, "hi");
  LLVMValueRef p = LLVMBuildFDiv(b, LLVMBuildFSub(b, a, lof, ""), LLVMBuildFSub(b, hif, lof, ""), "p");
  LLVMValueRef r = LLVMBuildFMul(b, LLVMBuildUIToFP(b, u24, vt, ""), cg_fconst(c, 1.0f / 16777216.0f, w), "r");
  LLVMValueRef m = LLVMBuildSelect(b, LLVMBuildFCmp(b, LLVMRealOLT, r, p, ""), hif, lof, "");
  LLVMValueRef sign = LLVMBuildAnd(b, LLVMBuildBitCast(b, x, it, ""), cg_splat_i32(c, 0x80000000u, w), "");
  return LLVMBuildBitCast(b, LLVMBuildOr(b, LLVMBuildBitCast(b, m, it, ""), sign, ""), vt, "");
}

LLVMValueRef cg_round16_sr_v(cg_ctx *c, const ir_node *n, LLVMValueRef x, LLVMValueRef u24, int format, int w) {
  if (format != IR_HALF_FP16) return sr_bf16(c, x, u24, w);
  if (!cg_has_f16c(c->target)) {
    cg_fail(c, n, "%s", CG_NO_F16C_MSG);
    return x;
  }
  return sr_fp16(c, x, u24, w);
}

/* splitmix64's finaliser (the compiled dropout's mix64, gen_train.c). */
static LLVMValueRef mix64(cg_ctx *c, LLVMValueRef z, int w) {
  LLVMBuilderRef b = c->b;
  z = LLVMBuildAdd(b, z, sp_i(c, c->t_i64, 0x9e3779b97f4a7c15ull, w), "");
  z = LLVMBuildMul(b, LLVMBuildXor(b, z, LLVMBuildLShr(b, z, sp_i(c, c->t_i64, 30, w), ""), ""), sp_i(c, c->t_i64, 0xbf58476d1ce4e5b9ull, w), "");
  z = LLVMBuildMul(b, LLVMBuildXor(b, z, LLVMBuildLShr(b, z, sp_i(c, c->t_i64, 27, w), ""), ""), sp_i(c, c->t_i64, 0x94d049bb133111ebull, w), "");
  return LLVMBuildXor(b, z, LLVMBuildLShr(b, z, sp_i(c, c->t_i64, 31, w), ""), "");
}

LLVMValueRef cg_sr_step_key(cg_ctx *c, uint64_t seed, LLVMValueRef t) {
  return mix64(c, LLVMBuildXor(c->b, LLVMConstInt(c->t_i64, seed, 0), mix64(c, t, 1), ""), 1);
}

LLVMValueRef cg_sr_u24(cg_ctx *c, LLVMValueRef key, LLVMValueRef i, int w) {
  LLVMValueRef iv = i, kv = key;
  if (w > 1) {
    LLVMValueRef e[64];
    for (int l = 0; l < w; l++) e[l] = cg_i64(c, l);
    LLVMTypeRef vt = LLVMVectorType(c->t_i64, (unsigned)w);
    LLVMValueRef zero = LLVMConstNull(LLVMVectorType(c->t_i32, (unsigned)w));
    iv = LLVMBuildShuffleVector(c->b, LLVMBuildInsertElement(c->b, LLVMGetPoison(vt), i, cg_i32(c, 0), ""), LLVMGetPoison(vt), zero, "");
    iv = LLVMBuildAdd(c->b, iv, LLVMConstVector(e, (unsigned)w), "");
    kv = LLVMBuildShuffleVector(c->b, LLVMBuildInsertElement(c->b, LLVMGetPoison(vt), key, cg_i32(c, 0), ""), LLVMGetPoison(vt), zero, "");
  }
  LLVMValueRef h = mix64(c, LLVMBuildXor(c->b, kv, mix64(c, iv, w), ""), w);
  LLVMTypeRef it = w == 1 ? c->t_i32 : LLVMVectorType(c->t_i32, (unsigned)w);
  return LLVMBuildTrunc(c->b, LLVMBuildLShr(c->b, h, sp_i(c, c->t_i64, 40, w), ""), it, "u24");
}

static void r16_body(cg_ctx *c, LLVMValueRef idx, int w, void *user) {
  r16_ctx *u = user;
  LLVMValueRef x = cg_load_v(c, u->x, idx, w);
  ir_dtype od = c->g->values[u->n->out].dtype;
  if (od != IR_F32) /* 16-bit storage (inference): the narrowing store is the rounding */
    cg_act_store(c, u->n, x, u->out, idx, w, od);
  else cg_store_v(c, cg_round16_v(c, u->n, x, u->n->attr.round16.format, w), u->out, idx, w);
}

/* --auto-loss-scaling (passes/optimizer.c): the backward roundings read the loss scale s
 * (state [4], s = [0]): y = round16(x * s) / s. */
typedef struct r16s_ctx { const ir_node *n; LLVMValueRef x, out, s; } r16s_ctx;
static void r16s_body(cg_ctx *c, LLVMValueRef idx, int w, void *user) {
  r16s_ctx *u = user;
  LLVMValueRef s = cg_splat(c, u->s, w);
  LLVMValueRef x = LLVMBuildFMul(c->b, cg_load_v(c, u->x, idx, w), s, "scaled");
  LLVMValueRef y = cg_round16_v(c, u->n, x, u->n->attr.round16.format, w);
  cg_store_v(c, LLVMBuildFDiv(c->b, y, s, "unscaled"), u->out, idx, w);
}

LLVMValueRef cg_gen_round16(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind) {
  int fp16 = n->attr.round16.format == IR_HALF_FP16;
  if (fp16 && !cg_has_f16c(c->target))
    return cg_fail(c, n, "%s", CG_NO_F16C_MSG);
  const ir_value *xv = &c->g->values[n->in[0]];
  int train = ((cg_priv *)c->priv)->train;
  int param = xv->kind == IR_VAL_PARAM && !train; /* inference: embedded constant */
  LLVMValueRef a[5];
  char tile[16];
  snprintf(tile, sizeof tile, "v%d", c->target->vec_f32);
  if (n->n_in == 2) {
    if (!train) return cg_fail(c, n, "internal error: a loss-scaled round16 outside training");
    LLVMValueRef f = cg_train_kbegin(c, fn_name, 2, a);
    r16s_ctx u = {n, a[0], a[2], cg_load_f32(c, a[1], cg_i64(c, 0))};
    cg_foreach_elem(c, cg_numel(c, n->out), a[3], a[4], r16s_body, &u);
    cg_kernel_end(c);
    *kind = cg_kind(c, fp16 ? "round16_scaled_fp16" : "round16_scaled_bf16", tile);
    return f;
  }
  LLVMValueRef f = train ? cg_train_kbegin(c, fn_name, 1, a) : cg_kernel_begin(c, fn_name, param ? 0 : 1, a);
  r16_ctx u = {n, param ? cg_param_const(c, n->in[0]) : a[0], param ? a[0] : a[1]};
  LLVMValueRef tid = param ? a[1] : a[2], nth = param ? a[2] : a[3];
  cg_foreach_elem(c, cg_numel(c, n->out), tid, nth, r16_body, &u);
  cg_kernel_end(c);
  int o16 = c->g->values[n->out].dtype != IR_F32;
  *kind = cg_kind(c, fp16 ? (o16 ? "round16_to_fp16" : "round16_fp16") : (o16 ? "round16_to_bf16" : "round16_bf16"), tile);
  return f;
}

/* ---- 16-bit activations (inference storage, passes/store16.c pass_store16_infer) ---------- */
int cg_dt_half(ir_dtype dt) { return dt == IR_BF16 ? IR_HALF_BF16 : dt == IR_F16 ? IR_HALF_FP16 : -1; }

static LLVMTypeRef h16t(cg_ctx *c, int w) {
  LLVMTypeRef i16 = LLVMInt16TypeInContext(c->llc);
  return w == 1 ? i16 : LLVMVectorType(i16, (unsigned)w);
}
static LLVMValueRef h16_ptr(cg_ctx *c, LLVMValueRef base, LLVMValueRef idx) {
  return LLVMBuildInBoundsGEP2(c->b, LLVMInt16TypeInContext(c->llc), base, &idx, 1, "");
}
static LLVMValueRef h16_load(cg_ctx *c, LLVMValueRef base, LLVMValueRef idx, int w) {
  LLVMValueRef l = LLVMBuildLoad2(c->b, h16t(c, w), h16_ptr(c, base, idx), "h");
  LLVMSetAlignment(l, 2);
  return l;
}

LLVMValueRef cg_act_load(cg_ctx *c, const ir_node *n, LLVMValueRef base, LLVMValueRef idx, int w, ir_dtype dt) {
  int f = cg_dt_half(dt);
  if (f < 0) return w == 1 ? cg_load_f32(c, base, idx) : cg_load_v(c, base, idx, w);
  return cg_widen16_v(c, n, h16_load(c, base, idx, w), f, w);
}

LLVMValueRef cg_act_load_strided(cg_ctx *c, const ir_node *n, LLVMValueRef base, LLVMValueRef idx, int stride, int w,
                                 ir_dtype dt) {
  int f = cg_dt_half(dt);
  if (f < 0) return cg_load_strided(c, base, idx, stride, w);
  if (w == 1 || stride == 1) return cg_act_load(c, n, base, idx, w, dt);
  LLVMValueRef h;
  if (stride == 2) { /* lanes [idx, idx + w) and [idx + w - 1, idx + 2w - 1), even elements */
    LLVMValueRef lo = h16_load(c, base, idx, w), hi = h16_load(c, base, LLVMBuildAdd(c->b, idx, cg_i64(c, w - 1), ""), w);
    LLVMValueRef e[64];
    for (int i = 0; i < w; i++) e[i] = cg_i32(c, 2 * i < w ? 2 * i : 2 * i + 1);
    h = LLVMBuildShuffleVector(c->b, lo, hi, LLVMConstVector(e, (unsigned)w), "even");
  } else {
    h = LLVMGetPoison(h16t(c, w));
    for (int i = 0; i < w; i++)
      h = LLVMBuildInsertElement(c->b, h, h16_load(c, base, LLVMBuildAdd(c->b, idx, cg_i64(c, (int64_t)i * stride), ""), 1),
                                 cg_i32(c, i), "");
  }
  return cg_widen16_v(c, n, h, f, w);
}

static LLVMValueRef mask_const(cg_ctx *c, unsigned m, int w) {
  LLVMValueRef e[64];
  for (int l = 0; l < w; l++) e[l] = LLVMConstInt(c->t_i1, (m >> l) & 1, 0);
  return LLVMConstVector(e, (unsigned)w);
}

LLVMValueRef cg_act_masked_load(cg_ctx *c, const ir_node *n, LLVMValueRef base, LLVMValueRef idx, unsigned m, int w,
                                ir_dtype dt) {
  int f = cg_dt_half(dt);
  LLVMTypeRef et = f < 0 ? c->t_f32 : LLVMInt16TypeInContext(c->llc);
  LLVMTypeRef vt = f < 0 ? cg_vtype(c, w) : h16t(c, w);
  LLVMTypeRef ov[2] = {vt, c->t_ptr};
  LLVMValueRef ptr = LLVMBuildGEP2(c->b, et, base, &idx, 1, ""); /* lane 0 may be outside */
  LLVMValueRef args[4] = {ptr, cg_i32(c, f < 0 ? 4 : 2), mask_const(c, m, w), LLVMConstNull(vt)};
  LLVMValueRef v = cg_intrinsic(c, "llvm.masked.load", ov, 2, args, 4);
  return f < 0 ? v : cg_widen16_v(c, n, v, f, w);
}

void cg_act_store(cg_ctx *c, const ir_node *n, LLVMValueRef v, LLVMValueRef base, LLVMValueRef idx, int w, ir_dtype dt) {
  int f = cg_dt_half(dt);
  if (f < 0) {
    if (w == 1) cg_store_f32(c, v, base, idx);
    else cg_store_v(c, v, base, idx, w);
    return;
  }
  LLVMValueRef s = LLVMBuildStore(c->b, cg_narrow16_v(c, n, v, f, 0, w), h16_ptr(c, base, idx));
  LLVMSetAlignment(s, 2);
}

void cg_act_masked_store(cg_ctx *c, const ir_node *n, LLVMValueRef v, LLVMValueRef base, LLVMValueRef idx, unsigned m,
                         int w, ir_dtype dt) {
  int f = cg_dt_half(dt);
  if (f >= 0) v = cg_narrow16_v(c, n, v, f, 0, w);
  LLVMTypeRef et = f < 0 ? c->t_f32 : LLVMInt16TypeInContext(c->llc);
  LLVMTypeRef ov[2] = {LLVMTypeOf(v), c->t_ptr};
  LLVMValueRef ptr = LLVMBuildGEP2(c->b, et, base, &idx, 1, "");
  LLVMValueRef args[4] = {v, ptr, cg_i32(c, f < 0 ? 4 : 2), mask_const(c, m, w)};
  cg_intrinsic(c, "llvm.masked.store", ov, 2, args, 4);
}
