/* cnnc_abi.h — the contract between a compiled model .so (written by codegen/) and the
 * runtime (runtime/).  Every .so exports exactly one symbol, CNNC_ABI_SYMBOL, of type
 * cnnc_abi_model.  Bump CNNC_ABI_VERSION on any change to these structs; the runtime refuses
 * other versions.  Not a user header: users include cnnrt.h only. */
#ifndef CNNC_ABI_H
#define CNNC_ABI_H

#include <stdint.h>

#define CNNC_ABI_MAGIC 0x434e4e43u /* "CNNC" */
#define CNNC_ABI_VERSION 1u
#define CNNC_ABI_SYMBOL "cnnc_model_v1"

enum cnnc_abi_dtype { CNNC_ABI_F32 = 0, CNNC_ABI_BF16 = 1, CNNC_ABI_F16 = 2, CNNC_ABI_U8 = 3, CNNC_ABI_I32 = 4 };

/* A tensor that crosses the .so boundary: the model input, an output, or a tensor handed
 * from one shard to a later one.  Shapes include the micro-batch dimension.  Layout is the
 * IR's logical one (NCHW / [N, K]), contiguous. */
typedef struct cnnc_abi_tensor {
  const char *name;
  int32_t dtype;   /* enum cnnc_abi_dtype */
  int32_t rank;
  int64_t dims[4];
  int64_t bytes;   /* whole tensor, one micro-batch */
} cnnc_abi_tensor;

/* Called by generated code between two ops of a shard so that every thread of the shard's
 * group has finished the previous op.  ctx is the runtime's. */
typedef void (*cnnc_abi_barrier_fn)(void *ctx);

/* Runs one micro-batch through a shard on thread tid of nthreads.  Every thread of the group
 * calls it with the same io/scratch.  io[k] points to boundary tensor shard->io[k].  scratch
 * is shard->scratch_bytes, 64-byte aligned, owned by the runtime (one per shard and in-flight
 * micro-batch).  Returns 0. */
typedef int32_t (*cnnc_abi_shard_fn)(void *const *io, void *scratch, int32_t tid, int32_t nthreads,
                                     cnnc_abi_barrier_fn barrier, void *barrier_ctx);

typedef struct cnnc_abi_shard {
  const char *first_layer, *last_layer;
  int32_t n_io;              /* inputs first, then outputs */
  int32_t n_inputs;
  const int32_t *io;         /* indices into cnnc_abi_model.tensors */
  int64_t scratch_bytes;
  int32_t n_ops;
  const char *const *op_names;  /* n_ops layer names, for profiles and traces */
  const char *const *kernel_names; /* n_ops generated kernel names */
  const double *op_flops;       /* n_ops, per micro-batch */
  cnnc_abi_shard_fn run;
} cnnc_abi_shard;

typedef struct cnnc_abi_model {
  uint32_t magic;            /* CNNC_ABI_MAGIC */
  uint32_t abi_version;      /* CNNC_ABI_VERSION */
  uint32_t struct_size;      /* sizeof(cnnc_abi_model) when compiled */
  uint32_t reserved;
  const char *model_name;
  const char *compiler_version;
  const char *options_json;  /* the compile options, as a JSON object */
  int32_t batch_size;        /* micro-batch size every tensor's dim 0 is */
  int32_t mode;              /* 0 inference, 1 training */
  int32_t n_tensors;
  const cnnc_abi_tensor *tensors;
  int32_t input;             /* tensor index of the image input */
  int32_t n_outputs;
  const int32_t *outputs;    /* tensor indices of the model outputs */
  /* u8 input normalisation is compiled into shard 0; these describe it for users. */
  int32_t n_shards;
  const cnnc_abi_shard *shards;
  double total_flops;        /* per micro-batch */
} cnnc_abi_model;

#endif
