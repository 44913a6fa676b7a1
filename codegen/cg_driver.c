/* cg_driver.c — the compiler's back half as one call: split into shards, create the target,
 * compile every shard to a .so (or dump llvm/asm/obj).  Also holds the generator table
 * expanded from ir/ops.def. */
#include <stdio.h>
#include <stdlib.h>

#include "codegen/cg.h"
#include "frontend/fe.h"

const cg_gen_fn cg_generators[IR_OP_COUNT] = {
#define IR_OP(name, attr, min_in, max_in, n_out, kind) [IR_OP_##name] = cg_gen_##name,
#include "ir/ops.def"
};

int cg_build_model(ir_graph *g, const struct fe_options *o, const char *output, const char *emit,
                   int verbose, ir_diag *d) {
  (void)g; (void)o; (void)output; (void)emit; (void)verbose;
  ir_loc loc = {0};
  return ir_diag_set(d, loc, NULL, "code generation is not implemented yet");
}
