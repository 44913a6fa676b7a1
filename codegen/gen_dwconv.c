/* gen_dwconv.c — depthwise conv2d (one input and one output channel per group) on small
 * planes whose output width equals the input width, stride 1 (EfficientNet's 3x3/5x5 convs
 * on 14 and 7 wide maps) or stride 2 through a split into four phase planes: a channel's
 * output plane is one flat row of oh*ow pixels in vectors of V, a vector may span rows, and
 * tap (ky, kx) of output pixel q reads input element q + (ky*dh - pt)*W + kx*dw - pl.  Every
 * tile is a compile-time position, so the lanes whose row or column falls into the padding
 * are constant masks: a plain load and a select with zero inside the plane, a masked load
 * where the vector leaves it, nothing for a tap with no valid lane.  One work item = one
 * (image, channel) plane. */
#include "codegen/gen_conv.h"

/* vectors per tile (accumulators); the 3x3 taps (9 broadcasts) stay in registers beside them */
#define DW_TILE_VECTORS 4
/* code size: at most this many (vector, tap) pairs per item (14x14 5x5 = 25 x 25).  28x28 5x5
 * (98 x 25, ~50 KB of straight code per item, over the 32 KB L1i) ran 0.67x the per-row kernel */
#define DW_MAX_VECTOR_TAPS 640
#define DW_MAX_TAPS 49
/* stride 2: pixels per phase plane of the stack buffer (4 phases x 4 KB at most) */
#define DW_MAX_PHASE_PX 1024

int cg_conv_dw_plane_ok(const conv_geom *g) {
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
                             int kx) {
  int V = g->V, inside;
  int64_t at;
  unsigned full = (1u << V) - 1, m = dw_src(g, q0, ky, kx, &at, &inside);
  if (!m) return NULL;
  LLVMValueRef idx = LLVMBuildAdd(c->b, base, cg_i64(c, at), "");
  if (!inside) return cg_conv_masked_load(c, src, idx, m, V);
  LLVMValueRef v = cg_load_v(c, src, idx, V);
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
    cg_store_f32(c, cg_load_f32(c, r->x, LLVMBuildAdd(c->b, src, cg_i64(c, ix), "")), buf,
                 LLVMBuildAdd(c->b, dst, cg_i64(c, (ix & 1) * ph + ix / 2), ""));
  cg_loop_end(c, &L);
  return buf;
}

/* Bias, fused ops and the store of the vector at q0 (masked past the plane's end). */
static void dw_store(cg_ctx *c, const conv_geom *g, const conv_row *r, const conv_epi *e, LLVMValueRef v,
                     LLVMValueRef bias, int64_t q0) {
  int V = g->V;
  unsigned full = (1u << V) - 1, m = 0;
  for (int l = 0; l < V; l++)
    if (q0 + l < g->oh * g->ow) m |= 1u << l;
  LLVMValueRef oi = LLVMBuildAdd(c->b, r->out_row, cg_i64(c, q0), "oi");
  v = LLVMBuildFAdd(c->b, v, bias, "");
  for (int k = 0, ra = 0; k < e->n_post; k++) {
    LLVMValueRef res = e->post[k]->op == IR_OP_add ? r->resid[ra++] : NULL;
    if (res && m != full) v = LLVMBuildFAdd(c->b, v, cg_conv_masked_load(c, res, oi, m, V), "resid");
    else v = cg_epilogue(c, e->post[k], v, res, oi, V);
  }
  if (m == full) cg_store_v(c, v, r->out, oi, V);
  else cg_conv_masked_store(c, v, r->out, oi, m, V);
}

void cg_conv_dw_plane(cg_ctx *c, const conv_geom *g, const conv_row *r, const conv_epi *e) {
  int V = g->V;
  int64_t nv = (g->oh * g->ow + V - 1) / V, nt = (nv + DW_TILE_VECTORS - 1) / DW_TILE_VECTORS;
  LLVMValueRef bias = cg_splat(c, cg_load_f32(c, r->bp, r->bbase), V);
  LLVMValueRef src = r->x, base = r->in_base;
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
          LLVMValueRef x = dw_input(c, g, src, base, (v0 + p) * V, ky, kx);
          if (!x) continue;
          if (!w) w = cg_splat(c, cg_load_f32(c, wp, LLVMBuildAdd(c->b, r->wbase, cg_i64(c, ky * g->kw + kx), "")), V);
          acc[p] = cg_fma(c, w, x, acc[p]);
        }
      }
    for (int64_t p = 0; p < np; p++) dw_store(c, g, r, e, acc[p], bias, (v0 + p) * V);
  }
}
