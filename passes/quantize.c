/* quantize.c — --precision int8 (issue 21; docs/precision.md "int8"): post-training
 * quantisation of the convolutions of an inference graph, as exact integer numerics in f32
 * storage (the round16 approach of precision.c: the graph is the definition, kernels compute
 * it).
 *
 * Calibration: the f32 graph runs in the reference interpreter on the calibration samples
 * (whole batches of the graph's batch size; a short last batch is filled with its first
 * sample); per conv input value, its minimum and maximum over all of them.
 *
 * Each conv with groups 1 (grouped and depthwise convs stay f32) becomes
 *   x -> quantize8(inv = 1/s_x, u8 0..255 when the calibrated minimum is >= 0, else s8
 *        -128..127) -> conv2d(integer weights, no bias) -> batchnorm (the dequantisation)
 * with per-tensor s_x = max / 255 (u8) or max |x| / 127 (s8) (1 when the range is 0), per
 * output channel symmetric weights q_w = round(w / s_w) in -127..127, s_w = max |w[co]| / 127
 * (1 for an all-zero channel).  The conv's sum over integers is exact (the interpreter sums in
 * double; an int32 kernel sums exactly), and the batchnorm after it applies m = s_x s_w[co] and
 * the bias: an existing inference batchnorm that is the conv's only reader absorbs them
 * (gamma' = m gamma / sqrt(var + eps), beta' = (b - mean) gamma / sqrt(var + eps) + beta),
 * else a new one is inserted (gamma m, beta b); both as an exact affine: mean 0, var 0.75,
 * eps 0.25 (var + eps = 1).  One quantize8 per distinct input value.  A conv whose weight
 * tensor has another reader stays f32. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "passes/passes.h"

typedef struct qstat { float lo, hi; int seen; } qstat;

/* Runs the interpreter on the samples, batch by batch; st[v] for every value v read as a conv
 * input.  Returns 0 or -1 with d filled. */
static int calibrate(ir_graph *g, const float *x, int64_t n, const int *want, qstat *st, FILE *log, ir_diag *d) {
  int64_t per = ir_shape_numel(&g->values[g->input].shape) / g->batch, nb = (n + g->batch - 1) / g->batch;
  float *buf = malloc((size_t)(per * g->batch) * sizeof *buf);
  if (!buf) return ir_diag_set(d, (ir_loc){0}, NULL, "int8 calibration: out of memory");
  for (int64_t b = 0; b < nb; b++) {
    int64_t first = b * g->batch;
    for (int64_t s = 0; s < g->batch; s++) {
      int64_t src = first + s < n ? first + s : first;
      memcpy(buf + s * per, x + src * per, (size_t)per * sizeof *buf);
    }
    if (log) fprintf(log, "cnnc: int8 calibration: batch %lld of %lld\n", (long long)b + 1, (long long)nb);
    float **vals = ir_interp(g, buf, NULL);
    for (int v = 0; v < g->n_values; v++) {
      if (!want[v] || !vals[v]) continue;
      int64_t k = ir_shape_numel(&g->values[v].shape);
      for (int64_t i = 0; i < k; i++) {
        float e = vals[v][i];
        if (e != e) continue;
        if (!st[v].seen) st[v].lo = st[v].hi = e, st[v].seen = 1;
        if (e < st[v].lo) st[v].lo = e;
        if (e > st[v].hi) st[v].hi = e;
      }
    }
    ir_interp_free(g, vals);
  }
  free(buf);
  return 0;
}

/* Readers of value v (nodes), and whether a graph output is v. */
static int readers(const ir_graph *g, int v, int *one) {
  int k = 0;
  for (int i = 0; i < g->n_nodes; i++)
    for (int j = 0; j < g->nodes[i].n_in; j++)
      if (g->nodes[i].in[j] == v) k++, *one = i;
  for (int o = 0; o < g->n_outputs; o++) k += g->outputs[o] == v;
  return k;
}

static int quantizable(const ir_graph *g, const ir_node *n) {
  if (n->op != IR_OP_conv2d || n->attr.conv2d.groups != 1) return 0;
  int one = -1;
  return g->values[n->in[1]].data && readers(g, n->in[1], &one) == 1 && (n->n_in < 3 || g->values[n->in[2]].data);
}

int pass_quantize8(ir_graph *g, const float *x, int64_t n, FILE *log, ir_diag *d) {
  ir_loc loc = {0};
  for (int i = 0; i < g->n_nodes; i++)
    if (g->nodes[i].op == IR_OP_quantize8) return 0; /* already applied */
  if (!x || n < 1) return ir_diag_set(d, loc, NULL, "--precision int8 needs calibration samples (--calibrate FILE)");
  int n0 = g->n_nodes, nv0 = g->n_values;
  int *want = calloc((size_t)nv0, sizeof *want), *qv = malloc((size_t)nv0 * sizeof *qv);
  qstat *st = calloc((size_t)nv0, sizeof *st);
  /* inserted nodes: before[k] = original node they go before (quantize8), after_[k] = after (batchnorm) */
  int cap = 2 * n0 + 1, added = 0, nq = 0;
  int *before = malloc((size_t)cap * sizeof *before), *after_ = malloc((size_t)cap * sizeof *after_);
  if (!want || !qv || !st || !before || !after_) abort();
  for (int i = 0; i < n0; i++)
    if (quantizable(g, &g->nodes[i])) want[g->nodes[i].in[0]] = 1;
  int rc = calibrate(g, x, n, want, st, log, d);
  for (int v = 0; v < nv0; v++) qv[v] = -1;
  int nconv = 0;
  for (int i = 0; i < n0 && rc == 0; i++) {
    ir_node *c = &g->nodes[i];
    if (!quantizable(g, c)) continue;
    int xv = c->in[0];
    /* the input's quantize8 (shared by every conv reading xv) */
    if (qv[xv] < 0) {
      qstat s = st[xv];
      int u8 = s.seen && s.lo >= 0.0f;
      double amax = !s.seen ? 0.0 : u8 ? s.hi : fmax(fabs(s.lo), fabs(s.hi));
      double step = amax > 0 && isfinite(amax) ? amax / (u8 ? 255.0 : 127.0) : 1.0;
      ir_attr a = {.quantize8 = {(float)(1.0 / step), u8 ? 0 : -128, u8 ? 255 : 127}};
      int r = ir_add_node(g, IR_OP_quantize8, ir_fmt(g->arena, "%s/quantize8", g->values[xv].name), c->loc, &xv, 1, &a, d);
      if (r < 0) { rc = -1; break; }
      qv[xv] = r, before[added] = i, after_[added++] = -1, nq++;
      c = &g->nodes[i]; /* ir_add_node may move the node array */
    }
    const ir_quantize8_attr *qa = &g->nodes[g->values[qv[xv]].producer].attr.quantize8;
    double sx = 1.0 / (double)qa->inv;
    /* integer weights, per output channel */
    ir_value *w = &g->values[c->in[1]];
    int64_t cout = w->shape.dim[0], per = ir_shape_numel(&w->shape) / cout;
    double *m = malloc((size_t)cout * sizeof *m), *bias = calloc((size_t)cout, sizeof *bias);
    if (!m || !bias) abort();
    for (int64_t co = 0; co < cout; co++) {
      float *wr = w->data + co * per;
      double amax = 0;
      for (int64_t e = 0; e < per; e++) amax = fmax(amax, fabs((double)wr[e]));
      double sw = amax > 0 && isfinite(amax) ? amax / 127.0 : 1.0;
      for (int64_t e = 0; e < per; e++) {
        double q = nearbyint((double)wr[e] / sw);
        wr[e] = (float)(q < -127 ? -127 : q > 127 ? 127 : q);
      }
      m[co] = sx * sw;
      if (c->n_in == 3) bias[co] = g->values[c->in[2]].data[co];
    }
    c->in[0] = qv[xv];
    c->n_in = 2; /* the bias joins the batchnorm */
    int out = c->out, rd = -1;
    ir_node *bn = readers(g, out, &rd) == 1 && g->nodes[rd].op == IR_OP_batchnorm && !g->nodes[rd].attr.batchnorm.training
                      ? &g->nodes[rd] : NULL;
    float *gm, *bt, *mu, *var;
    if (bn) {
      gm = g->values[bn->in[1]].data, bt = g->values[bn->in[2]].data, mu = g->values[bn->in[3]].data, var = g->values[bn->in[4]].data;
      for (int64_t co = 0; co < cout; co++) {
        double k = (double)gm[co] / sqrt((double)var[co] + (double)bn->attr.batchnorm.eps);
        gm[co] = (float)(m[co] * k), bt[co] = (float)((bias[co] - (double)mu[co]) * k + (double)bt[co]);
        mu[co] = 0.0f, var[co] = 0.75f;
      }
      bn->attr.batchnorm.eps = 0.25f;
    } else { /* a new batchnorm after the conv, its readers rewired */
      const char *nm = g->nodes[i].name;
      int p[4];
      const char *suf[4] = {"gamma", "beta", "running_mean", "running_var"};
      ir_shape cs = {.rank = 1, .dim = {cout}};
      for (int k = 0; k < 4; k++) p[k] = ir_add_param(g, ir_fmt(g->arena, "%s/dequant/%s", nm, suf[k]), cs, 0);
      for (int64_t co = 0; co < cout; co++) {
        g->values[p[0]].data[co] = (float)m[co], g->values[p[1]].data[co] = (float)bias[co];
        g->values[p[2]].data[co] = 0.0f, g->values[p[3]].data[co] = 0.75f;
      }
      int in[5] = {out, p[0], p[1], p[2], p[3]};
      ir_attr a = {.batchnorm = {0.25f, 0.0f, 0}};
      int r = ir_add_node(g, IR_OP_batchnorm, ir_fmt(g->arena, "%s/dequant", nm), g->nodes[i].loc, in, 5, &a, d);
      if (r < 0) rc = -1;
      else {
        int bnode = g->values[r].producer;
        for (int k = 0; k < g->n_nodes; k++)
          for (int j = 0; k != bnode && j < g->nodes[k].n_in; j++)
            if (g->nodes[k].in[j] == out) g->nodes[k].in[j] = r;
        for (int o = 0; o < g->n_outputs; o++)
          if (g->outputs[o] == out) g->outputs[o] = r;
        before[added] = -1, after_[added++] = i;
      }
    }
    free(m), free(bias);
    nconv++;
  }
  if (rc == 0 && added) { /* order: quantize8 right before its first conv, batchnorm right after its conv */
    ir_node *old = malloc((size_t)g->n_nodes * sizeof *old);
    if (!old) abort();
    memcpy(old, g->nodes, (size_t)g->n_nodes * sizeof *old);
    int mm = 0;
    for (int k = 0; k < n0; k++) {
      for (int a = 0; a < added; a++)
        if (before[a] == k) g->nodes[mm++] = old[n0 + a];
      g->nodes[mm++] = old[k];
      for (int a = 0; a < added; a++)
        if (after_[a] == k) g->nodes[mm++] = old[n0 + a];
    }
    for (int i = 0; i < mm; i++) g->nodes[i].id = i, g->values[g->nodes[i].out].producer = i;
    free(old);
    if (mm != g->n_nodes) rc = ir_diag_set(d, loc, NULL, "internal error: int8 pass lost nodes");
  }
  if (rc == 0 && log) fprintf(log, "cnnc: int8: %d convs quantised, %d quantize8 nodes\n", nconv, nq);
  free(want), free(qv), free(st), free(before), free(after_);
  if (rc == 0 && ir_verify(g, d) < 0) return -1;
  return rc < 0 ? -1 : nconv;
}
