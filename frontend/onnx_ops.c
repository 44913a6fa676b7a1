/* onnx_ops.c — one converter per ONNX operator: attributes read and checked against the
 * opset's defaults, operands made IR values or constants, one IR node added (or none: Identity
 * and Dropout are aliases, Constant and ops on constants fold at import).  Fusions that the
 * IR has ops for: Mul(x, Sigmoid(x)) -> swish, Mul(x, HardSigmoid(x; 1/6, 1/2)) -> hardswish.
 * Each converter returns 0 or -1 (x->d filled). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "onnx_int.h"

static const ir_shape *shape_of(ox_ctx *x, int v) { return &x->g->values[v].shape; }

/* One output, which later nodes may read; a second (optional) output must be unused. */
static int only_first_output(ox_ctx *x) {
  for (size_t i = 1; i < x->node->n_output; i++)
    if (x->node->output[i][0] && ox_uses(x, x->node->output[i]))
      return ox_err(x, "output %zu ('%s') is used, but cnnc computes only the first output of this operator", i,
                    x->node->output[i]);
  return 0;
}

/* ---- windows: Conv, MaxPool, AveragePool ------------------------------------------------ */
typedef struct window {
  int k[2], s[2], d[2], pad[4]; /* pad: top, left, bottom, right (IR order) */
} window;

/* kernel_shape (or kshape from the weight), strides, dilations, pads / auto_pad of a 2-D
 * window over input [N, C, H, W]. */
static int read_window(ox_ctx *x, const ir_shape *in, const int64_t *kshape, window *w) {
  int64_t v[8];
  int n;
  if (in->rank != 4)
    return ox_err(x, "cnnc imports 2-D windows over [N, C, H, W] inputs; this input has rank %d", in->rank);
  if (ox_attr_ints(x, "kernel_shape", 8, v, &n) < 0) return -1;
  if (!n && !kshape) return ox_err(x, "attribute 'kernel_shape' is required");
  if (n && n != 2) return ox_err(x, "attribute 'kernel_shape' has %d items; cnnc imports 2-D windows", n);
  for (int i = 0; i < 2; i++) {
    w->k[i] = (int)(n ? v[i] : kshape[i]);
    if ((n ? v[i] : kshape[i]) < 1 || (n ? v[i] : kshape[i]) > FE_MAX_K) return ox_err(x, "kernel size %lld is out of range (1 to %d)", (long long)(n ? v[i] : kshape[i]), FE_MAX_K);
    if (n && kshape && v[i] != kshape[i]) return ox_err(x, "attribute 'kernel_shape' does not match the weight's shape");
  }
  static const char *const names[] = {"strides", "dilations"};
  for (int a = 0; a < 2; a++) {
    if (ox_attr_ints(x, names[a], 8, v, &n) < 0) return -1;
    if (n && n != 2) return ox_err(x, "attribute '%s' has %d items (2 expected)", names[a], n);
    for (int i = 0; i < 2; i++) {
      int64_t t = n ? v[i] : 1;
      if (t < 1 || t > FE_MAX_K) return ox_err(x, "attribute '%s' item %d is %lld (1 to %d)", names[a], i, (long long)t, FE_MAX_K);
      (a ? w->d : w->s)[i] = (int)t;
    }
  }
  const char *ap;
  if (ox_attr_str(x, "auto_pad", "NOTSET", &ap) < 0 || ox_attr_ints(x, "pads", 8, v, &n) < 0) return -1;
  if (!strcmp(ap, "NOTSET")) {
    if (n && n != 4) return ox_err(x, "attribute 'pads' has %d items (4 expected: top, left, bottom, right)", n);
    for (int i = 0; i < 4; i++) {
      int64_t t = n ? v[i] : 0;
      if (t < 0 || t > FE_MAX_K) return ox_err(x, "attribute 'pads' item %d is %lld (0 to %d)", i, (long long)t, FE_MAX_K);
      w->pad[i] = (int)t;
    }
  } else if (!strcmp(ap, "VALID")) {
    memset(w->pad, 0, sizeof w->pad);
  } else if (!strcmp(ap, "SAME_UPPER") || !strcmp(ap, "SAME_LOWER")) {
    for (int i = 0; i < 2; i++) {
      int64_t len = in->dim[2 + i], out = (len + w->s[i] - 1) / w->s[i];
      int64_t total = (out - 1) * w->s[i] + (int64_t)(w->k[i] - 1) * w->d[i] + 1 - len;
      if (total < 0) total = 0;
      int64_t small = total / 2, big = total - small;
      int upper = ap[5] == 'U';
      w->pad[i] = (int)(upper ? small : big);
      w->pad[i + 2] = (int)(upper ? big : small);
    }
  } else {
    return ox_err(x, "attribute 'auto_pad' is '%s' (NOTSET, SAME_UPPER, SAME_LOWER or VALID)", ap);
  }
  return 0;
}

/* Adds a folded Pad of input 0 (see pad()) to window w. */
static void add_folded_pad(ox_ctx *x, window *w) {
  const ox_val *v = ox_find(x, x->node->input[0]);
  for (int i = 0; v && v->padded && i < 4; i++) w->pad[i] += v->pad[i];
}

static int conv(ox_ctx *x) {
  if (ox_check_attrs(x, "auto_pad,dilations,group,kernel_shape,pads,strides")) return -1;
  int in[3] = {ox_act(x, 0), -1, -1}, n_in = 2;
  if (in[0] < 0) return -1;
  const ox_const *w = ox_need_const(x, 1, "the weight"), *b = NULL;
  if (!w) return -1;
  if (w->rank != 4) return ox_err(x, "the weight has rank %d; cnnc imports 2-D convolutions (rank 4 weights)", w->rank);
  if (ox_has_input(x, 2) && !(b = ox_need_const(x, 2, "the bias"))) return -1;
  const ir_shape *xs = shape_of(x, in[0]);
  ir_attr a = {0};
  window win;
  if (read_window(x, xs, w->dims + 2, &win)) return -1;
  add_folded_pad(x, &win);
  int64_t group;
  if (ox_attr_int(x, "group", 1, &group) < 0) return -1;
  if (group < 1 || group > FE_MAX_CH || xs->dim[1] % group || w->dims[0] % group || w->dims[1] * group != xs->dim[1])
    return ox_err(x, "group %lld does not fit input channels %lld and weight [%lld, %lld, ...]", (long long)group,
                  (long long)xs->dim[1], (long long)w->dims[0], (long long)w->dims[1]);
  if (b && (b->rank != 1 || b->dims[0] != w->dims[0]))
    return ox_err(x, "the bias must have shape [%lld]", (long long)w->dims[0]);
  ir_conv2d_attr *ca = &a.conv2d;
  memcpy(ca->kernel, win.k, sizeof win.k);
  memcpy(ca->stride, win.s, sizeof win.s);
  memcpy(ca->dilation, win.d, sizeof win.d);
  memcpy(ca->pad, win.pad, sizeof win.pad);
  ca->groups = (int)group;
  if ((in[1] = ox_param(x, "weight", w, 1, 0, NULL)) < 0) return -1;
  if (b && (in[n_in++] = ox_param(x, "bias", b, 1, 0, NULL)) < 0) return -1;
  return ox_node(x, IR_OP_conv2d, in, n_in, &a);
}

static int pool(ox_ctx *x, ir_op op) {
  int avg = op == IR_OP_avgpool;
  if (ox_check_attrs(x, avg ? "auto_pad,ceil_mode,count_include_pad,kernel_shape,pads,strides,dilations"
                            : "auto_pad,ceil_mode,dilations,kernel_shape,pads,storage_order,strides"))
    return -1;
  int in = ox_act(x, 0);
  if (in < 0 || only_first_output(x)) return -1;
  window w;
  if (read_window(x, shape_of(x, in), NULL, &w)) return -1;
  if (w.d[0] != 1 || w.d[1] != 1) return ox_err(x, "dilated pooling is not supported");
  int64_t ceil_mode, cip, order;
  if (ox_attr_int(x, "ceil_mode", 0, &ceil_mode) < 0 || ox_attr_int(x, "count_include_pad", 0, &cip) < 0 ||
      ox_attr_int(x, "storage_order", 0, &order) < 0)
    return -1;
  const ox_val *src = ox_find(x, x->node->input[0]);
  if (src && src->padded) { /* the Pad's zeros are elements: counted, as count_include_pad counts pads */
    if (!avg) return ox_err(x, "internal: a Pad was folded into a max pool");
    if (!cip && (w.pad[0] || w.pad[1] || w.pad[2] || w.pad[3]))
      return ox_err(x, "a zero Pad before an AveragePool that pads itself without counting the pads is not supported");
    add_folded_pad(x, &w);
    cip = 1;
  }
  if (order) return ox_err(x, "attribute 'storage_order' 1 (column-major indices) is not supported");
  ir_attr a = {0};
  ir_pool_attr *pa = &a.maxpool;
  memcpy(pa->kernel, w.k, sizeof w.k);
  memcpy(pa->stride, w.s, sizeof w.s);
  memcpy(pa->pad, w.pad, sizeof w.pad);
  pa->ceil_mode = ceil_mode != 0;
  pa->count_include_pad = avg && cip != 0;
  return ox_node(x, op, &in, 1, &a);
}

/* Pad with zeros of the two spatial dims of an [N, C, H, W] tensor: an alias when it pads
 * nothing, else folded into its one reader when that is a Conv or an AveragePool (the window's
 * padding grows); other Pads are not supported. */
static int pad(ox_ctx *x) {
  if (ox_check_attrs(x, x->opset < 11 ? "mode,pads,value" : "mode")) return -1;
  int in = ox_act(x, 0);
  if (in < 0) return -1;
  const char *mode;
  if (ox_attr_str(x, "mode", "constant", &mode) < 0) return -1;
  if (strcmp(mode, "constant")) return ox_err(x, "mode '%s' is not supported (only constant zeros)", mode);
  int64_t p[8];
  int n = 0;
  double value = 0;
  if (x->opset < 11) {
    if (ox_attr_ints(x, "pads", 8, p, &n) < 0 || ox_attr_float(x, "value", 0, &value) < 0) return -1;
  } else {
    const ox_const *c = ox_need_const(x, 1, "pads");
    if (!c) return -1;
    if (!c->is_int || c->rank != 1 || c->numel > 8) return ox_err(x, "pads must be at most 8 integers");
    for (int64_t i = 0; i < c->numel; i++) p[n++] = c->i[i];
    if (ox_has_input(x, 2)) {
      const ox_const *v = ox_need_const(x, 2, "the constant value");
      if (!v) return -1;
      if (v->numel != 1) return ox_err(x, "the constant value must be one number");
      value = v->is_int ? (double)v->i[0] : v->f[0];
    }
    if (ox_has_input(x, 3)) return ox_err(x, "input 3 (axes) is not supported");
  }
  const ir_shape *s = shape_of(x, in);
  if (n != 2 * s->rank) return ox_err(x, "pads has %d items for a rank-%d input", n, s->rank);
  int any = 0;
  for (int i = 0; i < n; i++) {
    if (p[i] < 0) return ox_err(x, "negative pads (cropping) are not supported");
    any |= p[i] != 0;
  }
  if (!any) return ox_bind(x, x->node->output[0], in, NULL);
  if (value != 0) return ox_err(x, "padding with %g is not supported (only zeros)", value);
  if (s->rank != 4 || p[0] || p[1] || p[4] || p[5]) return ox_err(x, "only the spatial dims of [N, C, H, W] may be padded");
  const char *out = x->node->output[0];
  const Onnx__NodeProto *reader = NULL;
  int slot = -1;
  if (ox_uses(x, out) == 1)
    for (size_t k = (size_t)x->node_index + 1; k < x->graph->n_node && !reader; k++)
      for (size_t j = 0; j < x->graph->node[k]->n_input && !reader; j++)
        if (!strcmp(x->graph->node[k]->input[j], out)) reader = x->graph->node[k], slot = (int)j;
  if (!reader || slot != 0 || !reader->op_type || (strcmp(reader->op_type, "Conv") && strcmp(reader->op_type, "AveragePool")))
    return ox_err(x, "a Pad is supported only when its one reader is a Conv or an AveragePool (it is folded into their padding)");
  if (ox_bind(x, out, in, NULL)) return -1;
  ox_val *v = ox_find(x, out);
  v->padded = 1;
  v->pad[0] = (int)p[2], v->pad[1] = (int)p[3], v->pad[2] = (int)p[6], v->pad[3] = (int)p[7];
  return 0;
}

/* ---- normalisation ------------------------------------------------------------------------ */
static int batchnorm(ox_ctx *x) {
  if (ox_check_attrs(x, "epsilon,momentum,training_mode,spatial,is_test,consumed_inputs")) return -1;
  int in[5] = {ox_act(x, 0)};
  if (in[0] < 0 || only_first_output(x)) return -1;
  const ir_shape *xs = shape_of(x, in[0]);
  if (xs->rank < 2) return ox_err(x, "the input needs a channel dim (rank >= 2)");
  double eps, mom;
  int64_t tm, spatial;
  if (ox_attr_float(x, "epsilon", 1e-5, &eps) < 0 || ox_attr_float(x, "momentum", 0.9, &mom) < 0 ||
      ox_attr_int(x, "training_mode", 0, &tm) < 0 || ox_attr_int(x, "spatial", 1, &spatial) < 0)
    return -1;
  if (tm) return ox_err(x, "training_mode 1 (an export in training mode) is not supported; export in eval mode "
                           "and compile with --mode training to train");
  if (!spatial) return ox_err(x, "spatial 0 (per-element statistics) is not supported");
  if (!(eps > 0 && eps < 1)) return ox_err(x, "attribute 'epsilon' is %g (0 < epsilon < 1)", eps);
  if (!(mom >= 0 && mom <= 1)) return ox_err(x, "attribute 'momentum' is %g (0 to 1)", mom);
  static const char *const names[] = {"gamma", "beta", "running_mean", "running_var"};
  static const char *const what[] = {"the scale", "the bias", "the mean", "the variance"};
  for (int i = 0; i < 4; i++) {
    const ox_const *c = ox_need_const(x, i + 1, what[i]);
    if (!c) return -1;
    if (c->numel != xs->dim[1] || c->rank != 1)
      return ox_err(x, "%s has %lld values, one per channel (%lld) expected", what[i], (long long)c->numel,
                    (long long)xs->dim[1]);
    if ((in[i + 1] = ox_param(x, names[i], c, i < 2, 0, NULL)) < 0) return -1;
  }
  ir_attr a = {0};
  a.batchnorm.eps = (float)eps;
  a.batchnorm.momentum = (float)(1.0 - mom); /* ONNX: running = m*running + (1-m)*batch */
  a.batchnorm.training = x->training;
  return ox_node(x, IR_OP_batchnorm, in, 5, &a);
}

/* ---- element-wise ------------------------------------------------------------------------ */
static int unary(ox_ctx *x, ir_op op) {
  if (ox_check_attrs(x, "")) return -1;
  int in = ox_act(x, 0);
  return in < 0 ? -1 : ox_node(x, op, &in, 1, NULL);
}

/* Is the current node's output read once, by a Mul of it and the node's input?  Then the
 * node is not emitted and the Mul becomes swish (Sigmoid) or hardswish (HardSigmoid). */
static int gate_of_mul(ox_ctx *x) {
  const char *out = x->node->output[0], *src = x->node->input[0];
  if (ox_uses(x, out) != 1) return 0;
  for (size_t k = (size_t)x->node_index + 1; k < x->graph->n_node; k++) {
    const Onnx__NodeProto *p = x->graph->node[k];
    int reads = 0;
    for (size_t j = 0; j < p->n_input; j++) reads |= !strcmp(p->input[j], out);
    if (!reads) continue;
    return p->op_type && !strcmp(p->op_type, "Mul") && p->n_input == 2 &&
           ((!strcmp(p->input[0], src) && !strcmp(p->input[1], out)) ||
            (!strcmp(p->input[1], src) && !strcmp(p->input[0], out)));
  }
  return 0;
}

static int fold_gate(ox_ctx *x, int in, ir_op op) {
  const char *out = x->node->output[0];
  if (ox_bind(x, out, -1, NULL)) return -1;
  ox_find(x, out)->swish_of = in + 1;
  ox_find(x, out)->gate = op;
  return 0;
}

static int sigmoid(ox_ctx *x) {
  if (ox_check_attrs(x, "")) return -1;
  int in = ox_act(x, 0);
  if (in < 0) return -1;
  if (gate_of_mul(x)) return fold_gate(x, in, IR_OP_swish);
  return ox_node(x, IR_OP_sigmoid, &in, 1, NULL);
}

static int hardsigmoid(ox_ctx *x) {
  if (ox_check_attrs(x, "alpha,beta,consumed_inputs")) return -1;
  int in = ox_act(x, 0);
  double alpha, beta;
  if (in < 0 || ox_attr_float(x, "alpha", 0.2, &alpha) < 0 || ox_attr_float(x, "beta", 0.5, &beta) < 0) return -1;
  /* x * HardSigmoid(x; 1/6, 1/2) is hardswish (how torch.onnx exports nn.Hardswish at opset < 14) */
  if (fabs(alpha - 1.0 / 6.0) < 1e-7 && beta == 0.5 && gate_of_mul(x)) return fold_gate(x, in, IR_OP_hardswish);
  ir_attr a = {0};
  a.hardsigmoid.alpha = (float)alpha;
  a.hardsigmoid.beta = (float)beta;
  return ox_node(x, IR_OP_hardsigmoid, &in, 1, &a);
}

/* Clip: bounds are attributes before opset 11, optional constant inputs from 11. */
static int clip(ox_ctx *x) {
  if (ox_check_attrs(x, x->opset < 11 ? "min,max,consumed_inputs" : "")) return -1;
  int in = ox_act(x, 0);
  if (in < 0) return -1;
  double b[2] = {-INFINITY, INFINITY};
  for (int i = 0; i < 2; i++) {
    if (x->opset < 11) {
      if (ox_attr_float(x, i ? "max" : "min", b[i], &b[i]) < 0) return -1;
    } else if (ox_has_input(x, i + 1)) {
      const ox_const *c = ox_need_const(x, i + 1, i ? "max" : "min");
      if (!c) return -1;
      if (c->numel != 1) return ox_err(x, "input %d (%s) must be a single value", i + 1, i ? "max" : "min");
      b[i] = c->is_int ? (double)c->i[0] : c->f[0];
    }
  }
  if (!(b[0] <= b[1])) return ox_err(x, "min (%g) exceeds max (%g)", b[0], b[1]);
  ir_attr a = {0};
  a.clip.lo = (float)b[0];
  a.clip.hi = (float)b[1];
  return ox_node(x, IR_OP_clip, &in, 1, &a);
}

/* Add and Mul: IR broadcasting goes from in[1] to in[0], so the larger operand comes first.
 * Before opset 7 broadcasting was explicit (broadcast=1) and aligned B at attribute axis
 * (default: B's dims are A's last dims): a constant B is given trailing 1s to match. */
static int binary(ox_ctx *x, ir_op op) {
  if (ox_check_attrs(x, x->opset < 7 ? "broadcast,axis,consumed_inputs" : "")) return -1;
  if (x->node->n_input != 2) return ox_err(x, "takes 2 inputs (got %zu)", x->node->n_input);
  ox_val *u = ox_input(x, 0), *v = ox_input(x, 1);
  if (!u || !v) return -1;
  if (op == IR_OP_mul && (u->swish_of || v->swish_of)) { /* Mul(x, Sigmoid(x)): see gate_of_mul() */
    const ox_val *gate = u->swish_of ? u : v;
    int in = gate->swish_of - 1;
    return ox_node(x, (ir_op)gate->gate, &in, 1, NULL);
  }
  int a = ox_act(x, 0);
  if (a < 0) return -1;
  int64_t bc, axis;
  if (ox_attr_int(x, "broadcast", 0, &bc) < 0 || ox_attr_int(x, "axis", -1, &axis) < 0) return -1;
  int b;
  if (x->opset < 7 && bc && ox_attr(x, "axis")) {
    const ox_const *c = ox_need_const(x, 1, "B broadcast at an axis");
    const ir_shape *as = shape_of(x, a);
    if (!c) return -1;
    if (axis < 0) axis += as->rank;
    if (axis < 0 || axis + c->rank > as->rank) return ox_err(x, "axis %lld does not fit B's rank %d in A's rank %d", (long long)axis, c->rank, as->rank);
    int64_t dims[IR_MAX_RANK];
    int r = as->rank - (int)axis;
    for (int i = 0; i < r; i++) dims[i] = i < c->rank ? c->dims[i] : 1;
    if ((b = ox_param(x, "const1", c, 0, r, dims)) < 0) return -1;
  } else if ((b = ox_act(x, 1)) < 0) {
    return -1;
  }
  if (x->opset < 7 && !bc && !ir_shape_eq(shape_of(x, a), shape_of(x, b)))
    return ox_err(x, "the operands' shapes differ but attribute 'broadcast' is not 1");
  if (ir_shape_numel(shape_of(x, a)) < ir_shape_numel(shape_of(x, b)) ||
      (x->g->values[a].kind == IR_VAL_PARAM && x->g->values[b].kind != IR_VAL_PARAM)) {
    int t = a;
    a = b;
    b = t;
  }
  int in[2] = {a, b};
  return ox_node(x, op, in, 2, NULL);
}

/* ---- dense ------------------------------------------------------------------------------- */
/* y = x W^T + b with W [Out, In] (the IR's layout). */
static int dense(ox_ctx *x, int xin, const ox_const *w, int trans_b, double alpha, const ox_const *c, double beta) {
  const ir_shape *xs = shape_of(x, xin);
  if (xs->rank != 2) return ox_err(x, "input A must be [N, K] (rank 2); it has rank %d", xs->rank);
  if (w->rank != 2) return ox_err(x, "input B must be a rank-2 constant");
  int64_t K = trans_b ? w->dims[1] : w->dims[0], N = trans_b ? w->dims[0] : w->dims[1];
  if (K != xs->dim[1])
    return ox_err(x, "A is [%lld, %lld] but B gives K = %lld", (long long)xs->dim[0], (long long)xs->dim[1], (long long)K);
  if (N < 1 || N > FE_MAX_UNITS) return ox_err(x, "%lld output units (1 to %d)", (long long)N, FE_MAX_UNITS);
  int64_t dims[2] = {N, K};
  ox_const *wt = ox_const_new(x, 2, dims, 0);
  for (int64_t o = 0; o < N; o++)
    for (int64_t k = 0; k < K; k++) {
      int64_t src = trans_b ? o * K + k : k * N + o;
      wt->f[o * K + k] = (float)(alpha * (w->is_int ? (double)w->i[src] : w->f[src]));
    }
  ir_attr a = {0};
  a.dense.units = (int)N;
  int in[3] = {xin, ox_param(x, "weight", wt, 1, 0, NULL), -1}, n_in = 2;
  if (in[1] < 0) return -1;
  if (c) {
    int ok = c->numel == N || c->numel == 1;
    if (!ok || c->rank > 2 || (c->rank == 2 && c->dims[0] != 1))
      return ox_err(x, "input C must have shape [%lld], [1, %lld] or be a scalar (batch-dependent C is not supported)",
                    (long long)N, (long long)N);
    ox_const *bias = ox_const_new(x, 1, &N, 0);
    for (int64_t o = 0; o < N; o++) {
      int64_t s = c->numel == 1 ? 0 : o;
      bias->f[o] = (float)(beta * (c->is_int ? (double)c->i[s] : c->f[s]));
    }
    if ((in[n_in++] = ox_param(x, "bias", bias, 1, 0, NULL)) < 0) return -1;
  }
  return ox_node(x, IR_OP_dense, in, n_in, &a);
}

static int gemm(ox_ctx *x) {
  if (ox_check_attrs(x, x->opset < 7 ? "alpha,beta,transA,transB,broadcast" : "alpha,beta,transA,transB")) return -1;
  double alpha, beta;
  int64_t ta, tb;
  if (ox_attr_float(x, "alpha", 1, &alpha) < 0 || ox_attr_float(x, "beta", 1, &beta) < 0 ||
      ox_attr_int(x, "transA", 0, &ta) < 0 || ox_attr_int(x, "transB", 0, &tb) < 0)
    return -1;
  if (ta) return ox_err(x, "transA 1 is not supported (A must be [N, K] activations)");
  int a = ox_act(x, 0);
  if (a < 0) return -1;
  const ox_const *b = ox_need_const(x, 1, "the weight B"), *c = NULL;
  if (!b || (ox_has_input(x, 2) && !(c = ox_need_const(x, 2, "the bias C")))) return -1;
  return dense(x, a, b, tb != 0, alpha, c, beta);
}

static int matmul(ox_ctx *x) {
  if (ox_check_attrs(x, "")) return -1;
  int a = ox_act(x, 0);
  if (a < 0) return -1;
  const ox_const *b = ox_need_const(x, 1, "the weight B");
  return b ? dense(x, a, b, 0, 1.0, NULL, 0) : -1;
}

/* ---- shape -------------------------------------------------------------------------------- */
static int reshape_to(ox_ctx *x, int in, const int64_t *dims, int rank) {
  if (rank < 1 || rank > IR_MAX_RANK) return ox_err(x, "the result would have rank %d (1 to %d)", rank, IR_MAX_RANK);
  if (dims[0] != x->g->batch)
    return ox_err(x, "the result's first dim is %lld, not the batch (%d): cnnc keeps the batch in dim 0",
                  (long long)dims[0], x->g->batch);
  const ir_shape *s = shape_of(x, in);
  if (s->rank == rank && !memcmp(s->dim, dims, (size_t)rank * sizeof *dims))
    return ox_bind(x, x->node->output[0], in, NULL); /* the same shape: an alias */
  ir_attr a = {0};
  a.reshape.shape.rank = rank;
  for (int i = 0; i < rank; i++) a.reshape.shape.dim[i] = dims[i];
  return ox_node(x, IR_OP_reshape, &in, 1, &a);
}

static int flatten(ox_ctx *x) {
  if (ox_check_attrs(x, "axis")) return -1;
  int in = ox_act(x, 0);
  if (in < 0) return -1;
  const ir_shape *s = shape_of(x, in);
  int64_t axis;
  if (ox_attr_int(x, "axis", 1, &axis) < 0) return -1;
  if (axis < 0) axis += s->rank;
  if (axis != 1) return ox_err(x, "axis %lld is not supported (cnnc keeps the batch apart: axis 1)", (long long)axis);
  int64_t dims[2] = {s->dim[0], ir_shape_numel(s) / (s->dim[0] ? s->dim[0] : 1)};
  return reshape_to(x, in, dims, 2);
}

static int reshape(ox_ctx *x) {
  if (ox_check_attrs(x, x->opset < 5 ? "shape" : "allowzero")) return -1;
  int in = ox_act(x, 0);
  if (in < 0) return -1;
  const ox_const *sc = ox_need_const(x, 1, "the shape");
  if (!sc) return -1;
  int64_t allowzero;
  if (ox_attr_int(x, "allowzero", 0, &allowzero) < 0) return -1;
  if (!sc->is_int || sc->rank != 1 || sc->numel < 1 || sc->numel > IR_MAX_RANK)
    return ox_err(x, "the shape must be a list of 1 to %d integers", IR_MAX_RANK);
  const ir_shape *s = shape_of(x, in);
  int64_t dims[IR_MAX_RANK], known = 1, numel = ir_shape_numel(s);
  int infer = -1, rank = (int)sc->numel;
  for (int i = 0; i < rank; i++) {
    int64_t d = sc->i[i];
    if (d == 0 && !allowzero) {
      if (i >= s->rank) return ox_err(x, "shape item %d is 0 (copy) but the input has rank %d", i, s->rank);
      d = s->dim[i];
    }
    if (d == -1) {
      if (infer >= 0) return ox_err(x, "the shape has more than one -1");
      infer = i;
      dims[i] = 1;
      continue;
    }
    if (d < 1 || d > ((int64_t)1 << 40)) return ox_err(x, "shape item %d is %lld", i, (long long)d);
    dims[i] = d;
    known *= d;
  }
  if (infer >= 0) {
    if (numel % known) return ox_err(x, "cannot reshape %lld elements with the known dims' product %lld", (long long)numel, (long long)known);
    dims[infer] = numel / known;
  } else if (known != numel) {
    return ox_err(x, "the shape has %lld elements, the input %lld", (long long)known, (long long)numel);
  }
  return reshape_to(x, in, dims, rank);
}

static int softmax(ox_ctx *x) {
  if (ox_check_attrs(x, "axis")) return -1;
  int in = ox_act(x, 0);
  if (in < 0) return -1;
  const ir_shape *s = shape_of(x, in);
  int64_t axis;
  if (ox_attr_int(x, "axis", x->opset >= 13 ? -1 : 1, &axis) < 0) return -1;
  if (axis < 0) axis += s->rank;
  if (axis < 0 || axis >= s->rank) return ox_err(x, "axis is out of range for rank %d", s->rank);
  /* Before opset 13 the input is coerced to 2-D at axis: the same as the last axis when
   * axis is the last dim; from 13 the axis itself.  cnnc's softmax runs over the last axis. */
  if (axis != s->rank - 1)
    return ox_err(x, "softmax over axis %lld of a rank-%d tensor is not supported (only the last axis)", (long long)axis,
                  s->rank);
  return ox_node(x, IR_OP_softmax, &in, 1, NULL);
}

/* ---- aliases and constants ------------------------------------------------------------- */
static int alias(ox_ctx *x, const char *attrs) {
  if (ox_check_attrs(x, attrs) || only_first_output(x)) return -1;
  ox_val *v = ox_input(x, 0);
  if (!v) return -1;
  if (!strcmp(x->node->op_type, "Dropout") && ox_has_input(x, 2)) {
    const ox_val *t = ox_input(x, 2);
    if (!t) return -1;
    if (!t->c) return ox_err(x, "input 2 (training_mode) must be a constant");
    if ((t->c->is_int ? t->c->i[0] != 0 : t->c->f[0] != 0))
      return ox_err(x, "training_mode true is not supported (export in eval mode)");
  }
  return ox_bind(x, x->node->output[0], v->ir, v->c);
}

static int constant(ox_ctx *x) {
  if (ox_check_attrs(x, "value,value_float,value_floats,value_int,value_ints,sparse_value,value_string,value_strings"))
    return -1;
  if (x->node->n_attribute != 1) return ox_err(x, "needs exactly one value attribute (got %zu)", x->node->n_attribute);
  const Onnx__AttributeProto *at = x->node->attribute[0];
  const char *nm = at->name;
  ox_const *c = NULL;
  if (!strcmp(nm, "value")) {
    if (!at->t) return ox_err(x, "attribute 'value' holds no tensor");
    c = ox_tensor(x, at->t, "constant");
  } else if (!strcmp(nm, "value_float")) {
    c = ox_const_new(x, 0, NULL, 0);
    c->f[0] = at->f;
  } else if (!strcmp(nm, "value_int")) {
    c = ox_const_new(x, 0, NULL, 1);
    c->i[0] = at->i;
  } else if (!strcmp(nm, "value_floats") || !strcmp(nm, "value_ints")) {
    int isint = nm[6] == 'i';
    int64_t n = isint ? (int64_t)at->n_ints : (int64_t)at->n_floats;
    c = ox_const_new(x, 1, &n, isint);
    for (int64_t k = 0; k < n; k++) {
      if (isint) c->i[k] = at->ints[k];
      else c->f[k] = at->floats[k];
    }
  } else {
    return ox_err(x, "attribute '%s' (sparse or string constants) is not supported", nm);
  }
  return c ? ox_bind(x, x->node->output[0], -1, c) : -1;
}

/* ---- shape arithmetic on constants (folded at import) --------------------------------------
 * Exports compute shapes at run time (Shape -> Gather -> Unsqueeze -> Concat -> Reshape); cnnc's
 * shapes are static, so these fold into constants.  An op of these kinds on an activation is
 * not supported (Concat of activations, below, is the exception to come). */
static int shape_op(ox_ctx *x) {
  if (ox_check_attrs(x, "start,end")) return -1;
  ox_val *v = ox_input(x, 0);
  if (!v) return -1;
  int rank = v->c ? v->c->rank : shape_of(x, v->ir)->rank;
  int64_t start, end;
  if (ox_attr_int(x, "start", 0, &start) < 0 || ox_attr_int(x, "end", rank, &end) < 0) return -1;
  if (start < 0) start += rank;
  if (end < 0) end += rank;
  if (start < 0) start = 0;
  if (end > rank) end = rank;
  int64_t n = end > start ? end - start : 0;
  ox_const *c = ox_const_new(x, 1, &n, 1);
  for (int64_t i = 0; i < n; i++) c->i[i] = v->c ? v->c->dims[start + i] : shape_of(x, v->ir)->dim[start + i];
  return ox_bind(x, x->node->output[0], -1, c);
}

static int gather(ox_ctx *x) {
  if (ox_check_attrs(x, "axis")) return -1;
  const ox_const *d = ox_need_const(x, 0, "the data"), *ix = d ? ox_need_const(x, 1, "the indices") : NULL;
  int64_t axis;
  if (!ix || ox_attr_int(x, "axis", 0, &axis) < 0) return -1;
  if (axis != 0 || d->rank != 1 || !ix->is_int || ix->rank > 1)
    return ox_err(x, "only Gather of a 1-D constant along axis 0 with scalar or 1-D indices is supported");
  ox_const *c = ox_const_new(x, ix->rank, ix->dims, d->is_int);
  for (int64_t i = 0; i < ix->numel; i++) {
    int64_t k = ix->i[i] < 0 ? ix->i[i] + d->numel : ix->i[i];
    if (k < 0 || k >= d->numel) return ox_err(x, "index %lld is out of range for %lld values", (long long)ix->i[i], (long long)d->numel);
    if (d->is_int) c->i[i] = d->i[k];
    else c->f[i] = d->f[k];
  }
  return ox_bind(x, x->node->output[0], -1, c);
}

/* Unsqueeze and Squeeze of a constant: the data stay, the dims change. */
static int squeeze(ox_ctx *x, int un) {
  if (ox_check_attrs(x, x->opset < 13 ? "axes" : "")) return -1;
  const ox_const *d = ox_need_const(x, 0, "the data");
  if (!d) return -1;
  int64_t axes[OX_MAX_RANK];
  int n = 0;
  if (x->opset < 13) {
    if (ox_attr_ints(x, "axes", OX_MAX_RANK, axes, &n) < 0) return -1;
  } else if (ox_has_input(x, 1)) {
    const ox_const *a = ox_need_const(x, 1, "the axes");
    if (!a) return -1;
    if (!a->is_int || a->numel > OX_MAX_RANK) return ox_err(x, "the axes must be at most %d integers", OX_MAX_RANK);
    for (int64_t i = 0; i < a->numel; i++) axes[n++] = a->i[i];
  }
  int out_rank = un ? d->rank + n : d->rank;
  if (un && !n) return ox_err(x, "Unsqueeze needs axes");
  if (out_rank > OX_MAX_RANK) return ox_err(x, "the result would have rank %d", out_rank);
  unsigned char mark[OX_MAX_RANK] = {0};
  for (int i = 0; i < n; i++) {
    int64_t a = axes[i] < 0 ? axes[i] + (un ? out_rank : d->rank) : axes[i];
    if (a < 0 || a >= (un ? out_rank : d->rank) || mark[a]) return ox_err(x, "axis %lld is out of range or repeated", (long long)axes[i]);
    if (!un && d->dims[a] != 1) return ox_err(x, "axis %lld has size %lld, not 1", (long long)axes[i], (long long)d->dims[a]);
    mark[a] = 1;
  }
  int64_t dims[OX_MAX_RANK];
  int r = 0;
  for (int i = 0, j = 0; i < (un ? out_rank : d->rank); i++) {
    if (un) dims[r++] = mark[i] ? 1 : d->dims[j++];
    else if (!(n ? mark[i] : d->dims[i] == 1)) dims[r++] = d->dims[i];
  }
  ox_const *c = ox_const_new(x, r, dims, d->is_int);
  memcpy(d->is_int ? (void *)c->i : (void *)c->f, d->is_int ? (void *)d->i : (void *)d->f,
         (size_t)d->numel * (d->is_int ? sizeof *d->i : sizeof *d->f));
  return ox_bind(x, x->node->output[0], -1, c);
}
static int op_unsqueeze(ox_ctx *x) { return squeeze(x, 1); }
static int op_squeeze(ox_ctx *x) { return squeeze(x, 0); }

static int cast(ox_ctx *x) {
  if (ox_check_attrs(x, "to")) return -1;
  const ox_const *d = ox_need_const(x, 0, "the data (Cast of activations is not supported)");
  int64_t to;
  if (!d || ox_attr_int(x, "to", 0, &to) < 0) return -1;
  int is_int;
  switch (to) {
  case OX_FLOAT: case OX_DOUBLE: is_int = 0; break;
  case OX_INT64: case OX_INT32: case OX_INT8: case OX_UINT8: is_int = 1; break;
  default: return ox_err(x, "Cast to type %lld is not supported", (long long)to);
  }
  ox_const *c = ox_const_new(x, d->rank, d->dims, is_int);
  for (int64_t i = 0; i < d->numel; i++) {
    if (is_int) {
      double v = d->is_int ? (double)d->i[i] : d->f[i];
      if (!(v > -9.2e18 && v < 9.2e18)) return ox_err(x, "value %g does not fit an integer", v);
      c->i[i] = (int64_t)v; /* truncation toward zero, as ONNX casts */
    } else {
      c->f[i] = d->is_int ? (float)d->i[i] : d->f[i];
    }
  }
  return ox_bind(x, x->node->output[0], -1, c);
}

/* Concat of constants along an axis. */
static int concat_const(ox_ctx *x, int64_t axis) {
  int n = (int)x->node->n_input;
  const ox_const *c0 = ox_need_const(x, 0, "a concatenated value");
  if (!c0) return -1;
  if (axis < 0) axis += c0->rank;
  if (axis < 0 || axis >= c0->rank) return ox_err(x, "axis is out of range for rank %d", c0->rank);
  int64_t dims[OX_MAX_RANK];
  memcpy(dims, c0->dims, sizeof dims);
  dims[axis] = 0;
  int is_int = 1;
  for (int i = 0; i < n; i++) {
    const ox_const *c = ox_need_const(x, i, "a concatenated value");
    if (!c) return -1;
    if (c->rank != c0->rank) return ox_err(x, "input %d has rank %d, input 0 rank %d", i, c->rank, c0->rank);
    for (int k = 0; k < c->rank; k++)
      if (k != axis && c->dims[k] != c0->dims[k]) return ox_err(x, "input %d's dim %d differs from input 0's", i, k);
    dims[axis] += c->dims[axis];
    is_int &= c->is_int;
  }
  ox_const *r = ox_const_new(x, c0->rank, dims, is_int);
  int64_t outer = 1, inner = 1;
  for (int k = 0; k < axis; k++) outer *= dims[k];
  for (int k = (int)axis + 1; k < c0->rank; k++) inner *= dims[k];
  int64_t at = 0;
  for (int64_t o = 0; o < outer; o++)
    for (int i = 0; i < n; i++) {
      const ox_const *c = ox_find(x, x->node->input[i])->c;
      int64_t len = c->dims[axis] * inner;
      for (int64_t k = 0; k < len; k++, at++) {
        int64_t s = o * len + k;
        if (is_int) r->i[at] = c->i[s];
        else r->f[at] = c->is_int ? (float)c->i[s] : c->f[s];
      }
    }
  return ox_bind(x, x->node->output[0], -1, r);
}

/* An IR node of the current ONNX node that is not its result (a part of a chain or one of
 * several outputs): named "<layer>/<suffix>".  Returns the value id or -1. */
static int part_node(ox_ctx *x, const char *suffix, ir_op op, const int *in, int n_in, const ir_attr *a) {
  ir_diag sub = {0};
  const char *name = ir_fmt(x->g->arena, "%s/%s", ox_layer_name(x), suffix);
  int v = ir_add_node(x->g, op, name, (ir_loc){x->gfile, 0, 0}, in, n_in, a, &sub);
  return v < 0 ? ox_err(x, "%s", sub.msg) : v;
}

/* Concat of activations along a dim past the batch: one IR concat of up to IR_MAX_IN inputs,
 * a chain of them for more (the running result is the first input of the next link). */
static int concat(ox_ctx *x) {
  if (ox_check_attrs(x, "axis")) return -1;
  int64_t axis;
  if (ox_attr_int(x, x->opset < 4 ? "axis" : "axis", 1, &axis) < 0) return -1;
  int n = (int)x->node->n_input, all_const = 1;
  if (n < 1) return ox_err(x, "needs at least one input");
  for (int i = 0; i < n; i++) {
    ox_val *v = ox_input(x, i);
    if (!v) return -1;
    all_const &= v->c != NULL && v->ir < 0;
  }
  if (all_const) return concat_const(x, axis);
  int first = ox_act(x, 0);
  if (first < 0) return -1;
  int rank = shape_of(x, first)->rank;
  if (axis < 0) axis += rank;
  if (axis < 1 || axis >= rank)
    return ox_err(x, "axis %lld: cnnc concatenates along a dim past the batch (1 to %d)", (long long)axis, rank - 1);
  ir_attr a = {0};
  a.concat.axis = (int)axis;
  if (n == 1) return ox_bind(x, x->node->output[0], first, NULL);
  int acc = first, i = 1, link = 0;
  while (i < n) {
    int in[IR_MAX_IN], k = 0;
    in[k++] = acc;
    while (k < IR_MAX_IN && i < n) {
      if ((in[k++] = ox_act(x, i++)) < 0) return -1;
    }
    if (i == n) return ox_node(x, IR_OP_concat, in, k, &a);
    if ((acc = part_node(x, ir_fmt(x->a, "part%d", link++), IR_OP_concat, in, k, &a)) < 0) return -1;
  }
  return -1; /* not reached */
}

/* Slice: starts/ends/axes/steps as constant inputs (opset >= 10) or attributes; step 1 along
 * dims past the batch (a chain of IR slices for several axes). */
static int slice(ox_ctx *x) {
  if (ox_check_attrs(x, x->opset < 10 ? "starts,ends,axes" : "")) return -1;
  int in = ox_act(x, 0);
  if (in < 0) return -1;
  int64_t st[IR_MAX_RANK], en[IR_MAX_RANK], ax[IR_MAX_RANK], sp[IR_MAX_RANK];
  int n = 0, na = -1, ns = -1;
  if (x->opset < 10) {
    int ne;
    if (ox_attr_ints(x, "starts", IR_MAX_RANK, st, &n) < 0 || ox_attr_ints(x, "ends", IR_MAX_RANK, en, &ne) < 0 ||
        ox_attr_ints(x, "axes", IR_MAX_RANK, ax, &na) < 0)
      return -1;
    if (!ox_attr(x, "axes")) na = -1;
    if (ne != n) return ox_err(x, "starts and ends differ in length");
  } else {
    int64_t *dst[4] = {st, en, ax, sp};
    int *cnt[4] = {&n, NULL, &na, &ns};
    static const char *const what[] = {"starts", "ends", "axes", "steps"};
    for (int k = 0; k < 4; k++) {
      if (k >= 2 && !ox_has_input(x, k + 1)) continue;
      const ox_const *c = ox_need_const(x, k + 1, what[k]);
      if (!c) return -1;
      if (!c->is_int || c->rank != 1 || c->numel > IR_MAX_RANK)
        return ox_err(x, "%s must be a list of at most %d integers", what[k], IR_MAX_RANK);
      for (int64_t i = 0; i < c->numel; i++) dst[k][i] = c->i[i];
      if (cnt[k]) *cnt[k] = (int)c->numel;
      else if (c->numel != n) return ox_err(x, "starts and ends differ in length");
    }
  }
  if ((na >= 0 && na != n) || (ns >= 0 && ns != n)) return ox_err(x, "starts, axes and steps differ in length");
  int cur = in;
  const ir_shape *s0 = shape_of(x, in);
  int rank = s0->rank, last = -1;
  for (int i = 0; i < n; i++) last = i;
  if (n == 0) return ox_bind(x, x->node->output[0], in, NULL);
  for (int i = 0; i < n; i++) {
    int64_t a = na >= 0 ? ax[i] : i, step = ns >= 0 ? sp[i] : 1;
    if (a < 0) a += rank;
    if (a < 0 || a >= rank) return ox_err(x, "axis %lld is out of range", (long long)(na >= 0 ? ax[i] : i));
    if (step != 1) return ox_err(x, "step %lld is not supported (only 1)", (long long)step);
    int64_t dim = shape_of(x, cur)->dim[a], b = st[i], e = en[i];
    if (b < 0) b += dim;
    if (e < 0) e += dim;
    b = b < 0 ? 0 : b > dim ? dim : b;
    e = e < 0 ? 0 : e > dim ? dim : e;
    if (e <= b) return ox_err(x, "the slice of axis %lld is empty", (long long)a);
    if (a == 0) {
      if (b != 0 || e != dim) return ox_err(x, "slicing the batch (axis 0) is not supported");
      if (i == last) return ox_bind(x, x->node->output[0], cur, NULL);
      continue;
    }
    if (b == 0 && e == dim) {
      if (i == last) return ox_bind(x, x->node->output[0], cur, NULL);
      continue;
    }
    ir_attr at = {0};
    at.slice = (ir_slice_attr){(int)a, b, e - b};
    if (i == last) return ox_node(x, IR_OP_slice, &cur, 1, &at);
    if ((cur = part_node(x, ir_fmt(x->a, "axis%lld", (long long)a), IR_OP_slice, &cur, 1, &at)) < 0) return -1;
  }
  return -1; /* not reached */
}

/* Split into several outputs along a dim past the batch: one IR slice per output. */
static int split(ox_ctx *x) {
  if (ox_check_attrs(x, x->opset < 13 ? "axis,split" : "axis")) return -1;
  int in = ox_act(x, 0);
  if (in < 0) return -1;
  int64_t axis, parts[IR_MAX_IN * 8];
  int np = 0, nout = (int)x->node->n_output;
  if (ox_attr_int(x, "axis", 0, &axis) < 0) return -1;
  const ir_shape *s = shape_of(x, in);
  if (axis < 0) axis += s->rank;
  if (axis < 1 || axis >= s->rank) return ox_err(x, "axis %lld: cnnc splits along a dim past the batch", (long long)axis);
  if (nout < 1 || nout > IR_MAX_IN * 8) return ox_err(x, "%d outputs (1 to %d)", nout, IR_MAX_IN * 8);
  if (x->opset < 13) {
    if (ox_attr_ints(x, "split", IR_MAX_IN * 8, parts, &np) < 0) return -1;
  } else if (ox_has_input(x, 1)) {
    const ox_const *c = ox_need_const(x, 1, "split");
    if (!c) return -1;
    if (!c->is_int || c->rank != 1 || c->numel > IR_MAX_IN * 8) return ox_err(x, "split must be a list of integers");
    for (int64_t i = 0; i < c->numel; i++) parts[np++] = c->i[i];
  }
  int64_t dim = s->dim[axis];
  if (!np) {
    if (dim % nout) return ox_err(x, "dim %lld of size %lld does not split into %d equal parts", (long long)axis, (long long)dim, nout);
    for (int i = 0; i < nout; i++) parts[np++] = dim / nout;
  }
  if (np != nout) return ox_err(x, "split has %d sizes for %d outputs", np, nout);
  int64_t off = 0;
  for (int i = 0; i < np; i++) {
    if (parts[i] < 1) return ox_err(x, "split size %d is %lld (empty outputs are not supported)", i, (long long)parts[i]);
    off += parts[i];
  }
  if (off != dim) return ox_err(x, "split sizes add up to %lld, the dim is %lld", (long long)off, (long long)dim);
  off = 0;
  for (int i = 0; i < np; i++) {
    ir_attr a = {0};
    a.slice = (ir_slice_attr){(int)axis, off, parts[i]};
    off += parts[i];
    if (!x->node->output[i][0]) continue;
    int v = i == 0 && np == 1 ? in : part_node(x, ir_fmt(x->a, "out%d", i), IR_OP_slice, &in, 1, &a);
    if (v < 0 || ox_bind(x, x->node->output[i], v, NULL)) return -1;
  }
  return 0;
}

/* Add, Sub, Mul, Div of two constants (same shape, or one of them a single value). */
static int fold_binary(ox_ctx *x, char op) {
  const ox_const *a = ox_find(x, x->node->input[0])->c, *b = ox_find(x, x->node->input[1])->c;
  const ox_const *big = a->numel >= b->numel ? a : b;
  if (a->numel != b->numel && a->numel != 1 && b->numel != 1)
    return ox_err(x, "folding this op on constants of different shapes is not supported");
  int is_int = a->is_int && b->is_int;
  ox_const *r = ox_const_new(x, big->rank, big->dims, is_int);
  for (int64_t i = 0; i < big->numel; i++) {
    int64_t ia = a->numel == 1 ? 0 : i, ib = b->numel == 1 ? 0 : i;
    if (is_int) {
      int64_t u = a->i[ia], v = b->i[ib];
      if (op == '/' && v == 0) return ox_err(x, "integer division by zero");
      r->i[i] = op == '+' ? u + v : op == '-' ? u - v : op == '*' ? u * v : u / v;
    } else {
      double u = a->is_int ? (double)a->i[ia] : a->f[ia], v = b->is_int ? (double)b->i[ib] : b->f[ib];
      r->f[i] = (float)(op == '+' ? u + v : op == '-' ? u - v : op == '*' ? u * v : u / v);
    }
  }
  return ox_bind(x, x->node->output[0], -1, r);
}

/* Both operands constant: fold; else the IR op (Add, Mul) or unsupported (Sub, Div). */
static int arith(ox_ctx *x, char op) {
  if (x->node->n_input != 2) return ox_err(x, "takes 2 inputs (got %zu)", x->node->n_input);
  ox_val *u = ox_input(x, 0), *v = u ? ox_input(x, 1) : NULL;
  if (!v) return -1;
  if (u->c && v->c) {
    if (ox_check_attrs(x, x->opset < 7 ? "broadcast,axis,consumed_inputs" : "")) return -1;
    return fold_binary(x, op);
  }
  if (op == '+') return binary(x, IR_OP_add);
  if (op == '*') return binary(x, IR_OP_mul);
  return ox_err(x, "%s of activations is not supported yet (only of constants)", op == '-' ? "Sub" : "Div");
}
static int op_add(ox_ctx *x) { return arith(x, '+'); }
static int op_sub(ox_ctx *x) { return arith(x, '-'); }
static int op_mul(ox_ctx *x) { return arith(x, '*'); }
static int op_div(ox_ctx *x) { return arith(x, '/'); }

/* ---- dispatch ---------------------------------------------------------------------------- */
typedef struct ox_op { const char *name; int (*fn)(ox_ctx *); } ox_op;

static int op_relu(ox_ctx *x) { return unary(x, IR_OP_relu); }
static int op_maxpool(ox_ctx *x) { return pool(x, IR_OP_maxpool); }
static int op_avgpool(ox_ctx *x) { return pool(x, IR_OP_avgpool); }
static int op_gap(ox_ctx *x) {
  if (ox_check_attrs(x, "")) return -1;
  int in = ox_act(x, 0);
  if (in < 0) return -1;
  if (shape_of(x, in)->rank != 4) return ox_err(x, "the input must be [N, C, H, W]");
  return ox_node(x, IR_OP_global_avgpool, &in, 1, NULL);
}
static int op_hardswish(ox_ctx *x) { return unary(x, IR_OP_hardswish); }
static int op_identity(ox_ctx *x) { return alias(x, ""); }
static int op_dropout(ox_ctx *x) { return alias(x, "ratio,seed,is_test,consumed_inputs"); }

static const ox_op ops[] = {
    {"AveragePool", op_avgpool}, {"BatchNormalization", batchnorm}, {"Constant", constant},
    {"Conv", conv},              {"Dropout", op_dropout},           {"Flatten", flatten},
    {"Gemm", gemm},              {"GlobalAveragePool", op_gap},     {"Identity", op_identity},
    {"MatMul", matmul},          {"MaxPool", op_maxpool},           {"Mul", op_mul},
    {"Relu", op_relu},           {"Reshape", reshape},              {"Sigmoid", sigmoid},
    {"Softmax", softmax},        {"Add", op_add},                   {"Sub", op_sub},
    {"Div", op_div},             {"Shape", shape_op},               {"Gather", gather},
    {"Unsqueeze", op_unsqueeze}, {"Squeeze", op_squeeze},           {"Cast", cast},
    {"Concat", concat},          {"Clip", clip},                    {"HardSigmoid", hardsigmoid},
    {"HardSwish", op_hardswish}, {"Slice", slice},                  {"Split", split},
    {"Pad", pad},
};

const char *ox_supported(void) {
  static char buf[512];
  if (!buf[0]) {
    const char *names[sizeof ops / sizeof *ops];
    int n = (int)(sizeof ops / sizeof *ops);
    for (int i = 0; i < n; i++) names[i] = ops[i].name;
    for (int i = 1; i < n; i++) /* sorted for the message */
      for (int j = i; j > 0 && strcmp(names[j - 1], names[j]) > 0; j--) {
        const char *t = names[j];
        names[j] = names[j - 1];
        names[j - 1] = t;
      }
    size_t off = 0;
    for (int i = 0; i < n && off < sizeof buf; i++) off += (size_t)snprintf(buf + off, sizeof buf - off, "%s%s", i ? ", " : "", names[i]);
  }
  return buf;
}

int ox_convert(ox_ctx *x) {
  const char *op = x->node->op_type;
  for (size_t i = 0; i < sizeof ops / sizeof *ops; i++)
    if (!strcmp(ops[i].name, op)) {
      if (x->node->n_output < 1 || !x->node->output[0][0]) return ox_err(x, "the node has no output");
      return ops[i].fn(x);
    }
  return ox_err(x, "operator not supported (supported: %s)", ox_supported());
}
