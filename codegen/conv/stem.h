/* conv/stem.h — codegen-private: the bf16 stem conv (conv/stem.c; docs/codegen.md
 * "Stem"), a few-channel horizontally stride-2 conv of the bf16 route (conv/bf16_plan.h) that
 * reads its bf16 input's horizontal tap pairs as plain dwords (no panel). */
#ifndef CNNC_CONV_STEM_H
#define CNNC_CONV_STEM_H

#include "codegen/cg_internal.h"

/* Whether conv n, already on the bf16 route (cg_conv_bf16_ok), takes the stem kernel (kernels.def):
 * <= 4 input channels stored in bf16, horizontal stride 2, no dilation, Cout a multiple of 4,
 * no residual add or squeeze-excite in its group.  tune stem_gen=0: never (A/B). */
int cg_conv_stem_match(cg_ctx *c, const ir_node *n, cg_kplan *kp);
LLVMValueRef cg_gen_conv2d_stem(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind);

#endif
