/* gen_stubs.c — temporary: generators not written yet (removed as gen_*.c land). */
#include "codegen/cg.h"
#define STUB(op) \
  LLVMValueRef cg_gen_##op(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind) { \
    (void)c; (void)n; (void)fn_name; *kind = #op "_unimplemented"; return NULL; }
#define IR_OP(name, attr, min_in, max_in, n_out, kind) STUB(name)
#include "ir/ops.def"
