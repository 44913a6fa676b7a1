/* gen_conv_vc.c — conv2d microkernel with output channels in the vector lanes (for strided
 * convs and narrow maps, where pixel vectors would need shuffles or masks): a tile of Rv
 * vectors of V channels x P output pixels; per tap it broadcasts P input pixels (any stride
 * is a scalar load; each tap column loads its own, see vc_unshared), loads Rv weight vectors
 * from the same packed layout
 * [group][Cout_g/R][Cin_g][KH][KW][R] and issues Rv*P llvm.fmuladd.  Border pixels are
 * compile-time positions whose out-of-range taps are simply not emitted; the epilogue
 * stores each vector's lanes to their channel planes. */
#include <stdlib.h>
#include <string.h>

#include "codegen/cg_half_partials.h"
#include "codegen/gen_conv.h"

/* Taps of more than one column load their own broadcasts (no pixel shared between taps),
 * so the tile gets the whole accumulator budget.  Dense convs only: grouped ones (`g_vc`,
 * ResNeXt, often one channel vector per group) keep the shared tiles they were measured
 * with.  tune vc_shared_taps restores the shared broadcasts on 2/3 of
 * the budget for dense convs too (A/B measurements). */
static int vc_unshared(const conv_geom *g) {
  return g->groups == 1 && !g->tune->vc_shared_taps;
}

/* Dense kxk stride-1 convs on maps whose rows fill pixel vectors (ResNet-50 layer1's 56x56x64
 * 3x3) run on channel vectors too when Cout_g gives two channel vectors: the unshared 16x6
 * tiles (12 accumulators, per tap 2 weight loads and 6 broadcasts) measured faster than the
 * direct 6x16 pixel tiles there, 82 -> 92 % of peak per CPU-second at b1 and 80 -> 89 % at
 * b16 (bench/opcmp.py on a one-conv model, 26 Nov 16:30).  Wider maps / other channel counts
 * were not measured.  Inference graphs only (g->vc_wide_ok: no label): compiled training's
 * packed convs keep their pixel-vector kernels (not measured with channel vectors).
 * tune vc_wide keeps the pixel tiles (A/B measurements). */
static int vc_wide(const conv_geom *g) {
  return g->vc_wide_ok && g->kw > 1 && g->kh > 1 && vc_unshared(g) && g->cout_g >= 2 * g->V && g->tune->vc_wide;
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
   * ResNet-50, measured: 2x4 tiles beat 2x6 by ~20%).  Unshared (vc_tile loads every tap's
   * broadcasts) only the accumulators and Rv weight vectors are live: the whole budget (2x6:
   * 12 accumulators, +10-20 % on ResNet-50's 3x3 convs).  A 1x1 conv (the stride-2
   * downsample convs) has one tap and always gets the whole budget. */
  int64_t nv = (g->cout_g + V - 1) / V;
  int rv = nv >= 2 ? 2 : 1;
  g->vc = 1;
  g->R = rv * V;
  g->P = (g->kw > 1 && !vc_unshared(g) ? budget * 2 / 3 : budget) / rv; /* 1x1: no pixel is shared between taps */
  if (g->P > g->ow) g->P = (int)g->ow;
  g->ntile = (int)((g->cout_g + g->R - 1) / g->R);
  return 1;
}

/* Taps of output column ox that read real input columns (all when ox is not constant). */
static int tap_ok(const conv_geom *g, int64_t ox, int kx) {
  if (ox < 0 || g->sub) return 1; /* sub: 1x1 unpadded */
  int64_t ix = ox * g->sw - g->pl + (int64_t)kx * g->dw;
  return ix >= 0 && ix < g->w;
}

/* Epilogue of one vector: bias, fused ops (residual gathered from the channel planes), then
 * the lanes of the rr valid channels stored to out[(co0 + lane) * OH*OW + oy*OW + ox]. */
static void vc_store(cg_ctx *c, const conv_geom *g, const conv_row *r, const conv_epi *e, LLVMValueRef v,
                     int rv, int lanes, LLVMValueRef ox) {
  int V = g->V;
  int64_t plane = g->oh * g->ow;
  LLVMValueRef base = LLVMBuildAdd(c->b, r->out_row, LLVMBuildAdd(c->b, ox, cg_i64(c, (int64_t)rv * V * plane), ""), "");
  v = LLVMBuildFAdd(c->b, v, cg_load_v(c, r->bp, LLVMBuildAdd(c->b, r->bbase, cg_i64(c, (int64_t)rv * V), ""), V), "");
  for (int q = 0, ra = 0; q < e->n_post; q++) {
    if (e->post[q]->op != IR_OP_add) {
      v = cg_epilogue(c, e->post[q], v, NULL, NULL, V);
      continue;
    }
    LLVMValueRef res = cg_fzero(c, V);
    for (int l = 0; l < lanes; l++)
      res = LLVMBuildInsertElement(c->b, res, cg_load_f32(c, r->resid[ra], LLVMBuildAdd(c->b, base, cg_i64(c, l * plane), "")),
                                   cg_i32(c, l), "");
    ra++;
    v = LLVMBuildFAdd(c->b, v, res, "resid");
  }
  for (int l = 0; l < lanes; l++)
    cg_store_f32(c, LLVMBuildExtractElement(c->b, v, cg_i32(c, l), ""), r->out, LLVMBuildAdd(c->b, base, cg_i64(c, l * plane), ""));
}

/* Lanes [0, np) of v (w = V lanes) as a value of cg_vtype(np): a scalar when np = 1. */
static LLVMValueRef vc_first_lanes(cg_ctx *c, LLVMValueRef v, int np) {
  if (np == 1) return LLVMBuildExtractElement(c->b, v, cg_i32(c, 0), "");
  LLVMValueRef m[64];
  for (int i = 0; i < np; i++) m[i] = cg_i32(c, i);
  return LLVMBuildShuffleVector(c->b, v, LLVMGetPoison(LLVMTypeOf(v)), LLVMConstVector(m, (unsigned)np), "");
}

/* Epilogue of a whole tile, acc[v * np + p] (vector v of channels, pixel p, from column ox):
 * bias per channel vector, then the accumulators are transposed in registers so each
 * channel's np pixels are one vector: the fused ops run on it (the residual is one
 * contiguous load of np pixels) and it is stored with one store of np floats (a V=8 tile of
 * 6 pixels: 24 shuffles and 8 6-float stores per vector instead of 48 lane extracts and
 * scalar stores, and 8 residual loads instead of 48 scalar loads and inserts).  The same
 * arithmetic per element as vc_store: the results are bitwise equal. */
static void vc_store_tile(cg_ctx *c, const conv_geom *g, const conv_row *r, const conv_epi *e, const LLVMValueRef *acc,
                          int rr, int np, LLVMValueRef ox) {
  int V = g->V, nrv = (rr + V - 1) / V;
  int64_t plane = g->oh * g->ow;
  if (V < 2 || V > 16 || (V & (V - 1)) || np > V || !cg_tune(c)->vc_transpose) { /* lane by lane (env: A/B) */
    for (int v = 0; v < nrv; v++)
      for (int p = 0; p < np; p++)
        vc_store(c, g, r, e, acc[v * np + p], v, rr - v * V < V ? rr - v * V : V, LLVMBuildAdd(c->b, ox, cg_i64(c, p), ""));
    return;
  }
  for (int v = 0; v < nrv; v++) {
    int lanes = rr - v * V < V ? rr - v * V : V;
    LLVMValueRef bias = cg_load_v(c, r->bp, LLVMBuildAdd(c->b, r->bbase, cg_i64(c, (int64_t)v * V), ""), V);
    LLVMValueRef a[16], t[16];
    for (int p = 0; p < np; p++) a[p] = LLVMBuildFAdd(c->b, acc[v * np + p], bias, "");
    cg_transpose_v(c, V, np, a, t);
    LLVMValueRef base = LLVMBuildAdd(c->b, r->out_row, ox, "");
    for (int l = 0; l < lanes; l++) {
      LLVMValueRef idx = LLVMBuildAdd(c->b, base, cg_i64(c, (int64_t)(v * V + l) * plane), "");
      LLVMValueRef x = vc_first_lanes(c, t[l], np);
      for (int q = 0, ra = 0; q < e->n_post; q++)
        x = e->post[q]->op == IR_OP_add ? cg_epilogue(c, e->post[q], x, r->resid[ra++], idx, np)
                                        : cg_epilogue(c, e->post[q], x, NULL, NULL, np);
      cg_store_v(c, x, r->out, idx, np);
    }
  }
}

/* Small tiles of kxk convs (at most half the accumulator budget, e.g. the 3-pixel tile of a
 * 7-wide row: 6 accumulators, each a chain of cin_g*kh*kw dependent FMAs, at most 6/8 of the
 * FMA throughput at latency 4) sum their odd tap columns into a second set of accumulators,
 * added to the first before the epilogue: twice the independent chains.  (The sum order
 * differs from the one-set tile; the same for every thread count.)  tune vc_split in
 * cnnc's environment turns it off (A/B). */
static int vc_split(const conv_geom *g, int nrv, int np) {
  return g->kw > 1 && !g->sub && vc_unshared(g) && 2 * nrv * np <= g->R / g->V * g->P && g->tune->vc_split;
}

/* The kw taps of one (ci, ky) for np pixels into cur[v * np + p] (split: odd tap columns
 * into cur[nrv * np + v * np + p]): row is the input row's element index for ci, ky; ix0
 * the first input column of the tile's pixel 0; wrow the packed weights of (ci, ky).
 * ox_const >= 0 when the tile's column is known (border taps dropped, sub offsets). */
static void vc_taps(cg_ctx *c, const conv_geom *g, const conv_row *r, int nrv, int np, int64_t ox_const, LLVMValueRef ix0,
                    LLVMValueRef row, LLVMValueRef wrow, LLVMValueRef ci, int split, LLVMValueRef *cur0) {
  int V = g->V;
  for (int kx = 0; kx < g->kw; kx++) {
    LLVMValueRef *cur = split && (kx & 1) ? cur0 + nrv * np : cur0;
    LLVMValueRef wv[4];
    for (int v = 0; v < nrv; v++)
      wv[v] = cg_load_v(c, r->wp, LLVMBuildAdd(c->b, wrow, cg_i64(c, (int64_t)kx * g->R + (int64_t)v * V), ""), V);
    /* unshared taps: this tap's pixels through their own opaque pointer, so LLVM cannot see
     * that pixel p+1 at tap kx is pixel p at tap kx+1 and keep np+2 broadcasts live */
    LLVMValueRef xk = NULL;
    if (g->kw > 1 && !g->sub && vc_unshared(g))
      xk = cg_conv_opaque_ptr(c, cg_gep_f32(c, r->x, LLVMBuildAdd(c->b, row, LLVMBuildAdd(c->b, ix0, cg_i64(c, (int64_t)kx * g->dw), ""), "")));
    for (int p = 0; p < np; p++) {
      if (!tap_ok(g, ox_const < 0 ? -1 : ox_const + p, kx)) continue;
      LLVMValueRef idx = g->sub ? LLVMBuildAdd(c->b, row, cg_i64(c, cg_conv_sub_off(g, ox_const + p)), "") /* ox_const >= 0 */
                                : LLVMBuildAdd(c->b, row, LLVMBuildAdd(c->b, ix0, cg_i64(c, (int64_t)p * g->sw + (int64_t)kx * g->dw), ""), "");
      LLVMValueRef x = xk ? cg_load_f32(c, xk, cg_i64(c, (int64_t)p * g->sw)) : cg_load_f32(c, r->x, idx);
      LLVMValueRef xb = cg_splat(c, cg_conv_xscale(c, r, ci, x), V);
      for (int v = 0; v < nrv; v++) cur[v * np + p] = cg_fma(c, wv[v], xb, cur[v * np + p]);
    }
  }
}

/* np pixels from column ox (run time; ox_const >= 0 when known: border taps dropped). */
static void vc_tile(cg_ctx *c, const conv_geom *g, const conv_row *r, const conv_epi *e, int rr, int np,
                    LLVMValueRef ox, int64_t ox_const) {
  int V = g->V, nrv = (rr + V - 1) / V, n = nrv * np, split = vc_split(g, nrv, np), na = split ? 2 * n : n;
  LLVMTypeRef vt = cg_vtype(c, V);
  LLVMValueRef acc[64], cur[64], row, wrow;
  cg_loop CI, KY;
  LLVMValueRef ix0 = cg_conv_tile_begin(c, g, r, ox, na, acc, &CI, &KY, &row, &wrow);
  for (int i = 0; i < na; i++) cur[i] = LLVMBuildLoad2(c->b, vt, acc[i], "");
  vc_taps(c, g, r, nrv, np, ox_const, ix0, row, wrow, CI.iv, split, cur);
  for (int i = 0; i < na; i++) LLVMBuildStore(c->b, cur[i], acc[i]);
  cg_loop_end(c, &KY);
  cg_loop_end(c, &CI);
  for (int i = 0; i < n; i++) {
    cur[i] = LLVMBuildLoad2(c->b, vt, acc[i], "");
    if (split) cur[i] = LLVMBuildFAdd(c->b, cur[i], LLVMBuildLoad2(c->b, vt, acc[n + i], ""), "");
  }
  vc_store_tile(c, g, r, e, cur, rr, np, ox);
}

/* Compile-time pixels [from, to) in tiles of up to P. */
static void vc_const_tiles(cg_ctx *c, const conv_geom *g, const conv_row *r, const conv_epi *e, int rr, int64_t from,
                           int64_t to) {
  while (from < to) {
    int np = (int)(to - from < g->P ? to - from : g->P);
    vc_tile(c, g, r, e, rr, np, cg_i64(c, from), from);
    from += np;
  }
}

/* Short rows (at most 4 tiles, e.g. 7 or 14 wide) are all compile-time tiles of balanced
 * width: 7 = 4+3 instead of border 1 + interior 4 + border 2, since a 1- or 2-pixel tile
 * loads as many weight vectors per FMA as it issues. */
static int vc_short_row(cg_ctx *c, const conv_geom *g, const conv_row *r, const conv_epi *e, int rr) {
  int64_t nt = (g->ow + g->P - 1) / g->P;
  if (nt > 4 || nt < 1) return 0;
  for (int64_t t = 0, from = 0; t < nt; t++) {
    int64_t to = g->ow * (t + 1) / nt;
    vc_tile(c, g, r, e, rr, (int)(to - from), cg_i64(c, from), from);
    from = to;
  }
  return 1;
}

/* Next-block weight prefetch spread over the tiles of a block.  In a K-blocked row or plane
 * only the first pixel tile of a block reads the block's weights from memory (ResNet-50
 * layer4 at b1: 4-9 MB of weights per conv, each weight used 49 times, not in L3 when the
 * whole network runs); the other tiles re-read them from L1/L2 while the memory system
 * idles, and the first tile stalls on the stream.  Here every tile t of the nt tiles, at
 * iteration j of its K loop over the block, prefetches into L2 its 1/nt share of the next
 * block's weights (bytes ((t * kc + j) * wci / nt) onward from wnext, the element where the
 * next block's weights start, wci weight bytes per input channel): the next block's stream
 * runs during the whole block.  After the last block wnext is the next channel tile's
 * first block (the packed layout is [tile][ci][...]), the next work item of the thread.
 * tune vc_w_spread=0 turns it off (A/B measurements). */
static int vc_w_spread(const conv_geom *g) { return g->tune->vc_w_spread; }

static void vc_w_spread_pf(cg_ctx *c, const conv_row *r, LLVMValueRef wnext, LLVMValueRef j, int64_t t, int64_t nt,
                           int64_t kc, int64_t wci) {
  LLVMValueRef off = LLVMBuildUDiv(c->b, LLVMBuildMul(c->b, LLVMBuildAdd(c->b, j, cg_i64(c, t * kc), ""), cg_i64(c, wci), ""),
                                   cg_i64(c, nt), "");
  LLVMValueRef base = LLVMBuildGEP2(c->b, c->t_f32, r->wp, &wnext, 1, "wnext"); /* may lie past the weights */
  int64_t n = (wci + nt * 64 - 1) / (nt * 64);
  for (int64_t m = 0; m < n; m++) {
    LLVMValueRef o = LLVMBuildAdd(c->b, off, cg_i64(c, m * 64), "");
    LLVMValueRef args[4] = {LLVMBuildGEP2(c->b, c->t_i8, base, &o, 1, "wspf"), cg_i32(c, 0), cg_i32(c, 2), cg_i32(c, 1)};
    cg_intrinsic(c, "llvm.prefetch", &c->t_ptr, 1, args, 4);
  }
}

/* K-blocked short rows of kxk convs: a short row's 2-4 pixel tiles each swept the tile's
 * packed weights of every input channel (ResNet-50 layer4's 3x3: 512 x 9 x 16 floats = 295
 * KB per 16-channel tile, streamed from L2 twice per 7-pixel row; layer3's 147 KB three
 * times per 14-pixel row).  Here the input channels run in blocks whose weights take at most
 * VC_KXK_BLOCK_BYTES (L1), every tile of the row runs over a block while its weights are in
 * L1, and the tiles' accumulators wait in a stack buffer between blocks.  The sums run in the
 * same order as vc_tile's (ci, ky, kx ascending per accumulator; f32 in the buffer): results
 * are bitwise those of the unblocked row.  tune vc_kxk_kblock turns
 * it off (A/B measurements). */
#define VC_KXK_BLOCK_BYTES 16384

/* The K-blocked kernels' frame: nt tiles' accumulator slots (a tile's slot is the whole
 * budget, R/V x P vectors: split tiles) in a zeroed buffer kept between blocks of input
 * channels of ~VC_KXK_BLOCK_BYTES of weights, one accumulator alloca per slot, and the block
 * loop opened with its input-channel range [lo, hi); close it with cg_loop_end(c, &k->KB). */
typedef struct vc_kb {
  int V, nrv, nacc;
  int64_t kc; /* input channels per block */
  LLVMTypeRef vt;
  LLVMValueRef buf, lo, hi, acc[32];
  cg_loop KB;
} vc_kb;

static void vc_kb_begin(cg_ctx *c, const conv_geom *g, int rr, int64_t nt, const char *name, vc_kb *k) {
  int64_t wci = (int64_t)g->kh * g->kw * g->R * 4; /* weight bytes per input channel */
  int64_t kc = VC_KXK_BLOCK_BYTES / wci > 1 ? VC_KXK_BLOCK_BYTES / wci : 1, nkb = (g->cin_g + kc - 1) / kc;
  k->V = g->V, k->nrv = (rr + g->V - 1) / g->V, k->nacc = g->R / g->V * g->P, k->kc = kc;
  k->vt = cg_vtype(c, k->V);
  k->buf = cg_conv_opaque_ptr(c, cg_entry_alloca(c, LLVMArrayType2(k->vt, (uint64_t)(nt * k->nacc)), name));
  for (int i = 0; i < k->nacc; i++) k->acc[i] = cg_entry_alloca(c, k->vt, "acc");
  for (int64_t i = 0; i < nt * k->nacc; i++) cg_store_v(c, cg_fzero(c, k->V), k->buf, cg_i64(c, i * k->V), k->V);
  LLVMValueRef kb = cg_loop_begin(c, &k->KB, cg_i64(c, 0), cg_i64(c, nkb), cg_i64(c, 1), "kb");
  k->lo = LLVMBuildMul(c->b, kb, cg_i64(c, kc), "ci_lo");
  k->hi = cg_min64(c, LLVMBuildAdd(c->b, k->lo, cg_i64(c, kc), ""), cg_i64(c, g->cin_g));
}

static int vc_kblocked_kxk_row(cg_ctx *c, const conv_geom *g, const conv_row *r, const conv_epi *e, int rr) {
  /* --enable-half-partials: the partials between blocks would have to be 16-bit (and recorded
   * for the interpreter like vc_kblocked_row's); the unblocked row keeps them in registers */
  if (g->kw == 1 || g->sub || !vc_unshared(g) || c->g->half_partials || !cg_tune(c)->vc_kxk_kblock) return 0;
  int64_t nt = (g->ow + g->P - 1) / g->P, wci = (int64_t)g->kh * g->kw * g->R * 4; /* weight bytes per input channel */
  if (nt < 2 || nt > 4 || g->cin_g * wci <= 2 * VC_KXK_BLOCK_BYTES) return 0;
  vc_kb k;
  vc_kb_begin(c, g, rr, nt, "kxkbuf", &k);
  int V = k.V, nrv = k.nrv, nacc = k.nacc;
  LLVMTypeRef vt = k.vt;
  LLVMValueRef buf = k.buf, lo = k.lo, hi = k.hi, *acc = k.acc, cur[32];
  for (int64_t t = 0; t < nt; t++) {
    int64_t from = g->ow * t / nt, np = g->ow * (t + 1) / nt - from;
    int split = vc_split(g, nrv, (int)np), na = (split ? 2 : 1) * nrv * (int)np;
    for (int i = 0; i < na; i++) LLVMBuildStore(c->b, cg_load_v(c, buf, cg_i64(c, (t * nacc + i) * V), V), acc[i]);
    cg_loop CI, KY;
    LLVMValueRef ci = cg_loop_begin(c, &CI, lo, hi, cg_i64(c, 1), "ci");
    LLVMValueRef ky = cg_loop_begin(c, &KY, r->ky_lo, r->ky_hi, cg_i64(c, 1), "ky");
    LLVMValueRef iy = LLVMBuildAdd(c->b, r->iy0, LLVMBuildMul(c->b, ky, cg_i64(c, g->dh), ""), "iy");
    LLVMValueRef row = LLVMBuildAdd(c->b, r->in_base, LLVMBuildAdd(c->b, LLVMBuildMul(c->b, ci, cg_i64(c, g->h * g->w), ""),
                                                                   LLVMBuildMul(c->b, iy, cg_i64(c, g->w), ""), ""), "row");
    LLVMValueRef tap_row = LLVMBuildAdd(c->b, LLVMBuildMul(c->b, ci, cg_i64(c, g->kh), ""), ky, "");
    LLVMValueRef wrow = LLVMBuildAdd(c->b, r->wbase, LLVMBuildMul(c->b, tap_row, cg_i64(c, (int64_t)g->kw * g->R), ""), "wrow");
    for (int i = 0; i < na; i++) cur[i] = LLVMBuildLoad2(c->b, vt, acc[i], "");
    vc_taps(c, g, r, nrv, (int)np, from, cg_i64(c, from * g->sw - g->pl), row, wrow, ci, split, cur);
    for (int i = 0; i < na; i++) LLVMBuildStore(c->b, cur[i], acc[i]);
    cg_loop_end(c, &KY);
    cg_loop_end(c, &CI);
    for (int i = 0; i < na; i++)
      cg_store_v(c, LLVMBuildLoad2(c->b, vt, acc[i], ""), buf, cg_i64(c, (t * nacc + i) * V), V);
  }
  cg_loop_end(c, &k.KB);
  for (int64_t t = 0; t < nt; t++) {
    int64_t from = g->ow * t / nt, np = g->ow * (t + 1) / nt - from, n = nrv * np;
    for (int i = 0; i < n; i++) {
      cur[i] = cg_load_v(c, buf, cg_i64(c, (t * nacc + i) * V), V);
      if (vc_split(g, nrv, (int)np)) cur[i] = LLVMBuildFAdd(c->b, cur[i], cg_load_v(c, buf, cg_i64(c, (t * nacc + n + i) * V), V), "");
    }
    vc_store_tile(c, g, r, e, cur, rr, (int)np, cg_i64(c, from));
  }
  return 1;
}

/* K-blocked planes of kxk convs (work item = the (image, channel tile) plane, conv_item with
 * one "row" per plane): where the tile's packed weights and the image's input do not fit the
 * op's L2 budget together (ResNet-50 layer4/0's 3x3 stride 2: 295 KB of weights per
 * 16-channel tile, a 401 KB 14x14x512 input), the per-row K-blocked kernel above re-read the
 * tile's weights from L2/L3 for every output row and the input rows of every channel as one
 * short strided stream per (ci, ky), i.e. cin_g * kh streams per row, for every tile.  Here
 * the input channels run in blocks whose weights take at most VC_KXK_BLOCK_BYTES (L1) and
 * every row's tiles run over a block while its weights are in L1 and its kc input planes
 * (contiguous, kc * H * W floats) in L1/L2; the plane's accumulators wait in a stack buffer
 * [oy][tile][slot] between blocks.  The sums run in vc_tile's order (ci, ky, kx ascending per
 * accumulator; f32 in the buffer): plane rows are bitwise the row kernels; plane tiles (below)
 * too, except where a row kernel's small tile splits its accumulators (vc_split).
 * Kind `conv2d_vcp_...`.  tune vc_plane turns it off (A/B
 * measurements), tune vc_plane_force=1 takes it for every kxk conv it can run (tests).  Training's
 * packed route (gen_train_pconv.c) calls cg_conv_vc_plane for the convs inference runs here
 * (kind `_pk_vcp_`); its row entry (cg_conv_row_pixels) never takes it. */
#define VC_PLANE_MAX_BUF (64 * 1024)

/* Plane tiles: the output plane as one row of oh*ow pixels cut into compile-time tiles of
 * balanced width (at most P; tiles span output rows: each pixel's taps are compile-time
 * offsets, those outside the input dropped), so every tile has the whole accumulator budget
 * (a 7-wide row's 4+3 tiles had 8 and 2x6 split accumulators).  tune vc_plane_tiles in
 * cnnc's environment keeps the row tiles (A/B measurements). */
static int64_t vc_plane_tiles(const conv_geom *g) {
  int64_t nt = (g->oh * g->ow + g->P - 1) / g->P;
  return nt <= CG_CONV_SUB_MAX_TILES && g->tune->vc_plane_tiles ? nt : 0;
}

int cg_conv_vc_plane_ok(cg_ctx *c, const conv_geom *g) {
  if (!g->vc || g->kw == 1 || g->sub || g->flat || !vc_unshared(g) || c->g->half_partials || !cg_tune(c)->vc_plane)
    return 0;
  int64_t nt = (g->ow + g->P - 1) / g->P, wt = (int64_t)g->cin_g * g->kh * g->kw * g->R * 4;
  int64_t x = (int64_t)g->cin_g * g->h * g->w * 4, nacc = g->R / g->V * g->P;
  /* tune vc_plane_force=1: every kxk conv this path can run (tests of small shapes) */
  if (!cg_tune(c)->vc_plane_force && (wt <= 2 * VC_KXK_BLOCK_BYTES || wt + x <= g->l2)) return 0;
  if (vc_plane_tiles(g)) return 1;
  return nt >= 1 && nt <= 4 && g->oh * nt * nacc * g->V * 4 <= VC_PLANE_MAX_BUF;
}

/* Plane tile of np pixels from flattened pixel q0 for input channel ci: every (ky, kx) tap
 * of every pixel that reads a real input element, kx fastest, into cur[v * np + p]. */
static void vc_plane_taps(cg_ctx *c, const conv_geom *g, const conv_row *r, int nrv, int np, int64_t q0, LLVMValueRef ci,
                          LLVMValueRef *cur) {
  int V = g->V;
  LLVMValueRef xci = LLVMBuildAdd(c->b, r->in_base, LLVMBuildMul(c->b, ci, cg_i64(c, g->h * g->w), ""), "xci");
  LLVMValueRef wci = LLVMBuildAdd(c->b, r->wbase, LLVMBuildMul(c->b, ci, cg_i64(c, (int64_t)g->kh * g->kw * g->R), ""), "wci");
  for (int ky = 0; ky < g->kh; ky++)
    for (int kx = 0; kx < g->kw; kx++) {
      int any = 0;
      for (int p = 0; p < np; p++) {
        int64_t q = q0 + p, iy = q / g->ow * g->sh - g->pt + (int64_t)ky * g->dh, ix = q % g->ow * g->sw - g->pl + (int64_t)kx * g->dw;
        any |= iy >= 0 && iy < g->h && ix >= 0 && ix < g->w;
      }
      if (!any) continue;
      LLVMValueRef wv[4];
      for (int v = 0; v < nrv; v++)
        wv[v] = cg_load_v(c, r->wp, LLVMBuildAdd(c->b, wci, cg_i64(c, (int64_t)(ky * g->kw + kx) * g->R + (int64_t)v * V), ""), V);
      /* this tap's pixels through their own opaque pointer (vc_taps: no broadcast shared
       * between taps, so only accumulators and weight vectors stay live) */
      LLVMValueRef xk = cg_conv_opaque_ptr(c, cg_gep_f32(c, r->x, LLVMBuildAdd(c->b, xci, cg_i64(c, (int64_t)ky * g->dh * g->w + (int64_t)kx * g->dw), "")));
      for (int p = 0; p < np; p++) {
        int64_t q = q0 + p, iy0 = q / g->ow * g->sh - g->pt, ix0 = q % g->ow * g->sw - g->pl;
        int64_t iy = iy0 + (int64_t)ky * g->dh, ix = ix0 + (int64_t)kx * g->dw;
        if (iy < 0 || iy >= g->h || ix < 0 || ix >= g->w) continue;
        LLVMValueRef xb = cg_splat(c, cg_conv_xscale(c, r, ci, cg_load_f32(c, xk, cg_i64(c, iy0 * g->w + ix0))), V);
        for (int v = 0; v < nrv; v++) cur[v * np + p] = cg_fma(c, wv[v], xb, cur[v * np + p]);
      }
    }
}

/* The plane in plane tiles (vc_plane_tiles), K-blocked like the rows below: accumulators of
 * every tile in buf [tile][slot] between blocks of input channels. */
static void vc_plane_tiled(cg_ctx *c, const conv_geom *g, const conv_row *r, const conv_epi *e, int rr, int64_t nt) {
  int64_t px = g->oh * g->ow, wci = (int64_t)g->kh * g->kw * g->R * 4; /* weight bytes per input channel */
  int spread = vc_w_spread(g);
  vc_kb k;
  vc_kb_begin(c, g, rr, nt, "vcptile", &k);
  int V = k.V, nrv = k.nrv, nacc = k.nacc;
  LLVMTypeRef vt = k.vt;
  LLVMValueRef buf = k.buf, lo = k.lo, hi = k.hi, *acc = k.acc, cur[32];
  for (int64_t t = 0; t < nt; t++) {
    int64_t from = px * t / nt, np = px * (t + 1) / nt - from, n = nrv * np;
    for (int i = 0; i < n; i++) LLVMBuildStore(c->b, cg_load_v(c, buf, cg_i64(c, (t * nacc + i) * V), V), acc[i]);
    cg_loop CI;
    LLVMValueRef ci = cg_loop_begin(c, &CI, lo, hi, cg_i64(c, 1), "ci");
    for (int i = 0; i < n; i++) cur[i] = LLVMBuildLoad2(c->b, vt, acc[i], "");
    if (spread)
      vc_w_spread_pf(c, r, LLVMBuildAdd(c->b, r->wbase, LLVMBuildMul(c->b, hi, cg_i64(c, wci / 4), ""), ""), LLVMBuildSub(c->b, ci, lo, ""),
                     t, nt, k.kc, wci);
    vc_plane_taps(c, g, r, nrv, (int)np, from, ci, cur);
    for (int i = 0; i < n; i++) LLVMBuildStore(c->b, cur[i], acc[i]);
    cg_loop_end(c, &CI);
    for (int i = 0; i < n; i++) cg_store_v(c, LLVMBuildLoad2(c->b, vt, acc[i], ""), buf, cg_i64(c, (t * nacc + i) * V), V);
  }
  cg_loop_end(c, &k.KB);
  for (int64_t t = 0; t < nt; t++) { /* flattened pixel q is element q of the output plane */
    int64_t from = px * t / nt, np = px * (t + 1) / nt - from;
    for (int i = 0; i < nrv * np; i++) cur[i] = cg_load_v(c, buf, cg_i64(c, (t * nacc + i) * V), V);
    vc_store_tile(c, g, r, e, cur, rr, (int)np, cg_i64(c, from));
  }
}

void cg_conv_vc_plane(cg_ctx *c, const conv_geom *g, const conv_row *r0, const conv_epi *e, int rr) {
  int64_t pt = vc_plane_tiles(g);
  if (pt) {
    vc_plane_tiled(c, g, r0, e, rr, pt);
    return;
  }
  int64_t nt = (g->ow + g->P - 1) / g->P, wci = (int64_t)g->kh * g->kw * g->R * 4;
  int64_t kc = VC_KXK_BLOCK_BYTES / wci > 1 ? VC_KXK_BLOCK_BYTES / wci : 1, nkb = (g->cin_g + kc - 1) / kc;
  int V = g->V, nrv = (rr + V - 1) / V, nacc = g->R / V * g->P, per_row = (int)nt * nacc;
  LLVMTypeRef vt = cg_vtype(c, V);
  LLVMValueRef buf = cg_conv_opaque_ptr(c, cg_entry_alloca(c, LLVMArrayType2(vt, (uint64_t)(g->oh * per_row)), "vcplane"));
  LLVMValueRef acc[32], cur[32];
  for (int i = 0; i < nacc; i++) acc[i] = cg_entry_alloca(c, vt, "acc");
  cg_loop Z;
  LLVMValueRef zi = cg_loop_begin(c, &Z, cg_i64(c, 0), cg_i64(c, g->oh * per_row), cg_i64(c, 1), "z");
  cg_store_v(c, cg_fzero(c, V), buf, LLVMBuildMul(c->b, zi, cg_i64(c, V), ""), V);
  cg_loop_end(c, &Z);
  cg_loop KB, OY;
  LLVMValueRef kb = cg_loop_begin(c, &KB, cg_i64(c, 0), cg_i64(c, nkb), cg_i64(c, 1), "kb");
  LLVMValueRef lo = LLVMBuildMul(c->b, kb, cg_i64(c, kc), "ci_lo");
  LLVMValueRef hi = cg_min64(c, LLVMBuildAdd(c->b, lo, cg_i64(c, kc), ""), cg_i64(c, g->cin_g));
  LLVMValueRef oy = cg_loop_begin(c, &OY, cg_i64(c, 0), cg_i64(c, g->oh), cg_i64(c, 1), "oy");
  /* kernel rows of output row oy that read real input rows (gen_conv.c's ky_range) */
  LLVMValueRef base = LLVMBuildMul(c->b, oy, cg_i64(c, g->sh), "");
  LLVMValueRef iy0 = LLVMBuildSub(c->b, base, cg_i64(c, g->pt), "iy0");
  LLVMValueRef need = LLVMBuildSub(c->b, cg_i64(c, g->pt), base, "");
  LLVMValueRef klo = LLVMBuildSDiv(c->b, LLVMBuildAdd(c->b, need, cg_i64(c, g->dh - 1), ""), cg_i64(c, g->dh), "");
  klo = LLVMBuildSelect(c->b, LLVMBuildICmp(c->b, LLVMIntSGT, need, cg_i64(c, 0), ""), klo, cg_i64(c, 0), "ky_lo");
  LLVMValueRef room = LLVMBuildSub(c->b, cg_i64(c, g->h - 1 + g->pt), base, "");
  LLVMValueRef khi = LLVMBuildAdd(c->b, LLVMBuildSDiv(c->b, room, cg_i64(c, g->dh), ""), cg_i64(c, 1), "");
  khi = LLVMBuildSelect(c->b, LLVMBuildICmp(c->b, LLVMIntSLT, room, cg_i64(c, 0), ""), cg_i64(c, 0), khi, "");
  khi = cg_min64(c, khi, cg_i64(c, g->kh));
  LLVMValueRef slot0 = LLVMBuildMul(c->b, oy, cg_i64(c, per_row), "slot0");
  for (int64_t t = 0; t < nt; t++) {
    int64_t from = g->ow * t / nt, np = g->ow * (t + 1) / nt - from;
    int split = vc_split(g, nrv, (int)np), na = (split ? 2 : 1) * nrv * (int)np;
    LLVMValueRef sb = LLVMBuildMul(c->b, LLVMBuildAdd(c->b, slot0, cg_i64(c, t * nacc), ""), cg_i64(c, V), "");
    for (int i = 0; i < na; i++) LLVMBuildStore(c->b, cg_load_v(c, buf, LLVMBuildAdd(c->b, sb, cg_i64(c, (int64_t)i * V), ""), V), acc[i]);
    cg_loop CI, KY;
    LLVMValueRef ci = cg_loop_begin(c, &CI, lo, hi, cg_i64(c, 1), "ci");
    LLVMValueRef ky = cg_loop_begin(c, &KY, klo, khi, cg_i64(c, 1), "ky");
    LLVMValueRef iy = LLVMBuildAdd(c->b, iy0, LLVMBuildMul(c->b, ky, cg_i64(c, g->dh), ""), "iy");
    LLVMValueRef row = LLVMBuildAdd(c->b, r0->in_base, LLVMBuildAdd(c->b, LLVMBuildMul(c->b, ci, cg_i64(c, g->h * g->w), ""),
                                                                    LLVMBuildMul(c->b, iy, cg_i64(c, g->w), ""), ""), "row");
    LLVMValueRef tap_row = LLVMBuildAdd(c->b, LLVMBuildMul(c->b, ci, cg_i64(c, g->kh), ""), ky, "");
    LLVMValueRef wrow = LLVMBuildAdd(c->b, r0->wbase, LLVMBuildMul(c->b, tap_row, cg_i64(c, (int64_t)g->kw * g->R), ""), "wrow");
    for (int i = 0; i < na; i++) cur[i] = LLVMBuildLoad2(c->b, vt, acc[i], "");
    vc_taps(c, g, r0, nrv, (int)np, from, cg_i64(c, from * g->sw - g->pl), row, wrow, ci, split, cur);
    for (int i = 0; i < na; i++) LLVMBuildStore(c->b, cur[i], acc[i]);
    cg_loop_end(c, &KY);
    cg_loop_end(c, &CI);
    for (int i = 0; i < na; i++)
      cg_store_v(c, LLVMBuildLoad2(c->b, vt, acc[i], ""), buf, LLVMBuildAdd(c->b, sb, cg_i64(c, (int64_t)i * V), ""), V);
  }
  cg_loop_end(c, &OY);
  cg_loop_end(c, &KB);
  cg_loop EY;
  LLVMValueRef ey = cg_loop_begin(c, &EY, cg_i64(c, 0), cg_i64(c, g->oh), cg_i64(c, 1), "eoy");
  conv_row r = *r0;
  r.out_row = LLVMBuildAdd(c->b, r0->out_row, LLVMBuildMul(c->b, ey, cg_i64(c, g->ow), ""), "out_row");
  LLVMValueRef eslot = LLVMBuildMul(c->b, ey, cg_i64(c, per_row), "");
  for (int64_t t = 0; t < nt; t++) {
    int64_t from = g->ow * t / nt, np = g->ow * (t + 1) / nt - from, n = nrv * np;
    int split = vc_split(g, nrv, (int)np);
    LLVMValueRef sb = LLVMBuildMul(c->b, LLVMBuildAdd(c->b, eslot, cg_i64(c, t * nacc), ""), cg_i64(c, V), "");
    for (int i = 0; i < n; i++) {
      cur[i] = cg_load_v(c, buf, LLVMBuildAdd(c->b, sb, cg_i64(c, (int64_t)i * V), ""), V);
      if (split) cur[i] = LLVMBuildFAdd(c->b, cur[i], cg_load_v(c, buf, LLVMBuildAdd(c->b, sb, cg_i64(c, (n + i) * V), ""), V), "");
    }
    vc_store_tile(c, g, &r, e, cur, rr, (int)np, cg_i64(c, from));
  }
  cg_loop_end(c, &EY);
}

/* K-blocking of unpadded 1x1 rows whose input (cin_g planes x the row) exceeds half the
 * op's L2 budget (cg_shard_tile_budget): ResNet-50 layer4's 1x1 GEMMs on channel vectors are one 49-pixel row of
 * 2048 x 196 B = 400 KB, and every pixel tile swept all of it, i.e. 2048 cache lines per tile
 * from L3.  Here the input channels run in blocks of kc, and within a block every pixel tile
 * of the row (compile-time tiles of balanced width) runs over the block's input (a quarter of the budget)
 * while it is in L2; the tiles' accumulators wait in a stack buffer between blocks. */
#define VC_KBLOCK_MAX_TILES 16

/* The stack buffer's address through an empty asm, so SROA does not turn the buffer into
 * nt*nacc loop-carried vector registers (they are meant to live in L1 between blocks). */
LLVMValueRef cg_conv_opaque_ptr(cg_ctx *c, LLVMValueRef p) {
  LLVMTypeRef ft = LLVMFunctionType(c->t_ptr, &c->t_ptr, 1, 0);
  LLVMValueRef asmv = LLVMGetInlineAsm(ft, "", 0, "=r,0", 4, 0, 0, LLVMInlineAsmDialectATT, 0);
  return LLVMBuildCall2(c->b, ft, asmv, &p, 1, "kbuf");
}

/* The K-blocked rows' accumulator buffer inside the block loop, as a value that depends on
 * the block index kb (an empty asm of (buf, kb)).  With the loop-invariant address LLVM's
 * LICM promoted every slot of the buffer (nt * nacc vectors: 96-120 on 16 lanes) to values
 * carried around the block loop; the register allocator then spilled them and also 8 of a
 * tile's 18-20 accumulators inside its K loop (2 x 8 stack loads and stores per 36 FMAs in
 * ResNet-50 layer4's 1x1 `32x12` and `sub_vc 48x8` kernels, 27 Nov).  A pointer that changes
 * with kb cannot be promoted: the slots stay in the buffer.  tune vc_kbuf_hoist=1 in cnnc's
 * environment keeps the loop-invariant pointer (A/B measurements). */
static LLVMValueRef vc_kb_buf(cg_ctx *c, LLVMValueRef buf, LLVMValueRef kb) {
  if (cg_tune(c)->vc_kbuf_hoist) return buf;
  LLVMTypeRef pr[2] = {c->t_ptr, c->t_i64};
  LLVMTypeRef ft = LLVMFunctionType(c->t_ptr, pr, 2, 0);
  LLVMValueRef asmv = LLVMGetInlineAsm(ft, "", 0, "=r,0,r", 6, 0, 0, LLVMInlineAsmDialectATT, 0);
  LLVMValueRef args[2] = {buf, kb};
  return LLVMBuildCall2(c->b, ft, asmv, args, 2, "kbuf_kb");
}

/* Slot i of a 16-bit K-blocked row's partial buffer (elements of type pt). */
static LLVMValueRef vc_kslot(cg_ctx *c, LLVMTypeRef pt, LLVMValueRef buf, int64_t i) {
  LLVMValueRef si = cg_i64(c, i);
  return LLVMBuildInBoundsGEP2(c->b, pt, buf, &si, 1, "");
}

/* A 1x1 conv with no padding on any side: the geometry keeps only the top/left pads, so the
 * bottom/right ones are read off the output size (the last output row/column must read an
 * input row/column inside the plane). */
static int vc_1x1_unpadded(const conv_geom *g) {
  return g->kh == 1 && g->kw == 1 && g->pl == 0 && g->pt == 0 && (g->ow - 1) * g->sw < g->w &&
         (g->oh - 1) * g->sh < g->h;
}

/* Weight prefetch distance of the K-blocked row in input channels (0: off).  The first pixel
 * tile of a block is the one that brings the block's weights in (R floats per input channel,
 * one line at R = 16, contiguous); at batch 1 those come from L3/memory (ResNet-50 layer4's
 * 1x1 convs: 128 KB per channel tile, 4 MB per op), and perf annotate of layer4's conv1 at
 * b1 put 12.4 % of the kernel's samples on that tile's weight loads (26 Nov).  That tile's K
 * loop prefetches the weights d input channels ahead (d = 32, 2 KB at R = 16: layer4 1x1
 * b1/b16 +6 % per CPU-second over d = 16; d = 64 no better).  tune vc_w_prefetch=0 in cnnc's
 * environment turns it off, tune vc_w_pf_dist=d sets the distance (A/B measurements). */
static int vc_w_pf_dist(const conv_geom *g) { return g->tune->vc_w_prefetch ? g->tune->vc_w_pf_dist : 0; }

static void vc_w_prefetch(cg_ctx *c, const conv_geom *g, const conv_row *r, LLVMValueRef wrow, int d) {
  for (int64_t o = 0; o < g->R; o += 16) {
    /* a plain GEP, not inbounds: near the last channels the address lies past the weights */
    LLVMValueRef off = LLVMBuildAdd(c->b, wrow, cg_i64(c, (int64_t)d * g->R + o), "");
    LLVMValueRef args[4] = {LLVMBuildGEP2(c->b, c->t_f32, r->wp, &off, 1, "wpf"), cg_i32(c, 0), cg_i32(c, 3), cg_i32(c, 1)};
    cg_intrinsic(c, "llvm.prefetch", &c->t_ptr, 1, args, 4);
  }
}

static int vc_kblocked_row(cg_ctx *c, const conv_geom *g, const conv_row *r, const conv_epi *e, int rr, LLVMValueRef panel) {
  if (!vc_1x1_unpadded(g)) return 0;
  int wpf = vc_w_pf_dist(g), spread = vc_w_spread(g);
  int V = g->V, nrv = (rr + V - 1) / V;
  /* block: a quarter of the L2 budget (64-77 KB by default); rows under half of it stay in
   * L2 anyway (layer4 conv3, 100 KB: K-blocking it measured no gain) */
  int64_t blk = g->l2 / 4 > 4096 ? g->l2 / 4 : 4096;
  int64_t row_bytes = g->ow * g->sw * 4, nkb = (g->cin_g * row_bytes + blk - 1) / blk;
  int64_t nt = (g->ow + g->P - 1) / g->P;
  if (nt > (g->sub ? CG_CONV_SUB_MAX_TILES : VC_KBLOCK_MAX_TILES) || nt < 1) return 0;
  if (g->cin_g * row_bytes < 2 * blk || nkb < 2) {
    if (!panel) return 0;
    nkb = 1; /* a panel row under half the budget: one block */
  }
  int64_t kc = (g->cin_g + nkb - 1) / nkb;
  nkb = (g->cin_g + kc - 1) / kc;
  const cg_priv *pv = c->priv; /* --enable-half-partials: the block recorded for the interpreter */
  if (c->g->partial_kblock && pv && nkb > 1) c->g->partial_kblock[pv->node] = (int)kc;
  int nacc = nrv * g->P, h16 = cg_partials16(c); /* h16: a 16-bit partial buffer (cg_half_partials.h) */
  LLVMTypeRef vt = cg_vtype(c, V), pt = cg_partial_vtype(c, V);
  LLVMValueRef buf0 = cg_conv_opaque_ptr(c, cg_entry_alloca(c, LLVMArrayType2(pt, (uint64_t)(nt * nacc)), "kbuf")), buf = buf0;
  if (h16 && nkb > 1 && pv) cg_partial_note(c, &c->g->nodes[pv->node], nt * nacc, V);
  LLVMValueRef acc[32];
  for (int i = 0; i < nacc; i++) acc[i] = cg_entry_alloca(c, vt, "acc");
  for (int64_t i = 0; i < nt * nacc; i++) {
    if (!h16) cg_store_v(c, cg_fzero(c, V), buf, cg_i64(c, i * V), V);
    else LLVMBuildStore(c->b, LLVMConstNull(pt), vc_kslot(c, pt, buf, i));
  }
  LLVMValueRef in_row = LLVMBuildAdd(c->b, r->in_base, LLVMBuildMul(c->b, r->iy0, cg_i64(c, g->w), ""), "in_row");
  cg_loop KB;
  LLVMValueRef kb = cg_loop_begin(c, &KB, cg_i64(c, 0), cg_i64(c, nkb), cg_i64(c, 1), "kb");
  LLVMValueRef lo = LLVMBuildMul(c->b, kb, cg_i64(c, kc), "ci_lo");
  LLVMValueRef hi = cg_min64(c, LLVMBuildAdd(c->b, lo, cg_i64(c, kc), ""), cg_i64(c, g->cin_g));
  buf = vc_kb_buf(c, buf0, kb);
  for (int64_t t = 0; t < nt; t++) {
    int64_t from = g->ow * t / nt, np = g->ow * (t + 1) / nt - from;
    for (int i = 0; i < nrv * np; i++)
      LLVMBuildStore(c->b, h16 ? cg_partial_load(c, vc_kslot(c, pt, buf, t * nacc + i), V)
                               : cg_half_partial(c, cg_load_v(c, buf, cg_i64(c, (t * nacc + i) * V), V), V), acc[i]); /* 16-bit partial */
    cg_loop CI;
    LLVMValueRef ci = cg_loop_begin(c, &CI, lo, hi, cg_i64(c, 1), "ci");
    LLVMValueRef cur[32];
    for (int i = 0; i < nrv * np; i++) cur[i] = LLVMBuildLoad2(c->b, vt, acc[i], "");
    LLVMValueRef row = LLVMBuildAdd(c->b, in_row, LLVMBuildMul(c->b, ci, cg_i64(c, g->h * g->w), ""), "row");
    LLVMValueRef wrow = LLVMBuildAdd(c->b, r->wbase, LLVMBuildMul(c->b, ci, cg_i64(c, g->R), ""), "wrow");
    if (t == 0 && wpf) vc_w_prefetch(c, g, r, wrow, wpf);
    if (spread)
      vc_w_spread_pf(c, r, LLVMBuildAdd(c->b, r->wbase, LLVMBuildMul(c->b, hi, cg_i64(c, g->R), ""), ""), LLVMBuildSub(c->b, ci, lo, ""),
                     t, nt, kc, (int64_t)g->R * 4);
    LLVMValueRef wv[4];
    for (int v = 0; v < nrv; v++) wv[v] = cg_load_v(c, r->wp, LLVMBuildAdd(c->b, wrow, cg_i64(c, (int64_t)v * V), ""), V);
    LLVMValueRef prow = panel ? LLVMBuildAdd(c->b, cg_i64(c, from * g->cin_g), LLVMBuildMul(c->b, ci, cg_i64(c, np), ""), "prow") : NULL;
    for (int64_t p = 0; p < np; p++) {
      int64_t off = g->sub ? cg_conv_sub_off(g, from + p) : (from + p) * g->sw;
      LLVMValueRef xb = cg_splat(c, panel ? cg_load_f32(c, panel, LLVMBuildAdd(c->b, prow, cg_i64(c, p), "")) /* scaled when packed */
                                          : cg_conv_xscale(c, r, ci, cg_load_f32(c, r->x, LLVMBuildAdd(c->b, row, cg_i64(c, off), ""))), V);
      for (int v = 0; v < nrv; v++) cur[v * np + p] = cg_fma(c, wv[v], xb, cur[v * np + p]);
    }
    for (int i = 0; i < nrv * np; i++) LLVMBuildStore(c->b, cur[i], acc[i]);
    cg_loop_end(c, &CI);
    if (h16) { /* the last block's sums go from the registers to the epilogue; earlier blocks narrowed to the buffer */
      cg_if fl;
      cg_if_begin(c, &fl, LLVMBuildICmp(c->b, LLVMIntEQ, kb, cg_i64(c, nkb - 1), "last_block"));
      LLVMValueRef v[32];
      for (int i = 0; i < nrv * np; i++) v[i] = LLVMBuildLoad2(c->b, vt, acc[i], "");
      vc_store_tile(c, g, r, e, v, rr, (int)np, cg_i64(c, from));
      cg_if_else(c, &fl);
      for (int i = 0; i < nrv * np; i++) cg_partial_store(c, LLVMBuildLoad2(c->b, vt, acc[i], ""), vc_kslot(c, pt, buf, t * nacc + i), V);
      cg_if_end(c, &fl);
      continue;
    }
    for (int i = 0; i < nrv * np; i++)
      cg_store_v(c, LLVMBuildLoad2(c->b, vt, acc[i], ""), buf, cg_i64(c, (t * nacc + i) * V), V);
  }
  cg_loop_end(c, &KB);
  buf = buf0;
  for (int64_t t = 0; !h16 && t < nt; t++) {
    int64_t from = g->ow * t / nt, np = g->ow * (t + 1) / nt - from;
    LLVMValueRef v[32];
    for (int i = 0; i < nrv * np; i++) v[i] = cg_load_v(c, buf, cg_i64(c, (t * nacc + i) * V), V);
    vc_store_tile(c, g, r, e, v, rr, (int)np, cg_i64(c, from));
  }
  return 1;
}

/* Input panels of 1x1 unpadded rows (stride 1 GEMMs, strided per-row convs, sub convs).
 * Read from the channel planes, a pixel tile's K loop broadcasts np pixels of one plane per
 * input channel, planes H*W*4 bytes apart (196 B at 7x7): cin_g strided streams, each cache
 * line of which serves one tile, re-read by every channel tile of the image.  The panel is
 * the row's input gathered once into a stack buffer [tile][ci][np] (tiles of balanced width,
 * as vc_kblocked_row cuts them; strided and sub pixels gathered here, so the kernel reads
 * every conv as a stride-1 GEMM): a tile's np broadcasts of one ci are adjacent and its K
 * loop reads one sequential stream.  key: the input row the panel holds (-1: none); the
 * work items of one row (the channel tiles of a block / of the image, in conv_item's order)
 * pack it once.  tune vc_panel turns it off (A/B measurements). */
#define VC_PANEL_MAX_BYTES (512 * 1024)

static int vc_panel_ok(const conv_geom *g) {
  if (!vc_1x1_unpadded(g) || !g->tune->vc_panel) return 0;
  int64_t nt = (g->ow + g->P - 1) / g->P;
  return nt <= (g->sub ? CG_CONV_SUB_MAX_TILES : VC_KBLOCK_MAX_TILES) && g->cin_g * g->ow * 4 <= VC_PANEL_MAX_BYTES;
}

/* Stores v at the entry block, right after the alloca a (runs once per call, before any loop). */
static void vc_entry_store(cg_ctx *c, LLVMValueRef a, LLVMValueRef v) {
  LLVMBuilderRef tb = LLVMCreateBuilderInContext(c->llc);
  LLVMValueRef next = LLVMGetNextInstruction(a);
  if (next) LLVMPositionBuilderBefore(tb, next);
  else LLVMPositionBuilderAtEnd(tb, LLVMGetInstructionParent(a));
  LLVMBuildStore(tb, v, a);
  LLVMDisposeBuilder(tb);
}

/* Offset of pixel q of a strided / sub row from its input row (vc_panel_pack). */
static int64_t vc_pack_off(const conv_geom *g, int64_t q) {
  return g->sub ? cg_conv_sub_off(g, q) : q * g->sw;
}

/* The np strided pixels from pixel from of the row at src as one value of cg_vtype(np).  Each
 * run of pixels sw apart (a sub tile spans input rows: one run per row) is one contiguous
 * load of its sw*(len-1)+1 floats whose every sw-th lane is kept (shuffles): scalar loads
 * inserted lane by lane became vgatherqps/vgatherdps on AVX-512, and perf annotate of
 * ResNet-50's layer2/0/downsample/0 at b16 put ~50 % of the kernel's samples on them (Zen 5,
 * 26 Nov).  Only elements of the row's pixels' span are read.  tune vc_pack_scalar=1 in
 * cnnc's environment keeps the lane-by-lane loads (A/B measurements). */
static LLVMValueRef vc_pack_strided(cg_ctx *c, const conv_geom *g, const conv_row *r, LLVMValueRef src, int64_t from,
                                    int64_t np) {
  int scalar = cg_tune(c)->vc_pack_scalar;
  LLVMValueRef v = np == 1 ? NULL : LLVMGetPoison(cg_vtype(c, (int)np));
  for (int64_t p = 0; p < np;) {
    int64_t off = vc_pack_off(g, from + p), len = 1;
    while (!scalar && p + len < np && vc_pack_off(g, from + p + len) == off + len * g->sw) len++;
    int64_t L = g->sw * (len - 1) + 1;
    LLVMValueRef run = cg_load_v(c, r->x, LLVMBuildAdd(c->b, src, cg_i64(c, off), ""), (int)L);
    for (int64_t j = 0; j < len; j++, p++) {
      LLVMValueRef s = L == 1 ? run : LLVMBuildExtractElement(c->b, run, cg_i32(c, (int)(j * g->sw)), "");
      v = np == 1 ? s : LLVMBuildInsertElement(c->b, v, s, cg_i32(c, (int)p), "");
    }
  }
  return v;
}

/* Gathers the row at input element in_row (every input channel of the group; squeeze-excite
 * factors applied) into panel. */
static void vc_panel_pack(cg_ctx *c, const conv_geom *g, const conv_row *r, LLVMValueRef panel, LLVMValueRef in_row) {
  int64_t nt = (g->ow + g->P - 1) / g->P;
  cg_loop CI;
  LLVMValueRef ci = cg_loop_begin(c, &CI, cg_i64(c, 0), cg_i64(c, g->cin_g), cg_i64(c, 1), "pci");
  LLVMValueRef src = LLVMBuildAdd(c->b, in_row, LLVMBuildMul(c->b, ci, cg_i64(c, g->h * g->w), ""), "psrc");
  for (int64_t t = 0; t < nt; t++) {
    int64_t from = g->ow * t / nt, np = g->ow * (t + 1) / nt - from;
    LLVMValueRef v = !g->sub && g->sw == 1 ? cg_load_v(c, r->x, LLVMBuildAdd(c->b, src, cg_i64(c, from), ""), (int)np)
                                           : vc_pack_strided(c, g, r, src, from, np);
    v = cg_conv_xscale(c, r, ci, v);
    cg_store_v(c, v, panel, LLVMBuildAdd(c->b, cg_i64(c, from * g->cin_g), LLVMBuildMul(c->b, ci, cg_i64(c, np), ""), ""), (int)np);
  }
  cg_loop_end(c, &CI);
}

/* Image panels of strided per-row 1x1 convs (ResNet-50's layer2/layer3 downsamples, 28- and
 * 14-wide rows): conv_item walks the output rows of an image once per block of channel tiles
 * (conv_tile_block: 3 blocks of 11 tiles at layer2, 11 of 6 at layer3), and the one-row panel
 * was gathered again for every block, i.e. the image's strided input read 3-11 times, the
 * first loads of each plane stalling on L3/memory (perf annotate of layer2/0/downsample/0 at
 * b16: 13.6 % of the kernel's samples in the gather, 26 Nov).  Here the panel holds every
 * output row of the image ([oy][tile][ci][np], at most VC_IMG_PANEL_MAX_BYTES on the stack)
 * with one key per row: a row is gathered once per image per thread and the later blocks
 * read it back contiguously.  The arithmetic is unchanged (the same floats, the same sums).
 * tune vc_img_panel=0 keeps the one-row panel (A/B measurements). */
#define VC_IMG_PANEL_MAX_BYTES (1024 * 1024)

static int vc_img_panel(const conv_geom *g) {
  if (!g->tune->vc_img_panel) return 0;
  return !g->sub && g->sw > 1 && g->oh > 1 && g->cin_g * g->ow * g->oh * 4 <= VC_IMG_PANEL_MAX_BYTES;
}

/* Sets the n i64 keys at a (an entry-block alloca) to -1 at the entry (once per call). */
static void vc_entry_keys(cg_ctx *c, LLVMValueRef a, int64_t n) {
  LLVMBuilderRef tb = LLVMCreateBuilderInContext(c->llc);
  LLVMValueRef next = LLVMGetNextInstruction(a);
  if (next) LLVMPositionBuilderBefore(tb, next);
  else LLVMPositionBuilderAtEnd(tb, LLVMGetInstructionParent(a));
  LLVMBuildMemSet(tb, a, LLVMConstInt(c->t_i8, 0xff, 0), cg_i64(c, n * 8), 8);
  LLVMDisposeBuilder(tb);
}

static void vc_panel_row(cg_ctx *c, const conv_geom *g, const conv_row *r, const conv_epi *e, int rr) {
  int V = g->V, img = vc_img_panel(g);
  int64_t floats = g->cin_g * g->ow, rows = img ? g->oh : 1;
  LLVMValueRef buf = cg_entry_alloca(c, LLVMArrayType2(cg_vtype(c, V), (uint64_t)((floats * rows + V - 1) / V)), "vcpanel");
  LLVMSetAlignment(buf, 64);
  LLVMValueRef key;
  if (img) {
    key = cg_entry_alloca(c, LLVMArrayType2(c->t_i64, (uint64_t)rows), "vcpanel_keys");
    vc_entry_keys(c, key, rows);
  } else {
    key = cg_entry_alloca(c, c->t_i64, "vcpanel_key");
    vc_entry_store(c, key, cg_i64(c, -1));
  }
  LLVMValueRef in_row = LLVMBuildAdd(c->b, r->in_base, LLVMBuildMul(c->b, r->iy0, cg_i64(c, g->w), ""), "panel_row");
  LLVMValueRef panel = buf;
  if (img) { /* unpadded: iy0 = oy * sh */
    LLVMValueRef oy = LLVMBuildSDiv(c->b, r->iy0, cg_i64(c, g->sh), "panel_oy");
    panel = cg_gep_f32(c, buf, LLVMBuildMul(c->b, oy, cg_i64(c, floats), ""));
    key = LLVMBuildInBoundsGEP2(c->b, c->t_i64, key, &oy, 1, "panel_key");
  }
  /* items reading the squeeze-excite buffer (gen_conv_se.c) all have in_base 0: the key adds
   * the (image, group) that buffer holds */
  LLVMValueRef k = r->xs_buf ? LLVMBuildAdd(c->b, in_row, LLVMBuildMul(c->b, r->xs_base, cg_i64(c, g->cin_g * g->h * g->w), ""), "")
                             : in_row;
  cg_if f;
  cg_if_begin(c, &f, LLVMBuildICmp(c->b, LLVMIntNE, LLVMBuildLoad2(c->b, c->t_i64, key, ""), k, ""));
  vc_panel_pack(c, g, r, panel, in_row);
  LLVMBuildStore(c->b, k, key);
  cg_if_end(c, &f);
  if (!vc_kblocked_row(c, g, r, e, rr, panel)) abort(); /* vc_panel_ok admitted a row the K-blocked code refuses */
}

void cg_conv_vc_row(cg_ctx *c, const conv_geom *g, const conv_row *r, const conv_epi *e, int rr) {
  if (vc_panel_ok(g)) {
    vc_panel_row(c, g, r, e, rr);
    return;
  }
  if (vc_kblocked_row(c, g, r, e, rr, NULL)) return;
  if (g->sub) { /* the plane as compile-time tiles of balanced width (at most P) */
    int64_t nt = (g->ow + g->P - 1) / g->P;
    for (int64_t t = 0, from = 0; t < nt; t++) {
      int64_t to = g->ow * (t + 1) / nt;
      vc_tile(c, g, r, e, rr, (int)(to - from), cg_i64(c, from), from);
      from = to;
    }
    return;
  }
  if (vc_kblocked_kxk_row(c, g, r, e, rr) || vc_short_row(c, g, r, e, rr)) return;
  int64_t a = (g->pl + g->sw - 1) / g->sw; /* first pixel whose taps are all inside */
  int64_t lim = g->w - 1 + g->pl - (int64_t)(g->kw - 1) * g->dw, b = lim < 0 ? 0 : lim / g->sw + 1;
  if (b > g->ow) b = g->ow;
  if (a > b) a = b;
  int64_t nfull = (b - a) / g->P;
  vc_const_tiles(c, g, r, e, rr, 0, a);
  if (nfull > 0) {
    cg_loop L;
    LLVMValueRef i = cg_loop_begin(c, &L, cg_i64(c, 0), cg_i64(c, nfull), cg_i64(c, 1), "ox");
    vc_tile(c, g, r, e, rr, g->P, LLVMBuildAdd(c->b, cg_i64(c, a), LLVMBuildMul(c->b, i, cg_i64(c, g->P), ""), ""), -1);
    cg_loop_end(c, &L);
  }
  vc_const_tiles(c, g, r, e, rr, a + nfull * g->P, g->ow);
}
