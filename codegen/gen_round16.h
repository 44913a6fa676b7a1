/* gen_round16.h — codegen-private: 16-bit vector conversions (gen_round16.c; docs/precision.md):
 * stochastic rounding, 16-bit storage (narrow/widen), 16-bit activation loads and stores.  The
 * round-to-nearest-even body itself, cg_round16_v, is cg_util.c's (cg_internal.h). */
#ifndef CNNC_GEN_ROUND16_H
#define CNNC_GEN_ROUND16_H

#include "codegen/cg_internal.h"

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
/* bf16 only, w-lane vectors, avx512bf16 targets: as cg_narrow16_v(bf16) (bitwise; one
 * vcvtneps2bf16 and a branch to the integer rounding when a lane is an f32 denormal). */
LLVMValueRef cg_narrow_bf16_native(cg_ctx *c, const ir_node *n, LLVMValueRef x, int w);
LLVMValueRef cg_widen16_v(cg_ctx *c, const ir_node *n, LLVMValueRef h, int format, int w);

/* Activations in 16-bit inference storage (passes/store16.c pass_store16_infer): a value of
 * dtype dt (IR_F32, IR_BF16 or IR_F16) read as f32 lanes / written from f32 lanes, at element
 * idx (i64) of base.  Loads widen exactly (bf16: u16 << 16, fp16: vcvtph2ps); stores narrow
 * with round-to-nearest-even (bitwise round16 then the top half: a value on the grid is stored
 * exactly).  f32 is cg_load_v / cg_store_v.  Strided: lanes base[idx + l*stride] (stride 2 reads
 * up to idx + 2w - 2, as cg_load_strided).  Masked: lanes outside m (bit l = lane l) are not
 * read (0.0f) / not written.  n: the node for errors (fp16 without F16C). */
int cg_dt_half(ir_dtype dt); /* ir_half_format of a 16-bit dtype, -1 for f32 */
LLVMValueRef cg_act_load(cg_ctx *c, const ir_node *n, LLVMValueRef base, LLVMValueRef idx, int w, ir_dtype dt);
LLVMValueRef cg_act_load_strided(cg_ctx *c, const ir_node *n, LLVMValueRef base, LLVMValueRef idx, int stride, int w,
                                 ir_dtype dt);
LLVMValueRef cg_act_masked_load(cg_ctx *c, const ir_node *n, LLVMValueRef base, LLVMValueRef idx, unsigned m, int w,
                                ir_dtype dt);
void cg_act_store(cg_ctx *c, const ir_node *n, LLVMValueRef v, LLVMValueRef base, LLVMValueRef idx, int w, ir_dtype dt);
void cg_act_masked_store(cg_ctx *c, const ir_node *n, LLVMValueRef v, LLVMValueRef base, LLVMValueRef idx, unsigned m,
                         int w, ir_dtype dt);
/* cg_reduce_sum (gen_norm.c) over a base of dtype dt, widened on load (the same sum order). */
LLVMValueRef cg_reduce_sum_dt(cg_ctx *c, const ir_node *n, LLVMValueRef base, LLVMValueRef off, int64_t cnt,
                              LLVMValueRef mean, ir_dtype dt);

#endif
