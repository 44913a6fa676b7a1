/* cnnrt.h — the public API of libcnnrt, the cnnc runtime: load a model .so compiled by cnnc,
 * query it, and run inference on it with one thread group per shard, micro-batches flowing
 * from shard to shard in a pipeline.  This is the only header users include.
 *
 * Conventions: every function that can fail returns a cnnrt_status; on failure it leaves a
 * message for cnnrt_last_error() (thread-local) and the library never exits or aborts on
 * caller input.  Strings returned by the library are owned by it (model-owned strings live
 * until cnnrt_close).  A cnnrt_model may be queried from any thread; calls that run or
 * reconfigure it (cnnrt_infer, cnnrt_train_step, cnnrt_set_*) are serialised internally. */
#ifndef CNNRT_H
#define CNNRT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define CNNRT_API __attribute__((visibility("default")))
#else
#define CNNRT_API
#endif

/* Stable values: never renumbered, new ones are appended. */
typedef enum cnnrt_status {
  CNNRT_OK = 0,
  CNNRT_INVALID_ARGUMENT = 1, /* NULL pointer, out-of-range index or count */
  CNNRT_IO = 2,               /* file missing or unreadable */
  CNNRT_BAD_MODEL = 3,        /* not a cnnc model, or its descriptor is inconsistent */
  CNNRT_ABI_MISMATCH = 4,     /* a cnnc model built for another ABI version */
  CNNRT_SHAPE_MISMATCH = 5,   /* buffer sizes do not match the model's tensors */
  CNNRT_OUT_OF_MEMORY = 6,
  CNNRT_UNSUPPORTED = 7,      /* valid request this build or model cannot do */
  CNNRT_INTERNAL = 8          /* a thread could not start, a shard returned an error, ... */
} cnnrt_status;

/* Same values as the compiler's dtypes. */
typedef enum cnnrt_dtype { CNNRT_F32 = 0, CNNRT_BF16 = 1, CNNRT_F16 = 2, CNNRT_U8 = 3, CNNRT_I32 = 4, CNNRT_I8 = 5, CNNRT_I64 = 6 } cnnrt_dtype;

typedef struct cnnrt_model cnnrt_model; /* opaque */

/* Optional allocator for the runtime's large buffers (boundary tensors, scratch).  alloc
 * returns size bytes aligned to align (a power of two >= 64) or NULL; free releases it. */
typedef struct cnnrt_allocator {
  void *(*alloc)(void *ctx, size_t size, size_t align);
  void (*free)(void *ctx, void *ptr);
  void *ctx;
} cnnrt_allocator;

/* Where the runtime's own big buffers (2 MB or more) come from when no allocator is given
 * (docs/runtime.md "Memory").  A user allocator gets every buffer whatever this says. */
typedef enum cnnrt_hugepages {
  CNNRT_HUGEPAGES_INFERENCE = 0, /* 2 MB-aligned anonymous mappings; inference frames and scratch are
                                  * advised MADV_HUGEPAGE, training buffers ask for 4 KB pages */
  CNNRT_HUGEPAGES_OFF = 1,       /* every buffer from aligned_alloc, none advised */
  CNNRT_HUGEPAGES_ALL = 2        /* as INFERENCE, and training buffers are advised MADV_HUGEPAGE too */
} cnnrt_hugepages;

/* How the replicas of a --replicas training model run (docs/runtime.md "Training"). */
typedef enum cnnrt_replica_mode {
  CNNRT_REPLICA_SHARED = 0,  /* one after another on their shard's thread group */
  CNNRT_REPLICA_PARALLEL = 1 /* each on its own thread groups, the shard's threads divided among the
                              * replicas; a model with BUFFER state (batchnorm running statistics)
                              * or one replica runs as SHARED (cnnrt_describe_json says which) */
} cnnrt_replica_mode;

#define CNNRT_SPIN_US_DEFAULT 2000     /* cnnrt_options.spin_us unless set */
#define CNNRT_SPIN_US_MAX 10000000     /* 10 s */

/* Made by cnnrt_options_init, then changed field by field.  Fields are only ever appended:
 * a caller built against an older cnnrt.h passes its smaller struct_size and the fields it
 * does not know take their cnnrt_options_init defaults.  cnnrt_open copies the struct and
 * rejects a field out of range with CNNRT_INVALID_ARGUMENT naming it. */
typedef struct cnnrt_options {
  uint32_t struct_size;     /* sizeof(cnnrt_options); set by cnnrt_options_init */
  int threads_per_shard;    /* 0 = auto: the usable cores divided among the shards */
  int pin;                  /* nonzero: pin shard s's threads to consecutive usable cores */
  const cnnrt_allocator *allocator; /* NULL = the C library; must outlive the model */
  int spin_us;              /* microseconds a waiting thread (op barrier, next job) spins before it
                             * sleeps in the kernel, 0..CNNRT_SPIN_US_MAX; default
                             * CNNRT_SPIN_US_DEFAULT, 0 = sleep at once; per model, fixed at open */
  cnnrt_hugepages hugepages; /* default CNNRT_HUGEPAGES_INFERENCE; fixed at open */
  cnnrt_replica_mode replica_mode; /* default CNNRT_REPLICA_SHARED; training models only */
  int allow_nonfinite;      /* nonzero: cnnrt_load_checkpoint takes NaN/Inf values and negative
                             * batch-norm running variances (default 0: refused, naming the tensor) */
} cnnrt_options;

/* A tensor of the model: dims[0] is the micro-batch size; bytes covers one micro-batch. */
typedef struct cnnrt_tensor_info {
  const char *name;         /* owned by the model */
  cnnrt_dtype dtype;
  int rank;
  int64_t dims[4];
  size_t bytes;
} cnnrt_tensor_info;

/* The message of the last failed call on this thread ("" if none).  Owned by the library;
 * valid until the next cnnrt_ call on this thread. */
CNNRT_API const char *cnnrt_last_error(void);
/* "OK", "INVALID_ARGUMENT", ...; a static string ("UNKNOWN" for other values). */
CNNRT_API const char *cnnrt_status_name(cnnrt_status s);
/* The runtime's version and supported model ABI, e.g. "0.1.0 (model ABI 1)"; static. */
CNNRT_API const char *cnnrt_version(void);

/* Fills *opts with the defaults (auto threads, no pinning, malloc, spin CNNRT_SPIN_US_DEFAULT
 * us, CNNRT_HUGEPAGES_INFERENCE, CNNRT_REPLICA_SHARED).  opts is the caller's. */
CNNRT_API void cnnrt_options_init(cnnrt_options *opts);

/* Loads the model .so at path and checks its descriptor (magic, ABI version, table
 * consistency).  opts may be NULL (defaults); it is copied.  On success *out is a new model
 * the caller owns and frees with cnnrt_close; on failure *out is NULL.  Worker threads start
 * on the first cnnrt_infer. */
CNNRT_API cnnrt_status cnnrt_open(const char *path, const cnnrt_options *opts, cnnrt_model **out);
/* Stops the model's threads, frees its buffers and unloads the .so.  NULL is a no-op.  All
 * strings the model returned become invalid. */
CNNRT_API void cnnrt_close(cnnrt_model *m);

/* ---- queries ---------------------------------------------------------------------------
 * The model owns every returned string (valid until cnnrt_close).  On a NULL model the
 * scalar queries return NULL / 0 and set the error message; they never fail otherwise. */
CNNRT_API const char *cnnrt_model_name(const cnnrt_model *m);
CNNRT_API int cnnrt_batch_size(const cnnrt_model *m); /* samples per micro-batch */
CNNRT_API int cnnrt_num_shards(const cnnrt_model *m);
CNNRT_API int cnnrt_num_outputs(const cnnrt_model *m);
CNNRT_API const char *cnnrt_compiler_version(const cnnrt_model *m); /* "" if the model does not say */
CNNRT_API double cnnrt_model_flops(const cnnrt_model *m);  /* per micro-batch, as the compiler counted */
/* Fills *out (the caller's) with the image input / output index's description. */
CNNRT_API cnnrt_status cnnrt_input_info(const cnnrt_model *m, cnnrt_tensor_info *out);
CNNRT_API cnnrt_status cnnrt_output_info(const cnnrt_model *m, int index, cnnrt_tensor_info *out);
/* Bytes of one micro-batch of input, and of all outputs of one micro-batch together. */
CNNRT_API size_t cnnrt_input_bytes(const cnnrt_model *m);
CNNRT_API size_t cnnrt_output_bytes(const cnnrt_model *m);
typedef struct cnnrt_shard_summary {
  const char *first_layer, *last_layer; /* owned by the model; "" if the model does not say */
  int n_ops, n_inputs, n_outputs;       /* boundary tensors read / written */
  size_t scratch_bytes;
  double flops;                         /* per micro-batch, the sum over its ops */
  int threads;                          /* current setting */
  uint64_t micro_batches;               /* profile since cnnrt_open: micro-batches run, and */
  double busy_seconds;                  /* wall time thread 0 spent in the shard entry + join */
} cnnrt_shard_summary;
/* Fills *out (the caller's) with shard's description and profile counters. */
CNNRT_API cnnrt_status cnnrt_shard_info(const cnnrt_model *m, int shard, cnnrt_shard_summary *out);
/* The compile options as a JSON object (model-owned; "{}" if the model has none). */
CNNRT_API const char *cnnrt_options_json(const cnnrt_model *m);
/* The whole descriptor (tensors, shards with their ops, options) plus the current thread
 * settings and the runtime options ("runtime": the cnnrt_options fields, replica_mode as the
 * model runs it), as one JSON object, or NULL on error.  The model owns it: regenerated on
 * each call, valid until the next call on m or cnnrt_close.  Waits for a running cnnrt_infer. */
CNNRT_API const char *cnnrt_describe_json(cnnrt_model *m);

/* ---- threads ---------------------------------------------------------------------------- */
/* Sets the thread count of shard (or of every shard if shard is -1) to nthreads >= 1.  Takes
 * effect on the next cnnrt_infer (running thread groups are stopped and restarted).  Owns
 * nothing of the caller's. */
CNNRT_API cnnrt_status cnnrt_set_threads(cnnrt_model *m, int shard, int nthreads);
/* Pins the threads of shard (-1: every shard) to cpus: thread t runs on cpus[t % n_cpus].
 * cpus is copied; n_cpus = 0 removes the pinning.  Takes effect on the next cnnrt_infer. */
CNNRT_API cnnrt_status cnnrt_set_cpus(cnnrt_model *m, int shard, const int *cpus, int n_cpus);
/* The thread count shard currently uses (or will use); 0 for a bad shard index. */
CNNRT_API int cnnrt_threads(const cnnrt_model *m, int shard);

/* ---- inference -------------------------------------------------------------------------- */
/* Runs n_batches micro-batches (device iterations) through the pipeline before returning.
 * input holds n_batches * cnnrt_input_bytes(m) bytes: n_batches * batch samples in the input
 * tensor's dtype (u8 or f32; an ONNX model's integer input u8, i8 or i32), read only.  output
 * receives n_batches * cnnrt_output_bytes(m) bytes: per micro-batch, every output in order, each
 * in its dtype (f32 logits for cnnc's models; an ONNX model's integer outputs u8, i8, i32 or
 * i64).  Both buffers are the caller's and are used only during the call.  Sizes that do not
 * match return CNNRT_SHAPE_MISMATCH; an i32 input value beyond +-2^24 (cnnc computes integers
 * exactly in f32 up to there, docs/onnx.md) returns CNNRT_INVALID_ARGUMENT naming it.
 * Serialised with other calls on m. */
CNNRT_API cnnrt_status cnnrt_infer(cnnrt_model *m, const void *input, size_t input_bytes, void *output,
                                   size_t output_bytes, int n_batches);

/* ---- tracing (docs/reports.md) ---------------------------------------------------------- */
/* Starts recording the following cnnrt_infer (and, for training models, training-step and
 * validation) calls for a Chrome/Perfetto trace: one event per micro-batch per shard (per
 * forward/backward stage and optimizer update in training) and, for shards running on more
 * than one thread, one per op (timed at the generated code's barriers between ops).  At most max_events events per
 * shard are kept (0: 1 << 20); later ones are counted as dropped.  Restarts (clears) a trace
 * already recording.  Owns nothing of the caller's. */
CNNRT_API cnnrt_status cnnrt_trace_begin(cnnrt_model *m, size_t max_events);
/* Writes the recorded events to path as Chrome trace JSON ({"traceEvents": [...]}, "X"
 * complete events, times in microseconds, pid = this process, tid = shard) and stops
 * recording.  CNNRT_INVALID_ARGUMENT if no trace was begun, CNNRT_IO if path cannot be
 * written (the trace is dropped either way).  path is the caller's. */
CNNRT_API cnnrt_status cnnrt_trace_write(cnnrt_model *m, const char *path);

/* ---- per-op profile (docs/reports.md "Profiling (libcnnrt)") -------------------------------------- */
/* Starts timing every op of the following cnnrt_infer calls: the runtime switches to the
 * model's profiled shard entries (a barrier after every op, on every thread, timestamped
 * with CLOCK_MONOTONIC and the thread's CPU clock).  Clears counters of an earlier profile.
 * CNNRT_UNSUPPORTED for a training model or a .so compiled without profiled entries (older
 * cnnc: recompile).  Runs without a profile use the normal entries (no timing code). */
CNNRT_API cnnrt_status cnnrt_profile_begin(cnnrt_model *m);
/* Stops profiling; the counters stay readable until the next cnnrt_profile_begin. */
CNNRT_API cnnrt_status cnnrt_profile_end(cnnrt_model *m);
typedef struct cnnrt_op_profile {
  const char *name, *kernel; /* layer name and generated kernel (model-owned), as cnnrt_describe_json */
  double flops;              /* per micro-batch */
  uint64_t calls;            /* micro-batches timed */
  double seconds;            /* wall time from the op's start to the barrier after it releasing, on
                              * thread 0, summed over calls: a shard's ops add up to its run time */
  double max_busy_seconds;   /* the slowest thread's time inside the kernel, summed over calls */
  double busy_seconds;       /* time inside the kernel summed over threads and calls */
  double cpu_seconds;        /* thread CPU time inside the kernel, summed over threads and calls */
} cnnrt_op_profile;
/* Fills *out with op (0 .. n_ops-1 of cnnrt_shard_info) of shard.  CNNRT_INVALID_ARGUMENT if
 * no profile was begun or the indices are out of range. */
CNNRT_API cnnrt_status cnnrt_op_profile_at(const cnnrt_model *m, int shard, int op, cnnrt_op_profile *out);

/* ==== training (docs/runtime.md "Training") ===============================================
 * Only for models compiled with --mode training (cnnrt_is_training).  The model owns its
 * state (params, optimizer state, BN statistics) from cnnrt_open to cnnrt_close; training
 * calls are serialised with each other and with the setters.  Each shard's stages run on its
 * own thread group; the micro-batches of one update are ordered per the compiled
 * --pipeline-schedule (sequential, grouped, interleaved), replicas one after another or, with
 * cnnrt_options.replica_mode CNNRT_REPLICA_PARALLEL, each on its own thread groups. */

/* Nonzero if m was compiled for training (has the training descriptor). */
CNNRT_API int cnnrt_is_training(const cnnrt_model *m);
/* Micro-batches per weight update: gradient accumulation times replicas (1 without either),
 * 0 for inference. */
CNNRT_API int cnnrt_grad_accum(const cnnrt_model *m);

/* Planned memory of a training program (0 micro_batch, 1 update, 2 eval), from the
 * descriptor: docs/training.md "Memory". */
typedef struct cnnrt_train_plan {
  int n_stages;            /* stages of the program (every replica's) */
  int replicas, grad_accum, schedule; /* schedule: 0 sequential, 1 grouped, 2 interleaved */
  int recompute;           /* 0 none, 1 auto, 2 pipeline, 3 all */
  size_t tensor_bytes;     /* train tensors one micro-batch of one replica uses (stashed
                              activations, stage boundaries, labels, images) */
  size_t scratch_peak;     /* the largest stage scratch */
  size_t frames;           /* train tensor sets in flight, reused by the micro-batches of an update
                              (micro_batch): bounded by the schedule, not by replicas * grad_accum
                              (sequential 1, grouped / interleaved min(micro-batches, 2 x shards),
                              per replica with CNNRT_REPLICA_PARALLEL); else 1 */
  size_t planned_bytes;    /* state + frames * tensor_bytes + scratch of every thread group */
} cnnrt_train_plan;
CNNRT_API cnnrt_status cnnrt_train_plan_info(const cnnrt_model *m, int program, cnnrt_train_plan *out);
/* Weight updates done so far (restored by cnnrt_load_checkpoint). */
CNNRT_API int64_t cnnrt_train_steps_done(const cnnrt_model *m);

/* Sets the learning rate the following steps feed to the model (default 0.01 until set) and
 * removes any schedule.  lr must be finite and >= 0.  Owns nothing of the caller's. */
CNNRT_API cnnrt_status cnnrt_set_learning_rate(cnnrt_model *m, double lr);
/* The learning rate fed to the last weight update (or the one set, before any). */
CNNRT_API double cnnrt_learning_rate(const cnnrt_model *m);
typedef struct cnnrt_lr_schedule cnnrt_lr_schedule;
/* Drives the learning rate from schedule s (below): before each weight update the runtime
 * feeds cnnrt_lr_at(s, steps done / steps_per_epoch), so a call of many device iterations
 * still changes the lr at every step.  s and its decay_epochs are copied; NULL removes the
 * schedule (the last lr stays). */
CNNRT_API cnnrt_status cnnrt_set_lr_schedule(cnnrt_model *m, const cnnrt_lr_schedule *s, int64_t steps_per_epoch);

/* Runs n weight updates (device iterations) before returning: n * cnnrt_grad_accum(m)
 * micro-batches.  images holds n * grad_accum * batch samples in the input dtype
 * (images_bytes = that many times cnnrt_input_bytes(m) / batch); labels holds as many f32
 * class ids.  *loss (may be NULL) receives the mean loss over the micro-batches, *accuracy
 * (may be NULL) the fraction of samples whose top-1 class was the label, both measured in
 * the forward passes of this call.  Buffers are the caller's, read only during the call. */
CNNRT_API cnnrt_status cnnrt_train_step(cnnrt_model *m, const void *images, size_t images_bytes, const float *labels,
                                        int n, float *loss, float *accuracy);
/* Models compiled with cnnc --mixed-labels (labels [N,3]): 1, else 0.  Such a model still
 * takes class ids through cnnrt_train_step and the evaluations (as rows (y, y, 1)). */
CNNRT_API int cnnrt_mixed_labels(const cnnrt_model *m);
/* As cnnrt_train_step with mixed labels: labels holds 3 f32 per sample, (a, b, lam), and the
 * sample's loss is lam CE(a) + (1 - lam) CE(b) (each with the model's label smoothing; the
 * accuracy counts the label of the larger weight, a when lam >= 0.5).  a and b are class ids,
 * lam in [0, 1], else CNNRT_INVALID_ARGUMENT.  CNNRT_UNSUPPORTED for a model compiled without
 * --mixed-labels. */
CNNRT_API cnnrt_status cnnrt_train_step_mixed(cnnrt_model *m, const void *images, size_t images_bytes,
                                              const float *labels, int n, float *loss, float *accuracy);
/* Mixup and cutmix of one micro-batch (docs/runtime.md "Mixup and cutmix"), timm's Mixup in
 * batch mode: one lam ~ Beta(alpha, alpha) for the batch; with both alphas > 0, cutmix or mixup
 * with probability 0.5 each; sample i is mixed with sample n-1-i (the batch reversed).
 * mixup: x_i = lam x_i + (1 - lam) x_{n-1-i} (u8: in f32, rounded half to even, as timm's
 * FastCollateMixup); cutmix: a box of about (1 - lam) of the image (side sqrt(1 - lam) of H
 * and W, centre uniform, clipped) is copied from x_{n-1-i}, lam = 1 - box area / (H W).  The
 * draws depend on seed and index alone (index: the micro-batch's number in the run). */
typedef struct cnnrt_mix_options {
  double mixup_alpha;  /* >= 0; 0 = no mixup */
  double cutmix_alpha; /* >= 0; 0 = no cutmix */
  uint64_t seed;
} cnnrt_mix_options;
typedef enum cnnrt_mix_kind { CNNRT_MIX_NONE = 0, CNNRT_MIX_MIXUP = 1, CNNRT_MIX_CUTMIX = 2 } cnnrt_mix_kind;
/* Mixes images (n samples of c x h x w in dtype U8 or F32) in place and writes the mixed
 * labels (n rows (labels[i], labels[n-1-i], lam)) into mixed; *lam and *kind (either may be
 * NULL) receive the batch's lam and kind.  Both alphas 0: lam 1, images unchanged. */
CNNRT_API cnnrt_status cnnrt_mix_batch(const cnnrt_mix_options *o, uint64_t index, cnnrt_dtype dtype, void *images, int n,
                                       int c, int h, int w, const float *labels, float *mixed, double *lam,
                                       cnnrt_mix_kind *kind);
/* --auto-loss-scaling models (docs/precision.md): *scale (may be NULL) receives the current
 * loss scale S, *skipped (may be NULL) the number of updates skipped so far because a
 * gradient was not finite (weights and optimizer state left unchanged, S halved).  Both live
 * in the state tensor "optimizer/loss_scale" (checkpointed).  CNNRT_UNSUPPORTED for other
 * models. */
CNNRT_API cnnrt_status cnnrt_loss_scale(cnnrt_model *m, double *scale, int64_t *skipped);
/* Runs the inference-mode forward (running BN statistics, no dropout, no update) over
 * n_batches micro-batches: same buffers as cnnrt_train_step with grad_accum 1.  *accuracy as
 * there; *loss the mean plain softmax cross-entropy of the logits, without the label smoothing
 * the model may train with (models whose eval program keeps the logits inside a stage, i.e.
 * hand-written ones, report their compiled loss).  The state is not changed.
 * CNNRT_UNSUPPORTED if the model has no eval program; CNNRT_INVALID_ARGUMENT for a label that
 * is not a class id (a whole number in 0..classes-1).  Buffers are the caller's. */
CNNRT_API cnnrt_status cnnrt_evaluate(cnnrt_model *m, const void *images, size_t images_bytes, const float *labels,
                                      int n_batches, float *loss, float *accuracy);
/* As cnnrt_evaluate, per sample (n_batches * batch of them, in order): loss[i] (may be NULL)
 * the plain softmax cross-entropy of sample i's logits against its label (natural log,
 * computed in double from the f32 logits), rank[i] (may be NULL) the number of classes ranked
 * before its label (greater logit, or an equal one of a lower class: 0 = a top-1 hit, as the
 * accuracy counts it; < 5 = a top-5 hit; the class count when the label's logit is NaN).
 * CNNRT_UNSUPPORTED if the eval program does not write the logits (every cnnc-compiled
 * model does).  Buffers are the caller's. */
CNNRT_API cnnrt_status cnnrt_evaluate_samples(cnnrt_model *m, const void *images, size_t images_bytes, const float *labels,
                                              int n_batches, float *loss, int32_t *rank);

/* ---- data parallelism across processes (docs/mpi.md) --------------------------------------
 * A communicator: the few collectives the runtime needs, filled by an engine the caller links
 * (libcnnrt_mpi for Open MPI: runtime/mpi/cnnrt_mpi.h); libcnnrt itself links none.  Every
 * function returns 0 on success, nonzero on failure (then last_error may say why).  Blocking;
 * called only from the thread that calls cnnrt_train_step, one collective at a time, in the
 * same order on every rank. */
typedef struct cnnrt_comm {
  uint32_t struct_size;     /* sizeof(cnnrt_comm) */
  int rank, size;           /* this process's rank, 0 .. size-1 */
  void *ctx;                /* passed to every function */
  /* recv (size * bytes) = every rank's send (bytes), in rank order */
  int (*allgather)(void *ctx, const void *send, size_t bytes, void *recv);
  int (*broadcast)(void *ctx, void *buf, size_t bytes, int root);
  int (*barrier)(void *ctx);
  int (*send)(void *ctx, const void *buf, size_t bytes, int dest);
  int (*recv)(void *ctx, void *buf, size_t bytes, int src);
  const char *(*last_error)(void *ctx); /* may be NULL */
} cnnrt_comm;
/* Makes m one of comm->size processes training together (NULL: alone again).  The model's
 * --replicas R (the total, as poprun's --num-replicas) must divide by size: this process runs
 * replicas rank*R/size .. (rank+1)*R/size-1, cnnrt_grad_accum(m) becomes grad_accum * R/size
 * (the micro-batches cnnrt_train_step takes per update: the local replicas', global micro-batch
 * (u*grad_accum + a)*R + r of replica r), and each update gathers every replica's gradient
 * accumulators before the compiled update stage sums them in replica order: the state stays
 * bitwise that of one process running all R replicas.  BUFFER state (batch-norm running
 * statistics) ends as one process updates it, in replica order: replayed on every rank from
 * the gathered batch statistics (models that export them), else passed from rank to rank.  The
 * loss and accuracy cnnrt_train_step reports are the global ones.  *comm is copied; its
 * functions and ctx must outlive the model (or the next call). */
CNNRT_API cnnrt_status cnnrt_set_comm(cnnrt_model *m, const cnnrt_comm *comm);
/* Sums n doubles over the ranks of comm in rank order (((r0 + r1) + r2) ...), in place: every
 * rank gets the same bits.  CNNRT_INTERNAL naming the engine's message on failure. */
CNNRT_API cnnrt_status cnnrt_comm_sum_f64(const cnnrt_comm *comm, double *buf, int n);
/* Copies rank root's training state (every state tensor, as after cnnrt_load_checkpoint) and
 * step to every rank of m's communicator (cnnrt_set_comm), in place: a checkpoint read by one
 * rank only.  Collective: every rank calls it.  Without a communicator (or alone) nothing to
 * do.  CNNRT_INTERNAL naming the engine's message when the broadcast fails. */
CNNRT_API cnnrt_status cnnrt_comm_broadcast_state(cnnrt_model *m, int root);

/* One tensor of the model's persistent state. */
typedef enum cnnrt_state_kind {
  CNNRT_STATE_PARAM = 0, CNNRT_STATE_OPTIMIZER = 1, CNNRT_STATE_BUFFER = 2, CNNRT_STATE_GRAD_ACCUM = 3
} cnnrt_state_kind;
typedef struct cnnrt_state_info {
  const char *name;         /* owned by the model */
  cnnrt_dtype dtype;        /* f32 or i32; GRAD_ACCUM also bf16/f16 (2 bytes) with --enable-half-partials */
  cnnrt_state_kind kind;
  int rank;                 /* 0 = scalar */
  int64_t dims[4];
  size_t bytes;
} cnnrt_state_info;
CNNRT_API int cnnrt_num_state(const cnnrt_model *m);
/* Fills *out (the caller's) with state tensor index's description. */
CNNRT_API cnnrt_status cnnrt_state_info_at(const cnnrt_model *m, int index, cnnrt_state_info *out);
/* Copies state tensor name to / from the caller's buffer of exactly its byte size. */
CNNRT_API cnnrt_status cnnrt_get_state(cnnrt_model *m, const char *name, void *out, size_t bytes);
CNNRT_API cnnrt_status cnnrt_set_state(cnnrt_model *m, const char *name, const void *in, size_t bytes);

/* Writes every state tensor except gradient accumulators, by name, plus "step" (I64 scalar,
 * weight updates done) to path as safetensors (F32/I32 little-endian; __metadata__ names the
 * model).  Written to PATH.tmp.PID in the same directory (stale ones of dead processes are
 * removed first), fsynced, renamed, and the directory fsynced: path is either the old file or
 * the complete new one.  path is the caller's. */
CNNRT_API cnnrt_status cnnrt_save_checkpoint(cnnrt_model *m, const char *path);
/* Restores the state and step from a checkpoint written by cnnrt_save_checkpoint.  Every
 * checkpointed state tensor must be in the file with its dtype and shape, and the file may
 * hold nothing else: otherwise CNNRT_SHAPE_MISMATCH naming the tensor.  CNNRT_IO for a file
 * that is missing, unreadable or not regular; CNNRT_BAD_MODEL for a malformed one: a header
 * that is not strict JSON, entries with other keys, untyped __metadata__ (format must be
 * "cnnc-checkpoint"), data offsets that leave gaps, overlap or trailing bytes, a negative step,
 * a NaN/Inf value or negative running_var (unless cnnrt_options.allow_nonfinite).  The state
 * is left unchanged on any failure. */
CNNRT_API cnnrt_status cnnrt_load_checkpoint(cnnrt_model *m, const char *path);
/* The "step" of the checkpoint at path without loading it, into *step, after the checks of the
 * file's header and layout that need no model.  path is the caller's. */
CNNRT_API cnnrt_status cnnrt_checkpoint_step(const char *path, int64_t *step);

/* ---- learning-rate schedules (pure functions) --------------------------------------------
 * lr(e) for a fractional epoch e >= 0 (e = steps done / steps per epoch):
 *   warmup     e < warmup_epochs: the schedule's lr at warmup_epochs * e / warmup_epochs,
 *              i.e. lr(warmup_epochs) * e / warmup_epochs (linear from 0)
 *   constant   base_lr
 *   step       base_lr * factor^k, k = number of decay_epochs <= e
 *   cosine     p = (e - W) / (total_epochs - W) clamped to [0,1] (W = warmup_epochs):
 *              base_lr * (1 + cos(pi p)) / 2
 *   exponential base_lr * factor^(e - W) for e >= W (factor per epoch) */
typedef enum cnnrt_lr_kind { CNNRT_LR_CONSTANT = 0, CNNRT_LR_STEP = 1, CNNRT_LR_COSINE = 2, CNNRT_LR_EXPONENTIAL = 3 } cnnrt_lr_kind;
struct cnnrt_lr_schedule {
  cnnrt_lr_kind kind;
  double base_lr;
  double warmup_epochs;     /* 0: none */
  double total_epochs;      /* cosine */
  double factor;            /* step, exponential */
  int n_decay;              /* step: decay_epochs[n_decay], ascending */
  const double *decay_epochs;
};
/* The learning rate at epoch e; base_lr for a NULL or invalid schedule. */
CNNRT_API double cnnrt_lr_at(const cnnrt_lr_schedule *s, double epoch);
/* Parses "constant", "step", "cosine", "exponential" into *kind. */
CNNRT_API cnnrt_status cnnrt_lr_kind_parse(const char *name, cnnrt_lr_kind *kind);

/* ---- logging period (as --logs-per-epoch in Graphcore's TF2 CNNs) -------------------------
 * logs_per_epoch >= 1 (or fractional > 1): a log every steps_per_epoch / X steps, rounded to
 * the nearest X that divides the epoch into whole steps (out->rounded = 1, the caller warns).
 * logs_per_epoch < 1 ("1/2" = every 2 epochs): 1/X must be a whole number of epochs that
 * divides epochs, else CNNRT_INVALID_ARGUMENT "It is not possible to log 2.0 epochs a time
 * for 5 epochs".  out is the caller's. */
typedef struct cnnrt_log_plan {
  int64_t steps_per_log;    /* weight updates between logs (the device iterations per call) */
  double logs_per_epoch;    /* as used (after rounding) */
  int rounded;              /* nonzero if it differs from the requested value */
} cnnrt_log_plan;
CNNRT_API cnnrt_status cnnrt_log_period(double logs_per_epoch, int64_t steps_per_epoch, int epochs, cnnrt_log_plan *out);
/* Parses "4", "0.5", "1/2" into *out (> 0). */
CNNRT_API cnnrt_status cnnrt_parse_fraction(const char *text, double *out);

/* ---- datasets ------------------------------------------------------------------------------
 * Image classification data: u8 [N, C, H, W] + labels, held in memory, or image files decoded
 * when read (cnnrt_dataset_open_folder).  Kinds of cnnrt_dataset_open:
 *   "mnist", "fashion-mnist"  idx files in dir: train-images-idx3-ubyte, train-labels-idx1-ubyte,
 *                             t10k-images-idx3-ubyte, t10k-labels-idx1-ubyte (each also .gz)
 *   "cifar10"                 dir or dir/cifar-10-batches-bin: data_batch_1..5.bin (train),
 *                             test_batch.bin (test); 3073-byte records (label, 3x32x32)
 *   "cifar100"                dir or dir/cifar-100-binary: train.bin, test.bin; 3074-byte
 *                             records (coarse label, fine label, 3x32x32): the 100 fine labels
 *   "synthetic"               dir ignored: a separable problem, 1x28x28, 10 classes,
 *                             1024 train / 256 test samples (cnnrt_dataset_synthetic for others) */
typedef struct cnnrt_dataset cnnrt_dataset; /* opaque */
/* Reads the train (test = 0) or test split.  On success *out is a new dataset the caller
 * frees with cnnrt_dataset_close; messages name the file and the fault. */
CNNRT_API cnnrt_status cnnrt_dataset_open(const char *kind, const char *dir, int test, cnnrt_dataset **out);

/* An image folder in the ImageNet layout: DIR/train/CLASS/... (test = 0) or DIR/val/CLASS/...,
 * .jpg/.jpeg/.png files (decided by content; other files are ignored and counted), in class
 * folders and their subfolders (8 levels at most); class k = the k-th folder name in byte
 * order (torchvision's ImageFolder), files in byte order of their path within a class.  The
 * split's classes must be the train split's.  Images are decoded when read (libjpeg-turbo,
 * libspng), transformed to the sample shape, on `threads` decoder threads that also read the
 * next window ahead (cnnrt_dataset_read of the samples after the last read, same count).
 * augment IMAGENET: train = random-resized crop (area 0.08-1, aspect 3/4-4/3) + horizontal
 * flip, val = resize of the shorter side to 256/224 of the sample + centre crop; the random
 * choices of a sample depend on the shuffle seed and the file alone.  NONE: the whole image
 * resized to the sample shape. */
typedef enum cnnrt_augment { CNNRT_AUGMENT_IMAGENET = 0, CNNRT_AUGMENT_NONE = 1 } cnnrt_augment;
typedef struct cnnrt_folder_options {
  int channels, height, width; /* the sample shape: 1 (grey) or 3 (RGB) x H x W, required */
  cnnrt_augment augment;       /* default IMAGENET */
  int threads;                 /* decoder threads (0: none, the reader decodes); default: cores/2, >= 1 */
  int skip_bad;                /* nonzero: an image that fails to decode is replaced by the next file that
                                  decodes and counted (cnnrt_dataset_stats); 0 (default): the read fails
                                  naming the file */
  int classes;                 /* TFRecords only: the class count (labels are not read at open), required */
  int label_base;              /* TFRecords only: subtracted from the stored labels (1 for TensorFlow's
                                  ImageNet shards, numbered 1..1000); default 0 */
} cnnrt_folder_options;
CNNRT_API void cnnrt_folder_options_init(cnnrt_folder_options *o);
CNNRT_API cnnrt_status cnnrt_dataset_open_folder(const char *dir, int test, const cnnrt_folder_options *o,
                                                 cnnrt_dataset **out);
/* TensorFlow's ImageNet TFRecord shards, DIR/train-NNNNN-of-MMMMM (test = 0) or
 * DIR/validation-NNNNN-of-MMMMM (or TensorFlow Datasets' NAME-train.tfrecord-NNNNN-of-MMMMM):
 * records of tf.train.Example with "image/encoded" and "image/class/label" (or "image" and
 * "label"), CRCs checked (docs/data.md).  Everything else as for a folder: the
 * same options (with classes and label_base), decoding, augmentation, threads and skip_bad; a
 * label outside 0..classes-1 after label_base fails the read naming the shard and record. */
CNNRT_API cnnrt_status cnnrt_dataset_open_tfrecord(const char *dir, int test, const cnnrt_folder_options *o,
                                                   cnnrt_dataset **out);
/* The name of class k (an image folder's class folder; "0".."9" for the others), or NULL. */
CNNRT_API const char *cnnrt_dataset_class_name(const cnnrt_dataset *ds, int k);
typedef struct cnnrt_dataset_stats {
  int64_t decoded;      /* images decoded so far (folders; 0 for in-memory data) */
  int64_t skipped;      /* images that failed to decode and were replaced (skip_bad) */
  int64_t ignored;      /* files in the folder that are not .jpg/.jpeg/.png */
  double wait_seconds;  /* time cnnrt_dataset_read spent decoding or waiting for decoders */
  char last_skipped[512]; /* the last skipped image's message ("" if none; with decoder threads the
                             last in time, which may vary from run to run; skipped does not) */
} cnnrt_dataset_stats;
CNNRT_API void cnnrt_dataset_stats_get(const cnnrt_dataset *ds, cnnrt_dataset_stats *out);
/* n samples of c x h x w, `classes` classes: class k brightens its own band of pixels over
 * uniform noise, labels uniform, deterministic in seed. */
CNNRT_API cnnrt_status cnnrt_dataset_synthetic(int64_t n, int c, int h, int w, int classes, uint64_t seed,
                                               cnnrt_dataset **out);
CNNRT_API void cnnrt_dataset_close(cnnrt_dataset *ds);
CNNRT_API int64_t cnnrt_dataset_size(const cnnrt_dataset *ds);
/* Sample shape and class count (max label + 1 over the data, or the declared count). */
CNNRT_API void cnnrt_dataset_shape(const cnnrt_dataset *ds, int *c, int *h, int *w, int *classes);
/* Keeps only the first n samples (n >= 1, <= size); of an image folder (sorted by class), n
 * samples spread evenly over it: sample i is file floor(i * size / n). */
CNNRT_API cnnrt_status cnnrt_dataset_limit(cnnrt_dataset *ds, int64_t n);
/* Sets the sample order to a permutation determined by seed (seed 0: file order). */
CNNRT_API void cnnrt_dataset_shuffle(cnnrt_dataset *ds, uint64_t seed);
/* Writes samples first .. first+count-1 (in the current order) into images as dtype (u8
 * as stored, or f32 = x/255) and their labels as f32 into labels.  Buffers are the
 * caller's: count*c*h*w elements and count floats. */
CNNRT_API cnnrt_status cnnrt_dataset_read(const cnnrt_dataset *ds, int64_t first, int64_t count, cnnrt_dtype dtype,
                                          void *images, float *labels);

#ifdef __cplusplus
}
#endif
#endif
