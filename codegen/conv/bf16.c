/* conv/bf16.c — bf16 dot-product conv kernels (issue 4; docs/matrix.md "bf16 kernels",
 * docs/precision.md "bf16 arithmetic").
 *
 * Route: a flat conv (1x1, stride 1, unpadded, one group: out[Cout, HW] = w[Cout, Cin] *
 * x[Cin, HW]) whose input is the result of a bf16 round16 node and whose weights are all on
 * the bf16 grid — what --precision 16.16 (or 16.32) --half-type bf16 inference produces — on a
 * target where cg_bf16_dot() is non-zero.  Such a conv computes exact bf16 x bf16 products
 * accumulated in f32, which is what vdpbf16ps does; it differs from the f32 kernel in the
 * summation order and, with a folded batchnorm, in where the scale is applied (the epilogue
 * here, the packed weights there).
 *
 * Layout: K (input channels) in pairs.  Weights are packed at compile time as dwords holding
 * the bf16 pair (w[co][2k] low, w[co][2k+1] high), [Cout/R][Cin/2][R] (zero padded: an odd
 * Cin's last pair has a zero high half, the last tile's missing channels are zero).  The
 * input is packed per pixel chunk (a work item whose chunk is not in this thread's buffer
 * packs it first) into a stack buffer of dwords, [pixel tile][Cin/2][P*V], dword = the bf16
 * pair (x[2k][p] low, x[2k+1][p] high) of pixel p, converted from f32 to nearest even (exact
 * for inputs already on the grid).  The microkernel: R x P <V x float> accumulators; per pair
 * k it loads P panel vectors and for each of R channels broadcasts one weight dword and
 * issues P dot-product steps (vdpbf16ps zmm, zmm, m32bcst on avx512bf16).  Epilogue as the
 * f32 kernel's, except that a folded batchnorm's scale is applied here (acc * scale + shift),
 * so the packed weights stay the exact bf16 weights.  Work items (image, chunk, channel
 * tile), tiles fastest, as the direct route's flat convs (conv/flat.c); no thread-split variant.  16-bit inference
 * storage (passes/store16.c, cg_conv_bf16_io16): the epilogue writes bf16 results and reads
 * bf16 residuals, the flat and row-segment panels read a bf16 x (gathered panels: f32).
 * kxk / strided / padded convs (one group, >= BF16_LOAD_MIN_CIN in, >= BF16_LOAD_MIN_COUT
 * out channels, BF16_GATHER_MIN_* if gathered; tune bf16_kxk=0: not): K = taps x channel pairs, tap-major (pair k = tap
 * k / kpc, channels 2 (k % kpc) and the next), in the weights and in the panel, which is an
 * im2col of the chunk built per tap and pixel vector from masked row-segment loads (seg_plan)
 * or masked dword gathers, 0 outside the map; the microkernel and epilogue are the flat ones. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "codegen/cg_isa.h"
#include "codegen/conv/bf16.h"
#include "codegen/conv/bf16_plan.h"
#include "codegen/conv/conv_core.h"
#include "codegen/gen_round16.h"

static LLVMValueRef splat_i32v(cg_ctx *c, uint32_t v, int w) {
  LLVMValueRef e[64];
  for (int i = 0; i < w; i++) e[i] = LLVMConstInt(c->t_i32, v, 0);
  return LLVMConstVector(e, (unsigned)w);
}

typedef struct bk {
  LLVMValueRef x, out, wp, bp, sp, buf, in_base, out_base, wbase, bbase, c0;
  LLVMValueRef tix, xpf; /* channel tile; flat: byte offset in x of the thread's next chunk in plane 0 (NULL: no x prefetch) */
  LLVMValueRef resid[PASS_MAX_POST];
  LLVMValueRef cbuf; /* AMX: the accumulator tiles stored for the epilogue, [4][16][16] f32 */
  LLVMValueRef comp; /* int8 with s8 inputs: 128 x the weights' sum per padded channel (i32), else NULL */
  cg_amx amx;
  const conv_epi *e;
  int bn;
  /* 16-bit inference storage (passes/store16.c, cg_conv_bf16_io16): dtypes of x (flat
   * panels only), of the result and of the residuals; IR_F32 otherwise */
  ir_dtype xdt, odt, rdt[PASS_MAX_POST];
} bk;

/* ---- input panels ----------------------------------------------------------------------- */
/* A 16-bit x (bf16 storage): the V u16 at x[idx] (lanes m) zero-extended to dwords, the low
 * half of a pair (exactly what narrowing the f32 grid value gives). */
static LLVMValueRef load_h16(cg_ctx *c, const bk *s, LLVMValueRef idx, unsigned m, int V) {
  unsigned full = V >= 32 ? ~0u : (1u << V) - 1;
  LLVMTypeRef i16 = LLVMInt16TypeInContext(c->llc), ht = LLVMVectorType(i16, (unsigned)V);
  LLVMValueRef ptr = LLVMBuildGEP2(c->b, i16, s->x, &idx, 1, ""), h;
  if (m == full) {
    h = LLVMBuildLoad2(c->b, ht, ptr, "h16");
    LLVMSetAlignment(h, 2);
  } else {
    LLVMTypeRef ov[2] = {ht, c->t_ptr};
    LLVMValueRef args[4] = {ptr, cg_i32(c, 2), cg_conv_mask_const(c, m, V), LLVMConstNull(ht)};
    h = cg_intrinsic(c, "llvm.masked.load", ov, 2, args, 4);
  }
  return LLVMBuildZExt(c->b, h, LLVMVectorType(c->t_i32, (unsigned)V), "");
}

/* Stores panel vector j (run time) of dword row k: [pixel tile][kpr][P], tile j / P, vector j % P. */
static void store_slot(cg_ctx *c, const bgeom *g, const bk *s, LLVMValueRef k, LLVMValueRef j, LLVMValueRef v) {
  LLVMValueRef tile = LLVMBuildSDiv(c->b, j, cg_i64(c, g->P), ""), in = LLVMBuildSRem(c->b, j, cg_i64(c, g->P), "");
  LLVMValueRef row = LLVMBuildAdd(c->b, LLVMBuildMul(c->b, tile, cg_i64(c, g->kpr), ""), k, "");
  LLVMValueRef slot = LLVMBuildAdd(c->b, LLVMBuildMul(c->b, row, cg_i64(c, g->P), ""), in, "slot");
  LLVMValueRef st = LLVMBuildStore(c->b, v, LLVMBuildGEP2(c->b, LLVMTypeOf(v), s->buf, &slot, 1, ""));
  LLVMSetAlignment(st, (unsigned)g->V * 4); /* one slot: V dwords */
}

/* int8: the dword of epd channel vectors x[0..epd-1] (f32 integer values of a quantize8; NULL:
 * a channel past Cin, 0): vpdpbusd (epd 4): byte i = x[i] (u8), or x[i] + 128 (s8, q8 2);
 * vpmaddwd (epd 2): half i = x[i] as s16. */
static LLVMValueRef q8_dword(cg_ctx *c, const bgeom *g, LLVMValueRef *x) {
  int V = g->V, bits = 32 / g->epd;
  LLVMTypeRef vi = LLVMVectorType(c->t_i32, (unsigned)V);
  LLVMValueRef d = LLVMConstNull(vi);
  for (int i = 0; i < g->epd; i++) {
    if (!x[i]) continue;
    LLVMValueRef q = LLVMBuildFPToSI(c->b, x[i], vi, "q");
    if (g->q8 == 2 && g->epd == 4) q = LLVMBuildAdd(c->b, q, splat_i32v(c, 128, V), "");
    if (i < g->epd - 1) q = LLVMBuildAnd(c->b, q, splat_i32v(c, (1u << bits) - 1, V), "");
    d = LLVMBuildOr(c->b, d, i ? LLVMBuildShl(c->b, q, splat_i32v(c, (uint32_t)(bits * i), V), "") : q, "");
  }
  return d;
}

/* Vector j (run time, or jc >= 0 at compile time with lane mask m) of pair k of the chunk;
 * nch: the dword's channels present (epd, or Cin mod epd for the last one). */
static void pack_vec(cg_ctx *c, const bgeom *g, const bk *s, LLVMValueRef k, int nch, LLVMValueRef j, unsigned m) {
  int V = g->V, odd_last = nch < 2;
  unsigned full = V >= 32 ? ~0u : (1u << V) - 1;
  LLVMValueRef px = LLVMBuildAdd(c->b, s->c0, LLVMBuildMul(c->b, j, cg_i64(c, V), ""), "");
  LLVMValueRef i0 = LLVMBuildAdd(c->b, s->in_base, LLVMBuildAdd(c->b, LLVMBuildMul(c->b, k, cg_i64(c, g->epd * g->hw), ""), px, ""), "");
  LLVMValueRef i1 = LLVMBuildAdd(c->b, i0, cg_i64(c, g->hw), "");
  LLVMTypeRef vi = LLVMVectorType(c->t_i32, (unsigned)V);
  LLVMValueRef pair;
  if (g->q8) {
    LLVMValueRef x[4] = {NULL, NULL, NULL, NULL};
    for (int i = 0; i < nch; i++) {
      LLVMValueRef ii = LLVMBuildAdd(c->b, i0, cg_i64(c, i * g->hw), "");
      x[i] = m == full ? cg_load_v(c, s->x, ii, V) : cg_conv_masked_load(c, s->x, ii, m, V);
    }
    pair = q8_dword(c, g, x);
  } else {
    LLVMValueRef h0, h1;
    if (s->xdt != IR_F32) { /* 16-bit storage: the bf16 bits as they are */
      h0 = load_h16(c, s, i0, m, V);
      h1 = odd_last ? LLVMConstNull(vi) : load_h16(c, s, i1, m, V);
    } else {
      LLVMValueRef x0 = m == full ? cg_load_v(c, s->x, i0, V) : cg_conv_masked_load(c, s->x, i0, m, V);
      LLVMValueRef x1 = odd_last ? cg_fzero(c, V) : m == full ? cg_load_v(c, s->x, i1, V) : cg_conv_masked_load(c, s->x, i1, m, V);
      h0 = LLVMBuildZExt(c->b, cg_narrow16_v(c, NULL, x0, IR_HALF_BF16, 0, V), vi, "");
      h1 = LLVMBuildZExt(c->b, cg_narrow16_v(c, NULL, x1, IR_HALF_BF16, 0, V), vi, "");
    }
    pair = LLVMBuildOr(c->b, h0, LLVMBuildShl(c->b, h1, splat_i32v(c, 16, V), ""), "pair");
  }
  store_slot(c, g, s, k, j, pair);
}

/* Packs px pixels (compile time) of the chunk at s->c0: nfv whole vectors, then a masked one. */
static void pack_chunk(cg_ctx *c, const bgeom *g, const bk *s, int64_t px) {
  int64_t nfv = px / g->V, tail = px % g->V;
  int64_t kfull = g->cin / g->epd;
  int rem = (int)(g->cin % g->epd);
  for (int last = 0; last <= (rem != 0); last++) {
    if (!last && !kfull) continue;
    cg_loop K;
    LLVMValueRef k = last ? cg_i64(c, kfull) : cg_loop_begin(c, &K, cg_i64(c, 0), cg_i64(c, kfull), cg_i64(c, 1), "pk");
    int nch = last ? rem : g->epd;
    if (nfv > 0) {
      cg_loop J;
      LLVMValueRef j = cg_loop_begin(c, &J, cg_i64(c, 0), cg_i64(c, nfv), cg_i64(c, 1), "pj");
      pack_vec(c, g, s, k, nch, j, g->V >= 32 ? ~0u : (1u << g->V) - 1);
      cg_loop_end(c, &J);
    }
    if (tail) pack_vec(c, g, s, k, nch, cg_i64(c, nfv), (1u << tail) - 1);
    if (!last) cg_loop_end(c, &K);
  }
}

/* Any conv (kxk, strided, padded): the panel is an im2col of the chunk, pair k = (tap k / kpc,
 * channels 2 (k % kpc), +1), each vector gathered (lanes outside the map or past the plane's
 * last pixel are 0).  The per-lane input offsets of a tap are computed once per pixel vector. */
static LLVMValueRef gather_ch(cg_ctx *c, const bk *s, LLVMValueRef base, LLVMValueRef off, LLVMValueRef mask, int V) {
  LLVMValueRef ptr = LLVMBuildGEP2(c->b, c->t_f32, s->x, &base, 1, "");
  LLVMValueRef ptrs = LLVMBuildGEP2(c->b, c->t_f32, ptr, &off, 1, "");
  LLVMTypeRef ov[2] = {cg_vtype(c, V), LLVMVectorType(c->t_ptr, (unsigned)V)};
  LLVMValueRef args[4] = {ptrs, cg_i32(c, 4), mask, cg_fzero(c, V)};
  return cg_intrinsic(c, "llvm.masked.gather", ov, 2, args, 4);
}

/* <V x i16> bf16 lanes as the f32 vector of their values (exact: zero low halves). */
static LLVMValueRef h16_f32bits(cg_ctx *c, LLVMValueRef h, int V) {
  LLVMTypeRef vi = LLVMVectorType(c->t_i32, (unsigned)V);
  LLVMValueRef e = LLVMBuildShl(c->b, LLVMBuildZExt(c->b, h, vi, ""), splat_i32v(c, 16, V), "");
  return LLVMBuildBitCast(c->b, e, cg_vtype(c, V), "");
}

/* One channel's panel vector from its row segments (seg_plan): masked loads at base + sb[r]
 * (lane masks m[r], stride 2: ma[r] / mb[r] for the two halves), merged through the
 * pass-through operand (the segments' lanes are disjoint). */
static LLVMValueRef seg_load(cg_ctx *c, const bgeom *g, const bk *s, LLVMValueRef base, LLVMValueRef *sb, LLVMValueRef *m,
                             LLVMValueRef *ma, LLVMValueRef *mb) {
  int V = g->V, h = s->xdt != IR_F32; /* 16-bit storage (bf16 x): u16 lanes, then their f32 bits (<< 16) */
  LLVMTypeRef et = h ? LLVMInt16TypeInContext(c->llc) : c->t_f32, vt = LLVMVectorType(et, (unsigned)V);
  LLVMTypeRef ov[2] = {vt, c->t_ptr};
  LLVMValueRef a = LLVMConstNull(vt), b = LLVMConstNull(vt), al = cg_i32(c, h ? 2 : 4);
  for (int r = 0; r < g->nseg; r++) {
    LLVMValueRef idx = LLVMBuildAdd(c->b, base, sb[r], "");
    LLVMValueRef ptr = LLVMBuildGEP2(c->b, et, s->x, &idx, 1, ""); /* lane 0 may be outside */
    LLVMValueRef args[4] = {ptr, al, g->sw == 1 ? m[r] : ma[r], a};
    a = cg_intrinsic(c, "llvm.masked.load", ov, 2, args, 4);
    if (g->sw == 1) continue;
    LLVMValueRef idx2 = LLVMBuildAdd(c->b, idx, cg_i64(c, V), "");
    LLVMValueRef args2[4] = {LLVMBuildGEP2(c->b, et, s->x, &idx2, 1, ""), al, mb[r], b};
    b = cg_intrinsic(c, "llvm.masked.load", ov, 2, args2, 4);
  }
  LLVMValueRef v = g->sw == 1 ? a : cg_even_lanes(c, a, b, V); /* 16-bit: the even words, then widened once */
  return h ? h16_f32bits(c, v, V) : v;
}

/* Lane masks of the segments of a pixel vector (key: its lanes' segment keys p / kdiv, in:
 * in-map lanes): m[r] = lanes of key key[0] + r; stride 2: ma[r] / mb[r] = m[r] spread to the
 * even lanes of the first / second loaded vector. */
static void seg_masks(cg_ctx *c, const bgeom *g, LLVMValueRef key, LLVMValueRef in, LLVMValueRef *m, LLVMValueRef *ma,
                      LLVMValueRef *mb) {
  int V = g->V;
  LLVMTypeRef vi = LLVMVectorType(c->t_i32, (unsigned)V), vb = LLVMVectorType(c->t_i1, (unsigned)V);
  LLVMValueRef key0 = LLVMBuildShuffleVector(c->b, key, LLVMGetUndef(vi), LLVMConstNull(vi), "key0");
  LLVMValueRef rr = LLVMBuildSub(c->b, key, key0, "seg");
  LLVMValueRef ia[64], ib[64];
  for (int l = 0; l < V; l++) /* operand 2 (index V) is all false */
    ia[l] = cg_i32(c, l % 2 ? V : l / 2), ib[l] = cg_i32(c, l % 2 ? V : V / 2 + l / 2);
  for (int r = 0; r < g->nseg; r++) {
    m[r] = g->nseg == 1 ? in : LLVMBuildAnd(c->b, in, LLVMBuildICmp(c->b, LLVMIntEQ, rr, splat_i32v(c, (uint32_t)r, V), ""), "");
    if (g->sw == 1) continue;
    ma[r] = LLVMBuildShuffleVector(c->b, m[r], LLVMConstNull(vb), LLVMConstVector(ia, (unsigned)V), "ma");
    mb[r] = LLVMBuildShuffleVector(c->b, m[r], LLVMConstNull(vb), LLVMConstVector(ib, (unsigned)V), "mb");
  }
}

/* Input offsets (from the image's channel base) of lane 0 of each segment of the pixel vector
 * whose lane 0 is pixel p0 (i64, of the plane or spanned of the batch), for tap: segment r has
 * key key0 + r (key = p / kdiv), image b = key kdiv / hw, first output row oy = (key kdiv - b
 * hw) / ow, and its lane l reads b Cin ih iw + (oy sh + dy) iw + dx + sw (p0 + l - key kdiv). */
static void seg_bases(cg_ctx *c, const bgeom *g, LLVMValueRef p0, int tap, LLVMValueRef *sb) {
  int dy = tap / g->kw - g->ph, dx = tap % g->kw - g->pw;
  LLVMValueRef key0 = LLVMBuildUDiv(c->b, p0, cg_i64(c, g->kdiv), "key0");
  for (int r = 0; r < g->nseg; r++) {
    LLVMValueRef ks = LLVMBuildMul(c->b, LLVMBuildAdd(c->b, key0, cg_i64(c, r), ""), cg_i64(c, g->kdiv), "kstart");
    LLVMValueRef b = LLVMBuildUDiv(c->b, ks, cg_i64(c, g->hw), "");
    LLVMValueRef oy = LLVMBuildUDiv(c->b, LLVMBuildSub(c->b, ks, LLVMBuildMul(c->b, b, cg_i64(c, g->hw), ""), ""), cg_i64(c, g->ow), "");
    LLVMValueRef v = LLVMBuildMul(c->b, b, cg_i64(c, g->cin * g->ih * g->iw), "");
    v = LLVMBuildAdd(c->b, v, LLVMBuildMul(c->b, LLVMBuildAdd(c->b, LLVMBuildMul(c->b, oy, cg_i64(c, g->sh), ""), cg_i64(c, dy), ""), cg_i64(c, g->iw), ""), "");
    v = LLVMBuildAdd(c->b, v, LLVMBuildMul(c->b, LLVMBuildSub(c->b, p0, ks, ""), cg_i64(c, g->sw), ""), "");
    sb[r] = LLVMBuildAdd(c->b, v, cg_i64(c, dx), "sbase");
  }
}

static void gather_vec(cg_ctx *c, const bgeom *g, const bk *s, int tap, LLVMValueRef j) {
  int V = g->V;
  LLVMTypeRef vi = LLVMVectorType(c->t_i32, (unsigned)V);
  LLVMValueRef lane[64];
  for (int l = 0; l < V; l++) lane[l] = cg_i32(c, l);
  LLVMValueRef p0 = LLVMBuildTrunc(c->b, LLVMBuildAdd(c->b, s->c0, LLVMBuildMul(c->b, j, cg_i64(c, V), ""), ""), c->t_i32, "");
  LLVMValueRef p0v = LLVMBuildInsertElement(c->b, LLVMGetUndef(vi), p0, cg_i32(c, 0), "");
  p0v = LLVMBuildShuffleVector(c->b, p0v, LLVMGetUndef(vi), LLVMConstNull(vi), "");
  LLVMValueRef p = LLVMBuildAdd(c->b, p0v, LLVMConstVector(lane, (unsigned)V), "px");
  LLVMValueRef pl = p, img = NULL; /* spanned: pixel of the batch -> image, pixel of its plane */
  if (g->span) {
    img = LLVMBuildUDiv(c->b, p, splat_i32v(c, (uint32_t)g->hw, V), "img");
    pl = LLVMBuildSub(c->b, p, LLVMBuildMul(c->b, img, splat_i32v(c, (uint32_t)g->hw, V), ""), "pl");
  }
  LLVMValueRef oy = LLVMBuildUDiv(c->b, pl, splat_i32v(c, (uint32_t)g->ow, V), "oy");
  LLVMValueRef ox = LLVMBuildSub(c->b, pl, LLVMBuildMul(c->b, oy, splat_i32v(c, (uint32_t)g->ow, V), ""), "ox");
  int dy = tap / g->kw - g->ph, dx = tap % g->kw - g->pw;
  LLVMValueRef iy = LLVMBuildAdd(c->b, LLVMBuildMul(c->b, oy, splat_i32v(c, (uint32_t)g->sh, V), ""), splat_i32v(c, (uint32_t)dy, V), "iy");
  LLVMValueRef ix = LLVMBuildAdd(c->b, LLVMBuildMul(c->b, ox, splat_i32v(c, (uint32_t)g->sw, V), ""), splat_i32v(c, (uint32_t)dx, V), "ix");
  /* unsigned compares: a negative coordinate is out of range too */
  LLVMValueRef in = LLVMBuildAnd(c->b, LLVMBuildICmp(c->b, LLVMIntULT, iy, splat_i32v(c, (uint32_t)g->ih, V), ""),
                                 LLVMBuildICmp(c->b, LLVMIntULT, ix, splat_i32v(c, (uint32_t)g->iw, V), ""), "");
  in = LLVMBuildAnd(c->b, in, LLVMBuildICmp(c->b, LLVMIntULT, p, splat_i32v(c, (uint32_t)g->q, V), ""), "in");
  LLVMValueRef off = LLVMBuildAdd(c->b, LLVMBuildMul(c->b, iy, splat_i32v(c, (uint32_t)g->iw, V), ""), ix, "off");
  int64_t in_hw = g->ih * g->iw, kfull = g->cin / g->epd;
  int rem = (int)(g->cin % g->epd);
  if (g->span) off = LLVMBuildAdd(c->b, off, LLVMBuildMul(c->b, img, splat_i32v(c, (uint32_t)(g->cin * in_hw), V), ""), "off");
  LLVMValueRef m[4], ma[4], mb[4], sb[4];
  if (g->nseg) {
    seg_masks(c, g, LLVMBuildUDiv(c->b, p, splat_i32v(c, (uint32_t)g->kdiv, V), "key"), in, m, ma, mb);
    seg_bases(c, g, LLVMBuildAdd(c->b, s->c0, LLVMBuildMul(c->b, j, cg_i64(c, V), ""), "p0"), tap, sb);
  }
  for (int last = 0; last <= (rem != 0); last++) {
    if (!last && !kfull) continue;
    cg_loop K;
    LLVMValueRef k = last ? cg_i64(c, kfull) : cg_loop_begin(c, &K, cg_i64(c, 0), cg_i64(c, kfull), cg_i64(c, 1), "gk");
    int nch = last ? rem : g->epd;
    LLVMValueRef x[4] = {NULL, NULL, NULL, NULL}; /* the dword's channels, f32 (16-bit storage: their f32 bits) */
    if (g->nseg) {
      LLVMValueRef o = LLVMBuildAdd(c->b, s->in_base, LLVMBuildMul(c->b, k, cg_i64(c, g->epd * in_hw), ""), "roff");
      for (int i = 0; i < nch; i++) x[i] = seg_load(c, g, s, i ? LLVMBuildAdd(c->b, o, cg_i64(c, i * in_hw), "") : o, sb, m, ma, mb);
    } else { /* the channel offset joins the i32 lane offsets inside the loop (dword-index gathers) */
      LLVMValueRef kof = LLVMBuildTrunc(c->b, LLVMBuildMul(c->b, k, cg_i64(c, g->epd * in_hw), ""), c->t_i32, "");
      LLVMValueRef kv = LLVMBuildShuffleVector(c->b, LLVMBuildInsertElement(c->b, LLVMGetUndef(vi), kof, cg_i32(c, 0), ""),
                                               LLVMGetUndef(vi), LLVMConstNull(vi), "");
      LLVMValueRef o0 = LLVMBuildAdd(c->b, off, kv, "");
      for (int i = 0; i < nch; i++)
        x[i] = gather_ch(c, s, s->in_base, i ? LLVMBuildAdd(c->b, o0, splat_i32v(c, (uint32_t)(i * in_hw), V), "") : o0, in, V);
    }
    LLVMValueRef pair;
    if (g->q8) pair = q8_dword(c, g, x);
    else { /* on the bf16 grid (a round16 result): the pair is the two top halves */
      LLVMValueRef u0 = LLVMBuildBitCast(c->b, x[0], vi, ""), u1 = LLVMBuildBitCast(c->b, x[1] ? x[1] : cg_fzero(c, V), vi, "");
      pair = LLVMBuildOr(c->b, LLVMBuildLShr(c->b, u0, splat_i32v(c, 16, V), ""),
                         LLVMBuildAnd(c->b, u1, splat_i32v(c, 0xffff0000u, V), ""), "pair");
    }
    store_slot(c, g, s, LLVMBuildAdd(c->b, k, cg_i64(c, tap * g->kpc), ""), j, pair);
    if (!last) cg_loop_end(c, &K);
  }
}

/* The gathered panel of px pixels (compile time): every vector (the last one's lanes past the
 * plane's end are 0), per tap. */
static void gather_chunk(cg_ctx *c, const bgeom *g, const bk *s, int64_t px) {
  int64_t nv = (px + g->V - 1) / g->V;
  for (int tap = 0; tap < g->kh * g->kw; tap++) {
    cg_loop J;
    LLVMValueRef j = cg_loop_begin(c, &J, cg_i64(c, 0), cg_i64(c, nv), cg_i64(c, 1), "gj");
    gather_vec(c, g, s, tap, j);
    cg_loop_end(c, &J);
  }
}

/* ---- microkernel ------------------------------------------------------------------------ */
/* A result vector narrowed for a 16-bit store (the last node's round16): on avx512bf16 (mode 2)
 * one vcvtneps2bf16 (cg_narrow_bf16_native: bitwise cg_narrow16_v's rounding, f32 denormal lanes
 * through a branch to the integer rounding), else cg_narrow16_v's integer rounding (9
 * instructions).  tune bf16_sw_narrow=1: the integer rounding everywhere (A/B). */
static LLVMValueRef narrow_out(cg_ctx *c, const bgeom *g, const ir_node *last, LLVMValueRef v, int f) {
  int V = g->V;
  if (f != IR_HALF_BF16 || g->mode != 2 || cg_tune(c)->bf16_sw_narrow) return cg_narrow16_v(c, last, v, f, 0, V);
  return cg_narrow_bf16_native(c, last, v, V);
}

/* Stores result v (f32) at out[oi] in s->odt, lanes m (all: a plain store). */
static void store_out(cg_ctx *c, const bgeom *g, const bk *s, const ir_node *last, LLVMValueRef v, LLVMValueRef oi, unsigned m) {
  int V = g->V, f = cg_dt_half(s->odt);
  unsigned full = V >= 32 ? ~0u : (1u << V) - 1;
  if (f < 0) {
    if (m == full) cg_act_store(c, last, v, s->out, oi, V, s->odt);
    else cg_act_masked_store(c, last, v, s->out, oi, m, V, s->odt);
    return;
  }
  LLVMValueRef h = narrow_out(c, g, last, v, f);
  LLVMTypeRef i16 = LLVMInt16TypeInContext(c->llc);
  LLVMValueRef ptr = LLVMBuildGEP2(c->b, i16, s->out, &oi, 1, "");
  if (m == full) {
    LLVMValueRef st = LLVMBuildStore(c->b, h, ptr);
    LLVMSetAlignment(st, 2);
    return;
  }
  LLVMTypeRef ov[2] = {LLVMTypeOf(h), c->t_ptr};
  LLVMValueRef args[4] = {h, ptr, cg_i32(c, 2), cg_conv_mask_const(c, m, V)};
  cg_intrinsic(c, "llvm.masked.store", ov, 2, args, 4);
}

/* Spanned planes (span_plan): batch pixels qv .. qv+V-1 of one channel, whose element index as
 * if all were in image 0 is oi: lanes of image b = qv / hw are at *i0 = oi + b (Cout - 1) hw
 * (lane mask *m0), those of image b + 1 (from lane (b + 1) hw - qv on) at *i1 = *i0 + (Cout - 1)
 * hw (*m1), lanes past the batch nowhere. */
static void span_addr(cg_ctx *c, const bgeom *g, LLVMValueRef qv, LLVMValueRef oi, LLVMValueRef *i0, LLVMValueRef *i1,
                      LLVMValueRef *m0, LLVMValueRef *m1) {
  int V = g->V;
  LLVMTypeRef vi = LLVMVectorType(c->t_i32, (unsigned)V);
  LLVMValueRef lane[64];
  for (int l = 0; l < V; l++) lane[l] = cg_i32(c, l);
  LLVMValueRef b = LLVMBuildUDiv(c->b, qv, cg_i64(c, g->hw), "simg");
  LLVMValueRef bl = LLVMBuildSub(c->b, LLVMBuildMul(c->b, LLVMBuildAdd(c->b, b, cg_i64(c, 1), ""), cg_i64(c, g->hw), ""), qv, "");
  LLVMValueRef lim = LLVMBuildSub(c->b, cg_i64(c, g->q), qv, "");
  LLVMValueRef lv = LLVMConstVector(lane, (unsigned)V), e0 = cg_i32(c, 0);
  LLVMValueRef blv = LLVMBuildTrunc(c->b, cg_min64(c, bl, cg_i64(c, V)), c->t_i32, "");
  LLVMValueRef limv = LLVMBuildTrunc(c->b, cg_min64(c, lim, cg_i64(c, V)), c->t_i32, "");
  blv = LLVMBuildShuffleVector(c->b, LLVMBuildInsertElement(c->b, LLVMGetUndef(vi), blv, e0, ""), LLVMGetUndef(vi), LLVMConstNull(vi), "");
  limv = LLVMBuildShuffleVector(c->b, LLVMBuildInsertElement(c->b, LLVMGetUndef(vi), limv, e0, ""), LLVMGetUndef(vi), LLVMConstNull(vi), "");
  LLVMValueRef in = LLVMBuildICmp(c->b, LLVMIntSLT, lv, limv, "");
  *m0 = LLVMBuildAnd(c->b, in, LLVMBuildICmp(c->b, LLVMIntSLT, lv, blv, ""), "");
  *m1 = LLVMBuildAnd(c->b, in, LLVMBuildICmp(c->b, LLVMIntSGE, lv, blv, ""), "");
  *i0 = LLVMBuildAdd(c->b, oi, LLVMBuildMul(c->b, b, cg_i64(c, (g->cout - 1) * g->hw), ""), "");
  LLVMValueRef two = LLVMBuildICmp(c->b, LLVMIntSLT, bl, lim, "two"); /* lanes in image b + 1 (else i1 = i0: no lanes) */
  *i1 = LLVMBuildAdd(c->b, *i0, LLVMBuildSelect(c->b, two, cg_i64(c, (g->cout - 1) * g->hw), cg_i64(c, 0), ""), "");
}

/* The result v (f32, or narrowed as last rounds for a 16-bit result) of the spanned pixels
 * qv .. (span_addr): two masked stores. */
static void span_store(cg_ctx *c, const bgeom *g, const bk *s, const ir_node *last, LLVMValueRef v, LLVMValueRef qv, LLVMValueRef oi) {
  int f = cg_dt_half(s->odt);
  LLVMTypeRef et = f < 0 ? c->t_f32 : LLVMInt16TypeInContext(c->llc);
  if (f >= 0) v = narrow_out(c, g, last, v, f);
  LLVMTypeRef ov[2] = {LLVMTypeOf(v), c->t_ptr};
  LLVMValueRef i0, i1, m0, m1;
  span_addr(c, g, qv, oi, &i0, &i1, &m0, &m1);
  LLVMValueRef a0[4] = {v, LLVMBuildGEP2(c->b, et, s->out, &i0, 1, ""), cg_i32(c, f < 0 ? 4 : 2), m0};
  cg_intrinsic(c, "llvm.masked.store", ov, 2, a0, 4);
  LLVMValueRef a1[4] = {v, LLVMBuildGEP2(c->b, et, s->out, &i1, 1, ""), cg_i32(c, f < 0 ? 4 : 2), m1};
  cg_intrinsic(c, "llvm.masked.store", ov, 2, a1, 4);
}

/* A residual (dtype rdt, shaped as the result) of the spanned pixels qv ..: two masked loads
 * into one vector (lanes past the batch 0), widened to f32 if 16-bit. */
static LLVMValueRef span_load(cg_ctx *c, const bgeom *g, const ir_node *n, LLVMValueRef base, ir_dtype rdt, LLVMValueRef qv, LLVMValueRef oi) {
  int V = g->V, f = cg_dt_half(rdt);
  LLVMTypeRef et = f < 0 ? c->t_f32 : LLVMInt16TypeInContext(c->llc), vt = LLVMVectorType(et, (unsigned)V);
  LLVMTypeRef ov[2] = {vt, c->t_ptr};
  LLVMValueRef i0, i1, m0, m1;
  span_addr(c, g, qv, oi, &i0, &i1, &m0, &m1);
  LLVMValueRef a0[4] = {LLVMBuildGEP2(c->b, et, base, &i0, 1, ""), cg_i32(c, f < 0 ? 4 : 2), m0, LLVMConstNull(vt)};
  LLVMValueRef v = cg_intrinsic(c, "llvm.masked.load", ov, 2, a0, 4);
  LLVMValueRef a1[4] = {LLVMBuildGEP2(c->b, et, base, &i1, 1, ""), cg_i32(c, f < 0 ? 4 : 2), m1, v};
  v = cg_intrinsic(c, "llvm.masked.load", ov, 2, a1, 4);
  return f < 0 ? v : cg_widen16_v(c, n, v, f, V);
}

/* Fused residual adds (not spanned; tune bf16_epi_pf=0: off, A/B): the residual lines of
 * the rr x np-vector tile whose first output element is oi0 (the next tile the thread runs:
 * the chunk's next pixel tile, after its last the next channel tile's first), prefetched one
 * microkernel ahead of the epilogue that reads them, as conv/pixvec.c's flat_prefetch_epi (at
 * batch 16 they come from L3 or memory and the epilogue's loads stalled the dot products). */
static void prefetch_epi(cg_ctx *c, const bgeom *g, const bk *s, int rr, int np, LLVMValueRef oi0) {
  for (int q = 0, ra = 0; q < s->e->n_post; q++) {
    if (s->e->post[q]->op != IR_OP_add) continue;
    int64_t es = s->rdt[ra] != IR_F32 ? 2 : 4, lines = ((int64_t)np * g->V * es + 63) / 64 + 1;
    LLVMValueRef base = s->resid[ra++];
    for (int k = 0; k < rr; k++) {
      LLVMValueRef oi = LLVMBuildAdd(c->b, oi0, cg_i64(c, (int64_t)k * g->hw), "");
      for (int64_t j = 0; j < lines; j++) {
        LLVMValueRef off = LLVMBuildAdd(c->b, LLVMBuildMul(c->b, oi, cg_i64(c, es), ""), cg_i64(c, 64 * j), "");
        LLVMValueRef args[4] = {LLVMBuildGEP2(c->b, c->t_i8, base, &off, 1, "pfe"), cg_i32(c, 0), cg_i32(c, 3), cg_i32(c, 1)};
        cg_intrinsic(c, "llvm.prefetch", &c->t_ptr, 1, args, 4);
      }
    }
  }
}

/* The AMX microkernel of rr channels (<= R = 16 or 32) x np pixel vectors (<= P) at chunk pixel
 * q0: accumulator tile 2a + p (channels 16a.., pixel vector p) += A tile 4 + a (16 channels x
 * 16 pairs of the packed weights) . B tile 6 + p (16 pair rows of the panel, row stride P
 * vectors), per K step of 16 pairs (kpr / 16 steps; the pairs past kp are 0 in both); the
 * tiles stored to s->cbuf, acc[r np + p] pointing at the rows the epilogue reads. */
static void amx_tile(cg_ctx *c, const bgeom *g, const bk *s, int rr, int np, LLVMValueRef q0, LLVMValueRef *acc) {
  int na = (rr + 15) / 16;
  LLVMTypeRef vi = LLVMVectorType(c->t_i32, 16);
  for (int a = 0; a < na; a++)
    for (int p = 0; p < np; p++) cg_amx_zero(c, &s->amx, 2 * a + p);
  LLVMValueRef ptile = LLVMBuildSDiv(c->b, q0, cg_i64(c, (int64_t)g->P * 16), "ptile");
  LLVMValueRef prow = LLVMBuildMul(c->b, ptile, cg_i64(c, g->kpr), "prow"); /* the tile's first pair row */
  cg_loop K;
  LLVMValueRef kb = cg_loop_begin(c, &K, cg_i64(c, 0), cg_i64(c, g->kpr / 16), cg_i64(c, 1), "kb");
  LLVMValueRef wi = LLVMBuildAdd(c->b, s->wbase, LLVMBuildMul(c->b, kb, cg_i64(c, (int64_t)g->R * 16), ""), "wa");
  for (int a = 0; a < na; a++) {
    LLVMValueRef i = LLVMBuildAdd(c->b, wi, cg_i64(c, a * 256), "");
    cg_amx_load(c, &s->amx, 4 + a, LLVMBuildGEP2(c->b, c->t_i32, s->wp, &i, 1, "atile"), 64);
  }
  LLVMValueRef row = LLVMBuildMul(c->b, LLVMBuildAdd(c->b, prow, LLVMBuildMul(c->b, kb, cg_i64(c, 16), ""), ""), cg_i64(c, g->P), "");
  for (int p = 0; p < np; p++) {
    LLVMValueRef i = LLVMBuildAdd(c->b, row, cg_i64(c, p), "");
    cg_amx_load(c, &s->amx, 6 + p, LLVMBuildGEP2(c->b, vi, s->buf, &i, 1, "btile"), (int64_t)g->P * 64);
  }
  for (int a = 0; a < na; a++)
    for (int p = 0; p < np; p++) cg_amx_dot(c, &s->amx, 2 * a + p, 4 + a, 6 + p);
  cg_loop_end(c, &K);
  for (int a = 0; a < na; a++)
    for (int p = 0; p < np; p++) {
      LLVMValueRef i = cg_i64(c, (2 * a + p) * 256);
      cg_amx_store(c, &s->amx, 2 * a + p, LLVMBuildGEP2(c->b, c->t_f32, s->cbuf, &i, 1, "ctile"), 64);
    }
  for (int r = 0; r < rr; r++)
    for (int p = 0; p < np; p++) {
      LLVMValueRef i = cg_i64(c, (2 * (r / 16) + p) * 256 + (r % 16) * 16);
      acc[r * np + p] = LLVMBuildGEP2(c->b, c->t_f32, s->cbuf, &i, 1, "crow");
    }
}

/* The vdpbf16ps microkernel of rr channels x np pixel vectors at chunk pixel q0: R x P vector
 * accumulators (acc[r np + p], allocas) over the kp pairs; xpf: the next-chunk x prefetch. */
static void vec_tile(cg_ctx *c, const bgeom *g, const bk *s, int rr, int np, LLVMValueRef q0, LLVMValueRef xpf, LLVMValueRef *acc) {
  int V = g->V;
  LLVMTypeRef vt = cg_vtype(c, V), vi = LLVMVectorType(c->t_i32, (unsigned)V);
  for (int i = 0; i < rr * np; i++) {
    acc[i] = cg_entry_alloca(c, vt, "acc");
    LLVMBuildStore(c->b, cg_fzero(c, V), acc[i]);
  }
  LLVMValueRef ptile = LLVMBuildSDiv(c->b, q0, cg_i64(c, (int64_t)g->P * V), "ptile");
  cg_loop K;
  LLVMValueRef k = cg_loop_begin(c, &K, cg_i64(c, 0), cg_i64(c, g->kp), cg_i64(c, 1), "kp");
  LLVMValueRef cur[64], xv[8];
  for (int i = 0; i < rr * np; i++) cur[i] = LLVMBuildLoad2(c->b, vt, acc[i], "");
  LLVMValueRef slot = LLVMBuildMul(c->b, LLVMBuildAdd(c->b, LLVMBuildMul(c->b, ptile, cg_i64(c, g->kpr), ""), k, ""), cg_i64(c, g->P), "");
  for (int p = 0; p < np; p++) {
    LLVMValueRef idx = LLVMBuildAdd(c->b, slot, cg_i64(c, p), "");
    LLVMValueRef l = LLVMBuildLoad2(c->b, vi, LLVMBuildGEP2(c->b, vi, s->buf, &idx, 1, ""), "xpair");
    LLVMSetAlignment(l, (unsigned)V * 4);
    xv[p] = l;
  }
  if (xpf) { /* next-chunk prefetch: one line of channels 2k and 2k + 1 */
    int64_t es = s->xdt != IR_F32 ? 2 : 4;
    LLVMValueRef off = LLVMBuildAdd(c->b, xpf, LLVMBuildMul(c->b, k, cg_i64(c, 2 * g->hw * es), ""), "xpf_off");
    for (int h = 0; h < 2; h++) {
      LLVMValueRef o = h ? LLVMBuildAdd(c->b, off, cg_i64(c, g->hw * es), "") : off;
      LLVMValueRef args[4] = {LLVMBuildGEP2(c->b, c->t_i8, s->x, &o, 1, "xpf"), cg_i32(c, 0), cg_i32(c, 2), cg_i32(c, 1)};
      cg_intrinsic(c, "llvm.prefetch", &c->t_ptr, 1, args, 4);
    }
  }
  LLVMValueRef wrow = LLVMBuildAdd(c->b, s->wbase, LLVMBuildMul(c->b, k, cg_i64(c, g->R), ""), "");
  for (int r = 0; r < rr; r++) {
    LLVMValueRef wi = LLVMBuildAdd(c->b, wrow, cg_i64(c, r), "");
    LLVMValueRef w = LLVMBuildLoad2(c->b, c->t_i32, LLVMBuildGEP2(c->b, c->t_i32, s->wp, &wi, 1, ""), "wpair");
    LLVMSetAlignment(w, 4);
    LLVMValueRef wv = LLVMBuildShuffleVector(c->b, LLVMBuildInsertElement(c->b, LLVMGetUndef(vi), w, cg_i32(c, 0), ""),
                                             LLVMGetUndef(vi), LLVMConstNull(vi), "wbc");
    for (int p = 0; p < np; p++) {
      LLVMValueRef *a = &cur[r * np + p];
      if (g->q8) /* i32 sums kept in the f32 accumulators' bits */
        *a = LLVMBuildBitCast(c->b, cg_int8_dp(c, g->mode, LLVMBuildBitCast(c->b, *a, vi, ""), xv[p], wv, V), vt, "");
      else *a = cg_bf16_dp(c, g->mode, *a, xv[p], wv, V);
    }
  }
  for (int i = 0; i < rr * np; i++) LLVMBuildStore(c->b, cur[i], acc[i]);
  cg_loop_end(c, &K);
}

/* rr channels x np vectors at chunk pixel q0 (a multiple of P*V); last_mask: lanes of the
 * last vector inside the plane (all for whole tiles); pf (NULL: none): the first output
 * element of the next tile, whose residuals prefetch_epi prefetches. */
static void tile(cg_ctx *c, const bgeom *g, const bk *s, int rr, int np, LLVMValueRef q0, unsigned last_mask, LLVMValueRef pf,
                 LLVMValueRef xpf) {
  int V = g->V;
  unsigned full = V >= 32 ? ~0u : (1u << V) - 1;
  LLVMTypeRef vt = cg_vtype(c, V);
  LLVMValueRef acc[64];
  if (pf) prefetch_epi(c, g, s, rr, g->P, pf);
  if (g->amx) amx_tile(c, g, s, rr, np, q0, acc);
  else vec_tile(c, g, s, rr, np, q0, xpf, acc);
  const conv_epi *e = s->e;
  for (int r = 0; r < rr; r++) {
    LLVMValueRef bi = LLVMBuildAdd(c->b, s->bbase, cg_i64(c, r), "");
    LLVMValueRef bias = cg_splat(c, cg_load_f32(c, s->bp, bi), V);
    LLVMValueRef scale = s->bn ? cg_splat(c, cg_load_f32(c, s->sp, bi), V) : NULL;
    LLVMValueRef comp = NULL; /* int8: 128 x the weights' sum (s8 inputs; 0 for u8), <V x i32> */
    if (g->q8) {
      LLVMTypeRef vi = LLVMVectorType(c->t_i32, (unsigned)V);
      comp = s->comp ? LLVMBuildLoad2(c->b, c->t_i32, LLVMBuildGEP2(c->b, c->t_i32, s->comp, &bi, 1, ""), "comp") : cg_i32(c, 0);
      comp = LLVMBuildShuffleVector(c->b, LLVMBuildInsertElement(c->b, LLVMGetUndef(vi), comp, cg_i32(c, 0), ""), LLVMGetUndef(vi),
                                    LLVMConstNull(vi), "comp");
    }
    LLVMValueRef orow = LLVMBuildAdd(c->b, s->out_base, LLVMBuildAdd(c->b, cg_i64(c, r * g->hw), q0, ""), "");
    for (int p = 0; p < np; p++) {
      unsigned mo = p == np - 1 ? last_mask : full;
      LLVMValueRef oi = LLVMBuildAdd(c->b, orow, cg_i64(c, (int64_t)p * V), "oi");
      LLVMValueRef v = LLVMBuildLoad2(c->b, vt, acc[r * np + p], "");
      if (g->q8) { /* the i32 sum (s8 inputs: less 128 x the weights' sum) as f32, rounded to nearest even */
        LLVMValueRef iv = LLVMBuildBitCast(c->b, v, LLVMTypeOf(comp), "");
        v = LLVMBuildSIToFP(c->b, s->comp ? LLVMBuildSub(c->b, iv, comp, "") : iv, vt, "acc");
      }
      LLVMValueRef qv = g->span ? LLVMBuildAdd(c->b, s->c0, LLVMBuildAdd(c->b, q0, cg_i64(c, (int64_t)p * V), ""), "qv") : NULL;
      if (scale) v = LLVMBuildFMul(c->b, v, scale, "bn");
      v = LLVMBuildFAdd(c->b, v, bias, "");
      for (int q = 0, ra = 0; q < e->n_post; q++) { /* as conv/pixvec.c's pixel tiles, 16-bit operands too */
        ir_dtype rdt = e->post[q]->op == IR_OP_add ? s->rdt[ra] : IR_F32;
        LLVMValueRef res = e->post[q]->op == IR_OP_add ? s->resid[ra++] : NULL;
        if (e->post[q]->op == IR_OP_round16 && s->odt != IR_F32) continue; /* the 16-bit store rounds */
        if (res && g->span) v = LLVMBuildFAdd(c->b, v, span_load(c, g, e->post[q], res, rdt, qv, oi), "resid");
        else if (res && mo != full) v = LLVMBuildFAdd(c->b, v, cg_act_masked_load(c, e->post[q], res, oi, mo, V, rdt), "resid");
        else if (res && rdt != IR_F32) v = LLVMBuildFAdd(c->b, v, cg_act_load(c, e->post[q], res, oi, V, rdt), "resid");
        else v = cg_epilogue(c, e->post[q], v, res, oi, V);
      }
      const ir_node *last = e->n_post ? e->post[e->n_post - 1] : NULL;
      if (g->span) span_store(c, g, s, last, v, qv, oi);
      else store_out(c, g, s, last, v, oi, mo);
    }
  }
}

/* The tiles of a chunk of px pixels (compile time): whole tiles in a run-time loop, then the
 * remaining vectors as one tile (its last vector masked at the plane's end). */
static void chunk_tiles(cg_ctx *c, const bgeom *g, const bk *s, int rr, int64_t px) {
  int64_t tile_px = (int64_t)g->P * g->V, nt = px / tile_px, rest = px % tile_px;
  unsigned full = g->V >= 32 ? ~0u : (1u << g->V) - 1;
  int pf = !g->span && cg_tune(c)->bf16_epi_pf, any = 0;
  for (int q = 0; q < s->e->n_post; q++) any |= s->e->post[q]->op == IR_OP_add;
  /* prefetch_epi: the next channel tile's first pixel tile of this chunk */
  LLVMValueRef next_ct = pf && any ? LLVMBuildAdd(c->b, s->out_base, cg_i64(c, (int64_t)g->R * g->hw), "pf_ct") : NULL;
  /* next-chunk x prefetch: tile u of the thread's chunk (channel tile x tiles per chunk + pixel
   * tile) takes line u % lines of every channel row of the next chunk */
  int64_t ntpc = (g->chunk_px + tile_px - 1) / tile_px, lines = g->chunk_px * (s->xdt != IR_F32 ? 2 : 4) / 64 + 1;
  LLVMValueRef u0 = s->xpf ? LLVMBuildMul(c->b, s->tix, cg_i64(c, ntpc), "") : NULL;
#define XPF_AT(ii) (s->xpf ? LLVMBuildAdd(c->b, s->xpf, LLVMBuildMul(c->b, LLVMBuildURem(c->b, LLVMBuildAdd(c->b, u0, (ii), ""), cg_i64(c, lines), ""), cg_i64(c, 64), ""), "xpf_l") : NULL)
  if (nt > 0) {
    cg_loop L;
    LLVMValueRef i = cg_loop_begin(c, &L, cg_i64(c, 0), cg_i64(c, nt), cg_i64(c, 1), "pt");
    LLVMValueRef q0 = LLVMBuildMul(c->b, i, cg_i64(c, tile_px), ""), nx = NULL;
    if (next_ct) {
      nx = LLVMBuildAdd(c->b, s->out_base, LLVMBuildAdd(c->b, q0, cg_i64(c, tile_px), ""), "");
      if (!rest) nx = LLVMBuildSelect(c->b, LLVMBuildICmp(c->b, LLVMIntSLT, i, cg_i64(c, nt - 1), ""), nx, next_ct, "pf_next");
    }
    tile(c, g, s, rr, g->P, q0, full, nx, XPF_AT(i));
    cg_loop_end(c, &L);
  }
  if (rest) {
    int np = (int)((rest + g->V - 1) / g->V), lt = (int)(rest % g->V);
    tile(c, g, s, rr, np, cg_i64(c, nt * tile_px), lt ? (1u << lt) - 1 : full, next_ct, XPF_AT(cg_i64(c, nt)));
  }
#undef XPF_AT
}

/* One work item's pixels for rr channels: the chunk is whole, or the plane's last one. */
static void item_body(cg_ctx *c, const bgeom *g, const bk *s, int rr, LLVMValueRef chunk) {
  int64_t last_px = g->q - (g->nch - 1) * g->chunk_px;
  if (last_px == g->chunk_px) {
    chunk_tiles(c, g, s, rr, g->chunk_px);
    return;
  }
  cg_if f;
  cg_if_begin(c, &f, LLVMBuildICmp(c->b, LLVMIntSLT, chunk, cg_i64(c, g->nch - 1), ""));
  chunk_tiles(c, g, s, rr, g->chunk_px);
  cg_if_else(c, &f);
  chunk_tiles(c, g, s, rr, last_px);
  cg_if_end(c, &f);
}

static void pack_item(cg_ctx *c, const bgeom *g, const bk *s, LLVMValueRef chunk) {
  int64_t last_px = g->hw - (g->nch - 1) * g->chunk_px;
  if (!g->flat) { /* masked per lane: one body for every chunk */
    gather_chunk(c, g, s, g->chunk_px < g->q ? g->chunk_px : g->q);
    return;
  }
  if (last_px == g->chunk_px) {
    pack_chunk(c, g, s, g->chunk_px);
    return;
  }
  cg_if f;
  cg_if_begin(c, &f, LLVMBuildICmp(c->b, LLVMIntSLT, chunk, cg_i64(c, g->nch - 1), ""));
  pack_chunk(c, g, s, g->chunk_px);
  cg_if_else(c, &f);
  pack_chunk(c, g, s, last_px);
  cg_if_end(c, &f);
}

static const char *bf16_kind(cg_ctx *c, const bgeom *g, const pass_fusion *fu, const bk *s) {
  char op[160];
  int k = g->flat ? snprintf(op, sizeof op, "conv2d_1x1") : snprintf(op, sizeof op, "conv2d_%dx%ds%d%s", g->kh, g->kw, g->sh, g->span ? "_span" : "");
  if (fu->bn >= 0) k += snprintf(op + k, sizeof op - (size_t)k, "_bn");
  for (int i = 0; i < fu->n_post && k < 100; i++)
    k += snprintf(op + k, sizeof op - (size_t)k, "_%s", ir_ops[c->g->nodes[fu->post[i]].op].name);
  int r16 = 0; /* 16-bit storage: "_x16" reads x, "_o16" writes the result, "_r16" reads a residual */
  for (int i = 0; i < PASS_MAX_POST; i++) r16 |= s->rdt[i] != IR_F32;
  return ir_fmt(c->arena, "%s%s%s%s_%s_%dx%d__%s", op, s->xdt != IR_F32 ? "_x16" : "", s->odt != IR_F32 ? "_o16" : "",
                r16 ? "_r16" : "", g->q8 ? (g->q8 == 2 ? "int8_s8" : "int8_u8") : "bf16", g->R, g->P * g->V,
                g->q8 ? cg_int8_isa_name(c->target, g->mode, g->amx) : cg_bf16_isa_name(c->target, g->amx));
}

/* Sets s's dtypes from the values of n's group (passes/store16.c decided them with
 * cg_conv_bf16_io16); an internal error when a 16-bit value reaches an f32 operand. */
static int bf16_dtypes(cg_ctx *c, const ir_node *n, const bgeom *g, const pass_fusion *fu, bk *s) {
  const ir_graph *G = c->g;
  int prev = fu->bn >= 0 ? G->nodes[fu->bn].out : n->out, ra = 0, any = 0;
  s->xdt = G->values[n->in[0]].dtype;
  for (int q = 0; q < fu->n_post; q++) {
    const ir_node *m = &G->nodes[fu->post[q]];
    if (m->op == IR_OP_add) any |= (s->rdt[ra++] = G->values[m->in[0] == prev ? m->in[1] : m->in[0]].dtype) != IR_F32;
    prev = m->out;
  }
  s->odt = G->values[G->nodes[fu->last].out].dtype;
  any |= s->odt != IR_F32;
  if ((s->xdt != IR_F32 && !g->flat && !g->nseg) || (s->xdt != IR_F32 && s->xdt != IR_BF16) || (any && !cg_tune(c)->bf16_io16))
    return cg_fail(c, n, "internal error: 16-bit operand of a bf16 conv kernel that reads f32"), -1;
  return 0;
}

LLVMValueRef cg_gen_conv2d_bf16(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind) {
  bgeom g;
  cg_conv_bf16_plan(c, n, &g);
  const pass_fusion *fu = cg_fusion(c, n);
  conv_epi e = {{0}, fu->n_post};
  int n_act = 1;
  for (int i = 0; i < fu->n_post; i++) {
    e.post[i] = &c->g->nodes[fu->post[i]];
    n_act += e.post[i]->op == IR_OP_add;
  }
  size_t nco = (size_t)g.ntile * g.R, wn = nco * (size_t)g.kpr;
  uint32_t *wp = malloc(wn * sizeof *wp);
  float *bp = malloc(nco * sizeof(float)), *sp = malloc(nco * sizeof(float));
  int32_t *comp = malloc(nco * sizeof *comp);
  if (!wp || !bp || !sp || !comp) abort();
  const ir_node *bnn = fu->bn >= 0 ? &c->g->nodes[fu->bn] : NULL;
  if (!cg_plan_only(c)) cg_conv_bf16_pack(c, n, bnn, &g, wp, bp, sp, comp);
  LLVMValueRef a[IR_MAX_IN + PASS_MAX_POST + 4];
  LLVMValueRef f = cg_kernel_begin(c, fn_name, n_act, a);
  bk s;
  memset(&s, 0, sizeof s);
  s.e = &e, s.bn = bnn != NULL;
  s.x = a[0];
  for (int i = 1; i < n_act; i++) s.resid[i - 1] = a[i];
  s.out = a[n_act];
  if (bf16_dtypes(c, n, &g, fu, &s) < 0) {
    free(wp), free(bp), free(sp), free(comp);
    return NULL;
  }
  s.wp = cg_blob_const(c, "conv_bf16.w", wp, wn * sizeof *wp);
  s.bp = cg_blob_const(c, "conv_bf16.b", bp, nco * sizeof(float));
  s.sp = s.bn ? cg_blob_const(c, "conv_bf16.s", sp, nco * sizeof(float)) : NULL;
  s.comp = g.q8 == 2 && g.epd == 4 ? cg_blob_const(c, "conv_int8.comp", comp, nco * sizeof *comp) : NULL;
  free(wp), free(bp), free(sp), free(comp);
  LLVMTypeRef vi = LLVMVectorType(c->t_i32, (unsigned)g.V);
  s.buf = cg_entry_alloca(c, LLVMArrayType2(vi, (uint64_t)(g.chunk_px / g.V * g.kpr)), "xpanel");
  LLVMSetAlignment(s.buf, 64);
  if (g.amx) {
    s.cbuf = cg_entry_alloca(c, LLVMArrayType2(c->t_f32, 4 * 256), "amx_c");
    LLVMSetAlignment(s.cbuf, 64);
    cg_amx_begin(c, &s.amx, g.amx, g.mode, g.q8 != 0);
    if (g.kpr > g.kp) { /* the pair rows past kp stay 0 (the packs write rows < kp only) */
      cg_loop Z;
      LLVMValueRef v = cg_loop_begin(c, &Z, cg_i64(c, 0), cg_i64(c, g.chunk_px / g.V), cg_i64(c, 1), "zv");
      LLVMValueRef base = LLVMBuildAdd(c->b, LLVMBuildMul(c->b, LLVMBuildMul(c->b, LLVMBuildSDiv(c->b, v, cg_i64(c, g.P), ""), cg_i64(c, g.kpr), ""), cg_i64(c, g.P), ""),
                                       LLVMBuildSRem(c->b, v, cg_i64(c, g.P), ""), "");
      for (int64_t k = g.kp; k < g.kpr; k++) {
        LLVMValueRef i = LLVMBuildAdd(c->b, base, cg_i64(c, k * g.P), "");
        LLVMSetAlignment(LLVMBuildStore(c->b, LLVMConstNull(vi), LLVMBuildGEP2(c->b, vi, s.buf, &i, 1, "")), 64);
      }
      cg_loop_end(c, &Z);
    }
  }
  LLVMValueRef key = cg_entry_alloca(c, c->t_i64, "xpanel_key");
  LLVMBuildStore(c->b, cg_i64(c, -1), key);
  LLVMValueRef lo, hi;
  cg_thread_range(c, cg_i64(c, (g.span ? 1 : g.n) * g.nch * g.ntile), a[n_act + 1], a[n_act + 2], &lo, &hi);
  cg_loop L;
  LLVMValueRef it = cg_loop_begin(c, &L, lo, hi, cg_i64(c, 1), "item");
  LLVMValueRef t = LLVMBuildSRem(c->b, it, cg_i64(c, g.ntile), "tile");
  LLVMValueRef rest = LLVMBuildSDiv(c->b, it, cg_i64(c, g.ntile), "");
  LLVMValueRef chunk = LLVMBuildSRem(c->b, rest, cg_i64(c, g.nch), "chunk");
  LLVMValueRef img = LLVMBuildSDiv(c->b, rest, cg_i64(c, g.nch), "img");
  s.c0 = LLVMBuildMul(c->b, chunk, cg_i64(c, g.chunk_px), "c0");
  s.in_base = LLVMBuildMul(c->b, img, cg_i64(c, g.cin * g.ih * g.iw), "in_base");
  LLVMValueRef co0 = LLVMBuildMul(c->b, t, cg_i64(c, g.R), "co0");
  s.out_base = LLVMBuildAdd(c->b, LLVMBuildMul(c->b, LLVMBuildAdd(c->b, LLVMBuildMul(c->b, img, cg_i64(c, g.cout), ""), co0, ""), cg_i64(c, g.hw), ""),
                            s.c0, "out_base"); /* spanned (img 0): channel co0's plane of image 0 + c0 */
  s.wbase = LLVMBuildMul(c->b, t, cg_i64(c, g.kpr * g.R), "wbase");
  s.bbase = co0, s.tix = t;
  if (g.flat && g.cout <= g.cin && cg_tune(c)->bf16_x_pf) { /* the thread's next chunk: this image's next, or the next image's first */
    LLVMValueRef last = LLVMBuildICmp(c->b, LLVMIntEQ, chunk, cg_i64(c, g.nch - 1), "");
    LLVMValueRef nc0 = LLVMBuildSelect(c->b, last, cg_i64(c, 0), LLVMBuildAdd(c->b, s.c0, cg_i64(c, g.chunk_px), ""), "");
    LLVMValueRef nb = LLVMBuildSelect(c->b, last, LLVMBuildAdd(c->b, s.in_base, cg_i64(c, g.cin * g.ih * g.iw), ""), s.in_base, "");
    s.xpf = LLVMBuildMul(c->b, LLVMBuildAdd(c->b, nb, nc0, ""), cg_i64(c, s.xdt != IR_F32 ? 2 : 4), "xpf0");
  }
  /* the chunk's panel, packed by the first item of this thread that needs it */
  LLVMValueRef ck = rest; /* image * nch + chunk */
  cg_if pf;
  cg_if_begin(c, &pf, LLVMBuildICmp(c->b, LLVMIntNE, LLVMBuildLoad2(c->b, c->t_i64, key, ""), ck, ""));
  LLVMBuildStore(c->b, ck, key);
  pack_item(c, &g, &s, chunk);
  cg_if_end(c, &pf);
  int remc = (int)(g.cout % g.R);
  if (!remc) item_body(c, &g, &s, g.R, chunk);
  else {
    cg_if f2;
    cg_if_begin(c, &f2, LLVMBuildICmp(c->b, LLVMIntNE, t, cg_i64(c, g.ntile - 1), ""));
    item_body(c, &g, &s, g.R, chunk);
    cg_if_else(c, &f2);
    item_body(c, &g, &s, remc, chunk);
    cg_if_end(c, &f2);
  }
  cg_loop_end(c, &L);
  if (g.amx) cg_amx_end(c, &s.amx);
  cg_kernel_end(c);
  *kind = bf16_kind(c, &g, fu, &s);
  return f;
}
