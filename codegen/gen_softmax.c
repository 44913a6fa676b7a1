/* gen_softmax.c — softmax over the last axis (row max, exp and sum, scale; one row per work
 * item) and the training loss, which inference codegen rejects. */
#include "codegen/cg_internal.h"

typedef struct row_ctx { LLVMValueRef x, out, row, acc, mx, scale; int pass; } row_ctx;

/* pass 0: running max; pass 1: out = exp(x - max), sum; pass 2: out *= scale. */
static void row_body(cg_ctx *c, LLVMValueRef j, int w, void *user) {
  row_ctx *u = user;
  LLVMValueRef i = LLVMBuildAdd(c->b, u->row, j, "");
  int v = c->target->vec_f32;
  if (u->pass == 2) {
    cg_store_v(c, LLVMBuildFMul(c->b, cg_load_v(c, u->out, i, w), cg_splat(c, u->scale, w), ""), u->out, i, w);
    return;
  }
  LLVMValueRef x = cg_load_v(c, u->x, i, w);
  LLVMValueRef acc = LLVMBuildLoad2(c->b, cg_vtype(c, v), u->acc, "");
  LLVMValueRef r;
  if (u->pass == 0) {
    r = cg_max_nan(c, x, w == v ? acc : LLVMBuildExtractElement(c->b, acc, cg_i32(c, 0), ""));
  } else {
    r = cg_exp(c, LLVMBuildFSub(c->b, x, cg_splat(c, u->mx, w), ""), w);
    cg_store_v(c, r, u->out, i, w);
    r = LLVMBuildFAdd(c->b, w == v ? acc : LLVMBuildExtractElement(c->b, acc, cg_i32(c, 0), ""), r, "");
  }
  if (w != v) r = LLVMBuildInsertElement(c->b, acc, r, cg_i32(c, 0), "");
  LLVMBuildStore(c->b, r, u->acc);
}

/* in: x [..., K]; out like x. */
LLVMValueRef cg_gen_softmax(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind) {
  const ir_shape *xs = &c->g->values[n->in[0]].shape;
  int64_t k = xs->dim[xs->rank - 1], rows = ir_shape_numel(xs) / k;
  int v = c->target->vec_f32;
  LLVMValueRef a[4];
  LLVMValueRef f = cg_kernel_begin(c, fn_name, 1, a);
  row_ctx u = {a[0], a[1], NULL, cg_entry_alloca(c, cg_vtype(c, v), "acc"), NULL, NULL, 0};
  LLVMValueRef lo, hi;
  cg_thread_range(c, cg_i64(c, rows), a[2], a[3], &lo, &hi);
  cg_loop L;
  LLVMValueRef r = cg_loop_begin(c, &L, lo, hi, cg_i64(c, 1), "row");
  u.row = LLVMBuildMul(c->b, r, cg_i64(c, k), "");
  LLVMBuildStore(c->b, cg_splat(c, cg_load_f32(c, a[0], u.row), v), u.acc);
  cg_inner_loop(c, k, row_body, &u);
  u.mx = cg_hmax(c, LLVMBuildLoad2(c->b, cg_vtype(c, v), u.acc, ""), v);
  u.pass = 1;
  LLVMBuildStore(c->b, cg_fzero(c, v), u.acc);
  cg_inner_loop(c, k, row_body, &u);
  LLVMValueRef sum = cg_hsum(c, LLVMBuildLoad2(c->b, cg_vtype(c, v), u.acc, ""), v);
  u.scale = LLVMBuildFDiv(c->b, cg_f32(c, 1.0f), sum, "inv");
  u.pass = 2;
  cg_inner_loop(c, k, row_body, &u);
  cg_loop_end(c, &L);
  cg_kernel_end(c);
  *kind = cg_kind(c, "softmax", NULL);
  return f;
}

LLVMValueRef cg_gen_softmax_xent(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind) {
  (void)fn_name;
  *kind = "softmax_xent";
  return cg_fail(c, n, "softmax_xent (the training loss) is not supported in inference codegen");
}

/* hardmax over the last axis (ir_ref_hardmax): per row, the first index whose value is greater
 * than every earlier one, then 1 there and 0 elsewhere.  Scalar: rows are short (classes). */
LLVMValueRef cg_gen_hardmax(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind) {
  const ir_shape *xs = &c->g->values[n->in[0]].shape;
  int64_t k = xs->dim[xs->rank - 1], rows = ir_shape_numel(xs) / k;
  LLVMBuilderRef B = c->b;
  LLVMValueRef a[4];
  LLVMValueRef f = cg_kernel_begin(c, fn_name, 1, a);
  LLVMValueRef best = cg_entry_alloca(c, c->t_i64, "best"), bv = cg_entry_alloca(c, c->t_f32, "bv");
  LLVMValueRef lo, hi;
  cg_thread_range(c, cg_i64(c, rows), a[2], a[3], &lo, &hi);
  cg_loop L, J;
  LLVMValueRef r = cg_loop_begin(c, &L, lo, hi, cg_i64(c, 1), "row");
  LLVMValueRef base = LLVMBuildMul(B, r, cg_i64(c, k), "");
  LLVMBuildStore(B, cg_i64(c, 0), best);
  LLVMBuildStore(B, cg_load_f32(c, a[0], base), bv);
  LLVMValueRef j = cg_loop_begin(c, &J, cg_i64(c, 1), cg_i64(c, k), cg_i64(c, 1), "j");
  LLVMValueRef x = cg_load_f32(c, a[0], LLVMBuildAdd(B, base, j, "")), m = LLVMBuildLoad2(B, c->t_f32, bv, "");
  LLVMValueRef gt = LLVMBuildFCmp(B, LLVMRealOGT, x, m, "");
  LLVMBuildStore(B, LLVMBuildSelect(B, gt, x, m, ""), bv);
  LLVMBuildStore(B, LLVMBuildSelect(B, gt, j, LLVMBuildLoad2(B, c->t_i64, best, ""), ""), best);
  cg_loop_end(c, &J);
  LLVMValueRef at = LLVMBuildLoad2(B, c->t_i64, best, "at");
  j = cg_loop_begin(c, &J, cg_i64(c, 0), cg_i64(c, k), cg_i64(c, 1), "j");
  LLVMValueRef one = LLVMBuildSelect(B, LLVMBuildICmp(B, LLVMIntEQ, j, at, ""), cg_f32(c, 1.0f), cg_f32(c, 0.0f), "");
  cg_store_f32(c, one, a[1], LLVMBuildAdd(B, base, j, ""));
  cg_loop_end(c, &J);
  cg_loop_end(c, &L);
  cg_kernel_end(c);
  *kind = cg_kind(c, "hardmax", NULL);
  return f;
}
