/* fuse.c — epilogue fusion plan for the back end: conv2d [-> inference batchnorm (folded
 * into the conv's weights and bias)] [-> relu | sigmoid | swish | clip | hardsigmoid | hardswish
 * | add(same-shape act)]*
 * [-> round16 (--precision 16.x: the store rounds to the 16-bit grid; always the last op)],
 * and before a 1x1 conv the squeeze-excite scale (a mul by a per-(image, channel) factor);
 * a depthwise conv's group also computes a global_avgpool of its result (a second output).
 * The graph is not changed; codegen reads the plan (one kernel per group).  pass_fuse_train
 * is the training counterpart (batchnorm [+ residual add] + relu forward; relu_grad + batchnorm
 * backward with dgamma and dbeta as extra outputs; a residual gradient add + the relu_grad
 * reading it; the inference plan is untouched). */
#include <stdlib.h>
#include <string.h>

#include "passes/passes.h"

/* Number of operand slots (over all nodes) reading value v. */
static int use_count(const ir_graph *g, int v) {
  int k = 0;
  for (int i = 0; i < g->n_nodes; i++)
    for (int j = 0; j < g->nodes[i].n_in; j++) k += g->nodes[i].in[j] == v;
  return k;
}

static int is_output(const ir_graph *g, int v) {
  for (int i = 0; i < g->n_outputs; i++)
    if (g->outputs[i] == v) return 1;
  return 0;
}

/* The single consumer of v (in v's producer's shard), or -1. */
static int sole_consumer(const ir_graph *g, int v) {
  if (is_output(g, v) || use_count(g, v) != 1) return -1;
  int prod = g->values[v].producer;
  for (int i = prod + 1; i < g->n_nodes; i++)
    for (int j = 0; j < g->nodes[i].n_in; j++)
      if (g->nodes[i].in[j] == v) return g->nodes[i].shard == g->nodes[prod].shard ? i : -1;
  return -1;
}

/* Can node m extend a chain whose current result is v? */
static int epilogue_ok(const ir_graph *g, const ir_node *m, int v) {
  switch (m->op) {
  case IR_OP_relu: case IR_OP_sigmoid: case IR_OP_swish: case IR_OP_clip: case IR_OP_hardsigmoid: case IR_OP_hardswish:
  case IR_OP_leaky_relu:
    return 1;
  case IR_OP_round16: /* tune round16_fusion=0: separate round16 kernels (tests compare) */
    return ir_tune(g)->round16_fusion;
  case IR_OP_quantize8: /* int8: the conv's result quantised in its epilogue (tune quantize8_fusion=0: not) */
    return ir_tune(g)->quantize8_fusion;
  case IR_OP_add: {
    int other = m->in[0] == v ? m->in[1] : m->in[0];
    const ir_value *o = &g->values[other];
    return (o->kind == IR_VAL_ACT || o->kind == IR_VAL_INPUT) && /* 16-bit residuals: store16.c */
           (o->dtype == IR_F32 || o->dtype == IR_BF16 || o->dtype == IR_F16) &&
           ir_shape_eq(&o->shape, &g->values[v].shape);
  }
  default:
    return 0;
  }
}

static void grow_group(const ir_graph *g, int a, pass_fusion *plan) {
  int v = g->nodes[a].out;
  for (;;) {
    int m = sole_consumer(g, v);
    if (m < 0 || plan[m].anchor != m) return;
    const ir_node *mn = &g->nodes[m];
    pass_fusion *p = &plan[a];
    if (mn->op == IR_OP_batchnorm && !mn->attr.batchnorm.training && p->bn < 0 && p->n_post == 0 && mn->in[0] == v) {
      p->bn = m;
    } else if (p->n_post < PASS_MAX_POST && epilogue_ok(g, mn, v)) {
      p->post[p->n_post++] = m;
    } else {
      return;
    }
    plan[m].anchor = a;
    p->last = m;
    v = mn->out;
    if (mn->op == IR_OP_round16) return; /* the rounding is the store: nothing fuses after it */
  }
}

/* Squeeze-excite scale before a 1x1 conv: conv a's input is the result of a mul of an
 * [N,C,H,W] activation by an [N,C,1,1] one (either operand order), read by a alone in its
 * shard.  Fused, the conv multiplies each input channel by its (image, channel) factor where
 * it loads its input (codegen/conv/se.c), and the mul's memory pass over the map is gone.
 * Returns the mul's node id or -1.  Tune se_fusion=0 keeps the mul's own kernel (A/B). */
static int se_scale_mul(const ir_graph *g, int a, const pass_fusion *plan) {
  const ir_node *n = &g->nodes[a];
  const ir_conv2d_attr *ca = &n->attr.conv2d;
  if (!ir_tune(g)->se_fusion) return -1;
  if (ca->kernel[0] != 1 || ca->kernel[1] != 1 || ca->stride[0] != 1 || ca->stride[1] != 1 || ca->groups > 1) return -1;
  for (int k = 0; k < 4; k++)
    if (ca->pad[k]) return -1;
  int m = g->values[n->in[0]].producer;
  if (m < 0 || g->nodes[m].op != IR_OP_mul || plan[m].anchor != m || sole_consumer(g, n->in[0]) != a) return -1;
  const ir_node *mn = &g->nodes[m];
  const ir_shape *ys = &g->values[mn->out].shape;
  if (ys->rank != 4) return -1;
  for (int j = 0; j < 2; j++) {
    const ir_value *x = &g->values[mn->in[j]], *s = &g->values[mn->in[1 - j]];
    if (x->kind != IR_VAL_ACT || s->kind != IR_VAL_ACT || x->dtype != IR_F32 || s->dtype != IR_F32) continue;
    if (!ir_shape_eq(&x->shape, ys) || s->shape.rank != 4) continue;
    if (s->shape.dim[0] == ys->dim[0] && s->shape.dim[1] == ys->dim[1] && s->shape.dim[2] == 1 && s->shape.dim[3] == 1)
      return m;
  }
  return -1;
}

/* Squeeze-excite pool in the depthwise kernel: conv a is depthwise with a plane kernel for
 * every vector width from 4 to 16 (gen_dwconv.c: one work item per (image, channel) plane,
 * stride 1 or 2, output rows of at most 32 vectors, the row tile's input rows and stride-2
 * row buffer in bounds), and its group's result is read by a global_avgpool whose own result
 * has a single reader in the shard.  The kernel sums each plane as it stores it.  Returns the
 * pool's node id or -1.  Tune se_fusion=0 keeps the pool's own kernel (A/B). */
static int se_pool(const ir_graph *g, int a, const pass_fusion *plan) {
  const ir_node *n = &g->nodes[a];
  const ir_conv2d_attr *ca = &n->attr.conv2d;
  const ir_shape *xs = &g->values[n->in[0]].shape, *ys = &g->values[n->out].shape;
  if (!ir_tune(g)->se_fusion || xs->rank != 4 || ys->rank != 4) return -1;
  int64_t h = xs->dim[2], w = xs->dim[3], oh = ys->dim[2], ow = ys->dim[3], s = ca->stride[0];
  int dh = ca->dilation[0] > 0 ? ca->dilation[0] : 1, dw = ca->dilation[1] > 0 ? ca->dilation[1] : 1;
  int taps = ca->kernel[0] * ca->kernel[1];
  if (ca->groups < 2 || xs->dim[1] != ca->groups || ys->dim[1] != ca->groups || taps < 2 || taps > 49) return -1;
  if (ca->stride[1] != s || (s != 1 && s != 2) || oh < 1 || ow < 1 || ow > 128) return -1;
  int64_t nin = ((oh < 4 ? oh : 4) - 1) * s + (int64_t)(ca->kernel[0] - 1) * dh + 1;
  if (nin > 64 || (s == 2 && nin * 2 * (w / 2 + 64 + (int64_t)ca->kernel[1] * dw + ca->pad[1]) > 8192) || h < 1) return -1;
  int v = g->nodes[plan[a].last].out, p = -1;
  for (int i = plan[a].last + 1; i < g->n_nodes && p < 0; i++)
    if (g->nodes[i].op == IR_OP_global_avgpool && g->nodes[i].in[0] == v && g->nodes[i].shard == n->shard && plan[i].anchor == i)
      p = i;
  return p >= 0 && sole_consumer(g, g->nodes[p].out) >= 0 ? p : -1;
}

void pass_fuse(const ir_graph *g, int enable, pass_fusion *plan) {
  for (int i = 0; i < g->n_nodes; i++) {
    memset(&plan[i], 0, sizeof plan[i]);
    plan[i].anchor = plan[i].last = i;
    plan[i].bn = -1;
  }
  if (!enable) return;
  for (int i = 0; i < g->n_nodes; i++)
    if (g->nodes[i].op == IR_OP_conv2d && plan[i].anchor == i) grow_group(g, i, plan);
  for (int i = 0; i < g->n_nodes && ir_tune(g)->bn_act_fusion; i++) { /* a batchnorm not after a conv + its activation */
    const ir_node *n = &g->nodes[i];
    if (n->op != IR_OP_batchnorm || n->attr.batchnorm.training || plan[i].anchor != i || plan[i].n_post) continue;
    int m = sole_consumer(g, n->out);
    if (m < 0 || plan[m].anchor != m || g->nodes[m].in[0] != n->out || !epilogue_ok(g, &g->nodes[m], n->out)) continue;
    ir_op op = g->nodes[m].op;
    if (op == IR_OP_add || op == IR_OP_round16 || op == IR_OP_quantize8) continue; /* activations only */
    plan[i].post[plan[i].n_post++] = m, plan[i].last = m, plan[m].anchor = i;
  }
  for (int i = 0; i < g->n_nodes; i++) {
    int m = g->nodes[i].op == IR_OP_conv2d && plan[i].anchor == i ? se_scale_mul(g, i, plan) : -1;
    if (m >= 0) plan[i].n_pre = 1, plan[i].pre = m, plan[m].anchor = i;
    int p = g->nodes[i].op == IR_OP_conv2d && plan[i].anchor == i ? se_pool(g, i, plan) : -1;
    if (p >= 0) plan[i].n_side = 1, plan[i].side = p, plan[p].anchor = i;
  }
}

/* ---- training ---------------------------------------------------------------------------- */
/* Tune train_residual_fusion=0 (A/B): no residual add in a group (bn + add + relu forward,
 * add + relu_grad backward); the other training fusions stay. */
static int residual_fusion_disabled(const ir_graph *g) { return !ir_tune(g)->train_residual_fusion; }

static int same_stage(const ir_graph *g, int a, int b) {
  return g->nodes[a].shard == g->nodes[b].shard && pass_train_phase(g, a) == pass_train_phase(g, b);
}

/* Nonzero when every reader of v comes after node a (the fused kernel runs at a's place). */
static int read_after(const ir_graph *g, int v, int a) {
  for (int i = 0; i <= a; i++)
    for (int j = 0; j < g->nodes[i].n_in; j++)
      if (g->nodes[i].in[j] == v) return 0;
  return 1;
}

/* The reduce_sum of dy [N,C,...] to C values (a batchnorm's dbeta), alone in its plan, in i's
 * stage; or -1. */
static int dbeta_of(const ir_graph *g, int i, int dy, const pass_fusion *plan) {
  const ir_shape *ds = &g->values[dy].shape;
  for (int r = 0; r < g->n_nodes; r++) {
    const ir_node *m = &g->nodes[r];
    if (m->op != IR_OP_reduce_sum || m->in[0] != dy || plan[r].anchor != r || !same_stage(g, i, r)) continue;
    const ir_shape *ts = &m->attr.reduce_sum.shape;
    if (ds->rank < 2 || ts->rank != ds->rank || ir_shape_numel(ts) != ds->dim[1] || ts->dim[1] != ds->dim[1]) continue;
    if (ds->dim[1] == 1 || !read_after(g, m->out, i)) continue; /* dim 1 kept: ambiguous */
    return r;
  }
  return -1;
}

/* Readers of v: every one is either node a or one of the others[0..n) (-1 entries ignored). */
static int only_read_by(const ir_graph *g, int v, int a, const int *others, int n) {
  if (is_output(g, v)) return 0;
  for (int i = 0; i < g->n_nodes; i++) {
    int ok = i == a;
    for (int k = 0; k < n && !ok; k++) ok = others[k] == i;
    for (int j = 0; j < g->nodes[i].n_in && !ok; j++)
      if (g->nodes[i].in[j] == v) return 0;
  }
  return 1;
}

/* The relu reading v (b's stage, alone in its plan) when v's other readers are all relu_grads
 * reading it as their mask; else -1. */
static int relu_of(const ir_graph *g, int b, int v, const pass_fusion *plan) {
  int r = -1;
  if (is_output(g, v)) return -1;
  for (int i = 0; i < g->n_nodes; i++)
    for (int j = 0; j < g->nodes[i].n_in; j++) {
      if (g->nodes[i].in[j] != v) continue;
      const ir_node *m = &g->nodes[i];
      if (m->op == IR_OP_relu && r < 0 && plan[i].anchor == i && same_stage(g, b, i)) r = i;
      else if (!(m->op == IR_OP_relu_grad && j == 1 && m->in[0] != v)) return -1;
    }
  return r;
}

/* The residual add that alone reads y (b's stage, alone in its plan), whose other operand is
 * an f32 activation of y's shape computed before b (the fused kernel runs at b's place); -1. */
static int add_of(const ir_graph *g, int b, int y, const pass_fusion *plan) {
  int a = sole_consumer(g, y);
  if (a < 0 || g->nodes[a].op != IR_OP_add || plan[a].anchor != a || !same_stage(g, b, a)) return -1;
  int o = g->nodes[a].in[0] == y ? g->nodes[a].in[1] : g->nodes[a].in[0];
  const ir_value *ov = &g->values[o];
  if (o == y || ov->kind != IR_VAL_ACT || ov->dtype != IR_F32 || !ir_shape_eq(&ov->shape, &g->values[y].shape)) return -1;
  return ov->producer >= 0 && ov->producer < b ? a : -1;
}

/* Training batchnorm b followed by a relu, directly or through a residual add: those as b's
 * epilogue when each intermediate result is read only by the next member, the relu's input
 * otherwise only as the mask operand of relu_grads (> 0 exactly where the relu's result is,
 * so those read the relu's result instead: codegen's operand map, cg_layout.c).  The
 * intermediate results are then never stored. */
static void fuse_bn_relu(const ir_graph *g, int b, pass_fusion *plan) {
  int y = g->nodes[b].out, r = relu_of(g, b, y, plan), a = -1;
  if (r < 0 && !residual_fusion_disabled(g) && (a = add_of(g, b, y, plan)) >= 0) r = relu_of(g, b, g->nodes[a].out, plan);
  if (r < 0) return;
  pass_fusion *p = &plan[b];
  if (a >= 0) p->post[p->n_post++] = a, plan[a].anchor = b;
  p->post[p->n_post++] = r, p->last = r, plan[r].anchor = b;
}

/* Nonzero when v is an f32 value of shape s. */
static int f32_of_shape(const ir_graph *g, int v, const ir_shape *s) {
  return g->values[v].dtype == IR_F32 && ir_shape_eq(&g->values[v].shape, s);
}

/* relu_grad q (alone in its plan) whose dy is the result of an add read by q alone (the
 * gradient sum at a residual join, ResNet's backward): the add as q's pre, so q's kernel reads
 * the add's operands and the sum is never stored (codegen/cg_layout.c make_kernel,
 * gen_eltwise.c cg_gen_relu_grad_train).  [N,C,H,W] f32 operands of dy's shape only (no
 * broadcast, no 16-bit stash values).  The kernel runs at q's place: the add's operands are
 * computed before the add, so before q. */
static int fuse_add_relu_grad(const ir_graph *g, int q, pass_fusion *plan) {
  const ir_node *n = &g->nodes[q];
  int dy = n->in[0], a = g->values[dy].producer;
  const ir_shape *s = &g->values[dy].shape;
  if (a < 0 || a >= q || g->nodes[a].op != IR_OP_add || plan[a].anchor != a || plan[a].n_post || plan[a].n_pre ||
      plan[a].n_side || !same_stage(g, a, q) || s->rank != 4 || n->in[1] == dy || !only_read_by(g, dy, q, NULL, 0))
    return 0;
  const ir_node *m = &g->nodes[a];
  if (!f32_of_shape(g, dy, s) || !f32_of_shape(g, n->in[1], s) || !f32_of_shape(g, m->in[0], s) || !f32_of_shape(g, m->in[1], s))
    return 0;
  plan[q].n_pre = 1, plan[q].pre = a, plan[a].anchor = q;
  return 1;
}

int pass_fuse_train(const ir_graph *g, int accum, pass_fusion *plan) {
  if (!ir_tune(g)->train_fusion) return 0;
  int absorbed = 0;
  for (int i = 0; i < g->n_nodes; i++)
    if (g->nodes[i].op == IR_OP_batchnorm && g->nodes[i].attr.batchnorm.training && plan[i].anchor == i && plan[i].n_post == 0) {
      fuse_bn_relu(g, i, plan);
      absorbed += plan[i].n_post;
    }
  for (int i = 0; i < g->n_nodes && !accum; i++) { /* extra gradient outputs: not accumulated */
    const ir_node *n = &g->nodes[i];
    if (n->op != IR_OP_batchnorm_grad_input || !n->attr.batchnorm_grad_input.training || plan[i].anchor != i) continue;
    if (g->values[n->in[1]].shape.rank < 2) continue;
    int gm = -1;
    for (int j = 0; j < g->n_nodes && gm < 0; j++) {
      const ir_node *m = &g->nodes[j];
      if (m->op == IR_OP_batchnorm_grad_gamma && m->attr.batchnorm_grad_gamma.training && m->n_in == 2 &&
          m->in[0] == n->in[0] && m->in[1] == n->in[1] && plan[j].anchor == j && same_stage(g, i, j) &&
          m->attr.batchnorm_grad_gamma.eps == n->attr.batchnorm_grad_input.eps && read_after(g, m->out, i))
        gm = j;
    }
    if (gm < 0) continue;
    plan[i].n_side = 1, plan[i].side = gm, plan[gm].anchor = i;
    absorbed++;
    int r = dbeta_of(g, i, n->in[0], plan);
    if (r >= 0) plan[i].n_side = 2, plan[i].side2 = r, plan[r].anchor = i, absorbed++;
    /* the relu_grad producing dy, read by this group alone: its mask applied as dy is loaded */
    int q = g->values[n->in[0]].producer, grp[2] = {gm, r};
    if (q >= 0 && g->nodes[q].op == IR_OP_relu_grad && plan[q].anchor == q && q < i && same_stage(g, q, i) &&
        g->nodes[q].in[0] != g->nodes[q].in[1] && only_read_by(g, n->in[0], i, grp, 2)) {
      plan[i].n_pre = 1, plan[i].pre = q, plan[q].anchor = i;
      absorbed++;
    }
  }
  /* after the batchnorm backward groups, which take a relu_grad whole when they can */
  for (int q = 0; q < g->n_nodes && !residual_fusion_disabled(g); q++)
    if (g->nodes[q].op == IR_OP_relu_grad && plan[q].anchor == q && plan[q].n_pre == 0) absorbed += fuse_add_relu_grad(g, q, plan);
  return absorbed;
}
