/* cg_acc.c — the gradient accumulators' elementwise helpers of a training model's main module
 * (cg_main.c build_stage_fn): add a gradient into a replica's slice, scale, zero, and with
 * 16-bit slices the replicas' mean (docs/precision.md "gradient_accumulators"). */
#include "codegen/cg_acc.h"
#include "codegen/gen_round16.h"

/* The helpers are noinline: called once per accumulator and replica, one copy of each loop,
 * not one per call site (memory-bound loops; inlined, they made the update stage most of the
 * main module's code).
 * Elementwise helpers of the accumulators, split over tid like every kernel:
 * op 0: dst += src; 1: dst *= scale; 2: dst = 0.  void f(ptr dst, ptr src, i64 n, float scale, i32 tid, i32 nth).
 * acc16: op 0 only (dst 16-bit, src the f32 gradient); the update uses cg_acc_mean_helper. */
static LLVMValueRef acc_helper(cg_ctx *c, const cg_acc_cfg *a, int op) {
  static const char *const names[3] = {"cnnc_acc_add", "cnnc_acc_scale", "cnnc_acc_zero"};
  static const char *const round_names[3] = {"cnnc_acc_add_round16", "cnnc_acc_scale_round16", "cnnc_acc_zero"};
  const char *name = a->acc16 ? "cnnc_acc_add_half" : (a->half ? round_names : names)[op];
  LLVMValueRef f = LLVMGetNamedFunction(c->mod, name);
  if (f) return f;
  LLVMBasicBlockRef saved = LLVMGetInsertBlock(c->b);
  LLVMTypeRef p[6] = {c->t_ptr, c->t_ptr, c->t_i64, c->t_f32, c->t_i32, c->t_i32};
  f = LLVMAddFunction(c->mod, name, LLVMFunctionType(c->t_void, p, 6, 0));
  LLVMSetLinkage(f, LLVMInternalLinkage);
  cg_set_fn_attrs(c, f);
  cg_enum_attr(c, f, LLVMAttributeFunctionIndex, "noinline", 0);
  LLVMPositionBuilderAtEnd(c->b, LLVMAppendBasicBlockInContext(c->llc, f, "entry"));
  LLVMValueRef dst = LLVMGetParam(f, 0), src = LLVMGetParam(f, 1), lo, hi;
  cg_thread_range(c, LLVMGetParam(f, 2), LLVMGetParam(f, 4), LLVMGetParam(f, 5), &lo, &hi);
  cg_loop L;
  LLVMValueRef i = cg_loop_begin(c, &L, lo, hi, cg_i64(c, 1), "i");
  ir_dtype dt = a->acc16 ? (a->half - 1 == IR_HALF_FP16 ? IR_F16 : IR_BF16) : IR_F32;
  LLVMValueRef v = op == 2 ? cg_f32(c, 0.0f) : cg_act_load(c, NULL, dst, i, 1, dt);
  if (op == 0) v = LLVMBuildFAdd(c->b, v, cg_load_f32(c, src, i), "");
  if (op == 1) v = LLVMBuildFMul(c->b, v, LLVMGetParam(f, 3), "");
  if (op != 2 && a->half && !a->acc16) v = cg_round16_v(c, NULL, v, a->half - 1, 1); /* a 16-bit partial in f32 */
  cg_act_store(c, NULL, v, dst, i, 1, dt); /* acc16: narrowed to nearest even, the same rounding */
  cg_loop_end(c, &L);
  LLVMBuildRetVoid(c->b);
  if (saved) LLVMPositionBuilderAtEnd(c->b, saved);
  return f;
}

/* acc16, update stage: dst (f32, n elements) = the mean of the replicas' 16-bit slices of one
 * accumulator, rounded as the f32-storage path rounds it (acc_0 + acc_1, + acc_2, ..., each
 * sum and then the product with scale rounded to the 16-bit grid), and every slice zeroed.
 * void f(ptr dst, ptr acc_0, i64 n, float scale, i32 tid, i32 nth, i64 stride): slice r at
 * acc_0 + r * stride bytes. */
LLVMValueRef cg_acc_mean_helper(cg_ctx *c, const cg_acc_cfg *a) {
  LLVMValueRef f = LLVMGetNamedFunction(c->mod, "cnnc_acc_mean_half");
  if (f) return f;
  LLVMBasicBlockRef saved = LLVMGetInsertBlock(c->b);
  LLVMTypeRef p[7] = {c->t_ptr, c->t_ptr, c->t_i64, c->t_f32, c->t_i32, c->t_i32, c->t_i64};
  f = LLVMAddFunction(c->mod, "cnnc_acc_mean_half", LLVMFunctionType(c->t_void, p, 7, 0));
  LLVMSetLinkage(f, LLVMInternalLinkage);
  cg_set_fn_attrs(c, f);
  cg_enum_attr(c, f, LLVMAttributeFunctionIndex, "noinline", 0);
  LLVMPositionBuilderAtEnd(c->b, LLVMAppendBasicBlockInContext(c->llc, f, "entry"));
  LLVMValueRef dst = LLVMGetParam(f, 0), a0 = LLVMGetParam(f, 1), stride = LLVMGetParam(f, 6), lo, hi;
  cg_thread_range(c, LLVMGetParam(f, 2), LLVMGetParam(f, 4), LLVMGetParam(f, 5), &lo, &hi);
  ir_dtype dt = a->half - 1 == IR_HALF_FP16 ? IR_F16 : IR_BF16;
  LLVMValueRef slice[a->replicas];
  for (int r = 0; r < a->replicas; r++) {
    LLVMValueRef off = LLVMBuildMul(c->b, stride, cg_i64(c, r), "");
    slice[r] = LLVMBuildInBoundsGEP2(c->b, c->t_i8, a0, &off, 1, "slice");
  }
  cg_loop L;
  LLVMValueRef i = cg_loop_begin(c, &L, lo, hi, cg_i64(c, 1), "i");
  LLVMValueRef v = cg_act_load(c, NULL, slice[0], i, 1, dt);
  for (int r = 1; r < a->replicas; r++)
    v = cg_round16_v(c, NULL, LLVMBuildFAdd(c->b, v, cg_act_load(c, NULL, slice[r], i, 1, dt), ""), a->half - 1, 1);
  v = cg_round16_v(c, NULL, LLVMBuildFMul(c->b, v, LLVMGetParam(f, 3), ""), a->half - 1, 1);
  cg_store_f32(c, v, dst, i);
  for (int r = 0; r < a->replicas; r++) cg_act_store(c, NULL, cg_f32(c, 0.0f), slice[r], i, 1, dt);
  cg_loop_end(c, &L);
  LLVMBuildRetVoid(c->b);
  if (saved) LLVMPositionBuilderAtEnd(c->b, saved);
  return f;
}

void cg_acc_call(cg_ctx *c, const cg_acc_cfg *a, int op, LLVMValueRef dst, LLVMValueRef src, int64_t n, float scale, LLVMValueRef tid,
                     LLVMValueRef nth) {
  LLVMValueRef f = acc_helper(c, a, op);
  LLVMValueRef arg[6] = {dst, src ? src : LLVMConstNull(c->t_ptr), cg_i64(c, n), cg_f32(c, scale), tid, nth};
  LLVMBuildCall2(c->b, LLVMGlobalGetValueType(f), f, arg, 6, "");
}

