/* op_table.c — expands ops.def into the op info table: name, operand counts, kind and the
 * hooks (shape inference in shape.c, cost in cost.c, reference kernel in ref*.c). */
#include <string.h>

#include "ir.h"

#define IR_OP(name, attr, min_in, max_in, n_out, kind)                                        \
  int ir_infer_##name(const ir_graph *g, const ir_node *n, ir_shape *out, ir_diag *d);       \
  void ir_cost_##name(const ir_graph *g, const ir_node *n, ir_cost *c);                       \
  void ir_ref_##name(const ir_graph *g, const ir_node *n, const float *const *in, float *out);
#include "ops.def"

const ir_op_info ir_ops[IR_OP_COUNT] = {
#define IR_OP(name, attr, min_in, max_in, n_out, kind) \
  [IR_OP_##name] = {#name, min_in, max_in, n_out, kind, ir_infer_##name, ir_cost_##name, ir_ref_##name},
#include "ops.def"
};

ir_op ir_op_from_name(const char *name) {
  for (int i = 0; i < IR_OP_COUNT; i++)
    if (strcmp(ir_ops[i].name, name) == 0) return (ir_op)i;
  return IR_OP_COUNT;
}
