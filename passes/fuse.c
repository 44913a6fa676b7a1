/* fuse.c — epilogue fusion plan for the back end: conv2d [-> inference batchnorm (folded
 * into the conv's weights and bias)] [-> relu | sigmoid | swish | add(same-shape act)]*
 * [-> round16 (--precision 16.x: the store rounds to the 16-bit grid; always the last op)].
 * The graph is not changed; codegen reads the plan (one kernel per group). */
#include <stdlib.h>
#include <string.h>

#include "passes/passes.h"

/* Number of operand slots (over all nodes) reading value v. */
static int use_count(const ir_graph *g, int v) {
  int k = 0;
  for (int i = 0; i < g->n_nodes; i++)
    for (int j = 0; j < g->nodes[i].n_in; j++) k += g->nodes[i].in[j] == v;
  return k;
}

static int is_output(const ir_graph *g, int v) {
  for (int i = 0; i < g->n_outputs; i++)
    if (g->outputs[i] == v) return 1;
  return 0;
}

/* The single consumer of v (in v's producer's shard), or -1. */
static int sole_consumer(const ir_graph *g, int v) {
  if (is_output(g, v) || use_count(g, v) != 1) return -1;
  int prod = g->values[v].producer;
  for (int i = prod + 1; i < g->n_nodes; i++)
    for (int j = 0; j < g->nodes[i].n_in; j++)
      if (g->nodes[i].in[j] == v) return g->nodes[i].shard == g->nodes[prod].shard ? i : -1;
  return -1;
}

/* Can node m extend a chain whose current result is v? */
static int epilogue_ok(const ir_graph *g, const ir_node *m, int v) {
  switch (m->op) {
  case IR_OP_relu: case IR_OP_sigmoid: case IR_OP_swish:
    return 1;
  case IR_OP_round16: { /* CNNC_NO_ROUND16_FUSION=1: separate round16 kernels (tests compare) */
    const char *e = getenv("CNNC_NO_ROUND16_FUSION");
    return !(e && *e && strcmp(e, "0"));
  }
  case IR_OP_add: {
    int other = m->in[0] == v ? m->in[1] : m->in[0];
    const ir_value *o = &g->values[other];
    return (o->kind == IR_VAL_ACT || o->kind == IR_VAL_INPUT) && o->dtype == IR_F32 &&
           ir_shape_eq(&o->shape, &g->values[v].shape);
  }
  default:
    return 0;
  }
}

static void grow_group(const ir_graph *g, int a, pass_fusion *plan) {
  int v = g->nodes[a].out;
  for (;;) {
    int m = sole_consumer(g, v);
    if (m < 0 || plan[m].anchor != m) return;
    const ir_node *mn = &g->nodes[m];
    pass_fusion *p = &plan[a];
    if (mn->op == IR_OP_batchnorm && !mn->attr.batchnorm.training && p->bn < 0 && p->n_post == 0 && mn->in[0] == v) {
      p->bn = m;
    } else if (p->n_post < PASS_MAX_POST && epilogue_ok(g, mn, v)) {
      p->post[p->n_post++] = m;
    } else {
      return;
    }
    plan[m].anchor = a;
    p->last = m;
    v = mn->out;
    if (mn->op == IR_OP_round16) return; /* the rounding is the store: nothing fuses after it */
  }
}

void pass_fuse(const ir_graph *g, int enable, pass_fusion *plan) {
  for (int i = 0; i < g->n_nodes; i++) {
    memset(&plan[i], 0, sizeof plan[i]);
    plan[i].anchor = plan[i].last = i;
    plan[i].bn = -1;
  }
  if (!enable) return;
  for (int i = 0; i < g->n_nodes; i++)
    if (g->nodes[i].op == IR_OP_conv2d && plan[i].anchor == i) grow_group(g, i, plan);
}
