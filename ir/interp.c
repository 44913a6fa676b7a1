/* interp.c — the reference interpreter: walks the nodes in (topological) order, gives every
 * value an f32 buffer and calls each op's reference kernel.  Slow and obviously correct;
 * the oracle for compiled code and for semantics-preserving passes. */
#include <stdlib.h>
#include <string.h>

#include "ir.h"

/* malloc'd copy of n floats of src (zeros when src is NULL).  Aborts on OOM. */
static float *buffer_copy(const float *src, int64_t n) {
  float *b = calloc((size_t)(n > 0 ? n : 1), sizeof *b);
  if (!b) abort();
  if (src && n > 0) memcpy(b, src, (size_t)n * sizeof *b);
  return b;
}

/* Buffers of the caller-fed values: g->input gets a copy of x (another INPUT value, should
 * a graph have one, gets zeros) and LABEL values a copy of labels (zeros when NULL). */
static void bind_feeds(const ir_graph *g, float **vals, const float *x, const float *labels) {
  for (int i = 0; i < g->n_values; i++) {
    const ir_value *v = &g->values[i];
    int64_t k = ir_shape_numel(&v->shape);
    if (v->kind == IR_VAL_INPUT) vals[i] = buffer_copy(i == g->input ? x : NULL, k);
    if (v->kind == IR_VAL_LABEL) vals[i] = buffer_copy(labels, k);
  }
}

/* Operand buffer i of n: params read the graph's data directly (running statistics are
 * updated there in training), everything else the interpreter's buffer. */
static const float *operand(const ir_graph *g, float **vals, const ir_node *n, int i) {
  const ir_value *v = &g->values[n->in[i]];
  return v->kind == IR_VAL_PARAM ? v->data : vals[v->id];
}

float **ir_interp(ir_graph *g, const float *x, const float *labels) {
  float **vals = calloc((size_t)(g->n_values > 0 ? g->n_values : 1), sizeof *vals);
  if (!vals) abort();
  bind_feeds(g, vals, x, labels);
  for (int i = 0; i < g->n_nodes; i++) {
    const ir_node *n = &g->nodes[i];
    const float *in[IR_MAX_IN] = {0};
    for (int j = 0; j < n->n_in; j++) in[j] = operand(g, vals, n, j);
    vals[n->out] = buffer_copy(NULL, ir_shape_numel(&g->values[n->out].shape));
    ir_ops[n->op].ref(g, n, in, vals[n->out]);
  }
  return vals;
}

void ir_interp_free(const ir_graph *g, float **vals) {
  if (!vals) return;
  for (int i = 0; i < g->n_values; i++) free(vals[i]);
  free(vals);
}
