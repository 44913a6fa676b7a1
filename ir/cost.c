/* cost.c — cost hooks (ir_cost_<op>): multiply-accumulates (conv/dense only, the figure
 * model summaries quote), all floating-point operations, and bytes moved assuming no reuse
 * between ops.  Used by --summary, the --shards balancer and reports. */
#include "ir.h"

static double numel(const ir_graph *g, int vid) { return (double)ir_shape_numel(&g->values[vid].shape); }

/* Bytes of every operand plus the result. */
static double io_bytes(const ir_graph *g, const ir_node *n) {
  double b = 0;
  for (int i = 0; i < n->n_in; i++) b += numel(g, n->in[i]) * ir_dtype_size(g->values[n->in[i]].dtype);
  return b + numel(g, n->out) * 4;
}

/* Elementwise-like op: flops_per_elem operations on every output element. */
static void eltwise(const ir_graph *g, const ir_node *n, ir_cost *c, double flops_per_elem) {
  c->flops = numel(g, n->out) * flops_per_elem;
  c->bytes = io_bytes(g, n);
}

void ir_cost_conv2d(const ir_graph *g, const ir_node *n, ir_cost *c) {
  const ir_shape *w = &g->values[n->in[1]].shape;
  double per_out = (double)w->dim[1] * w->dim[2] * w->dim[3];
  c->macs = numel(g, n->out) * per_out;
  c->flops = 2 * c->macs + (n->n_in == 3 ? numel(g, n->out) : 0);
  c->bytes = io_bytes(g, n);
}

void ir_cost_dense(const ir_graph *g, const ir_node *n, ir_cost *c) {
  c->macs = numel(g, n->out) * (double)g->values[n->in[1]].shape.dim[1];
  c->flops = 2 * c->macs + (n->n_in == 3 ? numel(g, n->out) : 0);
  c->bytes = io_bytes(g, n);
}

void ir_cost_batchnorm(const ir_graph *g, const ir_node *n, ir_cost *c) {
  eltwise(g, n, c, n->attr.batchnorm.training ? 6 : 2);
}
void ir_cost_groupnorm(const ir_graph *g, const ir_node *n, ir_cost *c) { eltwise(g, n, c, 6); }
void ir_cost_relu(const ir_graph *g, const ir_node *n, ir_cost *c) { eltwise(g, n, c, 1); }
void ir_cost_sigmoid(const ir_graph *g, const ir_node *n, ir_cost *c) { eltwise(g, n, c, 4); }
void ir_cost_swish(const ir_graph *g, const ir_node *n, ir_cost *c) { eltwise(g, n, c, 5); }
void ir_cost_clip(const ir_graph *g, const ir_node *n, ir_cost *c) { eltwise(g, n, c, 2); }
void ir_cost_quantize8(const ir_graph *g, const ir_node *n, ir_cost *c) { eltwise(g, n, c, 4); }
void ir_cost_hardsigmoid(const ir_graph *g, const ir_node *n, ir_cost *c) { eltwise(g, n, c, 3); }
void ir_cost_leaky_relu(const ir_graph *g, const ir_node *n, ir_cost *c) { eltwise(g, n, c, 2); }
void ir_cost_hardswish(const ir_graph *g, const ir_node *n, ir_cost *c) { eltwise(g, n, c, 4); }
void ir_cost_add(const ir_graph *g, const ir_node *n, ir_cost *c) { eltwise(g, n, c, 1); }
void ir_cost_mul(const ir_graph *g, const ir_node *n, ir_cost *c) { eltwise(g, n, c, 1); }
void ir_cost_softmax(const ir_graph *g, const ir_node *n, ir_cost *c) { eltwise(g, n, c, 4); }
void ir_cost_dropout(const ir_graph *g, const ir_node *n, ir_cost *c) {
  eltwise(g, n, c, n->attr.dropout.training ? 2 : 0);
}
void ir_cost_reshape(const ir_graph *g, const ir_node *n, ir_cost *c) { eltwise(g, n, c, 0); }
void ir_cost_concat(const ir_graph *g, const ir_node *n, ir_cost *c) { eltwise(g, n, c, 0); }
void ir_cost_transpose(const ir_graph *g, const ir_node *n, ir_cost *c) { eltwise(g, n, c, 0); }
void ir_cost_hardmax(const ir_graph *g, const ir_node *n, ir_cost *c) { eltwise(g, n, c, 1); }
void ir_cost_log_softmax(const ir_graph *g, const ir_node *n, ir_cost *c) { eltwise(g, n, c, 12); }
void ir_cost_exp(const ir_graph *g, const ir_node *n, ir_cost *c) { eltwise(g, n, c, 10); }
void ir_cost_sqrt(const ir_graph *g, const ir_node *n, ir_cost *c) { eltwise(g, n, c, 4); }
void ir_cost_neg(const ir_graph *g, const ir_node *n, ir_cost *c) { eltwise(g, n, c, 1); }
void ir_cost_div(const ir_graph *g, const ir_node *n, ir_cost *c) { eltwise(g, n, c, 4); }
void ir_cost_expand(const ir_graph *g, const ir_node *n, ir_cost *c) { eltwise(g, n, c, 1); }
void ir_cost_max_unpool(const ir_graph *g, const ir_node *n, ir_cost *c) { eltwise(g, n, c, 0); }
void ir_cost_cast(const ir_graph *g, const ir_node *n, ir_cost *c) {
  eltwise(g, n, c, 3);
  c->bytes = numel(g, n->in[0]) * ir_dtype_size(g->values[n->in[0]].dtype) + numel(g, n->out) * ir_dtype_size(g->values[n->out].dtype);
}
void ir_cost_reduce(const ir_graph *g, const ir_node *n, ir_cost *c) {
  c->flops = numel(g, n->in[0]);
  c->bytes = io_bytes(g, n);
}
void ir_cost_lrn(const ir_graph *g, const ir_node *n, ir_cost *c) { eltwise(g, n, c, 2.0 * n->attr.lrn.size + 20); }
void ir_cost_channel_shuffle(const ir_graph *g, const ir_node *n, ir_cost *c) { eltwise(g, n, c, 0); }
void ir_cost_slice(const ir_graph *g, const ir_node *n, ir_cost *c) { eltwise(g, n, c, 0); }
void ir_cost_normalize(const ir_graph *g, const ir_node *n, ir_cost *c) { eltwise(g, n, c, 2); }

static void pool(const ir_graph *g, const ir_node *n, ir_cost *c) {
  const ir_pool_attr *a = &n->attr.maxpool;
  c->flops = numel(g, n->out) * a->kernel[0] * a->kernel[1];
  c->bytes = io_bytes(g, n);
}
void ir_cost_maxpool(const ir_graph *g, const ir_node *n, ir_cost *c) { pool(g, n, c); }
void ir_cost_maxpool_index(const ir_graph *g, const ir_node *n, ir_cost *c) { pool(g, n, c); }
void ir_cost_avgpool(const ir_graph *g, const ir_node *n, ir_cost *c) { pool(g, n, c); }
void ir_cost_global_avgpool(const ir_graph *g, const ir_node *n, ir_cost *c) {
  c->flops = numel(g, n->in[0]);
  c->bytes = io_bytes(g, n);
}
void ir_cost_softmax_xent(const ir_graph *g, const ir_node *n, ir_cost *c) {
  c->flops = numel(g, n->in[0]) * 5;
  c->bytes = io_bytes(g, n);
}
void ir_cost_round16(const ir_graph *g, const ir_node *n, ir_cost *c) { eltwise(g, n, c, 1); }

/* narrow16 / widen16: one conversion per element; 4 + 2 bytes moved per element. */
void ir_cost_narrow16(const ir_graph *g, const ir_node *n, ir_cost *c) {
  c->flops = numel(g, n->out);
  c->bytes = numel(g, n->out) * 6;
}
void ir_cost_widen16(const ir_graph *g, const ir_node *n, ir_cost *c) { ir_cost_narrow16(g, n, c); }
