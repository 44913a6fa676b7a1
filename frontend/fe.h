/* fe.h — the YAML model frontend and the compile options.  Prefix: fe_. */
#ifndef CNNC_FE_H
#define CNNC_FE_H

#include <stddef.h>

#include "ir/ir.h"

typedef enum fe_opt_type { OPT_INT, OPT_FLOAT, OPT_STR, OPT_LIST, OPT_ENUM, OPT_FLAG } fe_opt_type;

#define FE_MAX_LIST 64
typedef struct fe_list { int n; const char *v[FE_MAX_LIST]; } fe_list;

/* The values of the OPT_ENUM options, every option's in one enum (options.def OPT_VALUE
 * rows): FE_MODE_TRAINING, FE_PRECISION_16_16, ... */
typedef enum fe_optval {
#define OPT(field, lname, type, def, values, help, impl)
#define OPT_VALUE(field, name, text) FE_##name,
#include "options.def"
  FE_N_VALUES
} fe_optval;
/* The text of value v ("training"). */
const char *fe_optval_text(fe_optval v);
/* Option k's values joined by '|' into buf ("inference|training"); "" for non-enum options. */
const char *fe_opt_values(int k, char *buf, size_t size);

/* Compile options.  Field types follow options.def: OPT_INT -> int64_t, OPT_FLOAT -> double,
 * OPT_STR -> const char * (never NULL after fe_options_init), OPT_ENUM -> fe_optval (made once,
 * when the option is set), OPT_LIST -> fe_list, OPT_FLAG -> int.  set[k] is nonzero once option k was given explicitly (command line or
 * the model's compile: section); the command line wins. */
enum {
#define OPT(field, lname, type, def, values, help, impl) FE_OPTK_##field,
#include "options.def"
  FE_OPT_COUNT
};
#define FE_OPT_CTYPE_OPT_INT int64_t
#define FE_OPT_CTYPE_OPT_FLOAT double
#define FE_OPT_CTYPE_OPT_STR const char *
#define FE_OPT_CTYPE_OPT_ENUM fe_optval
#define FE_OPT_CTYPE_OPT_LIST fe_list
#define FE_OPT_CTYPE_OPT_FLAG int
typedef struct fe_options {
#define OPT(field, lname, type, def, values, help, impl) FE_OPT_CTYPE_##type field;
#include "options.def"
  unsigned char set[FE_OPT_COUNT];
  const char *tmpdir; /* not an option: where the compile's temporary files go (NULL: /tmp) */
  char weights_note[1024]; /* not an option: fe_load's note on --weights, e.g. what a training
                              checkpoint's load ignored ("" if none; the caller prints it) */
} fe_options;

typedef struct fe_opt_info {
  const char *field, *long_name;
  fe_opt_type type;
  const char *def, *values, *help; /* values: "" for OPT_ENUM rows (fe_opt_values) */
  int implemented;
} fe_opt_info;
extern const fe_opt_info fe_opt_table[FE_OPT_COUNT];

void fe_options_init(fe_options *o);            /* every field to its default, set[] zero */
/* --batch-size of a --mode training compile that does not give one (command line or compile:):
 * the batch of the standard PyTorch recipe (../shared/anchors/fmnist_torch.py: SGD momentum 0.9,
 * lr 0.05 = cnnrun train's default, batch 64), not inference's 1. */
#define FE_TRAIN_BATCH_DEFAULT 64
/* After the compile: section is merged: the training defaults of options not given (the batch). */
void fe_options_mode_defaults(fe_options *o);
int fe_option_find(const char *long_or_field);  /* index or -1; accepts "batch-size" or "batch_size" */
/* Sets option k from text (strings must outlive o; lists take one item per call).
 * Returns 0 or -1 with d filled (loc/layer left to the caller). */
int fe_option_set(fe_options *o, int k, const char *text, ir_diag *d);
/* Writes the options as a JSON object (malloc'd, caller frees); "tune" holds every knob's
 * value: the defaults with o's --tune items (fe_options_json), or tune as given. */
char *fe_options_json(const fe_options *o);
char *fe_options_json_tuned(const fe_options *o, const ir_tuning *tune);
/* Applies o's --tune items, in order, to t.  Returns 0 or -1 with d filled. */
int fe_options_tuning(const fe_options *o, ir_tuning *t, ir_diag *d);

/* Parses the model file at path, merges its compile: section into o (options already set
 * stay), then lowers it into a verified graph with o->batch_size.  Params are initialised
 * from o->seed.  Returns the graph (caller frees with ir_graph_free), or NULL with d filled
 * ("file:line:col: error: layer 'X': ...").  Never aborts on bad input. */
ir_graph *fe_load(const char *path, fe_options *o, ir_diag *d);
/* fe_load's path for files named *.onnx (frontend/onnx.c, docs/onnx.md): the same contract;
 * --batch-size binds the input's symbolic batch dim; messages name the ONNX node. */
ir_graph *fe_load_onnx(const char *path, fe_options *o, ir_diag *d);
/* Writes g as a flat YAML model at path (atomically) with its parameters beside it in
 * safetensors (path's stem + .safetensors, named by the model's `weights:` key); `cnnc path`
 * then builds the same graph; the weights file must not be one of inputs[n_in] (the model and
 * weights the graph came from).  0, or -1 with d naming a node the format cannot express. */
int fe_emit_yaml(const ir_graph *g, const char *path, const char *const *inputs, int n_in, ir_diag *d);
/* fe_load_onnx of a model in memory (the fuzz harness); name is used in messages. */
ir_graph *fe_load_onnx_mem(const char *name, const void *data, size_t len, fe_options *o, ir_diag *d);
/* Nonzero if path names an ONNX model (by its extension, .onnx). */
int fe_is_onnx_path(const char *path);

#endif
