/* gen_train_act.c — compiled training (issue 5, docs/training.md): the backward kernels of
 * the activations (sigmoid, swish, clip, hardsigmoid, hardswish), the average pools and softmax, as ir/ref_grad.c defines
 * them.  Element-wise ops are split over tid/nthreads by element blocks (cg_foreach_elem,
 * target vector width); pools by planes, softmax by rows: one writer per output element. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/cg_internal.h"

typedef struct act_ctx { const ir_node *n; LLVMValueRef dy, x, out; } act_ctx;

/* sigmoid_grad: dy s (1 - s); swish_grad: dy (s + x s (1 - s)), s = sigmoid(x). */
static void act_grad_body(cg_ctx *c, LLVMValueRef i, int w, void *user) {
  act_ctx *u = user;
  LLVMValueRef dy = cg_load_v(c, u->dy, i, w), x = cg_load_v(c, u->x, i, w);
  LLVMValueRef s = cg_sigmoid(c, x, w);
  LLVMValueRef ds = LLVMBuildFMul(c->b, s, LLVMBuildFSub(c->b, cg_fconst(c, 1.0f, w), s, ""), "");
  LLVMValueRef d = u->n->op == IR_OP_swish_grad ? cg_fma(c, x, ds, s) : ds;
  cg_store_v(c, LLVMBuildFMul(c->b, dy, d, ""), u->out, i, w);
}

/* clip_grad, hardsigmoid_grad, hardswish_grad (ir/ref_grad.c): dy times a mask or a ramp. */
static void kink_grad_body(cg_ctx *c, LLVMValueRef i, int w, void *user) {
  act_ctx *u = user;
  LLVMBuilderRef b = c->b;
  LLVMValueRef dy = cg_load_v(c, u->dy, i, w), x = cg_load_v(c, u->x, i, w), z = cg_fzero(c, w), y;
  switch (u->n->op) {
  case IR_OP_clip_grad: {
    LLVMValueRef in = LLVMBuildAnd(b, LLVMBuildFCmp(b, LLVMRealOGT, x, cg_fconst(c, u->n->attr.clip.lo, w), ""),
                                   LLVMBuildFCmp(b, LLVMRealOLT, x, cg_fconst(c, u->n->attr.clip.hi, w), ""), "");
    y = LLVMBuildSelect(b, in, dy, z, "");
    break;
  }
  case IR_OP_hardsigmoid_grad: {
    float a = u->n->attr.hardsigmoid.alpha;
    LLVMValueRef t = cg_fma(c, cg_fconst(c, a, w), x, cg_fconst(c, u->n->attr.hardsigmoid.beta, w));
    LLVMValueRef in = LLVMBuildAnd(b, LLVMBuildFCmp(b, LLVMRealOGT, t, z, ""),
                                   LLVMBuildFCmp(b, LLVMRealOLT, t, cg_fconst(c, 1.0f, w), ""), "");
    y = LLVMBuildSelect(b, in, LLVMBuildFMul(b, dy, cg_fconst(c, a, w), ""), z, "");
    break;
  }
  case IR_OP_leaky_relu_grad:
    y = LLVMBuildSelect(b, LLVMBuildFCmp(b, LLVMRealOGT, x, z, ""), dy,
                        LLVMBuildFMul(b, dy, cg_fconst(c, u->n->attr.leaky_relu.alpha, w), ""), "");
    break;
  default: { /* hardswish_grad */
    LLVMValueRef ramp = LLVMBuildFMul(b, dy, cg_fma(c, x, cg_fconst(c, 1.0f / 3.0f, w), cg_fconst(c, 0.5f, w)), "");
    y = LLVMBuildSelect(b, LLVMBuildFCmp(b, LLVMRealOGT, x, cg_fconst(c, 3.0f, w), ""), dy, ramp, "");
    y = LLVMBuildSelect(b, LLVMBuildFCmp(b, LLVMRealOLT, x, cg_fconst(c, -3.0f, w), ""), z, y, "");
    break;
  }
  }
  cg_store_v(c, y, u->out, i, w);
}

/* The backward kernel of an activation: act_grad_body (sigmoid, swish) or kink_grad_body. */
static LLVMValueRef gen_act_grad(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind) {
  LLVMValueRef a[5];
  LLVMValueRef f = cg_kernel_begin(c, fn_name, 2, a);
  act_ctx u = {n, a[0], a[1], a[2]};
  int smooth = n->op == IR_OP_sigmoid_grad || n->op == IR_OP_swish_grad;
  cg_foreach_elem(c, cg_numel(c, n->out), a[3], a[4], smooth ? act_grad_body : kink_grad_body, &u);
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
LLVMValueRef cg_gen_clip_grad(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind) {
  return gen_act_grad(c, n, fn_name, kind);
}
LLVMValueRef cg_gen_hardsigmoid_grad(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind) {
  return gen_act_grad(c, n, fn_name, kind);
}
LLVMValueRef cg_gen_leaky_relu_grad(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind) {
  return gen_act_grad(c, n, fn_name, kind);
}
LLVMValueRef cg_gen_hardswish_grad(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind) {
  return gen_act_grad(c, n, fn_name, kind);
}

/* ---- pools ------------------------------------------------------------------------------------ */
typedef struct fill_ctx { LLVMValueRef out, base, v; } fill_ctx;
static void fill_body(cg_ctx *c, LLVMValueRef j, int w, void *user) {
  fill_ctx *u = user;
  cg_store_v(c, cg_splat(c, u->v, w), u->out, LLVMBuildAdd(c->b, u->base, j, ""), w);
}

/* The window of output (oy, ox) in input coordinates: start (ys0, xs0), end clipped to the
 * padded plane (ye, xe), and the part inside the plane [y0, y1) x [x0, x1). */
typedef struct pool_win { LLVMValueRef ys0, xs0, ye, xe, y0, y1, x0, x1; } pool_win;
static pool_win pool_window(cg_ctx *c, const ir_pool_attr *pa, LLVMValueRef oy, LLVMValueRef ox, int64_t h, int64_t w) {
  LLVMBuilderRef b = c->b;
  pool_win W;
  W.ys0 = LLVMBuildSub(b, LLVMBuildMul(b, oy, cg_i64(c, pa->stride[0]), ""), cg_i64(c, pa->pad[0]), "");
  W.xs0 = LLVMBuildSub(b, LLVMBuildMul(b, ox, cg_i64(c, pa->stride[1]), ""), cg_i64(c, pa->pad[1]), "");
  W.ye = cg_min64(c, LLVMBuildAdd(b, W.ys0, cg_i64(c, pa->kernel[0]), ""), cg_i64(c, h + pa->pad[2]));
  W.xe = cg_min64(c, LLVMBuildAdd(b, W.xs0, cg_i64(c, pa->kernel[1]), ""), cg_i64(c, w + pa->pad[3]));
  W.y0 = cg_max64(c, W.ys0, cg_i64(c, 0)), W.y1 = cg_min64(c, W.ye, cg_i64(c, h));
  W.x0 = cg_max64(c, W.xs0, cg_i64(c, 0)), W.x1 = cg_min64(c, W.xe, cg_i64(c, w));
  return W;
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
  pool_win W = pool_window(c, pa, oy, ox, h, w);
  LLVMValueRef ys0 = W.ys0, xs0 = W.xs0, ye = W.ye, xe = W.xe, y0 = W.y0, y1 = W.y1, x0 = W.x0, x1 = W.x1;
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

/* ---- maxpool_grad ------------------------------------------------------------------------- */
/* dy [N,C,OH,OW], x [N,C,H,W] -> dx: dy to the first maximum of each window (the forward's
 * choice: taps in row-major order, v > max or v NaN takes).  Work: planes; each thread zeroes
 * its planes, then per output row finds the argmax of `w` outputs at once (the window's taps
 * as strided vector loads, the winning tap's offset in an i32 lane) and adds each output's dy
 * at its argmax in output order, the order of the scalar kernel (so dx is bitwise the same).
 * Columns whose window is clipped (the left/right border, known at compile time) and rows whose
 * window is clipped (checked at run time: such a tap reads -inf) take the same code with
 * the clipped taps left out.  tune train_scalar_maxpool_grad=1: the old one-output-at-a-time
 * kernel (A/B; tests compare both). */
typedef struct mp_ctx {
  const ir_pool_attr *pa;
  int64_t h, w, oh, ow;
  LLVMValueRef dy, x, dx, xb, dyb; /* dyb: the plane's first dy element */
} mp_ctx;

static LLVMValueRef isplat(LLVMValueRef k, int w) {
  LLVMValueRef e[64];
  for (int l = 0; l < w; l++) e[l] = k;
  return LLVMConstVector(e, (unsigned)w);
}

/* w outputs of row oy from column ox (ox runtime; oxc >= 0: the compile-time column, whose
 * clipped taps are dropped); rows_checked: taps outside [0, h) read -inf. */
static void mp_outputs(cg_ctx *c, const mp_ctx *u, LLVMValueRef oy, LLVMValueRef ox, int w, int64_t oxc, int rows_checked) {
  LLVMBuilderRef b = c->b;
  const ir_pool_attr *pa = u->pa;
  LLVMTypeRef it = LLVMInt32TypeInContext(c->llc);
  LLVMValueRef m = cg_fconst(c, -INFINITY, w), at = LLVMConstInt(it, (unsigned long long)-1, 1);
  if (w > 1) at = isplat(at, w);
  LLVMValueRef ys0 = LLVMBuildSub(b, LLVMBuildMul(b, oy, cg_i64(c, pa->stride[0]), ""), cg_i64(c, pa->pad[0]), "");
  LLVMValueRef xs0 = LLVMBuildSub(b, LLVMBuildMul(b, ox, cg_i64(c, pa->stride[1]), ""), cg_i64(c, pa->pad[1]), "");
  for (int ky = 0; ky < pa->kernel[0]; ky++) {
    LLVMValueRef yy = LLVMBuildAdd(b, ys0, cg_i64(c, ky), ""), ok = NULL;
    if (rows_checked) {
      ok = LLVMBuildAnd(b, LLVMBuildICmp(b, LLVMIntSGE, yy, cg_i64(c, 0), ""), LLVMBuildICmp(b, LLVMIntSLT, yy, cg_i64(c, u->h), ""), "");
      yy = LLVMBuildSelect(b, ok, yy, cg_i64(c, 0), "");
    }
    LLVMValueRef row = LLVMBuildAdd(b, u->xb, LLVMBuildMul(b, yy, cg_i64(c, u->w), ""), "");
    for (int kx = 0; kx < pa->kernel[1]; kx++) {
      if (oxc >= 0) {
        int64_t xx = oxc * pa->stride[1] - pa->pad[1] + kx;
        if (xx < 0 || xx >= u->w) continue;
      }
      LLVMValueRef v = cg_load_strided(c, u->x, LLVMBuildAdd(b, row, LLVMBuildAdd(b, xs0, cg_i64(c, kx), ""), ""), pa->stride[1], w);
      if (ok) v = LLVMBuildSelect(b, ok, v, cg_fconst(c, -INFINITY, w), "");
      LLVMValueRef take = LLVMBuildOr(b, LLVMBuildFCmp(b, LLVMRealOGT, v, m, ""), LLVMBuildFCmp(b, LLVMRealUNO, v, v, ""), "");
      m = LLVMBuildSelect(b, take, v, m, "");
      LLVMValueRef off = LLVMConstInt(it, (unsigned long long)(ky * u->w + kx), 0);
      if (w > 1) off = isplat(off, w);
      at = LLVMBuildSelect(b, take, off, at, "");
    }
  }
  /* scatter in output order: dx[origin(ox + l) + at[l]] += dy[oy, ox + l] */
  LLVMValueRef org = LLVMBuildAdd(b, u->xb, LLVMBuildAdd(b, LLVMBuildMul(b, ys0, cg_i64(c, u->w), ""), xs0, ""), "");
  LLVMValueRef dyi = LLVMBuildAdd(b, u->dyb, LLVMBuildAdd(b, LLVMBuildMul(b, oy, cg_i64(c, u->ow), ""), ox, ""), "");
  LLVMValueRef g = cg_load_v(c, u->dy, dyi, w);
  for (int l = 0; l < w; l++) {
    LLVMValueRef al = w == 1 ? at : LLVMBuildExtractElement(b, at, cg_i32(c, l), "");
    cg_if fi;
    cg_if_begin(c, &fi, LLVMBuildICmp(b, LLVMIntSGE, al, LLVMConstInt(it, 0, 0), ""));
    LLVMValueRef di = LLVMBuildAdd(b, LLVMBuildAdd(b, org, cg_i64(c, (int64_t)l * pa->stride[1]), ""), LLVMBuildSExt(b, al, c->t_i64, ""), "");
    LLVMValueRef gl = w == 1 ? g : LLVMBuildExtractElement(b, g, cg_i32(c, l), "");
    cg_store_f32(c, LLVMBuildFAdd(b, cg_load_f32(c, u->dx, di), gl, ""), u->dx, di);
    cg_if_end(c, &fi);
  }
}

/* Output row oy: border columns unrolled, interior columns [oxa, oxb) in vectors of v and a
 * scalar tail. */
static void mp_row(cg_ctx *c, const mp_ctx *u, LLVMValueRef oy, int64_t oxa, int64_t oxb, int rows_checked) {
  int v = c->target->vec_f32;
  for (int64_t ox = 0; ox < oxa; ox++) mp_outputs(c, u, oy, cg_i64(c, ox), 1, ox, rows_checked);
  int64_t nv = v > 1 ? (oxb - oxa) / v : 0;
  cg_loop X;
  if (nv > 0) {
    LLVMValueRef ox = cg_loop_begin(c, &X, cg_i64(c, oxa), cg_i64(c, oxa + nv * v), cg_i64(c, v), "oxv");
    mp_outputs(c, u, oy, ox, v, -1, rows_checked);
    cg_loop_end(c, &X);
  }
  if (oxa + nv * v < oxb) {
    LLVMValueRef ox = cg_loop_begin(c, &X, cg_i64(c, oxa + nv * v), cg_i64(c, oxb), cg_i64(c, 1), "oxs");
    mp_outputs(c, u, oy, ox, 1, -1, rows_checked);
    cg_loop_end(c, &X);
  }
  for (int64_t ox = oxb > oxa ? oxb : oxa; ox < u->ow; ox++) mp_outputs(c, u, oy, cg_i64(c, ox), 1, ox, rows_checked);
}

/* [lo, hi): the outputs along one axis whose window lies inside [0, size). */
static void mp_interior(int64_t size, int64_t out, int k, int s, int pad, int64_t *lo, int64_t *hi) {
  *lo = *hi = out;
  for (int64_t o = 0; o < out; o++)
    if (o * s - pad >= 0 && o * s - pad + k <= size) {
      if (*lo == out) *lo = o;
      *hi = o + 1;
    }
  if (*lo == out) *lo = *hi = out;
}

/* The previous kernel (moved from gen_train.c): one output at a time, its window's taps in a
 * run-time loop. */
static LLVMValueRef cg_gen_maxpool_grad_scalar(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind) {
  const ir_pool_attr *pa = &n->attr.maxpool_grad.pool;
  const ir_shape *xs = &c->g->values[n->out].shape, *ys = &c->g->values[n->in[0]].shape;
  int64_t planes = xs->dim[0] * xs->dim[1], h = xs->dim[2], w = xs->dim[3], oh = ys->dim[2], ow = ys->dim[3];
  LLVMBuilderRef b = c->b;
  LLVMValueRef a[5];
  LLVMValueRef f = cg_train_kbegin(c, fn_name, 2, a);
  LLVMValueRef dy = a[0], x = a[1], dx = a[2];
  LLVMValueRef m = cg_entry_alloca(c, c->t_f32, "m"), at = cg_entry_alloca(c, c->t_i64, "at");
  cg_loop P, OY, OX, Y, X;
  LLVMValueRef p = par_begin(c, &P, planes, a[3], a[4], "plane");
  LLVMValueRef xb = LLVMBuildMul(b, p, cg_i64(c, h * w), "");
  fill_ctx z = {dx, xb, cg_f32(c, 0.0f)};
  cg_inner_loop(c, h * w, fill_body, &z);
  LLVMValueRef oy = cg_loop_begin(c, &OY, cg_i64(c, 0), cg_i64(c, oh), cg_i64(c, 1), "oy");
  LLVMValueRef ox = cg_loop_begin(c, &OX, cg_i64(c, 0), cg_i64(c, ow), cg_i64(c, 1), "ox");
  pool_win W = pool_window(c, pa, oy, ox, h, w);
  LLVMValueRef y0 = W.y0, y1 = W.y1, x0 = W.x0, x1 = W.x1;
  LLVMBuildStore(b, cg_f32(c, -INFINITY), m);
  LLVMBuildStore(b, cg_i64(c, -1), at);
  LLVMValueRef yy = cg_loop_begin(c, &Y, y0, y1, cg_i64(c, 1), "y");
  LLVMValueRef xx = cg_loop_begin(c, &X, x0, x1, cg_i64(c, 1), "x");
  LLVMValueRef idx = LLVMBuildAdd(b, LLVMBuildMul(b, yy, cg_i64(c, w), ""), xx, "");
  LLVMValueRef v = cg_load_f32(c, x, LLVMBuildAdd(b, xb, idx, ""));
  LLVMValueRef take = LLVMBuildOr(b, LLVMBuildFCmp(b, LLVMRealOGT, v, LLVMBuildLoad2(b, c->t_f32, m, ""), ""),
                                  LLVMBuildFCmp(b, LLVMRealUNO, v, v, ""), "");
  LLVMBuildStore(b, LLVMBuildSelect(b, take, v, LLVMBuildLoad2(b, c->t_f32, m, ""), ""), m);
  LLVMBuildStore(b, LLVMBuildSelect(b, take, idx, LLVMBuildLoad2(b, c->t_i64, at, ""), ""), at);
  cg_loop_end(c, &X);
  cg_loop_end(c, &Y);
  LLVMValueRef atv = LLVMBuildLoad2(b, c->t_i64, at, "");
  cg_if fi;
  cg_if_begin(c, &fi, LLVMBuildICmp(b, LLVMIntSGE, atv, cg_i64(c, 0), ""));
  LLVMValueRef di = LLVMBuildAdd(b, xb, atv, "");
  LLVMValueRef g = cg_load_f32(c, dy, LLVMBuildAdd(b, LLVMBuildMul(b, p, cg_i64(c, oh * ow), ""),
                                                   LLVMBuildAdd(b, LLVMBuildMul(b, oy, cg_i64(c, ow), ""), ox, ""), ""));
  cg_store_f32(c, LLVMBuildFAdd(b, cg_load_f32(c, dx, di), g, ""), dx, di);
  cg_if_end(c, &fi);
  cg_loop_end(c, &OX);
  cg_loop_end(c, &OY);
  cg_loop_end(c, &P);
  cg_kernel_end(c);
  *kind = cg_kind(c, "maxpool_grad", NULL);
  return f;
}

LLVMValueRef cg_gen_maxpool_grad(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind) {
  const ir_pool_attr *pa = &n->attr.maxpool_grad.pool;
  if (ir_pool_dilation(pa, 0) != 1 || ir_pool_dilation(pa, 1) != 1) return cg_gen_maxpool_grad_pick(c, n, fn_name, kind);
  const ir_shape *xs = &c->g->values[n->out].shape, *ys = &c->g->values[n->in[0]].shape;
  mp_ctx u = {pa, xs->dim[2], xs->dim[3], ys->dim[2], ys->dim[3], NULL, NULL, NULL, NULL, NULL};
  int64_t planes = xs->dim[0] * xs->dim[1], oxa, oxb, oya, oyb;
  mp_interior(u.w, u.ow, pa->kernel[1], pa->stride[1], pa->pad[1], &oxa, &oxb);
  mp_interior(u.h, u.oh, pa->kernel[0], pa->stride[0], pa->pad[0], &oya, &oyb);
  /* many clipped columns (a window wider than the image) would unroll too much code */
  if (cg_tune(c)->train_scalar_maxpool_grad || oxa + (u.ow - oxb) > 16 || (int64_t)pa->kernel[0] * pa->kernel[1] > 64)
    return cg_gen_maxpool_grad_scalar(c, n, fn_name, kind);
  LLVMValueRef a[5];
  LLVMValueRef f = cg_train_kbegin(c, fn_name, 2, a);
  u.dy = a[0], u.x = a[1], u.dx = a[2];
  cg_loop P, OY;
  LLVMValueRef p = par_begin(c, &P, planes, a[3], a[4], "plane");
  u.xb = LLVMBuildMul(c->b, p, cg_i64(c, u.h * u.w), "");
  u.dyb = LLVMBuildMul(c->b, p, cg_i64(c, u.oh * u.ow), "");
  fill_ctx z = {u.dx, u.xb, cg_f32(c, 0.0f)};
  cg_inner_loop(c, u.h * u.w, fill_body, &z);
  int64_t cut[4] = {0, oya, oyb, u.oh};
  for (int r = 0; r < 3; r++) {
    if (cut[r + 1] <= cut[r]) continue;
    LLVMValueRef oy = cg_loop_begin(c, &OY, cg_i64(c, cut[r]), cg_i64(c, cut[r + 1]), cg_i64(c, 1), "oy");
    mp_row(c, &u, oy, oxa, oxb, r != 1);
    cg_loop_end(c, &OY);
  }
  cg_loop_end(c, &P);
  cg_kernel_end(c);
  *kind = cg_kind(c, "maxpool_grad", "rowvec");
  return f;
}
