/* recompute.c — recomputation for training (--recompute, issue 5, docs/training.md
 * "Recomputation").  Runs on a training graph after pass_split_train.  Without it, every
 * forward activation a backward node reads crosses from a forward stage to a backward stage
 * and is stashed per in-flight micro-batch (a train tensor).  With it, the forward nodes of
 * shard s whose results the backward stage of s reads are re-emitted as "recompute/<layer>"
 * nodes of the backward phase on shard s (inserted just before shard s's first backward node)
 * and the backward nodes of s read the copies:
 *   pipeline, all  every forward node of the shard is recomputed from the shard's stage inputs
 *                  (values from earlier shards, the images): only those are stashed;
 *   auto           conv2d / dense outputs are checkpoints (stashed); the cheap nodes between
 *                  them (relu, pools, reshape, add, ...) are recomputed from the checkpoints.
 * Never recomputed: training batchnorm (it updates running statistics), the loss, and nodes
 * whose result lives in the state buffer.  The copies compute the same values with the same
 * kernels, so the weights are bitwise those without recomputation. */
#include <stdlib.h>
#include <string.h>

#include "ir/grad_train.h"
#include "passes/passes.h"

static int clonable(const ir_graph *g, const ir_node *n, int auto_mode) {
  if (n->op == IR_OP_softmax_xent || ir_op_is_optimizer(n->op)) return 0;
  if (n->op == IR_OP_batchnorm && n->attr.batchnorm.training) return 0;
  for (int j = 0; j < n->n_in; j++) /* the label/lr inputs only feed the loss, but be safe */
    if (g->values[n->in[j]].kind == IR_VAL_LABEL) return 0;
  if (auto_mode && (n->op == IR_OP_conv2d || n->op == IR_OP_dense)) return 0;
  return 1;
}

typedef struct rc_ctx {
  ir_graph *g;
  int n_fwd, auto_mode, shard, n_cloned;
  int *clone_of; /* value id -> recomputed value id, or -1 */
  ir_diag *d;
} rc_ctx;

/* The value the backward of shard r->shard reads instead of v: v's recomputed copy, or v. */
static int recomputed(rc_ctx *r, int v) {
  if (r->clone_of[v] >= 0) return r->clone_of[v];
  int p = r->g->values[v].producer;
  if (p < 0 || p >= r->n_fwd || r->g->nodes[p].shard != r->shard || !clonable(r->g, &r->g->nodes[p], r->auto_mode)) return v;
  ir_node n = r->g->nodes[p]; /* copy: ir_add_node may move the node array */
  int in[IR_MAX_IN];
  for (int j = 0; j < n.n_in; j++)
    if ((in[j] = recomputed(r, n.in[j])) < 0) return -1;
  int c = ir_add_node(r->g, n.op, ir_fmt(r->g->arena, "recompute/%s", n.name), n.loc, in, n.n_in, &n.attr, r->d);
  if (c < 0) return -1;
  r->g->nodes[r->g->values[c].producer].shard = r->shard;
  r->n_cloned++;
  return r->clone_of[v] = c;
}

int pass_recompute(ir_graph *g, const char *mode, ir_diag *d) {
  if (!mode || !strcmp(mode, "none")) return 0;
  if (strcmp(mode, "auto") && strcmp(mode, "pipeline") && strcmp(mode, "all"))
    return ir_diag_set(d, (ir_loc){0}, NULL, "--recompute %s: expected none, auto, pipeline or all", mode);
  int n_orig = g->n_nodes, n_fwd = 0;
  while (n_fwd < n_orig && pass_train_phase(g, n_fwd) == PASS_PHASE_FWD) n_fwd++;
  if (n_fwd == n_orig) return ir_diag_set(d, (ir_loc){0}, NULL, "--recompute %s needs a training graph (--mode training)", mode);
  rc_ctx r = {g, n_fwd, !strcmp(mode, "auto"), 0, 0, NULL, d};
  int *first_clone = malloc((size_t)(g->n_shards + 1) * sizeof(int)), *end_clone = malloc((size_t)(g->n_shards + 1) * sizeof(int));
  if (!first_clone || !end_clone) abort();
  for (int s = 0; s < g->n_shards; s++) {
    r.shard = s;
    first_clone[s] = g->n_nodes;
    free(r.clone_of);
    r.clone_of = malloc((size_t)(g->n_values + 4 * n_fwd + 16) * sizeof(int));
    if (!r.clone_of) abort();
    for (int v = 0; v < g->n_values + 4 * n_fwd + 16; v++) r.clone_of[v] = -1;
    for (int i = n_fwd; i < n_orig; i++) {
      if (g->nodes[i].shard != s || pass_train_phase(g, i) != PASS_PHASE_BWD) continue;
      for (int j = 0; j < g->nodes[i].n_in; j++) {
        int v = recomputed(&r, g->nodes[i].in[j]);
        if (v < 0) {
          free(r.clone_of), free(first_clone), free(end_clone);
          return -1;
        }
        g->nodes[i].in[j] = v;
      }
    }
    end_clone[s] = g->n_nodes;
  }
  free(r.clone_of);
  /* Node order: the copies of shard s go just before shard s's first backward node. */
  int *order = malloc((size_t)g->n_nodes * sizeof(int)), n = 0;
  char *placed = calloc((size_t)g->n_shards, 1);
  if (!order || !placed) abort();
  for (int i = 0; i < n_orig; i++) {
    int s = g->nodes[i].shard;
    if (i >= n_fwd && pass_train_phase(g, i) == PASS_PHASE_BWD && !placed[s]) {
      placed[s] = 1;
      for (int k = first_clone[s]; k < end_clone[s]; k++) order[n++] = k;
    }
    order[n++] = i;
  }
  for (int s = 0; s < g->n_shards; s++) /* copies exist only for a shard's backward nodes */
    if (!placed[s] && end_clone[s] > first_clone[s]) {
      free(order), free(placed), free(first_clone), free(end_clone);
      return ir_diag_set(d, (ir_loc){0}, NULL, "internal error: --recompute %s: shard %d has copies but no backward", mode, s);
    }
  ir_node *nodes = malloc((size_t)g->cap_nodes * sizeof *nodes);
  if (!nodes) abort();
  for (int i = 0; i < n; i++) {
    nodes[i] = g->nodes[order[i]];
    nodes[i].id = i;
    g->values[nodes[i].out].producer = i;
  }
  memcpy(g->nodes, nodes, (size_t)n * sizeof *nodes);
  free(nodes), free(order), free(placed), free(first_clone), free(end_clone);
  /* verify the result (shards aside: a training graph's backward runs them in reverse) */
  int *shards = malloc((size_t)g->n_nodes * sizeof(int));
  if (!shards) abort();
  for (int i = 0; i < g->n_nodes; i++) shards[i] = g->nodes[i].shard, g->nodes[i].shard = 0;
  int rc = ir_verify(g, d);
  for (int i = 0; i < g->n_nodes; i++) g->nodes[i].shard = shards[i];
  free(shards);
  return rc < 0 ? -1 : r.n_cloned;
}
