/* conv/bf16_plan.h — codegen-private: the compile-time part of the bf16 dot-product conv route
 * (conv/bf16_plan.c; issue 4, docs/matrix.md "bf16 kernels", docs/precision.md "bf16
 * arithmetic"): which convs take it, their plan record and their packed weights.  Flat 1x1
 * stride-1 unpadded convs (and kxk / strided ones with enough channels) whose input is a bf16
 * round16 result and whose weights are on the bf16 grid (--precision 16.16|16.32 --half-type
 * bf16 inference) run on vdpbf16ps when the target has avx512bf16, or on an exact emulation of
 * it with tune bf16_emulate=1 (how the kernel is tested on CPUs without the instruction;
 * cg_bf16_dot, cg_isa.h).  The kernel: conv/bf16.c. */
#ifndef CNNC_CONV_BF16_PLAN_H
#define CNNC_CONV_BF16_PLAN_H

#include "codegen/cg_internal.h"

typedef struct bgeom {
  int64_t n, cin, cout, hw, kp; /* hw: output pixels; kp = taps * kpc pairs */
  int V, R, P, ntile, mode;
  int64_t chunk_px, nch;        /* pixels per chunk (whole tiles), chunks per plane */
  int flat;                     /* 1x1, stride 1, unpadded: the panel is packed by plain loads */
  int kh, kw, sh, sw, ph, pw;   /* kernel, stride, top/left padding (any conv: gathered panel) */
  int64_t ih, iw, ow, kpc;      /* input map, output width, ceil(cin / 2) pairs per tap */
  int nseg;                     /* > 0: panel vectors as masked row-segment loads (see seg_plan), 0: gathers */
  int64_t dseg;                 /* input offset from one output row's segment to the next's */
  int span;                     /* pixel vectors run across images (span_plan): q = n hw, one plane */
  int64_t q, kdiv;              /* pixels of a plane (hw, or n hw spanned); pixels per segment key */
  int amx;                      /* cg_amx_mode: 1 AMX tiles, 2 emulated tiles, 0 the vdpbf16ps microkernel */
  int epd;                      /* channels per dword: 2 (bf16 pairs), 4 (int8 quads); "pair" below = a dword's channels */
  int q8;                       /* the int8 route: 1 u8 input, 2 s8 input (stored + 128, the weights' sum x 128 subtracted); 0 bf16 */
  int64_t kpr;                  /* pair rows of the panel and weights: kp, or (AMX) kp rounded up to 16, zero pairs after kp */
} bgeom;

/* Whether node n (a conv2d) takes the bf16 route on c's target. */
int cg_conv_bf16_ok(cg_ctx *c, const ir_node *n);
/* The int8 route (--precision int8; the same kernel with 4 channels a dword): a groups-1 conv
 * whose input is a quantize8 result and whose weights are integers in -127..127, on a target
 * where cg_int8_dot is non-zero; thresholds as the bf16 route's kxk convs.  kernels.def row. */
int cg_conv_int8_match(cg_ctx *c, const ir_node *n, cg_kplan *kp);
/* The route's match (kernels.def): cg_conv_bf16_ok. */
int cg_conv_bf16_match(cg_ctx *c, const ir_node *n, cg_kplan *kp);
/* 16-bit inference storage (passes/store16.c via gen_store16.c): whether the kernel of
 * cg_conv_bf16_ok node n reads its input x in bf16 (x = 1: flat 1x1 and row-segment kxk
 * panels, not gathered ones), or writes its result and reads its residuals in 16 bits (x = 0:
 * every kernel of the route's epilogue).  tune bf16_io16=0: neither (the route reads and
 * writes f32); tune bf16_kxk_x16=0: x only on flat panels. */
int cg_conv_bf16_io16(cg_ctx *c, const ir_node *n, int x);

/* The plan of conv n on the route (g zeroed first); 0 when its panel exceeds the stack limit. */
int cg_conv_bf16_plan(cg_ctx *c, const ir_node *n, bgeom *g);
/* Packs weights as bf16 pair dwords [tile][kp][R] (AMX: [tile][kpr / 16][R][16], a 16-row A
 * tile of 16 pairs per 1 KiB), bias (conv bias, BN shift) and the BN
 * scale (1 without BN) per padded channel. */
/* int8 (g->q8): the weights as dwords of 4 s8 (channel 4 (k % kpc) + i in byte i), [Cout/R][kp][R],
 * and comp[co] = 128 x the sum of channel co's weights (s8 inputs), else 0 (comp unused for bf16). */
void cg_conv_bf16_pack(cg_ctx *c, const ir_node *n, const ir_node *bn, const bgeom *g, uint32_t *wp, float *bp, float *sp,
                       int32_t *comp);
/* The bf16 bits of x (on the grid: its top half), rounded to nearest even otherwise, a
 * denormal as a signed zero (vdpbf16ps reads it so). */
uint32_t cg_conv_bf16_bits(float x);

#endif
