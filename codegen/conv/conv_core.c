/* conv/conv_core.c — what the conv routes share (conv/conv_core.h): the direct route's
 * geometry and register-tile choice (pixel vectors, channel vectors, K-blocked planes), the one
 * batchnorm fold and the direct layout's weight packing, lane masks and masked loads/stores,
 * the kernel-row range of an output row and the opening of a tile's K loop. */
#include <math.h>
#include <string.h>

#include "codegen/cg_budget.h"
#include "codegen/cg_layout.h"
#include "codegen/conv/conv_core.h"

/* Vectors of an output row that cg_conv_row_emit puts in masked tiles (border and tail) when
 * tiles are p vectors wide; 0 for flat convs (only the plane's last chunk is masked). */

static double masked_fraction(const conv_geom *g, int p) {
  if (g->flat) return 0;
  int64_t tile_px = (int64_t)p * g->V, extra = g->sw == 2 ? 1 : 0;
  int64_t a = (g->pl + g->sw - 1) / g->sw;
  int64_t lim = g->w - 1 - extra + g->pl - (int64_t)(g->kw - 1) * g->dw, b = lim < 0 ? 0 : lim / g->sw + 1;
  if (b > g->ow) b = g->ow;
  int64_t left = (a + tile_px - 1) / tile_px * tile_px;
  if (left > b) left = b;
  int64_t nfull = (b - left) / tile_px;
  return g->ow > 0 ? (double)(g->ow - nfull * tile_px) / (double)g->ow : 0;
}

/* Register tile R x P (vectors): maximise used accumulators x channel utilisation x pixel
 * utilisation (masked border/tail vectors count 3/4), minus a penalty per load of a tap (R
 * broadcasts + P pixel vectors).  The penalty is what keeps R + P small: 12x8 / 11x8 tiles
 * issue 13 / 12 loads per 12 / 11 FMAs and ran at ~65-70 % of peak on ResNet-50 (AVX2) where
 * 6x16 and 4x24 tiles of similar layers ran at ~80 %.  A tile must also fit the register file
 * with its P pixel vectors and one broadcast (R*P + P + 1 <= 16 ymm / 32 zmm): AVX2's 3x32
 * (17) kept accumulators on the stack inside the K loop.  Flat convs with at most
 * CG_CONV_SMALL_K_CIN input channels weigh a pixel vector load 0.5 (a broadcast 0.25): their short K
 * loop reads the pixel vectors from the chunk's 128 KB panel in L2 once per channel tile, and
 * 6x16 (2 pixel loads) beat 4x24 and 3x32 on EfficientNet-B0's 16/24/40-channel expand convs
 * by 1.1-1.3x per CPU-second; with 128 or 480 input channels (ResNet-50 layer2, EfficientNet
 * stage 5) 6x16 measured 0.8-1.05x against 4x24, so larger K keeps the 0.25. */
static void conv_choose_tile(conv_geom *g, int budget) {
  int64_t pv = (g->ow + g->V - 1) / g->V;
  int pmax = (int)(pv < 4 ? pv : 4), regs = budget * 4 / 3; /* 16 ymm / 32 zmm */
  double wpix = g->flat && g->cin_g <= CG_CONV_SMALL_K_CIN ? 0.5 : 0.25, best = -1;
  for (int p = 1; p <= pmax; p++)
    for (int r = 1; r <= budget / p && r <= g->cout_g; r++) {
      if (r * p + p + 1 > regs) continue;
      double uc = (double)g->cout_g / (double)(((g->cout_g + r - 1) / r) * r);
      double up = (double)g->ow / (double)(((g->ow + (int64_t)p * g->V - 1) / ((int64_t)p * g->V)) * p * g->V);
      double score = (double)(r * p) * uc * up * (1.0 - 0.25 * masked_fraction(g, p)) - 0.25 * r - wpix * p;
      if (score > best + 1e-9) best = score, g->R = r, g->P = p;
    }
  g->ntile = (int)((g->cout_g + g->R - 1) / g->R);
}

int64_t cg_conv_out_stride(cg_ctx *c, const ir_node *n, int64_t cout) {
  const cg_priv *pv = c->priv;
  const pass_fusion *fu = pv ? pv->plan : NULL;
  int64_t k = fu ? cg_concat_out_channels(c->g, fu, c->g->nodes[fu[n->id].last].out) : 0;
  return k > 0 ? k : cout;
}

conv_geom cg_conv_geometry(cg_ctx *c, const ir_node *n) {
  const ir_conv2d_attr *a = &n->attr.conv2d;
  const ir_shape *xs = &c->g->values[n->in[0]].shape, *ys = &c->g->values[n->out].shape;
  conv_geom g;
  memset(&g, 0, sizeof g);
  g.tune = cg_tune(c);
  g.n = xs->dim[0], g.cin = xs->dim[1], g.h = xs->dim[2], g.w = xs->dim[3];
  g.cout = ys->dim[1], g.oh = ys->dim[2], g.ow = ys->dim[3];
  g.ocs = cg_conv_out_stride(c, n, g.cout);
  g.kh = a->kernel[0], g.kw = a->kernel[1], g.sh = a->stride[0], g.sw = a->stride[1];
  g.pt = a->pad[0], g.pl = a->pad[1], g.dh = a->dilation[0], g.dw = a->dilation[1];
  if (g.dh < 1) g.dh = 1;
  if (g.dw < 1) g.dw = 1;
  g.groups = a->groups > 0 ? a->groups : 1;
  g.cin_g = g.cin / g.groups, g.cout_g = g.cout / g.groups;
  g.flat = g.kh == 1 && g.kw == 1 && g.sh == 1 && g.sw == 1 && !a->pad[0] && !a->pad[1] && !a->pad[2] && !a->pad[3];
  if (g.flat) g.w = g.h * g.w, g.h = 1, g.ow = g.oh * g.ow, g.oh = 1;
  g.gemm = g.flat;
  g.V = c->target->vec_f32;
  const cg_priv *pv = c->priv;
  g.l2 = cg_shard_tile_budget(c->target, pv ? pv->amp : NULL, pv ? pv->shard : 0);
  /* vc_wide (below): measured for f32 inference only; --precision 16.x graphs keep the
   * pixel tiles, whose fused round16 epilogues and 16-bit loads/stores (pass_store16_infer) the
   * channel-vector kernels lack (test_precision_fusion, test_store16_infer_cli) */
  g.vc_wide_ok = c->g->label < 0;
  for (int i = 0; g.vc_wide_ok && i < c->g->n_nodes; i++)
    if (c->g->nodes[i].op == IR_OP_round16 || c->g->nodes[i].op == IR_OP_narrow16 || c->g->nodes[i].op == IR_OP_widen16) g.vc_wide_ok = 0;
  if (!cg_conv_vc_choose(&g, cg_acc_budget(c->target))) conv_choose_tile(&g, cg_acc_budget(c->target));
  else g.flat = 0; /* a 1x1 GEMM on channel vectors: one output row of oh*ow pixels */
  /* 1x1 strided unpadded convs on channel vectors (ResNet's downsample convs) with a small
   * output plane: the plane as one row (a GEMM over the subsampled pixels), so the K-blocked
   * row (conv/chanvec_row.c) runs every pixel tile of the plane over a block of input channels
   * while it is in L2, on 3 channel vectors x budget/3 pixels (a 1x1 conv shares no pixel
   * between taps).  Measured on ResNet-50 AVX2 (bench/opcmp.py, CPU-time minima of 10):
   * layer4's 7x7 downsample +12-14 % over 7-pixel rows of 16x4 + 16x3 tiles; with 2 vectors
   * x 6 pixels, or on layer3's 14x14 plane (49 tiles), it measured no gain, hence the limit. */
  int rv3 = g.cout_g >= 3 * g.V, pk = rv3 ? cg_acc_budget(c->target) / 3 : g.P;
  int64_t px = g.oh * g.ow;
  if (g.vc && !g.flat && g.kh == 1 && g.kw == 1 && (g.sh > 1 || g.sw > 1) && !a->pad[0] && !a->pad[1] && !a->pad[2] &&
      !a->pad[3] && g.groups == 1 && g.oh > 1 && (px + pk - 1) / pk <= CG_CONV_SUB_MAX_TILES) {
    g.sub = 1, g.sub_w = g.w, g.sub_ow = g.ow;
    g.w = g.h * g.w, g.h = 1, g.ow = px, g.oh = 1;
    if (rv3) g.R = 3 * g.V, g.P = pk > px ? (int)px : pk, g.ntile = (int)((g.cout_g + g.R - 1) / g.R);
  }
  g.vc_plane = cg_conv_vc_plane_ok(c, &g); /* kxk channel vectors K-blocked per plane (conv/chanvec.c) */
  return g;
}

void cg_conv_bn_fold(cg_ctx *c, const ir_node *n, const ir_node *bn, int64_t co, double *scale, double *shift) {
  const float *b = n->n_in > 2 ? c->g->values[n->in[2]].data : NULL;
  double s = 1.0, t = b ? b[co] : 0.0;
  if (bn) {
    const float *gam = c->g->values[bn->in[1]].data, *bet = c->g->values[bn->in[2]].data;
    const float *mean = c->g->values[bn->in[3]].data, *var = c->g->values[bn->in[4]].data;
    s = gam[co] / sqrt((double)var[co] + (double)bn->attr.batchnorm.eps);
    t = (t - mean[co]) * s + bet[co];
  }
  *scale = s, *shift = t;
}

void cg_conv_pack(cg_ctx *c, const ir_node *n, const ir_node *bn, const conv_geom *g, float *wp, float *bp) {
  const float *w = c->g->values[n->in[1]].data;
  int64_t taps = (int64_t)g->kh * g->kw, T = g->ntile, R = g->R;
  for (int64_t gi = 0; gi < g->groups; gi++)
    for (int64_t t = 0; t < T; t++)
      for (int64_t r = 0; r < R; r++) {
        int64_t col = t * R + r, co = gi * g->cout_g + col, tile = gi * T + t;
        double scale = 1.0, shift = 0.0;
        if (col < g->cout_g) cg_conv_bn_fold(c, n, bn, co, &scale, &shift);
        bp[tile * R + r] = (float)shift;
        for (int64_t ci = 0; ci < g->cin_g; ci++)
          for (int64_t k = 0; k < taps; k++)
            wp[((tile * g->cin_g + ci) * taps + k) * R + r] =
                col < g->cout_g ? (float)(w[(co * g->cin_g + ci) * taps + k] * scale) : 0.0f;
      }
}

LLVMValueRef cg_conv_mask_const(cg_ctx *c, unsigned m, int w) {
  LLVMValueRef e[64];
  for (int l = 0; l < w; l++) e[l] = LLVMConstInt(c->t_i1, (m >> l) & 1, 0);
  return LLVMConstVector(e, (unsigned)w);
}

LLVMValueRef cg_conv_masked_load(cg_ctx *c, LLVMValueRef base, LLVMValueRef idx, unsigned m, int w) {
  LLVMTypeRef ov[2] = {cg_vtype(c, w), c->t_ptr};
  LLVMValueRef ptr = LLVMBuildGEP2(c->b, c->t_f32, base, &idx, 1, ""); /* lane 0 may be outside */
  LLVMValueRef args[4] = {ptr, cg_i32(c, 4), cg_conv_mask_const(c, m, w), cg_fzero(c, w)};
  return cg_intrinsic(c, "llvm.masked.load", ov, 2, args, 4);
}

void cg_conv_masked_store(cg_ctx *c, LLVMValueRef v, LLVMValueRef base, LLVMValueRef idx, unsigned m, int w) {
  LLVMTypeRef ov[2] = {cg_vtype(c, w), c->t_ptr};
  LLVMValueRef ptr = LLVMBuildGEP2(c->b, c->t_f32, base, &idx, 1, "");
  LLVMValueRef args[4] = {v, ptr, cg_i32(c, 4), cg_conv_mask_const(c, m, w)};
  cg_intrinsic(c, "llvm.masked.store", ov, 2, args, 4);
}

/* One tile: rr channels x np vectors from output column ox (run time); ox_const >= 0 when
 * the column is known at compile time (border/tail: lane masks up to ox_end), -1 for
 * interior tiles (every lane and tap in range). */
LLVMValueRef cg_conv_tile_begin(cg_ctx *c, const conv_geom *g, const conv_row *r, LLVMValueRef ox, int n_acc,
                                LLVMValueRef *acc, cg_loop *CI, cg_loop *KY, LLVMValueRef *row, LLVMValueRef *wrow) {
  LLVMTypeRef vt = cg_vtype(c, g->V);
  for (int i = 0; i < n_acc; i++) {
    acc[i] = cg_entry_alloca(c, vt, "acc");
    LLVMBuildStore(c->b, cg_fzero(c, g->V), acc[i]);
  }
  LLVMValueRef ix0 = LLVMBuildSub(c->b, LLVMBuildMul(c->b, ox, cg_i64(c, g->sw), ""), cg_i64(c, g->pl), "ix0");
  LLVMValueRef ci = cg_loop_begin(c, CI, cg_i64(c, 0), cg_i64(c, g->cin_g), cg_i64(c, 1), "ci");
  LLVMValueRef ky = cg_loop_begin(c, KY, r->ky_lo, r->ky_hi, cg_i64(c, 1), "ky");
  LLVMValueRef iy = LLVMBuildAdd(c->b, r->iy0, LLVMBuildMul(c->b, ky, cg_i64(c, g->dh), ""), "iy");
  *row = LLVMBuildAdd(c->b, r->in_base, LLVMBuildAdd(c->b, LLVMBuildMul(c->b, ci, cg_i64(c, g->h * g->w), ""),
                                                     LLVMBuildMul(c->b, iy, cg_i64(c, g->w), ""), ""), "row");
  LLVMValueRef tap_row = LLVMBuildAdd(c->b, LLVMBuildMul(c->b, ci, cg_i64(c, g->kh), ""), ky, "");
  *wrow = LLVMBuildAdd(c->b, r->wbase, LLVMBuildMul(c->b, tap_row, cg_i64(c, (int64_t)g->kw * g->R), ""), "wrow");
  return ix0;
}

/* Kernel-row range [ky_lo, ky_hi) that reads real input rows for output row oy. */
void cg_conv_ky_range(cg_ctx *c, const conv_geom *g, LLVMValueRef oy, conv_row *r) {
  LLVMValueRef base = LLVMBuildMul(c->b, oy, cg_i64(c, g->sh), "");
  r->iy0 = LLVMBuildSub(c->b, base, cg_i64(c, g->pt), "iy0");
  if (g->pt == 0 && (g->oh - 1) * g->sh + (int64_t)(g->kh - 1) * g->dh <= g->h - 1) {
    /* every output row reads kh real rows (1x1 convs, unpadded kxk): a constant trip count
     * the optimiser can unroll (a 1x1 conv's ky loop disappears) */
    r->ky_lo = cg_i64(c, 0), r->ky_hi = cg_i64(c, g->kh);
    return;
  }
  LLVMValueRef need = LLVMBuildSub(c->b, cg_i64(c, g->pt), base, ""); /* ky*dh >= pt - oy*sh */
  LLVMValueRef lo = LLVMBuildSDiv(c->b, LLVMBuildAdd(c->b, need, cg_i64(c, g->dh - 1), ""), cg_i64(c, g->dh), "");
  r->ky_lo = cg_max64(c, cg_i64(c, 0), LLVMBuildSelect(c->b, LLVMBuildICmp(c->b, LLVMIntSGT, need, cg_i64(c, 0), ""), lo, cg_i64(c, 0), ""));
  LLVMValueRef room = LLVMBuildSub(c->b, cg_i64(c, g->h - 1 + g->pt), base, ""); /* ky*dh <= h-1+pt-oy*sh */
  LLVMValueRef hi = LLVMBuildAdd(c->b, LLVMBuildSDiv(c->b, room, cg_i64(c, g->dh), ""), cg_i64(c, 1), "");
  hi = LLVMBuildSelect(c->b, LLVMBuildICmp(c->b, LLVMIntSLT, room, cg_i64(c, 0), ""), cg_i64(c, 0), hi, "");
  r->ky_hi = cg_min64(c, hi, cg_i64(c, g->kh));
}

/* Taps of more than one column load their own broadcasts (no pixel shared between taps),
 * so the tile gets the whole accumulator budget.  Dense convs only: grouped ones (`g_vc`,
 * ResNeXt, often one channel vector per group) keep the shared tiles they were measured
 * with.  tune vc_shared_taps restores the shared broadcasts on 2/3 of
 * the budget for dense convs too (A/B measurements). */
int cg_conv_vc_unshared(const conv_geom *g) {
  return g->groups == 1 && !g->tune->vc_shared_taps;
}

/* Dense kxk stride-1 convs on maps whose rows fill pixel vectors (ResNet-50 layer1's 56x56x64
 * 3x3) run on channel vectors too when Cout_g gives two channel vectors: the unshared 16x6
 * tiles (12 accumulators, per tap 2 weight loads and 6 broadcasts) measured faster than the
 * direct 6x16 pixel tiles there, 82 -> 92 % of peak per CPU-second at b1 and 80 -> 89 % at
 * b16 (bench/opcmp.py on a one-conv model, 26 Nov 16:30).  Wider maps / other channel counts
 * were not measured.  Inference graphs only (g->vc_wide_ok: no label): compiled training's
 * packed convs keep their pixel-vector kernels (not measured with channel vectors). */
static int vc_wide(const conv_geom *g) {
  return g->vc_wide_ok && g->kw > 1 && g->kh > 1 && cg_conv_vc_unshared(g) && g->cout_g >= 2 * g->V;
}

int cg_conv_vc_choose(conv_geom *g, int budget) {
  int V = g->V;
  if (g->cout_g < V) return 0;
  /* pixel vectors lose lanes on narrow rows and pay 2 shuffles per vector at stride 2; a
   * flat 1x1 GEMM is one row of oh*ow pixels (49 at 7x7: 7 vectors for 49 pixels, and 12x8
   * tiles issuing 13 loads per 12 FMAs ran at ~45-60 % of peak on ResNet-50's layer4) */
  double px_util = (double)g->ow / (double)(((g->ow + V - 1) / V) * V);
  if (g->sw == 1 && px_util > 0.9 && !vc_wide(g)) return 0;
  if (g->flat && g->groups > 1) return 0;
  /* Broadcast pixels shared between taps (pixel p+1 at tap kx-s is pixel p at tap kx) stay
   * live in registers: with them two thirds of the accumulator budget avoids spills (AVX2
   * ResNet-50, measured: 2x4 tiles beat 2x6 by ~20%).  Unshared (cg_conv_vc_tile loads every tap's
   * broadcasts) only the accumulators and Rv weight vectors are live: the whole budget (2x6:
   * 12 accumulators, +10-20 % on ResNet-50's 3x3 convs).  A 1x1 conv (the stride-2
   * downsample convs) has one tap and always gets the whole budget. */
  int64_t nv = (g->cout_g + V - 1) / V;
  int rv = nv >= 2 ? 2 : 1;
  g->vc = 1;
  g->R = rv * V;
  g->P = (g->kw > 1 && !cg_conv_vc_unshared(g) ? budget * 2 / 3 : budget) / rv; /* 1x1: no pixel is shared between taps */
  if (g->P > g->ow) g->P = (int)g->ow;
  g->ntile = (int)((g->cout_g + g->R - 1) / g->R);
  return 1;
}

/* K-blocked planes on row tiles: their accumulator buffer at most (bytes) */
#define VC_PLANE_MAX_BUF (64 * 1024)

/* Plane tiles: the output plane as one row of oh*ow pixels cut into compile-time tiles of
 * balanced width (at most P; tiles span output rows: each pixel's taps are compile-time
 * offsets, those outside the input dropped), so every tile has the whole accumulator budget
 * (a 7-wide row's 4+3 tiles had 8 and 2x6 split accumulators).  tune vc_plane_tiles in
 * cnnc's environment keeps the row tiles (A/B measurements). */
int64_t cg_conv_vc_plane_tiles(const conv_geom *g) {
  int64_t nt = (g->oh * g->ow + g->P - 1) / g->P;
  return nt <= CG_CONV_SUB_MAX_TILES && g->tune->vc_plane_tiles ? nt : 0;
}

int cg_conv_vc_plane_ok(cg_ctx *c, const conv_geom *g) {
  if (!g->vc || g->kw == 1 || g->sub || g->flat || !cg_conv_vc_unshared(g) || c->g->half_partials || !cg_tune(c)->vc_plane)
    return 0;
  int64_t nt = (g->ow + g->P - 1) / g->P, wt = (int64_t)g->cin_g * g->kh * g->kw * g->R * 4;
  int64_t x = (int64_t)g->cin_g * g->h * g->w * 4, nacc = g->R / g->V * g->P;
  /* tune vc_plane_force=1: every kxk conv this path can run (tests of small shapes) */
  if (!cg_tune(c)->vc_plane_force && (wt <= 2 * VC_KXK_BLOCK_BYTES || wt + x <= g->l2)) return 0;
  if (cg_conv_vc_plane_tiles(g)) return 1;
  return nt >= 1 && nt <= 4 && g->oh * nt * nacc * g->V * 4 <= VC_PLANE_MAX_BUF;
}

/* The stack buffer's address through an empty asm, so SROA does not turn the buffer into
 * nt*nacc loop-carried vector registers (they are meant to live in L1 between blocks). */
LLVMValueRef cg_conv_opaque_ptr(cg_ctx *c, LLVMValueRef p) {
  LLVMTypeRef ft = LLVMFunctionType(c->t_ptr, &c->t_ptr, 1, 0);
  LLVMValueRef asmv = LLVMGetInlineAsm(ft, "", 0, "=r,0", 4, 0, 0, LLVMInlineAsmDialectATT, 0);
  return LLVMBuildCall2(c->b, ft, asmv, &p, 1, "kbuf");
}
