/* conv/wino.c — Winograd F(2x2,3x3) and F(4x4,3x3) for inference 3x3 stride-1 convs on
 * NCHW (issue 4): 2.25x / 4x fewer multiplies than the direct route's kernels
 * (conv/pixvec.c, conv/chanvec.c).  Output tiles m x m (m = 2 or 4, wino_tile), input tiles al x al (al = m + 2),
 * nx = al*al GEMMs.  Work item: (image, group of tr tile rows, block of cb output channels), or
 * on 16 lanes also (ipi whole images, block of cb output channels) for small maps.
 * Per block of kb input channels it transforms the item's al x al input tiles, V = B^T d B
 * (zero padding at the borders, V lanes = V consecutive tiles of one tile row), into a stack
 * panel [nx][kb][tb], runs the nx GEMMs M[xi] += U[xi] (cb x kb) V[xi] (kb x tb) on R x P
 * register tiles (P vectors of tiles, R broadcast weights) into a second panel [nx][cb][tb];
 * after the last block, Y = A^T M A + bias, fused residual add / relu, stored to the output
 * planes.  U = G g G^T with the batchnorm folded in is computed at compile time, packed in
 * the GEMMs' read order [Cin/kb][Cout/R][nx][kb][R] (one sequential stream per item and input
 * block).  F(4x4) uses the points 0, 1, -1, 2, -2 and infinity (Lavin's matrices). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/conv/conv_core.h"
#include "codegen/conv/wino.h"

/* Each of the two stack panels (transformed inputs, GEMM results) is at most this big: both
 * together stay in a 512 KB L2 with the weights streaming through (AVX2; wino_plan16 takes
 * twice that: AVX-512 x86 cores have 1 MB of L2 or more). */
#define WINO_PANEL_BYTES (192 * 1024)
/* Transformed weights bigger than this (ResNet-50 layer3/4: 4 / 16 MB) take the widest row
 * groups: every item streams its blocks of U once. */
#define WINO_WIDE_U_BYTES (1024 * 1024)
/* Tiles per item at most (a single tile row may be wider). */
#define WINO_TB_MAX 64

typedef struct wino_plan {
  int64_t n, cin, cout, h, w, oh, ow;
  int64_t ocs;      /* channels per image of the output buffer (cg_conv_out_stride) */
  int pt, pl, V, R, P;
  int m, al, nx;    /* output tile m x m (2 or 4), input tile al = m + 2, al*al GEMMs */
  int64_t th, tw;   /* output tiles: rows, columns (m x m pixels each) */
  int64_t tr, ngrp; /* tile rows per item, row groups per image */
  int64_t ipi, nig; /* images per item (> 1 only with tr = th), image groups */
  int64_t tb;       /* tile slots of an item: tr*tw rounded up to P*V */
  int64_t nct, cbt, ncb; /* channel tiles of R (zero padded), tiles per block, blocks */
  int64_t kb, nkb;  /* input channels per block, blocks */
  int64_t vxs;      /* panel floats per xi: kb*tb + V (the slack takes the last channel's spill) */
  int64_t panel;    /* byte budget of each panel */
} wino_plan;

static int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* Input-channel and output-channel blocks of plan p for its tb: the panels' byte budget, and
 * an even item count when there are few items (2 threads). */
static void wino_blocks(wino_plan *p) {
  int64_t panel = p->panel;
  int64_t kbmax = panel / (p->nx * 4 * p->tb);
  if (kbmax < 1) kbmax = 1;
  p->nkb = cdiv(p->cin, kbmax), p->kb = cdiv(p->cin, p->nkb), p->vxs = p->kb * p->tb + p->V;
  p->nct = cdiv(p->cout, p->R);
  int64_t cbmax = panel / (p->nx * 4 * p->tb * p->R);
  if (cbmax < 1) cbmax = 1;
  p->ncb = cdiv(p->nct, cbmax);
  int64_t items = p->nig * p->ngrp * p->ncb;
  if (items < 16 && items % 2 && p->ncb < p->nct) p->ncb++;
  p->cbt = cdiv(p->nct, p->ncb), p->ncb = cdiv(p->nct, p->cbt);
}

/* Rough cycles per image of plan p (F(4x4) row groups): the GEMMs' FMAs (2 a cycle), the input
 * transform (~200 cycles per V-tile chunk and input channel, done once per output-channel
 * block: its 36 shuffle gathers dominate), the output transform (~80 per chunk and output
 * channel) and U streamed from beyond L2 once per row group (~16 bytes a cycle). */
static double wino_cost(const wino_plan *p) {
  double chunks = (double)(p->ngrp * p->tr * cdiv(p->tw, p->V)), ub = (double)p->nx * 4 * p->cin * p->nct * p->R;
  double gemm = (double)(p->ngrp * p->tb / p->V) * (double)(p->cin * p->nx * p->nct * p->R) / 2;
  double xin = (double)p->ncb * chunks * (double)p->cin * 200, xout = chunks * (double)p->cout * 80;
  return gemm + xin + xout + (ub > 256 * 1024 ? (double)p->ngrp * ub / 16 : 0);
}

/* The shape fields of plan p of node n with m x m output tiles, P vectors of tiles and R
 * output channels per register tile (no row groups or blocks yet). */
static wino_plan wino_plan_base(cg_ctx *c, const ir_node *n, int m, int P) {
  const ir_conv2d_attr *a = &n->attr.conv2d;
  const ir_shape *xs = &c->g->values[n->in[0]].shape, *ys = &c->g->values[n->out].shape;
  wino_plan p;
  memset(&p, 0, sizeof p);
  p.n = xs->dim[0], p.cin = xs->dim[1], p.h = xs->dim[2], p.w = xs->dim[3];
  p.cout = ys->dim[1], p.oh = ys->dim[2], p.ow = ys->dim[3];
  p.ocs = cg_conv_out_stride(c, n, p.cout);
  p.pt = a->pad[0], p.pl = a->pad[1];
  p.V = c->target->vec_f32, p.P = P, p.R = cg_acc_budget(c->target) / P;
  p.m = m, p.al = m + 2, p.nx = p.al * p.al;
  p.th = cdiv(p.oh, m), p.tw = cdiv(p.ow, m);
  p.ipi = 1, p.nig = p.n, p.panel = WINO_PANEL_BYTES;
  return p;
}

/* Row groups on 8 lanes (AVX2, as measured there): P = 2; F(2x2), the tr that wastes the
 * fewest tile slots over the image (ties: tb >= 2 vectors of tiles, and with U over
 * WINO_WIDE_U_BYTES the most tiles, which cuts the reads of U per tile); F(4x4), the tr of the
 * lowest wino_cost (its input transform costs more, and its 36-deep panels leave few output
 * channels per block at large tb, each block redoing the transform); then wino_blocks. */
static wino_plan wino_plan8(cg_ctx *c, const ir_node *n, int m) {
  wino_plan p = wino_plan_base(c, n, m, 2);
  int64_t pv = (int64_t)p.P * p.V;
  double best = -1;
  int best_set = 0;
  int wide = (int64_t)p.nx * 4 * p.cin * p.cout > WINO_WIDE_U_BYTES;
  for (int64_t tr = 1; tr <= p.th; tr++) {
    int64_t tb = cdiv(tr * p.tw, pv) * pv, ngrp = cdiv(p.th, tr);
    if (tb > WINO_TB_MAX && tr > 1) break;
    double score;
    if (m == 4) {
      wino_plan q = p;
      q.tr = tr, q.tb = tb, q.ngrp = ngrp;
      wino_blocks(&q);
      score = -wino_cost(&q);
    } else score = (double)(p.th * p.tw) / (double)(ngrp * tb) + (tb >= 2 * pv ? 1e-3 : 0) + (wide ? 1e-5 * (double)tb : 0);
    if (best_set == 0 || score > best + (m == 4 ? 1e-9 * fabs(best) : 1e-9)) best = score, best_set = 1, p.tr = tr, p.tb = tb, p.ngrp = ngrp;
  }
  wino_blocks(&p);
  return p;
}

/* Rough cycles of the whole batch of plan p on 16 lanes (wino_plan16): the GEMMs' FMAs over
 * the tile slots (2 a cycle), the partial sums' panel reloads per input block after the first,
 * the input transform per V-tile chunk and input channel (F(2x2) ~60, F(4x4) ~250 cycles)
 * once per output-channel block, the output transform per chunk and output channel (~30 /
 * ~90), U streamed from beyond L2 once per item (~16 bytes a cycle) when it is over 512 KB;
 * scaled by the load imbalance of the items over 2 threads. */
static double wino_cost16(const wino_plan *p) {
  double grps = (double)(p->nig * p->ngrp), chunks = (double)(p->n * p->th * cdiv(p->tw, p->V));
  double ub = (double)p->nx * 4 * p->cin * p->nct * p->R, items = grps * (double)p->ncb;
  double gemm = grps * (double)(p->tb / p->V) * (double)(p->cin * p->nx * p->nct * p->R) / 2;
  double reload = grps * (double)((p->nkb - 1) * p->nx * p->nct * p->R * p->tb / p->V);
  double xin = (double)p->ncb * chunks * (double)p->cin * (p->m == 4 ? 250 : 60);
  double xout = chunks * (double)p->cout * (p->m == 4 ? 90 : 30);
  double cyc = gemm + reload + xin + xout + (ub > 512 * 1024 ? grps * ub / 16 : 0);
  return cyc * 2 * ceil(items / 2) / items;
}

/* Row groups on 16 lanes: the P (1 vector of tiles x 24 channels, or 2 x 12), tile rows per
 * item (tr <= th, one image) or whole images per item (tr = th; small maps in a batch, so U
 * is read once per several images) and tb <= 2 WINO_TB_MAX of the lowest wino_cost16. */
static wino_plan wino_plan16(cg_ctx *c, const ir_node *n, int m) {
  wino_plan best = wino_plan_base(c, n, m, 2);
  double bc = -1;
  for (int P = 1; P <= 2; P++) {
    wino_plan p = wino_plan_base(c, n, m, P);
    p.panel = 2 * WINO_PANEL_BYTES;
    int64_t pv = (int64_t)P * p.V;
    for (int64_t tr = 1; tr <= p.th; tr++)
      for (int64_t ipi = 1; ipi <= (tr == p.th ? p.n : 1); ipi++) {
        wino_plan q = p;
        q.tr = tr, q.ipi = ipi, q.tb = cdiv(ipi * tr * p.tw, pv) * pv;
        if (q.tb > 2 * WINO_TB_MAX && q.tb > pv && (tr > 1 || ipi > 1)) continue; /* one tile row: always a plan */
        q.ngrp = cdiv(p.th, tr), q.nig = cdiv(p.n, ipi);
        wino_blocks(&q);
        double cost = wino_cost16(&q);
        if (bc < 0 || cost < bc * (1 - 1e-9)) bc = cost, best = q;
      }
  }
  return best;
}

/* 16-lane targets plan with wino_plan16, others with the 8-lane rule. */
static int wino_wide(cg_ctx *c) { return c->target->vec_f32 >= 16; }

static wino_plan wino_plan_of(cg_ctx *c, const ir_node *n, int m) {
  return wino_wide(c) ? wino_plan16(c, n, m) : wino_plan8(c, n, m);
}

int cg_conv_wino_match(cg_ctx *c, const ir_node *n, cg_kplan *kp) {
  (void)kp;
  if (!cg_tune(c)->winograd) return 0;
  const cg_priv *pv = c->priv;
  if (!pv || pv->train || n->op != IR_OP_conv2d || c->target->vec_f32 < 8 || n->attr.conv2d.exact) return 0;
  const ir_conv2d_attr *a = &n->attr.conv2d;
  int dh = a->dilation[0] < 1 ? 1 : a->dilation[0], dw = a->dilation[1] < 1 ? 1 : a->dilation[1];
  if (a->kernel[0] != 3 || a->kernel[1] != 3 || a->stride[0] != 1 || a->stride[1] != 1 || dh != 1 || dw != 1 ||
      (a->groups > 1))
    return 0;
  for (int i = 0; i < 4; i++) /* pads 0 and 1 are what the tests cover (ResNet's 3x3 convs pad 1) */
    if (a->pad[i] < 0 || a->pad[i] > 1) return 0;
  const ir_value *x = &c->g->values[n->in[0]], *y = &c->g->values[n->out];
  if (x->producer >= 0 && c->g->nodes[x->producer].op == IR_OP_quantize8) return 0; /* int8: the direct kernels sum integers exactly */
  if (x->shape.rank != 4 || x->shape.dim[1] < CG_WINO_MIN_C || y->shape.dim[1] < CG_WINO_MIN_C) return 0;
  /* maps with fewer 2x2 output tiles than vector lanes (4x4 and smaller on AVX2) leave most
   * tile slots of the GEMMs empty: the direct kernels */
  if (((y->shape.dim[2] + 1) / 2) * ((y->shape.dim[3] + 1) / 2) < c->target->vec_f32) return 0;
  if (x->dtype != IR_F32 || c->g->values[n->in[1]].data == NULL) return 0;
  /* --precision 16.x (round16 nodes): f32 Winograd sums rounded in the epilogue, f32 in and out
   * (cg_select keeps this conv's input and residual in f32: its store16 choices);
   * tune wino16=0 leaves such graphs to the direct kernels */
  if (c->g->half_partials) return 0; /* its M sums live in f32 memory between K blocks */
  for (int i = 0; i < c->g->n_nodes && !cg_tune(c)->wino16; i++)
    if (c->g->nodes[i].op == IR_OP_round16) return 0;
  const pass_fusion *fu = cg_fusion(c, n);
  if (fu->n_pre || fu->n_side) return 0;
  int prev = fu->bn >= 0 ? c->g->nodes[fu->bn].out : n->out;
  for (int i = 0; i < fu->n_post; i++) { /* relu, a residual add of an f32 tensor, a last round16 */
    const ir_node *m = &c->g->nodes[fu->post[i]];
    if (m->op == IR_OP_add && c->g->values[m->in[0] == prev ? m->in[1] : m->in[0]].dtype != IR_F32) return 0;
    if (m->op != IR_OP_relu && m->op != IR_OP_add && !(m->op == IR_OP_round16 && i == fu->n_post - 1)) return 0;
    prev = m->out;
  }
  return c->g->values[c->g->nodes[fu->last].out].dtype == IR_F32;
}

/* U[ci/kb][co/R][xi][ci%kb][co%R] = G (scale * g) G^T and bias[co] = (b - mean) * scale + beta,
 * in double rounded once; padded channels are 0.  F(2x2): G = [1 0 0; .5 .5 .5; .5 -.5 .5;
 * 0 0 1]; F(4x4) (points 0, 1, -1, 2, -2, infinity): G = [1/4 0 0; -1/6 -1/6 -1/6; -1/6 1/6
 * -1/6; 1/24 1/12 1/6; 1/24 -1/12 1/6; 0 0 1]. */
static void wino_pack(cg_ctx *c, const ir_node *n, const ir_node *bn, const wino_plan *p, float *U, float *bias) {
  static const double G2[4][3] = {{1, 0, 0}, {.5, .5, .5}, {.5, -.5, .5}, {0, 0, 1}};
  static const double G4[6][3] = {{1. / 4, 0, 0},          {-1. / 6, -1. / 6, -1. / 6}, {-1. / 6, 1. / 6, -1. / 6},
                                  {1. / 24, 1. / 12, 1. / 6}, {1. / 24, -1. / 12, 1. / 6}, {0, 0, 1}};
  const double(*G)[3] = p->m == 4 ? G4 : G2;
  int al = p->al;
  const float *w = c->g->values[n->in[1]].data;
  for (int64_t co = 0; co < p->cout; co++) {
    double scale, shift;
    cg_conv_bn_fold(c, n, bn, co, &scale, &shift);
    bias[co] = (float)shift;
    for (int64_t ci = 0; ci < p->cin; ci++) {
      const float *g = w + (co * p->cin + ci) * 9;
      double gg[6][3]; /* G g */
      for (int i = 0; i < al; i++)
        for (int l = 0; l < 3; l++) gg[i][l] = G[i][0] * g[l] + G[i][1] * g[3 + l] + G[i][2] * g[6 + l];
      for (int i = 0; i < al; i++)
        for (int j = 0; j < al; j++) {
          double u = (gg[i][0] * G[j][0] + gg[i][1] * G[j][1] + gg[i][2] * G[j][2]) * scale;
          int64_t kbi = ci / p->kb, cl = ci % p->kb;
          U[((((kbi * p->nct + co / p->R) * p->nx + al * i + j) * p->kb) + cl) * p->R + co % p->R] = (float)u;
        }
    }
  }
}

typedef struct wino_item {         /* run-time values of one work item */
  LLVMValueRef x, out, up, bp, vb, mb; /* input, output, packed U, bias, the two panels */
  LLVMValueRef resid[PASS_MAX_POST];   /* the fused adds' other operands, in post order */
  LLVMValueRef n0, nimg, ty0, ct0, nct_here; /* first image, images here, first tile row, channel tile */
  const ir_node *post[PASS_MAX_POST];
  int n_post;
} wino_item;

/* Loop over the item's images (none when p->ipi is 1): returns the image's index in the item;
 * *img = its index in the batch. */
static LLVMValueRef wino_img_begin(cg_ctx *c, const wino_plan *p, const wino_item *it, cg_loop *L, LLVMValueRef *img) {
  if (p->ipi == 1) return *img = it->n0, cg_i64(c, 0);
  LLVMValueRef il = cg_loop_begin(c, L, cg_i64(c, 0), it->nimg, cg_i64(c, 1), "wimg");
  *img = LLVMBuildAdd(c->b, it->n0, il, "img");
  return il;
}

static void wino_img_end(cg_ctx *c, const wino_plan *p, cg_loop *L) {
  if (p->ipi > 1) cg_loop_end(c, L);
}

/* V lanes: input columns col0, col0+2, ... of the row at element idx (zero outside [0, w)). */
static LLVMValueRef wino_load_cols(cg_ctx *c, const wino_plan *p, LLVMValueRef x, LLVMValueRef idx, int64_t col0) {
  int V = p->V;
  unsigned m = 0, full = (1u << V) - 1, lo = 0, hi = 0;
  for (int l = 0; l < V; l++)
    if (col0 + 2 * l >= 0 && col0 + 2 * l < p->w) m |= 1u << l;
  if (!m) return cg_fzero(c, V);
  LLVMValueRef at = LLVMBuildAdd(c->b, idx, cg_i64(c, col0), "");
  if (m == full && col0 >= 0 && col0 + 2 * V - 1 < p->w) return cg_load_strided(c, x, at, 2, V);
  for (int l = 0; l < V; l++)
    if (m >> l & 1) {
      if (2 * l < V) lo |= 1u << (2 * l);
      else hi |= 1u << (2 * l - V);
    }
  LLVMValueRef va = lo ? cg_conv_masked_load(c, x, at, lo, V) : cg_fzero(c, V);
  LLVMValueRef vb = hi ? cg_conv_masked_load(c, x, LLVMBuildAdd(c->b, at, cg_i64(c, V), ""), hi, V) : cg_fzero(c, V);
  return cg_even_lanes(c, va, vb, V);
}

/* Input transform of input channels [k0, k0 + kn) into the panel: vb[xi*vxs + ci*tb + (il*tr
 * + r)*tw + tx] for tile (ty0 + r, tx) of the item's image il.  A chunk's lanes past the row's last tile spill into the next
 * row's slots, which that row overwrites afterwards (the last row's spill lands in the panel's
 * padding, in the next channel's row, also overwritten, or in the V slots of slack after each
 * xi's last channel). */
static void wino_input(cg_ctx *c, const wino_plan *p, const wino_item *it, LLVMValueRef k0, LLVMValueRef kn) {
  int V = p->V;
  cg_loop CI, IM, RW;
  LLVMValueRef ci = cg_loop_begin(c, &CI, cg_i64(c, 0), kn, cg_i64(c, 1), "wci"), img;
  LLVMValueRef il = wino_img_begin(c, p, it, &IM, &img);
  LLVMValueRef in_img = LLVMBuildMul(c->b, img, cg_i64(c, p->cin * p->h * p->w), "in_img");
  LLVMValueRef plane = LLVMBuildAdd(c->b, in_img, LLVMBuildMul(c->b, LLVMBuildAdd(c->b, k0, ci, ""), cg_i64(c, p->h * p->w), ""), "plane");
  LLVMValueRef r = cg_loop_begin(c, &RW, cg_i64(c, 0), cg_i64(c, p->tr), cg_i64(c, 1), "wr");
  LLVMValueRef rs = LLVMBuildAdd(c->b, LLVMBuildMul(c->b, il, cg_i64(c, p->tr), ""), r, "rs"); /* the row's slot row */
  LLVMValueRef iy0 = LLVMBuildSub(c->b, LLVMBuildMul(c->b, LLVMBuildAdd(c->b, it->ty0, r, ""), cg_i64(c, 2), ""), cg_i64(c, p->pt), "iy0");
  LLVMValueRef rowidx[4], valid[4];
  for (int i = 0; i < 4; i++) {
    LLVMValueRef iy = LLVMBuildAdd(c->b, iy0, cg_i64(c, i), "");
    valid[i] = LLVMBuildAnd(c->b, LLVMBuildICmp(c->b, LLVMIntSGE, iy, cg_i64(c, 0), ""),
                            LLVMBuildICmp(c->b, LLVMIntSLT, iy, cg_i64(c, p->h), ""), "");
    LLVMValueRef iyc = cg_max64(c, cg_i64(c, 0), cg_min64(c, iy, cg_i64(c, p->h - 1))); /* clamped: no read outside */
    rowidx[i] = LLVMBuildAdd(c->b, plane, LLVMBuildMul(c->b, iyc, cg_i64(c, p->w), ""), "");
  }
  LLVMValueRef slot0 = LLVMBuildAdd(c->b, LLVMBuildMul(c->b, ci, cg_i64(c, p->tb), ""), LLVMBuildMul(c->b, rs, cg_i64(c, p->tw), ""), "slot");
  LLVMValueRef z = cg_fzero(c, V);
  for (int64_t tx0 = 0; tx0 < p->tw; tx0 += V) {
    LLVMValueRef d[4][4], e[4][4], v[16];
    for (int i = 0; i < 4; i++)
      for (int j = 0; j < 4; j++)
        d[i][j] = LLVMBuildSelect(c->b, valid[i], wino_load_cols(c, p, it->x, rowidx[i], 2 * tx0 - p->pl + j), z, "");
    for (int j = 0; j < 4; j++) { /* B^T d: rows d0-d2, d1+d2, d2-d1, d1-d3 */
      e[0][j] = LLVMBuildFSub(c->b, d[0][j], d[2][j], "");
      e[1][j] = LLVMBuildFAdd(c->b, d[1][j], d[2][j], "");
      e[2][j] = LLVMBuildFSub(c->b, d[2][j], d[1][j], "");
      e[3][j] = LLVMBuildFSub(c->b, d[1][j], d[3][j], "");
    }
    for (int i = 0; i < 4; i++) { /* (B^T d) B: the same on columns */
      v[4 * i + 0] = LLVMBuildFSub(c->b, e[i][0], e[i][2], "");
      v[4 * i + 1] = LLVMBuildFAdd(c->b, e[i][1], e[i][2], "");
      v[4 * i + 2] = LLVMBuildFSub(c->b, e[i][2], e[i][1], "");
      v[4 * i + 3] = LLVMBuildFSub(c->b, e[i][1], e[i][3], "");
    }
    for (int xi = 0; xi < 16; xi++)
      cg_store_v(c, v[xi], it->vb, LLVMBuildAdd(c->b, slot0, cg_i64(c, xi * p->vxs + tx0), ""), V);
  }
  cg_loop_end(c, &RW);
  wino_img_end(c, p, &IM);
  cg_loop_end(c, &CI);
}

/* The 16 GEMMs of input block k0 (kn channels) for the item's channel tiles: mb[(xi*cb + col)
 * *tb + t] (+)= sum over ci of U * V; first: the block starts the sums (no panel load). */
static void wino_gemm(cg_ctx *c, const wino_plan *p, const wino_item *it, LLVMValueRef k0, LLVMValueRef kn, int first) {
  int V = p->V, R = p->R, P = p->P;
  LLVMTypeRef vt = cg_vtype(c, V);
  int64_t cb = p->cbt * R;
  cg_loop CT, XI, PG, CI;
  LLVMValueRef ct = cg_loop_begin(c, &CT, cg_i64(c, 0), it->nct_here, cg_i64(c, 1), "wct");
  LLVMValueRef xi = cg_loop_begin(c, &XI, cg_i64(c, 0), cg_i64(c, p->nx), cg_i64(c, 1), "wxi");
  LLVMValueRef kbi = LLVMBuildSDiv(c->b, k0, cg_i64(c, p->kb), "");
  LLVMValueRef uct = LLVMBuildAdd(c->b, LLVMBuildMul(c->b, kbi, cg_i64(c, p->nct), ""), LLVMBuildAdd(c->b, it->ct0, ct, ""), "");
  LLVMValueRef urow = LLVMBuildMul(c->b, LLVMBuildAdd(c->b, LLVMBuildMul(c->b, uct, cg_i64(c, p->nx), ""), xi, ""), cg_i64(c, p->kb * R), "urow");
  LLVMValueRef vrow = LLVMBuildMul(c->b, xi, cg_i64(c, p->vxs), "vrow");
  LLVMValueRef mrow = LLVMBuildMul(c->b, LLVMBuildAdd(c->b, LLVMBuildMul(c->b, xi, cg_i64(c, cb), ""), LLVMBuildMul(c->b, ct, cg_i64(c, R), ""), ""),
                                   cg_i64(c, p->tb), "mrow");
  LLVMValueRef pg = cg_loop_begin(c, &PG, cg_i64(c, 0), cg_i64(c, p->tb / ((int64_t)P * V)), cg_i64(c, 1), "wpg");
  LLVMValueRef t0 = LLVMBuildMul(c->b, pg, cg_i64(c, (int64_t)P * V), "t0");
  LLVMValueRef acc[64], cur[64];
  for (int k = 0; k < R; k++)
    for (int q = 0; q < P; q++) {
      acc[k * P + q] = cg_entry_alloca(c, vt, "wacc");
      LLVMValueRef init = first ? cg_fzero(c, V)
                                : cg_load_v(c, it->mb, LLVMBuildAdd(c->b, LLVMBuildAdd(c->b, mrow, t0, ""), cg_i64(c, (int64_t)k * p->tb + q * V), ""), V);
      LLVMBuildStore(c->b, init, acc[k * P + q]);
    }
  LLVMValueRef ci = cg_loop_begin(c, &CI, cg_i64(c, 0), kn, cg_i64(c, 1), "wk");
  for (int i = 0; i < R * P; i++) cur[i] = LLVMBuildLoad2(c->b, vt, acc[i], "");
  LLVMValueRef vi = LLVMBuildAdd(c->b, LLVMBuildAdd(c->b, vrow, LLVMBuildMul(c->b, ci, cg_i64(c, p->tb), ""), ""), t0, "");
  LLVMValueRef ui = LLVMBuildAdd(c->b, urow, LLVMBuildMul(c->b, ci, cg_i64(c, R), ""), "");
  LLVMValueRef xv[16];
  for (int q = 0; q < P; q++) xv[q] = cg_load_v(c, it->vb, LLVMBuildAdd(c->b, vi, cg_i64(c, (int64_t)q * V), ""), V);
  for (int k = 0; k < R; k++) {
    LLVMValueRef wb = cg_splat(c, cg_load_f32(c, it->up, LLVMBuildAdd(c->b, ui, cg_i64(c, k), "")), V);
    for (int q = 0; q < P; q++) cur[k * P + q] = cg_fma(c, wb, xv[q], cur[k * P + q]);
  }
  for (int i = 0; i < R * P; i++) LLVMBuildStore(c->b, cur[i], acc[i]);
  cg_loop_end(c, &CI);
  for (int k = 0; k < R; k++)
    for (int q = 0; q < P; q++)
      cg_store_v(c, LLVMBuildLoad2(c->b, vt, acc[k * P + q], ""), it->mb,
                 LLVMBuildAdd(c->b, LLVMBuildAdd(c->b, mrow, t0, ""), cg_i64(c, (int64_t)k * p->tb + q * V), ""), V);
  cg_loop_end(c, &PG);
  cg_loop_end(c, &XI);
  cg_loop_end(c, &CT);
}

/* Lane l of the result = lane idx[l] % V of src[idx[l] / V] (idx[l] < 0: don't care), as a
 * chain of two-source shuffles (the first source used, then one more per shuffle). */
static LLVMValueRef wino_gather(cg_ctx *c, LLVMValueRef *src, int nsrc, const int *idx, int V) {
  LLVMValueRef acc = NULL, e[64];
  int at[64]; /* lane of acc holding result lane l, -1 if none yet */
  for (int l = 0; l < V; l++) at[l] = -1;
  int shuffled = 0;
  for (int s = 0; s < nsrc; s++) {
    int used = 0;
    for (int l = 0; l < V; l++) used |= idx[l] >= 0 && idx[l] / V == s;
    if (!used) continue;
    if (!acc) {
      acc = src[s];
      for (int l = 0; l < V; l++)
        if (idx[l] >= 0 && idx[l] / V == s) at[l] = idx[l] % V;
      continue;
    }
    for (int l = 0; l < V; l++) {
      int mine = idx[l] >= 0 && idx[l] / V == s;
      e[l] = cg_i32(c, mine ? V + idx[l] % V : at[l] >= 0 ? at[l] : 0);
      if (mine || at[l] >= 0) at[l] = l;
    }
    acc = LLVMBuildShuffleVector(c->b, acc, src[s], LLVMConstVector(e, (unsigned)V), "wg"), shuffled = 1;
  }
  if (!acc) return cg_fzero(c, V);
  if (shuffled) return acc;
  int ident = 1;
  for (int l = 0; l < V; l++) e[l] = cg_i32(c, at[l] >= 0 ? at[l] : 0), ident &= at[l] < 0 || at[l] == l;
  return ident ? acc : LLVMBuildShuffleVector(c->b, acc, acc, LLVMConstVector(e, (unsigned)V), "wg");
}

/* F(4x4) input transform rows / columns: B^T d with B^T = [4 0 -5 0 1 0; 0 -4 -4 1 1 0; 0 4 -4
 * -1 1 0; 0 -2 -1 2 1 0; 0 2 -1 -2 1 0; 0 4 0 -5 0 1]. */
static void wino_bt6(cg_ctx *c, LLVMValueRef *d, LLVMValueRef *e, int V) {
  LLVMValueRef k4 = cg_splat(c, cg_f32(c, 4.0f), V);
  LLVMValueRef km4 = cg_splat(c, cg_f32(c, -4.0f), V);
  LLVMValueRef km5 = cg_splat(c, cg_f32(c, -5.0f), V);
  LLVMValueRef k2 = cg_splat(c, cg_f32(c, 2.0f), V);
  LLVMValueRef t0 = cg_fma(c, km4, d[2], d[4]), t1 = cg_fma(c, km4, d[1], d[3]); /* d4 - 4 d2, d3 - 4 d1 */
  LLVMValueRef t2 = LLVMBuildFSub(c->b, d[4], d[2], ""), t3 = LLVMBuildFMul(c->b, k2, LLVMBuildFSub(c->b, d[1], d[3], ""), "");
  e[0] = cg_fma(c, k4, d[0], cg_fma(c, km5, d[2], d[4]));
  e[1] = LLVMBuildFAdd(c->b, t0, t1, "");
  e[2] = LLVMBuildFSub(c->b, t0, t1, "");
  e[3] = LLVMBuildFSub(c->b, t2, t3, "");
  e[4] = LLVMBuildFAdd(c->b, t2, t3, "");
  e[5] = cg_fma(c, k4, d[1], cg_fma(c, km5, d[3], d[5]));
}

/* F(4x4) input transform of input channels [k0, k0 + kn), as wino_input: per row of the 6x6
 * tiles, the row's pixels [4 tx0 - pl, 4 tx0 - pl + 4V + 2) are loaded once (masked at the
 * borders) and the 6 tile columns gathered from them by shuffles. */
static void wino_input4(cg_ctx *c, const wino_plan *p, const wino_item *it, LLVMValueRef k0, LLVMValueRef kn) {
  int V = p->V, al = 6, nv = (int)cdiv(4 * V + 2, V);
  cg_loop CI, IM, RW;
  LLVMValueRef ci = cg_loop_begin(c, &CI, cg_i64(c, 0), kn, cg_i64(c, 1), "wci"), img;
  LLVMValueRef il = wino_img_begin(c, p, it, &IM, &img);
  LLVMValueRef in_img = LLVMBuildMul(c->b, img, cg_i64(c, p->cin * p->h * p->w), "in_img");
  LLVMValueRef plane = LLVMBuildAdd(c->b, in_img, LLVMBuildMul(c->b, LLVMBuildAdd(c->b, k0, ci, ""), cg_i64(c, p->h * p->w), ""), "plane");
  LLVMValueRef r = cg_loop_begin(c, &RW, cg_i64(c, 0), cg_i64(c, p->tr), cg_i64(c, 1), "wr");
  LLVMValueRef rs = LLVMBuildAdd(c->b, LLVMBuildMul(c->b, il, cg_i64(c, p->tr), ""), r, "rs"); /* the row's slot row */
  LLVMValueRef iy0 = LLVMBuildSub(c->b, LLVMBuildMul(c->b, LLVMBuildAdd(c->b, it->ty0, r, ""), cg_i64(c, 4), ""), cg_i64(c, p->pt), "iy0");
  LLVMValueRef rowidx[6], valid[6];
  for (int i = 0; i < al; i++) {
    LLVMValueRef iy = LLVMBuildAdd(c->b, iy0, cg_i64(c, i), "");
    valid[i] = LLVMBuildAnd(c->b, LLVMBuildICmp(c->b, LLVMIntSGE, iy, cg_i64(c, 0), ""),
                            LLVMBuildICmp(c->b, LLVMIntSLT, iy, cg_i64(c, p->h), ""), "");
    LLVMValueRef iyc = cg_max64(c, cg_i64(c, 0), cg_min64(c, iy, cg_i64(c, p->h - 1)));
    rowidx[i] = LLVMBuildAdd(c->b, plane, LLVMBuildMul(c->b, iyc, cg_i64(c, p->w), ""), "");
  }
  LLVMValueRef slot0 = LLVMBuildAdd(c->b, LLVMBuildMul(c->b, ci, cg_i64(c, p->tb), ""), LLVMBuildMul(c->b, rs, cg_i64(c, p->tw), ""), "slot");
  LLVMValueRef z = cg_fzero(c, V);
  for (int64_t tx0 = 0; tx0 < p->tw; tx0 += V) {
    int64_t col0 = 4 * tx0 - p->pl;
    LLVMValueRef d[6][6], e[6][6], v[36];
    for (int i = 0; i < al; i++) {
      LLVMValueRef raw[8];
      for (int k = 0; k < nv; k++) {
        unsigned mk = 0, full = (1u << V) - 1;
        for (int l = 0; l < V; l++) {
          int64_t el = (int64_t)k * V + l, col = col0 + el;
          if (el < 4 * V + 2 && col >= 0 && col < p->w) mk |= 1u << l;
        }
        int64_t c0 = col0 + (int64_t)k * V;
        LLVMValueRef at = LLVMBuildAdd(c->b, rowidx[i], cg_i64(c, c0), "");
        if (!mk) raw[k] = z;
        else if (c0 >= 0 && c0 + V <= p->w) raw[k] = cg_load_v(c, it->x, at, V); /* in the row: whole vector */
        else raw[k] = cg_conv_masked_load(c, it->x, at, mk == full ? full : mk, V);
        if (mk) raw[k] = LLVMBuildSelect(c->b, valid[i], raw[k], z, "");
      }
      for (int j = 0; j < al; j++) {
        int idx[64];
        for (int l = 0; l < V; l++) idx[l] = 4 * l + j;
        d[i][j] = wino_gather(c, raw, nv, idx, V);
      }
    }
    for (int j = 0; j < al; j++) { /* B^T d */
      LLVMValueRef col[6], out[6];
      for (int i = 0; i < al; i++) col[i] = d[i][j];
      wino_bt6(c, col, out, V);
      for (int i = 0; i < al; i++) e[i][j] = out[i];
    }
    for (int i = 0; i < al; i++) wino_bt6(c, e[i], v + al * i, V); /* (B^T d) B */
    for (int xi = 0; xi < 36; xi++)
      cg_store_v(c, v[xi], it->vb, LLVMBuildAdd(c->b, slot0, cg_i64(c, xi * p->vxs + tx0), ""), V);
  }
  cg_loop_end(c, &RW);
  wino_img_end(c, p, &IM);
  cg_loop_end(c, &CI);
}

/* F(4x4) output transform rows / columns: A^T m with A^T = [1 1 1 1 1 0; 0 1 -1 2 -2 0; 0 1 1
 * 4 4 0; 0 1 -1 8 -8 1]. */
static void wino_at6(cg_ctx *c, LLVMValueRef *m, LLVMValueRef *y, int V) {
  LLVMValueRef a = LLVMBuildFAdd(c->b, m[1], m[2], ""), b = LLVMBuildFSub(c->b, m[1], m[2], "");
  LLVMValueRef s = LLVMBuildFAdd(c->b, m[3], m[4], ""), d = LLVMBuildFSub(c->b, m[3], m[4], "");
  y[0] = LLVMBuildFAdd(c->b, LLVMBuildFAdd(c->b, m[0], a, ""), s, "");
  y[1] = cg_fma(c, cg_splat(c, cg_f32(c, 2.0f), V), d, b);
  y[2] = cg_fma(c, cg_splat(c, cg_f32(c, 4.0f), V), s, a);
  y[3] = LLVMBuildFAdd(c->b, cg_fma(c, cg_splat(c, cg_f32(c, 8.0f), V), d, b), m[5], "");
}

/* Output transform of the item's channels: Y = A^T M A + bias (F(2x2): A^T = [1 1 1 0; 0 1 -1
 * -1]; F(4x4): wino_at6), the m x m pixels of V tiles interleaved into mV-pixel row pieces, the
 * fused residual add / relu on those, stored (masked at the right border; the rows of the last
 * tile row past oh skipped). */
static void wino_output(cg_ctx *c, const wino_plan *p, const wino_item *it) {
  int V = p->V, mt = p->m, al = p->al;
  int64_t cb = p->cbt * p->R;
  LLVMValueRef ncol = cg_min64(c, LLVMBuildMul(c->b, it->nct_here, cg_i64(c, p->R), ""),
                               LLVMBuildSub(c->b, cg_i64(c, p->cout), LLVMBuildMul(c->b, it->ct0, cg_i64(c, p->R), ""), ""));
  LLVMValueRef rows = cg_min64(c, cg_i64(c, p->tr), LLVMBuildSub(c->b, cg_i64(c, p->th), it->ty0, ""));
  cg_loop CO, IM, RW;
  LLVMValueRef col = cg_loop_begin(c, &CO, cg_i64(c, 0), ncol, cg_i64(c, 1), "wcol"), img;
  LLVMValueRef co = LLVMBuildAdd(c->b, LLVMBuildMul(c->b, it->ct0, cg_i64(c, p->R), ""), col, "co");
  LLVMValueRef bias = cg_splat(c, cg_load_f32(c, it->bp, co), V);
  LLVMValueRef il = wino_img_begin(c, p, it, &IM, &img);
  LLVMValueRef out_img = LLVMBuildMul(c->b, img, cg_i64(c, p->ocs * p->oh * p->ow), "out_img");
  LLVMValueRef oplane = LLVMBuildAdd(c->b, out_img, LLVMBuildMul(c->b, co, cg_i64(c, p->oh * p->ow), ""), "oplane");
  LLVMValueRef r = cg_loop_begin(c, &RW, cg_i64(c, 0), rows, cg_i64(c, 1), "wor");
  LLVMValueRef rs = LLVMBuildAdd(c->b, LLVMBuildMul(c->b, il, cg_i64(c, p->tr), ""), r, "rs");
  LLVMValueRef oy0 = LLVMBuildMul(c->b, LLVMBuildAdd(c->b, it->ty0, r, ""), cg_i64(c, mt), "oy0");
  LLVMValueRef slot0 = LLVMBuildAdd(c->b, LLVMBuildMul(c->b, col, cg_i64(c, p->tb), ""), LLVMBuildMul(c->b, rs, cg_i64(c, p->tw), ""), "");
  for (int64_t tx0 = 0; tx0 < p->tw; tx0 += V) {
    LLVMValueRef m[36], s[4][6], y[4][4];
    for (int xi = 0; xi < p->nx; xi++) m[xi] = cg_load_v(c, it->mb, LLVMBuildAdd(c->b, slot0, cg_i64(c, xi * cb * p->tb + tx0), ""), V);
    if (mt == 2) {
      for (int j = 0; j < 4; j++) {
        s[0][j] = LLVMBuildFAdd(c->b, LLVMBuildFAdd(c->b, m[j], m[4 + j], ""), m[8 + j], "");
        s[1][j] = LLVMBuildFSub(c->b, LLVMBuildFSub(c->b, m[4 + j], m[8 + j], ""), m[12 + j], "");
      }
      for (int a = 0; a < 2; a++) {
        y[a][0] = LLVMBuildFAdd(c->b, LLVMBuildFAdd(c->b, s[a][0], s[a][1], ""), s[a][2], "");
        y[a][1] = LLVMBuildFSub(c->b, LLVMBuildFSub(c->b, s[a][1], s[a][2], ""), s[a][3], "");
      }
    } else {
      for (int j = 0; j < al; j++) {
        LLVMValueRef cm[6], cy[4];
        for (int i = 0; i < al; i++) cm[i] = m[al * i + j];
        wino_at6(c, cm, cy, V);
        for (int a = 0; a < 4; a++) s[a][j] = cy[a];
      }
      for (int a = 0; a < 4; a++) wino_at6(c, s[a], y[a], V);
    }
    for (int a = 0; a < mt; a++)
      for (int b = 0; b < mt; b++) y[a][b] = LLVMBuildFAdd(c->b, y[a][b], bias, "");
    for (int a = 0; a < mt; a++) {
      cg_if f;
      int guard = p->oh % mt && a >= p->oh % mt; /* rows the last tile row does not have */
      LLVMValueRef oy = LLVMBuildAdd(c->b, oy0, cg_i64(c, a), "");
      if (guard) cg_if_begin(c, &f, LLVMBuildICmp(c->b, LLVMIntSLT, oy, cg_i64(c, p->oh), ""));
      LLVMValueRef orow = LLVMBuildAdd(c->b, oplane, LLVMBuildMul(c->b, oy, cg_i64(c, p->ow), ""), "");
      for (int h = 0; h < mt; h++) {
        int64_t ox = mt * tx0 + (int64_t)h * V;
        unsigned mo = 0, full = (1u << V) - 1;
        for (int l = 0; l < V; l++)
          if (ox + l < p->ow) mo |= 1u << l;
        if (!mo) continue;
        int idx[64]; /* pixel l of the piece: tile h V/m + l/m, column l%m */
        for (int l = 0; l < V; l++) idx[l] = (l % mt) * V + h * V / mt + l / mt;
        LLVMValueRef px = wino_gather(c, y[a], mt, idx, V);
        LLVMValueRef oi = LLVMBuildAdd(c->b, orow, cg_i64(c, ox), "");
        for (int q = 0, ra = 0; q < it->n_post; q++) { /* relu, residual add: on the output pixels */
          if (it->post[q]->op == IR_OP_add && mo != full)
            px = LLVMBuildFAdd(c->b, px, cg_conv_masked_load(c, it->resid[ra], oi, mo, V), "resid");
          else px = cg_epilogue(c, it->post[q], px, it->post[q]->op == IR_OP_add ? it->resid[ra] : NULL, oi, V);
          ra += it->post[q]->op == IR_OP_add;
        }
        if (mo == full) cg_store_v(c, px, it->out, oi, V);
        else cg_conv_masked_store(c, px, it->out, oi, mo, V);
      }
      if (guard) cg_if_end(c, &f);
    }
  }
  cg_loop_end(c, &RW);
  wino_img_end(c, p, &IM);
  cg_loop_end(c, &CO);
}

/* One input-channel block kbi: its transform, then its GEMMs. */
static void wino_kblock(cg_ctx *c, const wino_plan *p, const wino_item *it, LLVMValueRef kbi, int first) {
  LLVMValueRef k0 = LLVMBuildMul(c->b, kbi, cg_i64(c, p->kb), "k0");
  LLVMValueRef kn = cg_min64(c, cg_i64(c, p->kb), LLVMBuildSub(c->b, cg_i64(c, p->cin), k0, ""));
  if (p->m == 4) wino_input4(c, p, it, k0, kn);
  else wino_input(c, p, it, k0, kn);
  wino_gemm(c, p, it, k0, kn, first);
}


/* Output tile of node n: tune wino_f2=1 forces 2x2, tune wino_f4=1 forces 4x4 (tests,
 * measurements); otherwise 4x4 when the map has at least 2V 4x4 tiles (one GEMM column block
 * of P = 2 vectors: 14x14 and up on AVX2; measured ResNet-50 56x56, 28x28, 14x14 1.3-1.6x
 * faster than F(2x2) per CPU-second, 7x7 with its 4 tiles 0.4x). */
static int wino_tile(cg_ctx *c, const ir_node *n) {
  if (cg_tune(c)->wino_f2) return 2;
  if (cg_tune(c)->wino_f4) return 4;
  if (wino_wide(c)) { /* 16 lanes: the tile of the lower wino_cost16 */
    wino_plan p2 = wino_plan16(c, n, 2), p4 = wino_plan16(c, n, 4);
    return wino_cost16(&p4) < wino_cost16(&p2) ? 4 : 2;
  }
  const ir_shape *ys = &c->g->values[n->out].shape;
  return cdiv(ys->dim[2], 4) * cdiv(ys->dim[3], 4) >= 2 * c->target->vec_f32 ? 4 : 2;
}

LLVMValueRef cg_gen_conv2d_wino(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind) {
  int m = wino_tile(c, n);
  wino_plan p = wino_plan_of(c, n, m);
  const pass_fusion *fu = cg_fusion(c, n);
  int V = p.V;
  size_t un = (size_t)p.nx * p.nct * p.R * p.kb * p.nkb, bn = (size_t)p.nct * p.R;
  float *U = cg_plan_only(c) ? malloc(un * sizeof(float)) : calloc(un, sizeof(float)), *B = calloc(bn, sizeof(float));
  if (!U || !B) {
    free(U), free(B);
    return cg_fail(c, n, "out of memory packing the Winograd weights");
  }
  if (!cg_plan_only(c)) wino_pack(c, n, fu->bn >= 0 ? &c->g->nodes[fu->bn] : NULL, &p, U, B);
  wino_item it;
  memset(&it, 0, sizeof it);
  it.n_post = fu->n_post;
  int n_act = 1;
  for (int i = 0; i < fu->n_post; i++) it.post[i] = &c->g->nodes[fu->post[i]], n_act += it.post[i]->op == IR_OP_add;
  LLVMValueRef a[PASS_MAX_POST + 4];
  LLVMValueRef f = cg_kernel_begin(c, fn_name, n_act, a);
  it.x = a[0], it.out = a[n_act];
  for (int i = 1; i < n_act; i++) it.resid[i - 1] = a[i];
  it.up = cg_blob_const(c, "wino.u", U, un * sizeof(float));
  it.bp = cg_blob_const(c, "wino.b", B, bn * sizeof(float));
  free(U);
  free(B);
  int64_t vfl = p.nx * p.vxs, mfl = p.nx * p.cbt * p.R * p.tb + V; /* + V: wino_output's last vector load of a short tile row */
  LLVMValueRef vb = cg_entry_alloca(c, LLVMArrayType2(cg_vtype(c, V), (uint64_t)cdiv(vfl, V)), "wino_v");
  LLVMValueRef mb = cg_entry_alloca(c, LLVMArrayType2(cg_vtype(c, V), (uint64_t)cdiv(mfl, V)), "wino_m");
  LLVMSetAlignment(vb, 64);
  LLVMSetAlignment(mb, 64);
  it.vb = cg_conv_opaque_ptr(c, vb), it.mb = cg_conv_opaque_ptr(c, mb);
  /* slots no chunk writes (padding past the last row's spill) are read by the GEMMs: zeros */
  cg_loop Z; /* (no memset: the .so links no libc) */
  LLVMValueRef zi = cg_loop_begin(c, &Z, cg_i64(c, 0), cg_i64(c, cdiv(vfl, V) * V), cg_i64(c, V), "wz");
  cg_store_v(c, cg_fzero(c, V), it.vb, zi, V);
  cg_loop_end(c, &Z);
  LLVMValueRef lo, hi;
  cg_thread_range(c, cg_i64(c, p.nig * p.ngrp * p.ncb), a[n_act + 1], a[n_act + 2], &lo, &hi);
  cg_loop L;
  LLVMValueRef item = cg_loop_begin(c, &L, lo, hi, cg_i64(c, 1), "item");
  LLVMValueRef cbi = LLVMBuildSRem(c->b, item, cg_i64(c, p.ncb), "cbi");
  LLVMValueRef rest = LLVMBuildSDiv(c->b, item, cg_i64(c, p.ncb), "");
  LLVMValueRef grp = LLVMBuildSRem(c->b, rest, cg_i64(c, p.ngrp), "grp");
  LLVMValueRef ig = LLVMBuildSDiv(c->b, rest, cg_i64(c, p.ngrp), "ig");
  it.ct0 = LLVMBuildMul(c->b, cbi, cg_i64(c, p.cbt), "ct0");
  it.nct_here = cg_min64(c, cg_i64(c, p.cbt), LLVMBuildSub(c->b, cg_i64(c, p.nct), it.ct0, ""));
  it.ty0 = LLVMBuildMul(c->b, grp, cg_i64(c, p.tr), "ty0");
  it.n0 = LLVMBuildMul(c->b, ig, cg_i64(c, p.ipi), "n0");
  it.nimg = cg_min64(c, cg_i64(c, p.ipi), LLVMBuildSub(c->b, cg_i64(c, p.n), it.n0, ""));
  wino_kblock(c, &p, &it, cg_i64(c, 0), 1);
  if (p.nkb > 1) {
    cg_loop K;
    LLVMValueRef kbi = cg_loop_begin(c, &K, cg_i64(c, 1), cg_i64(c, p.nkb), cg_i64(c, 1), "kbi");
    wino_kblock(c, &p, &it, kbi, 0);
    cg_loop_end(c, &K);
  }
  wino_output(c, &p, &it);
  cg_loop_end(c, &L);
  cg_kernel_end(c);
  char op[96], tile[32];
  int k = snprintf(op, sizeof op, "conv2d_wino%d%s", p.m, fu->bn >= 0 ? "_bn" : "");
  for (int i = 0; i < fu->n_post && k < 80; i++) k += snprintf(op + k, sizeof op - (size_t)k, "_%s", ir_ops[c->g->nodes[fu->post[i]].op].name);
  snprintf(tile, sizeof tile, "%dx%d", p.R, p.P * V); /* channels x tiles */
  *kind = cg_kind(c, op, tile);
  return f;
}
