/* conv/flat.h — codegen-private: flat convs of the direct route (conv/flat.c), 1x1 stride-1
 * unpadded convs on pixel vectors that see the plane as one long row (a GEMM) cut into pixel
 * chunks, with packed input panels, prefetches, streaming stores and a tile-split thread order. */
#ifndef CNNC_CONV_FLAT_H
#define CNNC_CONV_FLAT_H

#include "codegen/conv/conv_core.h"

/* Input panel packing of flat convs (1x1/s1/p0 GEMMs on pixel vectors).  Unpacked, a tile's
 * K loop reads one P*V-pixel piece of each of the cin_g channel planes, HW*4 bytes apart
 * (12.5 KB on ResNet-50's 56x56 maps): cin_g separate streams that the hardware prefetchers
 * do not follow.  Packed, the chunk's whole tiles are kept in a stack buffer laid out
 * [tile][ci][P*V] (the microkernel's read order), written by the first work item of the
 * chunk and read sequentially by the others (flat_tiles); consecutive items (channel tiles
 * fastest) reuse the buffer.  key: the input element of the chunk in the buffer (-1: none). */
typedef struct conv_xpack {
  LLVMValueRef buf, key;
  /* flat_prefetch (NULL: off): the thread's tiles per chunk (run time) as conv_item takes
   * them; this item's position among them and their count in its chunk */
  LLVMValueRef part, pf_pos, pf_cnt;
  int pf_epi; /* flat_prefetch_epi */
  int nt;     /* flat_store_nt */
  int64_t wpf; /* flat_w_prefetch: floats ahead in the packed weights, 0: off */
} conv_xpack;

/* Pixels per work item (chunk) of a flat conv, and the floats of its packed input panel (0:
 * not packed). */
int64_t cg_conv_flat_chunk_px(const conv_geom *g);
int64_t cg_conv_flat_pack_floats(const conv_geom *g);
/* Pixel chunk `chunk` (run time) of chunk_px pixels of the plane for rr channels, r as the
 * work item sets it (oy = 0), pk NULL or the packed panel and its options. */
void cg_conv_flat_chunk(cg_ctx *c, const conv_geom *g, const conv_row *r, const conv_epi *e, int rr,
                        const conv_xpack *pk, LLVMValueRef chunk, int64_t chunk_px);
/* The direct route's work item loop, item it of the thread's range (nthreads: the kernel's
 * thread count): for flat convs the tile-split order (returns the item's index in the
 * tiles-fastest order) and pk's prefetch, streaming-store and weight-prefetch options; other
 * convs: it, pk unchanged. */
LLVMValueRef cg_conv_flat_item_plan(cg_ctx *c, const conv_geom *g, const conv_row *r, conv_xpack *pk, LLVMValueRef it,
                                    LLVMValueRef nthreads);
/* Compiled training (gen_train_pconv.c), flat convs (g->flat): pixel chunk `chunk` as the
 * inference work item runs it, with the x panel when xbuf is not NULL (xkey: an i64 slot, -1
 * before the first item; the buffer holds cg_conv_flat_pack_floats(g)). */
void cg_conv_flat_pixels(cg_ctx *c, const conv_geom *g, conv_row *r, const conv_epi *e, int rr, LLVMValueRef xbuf,
                         LLVMValueRef xkey, LLVMValueRef chunk);

#endif
