/* split.c — pipeline splitting: assigns every node a shard (pipeline stage) from named
 * split points (layer names or block-instance prefixes, TF-IPU/PopTorch style) or from a
 * shard count (contiguous split minimising the most expensive stage by the op cost model). */
#include <float.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/grad_train.h"
#include "passes/passes.h"

int pass_edit_distance(const char *a, const char *b) {
  size_t m = strlen(a), n = strlen(b);
  int *row = malloc((n + 1) * sizeof *row);
  if (!row) abort();
  for (size_t j = 0; j <= n; j++) row[j] = (int)j;
  for (size_t i = 1; i <= m; i++) {
    int diag = row[0];
    row[0] = (int)i;
    for (size_t j = 1; j <= n; j++) {
      int up = row[j], best = diag + (a[i - 1] != b[j - 1]);
      if (up + 1 < best) best = up + 1;
      if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
      diag = up;
      row[j] = best;
    }
  }
  int r = row[n];
  free(row);
  return r;
}

/* First node named `name` or inside block `name` ("name/..."), or -1. */
static int find_split_node(const ir_graph *g, const char *name) {
  size_t len = strlen(name);
  for (int i = 0; i < g->n_nodes; i++) {
    const char *s = g->nodes[i].name;
    if (strncmp(s, name, len) == 0 && (s[len] == 0 || s[len] == '/')) return i;
  }
  return -1;
}

/* The layer name or block prefix (every "a/b" of "a/b/c") closest to name. */
static void closest_name(const ir_graph *g, const char *name, char *best, size_t cap) {
  int best_d = 1 << 30;
  char buf[512];
  best[0] = 0;
  for (int i = 0; i < g->n_nodes; i++) {
    const char *s = g->nodes[i].name;
    for (size_t k = 1;; k++) {
      if (s[k] != '/' && s[k] != 0) continue;
      if (k >= sizeof buf) break;
      memcpy(buf, s, k);
      buf[k] = 0;
      int d = pass_edit_distance(name, buf);
      if (d < best_d) {
        best_d = d;
        snprintf(best, cap, "%s", buf);
      }
      if (s[k] == 0) break;
    }
  }
}

static void assign_from_starts(ir_graph *g, const int *start, int n_shards) {
  int s = 0;
  for (int i = 0; i < g->n_nodes; i++) {
    while (s + 1 < n_shards && i >= start[s + 1]) s++;
    g->nodes[i].shard = s;
  }
  g->n_shards = n_shards;
}

static int split_by_names(ir_graph *g, const char *const *splits, int n_splits, ir_diag *d) {
  ir_loc loc = {0};
  int *start = calloc((size_t)n_splits + 1, sizeof *start);
  if (!start) abort();
  for (int k = 0; k < n_splits; k++) {
    int i = find_split_node(g, splits[k]);
    if (i < 0) {
      char best[512];
      closest_name(g, splits[k], best, sizeof best);
      free(start);
      return ir_diag_set(d, loc, NULL, "pipeline split '%s' is not a layer of the model%s%s%s", splits[k],
                         best[0] ? " (did you mean '" : "", best, best[0] ? "'?)" : "");
    }
    if (i == 0) {
      free(start);
      return ir_diag_set(d, loc, g->nodes[0].name,
                         "pipeline split '%s' is the first layer: stage 0 would be empty", splits[k]);
    }
    if (i <= start[k]) {
      free(start);
      return ir_diag_set(d, loc, NULL, "pipeline splits must be in increasing layer order: '%s' comes before '%s'",
                         splits[k], splits[k - 1]);
    }
    start[k + 1] = i;
  }
  assign_from_starts(g, start, n_splits + 1);
  free(start);
  return 0;
}

/* Contiguous split of node costs c[0..n) into k parts minimising the largest part
 * (dynamic programming over prefix sums; n is a few hundred, k a few). */
static void balanced_starts(const double *c, int n, int k, int *start) {
  double *pre = malloc((size_t)(n + 1) * sizeof *pre);
  double *dp = malloc((size_t)(k + 1) * (n + 1) * sizeof *dp);
  int *cut = malloc((size_t)(k + 1) * (n + 1) * sizeof *cut);
  if (!pre || !dp || !cut) abort();
  pre[0] = 0;
  for (int i = 0; i < n; i++) pre[i + 1] = pre[i] + c[i];
#define DP(p, i) dp[(size_t)(p) * (n + 1) + (i)]
#define CUT(p, i) cut[(size_t)(p) * (n + 1) + (i)]
  for (int i = 0; i <= n; i++) DP(1, i) = pre[i];
  for (int p = 2; p <= k; p++)
    for (int i = p; i <= n; i++) {
      DP(p, i) = DBL_MAX;
      for (int j = p - 1; j < i; j++) { /* parts 1..p-1 cover [0,j), part p covers [j,i) */
        double v = DP(p - 1, j) > pre[i] - pre[j] ? DP(p - 1, j) : pre[i] - pre[j];
        if (v < DP(p, i)) {
          DP(p, i) = v;
          CUT(p, i) = j;
        }
      }
    }
  int i = n;
  for (int p = k; p >= 2; p--) {
    start[p - 1] = CUT(p, i);
    i = start[p - 1];
  }
  start[0] = 0;
#undef DP
#undef CUT
  free(pre);
  free(dp);
  free(cut);
}

static int split_balanced(ir_graph *g, int n_shards, ir_diag *d) {
  ir_loc loc = {0};
  if (n_shards > g->n_nodes)
    return ir_diag_set(d, loc, NULL, "--shards %d: the model has only %d layers", n_shards, g->n_nodes);
  double *cost = malloc((size_t)g->n_nodes * sizeof *cost);
  int *start = malloc((size_t)n_shards * sizeof *start);
  if (!cost || !start) abort();
  for (int i = 0; i < g->n_nodes; i++) {
    ir_cost c;
    ir_node_cost(g, &g->nodes[i], &c);
    cost[i] = c.flops + 1.0; /* +1: every layer costs something (launch, barrier) */
  }
  balanced_starts(cost, g->n_nodes, n_shards, start);
  assign_from_starts(g, start, n_shards);
  free(cost);
  free(start);
  return 0;
}

int pass_split(ir_graph *g, const char *const *splits, int n_splits, int n_shards, ir_diag *d) {
  ir_loc loc = {0};
  if (n_splits > 0 && n_shards > 0 && n_shards != n_splits + 1)
    return ir_diag_set(d, loc, NULL, "--shards %d contradicts %d --pipeline-splits (%d stages)", n_shards, n_splits,
                       n_splits + 1);
  if (n_shards < 0) return ir_diag_set(d, loc, NULL, "--shards must be positive (got %d)", n_shards);
  if (g->n_nodes == 0) return ir_diag_set(d, loc, NULL, "the model has no layers");
  if (n_splits > 0) return split_by_names(g, splits, n_splits, d);
  if (n_shards > 1) return split_balanced(g, n_shards, d);
  for (int i = 0; i < g->n_nodes; i++) g->nodes[i].shard = 0;
  g->n_shards = 1;
  return 0;
}

/* ---- training split ------------------------------------------------------------------- */
int pass_train_phase(const ir_graph *g, int node) {
  const ir_node *n = &g->nodes[node];
  if (!strncmp(n->name, "update/", 7) || ir_op_is_optimizer(n->op)) return PASS_PHASE_UPDATE;
  if (!strncmp(n->name, "bwd/", 4) || !strncmp(n->name, "grad/", 5) || !strncmp(n->name, "recompute/", 10))
    return PASS_PHASE_BWD;
  return PASS_PHASE_FWD;
}

/* Shard of the first forward node reading param value v, or -1. */
static int param_shard(const ir_graph *g, int v, int n_fwd) {
  for (int i = 0; i < n_fwd; i++)
    for (int j = 0; j < g->nodes[i].n_in; j++)
      if (g->nodes[i].in[j] == v) return g->nodes[i].shard;
  return -1;
}

/* Shard of the forward layer or value a backward name "X/<what>" refers to (longest X), or -1. */
static int origin_shard(const ir_graph *g, const char *rest, int n_fwd) {
  char buf[512];
  snprintf(buf, sizeof buf, "%s", rest);
  for (size_t k = strlen(buf); k > 0; k--) {
    if (buf[k] != 0 && buf[k] != '/') continue;
    buf[k] = 0;
    for (int i = 0; i < n_fwd; i++)
      if (!strcmp(g->nodes[i].name, buf)) return g->nodes[i].shard;
    int v = ir_find_value(g, buf);
    if (v >= 0) {
      int p = g->values[v].producer;
      if (p >= 0 && p < n_fwd) return g->nodes[p].shard;
      if (g->values[v].kind == IR_VAL_PARAM) {
        int s = param_shard(g, v, n_fwd);
        if (s >= 0) return s;
      }
    }
  }
  return -1;
}

int pass_split_train(ir_graph *g, const char *const *splits, int n_splits, int n_shards, ir_diag *d) {
  int n_fwd = 0, total = g->n_nodes;
  while (n_fwd < total && pass_train_phase(g, n_fwd) == PASS_PHASE_FWD) n_fwd++;
  for (int i = n_fwd; i < total; i++)
    if (pass_train_phase(g, i) == PASS_PHASE_FWD)
      return ir_diag_set(d, g->nodes[i].loc, g->nodes[i].name, "internal error: forward node after the backward graph");
  g->n_nodes = n_fwd; /* split the forward only; the backward follows it */
  int rc = pass_split(g, splits, n_splits, n_shards, d);
  g->n_nodes = total;
  if (rc) return rc;
  int last = g->n_shards - 1;
  for (int i = n_fwd; i < total; i++) {
    ir_node *n = &g->nodes[i];
    int ph = pass_train_phase(g, i), s = -1;
    if (ph == PASS_PHASE_UPDATE) {
      int t = n->attr.sgd_update.target;
      if (ir_op_is_optimizer(n->op) && t >= 0) {
        const char *pn = g->values[t].name; /* "P" or "P/momentum": the trainable param's shard */
        s = origin_shard(g, pn, n_fwd);
      }
      if (s < 0) s = 0;
    } else {
      if (!strncmp(n->name, "bwd/", 4)) s = origin_shard(g, n->name + 4, n_fwd);
      else if (!strncmp(n->name, "grad/", 5)) s = origin_shard(g, n->name + 5, n_fwd);
      for (int j = 0; s < 0 && j < n->n_in; j++) { /* fallback: the latest forward producer */
        int p = g->values[n->in[j]].producer;
        if (p >= 0 && p < n_fwd && g->nodes[p].shard > s) s = g->nodes[p].shard;
      }
      if (s < 0) s = last;
      for (int j = 0; j < n->n_in; j++) { /* backward data flows from later shards to earlier ones */
        int p = g->values[n->in[j]].producer;
        if (p >= n_fwd && pass_train_phase(g, p) == PASS_PHASE_BWD && g->nodes[p].shard < s) s = g->nodes[p].shard;
      }
    }
    n->shard = s;
  }
  return 0;
}
