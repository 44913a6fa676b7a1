/* conv/pixvec.c — the direct route's pixel-vector microkernel (conv/pixvec.h) on NCHW
 * (dense, strided, padded, dilated, grouped): a register tile of R output channels x P vectors
 * of V output pixels of one output row; per input channel and kernel tap it loads P pixel
 * vectors (strided for stride 2), broadcasts R weights and issues R*P llvm.fmuladd over the
 * weights packed by cg_conv_pack (conv/conv_core.c, an inference batchnorm folded in); the
 * epilogue adds the bias and applies fused relu/sigmoid/swish/residual add.  Rows are clipped
 * at run time (kernel-row range per output row), columns at compile time: interior tiles are
 * unmasked, border/tail vectors use compile-time lane masks.  Flat 1x1 convs (conv/flat.c) run
 * the same tiles over pixel chunks of the plane, with the prefetch and streaming-store options
 * below. */
#include "codegen/conv/pixvec.h"
#include "codegen/conv/se.h"
#include "codegen/gen_round16.h"

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

/* The tile of cg_conv_tile_x (conv/pixvec.h). */
void cg_conv_tile_x(cg_ctx *c, const conv_geom *g, const conv_row *r, const conv_epi *e, int rr, int np,
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
      xv[p] = cg_conv_xscale(c, r, CI.iv, xv[p]); /* squeeze-excite (conv/se.c); packed panels hold scaled pixels */
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

void cg_conv_tile(cg_ctx *c, const conv_geom *g, const conv_row *r, const conv_epi *e, int rr, int np,
                      LLVMValueRef ox, int64_t ox_const, int64_t ox_end) {
  cg_conv_tile_x(c, g, r, e, rr, np, ox, ox_const, ox_end, NULL, NULL, 0, NULL, NULL, 0, 0);
}

void cg_conv_masked_tiles(cg_ctx *c, const conv_geom *g, const conv_row *r, const conv_epi *e, int rr, int64_t from,
                         int64_t to) {
  while (from < to) {
    int64_t nv = (to - from + g->V - 1) / g->V;
    int np = (int)(nv < g->P ? nv : g->P);
    cg_conv_tile(c, g, r, e, rr, np, cg_i64(c, from), from, to);
    from += (int64_t)np * g->V;
  }
}

/* One output row of rr channels: a masked first tile over the left border, unmasked interior
 * tiles (run-time loop), masked tiles over the rest.  Tiles are P vectors wide where they
 * can be (a narrow row is a single tile). */
void cg_conv_row_emit(cg_ctx *c, const conv_geom *g, const conv_row *r, const conv_epi *e, int rr) {
  int V = g->V, extra = g->sw == 2 ? 1 : 0;
  int64_t tile_px = (int64_t)g->P * V;
  int64_t a = (g->pl + g->sw - 1) / g->sw;
  int64_t lim = g->w - 1 - extra + g->pl - (int64_t)(g->kw - 1) * g->dw, b = lim < 0 ? 0 : lim / g->sw + 1;
  if (b > g->ow) b = g->ow;
  int64_t left = (a + tile_px - 1) / tile_px * tile_px; /* interior starts at a tile boundary */
  if (left > b) left = b;
  int64_t nfull = (b - left) / tile_px;
  if (nfull == 0) left = 0; /* no interior: the whole row in masked tiles */
  cg_conv_masked_tiles(c, g, r, e, rr, 0, left);
  if (nfull > 0) {
    cg_loop L;
    LLVMValueRef i = cg_loop_begin(c, &L, cg_i64(c, 0), cg_i64(c, nfull), cg_i64(c, 1), "ox");
    cg_conv_tile(c, g, r, e, rr, g->P, LLVMBuildAdd(c->b, cg_i64(c, left), LLVMBuildMul(c->b, i, cg_i64(c, tile_px), ""), ""), -1, 0);
    cg_loop_end(c, &L);
  }
  cg_conv_masked_tiles(c, g, r, e, rr, left + nfull * tile_px, g->ow);
}
