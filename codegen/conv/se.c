/* conv/se.c — the squeeze-excite scale fused before a 1x1 conv (passes/fuse.c: the conv
 * reads the mul's operands, an [N,C,H,W] map and [N,C,1,1] factors, instead of its result).
 * Pixel-vector convs multiply each loaded input vector by its channel's factor where they
 * load it (packed panels then hold scaled pixels, so a chunk's other channel tiles pay
 * nothing); channel-vector convs (7x7 maps) broadcast single pixels, where a multiply per
 * pixel would compete with the FMAs, so the first work item of an image (per thread) writes
 * the scaled planes of the group into a stack buffer that the image's tiles then read.  The
 * product is rounded as the mul kernel's, so results are bitwise those of the unfused ops. */
#include "codegen/conv/se.h"

LLVMValueRef cg_conv_xscale(cg_ctx *c, const conv_row *r, LLVMValueRef ci, LLVMValueRef v) {
  if (!r->xs) return v;
  LLVMValueRef s = cg_load_f32(c, r->xs, LLVMBuildAdd(c->b, r->xs_base, ci, ""));
  if (LLVMGetTypeKind(LLVMTypeOf(v)) == LLVMVectorTypeKind) s = cg_splat(c, s, (int)LLVMGetVectorSize(LLVMTypeOf(v)));
  return LLVMBuildFMul(c->b, v, s, "se");
}

/* stack bytes of the scaled planes at most (1152 x 49 floats = 226 KB in EfficientNet-B0) */
#define SE_COPY_MAX_BYTES (256 * 1024)

void cg_conv_se_begin(cg_ctx *c, const conv_geom *g, conv_row *r) {
  int64_t n = g->cin_g * g->h * g->w;
  if (!r->xs || !g->vc || n * 4 > SE_COPY_MAX_BYTES) return; /* pixel vectors: scaled where loaded */
  LLVMValueRef buf = cg_entry_alloca(c, LLVMArrayType2(c->t_f32, (uint64_t)n), "se_planes");
  LLVMSetAlignment(buf, 64);
  r->xs_buf = buf, r->xs_key = cg_entry_alloca(c, c->t_i64, "se_key");
  LLVMBuildStore(c->b, cg_i64(c, -1), r->xs_key);
}

void cg_conv_se_item(cg_ctx *c, const conv_geom *g, conv_row *r) {
  if (!r->xs_buf) return;
  int V = g->V;
  int64_t hw = g->h * g->w, nv = hw / V;
  cg_if f;
  cg_if_begin(c, &f, LLVMBuildICmp(c->b, LLVMIntNE, LLVMBuildLoad2(c->b, c->t_i64, r->xs_key, ""), r->xs_base, ""));
  LLVMBuildStore(c->b, r->xs_base, r->xs_key);
  cg_loop CI;
  LLVMValueRef ci = cg_loop_begin(c, &CI, cg_i64(c, 0), cg_i64(c, g->cin_g), cg_i64(c, 1), "se_ci");
  LLVMValueRef src = LLVMBuildAdd(c->b, r->in_base, LLVMBuildMul(c->b, ci, cg_i64(c, hw), ""), "");
  LLVMValueRef dst = LLVMBuildMul(c->b, ci, cg_i64(c, hw), "");
  LLVMValueRef s = cg_splat(c, cg_load_f32(c, r->xs, LLVMBuildAdd(c->b, r->xs_base, ci, "")), V);
  for (int64_t k = 0; k <= nv; k++) { /* the plane's vectors, the last one masked */
    unsigned m = k < nv ? (1u << V) - 1 : (1u << (hw % V)) - 1;
    if (!m) break;
    LLVMValueRef at = cg_i64(c, k * V);
    LLVMValueRef x = k < nv ? cg_load_v(c, r->x, LLVMBuildAdd(c->b, src, at, ""), V)
                            : cg_conv_masked_load(c, r->x, LLVMBuildAdd(c->b, src, at, ""), m, V);
    x = LLVMBuildFMul(c->b, x, s, "se");
    if (k < nv) cg_store_v(c, x, r->xs_buf, LLVMBuildAdd(c->b, dst, at, ""), V);
    else cg_conv_masked_store(c, x, r->xs_buf, LLVMBuildAdd(c->b, dst, at, ""), m, V);
  }
  cg_loop_end(c, &CI);
  cg_if_end(c, &f);
  r->x = r->xs_buf, r->in_base = cg_i64(c, 0), r->xs = NULL; /* the item's tiles read the scaled planes */
}
