/* ref_dense.c — reference fully connected layer (PyTorch's nn.Linear: w [Out,In]), the
 * numerically stable softmax over the last axis, and the mean softmax cross-entropy with
 * label smoothing as torch.nn.CrossEntropyLoss(label_smoothing=s).  Double accumulation,
 * every sum in index order. */
#include <math.h>

#include "ref_util.h"

#define DENSE_UNITS 4 /* output units computed side by side */

/* y[j] = bias[j] + sum_i x[i] * w[j, i] for the DENSE_UNITS rows of w (bias may be NULL).
 * Each sum runs over i in order, as for a single unit; the units only share the loads of x
 * and keep the floating-point adders busy with independent sums. */
static void dense_units(const float *x, const float *w, const float *bias, int64_t k, float *y) {
  double acc[DENSE_UNITS];
  for (int j = 0; j < DENSE_UNITS; j++) acc[j] = bias ? bias[j] : 0.0;
  for (int64_t i = 0; i < k; i++)
    for (int j = 0; j < DENSE_UNITS; j++) acc[j] += (double)x[i] * (double)w[j * k + i];
  for (int j = 0; j < DENSE_UNITS; j++) y[j] = (float)acc[j];
}

/* bias + sum_i x[i] * w[i] for one unit (w its row of weights). */
static float dense_unit(const float *x, const float *w, double bias, int64_t k) {
  double acc = bias;
  for (int64_t i = 0; i < k; i++) acc += (double)x[i] * (double)w[i];
  return (float)acc;
}

/* in: x [N,In] (any [N,...] is read as [N, numel/N]), w [Out,In], optional b [Out];
 * out [N,Out]. */
void ir_ref_dense(const ir_graph *g, const ir_node *n, const float *const *in, float *out) {
  const ir_shape *xs = ref_in_shape(g, n, 0), *ws = ref_in_shape(g, n, 1);
  int64_t nb = xs->dim[0], k = ir_shape_numel(xs) / nb, m = ws->dim[0];
  const float *w = in[1], *bias = n->n_in > 2 ? in[2] : NULL;
  for (int64_t b = 0; b < nb; b++) {
    const float *x = in[0] + b * k;
    float *y = out + b * m;
    int64_t o = 0;
    for (; o + DENSE_UNITS <= m; o += DENSE_UNITS) dense_units(x, w + o * k, bias ? bias + o : NULL, k, y + o);
    for (; o < m; o++) y[o] = dense_unit(x, w + o * k, bias ? bias[o] : 0.0, k);
  }
}

/* log(sum_j exp(row[j])) computed as max + log(sum exp(row - max)). */
static double log_sum_exp(const float *row, int64_t k) {
  double mx = -INFINITY, s = 0.0;
  for (int64_t j = 0; j < k; j++)
    if (row[j] > mx) mx = row[j];
  if (isinf(mx)) return mx;
  for (int64_t j = 0; j < k; j++) s += exp(row[j] - mx);
  return mx + log(s);
}

/* in: x [..., K]; out [..., K], each row exp(x - logsumexp(x)). */
void ir_ref_softmax(const ir_graph *g, const ir_node *n, const float *const *in, float *out) {
  const ir_shape *xs = ref_in_shape(g, n, 0);
  int64_t k = xs->dim[xs->rank - 1], rows = ir_shape_numel(xs) / k;
  for (int64_t r = 0; r < rows; r++) {
    const float *x = in[0] + r * k;
    double lse = log_sum_exp(x, k);
    for (int64_t j = 0; j < k; j++) out[r * k + j] = (float)exp(x[j] - lse);
  }
}

/* in: x [..., K]; out [..., K], each row x - logsumexp(x). */
void ir_ref_log_softmax(const ir_graph *g, const ir_node *n, const float *const *in, float *out) {
  const ir_shape *xs = ref_in_shape(g, n, 0);
  int64_t k = xs->dim[xs->rank - 1], rows = ir_shape_numel(xs) / k;
  for (int64_t r = 0; r < rows; r++) {
    const float *x = in[0] + r * k;
    double lse = log_sum_exp(x, k);
    for (int64_t j = 0; j < k; j++) out[r * k + j] = (float)(x[j] - lse);
  }
}

/* in: x [..., K]; out [..., K], each row 1 at its first maximum (x[j] > every earlier x: NaN
 * never wins after j = 0), 0 elsewhere. */
void ir_ref_hardmax(const ir_graph *g, const ir_node *n, const float *const *in, float *out) {
  const ir_shape *xs = ref_in_shape(g, n, 0);
  int64_t k = xs->dim[xs->rank - 1], rows = ir_shape_numel(xs) / k;
  for (int64_t r = 0; r < rows; r++) {
    const float *x = in[0] + r * k;
    int64_t best = 0;
    for (int64_t j = 1; j < k; j++)
      if (x[j] > x[best]) best = j;
    for (int64_t j = 0; j < k; j++) out[r * k + j] = j == best ? 1.0f : 0.0f;
  }
}

/* Loss of one sample: (1-s) * -log p[y] + s * mean_j(-log p[j]).  A label that is not a
 * class id in [0,K) gives NaN (visible, never an out-of-bounds read). */
static double xent_row(const float *x, int64_t k, float label, double s) {
  double lse = log_sum_exp(x, k), sum_logp = 0.0;
  if (!(label >= 0.0f && label < (float)k)) return NAN;
  int64_t y = (int64_t)label;
  for (int64_t j = 0; j < k; j++) sum_logp += x[j] - lse;
  return (1.0 - s) * -(x[y] - lse) + s * -(sum_logp / (double)k);
}

/* in: logits [N,K], labels [N] (f32 class ids) or [N,3] mixed labels (a, b, lam: the loss
 * lam xent_row(a) + (1-lam) xent_row(b), mixup's); out [1] = mean over N of the rows. */
void ir_ref_softmax_xent(const ir_graph *g, const ir_node *n, const float *const *in, float *out) {
  const ir_shape *xs = ref_in_shape(g, n, 0);
  int64_t nb = xs->dim[0], k = ir_shape_numel(xs) / nb;
  int w = ir_label_width(ref_in_shape(g, n, 1));
  double total = 0.0, s = n->attr.softmax_xent.label_smoothing;
  for (int64_t b = 0; b < nb; b++) {
    const float *x = in[0] + b * k, *y = in[1] + b * w;
    if (w == 1) total += xent_row(x, k, y[0], s);
    else total += (double)y[2] * xent_row(x, k, y[0], s) + (1.0 - (double)y[2]) * xent_row(x, k, y[1], s);
  }
  out[0] = (float)(total / (double)nb);
}
