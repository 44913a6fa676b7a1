/* cg_isa.h — the CPU features a compiled model needs (cg_target.c), exported from the .so as
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

#endif
