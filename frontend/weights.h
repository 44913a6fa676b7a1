/* weights.h — safetensors I/O for model parameters.  Prefix: fe_. */
#ifndef CNNC_FE_WEIGHTS_H
#define CNNC_FE_WEIGHTS_H

#include "ir/ir.h"

/* Loads every trainable and running-statistic parameter of g from the safetensors file at
 * path (F32, or BF16/F16 converted to f32).  Every parameter must be present with exactly
 * its shape; extra tensors are an error too (names listed).  Returns 0 or -1 with d filled
 * naming the file and the tensor. */
int fe_load_safetensors(ir_graph *g, const char *path, ir_diag *d);
/* Writes every parameter of g as F32 (atomically: temp file + rename).  0 or -1 with d. */
int fe_save_safetensors(const ir_graph *g, const char *path, ir_diag *d);

#endif
