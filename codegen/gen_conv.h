/* gen_conv.h — codegen-private: conv2d geometry and per-work-item values shared by the two
 * microkernel shapes, pixel vectors (gen_conv.c) and channel vectors (gen_conv_vc.c). */
#ifndef CNNC_GEN_CONV_H
#define CNNC_GEN_CONV_H

#include "codegen/cg_internal.h"

/* sub convs: at most this many pixel tiles in the plane (their K-blocked row's tile limit) */
#define CG_CONV_SUB_MAX_TILES 40

typedef struct conv_geom {
  int64_t n, cin, h, w, cout, oh, ow, cin_g, cout_g;
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
  int dwp;             /* depthwise stride-1 small plane as one flat row (gen_dwconv.c) */
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
   * pixel-vector kernels of gen_conv.c read/write them; 0 (IR_F32) everywhere else */
  ir_dtype xdt, odt, rdt[PASS_MAX_POST];
} conv_row;

typedef struct conv_epi { const ir_node *post[PASS_MAX_POST]; int n_post; } conv_epi;

/* sub: input element of output pixel q within a channel plane (compile time). */
static inline int64_t cg_conv_sub_off(const conv_geom *g, int64_t q) {
  return q / g->sub_ow * g->sh * g->sub_w + q % g->sub_ow * g->sw;
}

/* Opening of every conv tile (both shapes): zeroes n_acc accumulators (allocas in acc),
 * opens the ci and ky loops (close them with cg_loop_end(KY) then CI) and returns, for the
 * current (ci, ky), the first input column ix0 of pixel ox, the input row start *row and the
 * packed-weight row start *wrow. */
LLVMValueRef cg_conv_tile_begin(cg_ctx *c, const conv_geom *g, const conv_row *r, LLVMValueRef ox, int n_acc,
                                LLVMValueRef *acc, cg_loop *CI, cg_loop *KY, LLVMValueRef *row, LLVMValueRef *wrow);

/* Squeeze-excite scale fused before the conv (pass_fusion.n_pre): v (a float or a vector of
 * pixels of input channel ci of the group) times that (image, channel)'s factor, r->xs[xs_base
 * + ci]; v itself when r->xs is NULL.  Rounded like the mul kernel it replaces. */
LLVMValueRef cg_conv_xscale(cg_ctx *c, const conv_row *r, LLVMValueRef ci, LLVMValueRef v);
/* Channel-vector convs with r->xs: a stack buffer for the group's scaled planes (sets
 * xs_buf/xs_key; at most 256 KB, else the loads are scaled one by one); and, per work item
 * after in_base/xs_base are set, the planes scaled into it when they are not already there,
 * with r->x/in_base/xs then pointing the item at the buffer. */
void cg_conv_se_begin(cg_ctx *c, const conv_geom *g, conv_row *r);
void cg_conv_se_item(cg_ctx *c, const conv_geom *g, conv_row *r);

/* Channel-vector row: rr valid channels of the tile, every output pixel of the row. */
void cg_conv_vc_row(cg_ctx *c, const conv_geom *g, const conv_row *r, const conv_epi *e, int rr);
/* Picks the channel-vector shape (sets vc, R, P) when it beats pixel vectors; returns vc. */
int cg_conv_vc_choose(conv_geom *g, int budget);
/* Whether a kxk channel-vector conv runs K-blocked whole planes (its tile's weights and the
 * input image exceed the L2 budget together), and the body of such an item: the plane of the
 * (image, tile) whose in_base/wbase/bbase and out_row (of output row 0) are set in r. */
int cg_conv_vc_plane_ok(cg_ctx *c, const conv_geom *g);
void cg_conv_vc_plane(cg_ctx *c, const conv_geom *g, const conv_row *r, const conv_epi *e, int rr);

/* Compile-time lane masks (bit l = lane l) as an <w x i1> constant, and llvm.masked.load /
 * store of w floats at base[idx] (lanes outside m are not touched; loads give 0 there). */
LLVMValueRef cg_conv_mask_const(cg_ctx *c, unsigned m, int w);
LLVMValueRef cg_conv_masked_load(cg_ctx *c, LLVMValueRef base, LLVMValueRef idx, unsigned m, int w);
void cg_conv_masked_store(cg_ctx *c, LLVMValueRef v, LLVMValueRef base, LLVMValueRef idx, unsigned m, int w);

/* p through an empty asm: the optimiser can no longer see what it points to (no SROA of a
 * stack buffer, no CSE of loads through it with loads through p elsewhere). */
LLVMValueRef cg_conv_opaque_ptr(cg_ctx *c, LLVMValueRef p);

/* Depthwise flat-plane kernel (gen_dwconv.c): whether it applies to g (depthwise, stride 1,
 * output width = input width, plane small enough to emit every tile at compile time), and
 * the body of one work item, the (image, channel) plane whose in_base/out_row/wbase/bbase
 * are set in r. */
int cg_conv_dw_plane_ok(const conv_geom *g);
void cg_conv_dw_plane(cg_ctx *c, const conv_geom *g, const conv_row *r, const conv_epi *e);

/* Compiled training's entry (gen_train_pconv.c; additive, at the end of gen_conv.c): the
 * geometry cg_gen_conv2d plans for node n (reads n->attr.conv2d, n->in[0] and n->out), and
 * the pixels of output row oy for rr channels (g->flat == 0), given r's x/out/wp/bp and
 * in_base/out_row/wbase/bbase as conv_item sets them. */
conv_geom cg_conv_geometry(cg_ctx *c, const ir_node *n);
/* 16-bit inference storage (passes/store16.c): whether node n's kernel is gen_conv.c's pixel
 * vectors (pixel tiles or flat 1x1 chunks, no squeeze-excite scale), which read x and the
 * residuals and write the result in 16 bits directly; other routes (channel vectors,
 * depthwise planes) read and write f32.  A bf16-route conv (gen_conv_bf16.c): whether its
 * epilogue writes the result and reads the residuals in 16 bits (its x: cg_conv_bf16_io16). */
int cg_conv_io16_ok(cg_ctx *c, const ir_node *n);
void cg_conv_row_pixels(cg_ctx *c, const conv_geom *g, conv_row *r, const conv_epi *e, int rr, LLVMValueRef oy);
/* Compiled training, flat convs (g->flat): pixels per chunk, x panel floats (0: no panel),
 * and the pixels of chunk `chunk` for rr channels (r as conv_item sets it with oy = 0; xbuf
 * NULL or a panel of cg_conv_flat_pack_floats(g) floats, xkey its i64 key slot, -1 first). */
int64_t cg_conv_flat_chunk_px(const conv_geom *g);
int64_t cg_conv_flat_pack_floats(const conv_geom *g);
void cg_conv_flat_pixels(cg_ctx *c, const conv_geom *g, conv_row *r, const conv_epi *e, int rr, LLVMValueRef xbuf,
                         LLVMValueRef xkey, LLVMValueRef chunk);

/* The direct route of inference convs (kernels.def). */
LLVMValueRef cg_gen_conv2d_direct(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind);

#endif
