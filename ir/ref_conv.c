/* ref_conv.c — reference 2-D convolution with PyTorch semantics: stride, asymmetric zero
 * padding [top,left,bottom,right], dilation and groups (depthwise when groups == Cin).
 * One double accumulator per output element, summed over (ci, ky, kx) in that order.  The
 * loops go tap by tap over a whole output plane, so the innermost loop walks contiguous
 * output columns over the range whose taps fall inside the input (no branches in it).  Large
 * convs split their output channels over threads (results do not depend on the split). */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ref_util.h"

#define CONV_MAX_THREADS 8
#define CONV_MACS_PER_THREAD (1 << 22) /* below ~4M MACs a thread costs more than it saves */

/* Geometry of one conv node, read from its operand and result shapes. */
typedef struct conv_geom {
  int64_t n, cin, h, w;     /* input  [N,Cin,H,W] */
  int64_t cout, oh, ow;     /* output [N,Cout,OH,OW] */
  int64_t cin_g, cout_g;    /* channels per group */
} conv_geom;

static conv_geom conv_geometry(const ir_graph *g, const ir_node *n) {
  const ir_shape *x = ref_in_shape(g, n, 0), *y = ref_out_shape(g, n);
  int groups = n->attr.conv2d.groups > 0 ? n->attr.conv2d.groups : 1;
  conv_geom c = {x->dim[0], x->dim[1], x->dim[2], x->dim[3], y->dim[1], y->dim[2], y->dim[3], 0, 0};
  c.cin_g = c.cin / groups;
  c.cout_g = c.cout / groups;
  return c;
}

/* The outputs o in [0, n_out) whose input coordinate o * stride + offset lies in [0, n_in),
 * as the half-open range [*lo, *hi) (empty when *lo == *hi).  The coordinate grows with o,
 * so the valid outputs are contiguous. */
static void valid_range(int64_t n_out, int64_t n_in, int64_t stride, int64_t offset, int64_t *lo,
                        int64_t *hi) {
  int64_t a = 0, b = n_out;
  while (a < b && a * stride + offset < 0) a++;
  while (b > a && (b - 1) * stride + offset >= n_in) b--;
  *lo = a;
  *hi = b;
}

/* acc[oy, ox] += wv * xc[oy*sh + off_y, ox*sw + off_x] (off = k*dilation - pad) for every
 * output position whose tap is inside the [H,W] input plane xc; the others read zero
 * padding and add nothing.  acc is the [OH,OW] accumulator plane of one output channel. */
REF_VECTORIZE
static void conv_add_tap(const ir_conv2d_attr *a, const conv_geom *c, const float *xc, double wv,
                         int64_t ky, int64_t kx, double *acc) {
  int64_t sh = a->stride[0], sw = a->stride[1];
  int64_t off_y = ky * a->dilation[0] - a->pad[0], off_x = kx * a->dilation[1] - a->pad[1];
  int64_t oy0, oy1, ox0, ox1;
  valid_range(c->oh, c->h, sh, off_y, &oy0, &oy1);
  valid_range(c->ow, c->w, sw, off_x, &ox0, &ox1);
  if (oy0 == oy1 || ox0 == ox1) return;
  if (sh == 1 && sw == 1 && c->w == c->ow && ox0 == 0 && ox1 == c->ow) {
    /* Whole rows, and output row oy + 1 reads the input row after oy's: the rows form one
     * run in both planes (1x1 convs, the middle column of 3x3 ones). */
    const float *xr = xc + (oy0 + off_y) * c->w + off_x;
    double *ar = acc + oy0 * c->ow;
    for (int64_t p = 0; p < (oy1 - oy0) * c->ow; p++) ar[p] += wv * (double)xr[p];
    return;
  }
  for (int64_t oy = oy0; oy < oy1; oy++) {
    const float *xr = xc + (oy * sh + off_y) * c->w; /* the input row output row oy reads */
    double *ar = acc + oy * c->ow;
    for (int64_t ox = ox0; ox < ox1; ox++) ar[ox] += wv * (double)xr[ox * sw + off_x];
  }
}

/* acc [OH,OW] = y[b, co] before the bias: the sum over the group's input channels and the
 * kernel window, tap (ci, ky, kx) after tap.  kblock > 0 (--enable-half-partials, the kernel
 * keeps the sum in memory between blocks of kblock input channels: codegen/conv/chanvec_row.c):
 * the partial sum is rounded to the 16-bit format half - 1 before each later block. */
REF_VECTORIZE
static void conv_plane(const ir_conv2d_attr *a, const conv_geom *c, const float *x, const float *w,
                       int64_t b, int64_t co, int64_t kblock, int half, double *acc) {
  int64_t kh = a->kernel[0], kw = a->kernel[1];
  int64_t ci0 = (co / c->cout_g) * c->cin_g; /* first input channel of co's group */
  memset(acc, 0, (size_t)(c->oh * c->ow) * sizeof *acc);
  for (int64_t ci = 0; ci < c->cin_g; ci++) {
    if (kblock > 0 && ci > 0 && ci % kblock == 0)
      for (int64_t p = 0; p < c->oh * c->ow; p++) acc[p] = ir_round16_f32((float)acc[p], half - 1);
    const float *xc = x + ((b * c->cin) + ci0 + ci) * c->h * c->w;  /* [H,W] plane */
    const float *wc = w + (co * c->cin_g + ci) * kh * kw;           /* [KH,KW] taps */
    for (int64_t ky = 0; ky < kh; ky++)
      for (int64_t kx = 0; kx < kw; kx++) conv_add_tap(a, c, xc, (double)wc[ky * kw + kx], ky, kx, acc);
  }
}

/* The output channels [co_begin, co_end) of every image: one conv node's share of work for
 * one thread. */
typedef struct conv_job {
  const ir_conv2d_attr *a;
  const conv_geom *c;
  const float *x, *w, *bias; /* bias may be NULL */
  float *out;
  int64_t co_begin, co_end;
  int64_t kblock; /* half partials between K blocks (conv_plane), 0 = none */
  int half;       /* 1 + ir_half_format */
} conv_job;

/* Runs job j: y[b, co] = bias[co] + conv_plane for its output channels of every image. */
static void conv_job_run(const conv_job *j) {
  const conv_geom *c = j->c;
  int64_t plane = c->oh * c->ow;
  double *acc = malloc((size_t)(plane > 0 ? plane : 1) * sizeof *acc);
  if (!acc) abort();
  for (int64_t b = 0; b < c->n; b++)
    for (int64_t co = j->co_begin; co < j->co_end; co++) {
      conv_plane(j->a, c, j->x, j->w, b, co, j->kblock, j->half, acc);
      float *y = j->out + (b * c->cout + co) * plane;
      for (int64_t p = 0; p < plane; p++) y[p] = (float)(j->bias ? acc[p] + j->bias[co] : acc[p]);
    }
  free(acc);
}

/* How many threads to give a conv of `macs` multiply-adds and cout output channels: one per
 * online CPU, at most CONV_MAX_THREADS, at most one per output channel, and one per
 * CONV_MACS_PER_THREAD so small convs stay on the calling thread. */
static int conv_thread_count(double macs, int64_t cout) {
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  int64_t nt = cpus < 1 ? 1 : cpus > CONV_MAX_THREADS ? CONV_MAX_THREADS : cpus;
  if (nt > cout) nt = cout;
  if (nt > macs / CONV_MACS_PER_THREAD) nt = (int64_t)(macs / CONV_MACS_PER_THREAD);
  return nt < 1 ? 1 : (int)nt;
}

static void *conv_job_thread(void *arg) {
  conv_job_run(arg);
  return NULL;
}

/* in: x [N,Cin,H,W], w [Cout,Cin/groups,KH,KW], optional b [Cout]; out [N,Cout,OH,OW].
 * The output channels are split into contiguous ranges, one per thread (the calling thread
 * takes the first; a thread that cannot be started has its range run here).  Every output
 * element is computed by the same code whatever the split, so results do not depend on it. */
void ir_ref_conv2d(const ir_graph *g, const ir_node *n, const float *const *in, float *out) {
  const ir_conv2d_attr *a = &n->attr.conv2d;
  conv_geom c = conv_geometry(g, n);
  double macs = (double)(c.n * c.cout * c.oh * c.ow) * (double)(c.cin_g * a->kernel[0] * a->kernel[1]);
  int nt = conv_thread_count(macs, c.cout);
  conv_job jobs[CONV_MAX_THREADS];
  pthread_t tids[CONV_MAX_THREADS];
  int started[CONV_MAX_THREADS] = {0};
  for (int t = 0; t < nt; t++)
    jobs[t] = (conv_job){a, &c, in[0], in[1], n->n_in > 2 ? in[2] : NULL, out, c.cout * t / nt, c.cout * (t + 1) / nt,
                         g->half_partials && g->partial_kblock ? g->partial_kblock[n->id] : 0, g->half_partials};
  for (int t = 1; t < nt; t++) started[t] = pthread_create(&tids[t], NULL, conv_job_thread, &jobs[t]) == 0;
  conv_job_run(&jobs[0]);
  for (int t = 1; t < nt; t++) {
    if (started[t]) pthread_join(tids[t], NULL);
    else conv_job_run(&jobs[t]);
  }
}
