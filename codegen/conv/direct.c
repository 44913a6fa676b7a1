/* conv/direct.c — the direct route of inference convs (conv/direct.h) on NCHW: dense,
 * strided, padded, dilated, grouped and depthwise convs.  It plans the geometry
 * (cg_conv_geometry: pixel-vector or channel-vector register tiles), packs the weights with an
 * inference batchnorm folded in (cg_conv_pack), and walks the work items (image, group,
 * channel tile, output row or flat chunk) over the threads; each item's pixels run on the
 * pixel-vector tiles (conv/pixvec.c; flat 1x1 chunks conv/flat.c), the channel-vector tiles
 * (conv/chanvec.c, conv/chanvec_row.c) or the depthwise plane kernels (conv/dw.c), with a
 * fused squeeze-excite scale (conv/se.c) and epilogue. */
#include <stdlib.h>
#include <string.h>

#include "codegen/conv/chanvec.h"
#include "codegen/conv/chanvec_row.h"
#include "codegen/conv/direct.h"
#include "codegen/conv/dw.h"
#include "codegen/conv/flat.h"
#include "codegen/conv/pixvec.h"
#include "codegen/conv/se.h"

static const char *conv_kind(cg_ctx *c, const ir_node *n, const conv_geom *g, const pass_fusion *fu, const conv_row *r) {
  char op[128], tile[32];
  int k = snprintf(op, sizeof op, "conv2d%s%s", g->cin_g == 1 && g->cout_g == 1 ? "_dw" : g->groups > 1 ? "_g" : g->gemm ? "_1x1" : g->sub ? "_sub" : "",
                   g->dwp ? "_plane" : g->vc_plane ? "_vcp" : g->vc ? "_vc" : "");
  if (fu->n_pre) k += snprintf(op + k, sizeof op - (size_t)k, "_se"); /* squeeze-excite scale on its input */
  if (fu->bn >= 0) k += snprintf(op + k, sizeof op - (size_t)k, "_bn");
  for (int i = 0; i < fu->n_post && k < 100; i++)
    k += snprintf(op + k, sizeof op - (size_t)k, "_%s", ir_ops[c->g->nodes[fu->post[i]].op].name);
  if (fu->n_side) k += snprintf(op + k, sizeof op - (size_t)k, "_avgpool"); /* second output */
  ir_dtype h = r->xdt != IR_F32 ? r->xdt : r->odt; /* 16-bit storage: "_x16" reads x, "_o16" writes the result */
  for (int i = 0; i < PASS_MAX_POST && h == IR_F32; i++) h = r->rdt[i];
  if (h != IR_F32 && k < 110)
    snprintf(op + k, sizeof op - (size_t)k, "_%s%s%s", h == IR_F16 ? "fp16" : "bf16", r->xdt != IR_F32 ? "_x16" : "",
             r->odt != IR_F32 ? "_o16" : "");
  snprintf(tile, sizeof tile, "%dx%d", g->R, g->vc ? g->P : g->P * g->V); /* channels x pixels */
  return cg_kind(c, op, tile);
}

/* The pixels of one work item for rr channels: an output row, or a chunk of a flat conv. */
static void conv_item_body(cg_ctx *c, const conv_geom *g, const conv_row *r, const conv_epi *e, int rr,
                           const conv_xpack *pk, LLVMValueRef chunk) {
  if (g->flat) cg_conv_flat_chunk(c, g, r, e, rr, pk, chunk, cg_conv_flat_chunk_px(g));
  else if (g->vc_plane) cg_conv_vc_plane(c, g, r, e, rr);
  else if (g->vc) cg_conv_vc_row(c, g, r, e, rr);
  else cg_conv_row_emit(c, g, r, e, rr);
}

/* Rows of work per (image, channel tile): output rows, or pixel chunks of a flat conv. */
static int64_t conv_rows(const conv_geom *g) {
  return g->flat ? (g->ow + cg_conv_flat_chunk_px(g) - 1) / cg_conv_flat_chunk_px(g) : g->vc_plane ? 1 : g->oh;
}

/* Channel tiles per block of a non-flat conv: consecutive tiles whose packed weights fit the
 * op's L2 budget (cg_shard_tile_budget: --available-memory-proportion x L2 per core) less the
 * input rows of one output row, so a thread walks the output rows of one image for a block of
 * tiles with the block's weights in L2 and each input row reused by every tile of the block.
 * Rows-fastest with one tile per block streamed the whole input image from L3 once per tile:
 * ResNet-50's 1x1 stride-2 downsample convs (64 tiles of 32 KB) re-read a 0.8 MB image 64
 * times.  Measured with a 256 KB block (the default budget gives ~250 KB there). */
static int64_t conv_tile_block(const conv_geom *g) {
  int64_t tiles = (int64_t)g->groups * g->ntile, wt = (int64_t)g->cin_g * g->kh * g->kw * g->R * 4;
  int64_t rows_in = (int64_t)g->cin_g * g->kh * g->w * 4, room = g->l2 - rows_in;
  int64_t b = room / (wt > 0 ? wt : 1);
  /* grouped and depthwise convs: tiles of other groups read other input channels, so a block
   * reuses nothing and only breaks the rows-fastest walk of one group's input (ResNeXt-50's
   * grouped 3x3 convs and EfficientNet's depthwise ones ran 10-45 % slower blocked) */
  if (g->flat || g->groups > 1 || b < 1) b = 1;
  return b < tiles ? b : tiles;
}

/* Work item -> (image, group, channel tile, row) -> run-time row values; then its pixels.
 * Order: flat convs run channel tiles fastest (consecutive items reuse the x chunk); other
 * convs run blocks of conv_tile_block tiles: tile within the block fastest, then the row,
 * then the block (the last block may be shorter), then the image. */
static void conv_item(cg_ctx *c, const conv_geom *g, conv_row *r, const conv_epi *e, const conv_xpack *pk,
                      LLVMValueRef it) {
  int64_t tiles = (int64_t)g->groups * g->ntile, rows = conv_rows(g), B = conv_tile_block(g);
  LLVMValueRef row, tile, nb;
  conv_xpack pf;
  if (g->flat) {
    tile = LLVMBuildSRem(c->b, it, cg_i64(c, tiles), "tile");
    LLVMValueRef rest = LLVMBuildSDiv(c->b, it, cg_i64(c, tiles), "");
    row = LLVMBuildSRem(c->b, rest, cg_i64(c, rows), "chunk");
    nb = LLVMBuildSDiv(c->b, rest, cg_i64(c, rows), "nb");
    if (pk && pk->part) { /* flat_prefetch: the item's place in its thread's run of tiles of the chunk */
      pf = *pk;
      pf.pf_pos = LLVMBuildSRem(c->b, tile, pk->part, "pf_pos");
      pf.pf_cnt = cg_min64(c, pk->part, LLVMBuildSub(c->b, cg_i64(c, tiles), LLVMBuildSub(c->b, tile, pf.pf_pos, ""), ""));
      pk = &pf;
    }
  } else if (B <= 1) {
    row = LLVMBuildSRem(c->b, it, cg_i64(c, rows), "oy");
    LLVMValueRef rest = LLVMBuildSDiv(c->b, it, cg_i64(c, rows), "");
    tile = LLVMBuildSRem(c->b, rest, cg_i64(c, tiles), "tile");
    nb = LLVMBuildSDiv(c->b, rest, cg_i64(c, tiles), "nb");
  } else {
    LLVMValueRef per = cg_i64(c, rows * tiles);
    nb = LLVMBuildSDiv(c->b, it, per, "nb");
    LLVMValueRef j = LLVMBuildSRem(c->b, it, per, "j");
    LLVMValueRef blk = LLVMBuildSDiv(c->b, j, cg_i64(c, rows * B), "blk");
    LLVMValueRef k = LLVMBuildSRem(c->b, j, cg_i64(c, rows * B), "");
    LLVMValueRef t0 = LLVMBuildMul(c->b, blk, cg_i64(c, B), "t0");
    LLVMValueRef bs = cg_min64(c, cg_i64(c, B), LLVMBuildSub(c->b, cg_i64(c, tiles), t0, "")); /* tiles in this block */
    row = LLVMBuildSDiv(c->b, k, bs, "oy");
    tile = LLVMBuildAdd(c->b, t0, LLVMBuildSRem(c->b, k, bs, ""), "tile");
  }
  LLVMValueRef oy = g->flat ? cg_i64(c, 0) : row;
  LLVMValueRef gi = LLVMBuildSDiv(c->b, tile, cg_i64(c, g->ntile), "g");
  LLVMValueRef t = LLVMBuildSRem(c->b, tile, cg_i64(c, g->ntile), "t");
  LLVMValueRef co0 = LLVMBuildAdd(c->b, LLVMBuildMul(c->b, gi, cg_i64(c, g->cout_g), ""), LLVMBuildMul(c->b, t, cg_i64(c, g->R), ""), "co0");
  r->in_base = LLVMBuildMul(c->b, LLVMBuildAdd(c->b, LLVMBuildMul(c->b, nb, cg_i64(c, g->cin), ""), LLVMBuildMul(c->b, gi, cg_i64(c, g->cin_g), ""), ""),
                            cg_i64(c, g->h * g->w), "in_base");
  r->out_row = LLVMBuildAdd(c->b, LLVMBuildMul(c->b, LLVMBuildAdd(c->b, LLVMBuildMul(c->b, nb, cg_i64(c, g->ocs), ""), co0, ""), cg_i64(c, g->oh * g->ow), ""),
                            LLVMBuildMul(c->b, oy, cg_i64(c, g->ow), ""), "out_row");
  if (r->xs) r->xs_base = LLVMBuildAdd(c->b, LLVMBuildMul(c->b, nb, cg_i64(c, g->cin), ""), LLVMBuildMul(c->b, gi, cg_i64(c, g->cin_g), ""), "xs_base");
  cg_conv_se_item(c, g, r); /* channel vectors: the scaled planes of a new image (conv/se.c) */
  r->wbase = LLVMBuildMul(c->b, tile, cg_i64(c, g->cin_g * g->kh * g->kw * g->R), "wbase");
  r->bbase = LLVMBuildMul(c->b, tile, cg_i64(c, g->R), "bbase");
  cg_conv_ky_range(c, g, oy, r);
  int rem = (int)(g->cout_g % g->R);
  if (!rem) {
    conv_item_body(c, g, r, e, g->R, pk, row);
    return;
  }
  cg_if f;
  cg_if_begin(c, &f, LLVMBuildICmp(c->b, LLVMIntNE, t, cg_i64(c, g->ntile - 1), ""));
  conv_item_body(c, g, r, e, g->R, pk, row);
  cg_if_else(c, &f);
  conv_item_body(c, g, r, e, rem, pk, row);
  cg_if_end(c, &f);
}

/* 16-bit inference storage (passes/store16.c): the pixel-vector route (pixel tiles, flat 1x1
 * chunks) reads x and the residuals and writes the result in their dtypes; the others get f32
 * operands from the pass (widen16 nodes). */
static int io16_route(const conv_geom *g, const pass_fusion *fu) { return !g->vc && (!fu->n_side || g->dwp); }

/* Sets r's dtypes from the group's values; an internal error when a 16-bit value reaches a
 * route that reads f32 (the pass and gen_store16.c cg_conv_io16_ok disagree). */
static int conv_io16(cg_ctx *c, const ir_node *n, const conv_geom *g, const pass_fusion *fu, conv_row *r) {
  const ir_graph *G = c->g;
  int prev = fu->bn >= 0 ? G->nodes[fu->bn].out : n->out, ra = 0, any = 0;
  int xv = n->in[0];
  if (fu->n_pre) { /* the squeeze-excite map operand (cg_layout.c make_kernel): scaled after the widening load */
    const ir_node *pre = &G->nodes[fu->pre];
    const ir_shape *p0 = &G->values[pre->in[0]].shape, *p1 = &G->values[pre->in[1]].shape;
    xv = pre->in[p1->dim[2] * p1->dim[3] > p0->dim[2] * p0->dim[3]];
  }
  r->xdt = G->values[xv].dtype;
  any |= r->xdt != IR_F32;
  for (int q = 0; q < fu->n_post; q++) {
    const ir_node *m = &G->nodes[fu->post[q]];
    if (m->op == IR_OP_add) any |= (r->rdt[ra++] = G->values[m->in[0] == prev ? m->in[1] : m->in[0]].dtype) != IR_F32;
    prev = m->out;
  }
  r->odt = G->values[G->nodes[fu->last].out].dtype;
  any |= r->odt != IR_F32;
  if (any && !io16_route(g, fu))
    return cg_fail(c, n, "internal error: 16-bit operand of a conv kernel that reads f32"), -1;
  return 0;
}

/* The geometry the route's kernel runs: cg_conv_geometry, or the depthwise plane kernels
 * (conv/dw.c), which sum each plane for a fused pool (P = 4: the tile name, 1x32 on AVX2). */
static conv_geom direct_geom(cg_ctx *c, const ir_node *n, const pass_fusion *fu) {
  conv_geom g = cg_conv_geometry(c, n);
  g.dw_pool = fu->n_side;
  if (cg_conv_dw_plane_ok(&g)) g.dwp = 1, g.P = 4;
  return g;
}

int cg_conv_direct_io16_ok(cg_ctx *c, const ir_node *n) {
  const pass_fusion *fu = cg_fusion(c, n);
  conv_geom g = direct_geom(c, n, fu);
  return io16_route(&g, fu);
}

int cg_conv_direct_match(cg_ctx *c, const ir_node *n, cg_kplan *kp) {
  const pass_fusion *fu = cg_fusion(c, n);
  conv_geom g = direct_geom(c, n, fu);
  kp->R = g.R, kp->P = g.P, kp->V = g.V;
  if (!g.dwp && !g.flat) { /* conv_item's blocks of channel tiles */
    kp->tile_block = conv_tile_block(&g);
    kp->block_bytes = kp->tile_block * g.cin_g * g.kh * g.kw * g.R * 4 + (int64_t)g.cin_g * g.kh * g.w * 4;
  }
  return 1;
}

LLVMValueRef cg_gen_conv2d_direct(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind) {
  const pass_fusion *fu = cg_fusion(c, n);
  conv_geom g = direct_geom(c, n, fu);
  if (fu->n_side && !g.dwp) return cg_fail(c, n, "internal error: pool fused into a depthwise conv without a plane kernel");
  conv_epi e = {{0}, fu->n_post};
  int n_act = 1;
  for (int i = 0; i < fu->n_post; i++) {
    e.post[i] = &c->g->nodes[fu->post[i]];
    n_act += e.post[i]->op == IR_OP_add;
  }
  n_act += fu->n_pre + fu->n_side; /* squeeze-excite factors or pool output, after the residuals (cg_layout.c) */
  size_t wn = (size_t)g.groups * g.ntile * g.cin_g * g.kh * g.kw * g.R, bn = (size_t)g.groups * g.ntile * g.R;
  float *wp = malloc(wn * sizeof(float)), *bp = malloc(bn * sizeof(float));
  if (!wp || !bp) abort();
  if (!cg_plan_only(c)) cg_conv_pack(c, n, fu->bn >= 0 ? &c->g->nodes[fu->bn] : NULL, &g, wp, bp);
  LLVMValueRef a[IR_MAX_IN + PASS_MAX_POST + 4];
  LLVMValueRef f = cg_kernel_begin(c, fn_name, n_act, a);
  conv_row r;
  memset(&r, 0, sizeof r);
  r.x = a[0];
  for (int i = 1; i < n_act - fu->n_pre - fu->n_side; i++) r.resid[i - 1] = a[i];
  if (fu->n_pre) r.xs = a[n_act - 1];
  if (fu->n_side) r.pool = a[n_act - 1];
  r.out = a[n_act];
  if (conv_io16(c, n, &g, fu, &r) < 0) {
    free(wp), free(bp);
    return NULL;
  }
  r.wp = cg_blob_const(c, "conv.w", wp, wn * sizeof(float));
  r.bp = cg_blob_const(c, "conv.b", bp, bn * sizeof(float));
  free(wp);
  free(bp);
  LLVMValueRef lo, hi;
  int64_t items = g.dwp ? g.n * g.groups : g.n * g.groups * g.ntile * conv_rows(&g);
  cg_thread_range(c, cg_i64(c, items), a[n_act + 1], a[n_act + 2], &lo, &hi);
  conv_xpack pk = {NULL, NULL, NULL, NULL, NULL, 0, 0};
  int64_t pf = g.dwp ? 0 : cg_conv_flat_pack_floats(&g);
  if (pf > 0) {
    LLVMValueRef buf = cg_entry_alloca(c, LLVMArrayType2(cg_vtype(c, g.V), (uint64_t)((pf + g.V - 1) / g.V)), "xpack");
    LLVMSetAlignment(buf, 64);
    pk.buf = buf, pk.key = cg_entry_alloca(c, c->t_i64, "xpack_key");
    LLVMBuildStore(c->b, cg_i64(c, -1), pk.key);
  }
  cg_conv_se_begin(c, &g, &r);
  cg_loop L;
  LLVMValueRef it = cg_loop_begin(c, &L, lo, hi, cg_i64(c, 1), "item");
  if (g.dwp) { /* item = (image, channel): in/out planes it, weights and bias of channel it % C */
    LLVMValueRef ch = LLVMBuildSRem(c->b, it, cg_i64(c, g.groups), "ch");
    r.in_base = LLVMBuildMul(c->b, it, cg_i64(c, g.h * g.w), "in_base");
    r.out_row = LLVMBuildMul(c->b, it, cg_i64(c, g.oh * g.ow), "out_row");
    r.wbase = LLVMBuildMul(c->b, ch, cg_i64(c, (int64_t)g.kh * g.kw), "wbase");
    r.bbase = ch;
    cg_conv_dw_plane(c, &g, &r, &e);
  } else {
    it = cg_conv_flat_item_plan(c, &g, &r, &pk, it, a[n_act + 2]); /* flat convs: thread order, prefetches */
    conv_item(c, &g, &r, &e, pk.buf ? &pk : NULL, it);
  }
  cg_loop_end(c, &L);
  if (pk.nt && pk.buf) /* vmovntps are weakly ordered: fence them before the runtime's barrier publishes y */
    cg_intrinsic(c, "llvm.x86.sse.sfence", NULL, 0, NULL, 0);
  cg_kernel_end(c);
  *kind = conv_kind(c, n, &g, fu, &r);
  return f;
}

void cg_conv_row_pixels(cg_ctx *c, const conv_geom *g, conv_row *r, const conv_epi *e, int rr, LLVMValueRef oy) {
  cg_conv_ky_range(c, g, oy, r);
  if (g->vc) cg_conv_vc_row(c, g, r, e, rr);
  else cg_conv_row_emit(c, g, r, e, rr);
}
