/* cnnrt.h — the public API of libcnnrt, the cnnc runtime: load a model .so compiled by cnnc,
 * query it, and run inference on it with one thread group per shard, micro-batches flowing
 * from shard to shard in a pipeline.  This is the only header users include.
 *
 * Conventions: every function that can fail returns a cnnrt_status; on failure it leaves a
 * message for cnnrt_last_error() (thread-local) and the library never exits or aborts on
 * caller input.  Strings returned by the library are owned by it (model-owned strings live
 * until cnnrt_close).  A cnnrt_model may be queried from any thread; calls that run or
 * reconfigure it (cnnrt_infer, cnnrt_set_*) are serialised internally. */
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
typedef enum cnnrt_dtype { CNNRT_F32 = 0, CNNRT_BF16 = 1, CNNRT_F16 = 2, CNNRT_U8 = 3, CNNRT_I32 = 4 } cnnrt_dtype;

typedef struct cnnrt_model cnnrt_model; /* opaque */

/* Optional allocator for the runtime's large buffers (boundary tensors, scratch).  alloc
 * returns size bytes aligned to align (a power of two >= 64) or NULL; free releases it. */
typedef struct cnnrt_allocator {
  void *(*alloc)(void *ctx, size_t size, size_t align);
  void (*free)(void *ctx, void *ptr);
  void *ctx;
} cnnrt_allocator;

typedef struct cnnrt_options {
  uint32_t struct_size;     /* sizeof(cnnrt_options); set by cnnrt_options_init */
  int threads_per_shard;    /* 0 = auto: the usable cores divided among the shards */
  int pin;                  /* nonzero: pin shard s's threads to consecutive usable cores */
  const cnnrt_allocator *allocator; /* NULL = the C library; must outlive the model */
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

/* Fills *opts with the defaults (auto threads, no pinning, malloc).  opts is the caller's. */
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
 * settings, as one JSON object, or NULL on error.  The model owns it: regenerated on each
 * call, valid until the next call on m or cnnrt_close.  Waits for a running cnnrt_infer. */
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
 * tensor's dtype (u8 or f32), read only.  output receives n_batches * cnnrt_output_bytes(m)
 * bytes: per micro-batch, every output in order (f32 logits for cnnc's models).  Both
 * buffers are the caller's and are used only during the call.  Sizes that do not match
 * return CNNRT_SHAPE_MISMATCH.  Serialised with other calls on m. */
CNNRT_API cnnrt_status cnnrt_infer(cnnrt_model *m, const void *input, size_t input_bytes, void *output,
                                   size_t output_bytes, int n_batches);

/* ---- tracing (docs/reports.md) ---------------------------------------------------------- */
/* Starts recording the following cnnrt_infer calls for a Chrome/Perfetto trace: one event
 * per micro-batch per shard and, for shards running on more than one thread, one per op
 * (timed at the generated code's barriers between ops).  At most max_events events per
 * shard are kept (0: 1 << 20); later ones are counted as dropped.  Restarts (clears) a trace
 * already recording.  Owns nothing of the caller's. */
CNNRT_API cnnrt_status cnnrt_trace_begin(cnnrt_model *m, size_t max_events);
/* Writes the recorded events to path as Chrome trace JSON ({"traceEvents": [...]}, "X"
 * complete events, times in microseconds, pid = this process, tid = shard) and stops
 * recording.  CNNRT_INVALID_ARGUMENT if no trace was begun, CNNRT_IO if path cannot be
 * written (the trace is dropped either way).  path is the caller's. */
CNNRT_API cnnrt_status cnnrt_trace_write(cnnrt_model *m, const char *path);

#ifdef __cplusplus
}
#endif
#endif
