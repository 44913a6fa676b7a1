/* cnnc_abi.h — the contract between a compiled model .so (written by codegen/) and the
 * runtime (runtime/).  Every .so exports the symbol CNNC_ABI_SYMBOL, of type cnnc_abi_model;
 * a model compiled for training (mode 1) also exports CNNC_ABI_TRAIN_SYMBOL (see the training
 * extension at the end, versioned on its own).  Bump CNNC_ABI_VERSION on any change to these structs; the runtime refuses
 * other versions.  Not a user header: users include cnnrt.h only. */
#ifndef CNNC_ABI_H
#define CNNC_ABI_H

#include <stdint.h>

#define CNNC_ABI_MAGIC 0x434e4e43u /* "CNNC" */
#define CNNC_ABI_VERSION 1u
#define CNNC_ABI_SYMBOL "cnnc_model_v1"

enum cnnc_abi_dtype {
  CNNC_ABI_F32 = 0, CNNC_ABI_BF16 = 1, CNNC_ABI_F16 = 2, CNNC_ABI_U8 = 3, CNNC_ABI_I32 = 4,
  CNNC_ABI_I8 = 5, CNNC_ABI_I64 = 6 /* integer ONNX tensors' inputs / outputs (docs/onnx.md) */
};

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

/* ==== profiling extension =================================================================
 * An inference .so also exports CNNC_ABI_PROFILE_SYMBOL, of type cnnc_abi_profile (versioned
 * on its own; the runtime looks it up only when profiling is asked for, so a .so without it
 * loads and runs as before).  run[s] is a second entry of shard s with the signature and
 * contract of cnnc_abi_shard_fn, except that it calls barrier(barrier_ctx) after EVERY op,
 * the last one included, whatever nthreads is (the normal entry calls it only between ops and
 * only when nthreads > 1).  The runtime passes a barrier that timestamps each op's end on
 * every thread; the normal entry keeps no timing code at all. */
#define CNNC_ABI_PROFILE_MAGIC 0x464f5250u /* "PROF" */
#define CNNC_ABI_PROFILE_VERSION 1u
#define CNNC_ABI_PROFILE_SYMBOL "cnnc_profile_v1"

typedef struct cnnc_abi_profile {
  uint32_t magic;            /* CNNC_ABI_PROFILE_MAGIC */
  uint32_t version;          /* CNNC_ABI_PROFILE_VERSION */
  int32_t n_shards;          /* = cnnc_abi_model.n_shards */
  int32_t reserved;
  const cnnc_abi_shard_fn *run; /* [n_shards] profiled entries (one barrier call per op) */
} cnnc_abi_profile;

/* ==== training extension ==================================================================
 * A .so compiled with --mode training exports, besides cnnc_model_v1 (mode = 1), the symbol
 * CNNC_ABI_TRAIN_SYMBOL of type cnnc_abi_train.  Inference-only .so files do not have it and
 * load as before.  In a training .so, cnnc_model_v1's `input` is the image tensor (same dtype
 * and dims as the train tensor `images`), its outputs/shards describe the forward pass for
 * `cnnrun info` (their `run` must be non-NULL but is never called for a training model).
 *
 * State.  Everything that persists across steps — trainable params, optimizer state
 * (`P/momentum`, `P/rms`, `P/m`, `P/v`, `optimizer/step`), BN running statistics — lives in
 * ONE buffer of state_bytes bytes, allocated (64-byte aligned), initialised and owned by the
 * runtime.  Each state tensor is a named slice at a fixed, 64-byte aligned offset; generated
 * code addresses it as (char *)state + offset, with offsets known at compile time.
 * Checkpoints save/restore every slice except kind GRAD_ACCUM by name.  At open the runtime
 * copies `init` (bytes bytes) into each slice, or zero-fills it when init is NULL.
 *
 * Programs.  A program is a list of stages run in order on one micro-batch; stage k runs on
 * the thread group of model shard `shard` (every thread of the group calls run with its tid,
 * exactly like cnnc_abi_shard_fn, plus the state pointer).  Stages exchange data through the
 * train tensors named in their io lists (indices into cnnc_abi_train.tensors; inputs first,
 * then outputs); the runtime allocates one buffer per non-input tensor (runtime-owned, 64-byte
 * aligned, contents kept between stages of the same micro-batch, undefined across
 * micro-batches).  A stage may read and write the state buffer; it must not keep pointers.
 *   micro_batch  forward + loss + backward for one micro-batch; with grad_accum == 1 it may
 *                also apply the optimizer update (then `update` has no stages).  With
 *                grad_accum > 1 (or replicas > 1) it adds the gradients into GRAD_ACCUM state
 *                slices (one set per replica).  With replicas R > 1 the program holds R copies
 *                of the per-replica stage list (n_stages = R * per-replica count, replica r's
 *                stages at [r * n_stages / R, (r + 1) * n_stages / R)); each replica runs on its
 *                own micro-batch with its own train tensor buffers.
 *   update       run once after every grad_accum micro-batches (of every replica): sums the
 *                replicas' accumulators in replica order, averages, applies the optimizer,
 *                zeroes them.  n_stages 0 when micro_batch updates.
 *   eval         inference-mode forward (BN running stats, no dropout) + loss + top-1 count,
 *                no state writes.  n_stages 0: the model cannot evaluate (cnnrt_evaluate
 *                returns CNNRT_UNSUPPORTED).
 * Special train tensors (indices into tensors; the runtime fills inputs, reads outputs):
 *   images   model input, [B, C, H, W] u8 (normalisation compiled in) or f32 (the runtime
 *            feeds x/255 for u8 data), B = cnnc_abi_model.batch_size
 *   labels   f32 [B]: class ids 0..classes-1 as floats
 *   lr       f32 [1]: the learning rate of this step (no batch dimension)
 *   loss     f32 [1]: mean loss over the micro-batch (written by micro_batch and eval)
 *   correct  f32 [1]: number of samples whose top-1 class equals the label (ditto)
 * Each stage returns 0, or nonzero on failure (the runtime reports the stage by name). */
#define CNNC_ABI_TRAIN_MAGIC 0x4e524e54u /* "TNRN" */
#define CNNC_ABI_TRAIN_VERSION 2u
#define CNNC_ABI_TRAIN_SYMBOL "cnnc_train_v1"
/* Training models with batch norms in training mode also export CNNC_ABI_BN_STATS_SYMBOL
 * (cnnc_abi_bn_stats): each such batchnorm's forward kernel writes, per micro-batch, a record
 * into the train tensor CNNC_ABI_BN_STATS_TENSOR (one more tensor after "correct", io slot
 * n_io - 1 of every stage): per channel c the doubles {k, tm, tv} of its running-statistics
 * update, mean = (float)(k * (double)mean + tm), var = (float)(k * (double)var + tv) (no fused
 * multiply-add), so that the runtime can replay the updates of several micro-batches in the
 * order one process applies them (docs/mpi.md). */
#define CNNC_ABI_BN_STATS_SYMBOL "cnnc_bn_stats_v1"
#define CNNC_ABI_BN_STATS_TENSOR "bn_stats"
#define CNNC_ABI_BN_STATS_MAGIC 0x62737431u /* "bst1" */
typedef struct cnnc_abi_bn_stat {
  int32_t mean_state, var_state; /* indices into cnnc_abi_train.state (f32 [channels] each) */
  int32_t channels;
  int32_t stage;                 /* the forward stage (index into one replica's stages) */
  int64_t offset;                /* first double of the record in the tensor */
} cnnc_abi_bn_stat;
typedef struct cnnc_abi_bn_stats {
  uint32_t magic;                /* CNNC_ABI_BN_STATS_MAGIC */
  int32_t n;
  int32_t tensor;                /* index into cnnc_abi_train.tensors */
  const cnnc_abi_bn_stat *stats;
} cnnc_abi_bn_stats;

enum cnnc_abi_state_kind {
  CNNC_ABI_STATE_PARAM = 0,     /* trainable parameter, e.g. "conv1/weight" */
  CNNC_ABI_STATE_OPTIMIZER = 1, /* optimizer state, e.g. "conv1/weight/momentum", "optimizer/step" */
  CNNC_ABI_STATE_BUFFER = 2,    /* other persistent non-trainable tensors: "bn1/running_mean" */
  CNNC_ABI_STATE_GRAD_ACCUM = 3 /* gradient accumulators: zero at open, not checkpointed */
};

typedef struct cnnc_abi_state_tensor {
  const char *name;     /* unique; the checkpoint key */
  int32_t dtype;        /* CNNC_ABI_F32 or CNNC_ABI_I32; kind GRAD_ACCUM also BF16 / F16 (2 bytes each) */
  int32_t kind;         /* enum cnnc_abi_state_kind */
  int32_t rank;         /* 0..4; rank 0 = scalar */
  int32_t reserved;
  int64_t dims[4];
  int64_t offset;       /* bytes from the state buffer start; multiple of 64 */
  int64_t bytes;        /* = dtype size * product of dims */
  const void *init;     /* bytes bytes of initial value inside the .so, or NULL = zeros */
} cnnc_abi_state_tensor;

/* One stage of a program on thread tid of nthreads; io[k] -> train tensor stage->io[k];
 * state = the state buffer; scratch = stage->scratch_bytes, 64-byte aligned, runtime-owned.
 * Returns 0. */
typedef int32_t (*cnnc_abi_stage_fn)(void *const *io, void *state, void *scratch, int32_t tid, int32_t nthreads,
                                     cnnc_abi_barrier_fn barrier, void *barrier_ctx);

typedef struct cnnc_abi_stage {
  const char *name;     /* e.g. "fwd/s0", "bwd/s1", "update/s0": for errors and traces */
  int32_t shard;        /* thread group: index into cnnc_abi_model.shards */
  int32_t n_io, n_inputs; /* inputs first, then outputs */
  const int32_t *io;    /* indices into cnnc_abi_train.tensors */
  int64_t scratch_bytes;
  double flops;         /* per micro-batch (per update for update stages) */
  cnnc_abi_stage_fn run;
} cnnc_abi_stage;

typedef struct cnnc_abi_program {
  int32_t n_stages;
  const cnnc_abi_stage *stages;
} cnnc_abi_program;

typedef struct cnnc_abi_train {
  uint32_t magic;            /* CNNC_ABI_TRAIN_MAGIC */
  uint32_t version;          /* CNNC_ABI_TRAIN_VERSION */
  uint32_t struct_size;      /* sizeof(cnnc_abi_train) when compiled */
  uint32_t reserved;
  int32_t n_tensors;
  const cnnc_abi_tensor *tensors; /* per-micro-batch tensors the stages exchange */
  int32_t images, labels, lr, loss, correct; /* indices into tensors, see above */
  int32_t grad_accum;        /* micro-batches per weight update, >= 1 */
  int64_t state_bytes;       /* the whole state buffer */
  int32_t n_state;
  const cnnc_abi_state_tensor *state;
  cnnc_abi_program micro_batch, update, eval;
  const char *optimizer_json; /* the optimizer settings as a JSON object, or NULL */
  /* version 2: replicas and pipelining.  Zero fields mean: 1 replica, no forward/backward
   * split known (the runtime runs every schedule as sequential), sequential. */
  int32_t replicas;          /* data-parallel replicas in micro_batch (0 = 1) */
  int32_t n_fwd_stages;      /* per replica: the first n_fwd_stages stages are forward stages (one
                              * per shard, shard order), the rest backward; 0 = unknown */
  int32_t schedule;          /* enum cnnc_abi_schedule: order of the micro-batches of one update */
  int32_t recompute;         /* 0 none, 1 auto, 2 pipeline, 3 all (informational) */
} cnnc_abi_train;

/* How the runtime orders one update's grad_accum micro-batches on each shard's thread group
 * (results are identical: every backward stage sees the micro-batches in index order). */
enum cnnc_abi_schedule {
  CNNC_ABI_SCHED_SEQUENTIAL = 0,  /* one micro-batch through all stages at a time */
  CNNC_ABI_SCHED_GROUPED = 1,     /* every forward of the group, then every backward */
  CNNC_ABI_SCHED_INTERLEAVED = 2  /* 1F1B: warm-up forwards, then one backward, one forward */
};

#endif
