/* conv/bf16_plan.c — the compile-time part of the bf16 dot-product conv route
 * (conv/bf16_plan.h): the route's predicate, the plan (register tile, pixel chunks, row-segment
 * or gathered panels, pixel vectors spanning images) and the packed bf16 weights.  The
 * kernel: conv/bf16.c. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "codegen/cg_isa.h"
#include "codegen/conv/bf16_plan.h"
#include "codegen/conv/conv_core.h"

#define BF16_PANEL_BYTES (96 * 1024)   /* input panel per chunk (bf16 pairs), L2-resident */
#define BF16_STACK_MAX (256 * 1024)    /* largest stack buffer a kernel may take */
#define BF16_GATHER_MIN_CIN 16         /* fewer input channels: the f32 kernels */
#define BF16_GATHER_MIN_COUT 96        /* fewer output channels: the f32 kernels (gathered panels) */
#define BF16_LOAD_MIN_CIN 3            /* the same for panels of row-segment loads (seg_plan): */
#define BF16_LOAD_MIN_COUT 64          /* the stem (3 -> 64 7x7 s2) and layer1's 3x3s win there */
#define BF16_GATHER_STACK_MAX (1024 * 1024) /* gathered panels (K = taps x Cin): one tile of 512 x 3x3 */

/* ---- plan ------------------------------------------------------------------------------- */
uint32_t cg_conv_bf16_bits(float x) {
  float r = ir_round16_f32(x, IR_HALF_BF16);
  uint32_t u;
  memcpy(&u, &r, 4);
  if ((u & 0x7f800000u) == 0) u &= 0x80000000u;
  return u >> 16;
}

/* R x P as conv/conv_core.c's conv_choose_tile scores pixel tiles: accumulators x channel x pixel
 * utilisation, minus 0.25 per load of a step (R broadcasts + P panel vectors).  regs > 0: the
 * tile's accumulators, P panel vectors, a broadcast and a product register fit in regs vector
 * registers (vpmaddwd: no embedded broadcast, and its product is added separately). */
static void choose_tile(bgeom *g, int budget, int regs) {
  int64_t pv = (g->q + g->V - 1) / g->V;
  int pmax = (int)(pv < 4 ? pv : 4);
  double best = -1;
  for (int p = 1; p <= pmax; p++)
    for (int r = 1; r <= budget / p && r <= g->cout && (!regs || r * p + p + 2 <= regs); r++) {
      double uc = (double)g->cout / (double)(((g->cout + r - 1) / r) * r);
      int64_t tp = (int64_t)p * g->V;
      double up = (double)g->q / (double)(((g->q + tp - 1) / tp) * tp);
      double score = (double)(r * p) * uc * up - 0.25 * (r + p);
      if (score > best + 1e-9) best = score, g->R = r, g->P = p;
    }
  g->ntile = (int)((g->cout + g->R - 1) / g->R);
}

/* Panel vectors without gathers (stride 1 or 2 along a row): lane l of a pixel vector whose
 * lane 0 is at input offset A and whose output row is r rows below lane 0's reads
 * A + r * dseg + sw * l, dseg = sh iw - sw ow (0 for a 3x3 s1 pad 1: one contiguous run).  So a
 * vector is, per output row it touches (nseg at most), one masked load (stride 1) or two and
 * the even-lane shuffle (stride 2), each segment's lanes in-map only: the gather's lanes, 0
 * elsewhere.  Rows narrower than a quarter vector keep the gathers; tune bf16_gather=1: all. */
static void seg_plan(cg_ctx *c, bgeom *g) {
  g->dseg = g->sh * g->iw - g->sw * g->ow;
  /* a segment = the lanes of one key p / kdiv (p: pixel of the plane, spanned: of the batch) */
  g->kdiv = g->dseg == 0 ? g->hw : g->ow;
  g->nseg = g->dseg == 0 && !g->span ? 1 : (int)(1 + (g->kdiv + g->V - 2) / g->kdiv);
  int64_t nkey = g->q / g->kdiv;
  if (g->nseg > nkey) g->nseg = (int)nkey;
  if (g->flat || g->sw > 2 || g->nseg > 4 || cg_tune(c)->bf16_gather) g->nseg = 0;
}

/* Pixel vectors across images (kxk / strided convs on small maps, e.g. ResNet-50's 7x7 layer4
 * at b16: 49 pixels per image fill 4 vectors to 77 %, 784 per batch fill 49 to 100 %): the
 * work is one plane of q = n hw pixels, a pixel vector's lanes may lie in two images (hw >= V),
 * its panel segments are per image (and row), its results two masked stores.  Where the lanes
 * of the batch fill the vectors better by 5 points or more; tune bf16_span_force=1: wherever
 * allowed (tests), tune bf16_span=0: never (A/B).  Flat 1x1s too (then by 15 points or
 * more; tune bf16_flat_span=0: not, A/B): as a 1x1 s1 kxk conv, row-segment panels (two
 * segments per vector at most).  A fused residual add reads its two images' lanes with two
 * masked loads (span_load; tune bf16_span_add=0: no span with a residual add, A/B).  Not
 * where the batch's input offsets pass 2^31 (i32 gather lanes). */
static void span_plan(cg_ctx *c, const ir_node *n, bgeom *g) {
  g->q = g->hw;
  if (g->n < 2 || g->hw < g->V || g->n * g->cin * g->ih * g->iw >= INT32_MAX || !cg_tune(c)->bf16_span) return;
  if (g->flat && !cg_tune(c)->bf16_flat_span) return;
  const pass_fusion *fu = cg_fusion(c, n);
  for (int i = 0; i < fu->n_post; i++)
    if (c->g->nodes[fu->post[i]].op == IR_OP_add && !cg_tune(c)->bf16_span_add) return;
  int64_t q = g->n * g->hw;
  double ui = (double)g->hw / (double)((g->hw + g->V - 1) / g->V * g->V);
  double us = (double)q / (double)((q + g->V - 1) / g->V * g->V);
  /* flat 1x1s: 15 points (ResNet-50's 7x7 layer4 77 -> 100 %, not its 14x14 layer3 94 -> 100 %,
   * where the spanned conv3s measured 0.66-0.78x: no residual prefetch, other chunks) */
  if (us >= ui + (g->flat ? 0.15 : 0.05) || cg_tune(c)->bf16_span_force) g->span = 1, g->q = q, g->flat = 0; /* 1x1 s1: row-segment panels */
}

/* 1 (u8) / 2 (s8) when conv n reads a quantize8 result and the target has the int8 route. */
static int int8_input(cg_ctx *c, const ir_node *n) {
  int p = c->g->values[n->in[0]].producer;
  if (p < 0 || c->g->nodes[p].op != IR_OP_quantize8 || !cg_int8_dot(c->target, cg_tune(c))) return 0;
  return c->g->nodes[p].attr.quantize8.lo < 0 ? 2 : 1;
}

int cg_conv_bf16_plan(cg_ctx *c, const ir_node *n, bgeom *g) {
  const ir_shape *xs = &c->g->values[n->in[0]].shape, *ys = &c->g->values[n->out].shape;
  memset(g, 0, sizeof *g);
  g->q8 = int8_input(c, n);
  g->mode = g->q8 ? cg_int8_dot(c->target, cg_tune(c)) : cg_bf16_dot(c->target, cg_tune(c));
  g->amx = g->q8 ? cg_amx_int8_mode(c->target, cg_tune(c)) : cg_amx_mode(c->target, cg_tune(c));
  if (g->q8 && g->amx) g->mode = g->mode == 2 ? 2 : 1; /* tdpbsud's emulation: vpdpbusd steps, native or emulated */
  g->epd = g->q8 && g->mode != 3 ? 4 : 2; /* vpdpbusd, tdpbsud: 4 bytes a dword; vpmaddwd, bf16: 2 halves */
  const ir_conv2d_attr *a = &n->attr.conv2d;
  g->n = xs->dim[0], g->cin = xs->dim[1], g->cout = ys->dim[1], g->hw = ys->dim[2] * ys->dim[3];
  g->kh = a->kernel[0], g->kw = a->kernel[1], g->sh = a->stride[0], g->sw = a->stride[1];
  g->ph = a->pad[0], g->pw = a->pad[1], g->ih = xs->dim[2], g->iw = xs->dim[3], g->ow = ys->dim[3];
  g->flat = g->kh == 1 && g->kw == 1 && g->sh == 1 && g->sw == 1 && !a->pad[0] && !a->pad[1] && !a->pad[2] && !a->pad[3];
  g->kpc = (g->cin + g->epd - 1) / g->epd;
  g->kp = g->kpc * g->kh * g->kw;
  g->V = g->amx ? 16 : c->target->vec_f32; /* AMX: a tile row is 16 dwords */
  span_plan(c, n, g);
  seg_plan(c, g);
  if (g->amx) { /* 2 A x 2 B tiles into 4 accumulator tiles: 32 channels x 32 pixels per K step of 16 pairs */
    g->R = g->cout > 16 ? 32 : 16, g->P = g->q > 16 ? 2 : 1;
    g->ntile = (int)((g->cout + g->R - 1) / g->R);
  } else
    choose_tile(g, cg_acc_budget(c->target), g->q8 && g->mode == 3 ? (g->V >= 16 ? 32 : 16) : 0);
  g->kpr = g->amx ? (g->kp + 15) / 16 * 16 : g->kp;
  int64_t tile_px = (int64_t)g->P * g->V, k = BF16_PANEL_BYTES / (4 * g->kpr) / tile_px;
  if (k < 1) k = 1;
  int64_t whole = (g->q + tile_px - 1) / tile_px;
  g->chunk_px = (k < whole ? k : whole) * tile_px;
  g->nch = (g->q + g->chunk_px - 1) / g->chunk_px;
  return g->chunk_px * g->kpr * 4 <= (g->flat ? BF16_STACK_MAX : BF16_GATHER_STACK_MAX);
}

/* Whether value v is on the bf16 grid by construction: a bf16 round16 result (or its 16-bit
 * copy widened back, passes/store16.c), or a maxpool / relu of such a value (ResNet's maxpool
 * between the stem and layer1).  tune bf16_round16_in=1: round16 results only (A/B: the
 * maxpool's readers take the f32 kernels, "_x16" with 16-bit storage). */
static int bf16_grid(const ir_graph *G, int v) {
  int strict = ir_tune(G)->bf16_round16_in;
  for (;;) {
    int p = G->values[v].producer;
    if (p < 0) return 0;
    const ir_node *pn = &G->nodes[p];
    if (pn->op == IR_OP_round16) return pn->n_in == 1 && pn->attr.round16.format == IR_HALF_BF16;
    if (strict) return 0;
    if (pn->op == IR_OP_widen16) return pn->attr.widen16.format == IR_HALF_BF16;
    if (pn->op != IR_OP_maxpool && pn->op != IR_OP_relu) return 0;
    v = pn->in[0];
  }
}

/* The shapes the bf16 and int8 routes take (1: the plan fits, 0: not): groups 1, no dilation,
 * no squeeze-excite factor on the input; kxk / strided convs (only with kxk) with enough
 * channels.  Gathered panels: a stem's few channels leave dword lanes empty, and a panel
 * vector's gathers are paid back by Cout dot-product steps (ResNet-50 b16 per batch, CPU time:
 * conv1 3 -> 64 7x7 31 ms vs the f32 kernel's 23, layer1's 64 -> 64 3x3 22 vs 19-21; layer2's
 * 128 -> 128 16-17 vs 19-21); row-segment panels win on layer1's 3x3s too (opcmp 2 threads
 * 1.68-1.81x per CPU-second) and on the stem (1.21x).  Measured for vdpbf16ps; the int8 route
 * uses the same thresholds. */
static int route_shape_ok(cg_ctx *c, const ir_node *n, int kxk) {
  const ir_conv2d_attr *a = &n->attr.conv2d;
  int flat = a->kernel[0] == 1 && a->kernel[1] == 1 && a->stride[0] == 1 && a->stride[1] == 1 && !a->pad[0] && !a->pad[1] &&
             !a->pad[2] && !a->pad[3];
  if (a->groups > 1 || a->dilation[0] > 1 || a->dilation[1] > 1 || cg_fusion(c, n)->n_pre || (!flat && !kxk)) return 0;
  bgeom g;
  int ok = cg_conv_bf16_plan(c, n, &g);
  if (!flat && (g.cin < (g.nseg ? BF16_LOAD_MIN_CIN : BF16_GATHER_MIN_CIN) || g.cout < (g.nseg ? BF16_LOAD_MIN_COUT : BF16_GATHER_MIN_COUT)))
    return 0;
  return ok;
}

int cg_conv_bf16_match(cg_ctx *c, const ir_node *n, cg_kplan *kp) {
  (void)kp;
  return cg_conv_bf16_ok(c, n);
}

int cg_conv_int8_match(cg_ctx *c, const ir_node *n, cg_kplan *kp) {
  (void)kp;
  const cg_priv *pv = c->priv;
  if (n->op != IR_OP_conv2d || (pv && pv->train) || !int8_input(c, n)) return 0;
  const ir_value *w = &c->g->values[n->in[1]];
  if (!w->data || n->n_in > 2) return 0;
  for (int64_t i = 0; i < ir_shape_numel(&w->shape); i++)
    if (w->data[i] != nearbyintf(w->data[i]) || fabsf(w->data[i]) > 127) return 0; /* not int8 weights */
  return route_shape_ok(c, n, 1);
}

int cg_conv_bf16_ok(cg_ctx *c, const ir_node *n) {
  const cg_priv *pv = c->priv;
  if (n->op != IR_OP_conv2d || (pv && pv->train) || !cg_bf16_route(c->target, cg_tune(c), NULL, 0)) return 0;
  const ir_value *x = &c->g->values[n->in[0]], *w = &c->g->values[n->in[1]];
  if (x->shape.rank != 4 || x->producer < 0 || !w->data || !bf16_grid(c->g, n->in[0])) return 0;
  for (int64_t i = 0; i < ir_shape_numel(&w->shape); i++)
    if (ir_round16_f32(w->data[i], IR_HALF_BF16) != w->data[i]) return 0; /* not a bf16 weight */
  return route_shape_ok(c, n, cg_tune(c)->bf16_kxk); /* bf16_kxk=0 (A/B): kxk / strided convs keep the f32 kernels */
}

/* Where packed weight dword k of channel r of tile t goes: [tile][kp][R] for the vector
 * kernels, [tile][kpr/16][R][16] (A tiles of 16 dwords a row) for AMX. */
static int64_t w_slot(const bgeom *g, int64_t t, int64_t r, int64_t k) {
  return g->amx ? ((t * (g->kpr / 16) + k / 16) * g->R + r) * 16 + k % 16 : (t * g->kp + k) * g->R + r;
}

/* int8 weights of channel co (g->q8): dwords of epd channels, channel epd (k % kpc) + i in
 * byte i (4 s8, vpdpbusd, tdpbsud) or half i (2 s16, vpmaddwd), at w_slot (AMX: 0 past kp); returns 128 x their sum where the inputs are s8 stored + 128
 * (vpdpbusd's and tdpbsud's compensation), else 0. */
static int32_t pack_int8(const float *w, const bgeom *g, int64_t co, uint32_t *wp) {
  int64_t t = co / g->R, r = co % g->R, sum = 0, taps = g->kh * g->kw;
  int bits = 32 / g->epd;
  uint32_t mask = (1u << bits) - 1;
  for (int64_t k = 0; k < g->kpr; k++) { /* dword k: tap k / kpc, channels epd (k % kpc) .. + epd - 1 */
    int64_t tap = k / g->kpc, c0 = g->epd * (k % g->kpc);
    uint32_t d = 0;
    for (int i = 0; i < g->epd; i++)
      if (co < g->cout && k < g->kp && c0 + i < g->cin) {
        int q = (int)w[(co * g->cin + c0 + i) * taps + tap];
        d |= ((uint32_t)q & mask) << (bits * i), sum += q;
      }
    wp[w_slot(g, t, r, k)] = d;
  }
  return g->q8 == 2 && g->epd == 4 ? (int32_t)(128 * sum) : 0;
}

void cg_conv_bf16_pack(cg_ctx *c, const ir_node *n, const ir_node *bn, const bgeom *g, uint32_t *wp, float *bp, float *sp,
                       int32_t *comp) {
  const float *w = c->g->values[n->in[1]].data;
  for (int64_t co = 0; co < (int64_t)g->ntile * g->R; co++) {
    int64_t t = co / g->R, r = co % g->R;
    double scale = 1.0, shift = 0.0;
    if (co < g->cout) cg_conv_bn_fold(c, n, bn, co, &scale, &shift);
    bp[co] = (float)shift, sp[co] = (float)scale;
    if (g->q8) {
      comp[co] = pack_int8(w, g, co, wp);
      continue;
    }
    int taps = g->kh * g->kw;
    for (int64_t k = 0; k < g->kpr; k++) { /* pair k: tap k / kpc, channels 2 (k % kpc) and the next; AMX: 0 past kp */
      int64_t tap = k / g->kpc, c0 = 2 * (k % g->kpc), wi = (co * g->cin + c0) * taps + tap;
      int in = co < g->cout && k < g->kp;
      uint32_t lo = in ? cg_conv_bf16_bits(w[wi]) : 0;
      uint32_t hi = in && c0 + 1 < g->cin ? cg_conv_bf16_bits(w[wi + taps]) : 0;
      wp[w_slot(g, t, r, k)] = lo | hi << 16;
    }
  }
}

int cg_conv_bf16_io16(cg_ctx *c, const ir_node *n, int x) {
  if (!cg_tune(c)->bf16_io16) return 0;
  if (!x) return 1; /* the epilogue: any conv of the route */
  bgeom g;
  cg_conv_bf16_plan(c, n, &g);
  return g.flat || (g.nseg > 0 && cg_tune(c)->bf16_kxk_x16); /* plain or row-segment loads: not gathers */
}
