/* cg_link.h — codegen-private: optimise/emit/link steps (cg_link.c). */
#ifndef CNNC_CG_LINK_H
#define CNNC_CG_LINK_H

#include "codegen/cg.h"

/* Verifies m and runs "default<O<opt_level>>".  Returns 0 or -1 with d filled. */
int cg_optimize(LLVMModuleRef m, LLVMTargetMachineRef tm, int opt_level, ir_diag *d);
/* Writes m as "llvm" (text IR), "asm" or "obj" to path.  Returns 0 or -1 with d filled. */
int cg_write_module(LLVMModuleRef m, LLVMTargetMachineRef tm, const char *what, const char *path, ir_diag *d);
/* Links objs into the shared object out (linker messages go to tmpdir/link.err). */
int cg_link_shared(const char *const *objs, int n, const char *out, const char *tmpdir, ir_diag *d);
/* mkdtemp under $TMPDIR or /tmp into buf. */
int cg_tmpdir(char *buf, size_t n, const char *parent, ir_diag *d);
/* Removes files and then the (now empty) directory. */
void cg_rmtree_flat(const char *dir, const char *const *files, int n);

#endif
