/* rt_profile.c — per-op profile of inference (cnnrt_profile_begin / cnnrt_op_profile_at).
 * While a profile runs, every thread of a shard calls the shard's profiled entry (the
 * profiling extension of cnnc_abi.h: a barrier call after every op) with rt_prof_barrier_cb:
 * on arrival it adds the thread's time inside the op (wall and thread CPU) to the op's
 * counters, then waits; thread 0 adds the op's wall time (its start to the release) once the
 * barrier releases.  Counters are atomics shared by the threads of a shard: a few per op and
 * micro-batch, nothing per element. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rt_internal.h"

struct rt_op_acc {
  _Atomic uint64_t busy_ns, cpu_ns; /* summed over threads and calls */
  _Atomic uint64_t call_max;        /* slowest thread of the running call so far */
  uint64_t wall_ns, max_busy_ns, calls; /* written by thread 0 only, after the release */
};

struct rt_profile {
  const cnnc_abi_profile *p; /* inside the .so */
  const cnnc_abi_model *d;
  int n_shards;
  rt_op_acc **ops; /* [n_shards][n_ops] */
};

static uint64_t rt_clock_ns(clockid_t id) {
  struct timespec ts;
  clock_gettime(id, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void rt_profile_free(rt_profile *p) {
  if (!p) return;
  for (int s = 0; p->ops && s < p->n_shards; s++) free(p->ops[s]);
  free(p->ops);
  free(p);
}

cnnc_abi_shard_fn rt_prof_start(rt_profile *p, int shard, rt_prof_ctx *c, rt_barrier *b, int tid) {
  c->b = b;
  c->ops = p->ops[shard];
  c->tid = tid, c->op = 0;
  c->n_ops = p->d->shards[shard].n_ops;
  c->t0 = rt_clock_ns(CLOCK_MONOTONIC);
  c->c0 = rt_clock_ns(CLOCK_THREAD_CPUTIME_ID);
  return p->p->run[shard];
}

void rt_prof_barrier_cb(void *ctx) {
  rt_prof_ctx *c = ctx;
  if (c->op >= c->n_ops) { /* more barriers than ops: not a cnnc entry; time nothing */
    rt_barrier_wait(c->b);
    return;
  }
  uint64_t t = rt_clock_ns(CLOCK_MONOTONIC), cpu = rt_clock_ns(CLOCK_THREAD_CPUTIME_ID);
  rt_op_acc *a = &c->ops[c->op++];
  uint64_t busy = t - c->t0;
  atomic_fetch_add_explicit(&a->busy_ns, busy, memory_order_relaxed);
  atomic_fetch_add_explicit(&a->cpu_ns, cpu - c->c0, memory_order_relaxed);
  uint64_t cur = atomic_load_explicit(&a->call_max, memory_order_relaxed);
  while (busy > cur && !atomic_compare_exchange_weak_explicit(&a->call_max, &cur, busy, memory_order_relaxed,
                                                              memory_order_relaxed)) {
  }
  rt_barrier_wait(c->b); /* every thread has added its share of this op */
  uint64_t t1 = rt_clock_ns(CLOCK_MONOTONIC);
  if (c->tid == 0) { /* the others are past this op: they only touch later ops' counters */
    a->wall_ns += t1 - c->t0;
    a->max_busy_ns += atomic_exchange_explicit(&a->call_max, 0, memory_order_relaxed);
    a->calls++;
  }
  c->t0 = t1;
  c->c0 = rt_clock_ns(CLOCK_THREAD_CPUTIME_ID);
}

/* The profiling descriptor of m's .so, checked. */
static cnnrt_status rt_profile_lookup(cnnrt_model *m, const cnnc_abi_profile **out) {
  const cnnc_abi_model *d = m->d;
  if (d->mode != 0) return rt_fail(CNNRT_UNSUPPORTED, "%s: a training model; profiles time inference", m->path);
  const cnnc_abi_profile *p = dlsym(m->dl, CNNC_ABI_PROFILE_SYMBOL);
  if (!p)
    return rt_fail(CNNRT_UNSUPPORTED, "%s: no profiled entries (symbol %s); recompile the model with this cnnc", m->path,
                   CNNC_ABI_PROFILE_SYMBOL);
  if (p->magic != CNNC_ABI_PROFILE_MAGIC || p->version != CNNC_ABI_PROFILE_VERSION)
    return rt_fail(CNNRT_ABI_MISMATCH, "%s: %s has magic 0x%08x version %u, this runtime reads version %u", m->path,
                   CNNC_ABI_PROFILE_SYMBOL, p->magic, p->version, CNNC_ABI_PROFILE_VERSION);
  if (p->n_shards != d->n_shards || !p->run)
    return rt_fail(CNNRT_BAD_MODEL, "%s: %s lists %d shards, the model has %d", m->path, CNNC_ABI_PROFILE_SYMBOL,
                   p->n_shards, d->n_shards);
  Dl_info self, fi;
  if (!dladdr(d, &self)) self.dli_fbase = NULL;
  for (int s = 0; s < d->n_shards; s++)
    if (!p->run[s] || !dladdr((void *)(uintptr_t)p->run[s], &fi) || fi.dli_fbase != self.dli_fbase)
      return rt_fail(CNNRT_BAD_MODEL, "%s: %s: profiled entry of shard %d is not in the model", m->path,
                     CNNC_ABI_PROFILE_SYMBOL, s);
  *out = p;
  return CNNRT_OK;
}

CNNRT_API cnnrt_status cnnrt_profile_begin(cnnrt_model *m) {
  rt_clear_error();
  if (!m) return rt_fail(CNNRT_INVALID_ARGUMENT, "cnnrt_profile_begin: model is NULL");
  const cnnc_abi_profile *ap = NULL;
  cnnrt_status st = rt_profile_lookup(m, &ap);
  if (st != CNNRT_OK) return st;
  rt_profile *p = calloc(1, sizeof *p);
  int ok = p != NULL;
  if (ok) {
    p->p = ap, p->d = m->d, p->n_shards = m->d->n_shards;
    ok = (p->ops = calloc((size_t)p->n_shards, sizeof *p->ops)) != NULL;
  }
  for (int s = 0; ok && s < m->d->n_shards; s++) {
    int n = m->d->shards[s].n_ops;
    ok = (p->ops[s] = calloc((size_t)(n > 0 ? n : 1), sizeof **p->ops)) != NULL;
  }
  if (!ok) {
    rt_profile_free(p);
    return rt_fail(CNNRT_OUT_OF_MEMORY, "%s: out of memory for a profile", m->path);
  }
  pthread_mutex_lock(&m->lock);
  rt_profile_free(m->prof);
  m->prof = p;
  m->prof_on = 1;
  pthread_mutex_unlock(&m->lock);
  return CNNRT_OK;
}

CNNRT_API cnnrt_status cnnrt_profile_end(cnnrt_model *m) {
  rt_clear_error();
  if (!m) return rt_fail(CNNRT_INVALID_ARGUMENT, "cnnrt_profile_end: model is NULL");
  pthread_mutex_lock(&m->lock);
  int had = m->prof != NULL;
  m->prof_on = 0;
  pthread_mutex_unlock(&m->lock);
  return had ? CNNRT_OK : rt_fail(CNNRT_INVALID_ARGUMENT, "cnnrt_profile_end: no profile was begun");
}

CNNRT_API cnnrt_status cnnrt_op_profile_at(const cnnrt_model *m, int shard, int op, cnnrt_op_profile *out) {
  rt_clear_error();
  if (!m) return rt_fail(CNNRT_INVALID_ARGUMENT, "cnnrt_op_profile_at: model is NULL");
  if (!out) return rt_fail(CNNRT_INVALID_ARGUMENT, "cnnrt_op_profile_at: out is NULL");
  if (!m->prof) return rt_fail(CNNRT_INVALID_ARGUMENT, "cnnrt_op_profile_at: no profile was begun (cnnrt_profile_begin)");
  if (shard < 0 || shard >= m->d->n_shards)
    return rt_fail(CNNRT_INVALID_ARGUMENT, "cnnrt_op_profile_at: shard %d, the model has %d", shard, m->d->n_shards);
  const cnnc_abi_shard *sh = &m->d->shards[shard];
  if (op < 0 || op >= sh->n_ops)
    return rt_fail(CNNRT_INVALID_ARGUMENT, "cnnrt_op_profile_at: op %d, shard %d has %d", op, shard, sh->n_ops);
  const rt_op_acc *a = &m->prof->ops[shard][op];
  memset(out, 0, sizeof *out);
  out->name = sh->op_names ? sh->op_names[op] : "";
  out->kernel = sh->kernel_names ? sh->kernel_names[op] : "";
  out->flops = sh->op_flops ? sh->op_flops[op] : 0.0;
  out->calls = a->calls;
  out->seconds = (double)a->wall_ns * 1e-9;
  out->max_busy_seconds = (double)a->max_busy_ns * 1e-9;
  out->busy_seconds = (double)atomic_load(&a->busy_ns) * 1e-9;
  out->cpu_seconds = (double)atomic_load(&a->cpu_ns) * 1e-9;
  return CNNRT_OK;
}
