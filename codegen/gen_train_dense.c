/* gen_train_dense.c — register-tiled dense kernels of compiled training (w [Out,In] read
 * through the state-buffer pointer):
 *  - forward y[n, m] = b[m] + sum_k x[n, k] w[m, k]: tiles of RN rows x RM outputs (3x3: nine
 *    accumulators and six operand vectors stay in the 16 ymm registers), both operands
 *    contiguous in k, vector accumulators over k (masked last vector), one horizontal sum
 *    per output;
 *  - grad_input dx = dy w and grad_weight dw = dy^T x share one microkernel: C[r, j] =
 *    sum_k A(r, k) B[k, j] with B and C contiguous in j: tiles of RT rows x PV vectors of j,
 *    RT broadcasts of A and PV vector loads of B per k, masked last vector of a row.
 * Work items are tiles, split in contiguous ranges over the threads; every output element is
 * computed by one item, in an order that does not depend on the thread count. */
#include "codegen/gen_train.h"

/* Tiles of rows x columns with remainders: emits body(rows, cols) under run-time tests of
 * whether the item is the last row tile / last column tile. */
typedef void (*tile_body)(cg_ctx *c, void *u, int rows, int cols_last);
static void tile_variants(cg_ctx *c, LLVMValueRef last_r, int rr_full, int rr_last, LLVMValueRef last_c, int cl_has,
                          tile_body body, void *u) {
  for (int pass_r = 0; pass_r < (rr_last != rr_full ? 2 : 1); pass_r++) {
    cg_if fr;
    if (rr_last != rr_full) {
      if (pass_r == 0) cg_if_begin(c, &fr, LLVMBuildNot(c->b, last_r, ""));
      else cg_if_else(c, &fr);
    }
    int rr = pass_r ? rr_last : rr_full;
    if (cl_has) {
      cg_if fc;
      cg_if_begin(c, &fc, LLVMBuildNot(c->b, last_c, ""));
      body(c, u, rr, 0);
      cg_if_else(c, &fc);
      body(c, u, rr, 1);
      cg_if_end(c, &fc);
    } else {
      body(c, u, rr, 0);
    }
    if (rr_last != rr_full && pass_r == 1) cg_if_end(c, &fr);
  }
}

/* ---- forward ---------------------------------------------------------------------------- */
typedef struct tdot {
  int64_t nb, k, m;
  int RN, RM, V;
  LLVMValueRef x, w, b, y, n0, m0;
} tdot;

static void dot_tile(cg_ctx *c, void *u, int rn, int rm_last) {
  tdot *d = u;
  int rm = rm_last ? (int)(d->m - (d->m - 1) / d->RM * d->RM) : d->RM, V = d->V;
  LLVMTypeRef vt = cg_vtype(c, V);
  LLVMValueRef acc[64], cur[64], xr[16], wr[16];
  for (int i = 0; i < rn * rm; i++) {
    acc[i] = cg_entry_alloca(c, vt, "acc");
    LLVMBuildStore(c->b, cg_fzero(c, V), acc[i]);
  }
  for (int i = 0; i < rn; i++) xr[i] = cg_tmul(c, cg_taddk(c, d->n0, i), d->k);
  for (int j = 0; j < rm; j++) wr[j] = cg_tmul(c, cg_taddk(c, d->m0, j), d->k);
  int64_t kv = d->k / V, tail = d->k % V;
  for (int part = 0; part < 2; part++) {
    if (part == 1 && !tail) break;
    if (part == 0 && !kv) continue;
    cg_loop K;
    LLVMValueRef kk = part == 0 ? cg_loop_begin(c, &K, cg_i64(c, 0), cg_i64(c, kv * V), cg_i64(c, V), "k") : cg_i64(c, kv * V);
    unsigned m = part == 0 ? cg_lanes(V, V) : cg_lanes((int)tail, V);
    for (int i = 0; i < rn * rm; i++) cur[i] = LLVMBuildLoad2(c->b, vt, acc[i], "");
    LLVMValueRef xv[16];
    for (int i = 0; i < rn; i++) xv[i] = cg_tload(c, d->x, cg_tadd(c, xr[i], kk), 1, m, V);
    for (int j = 0; j < rm; j++) {
      LLVMValueRef wv = cg_tload(c, d->w, cg_tadd(c, wr[j], kk), 1, m, V);
      for (int i = 0; i < rn; i++) cur[i * rm + j] = cg_fma(c, xv[i], wv, cur[i * rm + j]);
    }
    for (int i = 0; i < rn * rm; i++) LLVMBuildStore(c->b, cur[i], acc[i]);
    if (part == 0) cg_loop_end(c, &K);
  }
  for (int i = 0; i < rn; i++)
    for (int j = 0; j < rm; j++) {
      LLVMValueRef v = cg_hsum(c, LLVMBuildLoad2(c->b, vt, acc[i * rm + j], ""), V);
      if (d->b) v = LLVMBuildFAdd(c->b, v, cg_load_f32(c, d->b, cg_taddk(c, d->m0, j)), "");
      cg_store_f32(c, v, d->y, cg_taddk(c, cg_tadd(c, cg_tmul(c, cg_taddk(c, d->n0, i), d->m), d->m0), j));
    }
}

/* Forward (training): x [N,K], w [M,K][, b [M]] -> y [N,M].  Items (column tile, row tile),
 * row tiles fastest (the tile's w rows stay in cache). */
LLVMValueRef cg_train_dense_fwd(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind) {
  const ir_shape *xs = &c->g->values[n->in[0]].shape;
  tdot d = {xs->dim[0], ir_shape_numel(xs) / xs->dim[0], c->g->values[n->in[1]].shape.dim[0], 3, 3, c->target->vec_f32,
            NULL, NULL, NULL, NULL, NULL, NULL};
  if (d.RN > d.nb) d.RN = (int)d.nb;
  if (d.RM > d.m) d.RM = (int)d.m;
  int nin = n->n_in;
  LLVMValueRef a[6];
  LLVMValueRef f = cg_train_kbegin(c, fn_name, nin, a);
  d.x = a[0], d.w = a[1], d.b = nin > 2 ? a[2] : NULL, d.y = a[nin];
  int64_t tn = (d.nb + d.RN - 1) / d.RN, tm = (d.m + d.RM - 1) / d.RM;
  LLVMValueRef lo, hi;
  cg_thread_range(c, cg_i64(c, tn * tm), a[nin + 1], a[nin + 2], &lo, &hi);
  cg_loop L;
  LLVMValueRef it = cg_loop_begin(c, &L, lo, hi, cg_i64(c, 1), "item");
  LLVMValueRef ti = LLVMBuildSRem(c->b, it, cg_i64(c, tn), ""), tj = LLVMBuildSDiv(c->b, it, cg_i64(c, tn), "");
  d.n0 = cg_tmul(c, ti, d.RN), d.m0 = cg_tmul(c, tj, d.RM);
  int rn_last = (int)(d.nb - (tn - 1) * d.RN);
  tile_variants(c, LLVMBuildICmp(c->b, LLVMIntEQ, ti, cg_i64(c, tn - 1), ""), d.RN, rn_last,
                LLVMBuildICmp(c->b, LLVMIntEQ, tj, cg_i64(c, tm - 1), ""), d.m % d.RM != 0, dot_tile, &d);
  cg_loop_end(c, &L);
  cg_kernel_end(c);
  *kind = cg_kind(c, "dense_train", ir_fmt(c->arena, "%dx%d", d.RN, d.RM));
  return f;
}

/* ---- C[r, j] = sum_k A(r, k) B[k, j] ------------------------------------------------------ */
typedef struct tgemm {
  int64_t rows, k, j;        /* C [rows, j] */
  int64_t a_rs, a_ks, b_ks;  /* A(r, k) = A[r*a_rs + k*a_ks]; B(k, j) = B[k*b_ks + j] */
  int RT, PV, V;
  LLVMValueRef A, B, C, r0, j0;
} tgemm;

static void gemm_tile(cg_ctx *c, void *u, int rr, int col_last) {
  tgemm *g = u;
  int V = g->V;
  int64_t tilew = (int64_t)g->PV * V, ntj = (g->j + tilew - 1) / tilew, wlast = g->j - (ntj - 1) * tilew;
  int pv = col_last ? (int)((wlast + V - 1) / V) : g->PV;
  int lanes_last = col_last ? (int)(wlast - (int64_t)(pv - 1) * V) : V;
  LLVMTypeRef vt = cg_vtype(c, V);
  LLVMValueRef acc[64], cur[64];
  for (int i = 0; i < rr * pv; i++) {
    acc[i] = cg_entry_alloca(c, vt, "acc");
    LLVMBuildStore(c->b, cg_fzero(c, V), acc[i]);
  }
  cg_loop K;
  LLVMValueRef kk = cg_loop_begin(c, &K, cg_i64(c, 0), cg_i64(c, g->k), cg_i64(c, 1), "k");
  for (int i = 0; i < rr * pv; i++) cur[i] = LLVMBuildLoad2(c->b, vt, acc[i], "");
  LLVMValueRef brow = cg_tadd(c, cg_tmul(c, kk, g->b_ks), g->j0), bv[16];
  for (int p = 0; p < pv; p++) bv[p] = cg_tload(c, g->B, cg_taddk(c, brow, (int64_t)p * V), 1, cg_lanes(p == pv - 1 ? lanes_last : V, V), V);
  LLVMValueRef acol = cg_tadd(c, cg_tmul(c, g->r0, g->a_rs), cg_tmul(c, kk, g->a_ks));
  for (int i = 0; i < rr; i++) {
    LLVMValueRef av = cg_splat(c, cg_load_f32(c, g->A, cg_taddk(c, acol, (int64_t)i * g->a_rs)), V);
    for (int p = 0; p < pv; p++) cur[i * pv + p] = cg_fma(c, av, bv[p], cur[i * pv + p]);
  }
  for (int i = 0; i < rr * pv; i++) LLVMBuildStore(c->b, cur[i], acc[i]);
  cg_loop_end(c, &K);
  for (int i = 0; i < rr; i++) {
    LLVMValueRef crow = cg_tadd(c, cg_tmul(c, cg_taddk(c, g->r0, i), g->j), g->j0);
    for (int p = 0; p < pv; p++)
      cg_tstore(c, LLVMBuildLoad2(c->b, vt, acc[i * pv + p], ""), g->C, cg_taddk(c, crow, (int64_t)p * V),
                cg_lanes(p == pv - 1 ? lanes_last : V, V), V);
  }
}

/* Items (column tile, row tile), row tiles fastest (the B column block stays in cache). */
static void gemm_emit(cg_ctx *c, tgemm *g, LLVMValueRef tid, LLVMValueRef nth) {
  g->V = c->target->vec_f32;
  g->RT = 4, g->PV = 3;
  if (g->RT > g->rows) g->RT = (int)g->rows;
  int64_t tilew = (int64_t)g->PV * g->V;
  int64_t tr = (g->rows + g->RT - 1) / g->RT, tj = (g->j + tilew - 1) / tilew;
  LLVMValueRef lo, hi;
  cg_thread_range(c, cg_i64(c, tr * tj), tid, nth, &lo, &hi);
  cg_loop L;
  LLVMValueRef it = cg_loop_begin(c, &L, lo, hi, cg_i64(c, 1), "item");
  LLVMValueRef ti = LLVMBuildSRem(c->b, it, cg_i64(c, tr), ""), tc = LLVMBuildSDiv(c->b, it, cg_i64(c, tr), "");
  g->r0 = cg_tmul(c, ti, g->RT), g->j0 = cg_tmul(c, tc, tilew);
  tile_variants(c, LLVMBuildICmp(c->b, LLVMIntEQ, ti, cg_i64(c, tr - 1), ""), g->RT, (int)(g->rows - (tr - 1) * g->RT),
                LLVMBuildICmp(c->b, LLVMIntEQ, tc, cg_i64(c, tj - 1), ""), g->j % tilew != 0, gemm_tile, g);
  cg_loop_end(c, &L);
}

/* dy [N,O], w [O,I] -> dx [N,I] = dy w. */
LLVMValueRef cg_gen_dense_grad_input(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind) {
  const ir_shape *ws = &c->g->values[n->in[1]].shape;
  int64_t nb = c->g->values[n->in[0]].shape.dim[0], o = ws->dim[0], in = ws->dim[1];
  LLVMValueRef a[5];
  LLVMValueRef f = cg_train_kbegin(c, fn_name, 2, a);
  tgemm g = {nb, o, in, o, 1, in, 0, 0, 0, a[0], a[1], a[2], NULL, NULL};
  gemm_emit(c, &g, a[3], a[4]);
  cg_kernel_end(c);
  *kind = cg_kind(c, "dense_grad_input", ir_fmt(c->arena, "%dx%d", g.RT, g.PV * g.V));
  return f;
}

/* dy [N,O], x [N,I] -> dw [O,I] = dy^T x. */
LLVMValueRef cg_gen_dense_grad_weight(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind) {
  const ir_shape *os = &c->g->values[n->out].shape;
  int64_t nb = c->g->values[n->in[0]].shape.dim[0], o = os->dim[0], in = os->dim[1];
  LLVMValueRef a[5];
  LLVMValueRef f = cg_train_kbegin(c, fn_name, 2, a);
  tgemm g = {o, nb, in, 1, o, in, 0, 0, 0, a[0], a[1], a[2], NULL, NULL};
  gemm_emit(c, &g, a[3], a[4]);
  cg_kernel_end(c);
  *kind = cg_kind(c, "dense_grad_weight", ir_fmt(c->arena, "%dx%d", g.RT, g.PV * g.V));
  return f;
}
