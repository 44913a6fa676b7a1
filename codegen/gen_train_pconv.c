/* gen_train_pconv.c — groups-1 conv2d forward and conv2d_grad_input (stride 1; stride > 1 as
 * one stride-1 conv per output phase of dx, see pc_grad_input_strided) of compiled training
 * through the inference microkernels (conv/pixvec.c pixel vectors, conv/chanvec.c channel
 * vectors; entry cg_conv_row_pixels).  The weights [Co,Ci,KH,KW] live in the state buffer and
 * change every step, so each thread packs the ones it is about to use into the inference
 * layout [tile][Cin][KH][KW][R] (tile zero-padded; grad_input: w transposed, taps mirrored)
 * in a stack buffer, one block of channel tiles at a time.  Work items (block, image, output
 * row, tile of the block), tile fastest, in contiguous ranges over the threads: a thread packs
 * a block when its range enters it (each block about once per thread per step, cheap next to
 * a batch of images), the block's packed weights stay in L2 while the thread walks its images,
 * and every output element has one writer with a fixed summation order (results do not depend
 * on the thread count).  A flat conv (1x1 stride 1 unpadded, pixel vectors) runs the
 * inference GEMM's pixel chunks on small planes (cg_conv_flat_pixels: one long row of the
 * plane, its x chunk packed into a panel by the first tile of the block that reads it and read
 * sequentially by the others); on larger planes, or with tune train_pconv_flat, it is
 * viewed as rows of a divisor of its plane (cw pixels, ~L2-sized input rows).  A 1x1 strided conv that inference runs on its
 * subsampled plane (sub) runs here on its own output rows; a kxk channel-vector conv that
 * inference runs as K-blocked planes (vc_plane) runs as planes (one item per (image, tile)).
 * Training batchnorm uses batch
 * statistics, so there is no epilogue besides the bias. */
#include <stdlib.h>
#include <string.h>

#include "codegen/conv/chanvec.h"
#include "codegen/conv/conv_core.h"
#include "codegen/conv/direct.h"
#include "codegen/conv/flat.h"
#include "codegen/gen_train.h"

#define PC_MAX_PACK_BYTES (1 << 20) /* one tile's packed weights beyond this: the direct kernel */
/* 1x1 convs: packed weights of a block up to this (stack buffer per thread).  A 1x1 tile's K
 * loop reads one row piece from each of cin planes (cin streams the prefetchers do not
 * follow) but its packed weights sequentially, so an input row is worth reusing over many
 * tiles: ResNet-50 layer3's 1024->256 1x1 (rows of 28 pixels, 24 KB per 6-channel tile) ran
 * 1.7-2x faster with all 43 tiles in one 1 MB block than with 6-tile blocks of half the L2
 * budget (which was 1.3-1.4x slower than the direct kernel), a 256->256 1x1 on 14x14 2x with
 * 16 tiles instead of 1-4 (docs/training.md).  Other convs: half the L2 tile budget. */
#define PC_MAX_BLOCK_1X1_BYTES (1 << 20)
/* Flat convs take the GEMM's pixel chunks (cg_conv_flat_pixels) on planes of at most this
 * many pixels, rows of a divisor of the plane on larger ones.  ResNet-50 b16 (perf samples,
 * two interleaved runs each, docs/training.md): on 14x14 the chunks ran 1.06-1.21x the rows
 * (forward and grad_input), on 28x28 and 56x56 0.79-0.87x. */
#define PC_FLAT_MAX_PX 256

typedef struct pconv {
  conv_geom g;
  int64_t so, si, sy, sx, w0; /* weight (o, i, ky, kx) of the conv at w0 + o*so + i*si + ky*sy + kx*sx */
  int64_t wt, B, nblk;        /* packed floats per tile, tiles per block, blocks */
  int64_t rows;               /* row items per (image, tile): output rows, or flat chunks */
  int64_t xfl;                /* flat: the x panel's floats (0: no panel) */
  int unsub;                  /* a sub conv of inference on its own output rows (kind _1x1s) */
  int plane;                  /* kxk channel vectors K-blocked per plane (g->vc_plane, kind _vcp) */
} pconv;

/* Row width for a flat conv's plane of hw pixels: a divisor (and a multiple of unit) whose
 * input rows (cin planes) fit 256 KB, with the fewest wasted pixels in whole P*V tiles; the
 * widest of those.  *util: the chosen row's tile utilisation. */
static int64_t flat_row(const conv_geom *g, int64_t hw, int64_t unit, double *util) {
  int64_t best = hw, tpx = (int64_t)g->P * g->V;
  double bs = -1;
  *util = 0;
  for (int64_t d = 1; d <= hw; d++) {
    if (hw % d || d % unit || (d < g->V && d != hw)) continue;
    double u = (double)d / (double)((d + tpx - 1) / tpx * tpx);
    double score = u - (d * 4 * g->cin_g > 256 * 1024 ? 1.0 : 0.0);
    if (score >= bs - 1e-9) bs = score, best = d, *util = u;
  }
  return best;
}

/* Plans conv node view n (attr.conv2d, in[0] -> out); 0 when this path does not take it
 * (grouped, a tile's packed weights over PC_MAX_PACK_BYTES, or --enable-half-partials: the
 * interpreter mirrors the K-blocked rows' 16-bit partials for inference convs only).  A flat
 * view's rows are whole multiples of unit pixels (strided grad_input: whole rows of the grid). */
static int pc_plan(cg_ctx *c, const ir_node *n, int64_t unit, int flat_ok, pconv *p) {
  if (c->g->half_partials) return 0; /* the K-blocked rows' 16-bit partials are mirrored for inference convs only */
  memset(p, 0, sizeof *p);
  p->g = cg_conv_geometry(c, n);
  conv_geom *g = &p->g;
  if (g->groups != 1 || g->dwp) return 0;
  if (g->sub) {
    /* a 1x1 strided conv whose plane inference runs as one row (sub: one row per image
     * streamed whole by every block, measured slower than the direct kernel) runs on its
     * own output rows: the channel-vector tiles inference plans for them (ResNet-50
     * layer4/0's downsample; tune train_pconv_sub=0 at compile time: the direct kernel) */
    if (!cg_tune(c)->train_pconv_sub) return 0;
    g->h = g->w / g->sub_w, g->oh = g->ow / g->sub_ow, g->w = g->sub_w, g->ow = g->sub_ow, g->sub = 0, p->unsub = 1;
    if (!cg_conv_vc_choose(g, cg_acc_budget(c->target))) return 0;
  }
  p->rows = g->oh;
  /* kxk channel-vector convs that inference runs as K-blocked planes (cg_conv_vc_plane_ok:
   * tile weights + input over the L2 budget): one item per (image, tile) plane, weights of
   * ~16 KB of input channels reused over the whole plane from L1 instead of over one row
   * (tune train_pconv_vcp=0 at compile time: the rows) */
  if (g->vc_plane && cg_tune(c)->train_pconv_vcp) p->plane = 1, p->rows = 1;
  else g->vc_plane = 0;
  if (g->flat && flat_ok && g->ow <= PC_FLAT_MAX_PX && cg_tune(c)->train_pconv_flat) {
    /* 1x1 stride 1 unpadded on pixel vectors, small plane: the inference GEMM's pixel
     * chunks (one long row of the plane, whole unmasked tiles but the plane's last, x panel
     * packed on first use and reused by the block's tiles); tune train_pconv_flat=0 at
     * compile time: the rows below */
    int64_t cpx = cg_conv_flat_chunk_px(g);
    p->rows = (g->ow + cpx - 1) / cpx, p->xfl = cg_conv_flat_pack_floats(g);
  } else if (g->flat) {
    /* flat views wasting over 15 % of their tiles (a masked tile per row) are left to the
     * direct kernel */
    double util;
    int64_t hw = g->ow, cw = flat_row(g, hw, unit, &util);
    if (util < 0.85 || cw % unit) return 0;
    g->flat = 0, g->h = g->oh = hw / cw, g->w = g->ow = cw;
    p->rows = g->oh;
  }
  if (!g->flat && g->ow % unit) return 0;
  p->wt = (int64_t)g->cin * g->kh * g->kw * g->R;
  if (p->wt * 4 > PC_MAX_PACK_BYTES) return 0;
  int64_t b = (g->kh == 1 && g->kw == 1 ? PC_MAX_BLOCK_1X1_BYTES : g->l2 / 2) / (p->wt * 4);
  p->B = b < 1 ? 1 : b > g->ntile ? g->ntile : b;
  p->nblk = (g->ntile + p->B - 1) / p->B;
  return 1;
}

/* Packs tiles [t0, t0 + bs) into wb ([tile][ci][ky][kx][R]) and their bias into bb. */
static void pc_pack(cg_ctx *c, const pconv *p, LLVMValueRef w, LLVMValueRef bias, LLVMValueRef wb, LLVMValueRef bb,
                    LLVMValueRef t0, LLVMValueRef bs) {
  const conv_geom *g = &p->g;
  int R = g->R, taps = g->kh * g->kw;
  cg_loop T, O, I, Z;
  LLVMValueRef tl = cg_loop_begin(c, &T, cg_i64(c, 0), bs, cg_i64(c, 1), "ptl");
  LLVMValueRef o0 = cg_tmul(c, cg_tadd(c, t0, tl), R);
  LLVMValueRef nv = cg_min64(c, cg_i64(c, R), LLVMBuildSub(c->b, cg_i64(c, g->cout), o0, "")); /* valid channels */
  LLVMValueRef r = cg_loop_begin(c, &O, cg_i64(c, 0), nv, cg_i64(c, 1), "pr");
  LLVMValueRef o = cg_tadd(c, o0, r);
  cg_store_f32(c, bias ? cg_load_f32(c, bias, o) : cg_f32(c, 0.0f), bb, cg_tadd(c, cg_tmul(c, tl, R), r));
  LLVMValueRef i = cg_loop_begin(c, &I, cg_i64(c, 0), cg_i64(c, g->cin), cg_i64(c, 1), "pi");
  LLVMValueRef src = cg_taddk(c, cg_tadd(c, cg_tmul(c, o, p->so), cg_tmul(c, i, p->si)), p->w0);
  LLVMValueRef dst = cg_tadd(c, cg_tmul(c, cg_tadd(c, cg_tmul(c, tl, g->cin), i), (int64_t)taps * R), r);
  for (int ky = 0; ky < g->kh; ky++)
    for (int kx = 0; kx < g->kw; kx++)
      cg_store_f32(c, cg_load_f32(c, w, cg_taddk(c, src, ky * p->sy + kx * p->sx)), wb,
                   cg_taddk(c, dst, (int64_t)(ky * g->kw + kx) * R));
  cg_loop_end(c, &I);
  cg_loop_end(c, &O);
  /* channels past cout (last tile): zero weights and bias */
  LLVMValueRef z = cg_loop_begin(c, &Z, nv, cg_i64(c, R), cg_i64(c, 1), "pz");
  cg_store_f32(c, cg_f32(c, 0.0f), bb, cg_tadd(c, cg_tmul(c, tl, R), z));
  cg_loop I2;
  LLVMValueRef i2 = cg_loop_begin(c, &I2, cg_i64(c, 0), cg_i64(c, (int64_t)g->cin * taps), cg_i64(c, 1), "pzi");
  cg_store_f32(c, cg_f32(c, 0.0f), wb, cg_tadd(c, cg_tmul(c, cg_tadd(c, cg_tmul(c, tl, (int64_t)g->cin * taps), i2), R), z));
  cg_loop_end(c, &I2);
  cg_loop_end(c, &Z);
  cg_loop_end(c, &T);
}

/* Where a packed conv's rows go for strided grad_input (NULL: the dense output): the view's
 * grid is the phase (py, px) of dx [N,C,H,W] of stride (sh, sw), gh x gw pixels (grid pixel
 * (q, j) = dx pixel (py + sh*q, px + sw*j)).  The row is computed into a per-thread scratch
 * [R][gh*gw] first, then copied out; full: 1x1 unpadded (the only phase with taps is (0, 0)),
 * the item writes whole dx rows sh*q.. (the zeros of the other phases in between, and after
 * the grid's last row the rows up to H), so each dx element has one writer. */
typedef struct pc_scatter {
  int64_t H, W, sh, sw, py, px, gh, gw;
  int full;
} pc_scatter;

/* Per-kernel stack buffers shared by its phases: packed weights, bias, scatter scratch. */
typedef struct pc_bufs { LLVMValueRef wb, bb, scr, xb, xkey; } pc_bufs;

static pc_bufs pc_bufs_alloc(cg_ctx *c, int64_t wfl, int64_t bfl, int64_t sfl, int64_t xfl) {
  int V = c->target->vec_f32;
  LLVMTypeRef vt = cg_vtype(c, V);
  pc_bufs b = {cg_entry_alloca(c, LLVMArrayType2(vt, (uint64_t)((wfl + V - 1) / V)), "wpack"),
               cg_entry_alloca(c, LLVMArrayType2(vt, (uint64_t)((bfl + V - 1) / V)), "bpack"), NULL, NULL, NULL};
  LLVMSetAlignment(b.wb, 64);
  if (xfl) { /* flat convs: the x panel and the input element it holds (-1: none) */
    b.xb = cg_entry_alloca(c, LLVMArrayType2(vt, (uint64_t)((xfl + V - 1) / V)), "xpack");
    LLVMSetAlignment(b.xb, 64);
    b.xkey = cg_entry_alloca(c, c->t_i64, "xpack_key");
    LLVMBuildStore(c->b, cg_i64(c, -1), b.xkey);
  }
  if (sfl) { /* + one vector: the full rows' shuffles read a vector past a row's last pixel */
    b.scr = cg_entry_alloca(c, LLVMArrayType2(vt, (uint64_t)((sfl + V - 1) / V + 1)), "pscr");
    LLVMSetAlignment(b.scr, 64);
  }
  return b;
}

/* full: dx row y of channel plane dst (element index) from grid row q of scratch row src:
 * pixel x = sw*j of it is grid pixel j (when j < gw), every other one 0; V pixels a vector
 * (a shuffle of the scratch vector from pixel floor(x0/sw) with zeros). */
static void pc_full_row(cg_ctx *c, const pc_scatter *sc, LLVMValueRef scr, LLVMValueRef src, LLVMValueRef out,
                        LLVMValueRef dst) {
  int V = c->target->vec_f32;
  LLVMValueRef z = cg_fzero(c, V);
  for (int64_t x0 = 0; x0 < sc->W; x0 += V) {
    int64_t base = x0 / sc->sw;
    LLVMValueRef idx[64];
    int any = 0;
    for (int l = 0; l < V; l++) {
      int64_t x = x0 + l;
      int on = x % sc->sw == 0 && x / sc->sw < sc->gw;
      idx[l] = cg_i32(c, on ? (int)(x / sc->sw - base) : V);
      any |= on;
    }
    LLVMValueRef v = z;
    if (any) v = LLVMBuildShuffleVector(c->b, cg_load_v(c, scr, cg_taddk(c, src, base), V), z, LLVMConstVector(idx, (unsigned)V), "");
    cg_tstore(c, v, out, cg_taddk(c, dst, x0), cg_lanes((int)(sc->W - x0), V), V);
  }
}

/* Copies the item's rr channels x grid rows [q0, q0 + ow/gw) from the scratch to dx (see
 * pc_scatter); o0: the item's first channel, nb its image. */
static void pc_scatter_rows(cg_ctx *c, const pconv *p, const pc_scatter *sc, LLVMValueRef scr, LLVMValueRef out,
                            LLVMValueRef nb, LLVMValueRef o0, LLVMValueRef oy, int rr) {
  const conv_geom *g = &p->g;
  int V = g->V;
  /* grid rows per item: a row of the view (ow/gw grid rows), or the whole plane */
  int64_t plane = g->oh * g->ow, rows = g->ow / sc->gw * (p->plane ? g->oh : 1), HW = sc->H * sc->W;
  cg_loop RR, Q;
  LLVMValueRef r = cg_loop_begin(c, &RR, cg_i64(c, 0), cg_i64(c, rr), cg_i64(c, 1), "sr");
  LLVMValueRef q0 = cg_tmul(c, oy, rows);
  LLVMValueRef qi = cg_loop_begin(c, &Q, cg_i64(c, 0), cg_i64(c, rows), cg_i64(c, 1), "sq");
  LLVMValueRef q = cg_tadd(c, q0, qi);
  LLVMValueRef src = cg_tadd(c, cg_tmul(c, r, plane), cg_tmul(c, q, sc->gw)); /* scratch row q of channel r */
  LLVMValueRef pl = cg_tmul(c, cg_tadd(c, cg_tadd(c, cg_tmul(c, nb, g->cout), o0), r), HW); /* dx plane */
  if (sc->full) {
    /* rows sh*q .. sh*q + sh - 1 (the last grid row: up to H - 1): the first from the grid */
    LLVMValueRef y0 = cg_tmul(c, q, sc->sh);
    pc_full_row(c, sc, scr, src, out, cg_tadd(c, pl, cg_tmul(c, y0, sc->W)));
    LLVMValueRef last = LLVMBuildICmp(c->b, LLVMIntEQ, q, cg_i64(c, sc->gh - 1), "");
    LLVMValueRef yend = LLVMBuildSelect(c->b, last, cg_i64(c, sc->H), cg_min64(c, cg_taddk(c, y0, sc->sh), cg_i64(c, sc->H)), "");
    cg_loop Y;
    LLVMValueRef y = cg_loop_begin(c, &Y, cg_taddk(c, y0, 1), yend, cg_i64(c, 1), "sy");
    LLVMValueRef d = cg_tadd(c, pl, cg_tmul(c, y, sc->W));
    for (int64_t x0 = 0; x0 < sc->W; x0 += V) cg_tstore(c, cg_fzero(c, V), out, cg_taddk(c, d, x0), cg_lanes((int)(sc->W - x0), V), V);
    cg_loop_end(c, &Y);
  } else {
    LLVMValueRef d = cg_tadd(c, pl, cg_taddk(c, cg_tmul(c, cg_taddk(c, cg_tmul(c, q, sc->sh), sc->py), sc->W), sc->px));
    for (int64_t j0 = 0; j0 < sc->gw; j0 += V) {
      int n = sc->gw - j0 < V ? (int)(sc->gw - j0) : V;
      LLVMValueRef v = cg_tload(c, scr, cg_taddk(c, src, j0), 1, cg_lanes(n, V), V);
      for (int l = 0; l < n; l++) /* the phase's pixels are sw apart: one lane at a time */
        cg_store_f32(c, LLVMBuildExtractElement(c->b, v, cg_i32(c, l), ""), out, cg_taddk(c, d, (j0 + l) * sc->sw));
    }
  }
  cg_loop_end(c, &Q);
  cg_loop_end(c, &RR);
}

/* The kernel body: x -> out through the packed microkernel (see the file comment); with sc,
 * the rows go through bf->scr to a phase of dx (pc_scatter). */
static void pc_emit(cg_ctx *c, const pconv *p, const pc_bufs *bf, const pc_scatter *sc, LLVMValueRef x, LLVMValueRef w,
                    LLVMValueRef bias, LLVMValueRef out, LLVMValueRef tid, LLVMValueRef nth) {
  const conv_geom *g = &p->g;
  int R = g->R;
  int64_t rows = p->rows, per = g->n * rows * p->B;
  LLVMValueRef wb = bf->wb, bb = bf->bb;
  LLVMValueRef key = cg_entry_alloca(c, c->t_i64, "wpack_blk");
  LLVMBuildStore(c->b, cg_i64(c, -1), key);
  LLVMValueRef lo, hi;
  cg_thread_range(c, cg_i64(c, g->n * rows * g->ntile), tid, nth, &lo, &hi);
  cg_loop L;
  LLVMValueRef it = cg_loop_begin(c, &L, lo, hi, cg_i64(c, 1), "item");
  LLVMValueRef blk = LLVMBuildSDiv(c->b, it, cg_i64(c, per), "blk"), j = LLVMBuildSRem(c->b, it, cg_i64(c, per), "");
  LLVMValueRef t0 = cg_tmul(c, blk, p->B);
  LLVMValueRef bs = cg_min64(c, cg_i64(c, p->B), LLVMBuildSub(c->b, cg_i64(c, g->ntile), t0, "")); /* tiles in this block */
  LLVMValueRef rb = LLVMBuildMul(c->b, bs, cg_i64(c, rows), "");
  LLVMValueRef nb = LLVMBuildSDiv(c->b, j, rb, "nb"), k = LLVMBuildSRem(c->b, j, rb, "");
  LLVMValueRef oy = LLVMBuildSDiv(c->b, k, bs, "oy"), tl = LLVMBuildSRem(c->b, k, bs, "tl");
  LLVMValueRef tile = cg_tadd(c, t0, tl);
  cg_if fp;
  cg_if_begin(c, &fp, LLVMBuildICmp(c->b, LLVMIntNE, LLVMBuildLoad2(c->b, c->t_i64, key, ""), blk, ""));
  pc_pack(c, p, w, bias, wb, bb, t0, bs);
  LLVMBuildStore(c->b, blk, key);
  cg_if_end(c, &fp);
  conv_row r;
  memset(&r, 0, sizeof r);
  r.x = x, r.out = sc ? bf->scr : out, r.wp = wb, r.bp = bb;
  r.in_base = cg_tmul(c, nb, (int64_t)g->cin * g->h * g->w);
  LLVMValueRef plane0 = cg_tmul(c, cg_tadd(c, cg_tmul(c, nb, g->cout), cg_tmul(c, tile, R)), g->oh * g->ow);
  r.out_row = sc ? cg_tmul(c, oy, g->ow) : g->flat || p->plane ? plane0 : cg_tadd(c, plane0, cg_tmul(c, oy, g->ow));
  r.wbase = cg_tmul(c, tl, p->wt);
  r.bbase = cg_tmul(c, tl, R);
  conv_epi e = {{0}, 0};
  int rem = (int)(g->cout % R);
  for (int pass = 0; pass < (rem ? 2 : 1); pass++) {
    int rr = pass ? rem : R;
    cg_if f;
    if (rem) {
      cg_if_begin(c, &f, LLVMBuildICmp(c->b, pass ? LLVMIntEQ : LLVMIntNE, tile, cg_i64(c, g->ntile - 1), ""));
    }
    if (g->flat) cg_conv_flat_pixels(c, g, &r, &e, rr, bf->xb, bf->xkey, oy); /* oy: the chunk */
    else if (p->plane) cg_conv_vc_plane(c, g, &r, &e, rr); /* oy = 0: the plane */
    else cg_conv_row_pixels(c, g, &r, &e, rr, oy);
    if (sc) pc_scatter_rows(c, p, sc, bf->scr, out, nb, cg_tmul(c, tile, R), oy, rr);
    if (rem) cg_if_end(c, &f);
  }
  cg_loop_end(c, &L);
}

static const char *pc_kind(cg_ctx *c, const char *op, const pconv *p) {
  const conv_geom *g = &p->g;
  return cg_kind(c, ir_fmt(c->arena, "%s_pk%s%s", op, p->unsub ? "_1x1s" : g->flat ? "_1x1" : "", p->plane ? "_vcp" : g->vc ? "_vc" : ""),
                 ir_fmt(c->arena, "%dx%d", g->R, g->vc ? g->P : g->P * g->V));
}

LLVMValueRef cg_train_pconv_fwd(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind) {
  pconv p;
  if (!cg_tune(c)->train_pconv || !pc_plan(c, n, 1, 1, &p)) return cg_fail(c, n, "internal error: the packed route does not take this conv");
  int64_t taps = (int64_t)p.g.kh * p.g.kw;
  p.so = p.g.cin * taps, p.si = taps, p.sy = p.g.kw, p.sx = 1, p.w0 = 0;
  int nin = n->n_in;
  LLVMValueRef a[6];
  LLVMValueRef f = cg_train_kbegin(c, fn_name, nin, a);
  pc_bufs bf = pc_bufs_alloc(c, p.B * p.wt, p.B * p.g.R, 0, p.xfl);
  pc_emit(c, &p, &bf, NULL, a[0], a[1], nin > 2 ? a[2] : NULL, a[nin], a[nin + 1], a[nin + 2]);
  cg_kernel_end(c);
  *kind = pc_kind(c, "conv2d_train", &p);
  return f;
}

/* pc_plan of the stride-1 conv view dy -> a gh x gw grid (kernel, dilation and padding in
 * va) of grad_input node n: the graph holds no value of the grid's shape, so the plan reads a
 * private two-value copy of it. */
static int pc_plan_view(cg_ctx *c, const ir_node *n, const ir_conv2d_attr *va, int64_t gh, int64_t gw, pconv *p) {
  ir_value vals[2] = {c->g->values[n->in[0]], c->g->values[n->out]};
  vals[0].id = 0, vals[1].id = 1;
  vals[1].shape.dim[2] = gh, vals[1].shape.dim[3] = gw;
  ir_graph g2 = *c->g;
  g2.values = vals, g2.n_values = 2;
  cg_ctx c2 = *c;
  c2.g = &g2;
  ir_node v = *n;
  v.op = IR_OP_conv2d, v.attr.conv2d = *va, v.in[0] = 0, v.out = 1;
  return pc_plan(&c2, &v, gw, 0, p);
}

/* One axis of phase p of a stride-s conv (kernel K, dilation d, padding pad): the taps t with
 * (p + pad - t*d) mod s == 0 reach it, every step-th from t0, at dy coordinate q + (p + pad -
 * t*d)/s for grid coordinate q.  Mirrored (view tap 0 = the last tap) they are a stride-1
 * conv of dilation step*d/s over dy with leading padding *pad0.  Returns the number of taps;
 * *tl: the last tap, *step, *dil. */
static int pc_phase_axis(int64_t K, int64_t s, int64_t d, int64_t pad, int64_t p, int64_t *tl, int64_t *step, int *dil,
                         int *pad0) {
  int cnt = 0;
  int64_t t0 = 0;
  *step = 1, *tl = 0;
  for (int64_t t = 0; t < K; t++)
    if (((p + pad - t * d) % s + s) % s == 0) {
      if (cnt == 0) t0 = t;
      if (cnt == 1) *step = t - t0;
      *tl = t, cnt++;
    }
  *dil = (int)(*step * d / s);
  *pad0 = (int)(-(p + pad - *tl * d) / s); /* exact */
  return cnt;
}

#define PC_MAX_PHASES 16
#define PC_MAX_SCRATCH_BYTES (1 << 20)
/* Stride > 1: one packed stride-1 conv per output phase (iy mod sh, ix mod sw) of dx, dy with
 * the sub-kernel of the taps that reach the phase (w transposed, mirrored), its rows copied to
 * the phase's sub-grid (pc_scatter).  A 1x1 unpadded conv is one GEMM over the subsampled grid
 * whose items write whole dx rows (zeros between).  Not this route (the direct phase
 * kernels of gen_train_conv.c run) when a phase reads no tap (besides the 1x1 case), a view's padding
 * would be negative, or a phase does not fit the packed route. */
typedef struct pc_phases {
  pconv ph[PC_MAX_PHASES];
  pc_scatter sc[PC_MAX_PHASES];
  int np;
  int64_t wfl, bfl, sfl; /* floats of the shared weight, bias and scratch buffers */
} pc_phases;

static int pc_strided_plan(cg_ctx *c, const ir_node *n, pc_phases *P) {
  if (!cg_tune(c)->train_phase_pconv) return 0;
  const ir_conv2d_attr *at = &n->attr.conv2d_grad_input.conv;
  const ir_shape *ds = &c->g->values[n->in[0]].shape, *xs = &c->g->values[n->out].shape;
  int64_t H = xs->dim[2], W = xs->dim[3], KH = at->kernel[0], KW = at->kernel[1], sh = at->stride[0], sw = at->stride[1];
  int64_t dh = at->dilation[0] < 1 ? 1 : at->dilation[0], dw = at->dilation[1] < 1 ? 1 : at->dilation[1];
  int full = KH == 1 && KW == 1 && !at->pad[0] && !at->pad[1] && !at->pad[2] && !at->pad[3];
  if (sh * sw > PC_MAX_PHASES || W > 64 * (int64_t)c->target->vec_f32) return 0;
  pconv *ph = P->ph;
  pc_scatter *sc = P->sc;
  int np = 0;
  int64_t wfl = 0, bfl = 0, sfl = 0;
  for (int64_t py = 0; py < sh && py < H; py++)
    for (int64_t px = 0; px < sw && px < W; px++) {
      if (full && (py || px)) continue; /* the (0, 0) items write these zeros */
      int64_t tly, tlx, sty, stx;
      ir_conv2d_attr va;
      memset(&va, 0, sizeof va);
      int nky = pc_phase_axis(KH, sh, dh, at->pad[0], py, &tly, &sty, &va.dilation[0], &va.pad[0]);
      int nkx = pc_phase_axis(KW, sw, dw, at->pad[1], px, &tlx, &stx, &va.dilation[1], &va.pad[1]);
      if (!nky || !nkx) return 0;
      int64_t gh = (H - py + sh - 1) / sh, gw = (W - px + sw - 1) / sw;
      va.kernel[0] = nky, va.kernel[1] = nkx, va.stride[0] = va.stride[1] = 1, va.groups = 1;
      va.pad[2] = (int)(gh - ds->dim[2] - va.pad[0] + (int64_t)va.dilation[0] * (nky - 1));
      va.pad[3] = (int)(gw - ds->dim[3] - va.pad[1] + (int64_t)va.dilation[1] * (nkx - 1));
      for (int i = 0; i < 4; i++)
        if (va.pad[i] < 0) return 0;
      /* a padded 1x1 view (grid rows/columns past dy, e.g. 2x2 stride 2 on odd sizes): the
       * inference K-blocked 1x1 rows (conv/chanvec_row.c) read without the bottom/right padding */
      if (nky * nkx == 1 && (va.pad[2] || va.pad[3])) return 0;
      pconv *p = &ph[np];
      if (!pc_plan_view(c, n, &va, gh, gw, p)) return 0;
      p->so = KH * KW, p->si = xs->dim[1] * KH * KW, p->sy = -sty * KW, p->sx = -stx, p->w0 = tly * KW + tlx;
      sc[np] = (pc_scatter){H, W, sh, sw, py, px, gh, gw, full};
      int64_t scr = (int64_t)p->g.R * p->g.oh * p->g.ow;
      if (scr * 4 > PC_MAX_SCRATCH_BYTES) return 0;
      if (p->B * p->wt > wfl) wfl = p->B * p->wt;
      if ((int64_t)p->B * p->g.R > bfl) bfl = (int64_t)p->B * p->g.R;
      if (scr > sfl) sfl = scr;
      np++;
    }
  P->np = np, P->wfl = wfl, P->bfl = bfl, P->sfl = sfl;
  return 1;
}

static LLVMValueRef pc_grad_input_strided(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind) {
  pc_phases P;
  if (!pc_strided_plan(c, n, &P)) return cg_fail(c, n, "internal error: the packed route does not take this conv");
  LLVMValueRef a[5];
  LLVMValueRef f = cg_train_kbegin(c, fn_name, 2, a);
  pc_bufs bf = pc_bufs_alloc(c, P.wfl, P.bfl, P.sfl, 0);
  for (int i = 0; i < P.np; i++) pc_emit(c, &P.ph[i], &bf, &P.sc[i], a[0], a[1], NULL, a[2], a[3], a[4]);
  cg_kernel_end(c);
  *kind = pc_kind(c, "conv2d_grad_input_ph", &P.ph[0]);
  return f;
}

/* dx = the conv of dy with w transposed and the taps mirrored; stride 1: padding (k-1)*d -
 * pad on each side (a negative one: not this route, the direct kernel takes it); stride > 1:
 * per phase (pc_grad_input_strided). */
static int pc_gi_plan(cg_ctx *c, const ir_node *n, pconv *p) {
  const ir_conv2d_attr *at = &n->attr.conv2d_grad_input.conv;
  ir_node v = *n; /* the conv view dy -> dx */
  ir_conv2d_attr *va = &v.attr.conv2d;
  ir_conv2d_attr fwd = *at;
  memset(va, 0, sizeof *va);
  va->kernel[0] = fwd.kernel[0], va->kernel[1] = fwd.kernel[1], va->stride[0] = va->stride[1] = 1, va->groups = 1;
  va->dilation[0] = fwd.dilation[0] < 1 ? 1 : fwd.dilation[0], va->dilation[1] = fwd.dilation[1] < 1 ? 1 : fwd.dilation[1];
  int ey = (fwd.kernel[0] - 1) * va->dilation[0], ex = (fwd.kernel[1] - 1) * va->dilation[1];
  va->pad[0] = ey - fwd.pad[0], va->pad[1] = ex - fwd.pad[1], va->pad[2] = ey - fwd.pad[2], va->pad[3] = ex - fwd.pad[3];
  for (int i = 0; i < 4; i++)
    if (va->pad[i] < 0) return 0;
  v.op = IR_OP_conv2d, v.in[0] = n->in[0], v.out = n->out;
  return pc_plan(c, &v, 1, 1, p);
}

static int pc_gi_strided(const ir_node *n) {
  const ir_conv2d_attr *at = &n->attr.conv2d_grad_input.conv;
  return at->stride[0] != 1 || at->stride[1] != 1;
}

int cg_train_pconv_match(cg_ctx *c, const ir_node *n, cg_kplan *kp) {
  pconv p;
  pc_phases P;
  (void)kp;
  if (!cg_tune(c)->train_pconv) return 0;
  if (n->op == IR_OP_conv2d) return pc_plan(c, n, 1, 1, &p);
  return pc_gi_strided(n) ? pc_strided_plan(c, n, &P) : pc_gi_plan(c, n, &p);
}

LLVMValueRef cg_train_pconv_grad_input(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind) {
  if (pc_gi_strided(n)) return pc_grad_input_strided(c, n, fn_name, kind);
  pconv p;
  if (!cg_tune(c)->train_pconv || !pc_gi_plan(c, n, &p)) return cg_fail(c, n, "internal error: the packed route does not take this conv");
  int64_t taps = (int64_t)p.g.kh * p.g.kw;
  p.so = taps, p.si = p.g.cout * taps, p.sy = -p.g.kw, p.sx = -1, p.w0 = taps - 1;
  LLVMValueRef a[5];
  LLVMValueRef f = cg_train_kbegin(c, fn_name, 2, a);
  pc_bufs bf = pc_bufs_alloc(c, p.B * p.wt, p.B * p.g.R, 0, p.xfl);
  pc_emit(c, &p, &bf, NULL, a[0], a[1], NULL, a[2], a[3], a[4]);
  cg_kernel_end(c);
  *kind = pc_kind(c, "conv2d_grad_input", &p);
  return f;
}
