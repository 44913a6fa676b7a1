/* gen_train.h — codegen-private: the training generators of conv2d and dense that
 * kernels.def's routes and gen_train.c's table call.  The helpers they share (the kernel
 * prologue without the out-noalias promise, small i64 arithmetic, lane masks and masked vector
 * loads/stores, group splits) are cg_util.c's (cg_internal.h). */
#ifndef CNNC_GEN_TRAIN_H
#define CNNC_GEN_TRAIN_H

#include "codegen/cg_internal.h"

/* Training-mode forward generators (weights by pointer): conv2d (gen_train_conv.c), dense
 * (gen_train_dense.c). */
/* The direct training convs (kernels.def's last rows for conv2d and its gradients). */
LLVMValueRef cg_train_conv_direct_fwd(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind);
LLVMValueRef cg_train_conv_direct_grad_input(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind);
LLVMValueRef cg_train_conv_direct_grad_weight(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind);
LLVMValueRef cg_train_dense_fwd(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind);
/* Groups-1 conv2d forward and grad_input (strided: per phase) through the inference
 * microkernels with per-thread weight packing (gen_train_pconv.c); the match (kernels.def)
 * leaves the convs that path does not take to the direct kernels of gen_train_conv.c. */
int cg_train_pconv_match(cg_ctx *c, const ir_node *n, cg_kplan *kp);
LLVMValueRef cg_train_pconv_fwd(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind);
LLVMValueRef cg_train_pconv_grad_input(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind);
/* The taps of a kxk conv2d_grad_weight tile of rr output channels (gen_train_gw.c), shared by
 * the direct and grouped routes: per kernel row ky that some output row reaches and per
 * chunk of KC taps, the stack partials of the tile (16-bit with half partials) into the
 * accumulators reg[] (rr*KC allocas), the FMAs over the output rows ylo..yhi of one image, and
 * then, in the last image (o->last), one store(r, ky, kx, reg) per weight, else the partials
 * back to the stack.  Stack slots: (ky*nkc + kc)*rr*KC + i, plus cl*slots_cl when o->cl. */
typedef struct cg_tgw {
  int64_t oh, ow, ih, iw, kh, kw, sh, sw, pt, pl, dh, dw;
  int V, KC, nkc;
} cg_tgw;
typedef struct cg_tgw_ops {
  LLVMValueRef dy, x, dplane, xplane, stack, last, cl;
  int64_t slots_cl;
  void (*store)(cg_ctx *c, void *user, int r, int64_t ky, int64_t kx, LLVMValueRef reg);
  void *user;
} cg_tgw_ops;
void cg_tgw_taps(cg_ctx *c, const cg_tgw *k, const cg_tgw_ops *o, LLVMValueRef *reg, int rr);
/* Whether no output row reaches kernel row ky (its weights' gradients are 0). */
int cg_tgw_tap_empty(const cg_tgw *k, int64_t ky);
/* Grouped / depthwise conv2d (groups > 1, gen_train_gconv.c): forward, grad_input, grad_weight. */
LLVMValueRef cg_train_gconv_fwd(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind);
LLVMValueRef cg_train_gconv_grad_input(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind);
LLVMValueRef cg_train_gconv_grad_weight(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind);

#endif
