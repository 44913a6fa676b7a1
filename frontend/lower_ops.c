/* lower_ops.c — one lowering function per layer op of layers.def: typed keys (already read
 * and range-checked into L->f) become IR attributes, parameters "<layer>/weight" etc. and one
 * IR node.  Checks that need the input shape (groups dividing channels, flat dense input)
 * are reported here at the offending key; all other shape errors come from the IR's
 * inference hooks, relocated to the layer. */
#include <string.h>

#include "fe_int.h"

_Static_assert((int)FE_K_maxpool_kernel == (int)FE_K_avgpool_kernel &&
                   (int)FE_K_maxpool_stride == (int)FE_K_avgpool_stride &&
                   (int)FE_K_maxpool_padding == (int)FE_K_avgpool_padding &&
                   (int)FE_K_maxpool_ceil_mode == (int)FE_K_avgpool_ceil_mode,
               "maxpool and avgpool share their key order");
_Static_assert(FE_K_batchnorm__count <= FE_MAX_KEYS && FE_K_conv__count <= FE_MAX_KEYS &&
                   FE_K_avgpool__count <= FE_MAX_KEYS && FE_K_norm__count <= FE_MAX_KEYS,
               "FE_MAX_KEYS covers every op table");

static const ir_shape *in_shape(const fe_ctx *c, const fe_layer *L, int k) { return &c->g->values[L->in[k]].shape; }

static const fe_node *at(const fe_layer *L, int key) { return L->f[key].node ? L->f[key].node : L->m; }

/* Per-sample shape for messages: "[64,56,56]". */
static const char *sample_str(fe_ctx *c, const ir_shape *s) {
  ir_shape t = *s;
  char buf[96];
  if (t.rank > 0) {
    memmove(t.dim, t.dim + 1, (size_t)(t.rank - 1) * sizeof t.dim[0]);
    t.rank--;
  }
  return ir_strdup(c->a, ir_shape_str(&t, buf, sizeof buf));
}

int fe_add_node(fe_ctx *c, fe_layer *L, ir_op op, const int *in, int n_in, const ir_attr *attr) {
  ir_diag sub = {0};
  int v = ir_add_node(c->g, op, L->name, L->loc, in, n_in, attr, &sub);
  if (v < 0) return fe_err(c, L->m, L->name, "%s", sub.msg);
  L->out = v;
  return 0;
}

int fe_add_param(fe_ctx *c, fe_layer *L, const char *suffix, ir_shape s, int trainable) {
  const char *name = ir_fmt(c->g->arena, "%s/%s", L->name, suffix);
  int64_t n = ir_shape_numel(&s);
  if (fe_strmap_get(&c->full, name) >= 0)
    return fe_err(c, L->m, L->name, "parameter '%s' clashes with a layer name", name);
  if (n > FE_MAX_PARAM_NUMEL - c->param_numel)
    return fe_err(c, L->m, L->name, "the model's parameters exceed %lld values", (long long)FE_MAX_PARAM_NUMEL);
  c->param_numel += n;
  return ir_add_param(c->g, name, s, trainable);
}

static int need_image(fe_ctx *c, fe_layer *L) {
  const ir_shape *x = in_shape(c, L, 0);
  if (x->rank == 4) return 0;
  return fe_err(c, L->m, L->name, "op '%s' needs a [C,H,W] input (got %s)", L->op->name, sample_str(c, x));
}

static void pad_of(const fe_field *pad, const int *k, const int *dil, int *out) {
  for (int i = 0; i < 4; i++) out[i] = pad->same ? dil[i % 2] * (k[i % 2] - 1) / 2 : (int)pad->iv[i];
}

int fe_lower_conv(fe_ctx *c, fe_layer *L) {
  if (need_image(c, L)) return -1;
  const fe_field *f = L->f;
  int64_t cin = in_shape(c, L, 0)->dim[1], filters = f[FE_K_conv_filters].v.i, groups = f[FE_K_conv_groups].v.i;
  if (cin % groups)
    return fe_err(c, at(L, FE_K_conv_groups), L->name, "'groups' (%lld) must divide the input channels (%lld)",
                  (long long)groups, (long long)cin);
  if (filters % groups)
    return fe_err(c, at(L, FE_K_conv_groups), L->name, "'groups' (%lld) must divide 'filters' (%lld)",
                  (long long)groups, (long long)filters);
  ir_attr a = {0};
  ir_conv2d_attr *ca = &a.conv2d;
  for (int i = 0; i < 2; i++) {
    ca->kernel[i] = (int)f[FE_K_conv_kernel].iv[i];
    ca->stride[i] = (int)f[FE_K_conv_stride].iv[i];
    ca->dilation[i] = (int)f[FE_K_conv_dilation].iv[i];
  }
  pad_of(&f[FE_K_conv_padding], ca->kernel, ca->dilation, ca->pad);
  ca->groups = (int)groups;
  int in[3] = {L->in[0], -1, -1}, n = 2;
  in[1] = fe_add_param(c, L, "weight", (ir_shape){4, {filters, cin / groups, ca->kernel[0], ca->kernel[1]}}, 1);
  if (in[1] < 0) return -1;
  if (f[FE_K_conv_bias].v.i && (in[n++] = fe_add_param(c, L, "bias", (ir_shape){1, {filters}}, 1)) < 0) return -1;
  return fe_add_node(c, L, IR_OP_conv2d, in, n, &a);
}

static int64_t channels(fe_ctx *c, fe_layer *L) {
  const ir_shape *x = in_shape(c, L, 0);
  return x->rank >= 2 ? x->dim[1] : 0;
}

int fe_lower_batchnorm(fe_ctx *c, fe_layer *L) {
  int64_t ch = channels(c, L);
  if (ch < 1) return fe_err(c, L->m, L->name, "op '%s' needs an input with channels", L->op->name);
  ir_attr a = {0};
  a.batchnorm.eps = (float)L->f[FE_K_batchnorm_eps].v.f;
  a.batchnorm.momentum = (float)L->f[FE_K_batchnorm_momentum].v.f;
  a.batchnorm.training = c->training;
  static const char *const names[] = {"gamma", "beta", "running_mean", "running_var"};
  int in[5] = {L->in[0]};
  for (int i = 0; i < 4; i++)
    if ((in[i + 1] = fe_add_param(c, L, names[i], (ir_shape){1, {ch}}, i < 2)) < 0) return -1;
  return fe_add_node(c, L, IR_OP_batchnorm, in, 5, &a);
}

int fe_lower_groupnorm(fe_ctx *c, fe_layer *L) {
  int64_t ch = channels(c, L), groups = L->f[FE_K_groupnorm_groups].v.i;
  if (ch < 1) return fe_err(c, L->m, L->name, "op '%s' needs an input with channels", L->op->name);
  if (ch % groups)
    return fe_err(c, at(L, FE_K_groupnorm_groups), L->name, "%s (%lld) must divide the input channels (%lld)",
                  L->f[FE_K_groupnorm_groups].node ? "'groups'" : "defaults.groups", (long long)groups,
                  (long long)ch);
  ir_attr a = {0};
  a.groupnorm.groups = (int)groups;
  a.groupnorm.eps = (float)L->f[FE_K_groupnorm_eps].v.f;
  int in[3] = {L->in[0]};
  if ((in[1] = fe_add_param(c, L, "gamma", (ir_shape){1, {ch}}, 1)) < 0) return -1;
  if ((in[2] = fe_add_param(c, L, "beta", (ir_shape){1, {ch}}, 1)) < 0) return -1;
  return fe_add_node(c, L, IR_OP_groupnorm, in, 3, &a);
}

/* norm: batchnorm or groupnorm as defaults.norm says (none: elided).  The keys are checked
 * again against the chosen kind's table, so a key of the other kind is an error. */
int fe_lower_norm(fe_ctx *c, fe_layer *L) {
  const char *kind = c->defs[FE_K_defaults_norm].s;
  if (!strcmp(kind, "none")) return L->out = L->in[0], 0;
  int batch = !strcmp(kind, "batch");
  const fe_table *t = batch ? &fe_tab_batchnorm : &fe_tab_groupnorm;
  const char *where = batch ? "op 'norm' (defaults.norm: batch)" : "op 'norm' (defaults.norm: group)";
  if (fe_check_keys(c, L->m, &fe_tab_layer, t, L->name, where)) return -1;
  if (fe_read_table(c, L->m, t, L->env, L->name, NULL, L->f)) return -1;
  return batch ? fe_lower_batchnorm(c, L) : fe_lower_groupnorm(c, L);
}

int fe_lower_plain(fe_ctx *c, fe_layer *L) {
  ir_attr a = {0};
  return fe_add_node(c, L, L->op->op, L->in, L->n_in, &a);
}

static int relu6(fe_ctx *c, fe_layer *L) {
  ir_attr a = {.clip = {0.0f, 6.0f}};
  return fe_add_node(c, L, IR_OP_clip, L->in, 1, &a);
}

int fe_lower_act(fe_ctx *c, fe_layer *L) {
  ir_attr a = {0};
  const char *kind = c->defs[FE_K_defaults_activation].s;
  return !strcmp(kind, "relu6") ? relu6(c, L) : fe_add_node(c, L, ir_op_from_name(kind), L->in, 1, &a);
}

int fe_lower_concat(fe_ctx *c, fe_layer *L) {
  ir_attr a = {0};
  a.concat.axis = (int)L->f[FE_K_concat_axis].v.i + 1; /* past the batch */
  return fe_add_node(c, L, IR_OP_concat, L->in, L->n_in, &a);
}

int fe_lower_slice(fe_ctx *c, fe_layer *L) {
  ir_attr a = {0};
  a.slice = (ir_slice_attr){(int)L->f[FE_K_slice_axis].v.i + 1, L->f[FE_K_slice_start].v.i, L->f[FE_K_slice_length].v.i};
  return fe_add_node(c, L, IR_OP_slice, L->in, 1, &a);
}

int fe_lower_shuffle(fe_ctx *c, fe_layer *L) {
  ir_attr a = {0};
  a.channel_shuffle.groups = (int)L->f[FE_K_channel_shuffle_groups].v.i;
  return fe_add_node(c, L, IR_OP_channel_shuffle, L->in, 1, &a);
}

/* clip (min, max) and relu6 (clip 0..6). */
int fe_lower_clip(fe_ctx *c, fe_layer *L) {
  if (!strcmp(L->op->name, "relu6")) return relu6(c, L);
  ir_attr a = {0};
  const fe_field *lo = &L->f[FE_K_clip_min], *hi = &L->f[FE_K_clip_max];
  a.clip.lo = lo->node ? (float)lo->v.f : -INFINITY;
  a.clip.hi = hi->node ? (float)hi->v.f : INFINITY;
  if (a.clip.lo > a.clip.hi) return fe_err(c, L->m, L->name, "'min' (%g) must not exceed 'max' (%g)", a.clip.lo, a.clip.hi);
  return fe_add_node(c, L, IR_OP_clip, L->in, 1, &a);
}

int fe_lower_leaky(fe_ctx *c, fe_layer *L) {
  ir_attr a = {0};
  a.leaky_relu.alpha = (float)L->f[FE_K_leaky_relu_alpha].v.f;
  return fe_add_node(c, L, IR_OP_leaky_relu, L->in, 1, &a);
}

int fe_lower_lrn(fe_ctx *c, fe_layer *L) {
  const ir_shape *x = in_shape(c, L, 0);
  if (x->rank < 3) return fe_err(c, L->m, L->name, "op 'lrn' needs a [C,H,W] or [C,L] input (got %s)", sample_str(c, x));
  ir_attr a = {0};
  a.lrn.size = (int)L->f[FE_K_lrn_size].v.i;
  if (a.lrn.size % 2 == 0)
    return fe_err(c, at(L, FE_K_lrn_size), L->name, "'size' (%d) must be odd (a window centred on the channel)", a.lrn.size);
  a.lrn.alpha = (float)L->f[FE_K_lrn_alpha].v.f;
  a.lrn.beta = (float)L->f[FE_K_lrn_beta].v.f;
  a.lrn.bias = (float)L->f[FE_K_lrn_bias].v.f;
  return fe_add_node(c, L, IR_OP_lrn, L->in, 1, &a);
}

int fe_lower_hardsigmoid(fe_ctx *c, fe_layer *L) {
  ir_attr a = {0};
  a.hardsigmoid.alpha = (float)L->f[FE_K_hardsigmoid_alpha].v.f;
  a.hardsigmoid.beta = (float)L->f[FE_K_hardsigmoid_beta].v.f;
  return fe_add_node(c, L, IR_OP_hardsigmoid, L->in, 1, &a);
}

int fe_lower_pool(fe_ctx *c, fe_layer *L) {
  if (need_image(c, L)) return -1;
  const fe_field *f = L->f;
  static const int one[2] = {1, 1};
  ir_attr a = {0};
  ir_pool_attr *p = L->op->op == IR_OP_maxpool ? &a.maxpool : &a.avgpool;
  for (int i = 0; i < 2; i++) {
    p->kernel[i] = (int)f[FE_K_maxpool_kernel].iv[i];
    p->stride[i] = (int)f[FE_K_maxpool_stride].iv[i];
  }
  pad_of(&f[FE_K_maxpool_padding], p->kernel, one, p->pad);
  p->ceil_mode = (int)f[FE_K_maxpool_ceil_mode].v.i;
  p->count_include_pad = L->op->op == IR_OP_avgpool ? (int)f[FE_K_avgpool_count_include_pad].v.i : 0;
  return fe_add_node(c, L, L->op->op, L->in, 1, &a);
}

int fe_lower_flatten(fe_ctx *c, fe_layer *L) {
  ir_attr a = {0};
  a.reshape.shape = (ir_shape){2, {c->g->batch, -1}};
  return fe_add_node(c, L, IR_OP_reshape, L->in, 1, &a);
}

int fe_lower_reshape(fe_ctx *c, fe_layer *L) {
  const fe_field *s = &L->f[FE_K_reshape_shape];
  if (s->n > IR_MAX_RANK - 1)
    return fe_err(c, at(L, FE_K_reshape_shape), L->name, "'shape' has at most %d dims per sample (got %d)",
                  IR_MAX_RANK - 1, s->n);
  ir_attr a = {0};
  a.reshape.shape.rank = s->n + 1;
  a.reshape.shape.dim[0] = c->g->batch;
  int inferred = 0;
  for (int i = 0; i < s->n; i++) {
    if (s->iv[i] == 0 || (s->iv[i] == -1 && inferred++))
      return fe_err(c, s->node->kids[i], L->name, "'shape' dims must be >= 1, one may be -1 (got %lld)",
                    (long long)s->iv[i]);
    a.reshape.shape.dim[i + 1] = s->iv[i];
  }
  return fe_add_node(c, L, IR_OP_reshape, L->in, 1, &a);
}

int fe_lower_dense(fe_ctx *c, fe_layer *L) {
  const ir_shape *x = in_shape(c, L, 0);
  if (x->rank != 2)
    return fe_err(c, L->m, L->name, "op 'dense' needs a flat input [K] (got %s); add a flatten layer",
                  sample_str(c, x));
  int64_t units = L->f[FE_K_dense_units].v.i;
  ir_attr a = {0};
  a.dense.units = (int)units;
  int in[3] = {L->in[0], -1, -1}, n = 2;
  if ((in[1] = fe_add_param(c, L, "weight", (ir_shape){2, {units, x->dim[1]}}, 1)) < 0) return -1;
  if (L->f[FE_K_dense_bias].v.i && (in[n++] = fe_add_param(c, L, "bias", (ir_shape){1, {units}}, 1)) < 0) return -1;
  return fe_add_node(c, L, IR_OP_dense, in, n, &a);
}

int fe_lower_dropout(fe_ctx *c, fe_layer *L) {
  ir_attr a = {0};
  a.dropout.rate = (float)L->f[FE_K_dropout_rate].v.f;
  a.dropout.training = c->training;
  /* one stream per dropout layer, derived from the model seed (splitmix64 step) */
  uint64_t z = (uint64_t)c->o->seed + 0x9e3779b97f4a7c15ull * (uint64_t)++c->n_dropout;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  a.dropout.seed = z ^ (z >> 31);
  return fe_add_node(c, L, IR_OP_dropout, L->in, 1, &a);
}
