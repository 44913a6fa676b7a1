/* cg_half_partials.h — codegen-private: --enable-half-partials inside the kernels
 * (docs/precision.md).  A kernel that keeps partial sums in memory between reduction blocks
 * rounds each partial to the 16-bit --half-type where it reloads it to continue the reduction
 * (the first reload reads zeros, so this is one rounding per stored partial; the final sum is
 * not rounded).  The reference interpreter rounds at the same points (ir/ref_conv.c,
 * ir/ref_grad.c), from the settings cg_build_model records on the graph. */
#ifndef CNNC_CG_HALF_PARTIALS_H
#define CNNC_CG_HALF_PARTIALS_H

#include "codegen/gen_round16.h"

/* v (w lanes of partial sums just reloaded) as a 16-bit store would have kept it, or v
 * unchanged when half partials are off. */
static inline LLVMValueRef cg_half_partial(cg_ctx *c, LLVMValueRef v, int w) {
  return c->g->half_partials ? cg_round16_v(c, NULL, v, c->g->half_partials - 1, w) : v;
}

#endif
