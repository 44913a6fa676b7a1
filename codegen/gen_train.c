/* gen_train.c — code generators of compiled training (issue 5, docs/training.md): the
 * training-mode forward kernels that read params through pointers (conv2d, dense), the loss,
 * the backward ops and the optimizer updates.  In a training layout (cg_layout.train) every
 * operand of a node is a kernel argument in operand order: params point into the runtime's
 * state buffer, an optimizer node's output is its target param's slice (updated in place:
 * each element is read before it is written, by the same thread).
 *
 * Simple, correct loops over the logical NCHW layout: the innermost contiguous run is
 * vectorised (cg_inner_loop), work is split over tid/nthreads on an outer dimension where
 * each output element has one writer (planes, output channels, rows).  Normalisation layers
 * and their gradients are in gen_train_norm.c, the optimizer updates in gen_train_optim.c,
 * the activation / average-pool / softmax gradients in gen_train_act.c. */
#include <math.h>

#include "codegen/cg_internal.h"

/* cg_kernel_begin without the out-noalias promise (optimizer kernels update in place). */
static LLVMValueRef kbegin(cg_ctx *c, const char *name, int n_act, LLVMValueRef *args) {
  LLVMValueRef f = cg_kernel_begin(c, name, n_act, args);
  unsigned kind = LLVMGetEnumAttributeKindForName("noalias", 7);
  LLVMRemoveEnumAttributeAtIndex(f, (unsigned)n_act + 1, kind);
  return f;
}

static LLVMValueRef add64(cg_ctx *c, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildAdd(c->b, a, b, ""); }
static LLVMValueRef mul64(cg_ctx *c, LLVMValueRef a, int64_t k) { return LLVMBuildMul(c->b, a, cg_i64(c, k), ""); }
static LLVMValueRef addk(cg_ctx *c, LLVMValueRef a, int64_t k) { return LLVMBuildAdd(c->b, a, cg_i64(c, k), ""); }
static LLVMValueRef vload(cg_ctx *c, LLVMValueRef p, LLVMValueRef i, int w) { return cg_load_v(c, p, i, w); }

/* ---- vector building blocks --------------------------------------------------------------- */
typedef struct vec_args {
  LLVMValueRef y, yoff, x, xoff, s; /* y[yoff + j] op= s * x[xoff + j*xst] */
  int64_t xst;
  LLVMValueRef accv, accs;          /* dot accumulators */
} vec_args;

static void axpy_body(cg_ctx *c, LLVMValueRef j, int w, void *user) {
  vec_args *a = user;
  LLVMValueRef yi = add64(c, a->yoff, j);
  LLVMValueRef xv = cg_load_strided(c, a->x, add64(c, a->xoff, a->xst == 1 ? j : mul64(c, j, a->xst)), (int)a->xst, w);
  cg_store_v(c, cg_fma(c, cg_splat(c, a->s, w), xv, vload(c, a->y, yi, w)), a->y, yi, w);
}
/* y[yoff .. +n) += s * x[xoff + j*xst] */
static void axpy(cg_ctx *c, LLVMValueRef y, LLVMValueRef yoff, LLVMValueRef s, LLVMValueRef x, LLVMValueRef xoff,
                 int64_t xst, int64_t n) {
  vec_args a = {y, yoff, x, xoff, s, xst, NULL, NULL};
  if (n > 0) cg_inner_loop(c, n, axpy_body, &a);
}

static void fill_body(cg_ctx *c, LLVMValueRef j, int w, void *user) {
  vec_args *a = user;
  cg_store_v(c, cg_splat(c, a->s, w), a->y, add64(c, a->yoff, j), w);
}
static void fill(cg_ctx *c, LLVMValueRef y, LLVMValueRef yoff, LLVMValueRef s, int64_t n) {
  vec_args a = {y, yoff, NULL, NULL, s, 1, NULL, NULL};
  if (n > 0) cg_inner_loop(c, n, fill_body, &a);
}

static void dot_body(cg_ctx *c, LLVMValueRef j, int w, void *user) {
  vec_args *a = user;
  LLVMValueRef yv = vload(c, a->y, add64(c, a->yoff, j), w);
  LLVMValueRef xv = cg_load_strided(c, a->x, add64(c, a->xoff, a->xst == 1 ? j : mul64(c, j, a->xst)), (int)a->xst, w);
  LLVMValueRef acc = w == 1 ? a->accs : a->accv;
  LLVMBuildStore(c->b, cg_fma(c, yv, xv, LLVMBuildLoad2(c->b, cg_vtype(c, w), acc, "")), acc);
}
/* sum_j y[yoff + j] * x[xoff + j*xst], j < n (f32 scalar). */
/* Adds the products into the accumulators accv (vector) / accs (scalar) (entry allocas). */
static void dot_acc(cg_ctx *c, LLVMValueRef accv, LLVMValueRef accs, LLVMValueRef y, LLVMValueRef yoff, LLVMValueRef x,
                    LLVMValueRef xoff, int64_t xst, int64_t n) {
  vec_args a = {y, yoff, x, xoff, NULL, xst, accv, accs};
  if (n > 0) cg_inner_loop(c, n, dot_body, &a);
}
static void acc_zero(cg_ctx *c, LLVMValueRef accv, LLVMValueRef accs) {
  LLVMBuildStore(c->b, cg_fzero(c, c->target->vec_f32), accv);
  LLVMBuildStore(c->b, cg_f32(c, 0.0f), accs);
}
static LLVMValueRef acc_sum(cg_ctx *c, LLVMValueRef accv, LLVMValueRef accs) {
  int v = c->target->vec_f32;
  LLVMValueRef sv = cg_hsum(c, LLVMBuildLoad2(c->b, cg_vtype(c, v), accv, ""), v);
  return LLVMBuildFAdd(c->b, sv, LLVMBuildLoad2(c->b, c->t_f32, accs, ""), "dot");
}
static LLVMValueRef dot(cg_ctx *c, LLVMValueRef y, LLVMValueRef yoff, LLVMValueRef x, LLVMValueRef xoff, int64_t xst, int64_t n) {
  LLVMValueRef accv = cg_entry_alloca(c, cg_vtype(c, c->target->vec_f32), "dv"), accs = cg_entry_alloca(c, c->t_f32, "ds");
  acc_zero(c, accv, accs);
  dot_acc(c, accv, accs, y, yoff, x, xoff, xst, n);
  return acc_sum(c, accv, accs);
}

/* Loop over this thread's share of [0, n): returns the index; close with cg_loop_end. */
static LLVMValueRef par_loop(cg_ctx *c, cg_loop *L, int64_t n, LLVMValueRef tid, LLVMValueRef nth, const char *name) {
  LLVMValueRef lo, hi;
  cg_thread_range(c, cg_i64(c, n), tid, nth, &lo, &hi);
  return cg_loop_begin(c, L, lo, hi, cg_i64(c, 1), name);
}
static LLVMValueRef seq_loop(cg_ctx *c, cg_loop *L, int64_t lo, int64_t hi, const char *name) {
  return cg_loop_begin(c, L, cg_i64(c, lo), cg_i64(c, hi), cg_i64(c, 1), name);
}

/* ---- convolution geometry -------------------------------------------------------------------- */
typedef struct conv_geom {
  int64_t n, ci, h, w, co, oh, ow, kh, kw, sh, sw, pt, pl, dh, dw;
} conv_geom;

static conv_geom conv_geometry(const ir_conv2d_attr *a, const ir_shape *x, const ir_shape *y) {
  conv_geom g = {x->dim[0], x->dim[1], x->dim[2], x->dim[3], y->dim[1], y->dim[2], y->dim[3], a->kernel[0], a->kernel[1],
                 a->stride[0], a->stride[1], a->pad[0], a->pad[1], a->dilation[0], a->dilation[1]};
  return g;
}
/* Output positions o in [lo, hi) whose input index o*s - p + k*d lies in [0, size). */
static void tap_range(int64_t size, int64_t osize, int64_t s, int64_t p, int64_t kd, int64_t *lo, int64_t *hi) {
  int64_t off = kd - p; /* i = o*s + off */
  int64_t l = off >= 0 ? 0 : (-off + s - 1) / s;
  int64_t h = size - 1 - off < 0 ? 0 : (size - 1 - off) / s + 1;
  if (h > osize) h = osize;
  *lo = l, *hi = h > l ? h : l;
}

/* One output plane of a correlation: out[o_y, o_x] += sum over taps t of wt[t] *
 * in[o_y*s + ty[t], o_x*s + tx[t]] (only where the input index is inside the plane).  Where
 * every tap is inside (the interior) all taps are applied in one pass per output vector;
 * the border rows/columns fall back to one pass per tap. */
typedef struct corr {
  int nt;
  int64_t ty[64], tx[64];
  LLVMValueRef wt[64];
  int64_t s, ih, iw, oh, ow;
  LLVMValueRef in, ibase, out, obase, orow, irow;
} corr;

static void tap_range2(int64_t insize, int64_t osize, int64_t s, int64_t t, int64_t *lo, int64_t *hi) {
  int64_t l = t >= 0 ? 0 : (-t + s - 1) / s;
  int64_t h = insize - 1 - t < 0 ? 0 : (insize - 1 - t) / s + 1;
  if (h > osize) h = osize;
  *lo = l, *hi = h > l ? h : l;
}

static void corr_body(cg_ctx *c, LLVMValueRef j, int w, void *user) {
  corr *k = user;
  LLVMValueRef oi = add64(c, k->orow, j);
  LLVMValueRef acc = vload(c, k->out, oi, w);
  LLVMValueRef jx = k->s == 1 ? j : mul64(c, j, k->s);
  for (int t = 0; t < k->nt; t++) {
    LLVMValueRef ii = add64(c, k->irow, addk(c, jx, k->ty[t] * k->iw + k->tx[t]));
    acc = cg_fma(c, cg_splat(c, k->wt[t], w), cg_load_strided(c, k->in, ii, (int)k->s, w), acc);
  }
  cg_store_v(c, acc, k->out, oi, w);
}

static void corr_plane(cg_ctx *c, corr *k) {
  int64_t Y0 = 0, Y1 = k->oh, X0 = 0, X1 = k->ow, ylo[64], yhi[64], xlo[64], xhi[64];
  for (int t = 0; t < k->nt; t++) {
    tap_range2(k->ih, k->oh, k->s, k->ty[t], &ylo[t], &yhi[t]);
    tap_range2(k->iw, k->ow, k->s, k->tx[t], &xlo[t], &xhi[t]);
    if (ylo[t] > Y0) Y0 = ylo[t];
    if (yhi[t] < Y1) Y1 = yhi[t];
    if (xlo[t] > X0) X0 = xlo[t];
    if (xhi[t] < X1) X1 = xhi[t];
  }
  if (Y1 <= Y0 || X1 <= X0) Y0 = Y1 = X0 = X1 = 0; /* no interior: taps one by one */
  if (Y1 > Y0) {
    cg_loop Y;
    LLVMValueRef oy = seq_loop(c, &Y, Y0, Y1, "oyi");
    k->orow = add64(c, k->obase, addk(c, mul64(c, oy, k->ow), X0));
    k->irow = add64(c, k->ibase, mul64(c, mul64(c, oy, k->s), k->iw));
    k->irow = addk(c, k->irow, X0 * k->s);
    cg_inner_loop(c, X1 - X0, corr_body, k);
    cg_loop_end(c, &Y);
  }
  for (int t = 0; t < k->nt; t++) {
    if (ylo[t] >= yhi[t] || xlo[t] >= xhi[t]) continue;
    cg_loop Y;
    LLVMValueRef oy = seq_loop(c, &Y, ylo[t], yhi[t], "oyt");
    LLVMValueRef orow = add64(c, k->obase, mul64(c, oy, k->ow));
    LLVMValueRef irow = add64(c, k->ibase, addk(c, mul64(c, oy, k->s * k->iw), k->ty[t] * k->iw + k->tx[t]));
    LLVMValueRef inner = LLVMBuildAnd(c->b, LLVMBuildICmp(c->b, LLVMIntSGE, oy, cg_i64(c, Y0), ""),
                                      LLVMBuildICmp(c->b, LLVMIntSLT, oy, cg_i64(c, Y1), ""), "");
    cg_if fi;
    cg_if_begin(c, &fi, inner); /* interior row: only the columns outside [X0, X1) */
    int64_t a0 = xlo[t], a1 = X0 < xhi[t] ? X0 : xhi[t], b0 = X1 > xlo[t] ? X1 : xlo[t], b1 = xhi[t];
    if (a1 > a0) axpy(c, k->out, addk(c, orow, a0), k->wt[t], k->in, addk(c, irow, a0 * k->s), k->s, a1 - a0);
    if (b1 > b0) axpy(c, k->out, addk(c, orow, b0), k->wt[t], k->in, addk(c, irow, b0 * k->s), k->s, b1 - b0);
    cg_if_else(c, &fi);
    axpy(c, k->out, addk(c, orow, xlo[t]), k->wt[t], k->in, addk(c, irow, xlo[t] * k->s), k->s, xhi[t] - xlo[t]);
    cg_if_end(c, &fi);
    cg_loop_end(c, &Y);
  }
}

/* Forward conv (training: weights by pointer).  in: x, w[, b]; out y.  Work: (n, co) planes. */
static LLVMValueRef gen_conv_train(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind) {
  const ir_conv2d_attr *at = &n->attr.conv2d;
  if (at->groups != 1) return cg_fail(c, n, "grouped convolution is not supported by training codegen yet");
  conv_geom g = conv_geometry(at, &c->g->values[n->in[0]].shape, &c->g->values[n->out].shape);
  if (g.sh != g.sw || g.kh * g.kw > 64) return cg_fail(c, n, "training codegen: conv needs equal strides and <= 64 taps");
  int nin = n->n_in;
  LLVMValueRef a[6];
  LLVMValueRef f = kbegin(c, fn_name, nin, a);
  LLVMValueRef x = a[0], w = a[1], bias = nin > 2 ? a[2] : NULL, y = a[nin];
  cg_loop P, C;
  LLVMValueRef pl = par_loop(c, &P, g.n * g.co, a[nin + 1], a[nin + 2], "plane");
  LLVMValueRef co = LLVMBuildSRem(c->b, pl, cg_i64(c, g.co), "co"), nb = LLVMBuildSDiv(c->b, pl, cg_i64(c, g.co), "nb");
  LLVMValueRef ybase = mul64(c, pl, g.oh * g.ow);
  fill(c, y, ybase, bias ? cg_load_f32(c, bias, co) : cg_f32(c, 0.0f), g.oh * g.ow);
  LLVMValueRef ci = seq_loop(c, &C, 0, g.ci, "ci");
  LLVMValueRef xbase = mul64(c, add64(c, mul64(c, nb, g.ci), ci), g.h * g.w);
  LLVMValueRef wbase = mul64(c, add64(c, mul64(c, co, g.ci), ci), g.kh * g.kw);
  corr k = {0};
  k.s = g.sh == g.sw ? g.sw : 0, k.ih = g.h, k.iw = g.w, k.oh = g.oh, k.ow = g.ow;
  k.in = x, k.ibase = xbase, k.out = y, k.obase = ybase;
  for (int64_t ky = 0; ky < g.kh; ky++)
    for (int64_t kx = 0; kx < g.kw; kx++) {
      k.ty[k.nt] = ky * g.dh - g.pt, k.tx[k.nt] = kx * g.dw - g.pl;
      k.wt[k.nt++] = cg_load_f32(c, w, addk(c, wbase, ky * g.kw + kx));
    }
  corr_plane(c, &k);
  cg_loop_end(c, &C);
  cg_loop_end(c, &P);
  cg_kernel_end(c);
  *kind = cg_kind(c, "conv2d_train", "plane");
  return f;
}

/* in: dy [N,Co,OH,OW], w [Co,Ci,KH,KW]; out dx [N,Ci,H,W].  Work: (n, ci) planes. */
LLVMValueRef cg_gen_conv2d_grad_input(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind) {
  const ir_conv2d_attr *at = &n->attr.conv2d_grad_input.conv;
  if (at->groups != 1) return cg_fail(c, n, "conv2d_grad_input: groups > 1 is not supported by codegen yet");
  conv_geom g = conv_geometry(at, &c->g->values[n->out].shape, &c->g->values[n->in[0]].shape);
  LLVMValueRef a[5];
  LLVMValueRef f = kbegin(c, fn_name, 2, a);
  LLVMValueRef dy = a[0], w = a[1], dx = a[2];
  cg_loop P, C;
  LLVMValueRef pl = par_loop(c, &P, g.n * g.ci, a[3], a[4], "plane");
  LLVMValueRef ci = LLVMBuildSRem(c->b, pl, cg_i64(c, g.ci), "ci"), nb = LLVMBuildSDiv(c->b, pl, cg_i64(c, g.ci), "nb");
  LLVMValueRef xbase = mul64(c, pl, g.h * g.w);
  fill(c, dx, xbase, cg_f32(c, 0.0f), g.h * g.w);
  LLVMValueRef co = seq_loop(c, &C, 0, g.co, "co");
  LLVMValueRef ybase = mul64(c, add64(c, mul64(c, nb, g.co), co), g.oh * g.ow);
  LLVMValueRef wbase = mul64(c, add64(c, mul64(c, co, g.ci), ci), g.kh * g.kw);
  if (g.sh == 1 && g.sw == 1 && g.kh * g.kw <= 64) { /* a correlation of dy: all taps per pass */
    corr k = {0};
    k.s = 1, k.ih = g.oh, k.iw = g.ow, k.oh = g.h, k.ow = g.w;
    k.in = dy, k.ibase = ybase, k.out = dx, k.obase = xbase;
    for (int64_t ky = 0; ky < g.kh; ky++)
      for (int64_t kx = 0; kx < g.kw; kx++) {
        k.ty[k.nt] = g.pt - ky * g.dh, k.tx[k.nt] = g.pl - kx * g.dw;
        k.wt[k.nt++] = cg_load_f32(c, w, addk(c, wbase, ky * g.kw + kx));
      }
    corr_plane(c, &k);
  }
  for (int64_t ky = 0; ky < g.kh && !(g.sh == 1 && g.sw == 1 && g.kh * g.kw <= 64); ky++)
    for (int64_t kx = 0; kx < g.kw; kx++) {
      int64_t ylo, yhi, xlo, xhi;
      tap_range(g.h, g.oh, g.sh, g.pt, ky * g.dh, &ylo, &yhi);
      tap_range(g.w, g.ow, g.sw, g.pl, kx * g.dw, &xlo, &xhi);
      if (ylo >= yhi || xlo >= xhi) continue;
      LLVMValueRef wv = cg_load_f32(c, w, addk(c, wbase, ky * g.kw + kx));
      cg_loop Y;
      LLVMValueRef oy = seq_loop(c, &Y, ylo, yhi, "oy");
      LLVMValueRef iy = addk(c, mul64(c, oy, g.sh), ky * g.dh - g.pt);
      LLVMValueRef yo = add64(c, ybase, addk(c, mul64(c, oy, g.ow), xlo));
      LLVMValueRef xo = add64(c, xbase, addk(c, mul64(c, iy, g.w), xlo * g.sw + kx * g.dw - g.pl));
      if (g.sw == 1) {
        axpy(c, dx, xo, wv, dy, yo, 1, xhi - xlo);
      } else { /* strided scatter: scalar */
        cg_loop X;
        LLVMValueRef j = seq_loop(c, &X, 0, xhi - xlo, "j");
        LLVMValueRef xi = add64(c, xo, mul64(c, j, g.sw));
        LLVMValueRef v = cg_fma(c, wv, cg_load_f32(c, dy, add64(c, yo, j)), cg_load_f32(c, dx, xi));
        cg_store_f32(c, v, dx, xi);
        cg_loop_end(c, &X);
      }
      cg_loop_end(c, &Y);
    }
  cg_loop_end(c, &C);
  cg_loop_end(c, &P);
  cg_kernel_end(c);
  *kind = cg_kind(c, "conv2d_grad_input", "plane");
  return f;
}

/* in: dy [N,Co,OH,OW], x [N,Ci,H,W]; out dw [Co,Ci,KH,KW].  Work: output channels. */
LLVMValueRef cg_gen_conv2d_grad_weight(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind) {
  const ir_conv2d_attr *at = &n->attr.conv2d_grad_weight.conv;
  if (at->groups != 1) return cg_fail(c, n, "conv2d_grad_weight: groups > 1 is not supported by codegen yet");
  conv_geom g = conv_geometry(at, &c->g->values[n->in[1]].shape, &c->g->values[n->in[0]].shape);
  LLVMValueRef a[5];
  LLVMValueRef f = kbegin(c, fn_name, 2, a);
  LLVMValueRef dy = a[0], x = a[1], dw = a[2];
  int ntap = (int)(g.kh * g.kw);
  if (ntap > 64) return cg_fail(c, n, "conv2d_grad_weight: more than 64 taps");
  LLVMValueRef accv[64], accs[64];
  for (int t = 0; t < ntap; t++)
    accv[t] = cg_entry_alloca(c, cg_vtype(c, c->target->vec_f32), "av"), accs[t] = cg_entry_alloca(c, c->t_f32, "as");
  cg_loop P, C, B, Y;
  LLVMValueRef co = par_loop(c, &P, g.co, a[3], a[4], "co");
  LLVMValueRef ci = seq_loop(c, &C, 0, g.ci, "ci");
  LLVMValueRef wbase = mul64(c, add64(c, mul64(c, co, g.ci), ci), g.kh * g.kw);
  for (int t = 0; t < ntap; t++) acc_zero(c, accv[t], accs[t]);
  /* every tap accumulates over (n, oy) in its own registers; one horizontal sum at the end */
  LLVMValueRef nb = seq_loop(c, &B, 0, g.n, "n");
  LLVMValueRef ybase = mul64(c, add64(c, mul64(c, nb, g.co), co), g.oh * g.ow);
  LLVMValueRef xbase = mul64(c, add64(c, mul64(c, nb, g.ci), ci), g.h * g.w);
  LLVMValueRef oy = seq_loop(c, &Y, 0, g.oh, "oy");
  for (int64_t ky = 0; ky < g.kh; ky++) {
    int64_t ylo, yhi;
    tap_range(g.h, g.oh, g.sh, g.pt, ky * g.dh, &ylo, &yhi);
    if (ylo >= yhi) continue;
    cg_if fi;
    cg_if_begin(c, &fi, LLVMBuildAnd(c->b, LLVMBuildICmp(c->b, LLVMIntSGE, oy, cg_i64(c, ylo), ""),
                                     LLVMBuildICmp(c->b, LLVMIntSLT, oy, cg_i64(c, yhi), ""), ""));
    LLVMValueRef iy = addk(c, mul64(c, oy, g.sh), ky * g.dh - g.pt);
    for (int64_t kx = 0; kx < g.kw; kx++) {
      int64_t xlo, xhi;
      tap_range(g.w, g.ow, g.sw, g.pl, kx * g.dw, &xlo, &xhi);
      if (xlo >= xhi) continue;
      LLVMValueRef yo = add64(c, ybase, addk(c, mul64(c, oy, g.ow), xlo));
      LLVMValueRef xo = add64(c, xbase, addk(c, mul64(c, iy, g.w), xlo * g.sw + kx * g.dw - g.pl));
      int t = (int)(ky * g.kw + kx);
      dot_acc(c, accv[t], accs[t], dy, yo, x, xo, g.sw, xhi - xlo);
    }
    cg_if_end(c, &fi);
  }
  cg_loop_end(c, &Y);
  cg_loop_end(c, &B);
  for (int t = 0; t < ntap; t++) cg_store_f32(c, acc_sum(c, accv[t], accs[t]), dw, addk(c, wbase, t));
  cg_loop_end(c, &C);
  cg_loop_end(c, &P);
  cg_kernel_end(c);
  *kind = cg_kind(c, "conv2d_grad_weight", "cout");
  return f;
}

/* ---- dense --------------------------------------------------------------------------------- */
/* Forward (training): x [N,K], w [M,K][, b [M]] -> y [N,M].  Work: output elements. */
static LLVMValueRef gen_dense_train(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind) {
  const ir_shape *xs = &c->g->values[n->in[0]].shape;
  int64_t nb = xs->dim[0], k = ir_shape_numel(xs) / nb, m = c->g->values[n->in[1]].shape.dim[0];
  int nin = n->n_in;
  LLVMValueRef a[6];
  LLVMValueRef f = kbegin(c, fn_name, nin, a);
  cg_loop L;
  LLVMValueRef it = par_loop(c, &L, nb * m, a[nin + 1], a[nin + 2], "item");
  LLVMValueRef row = LLVMBuildSDiv(c->b, it, cg_i64(c, m), "row"), col = LLVMBuildSRem(c->b, it, cg_i64(c, m), "col");
  LLVMValueRef v = dot(c, a[0], mul64(c, row, k), a[1], mul64(c, col, k), 1, k);
  if (nin > 2) v = LLVMBuildFAdd(c->b, v, cg_load_f32(c, a[2], col), "");
  cg_store_f32(c, v, a[nin], it);
  cg_loop_end(c, &L);
  cg_kernel_end(c);
  *kind = cg_kind(c, "dense_train", "dot");
  return f;
}

/* dy [N,O], w [O,I] -> dx [N,I].  Work: rows. */
LLVMValueRef cg_gen_dense_grad_input(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind) {
  const ir_shape *ws = &c->g->values[n->in[1]].shape;
  int64_t nb = c->g->values[n->in[0]].shape.dim[0], o = ws->dim[0], in = ws->dim[1];
  LLVMValueRef a[5];
  LLVMValueRef f = kbegin(c, fn_name, 2, a);
  cg_loop L, O;
  LLVMValueRef r = par_loop(c, &L, nb, a[3], a[4], "row");
  LLVMValueRef xo = mul64(c, r, in);
  fill(c, a[2], xo, cg_f32(c, 0.0f), in);
  LLVMValueRef j = seq_loop(c, &O, 0, o, "o");
  axpy(c, a[2], xo, cg_load_f32(c, a[0], add64(c, mul64(c, r, o), j)), a[1], mul64(c, j, in), 1, in);
  cg_loop_end(c, &O);
  cg_loop_end(c, &L);
  cg_kernel_end(c);
  *kind = cg_kind(c, "dense_grad_input", "row");
  return f;
}

/* dy [N,O], x [N,I] -> dw [O,I].  Work: output rows. */
LLVMValueRef cg_gen_dense_grad_weight(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind) {
  const ir_shape *os = &c->g->values[n->out].shape;
  int64_t nb = c->g->values[n->in[0]].shape.dim[0], o = os->dim[0], in = os->dim[1];
  LLVMValueRef a[5];
  LLVMValueRef f = kbegin(c, fn_name, 2, a);
  cg_loop L, B;
  LLVMValueRef r = par_loop(c, &L, o, a[3], a[4], "o");
  LLVMValueRef wo = mul64(c, r, in);
  fill(c, a[2], wo, cg_f32(c, 0.0f), in);
  LLVMValueRef b = seq_loop(c, &B, 0, nb, "n");
  axpy(c, a[2], wo, cg_load_f32(c, a[0], add64(c, mul64(c, b, o), r)), a[1], mul64(c, b, in), 1, in);
  cg_loop_end(c, &B);
  cg_loop_end(c, &L);
  cg_kernel_end(c);
  *kind = cg_kind(c, "dense_grad_weight", "row");
  return f;
}

/* ---- reductions, element-wise grads, pooling ------------------------------------------------- */
/* x -> sum to attr shape; supports shapes reduced-kept-reduced (A, K, I): bias gradients. */
LLVMValueRef cg_gen_reduce_sum(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind) {
  const ir_shape *xs = &c->g->values[n->in[0]].shape, *ts = &n->attr.reduce_sum.shape;
  int first = -1, last = -1;
  for (int d = 0; d < xs->rank; d++)
    if (ts->dim[d] == xs->dim[d] && xs->dim[d] != 1) {
      if (first < 0) first = d;
      last = d;
    }
  int64_t A = 1, K = 1, I = 1;
  for (int d = 0; d < xs->rank; d++) {
    int kept = ts->dim[d] == xs->dim[d];
    if (first >= 0 && d >= first && d <= last) {
      if (!kept) return cg_fail(c, n, "reduce_sum to a non-contiguous kept block is not supported by codegen yet");
      K *= xs->dim[d];
    } else if (first < 0 || d < first) A *= kept ? 1 : xs->dim[d];
    else I *= kept ? 1 : xs->dim[d];
  }
  LLVMValueRef a[4];
  LLVMValueRef f = kbegin(c, fn_name, 1, a);
  LLVMValueRef acc = cg_entry_alloca(c, c->t_f32, "acc");
  cg_loop L, B;
  LLVMValueRef k = par_loop(c, &L, K, a[2], a[3], "k");
  LLVMBuildStore(c->b, cg_f32(c, 0.0f), acc);
  LLVMValueRef i = seq_loop(c, &B, 0, A, "a");
  LLVMValueRef s = cg_reduce_sum(c, a[0], mul64(c, add64(c, mul64(c, i, K), k), I), I, NULL);
  LLVMBuildStore(c->b, LLVMBuildFAdd(c->b, LLVMBuildLoad2(c->b, c->t_f32, acc, ""), s, ""), acc);
  cg_loop_end(c, &B);
  cg_store_f32(c, LLVMBuildLoad2(c->b, c->t_f32, acc, ""), a[1], k);
  cg_loop_end(c, &L);
  cg_kernel_end(c);
  *kind = cg_kind(c, "reduce_sum", NULL);
  return f;
}

typedef struct ew_ctx { const ir_node *n; LLVMValueRef in[5], out, lr; } ew_ctx;

static void relu_grad_body(cg_ctx *c, LLVMValueRef i, int w, void *user) {
  ew_ctx *u = user;
  LLVMValueRef dy = vload(c, u->in[0], i, w), x = vload(c, u->in[1], i, w);
  LLVMValueRef r = LLVMBuildSelect(c->b, LLVMBuildFCmp(c->b, LLVMRealOGT, x, cg_fzero(c, w), ""), dy, cg_fzero(c, w), "");
  cg_store_v(c, r, u->out, i, w);
}

LLVMValueRef cg_gen_relu_grad(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind) {
  LLVMValueRef a[5];
  LLVMValueRef f = kbegin(c, fn_name, 2, a);
  ew_ctx u = {n, {a[0], a[1]}, a[2], NULL};
  cg_foreach_elem(c, cg_numel(c, n->out), a[3], a[4], relu_grad_body, &u);
  cg_kernel_end(c);
  *kind = cg_kind(c, "relu_grad", NULL);
  return f;
}

/* dy [N,C,OH,OW], x [N,C,H,W] -> dx: dy to the first maximum of each window.  Work: planes. */
LLVMValueRef cg_gen_maxpool_grad(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind) {
  const ir_pool_attr *pa = &n->attr.maxpool_grad.pool;
  const ir_shape *xs = &c->g->values[n->out].shape, *ys = &c->g->values[n->in[0]].shape;
  int64_t planes = xs->dim[0] * xs->dim[1], h = xs->dim[2], w = xs->dim[3], oh = ys->dim[2], ow = ys->dim[3];
  LLVMValueRef a[5];
  LLVMValueRef f = kbegin(c, fn_name, 2, a);
  LLVMValueRef dy = a[0], x = a[1], dx = a[2];
  LLVMValueRef m = cg_entry_alloca(c, c->t_f32, "m"), at = cg_entry_alloca(c, c->t_i64, "at");
  cg_loop P, OY, OX, Y, X;
  LLVMValueRef p = par_loop(c, &P, planes, a[3], a[4], "plane");
  LLVMValueRef xb = mul64(c, p, h * w);
  fill(c, dx, xb, cg_f32(c, 0.0f), h * w);
  LLVMValueRef oy = seq_loop(c, &OY, 0, oh, "oy");
  LLVMValueRef ox = seq_loop(c, &OX, 0, ow, "ox");
  LLVMValueRef ys0 = addk(c, mul64(c, oy, pa->stride[0]), -pa->pad[0]), xs0 = addk(c, mul64(c, ox, pa->stride[1]), -pa->pad[1]);
  LLVMValueRef ye = cg_min64(c, addk(c, ys0, pa->kernel[0]), cg_i64(c, h + pa->pad[2]));
  LLVMValueRef xe = cg_min64(c, addk(c, xs0, pa->kernel[1]), cg_i64(c, w + pa->pad[3]));
  LLVMValueRef y0 = cg_max64(c, ys0, cg_i64(c, 0)), y1 = cg_min64(c, ye, cg_i64(c, h));
  LLVMValueRef x0 = cg_max64(c, xs0, cg_i64(c, 0)), x1 = cg_min64(c, xe, cg_i64(c, w));
  LLVMBuildStore(c->b, cg_f32(c, -INFINITY), m);
  LLVMBuildStore(c->b, cg_i64(c, -1), at);
  LLVMValueRef yy = cg_loop_begin(c, &Y, y0, y1, cg_i64(c, 1), "y");
  LLVMValueRef xx = cg_loop_begin(c, &X, x0, x1, cg_i64(c, 1), "x");
  LLVMValueRef idx = add64(c, mul64(c, yy, w), xx);
  LLVMValueRef v = cg_load_f32(c, x, add64(c, xb, idx));
  LLVMValueRef take = LLVMBuildOr(c->b, LLVMBuildFCmp(c->b, LLVMRealOGT, v, LLVMBuildLoad2(c->b, c->t_f32, m, ""), ""),
                                  LLVMBuildFCmp(c->b, LLVMRealUNO, v, v, ""), "");
  LLVMBuildStore(c->b, LLVMBuildSelect(c->b, take, v, LLVMBuildLoad2(c->b, c->t_f32, m, ""), ""), m);
  LLVMBuildStore(c->b, LLVMBuildSelect(c->b, take, idx, LLVMBuildLoad2(c->b, c->t_i64, at, ""), ""), at);
  cg_loop_end(c, &X);
  cg_loop_end(c, &Y);
  LLVMValueRef atv = LLVMBuildLoad2(c->b, c->t_i64, at, "");
  cg_if fi;
  cg_if_begin(c, &fi, LLVMBuildICmp(c->b, LLVMIntSGE, atv, cg_i64(c, 0), ""));
  LLVMValueRef di = add64(c, xb, atv);
  LLVMValueRef g = cg_load_f32(c, dy, add64(c, mul64(c, p, oh * ow), add64(c, mul64(c, oy, ow), ox)));
  cg_store_f32(c, LLVMBuildFAdd(c->b, cg_load_f32(c, dx, di), g, ""), dx, di);
  cg_if_end(c, &fi);
  cg_loop_end(c, &OX);
  cg_loop_end(c, &OY);
  cg_loop_end(c, &P);
  cg_kernel_end(c);
  *kind = cg_kind(c, "maxpool_grad", NULL);
  return f;
}

/* ---- loss ------------------------------------------------------------------------------------ */
/* Natural log of a positive finite double: x = 2^e m, m in [sqrt(1/2), sqrt(2)),
 * log m = 2 atanh((m-1)/(m+1)) by its series (|t| < 0.172: 10 terms, ~1e-16). */
static LLVMValueRef log_d(cg_ctx *c, LLVMValueRef x) {
  LLVMTypeRef dt = LLVMDoubleTypeInContext(c->llc);
  LLVMValueRef bits = LLVMBuildBitCast(c->b, x, c->t_i64, "");
  LLVMValueRef e = addk(c, LLVMBuildAnd(c->b, LLVMBuildLShr(c->b, bits, cg_i64(c, 52), ""), cg_i64(c, 0x7ff), ""), -1023);
  LLVMValueRef mb = LLVMBuildOr(c->b, LLVMBuildAnd(c->b, bits, cg_i64(c, 0x000fffffffffffffLL), ""),
                                cg_i64(c, 0x3ff0000000000000LL), "");
  LLVMValueRef m = LLVMBuildBitCast(c->b, mb, dt, "");
  LLVMValueRef big = LLVMBuildFCmp(c->b, LLVMRealOGT, m, LLVMConstReal(dt, 1.4142135623730951), "");
  m = LLVMBuildSelect(c->b, big, LLVMBuildFMul(c->b, m, LLVMConstReal(dt, 0.5), ""), m, "");
  e = LLVMBuildSelect(c->b, big, addk(c, e, 1), e, "");
  LLVMValueRef one = LLVMConstReal(dt, 1.0);
  LLVMValueRef t = LLVMBuildFDiv(c->b, LLVMBuildFSub(c->b, m, one, ""), LLVMBuildFAdd(c->b, m, one, ""), "");
  LLVMValueRef t2 = LLVMBuildFMul(c->b, t, t, "");
  LLVMValueRef s = LLVMConstReal(dt, 1.0 / 21.0);
  for (int k = 19; k >= 1; k -= 2) s = LLVMBuildFAdd(c->b, LLVMBuildFMul(c->b, s, t2, ""), LLVMConstReal(dt, 1.0 / k), "");
  LLVMValueRef lm = LLVMBuildFMul(c->b, LLVMBuildFMul(c->b, s, t, ""), LLVMConstReal(dt, 2.0), "");
  return LLVMBuildFAdd(c->b, LLVMBuildFMul(c->b, LLVMBuildSIToFP(c->b, e, dt, ""), LLVMConstReal(dt, 0.6931471805599453), ""),
                       lm, "log");
}

/* Row b of logits [N,K]: max into *mx, sum of exp(x - max) (double) into *sum. */
static void row_softmax_stats(cg_ctx *c, LLVMValueRef x, LLVMValueRef rb, int64_t k, LLVMValueRef *mx, LLVMValueRef *sum) {
  LLVMTypeRef dt = LLVMDoubleTypeInContext(c->llc);
  LLVMValueRef ma = cg_entry_alloca(c, c->t_f32, "mx"), sa = cg_entry_alloca(c, dt, "se");
  LLVMBuildStore(c->b, cg_f32(c, -INFINITY), ma);
  LLVMBuildStore(c->b, LLVMConstReal(dt, 0.0), sa);
  cg_loop J;
  LLVMValueRef j = seq_loop(c, &J, 0, k, "j");
  LLVMBuildStore(c->b, cg_max_nan(c, cg_load_f32(c, x, add64(c, rb, j)), LLVMBuildLoad2(c->b, c->t_f32, ma, "")), ma);
  cg_loop_end(c, &J);
  *mx = LLVMBuildLoad2(c->b, c->t_f32, ma, "max");
  j = seq_loop(c, &J, 0, k, "j");
  LLVMValueRef e = cg_exp(c, LLVMBuildFSub(c->b, cg_load_f32(c, x, add64(c, rb, j)), *mx, ""), 1);
  LLVMBuildStore(c->b, LLVMBuildFAdd(c->b, LLVMBuildLoad2(c->b, dt, sa, ""), LLVMBuildFPExt(c->b, e, dt, ""), ""), sa);
  cg_loop_end(c, &J);
  *sum = LLVMBuildLoad2(c->b, dt, sa, "sum");
}

/* Forward loss: logits [N,K], labels [N] -> [1] mean (label smoothing s); thread 0 only. */
static LLVMValueRef gen_xent_train(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind) {
  const ir_shape *xs = &c->g->values[n->in[0]].shape;
  int64_t nb = xs->dim[0], k = ir_shape_numel(xs) / nb;
  double s = n->attr.softmax_xent.label_smoothing;
  LLVMTypeRef dt = LLVMDoubleTypeInContext(c->llc);
  LLVMValueRef a[5];
  LLVMValueRef f = kbegin(c, fn_name, 2, a);
  LLVMValueRef tot = cg_entry_alloca(c, dt, "tot");
  cg_if fi;
  cg_if_begin(c, &fi, LLVMBuildICmp(c->b, LLVMIntEQ, a[3], cg_i32(c, 0), ""));
  LLVMBuildStore(c->b, LLVMConstReal(dt, 0.0), tot);
  cg_loop B;
  LLVMValueRef b = seq_loop(c, &B, 0, nb, "b");
  LLVMValueRef rb = mul64(c, b, k), mx, sum;
  row_softmax_stats(c, a[0], rb, k, &mx, &sum);
  LLVMValueRef lse = LLVMBuildFAdd(c->b, LLVMBuildFPExt(c->b, mx, dt, ""), log_d(c, sum), "lse");
  LLVMValueRef y = LLVMBuildFPToSI(c->b, cg_load_f32(c, a[1], b), c->t_i64, "y");
  LLVMValueRef xy = LLVMBuildFPExt(c->b, cg_load_f32(c, a[0], add64(c, rb, y)), dt, "");
  LLVMValueRef row = LLVMBuildFMul(c->b, LLVMConstReal(dt, 1.0 - s), LLVMBuildFSub(c->b, lse, xy, ""), "");
  if (s != 0.0) {
    LLVMValueRef mean = LLVMBuildFDiv(c->b, LLVMBuildFPExt(c->b, cg_reduce_sum(c, a[0], rb, k, NULL), dt, ""),
                                      LLVMConstReal(dt, (double)k), "");
    row = LLVMBuildFAdd(c->b, row, LLVMBuildFMul(c->b, LLVMConstReal(dt, s), LLVMBuildFSub(c->b, lse, mean, ""), ""), "");
  }
  LLVMBuildStore(c->b, LLVMBuildFAdd(c->b, LLVMBuildLoad2(c->b, dt, tot, ""), row, ""), tot);
  cg_loop_end(c, &B);
  LLVMValueRef mean = LLVMBuildFDiv(c->b, LLVMBuildLoad2(c->b, dt, tot, ""), LLVMConstReal(dt, (double)nb), "");
  cg_store_f32(c, LLVMBuildFPTrunc(c->b, mean, c->t_f32, ""), a[2], cg_i64(c, 0));
  cg_if_end(c, &fi);
  cg_kernel_end(c);
  *kind = cg_kind(c, "softmax_xent", NULL);
  return f;
}

/* logits, labels -> dlogits = (softmax - target) * scale / N.  Work: rows. */
LLVMValueRef cg_gen_softmax_xent_grad(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind) {
  const ir_shape *xs = &c->g->values[n->in[0]].shape;
  int64_t nb = xs->dim[0], k = ir_shape_numel(xs) / nb;
  float s = n->attr.softmax_xent_grad.label_smoothing, scale = n->attr.softmax_xent_grad.scale / (float)nb;
  LLVMTypeRef dt = LLVMDoubleTypeInContext(c->llc);
  LLVMValueRef a[5];
  LLVMValueRef f = kbegin(c, fn_name, 2, a);
  cg_loop B, J;
  LLVMValueRef b = par_loop(c, &B, nb, a[3], a[4], "b");
  LLVMValueRef rb = mul64(c, b, k), mx, sum;
  row_softmax_stats(c, a[0], rb, k, &mx, &sum);
  LLVMValueRef inv = LLVMBuildFDiv(c->b, LLVMConstReal(dt, 1.0), sum, "");
  LLVMValueRef y = LLVMBuildFPToSI(c->b, cg_load_f32(c, a[1], b), c->t_i64, "y");
  LLVMValueRef j = seq_loop(c, &J, 0, k, "j");
  LLVMValueRef e = LLVMBuildFPExt(c->b, cg_exp(c, LLVMBuildFSub(c->b, cg_load_f32(c, a[0], add64(c, rb, j)), mx, ""), 1), dt, "");
  LLVMValueRef t = LLVMBuildSelect(c->b, LLVMBuildICmp(c->b, LLVMIntEQ, j, y, ""), LLVMConstReal(dt, 1.0 - s + s / (double)k),
                                   LLVMConstReal(dt, s / (double)k), "");
  LLVMValueRef v = LLVMBuildFMul(c->b, LLVMBuildFSub(c->b, LLVMBuildFMul(c->b, e, inv, ""), t, ""), LLVMConstReal(dt, scale), "");
  cg_store_f32(c, LLVMBuildFPTrunc(c->b, v, c->t_f32, ""), a[2], add64(c, rb, j));
  cg_loop_end(c, &J);
  cg_loop_end(c, &B);
  cg_kernel_end(c);
  *kind = cg_kind(c, "softmax_xent_grad", NULL);
  return f;
}

LLVMValueRef cg_gen_top1(cg_ctx *c, const char *name, int64_t nb, int64_t k) {
  LLVMValueRef a[5];
  LLVMBasicBlockRef saved = LLVMGetInsertBlock(c->b);
  LLVMValueRef f = kbegin(c, name, 2, a);
  LLVMValueRef cnt = cg_entry_alloca(c, c->t_f32, "cnt"), best = cg_entry_alloca(c, c->t_i64, "best");
  LLVMValueRef bv = cg_entry_alloca(c, c->t_f32, "bv");
  cg_if fi;
  cg_if_begin(c, &fi, LLVMBuildICmp(c->b, LLVMIntEQ, a[3], cg_i32(c, 0), ""));
  LLVMBuildStore(c->b, cg_f32(c, 0.0f), cnt);
  cg_loop B, J;
  LLVMValueRef b = seq_loop(c, &B, 0, nb, "b");
  LLVMValueRef rb = mul64(c, b, k);
  LLVMBuildStore(c->b, cg_i64(c, 0), best);
  LLVMBuildStore(c->b, cg_load_f32(c, a[0], rb), bv);
  LLVMValueRef j = seq_loop(c, &J, 1, k, "j");
  LLVMValueRef v = cg_load_f32(c, a[0], add64(c, rb, j));
  LLVMValueRef gt = LLVMBuildFCmp(c->b, LLVMRealOGT, v, LLVMBuildLoad2(c->b, c->t_f32, bv, ""), "");
  LLVMBuildStore(c->b, LLVMBuildSelect(c->b, gt, v, LLVMBuildLoad2(c->b, c->t_f32, bv, ""), ""), bv);
  LLVMBuildStore(c->b, LLVMBuildSelect(c->b, gt, j, LLVMBuildLoad2(c->b, c->t_i64, best, ""), ""), best);
  cg_loop_end(c, &J);
  LLVMValueRef y = LLVMBuildFPToSI(c->b, cg_load_f32(c, a[1], b), c->t_i64, "y");
  LLVMValueRef hit = LLVMBuildICmp(c->b, LLVMIntEQ, y, LLVMBuildLoad2(c->b, c->t_i64, best, ""), "");
  LLVMValueRef add = LLVMBuildSelect(c->b, hit, cg_f32(c, 1.0f), cg_f32(c, 0.0f), "");
  LLVMBuildStore(c->b, LLVMBuildFAdd(c->b, LLVMBuildLoad2(c->b, c->t_f32, cnt, ""), add, ""), cnt);
  cg_loop_end(c, &B);
  cg_store_f32(c, LLVMBuildLoad2(c->b, c->t_f32, cnt, ""), a[2], cg_i64(c, 0));
  cg_if_end(c, &fi);
  cg_kernel_end(c);
  LLVMSetLinkage(f, LLVMInternalLinkage);
  if (saved) LLVMPositionBuilderAtEnd(c->b, saved);
  return f;
}

/* ---- dropout (training) ---------------------------------------------------------------- */
/* The interpreter's mask (ir/ref_eltwise.c): element i is kept iff
 * (mix64(seed ^ mix64(i)) >> 40) * 2^-24 >= rate, mix64 = splitmix64 step; kept * 1/(1-rate).
 * The backward is the same node applied to dy (same seed, same indices). */
static LLVMValueRef ic(cg_ctx *c, uint64_t v, int w) {
  LLVMValueRef s = LLVMConstInt(c->t_i64, v, 0);
  if (w == 1) return s;
  LLVMValueRef e[64];
  for (int i = 0; i < w; i++) e[i] = s;
  return LLVMConstVector(e, (unsigned)w);
}
static LLVMValueRef mix64(cg_ctx *c, LLVMValueRef z, int w) {
  LLVMBuilderRef b = c->b;
  z = LLVMBuildAdd(b, z, ic(c, 0x9e3779b97f4a7c15ull, w), "");
  z = LLVMBuildMul(b, LLVMBuildXor(b, z, LLVMBuildLShr(b, z, ic(c, 30, w), ""), ""), ic(c, 0xbf58476d1ce4e5b9ull, w), "");
  z = LLVMBuildMul(b, LLVMBuildXor(b, z, LLVMBuildLShr(b, z, ic(c, 27, w), ""), ""), ic(c, 0x94d049bb133111ebull, w), "");
  return LLVMBuildXor(b, z, LLVMBuildLShr(b, z, ic(c, 31, w), ""), "");
}

static void dropout_body(cg_ctx *c, LLVMValueRef i, int w, void *user) {
  ew_ctx *u = user;
  const ir_dropout_attr *at = &u->n->attr.dropout;
  LLVMValueRef iv = i;
  if (w > 1) {
    LLVMValueRef e[64];
    for (int l = 0; l < w; l++) e[l] = cg_i64(c, l);
    LLVMTypeRef vt = LLVMVectorType(c->t_i64, (unsigned)w);
    LLVMValueRef sp = LLVMBuildInsertElement(c->b, LLVMGetPoison(vt), i, cg_i32(c, 0), "");
    sp = LLVMBuildShuffleVector(c->b, sp, LLVMGetPoison(vt), LLVMConstNull(LLVMVectorType(c->t_i32, (unsigned)w)), "");
    iv = LLVMBuildAdd(c->b, sp, LLVMConstVector(e, (unsigned)w), "");
  }
  LLVMValueRef h = mix64(c, LLVMBuildXor(c->b, ic(c, at->seed, w), mix64(c, iv, w), ""), w);
  LLVMValueRef uf = LLVMBuildFMul(c->b, LLVMBuildUIToFP(c->b, LLVMBuildLShr(c->b, h, ic(c, 40, w), ""), cg_vtype(c, w), ""),
                                  cg_fconst(c, 1.0f / 16777216.0f, w), "");
  LLVMValueRef keep = LLVMBuildFCmp(c->b, LLVMRealOGE, uf, cg_fconst(c, at->rate, w), "keep");
  float scale = at->rate < 1.0f ? 1.0f / (1.0f - at->rate) : 0.0f;
  LLVMValueRef x = LLVMBuildFMul(c->b, vload(c, u->in[0], i, w), cg_fconst(c, scale, w), "");
  cg_store_v(c, LLVMBuildSelect(c->b, keep, x, cg_fzero(c, w), ""), u->out, i, w);
}

static LLVMValueRef gen_dropout_train(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind) {
  if (!n->attr.dropout.training || n->attr.dropout.rate <= 0.0f) return cg_gen_dropout(c, n, fn_name, kind);
  LLVMValueRef a[4];
  LLVMValueRef f = kbegin(c, fn_name, 1, a);
  ew_ctx u = {n, {a[0]}, a[1], NULL};
  cg_foreach_elem(c, cg_numel(c, n->out), a[2], a[3], dropout_body, &u);
  cg_kernel_end(c);
  *kind = cg_kind(c, "dropout_train", NULL);
  return f;
}

/* Training-mode forward generators of the normalisation layers (gen_train_norm.c); the
 * backward ops, optimizer updates (gen_train_optim.c) and activation/pool/softmax gradients
 * (gen_train_act.c) are the cg_gen_<op> of their ops.def rows. */
LLVMValueRef cg_gen_batchnorm_train(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind);
LLVMValueRef cg_gen_groupnorm_train(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind);

cg_gen_fn cg_train_generator(ir_op op) {
  switch (op) {
  case IR_OP_dropout: return gen_dropout_train;
  case IR_OP_conv2d: return gen_conv_train;
  case IR_OP_dense: return gen_dense_train;
  case IR_OP_softmax_xent: return gen_xent_train;
  case IR_OP_batchnorm: return cg_gen_batchnorm_train; /* gen_train_norm.c */
  case IR_OP_groupnorm: return cg_gen_groupnorm_train;
  default: return NULL;
  }
}
