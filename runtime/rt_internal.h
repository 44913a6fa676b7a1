/* rt_internal.h — private declarations shared by the files of libcnnrt.  Prefix: rt_.
 * Nothing here is exported (the library is built with -fvisibility=hidden). */
#ifndef CNNC_RT_INTERNAL_H
#define CNNC_RT_INTERNAL_H

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "cnnc_abi.h"
#include "cnnrt.h"

#define RT_ALIGN 64

/* Stack of every kernel thread.  Kernels keep packed panels and weight blocks in their own
 * frame (up to ~2.1 MB per call: a training 1x1 conv on channel vectors with a 1 MB weight
 * block, a 400 KB input panel and a remainder tile's second panel), so the threads get an
 * explicit size instead of glibc's default (RLIMIT_STACK, 2 MB under `ulimit -s unlimited`).
 * Virtual: untouched pages cost nothing.  (Kernels do not probe their frames: see
 * cg_set_fn_attrs.) */
#define RT_THREAD_STACK (size_t)(32u << 20)

/* ---- errors (rt_error.c) ---------------------------------------------------------------- */
/* Sets the thread-local message and returns s, so failures read `return rt_fail(...)`. */
cnnrt_status rt_fail(cnnrt_status s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void rt_clear_error(void);

/* ---- growable string (rt_json.c) -------------------------------------------------------- */
typedef struct rt_str { char *s; size_t n, cap; int oom; } rt_str;
void rt_str_printf(rt_str *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void rt_str_json_string(rt_str *b, const char *s); /* a quoted, escaped JSON string; NULL -> null */
/* Nonzero if text is one valid JSON value (RFC 8259) with nothing but whitespace after it;
 * nonzero-and-object if want_object. */
int rt_json_valid(const char *text, int want_object);

/* ---- ELF pre-check (rt_elf.c) ----------------------------------------------------------- */
/* Checks that path is a regular file holding an ELF shared object for this machine that the
 * dynamic loader can read without faulting: headers, segments, dynamic tables, relocations
 * inside the file and of the kinds cnnc emits, cnnc's checksum note matching (rt_elf.h).
 * Returns OK or IO/BAD_MODEL naming the file and the fault. */
cnnrt_status rt_elf_check(const char *path);

/* ---- descriptor checks (rt_validate.c) -------------------------------------------------- */
size_t rt_dtype_size(int32_t dtype); /* 0 for an unknown dtype */
/* Nonzero if p is aligned to align and [p, p+bytes) lies inside the loaded .so that holds
 * anchor (a descriptor); a string is checked by its first byte. */
int rt_in_model(const void *anchor, const void *p, size_t bytes, size_t align);
#define RT_IN_MODEL(anchor, p, n) rt_in_model(anchor, p, (size_t)(n) * sizeof *(p), _Alignof(__typeof__(*(p))))
const char *rt_dtype_name(int32_t dtype);
/* Checks every table of d for consistency (indices, sizes, data flow between shards) and
 * that its pointers point into the .so that holds d.  Names path in messages.  On success
 * *producer_out (malloc, caller frees) maps each tensor to the shard writing it (-1: the
 * model input). */
cnnrt_status rt_validate(const cnnc_abi_model *d, const char *path, int **producer_out);

/* ---- datasets (rt_data.c in memory, rt_folder.c image folders) --------------------------- */
typedef struct rt_folder rt_folder;
struct cnnrt_dataset {
  uint8_t *images; /* in memory: [n][c*h*w] in file order; NULL for a folder */
  uint8_t *labels; /* in memory: [n] */
  int64_t n, *order; /* samples, and the read order (a permutation of 0..n-1) */
  int c, h, w, classes;
  uint64_t seed;     /* the last shuffle seed (a folder's augmentation draws from it) */
  rt_folder *folder; /* an image folder, else NULL */
  int64_t *pick;     /* a folder after cnnrt_dataset_limit: sample -> file; NULL: the identity */
};
/* Opens DIR/train or DIR/val (tfrecord: DIR's TFRecord shards of the split) into ds (c, h, w,
 * classes, n, folder set; order left to the caller). */
cnnrt_status rt_folder_open(cnnrt_dataset *ds, const char *dir, int test, int tfrecord, const cnnrt_folder_options *o);
/* cnnrt_dataset_read of a folder (arguments checked). */
cnnrt_status rt_folder_read(const cnnrt_dataset *ds, int64_t first, int64_t count, cnnrt_dtype dtype, void *images,
                            float *labels);
/* Cancels and waits out the read-ahead: before the order, seed or pick of ds change. */
void rt_folder_quiesce(rt_folder *f);
void rt_folder_close(rt_folder *f);
const char *rt_folder_class(const rt_folder *f, int k);
void rt_folder_stats(const rt_folder *f, cnnrt_dataset_stats *out);
uint64_t rt_splitmix(uint64_t *x); /* splitmix64: the runtime's seeded stream (rt_data.c) */

/* ---- sync primitives (rt_sync.c) -------------------------------------------------------- */
/* Spin up to spin_ns (yielding now and then), then futex wait until *word != seen.  spin_ns
 * is how long a waiter spins before it sleeps in the kernel: the model's
 * cnnrt_options.spin_us (rt_spin_ns; 0 = sleep at once).  Sleeping idles the vCPU
 * (docs/runtime.md "Barrier"), which costs a wake-up latency and, on a quiet VM, the core's
 * caches. */
void rt_wait_change(_Atomic uint32_t *word, uint32_t seen, uint64_t spin_ns);
void rt_wake_all(_Atomic uint32_t *word);

/* Arrivals and the generation word on separate cache lines (spinners read the generation
 * while others increment the count); sleepers: waiters inside futex_wait, so the last arrival
 * makes the wake syscall only when someone sleeps.  spin_ns: as rt_wait_change's, for every
 * waiter of this barrier (the thread group's other waits use it too). */
typedef struct rt_barrier {
  _Atomic uint32_t arrived;
  uint32_t n;
  uint64_t spin_ns;
  char pad0[48];
  _Atomic uint32_t generation;
  _Atomic uint32_t sleepers;
  char pad1[56];
} rt_barrier;
void rt_barrier_init(rt_barrier *b, uint32_t n, uint64_t spin_ns);
void rt_barrier_wait(rt_barrier *b); /* the cnnc_abi_barrier_fn shape, via rt_barrier_cb */
void rt_barrier_cb(void *ctx);

/* Bounded FIFO of pointers, blocking on full/empty. */
typedef struct rt_queue {
  pthread_mutex_t mu;
  pthread_cond_t not_empty, not_full;
  void **items;
  int cap, head, count;
} rt_queue;
int rt_queue_init(rt_queue *q, void **storage, int cap); /* 0 or -1 */
void rt_queue_destroy(rt_queue *q);
void rt_queue_push(rt_queue *q, void *item);
void *rt_queue_pop(rt_queue *q);

/* ---- memory (rt_mem.c) ------------------------------------------------------------------ */
/* With the default allocator a buffer of at least RT_HUGE_MIN bytes is a 2 MB-aligned
 * anonymous mapping (zero pages from the kernel), advised MADV_HUGEPAGE when its use is
 * RT_MEM_HUGE (or always, under CNNRT_HUGEPAGES_ALL); CNNRT_HUGEPAGES_OFF keeps every buffer
 * on aligned_alloc.  A user allocator gets every buffer, as before. */
#define RT_HUGE_MIN ((size_t)2 << 20)
typedef enum rt_mem_use {
  RT_MEM_HUGE,  /* long-lived, reused every run (inference frames and scratch): THP */
  RT_MEM_PLAIN  /* 4 KB pages (training buffers: fresh THP are slow to fault in on this VM) */
} rt_mem_use;
typedef struct rt_mem rt_mem;
rt_mem *rt_mem_new(cnnrt_hugepages mode); /* NULL when out of memory; mode: cnnrt_options.hugepages */
void rt_mem_free(rt_mem *r);           /* unmaps what is still mapped; NULL is a no-op */
int rt_mem_hugepages(const rt_mem *r); /* nonzero: big buffers are mappings (not CNNRT_HUGEPAGES_OFF) */
void *rt_alloc_use(const cnnrt_model *m, size_t bytes, rt_mem_use use); /* RT_ALIGN-aligned, zeroed, or NULL */
void *rt_alloc(const cnnrt_model *m, size_t bytes);                     /* rt_alloc_use(m, bytes, RT_MEM_HUGE) */
void rt_free(const cnnrt_model *m, void *p);

/* ---- execution (rt_exec.c) -------------------------------------------------------------- */
typedef struct rt_exec rt_exec;
/* Allocates the frames and scratch and starts one thread group per shard (m->exec). */
cnnrt_status rt_exec_start(cnnrt_model *m);
/* Runs n micro-batches through the started pipeline; buffers already checked. */
cnnrt_status rt_exec_run(cnnrt_model *m, const void *input, void *output, int n);
void rt_exec_stop(cnnrt_model *m); /* joins every thread and frees the pipeline; idempotent */
/* The cores this process may run on, ascending, into cpus (up to max); returns the count. */
int rt_usable_cpus(int *cpus, int max);

/* ---- tracing (rt_trace.c) --------------------------------------------------------------- */
typedef struct rt_trace rt_trace;
/* What a shard's leader thread passes as the op barrier while tracing: waits on b, then
 * records the op that just ended. */
typedef struct rt_trace_ctx {
  rt_barrier *b;
  rt_trace *t;
  int shard;
} rt_trace_ctx;
uint64_t rt_trace_now_ns(void);
void rt_trace_barrier_cb(void *ctx);
/* The leader of shard starts / ended a micro-batch (times from rt_trace_now_ns). */
void rt_trace_mb_begin(rt_trace *t, int shard, uint64_t t0);
void rt_trace_mb_end(rt_trace *t, int shard, uint64_t t0, uint64_t t1);
void rt_trace_free(rt_trace *t);
/* Training (rt_train.c): the leader of thread group `track` starts / ended a job (stage st on
 * frame); with several threads the stage's op barriers go through rt_trace_barrier_cb. */
void rt_trace_job_begin(rt_trace *t, int track, int nthreads, const cnnc_abi_stage *st, uint64_t t0, int frame, int slot);
void rt_trace_job_end(rt_trace *t, int track, const cnnc_abi_stage *st, int frame, uint64_t t0, uint64_t t1);

/* ---- per-op profile (rt_profile.c) ------------------------------------------------------ */
typedef struct rt_profile rt_profile;
typedef struct rt_op_acc rt_op_acc;
/* What each thread passes as the barrier context of a profiled entry (one per thread). */
typedef struct rt_prof_ctx {
  rt_barrier *b;
  rt_op_acc *ops;       /* the shard's counters */
  int tid, op, n_ops;   /* op: index of the running op */
  uint64_t t0, c0;      /* wall / thread CPU ns at the running op's start on this thread */
} rt_prof_ctx;
/* Prepares c for one micro-batch of shard on thread tid; returns the profiled entry. */
cnnc_abi_shard_fn rt_prof_start(rt_profile *p, int shard, rt_prof_ctx *c, rt_barrier *b, int tid);
void rt_prof_barrier_cb(void *ctx); /* the cnnc_abi_barrier_fn of profiled runs */
void rt_profile_free(rt_profile *p);
/* ---- training (rt_train.c, rt_ckpt.c) --------------------------------------------------- */
typedef struct rt_pool rt_pool;
typedef struct rt_trainer {
  const cnnc_abi_train *t;       /* the training descriptor, inside the .so */
  void *state;                   /* state_bytes, initialised at open */
  void **tbuf;                   /* [n_tensors] runtime buffers (images/labels: NULL, fed per call) */
  void **io;                     /* [max n_io] of the running stage */
  void *scratch;                 /* max scratch_bytes over all stages (stages run one at a time) */
  rt_pool *pools;                /* [n_shards] thread groups, NULL until the first step */
  double lr;
  int64_t step;                  /* weight updates done */
  int have_sched;                /* cnnrt_set_lr_schedule: sched drives lr */
  cnnrt_lr_schedule sched;       /* decay_epochs -> decay (owned) */
  double *decay;
  int64_t steps_per_epoch;
  struct rt_dist *dist;          /* cnnrt_set_comm (rt_dist.c), NULL when alone */
  const cnnc_abi_bn_stats *bn;   /* the batch-statistics records (cnnc_abi.h), or NULL: their
                                  * tensor lives per micro-batch slot, as loss and correct */
  float *wide;                   /* class ids widened to mixed-label rows (rt_mix.c), wide_n floats */
  size_t wide_n;
} rt_trainer;
/* rt_dist.c, data parallelism across processes: the replicas this process runs [*r0, *r1)
 * (every replica without a communicator) and their count; BUFFER state saved before an
 * update's micro-batches (replay), or received from the previous rank and passed on to the
 * next after the forward stage jobs; after all, every replica's accumulators gathered, the
 * batch-norm records gathered and replayed (or the last rank's BUFFER state shared), and
 * the loss / top-1 sums of every frame in global order added to *loss_sum, *correct_sum; the
 * communicator freed. */
int rt_dist_replicas(const cnnrt_model *m, int *r0, int *r1);
cnnrt_status rt_dist_before(cnnrt_model *m);
cnnrt_status rt_dist_after(cnnrt_model *m, double *loss_sum, double *correct_sum);
/* Whether this rank passes BUFFER state on to the next (rt_dist_pass, after its forwards). */
int rt_dist_pass_stats(const cnnrt_model *m);
cnnrt_status rt_dist_pass(cnnrt_model *m);
void rt_dist_free(rt_trainer *tr);
/* Looks up the training descriptor of a mode-1 model, validates it, allocates and initialises
 * the state (m->tr).  A model without one keeps m->tr NULL.  Names m->path in messages. */
cnnrt_status rt_train_attach(cnnrt_model *m);
/* Nonzero if m's replicas run on their own thread groups (CNNRT_REPLICA_PARALLEL asked for,
 * more than one replica, no BUFFER state); 0 for inference models. */
int rt_train_replica_parallel(const cnnrt_model *m);
/* Replicas of a training descriptor (0 means 1). */
static inline int rt_train_replicas(const cnnc_abi_train *t) { return t->replicas > 1 ? t->replicas : 1; }
/* Validates the training descriptor m->tr->t against m (rt_train_check.c). */
cnnrt_status rt_check_train(const cnnrt_model *m);
void rt_train_free(cnnrt_model *m);
/* The index of state tensor name, or -1. */
int rt_state_find(const cnnc_abi_train *t, const char *name);
/* rt_train.c's steps that rt_eval.c shares: m must be a training model (fn names the call in
 * the message); the batch buffers' checks; the thread groups ready; program prog on
 * micro-batch i in frame 0, adding its compiled loss and top-1 count; the means of a call. */
cnnrt_status rt_need_train(const cnnrt_model *m, const char *fn);
cnnrt_status rt_check_batch_args(cnnrt_model *m, const char *fn, const void *images, size_t images_bytes,
                                 const float *labels, int n_mb);
cnnrt_status rt_pools_ready(cnnrt_model *m);
cnnrt_status rt_feed_and_run(cnnrt_model *m, const cnnc_abi_program *prog, const void *images, const float *labels,
                             int i, double *loss_sum, double *correct_sum);
void rt_report(int n_mb, int b, double loss_sum, double correct_sum, float *loss, float *accuracy);
/* Train tensor t's buffer of frame f (the thread groups ready). */
void *rt_frame_tensor(cnnrt_model *m, int f, int t);
/* rt_eval.c: CNNRT_INVALID_ARGUMENT unless labels[0..n) are class ids, whole numbers in 0..k-1. */
cnnrt_status rt_check_labels(const char *fn, const float *labels, int64_t n, int64_t k);
/* rt_mix.c, mixed labels (cnnc --mixed-labels): floats per sample of m's labels tensor (1 or
 * 3); n rows (a, b, lam) checked (class ids in 0..k-1, lam in [0, 1]); n class ids as the model
 * reads them: labels itself at width 1, else rows (y, y, 1) in m->tr->wide (NULL: out of
 * memory; call with m->lock held). */
int rt_label_width(const cnnrt_model *m);
cnnrt_status rt_check_mixed_labels(const char *fn, const float *labels, int64_t n, int64_t k);
const float *rt_labels_widen(cnnrt_model *m, const float *labels, int64_t n);
/* The body of cnnrt_train_step (width 1) and cnnrt_train_step_mixed (width 3). */
cnnrt_status rt_train_step(cnnrt_model *m, const char *fn, const void *images, size_t images_bytes, const float *labels,
                           int width, int n, float *loss, float *accuracy);

/* ---- the model -------------------------------------------------------------------------- */
struct cnnrt_model {
  char *path;
  void *dl;                      /* dlopen handle */
  const cnnc_abi_model *d;       /* the descriptor, inside the .so */
  cnnrt_options opts;
  cnnrt_allocator alloc;
  rt_mem *mem;                   /* the default allocator's big mappings (rt_mem.c) */
  int *threads;                  /* [n_shards] */
  int **cpus;                    /* [n_shards] -> pinning list or NULL */
  int *n_cpus;                   /* [n_shards] */
  int *producer;                 /* [n_tensors] shard producing the tensor; -1 for the input */
  size_t out_bytes;              /* all outputs of one micro-batch */
  char *describe;                /* last cnnrt_describe_json result */
  pthread_mutex_t lock;          /* serialises infer and setters */
  int lock_ok;
  rt_exec *exec;                 /* NULL until the first infer, or after a setter */
  _Atomic uint64_t *busy_ns;     /* [n_shards] profile: time in the shard (its leader thread) */
  _Atomic uint64_t *runs;        /* [n_shards] profile: micro-batches run */
  rt_trace *trace;               /* NULL unless cnnrt_trace_begin; set and cleared under lock */
  rt_profile *prof;              /* NULL unless cnnrt_profile_begin (rt_profile.c) */
  int prof_on;                   /* profiled entries in use; set and cleared under lock */
  rt_trainer *tr;                /* training models only (rt_train.c) */
};

/* The model's spin budget in ns (cnnrt_options.spin_us, checked at open). */
static inline uint64_t rt_spin_ns(const cnnrt_model *m) { return (uint64_t)m->opts.spin_us * 1000u; }

#endif
