/* conv/bf16.h — codegen-private: the kernel of the bf16 dot-product conv route (conv/bf16.c);
 * which convs take the route: conv/bf16_plan.h. */
#ifndef CNNC_CONV_BF16_H
#define CNNC_CONV_BF16_H

#include "codegen/cg_internal.h"

/* The generator of a cg_conv_bf16_ok node. */
LLVMValueRef cg_gen_conv2d_bf16(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind);

#endif
