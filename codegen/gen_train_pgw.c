/* gen_train_pgw.c — groups-1 conv2d_grad_weight of compiled training as a GEMM over pixels:
 * dw[co][k] = sum_{n, oy, ox} dy[n, co, oy, ox] * xcol[n, oy, ox][k] with k = (ci, ky, kx),
 * xcol the im2col of x.  Work items are (block of input channels: the columns ci*taps.., block
 * of output channels), output-channel blocks fastest, split over the threads in contiguous
 * ranges; a thread's items of one input-channel block form a run.  Per run and pixel chunk
 * (whole output rows of one image, sized so that a register tile's column slice stays in L1;
 * on maps of at most half that size whole images, the tiles going over them one after the
 * other)
 * the thread packs the chunk's xcol once, transposed, [pixel][column] (zero taps at the
 * borders, columns padded to the vector width): V x V in-register transposes of V vector loads
 * of x, masked loads at the borders.  Then every register tile of R output channels x NV
 * vectors of columns of every block of the run goes over the chunk's pixels: per pixel NV
 * vector loads from the packed chunk, R broadcasts of dy (read in place: a dy row is
 * contiguous over the chunk's pixels) and R*NV FMAs, no horizontal sums.  The tile's
 * accumulators start from dw (zeroed when the run starts) and go back to it after each chunk,
 * so every weight is one running sum over the pixels in (n, oy, ox) order: the same for any
 * thread count (bitwise).  Before its pixel loop a tile prefetches the next tile's dw rows.  dw partials live in memory between chunks, which
 * --enable-half-partials would round; that option keeps the direct kernels of
 * gen_train_conv.c (whose rounding points the interpreter mirrors). */
#include "codegen/gen_train_pgw.h"

#include <stdlib.h>

#include "codegen/cg_budget.h"

#define PGW_MAX_BUF (1 << 20) /* packed chunk bytes beyond this: the direct kernel */
#define PGW_MAX_TAPS 128      /* kernel taps (KH*KW) beyond this: the direct kernel */

typedef struct pgw {
  int64_t n, ci, ih, iw, co, oh, ow, kh, kw, sh, sw, pt, pl, dh, dw, taps, ck;
  int V, R, NV;
  int64_t rh, nrch;   /* output rows per chunk, chunks per image */
  int64_t ni, nich;   /* images per chunk (> 1: chunks of whole images), image chunks */
  int64_t cib, nci;   /* input channels per item (columns cib*taps), their blocks */
  int64_t cob, nco;   /* output channels per item, their blocks */
  int64_t ldc_max;    /* packed row length of the widest item (floats) */
  int acc;            /* accumulator registers: tiles R x NV, and budget/nv x nv for nv < NV */
  int flat;           /* 1x1 stride 1 unpadded, every chunk >= V pixels: chunks are flat x ranges */
  int prefetch;       /* the pack prefetches the next chunk's x (tune pgw_prefetch: not) */
  int dwpf;           /* a tile prefetches the next tile's dw rows (tune pgw_dwpf: not) */
  int gather;         /* stride-2 border pixels by gathers (tune pgw_gather), not masked loads + shuffle */
  LLVMValueRef dy, x, dwt, buf;
} pgw;

/* Packed row length (floats) of an item with cols columns: an odd number of whole vectors, so
 * that a tile's column slice of consecutive pixels spreads over the L1 sets (a row of 2^k
 * vectors put every pixel's slice in the same few sets: layer2's 1x1 512->128 ran at 38
 * GFLOP/s per CPU-second with rows of 128 floats). */
static int64_t pgw_ldc(const pgw *k, int64_t cols) { return ((cols + k->V - 1) / k->V | 1) * k->V; }

/* Plans the node; 0 when this path does not take it (grouped, --enable-half-partials, a target
 * without vectors or with lanes not a power of two, over PGW_MAX_TAPS taps, a packed chunk
 * over PGW_MAX_BUF). */
static int pgw_plan(cg_ctx *c, const ir_node *n, pgw *k) {
  const ir_conv2d_attr *at = &n->attr.conv2d_grad_weight.conv;
  if (at->groups != 1 || c->g->half_partials || c->target->vec_f32 < 4) return 0;
  const ir_shape *ds = &c->g->values[n->in[0]].shape, *xs = &c->g->values[n->in[1]].shape;
  *k = (pgw){xs->dim[0], xs->dim[1], xs->dim[2], xs->dim[3], ds->dim[1], ds->dim[2], ds->dim[3], at->kernel[0],
             at->kernel[1], at->stride[0], at->stride[1], at->pad[0], at->pad[1], at->dilation[0], at->dilation[1],
             (int64_t)at->kernel[0] * at->kernel[1], 0, c->target->vec_f32, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0,
             0, 0, 0, NULL, NULL, NULL, NULL};
  if (k->taps > PGW_MAX_TAPS || k->kh > PGW_MAX_TAPS || (k->V & (k->V - 1))) return 0;
  k->ck = k->ci * k->taps;
  int budget = cg_acc_budget(c->target);
  k->acc = budget;
  k->NV = 3;
  k->R = budget / k->NV;
  /* chunk: the pixels whose NV-vector column slice fills ~16 KB of L1, whole rows */
  int64_t px = 16384 / ((int64_t)k->NV * k->V * 4);
  /* tune pgw_chunk_px=N at compile time: chunks of ~N pixels (for measurements; the same sums) */
  if (cg_tune(c)->pgw_chunk_px > 0) px = cg_tune(c)->pgw_chunk_px;
  k->rh = px / k->ow < 1 ? 1 : px / k->ow > k->oh ? k->oh : px / k->ow;
  k->nrch = (k->oh + k->rh - 1) / k->rh;
  if (!cg_tune(c)->pgw_uneven_rows) { /* as many chunks, of equal rows (14 rows: 7 + 7, not 12 + 2) */
    k->rh = (k->oh + k->nrch - 1) / k->nrch;
    k->nrch = (k->oh + k->rh - 1) / k->rh;
  }
  /* maps of at most half a chunk (layer4's 7x7): chunks of whole images, as many of equal count
   * (16 images by 3: 6 chunks, the last of 1), so that the tiles' accumulators go back to dw once
   * per ~px pixels instead of once per image (tune pgw_one_image: one image per chunk) */
  k->ni = 1, k->nich = k->n;
  if (k->nrch == 1 && px / (k->oh * k->ow) >= 2 && k->n > 1 && !cg_tune(c)->pgw_one_image) {
    int64_t ni = px / (k->oh * k->ow);
    k->nich = (k->n + ni - 1) / ni;
    k->ni = (k->n + k->nich - 1) / k->nich;
    k->nich = (k->n + k->ni - 1) / k->ni;
  }
  int64_t P = k->ni * k->rh * k->ow;
  /* column blocks: the packed chunk within half the L2 tile budget; at least 2 of them (down
   * to ~32 columns; tune pgw_minblk=N: N, the first round's 4 read dy twice as often) and an
   * even number under 8, so that 2 threads get equal shares; equal blocks of whole channels,
   * rounded up to whole vectors of columns */
  const cg_priv *pv = c->priv;
  int64_t l2 = cg_shard_tile_budget(c->target, pv ? pv->amp : NULL, pv ? pv->shard : 0);
  int64_t cols = (l2 / 2) / (P * 4), cibmax = cols / k->taps < 1 ? 1 : cols / k->taps;
  int64_t nci = (k->ci + cibmax - 1) / cibmax, minc = (32 + k->taps - 1) / k->taps;
  /* every input-channel block reads all of dy again, every thread packing a block all its x:
   * where dy is the larger (1x1 expansions) the threads share output-channel blocks instead */
  int dy_larger = cg_tune(c)->pgw_cisplit ? 0 : k->co * k->oh * k->ow > k->ci * k->ih * k->iw;
  int64_t minb = cg_tune(c)->pgw_minblk;
  if (nci < minb && !dy_larger) nci = (k->ci + minc - 1) / minc < minb ? (k->ci + minc - 1) / minc : minb;
  if (nci > 1 && nci < 8 && nci % 2 && !dy_larger) nci++;
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
  k->prefetch = cg_tune(c)->pgw_prefetch;
  k->dwpf = cg_tune(c)->pgw_dwpf;
  k->gather = cg_tune(c)->pgw_gather;
  int64_t rlast = k->oh - (k->nrch - 1) * k->rh;
  k->flat = k->kh == 1 && k->kw == 1 && k->sh == 1 && k->sw == 1 && k->pt == 0 && k->pl == 0 && k->oh == k->ih &&
            k->ow == k->iw && (rlast < k->rh ? rlast : k->rh) * k->ow >= k->V;
  return P * k->ldc_max * 4 <= PGW_MAX_BUF;
}

/* ---- the transposed pack: V columns x V pixels per in-register transpose (cg_transpose_v) --- */

/* Output pixels ox of a row whose tap kx reads inside the row: [*lo, *hi). */
static void pgw_xrange(const pgw *k, int64_t kx, int64_t *lo, int64_t *hi) {
  int64_t off = kx * k->dw - k->pl;
  *lo = 0, *hi = k->ow;
  while (*lo < *hi && *lo * k->sw + off < 0) ++*lo;
  while (*hi > *lo && (*hi - 1) * k->sw + off >= k->iw) --*hi;
}

/* v (any scalar type) in V lanes. */
static LLVMValueRef pgw_splat(cg_ctx *c, int V, LLVMValueRef v, const char *name) {
  LLVMValueRef z[64];
  for (int i = 0; i < V; i++) z[i] = cg_i32(c, 0);
  LLVMValueRef one = LLVMBuildInsertElement(c->b, LLVMGetPoison(LLVMVectorType(LLVMTypeOf(v), (unsigned)V)), v, cg_i32(c, 0), "");
  return LLVMBuildShuffleVector(c->b, one, LLVMGetPoison(LLVMTypeOf(one)), LLVMConstVector(z, (unsigned)V), name);
}

/* Stride 2 with mask: cg_load_strided's two vector loads [idx, idx + V), [idx + V - 1, ..) as
 * masked loads whose element masks are the pixel mask spread to the even elements each keeps
 * (odd ones off), then its even-lane shuffle: the gather's values (masked-out pixels 0), with no
 * element read that the gather would not read.  16-lane gathers are two vgatherqps each, and
 * every 14- and 7-wide row (layer3/layer4's stride-2 convs) packs through this path at V = 16. */
static LLVMValueRef pgw_xload_s2(cg_ctx *c, const pgw *k, LLVMValueRef idx, LLVMValueRef mask) {
  int V = k->V;
  LLVMValueRef ml[64], mh[64], off = LLVMConstNull(LLVMVectorType(c->t_i1, (unsigned)V)), half[2];
  int sel[64];
  for (int h = 0; h < 2; h++) {
    for (int e = 0; e < V; e++) { /* element e of load h is x[idx + h*(V-1) + e]: pixel a/2 if a even */
      int a = h * (V - 1) + e, take = a % 2 == 0 && (h == 0 ? a < V : a >= V);
      (h ? mh : ml)[e] = cg_i32(c, take ? a / 2 : V); /* lane V of the pair: off */
    }
    LLVMValueRef em = LLVMBuildShuffleVector(c->b, mask, off, LLVMConstVector(h ? mh : ml, (unsigned)V), "");
    LLVMValueRef i = h ? cg_taddk(c, idx, V - 1) : idx;
    LLVMTypeRef ov[2] = {cg_vtype(c, V), c->t_ptr};
    LLVMValueRef args[4] = {LLVMBuildGEP2(c->b, c->t_f32, k->x, &i, 1, ""), cg_i32(c, 4), em, cg_fzero(c, V)};
    half[h] = cg_intrinsic(c, "llvm.masked.load", ov, 2, args, 4);
  }
  for (int l = 0; l < V; l++) sel[l] = 2 * l < V ? 2 * l : 2 * l + 1;
  LLVMValueRef sc[64];
  for (int l = 0; l < V; l++) sc[l] = cg_i32(c, sel[l]);
  return LLVMBuildShuffleVector(c->b, half[0], half[1], LLVMConstVector(sc, (unsigned)V), "even");
}

/* V pixels of x at idx, idx + sw, ..: a plain (strided) load, or with mask (per lane, <V x i1>)
 * a masked load / gather that reads no masked-out lane (those are 0). */
static LLVMValueRef pgw_xload(cg_ctx *c, const pgw *k, LLVMValueRef idx, LLVMValueRef mask) {
  int V = k->V;
  if (!mask) return cg_load_strided(c, k->x, idx, (int)k->sw, V);
  LLVMTypeRef vt = cg_vtype(c, V);
  if (k->sw == 1) {
    LLVMTypeRef ov[2] = {vt, c->t_ptr};
    LLVMValueRef args[4] = {LLVMBuildGEP2(c->b, c->t_f32, k->x, &idx, 1, ""), cg_i32(c, 4), mask, cg_fzero(c, V)};
    return cg_intrinsic(c, "llvm.masked.load", ov, 2, args, 4);
  }
  if (k->sw == 2 && !k->gather) return pgw_xload_s2(c, k, idx, mask);
  LLVMValueRef lane[64];
  for (int l = 0; l < V; l++) lane[l] = LLVMConstInt(c->t_i64, (unsigned long long)(l * k->sw), 0);
  LLVMValueRef vi = LLVMBuildAdd(c->b, pgw_splat(c, V, idx, ""), LLVMConstVector(lane, (unsigned)V), "");
  LLVMTypeRef ov[2] = {vt, LLVMVectorType(c->t_ptr, (unsigned)V)};
  LLVMValueRef args[4] = {LLVMBuildGEP2(c->b, c->t_f32, k->x, &vi, 1, ""), cg_i32(c, 4), mask, cg_fzero(c, V)};
  return cg_intrinsic(c, "llvm.masked.gather", ov, 2, args, 4);
}

/* Prefetch (to L2) of x index idx + pfd: the same place of the thread's next chunk. */
static void pgw_prefetch(cg_ctx *c, const pgw *k, LLVMValueRef idx, LLVMValueRef pfd) {
  LLVMValueRef i = cg_tadd(c, idx, pfd);
  LLVMValueRef args[4] = {LLVMBuildGEP2(c->b, c->t_f32, k->x, &i, 1, ""), cg_i32(c, 0), cg_i32(c, 2), cg_i32(c, 1)};
  cg_intrinsic(c, "llvm.prefetch", &c->t_ptr, 1, args, 4);
}

/* One pack block: nch channels' columns (vector g holds columns g*V.., lanes past nch*taps 0)
 * for np (<= V) pixels.  tapx[t]: x index of the block's first pixel for tap t of the block's
 * first channel; mask[t]: its lanes (NULL: all).  Pixel p goes to buf[dst + p*ldc + g*V].
 * pfd (NULL: none): x offset of the thread's next chunk, prefetched for the first tap of every
 * kernel row (the other taps read the same lines); in border blocks too (14- and 7-wide rows
 * have no other), where a prefetch may name a line outside x (prefetches do not fault). */
static void pgw_vblock(cg_ctx *c, const pgw *k, LLVMValueRef *tapx, LLVMValueRef *mask, LLVMValueRef dst, int64_t ldc, int nch,
                       int np, LLVMValueRef pfd) {
  int V = k->V;
  int64_t cols = nch * k->taps, ihw = k->ih * k->iw;
  LLVMValueRef a[64], t[64];
  for (int64_t g = 0; g * V < cols; g++) {
    for (int l = 0; l < V; l++) {
      int64_t j = g * V + l, tap = j % k->taps;
      if (j >= cols) {
        a[l] = cg_fzero(c, V);
        continue;
      }
      LLVMValueRef xi = cg_taddk(c, tapx[tap], j / k->taps * ihw);
      a[l] = pgw_xload(c, k, xi, mask ? mask[tap] : NULL);
      if (pfd && tap % k->kw == 0) pgw_prefetch(c, k, xi, pfd);
    }
    cg_transpose_v(c, V, V, a, t); /* cg_util.c */
    for (int p = 0; p < np; p++) cg_store_v(c, t[p], k->buf, cg_taddk(c, dst, p * ldc + g * V), V);
  }
}

/* Every channel of the item for one block of np pixels: whole groups of V channels in a loop,
 * then the remainder.  tap0[t]: x index of channel ci0's pixel for tap t; dst: buf index of
 * the block's first pixel. */
static void pgw_vchans(cg_ctx *c, const pgw *k, LLVMValueRef *tap0, LLVMValueRef *mask, LLVMValueRef dst, int64_t cib, int64_t ldc,
                       int np, LLVMValueRef pfd) {
  int V = k->V;
  int64_t ng = cib / V, rem = cib % V, ihw = k->ih * k->iw;
  LLVMValueRef tx[PGW_MAX_TAPS];
  if (ng > 0) {
    cg_loop G;
    LLVMValueRef gi = cg_loop_begin(c, &G, cg_i64(c, 0), cg_i64(c, ng), cg_i64(c, 1), "pkg");
    LLVMValueRef xo = cg_tmul(c, gi, V * ihw);
    for (int64_t t = 0; t < k->taps; t++) tx[t] = cg_tadd(c, tap0[t], xo);
    pgw_vblock(c, k, tx, mask, cg_tadd(c, dst, cg_tmul(c, gi, V * k->taps)), ldc, V, np, pfd);
    cg_loop_end(c, &G);
  }
  if (rem) {
    for (int64_t t = 0; t < k->taps; t++) tx[t] = cg_taddk(c, tap0[t], ng * V * ihw);
    pgw_vblock(c, k, tx, mask, cg_taddk(c, dst, ng * V * k->taps), ldc, (int)rem, np, pfd);
  }
}

/* Flat chunks (1x1, stride 1, unpadded: xcol is x): np >= V pixels from x index src in blocks
 * of V, the last block moved back to end at np (it rewrites equal values). */
static void pgw_pack_flat(cg_ctx *c, const pgw *k, LLVMValueRef src, LLVMValueRef np, int64_t cib, int64_t ldc, LLVMValueRef pfd,
                          LLVMValueRef dst0) {
  int V = k->V;
  cg_loop B;
  LLVMValueRef nb = LLVMBuildUDiv(c->b, cg_taddk(c, np, V - 1), cg_i64(c, V), "");
  LLVMValueRef b = cg_loop_begin(c, &B, cg_i64(c, 0), nb, cg_i64(c, 1), "pkb");
  LLVMValueRef p0 = cg_min64(c, cg_tmul(c, b, V), cg_taddk(c, np, -V)), tap0 = cg_tadd(c, src, p0);
  pgw_vchans(c, k, &tap0, NULL, cg_tadd(c, dst0, cg_tmul(c, p0, ldc)), cib, ldc, V, pfd);
  cg_loop_end(c, &B);
}

/* Lane masks of the V pixels from ox0 per tap: the tap's row is in x (rowok[ky]) and the pixel
 * in [lo, hi) of its kx (hi <= OW: lanes past a row of OW < V pixels are off too). */
static void pgw_masks(cg_ctx *c, const pgw *k, LLVMValueRef ox0, LLVMValueRef *rowok, LLVMValueRef *mask) {
  int V = k->V;
  LLVMValueRef lane[64];
  for (int l = 0; l < V; l++) lane[l] = cg_i32(c, l);
  LLVMValueRef ox = LLVMBuildAdd(c->b, pgw_splat(c, V, LLVMBuildTrunc(c->b, ox0, c->t_i32, ""), ""),
                                 LLVMConstVector(lane, (unsigned)V), "");
  for (int64_t kx = 0; kx < k->kw; kx++) {
    int64_t lo, hi;
    pgw_xrange(k, kx, &lo, &hi);
    LLVMValueRef in = LLVMBuildAnd(c->b, LLVMBuildICmp(c->b, LLVMIntSGE, ox, pgw_splat(c, V, cg_i32(c, (int32_t)lo), ""), ""),
                                   LLVMBuildICmp(c->b, LLVMIntSLT, ox, pgw_splat(c, V, cg_i32(c, (int32_t)hi), ""), ""), "");
    for (int64_t ky = 0; ky < k->kh; ky++)
      mask[ky * k->kw + kx] = LLVMBuildAnd(c->b, in, pgw_splat(c, V, rowok[ky], ""), "");
  }
}

/* Packs xcol of image nb, output rows [oy0, oy0 + rows) and input channels [ci0, ci0 + cib)
 * into buf[(rl*OW + ox)*ldc + cl*taps + ky*KW + kx] (taps outside x as zeros, pad columns
 * [cib*taps, ldc) zero): per output row, blocks of V pixels (the last moved back to end at OW;
 * one block of OW lanes when OW < V), plain loads where every tap of the block is inside x,
 * masked loads (gathers at stride > 1) at the borders. */
static void pgw_pack(cg_ctx *c, const pgw *k, LLVMValueRef nb, LLVMValueRef oy0, LLVMValueRef rows, LLVMValueRef ci0, int64_t cib,
                     int64_t ldc, LLVMValueRef pfd, LLVMValueRef dst0) {
  int V = k->V, np = k->ow < V ? (int)k->ow : V;
  LLVMValueRef plane = cg_tmul(c, cg_tadd(c, cg_tmul(c, nb, k->ci), ci0), k->ih * k->iw);
  if (k->flat) {
    pgw_pack_flat(c, k, cg_tadd(c, plane, cg_tmul(c, oy0, k->iw)), cg_tmul(c, rows, k->ow), cib, ldc, pfd, dst0);
    return;
  }
  LLVMValueRef rowok[PGW_MAX_TAPS], rowx[PGW_MAX_TAPS], tap0[PGW_MAX_TAPS], mask[PGW_MAX_TAPS];
  cg_loop R, X;
  LLVMValueRef rl = cg_loop_begin(c, &R, cg_i64(c, 0), rows, cg_i64(c, 1), "pkr");
  LLVMValueRef oy = cg_tadd(c, oy0, rl);
  for (int64_t ky = 0; ky < k->kh; ky++) {
    LLVMValueRef iy = cg_taddk(c, cg_tmul(c, oy, k->sh), ky * k->dh - k->pt);
    rowok[ky] = LLVMBuildICmp(c->b, LLVMIntULT, iy, cg_i64(c, k->ih), "");
    rowx[ky] = cg_tadd(c, plane, cg_tmul(c, iy, k->iw)); /* outside x when !rowok: masked */
  }
  int64_t lo0, hi0, lo1, hi1, nxb = k->ow < V ? 1 : (k->ow + V - 1) / V;
  pgw_xrange(k, 0, &lo0, &hi0);          /* the largest lo */
  pgw_xrange(k, k->kw - 1, &lo1, &hi1);  /* the smallest hi */
  LLVMValueRef xb = cg_loop_begin(c, &X, cg_i64(c, 0), cg_i64(c, nxb), cg_i64(c, 1), "pkx");
  LLVMValueRef ox0 = k->ow < V ? cg_i64(c, 0) : cg_min64(c, cg_tmul(c, xb, V), cg_i64(c, k->ow - V));
  for (int64_t t = 0; t < k->taps; t++)
    tap0[t] = cg_taddk(c, cg_tadd(c, rowx[t / k->kw], cg_tmul(c, ox0, k->sw)), t % k->kw * k->dw - k->pl);
  LLVMValueRef dst = cg_tadd(c, dst0, cg_tmul(c, cg_tadd(c, cg_tmul(c, rl, k->ow), ox0), ldc));
  cg_if f;
  int fast = np == V && lo0 + V <= hi1;
  if (fast) {
    LLVMValueRef in = LLVMBuildAnd(c->b, LLVMBuildICmp(c->b, LLVMIntSGE, ox0, cg_i64(c, lo0), ""),
                                   LLVMBuildICmp(c->b, LLVMIntSLE, ox0, cg_i64(c, hi1 - V), ""), "");
    cg_if_begin(c, &f, LLVMBuildAnd(c->b, in, LLVMBuildAnd(c->b, rowok[0], rowok[k->kh - 1], ""), ""));
    pgw_vchans(c, k, tap0, NULL, dst, cib, ldc, np, pfd);
    cg_if_else(c, &f);
  }
  pgw_masks(c, k, ox0, rowok, mask);
  pgw_vchans(c, k, tap0, mask, dst, cib, ldc, np, pfd);
  if (fast) cg_if_end(c, &f);
  cg_loop_end(c, &X);
  cg_loop_end(c, &R);
}

/* One register tile: rr output channels x nv column vectors (the last one's lanes lastm) over
 * the chunk's np pixels.  dbase: dy index of (nb, co0, first pixel); wbase: dw index of (co0,
 * first column); bcol: the tile's first column in the packed chunk. */
static void pgw_tile(cg_ctx *c, const pgw *k, LLVMValueRef dbase, LLVMValueRef np, LLVMValueRef nimg, LLVMValueRef wbase, LLVMValueRef bcol,
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
  if (k->dwpf) /* the next tile's dw rows (the next rr output channels), while this one runs */
    for (int r = 0; r < rr; r++)
      for (int v = 0; v < nv; v++) {
        LLVMValueRef i = cg_taddk(c, wbase, (int64_t)(rr + r) * k->ck + (int64_t)v * V);
        LLVMValueRef args[4] = {LLVMBuildGEP2(c->b, c->t_f32, k->dwt, &i, 1, ""), cg_i32(c, 0), cg_i32(c, 3), cg_i32(c, 1)};
        cg_intrinsic(c, "llvm.prefetch", &c->t_ptr, 1, args, 4);
      }
  cg_loop L, S;
  LLVMValueRef seg = NULL; /* chunks of whole images: image seg of the chunk, pixels [0, np) of it */
  if (nimg) {
    seg = cg_loop_begin(c, &S, cg_i64(c, 0), nimg, cg_i64(c, 1), "gs");
    dbase = cg_tadd(c, dbase, cg_tmul(c, seg, k->co * ohw));
    bcol = cg_tadd(c, bcol, cg_tmul(c, seg, ohw * ldc));
  }
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
  if (nimg) cg_loop_end(c, &S);
  for (int r = 0; r < rr; r++)
    for (int v = 0; v < nv; v++) {
      LLVMValueRef wi = cg_taddk(c, wbase, (int64_t)r * k->ck + (int64_t)v * V);
      cg_tstore(c, LLVMBuildLoad2(c->b, vt, reg[r * nv + v], ""), k->dwt, wi, v == nv - 1 ? lastm : full, V);
    }
}

/* Every tile of column vectors [kv0, kv0 + nv) over cob output channels from dbase / wbase:
 * acc/nv channels per tile (R for nv = NV; 12 x 1 and 6 x 2 tiles for narrow remainders on
 * AVX2), the last tile narrower. */
static void pgw_cols(cg_ctx *c, const pgw *k, LLVMValueRef dbase, LLVMValueRef np, LLVMValueRef nimg, LLVMValueRef wbase, LLVMValueRef kv0,
                     int64_t ldc, int64_t cob, int nv, unsigned lastm) {
  int rt = k->acc / nv;
  int64_t nct = (cob + rt - 1) / rt;
  int rl = (int)(cob - (nct - 1) * rt);
  LLVMValueRef bcol = cg_tmul(c, kv0, k->V), wb = cg_tadd(c, wbase, bcol);
  if (nct > 1) {
    cg_loop T;
    LLVMValueRef t = cg_loop_begin(c, &T, cg_i64(c, 0), cg_i64(c, nct - 1), cg_i64(c, 1), "gct");
    LLVMValueRef r0 = cg_tmul(c, t, rt);
    pgw_tile(c, k, cg_tadd(c, dbase, cg_tmul(c, r0, k->oh * k->ow)), np, nimg, cg_tadd(c, wb, cg_tmul(c, r0, k->ck)), bcol, ldc, rt,
             nv, lastm);
    cg_loop_end(c, &T);
  }
  int64_t r0 = (nct - 1) * rt;
  pgw_tile(c, k, cg_taddk(c, dbase, r0 * k->oh * k->ow), np, nimg, cg_taddk(c, wb, r0 * k->ck), bcol, ldc, rl, nv, lastm);
}

/* The tiles of one packed chunk for output channels [co0, co0 + cob): column tiles of NV
 * vectors, then the remainder.  dbase: dy index of (nb, channel 0, the chunk's first pixel). */
static void pgw_chunk(cg_ctx *c, const pgw *k, LLVMValueRef dbase, LLVMValueRef np, LLVMValueRef nimg, LLVMValueRef co0, LLVMValueRef ci0, int64_t cib,
                      int64_t cob) {
  int V = k->V;
  int64_t cols = cib * k->taps, ldc = pgw_ldc(k, cols), nvk = (cols + V - 1) / V;
  unsigned lastm = cg_lanes((int)(cols - (nvk - 1) * V), V), full = cg_lanes(V, V);
  LLVMValueRef wbase = cg_tadd(c, cg_tmul(c, co0, k->ck), cg_tmul(c, ci0, k->taps));
  LLVMValueRef db = cg_tadd(c, dbase, cg_tmul(c, co0, k->oh * k->ow));
  int64_t nkt = (nvk + k->NV - 1) / k->NV;
  int nvl = (int)(nvk - (nkt - 1) * k->NV);
  int split = nvl == 1 && nkt > 1 && k->NV == 3; /* 3 + 1 vectors as two 6x2 tiles (8 loads per 12 FMAs, not 13) */
  if (nkt - split > 1) {
    cg_loop T;
    LLVMValueRef t = cg_loop_begin(c, &T, cg_i64(c, 0), cg_i64(c, nkt - 1 - split), cg_i64(c, 1), "gkt");
    pgw_cols(c, k, db, np, nimg, wbase, cg_tmul(c, t, k->NV), ldc, cob, k->NV, full);
    cg_loop_end(c, &T);
  }
  if (split) {
    pgw_cols(c, k, db, np, nimg, wbase, cg_i64(c, (nkt - 2) * k->NV), ldc, cob, 2, full);
    pgw_cols(c, k, db, np, nimg, wbase, cg_i64(c, (nkt - 2) * k->NV + 2), ldc, cob, 2, lastm);
  } else {
    pgw_cols(c, k, db, np, nimg, wbase, cg_i64(c, (nkt - 1) * k->NV), ldc, cob, nvl, lastm);
  }
}

/* A run of items of one input-channel block [ci0, ci0 + cib): output-channel blocks [obl, obh)
 * (the last block of all, if in the run, is col wide).  dw of the run is zeroed, then per image
 * and chunk the chunk is packed once and every block's tiles run over it. */
static void pgw_run(cg_ctx *c, const pgw *k, LLVMValueRef ci0, int64_t cib, LLVMValueRef obl, LLVMValueRef obh) {
  int V = k->V;
  int64_t cols = cib * k->taps, ldc = pgw_ldc(k, cols), nvk = (cols + V - 1) / V, col = k->co - (k->nco - 1) * k->cob;
  unsigned lastm = cg_lanes((int)(cols - (nvk - 1) * V), V), full = cg_lanes(V, V);
  LLVMValueRef colo = cg_tmul(c, obl, k->cob), cohi = cg_min64(c, cg_tmul(c, obh, k->cob), cg_i64(c, k->co));
  cg_loop Z, NB, CH, OB;
  LLVMValueRef z = cg_loop_begin(c, &Z, colo, cohi, cg_i64(c, 1), "gz");
  LLVMValueRef wz = cg_tadd(c, cg_tmul(c, z, k->ck), cg_tmul(c, ci0, k->taps));
  for (int64_t v = 0; v < nvk; v++) cg_tstore(c, cg_fzero(c, V), k->dwt, cg_taddk(c, wz, v * V), v == nvk - 1 ? lastm : full, V);
  cg_loop_end(c, &Z);
  LLVMValueRef nb = cg_loop_begin(c, &NB, cg_i64(c, 0), cg_i64(c, k->n), cg_i64(c, k->ni), "gn");
  LLVMValueRef ch = cg_loop_begin(c, &CH, cg_i64(c, 0), cg_i64(c, k->nrch), cg_i64(c, 1), "gch");
  LLVMValueRef oy0 = cg_tmul(c, ch, k->rh);
  LLVMValueRef rows = cg_min64(c, cg_i64(c, k->rh), LLVMBuildSub(c->b, cg_i64(c, k->oh), oy0, ""));
  LLVMValueRef pfd = NULL; /* x offset of the next chunk: the next rows, or the next image's first */
  if (k->prefetch)
    pfd = LLVMBuildSelect(c->b, LLVMBuildICmp(c->b, LLVMIntEQ, ch, cg_i64(c, k->nrch - 1), ""),
                          cg_i64(c, k->ci * k->ih * k->iw - (k->nrch - 1) * k->rh * k->sh * k->iw), cg_i64(c, k->rh * k->sh * k->iw), "pfd");
  LLVMValueRef np = cg_tmul(c, rows, k->ow), nimg = NULL;
  if (k->ni > 1) { /* images [nb, nb + nimg) at buf pixels [i*OH*OW, ..): the pack prefetches the next image */
    cg_loop I;
    nimg = cg_min64(c, cg_i64(c, k->ni), LLVMBuildSub(c->b, cg_i64(c, k->n), nb, ""));
    LLVMValueRef i = cg_loop_begin(c, &I, cg_i64(c, 0), nimg, cg_i64(c, 1), "gpi");
    pgw_pack(c, k, cg_tadd(c, nb, i), oy0, rows, ci0, cib, ldc, pfd, cg_tmul(c, i, k->oh * k->ow * ldc));
    cg_loop_end(c, &I);
  } else {
    pgw_pack(c, k, nb, oy0, rows, ci0, cib, ldc, pfd, cg_i64(c, 0));
  }
  LLVMValueRef dbase = cg_tadd(c, cg_tmul(c, nb, k->co * k->oh * k->ow), cg_tmul(c, oy0, k->ow));
  LLVMValueRef ob = cg_loop_begin(c, &OB, obl, obh, cg_i64(c, 1), "gob");
  LLVMValueRef co0 = cg_tmul(c, ob, k->cob);
  if (col == k->cob) {
    pgw_chunk(c, k, dbase, np, nimg, co0, ci0, cib, k->cob);
  } else {
    cg_if f;
    cg_if_begin(c, &f, LLVMBuildICmp(c->b, LLVMIntEQ, ob, cg_i64(c, k->nco - 1), ""));
    pgw_chunk(c, k, dbase, np, nimg, co0, ci0, cib, col);
    cg_if_else(c, &f);
    pgw_chunk(c, k, dbase, np, nimg, co0, ci0, cib, k->cob);
    cg_if_end(c, &f);
  }
  cg_loop_end(c, &OB);
  cg_loop_end(c, &CH);
  cg_loop_end(c, &NB);
}

/* Items (input-channel block cb, output-channel block ob) numbered cb*nco + ob, contiguous
 * ranges over the threads; a thread's items of one cb form a run (one pack per chunk).  The
 * last input-channel block may be narrower (its own static body). */
static void pgw_emit(cg_ctx *c, const pgw *k, LLVMValueRef tid, LLVMValueRef nth) {
  int64_t cil = k->ci - (k->nci - 1) * k->cib;
  LLVMValueRef lo, hi, nco = cg_i64(c, k->nco);
  cg_thread_range(c, cg_i64(c, k->nci * k->nco), tid, nth, &lo, &hi);
  cg_loop L;
  LLVMValueRef cbhi = LLVMBuildUDiv(c->b, cg_taddk(c, hi, k->nco - 1), nco, "");
  LLVMValueRef cb = cg_loop_begin(c, &L, LLVMBuildUDiv(c->b, lo, nco, ""), cbhi, cg_i64(c, 1), "gcb");
  LLVMValueRef first = cg_tmul(c, cb, k->nco);
  LLVMValueRef obl = cg_max64(c, LLVMBuildSub(c->b, lo, first, ""), cg_i64(c, 0));
  LLVMValueRef obh = cg_min64(c, LLVMBuildSub(c->b, hi, first, ""), nco);
  LLVMValueRef ci0 = cg_tmul(c, cb, k->cib);
  cg_if f, g;
  cg_if_begin(c, &f, LLVMBuildICmp(c->b, LLVMIntSLT, obl, obh, ""));
  if (cil == k->cib) {
    pgw_run(c, k, ci0, k->cib, obl, obh);
  } else {
    cg_if_begin(c, &g, LLVMBuildICmp(c->b, LLVMIntEQ, cb, cg_i64(c, k->nci - 1), ""));
    pgw_run(c, k, ci0, cil, obl, obh);
    cg_if_else(c, &g);
    pgw_run(c, k, ci0, k->cib, obl, obh);
    cg_if_end(c, &g);
  }
  cg_if_end(c, &f);
  cg_loop_end(c, &L);
}

int cg_train_pgw_match(cg_ctx *c, const ir_node *n, cg_kplan *kp) {
  pgw k;
  (void)kp;
  return cg_tune(c)->train_pgw && pgw_plan(c, n, &k);
}

LLVMValueRef cg_train_pgw(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind) {
  pgw k;
  if (!cg_tune(c)->train_pgw || !pgw_plan(c, n, &k)) return cg_fail(c, n, "internal error: the packed GEMM route does not take this conv");
  LLVMValueRef a[5];
  LLVMValueRef f = cg_train_kbegin(c, fn_name, 2, a);
  k.dy = a[0], k.x = a[1], k.dwt = a[2];
  int64_t P = k.ni * k.rh * k.ow;
  k.buf = cg_entry_alloca(c, LLVMArrayType2(cg_vtype(c, k.V), (uint64_t)(P * k.ldc_max / k.V)), "gwpack");
  LLVMSetAlignment(k.buf, 64);
  pgw_emit(c, &k, a[3], a[4]);
  cg_kernel_end(c);
  *kind = cg_kind(c, "conv2d_grad_weight_pk", ir_fmt(c->arena, "%dx%d", k.R, k.NV * k.V));
  return f;
}
