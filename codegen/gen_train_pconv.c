/* gen_train_pconv.c — groups-1 conv2d forward and stride-1 conv2d_grad_input of compiled
 * training through the inference microkernels (gen_conv.c pixel vectors, gen_conv_vc.c channel
 * vectors; entry cg_conv_row_pixels).  The weights [Co,Ci,KH,KW] live in the state buffer and
 * change every step, so each thread packs the ones it is about to use into the inference
 * layout [tile][Cin][KH][KW][R] (tile zero-padded; grad_input: w transposed, taps mirrored)
 * in a stack buffer, one block of channel tiles at a time.  Work items (block, image, output
 * row, tile of the block), tile fastest, in contiguous ranges over the threads: a thread packs
 * a block when its range enters it (each block about once per thread per step, cheap next to
 * a batch of images), the block's packed weights stay in L2 while the thread walks its images,
 * and every output element has one writer with a fixed summation order (results do not depend
 * on the thread count).  A flat conv (1x1 stride 1 unpadded) is viewed as rows of a divisor
 * of its plane (cw pixels, ~L2-sized input rows), so its row items are the GEMM's pixel chunks
 * with the x chunk reused by the block's tiles.  Training batchnorm uses batch statistics, so
 * there is no epilogue besides the bias. */
#include <stdlib.h>
#include <string.h>

#include "codegen/gen_conv.h"
#include "codegen/gen_train.h"

#define PC_MAX_PACK_BYTES (1 << 20) /* one tile's packed weights beyond this: the direct kernel */
/* 1x1 convs: packed weights of a block up to this (stack buffer per thread).  A 1x1 tile's K
 * loop reads one row piece from each of cin planes (cin streams the prefetchers do not
 * follow) but its packed weights sequentially, so an input row is worth reusing over many
 * tiles: ResNet-50 layer3's 1024->256 1x1 (rows of 28 pixels, 24 KB per 6-channel tile) ran
 * 1.7-2x faster with all 43 tiles in one 1 MB block than with 6-tile blocks of half the L2
 * budget (which was 1.3-1.4x slower than the direct kernel), a 256->256 1x1 on 14x14 2x with
 * 16 tiles instead of 1-4 (docs/training.md).  Other convs: half the L2 tile budget. */
#define PC_MAX_BLOCK_1X1_BYTES (1 << 20)

typedef struct pconv {
  conv_geom g;
  int64_t so, si, sy, sx, w0; /* weight (o, i, ky, kx) of the conv at w0 + o*so + i*si + ky*sy + kx*sx */
  int64_t wt, B, nblk;        /* packed floats per tile, tiles per block, blocks */
} pconv;

/* Row width for a flat conv's plane of hw pixels: a divisor whose input rows (cin planes) fit
 * 256 KB, with the fewest wasted pixels in whole P*V tiles; the widest of those.  *util: the
 * chosen row's tile utilisation. */
static int64_t flat_row(const conv_geom *g, int64_t hw, double *util) {
  int64_t best = hw, tpx = (int64_t)g->P * g->V;
  double bs = -1;
  *util = 0;
  for (int64_t d = 1; d <= hw; d++) {
    if (hw % d || (d < g->V && d != hw)) continue;
    double u = (double)d / (double)((d + tpx - 1) / tpx * tpx);
    double score = u - (d * 4 * g->cin_g > 256 * 1024 ? 1.0 : 0.0);
    if (score >= bs - 1e-9) bs = score, best = d, *util = u;
  }
  return best;
}

/* Plans conv node view n (attr.conv2d, in[0] -> out); 0 when this path does not take it
 * (grouped, a tile's packed weights over PC_MAX_PACK_BYTES, or --enable-half-partials: the
 * interpreter mirrors the K-blocked rows' 16-bit partials for inference convs only). */
static int pc_plan(cg_ctx *c, const ir_node *n, pconv *p) {
  if (c->g->half_partials) return 0; /* the K-blocked rows' 16-bit partials are mirrored for inference convs only */
  p->g = cg_conv_geometry(c, n);
  conv_geom *g = &p->g;
  /* sub convs (one 1x1 strided row per image: every block streams all images' inputs)
   * measured slower than the direct kernel on ResNet-50 (docs/training.md); flat views
   * wasting over 15 % of their tiles (a masked tile per row) are left to it too */
  if (g->groups != 1 || g->dwp || g->sub) return 0;
  if (g->flat) {
    double util;
    int64_t hw = g->ow, cw = flat_row(g, hw, &util);
    if (util < 0.85) return 0;
    g->flat = 0, g->h = g->oh = hw / cw, g->w = g->ow = cw;
  }
  p->wt = (int64_t)g->cin * g->kh * g->kw * g->R;
  if (p->wt * 4 > PC_MAX_PACK_BYTES) return 0;
  int64_t b = (g->kh == 1 && g->kw == 1 ? PC_MAX_BLOCK_1X1_BYTES : g->l2 / 2) / (p->wt * 4);
  p->B = b < 1 ? 1 : b > g->ntile ? g->ntile : b;
  p->nblk = (g->ntile + p->B - 1) / p->B;
  return 1;
}

/* Packs tiles [t0, t0 + bs) into wb ([tile][ci][ky][kx][R]) and their bias into bb. */
static void pc_pack(cg_ctx *c, const pconv *p, LLVMValueRef w, LLVMValueRef bias, LLVMValueRef wb, LLVMValueRef bb,
                    LLVMValueRef t0, LLVMValueRef bs) {
  const conv_geom *g = &p->g;
  int R = g->R, taps = g->kh * g->kw;
  cg_loop T, O, I, Z;
  LLVMValueRef tl = cg_loop_begin(c, &T, cg_i64(c, 0), bs, cg_i64(c, 1), "ptl");
  LLVMValueRef o0 = cg_tmul(c, cg_tadd(c, t0, tl), R);
  LLVMValueRef nv = cg_min64(c, cg_i64(c, R), LLVMBuildSub(c->b, cg_i64(c, g->cout), o0, "")); /* valid channels */
  LLVMValueRef r = cg_loop_begin(c, &O, cg_i64(c, 0), nv, cg_i64(c, 1), "pr");
  LLVMValueRef o = cg_tadd(c, o0, r);
  cg_store_f32(c, bias ? cg_load_f32(c, bias, o) : cg_f32(c, 0.0f), bb, cg_tadd(c, cg_tmul(c, tl, R), r));
  LLVMValueRef i = cg_loop_begin(c, &I, cg_i64(c, 0), cg_i64(c, g->cin), cg_i64(c, 1), "pi");
  LLVMValueRef src = cg_taddk(c, cg_tadd(c, cg_tmul(c, o, p->so), cg_tmul(c, i, p->si)), p->w0);
  LLVMValueRef dst = cg_tadd(c, cg_tmul(c, cg_tadd(c, cg_tmul(c, tl, g->cin), i), (int64_t)taps * R), r);
  for (int ky = 0; ky < g->kh; ky++)
    for (int kx = 0; kx < g->kw; kx++)
      cg_store_f32(c, cg_load_f32(c, w, cg_taddk(c, src, ky * p->sy + kx * p->sx)), wb,
                   cg_taddk(c, dst, (int64_t)(ky * g->kw + kx) * R));
  cg_loop_end(c, &I);
  cg_loop_end(c, &O);
  /* channels past cout (last tile): zero weights and bias */
  LLVMValueRef z = cg_loop_begin(c, &Z, nv, cg_i64(c, R), cg_i64(c, 1), "pz");
  cg_store_f32(c, cg_f32(c, 0.0f), bb, cg_tadd(c, cg_tmul(c, tl, R), z));
  cg_loop I2;
  LLVMValueRef i2 = cg_loop_begin(c, &I2, cg_i64(c, 0), cg_i64(c, (int64_t)g->cin * taps), cg_i64(c, 1), "pzi");
  cg_store_f32(c, cg_f32(c, 0.0f), wb, cg_tadd(c, cg_tmul(c, cg_tadd(c, cg_tmul(c, tl, (int64_t)g->cin * taps), i2), R), z));
  cg_loop_end(c, &I2);
  cg_loop_end(c, &Z);
  cg_loop_end(c, &T);
}

/* The kernel body: x -> out through the packed microkernel (see the file comment). */
static void pc_emit(cg_ctx *c, const pconv *p, LLVMValueRef x, LLVMValueRef w, LLVMValueRef bias, LLVMValueRef out,
                    LLVMValueRef tid, LLVMValueRef nth) {
  const conv_geom *g = &p->g;
  int V = g->V, R = g->R;
  int64_t rows = g->oh, per = g->n * rows * p->B;
  LLVMTypeRef vt = cg_vtype(c, V);
  LLVMValueRef wb = cg_entry_alloca(c, LLVMArrayType2(vt, (uint64_t)((p->B * p->wt + V - 1) / V)), "wpack");
  LLVMValueRef bb = cg_entry_alloca(c, LLVMArrayType2(vt, (uint64_t)((p->B * R + V - 1) / V)), "bpack");
  LLVMSetAlignment(wb, 64);
  LLVMValueRef key = cg_entry_alloca(c, c->t_i64, "wpack_blk");
  LLVMBuildStore(c->b, cg_i64(c, -1), key);
  LLVMValueRef lo, hi;
  cg_thread_range(c, cg_i64(c, g->n * rows * g->ntile), tid, nth, &lo, &hi);
  cg_loop L;
  LLVMValueRef it = cg_loop_begin(c, &L, lo, hi, cg_i64(c, 1), "item");
  LLVMValueRef blk = LLVMBuildSDiv(c->b, it, cg_i64(c, per), "blk"), j = LLVMBuildSRem(c->b, it, cg_i64(c, per), "");
  LLVMValueRef t0 = cg_tmul(c, blk, p->B);
  LLVMValueRef bs = cg_min64(c, cg_i64(c, p->B), LLVMBuildSub(c->b, cg_i64(c, g->ntile), t0, "")); /* tiles in this block */
  LLVMValueRef rb = LLVMBuildMul(c->b, bs, cg_i64(c, rows), "");
  LLVMValueRef nb = LLVMBuildSDiv(c->b, j, rb, "nb"), k = LLVMBuildSRem(c->b, j, rb, "");
  LLVMValueRef oy = LLVMBuildSDiv(c->b, k, bs, "oy"), tl = LLVMBuildSRem(c->b, k, bs, "tl");
  LLVMValueRef tile = cg_tadd(c, t0, tl);
  cg_if fp;
  cg_if_begin(c, &fp, LLVMBuildICmp(c->b, LLVMIntNE, LLVMBuildLoad2(c->b, c->t_i64, key, ""), blk, ""));
  pc_pack(c, p, w, bias, wb, bb, t0, bs);
  LLVMBuildStore(c->b, blk, key);
  cg_if_end(c, &fp);
  conv_row r;
  memset(&r, 0, sizeof r);
  r.x = x, r.out = out, r.wp = wb, r.bp = bb;
  r.in_base = cg_tmul(c, nb, (int64_t)g->cin * g->h * g->w);
  r.out_row = cg_tadd(c, cg_tmul(c, cg_tadd(c, cg_tmul(c, nb, g->cout), cg_tmul(c, tile, R)), g->oh * g->ow), cg_tmul(c, oy, g->ow));
  r.wbase = cg_tmul(c, tl, p->wt);
  r.bbase = cg_tmul(c, tl, R);
  conv_epi e = {{0}, 0};
  int rem = (int)(g->cout % R);
  if (!rem) {
    cg_conv_row_pixels(c, g, &r, &e, R, oy);
  } else {
    cg_if f;
    cg_if_begin(c, &f, LLVMBuildICmp(c->b, LLVMIntNE, tile, cg_i64(c, g->ntile - 1), ""));
    cg_conv_row_pixels(c, g, &r, &e, R, oy);
    cg_if_else(c, &f);
    cg_conv_row_pixels(c, g, &r, &e, rem, oy);
    cg_if_end(c, &f);
  }
  cg_loop_end(c, &L);
}

static const char *pc_kind(cg_ctx *c, const char *op, const pconv *p) {
  const conv_geom *g = &p->g;
  return cg_kind(c, ir_fmt(c->arena, "%s_pk%s", op, g->vc ? "_vc" : ""),
                 ir_fmt(c->arena, "%dx%d", g->R, g->vc ? g->P : g->P * g->V));
}

LLVMValueRef cg_train_pconv_fwd(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind) {
  if (getenv("CNNC_TRAIN_NO_PCONV")) return NULL;
  pconv p;
  if (!pc_plan(c, n, &p)) return NULL;
  int64_t taps = (int64_t)p.g.kh * p.g.kw;
  p.so = p.g.cin * taps, p.si = taps, p.sy = p.g.kw, p.sx = 1, p.w0 = 0;
  int nin = n->n_in;
  LLVMValueRef a[6];
  LLVMValueRef f = cg_train_kbegin(c, fn_name, nin, a);
  pc_emit(c, &p, a[0], a[1], nin > 2 ? a[2] : NULL, a[nin], a[nin + 1], a[nin + 2]);
  cg_kernel_end(c);
  *kind = pc_kind(c, "conv2d_train", &p);
  return f;
}

/* Stride 1: dx = the conv of dy with w transposed and the taps mirrored, padding
 * (k-1)*d - pad on each side (a negative one: NULL, the direct kernel takes it). */
LLVMValueRef cg_train_pconv_grad_input(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind) {
  if (getenv("CNNC_TRAIN_NO_PCONV")) return NULL;
  const ir_conv2d_attr *at = &n->attr.conv2d_grad_input.conv;
  ir_node v = *n; /* the conv view dy -> dx */
  ir_conv2d_attr *va = &v.attr.conv2d;
  ir_conv2d_attr fwd = *at;
  memset(va, 0, sizeof *va);
  va->kernel[0] = fwd.kernel[0], va->kernel[1] = fwd.kernel[1], va->stride[0] = va->stride[1] = 1, va->groups = 1;
  va->dilation[0] = fwd.dilation[0] < 1 ? 1 : fwd.dilation[0], va->dilation[1] = fwd.dilation[1] < 1 ? 1 : fwd.dilation[1];
  int ey = (fwd.kernel[0] - 1) * va->dilation[0], ex = (fwd.kernel[1] - 1) * va->dilation[1];
  va->pad[0] = ey - fwd.pad[0], va->pad[1] = ex - fwd.pad[1], va->pad[2] = ey - fwd.pad[2], va->pad[3] = ex - fwd.pad[3];
  for (int i = 0; i < 4; i++)
    if (va->pad[i] < 0) return NULL;
  v.op = IR_OP_conv2d, v.in[0] = n->in[0], v.out = n->out;
  pconv p;
  if (!pc_plan(c, &v, &p)) return NULL;
  int64_t taps = (int64_t)p.g.kh * p.g.kw;
  p.so = taps, p.si = p.g.cout * taps, p.sy = -p.g.kw, p.sx = -1, p.w0 = taps - 1;
  LLVMValueRef a[5];
  LLVMValueRef f = cg_train_kbegin(c, fn_name, 2, a);
  pc_emit(c, &p, a[0], a[1], NULL, a[2], a[3], a[4]);
  cg_kernel_end(c);
  *kind = pc_kind(c, "conv2d_grad_input", &p);
  return f;
}
