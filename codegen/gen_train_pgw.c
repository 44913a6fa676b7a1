/* gen_train_pgw.c — groups-1 conv2d_grad_weight of compiled training as a GEMM over pixels:
 * dw[co][k] = sum_{n, oy, ox} dy[n, co, oy, ox] * xcol[n, oy, ox][k] with k = (ci, ky, kx),
 * xcol the im2col of x.  Work items are (block of input channels: the columns ci*taps..,
 * block of output channels), split over the threads in contiguous ranges.  Per item and pixel
 * chunk (whole output rows of one image, sized so that a register tile's column slice stays in
 * L1) the thread packs the chunk's xcol transposed, [pixel][column] (zero taps at the borders,
 * columns padded to the vector width), then runs every register tile of R output channels x
 * NV vectors of columns over the chunk's pixels: per pixel NV vector loads from the packed
 * chunk, R broadcasts of dy (read in place: a dy row is contiguous over the chunk's pixels) and
 * R*NV FMAs, no horizontal sums.  The tile's accumulators start from dw (zeroed when the item
 * starts) and go back to it after each chunk, so every weight is one running sum over the
 * pixels in (n, oy, ox) order: the same for any thread count (bitwise).  dw partials live in
 * memory between chunks, which --enable-half-partials would round; that option keeps the
 * direct kernels of gen_train_conv.c (whose rounding points the interpreter mirrors). */
#include "codegen/gen_train_pgw.h"

#include <stdlib.h>

#include "codegen/cg_budget.h"
#include "codegen/gen_train.h"

#define PGW_MAX_BUF (1 << 20) /* packed chunk bytes beyond this: the direct kernel */

typedef struct pgw {
  int64_t n, ci, ih, iw, co, oh, ow, kh, kw, sh, sw, pt, pl, dh, dw, taps, ck;
  int V, R, NV;
  int64_t rh, nrch;   /* output rows per chunk, chunks per image */
  int64_t cib, nci;   /* input channels per item (columns cib*taps), their blocks */
  int64_t cob, nco;   /* output channels per item, their blocks */
  int64_t ldc_max;    /* packed row length of the widest item (floats) */
  LLVMValueRef dy, x, dwt, buf;
} pgw;

/* Packed row length of an item with cols columns: whole vectors. */
static int64_t pgw_ldc(const pgw *k, int64_t cols) { return (cols + k->V - 1) / k->V * k->V; }

/* Plans the node; 0 when this path does not take it (grouped, --enable-half-partials, a target
 * without vectors, a packed chunk over PGW_MAX_BUF). */
static int pgw_plan(cg_ctx *c, const ir_node *n, pgw *k) {
  const ir_conv2d_attr *at = &n->attr.conv2d_grad_weight.conv;
  if (at->groups != 1 || c->g->half_partials || c->target->vec_f32 < 4) return 0;
  const ir_shape *ds = &c->g->values[n->in[0]].shape, *xs = &c->g->values[n->in[1]].shape;
  *k = (pgw){xs->dim[0], xs->dim[1], xs->dim[2], xs->dim[3], ds->dim[1], ds->dim[2], ds->dim[3], at->kernel[0],
             at->kernel[1], at->stride[0], at->stride[1], at->pad[0], at->pad[1], at->dilation[0], at->dilation[1],
             (int64_t)at->kernel[0] * at->kernel[1], 0, c->target->vec_f32, 0, 0, 0, 0, 0, 0, 0, 0, 0,
             NULL, NULL, NULL, NULL};
  k->ck = k->ci * k->taps;
  int budget = cg_acc_budget(c->target);
  k->NV = 3;
  k->R = budget / k->NV;
  /* chunk: the pixels whose NV-vector column slice fills ~16 KB of L1, whole rows */
  int64_t px = 16384 / ((int64_t)k->NV * k->V * 4);
  k->rh = px / k->ow < 1 ? 1 : px / k->ow > k->oh ? k->oh : px / k->ow;
  k->nrch = (k->oh + k->rh - 1) / k->rh;
  int64_t P = k->rh * k->ow;
  /* column blocks: the packed chunk within half the L2 tile budget; at least 4 of them (down
   * to ~32 columns) and an even number under 8, so that 2 threads get equal shares; equal
   * blocks of whole channels, rounded up to whole vectors of columns */
  const cg_priv *pv = c->priv;
  int64_t l2 = cg_shard_tile_budget(c->target, pv ? pv->amp : NULL, pv ? pv->shard : 0);
  int64_t cols = (l2 / 2) / (P * 4), cibmax = cols / k->taps < 1 ? 1 : cols / k->taps;
  int64_t nci = (k->ci + cibmax - 1) / cibmax, minc = (32 + k->taps - 1) / k->taps;
  if (nci < 4) nci = (k->ci + minc - 1) / minc < 4 ? (k->ci + minc - 1) / minc : 4;
  if (nci > 1 && nci < 8 && nci % 2) nci++;
  if (nci > k->ci) nci = k->ci;
  int64_t cib = (k->ci + nci - 1) / nci, g = k->taps, v = k->V;
  while (v) { /* g = gcd(taps, V) */
    int64_t t = g % v;
    g = v, v = t;
  }
  int64_t unit = k->V / g; /* channels per whole vector of columns */
  if (cib > unit && cib % unit && cib + unit - cib % unit < k->ci) cib += unit - cib % unit;
  k->cib = cib;
  k->nci = (k->ci + cib - 1) / cib;
  k->nco = 1, k->cob = k->co;
  if (k->nci < 4) {
    int64_t nco = (4 + k->nci - 1) / k->nci, tiles = (k->co + k->R - 1) / k->R;
    if (nco > tiles) nco = tiles;
    k->cob = ((k->co + nco - 1) / nco + k->R - 1) / k->R * k->R;
    k->nco = (k->co + k->cob - 1) / k->cob;
  }
  k->ldc_max = pgw_ldc(k, k->cib * k->taps);
  return P * k->ldc_max * 4 <= PGW_MAX_BUF;
}

/* Stores 0 to buf[dst + j*ldc] for j in [lo, hi) (compile-time bounds). */
static void pgw_zeros(cg_ctx *c, LLVMValueRef buf, LLVMValueRef dst, int64_t ldc, int64_t lo, int64_t hi) {
  if (lo >= hi) return;
  cg_loop Z;
  LLVMValueRef j = cg_loop_begin(c, &Z, cg_i64(c, lo), cg_i64(c, hi), cg_i64(c, 1), "pz");
  cg_store_f32(c, cg_f32(c, 0.0f), buf, cg_tadd(c, dst, cg_tmul(c, j, ldc)));
  cg_loop_end(c, &Z);
}

/* Packs xcol of image nb, output rows [oy0, oy0 + rows) and input channels [ci0, ci0 + cib)
 * into buf[(rl*OW + ox)*ldc + cl*taps + ky*KW + kx]; pad columns [cib*taps, ldc) get zeros. */
static void pgw_pack(cg_ctx *c, const pgw *k, LLVMValueRef nb, LLVMValueRef oy0, LLVMValueRef rows, LLVMValueRef ci0,
                     int64_t cib, int64_t ldc) {
  cg_loop CL, RL, X;
  LLVMValueRef cl = cg_loop_begin(c, &CL, cg_i64(c, 0), cg_i64(c, cib), cg_i64(c, 1), "pcl");
  LLVMValueRef xplane = cg_tmul(c, cg_tadd(c, cg_tmul(c, nb, k->ci), cg_tadd(c, ci0, cl)), k->ih * k->iw);
  for (int64_t ky = 0; ky < k->kh; ky++)
    for (int64_t kx = 0; kx < k->kw; kx++) {
      int64_t off = kx * k->dw - k->pl, lo = 0, hi = k->ow; /* ix = ox*sw + off */
      while (lo < hi && lo * k->sw + off < 0) lo++;
      while (hi > lo && (hi - 1) * k->sw + off >= k->iw) hi--;
      LLVMValueRef col = cg_taddk(c, cg_tmul(c, cl, k->taps), ky * k->kw + kx);
      LLVMValueRef rl = cg_loop_begin(c, &RL, cg_i64(c, 0), rows, cg_i64(c, 1), "prl");
      LLVMValueRef iy = cg_taddk(c, cg_tmul(c, cg_tadd(c, oy0, rl), k->sh), ky * k->dh - k->pt);
      LLVMValueRef dst = cg_tadd(c, cg_tmul(c, rl, k->ow * ldc), col);
      cg_if f;
      cg_if_begin(c, &f, LLVMBuildICmp(c->b, LLVMIntULT, iy, cg_i64(c, k->ih), "")); /* 0 <= iy < ih */
      pgw_zeros(c, k->buf, dst, ldc, 0, lo);
      if (lo < hi) {
        LLVMValueRef src = cg_taddk(c, cg_tadd(c, xplane, cg_tmul(c, iy, k->iw)), off);
        LLVMValueRef ox = cg_loop_begin(c, &X, cg_i64(c, lo), cg_i64(c, hi), cg_i64(c, 1), "pox");
        cg_store_f32(c, cg_load_f32(c, k->x, cg_tadd(c, src, cg_tmul(c, ox, k->sw))), k->buf, cg_tadd(c, dst, cg_tmul(c, ox, ldc)));
        cg_loop_end(c, &X);
      }
      pgw_zeros(c, k->buf, dst, ldc, hi, k->ow);
      cg_if_else(c, &f);
      pgw_zeros(c, k->buf, dst, ldc, 0, k->ow);
      cg_if_end(c, &f);
      cg_loop_end(c, &RL);
    }
  cg_loop_end(c, &CL);
  int64_t cols = cib * k->taps;
  if (cols < ldc) {
    LLVMValueRef np = cg_tmul(c, rows, k->ow);
    cg_loop P;
    LLVMValueRef p = cg_loop_begin(c, &P, cg_i64(c, 0), np, cg_i64(c, 1), "ppad");
    for (int64_t j = cols; j < ldc; j++) cg_store_f32(c, cg_f32(c, 0.0f), k->buf, cg_taddk(c, cg_tmul(c, p, ldc), j));
    cg_loop_end(c, &P);
  }
}

/* One register tile: rr output channels x nv column vectors (the last one's lanes lastm) over
 * the chunk's np pixels.  dbase: dy index of (nb, co0, first pixel); wbase: dw index of (co0,
 * first column); bcol: the tile's first column in the packed chunk. */
static void pgw_tile(cg_ctx *c, const pgw *k, LLVMValueRef dbase, LLVMValueRef np, LLVMValueRef wbase, LLVMValueRef bcol,
                     int64_t ldc, int rr, int nv, unsigned lastm) {
  int V = k->V;
  int64_t ohw = k->oh * k->ow;
  unsigned full = cg_lanes(V, V);
  LLVMTypeRef vt = cg_vtype(c, V);
  LLVMValueRef reg[64], cur[64], xv[8];
  for (int r = 0; r < rr; r++)
    for (int v = 0; v < nv; v++) {
      reg[r * nv + v] = cg_entry_alloca(c, vt, "gwa");
      LLVMValueRef wi = cg_taddk(c, wbase, (int64_t)r * k->ck + (int64_t)v * V);
      LLVMBuildStore(c->b, cg_tload(c, k->dwt, wi, 1, v == nv - 1 ? lastm : full, V), reg[r * nv + v]);
    }
  cg_loop L;
  LLVMValueRef p = cg_loop_begin(c, &L, cg_i64(c, 0), np, cg_i64(c, 1), "gp");
  for (int i = 0; i < rr * nv; i++) cur[i] = LLVMBuildLoad2(c->b, vt, reg[i], "");
  LLVMValueRef xrow = cg_tadd(c, cg_tmul(c, p, ldc), bcol);
  for (int v = 0; v < nv; v++) xv[v] = cg_load_v(c, k->buf, cg_taddk(c, xrow, (int64_t)v * V), V);
  LLVMValueRef drow = cg_tadd(c, dbase, p);
  for (int r = 0; r < rr; r++) {
    LLVMValueRef b = cg_splat(c, cg_load_f32(c, k->dy, cg_taddk(c, drow, (int64_t)r * ohw)), V);
    for (int v = 0; v < nv; v++) cur[r * nv + v] = cg_fma(c, b, xv[v], cur[r * nv + v]);
  }
  for (int i = 0; i < rr * nv; i++) LLVMBuildStore(c->b, cur[i], reg[i]);
  cg_loop_end(c, &L);
  for (int r = 0; r < rr; r++)
    for (int v = 0; v < nv; v++) {
      LLVMValueRef wi = cg_taddk(c, wbase, (int64_t)r * k->ck + (int64_t)v * V);
      cg_tstore(c, LLVMBuildLoad2(c->b, vt, reg[r * nv + v], ""), k->dwt, wi, v == nv - 1 ? lastm : full, V);
    }
}

/* Every tile of column vectors [kv0, kv0 + nv) over the item's cob output channels. */
static void pgw_cols(cg_ctx *c, const pgw *k, LLVMValueRef dbase, LLVMValueRef np, LLVMValueRef wbase, LLVMValueRef kv0,
                     int64_t ldc, int64_t cob, int nv, unsigned lastm) {
  int64_t nct = (cob + k->R - 1) / k->R;
  int rl = (int)(cob - (nct - 1) * k->R);
  LLVMValueRef bcol = cg_tmul(c, kv0, k->V), wb = cg_tadd(c, wbase, bcol);
  if (nct > 1) {
    cg_loop T;
    LLVMValueRef t = cg_loop_begin(c, &T, cg_i64(c, 0), cg_i64(c, nct - 1), cg_i64(c, 1), "gct");
    LLVMValueRef r0 = cg_tmul(c, t, k->R);
    pgw_tile(c, k, cg_tadd(c, dbase, cg_tmul(c, r0, k->oh * k->ow)), np, cg_tadd(c, wb, cg_tmul(c, r0, k->ck)), bcol, ldc,
             k->R, nv, lastm);
    cg_loop_end(c, &T);
  }
  int64_t r0 = (nct - 1) * k->R;
  pgw_tile(c, k, cg_taddk(c, dbase, r0 * k->oh * k->ow), np, cg_taddk(c, wb, r0 * k->ck), bcol, ldc, rl, nv, lastm);
}

/* One work item: output channels [co0, co0 + cob) x input channels [ci0, ci0 + cib). */
static void pgw_item(cg_ctx *c, const pgw *k, LLVMValueRef co0, LLVMValueRef ci0, int64_t cib, int64_t cob) {
  int V = k->V;
  int64_t cols = cib * k->taps, ldc = pgw_ldc(k, cols), nvk = ldc / V;
  unsigned lastm = cg_lanes((int)(cols - (nvk - 1) * V), V), full = cg_lanes(V, V);
  LLVMValueRef wbase = cg_tadd(c, cg_tmul(c, co0, k->ck), cg_tmul(c, ci0, k->taps));
  cg_loop Z, NB, CH;
  LLVMValueRef z = cg_loop_begin(c, &Z, cg_i64(c, 0), cg_i64(c, cob), cg_i64(c, 1), "gz");
  for (int64_t v = 0; v < nvk; v++)
    cg_tstore(c, cg_fzero(c, V), k->dwt, cg_taddk(c, cg_tadd(c, wbase, cg_tmul(c, z, k->ck)), v * V), v == nvk - 1 ? lastm : full, V);
  cg_loop_end(c, &Z);
  LLVMValueRef nb = cg_loop_begin(c, &NB, cg_i64(c, 0), cg_i64(c, k->n), cg_i64(c, 1), "gn");
  LLVMValueRef ch = cg_loop_begin(c, &CH, cg_i64(c, 0), cg_i64(c, k->nrch), cg_i64(c, 1), "gch");
  LLVMValueRef oy0 = cg_tmul(c, ch, k->rh);
  LLVMValueRef rows = cg_min64(c, cg_i64(c, k->rh), LLVMBuildSub(c->b, cg_i64(c, k->oh), oy0, ""));
  pgw_pack(c, k, nb, oy0, rows, ci0, cib, ldc);
  LLVMValueRef np = cg_tmul(c, rows, k->ow);
  LLVMValueRef dbase = cg_tadd(c, cg_tmul(c, cg_tadd(c, cg_tmul(c, nb, k->co), co0), k->oh * k->ow), cg_tmul(c, oy0, k->ow));
  int64_t nkt = (nvk + k->NV - 1) / k->NV;
  int nvl = (int)(nvk - (nkt - 1) * k->NV);
  if (nkt > 1) {
    cg_loop T;
    LLVMValueRef t = cg_loop_begin(c, &T, cg_i64(c, 0), cg_i64(c, nkt - 1), cg_i64(c, 1), "gkt");
    pgw_cols(c, k, dbase, np, wbase, cg_tmul(c, t, k->NV), ldc, cob, k->NV, full);
    cg_loop_end(c, &T);
  }
  pgw_cols(c, k, dbase, np, wbase, cg_i64(c, (nkt - 1) * k->NV), ldc, cob, nvl, lastm);
  cg_loop_end(c, &CH);
  cg_loop_end(c, &NB);
}

/* Items (co block, ci block), ci blocks fastest, contiguous ranges over the threads; the last
 * block of each kind may be narrower (its own static body). */
static void pgw_emit(cg_ctx *c, const pgw *k, LLVMValueRef tid, LLVMValueRef nth) {
  int64_t cil = k->ci - (k->nci - 1) * k->cib, col = k->co - (k->nco - 1) * k->cob;
  LLVMValueRef lo, hi;
  cg_thread_range(c, cg_i64(c, k->nci * k->nco), tid, nth, &lo, &hi);
  cg_loop L;
  LLVMValueRef it = cg_loop_begin(c, &L, lo, hi, cg_i64(c, 1), "item");
  LLVMValueRef cb = LLVMBuildSRem(c->b, it, cg_i64(c, k->nci), "cb"), ob = LLVMBuildSDiv(c->b, it, cg_i64(c, k->nci), "ob");
  LLVMValueRef ci0 = cg_tmul(c, cb, k->cib), co0 = cg_tmul(c, ob, k->cob);
  LLVMValueRef lastc = LLVMBuildICmp(c->b, LLVMIntEQ, cb, cg_i64(c, k->nci - 1), "");
  LLVMValueRef lasto = LLVMBuildICmp(c->b, LLVMIntEQ, ob, cg_i64(c, k->nco - 1), "");
  for (int v = 0; v < 4; v++) { /* (last ci block?, last co block?) */
    if ((v & 1 && cil == k->cib) || (v & 2 && col == k->cob)) continue; /* same as a variant before */
    LLVMValueRef cw = cil == k->cib ? LLVMConstInt(c->t_i1, 1, 0) : LLVMBuildICmp(c->b, LLVMIntEQ, lastc, LLVMConstInt(c->t_i1, v & 1, 0), "");
    LLVMValueRef ow = col == k->cob ? LLVMConstInt(c->t_i1, 1, 0) : LLVMBuildICmp(c->b, LLVMIntEQ, lasto, LLVMConstInt(c->t_i1, (v & 2) != 0, 0), "");
    cg_if f;
    cg_if_begin(c, &f, LLVMBuildAnd(c->b, cw, ow, ""));
    pgw_item(c, k, co0, ci0, v & 1 ? cil : k->cib, v & 2 ? col : k->cob);
    cg_if_end(c, &f);
  }
  cg_loop_end(c, &L);
}

LLVMValueRef cg_train_pgw(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind) {
  pgw k;
  if (getenv("CNNC_TRAIN_NO_PGW") || !pgw_plan(c, n, &k)) return NULL;
  LLVMValueRef a[5];
  LLVMValueRef f = cg_train_kbegin(c, fn_name, 2, a);
  k.dy = a[0], k.x = a[1], k.dwt = a[2];
  int64_t P = k.rh * k.ow;
  k.buf = cg_entry_alloca(c, LLVMArrayType2(cg_vtype(c, k.V), (uint64_t)(P * k.ldc_max / k.V)), "gwpack");
  LLVMSetAlignment(k.buf, 64);
  pgw_emit(c, &k, a[3], a[4]);
  cg_kernel_end(c);
  *kind = cg_kind(c, "conv2d_grad_weight_pk", ir_fmt(c->arena, "%dx%d", k.R, k.NV * k.V));
  return f;
}
