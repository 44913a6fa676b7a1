/* ref_grad.c — reference kernels of the backward ops (docs/training.md): conv data/weight
 * gradients, reduce-to-shape, activation, pooling, normalisation, dense, softmax and loss
 * gradients.  Readable loops, one double accumulator per result element; statistics are
 * recomputed from x exactly as ref_norm.c computes them in the forward pass. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ref_util.h"

static double *dzeros(int64_t n) {
  double *p = calloc((size_t)(n > 0 ? n : 1), sizeof *p);
  if (!p) abort();
  return p;
}

static void store(float *out, const double *acc, int64_t n) {
  for (int64_t i = 0; i < n; i++) out[i] = (float)acc[i];
}

static double sigmoid(double x) { return 1.0 / (1.0 + exp(-x)); }

/* ---- conv ----------------------------------------------------------------------------------- */
typedef struct cgeom {
  int64_t n, cin, h, w, cout, oh, ow, cin_g, cout_g, kh, kw;
} cgeom;

static cgeom cgeom_of(const ir_conv2d_attr *a, const ir_shape *x, const ir_shape *dy) {
  int64_t groups = a->groups > 0 ? a->groups : 1;
  cgeom c = {x->dim[0], x->dim[1], x->dim[2], x->dim[3], dy->dim[1], dy->dim[2], dy->dim[3], 0, 0, a->kernel[0], a->kernel[1]};
  c.cin_g = c.cin / groups;
  c.cout_g = c.cout / groups;
  return c;
}

/* Calls visit for every (b, co, ci (absolute), ky, kx, oy, ox, iy, ix) whose tap is inside the
 * input: the forward conv's multiply list, walked by both gradients. */
#define CONV_TAPS(a, c, BODY)                                                                            \
  for (int64_t b = 0; b < (c).n; b++)                                                                     \
    for (int64_t co = 0; co < (c).cout; co++)                                                             \
      for (int64_t cil = 0; cil < (c).cin_g; cil++)                                                       \
        for (int64_t ky = 0; ky < (c).kh; ky++)                                                           \
          for (int64_t kx = 0; kx < (c).kw; kx++)                                                         \
            for (int64_t oy = 0; oy < (c).oh; oy++) {                                                     \
              int64_t iy = oy * (a)->stride[0] - (a)->pad[0] + ky * (a)->dilation[0];                     \
              if (iy < 0 || iy >= (c).h) continue;                                                        \
              for (int64_t ox = 0; ox < (c).ow; ox++) {                                                   \
                int64_t ix = ox * (a)->stride[1] - (a)->pad[1] + kx * (a)->dilation[1];                   \
                if (ix < 0 || ix >= (c).w) continue;                                                      \
                int64_t ci = (co / (c).cout_g) * (c).cin_g + cil;                                         \
                int64_t yi = ((b * (c).cout + co) * (c).oh + oy) * (c).ow + ox;                           \
                int64_t xi = ((b * (c).cin + ci) * (c).h + iy) * (c).w + ix;                              \
                int64_t wi = ((co * (c).cin_g + cil) * (c).kh + ky) * (c).kw + kx;                        \
                BODY;                                                                                     \
              }                                                                                           \
            }

/* in: dy [N,Cout,OH,OW], w [Cout,Cin/g,KH,KW]; out dx [N,Cin,H,W] (attr x_shape). */
void ir_ref_conv2d_grad_input(const ir_graph *g, const ir_node *n, const float *const *in, float *out) {
  const ir_conv2d_grad_attr *at = &n->attr.conv2d_grad_input;
  const ir_conv2d_attr *a = &at->conv;
  cgeom c = cgeom_of(a, &at->x_shape, ref_in_shape(g, n, 0));
  int64_t k = ir_shape_numel(&at->x_shape);
  int64_t kb = g->half_partials && g->partial_kblock ? g->partial_kblock[n->id] : 0;
  if (kb > 0 && c.kh == 1 && c.kw == 1 && c.oh == c.h && c.ow == c.w && c.cin_g == c.cin) {
    /* --enable-half-partials, a 1x1 stride-1 grad_input run by the K-blocked row (codegen/
     * conv/chanvec_row.c via gen_train_pconv.c): the sum over the output channels is rounded to
     * the 16-bit format before each later block of kb of them */
    int64_t hw = c.h * c.w;
    for (int64_t b = 0; b < c.n; b++)
      for (int64_t ci = 0; ci < c.cin; ci++)
        for (int64_t p = 0; p < hw; p++) {
          double s = 0;
          for (int64_t co = 0; co < c.cout; co++) {
            if (co > 0 && co % kb == 0) s = ir_round16_f32((float)s, g->half_partials - 1);
            s += (double)in[0][(b * c.cout + co) * hw + p] * (double)in[1][co * c.cin + ci];
          }
          out[(b * c.cin + ci) * hw + p] = (float)s;
        }
    return;
  }
  double *acc = dzeros(k);
  CONV_TAPS(a, c, acc[xi] += (double)in[0][yi] * (double)in[1][wi])
  store(out, acc, k);
  free(acc);
}

/* --enable-half-partials (g->half_partials; docs/precision.md): dw formed as the compiled
 * grad_weight kernels form it (codegen/gen_train_conv.c, gen_train_gconv.c).  Per weight,
 * V = g->partial_lanes lane partials: lane = output column mod V (pixel-vector loops from column
 * 0), or flat pixel mod V in the 1x1 stride-1 unpadded GEMM of groups 1.  They live in memory
 * between images (the GEMM: also between chunks of GW_CHUNK pixels) and are rounded to the
 * 16-bit format where they are reloaded; the lanes are summed once at the end (not rounded). */
#define GW_CHUNK 256 /* gen_train_conv.c G1_CH */
#define GW_MAX_LANES 64
static void conv_grad_weight_half(const ir_graph *g, const ir_conv2d_attr *a, const cgeom *c, const float *dy,
                                  const float *x, float *out) {
  int V = g->partial_lanes > 0 && g->partial_lanes <= GW_MAX_LANES ? g->partial_lanes : 8, fmt = g->half_partials - 1;
  int gemm = a->groups <= 1 && c->kh == 1 && c->kw == 1 && a->stride[0] == 1 && a->stride[1] == 1 && !a->pad[0] &&
             !a->pad[1] && !a->pad[2] && !a->pad[3];
  for (int64_t co = 0; co < c->cout; co++)
    for (int64_t cil = 0; cil < c->cin_g; cil++)
      for (int64_t ky = 0; ky < c->kh; ky++)
        for (int64_t kx = 0; kx < c->kw; kx++) {
          float part[GW_MAX_LANES] = {0};
          double seg[GW_MAX_LANES] = {0};
          int64_t ci = (co / c->cout_g) * c->cin_g + cil;
          for (int64_t b = 0; b < c->n; b++) {
            int64_t cur = 0; /* the segment being summed: the chunk of the GEMM */
            for (int64_t oy = 0; oy < c->oh; oy++) {
              int64_t iy = oy * a->stride[0] - a->pad[0] + ky * a->dilation[0];
              if (iy < 0 || iy >= c->h) continue;
              for (int64_t ox = 0; ox < c->ow; ox++) {
                int64_t ix = ox * a->stride[1] - a->pad[1] + kx * a->dilation[1], p = oy * c->ow + ox;
                if (ix < 0 || ix >= c->w) continue;
                if (gemm && p / GW_CHUNK != cur) { /* the kernel stores the chunk's partials and reloads them */
                  for (int l = 0; l < V; l++) part[l] = (float)((double)ir_round16_f32(part[l], fmt) + seg[l]), seg[l] = 0;
                  cur = p / GW_CHUNK;
                }
                seg[(gemm ? p : ox) % V] += (double)dy[((b * c->cout + co) * c->oh + oy) * c->ow + ox] *
                                            (double)x[((b * c->cin + ci) * c->h + iy) * c->w + ix];
              }
            }
            for (int l = 0; l < V; l++) part[l] = (float)((double)ir_round16_f32(part[l], fmt) + seg[l]), seg[l] = 0;
          }
          double sum = 0;
          for (int l = 0; l < V; l++) sum += part[l];
          out[((co * c->cin_g + cil) * c->kh + ky) * c->kw + kx] = (float)sum;
        }
}

/* in: dy [N,Cout,OH,OW], x [N,Cin,H,W]; out dw [Cout,Cin/g,KH,KW]. */
void ir_ref_conv2d_grad_weight(const ir_graph *g, const ir_node *n, const float *const *in, float *out) {
  const ir_conv2d_attr *a = &n->attr.conv2d_grad_weight.conv;
  cgeom c = cgeom_of(a, ref_in_shape(g, n, 1), ref_in_shape(g, n, 0));
  if (g->half_partials) {
    conv_grad_weight_half(g, a, &c, in[0], in[1], out);
    return;
  }
  int64_t k = ir_shape_numel(ref_out_shape(g, n));
  double *acc = dzeros(k);
  CONV_TAPS(a, c, acc[wi] += (double)in[0][yi] * (double)in[1][xi])
  store(out, acc, k);
  free(acc);
}

/* in: x [shape]; out [attr shape] (same rank): the sum over the dims where the target is 1. */
void ir_ref_reduce_sum(const ir_graph *g, const ir_node *n, const float *const *in, float *out) {
  const ir_shape *xs = ref_in_shape(g, n, 0), *ys = ref_out_shape(g, n);
  int64_t k = ir_shape_numel(xs), m = ir_shape_numel(ys);
  double *acc = dzeros(m);
  for (int64_t i = 0; i < k; i++) {
    int64_t rest = i, j = 0, stride = 1;
    for (int d = xs->rank - 1; d >= 0; d--) {
      int64_t id = rest % xs->dim[d];
      rest /= xs->dim[d];
      if (ys->dim[d] != 1) j += id * stride;
      stride *= ys->dim[d];
    }
    acc[j] += in[0][i];
  }
  store(out, acc, m);
  free(acc);
}

/* ---- element-wise --------------------------------------------------------------------------- */
/* in: dy, x (forward input); out dy * relu'(x), relu'(x) = 1 for x > 0 (as PyTorch). */
void ir_ref_relu_grad(const ir_graph *g, const ir_node *n, const float *const *in, float *out) {
  int64_t k = ir_shape_numel(ref_out_shape(g, n));
  for (int64_t i = 0; i < k; i++) out[i] = in[1][i] > 0.0f ? in[0][i] : 0.0f;
}

/* The gradients of PyTorch's hardtanh (relu6), hardsigmoid and hardswish: 0 at and beyond
 * the kinks' outer sides, as torch's backward kernels. */
void ir_ref_clip_grad(const ir_graph *g, const ir_node *n, const float *const *in, float *out) {
  int64_t k = ir_shape_numel(ref_out_shape(g, n));
  float lo = n->attr.clip.lo, hi = n->attr.clip.hi;
  for (int64_t i = 0; i < k; i++) out[i] = in[1][i] > lo && in[1][i] < hi ? in[0][i] : 0.0f;
}

void ir_ref_hardsigmoid_grad(const ir_graph *g, const ir_node *n, const float *const *in, float *out) {
  int64_t k = ir_shape_numel(ref_out_shape(g, n));
  float a = n->attr.hardsigmoid.alpha, b = n->attr.hardsigmoid.beta;
  for (int64_t i = 0; i < k; i++) {
    float t = fmaf(a, in[1][i], b);
    out[i] = t > 0.0f && t < 1.0f ? in[0][i] * a : 0.0f;
  }
}

void ir_ref_leaky_relu_grad(const ir_graph *g, const ir_node *n, const float *const *in, float *out) {
  int64_t k = ir_shape_numel(ref_out_shape(g, n));
  for (int64_t i = 0; i < k; i++) out[i] = in[1][i] > 0.0f ? in[0][i] : n->attr.leaky_relu.alpha * in[0][i];
}

void ir_ref_hardswish_grad(const ir_graph *g, const ir_node *n, const float *const *in, float *out) {
  int64_t k = ir_shape_numel(ref_out_shape(g, n));
  for (int64_t i = 0; i < k; i++) {
    float x = in[1][i];
    out[i] = x < -3.0f ? 0.0f : x > 3.0f ? in[0][i] : in[0][i] * fmaf(x, 1.0f / 3.0f, 0.5f);
  }
}

void ir_ref_sigmoid_grad(const ir_graph *g, const ir_node *n, const float *const *in, float *out) {
  int64_t k = ir_shape_numel(ref_out_shape(g, n));
  for (int64_t i = 0; i < k; i++) {
    double s = sigmoid(in[1][i]);
    out[i] = (float)(in[0][i] * s * (1.0 - s));
  }
}

void ir_ref_swish_grad(const ir_graph *g, const ir_node *n, const float *const *in, float *out) {
  int64_t k = ir_shape_numel(ref_out_shape(g, n));
  for (int64_t i = 0; i < k; i++) {
    double x = in[1][i], s = sigmoid(x);
    out[i] = (float)(in[0][i] * (s + x * s * (1.0 - s)));
  }
}

/* in: dy [..., K], y = softmax(x) [..., K]; out y * (dy - sum_j dy_j y_j) per row. */
void ir_ref_softmax_grad(const ir_graph *g, const ir_node *n, const float *const *in, float *out) {
  const ir_shape *s = ref_out_shape(g, n);
  int64_t k = s->dim[s->rank - 1], rows = ir_shape_numel(s) / k;
  for (int64_t r = 0; r < rows; r++) {
    const float *dy = in[0] + r * k, *y = in[1] + r * k;
    double dot = 0.0;
    for (int64_t j = 0; j < k; j++) dot += (double)dy[j] * y[j];
    for (int64_t j = 0; j < k; j++) out[r * k + j] = (float)(y[j] * (dy[j] - dot));
  }
}

/* in: dy [..., K], y = log_softmax(x) [..., K]; out dy - exp(y) * sum_j dy_j per row. */
void ir_ref_log_softmax_grad(const ir_graph *g, const ir_node *n, const float *const *in, float *out) {
  const ir_shape *s = ref_out_shape(g, n);
  int64_t k = s->dim[s->rank - 1], rows = ir_shape_numel(s) / k;
  for (int64_t r = 0; r < rows; r++) {
    const float *dy = in[0] + r * k, *y = in[1] + r * k;
    double sum = 0.0;
    for (int64_t j = 0; j < k; j++) sum += dy[j];
    for (int64_t j = 0; j < k; j++) out[r * k + j] = (float)(dy[j] - exp((double)y[j]) * sum);
  }
}

/* in: logits [N,K], labels [N]; out d(mean loss)/dlogits * scale = (softmax - target) * scale / N
 * with target = (1-s) onehot(label) + s/K.  Mixed labels [N,3] (a, b, lam): target =
 * (1-s) (lam onehot(a) + (1-lam) onehot(b)) + s/K.  An invalid label gives a NaN row. */
void ir_ref_softmax_xent_grad(const ir_graph *g, const ir_node *n, const float *const *in, float *out) {
  const ir_shape *xs = ref_in_shape(g, n, 0);
  int64_t nb = xs->dim[0], k = xs->dim[1];
  int w = ir_label_width(ref_in_shape(g, n, 1));
  double s = n->attr.softmax_xent_grad.label_smoothing, scale = n->attr.softmax_xent_grad.scale / (double)nb;
  for (int64_t b = 0; b < nb; b++) {
    const float *x = in[0] + b * k, *y = in[1] + b * w;
    float la = y[0], lb = w == 3 ? y[1] : y[0];
    double lam = w == 3 ? y[2] : 1.0;
    int valid = la >= 0.0f && la < (float)k && lb >= 0.0f && lb < (float)k;
    double mx = -INFINITY, sum = 0.0;
    for (int64_t j = 0; j < k; j++)
      if (x[j] > mx) mx = x[j];
    for (int64_t j = 0; j < k; j++) sum += exp(x[j] - mx);
    for (int64_t j = 0; j < k; j++) {
      double hot = (valid && j == (int64_t)la ? lam : 0.0) + (valid && j == (int64_t)lb ? 1.0 - lam : 0.0);
      double t = s / (double)k + (1.0 - s) * hot;
      out[b * k + j] = valid ? (float)((exp(x[j] - mx) / sum - t) * scale) : NAN;
    }
  }
}

/* ---- pooling -------------------------------------------------------------------------------- */
/* The window of output (oy, ox) as ref_pool.c clips it: real pixels [y0,y1) x [x0,x1) and the
 * count inside the padded input. */
typedef struct pwin { int64_t y0, y1, x0, x1, padded; } pwin;

static pwin pool_window(const ir_pool_attr *a, int64_t h, int64_t w, int64_t oy, int64_t ox) {
  int64_t ys = oy * a->stride[0] - a->pad[0], xs = ox * a->stride[1] - a->pad[1];
  int64_t ye = ys + a->kernel[0], xe = xs + a->kernel[1];
  if (ye > h + a->pad[2]) ye = h + a->pad[2];
  if (xe > w + a->pad[3]) xe = w + a->pad[3];
  pwin p = {ys < 0 ? 0 : ys, ye > h ? h : ye, xs < 0 ? 0 : xs, xe > w ? w : xe, (ye - ys) * (xe - xs)};
  return p;
}

/* The backward of max or average pooling with attributes a: out dx [N,C,H,W] (the node's
 * result) from dy = in[0] [N,C,OH,OW] and, for max, x = in[1]; each window's dy goes
 *   max: to the element the forward picked (ir_ref_pool_argmax: the first maximum, scan
 *        order y then x);
 *   avg: divided by the window's count, to each of its real pixels. */
static void pool_grad(const ir_graph *g, const ir_node *n, const ir_pool_attr *a, int is_max, const float *const *in,
                      float *out) {
  const ir_shape *xs = ref_out_shape(g, n), *ys = ref_in_shape(g, n, 0);
  int64_t planes = xs->dim[0] * xs->dim[1], h = xs->dim[2], w = xs->dim[3], oh = ys->dim[2], ow = ys->dim[3];
  double *acc = dzeros(planes * h * w);
  for (int64_t p = 0; p < planes; p++)
    for (int64_t oy = 0; oy < oh; oy++)
      for (int64_t ox = 0; ox < ow; ox++) {
        pwin wi = pool_window(a, h, w, oy, ox);
        double dy = in[0][(p * oh + oy) * ow + ox], *dx = acc + p * h * w;
        if (is_max) { /* the forward's pick (dilated windows too) */
          int64_t at = ir_ref_pool_argmax(a, in[1] + p * h * w, h, w, oy, ox);
          if (at >= 0) dx[at] += dy;
          continue;
        }
        int64_t count = a->count_include_pad ? wi.padded : (wi.y1 - wi.y0) * (wi.x1 - wi.x0);
        if (count <= 0) continue;
        double v = dy / (double)count;
        for (int64_t y = wi.y0; y < wi.y1; y++)
          for (int64_t x = wi.x0; x < wi.x1; x++) dx[y * w + x] += v;
      }
  store(out, acc, planes * h * w);
  free(acc);
}

/* in: dy [N,C,OH,OW], x [N,C,H,W]; out dx. */
void ir_ref_maxpool_grad(const ir_graph *g, const ir_node *n, const float *const *in, float *out) {
  pool_grad(g, n, &n->attr.maxpool_grad.pool, 1, in, out);
}

/* in: dy [N,C,OH,OW]; out dx [attr x_shape]. */
void ir_ref_avgpool_grad(const ir_graph *g, const ir_node *n, const float *const *in, float *out) {
  pool_grad(g, n, &n->attr.avgpool_grad.pool, 0, in, out);
}

/* in: dy [N,C,1,1]; out [N,C,H,W] = dy / (H*W). */
void ir_ref_global_avgpool_grad(const ir_graph *g, const ir_node *n, const float *const *in, float *out) {
  const ir_shape *xs = ref_out_shape(g, n);
  int64_t planes = xs->dim[0] * xs->dim[1], hw = ref_inner(xs, 2);
  for (int64_t p = 0; p < planes; p++)
    for (int64_t i = 0; i < hw; i++) out[p * hw + i] = (float)(in[0][p] / (double)hw);
}

/* ---- normalisation -------------------------------------------------------------------------- */
/* Mean and biased variance of the m values x[off(i)], i < m, in two passes (as ref_norm.c). */
typedef struct nstats { double mean, inv; } nstats;

static nstats stats_of(const float *x, int64_t nb, int64_t stride_b, int64_t len, double eps) {
  double sum = 0.0, sq = 0.0, m = (double)(nb * len);
  for (int64_t b = 0; b < nb; b++)
    for (int64_t i = 0; i < len; i++) sum += x[b * stride_b + i];
  double mean = sum / m;
  for (int64_t b = 0; b < nb; b++)
    for (int64_t i = 0; i < len; i++) {
      double d = x[b * stride_b + i] - mean;
      sq += d * d;
    }
  return (nstats){mean, 1.0 / sqrt(sq / m + eps)};
}

/* Batchnorm statistics of channel c: batch ones in training, running ones otherwise. */
static nstats bn_stats(const ir_node *n, const float *const *in, int first_running, const ir_shape *xs, int64_t c) {
  const ir_batchnorm_attr *a = &n->attr.batchnorm_grad_input;
  int64_t nc = xs->dim[1], s = ref_inner(xs, 2);
  if (a->training) return stats_of(in[1] + c * s, xs->dim[0], nc * s, s, a->eps);
  return (nstats){in[first_running][c], 1.0 / sqrt((double)in[first_running + 1][c] + a->eps)};
}

/* in: dy, x [N,C,...], gamma [C][, running_mean, running_var]; out dx.  Training:
 * dx = gamma*inv/M * (M dy - sum dy - xhat * sum(dy xhat)) over the channel's M values;
 * running statistics (constants): dx = dy * gamma * inv. */
void ir_ref_batchnorm_grad_input(const ir_graph *g, const ir_node *n, const float *const *in, float *out) {
  const ir_shape *xs = ref_in_shape(g, n, 0);
  int64_t nb = xs->dim[0], nc = xs->dim[1], s = ref_inner(xs, 2);
  double m = (double)(nb * s);
  for (int64_t c = 0; c < nc; c++) {
    nstats st = bn_stats(n, in, 3, xs, c);
    double sdy = 0.0, sdyx = 0.0;
    for (int64_t b = 0; b < nb; b++)
      for (int64_t i = 0; i < s; i++) {
        int64_t k = (b * nc + c) * s + i;
        sdy += in[0][k];
        sdyx += in[0][k] * (in[1][k] - st.mean) * st.inv;
      }
    double gi = in[2][c] * st.inv;
    for (int64_t b = 0; b < nb; b++)
      for (int64_t i = 0; i < s; i++) {
        int64_t k = (b * nc + c) * s + i;
        double xhat = (in[1][k] - st.mean) * st.inv;
        out[k] = (float)(n->attr.batchnorm_grad_input.training ? gi * (in[0][k] - sdy / m - xhat * sdyx / m) : gi * in[0][k]);
      }
  }
}

/* in: dy, x [N,C,...][, running_mean, running_var]; out [C] = sum dy * xhat. */
void ir_ref_batchnorm_grad_gamma(const ir_graph *g, const ir_node *n, const float *const *in, float *out) {
  const ir_shape *xs = ref_in_shape(g, n, 0);
  int64_t nb = xs->dim[0], nc = xs->dim[1], s = ref_inner(xs, 2);
  for (int64_t c = 0; c < nc; c++) {
    nstats st = bn_stats(n, in, 2, xs, c);
    double acc = 0.0;
    for (int64_t b = 0; b < nb; b++)
      for (int64_t i = 0; i < s; i++) {
        int64_t k = (b * nc + c) * s + i;
        acc += in[0][k] * (in[1][k] - st.mean) * st.inv;
      }
    out[c] = (float)acc;
  }
}

/* in: dy, x [N,C,H,W], gamma [C]; out dx.  Per (sample, group) of M = C/G*H*W values, with
 * dxhat = dy*gamma: dx = inv/M * (M dxhat - sum dxhat - xhat * sum(dxhat xhat)). */
void ir_ref_groupnorm_grad_input(const ir_graph *g, const ir_node *n, const float *const *in, float *out) {
  const ir_shape *xs = ref_in_shape(g, n, 0);
  int64_t nb = xs->dim[0], nc = xs->dim[1], s = ref_inner(xs, 2), groups = n->attr.groupnorm.groups, cg = nc / groups;
  double m = (double)(cg * s);
  for (int64_t b = 0; b < nb; b++)
    for (int64_t gi = 0; gi < groups; gi++) {
      int64_t base = (b * nc + gi * cg) * s;
      nstats st = stats_of(in[1] + base, 1, 0, cg * s, n->attr.groupnorm.eps);
      double sd = 0.0, sdx = 0.0;
      for (int64_t j = 0; j < cg * s; j++) {
        double dxh = in[0][base + j] * in[2][gi * cg + j / s];
        sd += dxh;
        sdx += dxh * (in[1][base + j] - st.mean) * st.inv;
      }
      for (int64_t j = 0; j < cg * s; j++) {
        double dxh = in[0][base + j] * in[2][gi * cg + j / s], xhat = (in[1][base + j] - st.mean) * st.inv;
        out[base + j] = (float)(st.inv * (dxh - sd / m - xhat * sdx / m));
      }
    }
}

/* in: dy, x [N,C,H,W]; out [C] = sum over samples and pixels of dy * xhat. */
void ir_ref_groupnorm_grad_gamma(const ir_graph *g, const ir_node *n, const float *const *in, float *out) {
  const ir_shape *xs = ref_in_shape(g, n, 0);
  int64_t nb = xs->dim[0], nc = xs->dim[1], s = ref_inner(xs, 2), groups = n->attr.groupnorm.groups, cg = nc / groups;
  double *acc = dzeros(nc);
  if (g->half_partials) { /* the compiled kernel keeps the sum over the samples before b in out, 16-bit (docs/precision.md) */
    for (int64_t ch = 0; ch < nc; ch++) out[ch] = 0.0f;
    for (int64_t b = 0; b < nb; b++) {
      memset(acc, 0, (size_t)nc * sizeof *acc);
      for (int64_t gi = 0; gi < groups; gi++) {
        int64_t base = (b * nc + gi * cg) * s;
        nstats st = stats_of(in[1] + base, 1, 0, cg * s, n->attr.groupnorm.eps);
        for (int64_t j = 0; j < cg * s; j++) acc[gi * cg + j / s] += in[0][base + j] * (in[1][base + j] - st.mean) * st.inv;
      }
      for (int64_t ch = 0; ch < nc; ch++) out[ch] = ir_round16_f32(out[ch], g->half_partials - 1) + (float)acc[ch];
    }
    free(acc);
    return;
  }
  for (int64_t b = 0; b < nb; b++)
    for (int64_t gi = 0; gi < groups; gi++) {
      int64_t base = (b * nc + gi * cg) * s;
      nstats st = stats_of(in[1] + base, 1, 0, cg * s, n->attr.groupnorm.eps);
      for (int64_t j = 0; j < cg * s; j++) acc[gi * cg + j / s] += in[0][base + j] * (in[1][base + j] - st.mean) * st.inv;
    }
  store(out, acc, nc);
  free(acc);
}

/* ---- dense ---------------------------------------------------------------------------------- */
/* in: dy [N,Out], w [Out,In]; out dx [N,In] = dy w. */
void ir_ref_dense_grad_input(const ir_graph *g, const ir_node *n, const float *const *in, float *out) {
  const ir_shape *ws = ref_in_shape(g, n, 1);
  int64_t nb = ref_in_shape(g, n, 0)->dim[0], mo = ws->dim[0], k = ws->dim[1];
  double *acc = dzeros(k);
  for (int64_t b = 0; b < nb; b++) {
    memset(acc, 0, (size_t)k * sizeof *acc);
    for (int64_t o = 0; o < mo; o++) {
      double d = in[0][b * mo + o];
      const float *wr = in[1] + o * k;
      for (int64_t i = 0; i < k; i++) acc[i] += d * wr[i];
    }
    store(out + b * k, acc, k);
  }
  free(acc);
}

/* in: dy [N,Out], x [N,In]; out dw [Out,In] = dy^T x. */
void ir_ref_dense_grad_weight(const ir_graph *g, const ir_node *n, const float *const *in, float *out) {
  const ir_shape *ys = ref_in_shape(g, n, 0), *xs = ref_in_shape(g, n, 1);
  int64_t nb = ys->dim[0], mo = ys->dim[1], k = xs->dim[1];
  double *acc = dzeros(mo * k);
  for (int64_t b = 0; b < nb; b++)
    for (int64_t o = 0; o < mo; o++) {
      double d = in[0][b * mo + o];
      const float *xr = in[1] + b * k;
      for (int64_t i = 0; i < k; i++) acc[o * k + i] += d * xr[i];
    }
  store(out, acc, mo * k);
  free(acc);
}
