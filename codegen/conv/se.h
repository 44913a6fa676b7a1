/* conv/se.h — codegen-private: the squeeze-excite scale fused before a conv (conv/se.c), as
 * the direct route's pixel-vector and channel-vector kernels apply it. */
#ifndef CNNC_CONV_SE_H
#define CNNC_CONV_SE_H

#include "codegen/conv/conv_core.h"

/* Squeeze-excite scale fused before the conv (pass_fusion.n_pre): v (a float or a vector of
 * pixels of input channel ci of the group) times that (image, channel)'s factor, r->xs[xs_base
 * + ci]; v itself when r->xs is NULL.  Rounded like the mul kernel it replaces. */
LLVMValueRef cg_conv_xscale(cg_ctx *c, const conv_row *r, LLVMValueRef ci, LLVMValueRef v);
/* Channel-vector convs with r->xs: a stack buffer for the group's scaled planes (sets
 * xs_buf/xs_key; at most 256 KB, else the loads are scaled one by one); and, per work item
 * after in_base/xs_base are set, the planes scaled into it when they are not already there,
 * with r->x/in_base/xs then pointing the item at the buffer. */
void cg_conv_se_begin(cg_ctx *c, const conv_geom *g, conv_row *r);
void cg_conv_se_item(cg_ctx *c, const conv_geom *g, conv_row *r);

#endif
