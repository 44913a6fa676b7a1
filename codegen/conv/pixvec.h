/* conv/pixvec.h — codegen-private: the pixel-vector microkernel of the direct route
 * (conv/pixvec.c): a register tile of rr output channels x np vectors of V output pixels of
 * one output row, and the rows made of such tiles. */
#ifndef CNNC_CONV_PIXVEC_H
#define CNNC_CONV_PIXVEC_H

#include "codegen/conv/conv_core.h"

/* One tile: rr channels x np vectors from output column ox (run time); ox_const >= 0 when the
 * column is known at compile time (border/tail: lane masks up to ox_end), -1 for interior tiles
 * (every lane and tap in range).  The flat route's options (conv/flat.c): xp, a flat conv's
 * packed input panels, NULL otherwise; the tile's pixels for input channel ci are at
 * xp[xp_base + ci*np*V ..] (interior tiles only).  xmode 1 reads them there, xmode 2 reads the
 * planes and writes them there.  pf (xmode 1, else NULL): byte offset in x of one cache line of
 * the thread's next chunk in channel plane 0; the K loop prefetches that line of every plane
 * ci.  epi (NULL: none): the output element of the tile whose residuals are prefetched.  nt:
 * non-temporal output stores.  wpf: weight prefetch distance in floats (0: none). */
void cg_conv_tile_x(cg_ctx *c, const conv_geom *g, const conv_row *r, const conv_epi *e, int rr, int np,
                    LLVMValueRef ox, int64_t ox_const, int64_t ox_end, LLVMValueRef xp, LLVMValueRef xp_base,
                    int xmode, LLVMValueRef pf, LLVMValueRef epi, int nt, int64_t wpf);
/* cg_conv_tile_x without the flat options. */
void cg_conv_tile(cg_ctx *c, const conv_geom *g, const conv_row *r, const conv_epi *e, int rr, int np,
                  LLVMValueRef ox, int64_t ox_const, int64_t ox_end);
/* Compile-time column tiles [from, to) of up to P vectors each, masked. */
void cg_conv_masked_tiles(cg_ctx *c, const conv_geom *g, const conv_row *r, const conv_epi *e, int rr, int64_t from,
                          int64_t to);
/* One output row of rr channels (r as the work item sets it). */
void cg_conv_row_emit(cg_ctx *c, const conv_geom *g, const conv_row *r, const conv_epi *e, int rr);

#endif
