/* cg_main.h — codegen-private: the main module (shard entries + ABI descriptor, cg_main.c)
 * and the cg_ctx set-up shared by every compile unit (cg_module.c). */
#ifndef CNNC_CG_MAIN_H
#define CNNC_CG_MAIN_H

#include "codegen/cg_layout.h"

/* Adds the shard entry functions and the exported descriptor for layout L to c's module
 * (kernels are called by the names in L->k, declared when defined elsewhere). */
int cg_build_main(cg_ctx *c, const cg_layout *L, const cg_options *o, ir_diag *d);

/* Bytes of scratch shard s of layout L needs at run time (what the descriptor declares): the
 * memory planner's arena, plus the batch-1 dynamic-share counters when the shard has any. */
int64_t cg_shard_scratch(const cg_layout *L, int s);

void cg_ctx_init(cg_ctx *c, const cg_target *t, const ir_graph *g, LLVMTargetMachineRef tm, const char *name);
void cg_ctx_dispose(cg_ctx *c);

#endif
