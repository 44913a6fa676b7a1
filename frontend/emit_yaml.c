/* emit_yaml.c — fe_emit_yaml: a loaded graph (from ONNX or YAML) written back as a flat YAML
 * model (docs/model-format.md) with its parameters beside it in safetensors, so that
 * `cnnc model.onnx --emit yaml -o m.yml` gives a model `cnnc m.yml` compiles to the same graph.
 * Both files are written atomically (common/cm.h's cm_out; the weights with
 * fe_save_safetensors), the weights never over an input of the compile.
 * Every IR node becomes one layer named like the node (parameter names `<layer>/weight`, ...
 * match the YAML frontend's); a node the format cannot express (an add or mul of a constant,
 * a reshape that moves the batch) is an error naming it.  The training loss is not written
 * (`--mode training` adds it again). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "common/cm.h"
#include "fe_int.h"
#include "weights.h"

static int fail(ir_diag *d, const char *path, const ir_node *n, const char *msg) {
  return ir_diag_set(d, (ir_loc){path, 0, 0}, n ? n->name : NULL, "%s", msg);
}

/* The layer names of the operands of n ("input" for the model input). */
static void inputs(FILE *f, const ir_graph *g, const ir_node *n, int count) {
  fprintf(f, ", inputs: [");
  for (int i = 0; i < count; i++) {
    const ir_value *v = &g->values[n->in[i]];
    fprintf(f, "%s\"%s\"", i ? ", " : "", v->kind == IR_VAL_INPUT ? "input" : v->name);
  }
  fprintf(f, "]");
}

static void pair(FILE *f, const char *key, const int *v) { fprintf(f, ", %s: [%d, %d]", key, v[0], v[1]); }
static void pad4(FILE *f, const int *p) { fprintf(f, ", padding: [%d, %d, %d, %d]", p[0], p[1], p[2], p[3]); }

/* The role suffix of param v of node n: "<layer>/<role>" as the YAML frontend names it. */
static int named_param(const ir_graph *g, const ir_node *n, int slot, const char *role) {
  const ir_value *v = &g->values[n->in[slot]];
  size_t l = strlen(n->name);
  return v->kind == IR_VAL_PARAM && !strncmp(v->name, n->name, l) && v->name[l] == '/' && !strcmp(v->name + l + 1, role);
}

/* One layer; 0, or -1 with d filled. */
static int layer(FILE *f, const ir_graph *g, const ir_node *n, const char *path, ir_diag *d) {
  const ir_attr *a = &n->attr;
  const ir_shape *xs = &g->values[n->in[0]].shape, *ys = &g->values[n->out].shape;
  fprintf(f, "  - {name: \"%s\"", n->name);
  switch (n->op) {
  case IR_OP_conv2d:
    if (!named_param(g, n, 1, "weight") || (n->n_in > 2 && !named_param(g, n, 2, "bias")))
      return fail(d, path, n, "its parameters are not named <layer>/weight, <layer>/bias");
    fprintf(f, ", op: conv, filters: %lld", (long long)ys->dim[1]);
    pair(f, "kernel", a->conv2d.kernel), pair(f, "stride", a->conv2d.stride), pad4(f, a->conv2d.pad);
    pair(f, "dilation", a->conv2d.dilation);
    fprintf(f, ", groups: %d, bias: %s", a->conv2d.groups, n->n_in > 2 ? "true" : "false");
    break;
  case IR_OP_batchnorm:
    for (int i = 0; i < 4; i++)
      if (!named_param(g, n, i + 1, (const char *[]){"gamma", "beta", "running_mean", "running_var"}[i]))
        return fail(d, path, n, "its parameters are not named <layer>/gamma, /beta, /running_mean, /running_var");
    fprintf(f, ", op: batchnorm, eps: %.9g, momentum: %.9g", a->batchnorm.eps, a->batchnorm.momentum);
    break;
  case IR_OP_groupnorm: fprintf(f, ", op: groupnorm, groups: %d, eps: %.9g", a->groupnorm.groups, a->groupnorm.eps); break;
  case IR_OP_relu: case IR_OP_sigmoid: case IR_OP_swish: case IR_OP_hardswish: case IR_OP_global_avgpool:
  case IR_OP_softmax:
    fprintf(f, ", op: %s", ir_ops[n->op].name);
    break;
  case IR_OP_clip:
    fprintf(f, ", op: clip");
    if (isfinite(a->clip.lo)) fprintf(f, ", min: %.9g", a->clip.lo);
    if (isfinite(a->clip.hi)) fprintf(f, ", max: %.9g", a->clip.hi);
    break;
  case IR_OP_lrn:
    if (a->lrn.size % 2 == 0) return fail(d, path, n, "an lrn of even size has no YAML form");
    fprintf(f, ", op: lrn, size: %d, alpha: %.9g, beta: %.9g, bias: %.9g", a->lrn.size, a->lrn.alpha, a->lrn.beta, a->lrn.bias);
    break;
  case IR_OP_leaky_relu: fprintf(f, ", op: leaky_relu, alpha: %.9g", a->leaky_relu.alpha); break;
  case IR_OP_hardsigmoid: fprintf(f, ", op: hardsigmoid, alpha: %.9g, beta: %.9g", a->hardsigmoid.alpha, a->hardsigmoid.beta); break;
  case IR_OP_add: case IR_OP_mul:
    for (int i = 0; i < 2; i++)
      if (g->values[n->in[i]].kind == IR_VAL_PARAM) return fail(d, path, n, "an add or mul of a constant has no YAML form");
    fprintf(f, ", op: %s", ir_ops[n->op].name);
    inputs(f, g, n, 2);
    fprintf(f, "}\n");
    return 0;
  case IR_OP_maxpool: case IR_OP_avgpool:
    fprintf(f, ", op: %s", ir_ops[n->op].name);
    pair(f, "kernel", a->maxpool.kernel), pair(f, "stride", a->maxpool.stride), pad4(f, a->maxpool.pad);
    fprintf(f, ", ceil_mode: %s", a->maxpool.ceil_mode ? "true" : "false");
    if (n->op == IR_OP_avgpool) fprintf(f, ", count_include_pad: %s", a->avgpool.count_include_pad ? "true" : "false");
    break;
  case IR_OP_dense:
    if (!named_param(g, n, 1, "weight") || (n->n_in > 2 && !named_param(g, n, 2, "bias")))
      return fail(d, path, n, "its parameters are not named <layer>/weight, <layer>/bias");
    fprintf(f, ", op: dense, units: %d, bias: %s", a->dense.units, n->n_in > 2 ? "true" : "false");
    break;
  case IR_OP_reshape:
    if (ys->dim[0] != xs->dim[0] || ys->rank < 2 || ys->rank > 4)
      return fail(d, path, n, "a reshape that does not keep the batch in dim 0 has no YAML form");
    if (xs->rank == 4 && ys->rank == 2) {
      fprintf(f, ", op: flatten");
    } else {
      fprintf(f, ", op: reshape, shape: [");
      for (int i = 1; i < ys->rank; i++) fprintf(f, "%s%lld", i > 1 ? ", " : "", (long long)ys->dim[i]);
      fprintf(f, "]");
    }
    break;
  case IR_OP_dropout: fprintf(f, ", op: dropout, rate: %.9g", a->dropout.rate); break;
  case IR_OP_concat:
    if (a->concat.axis < 1) return fail(d, path, n, "a concat along dim 0 (the batch) has no YAML form");
    fprintf(f, ", op: concat, axis: %d", a->concat.axis - 1);
    inputs(f, g, n, n->n_in);
    fprintf(f, "}\n");
    return 0;
  case IR_OP_slice:
    if (a->slice.axis < 1) return fail(d, path, n, "a slice of dim 0 (the batch) has no YAML form");
    if (ir_slice_step(&a->slice) != 1) return fail(d, path, n, "a slice with a step has no YAML form");
    fprintf(f, ", op: slice, axis: %d, start: %lld, length: %lld", a->slice.axis - 1, (long long)a->slice.start,
            (long long)a->slice.len);
    break;
  case IR_OP_channel_shuffle: fprintf(f, ", op: channel_shuffle, groups: %d", a->channel_shuffle.groups); break;
  default:
    return fail(d, path, n, "this op has no YAML form");
  }
  inputs(f, g, n, 1);
  fprintf(f, "}\n");
  return 0;
}

int fe_emit_yaml(const ir_graph *g, const char *path, const char *const *inputs, int n_in, ir_diag *d) {
  const ir_value *in = &g->values[g->input];
  if (in->shape.rank != 4 || in->dtype != IR_F32)
    return fail(d, path, NULL, "a YAML model's input is an f32 [C, H, W] image; this model's input is not");
  /* the weights beside the model: m.yml -> m.safetensors */
  size_t l = strlen(path);
  const char *dot = strrchr(path, '.'), *slash = strrchr(path, '/');
  size_t stem = dot && (!slash || dot > slash) ? (size_t)(dot - path) : l;
  char wpath[4096];
  if (stem + 13 >= sizeof wpath) return fail(d, path, NULL, "the output path is too long");
  snprintf(wpath, sizeof wpath, "%.*s.safetensors", (int)stem, path);
  const char *wbase = strrchr(wpath, '/') ? strrchr(wpath, '/') + 1 : wpath;
  char why[512];
  if (cm_check_output(wpath, inputs, n_in, why, sizeof why)) /* the model file itself was checked by cnnc */
    return ir_diag_set(d, (ir_loc){wpath, 0, 0}, NULL, "%s", why);
  cm_out o;
  if (cm_out_open(&o, path, 0666, why, sizeof why)) return ir_diag_set(d, (ir_loc){path, 0, 0}, NULL, "%s", why);
  FILE *f = o.f;
  fprintf(f, "# Written by cnnc --emit yaml; the parameters are in %s.\n", wbase);
  fprintf(f, "name: \"%s\"\ninput: {shape: [%lld, %lld, %lld]}\nweights: \"%s\"\nlayers:\n", g->name,
          (long long)in->shape.dim[1], (long long)in->shape.dim[2], (long long)in->shape.dim[3], wbase);
  int rc = 0, last = -1;
  for (int i = 0; i < g->n_nodes && !rc; i++) {
    const ir_node *n = &g->nodes[i];
    if (n->op == IR_OP_softmax_xent) continue; /* the loss: --mode training adds it */
    rc = layer(f, g, n, path, d);
    last = n->out;
  }
  int outs = 0;
  for (int k = 0; k < g->n_outputs; k++) outs += g->nodes[g->values[g->outputs[k]].producer].op != IR_OP_softmax_xent;
  if (!rc && (outs > 1 || (outs == 1 && g->outputs[0] != last))) {
    fprintf(f, "outputs: [");
    for (int k = 0, j = 0; k < g->n_outputs; k++)
      if (g->nodes[g->values[g->outputs[k]].producer].op != IR_OP_softmax_xent)
        fprintf(f, "%s\"%s\"", j++ ? ", " : "", g->values[g->outputs[k]].name);
    fprintf(f, "]\n");
  }
  if (!rc) rc = fe_save_safetensors(g, wpath, d); /* before the model that names it */
  if (rc) {
    cm_out_abort(&o);
    return -1;
  }
  if (cm_out_commit(&o, why, sizeof why)) return ir_diag_set(d, (ir_loc){path, 0, 0}, NULL, "%s", why);
  return 0;
}
