/* conv/dw.h — codegen-private: the depthwise plane kernels of the direct route (conv/dw.c). */
#ifndef CNNC_CONV_DW_H
#define CNNC_CONV_DW_H

#include "codegen/conv/conv_core.h"

/* Whether a plane kernel applies to g (depthwise; 1: the flat-plane kernel, stride 1 with the
 * output width = input width or stride 2 through phase planes, a plane small enough to emit
 * every tile at compile time; 2: the row-tiled kernel of larger maps; 0: neither), and the body
 * of one work item, the (image, channel) plane whose in_base/out_row/wbase/bbase are set in r. */
int cg_conv_dw_plane_ok(const conv_geom *g);
void cg_conv_dw_plane(cg_ctx *c, const conv_geom *g, const conv_row *r, const conv_epi *e);

#endif
