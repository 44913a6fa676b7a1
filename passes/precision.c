/* precision.c — --precision 16.32 / 16.16 as exact 16-bit numerics in fp32 storage (issue 6;
 * docs/precision.md).  Inserts round16 nodes (ir/ops.def) so that every activation a layer
 * group stores and every weight a forward op reads is a bf16 (or fp16) value; the kernels
 * still compute and store f32, so the numerics are those of a 16-bit run (f32 accumulation,
 * f32 epilogues, one rounding at each store) with no memory or speed gain yet.
 *
 * Rules (forward graph, before autodiff):
 *  - weights (trainable params: weights, biases, gamma, beta): inference rounds their data
 *    in place at compile time; training reads them through round16 nodes placed right before
 *    their first reader (the f32 master stays in the state buffer and is updated in f32:
 *    16.32).  Running statistics stay f32.
 *  - activations: the f32 image input (or normalize's result) and every node result are
 *    rounded, except: a value whose only consumer is an element-wise epilogue op (relu,
 *    sigmoid, swish, clip, hardsigmoid, hardswish, add, inference batchnorm: the rounding happens once, after the epilogue,
 *    as in a fused 16-bit kernel); a value already on the 16-bit grid (reshape, maxpool, relu, inference dropout
 *    of a rounded value; a normalize folded into its conv, whose result is the raw 0..255); the logits (input of softmax / softmax_xent), the loss and the
 *    graph outputs, which stay f32.
 *  - gradients: autodiff's rule for round16 is dx = round16(dy), so the gradients are
 *    rounded where the activations are.
 * 16.16 training: as 16.32, and the initial weights are rounded in place here; the optimizer
 * pass (optimizer.c, cfg.round16) makes every weight update round its result (to nearest or,
 * --enable-stochastic-rounding, stochastically), so the stored weights stay on the 16-bit grid
 * (their round16 nodes are then identities forward, and round the weight gradients backward).
 * Optimizer state (momentum, RMSprop/Adam averages) stays f32; see docs/precision.md. */
#include <stdlib.h>
#include <string.h>

#include "passes/passes.h"

static int is_epilogue(const ir_node *n) {
  return n->op == IR_OP_relu || n->op == IR_OP_sigmoid || n->op == IR_OP_swish || n->op == IR_OP_add ||
         n->op == IR_OP_clip || n->op == IR_OP_hardsigmoid || n->op == IR_OP_hardswish || n->op == IR_OP_leaky_relu ||
         (n->op == IR_OP_batchnorm && !n->attr.batchnorm.training); /* folded into the conv's epilogue */
}

/* Result exactly on the 16-bit grid whenever operand 0 is (max/select/copy of grid values). */
static int keeps_grid(const ir_node *n) {
  return n->op == IR_OP_reshape || n->op == IR_OP_maxpool || n->op == IR_OP_relu ||
         (n->op == IR_OP_dropout && !(n->attr.dropout.training && n->attr.dropout.rate > 0.0f));
}

int pass_precision_format(const char *half_type) {
  if (!half_type || !*half_type || !strcmp(half_type, "bf16")) return IR_HALF_BF16;
  if (!strcmp(half_type, "fp16")) return IR_HALF_FP16;
  return -1;
}

int pass_precision(ir_graph *g, const char *precision, const char *half_type, int training, ir_diag *d) {
  ir_loc loc = {0};
  if (!precision || !*precision || !strcmp(precision, "32.32")) return 0;
  if (strcmp(precision, "16.32") && strcmp(precision, "16.16"))
    return ir_diag_set(d, loc, NULL, "--precision %s: expected 32.32, 16.32 or 16.16", precision);
  int fmt = pass_precision_format(half_type);
  if (fmt < 0) return ir_diag_set(d, loc, NULL, "--half-type %s: expected bf16 or fp16", half_type);
  for (int i = 0; i < g->n_nodes; i++)
    if (g->nodes[i].op == IR_OP_round16) return 0; /* already applied (idempotent) */

  int n0 = g->n_nodes, nv0 = g->n_values;
  int *n_cons = calloc((size_t)nv0, sizeof *n_cons), *cons = calloc((size_t)nv0, sizeof *cons);
  int *grid = calloc((size_t)nv0, sizeof *grid), *rounded = malloc((size_t)nv0 * sizeof *rounded);
  int *after = malloc((size_t)(nv0 + 1) * sizeof *after); /* per new node: place after node k (-1 = before all) */
  int *before = malloc((size_t)(nv0 + 1) * sizeof *before);
  if (!n_cons || !cons || !grid || !rounded || !after || !before) abort();
  for (int v = 0; v < nv0; v++) rounded[v] = -1;
  for (int i = 0; i < n0; i++)
    for (int j = 0; j < g->nodes[i].n_in; j++) n_cons[g->nodes[i].in[j]]++, cons[g->nodes[i].in[j]] = i;
  int rc = 0, added = 0;
  ir_attr a = {.round16 = {fmt}};

  /* weights */
  for (int v = 0; v < nv0 && rc == 0; v++) {
    ir_value *p = &g->values[v];
    if (p->kind != IR_VAL_PARAM || !p->trainable || !n_cons[v]) continue;
    if (!training || !strcmp(precision, "16.16")) { /* 16.16 training: the initial 16-bit weights */
      int64_t k = ir_shape_numel(&p->shape);
      for (int64_t e = 0; e < k; e++) p->data[e] = ir_round16_f32(p->data[e], fmt);
    }
    if (!training) {
      grid[v] = 1;
      continue;
    }
    int first = -1;
    for (int i = 0; i < n0 && first < 0; i++)
      for (int j = 0; j < g->nodes[i].n_in; j++)
        if (g->nodes[i].in[j] == v) first = i;
    int r = ir_add_node(g, IR_OP_round16, ir_fmt(g->arena, "%s/round16", p->name), loc, &v, 1, &a, d);
    if (r < 0) rc = -1;
    else rounded[v] = r, before[added] = first, after[added++] = -2;
  }
  /* activations: the f32 input, then every node result in order */
  for (int k = -1; k < n0 && rc == 0; k++) {
    int v = k < 0 ? g->input : g->nodes[k].out;
    if (v < 0 || g->values[v].dtype != IR_F32) continue;
    const ir_node *n = k < 0 ? NULL : &g->nodes[k];
    if (n && keeps_grid(n) && (grid[n->in[0]] || rounded[n->in[0]] >= 0)) { grid[v] = 1; continue; }
    if (n && n->op == IR_OP_normalize && n->attr.normalize.folded == 1) { grid[v] = 1; continue; } /* 0..255 */
    if (!n_cons[v] || (n && n->op == IR_OP_softmax_xent)) continue;
    int out = 0, logits = 0, all_epi = 1;
    for (int o = 0; o < g->n_outputs; o++) out |= g->outputs[o] == v;
    for (int i = 0; i < n0; i++)
      for (int j = 0; j < g->nodes[i].n_in; j++)
        if (g->nodes[i].in[j] == v) {
          logits |= g->nodes[i].op == IR_OP_softmax || g->nodes[i].op == IR_OP_softmax_xent;
          all_epi &= is_epilogue(&g->nodes[i]) && n_cons[v] == 1;
        }
    if (out || logits || (n && all_epi)) continue;
    int r = ir_add_node(g, IR_OP_round16, ir_fmt(g->arena, "%s/round16", g->values[v].name),
                        n ? n->loc : loc, &v, 1, &a, d);
    if (r < 0) rc = -1;
    else rounded[v] = r, before[added] = -1, after[added++] = k;
  }
  if (rc == 0 && added) {
    /* rewire the original readers to the rounded values */
    for (int i = 0; i < n0; i++)
      for (int j = 0; j < g->nodes[i].n_in; j++)
        if (rounded[g->nodes[i].in[j]] >= 0) g->nodes[i].in[j] = rounded[g->nodes[i].in[j]];
    /* reorder: input roundings first, each node followed by the rounding of its result,
     * weight roundings right before their first reader */
    ir_node *old = malloc((size_t)g->n_nodes * sizeof *old);
    if (!old) abort();
    memcpy(old, g->nodes, (size_t)g->n_nodes * sizeof *old);
    int m = 0;
    for (int k = -1; k < n0; k++) {
      for (int x = 0; k >= 0 && x < added; x++)
        if (after[x] == -2 && before[x] == k) g->nodes[m++] = old[n0 + x];
      if (k >= 0) g->nodes[m++] = old[k];
      for (int x = 0; x < added; x++)
        if (after[x] == k) g->nodes[m++] = old[n0 + x];
    }
    for (int i = 0; i < m; i++) g->nodes[i].id = i, g->values[g->nodes[i].out].producer = i;
    free(old);
    if (m != g->n_nodes) rc = ir_diag_set(d, loc, NULL, "internal error: precision pass lost nodes");
  }
  free(n_cons), free(cons), free(grid), free(rounded), free(after), free(before);
  if (rc == 0 && ir_verify(g, d) < 0) return -1;
  return rc < 0 ? -1 : added;
}
