/* memory_limit.c — `--memory-limit` (docs/cli.md): checks each shard's planned memory, given as
 * plain records (scratch usage records, io, training state), against the limit and explains a
 * shard that does not fit: the step at its peak, the largest tensors live there, the amount
 * over and what would make it fit.  Also the training estimate from the graph alone. */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "ir/grad_train.h"
#include "passes/passes.h"

int64_t pass_mem_counted(const pass_mem_shard *s) { return s->arena + s->io + s->state; }

/* "12.3 MiB" style (binary units, as --memory-limit reads them). */
const char *pass_mem_human(int64_t bytes, char *buf, size_t n) {
  static const char *const unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double b = (double)bytes;
  int i = 0;
  while ((b >= 1024 || b <= -1024) && i < 4) b /= 1024, i++;
  snprintf(buf, n, i ? "%.1f %s" : "%.0f %s", b, unit[i]);
  return buf;
}

static int loss_node(const ir_graph *g);

/* Appends to out[0..n) at *len (clamped: a truncated text stays terminated). */
__attribute__((format(printf, 4, 5))) static void append(char *out, size_t n, size_t *len, const char *fmt, ...) {
  if (*len + 1 >= n) return;
  va_list ap;
  va_start(ap, fmt);
  int k = vsnprintf(out + *len, n - *len, fmt, ap);
  va_end(ap);
  *len = k < 0 ? *len : *len + (size_t)k < n ? *len + (size_t)k : n - 1;
}

/* Step with the most scratch bytes live (ties: the first) and that amount. */
static int peak_step(const pass_mem_shard *s, int64_t *live_out) {
  int best = 0;
  int64_t best_live = -1;
  for (int t = 0; t < s->n_steps; t++) {
    int64_t live = 0;
    for (int i = 0; i < s->n_usage; i++)
      if (s->usage[i].first_step <= t && t <= s->usage[i].last_step) live += s->usage[i].bytes;
    if (live > best_live) best_live = live, best = t;
  }
  *live_out = best_live < 0 ? 0 : best_live;
  return best;
}

/* Stash at step t: bytes of live forward results that a backward node still needs. */
static int64_t stash_at(const ir_graph *g, const pass_mem_shard *s, int t) {
  int64_t b = 0;
  for (int i = 0; i < s->n_usage; i++) {
    const pass_usage *u = &s->usage[i];
    if (u->first_step <= t && t <= u->last_step && pass_mem_is_stash(g, s->usage_vid[i])) b += u->bytes;
  }
  return b;
}

/* Appends the (up to) three largest records live at step t as "name 1.2 MiB, ...". */
static void largest_live(const ir_graph *g, const pass_mem_shard *s, int t, char *out, size_t n) {
  int pick[3] = {-1, -1, -1};
  for (int i = 0; i < s->n_usage; i++) {
    const pass_usage *u = &s->usage[i];
    if (u->first_step > t || t > u->last_step || u->bytes == 0) continue;
    for (int k = 0; k < 3; k++)
      if (pick[k] < 0 || u->bytes > s->usage[pick[k]].bytes) {
        for (int j = 2; j > k; j--) pick[j] = pick[j - 1];
        pick[k] = i;
        break;
      }
  }
  size_t len = 0;
  out[0] = 0;
  for (int k = 0; k < 3 && pick[k] >= 0; k++) {
    char b[32];
    const ir_value *v = &g->values[s->usage_vid[pick[k]]];
    append(out, n, &len, "%s'%.48s' %s", k ? ", " : "", v->name, pass_mem_human(s->usage[pick[k]].bytes, b, sizeof b));
  }
  if (!out[0]) snprintf(out, n, "none (the shard's memory is io%s)", s->state ? " and training state" : "");
}

/* Whether node i was inserted by a pass (16-bit rounding and storage: "x/round16", "x/store16",
 * "x/load16/reader"): not a layer of the model file, so --pipeline-split cannot name it. */
static int inserted_node(const ir_graph *g, int i) {
  int op = g->nodes[i].op;
  return op == IR_OP_round16 || op == IR_OP_narrow16 || op == IR_OP_widen16;
}

/* The forward step (of the first n_fwd) to suggest as a pipeline split: the middle one, or the
 * nearest after/before it that is a model layer and not the shard's first step; -1 if none. */
static int split_candidate(const ir_graph *g, const pass_mem_shard *s, int n_fwd) {
  for (int d = 0; d < n_fwd; d++)
    for (int sgn = 1; sgn >= -1; sgn -= 2) {
      int t = n_fwd / 2 + sgn * d;
      if (t >= 1 && t < n_fwd && !inserted_node(g, s->step_node[t])) return t;
    }
  return -1;
}

/* What would make shard s fit: more shards, a smaller batch with which every shard fits (arena
 * and io scale with it; the state does not; "about" = shard s at that batch), recomputation for
 * training. */
static void fit_hints(const ir_graph *g, const pass_mem_shard *all, int n_shards, int si, int64_t limit, int64_t stash,
                      char *out, size_t n) {
  const pass_mem_shard *s = &all[si];
  int64_t sum = 0, scaled = s->arena + s->io;
  for (int i = 0; i < n_shards; i++) sum += pass_mem_counted(&all[i]);
  int64_t k = (sum + limit - 1) / limit;
  if (k <= n_shards) k = n_shards + 1;
  char b1[32], b2[32];
  size_t len = 0;
  out[0] = 0;
  append(out, n, &len, "to fit: more shards (--shards %lld or more", (long long)k);
  int loss = loss_node(g), n_fwd = 0; /* splits name forward layers: the shard's middle one */
  for (int t = 0; t < s->n_steps; t++) n_fwd += loss < 0 || s->step_node[t] <= loss;
  int at = n_fwd > 1 ? split_candidate(g, s, n_fwd) : -1;
  if (at >= 0) append(out, n, &len, ", or a pipeline split at '%.48s'", g->nodes[s->step_node[at]].name);
  append(out, n, &len, ")");
  if (s->state >= limit) {
    append(out, n, &len, "; the training state alone is %s", pass_mem_human(s->state, b1, sizeof b1));
  } else if (g->batch > 1 && scaled > 0) {
    int64_t b = g->batch; /* the largest batch with which every shard fits */
    for (int i = 0; i < n_shards; i++) {
      int64_t si_scaled = all[i].arena + all[i].io;
      if (si_scaled <= 0) continue;
      int64_t bi = all[i].state >= limit ? 0 : (int64_t)((double)g->batch * (double)(limit - all[i].state) / (double)si_scaled);
      if (bi < b) b = bi;
    }
    if (b >= 1)
      append(out, n, &len, ", or --batch-size %lld (about %s)", (long long)b,
             pass_mem_human(s->state + scaled * b / g->batch, b2, sizeof b2));
    else
      append(out, n, &len, "; --batch-size 1 would still need about %s",
             pass_mem_human(s->state + scaled / g->batch, b2, sizeof b2));
  }
  if (stash > 0)
    append(out, n, &len, ", or --recompute (training: recompute instead of stashing the %s of forward activations "
           "live at the peak)", pass_mem_human(stash, b1, sizeof b1));
}

int pass_memory_limit_check(const ir_graph *g, const pass_mem_shard *sh, int n_shards, int64_t limit, ir_diag *d) {
  if (limit <= 0) return 0;
  for (int si = 0; si < n_shards; si++) {
    const pass_mem_shard *s = &sh[si];
    int64_t need = pass_mem_counted(s);
    if (need <= limit) continue;
    int64_t live;
    int t = peak_step(s, &live);
    const ir_node *at = &g->nodes[s->step_node[t]];
    int64_t stash = stash_at(g, s, t);
    char tensors[300], hints[400], parts[128], b[6][32];
    largest_live(g, s, t, tensors, sizeof tensors);
    fit_hints(g, sh, n_shards, si, limit, stash, hints, sizeof hints);
    int len = snprintf(parts, sizeof parts, "arena %s + io %s", pass_mem_human(s->arena, b[3], sizeof b[3]),
                       pass_mem_human(s->io, b[4], sizeof b[4]));
    if (s->state) snprintf(parts + len, sizeof parts - (size_t)len, " + training state %s",
                           pass_mem_human(s->state, b[5], sizeof b[5]));
    return ir_diag_set(d, at->loc, at->name,
                       "shard %d needs %s (%s), %s over --memory-limit %s; peak at step %d with %s of activations "
                       "live, largest: %s; %s",
                       si, pass_mem_human(need, b[0], sizeof b[0]), parts, pass_mem_human(need - limit, b[1], sizeof b[1]),
                       pass_mem_human(limit, b[2], sizeof b[2]), t, pass_mem_human(live, b[3], sizeof b[3]), tensors,
                       hints);
  }
  return 0;
}

/* ---- training: figures from the graph alone ---------------------------------------------- */
/* The loss node: autodiff appends the backward graph after it, so nodes up to it are the
 * forward pass. */
static int loss_node(const ir_graph *g) {
  for (int i = 0; i < g->n_nodes; i++)
    if (g->nodes[i].op == IR_OP_softmax_xent) return i;
  return -1;
}

int pass_mem_is_stash(const ir_graph *g, int v) {
  int p = g->values[v].producer, loss = loss_node(g);
  if (p < 0 || loss < 0 || p > loss) return 0;
  for (int i = loss + 1; i < g->n_nodes; i++)
    for (int j = 0; j < g->nodes[i].n_in; j++)
      if (g->nodes[i].in[j] == v) return 1;
  return 0;
}

/* Whether param v is optimizer state: the target of an optimizer node and not trainable. */
int pass_mem_is_optimizer_state(const ir_graph *g, int v) {
  if (g->values[v].kind != IR_VAL_PARAM || g->values[v].trainable) return 0;
  for (int i = 0; i < g->n_nodes; i++)
    if (ir_op_is_optimizer(g->nodes[i].op) && g->nodes[i].attr.sgd_update.target == v) return 1;
  return 0;
}

/* Shard of the first node reading value v (-1: none). */
static int first_reader_shard(const ir_graph *g, int v) {
  for (int i = 0; i < g->n_nodes; i++)
    for (int j = 0; j < g->nodes[i].n_in; j++)
      if (g->nodes[i].in[j] == v) return g->nodes[i].shard;
  return -1;
}

int pass_mem_train_estimate(const ir_graph *g, pass_mem_shard *sh) {
  int n_shards = g->n_shards > 0 ? g->n_shards : 1;
  int *last = ir_calloc((size_t)g->n_values, sizeof(int));
  for (int v = 0; v < g->n_values; v++) last[v] = -1;
  for (int i = 0; i < g->n_nodes; i++)
    for (int j = 0; j < g->nodes[i].n_in; j++) last[g->nodes[i].in[j]] = i;
  for (int s = 0; s < n_shards; s++) {
    pass_mem_shard *x = &sh[s];
    memset(x, 0, sizeof *x);
    x->owned = 1;
    x->usage = ir_calloc((size_t)g->n_nodes, sizeof *x->usage);
    x->usage_vid = ir_calloc((size_t)g->n_nodes, sizeof(int));
    x->step_node = ir_calloc((size_t)g->n_nodes, sizeof(int));
    for (int i = 0; i < g->n_nodes; i++)
      if (g->nodes[i].shard == s) x->step_node[x->n_steps++] = i;
    if (x->n_steps == 0) x->step_node[x->n_steps++] = 0;
  }
  for (int v = 0; v < g->n_values; v++) {
    const ir_value *x = &g->values[v];
    int64_t bytes = ir_value_bytes(g, v);
    if (x->kind == IR_VAL_PARAM) { /* state buffer slice: 64-aligned */
      int s = first_reader_shard(g, v);
      if (s >= 0 && s < n_shards) sh[s].state += (bytes + 63) / 64 * 64;
      continue;
    }
    int p = x->producer;
    if (p < 0) { /* images, labels, lr: io of the shards that read them */
      int s = first_reader_shard(g, v);
      if (s >= 0 && s < n_shards) sh[s].io += bytes;
      continue;
    }
    if (ir_op_is_optimizer(g->nodes[p].op)) continue; /* written into its param's slice */
    pass_mem_shard *s = &sh[g->nodes[p].shard < n_shards ? g->nodes[p].shard : 0];
    int lo = -1, hi = -1; /* steps: positions in the shard's own node list */
    for (int t = 0; t < s->n_steps; t++) {
      if (s->step_node[t] == p) lo = t;
      if (s->step_node[t] <= (last[v] >= 0 ? last[v] : p)) hi = t;
    }
    if (lo < 0) continue;
    s->usage[s->n_usage] = (pass_usage){lo, hi > lo ? hi : lo, bytes, 64, 0};
    s->usage_vid[s->n_usage++] = v;
  }
  free(last);
  for (int s = 0; s < n_shards; s++) sh[s].arena = pass_plan_memory(sh[s].usage, sh[s].n_usage);
  return n_shards;
}

void pass_mem_shards_free(pass_mem_shard *sh, int n) {
  for (int s = 0; sh && s < n; s++)
    if (sh[s].owned) free(sh[s].usage), free(sh[s].usage_vid), free(sh[s].step_node);
}
