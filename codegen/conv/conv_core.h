/* conv/conv_core.h — codegen-private: what the conv routes share (conv/conv_core.c): the
 * direct route's geometry (pixel-vector or channel-vector register tiles, plane kernels), the
 * per-work-item run-time values, the one batchnorm fold and the [group][Cout_g/R][Cin_g][KH][KW][R]
 * weight packing, compile-time lane masks and masked loads/stores, the opening of a tile's K loop. */
#ifndef CNNC_CONV_CORE_H
#define CNNC_CONV_CORE_H

#include "codegen/cg_internal.h"

/* sub convs: at most this many pixel tiles in the plane (their K-blocked row's tile limit) */
#define CG_CONV_SUB_MAX_TILES 40
/* Flat convs with at most this many input channels per group: a pixel vector load weighs 0.5
 * in the tile choice, and the next-chunk prefetch is kept at any width (conv/flat.c). */
#define CG_CONV_SMALL_K_CIN 64
/* The K-blocked kxk rows and planes of channel vectors (conv/chanvec.c): weight bytes of a
 * block of input channels (L1). */
#define VC_KXK_BLOCK_BYTES 16384

typedef struct conv_geom {
  int64_t n, cin, h, w, cout, oh, ow, cin_g, cout_g;
  int64_t ocs;         /* channels per image of the output buffer: cout, or the in-place concat's
                        * result this conv writes into at a channel offset (cg_concat_out_channels) */
  int kh, kw, sh, sw, pt, pl, dh, dw, groups;
  int R, P, V, ntile;  /* tile: R channels x P vectors of V pixels (vc: P pixels); tiles per group */
  int flat;            /* 1x1/s1/p0 on pixel vectors: plane as one row cut into chunks */
  int gemm;            /* 1x1/s1/p0 (flat, or a one-row channel-vector conv over the plane) */
  int vc;              /* vectors over output channels: R = Rv*V channels, P scalar pixels */
  int sub;             /* 1x1/p0 strided on channel vectors: the output plane as one row of
                        * oh*ow pixels (h, w, oh, ow flattened), pixel q reading input element
                        * (q / sub_ow) * sh * sub_w + (q % sub_ow) * sw of each channel plane */
  int64_t sub_w, sub_ow; /* sub: the unflattened input and output widths */
  int vc_wide_ok;      /* inference graph (no label): cg_conv_vc_choose may take wide stride-1 kxk maps */
  int vc_plane;        /* kxk channel vectors, one work item per (image, channel tile) plane,
                        * K-blocked over the plane (cg_conv_vc_plane; inference and
                        * training's packed route, gen_train_pconv.c) */
  int dwp;             /* depthwise stride-1 small plane as one flat row (conv/dw.c) */
  int dw_pool;         /* a global_avgpool fused as a second output (pass_fusion.n_side) */
  const ir_tuning *tune; /* the compile's knobs (ir/tuning.def) */
  int64_t l2;          /* cache-blocking budget of this op: cg_shard_tile_budget (cg_budget.h) */
} conv_geom;

typedef struct conv_row {      /* run-time values of one work item */
  LLVMValueRef x, out, wp, bp;  /* operands, packed weights/bias */
  LLVMValueRef resid[PASS_MAX_POST];
  LLVMValueRef in_base, out_row, wbase, bbase, ky_lo, ky_hi, iy0;
  LLVMValueRef xs, xs_base;     /* squeeze-excite factors (NULL: none), index of the group's channel 0 */
  LLVMValueRef xs_buf, xs_key;  /* channel vectors: the scaled planes and the xs_base they hold */
  LLVMValueRef pool;            /* depthwise planes: the fused pool's output [N,C] (dw_pool), else NULL */
  /* 16-bit inference storage (passes/store16.c): dtypes of x, out and the residuals as the
   * pixel-vector kernels (conv/pixvec.c, conv/flat.c) read/write them; 0 (IR_F32) everywhere else */
  ir_dtype xdt, odt, rdt[PASS_MAX_POST];
} conv_row;

typedef struct conv_epi { const ir_node *post[PASS_MAX_POST]; int n_post; } conv_epi;

/* sub: input element of output pixel q within a channel plane (compile time). */
static inline int64_t cg_conv_sub_off(const conv_geom *g, int64_t q) {
  return q / g->sub_ow * g->sh * g->sub_w + q % g->sub_ow * g->sw;
}

/* Channels per image of the buffer conv n's kernel writes: its cout, or those of the in-place
 * concat result (batch > 1) its output lives in (cg_layout.h cg_concat_out_channels). */
int64_t cg_conv_out_stride(cg_ctx *c, const ir_node *n, int64_t cout);
/* The geometry the direct route plans for conv2d node n (reads n->attr.conv2d, n->in[0] and
 * n->out): pixel-vector tiles, or channel vectors (cg_conv_vc_choose), flat / sub rows,
 * K-blocked planes.  Compiled training's packed route (gen_train_pconv.c) plans with it too. */
conv_geom cg_conv_geometry(cg_ctx *c, const ir_node *n);
/* Picks the channel-vector shape (sets vc, R, P) when it beats pixel vectors; returns vc. */
int cg_conv_vc_choose(conv_geom *g, int budget);
/* Channel vectors: whether each tap column loads its own broadcasts (dense convs; the whole
 * accumulator budget) rather than sharing them between taps. */
int cg_conv_vc_unshared(const conv_geom *g);
/* Whether a kxk channel-vector conv runs K-blocked whole planes (its tile's weights and the
 * input image exceed the L2 budget together: cg_conv_vc_plane), and the number of plane tiles
 * such a plane is cut into (0: row tiles). */
int cg_conv_vc_plane_ok(cg_ctx *c, const conv_geom *g);
int64_t cg_conv_vc_plane_tiles(const conv_geom *g);

/* The batchnorm bn (NULL: none) fused after conv n, folded into output channel co: *scale =
 * gamma / sqrt(var + eps) and *shift = (b - mean) * scale + beta, b the conv's bias (0 without
 * one); without bn 1 and b.  In double; every route's packing rounds the products once. */
void cg_conv_bn_fold(cg_ctx *c, const ir_node *n, const ir_node *bn, int64_t co, double *scale, double *shift);
/* Packs weights (BN scale folded in) into wp [group][Cout_g/R][Cin_g][KH][KW][R] and the bias
 * (conv bias, BN shift) into bp [group][Cout_g/R][R], zero padded: the direct route's layout
 * (pixel vectors, channel vectors, depthwise planes). */
void cg_conv_pack(cg_ctx *c, const ir_node *n, const ir_node *bn, const conv_geom *g, float *wp, float *bp);

/* Compile-time lane masks (bit l = lane l) as an <w x i1> constant, and llvm.masked.load /
 * store of w floats at base[idx] (lanes outside m are not touched; loads give 0 there). */
LLVMValueRef cg_conv_mask_const(cg_ctx *c, unsigned m, int w);
LLVMValueRef cg_conv_masked_load(cg_ctx *c, LLVMValueRef base, LLVMValueRef idx, unsigned m, int w);
void cg_conv_masked_store(cg_ctx *c, LLVMValueRef v, LLVMValueRef base, LLVMValueRef idx, unsigned m, int w);

/* p through an empty asm: the optimiser can no longer see what it points to (no SROA of a
 * stack buffer, no CSE of loads through it with loads through p elsewhere). */
LLVMValueRef cg_conv_opaque_ptr(cg_ctx *c, LLVMValueRef p);

/* Kernel-row range [ky_lo, ky_hi) of output row oy that reads real input rows, and iy0, the
 * input row of ky = 0, into r. */
void cg_conv_ky_range(cg_ctx *c, const conv_geom *g, LLVMValueRef oy, conv_row *r);
/* Opening of every conv tile (both shapes): zeroes n_acc accumulators (allocas in acc),
 * opens the ci and ky loops (close them with cg_loop_end(KY) then CI) and returns, for the
 * current (ci, ky), the first input column ix0 of pixel ox, the input row start *row and the
 * packed-weight row start *wrow. */
LLVMValueRef cg_conv_tile_begin(cg_ctx *c, const conv_geom *g, const conv_row *r, LLVMValueRef ox, int n_acc,
                                LLVMValueRef *acc, cg_loop *CI, cg_loop *KY, LLVMValueRef *row, LLVMValueRef *wrow);

#endif
