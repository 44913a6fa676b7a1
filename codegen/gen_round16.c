/* gen_round16.c — compiled round16 (issue 6, docs/precision.md): y = x rounded to bf16 or
 * fp16 and widened back to f32, bit-identical to ir/ref_round16.c.
 *   bf16: integer ops on <w x i32>: u + 0x7fff + ((u >> 16) & 1), low 16 bits cleared; NaN
 *         lanes (x != x) become (u | 0x00400000) & 0xffff0000 (quiet).
 *   fp16: LLVM fptrunc <w x float> -> <w x half>, fpext back (F16C vcvtps2ph / vcvtph2ps on
 *         x86; both round to nearest even, keep subnormals, overflow to inf).  Needs a target
 *         with native half conversions (the .so imports no libcalls): +f16c on x86.
 * Operands: inference x is an activation; in training every operand is a pointer (a param
 * read through round16 is its compute copy, the master stays in the state buffer). */
#include <string.h>

#include "codegen/cg_internal.h"
#include "codegen/gen_round16.h"
#include "codegen/gen_train.h"

typedef struct r16_ctx { const ir_node *n; LLVMValueRef x, out; } r16_ctx;

static LLVMValueRef splat_i32(cg_ctx *c, uint32_t v, int w) {
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
  LLVMValueRef lsb = LLVMBuildAnd(b, LLVMBuildLShr(b, u, splat_i32(c, 16, w), ""), splat_i32(c, 1, w), "lsb");
  LLVMValueRef r = LLVMBuildAdd(b, LLVMBuildAdd(b, u, splat_i32(c, 0x7fff, w), ""), lsb, "");
  r = LLVMBuildAnd(b, r, splat_i32(c, 0xffff0000u, w), "rne");
  LLVMValueRef q = LLVMBuildAnd(b, LLVMBuildOr(b, u, splat_i32(c, 0x00400000u, w), ""), splat_i32(c, 0xffff0000u, w), "qnan");
  LLVMValueRef nan = LLVMBuildFCmp(b, LLVMRealUNO, x, x, "isnan");
  return LLVMBuildBitCast(b, LLVMBuildSelect(b, nan, q, r, ""), cg_vtype(c, w), "");
}

static LLVMValueRef round_fp16(cg_ctx *c, LLVMValueRef x, int w) {
  LLVMTypeRef h = LLVMHalfTypeInContext(c->llc);
  LLVMTypeRef ht = w == 1 ? h : LLVMVectorType(h, (unsigned)w);
  return LLVMBuildFPExt(c->b, LLVMBuildFPTrunc(c->b, x, ht, "half"), cg_vtype(c, w), "");
}

/* Whether the target converts f32 <-> f16 natively (no libcall). */
static int has_f16c(const cg_target *t) {
  if (t->triple && strncmp(t->triple, "x86_64", 6) && strncmp(t->triple, "i386", 4) && strncmp(t->triple, "i686", 4))
    return 1; /* other targets (AArch64 ...) convert natively */
  return t->features && strstr(t->features, "+f16c") != NULL;
}

static const char *const no_f16c_msg =
    "--half-type fp16 needs a target with F16C (native f32<->f16 conversions); use bf16 or add +f16c";

LLVMValueRef cg_round16_v(cg_ctx *c, const ir_node *n, LLVMValueRef x, int format, int w) {
  if (format != IR_HALF_FP16) return round_bf16(c, x, w);
  if (!has_f16c(c->target)) {
    cg_fail(c, n, "%s", no_f16c_msg);
    return x;
  }
  return round_fp16(c, x, w);
}

static void r16_body(cg_ctx *c, LLVMValueRef idx, int w, void *user) {
  r16_ctx *u = user;
  LLVMValueRef x = cg_load_v(c, u->x, idx, w);
  cg_store_v(c, cg_round16_v(c, u->n, x, u->n->attr.round16.format, w), u->out, idx, w);
}

LLVMValueRef cg_gen_round16(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind) {
  int fp16 = n->attr.round16.format == IR_HALF_FP16;
  if (fp16 && !has_f16c(c->target))
    return cg_fail(c, n, "%s", no_f16c_msg);
  const ir_value *xv = &c->g->values[n->in[0]];
  int param = xv->kind == IR_VAL_PARAM && !((cg_priv *)c->priv)->train; /* inference: embedded constant */
  LLVMValueRef a[4];
  int train = ((cg_priv *)c->priv)->train;
  LLVMValueRef f = train ? cg_train_kbegin(c, fn_name, 1, a) : cg_kernel_begin(c, fn_name, param ? 0 : 1, a);
  r16_ctx u = {n, param ? cg_param_const(c, n->in[0]) : a[0], param ? a[0] : a[1]};
  LLVMValueRef tid = param ? a[1] : a[2], nth = param ? a[2] : a[3];
  char tile[16];
  snprintf(tile, sizeof tile, "v%d", c->target->vec_f32);
  cg_foreach_elem(c, cg_numel(c, n->out), tid, nth, r16_body, &u);
  cg_kernel_end(c);
  *kind = cg_kind(c, fp16 ? "round16_fp16" : "round16_bf16", tile);
  return f;
}
