/* ref_norm.c — reference batch and group normalisation with PyTorch semantics.  Batchnorm
 * in training uses the biased batch variance to normalise and folds the unbiased one into
 * running_var (and the mean into running_mean) in the graph's parameter data, with
 * momentum as in torch.nn.BatchNorm2d.  Statistics are accumulated in double. */
#include <math.h>

#include "ref_util.h"

/* Mean and biased variance of the channel c of x [N,C,S] (S = product of spatial dims). */
static void channel_stats(const float *x, int64_t n, int64_t c_count, int64_t s, int64_t c, double *mean,
                          double *var) {
  double sum = 0.0, sq = 0.0;
  for (int64_t b = 0; b < n; b++)
    for (int64_t i = 0; i < s; i++) sum += x[(b * c_count + c) * s + i];
  double m = sum / (double)(n * s);
  for (int64_t b = 0; b < n; b++)
    for (int64_t i = 0; i < s; i++) {
      double d = x[(b * c_count + c) * s + i] - m;
      sq += d * d;
    }
  *mean = m;
  *var = sq / (double)(n * s);
}

/* running = (1-momentum)*running + momentum*batch; the variance term is unbiased
 * (count/(count-1)); with a single value per channel the biased one is used. */
static void update_running(const ir_graph *g, const ir_node *n, int64_t c, double mean, double var, int64_t count) {
  float *rm = g->values[n->in[3]].data, *rv = g->values[n->in[4]].data;
  double mom = n->attr.batchnorm.momentum;
  double unbiased = count > 1 ? var * (double)count / (double)(count - 1) : var;
  if (rm) rm[c] = (float)((1.0 - mom) * rm[c] + mom * mean);
  if (rv) rv[c] = (float)((1.0 - mom) * rv[c] + mom * unbiased);
}

/* in: x [N,C,...], gamma [C], beta [C], running_mean [C], running_var [C]; out like x.
 * Side effect (training only): updates running statistics in g's parameter data. */
void ir_ref_batchnorm(const ir_graph *g, const ir_node *n, const float *const *in, float *out) {
  const ir_batchnorm_attr *a = &n->attr.batchnorm;
  const ir_shape *xs = ref_in_shape(g, n, 0);
  int64_t nb = xs->dim[0], nc = xs->dim[1], s = ref_inner(xs, 2);
  for (int64_t c = 0; c < nc; c++) {
    double mean = in[3][c], var = in[4][c];
    if (a->training) channel_stats(in[0], nb, nc, s, c, &mean, &var);
    double scale = in[1][c] / sqrt(var + (double)a->eps), shift = in[2][c];
    for (int64_t b = 0; b < nb; b++)
      for (int64_t i = 0; i < s; i++) {
        int64_t k = (b * nc + c) * s + i;
        out[k] = (float)((in[0][k] - mean) * scale + shift);
      }
    if (a->training) update_running(g, n, c, mean, var, nb * s);
  }
}

/* in: x [N,C,...], gamma [C], beta [C]; out like x.  Statistics per (sample, group) over
 * C/groups channels and all spatial positions; biased variance. */
void ir_ref_groupnorm(const ir_graph *g, const ir_node *n, const float *const *in, float *out) {
  const ir_groupnorm_attr *a = &n->attr.groupnorm;
  const ir_shape *xs = ref_in_shape(g, n, 0);
  int64_t nb = xs->dim[0], nc = xs->dim[1], s = ref_inner(xs, 2);
  int64_t groups = a->groups > 0 ? a->groups : 1, cg = nc / groups;
  for (int64_t b = 0; b < nb; b++)
    for (int64_t gi = 0; gi < groups; gi++) {
      /* the group is a contiguous block [cg, S] of sample b; treat it as one channel */
      const float *xg = in[0] + (b * nc + gi * cg) * s;
      double mean, var;
      channel_stats(xg, 1, 1, cg * s, 0, &mean, &var);
      double inv = 1.0 / sqrt(var + (double)a->eps);
      for (int64_t c = gi * cg; c < (gi + 1) * cg; c++)
        for (int64_t i = 0; i < s; i++) {
          int64_t k = (b * nc + c) * s + i;
          out[k] = (float)((in[0][k] - mean) * inv * in[1][c] + in[2][c]);
        }
    }
}

/* lrn (ir.h ir_lrn_attr): the window sums in double.  x [N,C,S]; lo channels before c, hi
 * after (ONNX: floor((size-1)/2) and ceil((size-1)/2); PyTorch's pads agree for odd size). */
static void lrn_dims(const ir_graph *g, const ir_node *n, int64_t *nb, int64_t *C, int64_t *S, int *lo, int *hi) {
  const ir_shape *s = &g->values[n->in[n->op == IR_OP_lrn_grad]].shape;
  *nb = s->dim[0], *C = s->dim[1], *S = 1;
  for (int k = 2; k < s->rank; k++) *S *= s->dim[k];
  *lo = (n->attr.lrn.size - 1) / 2, *hi = n->attr.lrn.size - 1 - *lo;
}

static double lrn_scale(const float *x, int64_t C, int64_t S, int64_t c, int lo, int hi, const ir_lrn_attr *a) {
  double sum = 0.0;
  for (int64_t k = c - lo < 0 ? 0 : c - lo; k <= c + hi && k < C; k++) sum += (double)x[k * S] * x[k * S];
  return a->bias + (double)a->alpha / a->size * sum;
}

void ir_ref_lrn(const ir_graph *g, const ir_node *n, const float *const *in, float *out) {
  int64_t nb, C, S;
  int lo, hi;
  lrn_dims(g, n, &nb, &C, &S, &lo, &hi);
  const ir_lrn_attr *a = &n->attr.lrn;
  for (int64_t b = 0; b < nb; b++)
    for (int64_t c = 0; c < C; c++)
      for (int64_t i = 0; i < S; i++) {
        const float *x = in[0] + b * C * S + i;
        out[(b * C + c) * S + i] = (float)(x[c * S] * pow(lrn_scale(x, C, S, c, lo, hi, a), -(double)a->beta));
      }
}

/* dx_j = dy_j s_j^-beta - 2 alpha beta / size * x_j * sum over the c whose window holds j
 * (c in [j - hi, j + lo]) of dy_c x_c s_c^(-beta-1). */
void ir_ref_lrn_grad(const ir_graph *g, const ir_node *n, const float *const *in, float *out) {
  int64_t nb, C, S;
  int lo, hi;
  lrn_dims(g, n, &nb, &C, &S, &lo, &hi);
  const ir_lrn_attr *a = &n->attr.lrn;
  double k = 2.0 * a->alpha * a->beta / a->size;
  for (int64_t b = 0; b < nb; b++)
    for (int64_t i = 0; i < S; i++) {
      const float *x = in[1] + b * C * S + i, *dy = in[0] + b * C * S + i;
      for (int64_t j = 0; j < C; j++) {
        double acc = 0.0;
        for (int64_t c = j - hi < 0 ? 0 : j - hi; c <= j + lo && c < C; c++)
          acc += (double)dy[c * S] * x[c * S] * pow(lrn_scale(x, C, S, c, lo, hi, a), -(double)a->beta - 1.0);
        out[(b * C + j) * S + i] =
            (float)(dy[j * S] * pow(lrn_scale(x, C, S, j, lo, hi, a), -(double)a->beta) - k * x[j * S] * acc);
      }
    }
}
