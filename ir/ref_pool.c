/* ref_pool.c — reference pooling with PyTorch semantics: maxpool and maxpool_index (padding is
 * -inf, so only real pixels compete; dilated windows), avgpool (count_include_pad, windows clipped like ATen's
 * avg_pool2d, ceil_mode through the result shape) and global average pooling. */
#include <math.h>

#include "ref_util.h"

/* One pooling window of output row/column (oy, ox), clipped two ways: to the padded input
 * ([-pad_top, H + pad_bottom)), which gives avgpool's count_include_pad divisor, and to the
 * real input ([0, H)), which gives the pixels that are read. */
typedef struct pool_win {
  int64_t y0, y1, x0, x1;  /* real pixels: [y0,y1) x [x0,x1) */
  int64_t padded_count;    /* pixels of the window inside the padded input */
} pool_win;

static pool_win pool_window(const ir_pool_attr *a, int64_t h, int64_t w, int64_t oy, int64_t ox) {
  int64_t ys = oy * a->stride[0] - a->pad[0], xs = ox * a->stride[1] - a->pad[1];
  int64_t ye = ys + a->kernel[0], xe = xs + a->kernel[1];
  if (ye > h + a->pad[2]) ye = h + a->pad[2];
  if (xe > w + a->pad[3]) xe = w + a->pad[3];
  pool_win p;
  p.padded_count = (ye - ys) * (xe - xs);
  p.y0 = ys < 0 ? 0 : ys;
  p.x0 = xs < 0 ? 0 : xs;
  p.y1 = ye > h ? h : ye;
  p.x1 = xe > w ? w : xe;
  return p;
}

/* Shared loop over [N*C planes, OH, OW]; reduce(plane, window) gives one output. */
typedef float (*pool_reduce_fn)(const ir_pool_attr *a, const float *plane, int64_t w, pool_win p);

static void pool_run(const ir_graph *g, const ir_node *n, const ir_pool_attr *a, const float *x, float *out,
                     pool_reduce_fn reduce) {
  const ir_shape *xs = ref_in_shape(g, n, 0), *ys = ref_out_shape(g, n);
  int64_t planes = xs->dim[0] * xs->dim[1], h = xs->dim[2], w = xs->dim[3];
  int64_t oh = ys->dim[2], ow = ys->dim[3];
  for (int64_t p = 0; p < planes; p++)
    for (int64_t oy = 0; oy < oh; oy++)
      for (int64_t ox = 0; ox < ow; ox++)
        out[(p * oh + oy) * ow + ox] = reduce(a, x + p * h * w, w, pool_window(a, h, w, oy, ox));
}

/* The element max pooling picks in window (oy, ox) of an h x w plane: the window's pixels
 * (ky, kx) at (oy*sh - pad_top + ky*dh, ox*sw - pad_left + kx*dw) inside the plane, scanned
 * y then x; a pixel wins if it is greater than the best so far or NaN (so the first maximum,
 * or the last NaN).  Its index y*w + x in the plane, -1 if the window holds no pixel. */
int64_t ir_ref_pool_argmax(const ir_pool_attr *a, const float *plane, int64_t h, int64_t w, int64_t oy, int64_t ox) {
  int64_t ys = oy * a->stride[0] - a->pad[0], xs = ox * a->stride[1] - a->pad[1], at = -1;
  int dh = ir_pool_dilation(a, 0), dw = ir_pool_dilation(a, 1);
  float m = -INFINITY;
  for (int ky = 0; ky < a->kernel[0]; ky++) {
    int64_t y = ys + (int64_t)ky * dh;
    if (y < 0 || y >= h) continue;
    for (int kx = 0; kx < a->kernel[1]; kx++) {
      int64_t x = xs + (int64_t)kx * dw;
      if (x < 0 || x >= w) continue;
      float v = plane[y * w + x];
      if (v > m || isnan(v)) m = v, at = y * w + x;
    }
  }
  return at;
}

/* in: x [N,C,H,W]; out [N,C,OH,OW]: the picked element (-inf for a window of no pixel). */
static void max_run(const ir_graph *g, const ir_node *n, const float *x, float *out, int index) {
  const ir_pool_attr *a = &n->attr.maxpool;
  const ir_shape *xs = ref_in_shape(g, n, 0), *ys = ref_out_shape(g, n);
  int64_t planes = xs->dim[0] * xs->dim[1], h = xs->dim[2], w = xs->dim[3], oh = ys->dim[2], ow = ys->dim[3];
  for (int64_t p = 0; p < planes; p++)
    for (int64_t oy = 0; oy < oh; oy++)
      for (int64_t ox = 0; ox < ow; ox++) {
        int64_t at = ir_ref_pool_argmax(a, x + p * h * w, h, w, oy, ox);
        float *o = &out[(p * oh + oy) * ow + ox];
        if (index && at >= 0 && a->storage_order) at = at % w * h + at / w; /* column-major */
        if (index) *o = at < 0 ? -1.0f : (float)(p * h * w + at);
        else *o = at < 0 ? -INFINITY : x[p * h * w + at];
      }
}

static float avg_reduce(const ir_pool_attr *a, const float *plane, int64_t w, pool_win p) {
  double s = 0.0;
  for (int64_t y = p.y0; y < p.y1; y++)
    for (int64_t x = p.x0; x < p.x1; x++) s += plane[y * w + x];
  int64_t count = a->count_include_pad ? p.padded_count : (p.y1 - p.y0) * (p.x1 - p.x0);
  return count > 0 ? (float)(s / (double)count) : 0.0f;
}

/* in: x [N,C,H,W]; out [N,C,OH,OW]. */
void ir_ref_maxpool(const ir_graph *g, const ir_node *n, const float *const *in, float *out) {
  max_run(g, n, in[0], out, 0);
}

/* in: x [N,C,H,W]; out [N,C,OH,OW]: the flat index in x of each window's picked element
 * ((n*C + c)*H + y)*W + x (storage_order 1: (n*C + c)*H*W + x*H + y), an exact f32 integer (x has
 * at most 2^24 elements). */
void ir_ref_maxpool_index(const ir_graph *g, const ir_node *n, const float *const *in, float *out) {
  max_run(g, n, in[0], out, 1);
}

/* in: x [N,C,H,W]; out [N,C,OH,OW]. */
void ir_ref_avgpool(const ir_graph *g, const ir_node *n, const float *const *in, float *out) {
  pool_run(g, n, &n->attr.avgpool, in[0], out, avg_reduce);
}

/* in: x [N,C,H,W]; out [N,C,1,1] = mean over H*W. */
void ir_ref_global_avgpool(const ir_graph *g, const ir_node *n, const float *const *in, float *out) {
  const ir_shape *xs = ref_in_shape(g, n, 0);
  int64_t planes = xs->dim[0] * xs->dim[1], hw = ref_inner(xs, 2);
  for (int64_t p = 0; p < planes; p++) {
    double s = 0.0;
    for (int64_t i = 0; i < hw; i++) s += in[0][p * hw + i];
    out[p] = (float)(s / (double)hw);
  }
}
