/* cg_route.c — the kernel-route table of kernels.def, the selection of a node's route and the
 * emitter that builds a kernel by its plan (cg_route.h): the one codegen file that includes
 * every route's header. */
#include "codegen/cg_layout.h"
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
static int cg_route_grouped(cg_ctx *c, const ir_node *n, cg_kplan *kp) {
  (void)c, (void)kp;
  const ir_conv2d_attr *a = n->op == IR_OP_conv2d              ? &n->attr.conv2d
                            : n->op == IR_OP_conv2d_grad_input ? &n->attr.conv2d_grad_input.conv
                                                               : &n->attr.conv2d_grad_weight.conv;
  return a->groups != 1;
}

/* In-place concats (cg_layout.c decides, from the graph and the fusion plan alone). */
static int cg_concat_inplace_match(cg_ctx *c, const ir_node *n, cg_kplan *kp) {
  (void)kp;
  return cg_concat_inplace(c->g, ((const cg_priv *)c->priv)->plan, n->id);
}

/* The last route of an op: takes every node the rows before it leave. */
static int cg_route_any(cg_ctx *c, const ir_node *n, cg_kplan *kp) {
  (void)c, (void)n, (void)kp;
  return 1;
}

const cg_route cg_routes[] = {
#define KROUTE(op, route, graphs, match, emit, when) {IR_OP_##op, #route, CG_ROUTE_##graphs, match, emit, when},
#include "codegen/kernels.def"
};
const int cg_n_routes = (int)(sizeof cg_routes / sizeof cg_routes[0]);

int cg_route_select(cg_ctx *c, const ir_node *n, int train, cg_kplan *kp) {
  int graphs = train ? CG_ROUTE_TRAIN : CG_ROUTE_INFER, rows = 0;
  kp->route = -1;
  for (int i = 0; i < cg_n_routes; i++) {
    const cg_route *r = &cg_routes[i];
    if (r->op != n->op || r->graphs != graphs) continue;
    rows++;
    cg_kplan t = *kp;
    if (r->match(c, n, &t)) {
      *kp = t;
      kp->route = i;
      return 0;
    }
  }
  if (rows) {
    cg_fail(c, n, "internal error: no kernel route of %s takes this node (codegen/kernels.def)", ir_ops[n->op].name);
    return -1;
  }
  return 0;
}

LLVMValueRef cg_route_emit(cg_ctx *c, const ir_node *n, const cg_kplan *kp, int train, const char *fn_name, const char **kind) {
  if (kp->route >= 0) {
    const cg_route *r = &cg_routes[kp->route];
    if (r->op != n->op || r->graphs != (train ? CG_ROUTE_TRAIN : CG_ROUTE_INFER))
      return cg_fail(c, n, "internal error: the kernel plan names route %s of another op", r->name);
    return r->emit(c, n, fn_name, kind);
  }
  cg_gen_fn gen = train ? cg_train_generator(n->op) : NULL;
  return (gen ? gen : cg_generators[n->op])(c, n, fn_name, kind);
}

/* Every op's generator (ops.def); the routed ops' entries build by their node's plan. */
const cg_gen_fn cg_generators[IR_OP_COUNT] = {
#define IR_OP(name, attr, min_in, max_in, n_out, kind) [IR_OP_##name] = cg_gen_##name,
#include "ir/ops.def"
};

/* The ops with routes keep their cg_gen_<op> entry (cg_generators[], ops.def): the kernel the
 * route of the node's plan builds (selected here when the caller has no plan). */
static LLVMValueRef routed(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind) {
  const cg_priv *p = c->priv;
  int train = p && p->train;
  cg_kplan kp = {0};
  if (p && p->kplan && n >= c->g->nodes && n < c->g->nodes + c->g->n_nodes) kp = p->kplan[n - c->g->nodes];
  else if (cg_route_select(c, n, train, &kp)) return NULL;
  return cg_route_emit(c, n, &kp, train, fn_name, kind);
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
