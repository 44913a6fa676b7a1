/* cg_isa.h — the ISA-specific parts of cg_target.c and cg_isa.c (the codegen files that name
 * ISAs): the CPU features a compiled model needs, exported from the .so as
 * the NUL-terminated string `cnnc_isa_v1`: comma-separated names of x86 features the target
 * enables and the kernels may use ("avx,avx2,fma,f16c,avx512f,avx512bw,avx512dq,avx512vl,
 * avx512bf16"; "" for a non-x86 target).  The runtime (runtime/rt_isa.c) refuses to open a
 * model whose features this CPU lacks.  Probed from the backend (a --target-cpu's own features
 * are not in its feature string): avx/avx512f from the vector width, avx2 from ymm/zmm integer
 * adds, fma, f16c (vcvtps2ph), avx512bw (zmm vpaddw), avx512dq (zmm vpmullq), avx512vl (ymm
 * vpabsq), avx512bf16 (cg_target.has_avx512bf16).  Not checked: other extensions an avx512f
 * target may also enable (avx512cd, vbmi, vnni, ...), which the generated code does not use. */
#ifndef CNNC_CG_ISA_H
#define CNNC_CG_ISA_H

#include "codegen/cg_internal.h"

#define CNNC_ISA_SYMBOL "cnnc_isa_v1"

void cg_target_isa_needs(const cg_target *t, char *buf, size_t n);
/* Adds the exported cnnc_isa_v1 string to c's module (the main unit). */
void cg_target_emit_isa(cg_ctx *c);

/* ---- bf16 dot products (the bf16 conv route, conv/bf16_plan.h; docs/codegen.md "bf16
 * kernels") ---------------------------------------------------------------------------- */
/* 2 = the target executes vdpbf16ps (avx512bf16 with 512-bit vectors), 1 = no such target but
 * tune bf16_emulate=1 (x86 targets with FMA: the same kernels with every vdpbf16ps emulated
 * exactly in f32 vector code), 0 = no bf16 route. */
int cg_bf16_dot(const cg_target *t, const ir_tuning *tune);
/* The bf16 conv route's mode for tune->bf16: 0 (tune bf16=0, no bf16 dot products, or a core
 * whose codegen/cores.def row has vdpbf16ps at most as fast as f32 FMA, unless tune bf16=2),
 * else cg_bf16_dot's.  why (may be NULL): the decision in words, for the plan and the report. */
int cg_bf16_route(const cg_target *t, const ir_tuning *tune, char *why, size_t n);
/* The ISA part of the bf16 kernels' names: "avx512bf16" or "<isa>_bf16emu"; for the AMX
 * microkernel (amx = cg_amx_mode) "amxbf16" or "<isa>_amxemu". */
const char *cg_bf16_isa_name(const cg_target *t, int amx);
/* The dot-product step, one <V x float> accumulator: per lane i, acc += a[2i+1]*b[2i+1], then
 * acc += a[2i]*b[2i] (each an f32 FMA rounded to nearest even, input denormals read as zero,
 * denormal results flushed to zero: the SDM's VDPBF16PS).  a, b: <V x i32>, each lane a bf16
 * pair (element 2i in the low half).  Native (mode 2): llvm.x86.avx512bf16.dpbf16ps.512 (V = 16);
 * mode 1: the emulation (cg_isa.c). */
LLVMValueRef cg_bf16_dp(cg_ctx *c, int mode, LLVMValueRef acc, LLVMValueRef a, LLVMValueRef b, int V);

/* ---- int8 dot products (--precision int8: the int8 conv route, conv/bf16.c with 4 channels a
 * dword; docs/matrix.md "int8 kernels") ---------------------------------------------------- */
/* 2 = vpdpbusd on the target (avx512vnni, zmm; tune int8=1, the default), 3 = vpmaddwd on
 * 16-bit pairs (2 channels a dword, s16 activations and weights: exact, no saturation; the
 * default on AVX2 or wider targets without VNNI, tune int8=3 everywhere), 1 = tune int8=2:
 * the vpdpbusd kernels with each vpdpbusd emulated exactly in i32 vector code (how they are
 * tested without VNNI), 0 = no int8 route (the f32 kernels compute the quantised graph; tune
 * int8=0, or a target narrower than AVX2). */
int cg_int8_dot(const cg_target *t, const ir_tuning *tune);
const char *cg_int8_isa_name(const cg_target *t, int mode, int amx); /* amx: cg_amx_int8_mode */
/* Modes 1, 2: acc + sum over the 4 bytes i of u8 a.byte[i] * s8 b.byte[i], per i32 lane
 * (<V x i32>; wraps modulo 2^32 as the instruction does; native mode 2, V 16:
 * llvm.x86.avx512.vpdpbusd.512).  Mode 3: acc + sum over the 2 halves of s16 a * s16 b
 * (vpmaddwd ymm / zmm, then vpaddd). */
LLVMValueRef cg_int8_dp(cg_ctx *c, int mode, LLVMValueRef acc, LLVMValueRef a, LLVMValueRef b, int V);

/* ---- AMX tiles (the bf16 conv route's AMX microkernel, conv/bf16.c; docs/matrix.md "AMX")
 * -------------------------------------------------------------------------------------------- */
/* 1 = the route's convs run on AMX tdpbf16ps (the target has amx-bf16 and avx512bf16, tune
 * amx=1, the default), 2 = tune amx=2: the same kernels with every tile instruction emulated
 * in vector code (any target where cg_bf16_dot is non-zero: how the kernels are tested on CPUs
 * without AMX), 0 = none (tune amx=0 or bf16=0, or no AMX). */
int cg_amx_mode(const cg_target *t, const ir_tuning *tune);
/* The same for the int8 route (tdpbsud: the target has amx-int8; tune int8=0 or 3, or amx=0: none;
 * tune amx=2: emulated on any AVX2+ target). */
int cg_amx_int8_mode(const cg_target *t, const ir_tuning *tune);

/* A kernel's tiles.  Every tile is configured as 16 rows of 64 bytes (palette 1): the kernels
 * use tiles 0-3 as f32 accumulators (16 x 16), 4-5 as A (16 rows x 16 bf16 pairs) and 6-7 as
 * B (16 pair rows x 16 columns).  Native: the explicit-tile intrinsics (llvm.x86.ldtilecfg,
 * tileloadd64, tdpbf16ps, tilestored64, tilezero, tilerelease); emulated: a stack tile file of
 * 8 x 16 rows, tdpbf16ps as, per row m of C and pair k in order, C[m] = dp(C[m], B[k],
 * broadcast A[m][k]) with cg_bf16_dp (the vdpbf16ps route's summation order exactly). */
typedef struct cg_amx { int mode, dp, int8; LLVMValueRef file; } cg_amx;
/* In the kernel's entry block: loads the tile configuration (native) or allocates the tile
 * file (emulated); mode = cg_amx_mode (cg_amx_int8_mode with int8), dp = the emulation's
 * dot-product steps: cg_bf16_dot's mode, or with int8 cg_int8_dp's vpdpbusd mode (1 or 2). */
void cg_amx_begin(cg_ctx *c, cg_amx *a, int mode, int dp, int int8);
void cg_amx_zero(cg_ctx *c, const cg_amx *a, int tile);
/* Tile `tile` = 16 rows of 64 bytes from ptr, row i at ptr + i * stride bytes. */
void cg_amx_load(cg_ctx *c, const cg_amx *a, int tile, LLVMValueRef ptr, int64_t stride);
void cg_amx_store(cg_ctx *c, const cg_amx *a, int tile, LLVMValueRef ptr, int64_t stride);
/* tc += ta . tb: C[m][n] += A[m][2k] B[k][2n] + A[m][2k+1] B[k][2n+1] over k < 16 (bf16 pairs,
 * f32 accumulators; tdpbf16ps); with int8, C[m][n] += sum over i < 4 of the s8 A[m][4k + i]
 * times the u8 B[k][4n + i] (i32 accumulators; tdpbsud; emulated as cg_int8_dp(B row k,
 * broadcast A[m][k]), the vpdpbusd route's order). */
void cg_amx_dot(cg_ctx *c, const cg_amx *a, int tc, int ta, int tb);
/* Before the kernel returns: tilerelease (native). */
void cg_amx_end(cg_ctx *c, const cg_amx *a);

#endif
