/* shape_grad.c — shape inference and cost hooks of the training ops (the rows after
 * "training" in ops.def): backward ops and optimizer updates.  Same contract as shape.c /
 * cost.c: infer returns 0 with *out set, or -1 with a message in d. */
#include "ir.h"

#define X(i) (&g->values[n->in[i]].shape)
#define FAIL(d, ...) ir_diag_set(d, (ir_loc){0}, NULL, __VA_ARGS__)

static int need_same(const ir_graph *g, const ir_node *n, int i, int j, const char *what, ir_diag *d) {
  char b1[96], b2[96];
  if (!ir_shape_eq(X(i), X(j)))
    return FAIL(d, "%s: shapes %s and %s differ", what, ir_shape_str(X(i), b1, sizeof b1),
                ir_shape_str(X(j), b2, sizeof b2));
  return 0;
}

static int need_rank(const ir_shape *s, int rank, const char *what, ir_diag *d) {
  char buf[96];
  if (s->rank != rank) return FAIL(d, "%s must have rank %d, got %s", what, rank, ir_shape_str(s, buf, sizeof buf));
  return 0;
}

static int need_scalar(const ir_graph *g, const ir_node *n, int i, const char *what, ir_diag *d) {
  if (ir_shape_numel(X(i)) != 1) return FAIL(d, "%s must have one element", what);
  return 0;
}

/* ---- backward ops ------------------------------------------------------------------------- */
/* dy [N,Cout,OH,OW], w [Cout,Cin/g,KH,KW] -> dx = attr x_shape. */
int ir_infer_conv2d_grad_input(const ir_graph *g, const ir_node *n, ir_shape *out, ir_diag *d) {
  const ir_conv2d_grad_attr *a = &n->attr.conv2d_grad_input;
  if (need_rank(X(0), 4, "conv dy", d) || need_rank(X(1), 4, "conv weight", d) ||
      need_rank(&a->x_shape, 4, "conv x_shape", d))
    return -1;
  if (a->conv.groups < 1 || a->x_shape.dim[1] % a->conv.groups || X(1)->dim[1] * a->conv.groups != a->x_shape.dim[1] ||
      X(1)->dim[0] != X(0)->dim[1] || X(0)->dim[0] != a->x_shape.dim[0])
    return FAIL(d, "conv2d_grad_input: dy, weight and x_shape disagree");
  *out = a->x_shape;
  return 0;
}

/* dy [N,Cout,OH,OW], x [N,Cin,H,W] -> dw [Cout,Cin/g,KH,KW]. */
int ir_infer_conv2d_grad_weight(const ir_graph *g, const ir_node *n, ir_shape *out, ir_diag *d) {
  const ir_conv2d_grad_attr *a = &n->attr.conv2d_grad_weight;
  if (need_rank(X(0), 4, "conv dy", d) || need_rank(X(1), 4, "conv x", d)) return -1;
  if (a->conv.groups < 1 || X(1)->dim[1] % a->conv.groups || X(0)->dim[1] % a->conv.groups || X(0)->dim[0] != X(1)->dim[0])
    return FAIL(d, "conv2d_grad_weight: dy and x disagree");
  *out = (ir_shape){4, {X(0)->dim[1], X(1)->dim[1] / a->conv.groups, a->conv.kernel[0], a->conv.kernel[1]}};
  return 0;
}

int ir_infer_reduce_sum(const ir_graph *g, const ir_node *n, ir_shape *out, ir_diag *d) {
  const ir_shape *s = &n->attr.reduce_sum.shape;
  char b1[96], b2[96];
  int ok = s->rank == X(0)->rank;
  for (int i = 0; ok && i < s->rank; i++) ok = s->dim[i] == 1 || s->dim[i] == X(0)->dim[i];
  if (!ok)
    return FAIL(d, "cannot reduce %s to %s (same rank, dims equal or 1)", ir_shape_str(X(0), b1, sizeof b1),
                ir_shape_str(s, b2, sizeof b2));
  *out = *s;
  return 0;
}

static int infer_dy_x(const ir_graph *g, const ir_node *n, ir_shape *out, ir_diag *d) {
  if (need_same(g, n, 0, 1, "dy and x", d)) return -1;
  *out = *X(0);
  return 0;
}
int ir_infer_relu_grad(const ir_graph *g, const ir_node *n, ir_shape *out, ir_diag *d) { return infer_dy_x(g, n, out, d); }
int ir_infer_sigmoid_grad(const ir_graph *g, const ir_node *n, ir_shape *out, ir_diag *d) { return infer_dy_x(g, n, out, d); }
int ir_infer_swish_grad(const ir_graph *g, const ir_node *n, ir_shape *out, ir_diag *d) { return infer_dy_x(g, n, out, d); }
int ir_infer_clip_grad(const ir_graph *g, const ir_node *n, ir_shape *out, ir_diag *d) { return infer_dy_x(g, n, out, d); }
int ir_infer_hardsigmoid_grad(const ir_graph *g, const ir_node *n, ir_shape *out, ir_diag *d) { return infer_dy_x(g, n, out, d); }
int ir_infer_leaky_relu_grad(const ir_graph *g, const ir_node *n, ir_shape *out, ir_diag *d) { return infer_dy_x(g, n, out, d); }
int ir_infer_lrn_grad(const ir_graph *g, const ir_node *n, ir_shape *out, ir_diag *d) { return infer_dy_x(g, n, out, d); }
int ir_infer_hardswish_grad(const ir_graph *g, const ir_node *n, ir_shape *out, ir_diag *d) { return infer_dy_x(g, n, out, d); }
int ir_infer_slice_grad(const ir_graph *g, const ir_node *n, ir_shape *out, ir_diag *d) {
  ir_shape s;
  const ir_shape *xs = &n->attr.slice_grad.x_shape;
  if (xs->rank < 1 || xs->rank > IR_MAX_RANK) return FAIL(d, "slice_grad needs the forward input's shape");
  const ir_slice_attr *sa = &n->attr.slice_grad.slice;
  char msg[160];
  if (sa->axis < 0 || sa->axis >= xs->rank || ir_slice_check(sa, xs->dim[sa->axis], msg, sizeof msg))
    return FAIL(d, "slice_grad: the slice is not inside the forward input");
  s = *xs;
  s.dim[sa->axis] = sa->len;
  if (!ir_shape_eq(&s, X(0))) return FAIL(d, "slice_grad: dy does not have the slice's shape");
  *out = *xs;
  return 0;
}
int ir_infer_softmax_grad(const ir_graph *g, const ir_node *n, ir_shape *out, ir_diag *d) { return infer_dy_x(g, n, out, d); }
int ir_infer_log_softmax_grad(const ir_graph *g, const ir_node *n, ir_shape *out, ir_diag *d) { return infer_dy_x(g, n, out, d); }
/* dy (the reduce's result shape), x, y = reduce max of x -> dx (x's shape). */
int ir_infer_reduce_max_grad(const ir_graph *g, const ir_node *n, ir_shape *out, ir_diag *d) {
  const ir_reduce_attr *a = &n->attr.reduce_max_grad;
  if (a->mode != IR_REDUCE_MAX) return FAIL(d, "reduce_max_grad: mode must be max");
  if (!ir_shape_eq(X(0), &a->shape) || !ir_shape_eq(X(2), &a->shape)) return FAIL(d, "reduce_max_grad: dy and y must have the reduced shape");
  int ok = X(1)->rank == a->shape.rank;
  for (int i = 0; ok && i < a->shape.rank; i++) ok = a->shape.dim[i] == 1 || a->shape.dim[i] == X(1)->dim[i];
  if (!ok) return FAIL(d, "reduce_max_grad: x does not reduce to the shape");
  *out = *X(1);
  return 0;
}

static int infer_pool_grad(const ir_graph *g, const ir_node *n, ir_shape *out, ir_diag *d) {
  const ir_pool_grad_attr *a = &n->attr.maxpool_grad;
  if (need_rank(X(0), 4, "pool dy", d) || need_rank(&a->x_shape, 4, "pool x_shape", d)) return -1;
  if (X(0)->dim[0] != a->x_shape.dim[0] || X(0)->dim[1] != a->x_shape.dim[1])
    return FAIL(d, "pool grad: dy and x_shape disagree on batch or channels");
  if (a->pool.stride[0] < 1 || a->pool.stride[1] < 1) return FAIL(d, "stride must be >= 1");
  if (n->n_in == 2 && !ir_shape_eq(X(1), &a->x_shape)) return FAIL(d, "maxpool_grad: x does not have x_shape");
  *out = a->x_shape;
  return 0;
}
int ir_infer_maxpool_grad(const ir_graph *g, const ir_node *n, ir_shape *out, ir_diag *d) { return infer_pool_grad(g, n, out, d); }
int ir_infer_avgpool_grad(const ir_graph *g, const ir_node *n, ir_shape *out, ir_diag *d) { return infer_pool_grad(g, n, out, d); }

int ir_infer_global_avgpool_grad(const ir_graph *g, const ir_node *n, ir_shape *out, ir_diag *d) {
  const ir_shape *s = &n->attr.global_avgpool_grad.shape;
  if (need_rank(X(0), 4, "dy", d) || need_rank(s, 4, "x shape", d)) return -1;
  if (X(0)->dim[0] != s->dim[0] || X(0)->dim[1] != s->dim[1] || X(0)->dim[2] != 1 || X(0)->dim[3] != 1)
    return FAIL(d, "global_avgpool_grad: dy must be [N,C,1,1] of the x shape");
  *out = *s;
  return 0;
}

static int infer_norm_grad(const ir_graph *g, const ir_node *n, int first_vec, ir_shape *out, ir_diag *d) {
  char buf[96];
  if (X(0)->rank != 4 && X(0)->rank != 2) return need_rank(X(0), 4, "norm dy", d);
  if (need_same(g, n, 0, 1, "dy and x", d)) return -1;
  for (int i = first_vec; i < n->n_in; i++)
    if (X(i)->rank != 1 || X(i)->dim[0] != X(0)->dim[1])
      return FAIL(d, "norm parameter %d must have shape [%lld], got %s", i, (long long)X(0)->dim[1],
                  ir_shape_str(X(i), buf, sizeof buf));
  *out = *X(0);
  return 0;
}

int ir_infer_batchnorm_grad_input(const ir_graph *g, const ir_node *n, ir_shape *out, ir_diag *d) {
  if (!n->attr.batchnorm.training && n->n_in != 5)
    return FAIL(d, "batchnorm_grad_input with running statistics needs running_mean and running_var");
  return infer_norm_grad(g, n, 2, out, d);
}
int ir_infer_batchnorm_grad_gamma(const ir_graph *g, const ir_node *n, ir_shape *out, ir_diag *d) {
  if (!n->attr.batchnorm.training && n->n_in != 4)
    return FAIL(d, "batchnorm_grad_gamma with running statistics needs running_mean and running_var");
  if (infer_norm_grad(g, n, 2, out, d)) return -1;
  *out = (ir_shape){1, {X(0)->dim[1]}};
  return 0;
}
int ir_infer_groupnorm_grad_input(const ir_graph *g, const ir_node *n, ir_shape *out, ir_diag *d) {
  if (need_rank(X(0), 4, "groupnorm dy", d)) return -1;
  int gr = n->attr.groupnorm.groups;
  if (gr < 1 || X(0)->dim[1] % gr) return FAIL(d, "groups must divide the channels");
  return infer_norm_grad(g, n, 2, out, d);
}
int ir_infer_groupnorm_grad_gamma(const ir_graph *g, const ir_node *n, ir_shape *out, ir_diag *d) {
  if (ir_infer_groupnorm_grad_input(g, n, out, d)) return -1;
  *out = (ir_shape){1, {X(0)->dim[1]}};
  return 0;
}

int ir_infer_dense_grad_input(const ir_graph *g, const ir_node *n, ir_shape *out, ir_diag *d) {
  if (need_rank(X(0), 2, "dense dy", d) || need_rank(X(1), 2, "dense weight", d)) return -1;
  if (X(0)->dim[1] != X(1)->dim[0]) return FAIL(d, "dense_grad_input: dy and weight disagree");
  *out = (ir_shape){2, {X(0)->dim[0], X(1)->dim[1]}};
  return 0;
}
int ir_infer_dense_grad_weight(const ir_graph *g, const ir_node *n, ir_shape *out, ir_diag *d) {
  if (need_rank(X(0), 2, "dense dy", d) || need_rank(X(1), 2, "dense x", d)) return -1;
  if (X(0)->dim[0] != X(1)->dim[0]) return FAIL(d, "dense_grad_weight: dy and x disagree on the batch");
  *out = (ir_shape){2, {X(0)->dim[1], X(1)->dim[1]}};
  return 0;
}

int ir_infer_softmax_xent_grad(const ir_graph *g, const ir_node *n, ir_shape *out, ir_diag *d) {
  if (need_rank(X(0), 2, "loss logits", d)) return -1;
  if (!ir_label_width(X(1))) return FAIL(d, "labels must be [N] class ids or [N,3] mixed labels");
  if (X(1)->dim[0] != X(0)->dim[0]) return FAIL(d, "labels and logits disagree on the batch size");
  float s = n->attr.softmax_xent_grad.label_smoothing;
  if (!(s >= 0 && s < 1)) return FAIL(d, "label_smoothing must be in [0, 1)");
  *out = *X(0);
  return 0;
}

/* ---- optimizer ops: the result has the shape of operand `like`; all tensor operands agree,
 * lr and step counters have one element. ------------------------------------------------------ */
static int infer_optim(const ir_graph *g, const ir_node *n, int like, unsigned scalars, ir_shape *out, ir_diag *d) {
  if (n->attr.sgd_update.round16 && n->attr.sgd_update.stochastic) scalars |= 1u << (n->n_in - 1); /* t' (16.16) */
  for (int i = 0; i < n->n_in; i++) {
    if (scalars >> i & 1) {
      if (need_scalar(g, n, i, "learning rate / step", d)) return -1;
    } else if (need_same(g, n, like, i, "optimizer operands", d)) {
      return -1;
    }
  }
  *out = *X(like);
  return 0;
}
int ir_infer_sgd_update(const ir_graph *g, const ir_node *n, ir_shape *out, ir_diag *d) { return infer_optim(g, n, 0, 1u << 2, out, d); }
int ir_infer_momentum_acc(const ir_graph *g, const ir_node *n, ir_shape *out, ir_diag *d) { return infer_optim(g, n, 1, 0, out, d); }
int ir_infer_momentum_update(const ir_graph *g, const ir_node *n, ir_shape *out, ir_diag *d) {
  const ir_optim_attr *a = &n->attr.momentum_update;
  if (a->nesterov && n->n_in != 4 + (a->round16 && a->stochastic)) return FAIL(d, "Nesterov momentum_update needs the gradient");
  return infer_optim(g, n, 0, 1u << 2, out, d);
}
int ir_infer_rmsprop_acc(const ir_graph *g, const ir_node *n, ir_shape *out, ir_diag *d) { return infer_optim(g, n, 1, 0, out, d); }
int ir_infer_rmsprop_update(const ir_graph *g, const ir_node *n, ir_shape *out, ir_diag *d) { return infer_optim(g, n, 0, 1u << 2, out, d); }
int ir_infer_adam_moment1(const ir_graph *g, const ir_node *n, ir_shape *out, ir_diag *d) { return infer_optim(g, n, 1, 0, out, d); }
int ir_infer_adam_moment2(const ir_graph *g, const ir_node *n, ir_shape *out, ir_diag *d) { return infer_optim(g, n, 1, 0, out, d); }
int ir_infer_adam_update(const ir_graph *g, const ir_node *n, ir_shape *out, ir_diag *d) {
  return infer_optim(g, n, 0, 1u << 3 | 1u << 4, out, d);
}
int ir_infer_step_count(const ir_graph *g, const ir_node *n, ir_shape *out, ir_diag *d) { return infer_optim(g, n, 0, 0, out, d); }

/* ---- cost ----------------------------------------------------------------------------------- */
static double numel(const ir_graph *g, int vid) { return (double)ir_shape_numel(&g->values[vid].shape); }

static double io_bytes(const ir_graph *g, const ir_node *n) {
  double b = 0;
  for (int i = 0; i < n->n_in; i++) b += numel(g, n->in[i]) * ir_dtype_size(g->values[n->in[i]].dtype);
  return b + numel(g, n->out) * 4;
}

static void per_elem(const ir_graph *g, const ir_node *n, ir_cost *c, int vid, double flops) {
  c->flops = numel(g, vid) * flops;
  c->bytes = io_bytes(g, n);
}

/* Both conv gradients cost the forward's MACs: numel(dy) * Cin/g * KH * KW. */
static void conv_grad_cost(const ir_graph *g, const ir_node *n, ir_cost *c) {
  const ir_conv2d_grad_attr *a = &n->attr.conv2d_grad_input;
  int64_t cin = n->op == IR_OP_conv2d_grad_input ? a->x_shape.dim[1] : g->values[n->in[1]].shape.dim[1];
  c->macs = numel(g, n->in[0]) * (double)(cin / (a->conv.groups > 0 ? a->conv.groups : 1)) * a->conv.kernel[0] * a->conv.kernel[1];
  c->flops = 2 * c->macs;
  c->bytes = io_bytes(g, n);
}
void ir_cost_conv2d_grad_input(const ir_graph *g, const ir_node *n, ir_cost *c) { conv_grad_cost(g, n, c); }
void ir_cost_conv2d_grad_weight(const ir_graph *g, const ir_node *n, ir_cost *c) { conv_grad_cost(g, n, c); }
void ir_cost_reduce_sum(const ir_graph *g, const ir_node *n, ir_cost *c) { per_elem(g, n, c, n->in[0], 1); }
void ir_cost_relu_grad(const ir_graph *g, const ir_node *n, ir_cost *c) { per_elem(g, n, c, n->out, 1); }
void ir_cost_sigmoid_grad(const ir_graph *g, const ir_node *n, ir_cost *c) { per_elem(g, n, c, n->out, 6); }
void ir_cost_slice_grad(const ir_graph *g, const ir_node *n, ir_cost *c) { per_elem(g, n, c, n->out, 0); }
void ir_cost_clip_grad(const ir_graph *g, const ir_node *n, ir_cost *c) { per_elem(g, n, c, n->out, 2); }
void ir_cost_hardsigmoid_grad(const ir_graph *g, const ir_node *n, ir_cost *c) { per_elem(g, n, c, n->out, 3); }
void ir_cost_leaky_relu_grad(const ir_graph *g, const ir_node *n, ir_cost *c) { per_elem(g, n, c, n->out, 2); }
void ir_cost_lrn_grad(const ir_graph *g, const ir_node *n, ir_cost *c) {
  per_elem(g, n, c, n->out, 2.0 * n->attr.lrn.size * n->attr.lrn.size + 40);
}
void ir_cost_hardswish_grad(const ir_graph *g, const ir_node *n, ir_cost *c) { per_elem(g, n, c, n->out, 4); }
void ir_cost_swish_grad(const ir_graph *g, const ir_node *n, ir_cost *c) { per_elem(g, n, c, n->out, 8); }
void ir_cost_maxpool_grad(const ir_graph *g, const ir_node *n, ir_cost *c) {
  per_elem(g, n, c, n->in[0], n->attr.maxpool_grad.pool.kernel[0] * n->attr.maxpool_grad.pool.kernel[1]);
}
void ir_cost_avgpool_grad(const ir_graph *g, const ir_node *n, ir_cost *c) {
  per_elem(g, n, c, n->in[0], n->attr.avgpool_grad.pool.kernel[0] * n->attr.avgpool_grad.pool.kernel[1]);
}
void ir_cost_global_avgpool_grad(const ir_graph *g, const ir_node *n, ir_cost *c) { per_elem(g, n, c, n->out, 1); }
void ir_cost_batchnorm_grad_input(const ir_graph *g, const ir_node *n, ir_cost *c) { per_elem(g, n, c, n->out, 10); }
void ir_cost_batchnorm_grad_gamma(const ir_graph *g, const ir_node *n, ir_cost *c) { per_elem(g, n, c, n->in[0], 6); }
void ir_cost_groupnorm_grad_input(const ir_graph *g, const ir_node *n, ir_cost *c) { per_elem(g, n, c, n->out, 10); }
void ir_cost_groupnorm_grad_gamma(const ir_graph *g, const ir_node *n, ir_cost *c) { per_elem(g, n, c, n->in[0], 6); }
void ir_cost_dense_grad_input(const ir_graph *g, const ir_node *n, ir_cost *c) {
  c->macs = numel(g, n->out) * (double)g->values[n->in[0]].shape.dim[1];
  c->flops = 2 * c->macs;
  c->bytes = io_bytes(g, n);
}
void ir_cost_dense_grad_weight(const ir_graph *g, const ir_node *n, ir_cost *c) {
  c->macs = numel(g, n->out) * (double)g->values[n->in[0]].shape.dim[0];
  c->flops = 2 * c->macs;
  c->bytes = io_bytes(g, n);
}
void ir_cost_softmax_grad(const ir_graph *g, const ir_node *n, ir_cost *c) { per_elem(g, n, c, n->out, 4); }
void ir_cost_log_softmax_grad(const ir_graph *g, const ir_node *n, ir_cost *c) { per_elem(g, n, c, n->out, 12); }
void ir_cost_reduce_max_grad(const ir_graph *g, const ir_node *n, ir_cost *c) { per_elem(g, n, c, n->out, 2); }
void ir_cost_softmax_xent_grad(const ir_graph *g, const ir_node *n, ir_cost *c) { per_elem(g, n, c, n->out, 6); }
void ir_cost_sgd_update(const ir_graph *g, const ir_node *n, ir_cost *c) { per_elem(g, n, c, n->out, 5); }
void ir_cost_momentum_acc(const ir_graph *g, const ir_node *n, ir_cost *c) { per_elem(g, n, c, n->out, 4); }
void ir_cost_momentum_update(const ir_graph *g, const ir_node *n, ir_cost *c) { per_elem(g, n, c, n->out, 6); }
void ir_cost_rmsprop_acc(const ir_graph *g, const ir_node *n, ir_cost *c) { per_elem(g, n, c, n->out, 6); }
void ir_cost_rmsprop_update(const ir_graph *g, const ir_node *n, ir_cost *c) { per_elem(g, n, c, n->out, 8); }
void ir_cost_adam_moment1(const ir_graph *g, const ir_node *n, ir_cost *c) { per_elem(g, n, c, n->out, 5); }
void ir_cost_adam_moment2(const ir_graph *g, const ir_node *n, ir_cost *c) { per_elem(g, n, c, n->out, 6); }
void ir_cost_adam_update(const ir_graph *g, const ir_node *n, ir_cost *c) { per_elem(g, n, c, n->out, 8); }
void ir_cost_step_count(const ir_graph *g, const ir_node *n, ir_cost *c) { per_elem(g, n, c, n->out, 1); }
