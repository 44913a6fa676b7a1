/* ref.c — reference kernels (placeholder hooks; being replaced by ir/ref_*.c).
 * One ir_ref_<name> per row of ops.def so that op_table.c links. */
#include "ir.h"

#define IR_OP(name, attr, min_in, max_in, n_out, kind)                                       \
  void ir_ref_##name(const ir_graph *g, const ir_node *n, const float *const *in, float *out); \
  void ir_ref_##name(const ir_graph *g, const ir_node *n, const float *const *in, float *out) \
  {                                                                                           \
    (void)g; (void)n; (void)in; (void)out;                                                    \
  }
#include "ops.def"
