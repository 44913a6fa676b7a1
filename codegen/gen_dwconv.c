/* gen_dwconv.c — depthwise conv2d (one input and one output channel per group) on small
 * stride-1 planes whose output width equals the input width (EfficientNet's 3x3/5x5 convs on
 * 14 and 7 wide maps): a channel's output plane is one flat row of oh*ow pixels in
 * vectors of V, a vector may span rows, and tap (ky, kx) of output pixel q reads input element
 * q + (ky*dh - pt)*W + kx*dw - pl.  Every tile is a compile-time position, so the lanes whose
 * row or column falls into the padding are constant masks: a plain load and a select with
 * zero inside the plane, a masked load where the vector leaves it, nothing for a tap with no
 * valid lane.  One work item = one (image, channel) plane. */
#include "codegen/gen_conv.h"

/* vectors per tile (accumulators); the 3x3 taps (9 broadcasts) stay in registers beside them */
#define DW_TILE_VECTORS 4
/* code size: at most this many (vector, tap) pairs per item (14x14 5x5 = 25 x 25).  28x28 5x5
 * (98 x 25, ~50 KB of straight code per item, over the 32 KB L1i) ran 0.67x the per-row kernel */
#define DW_MAX_VECTOR_TAPS 640
#define DW_MAX_TAPS 49

int cg_conv_dw_plane_ok(const conv_geom *g) {
  if (g->cin_g != 1 || g->cout_g != 1 || g->groups < 1 || g->flat || g->vc) return 0;
  if (g->sh != 1 || g->sw != 1 || g->ow != g->w || g->V < 4) return 0;
  int taps = g->kh * g->kw;
  int64_t nv = (g->oh * g->ow + g->V - 1) / g->V;
  return taps > 1 && taps <= DW_MAX_TAPS && nv * taps <= DW_MAX_VECTOR_TAPS;
}

/* Lanes of the vector at output pixel q0 whose pixel is in the plane and whose tap (ky, kx)
 * reads a real input pixel; *inside: every lane's input element lies in the channel plane
 * (a plain load is safe). */
static unsigned dw_mask(const conv_geom *g, int64_t q0, int ky, int kx, int *inside) {
  unsigned m = 0;
  int64_t off = ((int64_t)ky * g->dh - g->pt) * g->w + (int64_t)kx * g->dw - g->pl;
  *inside = q0 + off >= 0 && q0 + off + g->V <= g->h * g->w;
  for (int l = 0; l < g->V; l++) {
    int64_t q = q0 + l, oy = q / g->ow, ox = q % g->ow;
    int64_t iy = oy + (int64_t)ky * g->dh - g->pt, ix = ox + (int64_t)kx * g->dw - g->pl;
    if (q < g->oh * g->ow && iy >= 0 && iy < g->h && ix >= 0 && ix < g->w) m |= 1u << l;
  }
  return m;
}

static LLVMValueRef dw_input(cg_ctx *c, const conv_geom *g, const conv_row *r, int64_t q0, int ky, int kx) {
  int V = g->V, inside;
  unsigned full = (1u << V) - 1, m = dw_mask(g, q0, ky, kx, &inside);
  if (!m) return NULL;
  int64_t off = ((int64_t)ky * g->dh - g->pt) * g->w + (int64_t)kx * g->dw - g->pl;
  LLVMValueRef idx = LLVMBuildAdd(c->b, r->in_base, cg_i64(c, q0 + off), "");
  if (!inside) return cg_conv_masked_load(c, r->x, idx, m, V);
  LLVMValueRef v = cg_load_v(c, r->x, idx, V);
  if (m == full) return v;
  return LLVMBuildSelect(c->b, cg_conv_mask_const(c, m, V), v, cg_fzero(c, V), "pad");
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
          LLVMValueRef x = dw_input(c, g, r, (v0 + p) * V, ky, kx);
          if (!x) continue;
          if (!w) w = cg_splat(c, cg_load_f32(c, wp, LLVMBuildAdd(c->b, r->wbase, cg_i64(c, ky * g->kw + kx), "")), V);
          acc[p] = cg_fma(c, w, x, acc[p]);
        }
      }
    for (int64_t p = 0; p < np; p++) dw_store(c, g, r, e, acc[p], bias, (v0 + p) * V);
  }
}
