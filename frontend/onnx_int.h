/* onnx_int.h — private declarations of the ONNX importer (onnx.c: the file, constants and the
 * graph walk; onnx_ops.c: one converter per ONNX operator and the dispatch; onnx_shape.c: data
 * movement and shape arithmetic).  Prefix: ox_. */
#ifndef CNNC_ONNX_INT_H
#define CNNC_ONNX_INT_H

#include <stdint.h>

#include "fe_int.h"
#include "onnx.pb-c.h"

/* ---- limits: the file is untrusted ------------------------------------------------------- */
#define OX_MAX_FILE_BYTES ((int64_t)2 << 30) /* protobuf's own limit for one message */
#define OX_MAX_NODES 100000
#define OX_MAX_RANK 8                        /* of constants; activations have IR_MAX_RANK */
#define OX_MAX_CONST_NUMEL ((int64_t)1 << 30)
#define OX_MIN_OPSET 1 /* older operator versions differ in attributes, which are checked */
#define OX_MAX_OPSET 17

/* ONNX TensorProto.DataType values the importer reads. */
enum { OX_FLOAT = 1, OX_UINT8 = 2, OX_INT8 = 3, OX_INT32 = 6, OX_INT64 = 7, OX_BOOL = 9, OX_DOUBLE = 11 };

/* A tensor known at import time (an initializer, a Constant, or folded from them).  Numbers
 * are held as f32 (FLOAT, DOUBLE) or int64 (the integer types); numel = product of dims. */
typedef struct ox_const {
  int rank;
  int64_t dims[OX_MAX_RANK];
  int64_t numel;
  int is_int;      /* i holds the values, else f */
  float *f;
  int64_t *i;
} ox_const;

/* An ONNX value name as the importer knows it: an IR value, a constant, or both (a constant
 * made into an IR parameter once an op needed it as an operand). */
typedef struct ox_val {
  const char *name;
  int ir;          /* IR value id, -1 if none yet */
  ox_const *c;     /* the constant, NULL for activations */
  int swish_of;    /* a Sigmoid or HardSigmoid folded into the Mul that reads it: 1 + the IR
                    * value of its input (the Mul becomes op gate of that); 0 otherwise */
  int gate;        /* IR_OP_swish or IR_OP_hardswish */
  int pad[4];      /* a zero Pad folded into its one reader (Conv, AveragePool): the IR value ir
                    * is the unpadded input, pad the [top, left, bottom, right] to add */
  int padded;
  int view;        /* the channel-shuffle pattern Reshape [N,C,H,W] -> [N,G,C/G,H,W] (1), then
                    * Transpose 1<->2 (2): ir is the [N,C,H,W] tensor; the Reshape back to
                    * [N,C,H,W] becomes channel_shuffle(G).  0: a plain value */
  int view_groups;
  int itype;       /* an integer activation (docs/onnx.md "Integer tensors"): its ONNX element
                    * type OX_UINT8, OX_INT8, OX_INT32 or OX_INT64 (exact integers in f32);
                    * 0 for float tensors */
} ox_val;

typedef struct ox_ctx {
  const char *file;          /* the path as given (messages) */
  const uint8_t *mem;        /* fe_load_onnx_mem: the model's bytes (else read from file) */
  size_t mem_len;
  const char *gfile;         /* owned by the graph (node locations) */
  ir_arena *a;               /* scratch, freed after import */
  ir_graph *g;
  fe_options *o;
  ir_diag *d;
  int opset;                 /* of the default domain */
  int training;
  int dim0_free;             /* ops may cross dim 0 (docs/onnx.md "Dim 0"): an inference graph
                              * whose input has a fixed dim 0, so one micro-batch is the whole
                              * tensor the model computes on */
  int crossed;               /* an op crossed dim 0: the whole input is one sample (one_sample) */
  fe_strmap names;           /* ONNX value name -> index in vals */
  ox_val *vals; int n_vals, cap_vals;
  fe_strmap use_names;       /* value name -> index in use_count */
  int *use_count;            /* node inputs and graph outputs that read the value */
  const Onnx__NodeProto *node;  /* the node being converted (messages) */
  int node_index;
  unsigned char *skip;       /* per node: consumed by a fusion of an earlier node */
  const Onnx__GraphProto *graph;
} ox_ctx;

/* Error about the current node: "node 'NAME' (OP, opset N): ...".  Always returns -1. */
int ox_err(ox_ctx *x, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The layer name of the current node (its ONNX name, made a valid layer name; unique). */
const char *ox_layer_name(ox_ctx *x);

/* How many node inputs and graph outputs read the value called name. */
int ox_uses(ox_ctx *x, const char *name);
/* The node after the current one that reads value name (and the input slot), or -1. */
int ox_next_reader(ox_ctx *x, const char *name, int *slot);

/* Values. */
ox_val *ox_find(ox_ctx *x, const char *name);            /* NULL if unknown */
int ox_bind(ox_ctx *x, const char *name, int ir, ox_const *c);   /* defines an output name */
/* Input i of the current node: NULL with an error if missing or unknown. */
ox_val *ox_input(ox_ctx *x, int i);
int ox_has_input(ox_ctx *x, int i);                      /* present and not "" */
/* Input i as an IR activation (a constant input is made a non-trainable parameter). */
int ox_act(ox_ctx *x, int i);
/* Input i as a constant, NULL with an error naming it if it is not one. */
const ox_const *ox_need_const(ox_ctx *x, int i, const char *what);
/* A new IR parameter named "<layer>/<suffix>" holding c's values (as f32), shape c's dims
 * (at most IR_MAX_RANK; n_dims / dims override when dims != NULL). */
int ox_param(ox_ctx *x, const char *suffix, const ox_const *c, int trainable, int n_dims, const int64_t *dims);
/* Adds an IR node for the current node, binds its first output.  Returns 0 or -1. */
int ox_node(ox_ctx *x, ir_op op, const int *in, int n_in, const ir_attr *a);
ox_const *ox_const_new(ox_ctx *x, int rank, const int64_t *dims, int is_int);

/* Attributes: each getter returns 0 (absent: *out = def) or 1 (read), -1 on a type or size
 * error (reported).  ox_check_attrs reports any attribute not in the comma-separated list. */
int ox_check_attrs(ox_ctx *x, const char *known);
int ox_attr_int(ox_ctx *x, const char *name, int64_t def, int64_t *out);
int ox_attr_float(ox_ctx *x, const char *name, double def, double *out);
int ox_attr_ints(ox_ctx *x, const char *name, int max, int64_t *out, int *n);
int ox_attr_str(ox_ctx *x, const char *name, const char *def, const char **out);
const Onnx__AttributeProto *ox_attr(ox_ctx *x, const char *name);
/* A TensorProto as a constant (checked: type, dims, data length). NULL with an error. */
ox_const *ox_tensor(ox_ctx *x, const Onnx__TensorProto *t, const char *what);

/* Shapes, helpers shared by the converters, and the converters of onnx_shape.c. */
static inline const ir_shape *ox_shape(ox_ctx *x, int v) { return &x->g->values[v].shape; }
/* An IR node of the current ONNX node that is not its result (a link of a chain, one of
 * several outputs): named "<layer>/<suffix>".  Returns its value id or -1. */
int ox_part_node(ox_ctx *x, const char *suffix, ir_op op, const int *in, int n_in, const ir_attr *a);
int ox_reshape_to(ox_ctx *x, int in, const int64_t *dims, int rank); /* reshape or alias; dim 0 stays the batch unless dim0_free */
/* 0 when the current node may compute across dim 0 (x->dim0_free), else -1 with an error
 * saying what (e.g. "concatenation along axis 0") and why not. */
int ox_cross_dim0(ox_ctx *x, const char *what);
int ox_binary(ox_ctx *x, ir_op op);                                  /* Add / Mul of activations */
int ox_op_shape_op(ox_ctx *x);
int ox_op_gather(ox_ctx *x);
int ox_op_unsqueeze(ox_ctx *x);
int ox_op_squeeze(ox_ctx *x);
int ox_op_cast(ox_ctx *x);
int ox_op_constant_of_shape(ox_ctx *x);
int ox_fold_reshape(ox_ctx *x, const ox_const *d, const int64_t *dims, int rank);
int ox_fold_transpose(ox_ctx *x, const ox_const *c, const int64_t *perm, int n);
int ox_op_concat(ox_ctx *x);
int ox_op_slice(ox_ctx *x);
int ox_op_split(ox_ctx *x);
int ox_op_pad(ox_ctx *x);
/* onnx_tensor.c */
int ox_op_gemm(ox_ctx *x);
int ox_op_matmul(ox_ctx *x);
int ox_op_flatten(ox_ctx *x);
int ox_op_reshape(ox_ctx *x);
int ox_op_transpose(ox_ctx *x);
int ox_op_reduce_mean(ox_ctx *x);
int ox_op_softmax(ox_ctx *x);
int ox_op_hardmax(ox_ctx *x);
int ox_op_log_softmax(ox_ctx *x);
int ox_op_add(ox_ctx *x);
int ox_op_sub(ox_ctx *x);
int ox_op_mul(ox_ctx *x);
int ox_op_div(ox_ctx *x);

/* onnx_reduce.c */
int ox_reduce(ox_ctx *x, int mode); /* ReduceMax / ReduceSum / ReduceMean over any axes (mode: ir_reduce_mode) */
int ox_op_reduce_max(ox_ctx *x);
int ox_op_reduce_sum(ox_ctx *x);
int ox_op_exp(ox_ctx *x);
int ox_op_sqrt(ox_ctx *x);
int ox_op_neg(ox_ctx *x);
int ox_div_act(ox_ctx *x);           /* Div of two float activations */
int ox_bn_training(ox_ctx *x, double eps, double mom);
int ox_op_max_unpool(ox_ctx *x);
/* onnx_integer.c */
int ox_int_arith(ox_ctx *x, char op);  /* Add, Sub, Mul, Div of integer activations */
int ox_int_operands(ox_ctx *x, int xi, int wi, int axis, ox_const **wf);
int ox_op_matmul_integer(ox_ctx *x);

/* Converts the current node (onnx_ops.c).  Returns 0 or -1 with x->d filled. */
int ox_convert(ox_ctx *x);
/* "Conv, Relu, ..." (the operators ox_convert knows). */
const char *ox_supported(void);

#endif
