/* ref_conv.c — reference 2-D convolution with PyTorch semantics: stride, asymmetric zero
 * padding [top,left,bottom,right], dilation and groups (depthwise when groups == Cin).
 * Plain loops, one double accumulator per output element. */
#include "ref_util.h"

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

/* One output element y[b, co, oy, ox]: sum over the group's input channels and the kernel
 * window; taps falling into the padding contribute zero. */
static double conv_point(const ir_conv2d_attr *a, const conv_geom *c, const float *x, const float *w,
                         int64_t b, int64_t co, int64_t oy, int64_t ox) {
  int64_t kh = a->kernel[0], kw = a->kernel[1];
  int64_t ci0 = (co / c->cout_g) * c->cin_g; /* first input channel of co's group */
  double acc = 0.0;
  for (int64_t ci = 0; ci < c->cin_g; ci++) {
    const float *xc = x + ((b * c->cin) + ci0 + ci) * c->h * c->w;  /* [H,W] plane */
    const float *wc = w + (co * c->cin_g + ci) * kh * kw;           /* [KH,KW] taps */
    for (int64_t ky = 0; ky < kh; ky++) {
      int64_t iy = oy * a->stride[0] - a->pad[0] + ky * a->dilation[0];
      if (iy < 0 || iy >= c->h) continue;
      for (int64_t kx = 0; kx < kw; kx++) {
        int64_t ix = ox * a->stride[1] - a->pad[1] + kx * a->dilation[1];
        if (ix < 0 || ix >= c->w) continue;
        acc += (double)xc[iy * c->w + ix] * (double)wc[ky * kw + kx];
      }
    }
  }
  return acc;
}

/* in: x [N,Cin,H,W], w [Cout,Cin/groups,KH,KW], optional b [Cout]; out [N,Cout,OH,OW]. */
void ir_ref_conv2d(const ir_graph *g, const ir_node *n, const float *const *in, float *out) {
  const ir_conv2d_attr *a = &n->attr.conv2d;
  conv_geom c = conv_geometry(g, n);
  const float *bias = n->n_in > 2 ? in[2] : NULL;
  for (int64_t b = 0; b < c.n; b++)
    for (int64_t co = 0; co < c.cout; co++)
      for (int64_t oy = 0; oy < c.oh; oy++)
        for (int64_t ox = 0; ox < c.ow; ox++) {
          double acc = conv_point(a, &c, in[0], in[1], b, co, oy, ox);
          if (bias) acc += bias[co];
          out[((b * c.cout + co) * c.oh + oy) * c.ow + ox] = (float)acc;
        }
}
