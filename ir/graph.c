/* graph.c — building the IR graph: values (inputs, labels, params, activations) and nodes
 * appended in topological order, each node's result shape inferred by its op's hook. */
#include <stdlib.h>
#include <string.h>

#include "ir.h"

ir_graph *ir_graph_new(const char *name, int batch) {
  ir_arena *a = ir_arena_new();
  if (!a) return NULL;
  ir_graph *g = ir_alloc(a, sizeof *g);
  g->arena = a;
  g->name = ir_strdup(a, name ? name : "model");
  g->batch = batch;
  g->input = -1;
  g->label = -1;
  g->n_shards = 1;
  return g;
}

void ir_graph_free(ir_graph *g) {
  if (!g) return;
  free(g->name_index);
  free(g->values);
  free(g->nodes);
  ir_arena_free(g->arena);
}

static uint64_t name_hash(const char *s) {
  uint64_t h = 1469598103934665603ull; /* FNV-1a */
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
  return h;
}

/* Inserts value id under its name (the table keeps load <= 1/2). */
static void index_value(ir_graph *g, int id) {
  if (2 * (g->n_values + 1) > g->name_index_cap) {
    int cap = g->name_index_cap ? 2 * g->name_index_cap : 256;
    free(g->name_index);
    g->name_index = calloc((size_t)cap, sizeof *g->name_index);
    if (!g->name_index) abort();
    g->name_index_cap = cap;
    for (int i = 0; i < g->n_values; i++)
      if (i != id) index_value(g, i);
  }
  unsigned mask = (unsigned)g->name_index_cap - 1;
  unsigned k = (unsigned)name_hash(g->values[id].name) & mask;
  while (g->name_index[k]) k = (k + 1) & mask;
  g->name_index[k] = id + 1;
}

/* arr (n elements of size bytes used out of *cap), reallocated if full to room for one more
 * (doubling from 64); aborts on out of memory, as the arena does. */
static void *grow(void *arr, int n, int *cap, size_t size) {
  if (n < *cap) return arr;
  *cap = *cap ? 2 * *cap : 64;
  arr = realloc(arr, (size_t)*cap * size);
  if (!arr) abort();
  return arr;
}

static ir_value *new_value(ir_graph *g, const char *name, ir_value_kind kind, ir_dtype dt, ir_shape s) {
  g->values = grow(g->values, g->n_values, &g->cap_values, sizeof *g->values);
  ir_value *v = memset(&g->values[g->n_values], 0, sizeof *v);
  v->id = g->n_values++;
  v->name = ir_strdup(g->arena, name);
  v->kind = kind;
  v->dtype = dt;
  v->shape = s;
  v->producer = -1;
  index_value(g, v->id);
  return v;
}

int ir_add_input(ir_graph *g, const char *name, ir_dtype dt, ir_shape s) {
  ir_value *v = new_value(g, name, IR_VAL_INPUT, dt, s);
  if (g->input < 0) g->input = v->id;
  return v->id;
}

int ir_add_label(ir_graph *g, const char *name) {
  ir_shape s = {1, {g->batch}};
  ir_value *v = new_value(g, name, IR_VAL_LABEL, IR_F32, s);
  g->label = v->id;
  return v->id;
}

/* Mixed labels (cnnc --mixed-labels): row i = (a, b, lam), the target lam onehot(a) + (1-lam)
 * onehot(b) of mixup / cutmix. */
int ir_add_label_mixed(ir_graph *g, const char *name) {
  ir_shape s = {2, {g->batch, 3}};
  ir_value *v = new_value(g, name, IR_VAL_LABEL, IR_F32, s);
  g->label = v->id;
  return v->id;
}

int ir_add_param(ir_graph *g, const char *name, ir_shape s, int trainable) {
  ir_value *v = new_value(g, name, IR_VAL_PARAM, IR_F32, s);
  v->trainable = trainable;
  v->data = ir_alloc(g->arena, (size_t)ir_shape_numel(&s) * sizeof(float));
  return v->id;
}

int ir_find_value(const ir_graph *g, const char *name) {
  if (!g->name_index_cap) return -1;
  unsigned mask = (unsigned)g->name_index_cap - 1;
  for (unsigned k = (unsigned)name_hash(name) & mask; g->name_index[k]; k = (k + 1) & mask)
    if (strcmp(g->values[g->name_index[k] - 1].name, name) == 0) return g->name_index[k] - 1;
  return -1;
}

/* A node's result value carries the node's name, so the value index finds nodes too. */
int ir_find_node(const ir_graph *g, const char *name) {
  int v = ir_find_value(g, name);
  return v >= 0 && g->values[v].kind == IR_VAL_ACT ? g->values[v].producer : -1;
}

int64_t ir_value_bytes(const ir_graph *g, int v) {
  return ir_shape_numel(&g->values[v].shape) * (int64_t)ir_dtype_size(g->values[v].dtype);
}

/* Operand count and operand existence; shape checks are the op's infer hook. */
static int check_operands(const ir_graph *g, ir_op op, const char *name, ir_loc loc, const int *in, int n_in,
                          ir_diag *d) {
  const ir_op_info *info = &ir_ops[op];
  if (n_in < info->min_in || n_in > info->max_in)
    return ir_diag_set(d, loc, name, "%s takes %d..%d operands, got %d", info->name, info->min_in, info->max_in,
                       n_in);
  for (int i = 0; i < n_in; i++)
    if (in[i] < 0 || in[i] >= g->n_values)
      return ir_diag_set(d, loc, name, "operand %d is not a value of the graph", i);
  return 0;
}

int ir_add_node(ir_graph *g, ir_op op, const char *name, ir_loc loc, const int *in, int n_in, const ir_attr *attr,
                ir_diag *d) {
  if ((unsigned)op >= IR_OP_COUNT) return ir_diag_set(d, loc, name, "unknown op %d", (int)op);
  if (check_operands(g, op, name, loc, in, n_in, d)) return -1;
  if (ir_find_value(g, name) >= 0)
    return ir_diag_set(d, loc, name, "duplicate layer name");
  g->nodes = grow(g->nodes, g->n_nodes, &g->cap_nodes, sizeof *g->nodes);
  ir_node *n = memset(&g->nodes[g->n_nodes], 0, sizeof *n);
  n->id = g->n_nodes;
  n->op = op;
  n->name = ir_strdup(g->arena, name);
  n->loc = loc;
  n->n_in = n_in;
  memcpy(n->in, in, (size_t)n_in * sizeof *in);
  if (attr) n->attr = *attr;
  n->out = -1;
  ir_shape s = {0};
  ir_diag sub = {0};
  if (ir_ops[op].infer(g, n, &s, &sub)) return ir_diag_set(d, loc, name, "%s", sub.msg);
  if (ir_shape_bytes_bounded(&s, 4) < 0) { /* f32 (16-bit storage is decided later) */
    char buf[96];
    double tib = 4.0 / (double)IR_MAX_TENSOR_BYTES;
    for (int i = 0; i < s.rank; i++) tib *= (double)s.dim[i];
    return ir_diag_set(d, loc, name, "output %s is %.4g TiB; a tensor may have at most 1 TiB (what the runtime accepts)",
                       ir_shape_str(&s, buf, sizeof buf), tib);
  }
  g->n_nodes++;
  ir_value *v = new_value(g, name, IR_VAL_ACT, IR_F32, s);
  if (op == IR_OP_narrow16) v->dtype = n->attr.narrow16.format == IR_HALF_FP16 ? IR_F16 : IR_BF16; /* 16-bit storage */
  if (op == IR_OP_cast) v->dtype = (ir_dtype)n->attr.cast.to; /* an integer graph output (docs/onnx.md) */
  v->producer = n->id;
  g->nodes[n->id].out = v->id;
  return v->id;
}

void ir_node_cost(const ir_graph *g, const ir_node *n, ir_cost *c) {
  memset(c, 0, sizeof *c);
  ir_ops[n->op].cost(g, n, c);
}

int64_t ir_param_count(const ir_graph *g, int trainable_only) {
  int64_t total = 0;
  for (int i = 0; i < g->n_values; i++) {
    const ir_value *v = &g->values[i];
    if (v->kind == IR_VAL_PARAM && (!trainable_only || v->trainable)) total += ir_shape_numel(&v->shape);
  }
  return total;
}
