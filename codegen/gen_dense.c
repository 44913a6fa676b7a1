/* gen_dense.c — fully connected layer as a small GEMM: out[N,M] = x[N,K] * w[M,K]^T + b.
 * Register tile of R rows x P vectors of output columns; weights packed at compile time
 * into column blocks [M/(P*V)][K][P*V] (zero padded) so the inner loop reads one aligned
 * stream; x is broadcast.  Work items are (row tile, column block) pairs. */
#include <stdlib.h>
#include <string.h>

#include "codegen/cg_internal.h"

typedef struct dense_geom { int64_t n, k, m; int R, P, V; int64_t cb, nblk; } dense_geom;

typedef struct dense_args { LLVMValueRef x, out, wp, bp, row0, blk; } dense_args;

/* One R' x P tile; ncols valid columns (< cb only in the last block). */
static void dense_tile(cg_ctx *c, const dense_geom *d, const dense_args *a, int rr, int64_t ncols) {
  int V = d->V, P = d->P;
  LLVMTypeRef vt = cg_vtype(c, V);
  LLVMValueRef acc[64];
  for (int i = 0; i < rr * P; i++) {
    acc[i] = cg_entry_alloca(c, vt, "acc");
    LLVMBuildStore(c->b, cg_fzero(c, V), acc[i]);
  }
  LLVMValueRef wblk = LLVMBuildMul(c->b, a->blk, cg_i64(c, d->k * d->cb), "");
  cg_loop L;
  LLVMValueRef k = cg_loop_begin(c, &L, cg_i64(c, 0), cg_i64(c, d->k), cg_i64(c, 1), "k");
  LLVMValueRef wrow = LLVMBuildAdd(c->b, wblk, LLVMBuildMul(c->b, k, cg_i64(c, d->cb), ""), "");
  LLVMValueRef wv[8];
  for (int p = 0; p < P; p++) wv[p] = cg_load_v(c, a->wp, LLVMBuildAdd(c->b, wrow, cg_i64(c, p * V), ""), V);
  for (int r = 0; r < rr; r++) {
    LLVMValueRef xi = LLVMBuildAdd(c->b, LLVMBuildMul(c->b, LLVMBuildAdd(c->b, a->row0, cg_i64(c, r), ""),
                                                      cg_i64(c, d->k), ""), k, "");
    LLVMValueRef xb = cg_splat(c, cg_load_f32(c, a->x, xi), V);
    for (int p = 0; p < P; p++) {
      LLVMValueRef cur = LLVMBuildLoad2(c->b, vt, acc[r * P + p], "");
      LLVMBuildStore(c->b, cg_fma(c, xb, wv[p], cur), acc[r * P + p]);
    }
  }
  cg_loop_end(c, &L);
  LLVMValueRef col0 = LLVMBuildMul(c->b, a->blk, cg_i64(c, d->cb), "col0");
  for (int r = 0; r < rr; r++) {
    LLVMValueRef orow = LLVMBuildMul(c->b, LLVMBuildAdd(c->b, a->row0, cg_i64(c, r), ""), cg_i64(c, d->m), "");
    for (int p = 0; p < P && p * V < ncols; p++) {
      LLVMValueRef cp = LLVMBuildAdd(c->b, col0, cg_i64(c, p * V), "");
      LLVMValueRef v = LLVMBuildFAdd(c->b, LLVMBuildLoad2(c->b, vt, acc[r * P + p], ""), cg_load_v(c, a->bp, cp, V), "");
      LLVMValueRef oi = LLVMBuildAdd(c->b, orow, cp, "");
      if ((p + 1) * V <= ncols) {
        cg_store_v(c, v, a->out, oi, V);
        continue;
      }
      for (int l = 0; l < V && p * V + l < ncols; l++) /* partial vector: lane stores */
        cg_store_f32(c, LLVMBuildExtractElement(c->b, v, cg_i32(c, l), ""), a->out,
                     LLVMBuildAdd(c->b, oi, cg_i64(c, l), ""));
    }
  }
}

/* Packs w [M,K] into [nblk][K][cb] and the bias into [nblk*cb] (zero padded). */
static void dense_pack(const dense_geom *d, const float *w, const float *b, float *wp, float *bp) {
  for (int64_t blk = 0; blk < d->nblk; blk++)
    for (int64_t k = 0; k < d->k; k++)
      for (int64_t j = 0; j < d->cb; j++) {
        int64_t m = blk * d->cb + j;
        wp[(blk * d->k + k) * d->cb + j] = m < d->m ? w[m * d->k + k] : 0.0f;
      }
  for (int64_t m = 0; m < d->nblk * d->cb; m++) bp[m] = m < d->m && b ? b[m] : 0.0f;
}

static dense_geom dense_geometry(cg_ctx *c, const ir_node *n) {
  const ir_shape *xs = &c->g->values[n->in[0]].shape, *ws = &c->g->values[n->in[1]].shape;
  dense_geom d = {xs->dim[0], ir_shape_numel(xs) / xs->dim[0], ws->dim[0], 1, 1, c->target->vec_f32, 0, 0};
  int budget = cg_acc_budget(c->target);
  int64_t pv = (d.m + d.V - 1) / d.V;
  d.P = pv < 3 ? (int)pv : 3;
  d.R = (int)(d.n < budget / d.P ? d.n : budget / d.P);
  if (d.R > 8) d.R = 8;
  d.cb = (int64_t)d.P * d.V;
  d.nblk = (d.m + d.cb - 1) / d.cb;
  return d;
}

/* in: x [N,K], w [M,K], optional b [M]; out [N,M]. */
LLVMValueRef cg_gen_dense(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind) {
  dense_geom d = dense_geometry(c, n);
  float *wp = malloc((size_t)(d.nblk * d.k * d.cb) * sizeof(float)), *bp = malloc((size_t)(d.nblk * d.cb) * sizeof(float));
  if (!wp || !bp) abort();
  if (!cg_plan_only(c)) dense_pack(&d, c->g->values[n->in[1]].data, n->n_in > 2 ? c->g->values[n->in[2]].data : NULL, wp, bp);
  LLVMValueRef a[4];
  LLVMValueRef f = cg_kernel_begin(c, fn_name, 1, a);
  dense_args da = {a[0], a[1], cg_blob_const(c, "dense.w", wp, (size_t)(d.nblk * d.k * d.cb) * sizeof(float)),
                   cg_blob_const(c, "dense.b", bp, (size_t)(d.nblk * d.cb) * sizeof(float)), NULL, NULL};
  free(wp);
  free(bp);
  int64_t nrt = (d.n + d.R - 1) / d.R, rrem = d.n % d.R, crem = d.m - (d.nblk - 1) * d.cb;
  LLVMValueRef lo, hi;
  cg_thread_range(c, cg_i64(c, nrt * d.nblk), a[2], a[3], &lo, &hi);
  cg_loop L;
  LLVMValueRef it = cg_loop_begin(c, &L, lo, hi, cg_i64(c, 1), "item");
  da.blk = LLVMBuildSRem(c->b, it, cg_i64(c, d.nblk), "blk");
  LLVMValueRef rt = LLVMBuildSDiv(c->b, it, cg_i64(c, d.nblk), "rt");
  da.row0 = LLVMBuildMul(c->b, rt, cg_i64(c, d.R), "row0");
  LLVMValueRef last_r = LLVMBuildICmp(c->b, LLVMIntEQ, rt, cg_i64(c, nrt - 1), "");
  LLVMValueRef last_c = LLVMBuildICmp(c->b, LLVMIntEQ, da.blk, cg_i64(c, d.nblk - 1), "");
  for (int vr = 0; vr < 2; vr++) { /* row variants: full tile, remainder rows */
    if (vr == 1 && !rrem) break;
    cg_if fr;
    if (rrem) {
      cg_if_begin(c, &fr, vr == 0 ? LLVMBuildNot(c->b, last_r, "") : last_r);
    }
    int rr = vr == 0 ? d.R : (int)rrem;
    cg_if fc;
    cg_if_begin(c, &fc, LLVMBuildNot(c->b, last_c, ""));
    dense_tile(c, &d, &da, rr, d.cb);
    cg_if_else(c, &fc);
    dense_tile(c, &d, &da, rr, crem);
    cg_if_end(c, &fc);
    if (rrem) cg_if_end(c, &fr);
  }
  cg_loop_end(c, &L);
  cg_kernel_end(c);
  char tile[32];
  snprintf(tile, sizeof tile, "%dx%d", d.R, (int)d.cb);
  *kind = cg_kind(c, "dense", tile);
  return f;
}
