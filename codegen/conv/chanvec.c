/* conv/chanvec.c — conv2d microkernel with output channels in the vector lanes (for strided
 * convs and narrow maps, where pixel vectors would need shuffles or masks): a tile of Rv
 * vectors of V channels x P output pixels; per tap it broadcasts P input pixels (any stride
 * is a scalar load; each tap column loads its own, see cg_conv_vc_unshared), loads Rv weight vectors
 * from the same packed layout
 * [group][Cout_g/R][Cin_g][KH][KW][R] and issues Rv*P llvm.fmuladd.  Border pixels are
 * compile-time positions whose out-of-range taps are simply not emitted; the epilogue
 * stores each vector's lanes to their channel planes.  The rows made of these tiles:
 * conv/chanvec_row.c; the choice of the shape and its tile: conv/conv_core.c. */
#include "codegen/conv/chanvec.h"
#include "codegen/conv/se.h"

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
void cg_conv_vc_store_tile(cg_ctx *c, const conv_geom *g, const conv_row *r, const conv_epi *e, const LLVMValueRef *acc,
                          int rr, int np, LLVMValueRef ox) {
  int V = g->V, nrv = (rr + V - 1) / V;
  int64_t plane = g->oh * g->ow;
  if (V < 2 || V > 16 || (V & (V - 1)) || !cg_tune(c)->vc_transpose) { /* lane by lane (env: A/B) */
    for (int v = 0; v < nrv; v++)
      for (int p = 0; p < np; p++)
        vc_store(c, g, r, e, acc[v * np + p], v, rr - v * V < V ? rr - v * V : V, LLVMBuildAdd(c->b, ox, cg_i64(c, p), ""));
    return;
  }
  for (int v = 0; v < nrv; v++) {
    int lanes = rr - v * V < V ? rr - v * V : V;
    LLVMValueRef bias = cg_load_v(c, r->bp, LLVMBuildAdd(c->b, r->bbase, cg_i64(c, (int64_t)v * V), ""), V);
    for (int p0 = 0; p0 < np; p0 += V) { /* tiles wider than V (a panel row's 20 pixels): V pixels at a time */
      int cn = np - p0 < V ? np - p0 : V;
      LLVMValueRef a[16], t[16];
      for (int p = 0; p < cn; p++) a[p] = LLVMBuildFAdd(c->b, acc[v * np + p0 + p], bias, "");
      cg_transpose_v(c, V, cn, a, t);
      LLVMValueRef base = LLVMBuildAdd(c->b, r->out_row, LLVMBuildAdd(c->b, ox, cg_i64(c, p0), ""), "");
      for (int l = 0; l < lanes; l++) {
        LLVMValueRef idx = LLVMBuildAdd(c->b, base, cg_i64(c, (int64_t)(v * V + l) * plane), "");
        LLVMValueRef x = vc_first_lanes(c, t[l], cn);
        for (int q = 0, ra = 0; q < e->n_post; q++)
          x = e->post[q]->op == IR_OP_add ? cg_epilogue(c, e->post[q], x, r->resid[ra++], idx, cn)
                                          : cg_epilogue(c, e->post[q], x, NULL, NULL, cn);
        cg_store_v(c, x, r->out, idx, cn);
      }
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
  return g->kw > 1 && !g->sub && cg_conv_vc_unshared(g) && 2 * nrv * np <= g->R / g->V * g->P && g->tune->vc_split;
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
    if (g->kw > 1 && !g->sub && cg_conv_vc_unshared(g))
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
void cg_conv_vc_tile(cg_ctx *c, const conv_geom *g, const conv_row *r, const conv_epi *e, int rr, int np,
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
  cg_conv_vc_store_tile(c, g, r, e, cur, rr, np, ox);
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
void cg_conv_vc_w_spread_pf(cg_ctx *c, const conv_row *r, LLVMValueRef wnext, LLVMValueRef j, int64_t t, int64_t nt,
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
 * same order as cg_conv_vc_tile's (ci, ky, kx ascending per accumulator; f32 in the buffer): results
 * are bitwise those of the unblocked row.  VC_KXK_BLOCK_BYTES: conv/conv_core.h. */

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

int cg_conv_vc_kblocked_kxk_row(cg_ctx *c, const conv_geom *g, const conv_row *r, const conv_epi *e, int rr) {
  /* --enable-half-partials: the partials between blocks would have to be 16-bit (and recorded
   * for the interpreter like vc_kblocked_row's); the unblocked row keeps them in registers */
  if (g->kw == 1 || g->sub || !cg_conv_vc_unshared(g) || c->g->half_partials) return 0;
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
    cg_conv_vc_store_tile(c, g, r, e, cur, rr, (int)np, cg_i64(c, from));
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
 * [oy][tile][slot] between blocks.  The sums run in cg_conv_vc_tile's order (ci, ky, kx ascending per
 * accumulator; f32 in the buffer): plane rows are bitwise the row kernels; plane tiles (below)
 * too, except where a row kernel's small tile splits its accumulators (vc_split).
 * Kind `conv2d_vcp_...`.  tune vc_plane turns it off (A/B
 * measurements), tune vc_plane_force=1 takes it for every kxk conv it can run (tests).  Training's
 * packed route (gen_train_pconv.c) calls cg_conv_vc_plane for the convs inference runs here
 * (kind `_pk_vcp_`); its row entry (cg_conv_row_pixels) never takes it. */

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
  int spread = cg_conv_vc_w_spread(g);
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
      cg_conv_vc_w_spread_pf(c, r, LLVMBuildAdd(c->b, r->wbase, LLVMBuildMul(c->b, hi, cg_i64(c, wci / 4), ""), ""), LLVMBuildSub(c->b, ci, lo, ""),
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
    cg_conv_vc_store_tile(c, g, r, e, cur, rr, (int)np, cg_i64(c, from));
  }
}

void cg_conv_vc_plane(cg_ctx *c, const conv_geom *g, const conv_row *r0, const conv_epi *e, int rr) {
  int64_t pt = cg_conv_vc_plane_tiles(g);
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
  /* kernel rows of output row oy that read real input rows (conv/conv_core.c cg_conv_ky_range) */
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
    cg_conv_vc_store_tile(c, g, &r, e, cur, rr, (int)np, cg_i64(c, from));
  }
  cg_loop_end(c, &EY);
}
