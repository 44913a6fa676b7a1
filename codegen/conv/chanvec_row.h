/* conv/chanvec_row.h — codegen-private: the channel-vector rows of the direct route
 * (conv/chanvec_row.c). */
#ifndef CNNC_CONV_CHANVEC_ROW_H
#define CNNC_CONV_CHANVEC_ROW_H

#include "codegen/conv/conv_core.h"

/* Channel-vector row: rr valid channels of the tile, every output pixel of the row (r as the
 * work item sets it): input panels and K-blocked rows of 1x1 convs, sub planes, K-blocked or
 * short kxk rows, else border tiles and a run-time loop of interior tiles. */
void cg_conv_vc_row(cg_ctx *c, const conv_geom *g, const conv_row *r, const conv_epi *e, int rr);

#endif
