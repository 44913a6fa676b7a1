/* weights.h — safetensors I/O for model parameters.  Prefix: fe_. */
#ifndef CNNC_FE_WEIGHTS_H
#define CNNC_FE_WEIGHTS_H

#include "ir/ir.h"

/* Loads every trainable and running-statistic parameter of g from the safetensors file at
 * path (F32, or BF16/F16 converted to f32): a regular file (a FIFO is refused, not waited on)
 * whose header is strict JSON and whose tensors' data offsets tile the data section exactly
 * (no overlap, gap or trailing bytes).  Every parameter must be present with exactly its
 * shape; extra tensors are an error too (names listed), but for the optimizer state and
 * counters of a training checkpoint (fe_load_safetensors_note).  Values must be finite and
 * running_var >= 0 unless allow_nonfinite.  Returns 0 or -1 with d filled naming the file and
 * the tensor. */
int fe_load_safetensors(ir_graph *g, const char *path, int allow_nonfinite, ir_diag *d);
/* As fe_load_safetensors, and also takes a training checkpoint of cnnrun train / cnnrt_save_
 * checkpoint (__metadata__ "format": "cnnc-checkpoint"): its parameters and batch-norm
 * statistics load as above; its optimizer state (P/momentum, P/rms, P/m, P/v of a parameter P,
 * optimizer/...) and "step" (I32/I64 allowed there only) are ignored, and note (note_n bytes,
 * may be NULL) receives one line saying what was taken and ignored ("" for other files). */
int fe_load_safetensors_note(ir_graph *g, const char *path, int allow_nonfinite, char *note, size_t note_n, ir_diag *d);
/* Writes every parameter of g as F32 (atomically: temp file + rename).  0 or -1 with d. */
int fe_save_safetensors(const ir_graph *g, const char *path, ir_diag *d);

#endif
