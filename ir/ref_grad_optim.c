/* ref_grad_optim.c — reference kernels of the optimizer ops, torch.optim semantics (see
 * docs/training.md), and the interpreter-level training step (grad_train.h).  Every formula
 * sees g' = g * grad_scale + l2 * w (coupled L2, loss scaling undone) and adds the decoupled
 * weight decay outside the optimizer: w' = w - lr * (O(g') + weight_decay * w). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "grad_train.h"
#include "ref_util.h"

static int64_t count(const ir_graph *g, const ir_node *n) { return ir_shape_numel(ref_out_shape(g, n)); }

static double gprime(const ir_optim_attr *a, float grad, float w) {
  return (double)grad * a->grad_scale + (double)a->l2 * w;
}

/* --precision 16.16 (attr.round16, docs/precision.md): the updated weight w rounded to the
 * 16-bit format, to nearest even or (attr.stochastic) away from zero with probability
 * (|w| - lo)/(hi - lo) using u24 = ref_mix64(key ^ ref_mix64(i)) >> 40, key =
 * ref_mix64(seed ^ ref_mix64(t')), t' = the last operand (as codegen/gen_round16.c). */
static uint64_t sr_key(const ir_node *n, const float *const *in) {
  const ir_optim_attr *a = &n->attr.sgd_update;
  return a->round16 && a->stochastic ? ref_mix64(a->seed ^ ref_mix64((uint64_t)(int64_t)in[n->n_in - 1][0])) : 0;
}
static float h16(uint16_t b) {
  _Float16 h;
  memcpy(&h, &b, 2);
  return (float)h;
}
static float wround(const ir_optim_attr *a, float w, uint64_t key, int64_t i) {
  if (!a->round16) return w;
  int fmt = a->round16 - 1;
  if (!a->stochastic || isnan(w)) return ir_round16_f32(w, fmt);
  uint32_t u24 = (uint32_t)(ref_mix64(key ^ ref_mix64((uint64_t)i)) >> 40), u;
  if (fmt == IR_HALF_BF16) { /* 16 random bits added below the kept half: carries with p */
    memcpy(&u, &w, 4);
    u = (u + (u24 >> 8)) & 0xffff0000u;
    memcpy(&w, &u, 4);
    return w;
  }
  float m = fabsf(w);
  _Float16 hh = (_Float16)m; /* nearest even */
  uint16_t hb;
  memcpy(&hb, &hh, 2);
  int up = (float)hh > m;
  float lo = h16((uint16_t)(up ? hb - 1 : hb)), hi = h16((uint16_t)(up ? hb : hb + 1));
  float v = (float)u24 * (1.0f / 16777216.0f) < (m - lo) / (hi - lo) ? hi : lo;
  return copysignf(v, w);
}

/* The updated weight w - lr*(o + wd*w) of every optimizer (o = its O(g')), rounded by wround. */
static float update(const ir_optim_attr *a, float w, double lr, double o, uint64_t key, int64_t i) {
  return wround(a, (float)(w - lr * (o + (double)a->weight_decay * w)), key, i);
}

/* decay*s + (1-decay)*g'^2: the running average of squared gradients (RMSprop, Adam). */
static float mean_sq(float decay, float s, double gp) { return (float)((double)decay * s + (1.0 - decay) * gp * gp); }

/* in: w, g, lr; out w - lr*(g' + wd*w). */
void ir_ref_sgd_update(const ir_graph *g, const ir_node *n, const float *const *in, float *out) {
  const ir_optim_attr *a = &n->attr.sgd_update;
  double lr = in[2][0];
  uint64_t key = sr_key(n, in);
  for (int64_t i = 0; i < count(g, n); i++)
    out[i] = update(a, in[0][i], lr, gprime(a, in[1][i], in[0][i]), key, i);
}

/* in: g, v, w; out v' = mu*v + g' (torch SGD momentum buffer, dampening 0). */
void ir_ref_momentum_acc(const ir_graph *g, const ir_node *n, const float *const *in, float *out) {
  const ir_optim_attr *a = &n->attr.momentum_acc;
  for (int64_t i = 0; i < count(g, n); i++) out[i] = (float)((double)a->momentum * in[1][i] + gprime(a, in[0][i], in[2][i]));
}

/* in: w, v', lr[, g]; out w - lr*(d + wd*w), d = v' or (Nesterov) g' + mu*v'. */
void ir_ref_momentum_update(const ir_graph *g, const ir_node *n, const float *const *in, float *out) {
  const ir_optim_attr *a = &n->attr.momentum_update;
  double lr = in[2][0];
  for (int64_t i = 0; i < count(g, n); i++) {
    double d = a->nesterov ? gprime(a, in[3][i], in[0][i]) + (double)a->momentum * in[1][i] : in[1][i];
    out[i] = update(a, in[0][i], lr, d, sr_key(n, in), i);
  }
}

/* in: g, s, w; out s' = rho*s + (1-rho)*g'^2. */
void ir_ref_rmsprop_acc(const ir_graph *g, const ir_node *n, const float *const *in, float *out) {
  const ir_optim_attr *a = &n->attr.rmsprop_acc;
  for (int64_t i = 0; i < count(g, n); i++) out[i] = mean_sq(a->rho, in[1][i], gprime(a, in[0][i], in[2][i]));
}

/* in: w, s', lr, g; out w - lr*(g'/(sqrt(s')+eps) + wd*w) (torch RMSprop, eps outside the root). */
void ir_ref_rmsprop_update(const ir_graph *g, const ir_node *n, const float *const *in, float *out) {
  const ir_optim_attr *a = &n->attr.rmsprop_update;
  double lr = in[2][0];
  for (int64_t i = 0; i < count(g, n); i++) {
    double gp = gprime(a, in[3][i], in[0][i]);
    out[i] = update(a, in[0][i], lr, gp / (sqrt((double)in[1][i]) + a->eps), sr_key(n, in), i);
  }
}

/* in: g, m, w; out beta1*m + (1-beta1)*g'. */
void ir_ref_adam_moment1(const ir_graph *g, const ir_node *n, const float *const *in, float *out) {
  const ir_optim_attr *a = &n->attr.adam_moment1;
  for (int64_t i = 0; i < count(g, n); i++)
    out[i] = (float)((double)a->beta1 * in[1][i] + (1.0 - a->beta1) * gprime(a, in[0][i], in[2][i]));
}

/* in: g, v, w; out beta2*v + (1-beta2)*g'^2. */
void ir_ref_adam_moment2(const ir_graph *g, const ir_node *n, const float *const *in, float *out) {
  const ir_optim_attr *a = &n->attr.adam_moment2;
  for (int64_t i = 0; i < count(g, n); i++) out[i] = mean_sq(a->beta2, in[1][i], gprime(a, in[0][i], in[2][i]));
}

/* in: w, m', v', lr, t' (the step number, 1 on the first step); out
 * w - lr*(mhat/(sqrt(vhat)+eps) + wd*w), mhat = m'/(1-beta1^t), vhat = v'/(1-beta2^t). */
void ir_ref_adam_update(const ir_graph *g, const ir_node *n, const float *const *in, float *out) {
  const ir_optim_attr *a = &n->attr.adam_update;
  double lr = in[3][0], t = in[4][0];
  double c1 = 1.0 - pow(a->beta1, t), c2 = 1.0 - pow(a->beta2, t);
  for (int64_t i = 0; i < count(g, n); i++) {
    double mh = in[1][i] / c1, vh = in[2][i] / c2;
    out[i] = update(a, in[0][i], lr, mh / (sqrt(vh) + a->eps), sr_key(n, in), i);
  }
}

/* in: t [1]; out t + 1. */
void ir_ref_step_count(const ir_graph *g, const ir_node *n, const float *const *in, float *out) {
  out[0] = in[0][0] + 1.0f;
}

/* ---- training step ---------------------------------------------------------------------- */
int ir_op_is_optimizer(ir_op op) {
  return op >= IR_OP_sgd_update && op <= IR_OP_step_count;
}

int ir_train_apply(ir_graph *g, float **vals) {
  int written = 0;
  for (int i = 0; i < g->n_nodes; i++) {
    const ir_node *n = &g->nodes[i];
    if (!ir_op_is_optimizer(n->op) || n->attr.sgd_update.target < 0) continue;
    ir_value *t = &g->values[n->attr.sgd_update.target];
    if (t->kind != IR_VAL_PARAM || !vals[n->out]) continue;
    memcpy(t->data, vals[n->out], (size_t)ir_shape_numel(&t->shape) * sizeof(float));
    written++;
  }
  return written;
}

static float *fresh(int64_t n, const float *src) {
  float *b = calloc((size_t)(n > 0 ? n : 1), sizeof *b);
  if (!b) abort();
  if (src) memcpy(b, src, (size_t)n * sizeof *b);
  return b;
}

/* Nonzero when v is the target of an optimizer node (its result replaces v after a step). */
static int is_target(const ir_graph *g, int v) {
  for (int i = 0; i < g->n_nodes; i++)
    if (ir_op_is_optimizer(g->nodes[i].op) && g->nodes[i].attr.sgd_update.target == v) return 1;
  return 0;
}

/* --auto-loss-scaling (docs/precision.md), as the compiled runtime does it (runtime/rt_train.c
 * rt_loss_scale_update): "optimizer/loss_scale" = {S, good steps, skipped steps, interval}.
 * After the update, if any trainable param or optimizer state element is not finite, every
 * optimizer target is restored from snap (its data before the update), S halves and the skip
 * is counted; else after `interval` good steps in a row S doubles.  Running statistics keep
 * the step's forward. */
static void loss_scale_update(ir_graph *g, int ls, float **snap) {
  int finite = 1;
  for (int v = 0; v < g->n_values && finite; v++) {
    const ir_value *p = &g->values[v];
    if (p->kind != IR_VAL_PARAM || !p->data || v == ls || !(p->trainable || snap[v])) continue;
    int64_t k = ir_shape_numel(&p->shape);
    for (int64_t e = 0; e < k && finite; e++) finite = isfinite(p->data[e]);
  }
  float *S = g->values[ls].data;
  if (!finite) {
    for (int v = 0; v < g->n_values; v++)
      if (snap[v]) memcpy(g->values[v].data, snap[v], (size_t)ir_shape_numel(&g->values[v].shape) * sizeof(float));
    S[0] *= 0.5f, S[1] = 0, S[2] += 1;
  } else if (++S[1] >= S[3]) {
    S[0] *= 2.0f, S[1] = 0;
  }
}

float **ir_train_step(ir_graph *g, const float *x, const float *labels, float lr) {
  float **vals = calloc((size_t)(g->n_values > 0 ? g->n_values : 1), sizeof *vals);
  if (!vals) abort();
  for (int i = 0; i < g->n_values; i++) {
    const ir_value *v = &g->values[i];
    int64_t k = ir_shape_numel(&v->shape);
    if (v->kind == IR_VAL_INPUT) vals[i] = fresh(k, i == g->input ? x : NULL);
    if (v->kind == IR_VAL_INPUT && !strcmp(v->name, IR_LR_INPUT_NAME))
      for (int64_t j = 0; j < k; j++) vals[i][j] = lr;
    if (v->kind == IR_VAL_LABEL) vals[i] = fresh(k, labels);
  }
  for (int i = 0; i < g->n_nodes; i++) {
    const ir_node *n = &g->nodes[i];
    const float *in[IR_MAX_IN] = {0};
    for (int j = 0; j < n->n_in; j++) {
      const ir_value *v = &g->values[n->in[j]];
      in[j] = v->kind == IR_VAL_PARAM ? v->data : vals[v->id];
    }
    vals[n->out] = fresh(ir_shape_numel(&g->values[n->out].shape), NULL);
    ir_ops[n->op].ref(g, n, in, vals[n->out]);
  }
  int ls = ir_find_value(g, "optimizer/loss_scale");
  float **snap = NULL; /* --auto-loss-scaling: every optimizer target before the update */
  if (ls >= 0 && g->values[ls].kind == IR_VAL_PARAM && ir_shape_numel(&g->values[ls].shape) == 4) {
    snap = calloc((size_t)g->n_values, sizeof *snap);
    if (!snap) abort();
    for (int v = 0; v < g->n_values; v++)
      if (v != ls && g->values[v].kind == IR_VAL_PARAM && g->values[v].data && is_target(g, v))
        snap[v] = fresh(ir_shape_numel(&g->values[v].shape), g->values[v].data);
  }
  ir_train_apply(g, vals);
  if (snap) {
    loss_scale_update(g, ls, snap);
    for (int v = 0; v < g->n_values; v++) free(snap[v]);
    free(snap);
  }
  return vals;
}
