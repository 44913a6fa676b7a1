/* cg_route.c — the kernel-route table of kernels.def and its dispatcher (cg_route.h): the one
 * codegen file that includes every route's header. */
#include "codegen/cg_route.h"
#include "codegen/conv/bf16.h"
#include "codegen/conv/bf16_plan.h"
#include "codegen/conv/direct.h"
#include "codegen/conv/stem.h"
#include "codegen/conv/wino.h"
#include "codegen/gen_train.h"
#include "codegen/gen_train_pgw.h"
#include "codegen/gen_train_wino.h"

/* Training convs with groups > 1 (conv2d and both gradients): gen_train_gconv.c. */
static int cg_conv_train_grouped(cg_ctx *c, const ir_node *n) {
  (void)c;
  const ir_conv2d_attr *a = n->op == IR_OP_conv2d              ? &n->attr.conv2d
                            : n->op == IR_OP_conv2d_grad_input ? &n->attr.conv2d_grad_input.conv
                                                               : &n->attr.conv2d_grad_weight.conv;
  return a->groups != 1;
}

const cg_route cg_routes[] = {
#define KROUTE(op, route, graphs, match, emit, when) {IR_OP_##op, #route, CG_ROUTE_##graphs, match, emit, when},
#include "codegen/kernels.def"
};
const int cg_n_routes = (int)(sizeof cg_routes / sizeof cg_routes[0]);

LLVMValueRef cg_route_gen(cg_ctx *c, const ir_node *n, int train, const char *fn_name, const char **kind, int *route) {
  int graphs = train ? CG_ROUTE_TRAIN : CG_ROUTE_INFER, rows = 0;
  cg_priv *p = c->priv;
  *route = -1;
  for (int i = 0; i < cg_n_routes; i++) {
    const cg_route *r = &cg_routes[i];
    if (r->op != n->op || r->graphs != graphs) continue;
    rows++;
    if (r->match && !r->match(c, n)) continue;
    LLVMValueRef f = r->emit(c, n, fn_name, kind);
    if (f) return *route = i, f;
    if (p && p->d && p->d->failed) return NULL; /* the route failed, not declined */
  }
  if (rows) return cg_fail(c, n, "internal error: no kernel route of %s takes this node (codegen/kernels.def)", ir_ops[n->op].name);
  cg_gen_fn gen = train ? cg_train_generator(n->op) : NULL;
  return (gen ? gen : cg_generators[n->op])(c, n, fn_name, kind);
}

/* Every op's generator (ops.def), routed ops through the table below. */
const cg_gen_fn cg_generators[IR_OP_COUNT] = {
#define IR_OP(name, attr, min_in, max_in, n_out, kind) [IR_OP_##name] = cg_gen_##name,
#include "ir/ops.def"
};

/* The ops with routes keep their cg_gen_<op> entry (cg_generators[], ops.def): the table. */
static LLVMValueRef routed(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind) {
  int route;
  const cg_priv *p = c->priv;
  return cg_route_gen(c, n, p && p->train, fn_name, kind, &route);
}
LLVMValueRef cg_gen_conv2d(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind) {
  return routed(c, n, fn_name, kind);
}
LLVMValueRef cg_gen_conv2d_grad_input(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind) {
  return routed(c, n, fn_name, kind);
}
LLVMValueRef cg_gen_conv2d_grad_weight(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind) {
  return routed(c, n, fn_name, kind);
}
