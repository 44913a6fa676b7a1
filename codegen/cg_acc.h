/* cg_acc.h — codegen-private: the gradient accumulators' helpers (cg_acc.c) that a training
 * model's stage functions call (cg_main.c). */
#ifndef CNNC_CG_ACC_H
#define CNNC_CG_ACC_H

#include "codegen/cg_internal.h"

/* half: --enable-half-partials (docs/precision.md), 1 + ir_half_format, 0: f32.  acc16
 * (cg_layout's acc16): the accumulators are 16-bit slices (bf16/fp16 of that format) — read
 * widened (exact), written narrowed to nearest even; half without acc16 (tune
 * half_partials_f32=1): f32 slices rounded to the 16-bit grid at every store.  Both round at
 * the same points, so the two give bitwise the same numbers.  replicas: slices per accumulator. */
typedef struct cg_acc_cfg {
  int half, acc16, replicas;
} cg_acc_cfg;

/* A call of helper op (0: dst += src, 1: dst *= scale, 2: dst = 0) over n elements, split
 * over tid / nth like every kernel; the helper is defined in c's module on first use. */
void cg_acc_call(cg_ctx *c, const cg_acc_cfg *a, int op, LLVMValueRef dst, LLVMValueRef src, int64_t n, float scale,
                 LLVMValueRef tid, LLVMValueRef nth);

/* acc16, update stage: void f(ptr dst, ptr acc_0, i64 n, float scale, i32 tid, i32 nth, i64
 * stride): dst (f32) = the replicas' slices (slice r at acc_0 + r * stride bytes) summed in
 * order and scaled, each step rounded to the 16-bit grid; every slice zeroed. */
LLVMValueRef cg_acc_mean_helper(cg_ctx *c, const cg_acc_cfg *a);

#endif
