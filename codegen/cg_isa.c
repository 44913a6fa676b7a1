/* cg_isa.c — ISA-specific code that kernels emit (cg_isa.h; with cg_target.c the only codegen
 * files that name ISAs): the bf16 dot-product step, vdpbf16ps or its exact emulation. */
#include "codegen/cg_internal.h"
#include "codegen/cg_isa.h"

static LLVMValueRef splat_i32v(cg_ctx *c, uint32_t v, int w) {
  LLVMValueRef e[64];
  for (int i = 0; i < w; i++) e[i] = LLVMConstInt(c->t_i32, v, 0);
  return LLVMConstVector(e, (unsigned)w);
}

/* Integer lanes u (<V x i32> f32 bit patterns) with denormals replaced by a signed zero. */
static LLVMValueRef flush_denormal_bits(cg_ctx *c, LLVMValueRef u, int V) {
  LLVMValueRef e = LLVMBuildAnd(c->b, u, splat_i32v(c, 0x7f800000u, V), "");
  LLVMValueRef den = LLVMBuildICmp(c->b, LLVMIntEQ, e, LLVMConstNull(LLVMTypeOf(u)), "den");
  return LLVMBuildSelect(c->b, den, LLVMBuildAnd(c->b, u, splat_i32v(c, 0x80000000u, V), ""), u, "");
}

LLVMValueRef cg_bf16_dp(cg_ctx *c, int mode, LLVMValueRef acc, LLVMValueRef a, LLVMValueRef b, int V) {
  LLVMTypeRef vf = cg_vtype(c, V);
  if (mode == 2) {
    LLVMTypeRef bt = LLVMVectorType(LLVMBFloatTypeInContext(c->llc), (unsigned)(2 * V));
    LLVMValueRef args[3] = {acc, LLVMBuildBitCast(c->b, a, bt, ""), LLVMBuildBitCast(c->b, b, bt, "")};
    const char *name = V == 16 ? "llvm.x86.avx512bf16.dpbf16ps.512"
                       : V == 8 ? "llvm.x86.avx512bf16.dpbf16ps.256"
                                : "llvm.x86.avx512bf16.dpbf16ps.128";
    return cg_intrinsic(c, name, NULL, 0, args, 3);
  }
  /* exact emulation: make_fp32 of each half (the high half masked, the low half shifted up),
   * input denormals as zero (DAZ), two FMAs rounded to nearest even (llvm.fma: one rounding;
   * the bf16 x bf16 product is exact in f32 anyway), odd element first, each result with
   * denormals flushed (FTZ).  acc is zero or an FTZ result, so it needs no DAZ. */
  LLVMValueRef hi = splat_i32v(c, 0xffff0000u, V), sh = splat_i32v(c, 16, V);
  LLVMValueRef ao = LLVMBuildBitCast(c->b, flush_denormal_bits(c, LLVMBuildAnd(c->b, a, hi, ""), V), vf, "a_odd");
  LLVMValueRef ae = LLVMBuildBitCast(c->b, flush_denormal_bits(c, LLVMBuildShl(c->b, a, sh, ""), V), vf, "a_even");
  LLVMValueRef bo = LLVMBuildBitCast(c->b, flush_denormal_bits(c, LLVMBuildAnd(c->b, b, hi, ""), V), vf, "b_odd");
  LLVMValueRef be = LLVMBuildBitCast(c->b, flush_denormal_bits(c, LLVMBuildShl(c->b, b, sh, ""), V), vf, "b_even");
  LLVMTypeRef vi = LLVMVectorType(c->t_i32, (unsigned)V);
  LLVMValueRef args[3] = {ao, bo, acc};
  LLVMValueRef t = cg_intrinsic(c, "llvm.fma", &vf, 1, args, 3);
  t = LLVMBuildBitCast(c->b, flush_denormal_bits(c, LLVMBuildBitCast(c->b, t, vi, ""), V), vf, "");
  LLVMValueRef args2[3] = {ae, be, t};
  t = cg_intrinsic(c, "llvm.fma", &vf, 1, args2, 3);
  return LLVMBuildBitCast(c->b, flush_denormal_bits(c, LLVMBuildBitCast(c->b, t, vi, ""), V), vf, "dp");
}
