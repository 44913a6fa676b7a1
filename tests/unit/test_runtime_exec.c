/* test_runtime_exec.c — libcnnrt execution on the fake models of tests/tools: outputs of 1 and
 * N device iterations equal the sequential computation, two micro-batches are really in
 * flight at once with 2 shards, thread counts / pinning / restarts, a 3-shard u8 model with a
 * skip tensor and two outputs, a user allocator, concurrent callers, open/close cycles. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/cnnrt.h"

#include "check.h"
#include "rt_case_check.h"

#define FAKE(v) CNNC_TEST_BIN "/tests/libfake_model" v ".so"

static cnnrt_model *open_with(const char *path, const cnnrt_options *o) {
  cnnrt_model *m = NULL;
  cnnrt_status s = cnnrt_open(path, o, &m);
  CHECK(s == CNNRT_OK && m, "open %s: %s: %s", path, cnnrt_status_name(s), cnnrt_last_error());
  return m;
}

/* The fake model's instrumentation (fake_stat / fake_reset in libfake_model.c), reached
 * through the handle the runtime already opened. */
static int fake_stat(const char *path, int what) {
  void *h = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
  int (*fn)(int) = h ? (int (*)(int))dlsym(h, "fake_stat") : NULL;
  int v = fn ? fn(what) : -1;
  if (h) dlclose(h);
  return v;
}

static void fake_reset(const char *path) {
  void *h = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
  void (*fn)(void) = h ? (void (*)(void))dlsym(h, "fake_reset") : NULL;
  if (fn) fn();
  if (h) dlclose(h);
}

/* fake_wait_overlap: a later shard waits (up to ms) for another one to be active at once, so
 * the overlap checks below do not depend on the other thread getting a core within 1 ms. */
static void fake_wait(const char *path, int ms) {
  void *h = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
  void (*fn)(int) = h ? (void (*)(int))dlsym(h, "fake_wait_overlap") : NULL;
  CHECK(fn != NULL, "fake_wait_overlap not found in %s", path);
  if (fn) fn(ms);
  if (h) dlclose(h);
}

static void fill(float *x, size_t n, unsigned seed) {
  for (size_t i = 0; i < n; i++) {
    seed = seed * 1103515245u + 12345u;
    x[i] = (float)((seed >> 8) % 2001) / 100.0f - 10.0f;
  }
}

/* logits[b,k] = 2 x[(16b+k+7) % 32] + 1 per micro-batch of 32 inputs / 20 outputs. */
static int check_fake2(const float *x, const float *y, int n) {
  int bad = 0;
  for (int i = 0; i < n; i++)
    for (int j = 0; j < 20; j++) {
      int b = j / 10, k = j % 10;
      float want = 2.0f * x[i * 32 + (16 * b + k + 7) % 32] + 1.0f;
      if (y[i * 20 + j] != want && bad++ < 3)
        fprintf(stderr, "  micro-batch %d logit %d: got %g want %g\n", i, j, y[i * 20 + j], want);
    }
  return bad == 0;
}

/* n device iterations in one call match the formula and n one-batch calls, bitwise. */
static void run_fake2(cnnrt_model *m, int n, int t0, int t1) {
  CHECK(cnnrt_set_threads(m, 0, t0) == CNNRT_OK && cnnrt_set_threads(m, 1, t1) == CNNRT_OK, "set threads");
  float *x = malloc((size_t)n * 128), *y = malloc((size_t)n * 80), *seq = malloc((size_t)n * 80);
  fill(x, (size_t)n * 32, (unsigned)(n * 31 + t0 * 7 + t1));
  memset(y, 0xff, (size_t)n * 80);
  fake_reset(FAKE(""));
  fake_wait(FAKE(""), n >= 4 ? 1000 : 0);
  cnnrt_status s = cnnrt_infer(m, x, (size_t)n * 128, y, (size_t)n * 80, n);
  fake_wait(FAKE(""), 0);
  CHECK(s == CNNRT_OK, "infer n=%d: %s", n, cnnrt_last_error());
  CHECK(check_fake2(x, y, n), "outputs of %d micro-batches with threads %d,%d", n, t0, t1);
  CHECK(fake_stat(FAKE(""), 1) == n && fake_stat(FAKE(""), 2) == n, "shard calls %d %d for %d micro-batches",
        fake_stat(FAKE(""), 1), fake_stat(FAKE(""), 2), n);
  CHECK(fake_stat(FAKE(""), 4) == t0 && fake_stat(FAKE(""), 5) == t1, "nthreads seen %d %d, set %d %d",
        fake_stat(FAKE(""), 4), fake_stat(FAKE(""), 5), t0, t1);
  CHECK(fake_stat(FAKE(""), 7) == 0, "misaligned scratch");
  if (n >= 4) CHECK(fake_stat(FAKE(""), 0) >= 2, "never two shards busy at once (%d)", fake_stat(FAKE(""), 0));
  for (int i = 0; i < n; i++)
    CHECK(cnnrt_infer(m, x + i * 32, 128, seq + i * 20, 80, 1) == CNNRT_OK, "sequential %d", i);
  CHECK(memcmp(seq, y, (size_t)n * 80) == 0, "pipelined != sequential for n=%d", n);
  free(x);
  free(y);
  free(seq);
}

static void test_fake2(void) {
  cnnrt_model *m = open_with(FAKE(""), NULL);
  if (!m) return;
  run_fake2(m, 1, 1, 1);
  run_fake2(m, 8, 1, 1);
  run_fake2(m, 8, 2, 1);
  run_fake2(m, 3, 2, 2);
  run_fake2(m, 16, 4, 3); /* more threads than cores */
  run_fake2(m, 2, 1, 2);
  /* profile counters: every micro-batch above ran twice (pipelined, then one by one) */
  cnnrt_shard_summary sh;
  CHECK(cnnrt_shard_info(m, 1, &sh) == CNNRT_OK, "shard_info: %s", cnnrt_last_error());
  CHECK(sh.micro_batches == 2 * (1 + 8 + 8 + 3 + 16 + 2), "shard 1 ran %llu micro-batches",
        (unsigned long long)sh.micro_batches);
  CHECK(sh.busy_seconds > 0.9e-3 * (double)sh.micro_batches, "busy %g s for %llu sleeps of 1 ms", sh.busy_seconds,
        (unsigned long long)sh.micro_batches);
  CHECK(sh.threads == 2 && sh.n_ops == 1 && sh.n_inputs == 1 && sh.n_outputs == 1 && !strcmp(sh.first_layer, "inc"),
        "shard 1 summary");
  CHECK(cnnrt_shard_info(m, 2, &sh) == CNNRT_INVALID_ARGUMENT && cnnrt_shard_info(m, 0, NULL) == CNNRT_INVALID_ARGUMENT,
        "shard_info bad arguments");
  cnnrt_close(m);
}

static void test_pinning(void) {
  cnnrt_options o;
  cnnrt_options_init(&o);
  o.pin = 1;
  o.threads_per_shard = 2;
  cnnrt_model *m = open_with(FAKE(""), &o);
  if (!m) return;
  CHECK(cnnrt_threads(m, 0) == 2 && cnnrt_threads(m, 1) == 2, "threads_per_shard option");
  run_fake2(m, 6, 2, 2);
  int cpu0 = 0;
  CHECK(cnnrt_set_cpus(m, -1, &cpu0, 1) == CNNRT_OK, "set_cpus: %s", cnnrt_last_error());
  run_fake2(m, 5, 2, 1);
  const char *js = cnnrt_describe_json(m);
  CHECK(js && strstr(js, "\"cpus\": [0]"), "describe json does not show the pinning");
  CHECK(cnnrt_set_cpus(m, -1, NULL, 0) == CNNRT_OK, "unpin");
  run_fake2(m, 4, 1, 1);
  cnnrt_close(m);
}

/* 3 shards, u8 input, tensor b skips shard 1, outputs out [2,12] and aux [2,1]. */
static void test_u8skip(int n, int threads) {
  cnnrt_options o;
  cnnrt_options_init(&o);
  o.threads_per_shard = threads;
  cnnrt_model *m = open_with(FAKE("_u8skip"), &o);
  if (!m) return;
  cnnrt_tensor_info t;
  CHECK(cnnrt_input_info(m, &t) == CNNRT_OK && t.dtype == CNNRT_U8 && t.bytes == 24, "u8 input info");
  CHECK(cnnrt_num_outputs(m) == 2 && cnnrt_output_bytes(m) == 104, "two outputs, 104 bytes");
  uint8_t *x = malloc((size_t)n * 24);
  float *y = malloc((size_t)n * 104);
  for (int i = 0; i < n * 24; i++) x[i] = (uint8_t)(i * 37 + 11);
  fake_reset(FAKE("_u8skip"));
  fake_wait(FAKE("_u8skip"), n >= 4 ? 1000 : 0);
  CHECK(cnnrt_infer(m, x, (size_t)n * 24, y, (size_t)n * 104, n) == CNNRT_OK, "u8 infer: %s", cnnrt_last_error());
  fake_wait(FAKE("_u8skip"), 0);
  int bad = 0;
  for (int i = 0; i < n; i++) {
    const uint8_t *xi = x + i * 24;
    const float *out = y + i * 26, *aux = out + 24;
    for (int j = 0; j < 24; j++) bad += out[j] != 3.0f * (xi[j] / 255.0f) + (float)xi[j];
    for (int s = 0; s < 2; s++) {
      float sum = 0;
      for (int j = 0; j < 12; j++) sum += xi[s * 12 + j] / 255.0f;
      bad += aux[s] != sum;
    }
  }
  CHECK(bad == 0, "u8skip: %d wrong values (n=%d, threads %d)", bad, n, threads);
  CHECK(fake_stat(FAKE("_u8skip"), 3) == n, "shard 2 ran %d times", fake_stat(FAKE("_u8skip"), 3));
  if (n >= 4) CHECK(fake_stat(FAKE("_u8skip"), 0) >= 2, "3 shards never overlapped");
  free(x);
  free(y);
  cnnrt_close(m);
}

static void test_allocator(void) {
  counting_alloc c = {PTHREAD_MUTEX_INITIALIZER};
  cnnrt_allocator a = {count_alloc, count_free, &c};
  cnnrt_options o;
  cnnrt_options_init(&o);
  o.allocator = &a;
  cnnrt_model *m = open_with(FAKE(""), &o);
  if (!m) return;
  run_fake2(m, 4, 2, 1);
  cnnrt_close(m);
  /* 3 frames x 1 boundary tensor + 2 scratch buffers, then all of it again after the restart. */
  CHECK(c.allocs >= 5, "allocator used %d times", c.allocs);
  CHECK(c.allocs == c.frees, "allocs %d != frees %d", c.allocs, c.frees);
  CHECK(c.misaligned == 0, "misaligned requests");
}

typedef struct caller {
  cnnrt_model *m;
  int ok;
  unsigned seed;
} caller;

static void *call_many(void *arg) {
  caller *c = arg;
  float x[6 * 32], y[6 * 20];
  c->ok = 1;
  for (int rep = 0; rep < 20; rep++) {
    fill(x, 6 * 32, c->seed + (unsigned)rep);
    c->ok &= cnnrt_infer(c->m, x, sizeof x, y, sizeof y, 6) == CNNRT_OK && check_fake2(x, y, 6);
  }
  return NULL;
}

static void test_concurrent_callers(void) {
  cnnrt_model *m = open_with(FAKE(""), NULL);
  if (!m) return;
  caller c[3];
  pthread_t t[3];
  for (int k = 0; k < 3; k++) {
    c[k] = (caller){m, 0, 1000u * (unsigned)k};
    pthread_create(&t[k], NULL, call_many, &c[k]);
  }
  for (int k = 0; k < 3; k++) pthread_join(t[k], NULL);
  CHECK(c[0].ok && c[1].ok && c[2].ok, "concurrent callers got wrong results");
  cnnrt_close(m);
}

static void test_open_close_cycles(void) {
  float x[2 * 32], y[2 * 20];
  fill(x, 64, 5);
  for (int k = 0; k < 25; k++) {
    cnnrt_model *m = open_with(FAKE(""), NULL);
    if (!m) return;
    if (k % 2) CHECK(cnnrt_infer(m, x, sizeof x, y, sizeof y, 2) == CNNRT_OK && check_fake2(x, y, 2), "cycle %d", k);
    if (k % 3 == 0) cnnrt_set_threads(m, -1, 2);
    cnnrt_close(m);
  }
}

int main(void) {
  test_fake2();
  test_pinning();
  test_u8skip(1, 1);
  test_u8skip(7, 1);
  test_u8skip(5, 2);
  test_allocator();
  test_concurrent_callers();
  test_open_close_cycles();
  printf("test_runtime_exec: %d checks, %d failed\n", g_checks, g_failures);
  return g_failures ? 1 : 0;
}
