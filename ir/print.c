/* print.c — the deterministic text form of a graph (cnnc --emit ir, golden tests):
 * values first (inputs, labels, params), then one line per node with typed attributes. */
#include "ir.h"

static void p_ints(FILE *f, const char *key, const int *v, int n) {
  fprintf(f, " %s=[", key);
  for (int i = 0; i < n; i++) fprintf(f, "%s%d", i ? "," : "", v[i]);
  fputc(']', f);
}

static void print_none(FILE *f, const ir_attr *a) { (void)f, (void)a; }
static void print_conv2d(FILE *f, const ir_attr *u) {
  const ir_conv2d_attr *a = &u->conv2d;
  p_ints(f, "kernel", a->kernel, 2);
  p_ints(f, "stride", a->stride, 2);
  p_ints(f, "pad", a->pad, 4);
  p_ints(f, "dilation", a->dilation, 2);
  fprintf(f, " groups=%d", a->groups);
  if (a->exact) fprintf(f, " exact");
}
static void print_batchnorm(FILE *f, const ir_attr *u) {
  fprintf(f, " eps=%g momentum=%g training=%d", u->batchnorm.eps, u->batchnorm.momentum, u->batchnorm.training);
}
static void print_groupnorm(FILE *f, const ir_attr *u) {
  fprintf(f, " groups=%d eps=%g", u->groupnorm.groups, u->groupnorm.eps);
}
static void print_pool(FILE *f, const ir_attr *u) {
  const ir_pool_attr *a = &u->maxpool;
  p_ints(f, "kernel", a->kernel, 2);
  p_ints(f, "stride", a->stride, 2);
  p_ints(f, "pad", a->pad, 4);
  fprintf(f, " ceil_mode=%d count_include_pad=%d", a->ceil_mode, a->count_include_pad);
  if (ir_pool_dilation(a, 0) != 1 || ir_pool_dilation(a, 1) != 1)
    fprintf(f, " dilation=[%d,%d]", ir_pool_dilation(a, 0), ir_pool_dilation(a, 1));
  if (a->storage_order) fprintf(f, " storage_order=%d", a->storage_order);
}
static void print_reduce(FILE *f, const ir_attr *u) {
  static const char *const modes[] = {"sum", "mean", "max"};
  char buf[96];
  unsigned m = (unsigned)u->reduce.mode;
  fprintf(f, " mode=%s shape=%s", m < 3 ? modes[m] : "?", ir_shape_str(&u->reduce.shape, buf, sizeof buf));
}
static void print_expand(FILE *f, const ir_attr *u) {
  char buf[96];
  fprintf(f, " shape=%s", ir_shape_str(&u->expand.shape, buf, sizeof buf));
  if (ir_expand_scale(&u->expand) != 1.0f) fprintf(f, " scale=%.9g", ir_expand_scale(&u->expand));
}
static void print_cast(FILE *f, const ir_attr *u) {
  fprintf(f, " to=%s wrap=%s", ir_dtype_name((ir_dtype)u->cast.to), ir_dtype_name((ir_dtype)u->cast.wrap));
}
static void print_dense(FILE *f, const ir_attr *u) { fprintf(f, " units=%d", u->dense.units); }
static void print_shuffle(FILE *f, const ir_attr *u) { fprintf(f, " groups=%d", u->channel_shuffle.groups); }
static void print_transpose(FILE *f, const ir_attr *u) { p_ints(f, "perm", u->transpose.perm, IR_MAX_RANK); }
static void print_concat(FILE *f, const ir_attr *u) { fprintf(f, " axis=%d", u->concat.axis); }
static void print_slice(FILE *f, const ir_attr *u) {
  fprintf(f, " axis=%d start=%lld len=%lld", u->slice.axis, (long long)u->slice.start, (long long)u->slice.len);
  if (ir_slice_step(&u->slice) != 1) fprintf(f, " step=%lld", (long long)u->slice.step);
}
static void print_slice_grad(FILE *f, const ir_attr *u) {
  ir_attr s = {.slice = u->slice_grad.slice};
  print_slice(f, &s);
}
static void print_lrn(FILE *f, const ir_attr *u) {
  fprintf(f, " size=%d alpha=%g beta=%g bias=%g", u->lrn.size, u->lrn.alpha, u->lrn.beta, u->lrn.bias);
}
static void print_leaky(FILE *f, const ir_attr *u) { fprintf(f, " alpha=%g", u->leaky_relu.alpha); }
static void print_quantize8(FILE *f, const ir_attr *u) {
  fprintf(f, " inv=%.9g range=%d..%d", u->quantize8.inv, u->quantize8.lo, u->quantize8.hi);
}
static void print_clip(FILE *f, const ir_attr *u) { fprintf(f, " lo=%g hi=%g", u->clip.lo, u->clip.hi); }
static void print_hsig(FILE *f, const ir_attr *u) { fprintf(f, " alpha=%g beta=%g", u->hardsigmoid.alpha, u->hardsigmoid.beta); }
static void print_xent(FILE *f, const ir_attr *u) { fprintf(f, " label_smoothing=%g", u->softmax_xent.label_smoothing); }
static void print_dropout(FILE *f, const ir_attr *u) {
  fprintf(f, " rate=%g training=%d", u->dropout.rate, u->dropout.training);
}
static void print_reshape(FILE *f, const ir_attr *u) {
  char buf[96];
  fprintf(f, " shape=%s", ir_shape_str(&u->reshape.shape, buf, sizeof buf));
}
static void print_normalize(FILE *f, const ir_attr *u) {
  const ir_normalize_attr *a = &u->normalize;
  fprintf(f, " scale=%g mean=[", a->scale);
  for (int c = 0; c < a->channels; c++) fprintf(f, "%s%g", c ? "," : "", a->mean[c]);
  fprintf(f, "] std=[");
  for (int c = 0; c < a->channels; c++) fprintf(f, "%s%g", c ? "," : "", a->std[c]);
  fputc(']', f);
  if (a->folded) fprintf(f, " folded=%d", a->folded);
}

/* training ops (issue 5) */
static void print_conv2d_grad(FILE *f, const ir_attr *u) {
  char buf[96];
  ir_attr c = {.conv2d = u->conv2d_grad_input.conv};
  print_conv2d(f, &c);
  fprintf(f, " x_shape=%s", ir_shape_str(&u->conv2d_grad_input.x_shape, buf, sizeof buf));
}
static void print_pool_grad(FILE *f, const ir_attr *u) {
  char buf[96];
  ir_attr p = {.maxpool = u->maxpool_grad.pool};
  print_pool(f, &p);
  fprintf(f, " x_shape=%s", ir_shape_str(&u->maxpool_grad.x_shape, buf, sizeof buf));
}
static void print_tshape(FILE *f, const ir_attr *u) {
  char buf[96];
  fprintf(f, " shape=%s", ir_shape_str(&u->reduce_sum.shape, buf, sizeof buf));
}
static void print_xent_grad(FILE *f, const ir_attr *u) {
  fprintf(f, " label_smoothing=%g scale=%g", u->softmax_xent_grad.label_smoothing, u->softmax_xent_grad.scale);
}
static void print_optim(FILE *f, const ir_attr *u) {
  const ir_optim_attr *a = &u->sgd_update;
  fprintf(f, " momentum=%g nesterov=%d rho=%g beta1=%g beta2=%g eps=%g weight_decay=%g l2=%g grad_scale=%g",
          a->momentum, a->nesterov, a->rho, a->beta1, a->beta2, a->eps, a->weight_decay, a->l2, a->grad_scale);
}

static void print_round16(FILE *f, const ir_attr *u) {
  fprintf(f, " format=%s", u->round16.format == IR_HALF_FP16 ? "fp16" : "bf16");
}

static void print_store16(FILE *f, const ir_attr *u) {
  fprintf(f, " format=%s%s", u->narrow16.format == IR_HALF_FP16 ? "fp16" : "bf16", u->narrow16.keep_sign ? " keep_sign" : "");
}

typedef void (*attr_printer)(FILE *, const ir_attr *);
static const attr_printer printers[IR_OP_COUNT] = {
#define IR_OP(name, attr, min_in, max_in, n_out, kind) [IR_OP_##name] = print_##attr,
#include "ops.def"
};

static void print_value_decl(FILE *f, const ir_value *v) {
  static const char *const kinds[] = {"input", "label", "param", "act"};
  char buf[96];
  fprintf(f, "%s %%%s : %s%s%s\n", kinds[v->kind], v->name, ir_dtype_name(v->dtype),
          ir_shape_str(&v->shape, buf, sizeof buf), v->kind == IR_VAL_PARAM && !v->trainable ? " frozen" : "");
}

void ir_print(const ir_graph *g, FILE *f) {
  char buf[96];
  fprintf(f, "graph %s batch=%d shards=%d\n", g->name, g->batch, g->n_shards);
  for (int i = 0; i < g->n_values; i++)
    if (g->values[i].kind != IR_VAL_ACT) print_value_decl(f, &g->values[i]);
  for (int i = 0; i < g->n_nodes; i++) {
    const ir_node *n = &g->nodes[i];
    const ir_value *out = &g->values[n->out];
    fprintf(f, "%%%s = %s(", out->name, ir_ops[n->op].name);
    for (int k = 0; k < n->n_in; k++) fprintf(f, "%s%%%s", k ? ", " : "", g->values[n->in[k]].name);
    fputc(')', f);
    printers[n->op](f, &n->attr);
    fprintf(f, " : %s%s", ir_dtype_name(out->dtype), ir_shape_str(&out->shape, buf, sizeof buf));
    if (g->n_shards > 1) fprintf(f, " shard=%d", n->shard);
    fputc('\n', f);
  }
  for (int i = 0; i < g->n_outputs; i++) fprintf(f, "output %%%s\n", g->values[g->outputs[i]].name);
}
