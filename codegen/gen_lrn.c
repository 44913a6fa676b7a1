/* gen_lrn.c — local response normalisation (ONNX LRN; ir.h ir_lrn_attr) and its backward
 * kernel, as ir/ref_norm.c defines them.  One writer per output element: the threads split
 * the [N*C] planes; each plane is a vectorised loop over the pixels whose body runs the
 * channel window (clamped to [0, C)) at run time.  s^-beta = exp(-beta log s) (s >= bias > 0;
 * cg_exp and a Cephes logf polynomial: no libm).  The backward kernel recomputes the window
 * sums s_c of the channels c whose window holds j (size^2 loads per element). */
#include <math.h>

#include "codegen/cg_internal.h"

/* log(x) for normal x > 0: x = m 2^e with m in [sqrt(1/2), sqrt(2)) (musl's offset trick),
 * then Cephes logf's polynomial in f = m - 1 and e ln2 in two parts. */
static LLVMValueRef lrn_log(cg_ctx *c, LLVMValueRef x, int w) {
  LLVMBuilderRef b = c->b;
  LLVMTypeRef it = w == 1 ? c->t_i32 : LLVMVectorType(c->t_i32, (unsigned)w), ft = cg_vtype(c, w);
  LLVMValueRef u = LLVMBuildAdd(b, LLVMBuildBitCast(b, x, it, ""), cg_splat_i32(c, 0x3f800000u - 0x3f3504f3u, w), "");
  LLVMValueRef e = LLVMBuildSub(b, LLVMBuildAShr(b, u, cg_splat_i32(c, 23, w), ""), cg_splat_i32(c, 127, w), "");
  LLVMValueRef m = LLVMBuildAdd(b, LLVMBuildAnd(b, u, cg_splat_i32(c, 0x7fffff, w), ""), cg_splat_i32(c, 0x3f3504f3u, w), "");
  LLVMValueRef f = LLVMBuildFSub(b, LLVMBuildBitCast(b, m, ft, ""), cg_fconst(c, 1.0f, w), "f");
  LLVMValueRef fe = LLVMBuildSIToFP(b, e, ft, "e");
  static const float p[9] = {7.0376836292E-2f, -1.1514610310E-1f, 1.1676998740E-1f, -1.2420140846E-1f, 1.4249322787E-1f,
                             -1.6668057665E-1f, 2.0000714765E-1f, -2.4999993993E-1f, 3.3333331174E-1f};
  LLVMValueRef y = cg_fconst(c, p[0], w);
  for (int i = 1; i < 9; i++) y = cg_fma(c, y, f, cg_fconst(c, p[i], w));
  LLVMValueRef z = LLVMBuildFMul(b, f, f, "");
  y = LLVMBuildFMul(b, LLVMBuildFMul(b, y, f, ""), z, "");
  y = cg_fma(c, fe, cg_fconst(c, -2.12194440e-4f, w), y);
  y = cg_fma(c, z, cg_fconst(c, -0.5f, w), y);
  LLVMValueRef r = LLVMBuildFAdd(b, f, y, "");
  return cg_fma(c, fe, cg_fconst(c, 0.693359375f, w), r);
}

typedef struct lrn_ctx {
  const ir_node *n;
  int64_t C, S;
  int lo, hi;
  LLVMValueRef x, dy, out, base, ch; /* base: b*C*S (i64); ch: this plane's channel */
} lrn_ctx;

/* Element (channel ch, pixel j) of this plane's image. */
static LLVMValueRef at(cg_ctx *c, lrn_ctx *u, LLVMValueRef ch, LLVMValueRef j) {
  return LLVMBuildAdd(c->b, u->base, LLVMBuildAdd(c->b, LLVMBuildMul(c->b, ch, cg_i64(c, u->S), ""), j, ""), "");
}

/* s of channel ch at pixel j: bias + alpha/size * sum over ch's window of x^2. */
static LLVMValueRef window_s(cg_ctx *c, lrn_ctx *u, LLVMValueRef ch, LLVMValueRef j, int w) {
  LLVMBuilderRef b = c->b;
  LLVMValueRef acc = cg_entry_alloca(c, cg_vtype(c, w), "lrn_acc");
  LLVMBuildStore(b, cg_fzero(c, w), acc);
  LLVMValueRef k0 = cg_max64(c, LLVMBuildSub(b, ch, cg_i64(c, u->lo), ""), cg_i64(c, 0));
  LLVMValueRef k1 = cg_min64(c, LLVMBuildAdd(b, ch, cg_i64(c, u->hi + 1), ""), cg_i64(c, u->C));
  cg_loop L;
  LLVMValueRef k = cg_loop_begin(c, &L, k0, k1, cg_i64(c, 1), "k");
  LLVMValueRef v = cg_load_v(c, u->x, at(c, u, k, j), w);
  LLVMBuildStore(b, cg_fma(c, v, v, LLVMBuildLoad2(b, cg_vtype(c, w), acc, "")), acc);
  cg_loop_end(c, &L);
  const ir_lrn_attr *a = &u->n->attr.lrn;
  return cg_fma(c, LLVMBuildLoad2(b, cg_vtype(c, w), acc, ""), cg_fconst(c, a->alpha / (float)a->size, w), cg_fconst(c, a->bias, w));
}

/* s^-beta; s NaN (a NaN in the window) stays NaN and s = inf (overflowed squares) gives
 * inf^-beta, as the reference's pow. */
static LLVMValueRef pow_neg_beta(cg_ctx *c, LLVMValueRef s, float beta, int w) {
  LLVMBuilderRef b = c->b;
  LLVMValueRef r = cg_exp(c, LLVMBuildFMul(b, lrn_log(c, s, w), cg_fconst(c, -beta, w), ""), w);
  r = LLVMBuildSelect(b, LLVMBuildFCmp(b, LLVMRealOEQ, s, cg_fconst(c, INFINITY, w), ""),
                      cg_fconst(c, beta > 0 ? 0.0f : beta < 0 ? INFINITY : 1.0f, w), r, "");
  return LLVMBuildSelect(b, LLVMBuildFCmp(b, LLVMRealUNO, s, s, ""), s, r, "");
}

static void fwd_body(cg_ctx *c, LLVMValueRef j, int w, void *user) {
  lrn_ctx *u = user;
  LLVMValueRef s = window_s(c, u, u->ch, j, w), i = at(c, u, u->ch, j);
  LLVMValueRef y = LLVMBuildFMul(c->b, cg_load_v(c, u->x, i, w), pow_neg_beta(c, s, u->n->attr.lrn.beta, w), "lrn");
  cg_store_v(c, y, u->out, i, w);
}

/* dx_j = dy_j s_j^-beta - 2 alpha beta/size x_j sum_{c in [j-hi, j+lo]} dy_c x_c s_c^-beta / s_c. */
static void bwd_body(cg_ctx *c, LLVMValueRef j, int w, void *user) {
  lrn_ctx *u = user;
  LLVMBuilderRef b = c->b;
  const ir_lrn_attr *a = &u->n->attr.lrn;
  LLVMValueRef acc = cg_entry_alloca(c, cg_vtype(c, w), "lrn_gacc");
  LLVMBuildStore(b, cg_fzero(c, w), acc);
  LLVMValueRef c0 = cg_max64(c, LLVMBuildSub(b, u->ch, cg_i64(c, u->hi), ""), cg_i64(c, 0));
  LLVMValueRef c1 = cg_min64(c, LLVMBuildAdd(b, u->ch, cg_i64(c, u->lo + 1), ""), cg_i64(c, u->C));
  cg_loop L;
  LLVMValueRef k = cg_loop_begin(c, &L, c0, c1, cg_i64(c, 1), "c");
  LLVMValueRef s = window_s(c, u, k, j, w), ik = at(c, u, k, j);
  LLVMValueRef t = LLVMBuildFMul(b, cg_load_v(c, u->dy, ik, w), cg_load_v(c, u->x, ik, w), "");
  t = LLVMBuildFDiv(b, LLVMBuildFMul(b, t, pow_neg_beta(c, s, a->beta, w), ""), s, "");
  LLVMBuildStore(b, LLVMBuildFAdd(b, LLVMBuildLoad2(b, cg_vtype(c, w), acc, ""), t, ""), acc);
  cg_loop_end(c, &L);
  LLVMValueRef i = at(c, u, u->ch, j), sj = window_s(c, u, u->ch, j, w);
  LLVMValueRef d = LLVMBuildFMul(b, cg_load_v(c, u->dy, i, w), pow_neg_beta(c, sj, a->beta, w), "");
  LLVMValueRef g = LLVMBuildFMul(b, cg_load_v(c, u->x, i, w), LLVMBuildLoad2(b, cg_vtype(c, w), acc, ""), "");
  cg_store_v(c, cg_fma(c, g, cg_fconst(c, -2.0f * a->alpha * a->beta / (float)a->size, w), d), u->out, i, w);
}

static LLVMValueRef gen_lrn(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind) {
  LLVMValueRef f, a[IR_MAX_IN + 3], op[IR_MAX_IN];
  int n_act = cg_kernel_begin_ops(c, n, fn_name, &f, a, op);
  int grad = n->op == IR_OP_lrn_grad;
  const ir_shape *s = &c->g->values[n->in[grad]].shape;
  lrn_ctx u = {n, s->dim[1], 1, (n->attr.lrn.size - 1) / 2, 0, grad ? op[1] : op[0], grad ? op[0] : NULL, a[n_act], NULL, NULL};
  u.hi = n->attr.lrn.size - 1 - u.lo;
  for (int k = 2; k < s->rank; k++) u.S *= s->dim[k];
  LLVMBuilderRef B = c->b;
  LLVMValueRef lo, hi;
  cg_thread_range(c, cg_i64(c, s->dim[0] * u.C), a[n_act + 1], a[n_act + 2], &lo, &hi); /* planes */
  cg_loop L;
  LLVMValueRef p = cg_loop_begin(c, &L, lo, hi, cg_i64(c, 1), "plane");
  LLVMValueRef bt = LLVMBuildUDiv(B, p, cg_i64(c, u.C), "");
  u.ch = LLVMBuildURem(B, p, cg_i64(c, u.C), "ch");
  u.base = LLVMBuildMul(B, bt, cg_i64(c, u.C * u.S), "");
  cg_inner_loop(c, u.S, grad ? bwd_body : fwd_body, &u);
  cg_loop_end(c, &L);
  cg_kernel_end(c);
  *kind = cg_kind(c, ir_ops[n->op].name, NULL);
  return f;
}

LLVMValueRef cg_gen_lrn(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind) {
  return gen_lrn(c, n, fn_name, kind);
}
LLVMValueRef cg_gen_lrn_grad(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind) {
  return gen_lrn(c, n, fn_name, kind);
}
