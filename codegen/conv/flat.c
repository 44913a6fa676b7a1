/* conv/flat.c — flat convs of the direct route (conv/flat.h): a 1x1 stride-1 unpadded conv
 * on pixel vectors is one long row of the plane (a GEMM) cut into pixel chunks of ~128 KB of
 * input; a work item is (image, chunk, channel tile), tiles fastest, running the pixel-vector
 * tiles of conv/pixvec.c over the chunk, with its input packed into panels on first use,
 * next-chunk, residual and weight prefetches, streaming stores, channel-vector tails and a
 * tile-split thread order at batch 1. */
#include "codegen/conv/flat.h"
#include "codegen/conv/pixvec.h"

/* Weight prefetch of flat convs at batch 1 (flat_w_prefetch; tune flat_w_pf=0 in cnnc's
 * environment turns it off).  There each weight is used for one image only, and ResNet-50's
 * 100 MB of weights stream from memory every pass: a channel tile's packed weights arrive
 * with its first microkernel's loads.  Every K step of a packed chunk's microkernel now
 * prefetches (prefetcht0) the same K step of the next channel tile, the thread's next item
 * of the chunk (the tile order of conv_item and conv_flat_split_item): one prefetch per
 * R*P FMAs, redundant in the chunk's later pixel tiles (the lines are cached by then).
 * Measured on ResNet-50 b1 (bench/opcmp.py, CPU time, 2 threads, min of 8, load ~15): the
 * 12x32 layer3 1x1 convs 1.09x (conv1s) and 1.18x (conv3s with the add), layer2 conv3s
 * 1.11x, the other flat convs 0.97-1.02x, whole model 0.949x CPU time; prefetcht1 /
 * prefetchnta / two tiles ahead measured 0.952 / 0.961 / 0.972x.  Not at batch 16, where a
 * thread reuses the weights for its images (the layer3 1x1 convs 0.97x with it). */
#define FLAT_W_PF_MAX_BATCH 1
static int64_t flat_w_pf_dist(const conv_geom *g) {
  if (g->n > FLAT_W_PF_MAX_BATCH || !g->tune->flat_w_pf) return 0;
  return (int64_t)g->cin_g * g->kh * g->kw * g->R;
}

/* Packed buffer floats of a flat conv (its widest chunk), 0 when it is not packed: a single
 * channel tile (no reuse), or a chunk beyond CONV_PACK_MAX_BYTES of stack. */
#define CONV_PACK_MAX_BYTES (256 * 1024)

/* Pixels per work item of a flat conv: whole tiles, x chunk of ~128 KB (stays in L2 while
 * the thread walks the channel tiles; measured on ResNet-50 AVX2: ~6 % faster 1x1 convs than
 * 32 KB chunks, mostly the 7x7 layer4 GEMMs whose chunk was a single tile). */
int64_t cg_conv_flat_chunk_px(const conv_geom *g) {
  int64_t tile_px = (int64_t)g->P * g->V, want = 131072 / (4 * g->cin_g);
  int64_t k = want / tile_px;
  if (k < 1) k = 1;
  int64_t whole = (g->ow + tile_px - 1) / tile_px;
  return (k < whole ? k : whole) * tile_px;
}

int64_t cg_conv_flat_pack_floats(const conv_geom *g) {
  if (!g->flat || (int64_t)g->groups * g->ntile < 2) return 0;
  int64_t f = cg_conv_flat_chunk_px(g) * g->cin_g;
  return f * 4 <= CONV_PACK_MAX_BYTES ? f : 0;
}

/* Next-chunk prefetch (tune flat_prefetch turns it off).  At
 * batch 16 a flat conv's input streams from memory (ResNet-50 layer1's 256-channel 56x56
 * maps: 51 MB), and the item that packs a chunk (below) stalled on it: `perf annotate` of
 * layer1/1/conv1 (16 channel tiles) put 29 % of the kernel's samples in that item's loop,
 * which does 1/16 of the FMAs, layer3/1/conv1 (43 tiles) 16 % for 1/43 (at batch 1 the maps
 * sit in L3).  So the chunk's other items (xmode 1, reading the panels) prefetch the thread's
 * next chunk, spread evenly: slot s = (pos - 1) * ntl + pixel tile of the nth item's ntl
 * tiles, of S = (cnt - 1) * ntl, takes line s * L / S of the next chunk's L lines, for every
 * input channel (one prefetch per K step, prefetcht1; a line is prefetched by several
 * consecutive slots when S > L).  nxt: the next chunk's input element in channel plane 0
 * (run time); returns the byte offset of the slot's line there.  Convs with a fused residual
 * add are left out: their epilogue streams the residual and the output from memory, and with
 * the prefetch ResNet-50's conv3s measured 0.93-0.99x per CPU-second (the conv1s 1.05-1.17x);
 * prefetching each line once only (a second microkernel without the prefetch) left the conv3s
 * at 0.97-1.02x and the conv1s 2-4 % below the every-slot version.  Inputs under
 * FLAT_PF_MIN_BYTES for the batch are left out too: at batch 1 (ResNet-50's maps 0.8-3.2 MB,
 * in L3) layer2's 512 -> 128 convs measured 0.91-0.94x with the prefetch; at 8 MB
 * EfficientNet-B0 b16's 144 -> 40 project conv (7.2 MB) lost its 1.32x. */
#define FLAT_PF_MIN_BYTES (4.0 * 1024 * 1024)
/* At batch 1 with the weight prefetch (flat_w_prefetch) the floor is 512 KB: ResNet-50 b1
 * (bench/opcmp.py, 2 threads, min of 8-10, load 15-19, both orders: A = the 4 MB floor) then
 * measured its conv1s without an add 1.09x / 1.12x (8x48: layer1-2, layer3/0; two runs) and
 * 1.12x / 1.07x (12x32: layer3) per CPU-second, the conv3s (no x prefetch) 0.96-1.11x as noise. */
#define FLAT_PF_MIN_BYTES_B1 (512.0 * 1024)
static double flat_pf_min_bytes(const conv_geom *g) {
  return g->n == 1 ? FLAT_PF_MIN_BYTES_B1 : FLAT_PF_MIN_BYTES;
}
/* Slots per prefetched line.  The next chunk's L lines are spread over the S = (tiles - 1) x
 * ntl pixel tiles of the chunk's other items, so each line is prefetched by ~S / L slots
 * (~Cout / 6 with 12-accumulator tiles: S / L grows with the output channels, the chunk's
 * bytes are fixed).  Measured at batch 16 (bench/opcmp.py, one-conv models, 2 threads, 3
 * interleaved rounds of 12-15 repeats, CPU time, 26 Nov 19:47-19:54, load 15-19), prefetch vs
 * tune flat_prefetch=0: S/L 8 (256 -> 64 at 56x56) 1.17-1.39x, 16 (512 -> 128 at 28x28)
 * 1.05-1.06x, 17 (256 -> 128 at 56x56) 0.95-1.07x, 28 (1024 -> 256 at 14x14) 1.04-1.06x, but
 * 32 (512 -> 256 at 28x28, ResNeXt-50's layer2 conv1s and ResNet-50's layer3/0/conv1)
 * 0.97-0.99x, 35 (256 -> 256 at 56x56) 0.93-0.99x, 57 (1024 -> 512) 1.00-1.04x, 64 (512 ->
 * 512) 0.94-0.98x, 113 (1024 -> 1024) 0.97-1.01x: the wider convs do enough FMAs per chunk
 * to hide its loads, and the redundant prefetches (one per K step of every slot) only cost.
 * Convs with at most CG_CONV_SMALL_K_CIN input channels (504-pixel chunks, 21 tiles per item) gained
 * at every width measured: 64 -> 64 / 128 / 256 at 56x56 (S/L 9 / 19 / 40) 1.20-1.22x /
 * 1.09x / 1.03-1.04x (2 rounds of 15, 20:00, load 15-16).  So the prefetch is left out above
 * FLAT_PF_MAX_SPL slots per line unless Cin_g <= CG_CONV_SMALL_K_CIN (tune flat_pf_max_spl in cnnc's
 * environment sets another limit, 0: none, for A/B measurements). */
static int flat_prefetch_ok(const conv_geom *g, const conv_row *r) {
  int64_t es = r->xdt != IR_F32 ? 2 : 4, L = (cg_conv_flat_chunk_px(g) * es + 63) / 64 + 1;
  int64_t S = ((int64_t)g->groups * g->ntile - 1) * (cg_conv_flat_chunk_px(g) / ((int64_t)g->P * g->V));
  int64_t lim = g->tune->flat_pf_max_spl;
  return lim <= 0 || S <= lim * L || g->cin_g <= CG_CONV_SMALL_K_CIN;
}
static LLVMValueRef flat_prefetch_line(cg_ctx *c, const conv_geom *g, const conv_row *r, const conv_xpack *pk,
                                       LLVMValueRef nxt, LLVMValueRef i, int64_t ntl) {
  int64_t es = r->xdt != IR_F32 ? 2 : 4, L = (cg_conv_flat_chunk_px(g) * es + 63) / 64 + 1;
  LLVMValueRef pos = cg_max64(c, LLVMBuildSub(c->b, pk->pf_pos, cg_i64(c, 1), ""), cg_i64(c, 0));
  LLVMValueRef s = LLVMBuildAdd(c->b, LLVMBuildMul(c->b, pos, cg_i64(c, ntl), ""), i, "pf_slot");
  LLVMValueRef S = cg_max64(c, LLVMBuildMul(c->b, LLVMBuildSub(c->b, pk->pf_cnt, cg_i64(c, 1), ""), cg_i64(c, ntl), ""), cg_i64(c, 1));
  LLVMValueRef line = cg_min64(c, LLVMBuildSDiv(c->b, LLVMBuildMul(c->b, s, cg_i64(c, L), ""), S, ""), cg_i64(c, L - 1));
  return LLVMBuildAdd(c->b, LLVMBuildMul(c->b, nxt, cg_i64(c, es), ""), LLVMBuildMul(c->b, line, cg_i64(c, 64), ""), "pf_line");
}

/* Non-temporal output stores (flat_store_nt) for flat convs with a fused residual add whose
 * f32 output (whole vectors per plane) is at least FLAT_NT_MIN_BYTES for the batch, on
 * vectors of a whole cache line (V*4 >= 64).  Their epilogue streams the residual in and the
 * output out (ResNet-50 b16 layer1: 64 -> 256 at 56x56, 3.2 MB in, 3.2 MB out per image):
 * plain stores read each output line first (write-allocate) and fill the caches with lines
 * the next kernel reads long after.  Measured (bench/opcmp.py, both .so from one cnnc, A with
 * tune flat_nt=0, 2 threads, 6-8 repeats, load 18-25, Zen 5 AVX-512): ResNet-50 b16
 * layer1 conv3s 1.03-1.20x per CPU-second, layer2 conv3s 1.09-1.11x; ResNeXt-50 b16 (K twice
 * as large) layer1 conv3s 0.90-1.11x, layer2 1.00-1.07x over two rounds.  Not taken: convs
 * without an add (layer1/0's downsample, whose output the next kernel reads as its residual,
 * 0.88x; layer2/0/conv1 0.96x), and 8-lane vectors (half-line stores: a one-block model on
 * AVX2 code, 0.93x / 0.98x on its 64 -> 256 / 128 -> 512 conv3).  tune flat_nt=0 in
 * cnnc's environment turns them off, tune flat_nt_all=1 on for every flat f32 conv of
 * whole-vector planes (A/B measurements). */
#define FLAT_NT_MIN_BYTES (16.0 * 1024 * 1024)
static int flat_nt_ok(const conv_geom *g, const conv_row *r) {
  if (r->odt != IR_F32 || (g->oh * g->ow) % g->V || !g->tune->flat_nt) return 0;
  return g->tune->flat_nt_all ||
         (r->resid[0] && g->V * 4 >= 64 && (double)g->n * g->cout * g->oh * g->ow * 4 >= FLAT_NT_MIN_BYTES);
}

/* ntl whole unmasked tiles from pixel c0: without pk read from the planes; with pk, the
 * first item of a chunk reads the planes and writes each tile's pixels into its panel
 * ("pack on first use": the copy costs one store per loaded vector inside that item's
 * microkernel, and its reads of the not yet cached chunk overlap the FMAs as before), the
 * chunk's other items read the panels.  (Packing the chunk up front in a copy loop stalled
 * on the chunk's first reads from memory: ResNet-50 layer1/2 1x1 convs 0.8x.) */
static void flat_tiles(cg_ctx *c, const conv_geom *g, const conv_row *r, const conv_epi *e, int rr, const conv_xpack *pk,
                       LLVMValueRef c0, int64_t ntl, LLVMValueRef nxt) {
  if (ntl <= 0) return;
  int64_t tile_px = (int64_t)g->P * g->V;
  cg_if f;
  if (pk) {
    LLVMValueRef key = LLVMBuildAdd(c->b, r->in_base, c0, "pkey");
    cg_if_begin(c, &f, LLVMBuildICmp(c->b, LLVMIntNE, LLVMBuildLoad2(c->b, c->t_i64, pk->key, ""), key, ""));
    LLVMBuildStore(c->b, key, pk->key);
  }
  for (int mode = pk ? 2 : 0; mode >= (pk ? 1 : 0); mode--) {
    if (pk && mode == 1) cg_if_else(c, &f);
    cg_loop L;
    LLVMValueRef i = cg_loop_begin(c, &L, cg_i64(c, 0), cg_i64(c, ntl), cg_i64(c, 1), "ox");
    LLVMValueRef ox = LLVMBuildAdd(c->b, c0, LLVMBuildMul(c->b, i, cg_i64(c, tile_px), ""), "");
    LLVMValueRef pf = pk && mode == 1 && pk->pf_pos && nxt ? flat_prefetch_line(c, g, r, pk, nxt, i, ntl) : NULL, epi = NULL;
    if (pk && pk->pf_epi) /* flat_prefetch_epi: the next pixel tile, after the last the next channel tile's first */
      epi = LLVMBuildSelect(c->b, LLVMBuildICmp(c->b, LLVMIntEQ, i, cg_i64(c, ntl - 1), ""),
                            LLVMBuildAdd(c->b, r->out_row, LLVMBuildAdd(c->b, c0, cg_i64(c, (int64_t)g->R * g->oh * g->ow), ""), ""),
                            LLVMBuildAdd(c->b, r->out_row, LLVMBuildAdd(c->b, ox, cg_i64(c, tile_px), ""), ""), "pf_epi");
    if (pk) cg_conv_tile_x(c, g, r, e, rr, g->P, ox, -1, 0, pk->buf, LLVMBuildMul(c->b, i, cg_i64(c, g->cin_g * tile_px), ""), mode, pf, epi, pk->nt,
                        pk->wpf);
    else cg_conv_tile(c, g, r, e, rr, g->P, ox, -1, 0);
    cg_loop_end(c, &L);
  }
  if (pk) cg_if_end(c, &f);
}

/* The masked tail of a flat conv's plane (the last ow % (P*V) pixels, fewer than a tile) on
 * channel vectors: a pixel tile there is one or more vectors with few lanes in use (ResNet-50
 * b1 layer3, 196 pixels in 12x32 tiles: a 4-of-16-lane vector, 12 FMAs and 13 loads per
 * input channel; `perf annotate`, 2 threads: 7-10 % of the 1x1 kernels' samples for 2 % of
 * their pixels).  Here the rr <= V channels of the tile are the lanes: per input channel one
 * masked load of the packed weights [ci][R] and one broadcast and FMA per tail pixel, then
 * the epilogue per pixel with the residual gathered and the result scattered (lane k at plane
 * k).  Each output is the same fmuladd chain over ci, plus the bias, as the pixel tile's:
 * bitwise equal.  f32 operands only (not 16-bit storage, not a squeeze-excite scale);
 * tune flat_tail_cv=0 keeps the masked pixel tiles (A/B). */
#define FLAT_TAIL_CV_MAX_PX 8
static int flat_tail_cv_ok(const conv_geom *g, const conv_row *r, const conv_epi *e, int rr, int64_t npx) {
  if (!g->flat || rr > g->V || g->V > 32 || npx < 1 || npx > FLAT_TAIL_CV_MAX_PX || r->xdt != IR_F32 ||
      r->odt != IR_F32 || r->xs || !g->tune->flat_tail_cv)
    return 0;
  for (int q = 0, ra = 0; q < e->n_post; q++)
    if (e->post[q]->op == IR_OP_add && r->rdt[ra++] != IR_F32) return 0;
  return 1;
}

/* Lane k: base + idx + k*plane, as a vector of pointers. */
static LLVMValueRef plane_ptrs(cg_ctx *c, const conv_geom *g, LLVMValueRef base, LLVMValueRef idx) {
  LLVMValueRef e[32];
  for (int k = 0; k < g->V; k++) e[k] = cg_i64(c, (int64_t)k * g->oh * g->ow);
  LLVMValueRef p = LLVMBuildGEP2(c->b, c->t_f32, base, &idx, 1, "");
  LLVMValueRef off = LLVMConstVector(e, (unsigned)g->V);
  return LLVMBuildGEP2(c->b, c->t_f32, p, &off, 1, "lane_ptrs");
}

static void flat_tail_cv(cg_ctx *c, const conv_geom *g, const conv_row *r, const conv_epi *e, int rr, int64_t px0,
                         int npx) {
  int V = g->V;
  LLVMTypeRef vt = cg_vtype(c, V), pvt = LLVMVectorType(c->t_ptr, (unsigned)V);
  unsigned m = rr >= 32 ? ~0u : (1u << rr) - 1;
  LLVMValueRef acc[FLAT_TAIL_CV_MAX_PX], cur[FLAT_TAIL_CV_MAX_PX], mask = cg_conv_mask_const(c, m, V);
  for (int p = 0; p < npx; p++) {
    acc[p] = cg_entry_alloca(c, vt, "tacc");
    LLVMBuildStore(c->b, cg_fzero(c, V), acc[p]);
  }
  cg_loop CI;
  LLVMValueRef ci = cg_loop_begin(c, &CI, cg_i64(c, 0), cg_i64(c, g->cin_g), cg_i64(c, 1), "ci");
  LLVMValueRef wv = cg_conv_masked_load(c, r->wp, LLVMBuildAdd(c->b, r->wbase, LLVMBuildMul(c->b, ci, cg_i64(c, g->R), ""), ""), m, V);
  LLVMValueRef xrow = LLVMBuildAdd(c->b, r->in_base, LLVMBuildAdd(c->b, LLVMBuildMul(c->b, ci, cg_i64(c, g->h * g->w), ""), cg_i64(c, px0), ""), "xrow");
  for (int p = 0; p < npx; p++) {
    LLVMValueRef xb = cg_splat(c, cg_load_f32(c, r->x, LLVMBuildAdd(c->b, xrow, cg_i64(c, p), "")), V);
    cur[p] = cg_fma(c, wv, xb, LLVMBuildLoad2(c->b, vt, acc[p], ""));
    LLVMBuildStore(c->b, cur[p], acc[p]);
  }
  cg_loop_end(c, &CI);
  LLVMValueRef bias = cg_conv_masked_load(c, r->bp, r->bbase, m, V);
  LLVMTypeRef ov[2] = {vt, pvt};
  for (int p = 0; p < npx; p++) {
    LLVMValueRef oi = LLVMBuildAdd(c->b, r->out_row, cg_i64(c, px0 + p), "oi");
    LLVMValueRef v = LLVMBuildFAdd(c->b, LLVMBuildLoad2(c->b, vt, acc[p], ""), bias, "");
    for (int q = 0, ra = 0; q < e->n_post; q++) {
      if (e->post[q]->op != IR_OP_add) {
        v = cg_epilogue(c, e->post[q], v, NULL, NULL, V);
        continue;
      }
      LLVMValueRef ga[4] = {plane_ptrs(c, g, r->resid[ra++], oi), cg_i32(c, 4), mask, cg_fzero(c, V)};
      v = LLVMBuildFAdd(c->b, v, cg_intrinsic(c, "llvm.masked.gather", ov, 2, ga, 4), "resid");
    }
    LLVMValueRef sa[4] = {v, plane_ptrs(c, g, r->out, oi), cg_i32(c, 4), mask};
    cg_intrinsic(c, "llvm.masked.scatter", ov, 2, sa, 4);
  }
}

/* The plane's pixels [from, ow) after the whole tiles: flat_tail_cv or masked pixel tiles. */
static void flat_tail(cg_ctx *c, const conv_geom *g, const conv_row *r, const conv_epi *e, int rr, int64_t from) {
  if (flat_tail_cv_ok(g, r, e, rr, g->ow - from)) flat_tail_cv(c, g, r, e, rr, from, (int)(g->ow - from));
  else cg_conv_masked_tiles(c, g, r, e, rr, from, g->ow);
}

/* 1x1/s1/p0 conv (one long row): pixel chunk [c0, c0 + chunk) of the plane, unmasked tiles
 * when the chunk is whole; the last partial chunk runs its whole tiles unmasked too and the
 * rest as masked tiles. */
void cg_conv_flat_chunk(cg_ctx *c, const conv_geom *g, const conv_row *r, const conv_epi *e, int rr,
                        const conv_xpack *pk, LLVMValueRef chunk, int64_t chunk_px) {
  int64_t tile_px = (int64_t)g->P * g->V, nfull = g->ow / chunk_px;
  int64_t last_tiles = (g->ow - nfull * chunk_px) / tile_px;
  LLVMValueRef c0 = LLVMBuildMul(c->b, chunk, cg_i64(c, chunk_px), "c0");
  /* the thread's next chunk (flat_prefetch): the next one of the plane, else the next image's first */
  LLVMValueRef next_img = LLVMBuildAdd(c->b, r->in_base, cg_i64(c, g->cin * g->h * g->w), "");
  LLVMValueRef c1 = LLVMBuildAdd(c->b, c0, cg_i64(c, chunk_px), "");
  LLVMValueRef nxt = LLVMBuildSelect(c->b, LLVMBuildICmp(c->b, LLVMIntSLT, c1, cg_i64(c, g->ow), ""),
                                     LLVMBuildAdd(c->b, r->in_base, c1, ""), next_img, "pf_next");
  cg_if f;
  if (nfull > 0 && nfull * chunk_px < g->ow) cg_if_begin(c, &f, LLVMBuildICmp(c->b, LLVMIntSLT, chunk, cg_i64(c, nfull), ""));
  if (nfull > 0) flat_tiles(c, g, r, e, rr, pk, c0, chunk_px / tile_px, nxt);
  if (nfull * chunk_px < g->ow) {
    if (nfull > 0) cg_if_else(c, &f);
    flat_tiles(c, g, r, e, rr, pk, cg_i64(c, nfull * chunk_px), last_tiles, next_img);
    flat_tail(c, g, r, e, rr, nfull * chunk_px + last_tiles * tile_px);
    if (nfull > 0) cg_if_end(c, &f);
  }
}

/* ---- thread partition of flat convs (issue 4, two-thread scaling; additive: the items and
 * microkernels above are unchanged, only which thread takes which) -------------------------
 * Flat convs number their items (image, chunk, channel tile), tiles fastest, and
 * cg_thread_range gives each thread a contiguous range: whole images when the images divide
 * among the threads, else (batch 1) a run of chunks each - every thread reads half the input
 * and all the weights, but a plane's last chunk is short, so the halves differ (ResNet-50
 * layer3's 1x1 256->1024: chunks of 128 and 68 pixels, balance 0.77; layer2's 128->512: 0.82).
 * The alternative order (image, part, chunk, tile within part), the channel tiles cut into
 * nthreads parts of ceil(tiles/nthreads), balances to a tile and halves each thread's
 * weights, but every thread reads every chunk.  conv_flat_split_tiles picks per layer, for 2
 * threads: the tile split when the pixel split's imbalance costs more than the extra bytes,
 * at FLAT_SPLIT_GFLOPS per thread and FLAT_SPLIT_GBS (assumed rates of this machine's cores
 * and L3; on ResNet-50 b1 it keeps the pixel split where the input dominates - layer1's
 * 256->64 and layer2's 256/512->128 convs; forced to the tile split, layer1's measured
 * 0.81-0.88x per CPU-second - and splits tiles for the other 1x1 convs). */
#define FLAT_SPLIT_GFLOPS 80.0
#define FLAT_SPLIT_GBS 20.0

/* Chunks per plane: the rows of work per (image, channel tile) of conv/direct.c's items. */
static int64_t flat_rows(const conv_geom *g) { return (g->ow + cg_conv_flat_chunk_px(g) - 1) / cg_conv_flat_chunk_px(g); }

static int conv_flat_split_tiles(const conv_geom *g) {
  int64_t tiles = (int64_t)g->groups * g->ntile, rows = flat_rows(g), cpx = cg_conv_flat_chunk_px(g), rem = g->cout_g % g->R;
  if (tiles < 2) return 0;
  double work[2] = {0, 0}, all = 0, total = (double)g->n * (double)rows * (double)tiles;
  for (int64_t i = 0; i < (int64_t)total; i++) { /* (image, chunk, tile), tiles fastest; thread = first or second half */
    int64_t t = i % tiles, ch = i / tiles % rows;
    double px = (double)(ch < rows - 1 ? cpx : g->ow - (rows - 1) * cpx), r = rem && t % g->ntile == g->ntile - 1 ? rem : g->R;
    work[2 * i >= (int64_t)total] += px * r;
    all += px * r;
  }
  double bal = all / 2 / (work[0] > work[1] ? work[0] : work[1]);
  double flops = 2.0 * (double)g->cin_g * all / 2, x = 4.0 * (double)g->n * g->cin * g->ow;
  double w = 4.0 * (double)g->groups * g->cin_g * g->cout_g, nch = (double)g->n * rows;
  double px_bytes = x / 2 + (w > (double)g->l2 ? nch / 2 * w : w), tile_bytes = x + (w / 2 > (double)g->l2 ? nch * w / 2 : w / 2);
  double lost = flops / (FLAT_SPLIT_GFLOPS * 1e9) * (1 / bal - 1), extra = (tile_bytes - px_bytes) / (FLAT_SPLIT_GBS * 1e9);
  return lost > extra;
}

/* The tiles-fastest index of the item at position it of the tile-split order (the identity
 * when the images divide among the threads); *part: the tiles a thread runs per chunk. */
static LLVMValueRef conv_flat_split_item(cg_ctx *c, const conv_geom *g, LLVMValueRef it, LLVMValueRef nthreads,
                                         LLVMValueRef *part_tiles) {
  int64_t tiles = (int64_t)g->groups * g->ntile, rows = flat_rows(g);
  LLVMValueRef nt = LLVMBuildSExt(c->b, nthreads, c->t_i64, "");
  LLVMValueRef split = LLVMBuildICmp(c->b, LLVMIntNE, LLVMBuildSRem(c->b, cg_i64(c, g->n), nt, ""), cg_i64(c, 0), "");
  LLVMValueRef part = LLVMBuildSDiv(c->b, LLVMBuildAdd(c->b, cg_i64(c, tiles - 1), nt, ""), nt, "");
  LLVMValueRef B = LLVMBuildSelect(c->b, split, part, cg_i64(c, tiles), "part_tiles");
  *part_tiles = B;
  LLVMValueRef per = cg_i64(c, rows * tiles), rb = LLVMBuildMul(c->b, cg_i64(c, rows), B, "");
  LLVMValueRef nb = LLVMBuildSDiv(c->b, it, per, ""), j = LLVMBuildSRem(c->b, it, per, "");
  LLVMValueRef t0 = LLVMBuildMul(c->b, LLVMBuildSDiv(c->b, j, rb, ""), B, ""), k = LLVMBuildSRem(c->b, j, rb, "");
  LLVMValueRef bs = cg_min64(c, B, LLVMBuildSub(c->b, cg_i64(c, tiles), t0, "")); /* tiles in this part */
  LLVMValueRef row = LLVMBuildSDiv(c->b, k, bs, ""), tile = LLVMBuildAdd(c->b, t0, LLVMBuildSRem(c->b, k, bs, ""), "");
  return LLVMBuildAdd(c->b, LLVMBuildMul(c->b, LLVMBuildAdd(c->b, LLVMBuildMul(c->b, nb, cg_i64(c, rows), ""), row, ""),
                                         cg_i64(c, tiles), ""), tile, "split_item");
}

LLVMValueRef cg_conv_flat_item_plan(cg_ctx *c, const conv_geom *g, const conv_row *r, conv_xpack *pk, LLVMValueRef it,
                                    LLVMValueRef nthreads) {
  LLVMValueRef part = cg_i64(c, (int64_t)g->groups * g->ntile);
  if (g->flat && conv_flat_split_tiles(g)) it = conv_flat_split_item(c, g, it, nthreads, &part);
  double xbytes = (double)g->n * g->cin * g->h * g->w * (r->xdt != IR_F32 ? 2 : 4);
  if (g->flat && g->groups == 1 && !r->resid[0] && xbytes >= flat_pf_min_bytes(g) && flat_prefetch_ok(g, r) &&
      cg_tune(c)->flat_prefetch)
    pk->part = part; /* flat_prefetch */
  pk->pf_epi = g->flat && r->resid[0] && cg_tune(c)->flat_prefetch; /* flat_prefetch_epi */
  pk->nt = g->flat && flat_nt_ok(g, r); /* taken by packed chunks only (cg_conv_flat_pack_floats > 0) */
  pk->wpf = g->flat ? flat_w_pf_dist(g) : 0;
  return it;
}

void cg_conv_flat_pixels(cg_ctx *c, const conv_geom *g, conv_row *r, const conv_epi *e, int rr, LLVMValueRef xbuf,
                         LLVMValueRef xkey, LLVMValueRef chunk) {
  conv_xpack pk = {xbuf, xkey};
  cg_conv_ky_range(c, g, cg_i64(c, 0), r);
  cg_conv_flat_chunk(c, g, r, e, rr, xbuf ? &pk : NULL, chunk, cg_conv_flat_chunk_px(g));
}
