/* gen_pool_pick.c — max pooling by the element each window picks (ir_ref_pool_argmax: taps
 * at stride + dilation, scanned y then x, v > max or v NaN takes): maxpool_index (the picked
 * element's flat index), dilated maxpool, and the dilated maxpool_grad.  One output at a time
 * with the window's taps in run-time loops (gen_pool.c's row kernels serve undilated windows). */
#include "codegen/cg_internal.h"
#include "codegen/gen_round16.h"

typedef struct pick_geom { int64_t h, w, oh, ow, planes; const ir_pool_attr *pa; } pick_geom;

static pick_geom geom_of(const ir_shape *xs, const ir_shape *ys, const ir_pool_attr *pa) {
  return (pick_geom){xs->dim[2], xs->dim[3], ys->dim[2], ys->dim[3], xs->dim[0] * xs->dim[1], pa};
}

/* The pick of window (oy, ox) of the plane at x + xb: *m its value (-inf: no tap inside),
 * *at its index in the plane (-1: none). */
static void pick(cg_ctx *c, const ir_node *n, const pick_geom *p, LLVMValueRef x, ir_dtype xdt, LLVMValueRef xb, LLVMValueRef oy,
                 LLVMValueRef ox, LLVMValueRef *m, LLVMValueRef *at) {
  LLVMBuilderRef b = c->b;
  const ir_pool_attr *pa = p->pa;
  LLVMValueRef mp = cg_entry_alloca(c, c->t_f32, "m"), ap = cg_entry_alloca(c, c->t_i64, "at");
  LLVMBuildStore(b, cg_f32(c, -__builtin_inff()), mp);
  LLVMBuildStore(b, cg_i64(c, -1), ap);
  LLVMValueRef ys = LLVMBuildSub(b, LLVMBuildMul(b, oy, cg_i64(c, pa->stride[0]), ""), cg_i64(c, pa->pad[0]), "");
  LLVMValueRef xs = LLVMBuildSub(b, LLVMBuildMul(b, ox, cg_i64(c, pa->stride[1]), ""), cg_i64(c, pa->pad[1]), "");
  cg_loop KY, KX;
  cg_if IY, IX;
  LLVMValueRef ky = cg_loop_begin(c, &KY, cg_i64(c, 0), cg_i64(c, pa->kernel[0]), cg_i64(c, 1), "ky");
  LLVMValueRef y = LLVMBuildAdd(b, ys, LLVMBuildMul(b, ky, cg_i64(c, ir_pool_dilation(pa, 0)), ""), "y");
  cg_if_begin(c, &IY, LLVMBuildAnd(b, LLVMBuildICmp(b, LLVMIntSGE, y, cg_i64(c, 0), ""), LLVMBuildICmp(b, LLVMIntSLT, y, cg_i64(c, p->h), ""), ""));
  LLVMValueRef kx = cg_loop_begin(c, &KX, cg_i64(c, 0), cg_i64(c, pa->kernel[1]), cg_i64(c, 1), "kx");
  LLVMValueRef xx = LLVMBuildAdd(b, xs, LLVMBuildMul(b, kx, cg_i64(c, ir_pool_dilation(pa, 1)), ""), "x");
  cg_if_begin(c, &IX, LLVMBuildAnd(b, LLVMBuildICmp(b, LLVMIntSGE, xx, cg_i64(c, 0), ""), LLVMBuildICmp(b, LLVMIntSLT, xx, cg_i64(c, p->w), ""), ""));
  LLVMValueRef idx = LLVMBuildAdd(b, LLVMBuildMul(b, y, cg_i64(c, p->w), ""), xx, "");
  LLVMValueRef v = cg_act_load(c, n, x, LLVMBuildAdd(b, xb, idx, ""), 1, xdt), cur = LLVMBuildLoad2(b, c->t_f32, mp, "");
  LLVMValueRef take = LLVMBuildOr(b, LLVMBuildFCmp(b, LLVMRealOGT, v, cur, ""), LLVMBuildFCmp(b, LLVMRealUNO, v, v, ""), "");
  LLVMBuildStore(b, LLVMBuildSelect(b, take, v, cur, ""), mp);
  LLVMBuildStore(b, LLVMBuildSelect(b, take, idx, LLVMBuildLoad2(b, c->t_i64, ap, ""), ""), ap);
  cg_if_end(c, &IX);
  cg_loop_end(c, &KX);
  cg_if_end(c, &IY);
  cg_loop_end(c, &KY);
  *m = LLVMBuildLoad2(b, c->t_f32, mp, "");
  *at = LLVMBuildLoad2(b, c->t_i64, ap, "");
}

/* x [N,C,H,W] -> [N,C,OH,OW]: the picked value (16-bit storage in and out as the node's dtypes)
 * or, index = 1, its flat index in x as f32 (-1 for a window of no pixel).  Work: outputs. */
static LLVMValueRef gen_pick(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind, int index) {
  pick_geom p = geom_of(&c->g->values[n->in[0]].shape, &c->g->values[n->out].shape, &n->attr.maxpool);
  ir_dtype xdt = c->g->values[n->in[0]].dtype, odt = c->g->values[n->out].dtype;
  LLVMValueRef a[4];
  LLVMValueRef f = cg_kernel_begin(c, fn_name, 1, a);
  LLVMValueRef lo, hi;
  cg_thread_range(c, cg_i64(c, p.planes * p.oh * p.ow), a[2], a[3], &lo, &hi);
  cg_loop L;
  LLVMValueRef it = cg_loop_begin(c, &L, lo, hi, cg_i64(c, 1), "out");
  LLVMValueRef ox = LLVMBuildSRem(c->b, it, cg_i64(c, p.ow), ""), r = LLVMBuildSDiv(c->b, it, cg_i64(c, p.ow), "");
  LLVMValueRef oy = LLVMBuildSRem(c->b, r, cg_i64(c, p.oh), ""), pl = LLVMBuildSDiv(c->b, r, cg_i64(c, p.oh), "");
  LLVMValueRef xb = LLVMBuildMul(c->b, pl, cg_i64(c, p.h * p.w), ""), m, at;
  pick(c, n, &p, a[0], xdt, xb, oy, ox, &m, &at);
  if (index) {
    LLVMValueRef none = LLVMBuildICmp(c->b, LLVMIntSLT, at, cg_i64(c, 0), "");
    if (p.pa->storage_order) /* column-major: x*H + y */
      at = LLVMBuildAdd(c->b, LLVMBuildMul(c->b, LLVMBuildSRem(c->b, at, cg_i64(c, p.w), ""), cg_i64(c, p.h), ""),
                        LLVMBuildSDiv(c->b, at, cg_i64(c, p.w), ""), "");
    LLVMValueRef fi = LLVMBuildSIToFP(c->b, LLVMBuildAdd(c->b, xb, at, ""), c->t_f32, "");
    cg_store_f32(c, LLVMBuildSelect(c->b, none, cg_f32(c, -1.0f), fi, ""), a[1], it);
  } else {
    cg_act_store(c, n, m, a[1], it, 1, odt);
  }
  cg_loop_end(c, &L);
  cg_kernel_end(c);
  char tile[48];
  snprintf(tile, sizeof tile, "%dx%dd%dx%d_pick%s", p.pa->kernel[0], p.pa->kernel[1], ir_pool_dilation(p.pa, 0), ir_pool_dilation(p.pa, 1),
           xdt == IR_BF16 ? "_bf16" : xdt == IR_F16 ? "_fp16" : "");
  *kind = cg_kind(c, index ? "maxpool_index" : "maxpool", tile);
  return f;
}

LLVMValueRef cg_gen_maxpool_index(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind) {
  return gen_pick(c, n, fn_name, kind, 1);
}

/* gen_pool.c's maxpool for a dilated window. */
LLVMValueRef cg_gen_maxpool_pick(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind) {
  return gen_pick(c, n, fn_name, kind, 0);
}

/* dy [N,C,OH,OW], x -> dx: each output's dy added at its window's pick, in output order.
 * Work: planes (each thread zeroes its planes first). */
LLVMValueRef cg_gen_maxpool_grad_pick(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind) {
  pick_geom p = geom_of(&c->g->values[n->out].shape, &c->g->values[n->in[0]].shape, &n->attr.maxpool_grad.pool);
  LLVMValueRef a[5];
  LLVMValueRef f = cg_train_kbegin(c, fn_name, 2, a);
  LLVMValueRef lo, hi;
  cg_thread_range(c, cg_i64(c, p.planes), a[3], a[4], &lo, &hi);
  cg_loop P, Z, OY, OX;
  LLVMValueRef pl = cg_loop_begin(c, &P, lo, hi, cg_i64(c, 1), "plane");
  LLVMValueRef xb = LLVMBuildMul(c->b, pl, cg_i64(c, p.h * p.w), "");
  LLVMValueRef z = cg_loop_begin(c, &Z, cg_i64(c, 0), cg_i64(c, p.h * p.w), cg_i64(c, 1), "z");
  cg_store_f32(c, cg_f32(c, 0.0f), a[2], LLVMBuildAdd(c->b, xb, z, ""));
  cg_loop_end(c, &Z);
  LLVMValueRef oy = cg_loop_begin(c, &OY, cg_i64(c, 0), cg_i64(c, p.oh), cg_i64(c, 1), "oy");
  LLVMValueRef ox = cg_loop_begin(c, &OX, cg_i64(c, 0), cg_i64(c, p.ow), cg_i64(c, 1), "ox"), m, at;
  pick(c, n, &p, a[1], IR_F32, xb, oy, ox, &m, &at);
  cg_if H;
  cg_if_begin(c, &H, LLVMBuildICmp(c->b, LLVMIntSGE, at, cg_i64(c, 0), ""));
  LLVMValueRef di = LLVMBuildAdd(c->b, xb, at, "");
  LLVMValueRef dyi = LLVMBuildAdd(c->b, LLVMBuildMul(c->b, LLVMBuildAdd(c->b, LLVMBuildMul(c->b, pl, cg_i64(c, p.oh), ""), oy, ""), cg_i64(c, p.ow), ""), ox, "");
  cg_store_f32(c, LLVMBuildFAdd(c->b, cg_load_f32(c, a[2], di), cg_load_f32(c, a[0], dyi), ""), a[2], di);
  cg_if_end(c, &H);
  cg_loop_end(c, &OX);
  cg_loop_end(c, &OY);
  cg_loop_end(c, &P);
  cg_kernel_end(c);
  *kind = cg_kind(c, "maxpool_grad", "pick");
  return f;
}
