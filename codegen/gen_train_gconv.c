/* gen_train_gconv.c — compiled-training kernels of conv2d with groups > 1 (ResNeXt grouped,
 * EfficientNet depthwise), NCHW, weights [Co,Ci/g,KH,KW] read through the state pointer:
 *  - forward and grad_input share one per-group direct convolution vectorised over the
 *    pixels of one output row: a tile of R output channels of a group x P vectors of V
 *    pixels; per (ky, input channel of the group, kx) it loads the P pixel vectors once
 *    (compile-time lane maps: strided loads in the forward, for grad_input with stride > 1
 *    one contiguous dy load spread over the lanes by a shuffle, zeros where no tap lands)
 *    and issues R*P fmuladds with R broadcast weights.  Depthwise is the R = 1 case with up
 *    to 8 independent pixel vectors (memory-bound: each input vector feeds one FMA per tap).
 *  - grad_weight: per (group, output-channel tile, input channel of the group) a reduction
 *    over (n, oy, ox) in vector accumulators (RW channels x KC taps of one ky), kept in a
 *    stack array between images, one horizontal sum per weight at the end.
 * Every output element is written by one work item with a fixed summation order (static
 * contiguous ranges over tid), so results do not depend on the thread count. */
#include "codegen/cg_half_partials.h"
#include "codegen/gen_train.h"

#define GC_MAXV 256

/* out[n, g*og + o, y, x] = bias + sum_{i < ig, ky, kx} w[g*ws_g + o*ws_o + i*ws_i + ky*ws_y +
 * kx*ws_x] * in[n, g*ig + i, row(y, ky), col(x, kx)].  tr = 0 (forward): row = y*sy + offy +
 * ky*dy, col = x*sx + offx + kx*dx.  tr = 1 (transposed, grad_input): row = (y + offy - ky*dy)
 * / sy where it divides, likewise col; taps outside the input read 0. */
typedef struct gconv {
  int64_t n, groups, ig, og, ih, iw, oh, ow, kh, kw;
  int64_t ws_g, ws_o, ws_i, ws_y, ws_x;
  int tr;
  int64_t sy, offy, dy, sx, offx, dx;
  int V, R, P, nv, ntile;
  int64_t pos[GC_MAXV]; /* first column of each output vector of a row */
} gconv;

typedef struct gc_item { LLVMValueRef in, w, bias, out, nb, g, o0, y; } gc_item;

/* Input column read by output column x under tap kx, or -1 (no tap / outside). */
static int64_t gc_col(const gconv *k, int64_t x, int kx) {
  if (x >= k->ow) return -1;
  int64_t c;
  if (!k->tr) {
    c = x * k->sx + k->offx + kx * k->dx;
  } else {
    int64_t num = x + k->offx - kx * k->dx;
    if (num < 0 || num % k->sx) return -1;
    c = num / k->sx;
  }
  return c >= 0 && c < k->iw ? c : -1;
}

static LLVMValueRef i32_vec(cg_ctx *c, const int *m, int w) {
  LLVMValueRef e[64];
  for (int i = 0; i < w; i++) e[i] = cg_i32(c, m[i]);
  return LLVMConstVector(e, (unsigned)w);
}

/* The V input values of output columns pos.. under tap kx from the input row starting at
 * element row; *any = 0 when no lane has a tap (nothing emitted). */
static LLVMValueRef gc_load_cols(cg_ctx *c, const gconv *k, LLVMValueRef in, LLVMValueRef row, int64_t pos, int kx, int *any) {
  int V = k->V, l0 = -1;
  int64_t src[64], lo = INT64_MAX, hi = -1;
  unsigned m = 0;
  for (int l = 0; l < V; l++) {
    src[l] = gc_col(k, pos + l, kx);
    if (src[l] < 0) continue;
    m |= 1u << l;
    if (l0 < 0) l0 = l;
    if (src[l] < lo) lo = src[l];
    if (src[l] > hi) hi = src[l];
  }
  *any = m != 0;
  if (!m) return NULL;
  /* arithmetic progression with a positive step over the valid lanes: a (strided) load */
  int64_t step = 0;
  for (int l = l0 + 1; l < V && !step; l++)
    if (src[l] >= 0) step = (src[l] - src[l0]) / (l - l0);
  if (step == 0) step = 1;
  int arith = step >= 1;
  for (int l = l0; l < V && arith; l++)
    if (src[l] >= 0 && src[l] != src[l0] + (l - l0) * step) arith = 0;
  if (arith && step <= 2) return cg_tload(c, in, cg_taddk(c, row, src[l0] - l0 * step), (int)step, m, V);
  /* else one contiguous load of [lo, hi] spread over the lanes (hi - lo < V) */
  if (hi - lo >= V) {
    LLVMValueRef v = cg_fzero(c, V);
    for (int l = 0; l < V; l++)
      if (src[l] >= 0) v = LLVMBuildInsertElement(c->b, v, cg_load_f32(c, in, cg_taddk(c, row, src[l])), cg_i32(c, l), "");
    return v;
  }
  LLVMValueRef raw = cg_tload(c, in, cg_taddk(c, row, lo), 1, cg_lanes((int)(hi - lo + 1), V), V);
  int sh[64];
  for (int l = 0; l < V; l++) sh[l] = src[l] >= 0 ? (int)(src[l] - lo) : V;
  return LLVMBuildShuffleVector(c->b, raw, cg_fzero(c, V), i32_vec(c, sh, V), "spread");
}

/* Vector positions 0, V, ... (the last one overlapping its neighbour); tile R x P by the
 * estimated FMA-port use x channel utilisation (as gen_train_conv.c's tc_layout). */
static int gc_layout(gconv *k, int budget) {
  int V = k->V;
  k->nv = (int)((k->ow + V - 1) / V);
  if (k->nv > GC_MAXV) return -1;
  for (int j = 0; j < k->nv; j++) k->pos[j] = (int64_t)j * V;
  if (k->ow >= V) k->pos[k->nv - 1] = k->ow - V;
  double best = -1;
  for (int maxp = 1; maxp <= 8 && maxp <= k->nv; maxp++) {
    int groups = cg_tgroups(k->nv, maxp), p = 0;
    for (int g = 0; g < groups; g++)
      if (cg_tgroup_size(k->nv, groups, g) > p) p = cg_tgroup_size(k->nv, groups, g);
    int r = (budget - 2) / p;
    if (r < 1) continue;
    if (r > k->og) r = (int)k->og;
    r = (int)((k->og + (k->og + r - 1) / r - 1) / ((k->og + r - 1) / r)); /* balanced tiles: 32 = 4 x 8, not 3 x 10 + 2 */
    double util = (double)k->og / (double)(((k->og + r - 1) / r) * r);
    double t = (double)(r * p > r + p ? r * p : r + p) / 2.0;
    if (t < 4.5) t = 4.5;
    double score = util * (double)(r * p) / (2.0 * t) + 0.001 * r * p;
    if (score > best) best = score, k->P = maxp, k->R = r;
  }
  if (best < 0) k->P = 1, k->R = 1;
  k->ntile = (int)((k->og + k->R - 1) / k->R);
  return 0;
}

/* Input row of output row y under tap ky: emits the validity test (builder in its "then"
 * block, close with cg_if_end) and returns the row index. */
static LLVMValueRef gc_row(cg_ctx *c, const gconv *k, LLVMValueRef y, LLVMValueRef ky, cg_if *fi) {
  if (!k->tr) {
    LLVMValueRef iy = cg_tadd(c, cg_taddk(c, cg_tmul(c, y, k->sy), k->offy), cg_tmul(c, ky, k->dy));
    cg_if_begin(c, fi, LLVMBuildICmp(c->b, LLVMIntULT, iy, cg_i64(c, k->ih), "")); /* 0 <= iy < ih */
    return iy;
  }
  LLVMValueRef num = LLVMBuildSub(c->b, cg_taddk(c, y, k->offy), cg_tmul(c, ky, k->dy), "");
  LLVMValueRef ok = LLVMBuildICmp(c->b, LLVMIntULT, num, cg_i64(c, k->ih * k->sy), "");
  if (k->sy > 1)
    ok = LLVMBuildAnd(c->b, ok, LLVMBuildICmp(c->b, LLVMIntEQ, LLVMBuildURem(c->b, num, cg_i64(c, k->sy), ""), cg_i64(c, 0), ""), "");
  cg_if_begin(c, fi, ok);
  return k->sy > 1 ? LLVMBuildUDiv(c->b, num, cg_i64(c, k->sy), "iy") : num;
}

/* One tile: rr channels from it->o0 x the np vectors of row it->y starting at vector j0. */
static void gc_tile(cg_ctx *c, const gconv *k, const gc_item *it, int rr, int j0, int np) {
  int V = k->V;
  LLVMTypeRef vt = cg_vtype(c, V);
  LLVMValueRef acc[64], cur[64];
  for (int i = 0; i < rr * np; i++) {
    acc[i] = cg_entry_alloca(c, vt, "acc");
    LLVMBuildStore(c->b, cg_fzero(c, V), acc[i]);
  }
  cg_loop KY, CI;
  LLVMValueRef ky = cg_loop_begin(c, &KY, cg_i64(c, 0), cg_i64(c, k->kh), cg_i64(c, 1), "ky");
  cg_if fi;
  LLVMValueRef iy = gc_row(c, k, it->y, ky, &fi);
  LLVMValueRef ci = cg_loop_begin(c, &CI, cg_i64(c, 0), cg_i64(c, k->ig), cg_i64(c, 1), "ci");
  LLVMValueRef plane = cg_tadd(c, cg_tmul(c, cg_tadd(c, it->nb, it->g), k->ig), ci); /* nb = n*groups */
  LLVMValueRef row = cg_tadd(c, cg_tmul(c, plane, k->ih * k->iw), cg_tmul(c, iy, k->iw));
  LLVMValueRef wrow = cg_tadd(c, cg_tadd(c, cg_tmul(c, it->g, k->ws_g), cg_tmul(c, it->o0, k->ws_o)),
                              cg_tadd(c, cg_tmul(c, ci, k->ws_i), cg_tmul(c, ky, k->ws_y)));
  for (int i = 0; i < rr * np; i++) cur[i] = LLVMBuildLoad2(c->b, vt, acc[i], "");
  for (int kx = 0; kx < k->kw; kx++) {
    LLVMValueRef xv[8];
    int has[8];
    for (int p = 0; p < np; p++) xv[p] = gc_load_cols(c, k, it->in, row, k->pos[j0 + p], kx, &has[p]);
    for (int r = 0; r < rr; r++) {
      LLVMValueRef wb = cg_splat(c, cg_load_f32(c, it->w, cg_taddk(c, wrow, (int64_t)r * k->ws_o + (int64_t)kx * k->ws_x)), V);
      for (int p = 0; p < np; p++)
        if (has[p]) cur[r * np + p] = cg_fma(c, wb, xv[p], cur[r * np + p]);
    }
  }
  for (int i = 0; i < rr * np; i++) LLVMBuildStore(c->b, cur[i], acc[i]);
  cg_loop_end(c, &CI);
  cg_if_end(c, &fi);
  cg_loop_end(c, &KY);
  LLVMValueRef oplane = cg_tadd(c, cg_tmul(c, cg_tadd(c, it->nb, it->g), k->og), it->o0);
  LLVMValueRef orow = cg_tadd(c, cg_tmul(c, oplane, k->oh * k->ow), cg_tmul(c, it->y, k->ow));
  unsigned omask = cg_lanes((int)(k->ow < V ? k->ow : V), V);
  for (int r = 0; r < rr; r++) {
    LLVMValueRef b = NULL;
    if (it->bias) b = cg_splat(c, cg_load_f32(c, it->bias, cg_taddk(c, cg_tadd(c, cg_tmul(c, it->g, k->og), it->o0), r)), V);
    for (int p = 0; p < np; p++) {
      LLVMValueRef v = LLVMBuildLoad2(c->b, vt, acc[r * np + p], "");
      if (b) v = LLVMBuildFAdd(c->b, v, b, "");
      cg_tstore(c, v, it->out, cg_taddk(c, orow, (int64_t)r * k->oh * k->ow + k->pos[j0 + p]), omask, V);
    }
  }
}

static void gc_rowtiles(cg_ctx *c, const gconv *k, const gc_item *it, int rr) {
  int groups = cg_tgroups(k->nv, k->P);
  for (int g = 0, j = 0; g < groups; g++) {
    int np = cg_tgroup_size(k->nv, groups, g);
    gc_tile(c, k, it, rr, j, np);
    j += np;
  }
}

/* Items (n, group, channel tile, y), y fastest, in contiguous ranges over the threads. */
static void gc_emit(cg_ctx *c, const gconv *k, LLVMValueRef in, LLVMValueRef w, LLVMValueRef bias, LLVMValueRef out,
                    LLVMValueRef tid, LLVMValueRef nth) {
  LLVMValueRef lo, hi;
  cg_thread_range(c, cg_i64(c, k->n * k->groups * k->ntile * k->oh), tid, nth, &lo, &hi);
  cg_loop L;
  LLVMValueRef i = cg_loop_begin(c, &L, lo, hi, cg_i64(c, 1), "item");
  gc_item it = {in, w, bias, out, NULL, NULL, NULL, NULL};
  it.y = LLVMBuildSRem(c->b, i, cg_i64(c, k->oh), "y");
  LLVMValueRef rest = LLVMBuildSDiv(c->b, i, cg_i64(c, k->oh), "");
  LLVMValueRef t = LLVMBuildSRem(c->b, rest, cg_i64(c, k->ntile), "t");
  rest = LLVMBuildSDiv(c->b, rest, cg_i64(c, k->ntile), "");
  it.g = LLVMBuildSRem(c->b, rest, cg_i64(c, k->groups), "g");
  it.nb = cg_tmul(c, LLVMBuildSDiv(c->b, rest, cg_i64(c, k->groups), "n"), k->groups);
  it.o0 = cg_tmul(c, t, k->R);
  int rem = (int)(k->og % k->R);
  if (!rem) {
    gc_rowtiles(c, k, &it, k->R);
  } else {
    cg_if f;
    cg_if_begin(c, &f, LLVMBuildICmp(c->b, LLVMIntNE, t, cg_i64(c, k->ntile - 1), ""));
    gc_rowtiles(c, k, &it, k->R);
    cg_if_else(c, &f);
    gc_rowtiles(c, k, &it, rem);
    cg_if_end(c, &f);
  }
  cg_loop_end(c, &L);
}

static const char *gc_kind(cg_ctx *c, const char *op, const ir_conv2d_attr *at, const ir_shape *xs, const gconv *k) {
  int dw = at->groups == xs->dim[1];
  return cg_kind(c, dw ? ir_fmt(c->arena, "%s_dw", op) : ir_fmt(c->arena, "%s_g%d", op, at->groups),
                 ir_fmt(c->arena, "%dx%d", k->R, k->P * k->V));
}

static int gc_check(cg_ctx *c, const ir_node *n, const ir_conv2d_attr *at, const ir_shape *xs, int64_t co) {
  if (at->groups < 1 || xs->dim[1] % at->groups || co % at->groups) {
    cg_fail(c, n, "training codegen: channels %lld -> %lld are not divisible by groups %d", (long long)xs->dim[1],
            (long long)co, at->groups);
    return -1;
  }
  return 0;
}

/* Forward grouped conv (training: weights by pointer).  in: x, w[, b]; out y. */
LLVMValueRef cg_train_gconv_fwd(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind) {
  const ir_conv2d_attr *at = &n->attr.conv2d;
  const ir_shape *xs = &c->g->values[n->in[0]].shape, *ys = &c->g->values[n->out].shape;
  if (gc_check(c, n, at, xs, ys->dim[1])) return NULL;
  int64_t G = at->groups, khw = (int64_t)at->kernel[0] * at->kernel[1], ig = xs->dim[1] / G, og = ys->dim[1] / G;
  gconv k = {xs->dim[0], G, ig, og, xs->dim[2], xs->dim[3], ys->dim[2], ys->dim[3], at->kernel[0], at->kernel[1],
             og * ig * khw, ig * khw, khw, at->kernel[1], 1,
             0, at->stride[0], -at->pad[0], at->dilation[0], at->stride[1], -at->pad[1], at->dilation[1],
             c->target->vec_f32, 0, 0, 0, 0, {0}};
  if (gc_layout(&k, cg_acc_budget(c->target)) < 0) return cg_fail(c, n, "training codegen: conv output rows wider than %d vectors", GC_MAXV);
  int nin = n->n_in;
  LLVMValueRef a[6];
  LLVMValueRef f = cg_train_kbegin(c, fn_name, nin, a);
  gc_emit(c, &k, a[0], a[1], nin > 2 ? a[2] : NULL, a[nin], a[nin + 1], a[nin + 2]);
  cg_kernel_end(c);
  *kind = gc_kind(c, "conv2d_train", at, xs, &k);
  return f;
}

/* in: dy [N,Co,OH,OW], w [Co,Ci/G,KH,KW]; out dx [N,Ci,H,W]: per group the transposed conv
 * dx[y, x] = sum_{o, ky, kx} w[o, i, ky, kx] * dy[(y + pt - ky*dh) / sh, (x + pl - kx*dw) / sw]
 * over the taps that divide. */
LLVMValueRef cg_train_gconv_grad_input(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind) {
  const ir_conv2d_attr *at = &n->attr.conv2d_grad_input.conv;
  const ir_shape *ds = &c->g->values[n->in[0]].shape, *xs = &c->g->values[n->out].shape;
  if (gc_check(c, n, at, xs, ds->dim[1])) return NULL;
  int64_t G = at->groups, khw = (int64_t)at->kernel[0] * at->kernel[1], cig = xs->dim[1] / G, cog = ds->dim[1] / G;
  gconv k = {ds->dim[0], G, cog, cig, ds->dim[2], ds->dim[3], xs->dim[2], xs->dim[3], at->kernel[0], at->kernel[1],
             cog * cig * khw, khw, cig * khw, at->kernel[1], 1,
             1, at->stride[0], at->pad[0], at->dilation[0], at->stride[1], at->pad[1], at->dilation[1],
             c->target->vec_f32, 0, 0, 0, 0, {0}};
  if (gc_layout(&k, cg_acc_budget(c->target)) < 0) return cg_fail(c, n, "training codegen: conv input rows wider than %d vectors", GC_MAXV);
  LLVMValueRef a[5];
  LLVMValueRef f = cg_train_kbegin(c, fn_name, 2, a);
  gc_emit(c, &k, a[0], a[1], NULL, a[2], a[3], a[4]);
  cg_kernel_end(c);
  *kind = gc_kind(c, "conv2d_grad_input", at, xs, &k);
  return f;
}

/* ---- grad_weight ------------------------------------------------------------------------ */
typedef struct gwg {
  int64_t n, groups, ig, og, ih, iw, oh, ow, kh, kw, sh, sw, pt, pl, dh, dw;
  int V, RW, KC, nkc, ntile;
} gwg;

/* dw[(g*og + o0 + r), ci, ky, kx] = the horizontal sum of the lane partials v. */
static void gwg_store(cg_ctx *c, const gwg *k, LLVMValueRef dw, LLVMValueRef g, LLVMValueRef o0, LLVMValueRef ci, int r,
                      int64_t ky, int64_t kx, LLVMValueRef v) {
  LLVMValueRef co = cg_taddk(c, cg_tadd(c, cg_tmul(c, g, k->og), o0), r);
  LLVMValueRef wi = cg_tmul(c, cg_tadd(c, cg_tmul(c, co, k->ig), ci), k->kh * k->kw);
  cg_store_f32(c, v ? cg_hsum(c, v, k->V) : cg_f32(c, 0.0f), dw, cg_taddk(c, wi, ky * k->kw + kx));
}

typedef struct gwg_st { const gwg *k; LLVMValueRef dw, g, o0, ci; LLVMTypeRef vt; } gwg_st;

static void gwg_reg_store(cg_ctx *c, void *user, int r, int64_t ky, int64_t kx, LLVMValueRef reg) {
  const gwg_st *u = user;
  gwg_store(c, u->k, u->dw, u->g, u->o0, u->ci, r, ky, kx, LLVMBuildLoad2(c->b, u->vt, reg, ""));
}

/* dw[g*og + o, i, ky, kx] for the rr channels o0.. of group g and input channel i of the
 * group: stack partials acc[ky][kx chunk][r][k] (vectors, 16-bit with half partials:
 * cg_half_partials.h) between images, summed over (n, oy, ox); after the last image each
 * weight's lanes go straight from registers to one horizontal sum (not rounded). */
static void gwg_tile(cg_ctx *c, const gwg *k, LLVMValueRef dy, LLVMValueRef x, LLVMValueRef dw, LLVMValueRef g,
                     LLVMValueRef o0, LLVMValueRef ci, LLVMValueRef stack, int rr) {
  int V = k->V, per = rr * k->KC;
  LLVMTypeRef vt = cg_vtype(c, V), pt = cg_partial_vtype(c, V);
  LLVMValueRef reg[64];
  for (int i = 0; i < per; i++) reg[i] = cg_entry_alloca(c, vt, "wa");
  int64_t slots = k->kh * k->nkc * per;
  for (int64_t s = 0; s < slots; s++) {
    LLVMValueRef si = cg_i64(c, s);
    LLVMBuildStore(c->b, LLVMConstNull(pt), LLVMBuildInBoundsGEP2(c->b, pt, stack, &si, 1, ""));
  }
  cg_loop NB;
  LLVMValueRef nb = cg_loop_begin(c, &NB, cg_i64(c, 0), cg_i64(c, k->n), cg_i64(c, 1), "n");
  LLVMValueRef last = LLVMBuildICmp(c->b, LLVMIntEQ, nb, cg_i64(c, k->n - 1), "last_image");
  LLVMValueRef ng = cg_tadd(c, cg_tmul(c, nb, k->groups), g);
  LLVMValueRef xplane = cg_tmul(c, cg_tadd(c, cg_tmul(c, ng, k->ig), ci), k->ih * k->iw);
  LLVMValueRef dplane = cg_tmul(c, cg_tadd(c, cg_tmul(c, ng, k->og), o0), k->oh * k->ow);
  gwg_st st = {k, dw, g, o0, ci, vt};
  cg_tgw t = {k->oh, k->ow, k->ih, k->iw, k->kh, k->kw, k->sh, k->sw, k->pt, k->pl, k->dh, k->dw, V, k->KC, k->nkc};
  cg_tgw_ops ops = {dy, x, dplane, xplane, stack, last, NULL, 0, gwg_reg_store, &st};
  cg_tgw_taps(c, &t, &ops, reg, rr);
  cg_loop_end(c, &NB);
  for (int64_t ky = 0; ky < k->kh; ky++) { /* taps no output row reaches: dw = 0 (the sum of the zeroed lanes) */
    if (!cg_tgw_tap_empty(&t, ky)) continue;
    for (int r = 0; r < rr; r++)
      for (int64_t kx = 0; kx < k->kw; kx++) gwg_store(c, k, dw, g, o0, ci, r, ky, kx, NULL);
  }
}

/* in: dy [N,Co,OH,OW], x [N,Ci,H,W]; out dw [Co,Ci/G,KH,KW].  Items (group, channel tile,
 * input channel of the group), input channel fastest; contiguous ranges over the threads. */
LLVMValueRef cg_train_gconv_grad_weight(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind) {
  const ir_conv2d_attr *at = &n->attr.conv2d_grad_weight.conv;
  const ir_shape *ds = &c->g->values[n->in[0]].shape, *xs = &c->g->values[n->in[1]].shape;
  if (gc_check(c, n, at, xs, ds->dim[1])) return NULL;
  int64_t G = at->groups;
  int budget = cg_acc_budget(c->target);
  gwg k = {xs->dim[0], G, xs->dim[1] / G, ds->dim[1] / G, xs->dim[2], xs->dim[3], ds->dim[2], ds->dim[3], at->kernel[0],
           at->kernel[1], at->stride[0], at->stride[1], at->pad[0], at->pad[1], at->dilation[0], at->dilation[1],
           c->target->vec_f32, 0, 0, 0, 0};
  int regs = budget * 4 / 3, kcmax = (regs - 4) / 2;
  k.KC = (int)(k.kw < kcmax ? k.kw : kcmax);
  k.nkc = (int)((k.kw + k.KC - 1) / k.KC);
  /* live: RW*KC accumulators, RW dy vectors, one x vector and up to two masks */
  int rw = (regs - 3) / (k.KC + 1);
  if (rw < 1) rw = 1;
  if (rw > 16) rw = 16;
  if (rw > k.og) rw = (int)k.og;
  k.ntile = (int)((k.og + rw - 1) / rw);
  k.RW = (int)((k.og + k.ntile - 1) / k.ntile); /* balanced tiles */
  LLVMValueRef a[5];
  LLVMValueRef f = cg_train_kbegin(c, fn_name, 2, a);
  int64_t slots = k.kh * k.nkc * k.RW * k.KC;
  LLVMValueRef stack = cg_entry_alloca(c, LLVMArrayType(cg_partial_vtype(c, k.V), (unsigned)slots), "wacc");
  cg_partial_note(c, n, slots, k.V);
  LLVMValueRef lo, hi;
  cg_thread_range(c, cg_i64(c, G * k.ntile * k.ig), a[3], a[4], &lo, &hi);
  cg_loop L;
  LLVMValueRef it = cg_loop_begin(c, &L, lo, hi, cg_i64(c, 1), "item");
  LLVMValueRef ci = LLVMBuildSRem(c->b, it, cg_i64(c, k.ig), "ci"), rest = LLVMBuildSDiv(c->b, it, cg_i64(c, k.ig), "");
  LLVMValueRef t = LLVMBuildSRem(c->b, rest, cg_i64(c, k.ntile), "t"), g = LLVMBuildSDiv(c->b, rest, cg_i64(c, k.ntile), "g");
  LLVMValueRef o0 = cg_tmul(c, t, k.RW);
  int rem = (int)(k.og - (int64_t)(k.ntile - 1) * k.RW);
  if (rem == k.RW) {
    gwg_tile(c, &k, a[0], a[1], a[2], g, o0, ci, stack, k.RW);
  } else {
    cg_if fi;
    cg_if_begin(c, &fi, LLVMBuildICmp(c->b, LLVMIntNE, t, cg_i64(c, k.ntile - 1), ""));
    gwg_tile(c, &k, a[0], a[1], a[2], g, o0, ci, stack, k.RW);
    cg_if_else(c, &fi);
    gwg_tile(c, &k, a[0], a[1], a[2], g, o0, ci, stack, rem);
    cg_if_end(c, &fi);
  }
  cg_loop_end(c, &L);
  cg_kernel_end(c);
  const char *op = at->groups == xs->dim[1] ? "conv2d_grad_weight_dw" : ir_fmt(c->arena, "conv2d_grad_weight_g%d", at->groups);
  *kind = cg_kind(c, op, ir_fmt(c->arena, "%dx%d", k.RW, k.KC));
  return f;
}
