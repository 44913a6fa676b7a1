/* cg_layout.c — plans the compiled model without LLVM: fused kernels per shard in
 * execution order, the boundary tensor table (model input, outputs, every activation
 * produced in one shard and read in a later one), each shard's io list, and scratch
 * offsets from a liveness-based first-fit planner (passes/plan_memory.c). */
#include <stdlib.h>
#include <string.h>

#include "codegen/cg_layout.h"
#include "ir/grad_train.h"

static void *xcalloc(size_t n, size_t s) {
  void *p = calloc(n ? n : 1, s);
  if (!p) abort();
  return p;
}

static int add_tensor(cg_layout *L, int vid) {
  if (L->vid_tensor[vid] >= 0) return L->vid_tensor[vid];
  L->tensor_vid[L->n_tensors] = vid;
  L->vid_tensor[vid] = L->n_tensors;
  return L->n_tensors++;
}

static double node_flops(const ir_graph *g, int id) {
  ir_cost c;
  ir_node_cost(g, &g->nodes[id], &c);
  return c.flops;
}

/* Kernel for the group anchored at a, placed at its last member. */
static int make_kernel(cg_layout *L, int a, ir_diag *d) {
  const ir_graph *g = L->g;
  const pass_fusion *p = &L->plan[a];
  const ir_node *n = &g->nodes[a];
  cg_kernel *k = &L->k[L->n_k++];
  memset(k, 0, sizeof *k);
  k->anchor = a, k->last = p->last, k->shard = n->shard, k->out = g->nodes[p->last].out;
  for (int j = 0; j < n->n_in; j++) {
    const ir_value *v = &g->values[n->in[j]];
    if (L->train) { /* every operand is a pointer: params in the state buffer, labels/lr io */
      k->act[k->n_act++] = v->id;
      continue;
    }
    if (v->kind == IR_VAL_PARAM) continue;
    if (v->kind == IR_VAL_LABEL)
      return ir_diag_set(d, n->loc, n->name, "labels are only used in training; inference codegen cannot compile %s",
                         ir_ops[n->op].name);
    if (v->dtype != IR_F32 && n->op != IR_OP_normalize)
      return ir_diag_set(d, n->loc, n->name, "%s input '%s' must pass through normalize first",
                         ir_dtype_name(v->dtype), v->name);
    k->act[k->n_act++] = v->id;
  }
  k->flops = node_flops(g, a) + (p->bn >= 0 ? node_flops(g, p->bn) : 0);
  for (int i = 0; i < p->n_post; i++) {
    const ir_node *m = &g->nodes[p->post[i]];
    k->flops += node_flops(g, m->id);
    if (m->op != IR_OP_add) continue;
    int prev = i > 0 ? g->nodes[p->post[i - 1]].out : p->bn >= 0 ? g->nodes[p->bn].out : n->out;
    k->act[k->n_act++] = m->in[0] == prev ? m->in[1] : m->in[0];
  }
  return 0;
}

static int build_kernels(cg_layout *L, ir_diag *d) {
  const ir_graph *g = L->g;
  L->k = xcalloc((size_t)g->n_nodes, sizeof *L->k);
  for (int i = 0; i < g->n_nodes; i++) {
    int a = L->plan[i].anchor;
    if (L->plan[a].last == i && make_kernel(L, a, d)) return -1;
  }
  for (int i = 0; i < L->n_k; i++) {
    cg_kernel *k = &L->k[i];
    if (k->shard < 0 || k->shard >= L->n_shards || (i > 0 && k->shard < L->k[i - 1].shard))
      return ir_diag_set(d, g->nodes[k->anchor].loc, g->nodes[k->anchor].name,
                         "internal error: shard %d out of order or range (n_shards %d)", k->shard, L->n_shards);
    cg_shard_plan *s = &L->sh[k->shard];
    if (s->n_k == 0) s->first_k = i;
    k->step = s->n_k++;
  }
  for (int s = 0; s < L->n_shards; s++)
    if (L->sh[s].n_k == 0) return ir_diag_set(d, (ir_loc){0}, NULL, "internal error: shard %d has no layers", s);
  return 0;
}

/* Shard of the kernel producing v (graph inputs: -1). */
static int producer_shard(const cg_layout *L, int v) {
  int p = L->g->values[v].producer;
  return p < 0 ? -1 : L->g->nodes[p].shard;
}

static void build_tensors(cg_layout *L) {
  const ir_graph *g = L->g;
  L->tensor_vid = xcalloc((size_t)g->n_values, sizeof(int));
  L->vid_tensor = xcalloc((size_t)g->n_values, sizeof(int));
  for (int v = 0; v < g->n_values; v++) L->vid_tensor[v] = -1;
  if (g->input >= 0) add_tensor(L, g->input);
  for (int i = 0; i < g->n_outputs; i++) add_tensor(L, g->outputs[i]);
  for (int i = 0; i < L->n_k; i++)
    for (int j = 0; j < L->k[i].n_act; j++) {
      int v = L->k[i].act[j];
      if (g->values[v].kind == IR_VAL_PARAM) continue; /* training: state buffer */
      if (producer_shard(L, v) < L->k[i].shard) add_tensor(L, v);
    }
}

static void push_unique(int *list, int *n, int x) {
  for (int i = 0; i < *n; i++)
    if (list[i] == x) return;
  list[(*n)++] = x;
}

static void build_io(cg_layout *L) {
  for (int s = 0; s < L->n_shards; s++) {
    cg_shard_plan *sp = &L->sh[s];
    int *in = xcalloc((size_t)L->n_tensors, sizeof(int)), *out = xcalloc((size_t)L->n_tensors, sizeof(int));
    int ni = 0, no = 0;
    for (int i = sp->first_k; i < sp->first_k + sp->n_k; i++) {
      const cg_kernel *k = &L->k[i];
      for (int j = 0; j < k->n_act; j++)
        if (L->vid_tensor[k->act[j]] >= 0 && producer_shard(L, k->act[j]) != s) push_unique(in, &ni, L->vid_tensor[k->act[j]]);
      if (L->vid_tensor[k->out] >= 0 && (!L->train || L->state_alias[k->out] < 0))
        push_unique(out, &no, L->vid_tensor[k->out]);
    }
    sp->io = xcalloc((size_t)(ni + no), sizeof(int));
    memcpy(sp->io, in, (size_t)ni * sizeof(int));
    memcpy(sp->io + ni, out, (size_t)no * sizeof(int));
    sp->n_inputs = ni, sp->n_io = ni + no;
    free(in);
    free(out);
  }
}

/* Scratch for every kernel output of shard s that is not a boundary tensor. */
static void build_scratch(cg_layout *L, int s) {
  cg_shard_plan *sp = &L->sh[s];
  pass_usage *u = xcalloc((size_t)sp->n_k, sizeof *u);
  int *vid = xcalloc((size_t)sp->n_k, sizeof(int)), n = 0;
  for (int i = sp->first_k; i < sp->first_k + sp->n_k; i++) {
    const cg_kernel *k = &L->k[i];
    if (L->vid_tensor[k->out] >= 0 || (L->train && L->state_alias[k->out] >= 0)) continue;
    const ir_value *v = &L->g->values[k->out];
    pass_usage r = {k->step, k->step, ir_shape_numel(&v->shape) * (int64_t)ir_dtype_size(v->dtype), 64, 0};
    for (int j = i + 1; j < sp->first_k + sp->n_k; j++)
      for (int a = 0; a < L->k[j].n_act; a++)
        if (L->k[j].act[a] == k->out) r.last_step = L->k[j].step;
    vid[n] = k->out;
    u[n++] = r;
  }
  sp->scratch_bytes = pass_plan_memory(u, n);
  for (int i = 0; i < n; i++) L->scratch_off[vid[i]] = u[i].offset;
  sp->usage = u, sp->usage_vid = vid, sp->n_usage = n;
}

/* Training: a 64-aligned slice of the state buffer per param; optimizer results alias their
 * target's slice. */
static void build_state(cg_layout *L) {
  const ir_graph *g = L->g;
  L->state_off = xcalloc((size_t)g->n_values, sizeof(int64_t));
  L->state_alias = xcalloc((size_t)g->n_values, sizeof(int));
  for (int v = 0; v < g->n_values; v++) L->state_off[v] = -1, L->state_alias[v] = -1;
  if (!L->train) return;
  int64_t off = 0;
  for (int v = 0; v < g->n_values; v++) {
    const ir_value *x = &g->values[v];
    if (x->kind != IR_VAL_PARAM) continue;
    L->state_off[v] = off, L->state_alias[v] = v;
    off += (ir_shape_numel(&x->shape) * (int64_t)ir_dtype_size(x->dtype) + 63) / 64 * 64;
  }
  L->state_bytes = off > 0 ? off : 64;
  for (int i = 0; i < g->n_nodes; i++) {
    const ir_node *n = &g->nodes[i];
    if (ir_op_is_optimizer(n->op) && n->attr.sgd_update.target >= 0) L->state_alias[n->out] = n->attr.sgd_update.target;
  }
}

int cg_layout_build(cg_layout *L, const ir_graph *g, int fuse, ir_diag *d) {
  memset(L, 0, sizeof *L);
  L->g = g;
  L->n_shards = g->n_shards > 0 ? g->n_shards : 1;
  L->plan = xcalloc((size_t)g->n_nodes, sizeof *L->plan);
  L->sh = xcalloc((size_t)L->n_shards, sizeof *L->sh);
  L->scratch_off = xcalloc((size_t)g->n_values, sizeof(int64_t));
  for (int v = 0; v < g->n_values; v++) L->scratch_off[v] = -1;
  L->loss_vid = L->logits_vid = L->label_vid = -1;
  for (int i = 0; i < g->n_nodes; i++) {
    if (ir_op_is_optimizer(g->nodes[i].op)) L->train = 1;
    if (g->nodes[i].op == IR_OP_softmax_xent)
      L->loss_vid = g->nodes[i].out, L->logits_vid = g->nodes[i].in[0], L->label_vid = g->nodes[i].in[1];
  }
  if (L->train) fuse = 0; /* training: one kernel per node, no BN folding */
  build_state(L);
  pass_fuse(g, fuse, L->plan);
  if (build_kernels(L, d)) return -1;
  build_tensors(L);
  build_io(L);
  for (int s = 0; s < L->n_shards; s++) build_scratch(L, s);
  return 0;
}

void cg_layout_free(cg_layout *L) {
  if (L->sh)
    for (int s = 0; s < L->n_shards; s++) free(L->sh[s].io), free(L->sh[s].usage), free(L->sh[s].usage_vid);
  free(L->sh);
  free(L->plan);
  free(L->k);
  free(L->tensor_vid);
  free(L->vid_tensor);
  free(L->scratch_off);
  free(L->state_off);
  free(L->state_alias);
  memset(L, 0, sizeof *L);
}

int cg_layout_io_slot(const cg_layout *L, int s, int tensor) {
  for (int i = 0; i < L->sh[s].n_io; i++)
    if (L->sh[s].io[i] == tensor) return i;
  return -1;
}
