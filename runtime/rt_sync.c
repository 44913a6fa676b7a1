/* rt_sync.c — synchronisation for the shard thread groups: a spin-then-futex wait on a
 * 32-bit word, a sense-free generation barrier built on it (the barrier generated code
 * calls between ops), and a bounded blocking queue carrying micro-batches between shards. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "rt_internal.h"

#define RT_SPINS 4000

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

void rt_wait_change(_Atomic uint32_t *word, uint32_t seen) {
  for (int i = 0; i < RT_SPINS; i++) {
    if (atomic_load_explicit(word, memory_order_acquire) != seen) return;
    rt_cpu_relax();
  }
  while (atomic_load_explicit(word, memory_order_acquire) == seen) rt_futex_wait(word, seen);
}

void rt_barrier_init(rt_barrier *b, uint32_t n) {
  atomic_init(&b->arrived, 0);
  atomic_init(&b->generation, 0);
  b->n = n;
}

/* The last thread to arrive resets the count and opens the next generation; the others
 * wait for the generation to change.  Release/acquire order every write before the barrier
 * before every read after it. */
void rt_barrier_wait(rt_barrier *b) {
  if (b->n <= 1) return;
  uint32_t gen = atomic_load_explicit(&b->generation, memory_order_acquire);
  if (atomic_fetch_add_explicit(&b->arrived, 1, memory_order_acq_rel) + 1 == b->n) {
    atomic_store_explicit(&b->arrived, 0, memory_order_relaxed);
    atomic_fetch_add_explicit(&b->generation, 1, memory_order_release);
    rt_wake_all(&b->generation);
    return;
  }
  rt_wait_change(&b->generation, gen);
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
