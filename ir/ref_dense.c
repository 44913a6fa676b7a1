/* ref_dense.c — reference fully connected layer (PyTorch's nn.Linear: w [Out,In]), the
 * numerically stable softmax over the last axis, and the mean softmax cross-entropy with
 * label smoothing as torch.nn.CrossEntropyLoss(label_smoothing=s).  Double accumulation. */
#include <math.h>

#include "ref_util.h"

/* in: x [N,In] (any [N,...] is read as [N, numel/N]), w [Out,In], optional b [Out];
 * out [N,Out]. */
void ir_ref_dense(const ir_graph *g, const ir_node *n, const float *const *in, float *out) {
  const ir_shape *xs = ref_in_shape(g, n, 0), *ws = ref_in_shape(g, n, 1);
  int64_t nb = xs->dim[0], k = ir_shape_numel(xs) / nb, m = ws->dim[0];
  const float *bias = n->n_in > 2 ? in[2] : NULL;
  for (int64_t b = 0; b < nb; b++)
    for (int64_t o = 0; o < m; o++) {
      double acc = bias ? bias[o] : 0.0;
      for (int64_t i = 0; i < k; i++) acc += (double)in[0][b * k + i] * (double)in[1][o * k + i];
      out[b * m + o] = (float)acc;
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

/* Loss of one sample: (1-s) * -log p[y] + s * mean_j(-log p[j]).  A label that is not a
 * class id in [0,K) gives NaN (visible, never an out-of-bounds read). */
static double xent_row(const float *x, int64_t k, float label, double s) {
  double lse = log_sum_exp(x, k), sum_logp = 0.0;
  if (!(label >= 0.0f && label < (float)k)) return NAN;
  int64_t y = (int64_t)label;
  for (int64_t j = 0; j < k; j++) sum_logp += x[j] - lse;
  return (1.0 - s) * -(x[y] - lse) + s * -(sum_logp / (double)k);
}

/* in: logits [N,K], labels [N] (f32 class ids); out [1] = mean over N of xent_row. */
void ir_ref_softmax_xent(const ir_graph *g, const ir_node *n, const float *const *in, float *out) {
  const ir_shape *xs = ref_in_shape(g, n, 0);
  int64_t nb = xs->dim[0], k = ir_shape_numel(xs) / nb;
  double total = 0.0;
  for (int64_t b = 0; b < nb; b++) total += xent_row(in[0] + b * k, k, in[1][b], n->attr.softmax_xent.label_smoothing);
  out[0] = (float)(total / (double)nb);
}
