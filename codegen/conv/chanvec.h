/* conv/chanvec.h — codegen-private: the direct route's channel-vector microkernel
 * (conv/chanvec.c): output channels in the vector lanes, a tile of Rv vectors of V channels x
 * P output pixels; the K-blocked planes of kxk convs; and the tile pieces the rows of
 * conv/chanvec_row.c are made of. */
#ifndef CNNC_CONV_CHANVEC_H
#define CNNC_CONV_CHANVEC_H

#include "codegen/conv/conv_core.h"

/* The body of a K-blocked plane work item (cg_conv_vc_plane_ok): the plane of the (image,
 * tile) whose in_base/wbase/bbase and out_row (of output row 0) are set in r. */
void cg_conv_vc_plane(cg_ctx *c, const conv_geom *g, const conv_row *r, const conv_epi *e, int rr);

/* np pixels of rr channels from column ox (run time; ox_const >= 0 when known: border taps
 * dropped). */
void cg_conv_vc_tile(cg_ctx *c, const conv_geom *g, const conv_row *r, const conv_epi *e, int rr, int np,
                     LLVMValueRef ox, int64_t ox_const);
/* Epilogue of a whole tile, acc[v * np + p] (vector v of channels, pixel p, from column ox). */
void cg_conv_vc_store_tile(cg_ctx *c, const conv_geom *g, const conv_row *r, const conv_epi *e, const LLVMValueRef *acc,
                           int rr, int np, LLVMValueRef ox);
/* A kxk row of 2-4 tiles K-blocked over input channels when its weights exceed L1; 0 (nothing
 * emitted) when the row does not qualify. */
int cg_conv_vc_kblocked_kxk_row(cg_ctx *c, const conv_geom *g, const conv_row *r, const conv_epi *e, int rr);
/* Next-block weight prefetch spread over the tiles of a K block (tune vc_w_spread): whether it
 * is on, and tile t of nt's share at K step j (wnext: the next block's first weight element,
 * wci weight bytes per input channel, kc input channels per block). */
static inline int cg_conv_vc_w_spread(const conv_geom *g) { return g->tune->vc_w_spread; }
void cg_conv_vc_w_spread_pf(cg_ctx *c, const conv_row *r, LLVMValueRef wnext, LLVMValueRef j, int64_t t, int64_t nt,
                            int64_t kc, int64_t wci);

#endif
