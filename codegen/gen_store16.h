/* gen_store16.h — codegen-private: 16-bit storage of inference activations (issue 6,
 * docs/precision.md "16-bit storage of inference activations"). */
#ifndef CNNC_GEN_STORE16_H
#define CNNC_GEN_STORE16_H

#include <stdio.h>

#include "codegen/cg.h"

/* Runs passes/store16.c pass_store16_infer on the split inference graph g with the hooks of
 * this back end for target t (which kernels read / write 16-bit operands: the standalone
 * round16 and maxpool kernels, the direct conv route's pixel-vector kernels (conv/pixvec.c) with their fused epilogues;
 * widen16 nodes before every other reader), then checks the fused kernels of the result
 * against the same hooks.  amp: --available-memory-proportion (the conv routes depend on it).
 * log (cnnc -v): one line per widened reader and a summary.  Returns the number of values
 * stored in 16 bits or -1 with d filled. */
int cg_store16_infer(ir_graph *g, const cg_target *t, const char *amp, int fmt, FILE *log, ir_diag *d);

#endif
