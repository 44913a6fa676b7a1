/* conv/wino.h — codegen-private: Winograd F(2x2,3x3) / F(4x4,3x3) route of inference 3x3
 * stride-1 convs (conv/wino.c), taken when cg_conv_wino_match says so (kernels.def). */
#ifndef CNNC_CONV_WINO_H
#define CNNC_CONV_WINO_H

#include "codegen/cg_internal.h"

/* Whether node n (a conv2d) runs on the Winograd route: inference layout, groups 1, 3x3,
 * stride 1, dilation 1, f32 operands and result, at least CG_WINO_MIN_C input and output
 * channels, a fused group of at most batchnorm, residual adds of f32 tensors and relu (no
 * squeeze-excite, side output or round16), no round16 anywhere in the graph (--precision
 * 16.x keeps the direct kernels), a target with 8 or more f32 lanes, and
 * tune winograd unset (or "0"). */
#define CG_WINO_MIN_C 32
int cg_conv_wino_match(cg_ctx *c, const ir_node *n, cg_kplan *kp);

/* Emits the kernel of node n (cg_conv_wino_match must take it); kind as cg_gen_conv2d:
 * on 8 lanes conv2d_wino4_... on maps of at least 2V 4x4 output tiles (16 on AVX2),
 * conv2d_wino2_... below; on 16 lanes the tile, register tile and images per item of the
 * lower cost estimate; tune wino_f2=1 / tune wino_f4=1
 * force the tile. */
LLVMValueRef cg_gen_conv2d_wino(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind);

#endif
