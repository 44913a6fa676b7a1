/* gen_train_pgw.h — codegen-private: groups-1 conv2d_grad_weight of compiled training as a
 * GEMM over pixel chunks with the im2col of x packed transposed per thread (gen_train_pgw.c). */
#ifndef CNNC_GEN_TRAIN_PGW_H
#define CNNC_GEN_TRAIN_PGW_H

#include "codegen/cg_internal.h"

/* The route's match (kernels.def) takes conv2d_grad_weight node n (in: dy, x; out: dw) unless:
 * groups > 1, --enable-half-partials
 * (dw partials between pixel chunks would be rounded), targets narrower than 4 lanes or with
 * lanes not a power of two, kernels over 128 taps, a packed chunk over 1 MB, or
 * tune train_pgw=0 (for measurements).  The emitter builds the kernel fn_name of a node it
 * takes and sets *kind. */
int cg_train_pgw_match(cg_ctx *c, const ir_node *n, cg_kplan *kp);
LLVMValueRef cg_train_pgw(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind);

#endif
