/* cg_util.c — IR-building helpers every generator uses: kernel prologue/epilogue, counted
 * loops, thread ranges, constants, f32 vector loads/stores/reductions, exp/sigmoid, fused
 * epilogues and the round16 body they use, element-wise loops, and the training generators'
 * helpers.  The bottom of codegen/: it calls only cg_target.c's queries. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/cg_internal.h"

LLVMValueRef cg_fail(cg_ctx *c, const ir_node *n, const char *fmt, ...) {
  cg_priv *p = c->priv;
  if (p->d->failed) return NULL;
  char msg[600];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  ir_diag_set(p->d, n ? n->loc : (ir_loc){0}, n ? n->name : NULL, "%s", msg);
  return NULL;
}

const pass_fusion *cg_fusion(cg_ctx *c, const ir_node *n) {
  static const pass_fusion none = {0, 0, -1, 0, {0}};
  cg_priv *p = c->priv;
  return p && p->plan ? &p->plan[n->id] : &none;
}

static void add_fn_attr(cg_ctx *c, LLVMValueRef f, const char *k, const char *v) {
  LLVMAddAttributeAtIndex(f, LLVMAttributeFunctionIndex,
                          LLVMCreateStringAttribute(c->llc, k, (unsigned)strlen(k), v, (unsigned)strlen(v)));
}

void cg_enum_attr(cg_ctx *c, LLVMValueRef f, unsigned idx, const char *name, uint64_t v) {
  unsigned kind = LLVMGetEnumAttributeKindForName(name, strlen(name));
  LLVMAddAttributeAtIndex(f, idx, LLVMCreateEnumAttribute(c->llc, kind, v));
}

void cg_set_fn_attrs(cg_ctx *c, LLVMValueRef f) {
  char w[16];
  snprintf(w, sizeof w, "%d", c->target->vec_f32 * 32);
  add_fn_attr(c, f, "target-cpu", c->target->cpu);
  add_fn_attr(c, f, "target-features", c->target->features);
  add_fn_attr(c, f, "min-legal-vector-width", w);
  add_fn_attr(c, f, "prefer-vector-width", w);
  add_fn_attr(c, f, "no-builtins", ""); /* no memcpy/memset calls: the .so imports nothing */
  /* No "probe-stack"="inline-asm": with it LLVM 19's frames of 64-byte-aligned multi-100-KB
   * allocas computed NaNs in test_codegen_ops/test_codegen_vc (2026-11-26); frames of up to
   * ~2 MB rely on RT_THREAD_STACK (runtime/rt_internal.h) instead. */
  cg_enum_attr(c, f, LLVMAttributeFunctionIndex, "nounwind", 0);
}

int cg_kernel_begin_ops(cg_ctx *c, const ir_node *n, const char *fn_name, LLVMValueRef *f, LLVMValueRef *a, LLVMValueRef *op) {
  const cg_priv *p = c->priv;
  int train = p && p->train, n_act = 0; /* a training layout passes every operand, params too */
  for (int i = 0; i < n->n_in; i++) n_act += train || c->g->values[n->in[i]].kind != IR_VAL_PARAM;
  *f = train ? cg_train_kbegin(c, fn_name, n_act, a) : cg_kernel_begin(c, fn_name, n_act, a);
  for (int i = 0, k = 0; i < n->n_in; i++)
    op[i] = !train && c->g->values[n->in[i]].kind == IR_VAL_PARAM ? cg_param_const(c, n->in[i]) : a[k++];
  return n_act;
}

LLVMValueRef cg_kernel_begin(cg_ctx *c, const char *name, int n_act, LLVMValueRef *args) { return cg_kernel_begin_x(c, name, n_act, 0, args); }

LLVMValueRef cg_kernel_begin_x(cg_ctx *c, const char *name, int n_act, int n_extra, LLVMValueRef *args) {
  LLVMTypeRef params[IR_MAX_IN + PASS_MAX_POST + 6];
  int np = n_act + 3 + n_extra;
  for (int i = 0; i <= n_act; i++) params[i] = c->t_ptr;
  params[n_act + 1] = params[n_act + 2] = c->t_i32;
  for (int i = 0; i < n_extra; i++) params[n_act + 3 + i] = c->t_ptr;
  LLVMValueRef f = LLVMAddFunction(c->mod, name, LLVMFunctionType(c->t_void, params, (unsigned)np, 0));
  LLVMSetVisibility(f, LLVMHiddenVisibility);
  cg_set_fn_attrs(c, f);
  cg_enum_attr(c, f, (unsigned)n_act + 1, "noalias", 0); /* out never overlaps an operand */
  for (int i = 0; i < np; i++) args[i] = LLVMGetParam(f, (unsigned)i);
  LLVMPositionBuilderAtEnd(c->b, LLVMAppendBasicBlockInContext(c->llc, f, "entry"));
  return f;
}

void cg_kernel_end(cg_ctx *c) { LLVMBuildRetVoid(c->b); }

LLVMValueRef cg_loop_begin(cg_ctx *c, cg_loop *L, LLVMValueRef lo, LLVMValueRef hi, LLVMValueRef step,
                           const char *name) {
  LLVMValueRef f = LLVMGetBasicBlockParent(LLVMGetInsertBlock(c->b));
  LLVMBasicBlockRef pre = LLVMGetInsertBlock(c->b);
  L->head = LLVMAppendBasicBlockInContext(c->llc, f, name);
  L->body = LLVMAppendBasicBlockInContext(c->llc, f, "body");
  L->exit = LLVMAppendBasicBlockInContext(c->llc, f, "exit");
  LLVMBuildBr(c->b, L->head);
  LLVMPositionBuilderAtEnd(c->b, L->head);
  L->iv = LLVMBuildPhi(c->b, c->t_i64, name);
  LLVMAddIncoming(L->iv, &lo, &pre, 1);
  L->step = step;
  L->hi = hi;
  LLVMBuildCondBr(c->b, LLVMBuildICmp(c->b, LLVMIntSLT, L->iv, hi, ""), L->body, L->exit);
  LLVMPositionBuilderAtEnd(c->b, L->body);
  return L->iv;
}

void cg_loop_end(cg_ctx *c, cg_loop *L) {
  L->latch = LLVMGetInsertBlock(c->b);
  LLVMValueRef next = LLVMBuildNSWAdd(c->b, L->iv, L->step, "");
  LLVMBuildBr(c->b, L->head);
  LLVMAddIncoming(L->iv, &next, &L->latch, 1);
  LLVMPositionBuilderAtEnd(c->b, L->exit);
}

LLVMValueRef cg_i64(cg_ctx *c, int64_t v) { return LLVMConstInt(c->t_i64, (unsigned long long)v, 1); }
LLVMValueRef cg_i32(cg_ctx *c, int32_t v) { return LLVMConstInt(c->t_i32, (unsigned long long)(int64_t)v, 1); }
LLVMValueRef cg_f32(cg_ctx *c, float v) { return LLVMConstReal(c->t_f32, v); }

void cg_thread_range(cg_ctx *c, LLVMValueRef n, LLVMValueRef tid, LLVMValueRef nthreads, LLVMValueRef *lo,
                     LLVMValueRef *hi) {
  LLVMValueRef t = LLVMBuildSExt(c->b, tid, c->t_i64, ""), nt = LLVMBuildSExt(c->b, nthreads, c->t_i64, "");
  LLVMValueRef t1 = LLVMBuildAdd(c->b, t, cg_i64(c, 1), "");
  *lo = LLVMBuildSDiv(c->b, LLVMBuildMul(c->b, n, t, ""), nt, "lo");
  *hi = LLVMBuildSDiv(c->b, LLVMBuildMul(c->b, n, t1, ""), nt, "hi");
}

LLVMValueRef cg_gep_f32(cg_ctx *c, LLVMValueRef base, LLVMValueRef idx) {
  return LLVMBuildInBoundsGEP2(c->b, c->t_f32, base, &idx, 1, "");
}
LLVMValueRef cg_load_f32(cg_ctx *c, LLVMValueRef base, LLVMValueRef idx) {
  return LLVMBuildLoad2(c->b, c->t_f32, cg_gep_f32(c, base, idx), "");
}
void cg_store_f32(cg_ctx *c, LLVMValueRef v, LLVMValueRef base, LLVMValueRef idx) {
  LLVMBuildStore(c->b, v, cg_gep_f32(c, base, idx));
}

LLVMValueRef cg_intrinsic(cg_ctx *c, const char *name, LLVMTypeRef *ov, int n_ov, LLVMValueRef *args, int n_args) {
  unsigned id = LLVMLookupIntrinsicID(name, strlen(name));
  LLVMValueRef fn = LLVMGetIntrinsicDeclaration(c->mod, id, ov, (size_t)n_ov);
  LLVMTypeRef ft = LLVMIntrinsicGetType(c->llc, id, ov, (size_t)n_ov);
  return LLVMBuildCall2(c->b, ft, fn, args, (unsigned)n_args, "");
}

LLVMTypeRef cg_vtype(cg_ctx *c, int w) { return w == 1 ? c->t_f32 : LLVMVectorType(c->t_f32, (unsigned)w); }

LLVMValueRef cg_splat(cg_ctx *c, LLVMValueRef s, int w) {
  if (w == 1) return s;
  LLVMTypeRef vt = cg_vtype(c, w);
  LLVMValueRef v = LLVMBuildInsertElement(c->b, LLVMGetPoison(vt), s, cg_i32(c, 0), "");
  LLVMValueRef mask = LLVMConstNull(LLVMVectorType(c->t_i32, (unsigned)w));
  return LLVMBuildShuffleVector(c->b, v, LLVMGetPoison(vt), mask, "splat");
}

LLVMValueRef cg_fconst(cg_ctx *c, float v, int w) {
  LLVMValueRef s = cg_f32(c, v);
  if (w == 1) return s;
  LLVMValueRef e[64];
  for (int i = 0; i < w; i++) e[i] = s;
  return LLVMConstVector(e, (unsigned)w);
}
LLVMValueRef cg_fzero(cg_ctx *c, int w) { return cg_fconst(c, 0.0f, w); }

LLVMValueRef cg_load_v(cg_ctx *c, LLVMValueRef base, LLVMValueRef idx, int w) {
  LLVMValueRef l = LLVMBuildLoad2(c->b, cg_vtype(c, w), cg_gep_f32(c, base, idx), "");
  LLVMSetAlignment(l, 4);
  return l;
}

void cg_store_v(cg_ctx *c, LLVMValueRef v, LLVMValueRef base, LLVMValueRef idx, int w) {
  (void)w;
  LLVMValueRef s = LLVMBuildStore(c->b, v, cg_gep_f32(c, base, idx));
  LLVMSetAlignment(s, 4);
}

static LLVMValueRef shuffle_const(cg_ctx *c, const int *m, int n) {
  LLVMValueRef e[64];
  for (int i = 0; i < n; i++) e[i] = cg_i32(c, m[i]);
  return LLVMConstVector(e, (unsigned)n);
}

LLVMValueRef cg_even_lanes(cg_ctx *c, LLVMValueRef a, LLVMValueRef b, int w) {
  int m[64];
  for (int i = 0; i < w; i++) m[i] = 2 * i;
  return LLVMBuildShuffleVector(c->b, a, b, shuffle_const(c, m, w), "even");
}

LLVMValueRef cg_load_strided(cg_ctx *c, LLVMValueRef base, LLVMValueRef idx, int stride, int w) {
  if (w == 1) return cg_load_f32(c, base, idx);
  if (stride == 1) return cg_load_v(c, base, idx, w);
  if (stride == 2) {
    /* Two vector loads covering [idx, idx + 2w - 1): the second starts at idx + w - 1 so
     * nothing past the last needed element (idx + 2w - 2) is read. */
    LLVMValueRef lo = cg_load_v(c, base, idx, w);
    LLVMValueRef hi = cg_load_v(c, base, LLVMBuildAdd(c->b, idx, cg_i64(c, w - 1), ""), w);
    int m[64];
    for (int i = 0; i < w; i++) m[i] = 2 * i < w ? 2 * i : 2 * i + 1;
    return LLVMBuildShuffleVector(c->b, lo, hi, shuffle_const(c, m, w), "even");
  }
  LLVMValueRef v = LLVMGetPoison(cg_vtype(c, w));
  for (int i = 0; i < w; i++) {
    LLVMValueRef x = cg_load_f32(c, base, LLVMBuildAdd(c->b, idx, cg_i64(c, (int64_t)i * stride), ""));
    v = LLVMBuildInsertElement(c->b, v, x, cg_i32(c, i), "");
  }
  return v;
}

LLVMValueRef cg_fma(cg_ctx *c, LLVMValueRef a, LLVMValueRef b, LLVMValueRef acc) {
  LLVMTypeRef t = LLVMTypeOf(a);
  LLVMValueRef args[3] = {a, b, acc};
  return cg_intrinsic(c, "llvm.fmuladd", &t, 1, args, 3);
}

/* Tree reduction of w lanes with op (0 = add, 1 = NaN-propagating max). */
static LLVMValueRef reduce(cg_ctx *c, LLVMValueRef v, int w, int op) {
  while (w > 1) {
    int h = w / 2, lo[32], hi[32];
    for (int i = 0; i < h; i++) lo[i] = i, hi[i] = h + i;
    LLVMValueRef a = LLVMBuildShuffleVector(c->b, v, v, shuffle_const(c, lo, h), "");
    LLVMValueRef b = LLVMBuildShuffleVector(c->b, v, v, shuffle_const(c, hi, h), "");
    if (h == 1) {
      a = LLVMBuildExtractElement(c->b, a, cg_i32(c, 0), "");
      b = LLVMBuildExtractElement(c->b, b, cg_i32(c, 0), "");
    }
    v = op == 0 ? LLVMBuildFAdd(c->b, a, b, "") : cg_max_nan(c, b, a);
    w = h;
  }
  return v;
}
LLVMValueRef cg_hsum(cg_ctx *c, LLVMValueRef v, int w) { return reduce(c, v, w, 0); }
LLVMValueRef cg_hmax(cg_ctx *c, LLVMValueRef v, int w) { return reduce(c, v, w, 1); }

LLVMValueRef cg_max_nan(cg_ctx *c, LLVMValueRef x, LLVMValueRef m) {
  LLVMValueRef gt = LLVMBuildFCmp(c->b, LLVMRealOGT, x, m, "");
  LLVMValueRef nan = LLVMBuildFCmp(c->b, LLVMRealUNO, x, x, "");
  return LLVMBuildSelect(c->b, LLVMBuildOr(c->b, gt, nan, ""), x, m, "max");
}

LLVMValueRef cg_relu(cg_ctx *c, LLVMValueRef x, int w) {
  LLVMValueRef z = cg_fzero(c, w);
  return LLVMBuildSelect(c->b, LLVMBuildFCmp(c->b, LLVMRealUGT, x, z, ""), x, z, "relu");
}

/* 2^n * p(r): x clamped to [lo, hi] (NaN passes through the clamps and the whole way),
 * n = round-to-nearest(x * log2(e)) by adding 1.5*2^23 + 127 (the sum's low mantissa bits
 * are n + 127; shifted left by 23 they are the bits of 2^n, no float<->int conversion),
 * r = x - n*ln2 (Cody-Waite, two FMAs), p = Cephes expf's polynomial (degree 7, 8
 * instructions) or, short_poly, a degree-5 one (5 FMAs; fit error 1.1e-7 on |r| <= ln2/2
 * before rounding).  lo must keep n >= -127 (n = -127 gives 2^n = 0)
 * and hi n <= 128 (128 gives inf). */
static LLVMValueRef exp_core(cg_ctx *c, LLVMValueRef x, int w, float lo, float hi, int short_poly) {
  LLVMBuilderRef b = c->b;
  LLVMValueRef vhi = cg_fconst(c, hi, w), vlo = cg_fconst(c, lo, w);
  x = LLVMBuildSelect(b, LLVMBuildFCmp(b, LLVMRealOGT, x, vhi, ""), vhi, x, ""); /* maxps/minps */
  x = LLVMBuildSelect(b, LLVMBuildFCmp(b, LLVMRealOLT, x, vlo, ""), vlo, x, "");
  LLVMValueRef shifter = cg_fconst(c, 12583039.0f, w); /* 1.5 * 2^23 + 127 */
  LLVMValueRef t = cg_fma(c, x, cg_fconst(c, 1.44269504088896341f, w), shifter);
  LLVMValueRef fx = LLVMBuildFSub(b, t, shifter, "n");
  LLVMValueRef r = cg_fma(c, fx, cg_fconst(c, -0.693359375f, w), x);
  r = cg_fma(c, fx, cg_fconst(c, 2.12194440e-4f, w), r);
  LLVMValueRef y;
  if (short_poly) { /* 1 + r + c2 r^2 + .. + c5 r^5, c2..c5 fitted (relative minimax, c0 = c1 = 1) */
    static const float q[4] = {8.312501944601536e-3f, 4.189033433794975e-2f, 0.16667115688323975f,
                               0.499992311000824f};
    y = cg_fconst(c, q[0], w);
    for (int i = 1; i < 4; i++) y = cg_fma(c, y, r, cg_fconst(c, q[i], w));
    y = cg_fma(c, y, r, cg_fconst(c, 1.0f, w));
    y = cg_fma(c, y, r, cg_fconst(c, 1.0f, w));
  } else {
    static const float p[6] = {1.9875691500E-4f, 1.3981999507E-3f, 8.3334519073E-3f,
                               4.1665795894E-2f, 1.6666665459E-1f, 5.0000001201E-1f};
    y = cg_fconst(c, p[0], w);
    for (int i = 1; i < 6; i++) y = cg_fma(c, y, r, cg_fconst(c, p[i], w));
    LLVMValueRef r2 = LLVMBuildFMul(b, r, r, "");
    y = cg_fma(c, y, r2, LLVMBuildFAdd(b, r, cg_fconst(c, 1.0f, w), ""));
  }
  LLVMTypeRef vt = cg_vtype(c, w), it = w == 1 ? c->t_i32 : LLVMVectorType(c->t_i32, (unsigned)w);
  LLVMValueRef c23 = w == 1 ? cg_i32(c, 23) : NULL;
  if (w > 1) {
    LLVMValueRef e[64];
    for (int i = 0; i < w; i++) e[i] = cg_i32(c, 23);
    c23 = LLVMConstVector(e, (unsigned)w);
  }
  LLVMValueRef pow2n = LLVMBuildBitCast(b, LLVMBuildShl(b, LLVMBuildBitCast(b, t, it, ""), c23, ""), vt, "");
  return LLVMBuildFMul(b, y, pow2n, "exp");
}

/* exp(x): 0 below -88 (where the old floor-based version also gave 0: 2^-127 has no normal
 * encoding), inf from ~88.38 on, NaN stays NaN. */
LLVMValueRef cg_exp(cg_ctx *c, LLVMValueRef x, int w) { return exp_core(c, x, w, -88.0f, 88.3762626647949f, 0); }

/* 1/d for d >= 1 (or NaN): on x86, rcpps (relative error eps <= 1.5 * 2^-12) refined by one
 * third-order step, r0 * (1 + e + e^2) with e = 1 - d*r0 (error eps^3 ~ 2^-34: the result is
 * 1/d to within rounding, and exactly 1 for d = 1, which a plain Newton step, error eps^2 =
 * 2^-24, misses by an ulp), three FMAs instead of a vdivps (Zen 3: latency 10-11, one per
 * 3.5 cycles for 256 bits).  rcpps flushes results below 2^-126 to 0, so d >= 2^126
 * gives 0 (1/d would be denormal); d = NaN gives NaN.  16 lanes (AVX-512): vrcp14ps, the same
 * step, and an explicit 0 for d >= 2^126.  Elsewhere (non-x86 triples) a plain fdiv. */
static LLVMValueRef recip_ge1(cg_ctx *c, LLVMValueRef d, int w) {
  LLVMValueRef one = cg_fconst(c, 1.0f, w);
  const char *tr = c->target->triple;
  int x86 = strncmp(tr, "x86_64", 6) == 0 || (tr[0] == 'i' && strstr(tr, "86"));
  LLVMValueRef r0 = NULL;
  if (x86 && w == 16 && c->target->vec_f32 >= 16) {
    /* vrcp14ps (relative error <= 2^-14) gives denormal results where rcpps flushes: the
     * select below restores rcpps' 0 for d >= 2^126, so every width returns the same values */
    LLVMValueRef a[3] = {d, LLVMConstNull(LLVMTypeOf(d)), LLVMConstAllOnes(LLVMInt16TypeInContext(c->llc))};
    r0 = cg_intrinsic(c, "llvm.x86.avx512.rcp14.ps.512", NULL, 0, a, 3);
    LLVMValueRef e = cg_fma(c, LLVMBuildFNeg(c->b, d, ""), r0, one);
    LLVMValueRef r = cg_fma(c, r0, cg_fma(c, e, e, e), r0);
    LLVMValueRef big = LLVMBuildFCmp(c->b, LLVMRealOGE, d, cg_fconst(c, 0x1p126f, w), "");
    return LLVMBuildSelect(c->b, big, LLVMConstNull(LLVMTypeOf(d)), r, "recip");
  }
  if (x86 && w == 8 && c->target->vec_f32 >= 8) {
    r0 = cg_intrinsic(c, "llvm.x86.avx.rcp.ps.256", NULL, 0, &d, 1);
  } else if (x86 && w == 4 && c->target->vec_f32 >= 4) {
    r0 = cg_intrinsic(c, "llvm.x86.sse.rcp.ps", NULL, 0, &d, 1);
  } else if (x86 && w == 1 && c->target->vec_f32 >= 4) {
    LLVMValueRef v = LLVMBuildInsertElement(c->b, LLVMGetUndef(LLVMVectorType(c->t_f32, 4)), d, cg_i32(c, 0), "");
    v = cg_intrinsic(c, "llvm.x86.sse.rcp.ss", NULL, 0, &v, 1);
    r0 = LLVMBuildExtractElement(c->b, v, cg_i32(c, 0), "");
  }
  if (!r0) return LLVMBuildFDiv(c->b, one, d, "recip");
  LLVMValueRef e = cg_fma(c, LLVMBuildFNeg(c->b, d, ""), r0, one); /* 1 - d*r0, one rounding */
  return cg_fma(c, r0, cg_fma(c, e, e, e), r0);                     /* r0 * (1 + e + e^2) */
}

/* sigmoid(x) = 1 / (1 + exp(-x)), exp(-x) clamped to [-88, 88]: x >= 88 gives exactly 1
 * (2^-127 -> 0), x <= -87.34 gives 0 (the true value is below 2^-126; rcpps flushes it),
 * NaN stays NaN. */
LLVMValueRef cg_sigmoid(cg_ctx *c, LLVMValueRef x, int w) {
  LLVMValueRef e = exp_core(c, LLVMBuildFNeg(c->b, x, ""), w, -88.0f, 88.0f, 1);
  return recip_ge1(c, LLVMBuildFAdd(c->b, cg_fconst(c, 1.0f, w), e, ""), w);
}

/* x < lo ? lo : x > hi ? hi : x (ir_clip_f32): NaN compares false both times and stays. */
LLVMValueRef cg_clip(cg_ctx *c, LLVMValueRef x, float lo, float hi, int w) {
  LLVMValueRef l = cg_fconst(c, lo, w), h = cg_fconst(c, hi, w);
  LLVMValueRef y = LLVMBuildSelect(c->b, LLVMBuildFCmp(c->b, LLVMRealOLT, x, l, ""), l, x, "");
  return LLVMBuildSelect(c->b, LLVMBuildFCmp(c->b, LLVMRealOGT, y, h, ""), h, y, "clip");
}

/* clip(fma(alpha, x, beta), 0, 1) (ir_hardsigmoid_f32). */
LLVMValueRef cg_hardsigmoid(cg_ctx *c, LLVMValueRef x, float alpha, float beta, int w) {
  return cg_clip(c, cg_fma(c, cg_fconst(c, alpha, w), x, cg_fconst(c, beta, w)), 0.0f, 1.0f, w);
}

LLVMValueRef cg_activation(cg_ctx *c, const ir_node *n, LLVMValueRef x, int w) {
  switch (n->op) {
  case IR_OP_relu: return cg_relu(c, x, w);
  case IR_OP_sigmoid: return cg_sigmoid(c, x, w);
  case IR_OP_swish: return LLVMBuildFMul(c->b, x, cg_sigmoid(c, x, w), "swish");
  case IR_OP_clip: return cg_clip(c, x, n->attr.clip.lo, n->attr.clip.hi, w);
  case IR_OP_leaky_relu: { /* x > 0 or NaN: x; else alpha x */
    LLVMValueRef pos = LLVMBuildFCmp(c->b, LLVMRealUGT, x, cg_fzero(c, w), "");
    return LLVMBuildSelect(c->b, pos, x, LLVMBuildFMul(c->b, x, cg_fconst(c, n->attr.leaky_relu.alpha, w), ""), "leaky");
  }
  case IR_OP_hardsigmoid: return cg_hardsigmoid(c, x, n->attr.hardsigmoid.alpha, n->attr.hardsigmoid.beta, w);
  case IR_OP_quantize8: { /* ir_quantize8_f32: roundeven(x inv) clamped, NaN -> 0 */
    const ir_quantize8_attr *q = &n->attr.quantize8;
    LLVMTypeRef vt = LLVMTypeOf(x);
    LLVMValueRef t = LLVMBuildFMul(c->b, x, cg_fconst(c, q->inv, w), "");
    t = cg_intrinsic(c, "llvm.roundeven", &vt, 1, &t, 1);
    t = cg_clip(c, t, (float)q->lo, (float)q->hi, w);
    return LLVMBuildSelect(c->b, LLVMBuildFCmp(c->b, LLVMRealUNO, t, t, ""), cg_fzero(c, w), t, "q8");
  }
  case IR_OP_hardswish:
    return LLVMBuildFMul(c->b, x, cg_hardsigmoid(c, x, IR_HARDSWISH_ALPHA, IR_HARDSWISH_BETA, w), "hardswish");
  case IR_OP_exp: return cg_exp(c, x, w);
  case IR_OP_sqrt: { /* correctly rounded (vsqrtps), NaN below 0 as sqrtf */
    LLVMTypeRef vt = LLVMTypeOf(x);
    return cg_intrinsic(c, "llvm.sqrt", &vt, 1, &x, 1);
  }
  case IR_OP_neg: return LLVMBuildFNeg(c->b, x, "neg");
  default: return NULL;
  }
}

LLVMValueRef cg_epilogue(cg_ctx *c, const ir_node *post, LLVMValueRef v, LLVMValueRef resid, LLVMValueRef idx, int w) {
  switch (post->op) {
  case IR_OP_relu: case IR_OP_sigmoid: case IR_OP_swish: case IR_OP_clip: case IR_OP_hardsigmoid: case IR_OP_hardswish:
  case IR_OP_leaky_relu: case IR_OP_quantize8:
    return cg_activation(c, post, v, w);
  case IR_OP_add: return LLVMBuildFAdd(c->b, v, cg_load_v(c, resid, idx, w), "resid");
  case IR_OP_round16: return cg_round16_v(c, post, v, post->attr.round16.format, w); /* last op (fuse.c) */
  default: return v;
  }
}

LLVMValueRef cg_entry_alloca(cg_ctx *c, LLVMTypeRef t, const char *name) {
  LLVMBasicBlockRef cur = LLVMGetInsertBlock(c->b);
  LLVMBasicBlockRef entry = LLVMGetEntryBasicBlock(LLVMGetBasicBlockParent(cur));
  LLVMBuilderRef tb = LLVMCreateBuilderInContext(c->llc);
  LLVMValueRef first = LLVMGetFirstInstruction(entry);
  if (first) LLVMPositionBuilderBefore(tb, first);
  else LLVMPositionBuilderAtEnd(tb, entry);
  LLVMValueRef a = LLVMBuildAlloca(tb, t, name);
  LLVMDisposeBuilder(tb);
  return a;
}

LLVMValueRef cg_min64(cg_ctx *c, LLVMValueRef a, LLVMValueRef b) {
  return LLVMBuildSelect(c->b, LLVMBuildICmp(c->b, LLVMIntSLT, a, b, ""), a, b, "");
}
LLVMValueRef cg_max64(cg_ctx *c, LLVMValueRef a, LLVMValueRef b) {
  return LLVMBuildSelect(c->b, LLVMBuildICmp(c->b, LLVMIntSGT, a, b, ""), a, b, "");
}

void cg_if_begin(cg_ctx *c, cg_if *f, LLVMValueRef cond) {
  LLVMValueRef fn = LLVMGetBasicBlockParent(LLVMGetInsertBlock(c->b));
  f->then_bb = LLVMAppendBasicBlockInContext(c->llc, fn, "then");
  f->else_bb = LLVMAppendBasicBlockInContext(c->llc, fn, "else");
  f->end_bb = LLVMAppendBasicBlockInContext(c->llc, fn, "endif");
  LLVMBuildCondBr(c->b, cond, f->then_bb, f->else_bb);
  LLVMPositionBuilderAtEnd(c->b, f->then_bb);
}

void cg_if_else(cg_ctx *c, cg_if *f) {
  LLVMBuildBr(c->b, f->end_bb);
  LLVMPositionBuilderAtEnd(c->b, f->else_bb);
  f->else_bb = NULL; /* used */
}

void cg_if_end(cg_ctx *c, cg_if *f) {
  LLVMBuildBr(c->b, f->end_bb);
  if (f->else_bb) {
    LLVMPositionBuilderAtEnd(c->b, f->else_bb);
    LLVMBuildBr(c->b, f->end_bb);
  }
  LLVMPositionBuilderAtEnd(c->b, f->end_bb);
}

const char *cg_kind(cg_ctx *c, const char *op, const char *tile) {
  const char *isa = cg_isa_name(c->target);
  if (tile && *tile) return ir_fmt(c->arena, "%s_f32_%s__%s", op, tile, isa);
  return ir_fmt(c->arena, "%s_f32__%s", op, isa);
}

int64_t cg_numel(cg_ctx *c, int vid) { return ir_shape_numel(&c->g->values[vid].shape); }

static LLVMValueRef shuffle_m(cg_ctx *c, LLVMValueRef a, LLVMValueRef b, const int *m, int V) {
  LLVMValueRef e[64];
  for (int i = 0; i < V; i++) e[i] = cg_i32(c, m[i]);
  return LLVMBuildShuffleVector(c->b, a, b, LLVMConstVector(e, (unsigned)V), "");
}

/* In-register transpose: a[p] (p < np <= V, V lanes of channels) -> t[l] whose lane p is
 * a[p][l] (lanes >= np undefined).  V = 8: the unpack / shufps / vperm2f128 network (24
 * single-instruction shuffles on AVX2); other powers of two: log2(V) rounds of perfect
 * shuffles (row i interleaved with row i + V/2). */
void cg_transpose_v(cg_ctx *c, int V, int np, const LLVMValueRef *a, LLVMValueRef *t) {
  LLVMValueRef r[64], n[64];
  for (int i = 0; i < V; i++) r[i] = i < np ? a[i] : LLVMGetPoison(cg_vtype(c, V));
  if (V == 8) {
    static const int U[8] = {0, 8, 1, 9, 4, 12, 5, 13}, H[8] = {2, 10, 3, 11, 6, 14, 7, 15};
    static const int L[8] = {0, 1, 8, 9, 4, 5, 12, 13}, E[8] = {2, 3, 10, 11, 6, 7, 14, 15};
    static const int A[8] = {0, 1, 2, 3, 8, 9, 10, 11}, B[8] = {4, 5, 6, 7, 12, 13, 14, 15};
    for (int i = 0; i < 8; i += 2) n[i] = shuffle_m(c, r[i], r[i + 1], U, 8), n[i + 1] = shuffle_m(c, r[i], r[i + 1], H, 8);
    for (int i = 0; i < 8; i += 4) {
      r[i] = shuffle_m(c, n[i], n[i + 2], L, 8), r[i + 1] = shuffle_m(c, n[i], n[i + 2], E, 8);
      r[i + 2] = shuffle_m(c, n[i + 1], n[i + 3], L, 8), r[i + 3] = shuffle_m(c, n[i + 1], n[i + 3], E, 8);
    }
    for (int i = 0; i < 4; i++) t[i] = shuffle_m(c, r[i], r[i + 4], A, 8), t[i + 4] = shuffle_m(c, r[i], r[i + 4], B, 8);
    return;
  }
  int lo[64], hi[64];
  for (int j = 0; j < V / 2; j++) lo[2 * j] = j, lo[2 * j + 1] = V + j, hi[2 * j] = V / 2 + j, hi[2 * j + 1] = V + V / 2 + j;
  for (int k = 1; k < V; k *= 2) {
    for (int i = 0; i < V / 2; i++) n[2 * i] = shuffle_m(c, r[i], r[i + V / 2], lo, V), n[2 * i + 1] = shuffle_m(c, r[i], r[i + V / 2], hi, V);
    for (int i = 0; i < V; i++) r[i] = n[i];
  }
  for (int i = 0; i < V; i++) t[i] = r[i];
}

/* ---- round16 (docs/precision.md): the vector body of the round16 kernel (gen_round16.c) and
 * of fused round16 epilogues ---------------------------------------------------------------- */
LLVMValueRef cg_splat_i32(cg_ctx *c, uint32_t v, int w) {
  LLVMValueRef s = LLVMConstInt(c->t_i32, v, 0);
  if (w == 1) return s;
  LLVMValueRef e[64];
  for (int i = 0; i < w; i++) e[i] = s;
  return LLVMConstVector(e, (unsigned)w);
}

static LLVMValueRef round_bf16(cg_ctx *c, LLVMValueRef x, int w) {
  LLVMBuilderRef b = c->b;
  LLVMTypeRef it = w == 1 ? c->t_i32 : LLVMVectorType(c->t_i32, (unsigned)w);
  LLVMValueRef u = LLVMBuildBitCast(b, x, it, "u");
  LLVMValueRef lsb = LLVMBuildAnd(b, LLVMBuildLShr(b, u, cg_splat_i32(c, 16, w), ""), cg_splat_i32(c, 1, w), "lsb");
  LLVMValueRef r = LLVMBuildAdd(b, LLVMBuildAdd(b, u, cg_splat_i32(c, 0x7fff, w), ""), lsb, "");
  r = LLVMBuildAnd(b, r, cg_splat_i32(c, 0xffff0000u, w), "rne");
  LLVMValueRef q = LLVMBuildAnd(b, LLVMBuildOr(b, u, cg_splat_i32(c, 0x00400000u, w), ""), cg_splat_i32(c, 0xffff0000u, w), "qnan");
  LLVMValueRef nan = LLVMBuildFCmp(b, LLVMRealUNO, x, x, "isnan");
  return LLVMBuildBitCast(b, LLVMBuildSelect(b, nan, q, r, ""), cg_vtype(c, w), "");
}

static LLVMValueRef round_fp16(cg_ctx *c, LLVMValueRef x, int w) {
  LLVMTypeRef h = LLVMHalfTypeInContext(c->llc);
  LLVMTypeRef ht = w == 1 ? h : LLVMVectorType(h, (unsigned)w);
  return LLVMBuildFPExt(c->b, LLVMBuildFPTrunc(c->b, x, ht, "half"), cg_vtype(c, w), "");
}

LLVMValueRef cg_round16_v(cg_ctx *c, const ir_node *n, LLVMValueRef x, int format, int w) {
  if (format != IR_HALF_FP16) return round_bf16(c, x, w);
  if (!cg_has_f16c(c->target)) {
    cg_fail(c, n, "%s", CG_NO_F16C_MSG);
    return x;
  }
  return round_fp16(c, x, w);
}

/* ---- element-wise loops shared by the generators ----------------------------------------- */
void cg_foreach_elem(cg_ctx *c, int64_t n, LLVMValueRef tid, LLVMValueRef nth, cg_elem_body body, void *user) {
  int v = c->target->vec_f32;
  int64_t nvec = n / v, tail = n % v;
  LLVMValueRef lo, hi;
  cg_thread_range(c, cg_i64(c, nvec), tid, nth, &lo, &hi);
  cg_loop L;
  LLVMValueRef i = cg_loop_begin(c, &L, lo, hi, cg_i64(c, 1), "vec");
  body(c, LLVMBuildMul(c->b, i, cg_i64(c, v), "idx"), v, user);
  cg_loop_end(c, &L);
  if (!tail) return;
  cg_if f;
  LLVMValueRef last = LLVMBuildSub(c->b, nth, cg_i32(c, 1), "");
  cg_if_begin(c, &f, LLVMBuildICmp(c->b, LLVMIntEQ, tid, last, ""));
  cg_loop T;
  LLVMValueRef j = cg_loop_begin(c, &T, cg_i64(c, nvec * v), cg_i64(c, n), cg_i64(c, 1), "tail");
  body(c, j, 1, user);
  cg_loop_end(c, &T);
  cg_if_end(c, &f);
}

void cg_inner_loop(cg_ctx *c, int64_t n, cg_elem_body body, void *user) {
  int v = c->target->vec_f32;
  int64_t nv = n / v * v;
  cg_loop L;
  if (nv > 0) {
    LLVMValueRef j = cg_loop_begin(c, &L, cg_i64(c, 0), cg_i64(c, nv), cg_i64(c, v), "j");
    body(c, j, v, user);
    cg_loop_end(c, &L);
  }
  if (nv < n) {
    LLVMValueRef j = cg_loop_begin(c, &L, cg_i64(c, nv), cg_i64(c, n), cg_i64(c, 1), "jt");
    body(c, j, 1, user);
    cg_loop_end(c, &L);
  }
}

/* ---- training helpers (gen_train.h's generators and others) ------------------------------ */
LLVMValueRef cg_train_kbegin(cg_ctx *c, const char *name, int n_act, LLVMValueRef *args) {
  LLVMValueRef f = cg_kernel_begin(c, name, n_act, args);
  unsigned kind = LLVMGetEnumAttributeKindForName("noalias", 7);
  LLVMRemoveEnumAttributeAtIndex(f, (unsigned)n_act + 1, kind);
  return f;
}

LLVMValueRef cg_tadd(cg_ctx *c, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildAdd(c->b, a, b, ""); }
LLVMValueRef cg_tmul(cg_ctx *c, LLVMValueRef a, int64_t k) { return k == 1 ? a : LLVMBuildMul(c->b, a, cg_i64(c, k), ""); }
LLVMValueRef cg_taddk(cg_ctx *c, LLVMValueRef a, int64_t k) { return k == 0 ? a : LLVMBuildAdd(c->b, a, cg_i64(c, k), ""); }

unsigned cg_lanes(int n, int w) {
  if (n <= 0) return 0;
  if (n > w) n = w;
  return n >= 32 ? ~0u : (1u << n) - 1;
}

static LLVMValueRef mask_vec(cg_ctx *c, unsigned m, int w) {
  LLVMValueRef e[64];
  for (int l = 0; l < w; l++) e[l] = LLVMConstInt(c->t_i1, (m >> l) & 1, 0);
  return LLVMConstVector(e, (unsigned)w);
}

LLVMValueRef cg_tload(cg_ctx *c, LLVMValueRef base, LLVMValueRef idx, int stride, unsigned m, int w) {
  if (w == 1) return m ? cg_load_f32(c, base, idx) : cg_f32(c, 0.0f);
  if (m == cg_lanes(w, w)) return cg_load_strided(c, base, idx, stride, w);
  if (stride == 1) {
    LLVMTypeRef ov[2] = {cg_vtype(c, w), c->t_ptr};
    LLVMValueRef ptr = LLVMBuildGEP2(c->b, c->t_f32, base, &idx, 1, ""); /* lane 0 may be outside */
    LLVMValueRef args[4] = {ptr, cg_i32(c, 4), mask_vec(c, m, w), cg_fzero(c, w)};
    return cg_intrinsic(c, "llvm.masked.load", ov, 2, args, 4);
  }
  LLVMValueRef v = cg_fzero(c, w);
  for (int l = 0; l < w; l++)
    if (m >> l & 1) v = LLVMBuildInsertElement(c->b, v, cg_load_f32(c, base, LLVMBuildAdd(c->b, idx, cg_i64(c, (int64_t)l * stride), "")), cg_i32(c, l), "");
  return v;
}

void cg_tstore(cg_ctx *c, LLVMValueRef v, LLVMValueRef base, LLVMValueRef idx, unsigned m, int w) {
  if (w == 1 || m == cg_lanes(w, w)) {
    if (w == 1 && !m) return;
    cg_store_v(c, v, base, idx, w);
    return;
  }
  LLVMTypeRef ov[2] = {cg_vtype(c, w), c->t_ptr};
  LLVMValueRef ptr = LLVMBuildGEP2(c->b, c->t_f32, base, &idx, 1, "");
  LLVMValueRef args[4] = {v, ptr, cg_i32(c, 4), mask_vec(c, m, w)};
  cg_intrinsic(c, "llvm.masked.store", ov, 2, args, 4);
}

int cg_tgroups(int64_t n, int maxp) { return (int)((n + maxp - 1) / maxp); }
int cg_tgroup_size(int64_t n, int groups, int i) { return (int)(n * (i + 1) / groups - n * i / groups); }
