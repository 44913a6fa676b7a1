/* gen_train_wino.h — codegen-private: Winograd F(2x2,3x3) route of compiled training's 3x3
 * stride-1 convs (gen_train_wino.c): the forward conv and the stride-1 grad_input (the 3x3
 * conv of dy with w transposed and mirrored), the weight transform done at run time. */
#ifndef CNNC_GEN_TRAIN_WINO_H
#define CNNC_GEN_TRAIN_WINO_H

#include "codegen/cg_internal.h"

/* The route's match (kernels.def) takes conv2d and conv2d_grad_input nodes whose conv (view) is groups 1, 3x3, stride 1,
 * dilation 1, pads 0..2, f32 operands, at least CG_TRAIN_WINO_MIN_C input and output channels,
 * at least vec_f32 2x2 output tiles, on a target with 8 or more f32 lanes, in a graph with no
 * round16 (--precision 16.x) and no --enable-half-partials, and tune train_winograd unset
 * (or "0").  The emitters build the kernel of such a node n (conv2d forward:
 * x, w[, b] -> y; conv2d_grad_input: dy, w -> dx) and set *kind. */
#define CG_TRAIN_WINO_MIN_C 32
int cg_train_wino_match(cg_ctx *c, const ir_node *n, cg_kplan *kp);
LLVMValueRef cg_train_wino_fwd(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind);
LLVMValueRef cg_train_wino_grad_input(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind);

#endif
