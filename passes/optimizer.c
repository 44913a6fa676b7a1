/* optimizer.c — appends the weight update after the backward graph (issue 5,
 * docs/training.md): for each trainable P with "grad/P", the optimizer's state updates and
 * "update/P", every result tagged with the param it replaces (attr.target).  Semantics are
 * torch.optim's; the learning rate is the runtime scalar input "lr".
 * --precision 16.16 (cfg->round16): the weight updates round their result to the 16-bit
 * format (attr.round16); stochastically with cfg->stochastic, the update then reads the step
 * counter "optimizer/step" (Adam's t', added for every optimizer) as its last operand and
 * hashes (attr.seed, t', element) (docs/precision.md).
 * --auto-loss-scaling (cfg->auto_loss_scale): a state param "optimizer/loss_scale" [4] =
 * {S, good steps, skipped steps, growth interval} (the runtime updates it, rt_train.c) becomes
 * the second operand of every backward round16: dx = round16(dy * S) / S, i.e. each 16-bit
 * gradient is stored as the loss-scaled value would be (overflow -> inf, no underflow below
 * 2^-24 / S) and unscaled at once — for a power-of-two S exactly the numerics of scaling the
 * loss by S and unscaling the gradients before the update, since the backward is linear in
 * dy. */
#include <string.h>

#include "ir/grad_train.h"
#include "passes/passes.h"

typedef struct opt_ctx {
  ir_graph *g;
  ir_diag *d;
  const pass_optim_cfg *cfg;
  int lr, step; /* value ids; step = Adam's incremented counter t' or -1 */
  unsigned char *norm_param;
} opt_ctx;

static int node(opt_ctx *o, const char *name, ir_op op, const int *in, int n_in, ir_optim_attr a, int target) {
  ir_attr u = {0};
  a.target = target;
  u.sgd_update = a;
  return ir_add_node(o->g, op, name, (ir_loc){0}, in, n_in, &u, o->d);
}

/* A zero-initialised, non-trainable state param "P/suffix" shaped like P. */
static int state(opt_ctx *o, int p, const char *suffix) {
  return ir_add_param(o->g, ir_fmt(o->g->arena, "%s/%s", o->g->values[p].name, suffix), o->g->values[p].shape, 0);
}

/* The stochastic rounding seed of param name under seed: splitmix64 of seed ^ FNV-1a(name),
 * so a param's random stream does not depend on the other params. */
static uint64_t param_seed(uint64_t seed, const char *name) {
  uint64_t h = 1469598103934665603ull;
  for (const unsigned char *p = (const unsigned char *)name; *p; p++) h = (h ^ *p) * 1099511628211ull;
  uint64_t z = (seed ^ h) + 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* The rounded weight update w' (op, inputs in[0..n_in-1]): attr round16/stochastic/seed set,
 * the step counter appended when stochastic (Adam's update already ends with it). */
static int wnode(opt_ctx *o, const char *name, ir_op op, const int *in, int n_in, ir_optim_attr a, int p) {
  int tmp[IR_MAX_IN];
  if (o->cfg->round16) {
    a.round16 = o->cfg->round16, a.stochastic = o->cfg->stochastic;
    a.seed = a.stochastic ? param_seed(o->cfg->seed, o->g->values[p].name) : 0;
    if (a.stochastic && op != IR_OP_adam_update) {
      for (int j = 0; j < n_in; j++) tmp[j] = in[j];
      tmp[n_in++] = o->step;
      in = tmp;
    }
  }
  return node(o, name, op, in, n_in, a, p);
}

/* Emits the update of param p with gradient gr.  Returns 0 or -1. */
static int update_one(opt_ctx *o, int p, int gr) {
  const pass_optim_cfg *c = o->cfg;
  const char *pn = o->g->values[p].name, *opt = c->optimizer;
  ir_optim_attr a = {0};
  a.momentum = c->momentum > 0 ? c->momentum : 0.9f;
  a.rho = c->rho > 0 ? c->rho : 0.99f;
  a.beta1 = c->beta1 > 0 ? c->beta1 : 0.9f;
  a.beta2 = c->beta2 > 0 ? c->beta2 : 0.999f;
  a.eps = c->eps > 0 ? c->eps : 1e-8f;
  a.grad_scale = c->loss_scale > 0 ? 1.0f / c->loss_scale : 1.0f;
  int exempt = c->exempt_norm && o->norm_param[p];
  a.weight_decay = exempt ? 0.0f : c->weight_decay;
  a.l2 = exempt ? 0.0f : c->l2;
  const char *upd = ir_fmt(o->g->arena, "update/%s", pn);
  if (!strcmp(opt, "sgd")) {
    int in[3] = {p, gr, o->lr};
    return wnode(o, upd, IR_OP_sgd_update, in, 3, a, p) < 0 ? -1 : 0;
  }
  if (!strcmp(opt, "momentum") || !strcmp(opt, "nesterov")) {
    a.nesterov = !strcmp(opt, "nesterov");
    int v = state(o, p, "momentum");
    int in_v[3] = {gr, v, p};
    int v1 = node(o, ir_fmt(o->g->arena, "update/%s/momentum", pn), IR_OP_momentum_acc, in_v, 3, a, v);
    int in_w[4] = {p, v1, o->lr, gr};
    return v1 < 0 || wnode(o, upd, IR_OP_momentum_update, in_w, a.nesterov ? 4 : 3, a, p) < 0 ? -1 : 0;
  }
  if (!strcmp(opt, "rmsprop")) {
    int s = state(o, p, "rms");
    int in_s[3] = {gr, s, p};
    int s1 = node(o, ir_fmt(o->g->arena, "update/%s/rms", pn), IR_OP_rmsprop_acc, in_s, 3, a, s);
    int in_w[4] = {p, s1, o->lr, gr};
    return s1 < 0 || wnode(o, upd, IR_OP_rmsprop_update, in_w, 4, a, p) < 0 ? -1 : 0;
  }
  if (!strcmp(opt, "adam")) {
    int m = state(o, p, "m"), v = state(o, p, "v");
    int in_m[3] = {gr, m, p}, in_v[3] = {gr, v, p};
    int m1 = node(o, ir_fmt(o->g->arena, "update/%s/m", pn), IR_OP_adam_moment1, in_m, 3, a, m);
    int v1 = m1 < 0 ? -1 : node(o, ir_fmt(o->g->arena, "update/%s/v", pn), IR_OP_adam_moment2, in_v, 3, a, v);
    int in_w[5] = {p, m1, v1, o->lr, o->step};
    return v1 < 0 || wnode(o, upd, IR_OP_adam_update, in_w, 5, a, p) < 0 ? -1 : 0;
  }
  return ir_diag_set(o->d, (ir_loc){0}, NULL, "unknown optimizer '%s' (sgd|momentum|nesterov|rmsprop|adam)", opt);
}

static int is_train_dropout(const ir_node *n) {
  return n->op == IR_OP_dropout && n->attr.dropout.training && n->attr.dropout.rate > 0.0f && n->n_in == 1;
}

/* Training dropout draws a new mask every step: every training dropout node, the forward
 * ones and the gradients autodiff emitted (the same op, same seed), gets the step counter t
 * as operand in[1] and hashes (seed, t, element) (ir/ref_eltwise.c).  Wired here rather than
 * in the frontend because the counter is optimizer state, created just above, and a graph
 * without an optimizer (autodiff alone, inference, eval) has no step to read: its dropout
 * keeps the fixed (seed, element) mask.  All these nodes precede "update/optimizer/step", so
 * forward and backward read the same value, t before this step's increment (0 at the first
 * step).  Micro-batches of one update (gradient accumulation) share t, hence one mask; a
 * restored checkpoint restores t and continues the mask sequence. */
static void wire_dropout_step(ir_graph *g, int t) {
  for (int i = 0; i < g->n_nodes; i++)
    if (is_train_dropout(&g->nodes[i])) g->nodes[i].in[g->nodes[i].n_in++] = t;
}

/* Marks gamma/beta operands of batchnorm and groupnorm nodes. */
static void mark_norm_params(const ir_graph *g, unsigned char *mark) {
  for (int i = 0; i < g->n_nodes; i++) {
    const ir_node *n = &g->nodes[i];
    if (n->op != IR_OP_batchnorm && n->op != IR_OP_groupnorm) continue;
    for (int j = 1; j <= 2; j++) mark[n->in[j]] = 1;
  }
}

int pass_optimizer(ir_graph *g, const pass_optim_cfg *cfg, ir_diag *d) {
  int n_vals = g->n_values, n_updated = 0;
  unsigned char mark[1];
  unsigned char *norm = n_vals > 0 ? ir_alloc(g->arena, (size_t)n_vals) : mark;
  opt_ctx o = {g, d, cfg, -1, -1, norm};
  static const char *const known[] = {"sgd", "momentum", "nesterov", "rmsprop", "adam"};
  int ok = 0;
  for (int i = 0; i < 5 && cfg->optimizer; i++) ok |= !strcmp(cfg->optimizer, known[i]);
  if (!ok)
    return ir_diag_set(d, (ir_loc){0}, NULL, "unknown optimizer '%s' (sgd|momentum|nesterov|rmsprop|adam)",
                       cfg->optimizer ? cfg->optimizer : "(none)");
  if (cfg->stochastic && !cfg->round16)
    return ir_diag_set(d, (ir_loc){0}, NULL,
                       "--enable-stochastic-rounding rounds the 16-bit weight update: it needs --precision 16.16");
  if (cfg->round16 < 0 || cfg->round16 > 1 + IR_HALF_FP16)
    return ir_diag_set(d, (ir_loc){0}, NULL, "optimizer: bad 16-bit format %d for the weight update", cfg->round16 - 1);
  mark_norm_params(g, norm);
  if (ir_find_value(g, IR_LR_INPUT_NAME) >= 0)
    return ir_diag_set(d, (ir_loc){0}, NULL, "optimizer: the graph already has a value named '%s'", IR_LR_INPUT_NAME);
  o.lr = ir_add_input(g, IR_LR_INPUT_NAME, IR_F32, (ir_shape){1, {1}});
  int n_drop = 0;
  for (int i = 0; i < g->n_nodes; i++) n_drop += is_train_dropout(&g->nodes[i]);
  if ((cfg->optimizer && !strcmp(cfg->optimizer, "adam")) || cfg->stochastic || n_drop) {
    int t = ir_add_param(g, "optimizer/step", (ir_shape){1, {1}}, 0);
    ir_optim_attr a = {0};
    if (n_drop) wire_dropout_step(g, t);
    if ((o.step = node(&o, "update/optimizer/step", IR_OP_step_count, &t, 1, a, t)) < 0) return -1;
  }
  for (int p = 0; p < n_vals; p++) {
    if (g->values[p].kind != IR_VAL_PARAM || !g->values[p].trainable) continue;
    int gr = ir_find_value(g, ir_fmt(g->arena, "grad/%s", g->values[p].name));
    if (gr < 0) continue; /* the loss does not depend on it */
    if (update_one(&o, p, gr)) return -1;
    n_updated++;
  }
  if (cfg->auto_loss_scale > 0) {
    int loss = -1, n_bwd = 0;
    for (int i = 0; i < g->n_nodes; i++)
      if (g->nodes[i].op == IR_OP_softmax_xent) loss = i;
    if (loss < 0) return ir_diag_set(d, (ir_loc){0}, NULL, "--auto-loss-scaling: the graph has no softmax_xent loss");
    int ls = ir_add_param(g, "optimizer/loss_scale", (ir_shape){1, {4}}, 0);
    if (ls < 0) return ir_diag_set(d, (ir_loc){0}, NULL, "--auto-loss-scaling: cannot add optimizer/loss_scale");
    float *x = g->values[ls].data;
    x[0] = cfg->auto_loss_scale, x[1] = 0, x[2] = 0, x[3] = (float)cfg->loss_scale_interval;
    for (int i = loss + 1; i < g->n_nodes; i++) /* the backward roundings (autodiff appends after the loss) */
      if (g->nodes[i].op == IR_OP_round16 && g->nodes[i].n_in == 1) g->nodes[i].in[g->nodes[i].n_in++] = ls, n_bwd++;
    if (!n_bwd)
      return ir_diag_set(d, (ir_loc){0}, NULL, "--auto-loss-scaling: no 16-bit gradients to protect (needs --precision 16.32 or 16.16)");
  }
  return n_updated;
}
