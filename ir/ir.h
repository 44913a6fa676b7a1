/* ir.h — cnnc's graph IR: static shapes, a small primitive op set driven by ops.def,
 * arena allocation, verifier, printer and the reference interpreter (the oracle every
 * compiled kernel is tested against).  Prefix: ir_. */
#ifndef CNNC_IR_H
#define CNNC_IR_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* ---- arena ---------------------------------------------------------------------------- */
typedef struct ir_arena ir_arena;
ir_arena *ir_arena_new(void);                 /* Returns NULL on OOM. Caller frees with ir_arena_free. */
void ir_arena_free(ir_arena *a);              /* Frees every allocation made from a. NULL is a no-op. */
void *ir_alloc(ir_arena *a, size_t n);        /* Zeroed, 16-byte aligned; aborts on OOM (compiler-side). */
char *ir_strdup(ir_arena *a, const char *s);  /* Arena copy of s. */
void *ir_calloc(size_t n, size_t size);       /* calloc off the arena (caller frees); aborts on OOM; n = 0 is fine. */
char *ir_fmt(ir_arena *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---- diagnostics ---------------------------------------------------------------------- */
typedef struct ir_loc {
  const char *file; /* NULL when the node was not made from a source file */
  int line, col;    /* 1-based; 0 = unknown */
} ir_loc;

/* One error: printed as "file:line:col: error: layer 'NAME': msg". */
typedef struct ir_diag {
  int failed;
  ir_loc loc;
  char layer[128];
  char msg[768];
} ir_diag;

/* Records the first error only (later calls are ignored); layer may be NULL.  Returns -1. */
int ir_diag_set(ir_diag *d, ir_loc loc, const char *layer, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Writes the diagnostic in the canonical one-line form, with a trailing newline. */
void ir_diag_print(const ir_diag *d, FILE *f);

/* ---- types ---------------------------------------------------------------------------- */
typedef enum ir_dtype { IR_F32 = 0, IR_BF16 = 1, IR_F16 = 2, IR_U8 = 3, IR_I32 = 4, IR_I8 = 5, IR_I64 = 6 } ir_dtype;
const char *ir_dtype_name(ir_dtype t);
size_t ir_dtype_size(ir_dtype t);

#define IR_MAX_RANK 4
typedef struct ir_shape {
  int rank;
  int64_t dim[IR_MAX_RANK];
} ir_shape;
int64_t ir_shape_numel(const ir_shape *s);
int ir_shape_eq(const ir_shape *a, const ir_shape *b);
/* The most bytes one tensor may have: the runtime refuses a larger one at open
 * (runtime/rt_validate.c), so the compiler refuses it first, naming the layer. */
#define IR_MAX_TENSOR_BYTES ((int64_t)1 << 40)
/* Bytes of a tensor of shape s and elements of elem bytes, or -1 above IR_MAX_TENSOR_BYTES
 * (no overflow whatever the dims). */
int64_t ir_shape_bytes_bounded(const ir_shape *s, size_t elem);
/* Formats like "[1,64,56,56]" into buf; returns buf. */
char *ir_shape_str(const ir_shape *s, char *buf, size_t n);

/* ---- ops ------------------------------------------------------------------------------ */
typedef enum ir_op {
#define IR_OP(name, attr, min_in, max_in, n_out, kind) IR_OP_##name,
#include "ops.def"
  IR_OP_COUNT
} ir_op;

typedef enum ir_op_kind {
  IR_KIND_CONV, IR_KIND_NORM, IR_KIND_ELTWISE, IR_KIND_POOL, IR_KIND_GEMM,
  IR_KIND_REDUCE, IR_KIND_LOSS, IR_KIND_SHAPE
} ir_op_kind;

/* Typed attributes, one struct per "attr" column of ops.def. */
typedef struct ir_none_attr { int unused; } ir_none_attr;
typedef struct ir_conv2d_attr {
  int kernel[2];   /* kh, kw */
  int stride[2];   /* sh, sw */
  int pad[4];      /* top, left, bottom, right */
  int dilation[2];
  int groups;      /* 1 dense, Cin for depthwise */
  int exact;       /* integer operands (ONNX ConvInteger): only routes whose sums are exact
                    * in f32 below 2^24 (not Winograd, whose transforms round) */
} ir_conv2d_attr;
typedef struct ir_batchnorm_attr {
  float eps, momentum; /* running = (1-momentum)*running + momentum*batch (PyTorch convention) */
  int training;        /* 1: batch statistics; 0: running statistics */
} ir_batchnorm_attr;
typedef struct ir_groupnorm_attr { int groups; float eps; } ir_groupnorm_attr;
typedef struct ir_pool_attr {
  int kernel[2], stride[2], pad[4];
  int count_include_pad; /* avgpool only */
  int ceil_mode;
  int dilation[2];       /* maxpool, maxpool_index and maxpool_grad only; 0 means 1 (ir_pool_dilation) */
  int storage_order;     /* maxpool_index only: 1 = column-major indices (plane + x*H + y, ONNX) */
} ir_pool_attr;
static inline int ir_pool_dilation(const ir_pool_attr *a, int i) { return a->dilation[i] > 0 ? a->dilation[i] : 1; }
typedef struct ir_dense_attr { int units; } ir_dense_attr;
typedef struct ir_concat_attr { int axis; } ir_concat_attr;
typedef struct ir_shuffle_attr { int groups; } ir_shuffle_attr; /* channel_shuffle; groups divides C */
typedef struct ir_transpose_attr { int perm[IR_MAX_RANK]; } ir_transpose_attr; /* a permutation of 0..rank-1 */
/* slice: out index i along axis reads start + i*step (step 0 means 1; negative steps walk back). */
typedef struct ir_slice_attr { int axis; int64_t start, len, step; } ir_slice_attr;
static inline int64_t ir_slice_step(const ir_slice_attr *s) { return s->step ? s->step : 1; }
typedef struct ir_slice_grad_attr { ir_slice_attr slice; ir_shape x_shape; } ir_slice_grad_attr;
typedef struct ir_clip_attr { float lo, hi; } ir_clip_attr;          /* clip, clip_grad: lo <= hi */
typedef struct ir_hsig_attr { float alpha, beta; } ir_hsig_attr;     /* hardsigmoid(_grad) */
typedef struct ir_leaky_attr { float alpha; } ir_leaky_attr;         /* leaky_relu(_grad) */
/* quantize8 (int8 inference): q = round-half-even(x * inv) clamped to [lo, hi], NaN -> 0;
 * inv = 1 / step, finite and > 0; lo..hi = 0..255 (u8) or -128..127 (s8). */
typedef struct ir_quantize8_attr { float inv; int lo, hi; } ir_quantize8_attr;
float ir_quantize8_f32(float x, float inv, int lo, int hi);
/* lrn(_grad) (ONNX LRN, PyTorch LocalResponseNorm): y[n,c,..] = x[n,c,..] / s^beta, s = bias +
 * alpha/size * sum of x[n,k,..]^2 for k in [c - (size-1)/2, c + size-1 - (size-1)/2] within
 * [0, C); 1 <= size <= IR_LRN_MAX_SIZE, alpha >= 0, bias > 0, all finite. */
typedef struct ir_lrn_attr { int size; float alpha, beta, bias; } ir_lrn_attr;
#define IR_LRN_MAX_SIZE 1024
int ir_lrn_check(const ir_lrn_attr *a, char *msg, size_t len); /* 0, or -1 and why in msg */
int ir_slice_check(const ir_slice_attr *s, int64_t dim, char *msg, size_t len); /* the same for a slice of a dim */
/* The scalar definitions the reference kernels and codegen follow (f32 arithmetic):
 * clip(x) = x < lo ? lo : x > hi ? hi : x (NaN stays); hardsigmoid(x) = min(max(fma(alpha, x,
 * beta), 0), 1); hardswish(x) = x * hardsigmoid(x) with alpha = 1/6, beta = 1/2. */
float ir_clip_f32(float x, float lo, float hi);
float ir_hardsigmoid_f32(float x, float alpha, float beta);
#define IR_HARDSWISH_ALPHA (1.0f / 6.0f)
#define IR_HARDSWISH_BETA 0.5f
/* reduce (and reduce_max_grad): mode over the dims where shape has 1 and x has more. */
typedef enum ir_reduce_mode { IR_REDUCE_SUM = 0, IR_REDUCE_MEAN = 1, IR_REDUCE_MAX = 2 } ir_reduce_mode;
typedef struct ir_reduce_attr { ir_shape shape; int mode; /* ir_reduce_mode; max: NaN wins */ } ir_reduce_attr;
/* expand: y = scale * x broadcast to shape (scale 0 means 1, as zeroed attributes are). */
typedef struct ir_expand_attr { ir_shape shape; float scale; } ir_expand_attr;
static inline float ir_expand_scale(const ir_expand_attr *a) { return a->scale != 0.0f ? a->scale : 1.0f; }
/* cast (docs/onnx.md "Integer tensors"): integer tensors of ONNX models travel as f32 values
 * that are exact integers.  to: the result's dtype (f32, or an integer storage dtype u8, i8,
 * i32, i64 for a graph output); wrap: the integer type (u8, i8, i32, i64) whose arithmetic the
 * value follows, or f32 for none.  An integer-dtype x becomes its f32 value.  An f32 x with an
 * integer wrap or to becomes ir_cast_f32(x, type): truncated toward 0, then wrapped modulo 2^8
 * into u8 / i8 or saturated to the i32 / i64 range; NaN and infinities give 0. */
typedef struct ir_cast_attr { int to, wrap; /* ir_dtype */ } ir_cast_attr;
float ir_cast_f32(float x, int type);
#define IR_F32_EXACT_INT ((int64_t)1 << 24) /* every integer of magnitude up to this is an exact f32 */
int ir_dtype_is_int(int t); /* u8, i8, i32, i64 */
typedef struct ir_xent_attr { float label_smoothing; } ir_xent_attr;
typedef struct ir_dropout_attr { float rate; int training; uint64_t seed; } ir_dropout_attr;
typedef struct ir_reshape_attr { ir_shape shape; /* full target shape incl. batch; one dim may be -1 */ } ir_reshape_attr;
#define IR_MAX_CHANNELS_NORMALIZE 4
typedef struct ir_normalize_attr {
  float scale;                               /* applied first: 1/255 for u8 images */
  int channels;
  float mean[IR_MAX_CHANNELS_NORMALIZE], std[IR_MAX_CHANNELS_NORMALIZE];
  int folded;                                /* pass_fold_normalize: 1 scale, mean and std moved into
                                                the consumer conv (this node: 1, 0, 1, a u8 -> f32 copy);
                                                2 scale and std moved, the means kept as x - mean[c]/scale
                                                (this node: 1, mean/scale, 1; padded convs) */
} ir_normalize_attr;

/* Training (issue 5; docs/training.md): attributes of the backward and optimizer ops. */
typedef struct ir_conv2d_grad_attr {
  ir_conv2d_attr conv; /* the forward conv's attributes */
  ir_shape x_shape;    /* the forward input's shape [N,Cin,H,W] (grad_input's result) */
} ir_conv2d_grad_attr;
typedef struct ir_pool_grad_attr {
  ir_pool_attr pool;   /* the forward pool's attributes */
  ir_shape x_shape;    /* the forward input's shape (the result) */
} ir_pool_grad_attr;
typedef struct ir_tshape_attr { ir_shape shape; /* result shape */ } ir_tshape_attr;
typedef struct ir_xent_grad_attr {
  float label_smoothing;
  float scale;         /* seed of the backward pass: dloss (the loss scaling factor) */
} ir_xent_grad_attr;
/* Optimizer ops.  g' = g * grad_scale + l2 * w is the gradient an optimizer sees (l2: the
 * coupled --l2-regularization); weight_decay is decoupled: delta_w = -lr*(O(g') + wd*w). */
typedef struct ir_optim_attr {
  float momentum;      /* momentum / Nesterov: mu */
  float rho;           /* RMSprop: decay of the squared-gradient average */
  float beta1, beta2;  /* Adam */
  float eps;           /* RMSprop, Adam */
  float weight_decay, l2;
  float grad_scale;    /* 1 / loss scaling */
  int nesterov;
  int target;          /* value id of the param (weight or state) this result replaces after a
                        * step (ir_train_apply), -1 if none */
  int round16;         /* weight updates of --precision 16.16: 0 = f32 result, 1 + ir_half_format =
                        * the updated weight rounded to that format (docs/precision.md) */
  int stochastic;      /* round16 stochastically: the last operand is the step counter t' and the
                        * random bits a hash of (seed, t', element) */
  uint64_t seed;       /* stochastic rounding seed of this param */
} ir_optim_attr;

/* Precision (issue 6; docs/precision.md): round16 rounds to a 16-bit float format and widens
 * back to f32 (round-to-nearest-even; bf16 keeps NaNs quiet, fp16 has subnormals and
 * overflows to inf). */
typedef enum ir_half_format { IR_HALF_BF16 = 0, IR_HALF_FP16 = 1 } ir_half_format;
typedef struct ir_round16_attr { int format; /* ir_half_format */ } ir_round16_attr;
/* One f32 rounded to the format and widened back (the scalar definition ref and codegen follow). */
float ir_round16_f32(float x, int format);
/* 16-bit storage (passes/store16.c): narrow16 stores round16(x) in a bf16/fp16 buffer, widen16
 * reads it back as f32.  keep_sign (narrow16): a positive x that rounds to 0 is stored as the
 * smallest positive 16-bit value instead (the value only feeds relu_grad's x > 0). */
typedef struct ir_store16_attr { int format; /* ir_half_format */ int keep_sign; } ir_store16_attr;
/* The f32 value narrow16 stores for x (widen16 of it gives this back exactly). */
float ir_narrow16_f32(float x, int format, int keep_sign);

typedef union ir_attr {
#define IR_OP(name, attr, min_in, max_in, n_out, kind) ir_##attr##_attr name;
#include "ops.def"
} ir_attr;

/* ---- graph ---------------------------------------------------------------------------- */
typedef enum ir_value_kind {
  IR_VAL_INPUT,  /* fed by the caller (images) */
  IR_VAL_LABEL,  /* fed by the caller in training (class ids) */
  IR_VAL_PARAM,  /* weights: trainable or running statistics; data owned by the graph arena */
  IR_VAL_ACT     /* produced by a node */
} ir_value_kind;

typedef struct ir_value {
  int id;
  const char *name;   /* unique; params are "<layer>/weight", "<layer>/bias", "<layer>/gamma", ... */
  ir_value_kind kind;
  ir_dtype dtype;
  ir_shape shape;     /* dim[0] is the batch for INPUT/LABEL/ACT values */
  int producer;       /* node id, or -1 */
  int trainable;      /* params: 1 for weights/biases/gamma/beta, 0 for running statistics */
  float *data;        /* params: initial or loaded values (f32), NULL otherwise */
} ir_value;

#define IR_MAX_IN 8 /* concat takes up to this many; longer concats are chains */
typedef struct ir_node {
  int id;
  ir_op op;
  const char *name;   /* hierarchical layer name, e.g. "layer1/0/conv1" */
  ir_loc loc;         /* where the layer was defined */
  int n_in, in[IR_MAX_IN];
  int out;            /* value id of the (single) result */
  ir_attr attr;
  int shard;          /* pipeline stage, set by the split pass; 0 before */
} ir_node;

typedef struct ir_graph {
  ir_arena *arena;
  const char *name;
  int batch;                   /* static micro-batch size */
  ir_value *values; int n_values, cap_values;
  ir_node *nodes;   int n_nodes, cap_nodes; /* topologically ordered: nodes[i].in come earlier */
  int *name_index; int name_index_cap;       /* open-addressing hash: value name -> id + 1 (graph.c) */
  int input;                   /* value id of the image input */
  int label;                   /* value id of labels, -1 if none */
  int outputs[8]; int n_outputs;
  int n_shards;
  /* --enable-half-partials inside the kernels (docs/precision.md), set by cg_build_model:
   * half_partials = 1 + ir_half_format when the partial sums a kernel keeps in memory between
   * reduction blocks are 16-bit values (the interpreter rounds at the same points), 0 = f32;
   * partial_lanes = the kernels' f32 vector width (the lanes those partials live in);
   * partial_kblock[node id] = input channels per K block of a conv kernel that keeps its
   * output's partial sums between blocks (written by codegen, 0 = none; NULL when off);
   * partial_bytes[node id] = bytes of 16-bit partial-sum storage the node's kernel keeps (per
   * thread; the f32 buffer it replaces is twice that, so this is also the bytes saved), 0 =
   * none or still f32 (written by codegen; NULL when off). */
  int half_partials, partial_lanes;
  int *partial_kblock;
  int64_t *partial_bytes;
  /* The tuning knobs this graph is compiled with (ir/tuning.def; set by the driver, NULL =
   * the defaults): read through ir_tune(g). */
  const struct ir_tuning *tune;
} ir_graph;

/* g's tuning knobs: g->tune, or the defaults when it is NULL (ir/tuning.h). */
const struct ir_tuning *ir_tune(const ir_graph *g);

/* New empty graph owning its arena.  Caller frees with ir_graph_free. */
ir_graph *ir_graph_new(const char *name, int batch);
void ir_graph_free(ir_graph *g);

int ir_add_input(ir_graph *g, const char *name, ir_dtype dt, ir_shape s);  /* returns value id */
int ir_add_label(ir_graph *g, const char *name);                            /* [N] f32 class ids */
int ir_add_label_mixed(ir_graph *g, const char *name); /* [N,3] f32 (class a, class b, weight of a): mixup */
/* Floats per sample of a labels shape: 1 for [N] class ids, 3 for [N,3] mixed labels, else 0. */
static inline int ir_label_width(const ir_shape *s) { return s->rank == 1 ? 1 : s->rank == 2 && s->dim[1] == 3 ? 3 : 0; }
/* A parameter tensor (data zero-filled, owned by g).  Returns value id. */
int ir_add_param(ir_graph *g, const char *name, ir_shape s, int trainable);
/* Appends a node, infers its output shape with the op's hook and returns the new value id,
 * or -1 with d filled (the message names the layer and says what is wrong). */
int ir_add_node(ir_graph *g, ir_op op, const char *name, ir_loc loc, const int *in, int n_in,
                const ir_attr *attr, ir_diag *d);
int ir_find_value(const ir_graph *g, const char *name);  /* -1 if absent */
int ir_find_node(const ir_graph *g, const char *name);   /* -1 if absent */
int64_t ir_value_bytes(const ir_graph *g, int v);        /* value v's size: numel * dtype size */

/* Checks every invariant (operand counts, topological order, shapes re-inferred and equal,
 * unique names, dtypes).  Returns 0 or -1 with d filled. */
int ir_verify(const ir_graph *g, ir_diag *d);
/* Deterministic text form (goldens). */
void ir_print(const ir_graph *g, FILE *f);

/* ---- op table ------------------------------------------------------------------------- */
typedef struct ir_cost {
  double macs;    /* multiply-accumulates (FLOPs = 2*macs for conv/dense) */
  double flops;   /* all floating point operations */
  double bytes;   /* bytes read + written assuming no reuse across ops */
} ir_cost;

/* Shape inference: fill *out from inputs; return 0 or -1 with d filled (layer/loc added by
 * the caller). */
typedef int (*ir_infer_fn)(const ir_graph *g, const ir_node *n, ir_shape *out, ir_diag *d);
typedef void (*ir_cost_fn)(const ir_graph *g, const ir_node *n, ir_cost *c);
/* Reference kernel: in[i] are f32 buffers with the operand shapes, out the result. */
typedef void (*ir_ref_fn)(const ir_graph *g, const ir_node *n, const float *const *in, float *out);

typedef struct ir_op_info {
  const char *name;
  int min_in, max_in, n_out;
  ir_op_kind kind;
  ir_infer_fn infer;
  ir_cost_fn cost;
  ir_ref_fn ref;
} ir_op_info;

extern const ir_op_info ir_ops[IR_OP_COUNT];
ir_op ir_op_from_name(const char *name); /* IR_OP_COUNT if unknown */

/* Cost of one node, and totals for the graph. */
void ir_node_cost(const ir_graph *g, const ir_node *n, ir_cost *c);
int64_t ir_param_count(const ir_graph *g, int trainable_only);

/* ---- weights -------------------------------------------------------------------------- */
/* Deterministic framework-style init from seed: conv/dense weights Kaiming-normal
 * (fan_out, relu gain) / uniform for dense, biases 0, gamma 1, beta 0, running_var 1. */
void ir_init_params(ir_graph *g, uint64_t seed);

/* ---- reference interpreter ------------------------------------------------------------ */
/* Runs the whole graph on f32 input x ([batch, ...] NCHW; u8 inputs are passed as f32
 * values 0..255) and, for graphs with labels, labels (f32 class ids).  Returns a malloc'd
 * array of n_values buffers (NULL for params not computed); caller frees with
 * ir_interp_free.  Training-mode batchnorm updates running statistics in g. */
float **ir_interp(ir_graph *g, const float *x, const float *labels);
void ir_interp_free(const ir_graph *g, float **vals);

#include "ir/tuning.h" /* ir_tune(g)->knob */

#endif
