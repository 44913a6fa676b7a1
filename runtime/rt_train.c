/* rt_train.c — training models: the training descriptor (cnnc_abi.h, "training extension")
 * is validated at open (rt_train_check.c), its state buffer allocated and initialised; cnnrt_train_step and
 * cnnrt_evaluate run the stages of a program one after another on per-shard thread groups
 * (runtime threads, tid 0 included, with RT_THREAD_STACK each), feeding images, labels and lr and reading
 * loss and top-1 count (rt_eval.c: the evaluation calls on top of the eval program).  Also
 * the state accessors of the public API. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cm.h"
#include "rt_internal.h"


/* ---- the training executor --------------------------------------------------------------
 * Thread groups: one per (replica group, shard); every thread is a dedicated pthread (tid 0
 * leads).  Frames: sets of train tensor buffers, as many as the schedule keeps in flight
 * (common/cm_pipe.c: sequential 1, grouped and interleaved about 2 x shards, per replica pool),
 * reused by the micro-batches of an update one after another; images, labels, loss and correct
 * live per micro-batch (slot r * grad_accum + a) outside the frames.  A run hands each group an
 * ordered job list (stage, frame, micro-batch slot, stages the frame completed before it); a
 * job waits until its frame has completed that many stages (progress[frame] == seq), so a list
 * order is a pipeline schedule (docs/training.md "Pipelined training") and a frame passes to
 * its next micro-batch once the previous one ran its last stage.  With CNNRT_REPLICA_PARALLEL
 * the replicas get their own groups (threads of a shard divided between them) and run at the
 * same time; by default they share the shard's group and run one after another.  Groups,
 * pools and frames: this process's replicas only (rt_pipe; r - r0 under a communicator). */
typedef struct rt_job {
  const cnnc_abi_stage *st;
  int frame, seq, mb;
} rt_job;

typedef struct rt_tgroup rt_tgroup;
typedef struct rt_targ {
  rt_tgroup *g;
  int tid;
} rt_targ;

struct rt_tgroup {
  rt_pool *x;
  int shard, nthreads, n_started;
  pthread_t *tids;
  rt_targ *args;
  rt_barrier barrier;
  _Atomic uint32_t job_gen, list_gen;
  const cnnc_abi_stage *stage; /* the running job, set by the leader before bumping job_gen */
  void **io, *scratch;
  rt_job *jobs;
  int n_jobs, cap_jobs;
  rt_trace_ctx tctx;           /* the leader's op barrier while tracing (rt_trace.c) */
};

struct rt_pool {
  cnnrt_model *m;
  int n_groups, par, n_frames, n_tensors, n_mb;
  rt_tgroup *groups;
  void ***fptr;                /* [n_frames][n_tensors] */
  cm_pjob *mb_jobs;            /* the micro_batch jobs of one update (cm_pipe_jobs) */
  long n_mb_jobs;
  int B, jobs_r0, jobs_rl;     /* frames per pool; the replicas mb_jobs, frames and groups are
                                  for (rt_local_jobs; the pools restart when jobs_rl changes) */
  const void **mb_images;      /* [n_mb] per micro-batch slot: the caller's images and labels, */
  const float **mb_labels;
  float *mb_out;               /* [2 * n_mb] and the loss and correct count the stages write */
  char *mb_bn; int bn_t, bn_n; /* [bn_n] batch-statistics records (tensor bn_t, or -1): one per
                                * micro-batch under a communicator (rt_dist.c replays them), else 1 */
  _Atomic uint32_t *progress;  /* [n_frames]: stages completed in this run */
  _Atomic uint32_t done;       /* groups that finished their list */
  _Atomic int stop;
  _Atomic int32_t rc;          /* first failing stage's return value */
  const cnnc_abi_stage *_Atomic failed;
};

static void rt_tg_share(rt_tgroup *g, int tid) {
  rt_pool *x = g->x;
  rt_trace *tr = tid == 0 && g->nthreads > 1 ? x->m->trace : NULL; /* set only between calls */
  if (tr) g->tctx = (rt_trace_ctx){&g->barrier, tr, (int)(g - x->groups)};
  int32_t rc = g->stage->run(g->io, x->m->tr->state, g->scratch, tid, g->nthreads, tr ? rt_trace_barrier_cb : rt_barrier_cb,
                             tr ? (void *)&g->tctx : (void *)&g->barrier);
  if (rc != 0) {
    int32_t zero = 0;
    if (atomic_compare_exchange_strong(&x->rc, &zero, rc)) atomic_store(&x->failed, g->stage);
  }
  if (tr) rt_trace_barrier_cb(&g->tctx); /* records the stage's last op */
  else rt_barrier_wait(&g->barrier);
}

static void rt_tg_lead(rt_tgroup *g) {
  rt_pool *x = g->x;
  for (int j = 0; j < g->n_jobs; j++) {
    const rt_job *jb = &g->jobs[j];
    uint32_t p;
    while ((p = atomic_load_explicit(&x->progress[jb->frame], memory_order_acquire)) != (uint32_t)jb->seq)
      rt_wait_change(&x->progress[jb->frame], p, g->barrier.spin_ns);
    if (atomic_load(&x->rc) == 0) { /* after a failure the rest only passes the frames on */
      const cnnc_abi_train *t = x->m->tr->t;
      for (int k = 0; k < jb->st->n_io; k++) {
        int32_t v = jb->st->io[k];
        g->io[k] = v == t->images   ? (void *)(uintptr_t)x->mb_images[jb->mb]
                   : v == t->labels ? (void *)(uintptr_t)x->mb_labels[jb->mb]
                   : v == t->loss    ? (void *)&x->mb_out[2 * jb->mb]
                   : v == t->correct ? (void *)&x->mb_out[2 * jb->mb + 1]
                   : v == x->bn_t    ? (void *)(x->mb_bn + (size_t)(jb->mb % x->bn_n) * (size_t)t->tensors[v].bytes)
                                     : x->fptr[jb->frame][v];
      }
      g->stage = jb->st;
      rt_trace *tr = x->m->trace;
      uint64_t t0 = tr ? rt_trace_now_ns() : 0;
      if (tr) rt_trace_job_begin(tr, (int)(g - x->groups), g->nthreads, jb->st, t0, jb->frame, jb->mb);
      if (g->nthreads > 1) {
        atomic_fetch_add_explicit(&g->job_gen, 1, memory_order_release);
        rt_wake_all(&g->job_gen);
      }
      rt_tg_share(g, 0);
      if (tr) rt_trace_job_end(tr, (int)(g - x->groups), jb->st, jb->frame, t0, rt_trace_now_ns());
      atomic_fetch_add_explicit(&x->m->runs[g->shard], 1, memory_order_relaxed);
    }
    atomic_fetch_add_explicit(&x->progress[jb->frame], 1, memory_order_release);
    rt_wake_all(&x->progress[jb->frame]);
  }
  atomic_fetch_add_explicit(&x->done, 1, memory_order_release);
  rt_wake_all(&x->done);
}

static void *rt_tg_main(void *arg) {
  rt_targ *a = arg;
  rt_tgroup *g = a->g;
  _Atomic uint32_t *gen = a->tid == 0 ? &g->list_gen : &g->job_gen;
  uint32_t seen = 0;
  for (;;) {
    rt_wait_change(gen, seen, g->barrier.spin_ns);
    seen = atomic_load_explicit(gen, memory_order_acquire);
    if (atomic_load_explicit(&g->x->stop, memory_order_acquire)) return NULL;
    if (a->tid == 0) rt_tg_lead(g);
    else rt_tg_share(g, a->tid);
  }
}

static void rt_pools_stop(cnnrt_model *m) {
  rt_pool *x = m->tr ? m->tr->pools : NULL;
  if (!x) return;
  atomic_store_explicit(&x->stop, 1, memory_order_release);
  for (int i = 0; x->groups && i < x->n_groups; i++) {
    rt_tgroup *g = &x->groups[i];
    atomic_fetch_add_explicit(&g->list_gen, 1, memory_order_release);
    atomic_fetch_add_explicit(&g->job_gen, 1, memory_order_release);
    rt_wake_all(&g->list_gen);
    rt_wake_all(&g->job_gen);
  }
  for (int i = 0; x->groups && i < x->n_groups; i++) {
    rt_tgroup *g = &x->groups[i];
    for (int t = 0; t < g->n_started; t++) pthread_join(g->tids[t], NULL);
    free(g->tids);
    free(g->args);
    free(g->io);
    free(g->jobs);
    rt_free(m, g->scratch);
  }
  for (int f = 0; x->fptr && f < x->n_frames; f++) {
    for (int k = 0; x->fptr[f] && k < x->n_tensors; k++) rt_free(m, x->fptr[f][k]);
    free(x->fptr[f]);
  }
  free(x->fptr);
  free(x->mb_jobs);
  free((void *)x->mb_images);
  free((void *)x->mb_labels);
  free(x->mb_out);
  free(x->mb_bn);
  free((void *)x->progress);
  free(x->groups);
  free(x);
  m->tr->pools = NULL;
}


/* Replica-parallel mode: CNNRT_REPLICA_PARALLEL, more than one replica, and no BUFFER state
 * (batchnorm running statistics: every replica's forward updates the same slice, which only
 * one replica at a time may do; such models run their replicas one after another). */
int rt_train_replica_parallel(const cnnrt_model *m) {
  const cnnc_abi_train *t = m->tr ? m->tr->t : NULL;
  if (!t || m->opts.replica_mode != CNNRT_REPLICA_PARALLEL || rt_train_replicas(t) < 2) return 0;
  for (int i = 0; i < t->n_state; i++)
    if (t->state[i].kind == CNNC_ABI_STATE_BUFFER) return 0;
  return 1;
}

/* replica: this process's index of it (r - r0 under a communicator). */
static rt_tgroup *rt_group_of(rt_pool *x, int replica, int shard) {
  return &x->groups[(x->par ? replica : 0) * x->m->d->n_shards + shard];
}

/* Per-frame train tensors: all but the per-micro-batch ones. */
static int rt_in_frame(const cnnc_abi_train *t, int k) {
  return k != t->images && k != t->labels && k != t->loss && k != t->correct;
}

/* The micro_batch pipeline of one update (common/cm_pipe.c) of this process's replicas (all of
 * them alone, its share under a communicator: rt_dist_replicas).  group: [P] filled here. */
static cm_pipe rt_pipe(const cnnrt_model *m, int par, int *group) {
  const cnnc_abi_train *t = m->tr->t;
  int R = rt_train_replicas(t), P = t->micro_batch.n_stages / R;
  for (int k = 0; k < P; k++) group[k] = t->micro_batch.stages[k].shard;
  return (cm_pipe){.P = P, .F = t->n_fwd_stages, .S = m->d->n_shards, .N = t->grad_accum, .R = rt_dist_replicas(m, NULL, NULL),
                   .group = group, .schedule = t->schedule, .par = par};
}

/* *B frames in each of *pools pools for the micro_batch program. */
static cnnrt_status rt_frames(const cnnrt_model *m, int par, int *B, int *pools) {
  int *group = calloc((size_t)m->tr->t->micro_batch.n_stages, sizeof *group);
  if (!group) return rt_fail(CNNRT_OUT_OF_MEMORY, "%s: out of memory", m->path);
  cm_pipe p = rt_pipe(m, par, group);
  *B = cm_pipe_frames(&p);
  *pools = cm_pipe_pools(&p);
  free(group);
  if (*B < 1)
    return rt_fail(*B < 0 ? CNNRT_OUT_OF_MEMORY : CNNRT_BAD_MODEL, "%s: cannot plan the micro_batch pipeline", m->path);
  return CNNRT_OK;
}

static cnnrt_status rt_group_start(cnnrt_model *m, rt_pool *x, rt_tgroup *g, int shard, int nthreads) {
  const cnnc_abi_train *t = m->tr->t;
  g->x = x, g->shard = shard, g->nthreads = nthreads;
  rt_barrier_init(&g->barrier, (uint32_t)nthreads, rt_spin_ns(m));
  atomic_init(&g->job_gen, 0);
  atomic_init(&g->list_gen, 0);
  size_t sb = RT_ALIGN, nio = 1;
  const cnnc_abi_program *progs[3] = {&t->micro_batch, &t->update, &t->eval};
  for (int p = 0; p < 3; p++)
    for (int k = 0; k < progs[p]->n_stages; k++) {
      const cnnc_abi_stage *st = &progs[p]->stages[k];
      if (st->shard == shard && (size_t)st->scratch_bytes > sb) sb = (size_t)st->scratch_bytes;
      if ((size_t)st->n_io > nio) nio = (size_t)st->n_io;
    }
  g->tids = calloc((size_t)nthreads, sizeof *g->tids);
  g->args = calloc((size_t)nthreads, sizeof *g->args);
  g->io = calloc(nio, sizeof *g->io);
  g->scratch = rt_alloc_use(m, sb, RT_MEM_PLAIN);
  if (!g->tids || !g->args || !g->io || !g->scratch)
    return rt_fail(CNNRT_OUT_OF_MEMORY, "%s: out of memory for a training thread group (scratch %zu bytes)", m->path, sb);
  for (int i = 0; i < nthreads; i++) {
    g->args[i] = (rt_targ){g, i};
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, RT_THREAD_STACK);
    int e = pthread_create(&g->tids[i], &attr, rt_tg_main, &g->args[i]);
    pthread_attr_destroy(&attr);
    if (e != 0) return rt_fail(CNNRT_INTERNAL, "%s: cannot start a training thread: %s", m->path, strerror(e));
    g->n_started++;
  }
  return CNNRT_OK;
}

static cnnrt_status rt_pools_alloc(cnnrt_model *m, rt_pool *x) {
  const cnnc_abi_train *t = m->tr->t;
  int ns = m->d->n_shards, R = rt_train_replicas(t), r0, r1, RL = rt_dist_replicas(m, &r0, &r1);
  x->par = rt_train_replica_parallel(m);
  x->n_groups = (x->par ? RL : 1) * ns; /* this process's replicas (rt_pipe) */
  int pools = 1, B = 1;
  cnnrt_status fs = rt_frames(m, x->par, &B, &pools);
  if (fs != CNNRT_OK) return fs;
  x->n_frames = pools * B;
  x->n_tensors = t->n_tensors;
  x->n_mb = R * t->grad_accum;
  x->groups = calloc((size_t)x->n_groups, sizeof *x->groups);
  x->fptr = calloc((size_t)x->n_frames, sizeof *x->fptr);
  x->progress = calloc((size_t)x->n_frames, sizeof *x->progress);
  x->mb_images = calloc((size_t)x->n_mb, sizeof *x->mb_images);
  x->mb_labels = calloc((size_t)x->n_mb, sizeof *x->mb_labels);
  x->mb_out = calloc(2 * (size_t)x->n_mb, sizeof *x->mb_out);
  x->bn_t = m->tr->bn ? m->tr->bn->tensor : -1, x->bn_n = m->tr->dist ? x->n_mb : 1;
  x->mb_bn = calloc((size_t)x->bn_n, x->bn_t >= 0 ? (size_t)t->tensors[x->bn_t].bytes : 1);
  int *group = calloc((size_t)t->micro_batch.n_stages, sizeof *group);
  cm_pipe pipe = rt_pipe(m, x->par, group);
  x->B = B, x->jobs_r0 = r0, x->jobs_rl = RL;
  x->n_mb_jobs = cm_pipe_jobs(&pipe, B, NULL);
  x->mb_jobs = calloc((size_t)x->n_mb_jobs, sizeof *x->mb_jobs);
  if (x->mb_jobs) cm_pipe_jobs(&pipe, B, x->mb_jobs);
  free(group);
  if (!x->groups || !x->fptr || !x->progress || !x->mb_images || !x->mb_labels || !x->mb_out || !x->mb_bn || !group || !x->mb_jobs)
    return rt_fail(CNNRT_OUT_OF_MEMORY, "%s: out of memory", m->path);
  for (int f = 0; f < x->n_frames; f++) {
    if (!(x->fptr[f] = calloc((size_t)t->n_tensors, sizeof **x->fptr))) return rt_fail(CNNRT_OUT_OF_MEMORY, "%s: out of memory", m->path);
    for (int k = 0; k < t->n_tensors; k++) {
      if (!rt_in_frame(t, k)) continue;
      if (!(x->fptr[f][k] = rt_alloc_use(m, (size_t)t->tensors[k].bytes, RT_MEM_PLAIN)))
        return rt_fail(CNNRT_OUT_OF_MEMORY, "%s: out of memory for training tensor '%s'", m->path, t->tensors[k].name);
    }
  }
  for (int i = 0; i < x->n_groups; i++) {
    int s = i % ns, nt = m->threads[s];
    if (x->par) nt = nt / RL > 1 ? nt / RL : 1;
    cnnrt_status st = rt_group_start(m, x, &x->groups[i], s, nt);
    if (st != CNNRT_OK) return st;
  }
  return CNNRT_OK;
}

/* (Re)starts the executor when absent or when cnnrt_set_threads changed a count. */
cnnrt_status rt_pools_ready(cnnrt_model *m) {
  rt_trainer *tr = m->tr;
  rt_pool *x = tr->pools;
  int RL = rt_dist_replicas(m, NULL, NULL);
  if (x && ((x->bn_n > 1) != (tr->dist != NULL) || x->jobs_rl != RL)) /* a communicator came or went, or a new share */
    rt_pools_stop(m), x = NULL;
  for (int i = 0; x && i < x->n_groups; i++) {
    int s = x->groups[i].shard, nt = m->threads[s];
    if (x->par) nt = nt / RL > 1 ? nt / RL : 1;
    if (x->groups[i].nthreads != nt) {
      rt_pools_stop(m);
      break;
    }
  }
  if (tr->pools) return CNNRT_OK;
  if (!(x = calloc(1, sizeof *x))) return rt_fail(CNNRT_OUT_OF_MEMORY, "%s: out of memory", m->path);
  x->m = m;
  tr->pools = x;
  cnnrt_status st = rt_pools_alloc(m, x);
  if (st != CNNRT_OK) rt_pools_stop(m);
  return st;
}

static cnnrt_status rt_push_job(cnnrt_model *m, rt_tgroup *g, const cnnc_abi_stage *st, int frame, int seq, int mb) {
  if (g->n_jobs == g->cap_jobs) {
    int cap = g->cap_jobs ? 2 * g->cap_jobs : 16;
    rt_job *j = realloc(g->jobs, (size_t)cap * sizeof *j);
    if (!j) return rt_fail(CNNRT_OUT_OF_MEMORY, "%s: out of memory", m->path);
    g->jobs = j, g->cap_jobs = cap;
  }
  g->jobs[g->n_jobs++] = (rt_job){st, frame, seq, mb};
  return CNNRT_OK;
}

/* Runs the job lists already pushed, waits for them, resets the lists.  reset 0: the frames'
 * progress counts on from the previous run (the second part of one job list split in two). */
static cnnrt_status rt_run_jobs_part(cnnrt_model *m, int reset) {
  rt_pool *x = m->tr->pools;
  if (reset)
    for (int f = 0; f < x->n_frames; f++) atomic_store(&x->progress[f], 0);
  atomic_store(&x->done, 0);
  atomic_store(&x->rc, 0);
  atomic_store(&x->failed, NULL);
  uint32_t active = 0;
  for (int i = 0; i < x->n_groups; i++)
    if (x->groups[i].n_jobs > 0) {
      active++;
      atomic_fetch_add_explicit(&x->groups[i].list_gen, 1, memory_order_release);
      rt_wake_all(&x->groups[i].list_gen);
    }
  uint32_t d;
  while ((d = atomic_load_explicit(&x->done, memory_order_acquire)) != active) rt_wait_change(&x->done, d, rt_spin_ns(m));
  for (int i = 0; i < x->n_groups; i++) x->groups[i].n_jobs = 0;
  int32_t rc = atomic_load(&x->rc);
  if (rc != 0) {
    const cnnc_abi_stage *st = atomic_load(&x->failed);
    return rt_fail(CNNRT_INTERNAL, "%s: training stage '%s' (shard %d) returned %d", m->path, st && st->name ? st->name : "?",
                   st ? st->shard : -1, rc);
  }
  return CNNRT_OK;
}

static cnnrt_status rt_run_jobs(cnnrt_model *m) { return rt_run_jobs_part(m, 1); }

/* Every stage of prog in order on frame 0, micro-batch slot 0 (replica 0's groups). */
static cnnrt_status rt_run_program(cnnrt_model *m, const cnnc_abi_program *prog) {
  if (prog->n_stages == 0) return CNNRT_OK;
  rt_pool *x = m->tr->pools;
  for (int k = 0; k < prog->n_stages; k++) {
    cnnrt_status s = rt_push_job(m, rt_group_of(x, 0, prog->stages[k].shard), &prog->stages[k], 0, k, 0);
    if (s != CNNRT_OK) return s;
  }
  return rt_run_jobs(m);
}

/* The job lists of replicas r0 .. r0+RL-1 alone (a process's share of them under a
 * communicator, rt_dist.c), into x->mb_jobs: the pipeline of RL replicas on the same frames,
 * its micro-batch mb = (r - r0) * ga + a. */
static cnnrt_status rt_local_jobs(cnnrt_model *m, int r0, int RL) {
  rt_pool *x = m->tr->pools;
  int *group = calloc((size_t)m->tr->t->micro_batch.n_stages, sizeof *group);
  if (!group) return rt_fail(CNNRT_OUT_OF_MEMORY, "%s: out of memory", m->path);
  cm_pipe pipe = rt_pipe(m, x->par, group);
  pipe.R = RL;
  cnnrt_status s = CNNRT_OK;
  if (cm_pipe_runs(&pipe, x->B) != 1)
    s = rt_fail(CNNRT_BAD_MODEL, "%s: replicas %d..%d cannot run on %d frames", m->path, r0, r0 + RL - 1, x->B);
  long n = s == CNNRT_OK ? cm_pipe_jobs(&pipe, x->B, NULL) : 0;
  cm_pjob *jobs = s == CNNRT_OK ? calloc((size_t)n, sizeof *jobs) : NULL;
  if (s == CNNRT_OK && !jobs) s = rt_fail(CNNRT_OUT_OF_MEMORY, "%s: out of memory", m->path);
  if (s == CNNRT_OK) {
    cm_pipe_jobs(&pipe, x->B, jobs);
    free(x->mb_jobs);
    x->mb_jobs = jobs, x->n_mb_jobs = n, x->jobs_r0 = r0, x->jobs_rl = RL;
  }
  free(group);
  return s;
}

/* The job list of this process's replicas, computed again when they change. */
static cnnrt_status rt_mb_jobs_ready(cnnrt_model *m) {
  rt_pool *x = m->tr->pools;
  int r0, r1, RL = rt_dist_replicas(m, &r0, &r1); /* this process's replicas (rt_dist.c) */
  if (r0 != x->jobs_r0 || RL != x->jobs_rl) return rt_local_jobs(m, r0, RL);
  return CNNRT_OK;
}

/* Under a communicator with BUFFER state to pass on (rt_dist_pass_stats): the end of the prefix
 * of the job list that holds every forward stage job (the last one + 1); the statistics are
 * final there, the rest are backward jobs.  The whole list when the forward/backward split of
 * the stages is unknown (n_fwd_stages 0), or when a job after the split would have to run on a
 * frame before one of the prefix (the prefix must run to its end on its own). */
static long rt_fwd_split(const cnnrt_model *m) {
  const rt_pool *x = m->tr->pools;
  int F = m->tr->t->n_fwd_stages;
  long n = x->n_mb_jobs, k = 0;
  if (F <= 0) return n;
  for (long i = 0; i < n; i++)
    if (x->mb_jobs[i].stage < F) k = i + 1;
  if (k == n) return n;
  int *top = calloc((size_t)x->n_frames, sizeof *top); /* per frame: 1 + the prefix's largest seq */
  if (!top) return n;
  for (long i = 0; i < k; i++) {
    const cm_pjob *j = &x->mb_jobs[i];
    if (j->frame >= 0 && j->frame < x->n_frames && j->seq + 1 > top[j->frame]) top[j->frame] = j->seq + 1;
  }
  for (long i = k; i < n && k < n; i++) {
    const cm_pjob *j = &x->mb_jobs[i];
    if (j->frame < 0 || j->frame >= x->n_frames || j->seq < top[j->frame]) k = n;
  }
  free(top);
  return k;
}

/* The micro_batch jobs of one update (cm_pipe_jobs, computed when the pools start): replica
 * r's stages on its micro-batch slots r*ga .. r*ga+ga-1 in the order of the descriptor's
 * schedule (sequential when the forward/backward split is unknown), frames reused. */
static cnnrt_status rt_push_micro_batches(cnnrt_model *m, long from, long to) {
  rt_pool *x = m->tr->pools;
  const cnnc_abi_train *t = m->tr->t;
  int P = t->micro_batch.n_stages / rt_train_replicas(t);
  cnnrt_status s = CNNRT_OK;
  int r0 = x->jobs_r0; /* rt_mb_jobs_ready */
  if (to > x->n_mb_jobs) to = x->n_mb_jobs;
  for (long i = from; i < to && s == CNNRT_OK; i++) {
    const cm_pjob *j = &x->mb_jobs[i];
    int r = r0 + j->mb / t->grad_accum;
    s = rt_push_job(m, rt_group_of(x, r - r0, j->group % m->d->n_shards), &t->micro_batch.stages[(size_t)r * (size_t)P + (size_t)j->stage],
                    j->frame, j->seq, r0 * t->grad_accum + j->mb);
  }
  return s;
}

/* ---- attach / free ---------------------------------------------------------------------- */
static cnnrt_status rt_train_alloc(cnnrt_model *m) {
  rt_trainer *tr = m->tr;
  const cnnc_abi_train *t = tr->t;
  tr->state = rt_alloc_use(m, (size_t)t->state_bytes, RT_MEM_PLAIN); /* zeroed */
  if (!tr->state)
    return rt_fail(CNNRT_OUT_OF_MEMORY, "%s: out of memory for the training state (%lld bytes)", m->path,
                   (long long)t->state_bytes);
  for (int i = 0; i < t->n_state; i++)
    if (t->state[i].init) memcpy((char *)tr->state + t->state[i].offset, t->state[i].init, (size_t)t->state[i].bytes);
  return CNNRT_OK; /* train tensor frames and thread groups: rt_pools_ready, at the first run */
}

cnnrt_status rt_train_attach(cnnrt_model *m) {
  if (m->d->mode != 1) return CNNRT_OK;
  const cnnc_abi_train *t = dlsym(m->dl, CNNC_ABI_TRAIN_SYMBOL);
  if (!t) return CNNRT_OK; /* training calls say why they cannot run */
  if (!(m->tr = calloc(1, sizeof *m->tr))) return rt_fail(CNNRT_OUT_OF_MEMORY, "%s: out of memory", m->path);
  m->tr->t = t;
  m->tr->lr = 0.01;
  cnnrt_status s = rt_check_train(m);
  return s != CNNRT_OK ? s : rt_train_alloc(m);
}

void rt_train_free(cnnrt_model *m) {
  rt_trainer *tr = m->tr;
  if (!tr) return;
  rt_pools_stop(m);
  rt_dist_free(tr);
  for (int k = 0; tr->tbuf && k < tr->t->n_tensors; k++)
    if (k != tr->t->images && k != tr->t->labels) rt_free(m, tr->tbuf[k]); /* those two are the caller's */
  free(tr->tbuf);
  free(tr->io);
  free(tr->decay);
  free(tr->wide);
  rt_free(m, tr->scratch);
  rt_free(m, tr->state);
  free(tr);
  m->tr = NULL;
}

/* ---- public API ------------------------------------------------------------------------- */
cnnrt_status rt_need_train(const cnnrt_model *m, const char *fn) {
  if (!m) return rt_fail(CNNRT_INVALID_ARGUMENT, "%s: model is NULL", fn);
  if (m->tr) return CNNRT_OK;
  if (m->d->mode == 1)
    return rt_fail(CNNRT_UNSUPPORTED, "%s: %s: compiled for training but has no %s descriptor (a cnnc without training codegen?)",
                   fn, m->path, CNNC_ABI_TRAIN_SYMBOL);
  return rt_fail(CNNRT_UNSUPPORTED, "%s: %s: an inference model; compile with --mode training to train it", fn, m->path);
}

CNNRT_API int cnnrt_is_training(const cnnrt_model *m) { return m && m->tr; }
/* Micro-batches per weight update: grad_accum of every replica (what cnnrt_train_step takes per update). */
CNNRT_API int cnnrt_grad_accum(const cnnrt_model *m) { return m && m->tr ? m->tr->t->grad_accum * rt_dist_replicas(m, NULL, NULL) : 0; }
CNNRT_API cnnrt_status cnnrt_train_plan_info(const cnnrt_model *m, int program, cnnrt_train_plan *out) {
  rt_clear_error();
  cnnrt_status s = rt_need_train(m, "cnnrt_train_plan_info");
  if (s != CNNRT_OK) return s;
  if (!out || program < 0 || program > 2)
    return rt_fail(CNNRT_INVALID_ARGUMENT, "cnnrt_train_plan_info: program %d (0 micro_batch, 1 update, 2 eval) or out NULL", program);
  const cnnc_abi_train *t = m->tr->t;
  const cnnc_abi_program *p = program == 0 ? &t->micro_batch : program == 1 ? &t->update : &t->eval;
  int R = rt_train_replicas(t), per = program == 0 ? p->n_stages / R : p->n_stages;
  memset(out, 0, sizeof *out);
  out->n_stages = p->n_stages, out->replicas = R, out->grad_accum = t->grad_accum, out->schedule = t->schedule;
  out->recompute = t->recompute;
  int B = 1, pools = 1;
  if (program == 0 && (s = rt_frames(m, rt_train_replica_parallel(m), &B, &pools)) != CNNRT_OK) return s;
  out->frames = (size_t)B * (size_t)pools;
  char *used = calloc((size_t)t->n_tensors, 1);
  if (!used) return rt_fail(CNNRT_OUT_OF_MEMORY, "cnnrt_train_plan_info: out of memory");
  size_t *group_scratch = calloc((size_t)m->d->n_shards, sizeof *group_scratch);
  for (int k = 0; k < per; k++) {
    const cnnc_abi_stage *st = &p->stages[k];
    for (int j = 0; j < st->n_io; j++)
      if (!used[st->io[j]]) used[st->io[j]] = 1, out->tensor_bytes += (size_t)t->tensors[st->io[j]].bytes;
    if ((size_t)st->scratch_bytes > out->scratch_peak) out->scratch_peak = (size_t)st->scratch_bytes;
    if (group_scratch && (size_t)st->scratch_bytes > group_scratch[st->shard]) group_scratch[st->shard] = (size_t)st->scratch_bytes;
  }
  out->planned_bytes = (size_t)t->state_bytes + out->frames * out->tensor_bytes;
  for (int sh = 0; group_scratch && sh < m->d->n_shards; sh++) out->planned_bytes += group_scratch[sh];
  free(used);
  free(group_scratch);
  return CNNRT_OK;
}

CNNRT_API int64_t cnnrt_train_steps_done(const cnnrt_model *m) { return m && m->tr ? m->tr->step : 0; }
CNNRT_API double cnnrt_learning_rate(const cnnrt_model *m) { return m && m->tr ? m->tr->lr : 0; }

CNNRT_API cnnrt_status cnnrt_set_learning_rate(cnnrt_model *m, double lr) {
  rt_clear_error();
  cnnrt_status s = rt_need_train(m, "cnnrt_set_learning_rate");
  if (s != CNNRT_OK) return s;
  if (!isfinite(lr) || lr < 0) return rt_fail(CNNRT_INVALID_ARGUMENT, "cnnrt_set_learning_rate: %g is not a finite lr >= 0", lr);
  pthread_mutex_lock(&m->lock);
  m->tr->lr = lr;
  m->tr->have_sched = 0;
  pthread_mutex_unlock(&m->lock);
  return CNNRT_OK;
}

CNNRT_API cnnrt_status cnnrt_set_lr_schedule(cnnrt_model *m, const cnnrt_lr_schedule *s, int64_t steps_per_epoch) {
  rt_clear_error();
  cnnrt_status st = rt_need_train(m, "cnnrt_set_lr_schedule");
  if (st != CNNRT_OK) return st;
  if (s && (steps_per_epoch < 1 || !isfinite(s->base_lr) || s->base_lr < 0 || s->n_decay < 0 || s->n_decay > 4096 ||
            (s->n_decay > 0 && !s->decay_epochs)))
    return rt_fail(CNNRT_INVALID_ARGUMENT, "cnnrt_set_lr_schedule: bad schedule (base_lr %g, %d decay epochs) or %lld steps per epoch",
                   s->base_lr, s->n_decay, (long long)steps_per_epoch);
  double *decay = s && s->n_decay ? malloc((size_t)s->n_decay * sizeof *decay) : NULL;
  if (s && s->n_decay && !decay) return rt_fail(CNNRT_OUT_OF_MEMORY, "cnnrt_set_lr_schedule: out of memory");
  if (decay) memcpy(decay, s->decay_epochs, (size_t)s->n_decay * sizeof *decay);
  pthread_mutex_lock(&m->lock);
  rt_trainer *tr = m->tr;
  free(tr->decay);
  tr->decay = decay;
  tr->have_sched = s != NULL;
  if (s) tr->sched = *s, tr->sched.decay_epochs = decay, tr->steps_per_epoch = steps_per_epoch;
  pthread_mutex_unlock(&m->lock);
  return CNNRT_OK;
}

cnnrt_status rt_check_batch_args(cnnrt_model *m, const char *fn, const void *images, size_t images_bytes,
                                        const float *labels, int n_mb) {
  cnnrt_status s = rt_need_train(m, fn);
  if (s != CNNRT_OK) return s;
  if (!images || !labels) return rt_fail(CNNRT_INVALID_ARGUMENT, "%s: images or labels is NULL", fn);
  if (n_mb < 1) return rt_fail(CNNRT_INVALID_ARGUMENT, "%s: %d micro-batches, must be >= 1", fn, n_mb);
  size_t per = (size_t)m->tr->t->tensors[m->tr->t->images].bytes;
  if ((size_t)n_mb > SIZE_MAX / per || images_bytes != per * (size_t)n_mb)
    return rt_fail(CNNRT_SHAPE_MISMATCH, "%s: %s: images buffer is %zu bytes; %d micro-batches of %zu bytes need %zu", fn,
                   m->path, images_bytes, n_mb, per, per * (size_t)n_mb);
  return CNNRT_OK;
}

/* Points micro-batch slot `slot` at micro-batch i of the caller's data (stages only read
 * inputs). */
static void rt_feed(cnnrt_model *m, int slot, const void *images, const float *labels, int i) {
  rt_trainer *tr = m->tr;
  const cnnc_abi_train *t = tr->t;
  size_t per = (size_t)t->tensors[t->images].bytes;
  int b = m->d->batch_size;
  tr->pools->mb_images[slot] = (const char *)images + (size_t)i * per;
  tr->pools->mb_labels[slot] = labels + (size_t)i * (size_t)b * (size_t)rt_label_width(m);
}

/* Writes the lr into every frame. */
static void rt_feed_lr(cnnrt_model *m) {
  rt_pool *x = m->tr->pools;
  for (int f = 0; f < x->n_frames; f++) *(float *)x->fptr[f][m->tr->t->lr] = (float)m->tr->lr;
}

/* Runs prog on micro-batch i (frame 0, slot 0), adding the loss and correct counts. */
cnnrt_status rt_feed_and_run(cnnrt_model *m, const cnnc_abi_program *prog, const void *images, const float *labels,
                                    int i, double *loss_sum, double *correct_sum) {
  rt_feed(m, 0, images, labels, i);
  rt_feed_lr(m);
  cnnrt_status s = rt_run_program(m, prog);
  *loss_sum += m->tr->pools->mb_out[0];
  *correct_sum += m->tr->pools->mb_out[1];
  return s;
}

/* Train tensor t of frame f after a run; images, labels, loss and correct live per micro-batch
 * slot: for them f is the slot (r * grad_accum + a; 0: the micro-batch rt_feed_and_run ran). */
void *rt_frame_tensor(cnnrt_model *m, int f, int t) {
  rt_pool *x = m->tr->pools;
  const cnnc_abi_train *tt = m->tr->t;
  if (t == tt->loss || t == tt->correct) return &x->mb_out[2 * f + (t == tt->correct)];
  if (t == tt->images) return (void *)(uintptr_t)x->mb_images[f];
  if (t == x->bn_t) return x->mb_bn + (size_t)(f % x->bn_n) * (size_t)tt->tensors[t].bytes;
  if (t == tt->labels) return (void *)(uintptr_t)x->mb_labels[f];
  return x->fptr[f][t];
}

void rt_report(int n_mb, int b, double loss_sum, double correct_sum, float *loss, float *accuracy) {
  if (loss) *loss = (float)(loss_sum / n_mb);
  if (accuracy) *accuracy = (float)(correct_sum / ((double)n_mb * b));
}

/* --auto-loss-scaling (docs/precision.md): "optimizer/loss_scale" = {S, good steps, skipped
 * steps, growth interval} in the state; the backward kernels read S.  After an update: if any
 * weight or optimizer state element is not finite (a non-finite gradient reaches every state
 * it updates: w - lr*g, mu*v + g, Adam's moments), restore them from snap (the state before
 * the update), halve S and count the skip; else after `interval` good steps double S
 * (PyTorch GradScaler's backoff 0.5 and growth 2). */
static void rt_loss_scale_update(rt_trainer *tr, int ls, const char *snap) {
  const cnnc_abi_train *t = tr->t;
  int finite = 1;
  for (int i = 0; i < t->n_state && finite; i++) {
    const cnnc_abi_state_tensor *x = &t->state[i];
    if ((x->kind != CNNC_ABI_STATE_PARAM && x->kind != CNNC_ABI_STATE_OPTIMIZER) || x->dtype != CNNC_ABI_F32) continue;
    const float *p = (const float *)((const char *)tr->state + x->offset);
    for (int64_t e = 0; e < x->bytes / 4 && finite; e++) finite = isfinite(p[e]);
  }
  float *S = (float *)((char *)tr->state + t->state[ls].offset);
  if (!finite) {
    for (int i = 0; i < t->n_state; i++) {
      const cnnc_abi_state_tensor *x = &t->state[i];
      if (x->kind == CNNC_ABI_STATE_PARAM || x->kind == CNNC_ABI_STATE_OPTIMIZER)
        memcpy((char *)tr->state + x->offset, snap + x->offset, (size_t)x->bytes);
    }
    S[0] *= 0.5f, S[1] = 0, S[2] += 1;
  } else if (++S[1] >= S[3]) {
    S[0] *= 2.0f, S[1] = 0;
  }
}

CNNRT_API cnnrt_status cnnrt_loss_scale(cnnrt_model *m, double *scale, int64_t *skipped) {
  rt_clear_error();
  cnnrt_status s = rt_need_train(m, "cnnrt_loss_scale");
  if (s != CNNRT_OK) return s;
  int ls = rt_state_find(m->tr->t, "optimizer/loss_scale");
  if (ls < 0) return rt_fail(CNNRT_UNSUPPORTED, "cnnrt_loss_scale: %s was compiled without --auto-loss-scaling", m->path);
  pthread_mutex_lock(&m->lock);
  const float *S = (const float *)((const char *)m->tr->state + m->tr->t->state[ls].offset);
  if (scale) *scale = S[0];
  if (skipped) *skipped = (int64_t)S[2];
  pthread_mutex_unlock(&m->lock);
  return CNNRT_OK;
}

CNNRT_API cnnrt_status cnnrt_train_step(cnnrt_model *m, const void *images, size_t images_bytes, const float *labels,
                                        int n, float *loss, float *accuracy) {
  rt_clear_error();
  return rt_train_step(m, "cnnrt_train_step", images, images_bytes, labels, 1, n, loss, accuracy);
}

cnnrt_status rt_train_step(cnnrt_model *m, const char *fn, const void *images, size_t images_bytes, const float *labels,
                           int width, int n, float *loss, float *accuracy) {
  int ga = m && m->tr ? m->tr->t->grad_accum : 1, per_update = m && m->tr ? ga * rt_dist_replicas(m, NULL, NULL) : 1;
  if (m && m->tr && (n < 1 || n > INT32_MAX / per_update))
    return rt_fail(CNNRT_INVALID_ARGUMENT, "%s: n is %d, must be >= 1", fn, n);
  cnnrt_status s = rt_check_batch_args(m, fn, images, images_bytes, labels, n * per_update);
  if (s != CNNRT_OK) return s;
  if (width == 3 && rt_label_width(m) != 3)
    return rt_fail(CNNRT_UNSUPPORTED, "%s: %s was compiled without --mixed-labels: it takes class ids only", fn, m->path);
  const cnnc_abi_train *t = m->tr->t;
  const cnnc_abi_tensor *lo = &m->d->tensors[m->d->outputs[0]];
  int64_t n_labels = (int64_t)n * per_update * m->d->batch_size;
  if (lo->rank == 2 && (s = width == 3 ? rt_check_mixed_labels(fn, labels, n_labels, lo->dims[1])
                                       : rt_check_labels(fn, labels, n_labels, lo->dims[1])) != CNNRT_OK)
    return s;
  double loss_sum = 0, correct_sum = 0;
  int ls = rt_state_find(t, "optimizer/loss_scale");
  char *snap = NULL; /* --auto-loss-scaling: the state before each update */
  if (ls >= 0 && (t->state[ls].bytes != 16 || !(snap = malloc((size_t)t->state_bytes))))
    return rt_fail(ls >= 0 && t->state[ls].bytes != 16 ? CNNRT_BAD_MODEL : CNNRT_OUT_OF_MEMORY,
                   "cnnrt_train_step: %s: loss scale state of %lld bytes (want 16) or out of memory", m->path,
                   (long long)t->state[ls].bytes);
  pthread_mutex_lock(&m->lock);
  s = rt_pools_ready(m);
  if (s == CNNRT_OK && width == 1 && !(labels = rt_labels_widen(m, labels, n_labels)))
    s = rt_fail(CNNRT_OUT_OF_MEMORY, "%s: out of memory for %lld mixed-label rows", fn, (long long)n_labels);
  int R = rt_train_replicas(t), r0, r1, RL = rt_dist_replicas(m, &r0, &r1); /* all replicas, this process's */
  for (int u = 0; u < n && s == CNNRT_OK; u++) {
    rt_trainer *tr = m->tr;
    if (tr->have_sched) tr->lr = cnnrt_lr_at(&tr->sched, (double)tr->step / (double)tr->steps_per_epoch);
    /* micro-batch u*ga*RL + a*RL + r - r0 goes to replica r, accumulation index a (slot r*ga + a) */
    for (int r = r0; r < r1; r++)
      for (int a = 0; a < ga; a++) rt_feed(m, r * ga + a, images, labels, (u * ga + a) * RL + r - r0);
    rt_feed_lr(m);
    s = tr->dist ? rt_dist_before(m) : CNNRT_OK;
    if (s == CNNRT_OK) s = rt_mb_jobs_ready(m);
    if (s == CNNRT_OK && tr->dist && rt_dist_pass_stats(m)) {
      /* the forwards, then the statistics on to the next rank (it waits for them before its
       * own forwards), then the backwards: the ranks' backwards overlap */
      long k = rt_fwd_split(m);
      s = rt_push_micro_batches(m, 0, k);
      if (s == CNNRT_OK) s = rt_run_jobs_part(m, 1);
      if (s == CNNRT_OK) s = rt_dist_pass(m);
      if (s == CNNRT_OK && k < tr->pools->n_mb_jobs) s = rt_push_micro_batches(m, k, tr->pools->n_mb_jobs);
      if (s == CNNRT_OK && k < tr->pools->n_mb_jobs) s = rt_run_jobs_part(m, 0);
    } else {
      if (s == CNNRT_OK) s = rt_push_micro_batches(m, 0, tr->pools->n_mb_jobs);
      if (s == CNNRT_OK) s = rt_run_jobs(m);
    }
    if (s == CNNRT_OK && tr->dist) s = rt_dist_after(m, &loss_sum, &correct_sum); /* every replica's gradients */
    for (int i = 0; i < ga * R && s == CNNRT_OK && !tr->dist; i++) {
      loss_sum += tr->pools->mb_out[2 * i];
      correct_sum += tr->pools->mb_out[2 * i + 1];
    }
    for (int i = 0; s == CNNRT_OK && snap && i < t->n_state; i++) /* the weights and optimizer state only */
      if (t->state[i].kind == CNNC_ABI_STATE_PARAM || t->state[i].kind == CNNC_ABI_STATE_OPTIMIZER)
        memcpy(snap + t->state[i].offset, (const char *)tr->state + t->state[i].offset, (size_t)t->state[i].bytes);
    if (s == CNNRT_OK) s = rt_run_program(m, &t->update);
    if (s == CNNRT_OK && snap) rt_loss_scale_update(tr, ls, snap);
    if (s == CNNRT_OK) m->tr->step++;
  }
  pthread_mutex_unlock(&m->lock);
  free(snap);
  if (s == CNNRT_OK) rt_report(n * ga * R, m->d->batch_size, loss_sum, correct_sum, loss, accuracy);
  return s;
}

/* ---- state access ----------------------------------------------------------------------- */
int rt_state_find(const cnnc_abi_train *t, const char *name) {
  for (int i = 0; name && i < t->n_state; i++)
    if (!strcmp(t->state[i].name, name)) return i;
  return -1;
}

CNNRT_API int cnnrt_num_state(const cnnrt_model *m) { return m && m->tr ? m->tr->t->n_state : 0; }

CNNRT_API cnnrt_status cnnrt_state_info_at(const cnnrt_model *m, int index, cnnrt_state_info *out) {
  rt_clear_error();
  cnnrt_status s = rt_need_train(m, "cnnrt_state_info_at");
  if (s != CNNRT_OK) return s;
  if (!out || index < 0 || index >= m->tr->t->n_state)
    return rt_fail(CNNRT_INVALID_ARGUMENT, "cnnrt_state_info_at: index %d of %d (or out NULL)", index, m->tr->t->n_state);
  const cnnc_abi_state_tensor *x = &m->tr->t->state[index];
  memset(out, 0, sizeof *out);
  out->name = x->name;
  out->dtype = (cnnrt_dtype)x->dtype;
  out->kind = (cnnrt_state_kind)x->kind;
  out->rank = x->rank;
  for (int k = 0; k < x->rank; k++) out->dims[k] = x->dims[k];
  out->bytes = (size_t)x->bytes;
  return CNNRT_OK;
}

static cnnrt_status rt_state_copy(cnnrt_model *m, const char *fn, const char *name, void *buf, size_t bytes, int to_state) {
  rt_clear_error();
  cnnrt_status s = rt_need_train(m, fn);
  if (s != CNNRT_OK) return s;
  int i = rt_state_find(m->tr->t, name);
  if (i < 0 || !buf) return rt_fail(CNNRT_INVALID_ARGUMENT, "%s: no state tensor '%s' in %s (or buffer NULL)", fn, name ? name : "(null)", m->path);
  const cnnc_abi_state_tensor *x = &m->tr->t->state[i];
  if (bytes != (size_t)x->bytes)
    return rt_fail(CNNRT_SHAPE_MISMATCH, "%s: state tensor '%s' has %lld bytes, buffer %zu", fn, name, (long long)x->bytes, bytes);
  pthread_mutex_lock(&m->lock);
  char *p = (char *)m->tr->state + x->offset;
  if (to_state) memcpy(p, buf, bytes);
  else memcpy(buf, p, bytes);
  pthread_mutex_unlock(&m->lock);
  return CNNRT_OK;
}

CNNRT_API cnnrt_status cnnrt_get_state(cnnrt_model *m, const char *name, void *out, size_t bytes) {
  return rt_state_copy(m, "cnnrt_get_state", name, out, bytes, 0);
}
CNNRT_API cnnrt_status cnnrt_set_state(cnnrt_model *m, const char *name, const void *in, size_t bytes) {
  return rt_state_copy(m, "cnnrt_set_state", name, (void *)(uintptr_t)in, bytes, 1);
}
