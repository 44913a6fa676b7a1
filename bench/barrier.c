/* barrier.c — the runtime's op barrier (runtime/rt_sync.c) measured on its own, 2 threads:
 *   round trip   back-to-back barriers, no work (the floor of one op boundary);
 *   late arrival thread 1 works D us per round and arrives late, thread 0 waits: the release
 *                latency (thread 1's arrival to thread 0's return) and, after the return,
 *                thread 0's CPU time for a pass over a 256 KB buffer it had in L2 before the
 *                wait (what a sleep costs the next kernel: an idle vCPU's core may run someone
 *                else meanwhile);
 * with the given spin budget (cnnrt_options.spin_us, cnnrun --spin-us; the runtime default
 * CNNRT_SPIN_US_DEFAULT without -s).
 *   gcc -O2 -I runtime bench/barrier.c runtime/rt_sync.c -o barrier -lpthread
 *   ./barrier [-s SPIN_US] [-d DELAY_US] [-r ROUNDS] [--pin]
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rt_internal.h"

#define BUF_FLOATS (256 * 1024 / 4)

static rt_barrier bar;
static int rounds = 400, delay_us = 300, pin, spin_us = CNNRT_SPIN_US_DEFAULT;
static double *release_lat, *pass_cpu;
static _Atomic uint64_t arrive_ns;
static float buf0[BUF_FLOATS];
static volatile float sink;

static uint64_t mono(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}
static uint64_t cpu(void) {
  struct timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}
static void busy(uint64_t ns) {
  uint64_t t0 = mono();
  while (mono() - t0 < ns) {
  }
}
static float pass(void) {
  float s = 0;
  for (int i = 0; i < BUF_FLOATS; i += 16) s += buf0[i];
  return s;
}
static void pin_to(int c) {
  cpu_set_t s;
  CPU_ZERO(&s);
  CPU_SET(c, &s);
  pthread_setaffinity_np(pthread_self(), sizeof s, &s);
}

static void *thread1(void *arg) {
  (void)arg;
  if (pin) pin_to(1);
  for (int i = 0; i < 1000; i++) rt_barrier_wait(&bar); /* round trips */
  for (int r = 0; r < rounds; r++) {
    busy((uint64_t)delay_us * 1000u);
    atomic_store(&arrive_ns, mono());
    rt_barrier_wait(&bar);
    rt_barrier_wait(&bar); /* thread 0 has measured */
  }
  return NULL;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}
static void report(const char *what, double *v, int n, double scale, const char *unit) {
  qsort(v, (size_t)n, sizeof *v, cmp);
  printf("%-34s p10 %8.2f  p50 %8.2f  p90 %8.2f %s\n", what, v[n / 10] * scale, v[n / 2] * scale, v[n * 9 / 10] * scale, unit);
}

int main(int argc, char **argv) {
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "-s") && i + 1 < argc) spin_us = atoi(argv[++i]);
    else if (!strcmp(argv[i], "-d") && i + 1 < argc) delay_us = atoi(argv[++i]);
    else if (!strcmp(argv[i], "-r") && i + 1 < argc) rounds = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--pin")) pin = 1;
    else {
      fprintf(stderr, "usage: %s [-s SPIN_US] [-d DELAY_US] [-r ROUNDS] [--pin]\n", argv[0]);
      return 2;
    }
  }
  if (spin_us < 0 || spin_us > CNNRT_SPIN_US_MAX) {
    fprintf(stderr, "%s: -s %d is not in 0..%d\n", argv[0], spin_us, CNNRT_SPIN_US_MAX);
    return 2;
  }
  if (pin) pin_to(0);
  release_lat = calloc((size_t)rounds, sizeof *release_lat);
  pass_cpu = calloc((size_t)rounds, sizeof *pass_cpu);
  for (int i = 0; i < BUF_FLOATS; i++) buf0[i] = (float)i;
  rt_barrier_init(&bar, 2, (uint64_t)spin_us * 1000u);
  pthread_t t;
  pthread_create(&t, NULL, thread1, NULL);
  uint64_t t0 = mono();
  for (int i = 0; i < 1000; i++) rt_barrier_wait(&bar);
  double rt = (double)(mono() - t0) / 1000.0;
  for (int r = 0; r < rounds; r++) {
    sink = pass(); /* buf0 in L2 */
    rt_barrier_wait(&bar);
    uint64_t rel = mono(), c0 = cpu();
    sink = pass();
    pass_cpu[r] = (double)(cpu() - c0);
    release_lat[r] = (double)(rel - atomic_load(&arrive_ns));
    rt_barrier_wait(&bar);
  }
  pthread_join(t, NULL);
  printf("spin budget %llu us, delay %d us, %d rounds%s\n", (unsigned long long)(bar.spin_ns / 1000), delay_us,
         rounds, pin ? ", pinned" : "");
  printf("%-34s %8.2f us\n", "round trip (no work), mean", rt / 1000.0);
  report("release latency after late arrival", release_lat, rounds, 1e-3, "us");
  report("256 KB pass after the wait, CPU", pass_cpu, rounds, 1e-3, "us");
  return 0;
}
