/* cg_layout.c — plans the compiled model without LLVM: fused kernels per shard in
 * execution order, the boundary tensor table (model input, outputs, every activation
 * produced in one shard and read in a later one), each shard's io list, and scratch
 * offsets from a liveness-based first-fit planner (passes/plan_memory.c). */
#include <stdlib.h>
#include <string.h>

#include "codegen/cg_layout.h"
#include "ir/grad_train.h"

static void acc16_scratch(cg_layout *L, int s, pass_usage **u, int **vid, int *n);

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

/* Training operand map: the results inside a batchnorm [+ add] + relu group (pass_fuse_train)
 * are never stored; their remaining readers are relu_grad masks, which read the relu's result. */
static int train_operand(const cg_layout *L, int v) {
  const ir_graph *g = L->g;
  int p = g->values[v].producer;
  if (!L->train || p < 0) return v;
  const pass_fusion *f = &L->plan[L->plan[p].anchor];
  if (g->nodes[L->plan[p].anchor].op != IR_OP_batchnorm || f->n_post == 0 || g->nodes[f->last].op != IR_OP_relu) return v;
  return g->nodes[f->last].out;
}

/* Kernel for the group anchored at a, placed at its last member. */
static int make_kernel(cg_layout *L, int a, ir_diag *d) {
  const ir_graph *g = L->g;
  const pass_fusion *p = &L->plan[a];
  const ir_node *n = &g->nodes[a];
  cg_kernel *k = &L->k[L->n_k++];
  memset(k, 0, sizeof *k);
  k->anchor = a, k->last = p->last, k->shard = n->shard, k->out = g->nodes[p->last].out;
  const ir_node *pre = p->n_pre ? &g->nodes[p->pre] : NULL; /* squeeze-excite scale (fuse.c) */
  const ir_shape *p0 = pre ? &g->values[pre->in[0]].shape : NULL, *p1 = pre ? &g->values[pre->in[1]].shape : NULL;
  int pre_x = pre && p1->dim[2] * p1->dim[3] > p0->dim[2] * p0->dim[3]; /* the map's operand */
  for (int j = 0; j < n->n_in; j++) {
    const ir_value *v = &g->values[j == 0 && pre ? pre->in[pre_x] : n->in[j]];
    if (L->train) { /* every operand is a pointer: params in the state buffer, labels/lr io */
      k->act[k->n_act++] = train_operand(L, v->id);
      continue;
    }
    if (v->kind == IR_VAL_PARAM) continue;
    if (v->kind == IR_VAL_LABEL)
      return ir_diag_set(d, n->loc, n->name, "labels are only used in training; inference codegen cannot compile %s",
                         ir_ops[n->op].name);
    if (v->dtype != IR_F32 && v->dtype != IR_BF16 && v->dtype != IR_F16 && n->op != IR_OP_normalize && n->op != IR_OP_cast) /* 16-bit: store16.c */
      return ir_diag_set(d, n->loc, n->name, "%s input '%s' must pass through normalize or cast first",
                         ir_dtype_name(v->dtype), v->name);
    k->act[k->n_act++] = v->id;
  }
  k->flops = node_flops(g, a) + (p->bn >= 0 ? node_flops(g, p->bn) : 0);
  for (int i = 0; i < p->n_post; i++) {
    const ir_node *m = &g->nodes[p->post[i]];
    k->flops += node_flops(g, m->id);
    if (m->op != IR_OP_add) continue;
    int prev = i > 0 ? g->nodes[p->post[i - 1]].out : p->bn >= 0 ? g->nodes[p->bn].out : n->out;
    k->act[k->n_act++] = train_operand(L, m->in[0] == prev ? m->in[1] : m->in[0]);
  }
  if (pre) { /* the per-(image, channel) factors follow the residuals */
    k->act[k->n_act++] = train_operand(L, pre->in[1 - pre_x]);
    k->flops += node_flops(g, pre->id);
  }
  if (p->n_side) { /* a second output (fuse.c: the depthwise kernel's pool), written by the kernel */
    k->act[k->n_act++] = k->out2 = g->nodes[p->side].out;
    k->flops += node_flops(g, p->side);
  }
  if (p->n_side > 1) { /* training: a third output (pass_fuse_train: a batchnorm's dbeta) */
    k->act[k->n_act++] = k->out3 = g->nodes[p->side2].out;
    k->flops += node_flops(g, p->side2);
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

/* ---- in-place concats (docs/codegen.md "In-place concats") ---------------------------------
 * A concat whose dims before the axis are all 1 (batch 1 along the channels) is its inputs'
 * bytes one after the other: each producer writes into its range of the result, the concat
 * kernel does nothing.  Each input must be the main result of a kernel of the concat's shard
 * (not an in-place concat's: no chains), of the result's dtype, listed once, read by no other
 * concat and in no other shard, not a graph input or output, at a 64-byte aligned offset
 * (kernels assume aligned operands); the result must be read in its shard only. */
static int shard_local(const ir_graph *g, int v, int s) {
  if (v == g->input) return 0;
  for (int o = 0; o < g->n_outputs; o++)
    if (g->outputs[o] == v) return 0;
  for (int i = 0; i < g->n_nodes; i++)
    for (int j = 0; j < g->nodes[i].n_in; j++)
      if (g->nodes[i].in[j] == v && g->nodes[i].shard != s) return 0;
  return 1;
}

static int read_by_other_concat(const ir_graph *g, int v, int self) {
  for (int i = 0; i < g->n_nodes; i++)
    if (i != self && g->nodes[i].op == IR_OP_concat)
      for (int j = 0; j < g->nodes[i].n_in; j++)
        if (g->nodes[i].in[j] == v) return 1;
  return 0;
}

/* Whether the kernel of anchor a can write its [N, C, H, W] result at a channel offset of a
 * wider tensor (an image stride of more channels: conv_geom.ocs): a conv of groups 1 in an f32
 * graph (the wino and direct routes, whose stores go through one image offset; no bf16, stem,
 * int8 or depthwise planes) without a fused residual add (the residual is read at the output's
 * index). */
static int strided_writer(const ir_graph *g, const pass_fusion *fu, int a) {
  const ir_node *n = &g->nodes[a];
  if (n->op != IR_OP_conv2d || n->attr.conv2d.groups != 1 || fu[a].n_pre || fu[a].n_side) return 0;
  for (int k = 0; k < fu[a].n_post; k++)
    if (g->nodes[fu[a].post[k]].op == IR_OP_add) return 0;
  return g->values[n->out].dtype == IR_F32;
}

/* An f32 graph: no 16-bit rounding or storage, no int8 (only their routes write elsewhere). */
static int f32_graph(const ir_graph *g) {
  for (int q = 0; q < g->n_nodes; q++) {
    ir_op op = g->nodes[q].op;
    if (op == IR_OP_round16 || op == IR_OP_narrow16 || op == IR_OP_widen16 || op == IR_OP_quantize8) return 0;
  }
  return 1;
}

/* Whether concat n's dims before its axis are not all 1 (batch > 1: parts written image by image). */
static int concat_batched(const ir_graph *g, const ir_node *n) {
  for (int d = 0; d < n->attr.concat.axis; d++)
    if (g->values[n->out].shape.dim[d] != 1) return 1;
  return 0;
}

/* Bytes of concat input v in the result: all of it (batch 1), or one image's (batched). */
static int64_t concat_part_bytes(const ir_graph *g, int v, int batched) {
  const ir_shape *s = &g->values[v].shape;
  return ir_shape_numel(s) / (batched ? s->dim[0] : 1) * (int64_t)ir_dtype_size(g->values[v].dtype);
}

int cg_concat_inplace(const ir_graph *g, const pass_fusion *fu, int i) {
  const ir_node *n = &g->nodes[i];
  if (!fu || n->op != IR_OP_concat || !ir_tune(g)->concat_inplace || fu[i].anchor != i || fu[i].last != i) return 0;
  for (int q = 0; q < g->n_nodes; q++)
    if (ir_op_is_optimizer(g->nodes[q].op)) return 0; /* inference graphs only */
  const ir_value *o = &g->values[n->out];
  int batched = concat_batched(g, n);
  if (batched && (n->attr.concat.axis != 1 || o->shape.rank != 4 || ir_tune(g)->concat_inplace < 2 ||
                  (ir_shape_numel(&o->shape) / o->shape.dim[0] * (int64_t)ir_dtype_size(o->dtype)) % 64 || !f32_graph(g)))
    return 0;
  if (!shard_local(g, n->out, n->shard)) return 0;
  int64_t off = 0;
  for (int j = 0; j < n->n_in; j++) {
    int v = n->in[j], p = g->values[v].producer;
    if (p < 0 || off % 64 || g->values[v].dtype != o->dtype || g->nodes[p].shard != n->shard) return 0;
    int a = fu[p].anchor;
    if (fu[a].last != p || g->nodes[a].op == IR_OP_concat || (batched && !strided_writer(g, fu, a))) return 0;
    int readers = 0; /* batched: v exists only inside the result (no reader expects it dense) */
    for (int q = 0; batched && q < g->n_nodes; q++)
      for (int k = 0; k < g->nodes[q].n_in; k++) readers += g->nodes[q].in[k] == v;
    if (readers > 1) return 0;
    for (int q = 0; q < j; q++)
      if (n->in[q] == v) return 0;
    if (!shard_local(g, v, n->shard) || read_by_other_concat(g, v, i)) return 0;
    off += concat_part_bytes(g, v, batched);
  }
  return 1;
}

int64_t cg_concat_out_channels(const ir_graph *g, const pass_fusion *fu, int v) {
  for (int i = 0; fu && i < g->n_nodes; i++) {
    const ir_node *n = &g->nodes[i];
    if (n->op != IR_OP_concat) continue;
    for (int j = 0; j < n->n_in; j++)
      if (n->in[j] == v) {
        const ir_shape *os = &g->values[n->out].shape;
        return concat_batched(g, n) && cg_concat_inplace(g, fu, i) ? os->dim[1] : 0;
      }
  }
  return 0;
}

/* Marks the in-place concat kernels and where their inputs live (alias_of, alias_off). */
static void plan_inplace(cg_layout *L) {
  const ir_graph *g = L->g;
  for (int i = 0; i < L->n_k; i++) {
    cg_kernel *k = &L->k[i];
    if (!(k->inplace = cg_concat_inplace(g, L->plan, k->anchor))) continue;
    const ir_node *n = &g->nodes[k->anchor];
    int64_t off = 0;
    int batched = concat_batched(g, n);
    for (int j = 0; j < n->n_in; j++) { /* batched: the offset in image 0 (each image at the result's stride) */
      int v = n->in[j];
      L->alias_of[v] = n->out, L->alias_off[v] = off;
      off += concat_part_bytes(g, v, batched);
    }
  }
}

/* The step of the last kernel of shard plan sp after kernel i reading v (else k's own step). */
static int last_read(const cg_layout *L, const cg_shard_plan *sp, int i, int v) {
  int last = L->k[i].step;
  for (int j = i + 1; j < sp->first_k + sp->n_k; j++)
    for (int a = 0; a < L->k[j].n_act; a++)
      if (L->k[j].act[a] == v) last = L->k[j].step;
  return last;
}

/* Scratch for every kernel output of shard (training: stage) s that is not a boundary / train
 * tensor, nor a state slice, nor a gradient the update stage reads from its accumulator. */
static void build_scratch(cg_layout *L, int s) {
  cg_shard_plan *sp = &L->sh[s];
  pass_usage *u = xcalloc((size_t)sp->n_k * 3, sizeof *u);
  int *vid = xcalloc((size_t)sp->n_k * 3, sizeof(int)), n = 0;
  for (int i = sp->first_k; i < sp->first_k + sp->n_k; i++) {
    const cg_kernel *k = &L->k[i];
    for (int e = 0; e < 2; e++) { /* fused extra outputs (fuse.c: read in this shard only, or a training tensor) */
      int xo = e ? k->out3 : k->out2;
      if (xo <= 0 || (L->train && (L->vid_tensor[xo] >= 0 || L->state_alias[xo] >= 0))) continue;
      const ir_value *v = &L->g->values[xo];
      pass_usage r = {k->step, k->step, ir_shape_numel(&v->shape) * (int64_t)ir_dtype_size(v->dtype), 64, 0};
      for (int j = i + 1; j < sp->first_k + sp->n_k; j++)
        for (int a = 0; a < L->k[j].n_act; a++)
          if (L->k[j].act[a] == xo) r.last_step = L->k[j].step;
      vid[n] = xo;
      u[n++] = r;
    }
    if (L->vid_tensor[k->out] >= 0 || (L->train && L->state_alias[k->out] >= 0)) continue;
    if (L->accum && L->acc_index[k->out] >= 0 && s == L->update_stage) continue;
    if (L->alias_of && L->alias_of[k->out] >= 0) continue; /* written into an in-place concat's result */
    const ir_value *v = &L->g->values[k->out];
    pass_usage r = {k->step, last_read(L, sp, i, k->out), ir_shape_numel(&v->shape) * (int64_t)ir_dtype_size(v->dtype), 64, 0};
    if (k->inplace) /* the result holds its inputs: alive from the first one's kernel to the last read of any */
      for (int j = sp->first_k; j < i; j++)
        if (L->alias_of[L->k[j].out] == k->out) {
          if (L->k[j].step < r.first_step) r.first_step = L->k[j].step;
          int last = last_read(L, sp, j, L->k[j].out);
          if (last > r.last_step) r.last_step = last;
        }
    vid[n] = k->out;
    u[n++] = r;
  }
  int n_k_rec = n;
  acc16_scratch(L, s, &u, &vid, &n);
  sp->scratch_bytes = pass_plan_memory(u, n);
  for (int i = 0; i < n_k_rec; i++) L->scratch_off[vid[i]] = u[i].offset;
  for (int i = sp->first_k; L->alias_of && i < sp->first_k + sp->n_k; i++) {
    int v = L->k[i].out, c = L->alias_of[v];
    if (c >= 0) L->scratch_off[v] = L->scratch_off[c] + L->alias_off[v];
  }
  for (int i = n_k_rec; i < n; i++) L->acc_tmp_off[L->acc_index[vid[i]]] = u[i].offset;
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

/* ---- training programs ------------------------------------------------------------------ */
/* Stage key of node i before empty stages are dropped: fwd s -> s, bwd s -> 2S-1-s, update 2S. */
static int stage_key(const cg_layout *L, int i) {
  const ir_graph *g = L->g;
  int S = L->n_groups, s = g->nodes[i].shard, ph = pass_train_phase(g, i);
  return ph == PASS_PHASE_FWD ? s : ph == PASS_PHASE_BWD ? 2 * S - 1 - s : 2 * S;
}

static int build_train_stages(cg_layout *L, ir_diag *d) {
  const ir_graph *g = L->g;
  int S = L->n_groups, nkeys = 2 * S + 1;
  L->k = xcalloc((size_t)g->n_nodes, sizeof *L->k);
  cg_kernel *tmp = xcalloc((size_t)g->n_nodes, sizeof *tmp);
  int *key = xcalloc((size_t)g->n_nodes, sizeof(int)), *count = xcalloc((size_t)nkeys, sizeof(int));
  for (int i = 0; i < g->n_nodes; i++) {
    int sh = g->nodes[i].shard;
    if (sh < 0 || sh >= S) {
      free(tmp), free(key), free(count);
      return ir_diag_set(d, g->nodes[i].loc, g->nodes[i].name, "internal error: shard %d of %d", sh, S);
    }
    if (L->plan[i].anchor != i) continue; /* computed by its group's kernel (pass_fuse_train) */
    if (make_kernel(L, i, d)) {
      free(tmp), free(key), free(count);
      return -1;
    }
    key[L->n_k - 1] = stage_key(L, i);
    count[key[L->n_k - 1]]++;
  }
  int *map = xcalloc((size_t)nkeys, sizeof(int)), n_st = 0;
  for (int k = 0; k < nkeys; k++) map[k] = count[k] ? n_st++ : -1;
  L->n_shards = n_st;
  L->sh = xcalloc((size_t)n_st, sizeof *L->sh);
  L->stage_shard = xcalloc((size_t)n_st, sizeof(int));
  L->stage_phase = xcalloc((size_t)n_st, sizeof(int));
  L->update_stage = -1;
  int pos = 0;
  for (int k = 0; k < nkeys; k++) {
    if (!count[k]) continue;
    int st = map[k];
    L->stage_phase[st] = k < S ? PASS_PHASE_FWD : k < 2 * S ? PASS_PHASE_BWD : PASS_PHASE_UPDATE;
    L->stage_shard[st] = k < S ? k : k < 2 * S ? 2 * S - 1 - k : 0;
    if (k < S) L->n_fwd_stages++;
    if (k == 2 * S) L->update_stage = st;
    L->sh[st].first_k = pos;
    for (int i = 0; i < L->n_k; i++)
      if (key[i] == k) {
        tmp[pos] = L->k[i];
        tmp[pos].shard = st;
        tmp[pos].step = L->sh[st].n_k++;
        pos++;
      }
  }
  memcpy(L->k, tmp, (size_t)L->n_k * sizeof *tmp);
  free(tmp), free(key), free(count), free(map);
  L->val_stage = xcalloc((size_t)g->n_values, sizeof(int));
  for (int v = 0; v < g->n_values; v++) L->val_stage[v] = -1;
  for (int i = 0; i < L->n_k; i++) {
    L->val_stage[L->k[i].out] = L->k[i].shard;
    if (L->k[i].out2 > 0) L->val_stage[L->k[i].out2] = L->k[i].shard;
    if (L->k[i].out3 > 0) L->val_stage[L->k[i].out3] = L->k[i].shard;
  }
  /* every operand is produced by an earlier stage or earlier in the same stage */
  for (int i = 0; i < L->n_k; i++)
    for (int j = 0; j < L->k[i].n_act; j++) {
      int ps = L->val_stage[L->k[i].act[j]];
      if (ps > L->k[i].shard)
        return ir_diag_set(d, g->nodes[L->k[i].anchor].loc, g->nodes[L->k[i].anchor].name,
                           "internal error: training stage order: reads '%s' from a later stage", g->values[L->k[i].act[j]].name);
    }
  return 0;
}

/* Gradient accumulators: values written by a backward stage and read by the update stage.
 * Without accumulation they stay train tensors; with it each gets one GRAD_ACCUM slice per
 * replica after the params. */
static void build_accumulators(cg_layout *L) {
  const ir_graph *g = L->g;
  L->acc_index = xcalloc((size_t)g->n_values, sizeof(int));
  L->acc_vid = xcalloc((size_t)g->n_values, sizeof(int));
  for (int v = 0; v < g->n_values; v++) L->acc_index[v] = -1;
  if (L->update_stage < 0) return;
  for (int i = 0; i < L->n_k; i++) {
    if (L->k[i].shard != L->update_stage) continue;
    for (int j = 0; j < L->k[i].n_act; j++) {
      int v = L->k[i].act[j], ps = L->val_stage[v];
      if (ps < 0 || L->stage_phase[ps] != PASS_PHASE_BWD || L->acc_index[v] >= 0) continue;
      L->acc_index[v] = L->n_acc;
      L->acc_vid[L->n_acc++] = v;
    }
  }
  if (!L->accum) return;
  L->acc_off = xcalloc((size_t)L->n_acc * (size_t)L->replicas, sizeof(int64_t));
  int64_t off = L->state_bytes, es = L->acc16 ? 2 : 4; /* f32 gradients, 16-bit slices with half partials */
  for (int r = 0; r < L->replicas; r++)
    for (int a = 0; a < L->n_acc; a++) {
      L->acc_off[a * L->replicas + r] = off;
      off += (ir_shape_numel(&g->values[L->acc_vid[a]].shape) * es + 63) / 64 * 64;
    }
  L->acc_stride = L->replicas > 1 && L->n_acc > 0 ? L->acc_off[1] - L->acc_off[0] : 0; /* one replica's block */
  L->state_bytes = off;
}

/* acc16: the update stage reads each accumulator as an f32 mean in its scratch (cg_main.c
 * widens the replicas' 16-bit sum into it right before the first kernel reading it): one
 * record per accumulator from that kernel's step to its last reader's, appended to u / vid. */
static void acc16_scratch(cg_layout *L, int s, pass_usage **u, int **vid, int *n) {
  if (!L->acc16 || s != L->update_stage || L->n_acc == 0) return;
  const cg_shard_plan *sp = &L->sh[s];
  *u = realloc(*u, (size_t)(*n + L->n_acc) * sizeof **u);
  *vid = realloc(*vid, (size_t)(*n + L->n_acc) * sizeof **vid);
  if (!*u || !*vid) abort();
  for (int a = 0; a < L->n_acc; a++) {
    int v = L->acc_vid[a], first = -1, last = -1;
    for (int i = sp->first_k; i < sp->first_k + sp->n_k; i++)
      for (int j = 0; j < L->k[i].n_act; j++)
        if (L->k[i].act[j] == v) {
          if (first < 0) first = L->k[i].step;
          last = L->k[i].step;
        }
    (*vid)[*n] = v;
    (*u)[(*n)++] = (pass_usage){first, last, ir_shape_numel(&L->g->values[v].shape) * 4, 64, 0};
  }
}

/* Nonzero when v (read or written in stage st) lives in the state buffer there. */
static int in_state(const cg_layout *L, int v, int st) {
  if (L->state_alias[v] >= 0) return 1;
  return L->accum && L->acc_index[v] >= 0 && (st == L->update_stage || L->val_stage[v] == st);
}

static void build_train_tensors(cg_layout *L) {
  const ir_graph *g = L->g;
  L->tensor_vid = xcalloc((size_t)g->n_values, sizeof(int));
  L->vid_tensor = xcalloc((size_t)g->n_values, sizeof(int));
  for (int v = 0; v < g->n_values; v++) L->vid_tensor[v] = -1;
  if (g->input >= 0) add_tensor(L, g->input);
  for (int i = 0; i < g->n_outputs; i++) add_tensor(L, g->outputs[i]);
  if (L->label_vid >= 0) add_tensor(L, L->label_vid);
  int lr = ir_find_value(g, IR_LR_INPUT_NAME);
  if (lr >= 0) add_tensor(L, lr);
  for (int i = 0; i < L->n_k; i++)
    for (int j = 0; j < L->k[i].n_act; j++) {
      int v = L->k[i].act[j];
      if (g->values[v].kind == IR_VAL_PARAM || L->state_alias[v] >= 0) continue;
      if (L->accum && L->acc_index[v] >= 0) continue; /* accumulated into the state buffer */
      if (L->val_stage[v] != L->k[i].shard) add_tensor(L, v);
    }
}

static void build_train_io(cg_layout *L) {
  const ir_graph *g = L->g;
  L->stage_io_bytes = xcalloc((size_t)L->n_shards, sizeof(int64_t));
  for (int s = 0; s < L->n_shards; s++) {
    cg_shard_plan *sp = &L->sh[s];
    int *in = xcalloc((size_t)L->n_tensors, sizeof(int)), *out = xcalloc((size_t)L->n_tensors, sizeof(int));
    int ni = 0, no = 0;
    for (int i = sp->first_k; i < sp->first_k + sp->n_k; i++) {
      const cg_kernel *k = &L->k[i];
      for (int j = 0; j < k->n_act; j++) {
        int v = k->act[j];
        if (L->vid_tensor[v] >= 0 && L->val_stage[v] != s && !in_state(L, v, s)) push_unique(in, &ni, L->vid_tensor[v]);
      }
      int outs[3] = {k->out, k->out2, k->out3};
      for (int e = 0; e < 3; e++)
        if ((e == 0 || outs[e] > 0) && L->vid_tensor[outs[e]] >= 0 && !in_state(L, outs[e], s))
          push_unique(out, &no, L->vid_tensor[outs[e]]);
    }
    sp->io = xcalloc((size_t)(ni + no), sizeof(int));
    memcpy(sp->io, in, (size_t)ni * sizeof(int));
    memcpy(sp->io + ni, out, (size_t)no * sizeof(int));
    sp->n_inputs = ni, sp->n_io = ni + no;
    for (int k = 0; k < sp->n_io; k++) {
      const ir_value *x = &g->values[L->tensor_vid[sp->io[k]]];
      L->stage_io_bytes[s] += ir_shape_numel(&x->shape) * (int64_t)ir_dtype_size(x->dtype);
    }
    free(in);
    free(out);
  }
}

static int build_train_layout(cg_layout *L, const cg_options *o, ir_diag *d) {
  const ir_graph *g = L->g;
  L->grad_accum = o && o->grad_accum > 1 ? o->grad_accum : 1;
  L->replicas = o && o->replicas > 1 ? o->replicas : 1;
  L->schedule = o ? o->schedule : 0;
  L->recompute = o ? o->recompute : 0;
  L->accum = L->grad_accum * L->replicas > 1;
  L->acc16 = o && o->half_partials && pass_acc_elem_bytes(g, o->half_partials) == 2 ? o->half_partials : 0;
  L->n_groups = g->n_shards > 0 ? g->n_shards : 1;
  free(L->sh);
  L->sh = NULL;
  build_state(L);
  pass_fuse(g, 0, L->plan);
  /* with accumulation no multi-output backward kernels: their extra gradients would also need
   * the accumulators' per-kernel add (cg_main.c does it for k->out only) */
  pass_fuse_train(g, L->accum, L->plan);
  if (build_train_stages(L, d)) return -1;
  build_accumulators(L);
  if (L->accum && L->acc16) L->acc_tmp_off = xcalloc((size_t)(L->n_acc > 0 ? L->n_acc : 1), sizeof(int64_t));
  else L->acc16 = 0;
  build_train_tensors(L);
  build_train_io(L);
  for (int s = 0; s < L->n_shards; s++) build_scratch(L, s);
  return 0;
}

int cg_layout_build(cg_layout *L, const ir_graph *g, int fuse, ir_diag *d) {
  return cg_layout_build_opts(L, g, fuse, NULL, d);
}

int cg_layout_build_opts(cg_layout *L, const ir_graph *g, int fuse, const cg_options *o, ir_diag *d) {
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
  if (L->train) return build_train_layout(L, o, d); /* pass_fuse_train's groups, no BN folding */
  L->n_groups = L->n_shards;
  build_state(L);
  pass_fuse(g, fuse, L->plan);
  if (build_kernels(L, d)) return -1;
  L->alias_of = xcalloc((size_t)g->n_values, sizeof(int));
  L->alias_off = xcalloc((size_t)g->n_values, sizeof(int64_t));
  for (int v = 0; v < g->n_values; v++) L->alias_of[v] = -1;
  plan_inplace(L);
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
  free(L->kplan);
  free(L->k);
  free(L->tensor_vid);
  free(L->vid_tensor);
  free(L->scratch_off);
  free(L->alias_of);
  free(L->alias_off);
  free(L->state_off);
  free(L->state_alias);
  free(L->stage_shard);
  free(L->stage_phase);
  free(L->val_stage);
  free(L->acc_vid);
  free(L->acc_index);
  free(L->acc_off);
  free(L->acc_tmp_off);
  free(L->stage_io_bytes);
  memset(L, 0, sizeof *L);
}

int cg_layout_io_slot(const cg_layout *L, int s, int tensor) {
  for (int i = 0; i < L->sh[s].n_io; i++)
    if (L->sh[s].io[i] == tensor) return i;
  return -1;
}
