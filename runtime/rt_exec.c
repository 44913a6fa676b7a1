/* rt_exec.c — the pipelined executor.  One thread group per shard (thread 0 leads); frames
 * (one set of boundary-tensor buffers per in-flight micro-batch) flow from the caller through
 * a bounded queue into shard 0, from each shard's leader to the next shard's queue, and from
 * the last shard back to the free list, so consecutive shards work on different micro-batches
 * at the same time.  Every thread of a group calls the shard entry with its tid; the group
 * barrier is both the generated code's op barrier and the end-of-micro-batch join. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rt_internal.h"

#define RT_QUEUE_DEPTH 2

typedef struct rt_frame {
  void **ptr; /* [n_tensors]: where each tensor of this micro-batch lives */
} rt_frame;

typedef struct rt_group rt_group;
typedef struct rt_thread_arg {
  rt_group *g;
  int tid;
} rt_thread_arg;

struct rt_group {
  rt_exec *x;
  const cnnc_abi_shard *sh;
  int shard, nthreads, n_started, queue_ok;
  pthread_t *tids;        /* [nthreads] */
  rt_thread_arg *args;    /* [nthreads] */
  rt_barrier barrier;
  _Atomic uint32_t job_gen; /* bumped by the leader to start the workers on g->io */
  _Atomic int stop;
  _Atomic int32_t rc;     /* first nonzero return of the shard entry */
  void **io;              /* [n_io] of the current micro-batch */
  void *scratch;
  rt_queue in;
  void *in_store[RT_QUEUE_DEPTH];
  rt_trace_ctx tctx;      /* the leader's op barrier while tracing (rt_trace.c) */
  rt_prof_ctx *pctx;      /* [nthreads] barrier contexts while profiling (rt_profile.c) */
};

struct rt_exec {
  cnnrt_model *m;
  int n_groups, n_frames, free_ok;
  rt_group *groups;
  rt_frame *frames;
  rt_queue free_q; /* frames not in flight; the last shard returns them here */
  void **free_store;
  rt_frame **drain; /* [n_frames], for waiting until all frames are back */
};

static const int rt_stop_mark;
#define RT_STOP ((void *)&rt_stop_mark)

int rt_usable_cpus(int *cpus, int max) {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) != 0) return 0;
  int n = 0;
  for (int c = 0; c < CPU_SETSIZE && n < max; c++)
    if (CPU_ISSET(c, &set)) cpus[n++] = c;
  return n;
}

/* ---- threads ---------------------------------------------------------------------------- */
static uint64_t rt_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void rt_run_share(rt_group *g, int tid) {
  cnnrt_model *m = g->x->m;
  if (m->prof_on) { /* profiled entry: a timestamping barrier after every op (rt_profile.c) */
    cnnc_abi_shard_fn run = rt_prof_start(m->prof, g->shard, &g->pctx[tid], &g->barrier, tid);
    int32_t rc = run(g->io, g->scratch, tid, g->nthreads, rt_prof_barrier_cb, &g->pctx[tid]);
    if (rc != 0) {
      int32_t zero = 0;
      atomic_compare_exchange_strong(&g->rc, &zero, rc);
    }
    rt_barrier_wait(&g->barrier);
    return;
  }
  /* Tracing: the leader's barriers also timestamp ops (with one thread there are none). */
  rt_trace *tr = tid == 0 && g->nthreads > 1 ? g->x->m->trace : NULL;
  if (tr) g->tctx = (rt_trace_ctx){&g->barrier, tr, g->shard};
  int32_t rc = g->sh->run(g->io, g->scratch, tid, g->nthreads, tr ? rt_trace_barrier_cb : rt_barrier_cb,
                          tr ? (void *)&g->tctx : (void *)&g->barrier);
  if (rc != 0) {
    int32_t zero = 0;
    atomic_compare_exchange_strong(&g->rc, &zero, rc);
  }
  if (tr) rt_trace_barrier_cb(&g->tctx);
  else rt_barrier_wait(&g->barrier);
}

static void rt_leader_loop(rt_group *g) {
  rt_exec *x = g->x;
  rt_queue *next = g->shard + 1 < x->n_groups ? &x->groups[g->shard + 1].in : &x->free_q;
  for (;;) {
    rt_frame *f = rt_queue_pop(&g->in);
    if ((void *)f == RT_STOP) return;
    for (int k = 0; k < g->sh->n_io; k++) g->io[k] = f->ptr[g->sh->io[k]];
    if (g->nthreads > 1) {
      atomic_fetch_add_explicit(&g->job_gen, 1, memory_order_release);
      rt_wake_all(&g->job_gen);
    }
    uint64_t t0 = rt_now_ns();
    rt_trace *tr = x->m->trace; /* set only between cnnrt_infer calls */
    if (tr) rt_trace_mb_begin(tr, g->shard, t0);
    rt_run_share(g, 0);
    uint64_t t1 = rt_now_ns();
    if (tr) rt_trace_mb_end(tr, g->shard, t0, t1);
    atomic_fetch_add_explicit(&x->m->busy_ns[g->shard], t1 - t0, memory_order_relaxed);
    atomic_fetch_add_explicit(&x->m->runs[g->shard], 1, memory_order_relaxed);
    rt_queue_push(next, f);
  }
}

static void rt_worker_loop(rt_group *g, int tid) {
  uint32_t seen = 0;
  for (;;) {
    rt_wait_change(&g->job_gen, seen, g->barrier.spin_ns);
    seen = atomic_load_explicit(&g->job_gen, memory_order_acquire);
    if (atomic_load_explicit(&g->stop, memory_order_acquire)) return;
    rt_run_share(g, tid);
  }
}

static void *rt_thread_main(void *arg) {
  rt_thread_arg *a = arg;
  if (a->tid == 0) rt_leader_loop(a->g);
  else rt_worker_loop(a->g, a->tid);
  return NULL;
}

/* cpus for shard s: the explicit list, or consecutive usable cores with pinning on. */
static int rt_group_cpus(cnnrt_model *m, int s, int *auto_next, int *out, int max) {
  if (m->cpus[s]) {
    int n = m->n_cpus[s] < max ? m->n_cpus[s] : max;
    memcpy(out, m->cpus[s], (size_t)n * sizeof *out);
    return n;
  }
  if (!m->opts.pin) return 0;
  int usable[CPU_SETSIZE];
  int nu = rt_usable_cpus(usable, CPU_SETSIZE);
  if (nu == 0) return 0;
  int n = m->threads[s] < max ? m->threads[s] : max;
  for (int t = 0; t < n; t++) out[t] = usable[(*auto_next + t) % nu];
  *auto_next += n;
  return n;
}

static cnnrt_status rt_group_start(cnnrt_model *m, rt_group *g, int *auto_next) {
  int cpus[CPU_SETSIZE];
  int nc = rt_group_cpus(m, g->shard, auto_next, cpus, CPU_SETSIZE);
  for (int t = 0; t < g->nthreads; t++) {
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, RT_THREAD_STACK);
    if (nc > 0) {
      cpu_set_t set;
      CPU_ZERO(&set);
      CPU_SET(cpus[t % nc], &set);
      pthread_attr_setaffinity_np(&attr, sizeof set, &set);
    }
    g->args[t] = (rt_thread_arg){g, t};
    int e = pthread_create(&g->tids[t], &attr, rt_thread_main, &g->args[t]);
    pthread_attr_destroy(&attr);
    if (e != 0)
      return rt_fail(CNNRT_INTERNAL, "%s: cannot start thread %d of shard %d%s: %s", m->path, t, g->shard,
                     nc > 0 ? " (pinned)" : "", strerror(e));
    g->n_started++;
  }
  return CNNRT_OK;
}

/* ---- setup ------------------------------------------------------------------------------ */
static int rt_is_output(const cnnc_abi_model *d, int t) {
  for (int k = 0; k < d->n_outputs; k++)
    if (d->outputs[k] == t) return 1;
  return 0;
}

/* Allocates the boundary tensors (written by a shard, not a model output) of one frame. */
static cnnrt_status rt_frame_init(cnnrt_model *m, rt_frame *f) {
  const cnnc_abi_model *d = m->d;
  f->ptr = calloc((size_t)d->n_tensors, sizeof *f->ptr);
  if (!f->ptr) return rt_fail(CNNRT_OUT_OF_MEMORY, "%s: out of memory", m->path);
  for (int t = 0; t < d->n_tensors; t++) {
    if (m->producer[t] < 0 || rt_is_output(d, t)) continue;
    f->ptr[t] = rt_alloc(m, (size_t)d->tensors[t].bytes);
    if (!f->ptr[t])
      return rt_fail(CNNRT_OUT_OF_MEMORY, "%s: out of memory for tensor '%s' (%lld bytes)", m->path,
                     d->tensors[t].name, (long long)d->tensors[t].bytes);
  }
  return CNNRT_OK;
}

static cnnrt_status rt_group_init(cnnrt_model *m, rt_exec *x, int s) {
  rt_group *g = &x->groups[s];
  g->x = x;
  g->shard = s;
  g->sh = &m->d->shards[s];
  g->nthreads = m->threads[s];
  rt_barrier_init(&g->barrier, (uint32_t)g->nthreads, rt_spin_ns(m));
  atomic_init(&g->job_gen, 0);
  atomic_init(&g->stop, 0);
  atomic_init(&g->rc, 0);
  g->tids = calloc((size_t)g->nthreads, sizeof *g->tids);
  g->args = calloc((size_t)g->nthreads, sizeof *g->args);
  g->io = calloc((size_t)g->sh->n_io, sizeof *g->io);
  g->pctx = calloc((size_t)g->nthreads, sizeof *g->pctx);
  size_t sb = (size_t)g->sh->scratch_bytes;
  g->scratch = rt_alloc(m, sb > RT_ALIGN ? sb : RT_ALIGN);
  if (!g->tids || !g->args || !g->io || !g->pctx || !g->scratch)
    return rt_fail(CNNRT_OUT_OF_MEMORY, "%s: out of memory for shard %d (scratch %zu bytes)", m->path, s, sb);
  if (rt_queue_init(&g->in, g->in_store, RT_QUEUE_DEPTH) != 0)
    return rt_fail(CNNRT_INTERNAL, "%s: cannot create the queue of shard %d", m->path, s);
  g->queue_ok = 1;
  return CNNRT_OK;
}

static cnnrt_status rt_exec_alloc(cnnrt_model *m, rt_exec *x) {
  x->n_groups = m->d->n_shards;
  x->n_frames = m->d->n_shards + 1; /* every shard busy plus one micro-batch waiting */
  x->groups = calloc((size_t)x->n_groups, sizeof *x->groups);
  x->frames = calloc((size_t)x->n_frames, sizeof *x->frames);
  x->free_store = calloc((size_t)x->n_frames, sizeof *x->free_store);
  x->drain = calloc((size_t)x->n_frames, sizeof *x->drain);
  if (!x->groups || !x->frames || !x->free_store || !x->drain) return rt_fail(CNNRT_OUT_OF_MEMORY, "%s: out of memory", m->path);
  if (rt_queue_init(&x->free_q, x->free_store, x->n_frames) != 0)
    return rt_fail(CNNRT_INTERNAL, "%s: cannot create the frame queue", m->path);
  x->free_ok = 1;
  for (int f = 0; f < x->n_frames; f++) {
    if (rt_frame_init(m, &x->frames[f]) != CNNRT_OK) return CNNRT_OUT_OF_MEMORY;
    rt_queue_push(&x->free_q, &x->frames[f]);
  }
  for (int s = 0; s < x->n_groups; s++) {
    cnnrt_status st = rt_group_init(m, x, s);
    if (st != CNNRT_OK) return st;
  }
  return CNNRT_OK;
}

cnnrt_status rt_exec_start(cnnrt_model *m) {
  rt_exec *x = calloc(1, sizeof *x);
  if (!x) return rt_fail(CNNRT_OUT_OF_MEMORY, "%s: out of memory", m->path);
  x->m = m;
  m->exec = x;
  cnnrt_status s = rt_exec_alloc(m, x);
  int auto_next = 0;
  for (int g = 0; g < x->n_groups && s == CNNRT_OK; g++) s = rt_group_start(m, &x->groups[g], &auto_next);
  if (s != CNNRT_OK) rt_exec_stop(m);
  return s;
}

/* ---- run and stop ----------------------------------------------------------------------- */
cnnrt_status rt_exec_run(cnnrt_model *m, const void *input, void *output, int n) {
  rt_exec *x = m->exec;
  const cnnc_abi_model *d = m->d;
  size_t in_bytes = (size_t)d->tensors[d->input].bytes;
  for (int g = 0; g < x->n_groups; g++) atomic_store(&x->groups[g].rc, 0);
  for (int i = 0; i < n; i++) {
    rt_frame *f = rt_queue_pop(&x->free_q);
    f->ptr[d->input] = (char *)(uintptr_t)input + (size_t)i * in_bytes; /* shards only read inputs */
    char *out = (char *)output + (size_t)i * m->out_bytes;
    for (int k = 0; k < d->n_outputs; k++) {
      f->ptr[d->outputs[k]] = out;
      out += d->tensors[d->outputs[k]].bytes;
    }
    rt_queue_push(&x->groups[0].in, f);
  }
  /* Wait until every frame is back: then every micro-batch has left the last shard. */
  for (int f = 0; f < x->n_frames; f++) x->drain[f] = rt_queue_pop(&x->free_q);
  for (int f = 0; f < x->n_frames; f++) rt_queue_push(&x->free_q, x->drain[f]);
  for (int g = 0; g < x->n_groups; g++) {
    int32_t rc = atomic_load(&x->groups[g].rc);
    const cnnc_abi_shard *sh = x->groups[g].sh;
    if (rc != 0)
      return rt_fail(CNNRT_INTERNAL, "%s: shard %d (%s .. %s) returned %d", m->path, g,
                     sh->first_layer ? sh->first_layer : "?", sh->last_layer ? sh->last_layer : "?", rc);
  }
  return CNNRT_OK;
}

static void rt_group_free(cnnrt_model *m, rt_group *g) {
  if (g->queue_ok) rt_queue_destroy(&g->in);
  rt_free(m, g->scratch);
  free(g->io);
  free(g->pctx);
  free(g->args);
  free(g->tids);
}

static void rt_exec_join(rt_exec *x) {
  for (int s = 0; s < x->n_groups; s++)
    if (x->groups[s].n_started > 0) rt_queue_push(&x->groups[s].in, RT_STOP);
  for (int s = 0; s < x->n_groups; s++) {
    rt_group *g = &x->groups[s];
    atomic_store_explicit(&g->stop, 1, memory_order_release);
    atomic_fetch_add_explicit(&g->job_gen, 1, memory_order_release);
    rt_wake_all(&g->job_gen);
  }
  for (int s = 0; s < x->n_groups; s++)
    for (int t = 0; t < x->groups[s].n_started; t++) pthread_join(x->groups[s].tids[t], NULL);
}

void rt_exec_stop(cnnrt_model *m) {
  rt_exec *x = m->exec;
  if (!x) return;
  if (x->groups) rt_exec_join(x);
  for (int s = 0; x->groups && s < x->n_groups; s++) rt_group_free(m, &x->groups[s]);
  for (int f = 0; x->frames && f < x->n_frames; f++) {
    for (int t = 0; x->frames[f].ptr && t < m->d->n_tensors; t++)
      if (m->producer[t] >= 0 && !rt_is_output(m->d, t)) rt_free(m, x->frames[f].ptr[t]);
    free(x->frames[f].ptr);
  }
  if (x->free_ok) rt_queue_destroy(&x->free_q);
  free(x->free_store);
  free(x->drain);
  free(x->frames);
  free(x->groups);
  free(x);
  m->exec = NULL;
}
