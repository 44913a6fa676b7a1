/* rt_sync.c — synchronisation for the shard thread groups: a time-bounded spin-then-futex
 * wait on a 32-bit word, a sense-free generation barrier built on it (the barrier generated
 * code calls between ops; it wakes only sleeping waiters), and a bounded blocking queue
 * carrying micro-batches between shards. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <linux/futex.h>
#include <sched.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "rt_internal.h"

static void rt_cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

static void rt_futex_wait(_Atomic uint32_t *word, uint32_t seen) {
  syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT_PRIVATE, seen, NULL, NULL, 0);
}

void rt_wake_all(_Atomic uint32_t *word) {
  syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE_PRIVATE, INT32_MAX, NULL, NULL, 0);
}

static uint64_t rt_mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Spins until *word != seen or budget ns have passed; returns 1 if it changed.  The clock
 * is read every 32 pauses (~1 us on Zen 3: a pause is ~60 cycles); every RT_YIELD_NS the
 * spinner yields, so on a loaded machine a runnable thread (perhaps the one we wait for, put
 * on our core) gets the CPU instead of waiting for our time slice to end: bench/barrier.c on
 * a loaded 2-vCPU VM measured a 67 us release latency (p10) when yielding every 64 us. */
#define RT_YIELD_NS 8000
static int rt_spin_until_change(_Atomic uint32_t *word, uint32_t seen, uint64_t budget) {
  uint64_t t0 = 0, next_yield = RT_YIELD_NS;
  if (!budget) return atomic_load_explicit(word, memory_order_acquire) != seen;
  for (uint32_t i = 0;; i++) {
    if (atomic_load_explicit(word, memory_order_acquire) != seen) return 1;
    rt_cpu_relax();
    if ((i & 31) != 31) continue;
    uint64_t t = rt_mono_ns();
    if (!t0) t0 = t;
    if (t - t0 >= budget) return 0;
    if (t - t0 >= next_yield) {
      sched_yield();
      next_yield += RT_YIELD_NS;
    }
  }
}

void rt_wait_change(_Atomic uint32_t *word, uint32_t seen, uint64_t spin_ns) {
  if (rt_spin_until_change(word, seen, spin_ns)) return;
  while (atomic_load_explicit(word, memory_order_acquire) == seen) rt_futex_wait(word, seen);
}

void rt_barrier_init(rt_barrier *b, uint32_t n, uint64_t spin_ns) {
  memset(b, 0, sizeof *b);
  atomic_init(&b->arrived, 0);
  atomic_init(&b->generation, 0);
  atomic_init(&b->sleepers, 0);
  b->n = n;
  b->spin_ns = spin_ns;
}

/* The last thread to arrive resets the count and opens the next generation; the others
 * spin, then sleep, until the generation changes.  Release/acquire order every write before
 * the barrier before every read after it.  The generation bump and the sleepers load (last
 * arrival) and the sleepers increment and the generation load (futex_wait compares the word
 * in the kernel) are sequentially consistent: either the sleeper sees the new generation or
 * the last arrival sees the sleeper and wakes it. */
void rt_barrier_wait(rt_barrier *b) {
  if (b->n <= 1) return;
  uint32_t gen = atomic_load_explicit(&b->generation, memory_order_acquire);
  if (atomic_fetch_add_explicit(&b->arrived, 1, memory_order_acq_rel) + 1 == b->n) {
    atomic_store_explicit(&b->arrived, 0, memory_order_relaxed);
    atomic_fetch_add_explicit(&b->generation, 1, memory_order_seq_cst);
    if (atomic_load_explicit(&b->sleepers, memory_order_seq_cst)) rt_wake_all(&b->generation);
    return;
  }
  if (rt_spin_until_change(&b->generation, gen, b->spin_ns)) return;
  atomic_fetch_add_explicit(&b->sleepers, 1, memory_order_seq_cst);
  while (atomic_load_explicit(&b->generation, memory_order_seq_cst) == gen) rt_futex_wait(&b->generation, gen);
  atomic_fetch_sub_explicit(&b->sleepers, 1, memory_order_relaxed);
}

void rt_barrier_cb(void *ctx) { rt_barrier_wait((rt_barrier *)ctx); }

int rt_queue_init(rt_queue *q, void **storage, int cap) {
  q->items = storage;
  q->cap = cap;
  q->head = q->count = 0;
  if (pthread_mutex_init(&q->mu, NULL) != 0) return -1;
  if (pthread_cond_init(&q->not_empty, NULL) != 0) {
    pthread_mutex_destroy(&q->mu);
    return -1;
  }
  if (pthread_cond_init(&q->not_full, NULL) != 0) {
    pthread_cond_destroy(&q->not_empty);
    pthread_mutex_destroy(&q->mu);
    return -1;
  }
  return 0;
}

void rt_queue_destroy(rt_queue *q) {
  pthread_cond_destroy(&q->not_full);
  pthread_cond_destroy(&q->not_empty);
  pthread_mutex_destroy(&q->mu);
}

void rt_queue_push(rt_queue *q, void *item) {
  pthread_mutex_lock(&q->mu);
  while (q->count == q->cap) pthread_cond_wait(&q->not_full, &q->mu);
  q->items[(q->head + q->count) % q->cap] = item;
  q->count++;
  pthread_cond_signal(&q->not_empty);
  pthread_mutex_unlock(&q->mu);
}

void *rt_queue_pop(rt_queue *q) {
  pthread_mutex_lock(&q->mu);
  while (q->count == 0) pthread_cond_wait(&q->not_empty, &q->mu);
  void *item = q->items[q->head];
  q->head = (q->head + 1) % q->cap;
  q->count--;
  pthread_cond_signal(&q->not_full);
  pthread_mutex_unlock(&q->mu);
  return item;
}
