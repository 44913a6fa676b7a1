/* gen_shape.c — shape-only ops.  reshape keeps the elements in order (logical layout is
 * contiguous), so its kernel is a parallel copy. */
#include "codegen/cg_internal.h"

LLVMValueRef cg_gen_reshape(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind) {
  return cg_gen_unary(c, n, fn_name, kind, "reshape_copy");
}
