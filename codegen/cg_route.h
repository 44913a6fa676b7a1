/* cg_route.h — the kernel-route table (codegen/kernels.def) and the one dispatcher that walks
 * it: every kernel is made by the first route of its op that takes the node. */
#ifndef CNNC_CG_ROUTE_H
#define CNNC_CG_ROUTE_H

#include "codegen/cg_internal.h"

enum { CG_ROUTE_INFER = 1, CG_ROUTE_TRAIN = 2 };

typedef struct cg_route {
  ir_op op;
  const char *name;                              /* "stem", "wino", ... (unique per op and graphs) */
  int graphs;                                    /* CG_ROUTE_INFER or CG_ROUTE_TRAIN */
  int (*match)(cg_ctx *c, const ir_node *n);     /* NULL: emit decides */
  cg_gen_fn emit;
  const char *when;                              /* one line for docs and --list-routes */
} cg_route;

extern const cg_route cg_routes[];
extern const int cg_n_routes;

/* Generates node n's kernel named fn_name: the first route of kernels.def for n's op and the
 * graph kind (train: training layout) that matches and emits; an op without rows for that
 * kind uses its one generator.  *route = the row's index, or -1 for an op's one generator.
 * Returns the function, or NULL with the error recorded (cg_fail). */
LLVMValueRef cg_route_gen(cg_ctx *c, const ir_node *n, int train, const char *fn_name, const char **kind, int *route);

#endif
