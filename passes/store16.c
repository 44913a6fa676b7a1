/* store16.c — 16-bit storage of long-lived values under --precision 16.32 / 16.16 (issue 6,
 * docs/precision.md "16-bit storage").  passes/precision.c puts the stored activations on the
 * 16-bit grid (round16) in f32 buffers; this pass keeps the long-lived ones in bf16/fp16
 * buffers, exactly (a grid value narrows and widens back bit for bit):
 *
 *  training (after pass_split_train and pass_recompute): every forward result read in another
 *  stage — the stash (a forward value a backward node reads, pass_mem_is_stash) and the
 *  boundary tensors between forward shards — gets a narrow16 node right after its producer
 *  ("V/store16", same shard: the f32 result dies there unless a reader in the producer's own
 *  stage still needs it) and, in every other stage that reads it, one widen16 node right
 *  before that stage's first reader ("bwd/V/load16/s<shard>" in a backward stage,
 *  "V/load16/s<shard>" in a forward one: a short-lived f32 temporary) that those readers read
 *  instead.  Only values on the grid qualify: round16 results and reshape/maxpool/relu/
 *  eval-dropout of one.  A value off the grid whose only readers in other stages are relu_grad
 *  operands x (relu_grad tests x > 0 only: the pre-activation of a conv -> relu or
 *  batchnorm -> relu) is narrowed with keep_sign: round16, but a positive x never becomes 0.
 *  A weight's 16-bit copy (P/round16 of a trainable param) is not stashed at all: its readers
 *  in other stages get their own round16(P) right before them (the master P does not change
 *  before the update stage).  Everything else (the logits, values the update stage reads)
 *  stays f32.
 *
 *  inference (after pass_split, pass_store16_infer): a value on the grid (round16 result, or
 *  maxpool of one) whose kernel writes 16 bits and that at least one reader's kernel reads in
 *  16 bits (hooks from the back end: codegen/gen_store16.c) gets the 16-bit dtype itself, no
 *  extra node; every other reader gets a widen16 right before it.  Graph outputs and values
 *  read in another shard stay f32.
 *
 * tune store16=0 skips the pass (the f32-storage build the tests
 * compare against bit for bit). */
#include <stdlib.h>
#include <string.h>

#include "passes/passes.h"

/* Inserted after autodiff: no gradient rules. */
int pass_grad_narrow16(pass_ad *ad, const ir_node *n, int dy) {
  (void)dy;
  return pass_grad_fail(ad, n, "narrow16 is a storage op inserted after autodiff and has no gradient rule");
}
int pass_grad_widen16(pass_ad *ad, const ir_node *n, int dy) {
  (void)dy;
  return pass_grad_fail(ad, n, "widen16 is a storage op inserted after autodiff and has no gradient rule");
}

int pass_store16_disabled(const ir_graph *g) {
  return !ir_tune(g)->store16;
}

/* Result exactly on the 16-bit grid whenever operand 0 is (as precision.c's keeps_grid). */
static int keeps_grid(const ir_node *n) {
  return n->op == IR_OP_reshape || n->op == IR_OP_maxpool || n->op == IR_OP_relu ||
         (n->op == IR_OP_dropout && !(n->attr.dropout.training && n->attr.dropout.rate > 0.0f));
}

/* grid[v] for every value: on the 16-bit grid by construction. */
static char *grid_values(const ir_graph *g) {
  char *grid = calloc((size_t)g->n_values + 1, 1);
  if (!grid) abort();
  for (int i = 0; i < g->n_nodes; i++) {
    const ir_node *n = &g->nodes[i];
    if ((n->op == IR_OP_round16 && n->n_in == 1) || n->op == IR_OP_widen16 ||
        (keeps_grid(n) && grid[n->in[0]]))
      grid[n->out] = 1;
  }
  return grid;
}

typedef struct ins { int node; int before; int shard; } ins; /* new node, placed before/after `before` */

/* Rebuilds the node order: every inserted node x goes right before (pos >= 0) or right after
 * (pos = -2 - k: after node k) its anchor. */
static void reorder(ir_graph *g, int n0, const ins *x, int nx) {
  ir_node *old = malloc((size_t)g->n_nodes * sizeof *old);
  if (!old) abort();
  memcpy(old, g->nodes, (size_t)g->n_nodes * sizeof *old);
  int m = 0;
  for (int k = 0; k < n0; k++) {
    for (int i = 0; i < nx; i++)
      if (x[i].before == k) g->nodes[m++] = old[x[i].node];
    g->nodes[m++] = old[k];
    for (int i = 0; i < nx; i++)
      if (x[i].before == -2 - k) g->nodes[m++] = old[x[i].node];
  }
  for (int i = 0; i < m; i++) {
    g->nodes[i].id = i;
    g->values[g->nodes[i].out].producer = i;
  }
  free(old);
}

static int verify_unsharded(ir_graph *g, ir_diag *d) {
  int *shards = malloc((size_t)(g->n_nodes + 1) * sizeof(int));
  if (!shards) abort();
  for (int i = 0; i < g->n_nodes; i++) shards[i] = g->nodes[i].shard, g->nodes[i].shard = 0;
  int rc = ir_verify(g, d);
  for (int i = 0; i < g->n_nodes; i++) g->nodes[i].shard = shards[i];
  free(shards);
  return rc;
}

/* The node producing w (just added) runs in reader i's stage right before it, and i reads w
 * instead of v. */
static void reader_reads(ir_graph *g, int i, int v, int w, ins *x, int *nx) {
  int wn = g->values[w].producer;
  g->nodes[wn].shard = g->nodes[i].shard;
  x[(*nx)++] = (ins){wn, i, g->nodes[i].shard};
  ir_node *r = &g->nodes[i];
  for (int j = 0; j < r->n_in; j++)
    if (r->in[j] == v) r->in[j] = w;
}

/* Adds narrow16 after v's producer and one widen16 right before every reader node in another
 * stage (readers[0..nr)), each read by that node only: a short-lived f32 temporary.  Appends
 * the insertions to x. */
static int split_value(ir_graph *g, int v, int fmt, int keep_sign, const int *readers, int nr, ins *x, int *nx,
                       ir_diag *d) {
  const char *name = g->values[v].name;
  int p = g->values[v].producer;
  ir_attr a = {.narrow16 = {fmt, keep_sign}};
  int h = ir_add_node(g, IR_OP_narrow16, ir_fmt(g->arena, "%s/store16", name), g->nodes[p].loc, &v, 1, &a, d);
  if (h < 0) return -1;
  int hn = g->values[h].producer;
  g->nodes[hn].shard = g->nodes[p].shard;
  x[(*nx)++] = (ins){hn, -2 - p, g->nodes[p].shard};
  ir_attr wa = {.widen16 = {fmt, 0}};
  for (int k = 0; k < nr; k++) {
    int i = readers[k];
    const char *rn = g->nodes[i].name;
    /* named after the reader: "bwd/..." keeps the backward phase (pass_train_phase) */
    const char *nm = pass_train_phase(g, i) == PASS_PHASE_BWD
                         ? ir_fmt(g->arena, "bwd/load16/%s/%s", name, rn)
                         : ir_fmt(g->arena, "%s/load16/%s", name, rn);
    int w = ir_add_node(g, IR_OP_widen16, nm, g->nodes[i].loc, &h, 1, &wa, d);
    if (w < 0) return -1;
    reader_reads(g, i, v, w, x, nx);
  }
  return 0;
}

/* round16(P) again right before every reader (readers[0..nr)) of v = P/round16 in another
 * stage: the same op on the same f32 master, so bitwise the stashed value. */
static int rerounded(ir_graph *g, int v, const int *readers, int nr, ins *x, int *nx, ir_diag *d) {
  ir_node pn = g->nodes[g->values[v].producer];
  for (int k = 0; k < nr; k++) {
    int i = readers[k];
    const char *nm = pass_train_phase(g, i) == PASS_PHASE_BWD
                         ? ir_fmt(g->arena, "bwd/reround16/%s/%s", g->values[v].name, g->nodes[i].name)
                         : ir_fmt(g->arena, "%s/reround16/%s", g->values[v].name, g->nodes[i].name);
    int w = ir_add_node(g, IR_OP_round16, nm, g->nodes[i].loc, pn.in, 1, &pn.attr, d);
    if (w < 0) return -1;
    reader_reads(g, i, v, w, x, nx);
  }
  return 0;
}

int pass_store16_train(ir_graph *g, int fmt, pass_store16_stats *stats, ir_diag *d) {
  FILE *log = stats ? stats->log : NULL;
  if (stats) memset(stats, 0, sizeof *stats), stats->log = log;
  int n0 = g->n_nodes, nv0 = g->n_values, S = g->n_shards > 0 ? g->n_shards : 1;
  char *grid = grid_values(g);
  int *readers = malloc((size_t)(n0 + 1) * sizeof(int));
  ins *x = malloc((size_t)(n0 * IR_MAX_IN + nv0 + 1) * sizeof *x);
  if (!readers || !x) abort();
  int nx = 0, rc = 0;
  for (int v = 0; v < nv0 && rc == 0; v++) {
    const ir_value *val = &g->values[v];
    int p = val->producer;
    if (val->kind != IR_VAL_ACT || val->dtype != IR_F32 || p < 0 || p >= n0 ||
        pass_train_phase(g, p) != PASS_PHASE_FWD)
      continue;
    int out = 0;
    for (int o = 0; o < g->n_outputs; o++) out |= g->outputs[o] == v;
    if (out) continue;
    int home = PASS_PHASE_FWD * S + g->nodes[p].shard, nr = 0, update = 0, only_relu_x = 1;
    for (int i = 0; i < n0; i++) {
      const ir_node *r = &g->nodes[i];
      int st = pass_train_phase(g, i) * S + r->shard, reads = 0;
      for (int j = 0; j < r->n_in; j++) {
        if (r->in[j] != v || st == home) continue;
        if (pass_train_phase(g, i) == PASS_PHASE_UPDATE) update = 1;
        if (!(r->op == IR_OP_relu_grad && j == 1)) only_relu_x = 0;
        reads = 1;
      }
      if (reads) readers[nr++] = i;
    }
    if (!nr || update) continue;
    int64_t b32 = ir_shape_numel(&val->shape) * 4;
    const ir_node *pn = &g->nodes[p];
    if (pn->op == IR_OP_round16 && pn->n_in == 1 && g->values[pn->in[0]].kind == IR_VAL_PARAM) {
      /* a weight's 16-bit copy: recomputed from the master weight (state, unchanged until the
       * update stage) right before each reader in another stage instead of stashed */
      if (rerounded(g, v, readers, nr, x, &nx, d) < 0) rc = -1;
      else if (stats) stats->recomputed++, stats->recomputed_bytes += b32;
      continue;
    }
    if (!grid[v] && !only_relu_x) {
      if (stats) stats->f32_values++, stats->f32_bytes += b32;
      if (log) fprintf(log, "cnnc: 16-bit storage: '%s' (%s, %lld bytes) stays f32: not on the 16-bit grid\n", val->name,
                       ir_ops[g->nodes[p].op].name, (long long)b32);
      continue;
    }
    if (split_value(g, v, fmt, !grid[v], readers, nr, x, &nx, d) < 0) rc = -1;
    else if (stats) stats->values++, stats->keep_sign += !grid[v], stats->bytes32 += b32;
  }
  free(grid), free(readers);
  if (rc == 0 && nx) reorder(g, n0, x, nx);
  free(x);
  if (rc == 0 && verify_unsharded(g, d) < 0) rc = -1;
  return rc < 0 ? -1 : nx;
}

/* ---- inference (docs/precision.md "16-bit storage of inference activations") ------------- */
static int is_graph_output(const ir_graph *g, int v) {
  for (int o = 0; o < g->n_outputs; o++)
    if (g->outputs[o] == v) return 1;
  return 0;
}

int pass_store16_infer(ir_graph *g, int fmt, const pass_store16_hooks *h, pass_store16_stats *stats, ir_diag *d) {
  FILE *log = stats ? stats->log : NULL;
  if (stats) memset(stats, 0, sizeof *stats), stats->log = log;
  int n0 = g->n_nodes, nv0 = g->n_values;
  ir_dtype dt16 = fmt == IR_HALF_FP16 ? IR_F16 : IR_BF16;
  char *half = calloc((size_t)nv0 + 1, 1); /* half[v]: v becomes 16-bit */
  char *grid = calloc((size_t)nv0 + 1, 1); /* grid[v]: v is on the 16-bit grid (round16, maxpool of one) */
  ins *x = malloc((size_t)(n0 * IR_MAX_IN + 1) * sizeof *x);
  int *wr = malloc((size_t)(n0 * IR_MAX_IN + 1) * 2 * sizeof(int)); /* (reader, operand) pairs to widen */
  if (!half || !grid || !x || !wr) abort();
  int nw = 0, nx = 0, nh = 0, rc = 0;
  /* decide in node order (a maxpool's input is decided before the maxpool) */
  for (int p = 0; p < n0; p++) {
    const ir_node *pn = &g->nodes[p];
    int v = pn->out;
    const ir_value *val = &g->values[v];
    if (val->kind != IR_VAL_ACT || val->dtype != IR_F32) continue;
    grid[v] = (pn->op == IR_OP_round16 && pn->n_in == 1 && g->values[pn->in[0]].kind != IR_VAL_PARAM &&
               pn->attr.round16.format == fmt) || /* the kernels narrow to the storage format */
              (pn->op == IR_OP_maxpool && grid[pn->in[0]]);
    if (!grid[v] || is_graph_output(g, v) || !h->writes16(h->ctx, g, p)) continue;
    int cross = 0, nr = 0, direct = 0;
    for (int i = p + 1; i < n0; i++)
      for (int j = 0; j < g->nodes[i].n_in; j++)
        if (g->nodes[i].in[j] == v) cross |= g->nodes[i].shard != pn->shard, nr++, direct |= h->reads16(h->ctx, g, i, j);
    if (cross || !nr) continue; /* shard boundaries stay f32 (the io tensors of the ABI) */
    /* no reader reads it in 16 bits: every reader would widen it again (an extra pass, and at
     * the reader's step 6 bytes per element live instead of 4), so it stays f32 */
    if (!direct) continue;
    half[v] = 1, nh++;
    if (stats) stats->values++, stats->bytes32 += ir_shape_numel(&val->shape) * 4;
  }
  /* readers that cannot read 16 bits: a widen16 right before each (one per reader node) */
  for (int i = 0; i < n0; i++) {
    const ir_node *r = &g->nodes[i];
    for (int j = 0; j < r->n_in; j++) {
      int v = r->in[j], dup = 0;
      if (!half[v] || h->reads16(h->ctx, g, i, j)) continue;
      for (int k = 0; k < nw; k++) dup |= wr[2 * k] == i && g->nodes[i].in[wr[2 * k + 1]] == v;
      if (!dup) wr[2 * nw] = i, wr[2 * nw + 1] = j, nw++;
    }
  }
  for (int v = 0; v < nv0; v++)
    if (half[v]) g->values[v].dtype = dt16;
  ir_attr wa = {.widen16 = {fmt, 0}};
  for (int k = 0; k < nw && rc == 0; k++) {
    int i = wr[2 * k], v = g->nodes[i].in[wr[2 * k + 1]];
    int hv = v;
    int w = ir_add_node(g, IR_OP_widen16, ir_fmt(g->arena, "%s/load16/%s", g->values[v].name, g->nodes[i].name),
                        g->nodes[i].loc, &hv, 1, &wa, d);
    if (w < 0) {
      rc = -1;
      break;
    }
    g->values[w].dtype = IR_F32;
    reader_reads(g, i, v, w, x, &nx);
    if (log) fprintf(log, "cnnc: 16-bit storage: '%s' widened to f32 for '%s' (%s)\n", g->values[v].name,
                     g->nodes[i].name, ir_ops[g->nodes[i].op].name);
  }
  if (stats) stats->f32_values = nw;
  free(half), free(grid), free(wr);
  if (rc == 0 && nx) reorder(g, n0, x, nx);
  free(x);
  return rc < 0 ? -1 : nh;
}
