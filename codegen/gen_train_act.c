/* gen_train_act.c — compiled training (issue 5, docs/training.md): the backward kernels of
 * the activations (sigmoid, swish), the average pools and softmax, as ir/ref_grad.c defines
 * them.  Element-wise ops are split over tid/nthreads by element blocks (cg_foreach_elem,
 * target vector width); pools by planes, softmax by rows: one writer per output element. */
#include <math.h>

#include "codegen/cg_internal.h"

typedef struct act_ctx { ir_op op; LLVMValueRef dy, x, out; } act_ctx;

/* sigmoid_grad: dy s (1 - s); swish_grad: dy (s + x s (1 - s)), s = sigmoid(x). */
static void act_grad_body(cg_ctx *c, LLVMValueRef i, int w, void *user) {
  act_ctx *u = user;
  LLVMValueRef dy = cg_load_v(c, u->dy, i, w), x = cg_load_v(c, u->x, i, w);
  LLVMValueRef s = cg_sigmoid(c, x, w);
  LLVMValueRef ds = LLVMBuildFMul(c->b, s, LLVMBuildFSub(c->b, cg_fconst(c, 1.0f, w), s, ""), "");
  LLVMValueRef d = u->op == IR_OP_swish_grad ? cg_fma(c, x, ds, s) : ds;
  cg_store_v(c, LLVMBuildFMul(c->b, dy, d, ""), u->out, i, w);
}

static LLVMValueRef gen_act_grad(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind) {
  LLVMValueRef a[5];
  LLVMValueRef f = cg_kernel_begin(c, fn_name, 2, a);
  act_ctx u = {n->op, a[0], a[1], a[2]};
  cg_foreach_elem(c, cg_numel(c, n->out), a[3], a[4], act_grad_body, &u);
  cg_kernel_end(c);
  *kind = cg_kind(c, ir_ops[n->op].name, NULL);
  return f;
}

LLVMValueRef cg_gen_sigmoid_grad(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind) {
  return gen_act_grad(c, n, fn_name, kind);
}
LLVMValueRef cg_gen_swish_grad(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind) {
  return gen_act_grad(c, n, fn_name, kind);
}

/* ---- pools ------------------------------------------------------------------------------------ */
typedef struct fill_ctx { LLVMValueRef out, base, v; } fill_ctx;
static void fill_body(cg_ctx *c, LLVMValueRef j, int w, void *user) {
  fill_ctx *u = user;
  cg_store_v(c, cg_splat(c, u->v, w), u->out, LLVMBuildAdd(c->b, u->base, j, ""), w);
}

static LLVMValueRef par_begin(cg_ctx *c, cg_loop *L, int64_t n, LLVMValueRef tid, LLVMValueRef nth, const char *name) {
  LLVMValueRef lo, hi;
  cg_thread_range(c, cg_i64(c, n), tid, nth, &lo, &hi);
  return cg_loop_begin(c, L, lo, hi, cg_i64(c, 1), name);
}

/* dy [N,C,1,1] -> dx [N,C,H,W] = dy / (H*W).  Work: planes. */
LLVMValueRef cg_gen_global_avgpool_grad(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind) {
  const ir_shape *xs = &c->g->values[n->out].shape;
  int64_t planes = xs->dim[0] * xs->dim[1], hw = ir_shape_numel(xs) / planes;
  LLVMValueRef a[4];
  LLVMValueRef f = cg_kernel_begin(c, fn_name, 1, a);
  cg_loop P;
  LLVMValueRef p = par_begin(c, &P, planes, a[2], a[3], "plane");
  fill_ctx u = {a[1], LLVMBuildMul(c->b, p, cg_i64(c, hw), ""),
                LLVMBuildFDiv(c->b, cg_load_f32(c, a[0], p), cg_f32(c, (float)hw), "")};
  cg_inner_loop(c, hw, fill_body, &u);
  cg_loop_end(c, &P);
  cg_kernel_end(c);
  *kind = cg_kind(c, "global_avgpool_grad", NULL);
  return f;
}

/* dy [N,C,OH,OW] -> dx [N,C,H,W]: dy / count spread over each window's real pixels, the
 * window clipped as ir/ref_grad.c pool_window (count_include_pad counts the padded window).
 * Work: planes; each thread zeroes its planes and accumulates in place. */
LLVMValueRef cg_gen_avgpool_grad(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind) {
  const ir_pool_attr *pa = &n->attr.avgpool_grad.pool;
  const ir_shape *xs = &c->g->values[n->out].shape, *ys = &c->g->values[n->in[0]].shape;
  int64_t planes = xs->dim[0] * xs->dim[1], h = xs->dim[2], w = xs->dim[3], oh = ys->dim[2], ow = ys->dim[3];
  LLVMValueRef a[4];
  LLVMValueRef f = cg_kernel_begin(c, fn_name, 1, a);
  LLVMBuilderRef b = c->b;
  cg_loop P, OY, OX, Y, X;
  LLVMValueRef p = par_begin(c, &P, planes, a[2], a[3], "plane");
  LLVMValueRef xb = LLVMBuildMul(b, p, cg_i64(c, h * w), "");
  fill_ctx z = {a[1], xb, cg_f32(c, 0.0f)};
  cg_inner_loop(c, h * w, fill_body, &z);
  LLVMValueRef oy = cg_loop_begin(c, &OY, cg_i64(c, 0), cg_i64(c, oh), cg_i64(c, 1), "oy");
  LLVMValueRef ox = cg_loop_begin(c, &OX, cg_i64(c, 0), cg_i64(c, ow), cg_i64(c, 1), "ox");
  LLVMValueRef ys0 = LLVMBuildSub(b, LLVMBuildMul(b, oy, cg_i64(c, pa->stride[0]), ""), cg_i64(c, pa->pad[0]), "");
  LLVMValueRef xs0 = LLVMBuildSub(b, LLVMBuildMul(b, ox, cg_i64(c, pa->stride[1]), ""), cg_i64(c, pa->pad[1]), "");
  LLVMValueRef ye = cg_min64(c, LLVMBuildAdd(b, ys0, cg_i64(c, pa->kernel[0]), ""), cg_i64(c, h + pa->pad[2]));
  LLVMValueRef xe = cg_min64(c, LLVMBuildAdd(b, xs0, cg_i64(c, pa->kernel[1]), ""), cg_i64(c, w + pa->pad[3]));
  LLVMValueRef y0 = cg_max64(c, ys0, cg_i64(c, 0)), y1 = cg_min64(c, ye, cg_i64(c, h));
  LLVMValueRef x0 = cg_max64(c, xs0, cg_i64(c, 0)), x1 = cg_min64(c, xe, cg_i64(c, w));
  LLVMValueRef cnt = pa->count_include_pad
                         ? LLVMBuildMul(b, LLVMBuildSub(b, ye, ys0, ""), LLVMBuildSub(b, xe, xs0, ""), "")
                         : LLVMBuildMul(b, LLVMBuildSub(b, y1, y0, ""), LLVMBuildSub(b, x1, x0, ""), "");
  cg_if fi;
  cg_if_begin(c, &fi, LLVMBuildICmp(b, LLVMIntSGT, cnt, cg_i64(c, 0), ""));
  LLVMTypeRef dt = LLVMDoubleTypeInContext(c->llc);
  LLVMValueRef g = cg_load_f32(c, a[0], LLVMBuildAdd(b, LLVMBuildMul(b, p, cg_i64(c, oh * ow), ""),
                                                     LLVMBuildAdd(b, LLVMBuildMul(b, oy, cg_i64(c, ow), ""), ox, ""), ""));
  LLVMValueRef v = LLVMBuildFPTrunc(b, LLVMBuildFDiv(b, LLVMBuildFPExt(b, g, dt, ""), LLVMBuildSIToFP(b, cnt, dt, ""), ""),
                                    c->t_f32, "");
  LLVMValueRef yy = cg_loop_begin(c, &Y, y0, y1, cg_i64(c, 1), "y");
  LLVMValueRef xx = cg_loop_begin(c, &X, x0, x1, cg_i64(c, 1), "x");
  LLVMValueRef di = LLVMBuildAdd(b, xb, LLVMBuildAdd(b, LLVMBuildMul(b, yy, cg_i64(c, w), ""), xx, ""), "");
  cg_store_f32(c, LLVMBuildFAdd(b, cg_load_f32(c, a[1], di), v, ""), a[1], di);
  cg_loop_end(c, &X);
  cg_loop_end(c, &Y);
  cg_if_end(c, &fi);
  cg_loop_end(c, &OX);
  cg_loop_end(c, &OY);
  cg_loop_end(c, &P);
  cg_kernel_end(c);
  *kind = cg_kind(c, "avgpool_grad", NULL);
  return f;
}

/* ---- softmax ------------------------------------------------------------------------------ */
typedef struct sm_ctx { LLVMValueRef dy, y, out, base, dot, accv, accs; } sm_ctx;
static void sm_dot_body(cg_ctx *c, LLVMValueRef j, int w, void *user) {
  sm_ctx *u = user;
  LLVMValueRef i = LLVMBuildAdd(c->b, u->base, j, "");
  LLVMValueRef p = w == 1 ? u->accs : u->accv;
  LLVMValueRef cur = LLVMBuildLoad2(c->b, cg_vtype(c, w), p, "");
  LLVMBuildStore(c->b, cg_fma(c, cg_load_v(c, u->dy, i, w), cg_load_v(c, u->y, i, w), cur), p);
}
static void sm_out_body(cg_ctx *c, LLVMValueRef j, int w, void *user) {
  sm_ctx *u = user;
  LLVMValueRef i = LLVMBuildAdd(c->b, u->base, j, "");
  LLVMValueRef d = LLVMBuildFSub(c->b, cg_load_v(c, u->dy, i, w), cg_splat(c, u->dot, w), "");
  cg_store_v(c, LLVMBuildFMul(c->b, cg_load_v(c, u->y, i, w), d, ""), u->out, i, w);
}

/* dy, y = softmax(x) [..., K] -> dx = y (dy - sum_j dy_j y_j) per row.  Work: rows. */
LLVMValueRef cg_gen_softmax_grad(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind) {
  const ir_shape *s = &c->g->values[n->out].shape;
  int64_t k = s->dim[s->rank - 1], rows = ir_shape_numel(s) / k;
  int v = c->target->vec_f32;
  LLVMValueRef a[5];
  LLVMValueRef f = cg_kernel_begin(c, fn_name, 2, a);
  sm_ctx u = {a[0], a[1], a[2], NULL, NULL, cg_entry_alloca(c, cg_vtype(c, v), "dv"), cg_entry_alloca(c, c->t_f32, "ds")};
  cg_loop R;
  LLVMValueRef r = par_begin(c, &R, rows, a[3], a[4], "row");
  u.base = LLVMBuildMul(c->b, r, cg_i64(c, k), "");
  LLVMBuildStore(c->b, cg_fzero(c, v), u.accv);
  LLVMBuildStore(c->b, cg_f32(c, 0.0f), u.accs);
  cg_inner_loop(c, k, sm_dot_body, &u);
  u.dot = LLVMBuildFAdd(c->b, cg_hsum(c, LLVMBuildLoad2(c->b, cg_vtype(c, v), u.accv, ""), v),
                        LLVMBuildLoad2(c->b, c->t_f32, u.accs, ""), "dot");
  cg_inner_loop(c, k, sm_out_body, &u);
  cg_loop_end(c, &R);
  cg_kernel_end(c);
  *kind = cg_kind(c, "softmax_grad", NULL);
  return f;
}
