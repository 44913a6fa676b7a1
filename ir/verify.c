/* verify.c — the IR verifier: runs after lowering and between passes; checks operand
 * counts, topological order, unique names, dtypes and that every node's recorded shape is
 * what its op's inference hook says. */
#include "ir.h"

static int verify_node(const ir_graph *g, const ir_node *n, ir_diag *d) {
  const ir_op_info *info = &ir_ops[n->op];
  char b1[96], b2[96];
  if (n->n_in < info->min_in || n->n_in > info->max_in)
    return ir_diag_set(d, n->loc, n->name, "verifier: %s has %d operands", info->name, n->n_in);
  for (int k = 0; k < n->n_in; k++) {
    int v = n->in[k];
    if (v < 0 || v >= g->n_values) return ir_diag_set(d, n->loc, n->name, "verifier: operand %d out of range", k);
    int p = g->values[v].producer;
    if (p >= n->id) return ir_diag_set(d, n->loc, n->name, "verifier: operand %%%s is produced later", g->values[v].name);
    if (ir_dtype_is_int(g->values[v].dtype) && n->op != IR_OP_cast && !(n->op == IR_OP_normalize && g->values[v].dtype == IR_U8))
      return ir_diag_set(d, n->loc, n->name, "verifier: %s reads the %s value %%%s (integers are read by cast only)", ir_ops[n->op].name,
                         ir_dtype_name(g->values[v].dtype), g->values[v].name);
  }
  if (n->out < 0 || n->out >= g->n_values || g->values[n->out].producer != n->id)
    return ir_diag_set(d, n->loc, n->name, "verifier: result value does not point back to the node");
  ir_shape s = {0};
  ir_diag sub = {0};
  if (info->infer(g, n, &s, &sub)) return ir_diag_set(d, n->loc, n->name, "verifier: %s", sub.msg);
  if (!ir_shape_eq(&s, &g->values[n->out].shape))
    return ir_diag_set(d, n->loc, n->name, "verifier: recorded shape %s, inferred %s",
                       ir_shape_str(&g->values[n->out].shape, b1, sizeof b1), ir_shape_str(&s, b2, sizeof b2));
  if (n->shard < 0 || n->shard >= g->n_shards)
    return ir_diag_set(d, n->loc, n->name, "verifier: shard %d outside 0..%d", n->shard, g->n_shards - 1);
  /* inference shards are contiguous runs of nodes; a training graph's backward nodes go back
   * down the shards (passes/split.c pass_split_train) */
  if (g->label < 0 && n->id > 0 && n->shard < g->nodes[n->id - 1].shard)
    return ir_diag_set(d, n->loc, n->name, "verifier: shards must be contiguous in node order");
  return 0;
}

static int verify_values(const ir_graph *g, ir_diag *d) {
  for (int i = 0; i < g->n_values; i++) {
    const ir_value *v = &g->values[i];
    if (v->id != i) return ir_diag_set(d, (ir_loc){0}, v->name, "verifier: value id mismatch");
    if (v->kind == IR_VAL_PARAM && !v->data) return ir_diag_set(d, (ir_loc){0}, v->name, "verifier: param without data");
    if (v->kind == IR_VAL_ACT && v->dtype != IR_F32 &&
        !(v->producer >= 0 && (g->nodes[v->producer].op == IR_OP_narrow16 || /* 16-bit storage (store16.c) */
                               g->nodes[v->producer].op == IR_OP_round16 || g->nodes[v->producer].op == IR_OP_maxpool ||
                               (g->nodes[v->producer].op == IR_OP_cast && (int)v->dtype == g->nodes[v->producer].attr.cast.to))))
      return ir_diag_set(d, (ir_loc){0}, v->name, "verifier: activations are f32 in the IR (16-bit only as narrow16, round16 or maxpool results; integers as cast results)");
    if (ir_find_value(g, v->name) != i)
      return ir_diag_set(d, (ir_loc){0}, v->name, "verifier: duplicate or unindexed value name");
  }
  return 0;
}

int ir_verify(const ir_graph *g, ir_diag *d) {
  if (g->input < 0 || g->input >= g->n_values || g->values[g->input].kind != IR_VAL_INPUT)
    return ir_diag_set(d, (ir_loc){0}, NULL, "verifier: graph has no input");
  if (g->n_outputs < 1) return ir_diag_set(d, (ir_loc){0}, NULL, "verifier: graph has no output");
  for (int i = 0; i < g->n_outputs; i++)
    if (g->outputs[i] < 0 || g->outputs[i] >= g->n_values)
      return ir_diag_set(d, (ir_loc){0}, NULL, "verifier: output %d out of range", i);
  if (verify_values(g, d)) return -1;
  for (int i = 0; i < g->n_nodes; i++) {
    if (g->nodes[i].id != i) return ir_diag_set(d, g->nodes[i].loc, g->nodes[i].name, "verifier: node id mismatch");
    if (verify_node(g, &g->nodes[i], d)) return -1;
  }
  return 0;
}
