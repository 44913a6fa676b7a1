/* conv/direct.h — codegen-private: the direct route of inference convs (conv/direct.c;
 * kernels.def: every conv the stem, bf16 and Winograd routes do not take). */
#ifndef CNNC_CONV_DIRECT_H
#define CNNC_CONV_DIRECT_H

#include "codegen/conv/conv_core.h"

/* The route's generator: pixel-vector tiles (conv/pixvec.c, flat chunks conv/flat.c),
 * channel-vector tiles (conv/chanvec*.c) or depthwise planes (conv/dw.c) over the geometry of
 * cg_conv_geometry. */
LLVMValueRef cg_gen_conv2d_direct(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind);
/* 16-bit inference storage (passes/store16.c): whether conv2d node n's direct kernel is on
 * pixel vectors (pixel tiles or flat 1x1 chunks, no squeeze-excite scale, depthwise planes),
 * which read x and the residuals and write the result in 16 bits directly; channel vectors
 * read and write f32 (gen_store16.c asks it for the convs of this route). */
int cg_conv_direct_io16_ok(cg_ctx *c, const ir_node *n);
/* The route's match (kernels.def: every conv the routes before it leave): the register tile
 * and, for convs run in blocks of channel tiles (not flat, not depthwise planes), the tiles
 * per block and the block's working set. */
int cg_conv_direct_match(cg_ctx *c, const ir_node *n, cg_kplan *kp);
/* Compiled training (gen_train_pconv.c): the pixels of output row oy for rr channels
 * (g->flat == 0: training views a flat conv's plane as rows of its own width), given r's
 * x/out/wp/bp and in_base/out_row/wbase/bbase as the route's work item sets them, the packed
 * weights / bias read wherever r->wp / r->bp point. */
void cg_conv_row_pixels(cg_ctx *c, const conv_geom *g, conv_row *r, const conv_epi *e, int rr, LLVMValueRef oy);

#endif
