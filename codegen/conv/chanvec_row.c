/* conv/chanvec_row.c — the channel-vector rows of the direct route (conv/chanvec_row.h):
 * an output row (or a sub conv's whole plane) of channel-vector tiles (conv/chanvec.c), as
 * compile-time border tiles and a run-time loop of interior tiles, balanced short rows,
 * K-blocked rows, and for unpadded 1x1 convs K-blocked rows over input panels gathered once
 * per row or image. */
#include <stdlib.h>

#include "codegen/cg_half_partials.h"
#include "codegen/conv/chanvec.h"
#include "codegen/conv/chanvec_row.h"
#include "codegen/conv/se.h"

/* Compile-time pixels [from, to) in tiles of up to P. */
static void vc_const_tiles(cg_ctx *c, const conv_geom *g, const conv_row *r, const conv_epi *e, int rr, int64_t from,
                           int64_t to) {
  while (from < to) {
    int np = (int)(to - from < g->P ? to - from : g->P);
    cg_conv_vc_tile(c, g, r, e, rr, np, cg_i64(c, from), from);
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
    cg_conv_vc_tile(c, g, r, e, rr, (int)(to - from), cg_i64(c, from), from);
    from = to;
  }
  return 1;
}

/* K-blocking of unpadded 1x1 rows whose input (cin_g planes x the row) exceeds half the
 * op's L2 budget (cg_shard_tile_budget): ResNet-50 layer4's 1x1 GEMMs on channel vectors are one 49-pixel row of
 * 2048 x 196 B = 400 KB, and every pixel tile swept all of it, i.e. 2048 cache lines per tile
 * from L3.  Here the input channels run in blocks of kc, and within a block every pixel tile
 * of the row (compile-time tiles of balanced width) runs over the block's input (a quarter of the budget)
 * while it is in L2; the tiles' accumulators wait in a stack buffer between blocks. */
#define VC_KBLOCK_MAX_TILES 16

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
 * b1/b16 +6 % per CPU-second over d = 16; d = 64 no better).  tune vc_w_prefetch=0 turns it
 * off (A/B measurements). */
#define VC_W_PF_DIST 32
static int vc_w_pf_dist(const conv_geom *g) { return g->tune->vc_w_prefetch ? VC_W_PF_DIST : 0; }

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
  int wpf = vc_w_pf_dist(g), spread = cg_conv_vc_w_spread(g);
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
  cg_loop Z; /* a loop: unrolled by hand, the 528 stores of a 22-tile row cost LLVM seconds (DAG store merging) */
  LLVMValueRef zi = cg_loop_begin(c, &Z, cg_i64(c, 0), cg_i64(c, nt * nacc), cg_i64(c, 1), "kzero");
  if (!h16) cg_store_v(c, cg_fzero(c, V), buf, LLVMBuildMul(c->b, zi, cg_i64(c, V), ""), V);
  else LLVMBuildStore(c->b, LLVMConstNull(pt), LLVMBuildInBoundsGEP2(c->b, pt, buf, &zi, 1, ""));
  cg_loop_end(c, &Z);
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
      cg_conv_vc_w_spread_pf(c, r, LLVMBuildAdd(c->b, r->wbase, LLVMBuildMul(c->b, hi, cg_i64(c, g->R), ""), ""), LLVMBuildSub(c->b, ci, lo, ""),
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
      cg_conv_vc_store_tile(c, g, r, e, v, rr, (int)np, cg_i64(c, from));
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
    cg_conv_vc_store_tile(c, g, r, e, v, rr, (int)np, cg_i64(c, from));
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
  /* items reading the squeeze-excite buffer (conv/se.c) all have in_base 0: the key adds
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
      cg_conv_vc_tile(c, g, r, e, rr, (int)(to - from), cg_i64(c, from), from);
      from = to;
    }
    return;
  }
  if (cg_conv_vc_kblocked_kxk_row(c, g, r, e, rr) || vc_short_row(c, g, r, e, rr)) return;
  int64_t a = (g->pl + g->sw - 1) / g->sw; /* first pixel whose taps are all inside */
  int64_t lim = g->w - 1 + g->pl - (int64_t)(g->kw - 1) * g->dw, b = lim < 0 ? 0 : lim / g->sw + 1;
  if (b > g->ow) b = g->ow;
  if (a > b) a = b;
  int64_t nfull = (b - a) / g->P;
  vc_const_tiles(c, g, r, e, rr, 0, a);
  if (nfull > 0) {
    cg_loop L;
    LLVMValueRef i = cg_loop_begin(c, &L, cg_i64(c, 0), cg_i64(c, nfull), cg_i64(c, 1), "ox");
    cg_conv_vc_tile(c, g, r, e, rr, g->P, LLVMBuildAdd(c->b, cg_i64(c, a), LLVMBuildMul(c->b, i, cg_i64(c, g->P), ""), ""), -1);
    cg_loop_end(c, &L);
  }
  vc_const_tiles(c, g, r, e, rr, a + nfull * g->P, g->ow);
}
