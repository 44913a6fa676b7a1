/* gen_train.h — codegen-private: helpers shared by the training generators (gen_train.c,
 * gen_train_conv.c, gen_train_dense.c): the kernel prologue without the out-noalias promise,
 * small i64 arithmetic, compile-time lane masks and masked vector loads/stores, and the
 * register-tile sizes of the training microkernels. */
#ifndef CNNC_GEN_TRAIN_H
#define CNNC_GEN_TRAIN_H

#include "codegen/cg_internal.h"

/* cg_kernel_begin without the out-noalias promise (optimizer kernels update in place). */
LLVMValueRef cg_train_kbegin(cg_ctx *c, const char *name, int n_act, LLVMValueRef *args);

/* a + b, a * k, a + k (i64) */
LLVMValueRef cg_tadd(cg_ctx *c, LLVMValueRef a, LLVMValueRef b);
LLVMValueRef cg_tmul(cg_ctx *c, LLVMValueRef a, int64_t k);
LLVMValueRef cg_taddk(cg_ctx *c, LLVMValueRef a, int64_t k);

/* Lanes l < n of a w-lane mask (bit l), n clamped to [0, w]. */
unsigned cg_lanes(int n, int w);
/* w lanes base[idx + l*stride] for the lanes of mask m (others 0): a plain (strided) vector
 * load when m is full and last_ok (the last lane's element is inside the buffer row, so a
 * stride-2 pair load stays inside), llvm.masked.load for stride 1, scalar lane loads else.
 * No element of an unmasked-out lane is read. */
LLVMValueRef cg_tload(cg_ctx *c, LLVMValueRef base, LLVMValueRef idx, int stride, unsigned m, int w);
/* Stores the lanes of mask m of v to base[idx + l]. */
void cg_tstore(cg_ctx *c, LLVMValueRef v, LLVMValueRef base, LLVMValueRef idx, unsigned m, int w);

/* Split of n (> 0) positions into groups of at most maxp: number of groups and the size of
 * group i (balanced: sizes differ by at most one). */
int cg_tgroups(int64_t n, int maxp);
int cg_tgroup_size(int64_t n, int groups, int i);

/* Training-mode forward generators (weights by pointer): conv2d (gen_train_conv.c), dense
 * (gen_train_dense.c). */
/* The direct training convs (kernels.def's last rows for conv2d and its gradients). */
LLVMValueRef cg_train_conv_direct_fwd(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind);
LLVMValueRef cg_train_conv_direct_grad_input(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind);
LLVMValueRef cg_train_conv_direct_grad_weight(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind);
LLVMValueRef cg_train_dense_fwd(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind);
/* Groups-1 conv2d forward and stride-1 grad_input through the inference microkernels with
 * per-thread weight packing (gen_train_pconv.c); NULL (nothing emitted) when that path does
 * not apply, and the direct kernels of gen_train_conv.c run instead. */
LLVMValueRef cg_train_pconv_fwd(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind);
LLVMValueRef cg_train_pconv_grad_input(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind);
/* Grouped / depthwise conv2d (groups > 1, gen_train_gconv.c): forward, grad_input, grad_weight. */
LLVMValueRef cg_train_gconv_fwd(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind);
LLVMValueRef cg_train_gconv_grad_input(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind);
LLVMValueRef cg_train_gconv_grad_weight(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind);

#endif
