/* gen_round16.h — codegen-private: the round16 vector body (gen_round16.c), shared by the
 * round16 kernel, the fused conv epilogue (cg_epilogue) and the rounded optimizer updates
 * (gen_train_optim.c; docs/precision.md). */
#ifndef CNNC_GEN_ROUND16_H
#define CNNC_GEN_ROUND16_H

#include "codegen/cg_internal.h"

/* x (<w x float>, or float for w == 1) rounded to format (ir_half_format) to nearest even and
 * widened back: bit-identical to ir_round16_f32.  An fp16 rounding on a target without
 * F16C records the error (node n) and returns x. */
LLVMValueRef cg_round16_v(cg_ctx *c, const ir_node *n, LLVMValueRef x, int format, int w);

/* x rounded stochastically to format: with |x| between the neighbouring grid values lo <=
 * |x| < hi, hi with probability (|x| - lo) / (hi - lo), the sign kept.  u24 is <w x i32> of
 * uniform integers in [0, 2^24) (one per lane; bf16 uses the top 16 bits).  inf stays inf,
 * NaN a quiet NaN; above the largest finite value bf16 may carry into inf (inf taken as the
 * next value), fp16 gives 65504 (inf has probability 0). */
LLVMValueRef cg_round16_sr_v(cg_ctx *c, const ir_node *n, LLVMValueRef x, LLVMValueRef u24, int format, int w);

/* The stochastic rounding random bits (docs/precision.md): key = mix64(seed ^ mix64(t)) once
 * per kernel (t: i64 step), then for element i (i64; lanes i..i+w-1) u24 = mix64(key ^
 * mix64(i)) >> 40 as <w x i32>; mix64 = splitmix64's finaliser (as the compiled dropout). */
LLVMValueRef cg_sr_step_key(cg_ctx *c, uint64_t seed, LLVMValueRef t);
LLVMValueRef cg_sr_u24(cg_ctx *c, LLVMValueRef key, LLVMValueRef i, int w);

/* 16-bit storage (narrow16 / widen16, gen_store16.c): x (f32 lanes) as the 16-bit bit
 * patterns (<w x i16>, i16 for w == 1) of round16(x) — bf16 by integer ops (NaN quiet), fp16
 * by F16C vcvtps2ph — with keep_sign a positive x that rounds to 0 becomes the smallest
 * positive value (bit pattern 1); and back, exactly (bf16: zero-extend and shift, fp16:
 * vcvtph2ps).  widen(narrow(x)) is bitwise cg_round16_v(x) (keep_sign aside).  fp16 without
 * F16C records the error (node n). */
LLVMValueRef cg_narrow16_v(cg_ctx *c, const ir_node *n, LLVMValueRef x, int format, int keep_sign, int w);
LLVMValueRef cg_widen16_v(cg_ctx *c, const ir_node *n, LLVMValueRef h, int format, int w);

#endif
