/* conv/dw.c — depthwise conv2d (one input and one output channel per group) on small
 * planes whose output width equals the input width, stride 1 (EfficientNet's 3x3/5x5 convs
 * on 14 and 7 wide maps) or stride 2 through a split into four phase planes: a channel's
 * output plane is one flat row of oh*ow pixels in vectors of V, a vector may span rows, and
 * tap (ky, kx) of output pixel q reads input element q + (ky*dh - pt)*W + kx*dw - pl.  Every
 * tile is a compile-time position, so the lanes whose row or column falls into the padding
 * are constant masks: a plain load and a select with zero inside the plane, a masked load
 * where the vector leaves it, nothing for a tap with no valid lane.  One work item = one
 * (image, channel) plane.  Larger maps (stride 1 or 2, rows of at most 32 vectors) take the
 * row-tiled kernel at the end of this file: tiles of R output rows x P vectors that load
 * each input row once per tap column for all R rows (stride 2 through rows split into even
 * and odd columns).  Both can sum each plane as they store it, for a global_avgpool fused
 * as a second output (squeeze-excite). */
#include <stdlib.h>
#include <string.h>

#include "codegen/conv/dw.h"
#include "codegen/gen_round16.h"

/* 16-bit inference storage (passes/store16.c): the node of the kernel, for conversion errors */
static const ir_node *dw_node(cg_ctx *c) { return &c->g->nodes[((cg_priv *)c->priv)->node]; }

/* vectors per tile (accumulators); the 3x3 taps (9 broadcasts) stay in registers beside them */
#define DW_TILE_VECTORS 4
/* code size: at most this many (vector, tap) pairs per item (14x14 5x5 = 25 x 25).  28x28 5x5
 * (98 x 25, ~50 KB of straight code per item, over the 32 KB L1i) ran 0.67x the per-row kernel */
#define DW_MAX_VECTOR_TAPS 640
#define DW_MAX_TAPS 49
/* stride 2: pixels per phase plane of the stack buffer (4 phases x 4 KB at most) */
#define DW_MAX_PHASE_PX 1024

static int dw_rows_ok(const conv_geom *g);
static int dw_flat_ok(const conv_geom *g);

/* 1: the flat-plane kernel; 2: the row-tiled plane kernel (large maps, below); 0: neither. */
int cg_conv_dw_plane_ok(const conv_geom *g) {
  if (dw_flat_ok(g)) return 1;
  return dw_rows_ok(g) ? 2 : 0;
}

static int dw_flat_ok(const conv_geom *g) {
  if (g->cin_g != 1 || g->cout_g != 1 || g->groups < 1 || g->flat || g->vc || g->V < 4) return 0;
  int s1 = g->sh == 1 && g->sw == 1 && g->ow == g->w;
  int s2 = g->sh == 2 && g->sw == 2 && g->ow == (g->w + 1) / 2 && (g->h + 1) / 2 * g->ow <= DW_MAX_PHASE_PX;
  int taps = g->kh * g->kw;
  int64_t nv = (g->oh * g->ow + g->V - 1) / g->V;
  /* stride 2 pays for the scalar phase split (h*w copies) only with enough taps per pixel:
   * EfficientNet's 14 -> 7 5x5 conv 1.70x, its 28 -> 14 3x3 conv (784 copies for 225 vector
   * FMAs) 0.97x the per-row kernel */
  if (s2 && g->h * g->w > 2 * nv * taps) return 0;
  return (s1 || s2) && taps > 1 && taps <= DW_MAX_TAPS && nv * taps <= DW_MAX_VECTOR_TAPS;
}

static int64_t floor2(int64_t a) { return a >= 0 ? a / 2 : -((1 - a) / 2); }

/* Where tap (ky, kx) of the vector at output pixel q0 reads: element *idx (lane 0) of the
 * channel plane (stride 1) or of the phase buffer (stride 2: plane (py, px) holds input rows
 * 2i+py and columns 2j+px, (h+1)/2 x ow each).  Returns the lanes whose pixel is in the plane
 * and whose tap reads a real input pixel; *inside: every lane of the load lies in the plane or
 * buffer (a plain load is safe). */
static unsigned dw_src(const conv_geom *g, int64_t q0, int ky, int kx, int64_t *idx, int *inside) {
  int64_t ay = (int64_t)ky * g->dh - g->pt, ax = (int64_t)kx * g->dw - g->pl, size;
  if (g->sh == 1) {
    *idx = q0 + ay * g->w + ax, size = g->h * g->w;
  } else {
    int64_t dy = floor2(ay), dx = floor2(ax), ph = (g->h + 1) / 2 * g->ow;
    *idx = ((ay - 2 * dy) * 2 + (ax - 2 * dx)) * ph + q0 + dy * g->ow + dx, size = 4 * ph;
  }
  *inside = *idx >= 0 && *idx + g->V <= size;
  unsigned m = 0;
  for (int l = 0; l < g->V; l++) {
    int64_t q = q0 + l, oy = q / g->ow, ox = q % g->ow;
    int64_t iy = oy * g->sh + ay, ix = ox * g->sw + ax;
    if (q < g->oh * g->ow && iy >= 0 && iy < g->h && ix >= 0 && ix < g->w) m |= 1u << l;
  }
  return m;
}

static LLVMValueRef dw_input(cg_ctx *c, const conv_geom *g, LLVMValueRef src, LLVMValueRef base, int64_t q0, int ky,
                             int kx, ir_dtype dt) {
  int V = g->V, inside;
  int64_t at;
  unsigned full = (1u << V) - 1, m = dw_src(g, q0, ky, kx, &at, &inside);
  if (!m) return NULL;
  LLVMValueRef idx = LLVMBuildAdd(c->b, base, cg_i64(c, at), "");
  if (!inside) return cg_act_masked_load(c, dw_node(c), src, idx, m, V, dt);
  LLVMValueRef v = cg_act_load(c, dw_node(c), src, idx, V, dt);
  if (m == full) return v;
  return LLVMBuildSelect(c->b, cg_conv_mask_const(c, m, V), v, cg_fzero(c, V), "pad");
}

/* Stride 2: the channel plane split into its four phases (even/odd rows x even/odd columns)
 * in a stack buffer, so every tap reads consecutive elements of one phase.  Returns the
 * buffer. */
static LLVMValueRef dw_phases(cg_ctx *c, const conv_geom *g, const conv_row *r) {
  int64_t ph = (g->h + 1) / 2 * g->ow;
  LLVMValueRef buf = cg_conv_opaque_ptr(c, cg_entry_alloca(c, LLVMArrayType2(c->t_f32, (uint64_t)(4 * ph)), "phases"));
  cg_loop L;
  LLVMValueRef iy = cg_loop_begin(c, &L, cg_i64(c, 0), cg_i64(c, g->h), cg_i64(c, 1), "iy");
  LLVMValueRef src = LLVMBuildAdd(c->b, r->in_base, LLVMBuildMul(c->b, iy, cg_i64(c, g->w), ""), "");
  LLVMValueRef py = LLVMBuildAnd(c->b, iy, cg_i64(c, 1), "");
  LLVMValueRef dst = LLVMBuildAdd(c->b, LLVMBuildMul(c->b, py, cg_i64(c, 2 * ph), ""),
                                  LLVMBuildMul(c->b, LLVMBuildAShr(c->b, iy, cg_i64(c, 1), ""), cg_i64(c, g->ow), ""), "");
  for (int64_t ix = 0; ix < g->w; ix++)
    cg_store_f32(c, cg_act_load(c, dw_node(c), r->x, LLVMBuildAdd(c->b, src, cg_i64(c, ix), ""), 1, r->xdt), buf,
                 LLVMBuildAdd(c->b, dst, cg_i64(c, (ix & 1) * ph + ix / 2), ""));
  cg_loop_end(c, &L);
  return buf;
}

/* ---- a fused global_avgpool (squeeze-excite; pass_fusion.n_side): every stored vector is
 * added to a per-item vector sum, whose lanes are added in order at the end of the item and
 * divided by the plane's size into r->pool[image*C + channel] (the item's plane index). */
static LLVMValueRef dw_pool_begin(cg_ctx *c, const conv_geom *g, const conv_row *r) {
  if (!r->pool) return NULL;
  LLVMValueRef sum = cg_entry_alloca(c, cg_vtype(c, g->V), "poolsum");
  LLVMBuildStore(c->b, cg_fzero(c, g->V), sum);
  return sum;
}

static void dw_pool_add(cg_ctx *c, const conv_geom *g, LLVMValueRef sum, LLVMValueRef v, unsigned m) {
  if (!sum) return;
  unsigned full = (1u << g->V) - 1;
  if (m != full) v = LLVMBuildSelect(c->b, cg_conv_mask_const(c, m, g->V), v, cg_fzero(c, g->V), "");
  LLVMBuildStore(c->b, LLVMBuildFAdd(c->b, LLVMBuildLoad2(c->b, cg_vtype(c, g->V), sum, ""), v, ""), sum);
}

static void dw_pool_end(cg_ctx *c, const conv_geom *g, const conv_row *r, LLVMValueRef sum) {
  if (!sum) return;
  LLVMValueRef v = LLVMBuildLoad2(c->b, cg_vtype(c, g->V), sum, ""), t = LLVMBuildExtractElement(c->b, v, cg_i32(c, 0), "");
  for (int l = 1; l < g->V; l++) t = LLVMBuildFAdd(c->b, t, LLVMBuildExtractElement(c->b, v, cg_i32(c, l), ""), "");
  LLVMValueRef plane = LLVMBuildSDiv(c->b, r->out_row, cg_i64(c, g->oh * g->ow), "plane");
  cg_store_f32(c, LLVMBuildFDiv(c->b, t, cg_f32(c, (float)(g->oh * g->ow)), "mean"), r->pool, plane);
}

/* Fused ops, the pool's sum and the store of v at element oi, lanes m (16-bit storage: the
 * residuals read and the result written in their dtypes; a fused round16 still rounds, as
 * the pool sums the rounded values, and the store narrows that grid value exactly). */
static void dw_epilogue_store(cg_ctx *c, const conv_geom *g, const conv_row *r, const conv_epi *e, LLVMValueRef v,
                              LLVMValueRef oi, unsigned m, LLVMValueRef sum) {
  int V = g->V;
  unsigned full = (1u << V) - 1;
  for (int k = 0, ra = 0; k < e->n_post; k++) {
    ir_dtype rdt = e->post[k]->op == IR_OP_add ? r->rdt[ra] : IR_F32;
    LLVMValueRef res = e->post[k]->op == IR_OP_add ? r->resid[ra++] : NULL;
    if (res && m != full) v = LLVMBuildFAdd(c->b, v, cg_act_masked_load(c, e->post[k], res, oi, m, V, rdt), "resid");
    else if (res && rdt != IR_F32) v = LLVMBuildFAdd(c->b, v, cg_act_load(c, e->post[k], res, oi, V, rdt), "resid");
    else v = cg_epilogue(c, e->post[k], v, res, oi, V);
  }
  dw_pool_add(c, g, sum, v, m);
  const ir_node *last = e->n_post ? e->post[e->n_post - 1] : dw_node(c);
  if (m == full) cg_act_store(c, last, v, r->out, oi, V, r->odt);
  else cg_act_masked_store(c, last, v, r->out, oi, m, V, r->odt);
}

/* Bias, fused ops and the store of the vector at q0 (masked past the plane's end). */
static void dw_store(cg_ctx *c, const conv_geom *g, const conv_row *r, const conv_epi *e, LLVMValueRef v,
                     LLVMValueRef bias, int64_t q0, LLVMValueRef sum) {
  int V = g->V;
  unsigned m = 0;
  for (int l = 0; l < V; l++)
    if (q0 + l < g->oh * g->ow) m |= 1u << l;
  LLVMValueRef oi = LLVMBuildAdd(c->b, r->out_row, cg_i64(c, q0), "oi");
  v = LLVMBuildFAdd(c->b, v, bias, "");
  dw_epilogue_store(c, g, r, e, v, oi, m, sum);
}

static void dw_rows(cg_ctx *c, const conv_geom *g, const conv_row *r, const conv_epi *e);

void cg_conv_dw_plane(cg_ctx *c, const conv_geom *g, const conv_row *r, const conv_epi *e) {
  if (!dw_flat_ok(g)) {
    dw_rows(c, g, r, e);
    return;
  }
  int V = g->V;
  int64_t nv = (g->oh * g->ow + V - 1) / V, nt = (nv + DW_TILE_VECTORS - 1) / DW_TILE_VECTORS;
  LLVMValueRef bias = cg_splat(c, cg_load_f32(c, r->bp, r->bbase), V);
  LLVMValueRef src = r->x, base = r->in_base, sum = dw_pool_begin(c, g, r);
  if (g->sh == 2) src = dw_phases(c, g, r), base = cg_i64(c, 0);
  for (int64_t t = 0; t < nt; t++) { /* tiles of balanced width: 25 vectors = 4+4+4+4+3+3+3 */
    int64_t v0 = nv * t / nt, np = nv * (t + 1) / nt - v0;
    /* each tile broadcasts its taps from memory where it uses them: hoisted once per item, the
     * 25 broadcasts of a 5x5 kernel were kept live across all tiles and spilled (AVX2: ~1000
     * stack accesses in features/5's kernel); the opaque pointer stops GVN merging them */
    LLVMValueRef wp = cg_conv_opaque_ptr(c, r->wp);
    LLVMValueRef acc[DW_TILE_VECTORS];
    for (int64_t p = 0; p < np; p++) acc[p] = cg_fzero(c, V);
    for (int ky = 0; ky < g->kh; ky++)
      for (int kx = 0; kx < g->kw; kx++) {
        LLVMValueRef w = NULL;
        for (int64_t p = 0; p < np; p++) {
          LLVMValueRef x = dw_input(c, g, src, base, (v0 + p) * V, ky, kx, g->sh == 2 ? IR_F32 : r->xdt);
          if (!x) continue;
          if (!w) w = cg_splat(c, cg_load_f32(c, wp, LLVMBuildAdd(c->b, r->wbase, cg_i64(c, ky * g->kw + kx), "")), V);
          acc[p] = cg_fma(c, w, x, acc[p]);
        }
      }
    for (int64_t p = 0; p < np; p++) dw_store(c, g, r, e, acc[p], bias, (v0 + p) * V, sum);
  }
  dw_pool_end(c, g, r, sum);
}

/* ---- large maps: register tiles of R output rows x P vectors ----------------------------
 * One work item is still one (image, channel) plane.  The plane is walked in tiles of R
 * output rows; the columns are unrolled at compile time (P vectors per column tile, lane
 * masks of the borders are constants).  Inside a tile every input row j that the R rows
 * read is loaded once per tap column kx and feeds every output row r whose tap row ky =
 * (j - r*s)/dh is in the kernel: (R-1)*s + kh input rows per R*kh tap rows.  Input rows
 * above or below the plane read a row of zeros (a pointer select, no branch).  Stride 2:
 * each input row of the tile is first split into its even and odd columns (two loads, two
 * shuffles and two stores per 2V columns) in a stack buffer with zero halos, so every tap
 * is one unmasked load of consecutive elements of one phase. */

/* output vectors per row at most (the columns are unrolled) */
#define DW_ROWS_MAX_VECTORS 32
/* stride 2: floats of the row buffer (the split input rows of one row tile) */
#define DW_ROWS_MAX_BUF 8192
#define DW_ROWS_MAX_IN 64

typedef struct dw_rows_geom {
  int R, P, hoist;        /* tile: R output rows x P vectors; tap broadcasts hoisted per item */
  int64_t nvo;            /* output vectors per row */
  int64_t hl, pl, nchunk; /* stride 2: phase px of buffer row j at (2j + px)*pl + hl; chunks of 2V columns */
} dw_rows_geom;

static int dw_rows_nin(const conv_geom *g, int nr) { return (nr - 1) * g->sh + (g->kh - 1) * g->dh + 1; }

/* 3x3 and smaller: the taps' broadcasts are hoisted per item (9) beside 4 rows x 1 vector
 * of accumulators; larger kernels broadcast each tap where a row uses it, on 4 rows x 2
 * vectors.  (EfficientNet-B0 batch 1, opcmp at load ~27, so +-20 %: 5x5 4x2 vs 2x4 1.14-1.2x;
 * 3x3 4x1 hoisted vs not, or 4x2: no difference above the noise.) */
static dw_rows_geom dw_rows_geometry(const conv_geom *g) {
  dw_rows_geom t;
  int V = g->V;
  memset(&t, 0, sizeof t);
  t.nvo = (g->ow + V - 1) / V;
  t.hoist = g->kh * g->kw <= 9;
  t.R = 4, t.P = t.hoist ? 1 : 2;
  if (t.R > g->oh) t.R = (int)g->oh;
  if (t.P > t.nvo) t.P = (int)t.nvo;
  if (g->sh == 2) {
    int64_t dxmin = floor2(-(int64_t)g->pl), dxmax = floor2((int64_t)(g->kw - 1) * g->dw - g->pl);
    t.nchunk = (g->w + 2 * V - 1) / (2 * V);
    t.hl = dxmin < 0 ? (-dxmin + V - 1) / V * V : 0;
    int64_t need = t.nvo * V + dxmax, have = t.nchunk * V;
    t.pl = t.hl + have + (need > have ? (need - have + V - 1) / V * V : 0);
  }
  return t;
}

static int dw_rows_ok(const conv_geom *g) {
  if (g->cin_g != 1 || g->cout_g != 1 || g->groups < 1 || g->flat || g->vc || g->V < 4 || g->V > 16) return 0;
  if (g->sw != g->sh || (g->sh != 1 && g->sh != 2) || g->oh < 1 || g->ow < 1) return 0;
  int taps = g->kh * g->kw;
  if (taps < 2 || taps > DW_MAX_TAPS) return 0;
  dw_rows_geom t = dw_rows_geometry(g);
  int nin = dw_rows_nin(g, t.R);
  if (t.nvo > DW_ROWS_MAX_VECTORS || nin > DW_ROWS_MAX_IN) return 0;
  /* 3x3 stride 2 on maps over 64 wide keeps the per-row engine: EfficientNet-B0's 112 -> 56
   * conv measured 0.81-1.06x (three opcmp runs at load ~25) where the 28 -> 14 one gained
   * 1.14-1.20x; its 4.8 MB input per image comes from L3/DRAM either way */
  if (g->sh == 2 && t.hoist && g->w > 64 && !g->dw_pool) return 0; /* with a fused pool: no pass left to save */
  return g->sh == 1 || (int64_t)nin * 2 * t.pl <= DW_ROWS_MAX_BUF;
}

/* Start of input row iy of the item's plane, or of the zero row when iy is padding. */
static LLVMValueRef dw_row_ptr(cg_ctx *c, const conv_geom *g, const conv_row *r, LLVMValueRef zero, LLVMValueRef iy) {
  LLVMValueRef in = LLVMBuildICmp(c->b, LLVMIntULT, iy, cg_i64(c, g->h), "inrow");
  LLVMValueRef off = LLVMBuildAdd(c->b, r->in_base, LLVMBuildMul(c->b, iy, cg_i64(c, g->w), ""), "");
  LLVMValueRef p = LLVMBuildGEP2(c->b, r->xdt != IR_F32 ? LLVMInt16TypeInContext(c->llc) : c->t_f32, r->x, &off, 1, "rowp");
  return LLVMBuildSelect(c->b, in, p, zero, "row");
}

/* Lanes l with from + l < lim (from may be past lim). */
static unsigned dw_lanes_below(int V, int64_t from, int64_t lim) {
  unsigned m = 0;
  for (int l = 0; l < V; l++)
    if (from + l < lim) m |= 1u << l;
  return m;
}

/* Stride 1: tap column kx of the output vector at column ox from row pointer rowp; NULL
 * when no lane reads a real pixel. */
static LLVMValueRef dw_rows_load1(cg_ctx *c, const conv_geom *g, LLVMValueRef rowp, int64_t ox, int kx, ir_dtype dt) {
  int V = g->V;
  int64_t lo = ox + (int64_t)kx * g->dw - g->pl;
  unsigned m = 0;
  for (int l = 0; l < V; l++)
    if (ox + l < g->ow && lo + l >= 0 && lo + l < g->w) m |= 1u << l;
  if (!m) return NULL;
  if (lo >= 0 && lo + V <= g->w) return cg_act_load(c, dw_node(c), rowp, cg_i64(c, lo), V, dt); /* lanes past ow are never stored */
  return cg_act_masked_load(c, dw_node(c), rowp, cg_i64(c, lo), m, V, dt);
}

/* Stride 2: input rows iy0 .. iy0+nin-1 split into even/odd columns in buf (zero halos). */
static void dw_rows_split(cg_ctx *c, const conv_geom *g, const dw_rows_geom *t, const conv_row *r, LLVMValueRef buf,
                          LLVMValueRef zero, LLVMValueRef iy0, int nin) {
  int V = g->V;
  unsigned full = (1u << V) - 1;
  LLVMValueRef ev[32], od[32];
  for (int l = 0; l < V; l++) ev[l] = cg_i32(c, 2 * l), od[l] = cg_i32(c, 2 * l + 1);
  LLVMValueRef evm = LLVMConstVector(ev, (unsigned)V), odm = LLVMConstVector(od, (unsigned)V);
  cg_loop J;
  LLVMValueRef j = cg_loop_begin(c, &J, cg_i64(c, 0), cg_i64(c, nin), cg_i64(c, 1), "dwsplit");
  LLVMValueRef rowp = dw_row_ptr(c, g, r, zero, LLVMBuildAdd(c->b, iy0, j, ""));
  LLVMValueRef dst = LLVMBuildMul(c->b, j, cg_i64(c, 2 * t->pl), "");
  for (int px = 0; px < 2; px++) {
    LLVMValueRef d = LLVMBuildAdd(c->b, dst, cg_i64(c, px * t->pl), "");
    for (int64_t o = 0; o < t->hl; o += V) cg_store_v(c, cg_fzero(c, V), buf, LLVMBuildAdd(c->b, d, cg_i64(c, o), ""), V);
    for (int64_t o = t->hl + t->nchunk * V; o < t->pl; o += V)
      cg_store_v(c, cg_fzero(c, V), buf, LLVMBuildAdd(c->b, d, cg_i64(c, o), ""), V);
  }
  for (int64_t k = 0; k < t->nchunk; k++) {
    LLVMValueRef h[2];
    for (int i = 0; i < 2; i++) {
      int64_t at = (2 * k + i) * V;
      unsigned m = dw_lanes_below(V, at, g->w);
      h[i] = m == full ? cg_act_load(c, dw_node(c), rowp, cg_i64(c, at), V, r->xdt)
           : m ? cg_act_masked_load(c, dw_node(c), rowp, cg_i64(c, at), m, V, r->xdt) : cg_fzero(c, V);
    }
    LLVMValueRef d = LLVMBuildAdd(c->b, dst, cg_i64(c, t->hl + k * V), "");
    cg_store_v(c, LLVMBuildShuffleVector(c->b, h[0], h[1], evm, "even"), buf, d, V);
    cg_store_v(c, LLVMBuildShuffleVector(c->b, h[0], h[1], odm, "odd"), buf,
               LLVMBuildAdd(c->b, d, cg_i64(c, t->pl), ""), V);
  }
  cg_loop_end(c, &J);
}

typedef struct dw_rows_item {   /* values of one item and row tile */
  LLVMValueRef wv[DW_MAX_TAPS]; /* hoisted tap broadcasts (t->hoist) */
  LLVMValueRef rows[DW_ROWS_MAX_IN]; /* stride 1: input row pointers of the tile */
  LLVMValueRef buf, bias, oy0;  /* stride 2: split rows */
  LLVMValueRef sum;             /* fused pool: the item's vector sum (dw_pool_begin) */
} dw_rows_item;

/* One tile: nr output rows from oy0 x np vectors from column ox0 (compile time). */
static void dw_rows_tile(cg_ctx *c, const conv_geom *g, const dw_rows_geom *t, const conv_row *r, const conv_epi *e,
                         const dw_rows_item *it, int nr, int64_t ox0, int np) {
  int V = g->V, s = g->sh, nin = dw_rows_nin(g, nr);
  LLVMValueRef acc[4][4], wp = t->hoist ? NULL : cg_conv_opaque_ptr(c, r->wp);
  for (int i = 0; i < nr; i++)
    for (int p = 0; p < np; p++) acc[i][p] = cg_fzero(c, V);
  for (int j = 0; j < nin; j++)
    for (int kx = 0; kx < g->kw; kx++) {
      LLVMValueRef x[4] = {0};
      int any = 0;
      for (int i = 0; i < nr && !any; i++) {
        int d = j - i * s;
        any = d >= 0 && d % g->dh == 0 && d / g->dh < g->kh;
      }
      if (!any) continue;
      for (int p = 0; p < np; p++) {
        int64_t ox = ox0 + (int64_t)p * V;
        if (s == 1) {
          x[p] = dw_rows_load1(c, g, it->rows[j], ox, kx, r->xdt);
        } else {
          int64_t a = (int64_t)kx * g->dw - g->pl, dx = floor2(a), px = a - 2 * dx;
          x[p] = cg_load_v(c, it->buf, cg_i64(c, (2 * j + px) * t->pl + t->hl + ox + dx), V);
        }
      }
      for (int i = 0; i < nr; i++) {
        int d = j - i * s;
        if (d < 0 || d % g->dh || d / g->dh >= g->kh) continue;
        int tap = d / g->dh * g->kw + kx;
        LLVMValueRef w = t->hoist ? it->wv[tap]
                       : cg_splat(c, cg_load_f32(c, wp, LLVMBuildAdd(c->b, r->wbase, cg_i64(c, tap), "")), V);
        for (int p = 0; p < np; p++)
          if (x[p]) acc[i][p] = cg_fma(c, w, x[p], acc[i][p]);
      }
    }
  for (int i = 0; i < nr; i++) {
    LLVMValueRef orow = LLVMBuildAdd(c->b, r->out_row, LLVMBuildMul(c->b, LLVMBuildAdd(c->b, it->oy0, cg_i64(c, i), ""),
                                                                    cg_i64(c, g->ow), ""), "");
    for (int p = 0; p < np; p++) {
      int64_t ox = ox0 + (int64_t)p * V;
      unsigned m = dw_lanes_below(V, ox, g->ow);
      LLVMValueRef oi = LLVMBuildAdd(c->b, orow, cg_i64(c, ox), "oi"), v = LLVMBuildFAdd(c->b, acc[i][p], it->bias, "");
      dw_epilogue_store(c, g, r, e, v, oi, m, it->sum);
    }
  }
}

/* nr output rows from it->oy0: the tile's input rows, then every column tile. */
static void dw_rows_block(cg_ctx *c, const conv_geom *g, const dw_rows_geom *t, const conv_row *r, const conv_epi *e,
                          dw_rows_item *it, LLVMValueRef zero, int nr) {
  int nin = dw_rows_nin(g, nr);
  LLVMValueRef iy0 = LLVMBuildSub(c->b, LLVMBuildMul(c->b, it->oy0, cg_i64(c, g->sh), ""), cg_i64(c, g->pt), "iy0");
  if (g->sh == 2) dw_rows_split(c, g, t, r, it->buf, zero, iy0, nin);
  else
    for (int j = 0; j < nin; j++) it->rows[j] = dw_row_ptr(c, g, r, zero, LLVMBuildAdd(c->b, iy0, cg_i64(c, j), ""));
  int64_t nt = (t->nvo + t->P - 1) / t->P;
  for (int64_t k = 0; k < nt; k++) { /* column tiles of balanced width */
    int64_t v0 = t->nvo * k / nt, v1 = t->nvo * (k + 1) / nt;
    dw_rows_tile(c, g, t, r, e, it, nr, v0 * g->V, (int)(v1 - v0));
  }
}

static void dw_rows(cg_ctx *c, const conv_geom *g, const conv_row *r, const conv_epi *e) {
  dw_rows_geom t = dw_rows_geometry(g);
  int V = g->V;
  /* the kernel carries "cnnc-dw-rows" (its name is conv2d_dw_plane's: --emit llvm tells them apart) */
  LLVMAddAttributeAtIndex(LLVMGetBasicBlockParent(LLVMGetInsertBlock(c->b)), LLVMAttributeFunctionIndex,
                          LLVMCreateStringAttribute(c->llc, "cnnc-dw-rows", 12, "1", 1));
  dw_rows_item it;
  memset(&it, 0, sizeof it);
  size_t zn = (size_t)((g->w + V - 1) / V * V);
  float *z = calloc(zn, sizeof(float));
  if (!z) abort();
  LLVMValueRef zero = cg_blob_const(c, "dw.zero", z, zn * sizeof(float));
  free(z);
  it.bias = cg_splat(c, cg_load_f32(c, r->bp, r->bbase), V);
  it.sum = dw_pool_begin(c, g, r);
  for (int k = 0; t.hoist && k < g->kh * g->kw; k++)
    it.wv[k] = cg_splat(c, cg_load_f32(c, r->wp, LLVMBuildAdd(c->b, r->wbase, cg_i64(c, k), "")), V);
  if (g->sh == 2) {
    int64_t n = (int64_t)dw_rows_nin(g, t.R) * 2 * t.pl;
    it.buf = cg_conv_opaque_ptr(c, cg_entry_alloca(c, LLVMArrayType2(c->t_f32, (uint64_t)n), "dwrows"));
  }
  int64_t nfull = g->oh / t.R, rem = g->oh % t.R;
  if (nfull > 0) {
    cg_loop T;
    LLVMValueRef k = cg_loop_begin(c, &T, cg_i64(c, 0), cg_i64(c, nfull), cg_i64(c, 1), "dwrows");
    it.oy0 = LLVMBuildMul(c->b, k, cg_i64(c, t.R), "oy0");
    dw_rows_block(c, g, &t, r, e, &it, zero, t.R);
    cg_loop_end(c, &T);
  }
  if (rem) {
    it.oy0 = cg_i64(c, nfull * t.R);
    dw_rows_block(c, g, &t, r, e, &it, zero, (int)rem);
  }
  dw_pool_end(c, g, r, it.sum);
}
