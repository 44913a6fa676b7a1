/* gen_train_conv.c — register-tiled conv2d kernels of compiled training (groups 1, NCHW,
 * weights [Co,Ci,KH,KW] read through the state-buffer pointer, no packing):
 *  - forward and stride-1 grad_input share one direct-convolution microkernel: a tile of R
 *    output channels x P vectors of V output pixels of one output row; per (ky, input channel,
 *    kx) it loads P pixel vectors (compile-time lane masks at the row borders, the last vector
 *    overlaps the previous one instead of being partial), broadcasts R weights (any weight
 *    strides: grad_input reads w transposed, taps mirrored) and issues R*P fmuladds.
 *  - grad_weight: a reduction over (n, oy, ox) per tile of RW output channels x KW taps of one
 *    (ci, ky) in vector accumulators (dy vectors reused over the taps, x vectors over the
 *    channels), kept in a stack array between images, one horizontal sum per weight at the end;
 *    work items are (output-channel tile, input-channel block) so dy stays in L1 per image.
 *    1x1 stride-1 unpadded convs: a GEMM over the flat planes with 4x3 register sub-tiles of
 *    8x12 channel blocks, per image and pixel chunk (g1_*).
 *  - grad_input with stride > 1 where the packed phases of gen_train_pconv.c do not apply: one
 *    stride-1 conv per output phase (iy mod sh, ix mod sw) with the sub-kernel of the taps that
 *    reach it, through the same microkernel (the tile's transposed weights packed per thread,
 *    items tile-major), stored to the phase's sub-grid of dx.
 * Every output element is written by one work item (static contiguous ranges over tid), so
 * results do not depend on the thread count. */
#include <stdlib.h>

#include "codegen/cg_half_partials.h"
#include "codegen/gen_train.h"
#include "codegen/gen_train_pgw.h"
#include "codegen/gen_train_wino.h"

/* ---- direct convolution: out[n, o, oy, ox] = bias[o] + sum_{i, ky, kx} w(o, i, ky, kx) *
 * in[n, i, oy*sh + ty0 + ky*tdy, ox*sw + tx0 + kx*tdx] (taps outside the input read 0). ---- */
#define TC_MAXV 256
typedef struct tconv {
  int64_t n, ci, ih, iw, co, oh, ow;
  int64_t kh, kw, sh, sw, ty0, tdy, tx0, tdx;
  int64_t ws_o, ws_i, ws_y, ws_x; /* weight (o, i, ky, kx) at o*ws_o + i*ws_i + ky*ws_y + kx*ws_x */
  int V, R, P, nv, ntile;
  int64_t pos[TC_MAXV];             /* first column of each output vector of a row */
  /* Where the output lives (0: dense [n, co, oh, ow], set by tc_layout): out[n, o, oy, ox] at
   * (n*co + o)*o_plane + oy*o_row + ox*o_col + o_off; weights at w0 + the offsets above. */
  int64_t o_plane, o_row, o_col, o_off, w0;
} tconv;

/* wo: the weight offset of the tile's first channel (NULL: o0*ws_o; packed phases: 0) */
typedef struct tc_item { LLVMValueRef in, w, bias, out, nb, o0, oy, wo; } tc_item;

static unsigned tc_in_mask(const tconv *k, int64_t pos, int kx);

/* Distinct partial lane masks the vectors [j0, j0 + np) load with (each keeps a register). */
static int tc_masks(const tconv *k, int j0, int np) {
  unsigned seen[64];
  int n = 0;
  for (int p = 0; p < np; p++)
    for (int kx = 0; kx < k->kw; kx++) {
      unsigned m = tc_in_mask(k, k->pos[j0 + p], kx);
      if (!m || m == cg_lanes(k->V, k->V)) continue;
      int dup = 0;
      for (int i = 0; i < n; i++) dup |= seen[i] == m;
      if (!dup && n < 64) seen[n++] = m;
    }
  return n;
}

/* Vector positions of a row: 0, V, 2V, ..., the last one ending at ow (overlapping its
 * neighbour) so that only rows narrower than V need masked stores.  Tile: groups of P
 * vectors x R channels, R*P accumulators plus the group's mask registers within the budget
 * (a spilled accumulator costs a store-forwarding round trip per FMA); the best of P = 1..4
 * by estimated FMA-port use x channel utilisation, larger tiles on ties. */
static int tc_layout(tconv *k, int budget) {
  int V = k->V;
  if (!k->o_col) k->o_plane = k->oh * k->ow, k->o_row = k->ow, k->o_col = 1, k->o_off = 0;
  k->nv = (int)((k->ow + V - 1) / V);
  if (k->nv > TC_MAXV) return -1;
  for (int j = 0; j < k->nv; j++) k->pos[j] = (int64_t)j * V;
  if (k->ow >= V) k->pos[k->nv - 1] = k->ow - V;
  double best = -1;
  for (int maxp = 1; maxp <= 4 && maxp <= k->nv; maxp++) {
    int groups = cg_tgroups(k->nv, maxp), p = cg_tgroup_size(k->nv, groups, groups - 1), masks = 0;
    for (int g = 0, j = 0; g < groups; j += cg_tgroup_size(k->nv, groups, g), g++) {
      int mg = tc_masks(k, j, cg_tgroup_size(k->nv, groups, g));
      if (mg > masks) masks = mg;
      if (cg_tgroup_size(k->nv, groups, g) > p) p = cg_tgroup_size(k->nv, groups, g);
    }
    int r = (budget - (masks < 4 ? masks : 4)) / p;
    if (r < 1) r = 1;
    if (r > k->co) r = (int)k->co;
    double util = (double)k->co / (double)(((k->co + r - 1) / r) * r);
    /* cycles per tap: r*p FMAs and r + p loads at two per cycle each, and at least the FMA
     * latency (4, plus jitter) since every accumulator gets one FMA per tap (measured on
     * fmnist_cnn's 28-wide conv: 5x16 beats 2x32 by ~12 %) */
    double t = (double)(r * p > r + p ? r * p : r + p) / 2.0;
    if (t < 4.5) t = 4.5;
    double score = util * (double)(r * p) / (2.0 * t) + 0.001 * r * p;
    if (score > best) best = score, k->P = maxp, k->R = r;
  }
  k->ntile = (int)((k->co + k->R - 1) / k->R);
  return 0;
}

/* Lanes of the vector at column pos whose output pixel exists and whose tap kx reads a real
 * input column. */
static unsigned tc_in_mask(const tconv *k, int64_t pos, int kx) {
  unsigned m = 0;
  for (int l = 0; l < k->V; l++) {
    int64_t ix = (pos + l) * k->sw + k->tx0 + (int64_t)kx * k->tdx;
    if (pos + l < k->ow && ix >= 0 && ix < k->iw) m |= 1u << l;
  }
  return m;
}

/* One tile: rr channels from it->o0 x the np vectors of row it->oy starting at vector j0. */
static void tc_tile(cg_ctx *c, const tconv *k, const tc_item *it, int rr, int j0, int np) {
  int V = k->V;
  LLVMTypeRef vt = cg_vtype(c, V);
  LLVMValueRef acc[64], cur[64];
  for (int i = 0; i < rr * np; i++) {
    acc[i] = cg_entry_alloca(c, vt, "acc");
    LLVMBuildStore(c->b, cg_fzero(c, V), acc[i]);
  }
  cg_loop KY, CI;
  LLVMValueRef ky = cg_loop_begin(c, &KY, cg_i64(c, 0), cg_i64(c, k->kh), cg_i64(c, 1), "ky");
  LLVMValueRef iy = cg_tadd(c, cg_taddk(c, cg_tmul(c, it->oy, k->sh), k->ty0), cg_tmul(c, ky, k->tdy));
  cg_if fi;
  cg_if_begin(c, &fi, LLVMBuildICmp(c->b, LLVMIntULT, iy, cg_i64(c, k->ih), "")); /* 0 <= iy < ih */
  LLVMValueRef ci = cg_loop_begin(c, &CI, cg_i64(c, 0), cg_i64(c, k->ci), cg_i64(c, 1), "ci");
  LLVMValueRef row = cg_tadd(c, cg_tmul(c, cg_tadd(c, cg_tmul(c, it->nb, k->ci), ci), k->ih * k->iw), cg_tmul(c, iy, k->iw));
  LLVMValueRef wrow = cg_tadd(c, cg_tadd(c, it->wo ? it->wo : cg_tmul(c, it->o0, k->ws_o), cg_tmul(c, ci, k->ws_i)), cg_tmul(c, ky, k->ws_y));
  wrow = cg_taddk(c, wrow, k->w0);
  for (int i = 0; i < rr * np; i++) cur[i] = LLVMBuildLoad2(c->b, vt, acc[i], "");
  for (int kx = 0; kx < k->kw; kx++) {
    LLVMValueRef xv[4];
    unsigned ms[4];
    for (int p = 0; p < np; p++) {
      int64_t pos = k->pos[j0 + p];
      ms[p] = tc_in_mask(k, pos, kx);
      if (ms[p]) xv[p] = cg_tload(c, it->in, cg_taddk(c, row, pos * k->sw + k->tx0 + (int64_t)kx * k->tdx), (int)k->sw, ms[p], V);
    }
    for (int r = 0; r < rr; r++) {
      LLVMValueRef wb = cg_splat(c, cg_load_f32(c, it->w, cg_taddk(c, wrow, (int64_t)r * k->ws_o + (int64_t)kx * k->ws_x)), V);
      for (int p = 0; p < np; p++)
        if (ms[p]) cur[r * np + p] = cg_fma(c, wb, xv[p], cur[r * np + p]);
    }
  }
  for (int i = 0; i < rr * np; i++) LLVMBuildStore(c->b, cur[i], acc[i]);
  cg_loop_end(c, &CI);
  cg_if_end(c, &fi);
  cg_loop_end(c, &KY);
  LLVMValueRef orow = cg_tadd(c, cg_tmul(c, cg_tadd(c, cg_tmul(c, it->nb, k->co), it->o0), k->o_plane), cg_tmul(c, it->oy, k->o_row));
  orow = cg_taddk(c, orow, k->o_off);
  unsigned omask = cg_lanes((int)(k->ow < V ? k->ow : V), V);
  for (int r = 0; r < rr; r++) {
    LLVMValueRef b = it->bias ? cg_splat(c, cg_load_f32(c, it->bias, cg_taddk(c, it->o0, r)), V) : NULL;
    for (int p = 0; p < np; p++) {
      LLVMValueRef v = LLVMBuildLoad2(c->b, vt, acc[r * np + p], "");
      if (b) v = LLVMBuildFAdd(c->b, v, b, "");
      LLVMValueRef oi = cg_taddk(c, orow, (int64_t)r * k->o_plane + k->pos[j0 + p] * k->o_col);
      if (k->o_col == 1) {
        cg_tstore(c, v, it->out, oi, omask, V);
        continue;
      }
      for (int l = 0; l < V; l++) /* a sub-grid of the output: one lane at a time */
        if (omask >> l & 1) cg_store_f32(c, LLVMBuildExtractElement(c->b, v, cg_i32(c, l), ""), it->out, cg_taddk(c, oi, l * k->o_col));
    }
  }
}

/* Every vector group of the row for rr channels. */
static void tc_row(cg_ctx *c, const tconv *k, const tc_item *it, int rr) {
  int groups = cg_tgroups(k->nv, k->P);
  for (int g = 0, j = 0; g < groups; g++) {
    int np = cg_tgroup_size(k->nv, groups, g);
    tc_tile(c, k, it, rr, j, np);
    j += np;
  }
}

/* Emits the kernel body: items (n, channel tile, oy), oy fastest (consecutive items reuse the
 * tile's weights), split in contiguous ranges over the threads. */
static void tc_emit(cg_ctx *c, const tconv *k, LLVMValueRef in, LLVMValueRef w, LLVMValueRef bias, LLVMValueRef out,
                    LLVMValueRef tid, LLVMValueRef nth) {
  LLVMValueRef lo, hi;
  cg_thread_range(c, cg_i64(c, k->n * k->ntile * k->oh), tid, nth, &lo, &hi);
  cg_loop L;
  LLVMValueRef i = cg_loop_begin(c, &L, lo, hi, cg_i64(c, 1), "item");
  tc_item it = {in, w, bias, out, NULL, NULL, NULL};
  it.oy = LLVMBuildSRem(c->b, i, cg_i64(c, k->oh), "oy");
  LLVMValueRef rest = LLVMBuildSDiv(c->b, i, cg_i64(c, k->oh), "");
  LLVMValueRef t = LLVMBuildSRem(c->b, rest, cg_i64(c, k->ntile), "t");
  it.nb = LLVMBuildSDiv(c->b, rest, cg_i64(c, k->ntile), "nb");
  it.o0 = cg_tmul(c, t, k->R);
  int rem = (int)(k->co % k->R);
  if (!rem) {
    tc_row(c, k, &it, k->R);
  } else {
    cg_if f;
    cg_if_begin(c, &f, LLVMBuildICmp(c->b, LLVMIntNE, t, cg_i64(c, k->ntile - 1), ""));
    tc_row(c, k, &it, k->R);
    cg_if_else(c, &f);
    tc_row(c, k, &it, rem);
    cg_if_end(c, &f);
  }
  cg_loop_end(c, &L);
}

/* Strided grad_input phases read w transposed (a tile's R channels ws_o = taps apart, each dy
 * channel Ci*taps further: R scattered broadcasts per tap, the tile's weights re-read from L2
 * by every row item).  Here each thread packs the tile it is about to run into a stack buffer
 * [ci][ky][kx][R] and the items run tile-major (tile, image, row): one pack per tile and
 * thread, the broadcasts then sequential.  Same loads and FMA order as tc_emit, so the same
 * bits.  buf: the kernel's one buffer of buf_floats shared by its phases (NULL: none); returns
 * 0 (nothing emitted) when the phase does not fit it or reads no tap. */
#define TC_PACK_MAX_BYTES (1 << 20)
#define TC_PACK_MAX_DY_BYTES (2 << 20)
static int tc_emit_packed(cg_ctx *c, const tconv *k, LLVMValueRef buf, int64_t buf_floats, LLVMValueRef in, LLVMValueRef w,
                          LLVMValueRef out, LLVMValueRef tid, LLVMValueRef nth) {
  int64_t taps = k->kh * k->kw, fl = k->ci * taps * k->R;
  if (!buf || taps == 0 || fl > buf_floats) return 0;
  tconv kp = *k;
  kp.ws_o = 1, kp.ws_i = taps * k->R, kp.ws_y = k->kw * k->R, kp.ws_x = k->R, kp.w0 = 0;
  LLVMValueRef key = cg_entry_alloca(c, c->t_i64, "wph_tile");
  LLVMBuildStore(c->b, cg_i64(c, -1), key);
  LLVMValueRef lo, hi;
  cg_thread_range(c, cg_i64(c, k->n * k->ntile * k->oh), tid, nth, &lo, &hi);
  cg_loop L, CI, RR;
  LLVMValueRef i = cg_loop_begin(c, &L, lo, hi, cg_i64(c, 1), "item");
  LLVMValueRef t = LLVMBuildSDiv(c->b, i, cg_i64(c, k->n * k->oh), "t"), rest = LLVMBuildSRem(c->b, i, cg_i64(c, k->n * k->oh), "");
  tc_item it = {in, buf, NULL, out, NULL, NULL, NULL, cg_i64(c, 0)};
  it.nb = LLVMBuildSDiv(c->b, rest, cg_i64(c, k->oh), "nb");
  it.oy = LLVMBuildSRem(c->b, rest, cg_i64(c, k->oh), "oy");
  it.o0 = cg_tmul(c, t, k->R);
  cg_if fp;
  cg_if_begin(c, &fp, LLVMBuildICmp(c->b, LLVMIntNE, LLVMBuildLoad2(c->b, c->t_i64, key, ""), t, ""));
  LLVMValueRef nv = cg_min64(c, cg_i64(c, k->R), LLVMBuildSub(c->b, cg_i64(c, k->co), it.o0, "")); /* valid channels */
  LLVMValueRef ci = cg_loop_begin(c, &CI, cg_i64(c, 0), cg_i64(c, k->ci), cg_i64(c, 1), "pci");
  LLVMValueRef r = cg_loop_begin(c, &RR, cg_i64(c, 0), nv, cg_i64(c, 1), "pr");
  LLVMValueRef src = cg_taddk(c, cg_tadd(c, cg_tmul(c, cg_tadd(c, it.o0, r), k->ws_o), cg_tmul(c, ci, k->ws_i)), k->w0);
  LLVMValueRef dst = cg_tadd(c, cg_tmul(c, ci, taps * k->R), r);
  for (int64_t ky = 0; ky < k->kh; ky++)
    for (int64_t kx = 0; kx < k->kw; kx++)
      cg_store_f32(c, cg_load_f32(c, w, cg_taddk(c, src, ky * k->ws_y + kx * k->ws_x)), buf, cg_taddk(c, dst, (ky * k->kw + kx) * k->R));
  cg_loop_end(c, &RR);
  cg_loop_end(c, &CI);
  LLVMBuildStore(c->b, t, key);
  cg_if_end(c, &fp);
  int rem = (int)(k->co % k->R);
  if (!rem) {
    tc_row(c, &kp, &it, k->R);
  } else {
    cg_if f;
    cg_if_begin(c, &f, LLVMBuildICmp(c->b, LLVMIntNE, t, cg_i64(c, k->ntile - 1), ""));
    tc_row(c, &kp, &it, k->R);
    cg_if_else(c, &f);
    tc_row(c, &kp, &it, rem);
    cg_if_end(c, &f);
  }
  cg_loop_end(c, &L);
  return 1;
}

static const char *tc_kind(cg_ctx *c, const char *op, const tconv *k) {
  return cg_kind(c, op, ir_fmt(c->arena, "%dx%d", k->R, k->P * k->V));
}

/* Forward conv (training: weights by pointer).  in: x, w[, b]; out y. */
/* The direct route of the training forward conv (kernels.def, after grouped, wino, packed). */
LLVMValueRef cg_train_conv_direct_fwd(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind) {
  const ir_conv2d_attr *at = &n->attr.conv2d;
  const ir_shape *xs = &c->g->values[n->in[0]].shape, *ys = &c->g->values[n->out].shape;
  tconv k = {xs->dim[0], xs->dim[1], xs->dim[2], xs->dim[3], ys->dim[1], ys->dim[2], ys->dim[3],
             at->kernel[0], at->kernel[1], at->stride[0], at->stride[1], -at->pad[0], at->dilation[0], -at->pad[1], at->dilation[1],
             xs->dim[1] * at->kernel[0] * at->kernel[1], at->kernel[0] * at->kernel[1], at->kernel[1], 1,
             c->target->vec_f32, 0, 0, 0, 0, {0}};
  if (tc_layout(&k, cg_acc_budget(c->target)) < 0) return cg_fail(c, n, "training codegen: conv output rows wider than %d vectors", TC_MAXV);
  int nin = n->n_in;
  LLVMValueRef a[6];
  LLVMValueRef f = cg_train_kbegin(c, fn_name, nin, a);
  tc_emit(c, &k, a[0], a[1], nin > 2 ? a[2] : NULL, a[nin], a[nin + 1], a[nin + 2]);
  cg_kernel_end(c);
  *kind = tc_kind(c, "conv2d_train", &k);
  return f;
}

/* ---- grad_input ------------------------------------------------------------------------- */
/* Taps of one axis that reach output phase p (input coordinates i = p + s*q) of a stride-s
 * conv with padding pad and dilation d: i = o*s - pad + t*d, so t reaches the phase when
 * (p + pad - t*d) mod s == 0 — every s/gcd(s, d)-th tap from t0.  Returns their number; *t0,
 * *step and *o0 (o = q + o0 for tap t0; each further tap moves o by *od) describe them. */
static int64_t phase_taps(int64_t K, int64_t s, int64_t d, int64_t pad, int64_t p, int64_t *t0, int64_t *step, int64_t *o0,
                          int64_t *od) {
  int64_t cnt = 0;
  *t0 = 0, *step = 1;
  for (int64_t t = 0; t < K; t++)
    if (((p + pad - t * d) % s + s) % s == 0) {
      if (cnt == 0) *t0 = t;
      if (cnt == 1) *step = t - *t0;
      cnt++;
    }
  *o0 = (p + pad - *t0 * d) / s; /* exact */
  *od = -(*step * d) / s;
  return cnt;
}

/* Stride > 1 as sh*sw dense stride-1 convs, one per output phase (iy mod sh, ix mod sw): the
 * phase's pixels form a sub-grid of dx, each gathers dy through the sub-kernel of the taps
 * that reach it (mirrored, w transposed) with the direct-conv microkernel; a phase no tap
 * reaches (1x1 stride 2: three of four) gets zeros.  The phases write disjoint pixels, each
 * split over the threads on its own.  Returns the tile of the first phase for the name. */
static const char *strided_grad_input(cg_ctx *c, const ir_node *n, const ir_conv2d_attr *at, const ir_shape *ds,
                                      const ir_shape *xs, LLVMValueRef *a) {
  int64_t H = xs->dim[2], W = xs->dim[3], KH = at->kernel[0], KW = at->kernel[1], khw = KH * KW;
  const char *tile = NULL;
  /* one packing buffer for all phases: a phase reads at most KH*KW taps of R <= the
   * accumulator budget channels per dy channel */
  int64_t buf_floats = ds->dim[1] * khw * cg_acc_budget(c->target);
  LLVMValueRef buf = NULL;
  /* tile-major items stream the whole batch's dy once per tile: only where it stays in cache
   * (ResNet-50 b16: layer4's 3x3 stride-2, dy 1.6 MB, 1.85x; with dy 3.2-26 MB, layer2/3's
   * 3x3 and downsample convs, 1.6-4x slower, layer4's downsample (6.4 MB) unchanged) */
  int64_t dy_bytes = 4 * ds->dim[0] * ds->dim[1] * ds->dim[2] * ds->dim[3];
  if (buf_floats * 4 <= TC_PACK_MAX_BYTES && dy_bytes <= TC_PACK_MAX_DY_BYTES && cg_tune(c)->train_phase_pack) {
    int V = c->target->vec_f32;
    buf = cg_entry_alloca(c, LLVMArrayType2(cg_vtype(c, V), (uint64_t)((buf_floats + V - 1) / V)), "wph");
    LLVMSetAlignment(buf, 64);
  }
  for (int64_t py = 0; py < at->stride[0] && py < H; py++)
    for (int64_t px = 0; px < at->stride[1] && px < W; px++) {
      int64_t ky0, sy, oy0, ody, kx0, sx, ox0, odx;
      int64_t nky = phase_taps(KH, at->stride[0], at->dilation[0], at->pad[0], py, &ky0, &sy, &oy0, &ody);
      int64_t nkx = phase_taps(KW, at->stride[1], at->dilation[1], at->pad[1], px, &kx0, &sx, &ox0, &odx);
      if (!nky || !nkx) nky = nkx = 0; /* zeros */
      tconv k = {ds->dim[0], ds->dim[1], ds->dim[2], ds->dim[3], xs->dim[1], (H - py + at->stride[0] - 1) / at->stride[0],
                 (W - px + at->stride[1] - 1) / at->stride[1], nky, nkx, 1, 1, oy0, ody, ox0, odx,
                 khw, xs->dim[1] * khw, sy * KW, sx, c->target->vec_f32, 0, 0, 0, 0, {0},
                 H * W, at->stride[0] * W, at->stride[1], py * W + px, ky0 * KW + kx0};
      if (tc_layout(&k, cg_acc_budget(c->target)) < 0) {
        cg_fail(c, n, "training codegen: conv input rows wider than %d vectors", TC_MAXV);
        return NULL;
      }
      if (!tc_emit_packed(c, &k, buf, buf_floats, a[0], a[1], a[2], a[3], a[4]))
        tc_emit(c, &k, a[0], a[1], NULL, a[2], a[3], a[4]);
      if (!tile) tile = ir_fmt(c->arena, "ph%dx%d", k.R, k.P * k.V);
    }
  return tile;
}

/* in: dy [N,Co,OH,OW], w [Co,Ci,KH,KW]; out dx [N,Ci,H,W].  Stride 1: the direct conv of dy
 * with w transposed and the taps mirrored: dx[y, x] = sum dy[y + pt - ky*dh, x + pl - kx*dw] *
 * w[co, ci, ky, kx]. */
LLVMValueRef cg_train_conv_direct_grad_input(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind) {
  const ir_conv2d_attr *at = &n->attr.conv2d_grad_input.conv;
  const ir_shape *ds = &c->g->values[n->in[0]].shape, *xs = &c->g->values[n->out].shape;
  LLVMValueRef a[5];
  LLVMValueRef f = cg_train_kbegin(c, fn_name, 2, a);
  if (at->stride[0] != 1 || at->stride[1] != 1) {
    const char *tile = strided_grad_input(c, n, at, ds, xs, a);
    if (!tile) return NULL;
    cg_kernel_end(c);
    *kind = cg_kind(c, "conv2d_grad_input", tile);
    return f;
  }
  int64_t khw = (int64_t)at->kernel[0] * at->kernel[1];
  tconv k = {ds->dim[0], ds->dim[1], ds->dim[2], ds->dim[3], xs->dim[1], xs->dim[2], xs->dim[3],
             at->kernel[0], at->kernel[1], 1, 1, at->pad[0], -at->dilation[0], at->pad[1], -at->dilation[1],
             khw, xs->dim[1] * khw, at->kernel[1], 1, c->target->vec_f32, 0, 0, 0, 0, {0}};
  if (tc_layout(&k, cg_acc_budget(c->target)) < 0) return cg_fail(c, n, "training codegen: conv input rows wider than %d vectors", TC_MAXV);
  tc_emit(c, &k, a[0], a[1], NULL, a[2], a[3], a[4]);
  cg_kernel_end(c);
  *kind = tc_kind(c, "conv2d_grad_input", &k);
  return f;
}

/* ---- grad_weight ------------------------------------------------------------------------ */
typedef struct twg {
  int64_t n, ci, ih, iw, co, oh, ow, kh, kw, sh, sw, pt, pl, dh, dw;
  int V, RW, KC, nkc, CB, ntile, nblk, nacc; /* RW channels x KC taps per accumulator set */
} twg;

typedef struct twg_st { const twg *k; LLVMValueRef dw, co0, ci0, cl; LLVMTypeRef vt; } twg_st;

/* dw[co0 + r, ci0 + cl, ky, kx] = the horizontal sum of the lanes of accumulator reg. */
static void twg_store(cg_ctx *c, void *user, int r, int64_t ky, int64_t kx, LLVMValueRef reg) {
  const twg_st *u = user;
  const twg *k = u->k;
  LLVMValueRef wi = cg_tmul(c, cg_tadd(c, cg_tmul(c, cg_taddk(c, u->co0, r), k->ci), cg_tadd(c, u->ci0, u->cl)), k->kh * k->kw);
  cg_store_f32(c, cg_hsum(c, LLVMBuildLoad2(c->b, u->vt, reg, ""), k->V), u->dw, cg_taddk(c, wi, ky * k->kw + kx));
}

/* dw[co, ci, ky, kx] for the tile rows co0.. (rr of them) and the input channels of block cb:
 * stack accumulators acc[ci_l][ky][kx chunk][r][k] (vectors), summed over (n, oy, ox). */
static void twg_tile(cg_ctx *c, const twg *k, LLVMValueRef dy, LLVMValueRef x, LLVMValueRef dw, LLVMValueRef co0,
                     LLVMValueRef ci0, LLVMValueRef cbn, LLVMValueRef stack, int rr) {
  int V = k->V, per = rr * k->KC;
  int64_t slots_ci = k->kh * k->nkc * per;
  LLVMTypeRef vt = cg_vtype(c, V), pt = cg_partial_vtype(c, V); /* pt: 16-bit with half partials */
  LLVMValueRef reg[64]; /* the current (ky, chunk) accumulators, promoted to registers */
  for (int i = 0; i < per; i++) reg[i] = cg_entry_alloca(c, vt, "wa");
  cg_loop Z, NB, CL, F;
  LLVMValueRef z = cg_loop_begin(c, &Z, cg_i64(c, 0), cg_tmul(c, cbn, slots_ci), cg_i64(c, 1), "z");
  LLVMBuildStore(c->b, LLVMConstNull(pt), LLVMBuildInBoundsGEP2(c->b, pt, stack, &z, 1, ""));
  cg_loop_end(c, &Z);
  LLVMValueRef nb = cg_loop_begin(c, &NB, cg_i64(c, 0), cg_i64(c, k->n), cg_i64(c, 1), "n");
  LLVMValueRef last = LLVMBuildICmp(c->b, LLVMIntEQ, nb, cg_i64(c, k->n - 1), "last_image");
  LLVMValueRef cl = cg_loop_begin(c, &CL, cg_i64(c, 0), cbn, cg_i64(c, 1), "cl");
  LLVMValueRef xplane = cg_tmul(c, cg_tadd(c, cg_tmul(c, nb, k->ci), cg_tadd(c, ci0, cl)), k->ih * k->iw);
  LLVMValueRef dplane = cg_tmul(c, cg_tadd(c, cg_tmul(c, nb, k->co), co0), k->oh * k->ow);
  twg_st st = {k, dw, co0, ci0, cl, vt};
  cg_tgw g = {k->oh, k->ow, k->ih, k->iw, k->kh, k->kw, k->sh, k->sw, k->pt, k->pl, k->dh, k->dw, V, k->KC, k->nkc};
  cg_tgw_ops ops = {dy, x, dplane, xplane, stack, last, cl, slots_ci, twg_store, &st};
  cg_tgw_taps(c, &g, &ops, reg, rr);
  cg_loop_end(c, &CL);
  cg_loop_end(c, &NB);
  /* taps no output row reaches: dw = 0 (the sum of the zeroed lanes) */
  LLVMValueRef cl2 = cg_loop_begin(c, &F, cg_i64(c, 0), cbn, cg_i64(c, 1), "cf");
  for (int64_t ky = 0; ky < k->kh; ky++) {
    if (!cg_tgw_tap_empty(&g, ky)) continue;
    for (int r = 0; r < rr; r++)
      for (int64_t kx = 0; kx < k->kw; kx++) {
        LLVMValueRef wi = cg_tmul(c, cg_tadd(c, cg_tmul(c, cg_taddk(c, co0, r), k->ci), cg_tadd(c, ci0, cl2)), k->kh * k->kw);
        cg_store_f32(c, cg_f32(c, 0.0f), dw, cg_taddk(c, wi, ky * k->kw + kx));
      }
  }
  cg_loop_end(c, &F);
}

/* ---- grad_weight of 1x1 stride-1 unpadded convs: a GEMM dw[co, ci] = sum_{n, p} dy[n, co, p] *
 * x[n, ci, p] over the flat planes (p < H*W).  Work items: blocks of G1_RB output x G1_CB input
 * channels with vector accumulators acc[ci][co] in a stack array; per image and chunk of G1_CH
 * pixels (the chunk's dy and x rows stay in L1) every sub-tile of G1_R x G1_C channels runs
 * over the chunk's vectors with its accumulators in registers: G1_R + G1_C loads per G1_R *
 * G1_C FMAs (the general tile reloads x per channel: 13 loads per 12 FMAs). ---- */
enum { G1_R = 4, G1_C = 3, G1_RB = 8, G1_CB = 12, G1_CH = 256 };
typedef struct tgw1 {
  int64_t n, ci, co, hw;
  int V;
  LLVMValueRef dy, x, dw, stack;
  LLVMValueRef co0, ci0, final; /* the item's block, and (i1) whether this is its last chunk */
} tgw1;

/* Sub-tile (rows r0.. of the block: rr of them; input channels c0..: cc) over nvec full vectors
 * from pixel p of the planes at dbase / xbase, then one masked vector of lanes lm (if any). */
static void g1_sub(cg_ctx *c, const tgw1 *k, LLVMValueRef dbase, LLVMValueRef xbase, LLVMValueRef p, int r0, int rr, int c0,
                   int cc, int64_t nvec, unsigned lm) {
  int V = k->V, na = rr * cc;
  LLVMTypeRef vt = cg_vtype(c, V), pt = cg_partial_vtype(c, V); /* pt: 16-bit with half partials */
  LLVMValueRef sp[G1_R * G1_C], reg[G1_R * G1_C], cur[G1_R * G1_C];
  for (int j = 0; j < cc; j++)
    for (int r = 0; r < rr; r++) {
      int i = r * cc + j;
      LLVMValueRef si = cg_i64(c, (int64_t)(c0 + j) * G1_RB + r0 + r);
      sp[i] = LLVMBuildInBoundsGEP2(c->b, pt, k->stack, &si, 1, "");
      reg[i] = cg_entry_alloca(c, vt, "ga");
      LLVMBuildStore(c->b, cg_partial_load(c, sp[i], V), reg[i]); /* a 16-bit partial (cg_half_partials.h) */
    }
  for (int pass = 0; pass < 2; pass++) {
    if (pass == 0 && nvec == 0) continue;
    if (pass == 1 && !lm) break;
    cg_loop L;
    LLVMValueRef idx;
    if (pass == 0) {
      LLVMValueRef v = cg_loop_begin(c, &L, cg_i64(c, 0), cg_i64(c, nvec), cg_i64(c, 1), "v");
      idx = cg_tadd(c, p, cg_tmul(c, v, V));
    } else {
      idx = cg_taddk(c, p, nvec * V);
    }
    unsigned m = pass == 0 ? cg_lanes(V, V) : lm;
    for (int i = 0; i < na; i++) cur[i] = LLVMBuildLoad2(c->b, vt, reg[i], "");
    LLVMValueRef xv[G1_C];
    for (int j = 0; j < cc; j++) xv[j] = cg_tload(c, k->x, cg_tadd(c, xbase, cg_taddk(c, idx, (int64_t)(c0 + j) * k->hw)), 1, m, V);
    for (int r = 0; r < rr; r++) {
      LLVMValueRef dv = cg_tload(c, k->dy, cg_tadd(c, dbase, cg_taddk(c, idx, (int64_t)(r0 + r) * k->hw)), 1, m, V);
      for (int j = 0; j < cc; j++) cur[r * cc + j] = cg_fma(c, dv, xv[j], cur[r * cc + j]);
    }
    for (int i = 0; i < na; i++) LLVMBuildStore(c->b, cur[i], reg[i]);
    if (pass == 0) cg_loop_end(c, &L);
  }
  cg_if fl; /* the item's last chunk: one horizontal sum per weight, straight from the registers */
  cg_if_begin(c, &fl, k->final);
  for (int j = 0; j < cc; j++)
    for (int r = 0; r < rr; r++) {
      LLVMValueRef wi = cg_tadd(c, cg_tmul(c, cg_taddk(c, k->co0, r0 + r), k->ci), cg_taddk(c, k->ci0, c0 + j));
      cg_store_f32(c, cg_hsum(c, LLVMBuildLoad2(c->b, vt, reg[r * cc + j], ""), V), k->dw, wi);
    }
  cg_if_else(c, &fl);
  for (int i = 0; i < na; i++) cg_partial_store(c, LLVMBuildLoad2(c->b, vt, reg[i], ""), sp[i], V);
  cg_if_end(c, &fl);
}

/* Every sub-tile of a block of rn x cn channels over pixels [p, p + nvec*V + popcount(lm)). */
static void g1_chunk(cg_ctx *c, const tgw1 *k, LLVMValueRef dbase, LLVMValueRef xbase, LLVMValueRef p, int rn, int cn,
                     int64_t nvec, unsigned lm) {
  for (int c0 = 0; c0 < cn; c0 += G1_C)
    for (int r0 = 0; r0 < rn; r0 += G1_R)
      g1_sub(c, k, dbase, xbase, p, r0, rn - r0 < G1_R ? rn - r0 : G1_R, c0, cn - c0 < G1_C ? cn - c0 : G1_C, nvec, lm);
}

/* One work item: rn output channels from co0 x cn input channels from ci0. */
static void g1_item(cg_ctx *c, const tgw1 *k0, LLVMValueRef co0, LLVMValueRef ci0, int rn, int cn) {
  int V = k0->V;
  tgw1 k1 = *k0, *k = &k1;
  k->co0 = co0, k->ci0 = ci0;
  LLVMTypeRef pt = cg_partial_vtype(c, V);
  for (int i = 0; i < cn * G1_RB; i++) {
    LLVMValueRef si = cg_i64(c, i);
    LLVMBuildStore(c->b, LLVMConstNull(pt), LLVMBuildInBoundsGEP2(c->b, pt, k->stack, &si, 1, ""));
  }
  int64_t nch = k->hw / G1_CH, rem = k->hw % G1_CH;
  cg_loop NB, CH;
  LLVMValueRef nb = cg_loop_begin(c, &NB, cg_i64(c, 0), cg_i64(c, k->n), cg_i64(c, 1), "n");
  LLVMValueRef last = LLVMBuildICmp(c->b, LLVMIntEQ, nb, cg_i64(c, k->n - 1), "last_image");
  LLVMValueRef dbase = cg_tmul(c, cg_tadd(c, cg_tmul(c, nb, k->co), co0), k->hw);
  LLVMValueRef xbase = cg_tmul(c, cg_tadd(c, cg_tmul(c, nb, k->ci), ci0), k->hw);
  if (nch) {
    LLVMValueRef ch = cg_loop_begin(c, &CH, cg_i64(c, 0), cg_i64(c, nch), cg_i64(c, 1), "chunk");
    k->final = rem ? LLVMConstInt(c->t_i1, 0, 0) : LLVMBuildAnd(c->b, last, LLVMBuildICmp(c->b, LLVMIntEQ, ch, cg_i64(c, nch - 1), ""), "");
    g1_chunk(c, k, dbase, xbase, cg_tmul(c, ch, G1_CH), rn, cn, G1_CH / V, 0);
    cg_loop_end(c, &CH);
  }
  k->final = last;
  if (rem) g1_chunk(c, k, dbase, xbase, cg_i64(c, nch * G1_CH), rn, cn, rem / V, cg_lanes((int)(rem % V), V));
  cg_loop_end(c, &NB);
}

/* The kernel body: items (co block, ci block), ci blocks fastest, contiguous ranges over the
 * threads; the last block of each kind may be narrower (its own static body). */
static void g1_emit(cg_ctx *c, const tgw1 *k, LLVMValueRef tid, LLVMValueRef nth) {
  int64_t nrb = (k->co + G1_RB - 1) / G1_RB, ncb = (k->ci + G1_CB - 1) / G1_CB;
  int rl = (int)(k->co - (nrb - 1) * G1_RB), cl = (int)(k->ci - (ncb - 1) * G1_CB);
  LLVMValueRef lo, hi;
  cg_thread_range(c, cg_i64(c, nrb * ncb), tid, nth, &lo, &hi);
  cg_loop L;
  LLVMValueRef it = cg_loop_begin(c, &L, lo, hi, cg_i64(c, 1), "item");
  LLVMValueRef cb = LLVMBuildSRem(c->b, it, cg_i64(c, ncb), "cb"), t = LLVMBuildSDiv(c->b, it, cg_i64(c, ncb), "t");
  LLVMValueRef co0 = cg_tmul(c, t, G1_RB), ci0 = cg_tmul(c, cb, G1_CB);
  LLVMValueRef lastr = LLVMBuildICmp(c->b, LLVMIntEQ, t, cg_i64(c, nrb - 1), "");
  LLVMValueRef lastc = LLVMBuildICmp(c->b, LLVMIntEQ, cb, cg_i64(c, ncb - 1), "");
  for (int v = 0; v < 4; v++) { /* (last row block?, last column block?) */
    int rn = v & 1 ? rl : G1_RB, cn = v & 2 ? cl : G1_CB;
    if ((v & 1 && rl == G1_RB) || (v & 2 && cl == G1_CB)) continue; /* same as a variant before */
    LLVMValueRef rw = rl == G1_RB ? LLVMConstInt(c->t_i1, 1, 0) : LLVMBuildICmp(c->b, LLVMIntEQ, lastr, LLVMConstInt(c->t_i1, v & 1, 0), "");
    LLVMValueRef cw = cl == G1_CB ? LLVMConstInt(c->t_i1, 1, 0) : LLVMBuildICmp(c->b, LLVMIntEQ, lastc, LLVMConstInt(c->t_i1, (v & 2) != 0, 0), "");
    LLVMValueRef want = LLVMBuildAnd(c->b, rw, cw, "");
    cg_if f;
    cg_if_begin(c, &f, want);
    g1_item(c, k, co0, ci0, rn, cn);
    cg_if_end(c, &f);
  }
  cg_loop_end(c, &L);
}

/* in: dy [N,Co,OH,OW], x [N,Ci,H,W]; out dw [Co,Ci,KH,KW].  Items (channel tile, ci block),
 * blocks fastest; contiguous ranges over the threads. */
LLVMValueRef cg_train_conv_direct_grad_weight(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind) {
  const ir_conv2d_attr *at = &n->attr.conv2d_grad_weight.conv;
  const ir_shape *ds = &c->g->values[n->in[0]].shape, *xs = &c->g->values[n->in[1]].shape;
  if (at->kernel[0] == 1 && at->kernel[1] == 1 && at->stride[0] == 1 && at->stride[1] == 1 && !at->pad[0] && !at->pad[1] &&
      !at->pad[2] && !at->pad[3]) {
    LLVMValueRef a[5];
    LLVMValueRef f = cg_train_kbegin(c, fn_name, 2, a);
    tgw1 k = {xs->dim[0], xs->dim[1], ds->dim[1], xs->dim[2] * xs->dim[3], c->target->vec_f32, a[0], a[1], a[2], NULL, NULL, NULL, NULL};
    k.stack = cg_entry_alloca(c, LLVMArrayType(cg_partial_vtype(c, k.V), G1_RB * G1_CB), "gacc");
    cg_partial_note(c, n, G1_RB * G1_CB, k.V);
    g1_emit(c, &k, a[3], a[4]);
    cg_kernel_end(c);
    *kind = cg_kind(c, "conv2d_grad_weight", "g1x1_4x3");
    return f;
  }
  int budget = cg_acc_budget(c->target);
  twg k = {xs->dim[0], xs->dim[1], xs->dim[2], xs->dim[3], ds->dim[1], ds->dim[2], ds->dim[3], at->kernel[0], at->kernel[1],
           at->stride[0], at->stride[1], at->pad[0], at->pad[1], at->dilation[0], at->dilation[1],
           c->target->vec_f32, 0, 0, 0, 0, 0, 0, 0};
  int kcmax = (budget * 4 / 3 - 4) / 2;
  k.KC = (int)(k.kw < kcmax ? k.kw : kcmax);
  k.nkc = (int)((k.kw + k.KC - 1) / k.KC);
  /* live registers: RW*KC accumulators, the KC x vectors of a pixel vector, one dy vector and
   * up to two masks, out of budget*4/3 (16 ymm / 32 zmm) */
  k.RW = (budget * 4 / 3 - 3 - k.KC) / k.KC;
  if (k.RW < 1) k.RW = 1;
  if (k.RW > 16) k.RW = 16;
  if (k.RW > k.co) k.RW = (int)k.co;
  k.CB = (int)(k.ci < 8 ? k.ci : 8);
  k.ntile = (int)((k.co + k.RW - 1) / k.RW);
  k.nblk = (int)((k.ci + k.CB - 1) / k.CB);
  LLVMValueRef a[5];
  LLVMValueRef f = cg_train_kbegin(c, fn_name, 2, a);
  int64_t slots = (int64_t)k.CB * k.kh * k.nkc * k.RW * k.KC;
  LLVMValueRef stack = cg_entry_alloca(c, LLVMArrayType(cg_partial_vtype(c, k.V), (unsigned)slots), "wacc");
  cg_partial_note(c, n, slots, k.V);
  LLVMValueRef lo, hi;
  cg_thread_range(c, cg_i64(c, (int64_t)k.ntile * k.nblk), a[3], a[4], &lo, &hi);
  cg_loop L;
  LLVMValueRef it = cg_loop_begin(c, &L, lo, hi, cg_i64(c, 1), "item");
  LLVMValueRef cb = LLVMBuildSRem(c->b, it, cg_i64(c, k.nblk), "cb"), t = LLVMBuildSDiv(c->b, it, cg_i64(c, k.nblk), "t");
  LLVMValueRef ci0 = cg_tmul(c, cb, k.CB), co0 = cg_tmul(c, t, k.RW);
  LLVMValueRef cbn = cg_min64(c, cg_i64(c, k.CB), LLVMBuildSub(c->b, cg_i64(c, k.ci), ci0, ""));
  int rem = (int)(k.co % k.RW);
  if (!rem) {
    twg_tile(c, &k, a[0], a[1], a[2], co0, ci0, cbn, stack, k.RW);
  } else {
    cg_if fi;
    cg_if_begin(c, &fi, LLVMBuildICmp(c->b, LLVMIntNE, t, cg_i64(c, k.ntile - 1), ""));
    twg_tile(c, &k, a[0], a[1], a[2], co0, ci0, cbn, stack, k.RW);
    cg_if_else(c, &fi);
    twg_tile(c, &k, a[0], a[1], a[2], co0, ci0, cbn, stack, rem);
    cg_if_end(c, &fi);
  }
  cg_loop_end(c, &L);
  cg_kernel_end(c);
  *kind = cg_kind(c, "conv2d_grad_weight", ir_fmt(c->arena, "%dx%d", k.RW, k.KC));
  return f;
}
