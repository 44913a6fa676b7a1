/* cg_half_partials.h — codegen-private: --enable-half-partials inside the kernels
 * (docs/precision.md).  A kernel that keeps partial sums in memory between reduction blocks
 * keeps them as 16-bit values of the --half-type: stored in a 16-bit buffer (cg_partial_*:
 * narrowed to nearest even at the store, widened exactly at the reload), or, where a kernel
 * still has an f32 buffer, rounded where it reloads them (cg_half_partial).  Either way that
 * is one rounding per stored partial; the final sum is not rounded.  The reference
 * interpreter rounds at the same points (ir/ref_conv.c, ir/ref_grad.c), from the settings
 * cnnc_build_model records on the graph. */
#ifndef CNNC_CG_HALF_PARTIALS_H
#define CNNC_CG_HALF_PARTIALS_H

#include "codegen/gen_round16.h"
#include "passes/passes.h"

/* v (w lanes of partial sums just reloaded from an f32 buffer) as a 16-bit store would have
 * kept it, or v unchanged when half partials are off. */
static inline LLVMValueRef cg_half_partial(cg_ctx *c, LLVMValueRef v, int w) {
  return c->g->half_partials ? cg_round16_v(c, NULL, v, c->g->half_partials - 1, w) : v;
}

/* Nonzero when the partial-sum buffers are 16-bit: half partials on and tune half_partials_f32
 * not set (that keeps f32 buffers rounded at every reload: bitwise the same numbers, the
 * reference tests compare with; pass_acc_elem_bytes). */
static inline int cg_partials16(cg_ctx *c) {
  return c->g->half_partials && pass_acc_elem_bytes(c->g, c->g->half_partials) == 2;
}

/* Element type of a partial-sum buffer of w-lane vectors: <w x i16> (the 16-bit bit patterns)
 * when cg_partials16, else <w x float>. */
static inline LLVMTypeRef cg_partial_vtype(cg_ctx *c, int w) {
  return cg_partials16(c) ? LLVMVectorType(LLVMInt16TypeInContext(c->llc), (unsigned)w) : cg_vtype(c, w);
}

/* Stores v (w f32 lanes of partial sums) into the partial buffer slot p (a cg_partial_vtype
 * element): narrowed to nearest even when 16-bit, else as is. */
static inline void cg_partial_store(cg_ctx *c, LLVMValueRef v, LLVMValueRef p, int w) {
  if (cg_partials16(c)) v = cg_narrow16_v(c, NULL, v, c->g->half_partials - 1, 0, w);
  LLVMBuildStore(c->b, v, p);
}

/* Slot p of a partial buffer as w f32 lanes on the 16-bit grid with half partials: widened
 * exactly from 16 bits, or an f32 slot rounded (cg_half_partial); as stored without. */
static inline LLVMValueRef cg_partial_load(cg_ctx *c, LLVMValueRef p, int w) {
  LLVMValueRef v = LLVMBuildLoad2(c->b, cg_partial_vtype(c, w), p, "partial");
  return cg_partials16(c) ? cg_widen16_v(c, NULL, v, c->g->half_partials - 1, w) : cg_half_partial(c, v, w);
}

/* Records on the graph (partial_bytes, the compile report's "bytes_saved") that node n's
 * kernel keeps slots w-lane partial vectors in 16 bits per thread.  Call once per kernel. */
static inline void cg_partial_note(cg_ctx *c, const ir_node *n, int64_t slots, int w) {
  if (cg_partials16(c) && c->g->partial_bytes && n) c->g->partial_bytes[n->id] = slots * w * 2;
}

#endif
