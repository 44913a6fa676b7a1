/* gen_conv.c — 2-D convolution on NCHW (dense, strided, padded, dilated, grouped, depthwise;
 * 1x1 stride-1 convs see the plane as one long row, i.e. a GEMM).  Microkernel: a register
 * tile of R output channels x P vectors of V output pixels of one output row; per input
 * channel and kernel tap it loads P pixel vectors (strided for stride 2), broadcasts R
 * weights and issues R*P llvm.fmuladd.  Weights are packed at compile time into
 * [group][Cout_g/R][Cin_g][KH][KW][R] (zero padded), with an inference batchnorm folded in;
 * the epilogue adds the bias and applies fused relu/sigmoid/swish/residual add.  Rows are
 * clipped at run time (kernel-row range per output row), columns at compile time: interior
 * tiles are unmasked, border/tail vectors use compile-time lane masks. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/cg_budget.h"
#include "codegen/gen_conv.h"
#include "codegen/gen_round16.h"
#include "codegen/gen_conv_bf16.h"
#include "codegen/gen_conv_stem.h"
#include "codegen/gen_conv_wino.h"

/* Vectors of an output row that conv_row_emit puts in masked tiles (border and tail) when
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
 * SMALL_K_CIN input channels weigh a pixel vector load 0.5 (a broadcast 0.25): their short K
 * loop reads the pixel vectors from the chunk's 128 KB panel in L2 once per channel tile, and
 * 6x16 (2 pixel loads) beat 4x24 and 3x32 on EfficientNet-B0's 16/24/40-channel expand convs
 * by 1.1-1.3x per CPU-second; with 128 or 480 input channels (ResNet-50 layer2, EfficientNet
 * stage 5) 6x16 measured 0.8-1.05x against 4x24, so larger K keeps the 0.25. */
#define SMALL_K_CIN 64
static void conv_choose_tile(conv_geom *g, int budget) {
  int64_t pv = (g->ow + g->V - 1) / g->V;
  int pmax = (int)(pv < 4 ? pv : 4), regs = budget * 4 / 3; /* 16 ymm / 32 zmm */
  double wpix = g->flat && g->cin_g <= SMALL_K_CIN ? 0.5 : 0.25, best = -1;
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

static conv_geom conv_geometry(cg_ctx *c, const ir_node *n) {
  const ir_conv2d_attr *a = &n->attr.conv2d;
  const ir_shape *xs = &c->g->values[n->in[0]].shape, *ys = &c->g->values[n->out].shape;
  conv_geom g;
  memset(&g, 0, sizeof g);
  g.tune = cg_tune(c);
  g.n = xs->dim[0], g.cin = xs->dim[1], g.h = xs->dim[2], g.w = xs->dim[3];
  g.cout = ys->dim[1], g.oh = ys->dim[2], g.ow = ys->dim[3];
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
  /* gen_conv_vc.c vc_wide: measured for f32 inference only; --precision 16.x graphs keep the
   * pixel tiles, whose fused round16 epilogues and 16-bit loads/stores (pass_store16_infer) the
   * channel-vector kernels lack (test_precision_fusion, test_store16_infer_cli) */
  g.vc_wide_ok = c->g->label < 0;
  for (int i = 0; g.vc_wide_ok && i < c->g->n_nodes; i++)
    if (c->g->nodes[i].op == IR_OP_round16 || c->g->nodes[i].op == IR_OP_narrow16 || c->g->nodes[i].op == IR_OP_widen16) g.vc_wide_ok = 0;
  if (!cg_conv_vc_choose(&g, cg_acc_budget(c->target))) conv_choose_tile(&g, cg_acc_budget(c->target));
  else g.flat = 0; /* a 1x1 GEMM on channel vectors: one output row of oh*ow pixels */
  /* 1x1 strided unpadded convs on channel vectors (ResNet's downsample convs) with a small
   * output plane: the plane as one row (a GEMM over the subsampled pixels), so the K-blocked
   * row (gen_conv_vc.c) runs every pixel tile of the plane over a block of input channels
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
  g.vc_plane = cg_conv_vc_plane_ok(c, &g); /* kxk channel vectors K-blocked per plane (gen_conv_vc.c) */
  return g;
}

/* Packs weights (BN scale folded in) and bias (conv bias, BN shift) in microkernel order. */
static void conv_pack(cg_ctx *c, const ir_node *n, const ir_node *bn, const conv_geom *g, float *wp, float *bp) {
  const float *w = c->g->values[n->in[1]].data, *b = n->n_in > 2 ? c->g->values[n->in[2]].data : NULL;
  int64_t taps = (int64_t)g->kh * g->kw, T = g->ntile, R = g->R;
  for (int64_t gi = 0; gi < g->groups; gi++)
    for (int64_t t = 0; t < T; t++)
      for (int64_t r = 0; r < R; r++) {
        int64_t col = t * R + r, co = gi * g->cout_g + col, tile = gi * T + t;
        double scale = 1.0, shift = col < g->cout_g && b ? b[co] : 0.0;
        if (bn && col < g->cout_g) {
          const float *gam = c->g->values[bn->in[1]].data, *bet = c->g->values[bn->in[2]].data;
          const float *mean = c->g->values[bn->in[3]].data, *var = c->g->values[bn->in[4]].data;
          scale = gam[co] / sqrt((double)var[co] + (double)bn->attr.batchnorm.eps);
          shift = (shift - mean[co]) * scale + bet[co];
        }
        bp[tile * R + r] = (float)shift;
        for (int64_t ci = 0; ci < g->cin_g; ci++)
          for (int64_t k = 0; k < taps; k++)
            wp[((tile * g->cin_g + ci) * taps + k) * R + r] =
                col < g->cout_g ? (float)(w[(co * g->cin_g + ci) * taps + k] * scale) : 0.0f;
      }
}

/* Compile-time lane masks of a vector whose lane 0 is output column ox, for a tile that
 * ends at column end: lanes whose output pixel is in the tile (out), and of those the
 * lanes whose tap kx reads a real input pixel (in). */
static unsigned lane_out_mask(const conv_geom *g, int64_t ox, int64_t end) {
  unsigned m = 0;
  for (int l = 0; l < g->V; l++)
    if (ox + l < end) m |= 1u << l;
  return m;
}
static unsigned lane_in_mask(const conv_geom *g, int64_t ox, int64_t end, int kx) {
  unsigned m = 0;
  for (int l = 0; l < g->V; l++) {
    int64_t ix = (ox + l) * g->sw - g->pl + (int64_t)kx * g->dw;
    if (ox + l < end && ix >= 0 && ix < g->w) m |= 1u << l;
  }
  return m;
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

/* Pixel vector for tap kx at input element idx (lane 0), lanes m; pair_ok: a stride-2
 * pair load (which reads one element past the last lane) stays inside the row. */
static LLVMValueRef load_pixels(cg_ctx *c, const conv_geom *g, LLVMValueRef x, LLVMValueRef idx, unsigned m,
                                int pair_ok, ir_dtype dt) {
  int V = g->V;
  unsigned full = V >= 32 ? ~0u : (1u << V) - 1;
  if (dt != IR_F32) { /* 16-bit storage: the same loads on u16 lanes, widened (bf16 << 16 / vcvtph2ps) */
    const ir_node *n = &c->g->nodes[((cg_priv *)c->priv)->node];
    if (m == full && (g->sw != 2 || pair_ok)) return cg_act_load_strided(c, n, x, idx, g->sw, V, dt);
    if (g->sw == 1) return cg_act_masked_load(c, n, x, idx, m, V, dt);
    LLVMValueRef v = cg_fzero(c, V);
    for (int l = 0; l < V; l++)
      if (m >> l & 1)
        v = LLVMBuildInsertElement(c->b, v, cg_act_load(c, n, x, LLVMBuildAdd(c->b, idx, cg_i64(c, (int64_t)l * g->sw), ""), 1, dt),
                                   cg_i32(c, l), "");
    return v;
  }
  if (m == full && (g->sw != 2 || pair_ok)) return cg_load_strided(c, x, idx, g->sw, V);
  if (g->sw == 1) return cg_conv_masked_load(c, x, idx, m, V);
  if (g->sw == 2) { /* two masked loads of the even elements, then the even-lane shuffle */
    unsigned lo = 0, hi = 0;
    for (int l = 0; l < V; l++)
      if (m >> l & 1) {
        if (2 * l < V) lo |= 1u << (2 * l);
        else hi |= 1u << (2 * l - V);
      }
    LLVMValueRef a = lo ? cg_conv_masked_load(c, x, idx, lo, V) : cg_fzero(c, V);
    LLVMValueRef b = hi ? cg_conv_masked_load(c, x, LLVMBuildAdd(c->b, idx, cg_i64(c, V), ""), hi, V) : cg_fzero(c, V);
    return cg_even_lanes(c, a, b, V);
  }
  LLVMValueRef v = cg_fzero(c, V);
  for (int l = 0; l < V; l++)
    if (m >> l & 1)
      v = LLVMBuildInsertElement(c->b, v, cg_load_f32(c, x, LLVMBuildAdd(c->b, idx, cg_i64(c, (int64_t)l * g->sw), "")),
                                 cg_i32(c, l), "");
  return v;
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

/* Flat convs with a fused residual add (flat_prefetch): the residual lines of the rr x
 * np-vector tile whose first output element is oi0 (the next tile flat_tiles runs: the next
 * pixel tile, or after a chunk's last the first of the next channel tile), prefetched one
 * microkernel ahead of the epilogue that reads them
 * (at batch 16 they come from memory, and the epilogue's loads stalled the next tile's FMAs:
 * ResNet-50's layer3 conv3s 77-79 % -> 83-85 % per CPU-second, layer2's +2 %; prefetching
 * the output lines for writing as well measured 1-5 % below this on layer1/2, not kept). */
static void flat_prefetch_epi(cg_ctx *c, const conv_geom *g, const conv_row *r, const conv_epi *e, int rr, LLVMValueRef oi0,
                              int np) {
  for (int q = 0, ra = 0; q < e->n_post; q++) {
    if (e->post[q]->op != IR_OP_add) continue;
    int64_t es = r->rdt[ra] != IR_F32 ? 2 : 4, lines = ((int64_t)np * g->V * es + 63) / 64 + 1;
    LLVMValueRef base = r->resid[ra++];
    for (int k = 0; k < rr; k++) {
      LLVMValueRef oi = LLVMBuildAdd(c->b, oi0, cg_i64(c, (int64_t)k * g->oh * g->ow), "");
      for (int64_t j = 0; j < lines; j++) {
        LLVMValueRef off = LLVMBuildAdd(c->b, LLVMBuildMul(c->b, oi, cg_i64(c, es), ""), cg_i64(c, 64 * j), "");
        LLVMValueRef args[4] = {LLVMBuildGEP2(c->b, c->t_i8, base, &off, 1, "pfe"), cg_i32(c, 0), cg_i32(c, 3), cg_i32(c, 1)};
        cg_intrinsic(c, "llvm.prefetch", &c->t_ptr, 1, args, 4);
      }
    }
  }
}

/* Non-temporal output stores of flat convs (flat_nt_ok): the n full f32 vectors v[i] of a
 * tile at out[oi[i]], streamed past the caches (vmovntps) when the tile's first vector is
 * aligned to the vector width (the planes are whole vectors of bytes, so then all are),
 * plain stores otherwise (a caller's unaligned output). */
static void flat_store_nt(cg_ctx *c, const conv_geom *g, const conv_row *r, LLVMValueRef *v, LLVMValueRef *oi, int n) {
  int64_t vb = (int64_t)g->V * 4;
  LLVMValueRef a0 = LLVMBuildPtrToInt(c->b, cg_gep_f32(c, r->out, oi[0]), c->t_i64, "");
  LLVMValueRef al = LLVMBuildICmp(c->b, LLVMIntEQ, LLVMBuildAnd(c->b, a0, cg_i64(c, vb - 1), ""), cg_i64(c, 0), "nt_al");
  LLVMMetadataRef one = LLVMValueAsMetadata(cg_i32(c, 1));
  unsigned kind = LLVMGetMDKindIDInContext(c->llc, "nontemporal", 11);
  cg_if f;
  cg_if_begin(c, &f, al);
  for (int i = 0; i < n; i++) {
    LLVMValueRef s = LLVMBuildStore(c->b, v[i], cg_gep_f32(c, r->out, oi[i]));
    LLVMSetAlignment(s, (unsigned)vb);
    LLVMSetMetadata(s, kind, LLVMMetadataAsValue(c->llc, LLVMMDNodeInContext2(c->llc, &one, 1)));
  }
  cg_if_else(c, &f);
  for (int i = 0; i < n; i++) cg_store_v(c, v[i], r->out, oi[i], g->V);
  cg_if_end(c, &f);
}

/* Prefetch in the item that packs a chunk (xmode 2; flat_pack_pf_dist), opt-in: its K loop
 * reads the tile's np*V pixels of one channel plane per step, planes H*W elements apart
 * (`perf annotate`, ResNet-50 b1, 2 threads: the packing loop took 14-21 % of layer3's
 * 1024 -> 256 kernels for 1/11 of their FMAs).  With tune flat_pack_pf=N each K step
 * prefetches (prefetcht0) the same pixels N planes ahead (at most half of Cin_g): that
 * loop's share fell to 11-14 % (48
 * planes; 13-17 % at 8, 12-16 % at 128), but bench/opcmp.py could not tell it from the noise
 * on three one-stage models (layer1/2/3 cuts, 0.95-1.02x whole-cut CPU time either way), so
 * it is off by default (docs/codegen.md "Flat tails"). */
static int flat_pack_pf_dist(cg_ctx *c) { return cg_tune(c)->flat_pack_pf; }
static void flat_pack_prefetch(cg_ctx *c, const conv_geom *g, const conv_row *r, LLVMValueRef row, LLVMValueRef ix0, int np) {
  int64_t d = flat_pack_pf_dist(c);
  if (d > g->cin_g / 2) d = g->cin_g / 2;
  if (d < 1) return;
  int64_t es = r->xdt != IR_F32 ? 2 : 4, lines = ((int64_t)np * g->V * es + 63) / 64;
  LLVMValueRef e0 = LLVMBuildAdd(c->b, LLVMBuildAdd(c->b, row, ix0, ""), cg_i64(c, d * g->h * g->w), "");
  for (int64_t j = 0; j <= lines; j++) { /* one more line: the tile need not start on a line */
    LLVMValueRef off = LLVMBuildAdd(c->b, LLVMBuildMul(c->b, e0, cg_i64(c, es), ""), cg_i64(c, 64 * j), "");
    LLVMValueRef args[4] = {LLVMBuildGEP2(c->b, c->t_i8, r->x, &off, 1, "ppf"), cg_i32(c, 0), cg_i32(c, 3), cg_i32(c, 1)};
    cg_intrinsic(c, "llvm.prefetch", &c->t_ptr, 1, args, 4);
  }
}

/* Weight prefetch of flat convs at batch 1 (flat_w_prefetch; tune flat_w_pf=0 in cnnc's
 * environment turns it off).  There each weight is used for one image only, and ResNet-50's
 * 100 MB of weights stream from memory every pass: a channel tile's packed weights arrive
 * with its first microkernel's loads.  Every K step of a packed chunk's microkernel now
 * prefetches (prefetcht0) the same K step of the next channel tile, the thread's next item
 * of the chunk (the tile order of conv_item and conv_flat_split_item): one prefetch per
 * R*P FMAs, redundant in the chunk's later pixel tiles (the lines are cached by then).
 * Measured on ResNet-50 b1 (bench/opcmp.py, CPU time, 2 threads, min of 8, load ~15): the
 * 12x32 layer3 1x1 convs 1.09x (conv1s) and 1.18x (conv3s with the add), layer2 conv3s
 * 1.11x, the other flat convs 0.97-1.02x, whole model 0.949x CPU time; prefetcht1 /
 * prefetchnta / two tiles ahead measured 0.952 / 0.961 / 0.972x.  Not at batch 16, where a
 * thread reuses the weights for its images (the layer3 1x1 convs 0.97x with it). */
#define FLAT_W_PF_MAX_BATCH 1
static int64_t flat_w_pf_dist(const conv_geom *g) {
  if (g->n > FLAT_W_PF_MAX_BATCH || !g->tune->flat_w_pf) return 0;
  return (int64_t)g->cin_g * g->kh * g->kw * g->R;
}

/* xp: a flat conv's packed input panels (flat_tiles), NULL otherwise; the tile's pixels for
 * input channel ci are at xp[xp_base + ci*np*V ..] (interior tiles only).  xmode 1 reads
 * them there, xmode 2 reads the planes and writes them there.  pf (xmode 1, else NULL): byte
 * offset in x of one cache line of the thread's next chunk in channel plane 0; the K loop
 * prefetches that line of every plane ci (flat_prefetch).  epi (NULL: none): the output
 * element of the tile whose residuals flat_prefetch_epi prefetches. */
static void conv_tile_x(cg_ctx *c, const conv_geom *g, const conv_row *r, const conv_epi *e, int rr, int np,
                        LLVMValueRef ox, int64_t ox_const, int64_t ox_end, LLVMValueRef xp, LLVMValueRef xp_base,
                        int xmode, LLVMValueRef pf, LLVMValueRef epi, int nt, int64_t wpf) {
  int V = g->V;
  unsigned full = V >= 32 ? ~0u : (1u << V) - 1;
  LLVMTypeRef vt = cg_vtype(c, V);
  LLVMValueRef acc[64], row, wrow;
  cg_loop CI, KY;
  if (epi) flat_prefetch_epi(c, g, r, e, rr, epi, np);
  LLVMValueRef ix0 = cg_conv_tile_begin(c, g, r, ox, rr * np, acc, &CI, &KY, &row, &wrow);
  LLVMValueRef cur[64];
  for (int i = 0; i < rr * np; i++) cur[i] = LLVMBuildLoad2(c->b, vt, acc[i], "");
  LLVMValueRef prow = xp ? LLVMBuildAdd(c->b, xp_base, LLVMBuildMul(c->b, CI.iv, cg_i64(c, (int64_t)np * V), ""), "prow") : NULL;
  if (xp && xmode == 2 && ox_const < 0) flat_pack_prefetch(c, g, r, row, ix0, np);
  if (pf) {
    int64_t plane = g->h * g->w * (r->xdt != IR_F32 ? 2 : 4);
    LLVMValueRef off = LLVMBuildAdd(c->b, pf, LLVMBuildMul(c->b, CI.iv, cg_i64(c, plane), ""), "pf_off");
    LLVMValueRef args[4] = {LLVMBuildGEP2(c->b, c->t_i8, r->x, &off, 1, "pf"), cg_i32(c, 0), cg_i32(c, 2), cg_i32(c, 1)};
    cg_intrinsic(c, "llvm.prefetch", &c->t_ptr, 1, args, 4);
  }
  if (wpf) { /* flat_w_prefetch: the same K step's weights of the tile wpf floats ahead */
    LLVMValueRef off = LLVMBuildMul(c->b, LLVMBuildAdd(c->b, wrow, cg_i64(c, wpf), ""), cg_i64(c, 4), "wpf_off");
    LLVMValueRef args[4] = {LLVMBuildGEP2(c->b, c->t_i8, r->wp, &off, 1, "wpf"), cg_i32(c, 0), cg_i32(c, 3), cg_i32(c, 1)};
    cg_intrinsic(c, "llvm.prefetch", &c->t_ptr, 1, args, 4);
  }
  for (int kx = 0; kx < g->kw; kx++) {
    LLVMValueRef xv[16];
    unsigned ms[16];
    for (int p = 0; p < np; p++) {
      int64_t o = ox_const + (int64_t)p * V, last_read = (o + V - 1) * g->sw - g->pl + (int64_t)kx * g->dw + 1;
      ms[p] = ox_const < 0 ? full : lane_in_mask(g, o, ox_end, kx);
      if (!ms[p]) continue;
      if (xp && xmode == 1) {
        xv[p] = cg_load_v(c, xp, LLVMBuildAdd(c->b, prow, cg_i64(c, (int64_t)p * V), ""), V);
        continue;
      }
      LLVMValueRef idx = LLVMBuildAdd(c->b, row, LLVMBuildAdd(c->b, ix0, cg_i64(c, (int64_t)p * V * g->sw + (int64_t)kx * g->dw), ""), "");
      xv[p] = load_pixels(c, g, r->x, idx, ms[p], ox_const < 0 || last_read < g->w, r->xdt);
      xv[p] = cg_conv_xscale(c, r, CI.iv, xv[p]); /* squeeze-excite (gen_conv_se.c); packed panels hold scaled pixels */
      if (xp) cg_store_v(c, xv[p], xp, LLVMBuildAdd(c->b, prow, cg_i64(c, (int64_t)p * V), ""), V);
    }
    for (int k = 0; k < rr; k++) {
      LLVMValueRef wb = cg_splat(c, cg_load_f32(c, r->wp, LLVMBuildAdd(c->b, wrow, cg_i64(c, (int64_t)kx * g->R + k), "")), V);
      for (int p = 0; p < np; p++)
        if (ms[p]) cur[k * np + p] = cg_fma(c, wb, xv[p], cur[k * np + p]);
    }
  }
  for (int i = 0; i < rr * np; i++) LLVMBuildStore(c->b, cur[i], acc[i]);
  cg_loop_end(c, &KY);
  cg_loop_end(c, &CI);
  LLVMValueRef ntv[64], nti[64];
  for (int k = 0; k < rr; k++) {
    LLVMValueRef bias = cg_splat(c, cg_load_f32(c, r->bp, LLVMBuildAdd(c->b, r->bbase, cg_i64(c, k), "")), V);
    LLVMValueRef orow = LLVMBuildAdd(c->b, r->out_row, cg_i64(c, k * g->oh * g->ow), "");
    for (int p = 0; p < np; p++) {
      unsigned mo = ox_const < 0 ? full : lane_out_mask(g, ox_const + (int64_t)p * V, ox_end);
      if (!mo) continue;
      LLVMValueRef oi = LLVMBuildAdd(c->b, orow, LLVMBuildAdd(c->b, ox, cg_i64(c, (int64_t)p * V), ""), "oi");
      LLVMValueRef v = LLVMBuildFAdd(c->b, LLVMBuildLoad2(c->b, vt, acc[k * np + p], ""), bias, "");
      for (int q = 0, ra = 0; q < e->n_post; q++) {
        ir_dtype rdt = e->post[q]->op == IR_OP_add ? r->rdt[ra] : IR_F32;
        LLVMValueRef res = e->post[q]->op == IR_OP_add ? r->resid[ra++] : NULL;
        if (e->post[q]->op == IR_OP_round16 && r->odt != IR_F32) continue; /* the 16-bit store rounds */
        if (res && mo != full) v = LLVMBuildFAdd(c->b, v, cg_act_masked_load(c, e->post[q], res, oi, mo, V, rdt), "resid");
        else if (res && rdt != IR_F32) v = LLVMBuildFAdd(c->b, v, cg_act_load(c, e->post[q], res, oi, V, rdt), "resid");
        else v = cg_epilogue(c, e->post[q], v, res, oi, V);
      }
      if (nt) ntv[k * np + p] = v, nti[k * np + p] = oi;
      else if (mo == full) cg_act_store(c, e->n_post ? e->post[e->n_post - 1] : NULL, v, r->out, oi, V, r->odt);
      else cg_act_masked_store(c, e->n_post ? e->post[e->n_post - 1] : NULL, v, r->out, oi, mo, V, r->odt);
    }
  }
  if (nt) flat_store_nt(c, g, r, ntv, nti, rr * np);
}

static void conv_tile(cg_ctx *c, const conv_geom *g, const conv_row *r, const conv_epi *e, int rr, int np,
                      LLVMValueRef ox, int64_t ox_const, int64_t ox_end) {
  conv_tile_x(c, g, r, e, rr, np, ox, ox_const, ox_end, NULL, NULL, 0, NULL, NULL, 0, 0);
}

/* Compile-time column tiles at ox0.. (np vectors each, masked), up to the end `to`. */
static void masked_tiles(cg_ctx *c, const conv_geom *g, const conv_row *r, const conv_epi *e, int rr, int64_t from,
                         int64_t to) {
  while (from < to) {
    int64_t nv = (to - from + g->V - 1) / g->V;
    int np = (int)(nv < g->P ? nv : g->P);
    conv_tile(c, g, r, e, rr, np, cg_i64(c, from), from, to);
    from += (int64_t)np * g->V;
  }
}

/* One output row of rr channels: a masked first tile over the left border, unmasked interior
 * tiles (run-time loop), masked tiles over the rest.  Tiles are P vectors wide where they
 * can be (a narrow row is a single tile). */
static void conv_row_emit(cg_ctx *c, const conv_geom *g, const conv_row *r, const conv_epi *e, int rr) {
  int V = g->V, extra = g->sw == 2 ? 1 : 0;
  int64_t tile_px = (int64_t)g->P * V;
  int64_t a = (g->pl + g->sw - 1) / g->sw;
  int64_t lim = g->w - 1 - extra + g->pl - (int64_t)(g->kw - 1) * g->dw, b = lim < 0 ? 0 : lim / g->sw + 1;
  if (b > g->ow) b = g->ow;
  int64_t left = (a + tile_px - 1) / tile_px * tile_px; /* interior starts at a tile boundary */
  if (left > b) left = b;
  int64_t nfull = (b - left) / tile_px;
  if (nfull == 0) left = 0; /* no interior: the whole row in masked tiles */
  masked_tiles(c, g, r, e, rr, 0, left);
  if (nfull > 0) {
    cg_loop L;
    LLVMValueRef i = cg_loop_begin(c, &L, cg_i64(c, 0), cg_i64(c, nfull), cg_i64(c, 1), "ox");
    conv_tile(c, g, r, e, rr, g->P, LLVMBuildAdd(c->b, cg_i64(c, left), LLVMBuildMul(c->b, i, cg_i64(c, tile_px), ""), ""), -1, 0);
    cg_loop_end(c, &L);
  }
  masked_tiles(c, g, r, e, rr, left + nfull * tile_px, g->ow);
}

/* Input panel packing of flat convs (1x1/s1/p0 GEMMs on pixel vectors).  Unpacked, a tile's
 * K loop reads one P*V-pixel piece of each of the cin_g channel planes, HW*4 bytes apart
 * (12.5 KB on ResNet-50's 56x56 maps): cin_g separate streams that the hardware prefetchers
 * do not follow.  Packed, the chunk's whole tiles are kept in a stack buffer laid out
 * [tile][ci][P*V] (the microkernel's read order), written by the first work item of the
 * chunk and read sequentially by the others (flat_tiles); consecutive items (channel tiles
 * fastest) reuse the buffer.  key: the input element of the chunk in the buffer (-1: none).
 * tune conv_pack turns it off (A/B measurements). */
typedef struct conv_xpack {
  LLVMValueRef buf, key;
  /* flat_prefetch (NULL: off): the thread's tiles per chunk (run time) as conv_item takes
   * them; this item's position among them and their count in its chunk */
  LLVMValueRef part, pf_pos, pf_cnt;
  int pf_epi; /* flat_prefetch_epi */
  int nt;     /* flat_store_nt */
  int64_t wpf; /* flat_w_prefetch: floats ahead in the packed weights, 0: off */
} conv_xpack;

/* Packed buffer floats of a flat conv (its widest chunk), 0 when it is not packed: a single
 * channel tile (no reuse), or a chunk beyond CONV_PACK_MAX_BYTES of stack. */
#define CONV_PACK_MAX_BYTES (256 * 1024)

/* Pixels per work item of a flat conv: whole tiles, x chunk of ~128 KB (stays in L2 while
 * the thread walks the channel tiles; measured on ResNet-50 AVX2: ~6 % faster 1x1 convs than
 * 32 KB chunks, mostly the 7x7 layer4 GEMMs whose chunk was a single tile). */
static int64_t flat_chunk_px(const conv_geom *g) {
  int64_t tile_px = (int64_t)g->P * g->V, want = 131072 / (4 * g->cin_g);
  int64_t k = want / tile_px;
  if (k < 1) k = 1;
  int64_t whole = (g->ow + tile_px - 1) / tile_px;
  return (k < whole ? k : whole) * tile_px;
}

static int64_t conv_pack_floats(const conv_geom *g) {
  if (!g->flat || (int64_t)g->groups * g->ntile < 2) return 0;
  int64_t f = flat_chunk_px(g) * g->cin_g;
  return f * 4 <= CONV_PACK_MAX_BYTES ? f : 0;
}

/* Next-chunk prefetch (tune flat_prefetch turns it off).  At
 * batch 16 a flat conv's input streams from memory (ResNet-50 layer1's 256-channel 56x56
 * maps: 51 MB), and the item that packs a chunk (below) stalled on it: `perf annotate` of
 * layer1/1/conv1 (16 channel tiles) put 29 % of the kernel's samples in that item's loop,
 * which does 1/16 of the FMAs, layer3/1/conv1 (43 tiles) 16 % for 1/43 (at batch 1 the maps
 * sit in L3).  So the chunk's other items (xmode 1, reading the panels) prefetch the thread's
 * next chunk, spread evenly: slot s = (pos - 1) * ntl + pixel tile of the nth item's ntl
 * tiles, of S = (cnt - 1) * ntl, takes line s * L / S of the next chunk's L lines, for every
 * input channel (one prefetch per K step, prefetcht1; a line is prefetched by several
 * consecutive slots when S > L).  nxt: the next chunk's input element in channel plane 0
 * (run time); returns the byte offset of the slot's line there.  Convs with a fused residual
 * add are left out: their epilogue streams the residual and the output from memory, and with
 * the prefetch ResNet-50's conv3s measured 0.93-0.99x per CPU-second (the conv1s 1.05-1.17x);
 * prefetching each line once only (a second microkernel without the prefetch) left the conv3s
 * at 0.97-1.02x and the conv1s 2-4 % below the every-slot version.  Inputs under
 * FLAT_PF_MIN_BYTES for the batch are left out too: at batch 1 (ResNet-50's maps 0.8-3.2 MB,
 * in L3) layer2's 512 -> 128 convs measured 0.91-0.94x with the prefetch; at 8 MB
 * EfficientNet-B0 b16's 144 -> 40 project conv (7.2 MB) lost its 1.32x. */
#define FLAT_PF_MIN_BYTES (4.0 * 1024 * 1024)
/* At batch 1 with the weight prefetch (flat_w_prefetch) the floor is 512 KB: ResNet-50 b1
 * (bench/opcmp.py, 2 threads, min of 8-10, load 15-19, both orders: A = the 4 MB floor) then
 * measured its conv1s without an add 1.09x / 1.12x (8x48: layer1-2, layer3/0; two runs) and
 * 1.12x / 1.07x (12x32: layer3) per CPU-second, the conv3s (no x prefetch) 0.96-1.11x as noise.
 * tune flat_pf_b1=0 keeps the 4 MB floor at batch 1 (A/B). */
#define FLAT_PF_MIN_BYTES_B1 (512.0 * 1024)
static double flat_pf_min_bytes(const conv_geom *g) {
  return g->n == 1 && g->tune->flat_pf_b1 ? FLAT_PF_MIN_BYTES_B1 : FLAT_PF_MIN_BYTES;
}
/* Slots per prefetched line.  The next chunk's L lines are spread over the S = (tiles - 1) x
 * ntl pixel tiles of the chunk's other items, so each line is prefetched by ~S / L slots
 * (~Cout / 6 with 12-accumulator tiles: S / L grows with the output channels, the chunk's
 * bytes are fixed).  Measured at batch 16 (bench/opcmp.py, one-conv models, 2 threads, 3
 * interleaved rounds of 12-15 repeats, CPU time, 26 Nov 19:47-19:54, load 15-19), prefetch vs
 * tune flat_prefetch=0: S/L 8 (256 -> 64 at 56x56) 1.17-1.39x, 16 (512 -> 128 at 28x28)
 * 1.05-1.06x, 17 (256 -> 128 at 56x56) 0.95-1.07x, 28 (1024 -> 256 at 14x14) 1.04-1.06x, but
 * 32 (512 -> 256 at 28x28, ResNeXt-50's layer2 conv1s and ResNet-50's layer3/0/conv1)
 * 0.97-0.99x, 35 (256 -> 256 at 56x56) 0.93-0.99x, 57 (1024 -> 512) 1.00-1.04x, 64 (512 ->
 * 512) 0.94-0.98x, 113 (1024 -> 1024) 0.97-1.01x: the wider convs do enough FMAs per chunk
 * to hide its loads, and the redundant prefetches (one per K step of every slot) only cost.
 * Convs with at most SMALL_K_CIN input channels (504-pixel chunks, 21 tiles per item) gained
 * at every width measured: 64 -> 64 / 128 / 256 at 56x56 (S/L 9 / 19 / 40) 1.20-1.22x /
 * 1.09x / 1.03-1.04x (2 rounds of 15, 20:00, load 15-16).  So the prefetch is left out above
 * FLAT_PF_MAX_SPL slots per line unless Cin_g <= SMALL_K_CIN (tune flat_pf_max_spl in cnnc's
 * environment sets another limit, 0: none, for A/B measurements). */
static int flat_prefetch_ok(const conv_geom *g, const conv_row *r) {
  int64_t es = r->xdt != IR_F32 ? 2 : 4, L = (flat_chunk_px(g) * es + 63) / 64 + 1;
  int64_t S = ((int64_t)g->groups * g->ntile - 1) * (flat_chunk_px(g) / ((int64_t)g->P * g->V));
  int64_t lim = g->tune->flat_pf_max_spl;
  return lim <= 0 || S <= lim * L || g->cin_g <= SMALL_K_CIN;
}
static LLVMValueRef flat_prefetch_line(cg_ctx *c, const conv_geom *g, const conv_row *r, const conv_xpack *pk,
                                       LLVMValueRef nxt, LLVMValueRef i, int64_t ntl) {
  int64_t es = r->xdt != IR_F32 ? 2 : 4, L = (flat_chunk_px(g) * es + 63) / 64 + 1;
  LLVMValueRef pos = cg_max64(c, LLVMBuildSub(c->b, pk->pf_pos, cg_i64(c, 1), ""), cg_i64(c, 0));
  LLVMValueRef s = LLVMBuildAdd(c->b, LLVMBuildMul(c->b, pos, cg_i64(c, ntl), ""), i, "pf_slot");
  LLVMValueRef S = cg_max64(c, LLVMBuildMul(c->b, LLVMBuildSub(c->b, pk->pf_cnt, cg_i64(c, 1), ""), cg_i64(c, ntl), ""), cg_i64(c, 1));
  LLVMValueRef line = cg_min64(c, LLVMBuildSDiv(c->b, LLVMBuildMul(c->b, s, cg_i64(c, L), ""), S, ""), cg_i64(c, L - 1));
  return LLVMBuildAdd(c->b, LLVMBuildMul(c->b, nxt, cg_i64(c, es), ""), LLVMBuildMul(c->b, line, cg_i64(c, 64), ""), "pf_line");
}

/* Non-temporal output stores (flat_store_nt) for flat convs with a fused residual add whose
 * f32 output (whole vectors per plane) is at least FLAT_NT_MIN_BYTES for the batch, on
 * vectors of a whole cache line (V*4 >= 64).  Their epilogue streams the residual in and the
 * output out (ResNet-50 b16 layer1: 64 -> 256 at 56x56, 3.2 MB in, 3.2 MB out per image):
 * plain stores read each output line first (write-allocate) and fill the caches with lines
 * the next kernel reads long after.  Measured (bench/opcmp.py, both .so from one cnnc, A with
 * tune flat_nt=0, 2 threads, 6-8 repeats, load 18-25, Zen 5 AVX-512): ResNet-50 b16
 * layer1 conv3s 1.03-1.20x per CPU-second, layer2 conv3s 1.09-1.11x; ResNeXt-50 b16 (K twice
 * as large) layer1 conv3s 0.90-1.11x, layer2 1.00-1.07x over two rounds.  Not taken: convs
 * without an add (layer1/0's downsample, whose output the next kernel reads as its residual,
 * 0.88x; layer2/0/conv1 0.96x), and 8-lane vectors (half-line stores: a one-block model on
 * AVX2 code, 0.93x / 0.98x on its 64 -> 256 / 128 -> 512 conv3).  tune flat_nt=0 in
 * cnnc's environment turns them off, tune flat_nt_all=1 on for every flat f32 conv of
 * whole-vector planes (A/B measurements). */
#define FLAT_NT_MIN_BYTES (16.0 * 1024 * 1024)
static int flat_nt_ok(const conv_geom *g, const conv_row *r) {
  if (r->odt != IR_F32 || (g->oh * g->ow) % g->V || !g->tune->flat_nt) return 0;
  return g->tune->flat_nt_all ||
         (r->resid[0] && g->V * 4 >= 64 && (double)g->n * g->cout * g->oh * g->ow * 4 >= FLAT_NT_MIN_BYTES);
}

/* ntl whole unmasked tiles from pixel c0: without pk read from the planes; with pk, the
 * first item of a chunk reads the planes and writes each tile's pixels into its panel
 * ("pack on first use": the copy costs one store per loaded vector inside that item's
 * microkernel, and its reads of the not yet cached chunk overlap the FMAs as before), the
 * chunk's other items read the panels.  (Packing the chunk up front in a copy loop stalled
 * on the chunk's first reads from memory: ResNet-50 layer1/2 1x1 convs 0.8x.) */
static void flat_tiles(cg_ctx *c, const conv_geom *g, const conv_row *r, const conv_epi *e, int rr, const conv_xpack *pk,
                       LLVMValueRef c0, int64_t ntl, LLVMValueRef nxt) {
  if (ntl <= 0) return;
  int64_t tile_px = (int64_t)g->P * g->V;
  cg_if f;
  if (pk) {
    LLVMValueRef key = LLVMBuildAdd(c->b, r->in_base, c0, "pkey");
    cg_if_begin(c, &f, LLVMBuildICmp(c->b, LLVMIntNE, LLVMBuildLoad2(c->b, c->t_i64, pk->key, ""), key, ""));
    LLVMBuildStore(c->b, key, pk->key);
  }
  for (int mode = pk ? 2 : 0; mode >= (pk ? 1 : 0); mode--) {
    if (pk && mode == 1) cg_if_else(c, &f);
    cg_loop L;
    LLVMValueRef i = cg_loop_begin(c, &L, cg_i64(c, 0), cg_i64(c, ntl), cg_i64(c, 1), "ox");
    LLVMValueRef ox = LLVMBuildAdd(c->b, c0, LLVMBuildMul(c->b, i, cg_i64(c, tile_px), ""), "");
    LLVMValueRef pf = pk && mode == 1 && pk->pf_pos && nxt ? flat_prefetch_line(c, g, r, pk, nxt, i, ntl) : NULL, epi = NULL;
    if (pk && pk->pf_epi) /* flat_prefetch_epi: the next pixel tile, after the last the next channel tile's first */
      epi = LLVMBuildSelect(c->b, LLVMBuildICmp(c->b, LLVMIntEQ, i, cg_i64(c, ntl - 1), ""),
                            LLVMBuildAdd(c->b, r->out_row, LLVMBuildAdd(c->b, c0, cg_i64(c, (int64_t)g->R * g->oh * g->ow), ""), ""),
                            LLVMBuildAdd(c->b, r->out_row, LLVMBuildAdd(c->b, ox, cg_i64(c, tile_px), ""), ""), "pf_epi");
    if (pk) conv_tile_x(c, g, r, e, rr, g->P, ox, -1, 0, pk->buf, LLVMBuildMul(c->b, i, cg_i64(c, g->cin_g * tile_px), ""), mode, pf, epi, pk->nt,
                        pk->wpf);
    else conv_tile(c, g, r, e, rr, g->P, ox, -1, 0);
    cg_loop_end(c, &L);
  }
  if (pk) cg_if_end(c, &f);
}

/* The masked tail of a flat conv's plane (the last ow % (P*V) pixels, fewer than a tile) on
 * channel vectors: a pixel tile there is one or more vectors with few lanes in use (ResNet-50
 * b1 layer3, 196 pixels in 12x32 tiles: a 4-of-16-lane vector, 12 FMAs and 13 loads per
 * input channel; `perf annotate`, 2 threads: 7-10 % of the 1x1 kernels' samples for 2 % of
 * their pixels).  Here the rr <= V channels of the tile are the lanes: per input channel one
 * masked load of the packed weights [ci][R] and one broadcast and FMA per tail pixel, then
 * the epilogue per pixel with the residual gathered and the result scattered (lane k at plane
 * k).  Each output is the same fmuladd chain over ci, plus the bias, as the pixel tile's:
 * bitwise equal.  f32 operands only (not 16-bit storage, not a squeeze-excite scale);
 * tune flat_tail_cv=0 keeps the masked pixel tiles (A/B). */
#define FLAT_TAIL_CV_MAX_PX 8
static int flat_tail_cv_ok(const conv_geom *g, const conv_row *r, const conv_epi *e, int rr, int64_t npx) {
  if (!g->flat || rr > g->V || g->V > 32 || npx < 1 || npx > FLAT_TAIL_CV_MAX_PX || r->xdt != IR_F32 ||
      r->odt != IR_F32 || r->xs || !g->tune->flat_tail_cv)
    return 0;
  for (int q = 0, ra = 0; q < e->n_post; q++)
    if (e->post[q]->op == IR_OP_add && r->rdt[ra++] != IR_F32) return 0;
  return 1;
}

/* Lane k: base + idx + k*plane, as a vector of pointers. */
static LLVMValueRef plane_ptrs(cg_ctx *c, const conv_geom *g, LLVMValueRef base, LLVMValueRef idx) {
  LLVMValueRef e[32];
  for (int k = 0; k < g->V; k++) e[k] = cg_i64(c, (int64_t)k * g->oh * g->ow);
  LLVMValueRef p = LLVMBuildGEP2(c->b, c->t_f32, base, &idx, 1, "");
  LLVMValueRef off = LLVMConstVector(e, (unsigned)g->V);
  return LLVMBuildGEP2(c->b, c->t_f32, p, &off, 1, "lane_ptrs");
}

static void flat_tail_cv(cg_ctx *c, const conv_geom *g, const conv_row *r, const conv_epi *e, int rr, int64_t px0,
                         int npx) {
  int V = g->V;
  LLVMTypeRef vt = cg_vtype(c, V), pvt = LLVMVectorType(c->t_ptr, (unsigned)V);
  unsigned m = rr >= 32 ? ~0u : (1u << rr) - 1;
  LLVMValueRef acc[FLAT_TAIL_CV_MAX_PX], cur[FLAT_TAIL_CV_MAX_PX], mask = cg_conv_mask_const(c, m, V);
  for (int p = 0; p < npx; p++) {
    acc[p] = cg_entry_alloca(c, vt, "tacc");
    LLVMBuildStore(c->b, cg_fzero(c, V), acc[p]);
  }
  cg_loop CI;
  LLVMValueRef ci = cg_loop_begin(c, &CI, cg_i64(c, 0), cg_i64(c, g->cin_g), cg_i64(c, 1), "ci");
  LLVMValueRef wv = cg_conv_masked_load(c, r->wp, LLVMBuildAdd(c->b, r->wbase, LLVMBuildMul(c->b, ci, cg_i64(c, g->R), ""), ""), m, V);
  LLVMValueRef xrow = LLVMBuildAdd(c->b, r->in_base, LLVMBuildAdd(c->b, LLVMBuildMul(c->b, ci, cg_i64(c, g->h * g->w), ""), cg_i64(c, px0), ""), "xrow");
  for (int p = 0; p < npx; p++) {
    LLVMValueRef xb = cg_splat(c, cg_load_f32(c, r->x, LLVMBuildAdd(c->b, xrow, cg_i64(c, p), "")), V);
    cur[p] = cg_fma(c, wv, xb, LLVMBuildLoad2(c->b, vt, acc[p], ""));
    LLVMBuildStore(c->b, cur[p], acc[p]);
  }
  cg_loop_end(c, &CI);
  LLVMValueRef bias = cg_conv_masked_load(c, r->bp, r->bbase, m, V);
  LLVMTypeRef ov[2] = {vt, pvt};
  for (int p = 0; p < npx; p++) {
    LLVMValueRef oi = LLVMBuildAdd(c->b, r->out_row, cg_i64(c, px0 + p), "oi");
    LLVMValueRef v = LLVMBuildFAdd(c->b, LLVMBuildLoad2(c->b, vt, acc[p], ""), bias, "");
    for (int q = 0, ra = 0; q < e->n_post; q++) {
      if (e->post[q]->op != IR_OP_add) {
        v = cg_epilogue(c, e->post[q], v, NULL, NULL, V);
        continue;
      }
      LLVMValueRef ga[4] = {plane_ptrs(c, g, r->resid[ra++], oi), cg_i32(c, 4), mask, cg_fzero(c, V)};
      v = LLVMBuildFAdd(c->b, v, cg_intrinsic(c, "llvm.masked.gather", ov, 2, ga, 4), "resid");
    }
    LLVMValueRef sa[4] = {v, plane_ptrs(c, g, r->out, oi), cg_i32(c, 4), mask};
    cg_intrinsic(c, "llvm.masked.scatter", ov, 2, sa, 4);
  }
}

/* The plane's pixels [from, ow) after the whole tiles: flat_tail_cv or masked pixel tiles. */
static void flat_tail(cg_ctx *c, const conv_geom *g, const conv_row *r, const conv_epi *e, int rr, int64_t from) {
  if (flat_tail_cv_ok(g, r, e, rr, g->ow - from)) flat_tail_cv(c, g, r, e, rr, from, (int)(g->ow - from));
  else masked_tiles(c, g, r, e, rr, from, g->ow);
}

/* 1x1/s1/p0 conv (one long row): pixel chunk [c0, c0 + chunk) of the plane, unmasked tiles
 * when the chunk is whole; the last partial chunk runs its whole tiles unmasked too and the
 * rest as masked tiles. */
static void conv_flat_chunk(cg_ctx *c, const conv_geom *g, const conv_row *r, const conv_epi *e, int rr,
                            const conv_xpack *pk, LLVMValueRef chunk, int64_t chunk_px) {
  int64_t tile_px = (int64_t)g->P * g->V, nfull = g->ow / chunk_px;
  int64_t last_tiles = (g->ow - nfull * chunk_px) / tile_px;
  LLVMValueRef c0 = LLVMBuildMul(c->b, chunk, cg_i64(c, chunk_px), "c0");
  /* the thread's next chunk (flat_prefetch): the next one of the plane, else the next image's first */
  LLVMValueRef next_img = LLVMBuildAdd(c->b, r->in_base, cg_i64(c, g->cin * g->h * g->w), "");
  LLVMValueRef c1 = LLVMBuildAdd(c->b, c0, cg_i64(c, chunk_px), "");
  LLVMValueRef nxt = LLVMBuildSelect(c->b, LLVMBuildICmp(c->b, LLVMIntSLT, c1, cg_i64(c, g->ow), ""),
                                     LLVMBuildAdd(c->b, r->in_base, c1, ""), next_img, "pf_next");
  cg_if f;
  if (nfull > 0 && nfull * chunk_px < g->ow) cg_if_begin(c, &f, LLVMBuildICmp(c->b, LLVMIntSLT, chunk, cg_i64(c, nfull), ""));
  if (nfull > 0) flat_tiles(c, g, r, e, rr, pk, c0, chunk_px / tile_px, nxt);
  if (nfull * chunk_px < g->ow) {
    if (nfull > 0) cg_if_else(c, &f);
    flat_tiles(c, g, r, e, rr, pk, cg_i64(c, nfull * chunk_px), last_tiles, next_img);
    flat_tail(c, g, r, e, rr, nfull * chunk_px + last_tiles * tile_px);
    if (nfull > 0) cg_if_end(c, &f);
  }
}

/* Kernel-row range [ky_lo, ky_hi) that reads real input rows for output row oy. */
static void ky_range(cg_ctx *c, const conv_geom *g, LLVMValueRef oy, conv_row *r) {
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

static const char *conv_kind(cg_ctx *c, const ir_node *n, const conv_geom *g, const pass_fusion *fu, const conv_row *r) {
  char op[128], tile[32];
  int k = snprintf(op, sizeof op, "conv2d%s%s", g->cin_g == 1 && g->cout_g == 1 ? "_dw" : g->groups > 1 ? "_g" : g->gemm ? "_1x1" : g->sub ? "_sub" : "",
                   g->dwp ? "_plane" : g->vc_plane ? "_vcp" : g->vc ? "_vc" : "");
  if (fu->n_pre) k += snprintf(op + k, sizeof op - (size_t)k, "_se"); /* squeeze-excite scale on its input */
  if (fu->bn >= 0) k += snprintf(op + k, sizeof op - (size_t)k, "_bn");
  for (int i = 0; i < fu->n_post && k < 100; i++)
    k += snprintf(op + k, sizeof op - (size_t)k, "_%s", ir_ops[c->g->nodes[fu->post[i]].op].name);
  if (fu->n_side) k += snprintf(op + k, sizeof op - (size_t)k, "_avgpool"); /* second output */
  ir_dtype h = r->xdt != IR_F32 ? r->xdt : r->odt; /* 16-bit storage: "_x16" reads x, "_o16" writes the result */
  for (int i = 0; i < PASS_MAX_POST && h == IR_F32; i++) h = r->rdt[i];
  if (h != IR_F32 && k < 110)
    snprintf(op + k, sizeof op - (size_t)k, "_%s%s%s", h == IR_F16 ? "fp16" : "bf16", r->xdt != IR_F32 ? "_x16" : "",
             r->odt != IR_F32 ? "_o16" : "");
  snprintf(tile, sizeof tile, "%dx%d", g->R, g->vc ? g->P : g->P * g->V); /* channels x pixels */
  return cg_kind(c, op, tile);
}

/* The pixels of one work item for rr channels: an output row, or a chunk of a flat conv. */
static void conv_item_body(cg_ctx *c, const conv_geom *g, const conv_row *r, const conv_epi *e, int rr,
                           const conv_xpack *pk, LLVMValueRef chunk) {
  if (g->flat) conv_flat_chunk(c, g, r, e, rr, pk, chunk, flat_chunk_px(g));
  else if (g->vc_plane) cg_conv_vc_plane(c, g, r, e, rr);
  else if (g->vc) cg_conv_vc_row(c, g, r, e, rr);
  else conv_row_emit(c, g, r, e, rr);
}

/* Rows of work per (image, channel tile): output rows, or pixel chunks of a flat conv. */
static int64_t conv_rows(const conv_geom *g) {
  return g->flat ? (g->ow + flat_chunk_px(g) - 1) / flat_chunk_px(g) : g->vc_plane ? 1 : g->oh;
}

/* Channel tiles per block of a non-flat conv: consecutive tiles whose packed weights fit the
 * op's L2 budget (cg_shard_tile_budget: --available-memory-proportion x L2 per core) less the
 * input rows of one output row, so a thread walks the output rows of one image for a block of
 * tiles with the block's weights in L2 and each input row reused by every tile of the block.
 * Rows-fastest with one tile per block streamed the whole input image from L3 once per tile:
 * ResNet-50's 1x1 stride-2 downsample convs (64 tiles of 32 KB) re-read a 0.8 MB image 64
 * times.  Measured with a 256 KB block (the default budget gives ~250 KB there). */
static int64_t conv_tile_block(const conv_geom *g) {
  int64_t tiles = (int64_t)g->groups * g->ntile, wt = (int64_t)g->cin_g * g->kh * g->kw * g->R * 4;
  int64_t rows_in = (int64_t)g->cin_g * g->kh * g->w * 4, room = g->l2 - rows_in;
  int64_t b = room / (wt > 0 ? wt : 1);
  /* grouped and depthwise convs: tiles of other groups read other input channels, so a block
   * reuses nothing and only breaks the rows-fastest walk of one group's input (ResNeXt-50's
   * grouped 3x3 convs and EfficientNet's depthwise ones ran 10-45 % slower blocked) */
  if (g->flat || g->groups > 1 || b < 1) b = 1;
  return b < tiles ? b : tiles;
}

/* Work item -> (image, group, channel tile, row) -> run-time row values; then its pixels.
 * Order: flat convs run channel tiles fastest (consecutive items reuse the x chunk); other
 * convs run blocks of conv_tile_block tiles: tile within the block fastest, then the row,
 * then the block (the last block may be shorter), then the image. */
static void conv_item(cg_ctx *c, const conv_geom *g, conv_row *r, const conv_epi *e, const conv_xpack *pk,
                      LLVMValueRef it) {
  int64_t tiles = (int64_t)g->groups * g->ntile, rows = conv_rows(g), B = conv_tile_block(g);
  LLVMValueRef row, tile, nb;
  conv_xpack pf;
  if (g->flat) {
    tile = LLVMBuildSRem(c->b, it, cg_i64(c, tiles), "tile");
    LLVMValueRef rest = LLVMBuildSDiv(c->b, it, cg_i64(c, tiles), "");
    row = LLVMBuildSRem(c->b, rest, cg_i64(c, rows), "chunk");
    nb = LLVMBuildSDiv(c->b, rest, cg_i64(c, rows), "nb");
    if (pk && pk->part) { /* flat_prefetch: the item's place in its thread's run of tiles of the chunk */
      pf = *pk;
      pf.pf_pos = LLVMBuildSRem(c->b, tile, pk->part, "pf_pos");
      pf.pf_cnt = cg_min64(c, pk->part, LLVMBuildSub(c->b, cg_i64(c, tiles), LLVMBuildSub(c->b, tile, pf.pf_pos, ""), ""));
      pk = &pf;
    }
  } else if (B <= 1) {
    row = LLVMBuildSRem(c->b, it, cg_i64(c, rows), "oy");
    LLVMValueRef rest = LLVMBuildSDiv(c->b, it, cg_i64(c, rows), "");
    tile = LLVMBuildSRem(c->b, rest, cg_i64(c, tiles), "tile");
    nb = LLVMBuildSDiv(c->b, rest, cg_i64(c, tiles), "nb");
  } else {
    LLVMValueRef per = cg_i64(c, rows * tiles);
    nb = LLVMBuildSDiv(c->b, it, per, "nb");
    LLVMValueRef j = LLVMBuildSRem(c->b, it, per, "j");
    LLVMValueRef blk = LLVMBuildSDiv(c->b, j, cg_i64(c, rows * B), "blk");
    LLVMValueRef k = LLVMBuildSRem(c->b, j, cg_i64(c, rows * B), "");
    LLVMValueRef t0 = LLVMBuildMul(c->b, blk, cg_i64(c, B), "t0");
    LLVMValueRef bs = cg_min64(c, cg_i64(c, B), LLVMBuildSub(c->b, cg_i64(c, tiles), t0, "")); /* tiles in this block */
    row = LLVMBuildSDiv(c->b, k, bs, "oy");
    tile = LLVMBuildAdd(c->b, t0, LLVMBuildSRem(c->b, k, bs, ""), "tile");
  }
  LLVMValueRef oy = g->flat ? cg_i64(c, 0) : row;
  LLVMValueRef gi = LLVMBuildSDiv(c->b, tile, cg_i64(c, g->ntile), "g");
  LLVMValueRef t = LLVMBuildSRem(c->b, tile, cg_i64(c, g->ntile), "t");
  LLVMValueRef co0 = LLVMBuildAdd(c->b, LLVMBuildMul(c->b, gi, cg_i64(c, g->cout_g), ""), LLVMBuildMul(c->b, t, cg_i64(c, g->R), ""), "co0");
  r->in_base = LLVMBuildMul(c->b, LLVMBuildAdd(c->b, LLVMBuildMul(c->b, nb, cg_i64(c, g->cin), ""), LLVMBuildMul(c->b, gi, cg_i64(c, g->cin_g), ""), ""),
                            cg_i64(c, g->h * g->w), "in_base");
  r->out_row = LLVMBuildAdd(c->b, LLVMBuildMul(c->b, LLVMBuildAdd(c->b, LLVMBuildMul(c->b, nb, cg_i64(c, g->cout), ""), co0, ""), cg_i64(c, g->oh * g->ow), ""),
                            LLVMBuildMul(c->b, oy, cg_i64(c, g->ow), ""), "out_row");
  if (r->xs) r->xs_base = LLVMBuildAdd(c->b, LLVMBuildMul(c->b, nb, cg_i64(c, g->cin), ""), LLVMBuildMul(c->b, gi, cg_i64(c, g->cin_g), ""), "xs_base");
  cg_conv_se_item(c, g, r); /* channel vectors: the scaled planes of a new image (gen_conv_se.c) */
  r->wbase = LLVMBuildMul(c->b, tile, cg_i64(c, g->cin_g * g->kh * g->kw * g->R), "wbase");
  r->bbase = LLVMBuildMul(c->b, tile, cg_i64(c, g->R), "bbase");
  ky_range(c, g, oy, r);
  int rem = (int)(g->cout_g % g->R);
  if (!rem) {
    conv_item_body(c, g, r, e, g->R, pk, row);
    return;
  }
  cg_if f;
  cg_if_begin(c, &f, LLVMBuildICmp(c->b, LLVMIntNE, t, cg_i64(c, g->ntile - 1), ""));
  conv_item_body(c, g, r, e, g->R, pk, row);
  cg_if_else(c, &f);
  conv_item_body(c, g, r, e, rem, pk, row);
  cg_if_end(c, &f);
}

/* ---- thread partition of flat convs (issue 4, two-thread scaling; additive: the items and
 * microkernels above are unchanged, only which thread takes which) -------------------------
 * Flat convs number their items (image, chunk, channel tile), tiles fastest, and
 * cg_thread_range gives each thread a contiguous range: whole images when the images divide
 * among the threads, else (batch 1) a run of chunks each - every thread reads half the input
 * and all the weights, but a plane's last chunk is short, so the halves differ (ResNet-50
 * layer3's 1x1 256->1024: chunks of 128 and 68 pixels, balance 0.77; layer2's 128->512: 0.82).
 * The alternative order (image, part, chunk, tile within part), the channel tiles cut into
 * nthreads parts of ceil(tiles/nthreads), balances to a tile and halves each thread's
 * weights, but every thread reads every chunk.  conv_flat_split_tiles picks per layer, for 2
 * threads: the tile split when the pixel split's imbalance costs more than the extra bytes,
 * at FLAT_SPLIT_GFLOPS per thread and FLAT_SPLIT_GBS (assumed rates of this machine's cores
 * and L3; on ResNet-50 b1 it keeps the pixel split where the input dominates - layer1's
 * 256->64 and layer2's 256/512->128 convs; forced to the tile split, layer1's measured
 * 0.81-0.88x per CPU-second - and splits tiles for the other 1x1 convs). */
#define FLAT_SPLIT_GFLOPS 80.0
#define FLAT_SPLIT_GBS 20.0

static int conv_flat_split_tiles(const conv_geom *g) {
  int64_t tiles = (int64_t)g->groups * g->ntile, rows = conv_rows(g), cpx = flat_chunk_px(g), rem = g->cout_g % g->R;
  if (tiles < 2) return 0;
  double work[2] = {0, 0}, all = 0, total = (double)g->n * (double)rows * (double)tiles;
  for (int64_t i = 0; i < (int64_t)total; i++) { /* (image, chunk, tile), tiles fastest; thread = first or second half */
    int64_t t = i % tiles, ch = i / tiles % rows;
    double px = (double)(ch < rows - 1 ? cpx : g->ow - (rows - 1) * cpx), r = rem && t % g->ntile == g->ntile - 1 ? rem : g->R;
    work[2 * i >= (int64_t)total] += px * r;
    all += px * r;
  }
  double bal = all / 2 / (work[0] > work[1] ? work[0] : work[1]);
  double flops = 2.0 * (double)g->cin_g * all / 2, x = 4.0 * (double)g->n * g->cin * g->ow;
  double w = 4.0 * (double)g->groups * g->cin_g * g->cout_g, nch = (double)g->n * rows;
  double px_bytes = x / 2 + (w > (double)g->l2 ? nch / 2 * w : w), tile_bytes = x + (w / 2 > (double)g->l2 ? nch * w / 2 : w / 2);
  double lost = flops / (FLAT_SPLIT_GFLOPS * 1e9) * (1 / bal - 1), extra = (tile_bytes - px_bytes) / (FLAT_SPLIT_GBS * 1e9);
  return lost > extra;
}

/* The tiles-fastest index of the item at position it of the tile-split order (the identity
 * when the images divide among the threads); *part: the tiles a thread runs per chunk. */
static LLVMValueRef conv_flat_split_item(cg_ctx *c, const conv_geom *g, LLVMValueRef it, LLVMValueRef nthreads,
                                         LLVMValueRef *part_tiles) {
  int64_t tiles = (int64_t)g->groups * g->ntile, rows = conv_rows(g);
  LLVMValueRef nt = LLVMBuildSExt(c->b, nthreads, c->t_i64, "");
  LLVMValueRef split = LLVMBuildICmp(c->b, LLVMIntNE, LLVMBuildSRem(c->b, cg_i64(c, g->n), nt, ""), cg_i64(c, 0), "");
  LLVMValueRef part = LLVMBuildSDiv(c->b, LLVMBuildAdd(c->b, cg_i64(c, tiles - 1), nt, ""), nt, "");
  LLVMValueRef B = LLVMBuildSelect(c->b, split, part, cg_i64(c, tiles), "part_tiles");
  *part_tiles = B;
  LLVMValueRef per = cg_i64(c, rows * tiles), rb = LLVMBuildMul(c->b, cg_i64(c, rows), B, "");
  LLVMValueRef nb = LLVMBuildSDiv(c->b, it, per, ""), j = LLVMBuildSRem(c->b, it, per, "");
  LLVMValueRef t0 = LLVMBuildMul(c->b, LLVMBuildSDiv(c->b, j, rb, ""), B, ""), k = LLVMBuildSRem(c->b, j, rb, "");
  LLVMValueRef bs = cg_min64(c, B, LLVMBuildSub(c->b, cg_i64(c, tiles), t0, "")); /* tiles in this part */
  LLVMValueRef row = LLVMBuildSDiv(c->b, k, bs, ""), tile = LLVMBuildAdd(c->b, t0, LLVMBuildSRem(c->b, k, bs, ""), "");
  return LLVMBuildAdd(c->b, LLVMBuildMul(c->b, LLVMBuildAdd(c->b, LLVMBuildMul(c->b, nb, cg_i64(c, rows), ""), row, ""),
                                         cg_i64(c, tiles), ""), tile, "split_item");
}

/* 16-bit inference storage (passes/store16.c): the pixel-vector route (pixel tiles, flat 1x1
 * chunks) reads x and the residuals and writes the result in their dtypes; the others get f32
 * operands from the pass (widen16 nodes). */
static int io16_route(const conv_geom *g, const pass_fusion *fu) { return !g->vc && (!fu->n_side || g->dwp); }

/* Sets r's dtypes from the group's values; an internal error when a 16-bit value reaches a
 * route that reads f32 (the pass and cg_conv_io16_ok disagree). */
static int conv_io16(cg_ctx *c, const ir_node *n, const conv_geom *g, const pass_fusion *fu, conv_row *r) {
  const ir_graph *G = c->g;
  int prev = fu->bn >= 0 ? G->nodes[fu->bn].out : n->out, ra = 0, any = 0;
  int xv = n->in[0];
  if (fu->n_pre) { /* the squeeze-excite map operand (cg_layout.c make_kernel): scaled after the widening load */
    const ir_node *pre = &G->nodes[fu->pre];
    const ir_shape *p0 = &G->values[pre->in[0]].shape, *p1 = &G->values[pre->in[1]].shape;
    xv = pre->in[p1->dim[2] * p1->dim[3] > p0->dim[2] * p0->dim[3]];
  }
  r->xdt = G->values[xv].dtype;
  any |= r->xdt != IR_F32;
  for (int q = 0; q < fu->n_post; q++) {
    const ir_node *m = &G->nodes[fu->post[q]];
    if (m->op == IR_OP_add) any |= (r->rdt[ra++] = G->values[m->in[0] == prev ? m->in[1] : m->in[0]].dtype) != IR_F32;
    prev = m->out;
  }
  r->odt = G->values[G->nodes[fu->last].out].dtype;
  any |= r->odt != IR_F32;
  if (any && !io16_route(g, fu))
    return cg_fail(c, n, "internal error: 16-bit operand of a conv kernel that reads f32"), -1;
  return 0;
}

int cg_conv_io16_ok(cg_ctx *c, const ir_node *n) {
  if (n->op != IR_OP_conv2d) return 0;
  if (cg_conv_bf16_ok(c, n)) return cg_conv_bf16_io16(c, n, 0); /* gen_conv_bf16.c: its epilogue */
  conv_geom g = conv_geometry(c, n);
  const pass_fusion *fu = cg_fusion(c, n);
  g.dw_pool = fu->n_side;
  if (cg_conv_dw_plane_ok(&g)) g.dwp = 1;
  return io16_route(&g, fu);
}

/* The direct route (kernels.def: every inference conv the stem, bf16 and Winograd routes do
 * not take): pixel-vector or channel-vector tiles, depthwise planes. */
LLVMValueRef cg_gen_conv2d_direct(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind) {
  conv_geom g = conv_geometry(c, n);
  const pass_fusion *fu = cg_fusion(c, n);
  g.dw_pool = fu->n_side; /* the plane kernels sum each plane for a fused pool (gen_dwconv.c) */
  if (cg_conv_dw_plane_ok(&g)) g.dwp = 1, g.P = 4; /* P: the tile name (1x32 on AVX2) */
  if (fu->n_side && !g.dwp) return cg_fail(c, n, "internal error: pool fused into a depthwise conv without a plane kernel");
  conv_epi e = {{0}, fu->n_post};
  int n_act = 1;
  for (int i = 0; i < fu->n_post; i++) {
    e.post[i] = &c->g->nodes[fu->post[i]];
    n_act += e.post[i]->op == IR_OP_add;
  }
  n_act += fu->n_pre + fu->n_side; /* squeeze-excite factors or pool output, after the residuals (cg_layout.c) */
  size_t wn = (size_t)g.groups * g.ntile * g.cin_g * g.kh * g.kw * g.R, bn = (size_t)g.groups * g.ntile * g.R;
  float *wp = malloc(wn * sizeof(float)), *bp = malloc(bn * sizeof(float));
  if (!wp || !bp) abort();
  conv_pack(c, n, fu->bn >= 0 ? &c->g->nodes[fu->bn] : NULL, &g, wp, bp);
  LLVMValueRef a[IR_MAX_IN + PASS_MAX_POST + 4];
  LLVMValueRef f = cg_kernel_begin(c, fn_name, n_act, a);
  conv_row r;
  memset(&r, 0, sizeof r);
  r.x = a[0];
  for (int i = 1; i < n_act - fu->n_pre - fu->n_side; i++) r.resid[i - 1] = a[i];
  if (fu->n_pre) r.xs = a[n_act - 1];
  if (fu->n_side) r.pool = a[n_act - 1];
  r.out = a[n_act];
  if (conv_io16(c, n, &g, fu, &r) < 0) {
    free(wp), free(bp);
    return NULL;
  }
  r.wp = cg_blob_const(c, "conv.w", wp, wn * sizeof(float));
  r.bp = cg_blob_const(c, "conv.b", bp, bn * sizeof(float));
  free(wp);
  free(bp);
  LLVMValueRef lo, hi;
  int64_t items = g.dwp ? g.n * g.groups : g.n * g.groups * g.ntile * conv_rows(&g);
  cg_thread_range(c, cg_i64(c, items), a[n_act + 1], a[n_act + 2], &lo, &hi);
  conv_xpack pk = {NULL, NULL, NULL, NULL, NULL, 0, 0};
  int64_t pf = g.dwp ? 0 : conv_pack_floats(&g);
  if (pf > 0 && cg_tune(c)->conv_pack) {
    LLVMValueRef buf = cg_entry_alloca(c, LLVMArrayType2(cg_vtype(c, g.V), (uint64_t)((pf + g.V - 1) / g.V)), "xpack");
    LLVMSetAlignment(buf, 64);
    pk.buf = buf, pk.key = cg_entry_alloca(c, c->t_i64, "xpack_key");
    LLVMBuildStore(c->b, cg_i64(c, -1), pk.key);
  }
  cg_conv_se_begin(c, &g, &r);
  cg_loop L;
  LLVMValueRef it = cg_loop_begin(c, &L, lo, hi, cg_i64(c, 1), "item");
  if (g.dwp) { /* item = (image, channel): in/out planes it, weights and bias of channel it % C */
    LLVMValueRef ch = LLVMBuildSRem(c->b, it, cg_i64(c, g.groups), "ch");
    r.in_base = LLVMBuildMul(c->b, it, cg_i64(c, g.h * g.w), "in_base");
    r.out_row = LLVMBuildMul(c->b, it, cg_i64(c, g.oh * g.ow), "out_row");
    r.wbase = LLVMBuildMul(c->b, ch, cg_i64(c, (int64_t)g.kh * g.kw), "wbase");
    r.bbase = ch;
    cg_conv_dw_plane(c, &g, &r, &e);
  } else {
    LLVMValueRef part = cg_i64(c, (int64_t)g.groups * g.ntile);
    if (g.flat && conv_flat_split_tiles(&g)) it = conv_flat_split_item(c, &g, it, a[n_act + 2], &part);
    double xbytes = (double)g.n * g.cin * g.h * g.w * (r.xdt != IR_F32 ? 2 : 4);
    if (g.flat && g.groups == 1 && !r.resid[0] && xbytes >= flat_pf_min_bytes(&g) && flat_prefetch_ok(&g, &r) &&
        cg_tune(c)->flat_prefetch)
      pk.part = part; /* flat_prefetch */
    pk.pf_epi = g.flat && r.resid[0] && cg_tune(c)->flat_prefetch; /* flat_prefetch_epi */
    pk.nt = g.flat && flat_nt_ok(&g, &r); /* taken by packed chunks only (conv_pack_floats > 0) */
    pk.wpf = g.flat ? flat_w_pf_dist(&g) : 0;
    conv_item(c, &g, &r, &e, pk.buf ? &pk : NULL, it);
  }
  cg_loop_end(c, &L);
  if (pk.nt && pk.buf) /* vmovntps are weakly ordered: fence them before the runtime's barrier publishes y */
    cg_intrinsic(c, "llvm.x86.sse.sfence", NULL, 0, NULL, 0);
  cg_kernel_end(c);
  *kind = conv_kind(c, n, &g, fu, &r);
  return f;
}

/* ---- entry for compiled training (gen_train_pconv.c): the plan of the kernel above and one
 * output row of it for rr channels, reading the packed weights / bias wherever r->wp / r->bp
 * point (training packs them from its state buffer every step).  g->flat must be 0: training
 * views a flat conv's plane as rows of its own width. ---- */
conv_geom cg_conv_geometry(cg_ctx *c, const ir_node *n) { return conv_geometry(c, n); }
void cg_conv_row_pixels(cg_ctx *c, const conv_geom *g, conv_row *r, const conv_epi *e, int rr, LLVMValueRef oy) {
  ky_range(c, g, oy, r);
  if (g->vc) cg_conv_vc_row(c, g, r, e, rr);
  else conv_row_emit(c, g, r, e, rr);
}
/* Training entry for flat convs (g->flat, 1x1 stride 1 unpadded; additive): pixel chunk
 * `chunk` of the plane as conv_item runs it, with the x panel when xbuf is not NULL (xkey:
 * an i64 slot, -1 before the first item; the buffer holds cg_conv_flat_pack_floats(g)). */
int64_t cg_conv_flat_chunk_px(const conv_geom *g) { return flat_chunk_px(g); }
int64_t cg_conv_flat_pack_floats(const conv_geom *g) { return conv_pack_floats(g); }
void cg_conv_flat_pixels(cg_ctx *c, const conv_geom *g, conv_row *r, const conv_epi *e, int rr, LLVMValueRef xbuf,
                         LLVMValueRef xkey, LLVMValueRef chunk) {
  conv_xpack pk = {xbuf, xkey};
  ky_range(c, g, cg_i64(c, 0), r);
  conv_flat_chunk(c, g, r, e, rr, xbuf ? &pk : NULL, chunk, flat_chunk_px(g));
}
