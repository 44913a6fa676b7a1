/* gen_train_wino.c — Winograd F(2x2,3x3) for compiled training's 3x3 stride-1 convs (issue 5):
 * the forward conv and the stride-1 grad_input (a 3x3 stride-1 conv of dy with w transposed
 * and the taps mirrored, padding 2 - pad).  The scheme is inference's (conv/wino.c): per
 * block of kb input channels the item's 4x4 input tiles are transformed, V = B^T d B, into a
 * stack panel [16][kb][tb]; the 16 GEMMs M[xi] += U[xi] V[xi] run on R x P register tiles into
 * a second panel [16][cb][tb]; then Y = A^T M A (+ bias) is stored.  The weights live in the
 * state buffer and change every step, so U = G g G^T is computed at run time: work items are
 * (channel block, image, row group), block-major, in contiguous ranges over the threads; a
 * thread entering a block transforms that block's U (all input channels, f32, a fixed order)
 * into a stack buffer in the GEMMs' read order [Cin/kb][cbt][16][kb][R] — each block about
 * once per step in all (twice where a thread range boundary falls inside it) — and every
 * output element has one writer with a fixed summation order: results do not depend on the
 * thread count. */
#include <stdlib.h>
#include <string.h>

#include "codegen/conv/conv_core.h"
#include "codegen/gen_train_wino.h"

/* Each stack panel (transformed inputs, GEMM results) at most this big. */
#define TW_PANEL_BYTES (192 * 1024)
/* A block's transformed weights at most this big (U lives in the kernel's frame): fewer,
 * wider blocks transform the inputs fewer times. */
#define TW_U_BYTES (1024 * 1024)
#define TW_TB_MAX 64 /* tile slots per item at most (a single tile row may be wider) */

typedef struct twplan {
  int64_t n, cin, cout, h, w, oh, ow;
  int pt, pl, V, R, P;
  int64_t th, tw, tr, ngrp, tb; /* output tiles (rows, columns), tile rows per item, groups, slots */
  int64_t nct, cbt, ncb;        /* channel tiles of R, tiles per block, blocks */
  int64_t kb, nkb, vxs;         /* input channels per K block, K blocks, panel floats per xi */
  int64_t so, si, sy, sx, w0;   /* weight (o, i, ky, kx) of the conv (view) at w0 + o*so + ... */
} twplan;

static int64_t tw_cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* The conditions of gen_train_wino.h on the attributes and the graph. */
static int tw_route_ok(cg_ctx *c, const ir_conv2d_attr *a) {
  if (!cg_tune(c)->train_winograd) return 0;
  if (c->target->vec_f32 < 8 || c->g->half_partials) return 0;
  int dh = a->dilation[0] < 1 ? 1 : a->dilation[0], dw = a->dilation[1] < 1 ? 1 : a->dilation[1];
  if (a->kernel[0] != 3 || a->kernel[1] != 3 || a->stride[0] != 1 || a->stride[1] != 1 || dh != 1 || dw != 1 || a->groups > 1)
    return 0;
  for (int i = 0; i < 4; i++)
    if (a->pad[i] < 0 || a->pad[i] > 2) return 0;
  for (int i = 0; i < c->g->n_nodes; i++) /* --precision 16.x: the direct kernels' results */
    if (c->g->nodes[i].op == IR_OP_round16) return 0;
  return 1;
}

/* Plans the conv view x [n,cin,h,w] -> y [n,cout,oh,ow] with leading pads pt, pl; 0 when the
 * map has fewer 2x2 tiles than vector lanes or too few channels.  Row groups: the tile-row
 * count wasting the fewest slots (ties: two or more vectors of tiles); K blocks and channel
 * blocks: the panels' budget, and the U block's. */
static int tw_plan(cg_ctx *c, const int64_t *xd, const int64_t *yd, int pt, int pl, twplan *p) {
  memset(p, 0, sizeof *p);
  p->n = xd[0], p->cin = xd[1], p->h = xd[2], p->w = xd[3], p->cout = yd[1], p->oh = yd[2], p->ow = yd[3];
  p->pt = pt, p->pl = pl;
  p->V = c->target->vec_f32, p->P = 2, p->R = cg_acc_budget(c->target) / 2;
  p->th = tw_cdiv(p->oh, 2), p->tw = tw_cdiv(p->ow, 2);
  if (p->cin < CG_TRAIN_WINO_MIN_C || p->cout < CG_TRAIN_WINO_MIN_C || p->th * p->tw < p->V) return 0;
  int64_t pv = (int64_t)p->P * p->V;
  double best = -1;
  for (int64_t tr = 1; tr <= p->th; tr++) {
    int64_t tb = tw_cdiv(tr * p->tw, pv) * pv, ngrp = tw_cdiv(p->th, tr);
    if (tb > TW_TB_MAX && tr > 1) break;
    double score = (double)(p->th * p->tw) / (double)(ngrp * tb) + (tb >= 2 * pv ? 1e-3 : 0);
    if (score > best + 1e-9) best = score, p->tr = tr, p->tb = tb, p->ngrp = ngrp;
  }
  int64_t kbmax = TW_PANEL_BYTES / (64 * p->tb);
  if (kbmax < 1) kbmax = 1;
  p->nkb = tw_cdiv(p->cin, kbmax), p->kb = tw_cdiv(p->cin, p->nkb), p->vxs = p->kb * p->tb + p->V;
  p->nct = tw_cdiv(p->cout, p->R);
  int64_t ubytes = TW_U_BYTES;
  int64_t cbmax = TW_PANEL_BYTES / (64 * p->tb * p->R), ubmax = ubytes / (64 * p->kb * p->nkb * p->R);
  if (ubmax < cbmax) cbmax = ubmax;
  if (cbmax < 1) cbmax = 1;
  p->ncb = tw_cdiv(p->nct, cbmax);
  int64_t items = p->n * p->ngrp * p->ncb;
  if (items < 16 && items % 2 && p->ncb < p->nct) p->ncb++; /* an even item count for 2 threads */
  p->cbt = tw_cdiv(p->nct, p->ncb), p->ncb = tw_cdiv(p->nct, p->cbt);
  return 1;
}

typedef struct tw_item { /* run-time values of one work item */
  LLVMValueRef x, w, bias, out, ub, vb, mb;
  LLVMValueRef in_img, out_img, ty0, ct0, nct_here;
} tw_item;

/* U of the item's block: ub[((kbi*cbt + ct)*16 + xi)*kb + cl)*R + r] = G g G^T for output
 * channel (ct0 + ct)*R + r and input channel kbi*kb + cl (G = [1 0 0; .5 .5 .5; .5 -.5 .5;
 * 0 0 1]; channels past cout: 0), in f32 in a fixed order. */
static void tw_utrans(cg_ctx *c, const twplan *p, const tw_item *it) {
  cg_loop CT, RR, KB, CL;
  LLVMValueRef half = cg_f32(c, 0.5f), zero = cg_f32(c, 0.0f);
  LLVMValueRef ct = cg_loop_begin(c, &CT, cg_i64(c, 0), it->nct_here, cg_i64(c, 1), "uct");
  LLVMValueRef r = cg_loop_begin(c, &RR, cg_i64(c, 0), cg_i64(c, p->R), cg_i64(c, 1), "ur");
  LLVMValueRef co = cg_tadd(c, cg_tmul(c, cg_tadd(c, it->ct0, ct), p->R), r);
  LLVMValueRef valid = LLVMBuildICmp(c->b, LLVMIntSLT, co, cg_i64(c, p->cout), "");
  LLVMValueRef coc = cg_min64(c, co, cg_i64(c, p->cout - 1));
  LLVMValueRef kbi = cg_loop_begin(c, &KB, cg_i64(c, 0), cg_i64(c, p->nkb), cg_i64(c, 1), "ukb");
  LLVMValueRef ci0 = cg_tmul(c, kbi, p->kb);
  LLVMValueRef kn = cg_min64(c, cg_i64(c, p->kb), LLVMBuildSub(c->b, cg_i64(c, p->cin), ci0, ""));
  LLVMValueRef drow = cg_tadd(c, cg_tmul(c, cg_tadd(c, cg_tmul(c, kbi, p->cbt), ct), 16 * p->kb * p->R), r);
  LLVMValueRef cl = cg_loop_begin(c, &CL, cg_i64(c, 0), kn, cg_i64(c, 1), "ucl");
  LLVMValueRef src = cg_taddk(c, cg_tadd(c, cg_tmul(c, coc, p->so), cg_tmul(c, cg_tadd(c, ci0, cl), p->si)), p->w0);
  LLVMValueRef g[3][3], gg[4][3];
  for (int ky = 0; ky < 3; ky++)
    for (int kx = 0; kx < 3; kx++)
      g[ky][kx] = LLVMBuildSelect(c->b, valid, cg_load_f32(c, it->w, cg_taddk(c, src, ky * p->sy + kx * p->sx)), zero, "");
  for (int l = 0; l < 3; l++) { /* G g: rows g0, (g0 + g2 + g1)/2, (g0 + g2 - g1)/2, g2 */
    LLVMValueRef s = LLVMBuildFAdd(c->b, g[0][l], g[2][l], "");
    gg[0][l] = g[0][l], gg[3][l] = g[2][l];
    gg[1][l] = LLVMBuildFMul(c->b, LLVMBuildFAdd(c->b, s, g[1][l], ""), half, "");
    gg[2][l] = LLVMBuildFMul(c->b, LLVMBuildFSub(c->b, s, g[1][l], ""), half, "");
  }
  LLVMValueRef dst = cg_tadd(c, drow, cg_tmul(c, cl, p->R));
  for (int i = 0; i < 4; i++) { /* (G g) G^T: the same on the columns */
    LLVMValueRef s = LLVMBuildFAdd(c->b, gg[i][0], gg[i][2], ""), u[4];
    u[0] = gg[i][0], u[3] = gg[i][2];
    u[1] = LLVMBuildFMul(c->b, LLVMBuildFAdd(c->b, s, gg[i][1], ""), half, "");
    u[2] = LLVMBuildFMul(c->b, LLVMBuildFSub(c->b, s, gg[i][1], ""), half, "");
    for (int j = 0; j < 4; j++) cg_store_f32(c, u[j], it->ub, cg_taddk(c, dst, (int64_t)(4 * i + j) * p->kb * p->R));
  }
  cg_loop_end(c, &CL);
  cg_loop_end(c, &KB);
  cg_loop_end(c, &RR);
  cg_loop_end(c, &CT);
}

/* V lanes: input columns col0, col0 + 2, ... of the row at element idx (0 outside [0, w)):
 * one stride-2 pair load inside the row, masked loads at its borders. */
static LLVMValueRef tw_cols(cg_ctx *c, const twplan *p, LLVMValueRef x, LLVMValueRef idx, int64_t col0) {
  int V = p->V;
  unsigned lo = 0, hi = 0;
  for (int l = 0; l < V; l++) {
    int64_t col = col0 + 2 * l;
    if (col < 0 || col >= p->w) continue;
    if (2 * l < V) lo |= 1u << (2 * l);
    else hi |= 1u << (2 * l - V);
  }
  if (!lo && !hi) return cg_fzero(c, V);
  LLVMValueRef at = cg_taddk(c, idx, col0);
  if (col0 >= 0 && col0 + 2 * V - 2 < p->w) return cg_load_strided(c, x, at, 2, V);
  LLVMValueRef va = lo ? cg_tload(c, x, at, 1, lo, V) : cg_fzero(c, V);
  LLVMValueRef vb = hi ? cg_tload(c, x, cg_taddk(c, at, V), 1, hi, V) : cg_fzero(c, V);
  return cg_even_lanes(c, va, vb, V);
}

/* Input transform of channels [k0, k0 + kn) of the item's rows into the panel: vb[xi*vxs +
 * ci*tb + r*tw + tx] for tile (ty0 + r, tx).  A row's last chunk spills past its tiles into
 * the next row's slots (rewritten by that row), the last row's into the padding slots or the
 * next channel's first row (rewritten next) or the V slack floats after the last channel. */
static void tw_input(cg_ctx *c, const twplan *p, const tw_item *it, LLVMValueRef k0, LLVMValueRef kn) {
  int V = p->V;
  cg_loop CI, RW;
  LLVMValueRef ci = cg_loop_begin(c, &CI, cg_i64(c, 0), kn, cg_i64(c, 1), "tci");
  LLVMValueRef plane = cg_tadd(c, it->in_img, cg_tmul(c, cg_tadd(c, k0, ci), p->h * p->w));
  LLVMValueRef r = cg_loop_begin(c, &RW, cg_i64(c, 0), cg_i64(c, p->tr), cg_i64(c, 1), "tr");
  LLVMValueRef iy0 = cg_taddk(c, cg_tmul(c, cg_tadd(c, it->ty0, r), 2), -p->pt);
  LLVMValueRef rowi[4], valid[4], z = cg_fzero(c, V);
  for (int i = 0; i < 4; i++) {
    LLVMValueRef iy = cg_taddk(c, iy0, i);
    valid[i] = LLVMBuildICmp(c->b, LLVMIntULT, iy, cg_i64(c, p->h), ""); /* 0 <= iy < h */
    LLVMValueRef iyc = cg_max64(c, cg_i64(c, 0), cg_min64(c, iy, cg_i64(c, p->h - 1))); /* no read outside */
    rowi[i] = cg_tadd(c, plane, cg_tmul(c, iyc, p->w));
  }
  LLVMValueRef slot0 = cg_tadd(c, cg_tmul(c, ci, p->tb), cg_tmul(c, r, p->tw));
  for (int64_t tx0 = 0; tx0 < p->tw; tx0 += V) {
    LLVMValueRef d[4][4], e[4][4];
    for (int i = 0; i < 4; i++)
      for (int j = 0; j < 4; j++) d[i][j] = LLVMBuildSelect(c->b, valid[i], tw_cols(c, p, it->x, rowi[i], 2 * tx0 - p->pl + j), z, "");
    for (int j = 0; j < 4; j++) { /* B^T d: d0 - d2, d1 + d2, d2 - d1, d1 - d3 */
      e[0][j] = LLVMBuildFSub(c->b, d[0][j], d[2][j], "");
      e[1][j] = LLVMBuildFAdd(c->b, d[1][j], d[2][j], "");
      e[2][j] = LLVMBuildFSub(c->b, d[2][j], d[1][j], "");
      e[3][j] = LLVMBuildFSub(c->b, d[1][j], d[3][j], "");
    }
    for (int i = 0; i < 4; i++) { /* (B^T d) B: the same on the columns */
      LLVMValueRef v[4] = {LLVMBuildFSub(c->b, e[i][0], e[i][2], ""), LLVMBuildFAdd(c->b, e[i][1], e[i][2], ""),
                           LLVMBuildFSub(c->b, e[i][2], e[i][1], ""), LLVMBuildFSub(c->b, e[i][1], e[i][3], "")};
      for (int j = 0; j < 4; j++) cg_store_v(c, v[j], it->vb, cg_taddk(c, slot0, (4 * i + j) * p->vxs + tx0), V);
    }
  }
  cg_loop_end(c, &RW);
  cg_loop_end(c, &CI);
}

/* The 16 GEMMs of K block kbi (kn channels) for the item's channel tiles: mb[(xi*cb + ct*R +
 * k)*tb + t] (+)= sum over the block's channels of U * V, in channel order; first: the block
 * starts the sums. */
static void tw_gemm(cg_ctx *c, const twplan *p, const tw_item *it, LLVMValueRef kbi, LLVMValueRef kn, int first) {
  int V = p->V, R = p->R, P = p->P;
  LLVMTypeRef vt = cg_vtype(c, V);
  int64_t cb = p->cbt * R;
  cg_loop CT, XI, PG, CI;
  LLVMValueRef ct = cg_loop_begin(c, &CT, cg_i64(c, 0), it->nct_here, cg_i64(c, 1), "gct");
  LLVMValueRef xi = cg_loop_begin(c, &XI, cg_i64(c, 0), cg_i64(c, 16), cg_i64(c, 1), "gxi");
  LLVMValueRef urow = cg_tmul(c, cg_tadd(c, cg_tmul(c, cg_tadd(c, cg_tmul(c, kbi, p->cbt), ct), 16), xi), p->kb * R);
  LLVMValueRef vrow = cg_tmul(c, xi, p->vxs);
  LLVMValueRef mrow = cg_tmul(c, cg_tadd(c, cg_tmul(c, xi, cb), cg_tmul(c, ct, R)), p->tb);
  LLVMValueRef pg = cg_loop_begin(c, &PG, cg_i64(c, 0), cg_i64(c, p->tb / ((int64_t)P * V)), cg_i64(c, 1), "gpg");
  LLVMValueRef mt = cg_tadd(c, mrow, cg_tmul(c, pg, (int64_t)P * V)), vt0 = cg_tadd(c, vrow, cg_tmul(c, pg, (int64_t)P * V));
  LLVMValueRef acc[64], cur[64];
  for (int k = 0; k < R; k++)
    for (int q = 0; q < P; q++) {
      acc[k * P + q] = cg_entry_alloca(c, vt, "gacc");
      LLVMValueRef init = first ? cg_fzero(c, V) : cg_load_v(c, it->mb, cg_taddk(c, mt, (int64_t)k * p->tb + q * V), V);
      LLVMBuildStore(c->b, init, acc[k * P + q]);
    }
  LLVMValueRef ci = cg_loop_begin(c, &CI, cg_i64(c, 0), kn, cg_i64(c, 1), "gk");
  for (int i = 0; i < R * P; i++) cur[i] = LLVMBuildLoad2(c->b, vt, acc[i], "");
  LLVMValueRef vi = cg_tadd(c, vt0, cg_tmul(c, ci, p->tb)), ui = cg_tadd(c, urow, cg_tmul(c, ci, R));
  LLVMValueRef xv[16];
  for (int q = 0; q < P; q++) xv[q] = cg_load_v(c, it->vb, cg_taddk(c, vi, (int64_t)q * V), V);
  for (int k = 0; k < R; k++) {
    LLVMValueRef wb = cg_splat(c, cg_load_f32(c, it->ub, cg_taddk(c, ui, k)), V);
    for (int q = 0; q < P; q++) cur[k * P + q] = cg_fma(c, wb, xv[q], cur[k * P + q]);
  }
  for (int i = 0; i < R * P; i++) LLVMBuildStore(c->b, cur[i], acc[i]);
  cg_loop_end(c, &CI);
  for (int k = 0; k < R; k++)
    for (int q = 0; q < P; q++)
      cg_store_v(c, LLVMBuildLoad2(c->b, vt, acc[k * P + q], ""), it->mb, cg_taddk(c, mt, (int64_t)k * p->tb + q * V), V);
  cg_loop_end(c, &PG);
  cg_loop_end(c, &XI);
  cg_loop_end(c, &CT);
}

/* Output transform of the item's channels: Y = A^T M A (A^T = [1 1 1 0; 0 1 -1 -1]) (+ bias),
 * the 2x2 pixels of V tiles interleaved into two V-pixel row pieces, stored masked at the
 * right border; the second row of the last tile row skipped when oh is odd. */
static void tw_output(cg_ctx *c, const twplan *p, const tw_item *it) {
  int V = p->V;
  int64_t cb = p->cbt * p->R;
  LLVMValueRef ncol = cg_min64(c, cg_tmul(c, it->nct_here, p->R), LLVMBuildSub(c->b, cg_i64(c, p->cout), cg_tmul(c, it->ct0, p->R), ""));
  LLVMValueRef rows = cg_min64(c, cg_i64(c, p->tr), LLVMBuildSub(c->b, cg_i64(c, p->th), it->ty0, ""));
  cg_loop CO, RW;
  LLVMValueRef col = cg_loop_begin(c, &CO, cg_i64(c, 0), ncol, cg_i64(c, 1), "ocol");
  LLVMValueRef co = cg_tadd(c, cg_tmul(c, it->ct0, p->R), col);
  LLVMValueRef bias = it->bias ? cg_splat(c, cg_load_f32(c, it->bias, co), V) : NULL;
  LLVMValueRef oplane = cg_tadd(c, it->out_img, cg_tmul(c, co, p->oh * p->ow));
  LLVMValueRef r = cg_loop_begin(c, &RW, cg_i64(c, 0), rows, cg_i64(c, 1), "orw");
  LLVMValueRef oy0 = cg_tmul(c, cg_tadd(c, it->ty0, r), 2);
  LLVMValueRef slot0 = cg_tadd(c, cg_tmul(c, col, p->tb), cg_tmul(c, r, p->tw));
  LLVMValueRef ilo[64], ihi[64];
  for (int k = 0; k < V / 2; k++) {
    ilo[2 * k] = cg_i32(c, k), ilo[2 * k + 1] = cg_i32(c, V + k);
    ihi[2 * k] = cg_i32(c, V / 2 + k), ihi[2 * k + 1] = cg_i32(c, V + V / 2 + k);
  }
  for (int64_t tx0 = 0; tx0 < p->tw; tx0 += V) {
    LLVMValueRef m[16], s[2][4], y[2][2];
    for (int xi = 0; xi < 16; xi++) m[xi] = cg_load_v(c, it->mb, cg_taddk(c, slot0, xi * cb * p->tb + tx0), V);
    for (int j = 0; j < 4; j++) {
      s[0][j] = LLVMBuildFAdd(c->b, LLVMBuildFAdd(c->b, m[j], m[4 + j], ""), m[8 + j], "");
      s[1][j] = LLVMBuildFSub(c->b, LLVMBuildFSub(c->b, m[4 + j], m[8 + j], ""), m[12 + j], "");
    }
    for (int a = 0; a < 2; a++) {
      y[a][0] = LLVMBuildFAdd(c->b, LLVMBuildFAdd(c->b, s[a][0], s[a][1], ""), s[a][2], "");
      y[a][1] = LLVMBuildFSub(c->b, LLVMBuildFSub(c->b, s[a][1], s[a][2], ""), s[a][3], "");
      if (bias)
        for (int b = 0; b < 2; b++) y[a][b] = LLVMBuildFAdd(c->b, y[a][b], bias, "");
    }
    for (int a = 0; a < 2; a++) {
      cg_if f;
      int guard = a == 1 && p->oh % 2;
      LLVMValueRef oy = cg_taddk(c, oy0, a);
      if (guard) cg_if_begin(c, &f, LLVMBuildICmp(c->b, LLVMIntSLT, oy, cg_i64(c, p->oh), ""));
      LLVMValueRef orow = cg_tadd(c, oplane, cg_tmul(c, oy, p->ow));
      LLVMValueRef piece[2] = {LLVMBuildShuffleVector(c->b, y[a][0], y[a][1], LLVMConstVector(ilo, (unsigned)V), "plo"),
                               LLVMBuildShuffleVector(c->b, y[a][0], y[a][1], LLVMConstVector(ihi, (unsigned)V), "phi")};
      for (int h = 0; h < 2; h++) {
        int64_t ox = 2 * tx0 + (int64_t)h * V;
        if (ox < p->ow) cg_tstore(c, piece[h], it->out, cg_taddk(c, orow, ox), cg_lanes((int)(p->ow - ox < V ? p->ow - ox : V), V), V);
      }
      if (guard) cg_if_end(c, &f);
    }
  }
  cg_loop_end(c, &RW);
  cg_loop_end(c, &CO);
}

/* K block kbi: its input transform, then its GEMMs. */
static void tw_kblock(cg_ctx *c, const twplan *p, const tw_item *it, LLVMValueRef kbi, int first) {
  LLVMValueRef k0 = cg_tmul(c, kbi, p->kb);
  LLVMValueRef kn = cg_min64(c, cg_i64(c, p->kb), LLVMBuildSub(c->b, cg_i64(c, p->cin), k0, ""));
  tw_input(c, p, it, k0, kn);
  tw_gemm(c, p, it, kbi, kn, first);
}

/* The kernel body (see the file comment). */
static void tw_emit(cg_ctx *c, const twplan *p, LLVMValueRef x, LLVMValueRef w, LLVMValueRef bias, LLVMValueRef out,
                    LLVMValueRef tid, LLVMValueRef nth) {
  int V = p->V;
  LLVMTypeRef vt = cg_vtype(c, V);
  tw_item it;
  memset(&it, 0, sizeof it);
  it.x = x, it.w = w, it.bias = bias, it.out = out;
  int64_t ufl = p->nkb * p->cbt * 16 * p->kb * p->R, vfl = 16 * p->vxs, mfl = 16 * p->cbt * p->R * p->tb + V;
  LLVMValueRef ub = cg_entry_alloca(c, LLVMArrayType2(vt, (uint64_t)tw_cdiv(ufl, V)), "wino_u");
  LLVMValueRef vb = cg_entry_alloca(c, LLVMArrayType2(vt, (uint64_t)tw_cdiv(vfl, V)), "wino_v");
  LLVMValueRef mb = cg_entry_alloca(c, LLVMArrayType2(vt, (uint64_t)tw_cdiv(mfl, V)), "wino_m");
  LLVMSetAlignment(ub, 64), LLVMSetAlignment(vb, 64), LLVMSetAlignment(mb, 64);
  it.ub = cg_conv_opaque_ptr(c, ub), it.vb = cg_conv_opaque_ptr(c, vb), it.mb = cg_conv_opaque_ptr(c, mb);
  LLVMValueRef key = cg_entry_alloca(c, c->t_i64, "wino_u_blk");
  LLVMBuildStore(c->b, cg_i64(c, -1), key);
  cg_loop Z; /* panel slots no chunk writes are read by the GEMMs (results unused): zeros, not junk */
  LLVMValueRef zi = cg_loop_begin(c, &Z, cg_i64(c, 0), cg_i64(c, tw_cdiv(vfl, V) * V), cg_i64(c, V), "wz");
  cg_store_v(c, cg_fzero(c, V), it.vb, zi, V);
  cg_loop_end(c, &Z);
  int64_t per = p->n * p->ngrp;
  LLVMValueRef lo, hi;
  cg_thread_range(c, cg_i64(c, per * p->ncb), tid, nth, &lo, &hi);
  cg_loop L;
  LLVMValueRef item = cg_loop_begin(c, &L, lo, hi, cg_i64(c, 1), "item");
  LLVMValueRef cbi = LLVMBuildSDiv(c->b, item, cg_i64(c, per), "cbi"), rest = LLVMBuildSRem(c->b, item, cg_i64(c, per), "");
  LLVMValueRef nb = LLVMBuildSDiv(c->b, rest, cg_i64(c, p->ngrp), "nb"), grp = LLVMBuildSRem(c->b, rest, cg_i64(c, p->ngrp), "grp");
  it.ct0 = cg_tmul(c, cbi, p->cbt);
  it.nct_here = cg_min64(c, cg_i64(c, p->cbt), LLVMBuildSub(c->b, cg_i64(c, p->nct), it.ct0, ""));
  it.ty0 = cg_tmul(c, grp, p->tr);
  it.in_img = cg_tmul(c, nb, p->cin * p->h * p->w);
  it.out_img = cg_tmul(c, nb, p->cout * p->oh * p->ow);
  cg_if fu; /* entering a block: its U */
  cg_if_begin(c, &fu, LLVMBuildICmp(c->b, LLVMIntNE, LLVMBuildLoad2(c->b, c->t_i64, key, ""), cbi, ""));
  tw_utrans(c, p, &it);
  LLVMBuildStore(c->b, cbi, key);
  cg_if_end(c, &fu);
  tw_kblock(c, p, &it, cg_i64(c, 0), 1);
  if (p->nkb > 1) {
    cg_loop K;
    LLVMValueRef kbi = cg_loop_begin(c, &K, cg_i64(c, 1), cg_i64(c, p->nkb), cg_i64(c, 1), "kbi");
    tw_kblock(c, p, &it, kbi, 0);
    cg_loop_end(c, &K);
  }
  tw_output(c, p, &it);
  cg_loop_end(c, &L);
}

static const char *tw_kind(cg_ctx *c, const char *op, const twplan *p) {
  return cg_kind(c, op, ir_fmt(c->arena, "%dx%d", p->R, p->P * p->V)); /* channels x tiles */
}

static int tw_f32(cg_ctx *c, const ir_node *n) {
  return c->g->values[n->in[0]].dtype == IR_F32 && c->g->values[n->in[1]].dtype == IR_F32 && c->g->values[n->out].dtype == IR_F32;
}

/* The plan of conv2d or conv2d_grad_input node n on the route (grad_input: the conv of dy
 * with w transposed and mirrored, leading padding 2 - pad), 0 when the route does not take it. */
static int tw_take(cg_ctx *c, const ir_node *n, twplan *p) {
  int fwd = n->op == IR_OP_conv2d;
  const ir_conv2d_attr *a = fwd ? &n->attr.conv2d : &n->attr.conv2d_grad_input.conv;
  const ir_shape *is = &c->g->values[n->in[0]].shape, *os = &c->g->values[n->out].shape;
  if (!tw_route_ok(c, a) || !tw_f32(c, n) || is->rank != 4) return 0;
  return fwd ? tw_plan(c, is->dim, os->dim, a->pad[0], a->pad[1], p) : tw_plan(c, is->dim, os->dim, 2 - a->pad[0], 2 - a->pad[1], p);
}

int cg_train_wino_match(cg_ctx *c, const ir_node *n, cg_kplan *kp) {
  twplan p;
  (void)kp;
  return tw_take(c, n, &p);
}

LLVMValueRef cg_train_wino_fwd(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind) {
  twplan p;
  if (!tw_take(c, n, &p)) return cg_fail(c, n, "internal error: the training Winograd route does not take this conv");
  p.so = p.cin * 9, p.si = 9, p.sy = 3, p.sx = 1, p.w0 = 0;
  int nin = n->n_in;
  LLVMValueRef args[6];
  LLVMValueRef f = cg_train_kbegin(c, fn_name, nin, args);
  tw_emit(c, &p, args[0], args[1], nin > 2 ? args[2] : NULL, args[nin], args[nin + 1], args[nin + 2]);
  cg_kernel_end(c);
  *kind = tw_kind(c, "conv2d_train_wino2", &p);
  return f;
}

/* dx = the 3x3 conv of dy (view input: Co channels) with w transposed and mirrored: view
 * weight (o = ci, i = co, ky, kx) = w[co, ci, 2 - ky, 2 - kx], leading padding 2 - pad. */
LLVMValueRef cg_train_wino_grad_input(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind) {
  twplan p;
  if (!tw_take(c, n, &p)) return cg_fail(c, n, "internal error: the training Winograd route does not take this conv");
  p.so = 9, p.si = p.cout * 9, p.sy = -3, p.sx = -1, p.w0 = 8;
  LLVMValueRef args[5];
  LLVMValueRef f = cg_train_kbegin(c, fn_name, 2, args);
  tw_emit(c, &p, args[0], args[1], NULL, args[2], args[3], args[4]);
  cg_kernel_end(c);
  *kind = tw_kind(c, "conv2d_grad_input_wino2", &p);
  return f;
}
