/* cg_route.h — the kernel-route table (codegen/kernels.def), the selection that walks it
 * before any LLVM IR exists (cg_select.c: one cg_kplan per node) and the emitter that builds
 * a kernel by the route its plan names. */
#ifndef CNNC_CG_ROUTE_H
#define CNNC_CG_ROUTE_H

#include "codegen/cg_internal.h"

enum { CG_ROUTE_INFER = 1, CG_ROUTE_TRAIN = 2 };

typedef struct cg_route {
  ir_op op;
  const char *name;                              /* "stem", "wino", ... (unique per op and graphs) */
  int graphs;                                    /* CG_ROUTE_INFER or CG_ROUTE_TRAIN */
  /* Pure (no LLVM IR; c is a planning context, cg_select.c): 1 when the route takes node n,
   * with what it decides written to *kp (route is set by the caller), 0 when n is not its
   * shape.  Never records an error. */
  int (*match)(cg_ctx *c, const ir_node *n, cg_kplan *kp);
  cg_gen_fn emit;                                /* builds the kernel; NULL only with an error recorded */
  const char *when;                              /* one line for docs and --emit plan readers */
} cg_route;

extern const cg_route cg_routes[];
extern const int cg_n_routes;

/* The first route of kernels.def for n's op and kind of graph (train: training layout) whose
 * match takes n, into *kp (kp->route = its row; -1 for an op without rows for that kind of
 * graph, which uses its one generator).  Returns 0, or -1 with an internal error recorded in
 * c's diagnostic when the op has rows and none takes n. */
int cg_route_select(cg_ctx *c, const ir_node *n, int train, cg_kplan *kp);
/* Builds node n's kernel named fn_name by the route of its plan.  Returns the function, or
 * NULL with the error recorded (cg_fail). */
LLVMValueRef cg_route_emit(cg_ctx *c, const ir_node *n, const cg_kplan *kp, int train, const char *fn_name, const char **kind);

/* The kernel plan of every node of graph g (cg_select.c): fu its fusion plan (one row per
 * node, passes/fuse.c), t the target, amp the --available-memory-proportion text (NULL: the
 * default), train the training layout.  Anchors get their route (cg_route_select); every node
 * of an inference graph gets in16/out16, what 16-bit storage may give its kernel.  Returns 0
 * or -1 with d filled. */
int cg_select(const ir_graph *g, const pass_fusion *fu, const cg_target *t, const char *amp, int train, cg_kplan *kp,
              ir_diag *d);

#endif
