/* autodiff.c — reverse-mode autodiff over the primitive graph (issue 5, docs/training.md).
 * Appends the backward graph after the forward nodes: one gradient rule per forward op
 * (pass_grad_<op>, expanded from ir/ops.def), each a small graph of primitives; gradients of
 * a value with several consumers are summed with add.  Every trainable param P that the loss
 * depends on gets exactly one value named "grad/P"; intermediate gradients are "bwd/...". */
#include <stdlib.h>
#include <string.h>

#include "passes/passes.h"

struct pass_ad {
  ir_graph *g;
  ir_diag *d;
  int n_fwd_values, n_fwd_nodes;
  int *grad;             /* per forward value: its (partial) gradient value id, or -1 */
  int *pending;          /* per forward value: gradient contributions still to come */
  unsigned char *need;   /* per forward value: depends on a trainable param */
  unsigned char *live;   /* per forward value: the loss depends on it */
  int seed;              /* value whose gradient is the implicit seed (the loss), or -1 */
  float loss_scale;
  int n_acc;             /* counter for accumulation node names */
};

int pass_grad_needed(const pass_ad *ad, const ir_node *n, int slot) {
  int v = n->in[slot];
  return v < ad->n_fwd_values && ad->need[v] && ad->live[v];
}

float pass_grad_loss_scale(const pass_ad *ad) { return ad->loss_scale; }
ir_graph *pass_grad_graph(pass_ad *ad) { return ad->g; }

/* Appends node `op` named name; -1 with ad->d filled on failure. */
static int add_named(pass_ad *ad, const char *name, const ir_node *n, ir_op op, const int *in, int n_in,
                     const ir_attr *a) {
  ir_attr zero = {0};
  return ir_add_node(ad->g, op, name, n->loc, in, n_in, a ? a : &zero, ad->d);
}

int pass_grad_node(pass_ad *ad, const ir_node *n, const char *what, ir_op op, const int *in, int n_in,
                   const ir_attr *a) {
  return add_named(ad, ir_fmt(ad->g->arena, "bwd/%s/%s", n->name, what), n, op, in, n_in, a);
}

/* Name of the next gradient node of value v: "grad/P" once a trainable param's last
 * contribution arrives, "bwd/<n>/<what>" otherwise. */
static const char *contrib_name(pass_ad *ad, int v, const ir_node *n, const char *what, int final) {
  const ir_value *val = &ad->g->values[v];
  if (final && val->kind == IR_VAL_PARAM && val->trainable) return ir_fmt(ad->g->arena, "grad/%s", val->name);
  return ir_fmt(ad->g->arena, "bwd/%s/%s", n->name, what);
}

/* Adds contribution r to the gradient of v (operand slot of n).  `final_named` says r's node
 * already carries the final name.  Returns 0 or -1. */
static int accumulate(pass_ad *ad, int v, const ir_node *n, int r, int final_named) {
  const ir_value *val = &ad->g->values[v];
  int last = ad->pending[v] == 0, is_param = val->kind == IR_VAL_PARAM && val->trainable;
  if (ad->grad[v] < 0) {
    if (last && is_param && !final_named) { /* a shared value (e.g. add's dy): copy under the final name */
      ir_attr a = {.reshape = {val->shape}};
      r = add_named(ad, ir_fmt(ad->g->arena, "grad/%s", val->name), n, IR_OP_reshape, &r, 1, &a);
    }
    ad->grad[v] = r;
    return r < 0 ? -1 : 0;
  }
  int in[2] = {ad->grad[v], r};
  const char *name = last && is_param ? ir_fmt(ad->g->arena, "grad/%s", val->name)
                                      : ir_fmt(ad->g->arena, "bwd/%s/acc%d", val->name, ++ad->n_acc);
  ad->grad[v] = add_named(ad, name, n, IR_OP_add, in, 2, NULL);
  return ad->grad[v] < 0 ? -1 : 0;
}

int pass_grad_give(pass_ad *ad, const ir_node *n, int slot, const char *what, ir_op op, const int *in, int n_in,
                   const ir_attr *a) {
  if (!pass_grad_needed(ad, n, slot)) return 0;
  int v = n->in[slot];
  ad->pending[v]--;
  int final = ad->pending[v] == 0 && ad->grad[v] < 0;
  int r = add_named(ad, contrib_name(ad, v, n, what, final), n, op, in, n_in, a);
  if (r < 0) return -1;
  return accumulate(ad, v, n, r, final);
}

int pass_grad_give_value(pass_ad *ad, const ir_node *n, int slot, int r) {
  if (!pass_grad_needed(ad, n, slot)) return 0;
  ad->pending[n->in[slot]]--;
  return accumulate(ad, n->in[slot], n, r, 0);
}

int pass_grad_fail(pass_ad *ad, const ir_node *n, const char *why) {
  return ir_diag_set(ad->d, n->loc, n->name, "autodiff: %s", why);
}

/* ---- the rule table --------------------------------------------------------------------- */
const pass_grad_fn pass_grad_rules[IR_OP_COUNT] = {
#define IR_OP(name, attr, min_in, max_in, n_out, kind) [IR_OP_##name] = pass_grad_##name,
#include "ir/ops.def"
};

/* ---- driver ------------------------------------------------------------------------------ */
/* need: depends on a trainable param (forward order); live: the loss depends on it (reverse);
 * pending: operand slots of live nodes reading the value. */
static void analyse(pass_ad *ad, int loss) {
  ir_graph *g = ad->g;
  for (int v = 0; v < ad->n_fwd_values; v++) ad->need[v] = g->values[v].kind == IR_VAL_PARAM && g->values[v].trainable;
  for (int i = 0; i < ad->n_fwd_nodes; i++)
    for (int j = 0; j < g->nodes[i].n_in; j++) ad->need[g->nodes[i].out] |= ad->need[g->nodes[i].in[j]];
  ad->live[loss] = 1;
  for (int i = ad->n_fwd_nodes - 1; i >= 0; i--)
    if (ad->live[g->nodes[i].out])
      for (int j = 0; j < g->nodes[i].n_in; j++) {
        ad->live[g->nodes[i].in[j]] = 1;
        ad->pending[g->nodes[i].in[j]]++;
      }
}

static int run(ir_graph *g, int loss, int seed_grad, float loss_scale, ir_diag *d) {
  pass_ad ad = {g, d, g->n_values, g->n_nodes, NULL, NULL, NULL, NULL, seed_grad < 0 ? loss : -1, loss_scale, 0};
  ad.grad = malloc((size_t)g->n_values * sizeof *ad.grad);
  ad.pending = calloc((size_t)g->n_values, sizeof *ad.pending);
  ad.need = calloc((size_t)g->n_values, 1);
  ad.live = calloc((size_t)g->n_values, 1);
  if (!ad.grad || !ad.pending || !ad.need || !ad.live) abort();
  for (int v = 0; v < g->n_values; v++) ad.grad[v] = -1;
  analyse(&ad, loss);
  ad.grad[loss] = seed_grad;
  int rc = 0, n_grads = 0;
  for (int i = ad.n_fwd_nodes - 1; i >= 0 && rc == 0; i--) {
    ir_node n = g->nodes[i]; /* a copy: rules append nodes (g->nodes may move) */
    if (!ad.live[n.out] || !ad.need[n.out]) continue;
    if (ad.grad[n.out] < 0 && n.out != ad.seed) continue; /* nothing flows back (cannot happen for live nodes) */
    rc = pass_grad_rules[n.op](&ad, &n, ad.grad[n.out]);
  }
  for (int v = 0; v < ad.n_fwd_values && rc == 0; v++)
    if (g->values[v].kind == IR_VAL_PARAM && g->values[v].trainable && ad.grad[v] >= 0) n_grads++;
  free(ad.grad), free(ad.pending), free(ad.need), free(ad.live);
  return rc < 0 ? -1 : n_grads;
}

int pass_autodiff_seed(ir_graph *g, int y, int dy, ir_diag *d) {
  return run(g, y, dy, 1.0f, d);
}

int pass_autodiff(ir_graph *g, float loss_scale, ir_diag *d) {
  int loss = -1;
  for (int k = g->n_outputs - 1; k >= 0 && loss < 0; k--) {
    int p = g->values[g->outputs[k]].producer;
    if (p >= 0 && g->nodes[p].op == IR_OP_softmax_xent) loss = g->outputs[k];
  }
  if (loss < 0)
    return ir_diag_set(d, (ir_loc){0}, NULL, "autodiff: the graph has no softmax_xent loss output (compile with --mode training)");
  if (!(loss_scale > 0)) return ir_diag_set(d, (ir_loc){0}, NULL, "autodiff: loss scaling must be > 0");
  return run(g, loss, -1, loss_scale, d);
}

/* ---- gradient rules ------------------------------------------------------------------------ */
#define G(ad) pass_grad_graph(ad)
#define SHAPE_OF(ad, v) (G(ad)->values[v].shape)

int pass_grad_is_forward(ir_op op) { return op < IR_OP_conv2d_grad_input; }

/* Gradient of a broadcast operand b (shape bs) from t (shape of the result): reduce_sum over
 * the broadcast dims, then reshape to bs when its rank is lower. */
static int give_reduced(pass_ad *ad, const ir_node *n, int slot, int t) {
  if (!pass_grad_needed(ad, n, slot)) return 0;
  ir_shape ts = SHAPE_OF(ad, t), bs = SHAPE_OF(ad, n->in[slot]);
  if (ir_shape_eq(&ts, &bs)) return pass_grad_give_value(ad, n, slot, t);
  ir_attr r = {0};
  r.reduce_sum.shape.rank = ts.rank;
  for (int d = 0; d < ts.rank; d++) {
    int bd = d - (ts.rank - bs.rank);
    r.reduce_sum.shape.dim[d] = bd < 0 ? 1 : bs.dim[bd];
  }
  if (ir_shape_eq(&r.reduce_sum.shape, &bs))
    return pass_grad_give(ad, n, slot, slot ? "db" : "da", IR_OP_reduce_sum, &t, 1, &r);
  int s = pass_grad_node(ad, n, slot ? "db_sum" : "da_sum", IR_OP_reduce_sum, &t, 1, &r);
  if (s < 0) return -1;
  ir_attr a = {.reshape = {bs}};
  return pass_grad_give(ad, n, slot, slot ? "db" : "da", IR_OP_reshape, &s, 1, &a);
}

/* Gradient of a per-channel vector param [C] from t [N,C,...]: sum to [1,C,1,...], reshape. */
static int give_channel_sum(pass_ad *ad, const ir_node *n, int slot, const char *what, int t) {
  if (!pass_grad_needed(ad, n, slot)) return 0;
  ir_shape ts = SHAPE_OF(ad, t);
  ir_attr r = {0};
  r.reduce_sum.shape.rank = ts.rank;
  for (int d = 0; d < ts.rank; d++) r.reduce_sum.shape.dim[d] = d == 1 ? ts.dim[1] : 1;
  int s = pass_grad_node(ad, n, ir_fmt(G(ad)->arena, "%s_sum", what), IR_OP_reduce_sum, &t, 1, &r);
  if (s < 0) return -1;
  ir_attr a = {.reshape = {{1, {ts.dim[1]}}}};
  return pass_grad_give(ad, n, slot, what, IR_OP_reshape, &s, 1, &a);
}

int pass_grad_conv2d(pass_ad *ad, const ir_node *n, int dy) {
  ir_attr a = {0};
  a.conv2d_grad_input.conv = n->attr.conv2d;
  a.conv2d_grad_input.x_shape = SHAPE_OF(ad, n->in[0]);
  int in_dx[2] = {dy, n->in[1]}, in_dw[2] = {dy, n->in[0]};
  if (pass_grad_give(ad, n, 0, "dx", IR_OP_conv2d_grad_input, in_dx, 2, &a) ||
      pass_grad_give(ad, n, 1, "dw", IR_OP_conv2d_grad_weight, in_dw, 2, &a))
    return -1;
  return n->n_in > 2 ? give_channel_sum(ad, n, 2, "db", dy) : 0;
}

/* Batch statistics in training (the gradient flows through mean and variance); running
 * statistics are constants otherwise. */
int pass_grad_batchnorm(pass_ad *ad, const ir_node *n, int dy) {
  ir_attr a = {.batchnorm = n->attr.batchnorm};
  int tr = n->attr.batchnorm.training;
  int in_dx[5] = {dy, n->in[0], n->in[1], n->in[3], n->in[4]}, in_dg[4] = {dy, n->in[0], n->in[3], n->in[4]};
  if (pass_grad_give(ad, n, 0, "dx", IR_OP_batchnorm_grad_input, in_dx, tr ? 3 : 5, &a) ||
      pass_grad_give(ad, n, 1, "dgamma", IR_OP_batchnorm_grad_gamma, in_dg, tr ? 2 : 4, &a))
    return -1;
  return give_channel_sum(ad, n, 2, "dbeta", dy);
}

int pass_grad_groupnorm(pass_ad *ad, const ir_node *n, int dy) {
  ir_attr a = {.groupnorm = n->attr.groupnorm};
  int in_dx[3] = {dy, n->in[0], n->in[1]}, in_dg[2] = {dy, n->in[0]};
  if (pass_grad_give(ad, n, 0, "dx", IR_OP_groupnorm_grad_input, in_dx, 3, &a) ||
      pass_grad_give(ad, n, 1, "dgamma", IR_OP_groupnorm_grad_gamma, in_dg, 2, &a))
    return -1;
  return give_channel_sum(ad, n, 2, "dbeta", dy);
}

static int act_rule(pass_ad *ad, const ir_node *n, int dy, ir_op op) {
  int in[2] = {dy, n->in[0]};
  return pass_grad_give(ad, n, 0, "dx", op, in, 2, NULL);
}
int pass_grad_relu(pass_ad *ad, const ir_node *n, int dy) { return act_rule(ad, n, dy, IR_OP_relu_grad); }
int pass_grad_sigmoid(pass_ad *ad, const ir_node *n, int dy) { return act_rule(ad, n, dy, IR_OP_sigmoid_grad); }
int pass_grad_swish(pass_ad *ad, const ir_node *n, int dy) { return act_rule(ad, n, dy, IR_OP_swish_grad); }
int pass_grad_hardswish(pass_ad *ad, const ir_node *n, int dy) { return act_rule(ad, n, dy, IR_OP_hardswish_grad); }
int pass_grad_clip(pass_ad *ad, const ir_node *n, int dy) {
  ir_attr a = {.clip = n->attr.clip};
  int in[2] = {dy, n->in[0]};
  return pass_grad_give(ad, n, 0, "dx", IR_OP_clip_grad, in, 2, &a);
}
int pass_grad_leaky_relu(pass_ad *ad, const ir_node *n, int dy) {
  ir_attr a = {.leaky_relu = n->attr.leaky_relu};
  int in[2] = {dy, n->in[0]};
  return pass_grad_give(ad, n, 0, "dx", IR_OP_leaky_relu_grad, in, 2, &a);
}
int pass_grad_lrn(pass_ad *ad, const ir_node *n, int dy) {
  ir_attr a = {.lrn_grad = n->attr.lrn};
  int in[2] = {dy, n->in[0]};
  return pass_grad_give(ad, n, 0, "dx", IR_OP_lrn_grad, in, 2, &a);
}
int pass_grad_hardsigmoid(pass_ad *ad, const ir_node *n, int dy) {
  ir_attr a = {.hardsigmoid = n->attr.hardsigmoid};
  int in[2] = {dy, n->in[0]};
  return pass_grad_give(ad, n, 0, "dx", IR_OP_hardsigmoid_grad, in, 2, &a);
}

int pass_grad_add(pass_ad *ad, const ir_node *n, int dy) {
  if (pass_grad_give_value(ad, n, 0, dy)) return -1;
  return give_reduced(ad, n, 1, dy);
}

/* d a = dy * b (b broadcast as in the forward); d b = reduce(dy * a). */
int pass_grad_mul(pass_ad *ad, const ir_node *n, int dy) {
  int in_a[2] = {dy, n->in[1]};
  if (pass_grad_give(ad, n, 0, "da", IR_OP_mul, in_a, 2, NULL)) return -1;
  if (!pass_grad_needed(ad, n, 1)) return 0;
  int in_b[2] = {dy, n->in[0]};
  int t = pass_grad_node(ad, n, "db_full", IR_OP_mul, in_b, 2, NULL);
  return t < 0 ? -1 : give_reduced(ad, n, 1, t);
}

static int pool_rule(pass_ad *ad, const ir_node *n, int dy, ir_op op) {
  ir_attr a = {0};
  a.maxpool_grad.pool = n->attr.maxpool;
  a.maxpool_grad.x_shape = SHAPE_OF(ad, n->in[0]);
  int in[2] = {dy, n->in[0]};
  return pass_grad_give(ad, n, 0, "dx", op, in, op == IR_OP_maxpool_grad ? 2 : 1, &a);
}
int pass_grad_maxpool(pass_ad *ad, const ir_node *n, int dy) { return pool_rule(ad, n, dy, IR_OP_maxpool_grad); }
int pass_grad_avgpool(pass_ad *ad, const ir_node *n, int dy) { return pool_rule(ad, n, dy, IR_OP_avgpool_grad); }

int pass_grad_global_avgpool(pass_ad *ad, const ir_node *n, int dy) {
  ir_attr a = {.global_avgpool_grad = {SHAPE_OF(ad, n->in[0])}};
  return pass_grad_give(ad, n, 0, "dx", IR_OP_global_avgpool_grad, &dy, 1, &a);
}

int pass_grad_dense(pass_ad *ad, const ir_node *n, int dy) {
  int in_dx[2] = {dy, n->in[1]}, in_dw[2] = {dy, n->in[0]};
  if (pass_grad_give(ad, n, 0, "dx", IR_OP_dense_grad_input, in_dx, 2, NULL) ||
      pass_grad_give(ad, n, 1, "dw", IR_OP_dense_grad_weight, in_dw, 2, NULL))
    return -1;
  return n->n_in > 2 ? give_channel_sum(ad, n, 2, "db", dy) : 0;
}

int pass_grad_log_softmax(pass_ad *ad, const ir_node *n, int dy) {
  int in[2] = {dy, n->out};
  return pass_grad_give(ad, n, 0, "dx", IR_OP_log_softmax_grad, in, 2, NULL);
}
int pass_grad_softmax(pass_ad *ad, const ir_node *n, int dy) {
  int in[2] = {dy, n->out};
  return pass_grad_give(ad, n, 0, "dx", IR_OP_softmax_grad, in, 2, NULL);
}

/* dlogits = (softmax - smoothed one-hot) / N, times the seed (loss scaling) or times dy. */
int pass_grad_softmax_xent(pass_ad *ad, const ir_node *n, int dy) {
  ir_attr a = {.softmax_xent_grad = {n->attr.softmax_xent.label_smoothing, dy < 0 ? pass_grad_loss_scale(ad) : 1.0f}};
  int in[2] = {n->in[0], n->in[1]};
  if (dy < 0) return pass_grad_give(ad, n, 0, "dlogits", IR_OP_softmax_xent_grad, in, 2, &a);
  int t = pass_grad_node(ad, n, "dlogits_unit", IR_OP_softmax_xent_grad, in, 2, &a);
  int m[2] = {t, dy};
  return t < 0 ? -1 : pass_grad_give(ad, n, 0, "dlogits", IR_OP_mul, m, 2, NULL);
}

/* Dropout is linear with a fixed mask: its gradient is the same dropout (same seed, same
 * step operand in[1] if any, same element indices, hence the same hash mask and scale)
 * applied to dy.  The step operand is wired later, by passes/optimizer.c, onto the forward
 * and this node alike; one already present is carried over. */
int pass_grad_dropout(pass_ad *ad, const ir_node *n, int dy) {
  ir_attr a = {.dropout = n->attr.dropout};
  int in[2] = {dy, n->n_in > 1 ? n->in[1] : -1};
  return pass_grad_give(ad, n, 0, "dx", IR_OP_dropout, in, n->n_in > 1 ? 2 : 1, &a);
}

/* Each operand's gradient is its slice of dy. */
int pass_grad_concat(pass_ad *ad, const ir_node *n, int dy) {
  int64_t off = 0;
  int ax = n->attr.concat.axis;
  for (int i = 0; i < n->n_in; i++) {
    int64_t len = SHAPE_OF(ad, n->in[i]).dim[ax];
    ir_attr a = {.slice = {ax, off, len}};
    if (pass_grad_give(ad, n, i, ir_fmt(G(ad)->arena, "dx%d", i), IR_OP_slice, &dy, 1, &a)) return -1;
    off += len;
  }
  return 0;
}

/* The inverse permutation: dx dim perm[i] is dy dim i. */
int pass_grad_transpose(pass_ad *ad, const ir_node *n, int dy) {
  ir_attr a = {0};
  for (int i = 0; i < SHAPE_OF(ad, n->in[0]).rank; i++) a.transpose.perm[n->attr.transpose.perm[i]] = i;
  return pass_grad_give(ad, n, 0, "dx", IR_OP_transpose, &dy, 1, &a);
}

/* Piecewise constant: the gradient is 0 (where it exists).  clip_grad with an empty range
 * (lo = hi = 0) writes exact zeros whatever dy and x hold (NaN, inf), with existing kernels. */
int pass_grad_hardmax(pass_ad *ad, const ir_node *n, int dy) {
  ir_attr a = {.clip_grad = {0.0f, 0.0f}};
  int in[2] = {dy, n->in[0]};
  return pass_grad_give(ad, n, 0, "dx", IR_OP_clip_grad, in, 2, &a);
}

/* The inverse permutation: a shuffle with C/G groups. */
int pass_grad_channel_shuffle(pass_ad *ad, const ir_node *n, int dy) {
  ir_attr a = {.channel_shuffle = {(int)(SHAPE_OF(ad, n->in[0]).dim[1] / n->attr.channel_shuffle.groups)}};
  return pass_grad_give(ad, n, 0, "dx", IR_OP_channel_shuffle, &dy, 1, &a);
}

/* slice_grad as a forward op (zeros around x, e.g. ONNX ConvTranspose's spread input): the
 * gradient is dy's slice. */
int pass_grad_slice_grad(pass_ad *ad, const ir_node *n, int dy) {
  ir_attr a = {.slice = n->attr.slice_grad.slice};
  return pass_grad_give(ad, n, 0, "dx", IR_OP_slice, &dy, 1, &a);
}

int pass_grad_slice(pass_ad *ad, const ir_node *n, int dy) {
  ir_attr a = {.slice_grad = {n->attr.slice, SHAPE_OF(ad, n->in[0])}};
  return pass_grad_give(ad, n, 0, "dx", IR_OP_slice_grad, &dy, 1, &a);
}

int pass_grad_reshape(pass_ad *ad, const ir_node *n, int dy) {
  ir_attr a = {.reshape = {SHAPE_OF(ad, n->in[0])}};
  return pass_grad_give(ad, n, 0, "dx", IR_OP_reshape, &dy, 1, &a);
}

/* dx = dy * scale / std[c], the factor a constant param [C,1,1]. */
int pass_grad_normalize(pass_ad *ad, const ir_node *n, int dy) {
  if (!pass_grad_needed(ad, n, 0)) return 0;
  const ir_normalize_attr *na = &n->attr.normalize;
  int f = ir_add_param(G(ad), ir_fmt(G(ad)->arena, "bwd/%s/factor", n->name), (ir_shape){3, {na->channels, 1, 1}}, 0);
  for (int c = 0; c < na->channels; c++) G(ad)->values[f].data[c] = na->scale / na->std[c];
  int in[2] = {dy, f};
  return pass_grad_give(ad, n, 0, "dx", IR_OP_mul, in, 2, NULL);
}

/* exp: dx = dy * y; sqrt: dx = dy / (y + y); neg: dx = -dy. */
int pass_grad_exp(pass_ad *ad, const ir_node *n, int dy) {
  int in[2] = {dy, n->out};
  return pass_grad_give(ad, n, 0, "dx", IR_OP_mul, in, 2, NULL);
}
int pass_grad_sqrt(pass_ad *ad, const ir_node *n, int dy) {
  if (!pass_grad_needed(ad, n, 0)) return 0;
  int yy[2] = {n->out, n->out}, t = pass_grad_node(ad, n, "two_y", IR_OP_add, yy, 2, NULL);
  int in[2] = {dy, t};
  return t < 0 ? -1 : pass_grad_give(ad, n, 0, "dx", IR_OP_div, in, 2, NULL);
}
int pass_grad_neg(pass_ad *ad, const ir_node *n, int dy) { return pass_grad_give(ad, n, 0, "dx", IR_OP_neg, &dy, 1, NULL); }

/* y = a / b: da = dy / b (b broadcast as in the forward); db = reduce(-(dy * y) / b). */
int pass_grad_div(pass_ad *ad, const ir_node *n, int dy) {
  int in_a[2] = {dy, n->in[1]};
  if (pass_grad_give(ad, n, 0, "da", IR_OP_div, in_a, 2, NULL)) return -1;
  if (!pass_grad_needed(ad, n, 1)) return 0;
  int m[2] = {dy, n->out}, t = pass_grad_node(ad, n, "dy_y", IR_OP_mul, m, 2, NULL);
  int q[2] = {t, n->in[1]}, u = t < 0 ? -1 : pass_grad_node(ad, n, "dy_y_b", IR_OP_div, q, 2, NULL);
  int v = u < 0 ? -1 : pass_grad_node(ad, n, "db_full", IR_OP_neg, &u, 1, NULL);
  return v < 0 ? -1 : give_reduced(ad, n, 1, v);
}

/* sum: dy expanded back to x's shape; mean: the same times 1/group size; max: dy to each
 * group's first maximum (reduce_max_grad). */
int pass_grad_reduce(pass_ad *ad, const ir_node *n, int dy) {
  const ir_reduce_attr *r = &n->attr.reduce;
  ir_shape xs = SHAPE_OF(ad, n->in[0]);
  if (r->mode == IR_REDUCE_MAX) {
    ir_attr a = {.reduce_max_grad = *r};
    int in[3] = {dy, n->in[0], n->out};
    return pass_grad_give(ad, n, 0, "dx", IR_OP_reduce_max_grad, in, 3, &a);
  }
  ir_attr a = {0};
  a.expand.shape = xs;
  a.expand.scale = r->mode == IR_REDUCE_MEAN ? (float)(1.0 / (double)(ir_shape_numel(&xs) / ir_shape_numel(&r->shape))) : 1.0f;
  return pass_grad_give(ad, n, 0, "dx", IR_OP_expand, &dy, 1, &a);
}

/* expand (scale 1, the forward op): dx = dy summed over the expanded dims. */
int pass_grad_expand(pass_ad *ad, const ir_node *n, int dy) {
  if (ir_expand_scale(&n->attr.expand) != 1.0f)
    return pass_grad_fail(ad, n, "expand with a scale is the backward op of a mean and has no gradient rule");
  ir_attr a = {0};
  a.reduce.shape = SHAPE_OF(ad, n->in[0]);
  a.reduce.mode = IR_REDUCE_SUM;
  return pass_grad_give(ad, n, 0, "dx", IR_OP_reduce, &dy, 1, &a);
}

/* Integer-valued results (docs/onnx.md "Integer tensors", MaxPool's indices, MaxUnpool's
 * scatter by run-time indices): inference only, an error naming the node in training. */
int pass_grad_maxpool_index(pass_ad *ad, const ir_node *n, int dy) {
  return pass_grad_fail(ad, n, "maxpool_index (MaxPool's Indices output) is inference-only: it has no gradient");
}
int pass_grad_max_unpool(pass_ad *ad, const ir_node *n, int dy) {
  return pass_grad_fail(ad, n, "max_unpool (ONNX MaxUnpool) is inference-only: it has no gradient rule");
}
int pass_grad_cast(pass_ad *ad, const ir_node *n, int dy) {
  return pass_grad_fail(ad, n, "cast (an integer tensor, docs/onnx.md) is inference-only: integer values have no gradient");
}

/* Backward and optimizer ops: no second-order gradients. */
#define NO_RULE(op)                                                                            \
  int pass_grad_##op(pass_ad *ad, const ir_node *n, int dy) {                                  \
    return pass_grad_fail(ad, n, #op " is a training op and has no gradient rule");           \
  }
int pass_grad_quantize8(pass_ad *ad, const ir_node *n, int dy) {
  return pass_grad_fail(ad, n, "quantize8 (--precision int8) is inference-only: an int8 model does not train");
}
NO_RULE(conv2d_grad_input) NO_RULE(conv2d_grad_weight) NO_RULE(reduce_sum) NO_RULE(relu_grad)
NO_RULE(sigmoid_grad) NO_RULE(swish_grad) NO_RULE(clip_grad) NO_RULE(hardsigmoid_grad) NO_RULE(hardswish_grad) NO_RULE(leaky_relu_grad) NO_RULE(lrn_grad) NO_RULE(log_softmax_grad) NO_RULE(reduce_max_grad) NO_RULE(maxpool_grad) NO_RULE(avgpool_grad)
NO_RULE(global_avgpool_grad) NO_RULE(batchnorm_grad_input) NO_RULE(batchnorm_grad_gamma)
NO_RULE(groupnorm_grad_input) NO_RULE(groupnorm_grad_gamma) NO_RULE(dense_grad_input)
NO_RULE(dense_grad_weight) NO_RULE(softmax_grad) NO_RULE(softmax_xent_grad) NO_RULE(sgd_update)
NO_RULE(momentum_acc) NO_RULE(momentum_update) NO_RULE(rmsprop_acc) NO_RULE(rmsprop_update)
NO_RULE(adam_moment1) NO_RULE(adam_moment2) NO_RULE(adam_update) NO_RULE(step_count)

/* round16 (docs/precision.md): straight-through, and the gradient is 16-bit too:
 * dx = round16(dy) in the same format. */
int pass_grad_round16(pass_ad *ad, const ir_node *n, int dy) {
  ir_attr a = {.round16 = n->attr.round16};
  return pass_grad_give(ad, n, 0, "dx", IR_OP_round16, &dy, 1, &a);
}
