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

/* x rounded stochastically to format: with x between the neighbouring grid values lo <= x <
 * hi, hi with probability (x - lo) / (hi - lo).  u24 is <w x i32> of uniform integers in
 * [0, 2^24) (one per lane).  Finite values beyond the largest finite value, inf and NaN round
 * to nearest (as cg_round16_v). */
LLVMValueRef cg_round16_sr_v(cg_ctx *c, const ir_node *n, LLVMValueRef x, LLVMValueRef u24, int format, int w);

#endif
