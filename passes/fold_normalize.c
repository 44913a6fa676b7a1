/* fold_normalize.c — inference: the u8 input's normalize node folded into the conv that reads
 * it.  Unpadded convs, or means all 0: w' = w / (255 std[c]), b' = b - sum w mean[c] / std[c],
 * the normalize node a u8 -> f32 copy (folded 1).  Padded convs with a non-zero mean (zero
 * padding in normalised space is the raw value 255 mean[c], not 0): only the scale moves,
 * w' = w / (255 std[c]), and the node computes x - 255 mean[c] (folded 2), whose zero is the
 * normalised zero.  Runs before the precision pass (16.x: the folded weights are rounded
 * after folding).  Training graphs are never folded (docs/model-format.md "input"). */
#include <string.h>

#include "passes/passes.h"

/* Readers of value v: node inputs and graph outputs. */
static int uses(const ir_graph *g, int v) {
  int k = 0;
  for (int i = 0; i < g->n_nodes; i++)
    for (int j = 0; j < g->nodes[i].n_in; j++) k += g->nodes[i].in[j] == v;
  for (int i = 0; i < g->n_outputs; i++) k += g->outputs[i] == v;
  return k;
}

/* 0: not foldable, 1: fully (scale, mean, std), 2: the scale and std only (padded, means). */
static int foldable(const ir_graph *g, const ir_node *nn, const ir_node *cv) {
  const ir_normalize_attr *a = &nn->attr.normalize;
  const ir_conv2d_attr *ca = &cv->attr.conv2d;
  const ir_value *w = &g->values[cv->in[1]];
  if (a->folded || cv->op != IR_OP_conv2d || cv->in[0] != nn->out || ca->groups != 1) return 0;
  if (w->kind != IR_VAL_PARAM || !w->data || uses(g, cv->in[1]) != 1 || w->shape.dim[1] != a->channels) return 0;
  if (cv->n_in > 2 && (g->values[cv->in[2]].kind != IR_VAL_PARAM || !g->values[cv->in[2]].data || uses(g, cv->in[2]) != 1))
    return 0;
  int padded = ca->pad[0] || ca->pad[1] || ca->pad[2] || ca->pad[3], zero_mean = 1;
  for (int c = 0; c < a->channels; c++) zero_mean &= a->mean[c] == 0.0f;
  return !padded || zero_mean ? 1 : a->scale > 0.0f ? 2 : 0;
}

int pass_fold_normalize(ir_graph *g) {
  if (g->label >= 0) return 0; /* a training graph: the conv's weights are trained in normalised space */
  for (int i = 0; i < g->n_nodes; i++) {
    ir_node *nn = &g->nodes[i];
    if (nn->op != IR_OP_normalize || g->values[nn->in[0]].dtype != IR_U8 || uses(g, nn->out) != 1) continue;
    ir_node *cv = NULL;
    for (int j = 0; j < g->n_nodes && !cv; j++)
      if (g->nodes[j].n_in > 0 && g->nodes[j].in[0] == nn->out) cv = &g->nodes[j];
    int how = cv ? foldable(g, nn, cv) : 0;
    if (!how) continue;
    ir_normalize_attr *a = &nn->attr.normalize;
    ir_value *w = &g->values[cv->in[1]];
    int64_t o_n = w->shape.dim[0], c_n = w->shape.dim[1], taps = w->shape.dim[2] * w->shape.dim[3];
    if (how == 2) { /* x - 255 mean[c] in the node, 1 / (255 std[c]) in the weights */
      for (int64_t o = 0; o < o_n; o++)
        for (int64_t c = 0; c < c_n; c++)
          for (int64_t t = 0; t < taps; t++) {
            float *x = &w->data[(o * c_n + c) * taps + t];
            *x = (float)((double)*x * a->scale / a->std[c]);
          }
      for (int c = 0; c < a->channels; c++) a->mean[c] = (float)((double)a->mean[c] / a->scale), a->std[c] = 1.0f;
      a->scale = 1.0f, a->folded = 2;
      return 1;
    }
    int bias = cv->n_in > 2 ? cv->in[2] : -1;
    if (bias < 0) { /* a bias to carry the means (zero when they are all 0) */
      const char *name = ir_fmt(g->arena, "%s/bias", cv->name);
      if (ir_find_value(g, name) >= 0) continue;
      bias = ir_add_param(g, name, (ir_shape){1, {o_n}}, 0);
      memset(g->values[bias].data, 0, (size_t)o_n * sizeof(float));
      cv = &g->nodes[cv->id], nn = &g->nodes[i], a = &nn->attr.normalize, w = &g->values[cv->in[1]];
      cv->in[cv->n_in++] = bias;
    }
    float *wd = w->data, *bd = g->values[bias].data;
    for (int64_t o = 0; o < o_n; o++) {
      double shift = 0;
      for (int64_t c = 0; c < c_n; c++) {
        double k = (double)a->scale / a->std[c], m = (double)a->mean[c] / a->std[c];
        for (int64_t t = 0; t < taps; t++) {
          float *x = &wd[(o * c_n + c) * taps + t];
          shift += (double)*x * m;
          *x = (float)((double)*x * k);
        }
      }
      bd[o] = (float)((double)bd[o] - shift);
    }
    for (int c = 0; c < a->channels; c++) a->mean[c] = 0.0f, a->std[c] = 1.0f;
    a->scale = 1.0f, a->folded = 1;
    return 1;
  }
  return 0;
}
