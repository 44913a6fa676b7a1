/* cnnrun.h — what the files of cnnrun share (tools/cnnrun.c: command line, model, info and
 * cnnrun_train.inc; cnnrun_bench.c: benchmark; cnnrun_infer.c: infer; cnnrun_mpi.c: ranks). */
#ifndef CNNRUN_H
#define CNNRUN_H

#include <stddef.h>
#include <stdint.h>

#include "runtime/cnnrt.h"

#define EXIT_USAGE 2
#define MAX_SHARDS 64 /* for per-shard reports */

typedef struct opts {
  const char *model, *cmd;
  int json, pin, top, warmup, warmup_set, runs, batches, batches_set, n_threads, profile, lr_set;
  int replicas; /* benchmark / infer --replicas: model instances on core groups (0 = 1) */
  double seconds; /* benchmark --seconds: keep timing until at least this long (and --runs calls) */
  double peak; /* --peak: per-core GFLOP/s for the profile's % of peak (0: measure) */
  int threads[64];
  const char *input, *output, *labels, *format, *trace;
  /* train / validate */
  const char *dataset, *data_dir, *logs_per_epoch, *lr_schedule, *decay_epochs, *checkpoint_dir, *restore, *checkpoint;
  int epochs, limit, validate_every, no_validation; /* --validate-every E (0: only at the end), --no-validation */
  int augment, loader_threads, skip_bad; /* --dataset folder|tfrecord: cnnrt_augment, decoder threads (-1: default), --bad-images skip */
  int label_base;                        /* --dataset tfrecord: subtracted from the stored labels */
  double ema_decay;                      /* --weight-avg-exp D (0: none) */
  double comm_timeout;                   /* --comm-timeout S: under mpirun, the limit of a wait for the other ranks (0: none) */
  double mixup, cutmix;                  /* --mixup / --cutmix ALPHA (0: none) */
  double lr, lr_factor, warmup_epochs;
  double lr_per_256; /* --lr-per-256 (lr_per_256_set): the lr per 256 samples of a weight update */
  int lr_per_256_set;
  unsigned long long seed;
  /* runtime options of every command (--spin-us, --hugepages, --replica-mode); open_model adds
   * --pin */
  cnnrt_options rt;
} opts;

/* Print "cnnrun: message" and exit 1 (die) or, with the usage, 2 (die_usage). */
__attribute__((noreturn, format(printf, 1, 2))) void die(const char *fmt, ...);
__attribute__((noreturn, format(printf, 1, 2))) void die_usage(const char *fmt, ...);

/* Opens o->model with o's runtime options, threads and --trace; dies on failure. */
cnnrt_model *open_model(const opts *o);
/* Writes the --trace file, if any, and closes m. */
void close_model(const opts *o, cnnrt_model *m);
const char *dtype_name(cnnrt_dtype t);

/* ---- benchmark (cnnrun_bench.c) --------------------------------------------------------- */
typedef struct bench_result {
  double total, mean, p50, p90, min, img_s, gflop_s;
  double cpu; /* process CPU seconds (every thread) during the timed calls */
  double busy[MAX_SHARDS]; /* per shard: seconds busy during the timed runs, then / total */
} bench_result;
double now_seconds(void);
/* Deterministic synthetic input: u8 in 0..255 or f32 in [-1, 1). */
void synth_input(void *buf, size_t bytes, cnnrt_dtype dt);
void print_json_string(const char *s);
/* Untimed warm-up calls, then timed calls until o->runs of them and o->seconds have passed.
 * Returns the number of timed calls; *ms (malloc'd) receives each one's ms per batch. */
int bench_calls(const opts *o, cnnrt_model *m, bench_result *r, double **ms, int (*call)(cnnrt_model *, void *), void *ctx);
/* mean, p50, p90, min of ms[n] (sorted in place). */
void bench_stats(bench_result *r, double *ms, int n);
int cmd_benchmark(const opts *o);

/* ---- inference replicas (cnnrun_bench.c) ------------------------------------------------ */
/* Opens o->replicas instances of o->model (an inference model, else exit 2) into ms[], one per
 * core group: the CPUs this process may use (sched_getaffinity) in o->replicas contiguous
 * groups; each shard gets --threads (or the group's cores / shards, at least 1) threads, with
 * --pin on consecutive cores of its instance's group.  Dies on failure. */
void open_replicas(const opts *o, cnnrt_model **ms);
/* Runs fn(i, ctx) for i in 0..n-1, each on its own thread, and waits for them. */
void run_parallel(int n, void (*fn)(int, void *), void *ctx);

/* ---- processes (cnnrun_mpi.c, docs/mpi.md) ---------------------------------------------- */
/* Under mpirun: loads libcnnrt_mpi, initialises MPI and checks that every rank runs the same
 * model file with the same options (else every rank exits 1).  Alone: does nothing. */
void dist_init(const char *model, double timeout, int *argc, char ***argv);
const cnnrt_comm *dist_comm_get(void); /* NULL when alone */
int dist_rank(void), dist_size(void);
void dist_die_prefix(void);  /* "[rank K of N] " on stderr under mpirun, before die's message */
void dist_abort(int code);   /* under mpirun: MPI_Abort, ending every rank */
void dist_finalize(void);
int dist_restore(cnnrt_model *m, const char *path, int optional); /* --restore; under mpirun rank 0 reads, all get it */

/* ---- infer (cnnrun_infer.c) ------------------------------------------------------------- */
/* Checks every output path of the command before its work starts: not a directory, not one of
 * its inputs, its directory writable (else dies). */
void check_outputs(const opts *o);
int cmd_infer(const opts *o);

/* ---- training (cnnrun_train.inc) -------------------------------------------------------- */
int cmd_benchmark_train(const opts *o, cnnrt_model *m);

#endif
