/* gen_conv_bf16.h — codegen-private: the bf16 dot-product conv route (issue 4,
 * docs/codegen.md "bf16 kernels", docs/precision.md "bf16 arithmetic").  Flat 1x1 stride-1
 * unpadded convs (and kxk / strided ones with enough channels) whose input is a bf16 round16 result and whose weights are on the bf16 grid
 * (--precision 16.16|16.32 --half-type bf16 inference) run on vdpbf16ps when the target has
 * avx512bf16, or on an exact emulation of it when tune bf16_emulate=1 is set in cnnc's
 * environment (how the kernel is tested on CPUs without the instruction). */
#ifndef CNNC_GEN_CONV_BF16_H
#define CNNC_GEN_CONV_BF16_H

#include "codegen/cg_internal.h"

/* cg_target.c: 2 = the target executes vdpbf16ps (avx512bf16 with 512-bit vectors), 1 = no
 * such target but tune bf16_emulate=1 (x86 targets with FMA: the same kernels with every vdpbf16ps
 * emulated exactly in f32 vector code), 0 = no bf16 route. */
int cg_bf16_dot(const cg_target *t, const ir_tuning *tune);

/* cg_target.c: the ISA part of the kernel names, "avx512bf16" or "<isa>_bf16emu". */
const char *cg_bf16_isa_name(const cg_target *t);

/* Whether node n (a conv2d) takes the bf16 route on c's target, and its generator. */
int cg_conv_bf16_ok(cg_ctx *c, const ir_node *n);
LLVMValueRef cg_gen_conv2d_bf16(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind);
/* 16-bit inference storage (passes/store16.c via gen_store16.c): whether the kernel of
 * cg_conv_bf16_ok node n reads its input x in bf16 (x = 1: flat 1x1 and row-segment kxk
 * panels, not gathered ones), or writes its result and reads its residuals in 16 bits (x = 0:
 * every kernel of the route's epilogue).  tune bf16_io16=0: neither (the route reads and
 * writes f32); tune bf16_kxk_x16=0: x only on flat panels. */
int cg_conv_bf16_io16(cg_ctx *c, const ir_node *n, int x);

/* cg_target.c (the only codegen file that names ISAs).  The dot-product step, one <V x float> accumulator: per lane i, acc += a[2i+1]*b[2i+1], then
 * acc += a[2i]*b[2i] (each an f32 FMA rounded to nearest even, input denormals read as zero,
 * denormal results flushed to zero: the SDM's VDPBF16PS).  a, b: <V x i32>, each lane a bf16
 * pair (element 2i in the low half).  Native (mode 2): llvm.x86.avx512bf16.dpbf16ps.512 (V = 16);
 * mode 1: the emulation. */
LLVMValueRef cg_bf16_dp(cg_ctx *c, int mode, LLVMValueRef acc, LLVMValueRef a, LLVMValueRef b, int V);

#endif
