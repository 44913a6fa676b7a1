/* test_runtime_hugepages.c — libcnnrt's big buffers (runtime/rt_mem.c): with the default
 * allocator, buffers of 2 MB or more are 2 MB-aligned anonymous mappings, advised
 * MADV_HUGEPAGE for inference (training: only with cnnrt_options.hugepages CNNRT_HUGEPAGES_ALL);
 * CNNRT_HUGEPAGES_OFF keeps them on aligned_alloc; a user allocator gets every buffer as
 * before.  A small CNN whose activations and state exceed 2 MB is compiled with the built
 * cnnc (inference on 2 shards, so a frame tensor is big too, and training with momentum) and
 * run each way: inference outputs and, after two training steps, the losses and every state
 * tensor are bitwise equal.  /proc/self/smaps shows advised (VmFlags "hg") 2 MB-aligned
 * mappings only where they are asked for (checked when the kernel has THP); the user
 * allocator sees a request of 2 MB or more, 64-byte alignment, one free per alloc.  Two
 * models open on one .so at once give the same outputs. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <inttypes.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime/cnnrt.h"

#include "check.h"
#include "rt_case_check.h"

enum { BATCH = 2, NB = 3 };

static const char *yml =
    "name: hugepages\n"
    "input: {shape: [16, 96, 96], dtype: f32, classes: 10}\n"
    "layers:\n"
    "  - {name: c1, op: conv, filters: 32, kernel: 3, padding: 1}\n" /* [2,32,96,96]: 2.36 MB */
    "  - {name: r1, op: relu}\n"
    "  - {name: c2, op: conv, filters: 32, kernel: 3, padding: 1}\n"
    "  - {name: p, op: maxpool, kernel: 4, stride: 4}\n"
    "  - {name: f, op: flatten}\n"
    "  - {name: d1, op: dense, units: 64}\n" /* 18432 x 64 weights: 4.7 MB */
    "  - {name: r2, op: relu}\n"
    "  - {name: d2, op: dense, units: 10}\n";

static char dir[256], src[RT_PATH], inf_so[RT_PATH], train_so[RT_PATH];

static int compile(const char *out, const char *extra) {
  char args[512];
  snprintf(args, sizeof args, "--batch-size %d --seed 3 %s", BATCH, extra);
  return rt_cnnc(src, out, args);
}

/* THP usable: the kernel has it and it is not switched off. */
static int thp_available(void) {
  FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
  char b[128] = "";
  if (!f) return 0;
  int ok = fgets(b, sizeof b, f) != NULL && !strstr(b, "[never]");
  fclose(f);
  return ok;
}

/* Mappings of this process that start on a 2 MB boundary and carry VmFlags "hg". */
static int advised_maps(void) {
  FILE *f = fopen("/proc/self/smaps", "r");
  if (!f) return -1;
  char line[512];
  uint64_t start = 0;
  int n = 0;
  while (fgets(line, sizeof line, f)) {
    uint64_t a, b;
    if (sscanf(line, "%" SCNx64 "-%" SCNx64 " ", &a, &b) == 2 && strchr(line, '-') < strchr(line, ' ')) start = a;
    else if (!strncmp(line, "VmFlags:", 8) && strstr(line, " hg") && start % (2u << 20) == 0) n++;
  }
  fclose(f);
  return n;
}

static void fill(float *x, size_t n, unsigned seed) {
  for (size_t i = 0; i < n; i++) {
    seed = seed * 1103515245u + 12345u;
    x[i] = (float)((seed >> 8) % 2001) / 1000.0f - 1.0f;
  }
}

static cnnrt_model *open_model(const char *path, const cnnrt_allocator *a, cnnrt_hugepages huge) {
  cnnrt_options o;
  cnnrt_options_init(&o);
  o.threads_per_shard = 2;
  o.allocator = a;
  o.hugepages = huge;
  cnnrt_model *m = NULL;
  cnnrt_status s = cnnrt_open(path, &o, &m);
  CHECK(s == CNNRT_OK && m, "open %s: %s", path, cnnrt_last_error());
  return s == CNNRT_OK ? m : NULL;
}

/* NB micro-batches of inference into y; returns the advised 2 MB mappings while open minus
 * before (-1 if it failed). */
static int infer(const float *x, size_t in, float *y, size_t out, const cnnrt_allocator *a, cnnrt_hugepages huge) {
  int before = advised_maps();
  cnnrt_model *m = open_model(inf_so, a, huge);
  if (!m) return -1;
  cnnrt_status s = cnnrt_infer(m, x, in, y, out, NB);
  CHECK(s == CNNRT_OK, "infer: %s", cnnrt_last_error());
  int during = advised_maps();
  cnnrt_close(m);
  return during - before;
}

static void test_inference(void) {
  cnnrt_model *m = open_model(inf_so, NULL, CNNRT_HUGEPAGES_INFERENCE);
  if (!m) return;
  size_t in = cnnrt_input_bytes(m) * NB, out = cnnrt_output_bytes(m) * NB;
  CHECK(cnnrt_num_shards(m) == 2, "%d shards", cnnrt_num_shards(m));
  cnnrt_close(m);
  float *x = malloc(in), *y[4];
  fill(x, in / 4, 11);
  for (int k = 0; k < 4; k++) y[k] = malloc(out), memset(y[k], 0xff, out);
  counting_alloc c = {PTHREAD_MUTEX_INITIALIZER};
  cnnrt_allocator a = {count_alloc, count_free, &c};
  int huge = infer(x, in, y[0], out, NULL, CNNRT_HUGEPAGES_INFERENCE);
  int none = infer(x, in, y[1], out, NULL, CNNRT_HUGEPAGES_OFF);
  int user = infer(x, in, y[2], out, &a, CNNRT_HUGEPAGES_INFERENCE);
  if (thp_available()) CHECK(huge > 0, "no MADV_HUGEPAGE mapping on the default path (%d)", huge);
  else printf("THP not available: the advised-mapping check is skipped\n");
  CHECK(none == 0, "%d advised mappings under CNNRT_HUGEPAGES_OFF", none);
  CHECK(user == 0, "%d advised mappings with a user allocator", user);
  CHECK(c.allocs > 0 && c.allocs == c.frees && c.not64 == 0, "user allocator: %d allocs, %d frees, %d not 64-byte aligned",
        c.allocs, c.frees, c.not64);
  CHECK(c.biggest >= (2u << 20), "user allocator's biggest request %zu bytes (a 2 MB+ buffer went elsewhere)", c.biggest);
  CHECK(!memcmp(y[0], y[1], out), "outputs differ: default vs CNNRT_HUGEPAGES_OFF");
  CHECK(!memcmp(y[0], y[2], out), "outputs differ: default vs user allocator");
  int finite = 1, nonzero = 0;
  for (size_t i = 0; i < out / 4; i++) finite &= y[0][i] == y[0][i], nonzero |= y[0][i] != 0;
  CHECK(finite && nonzero, "outputs not finite or all zero");
  /* Two models on one .so at once (one dlopen handle, shared weights; options per model). */
  cnnrt_model *m1 = open_model(inf_so, NULL, CNNRT_HUGEPAGES_INFERENCE), *m2 = open_model(inf_so, NULL, CNNRT_HUGEPAGES_ALL);
  if (m1 && m2) {
    CHECK(cnnrt_infer(m1, x, in, y[3], out, NB) == CNNRT_OK && !memcmp(y[0], y[3], out), "first of two models");
    memset(y[3], 0xff, out);
    CHECK(cnnrt_infer(m2, x, in, y[3], out, NB) == CNNRT_OK && !memcmp(y[0], y[3], out), "second of two models");
    cnnrt_close(m1), m1 = NULL;
    memset(y[3], 0xff, out);
    CHECK(cnnrt_infer(m2, x, in, y[3], out, NB) == CNNRT_OK && !memcmp(y[0], y[3], out), "second after closing the first");
  }
  cnnrt_close(m1);
  cnnrt_close(m2);
  for (int k = 0; k < 4; k++) free(y[k]);
  free(x);
}

/* Two training steps; the losses and every state tensor, concatenated, into *state; the
 * advised 2 MB mappings after the steps minus before the open into *advised. */
static size_t train(const float *x, size_t in, const float *labels, float loss[2], char **state, const cnnrt_allocator *a,
                    cnnrt_hugepages huge, int *advised) {
  int before = advised_maps();
  cnnrt_model *m = open_model(train_so, a, huge);
  *state = NULL;
  if (!m) return 0;
  for (int s = 0; s < 2; s++) {
    float acc;
    CHECK(cnnrt_train_step(m, x, in, labels, 1, &loss[s], &acc) == CNNRT_OK, "train step: %s", cnnrt_last_error());
  }
  *advised = advised_maps() - before;
  size_t total = 0;
  for (int i = 0; i < cnnrt_num_state(m); i++) {
    cnnrt_state_info si;
    if (cnnrt_state_info_at(m, i, &si) != CNNRT_OK) break;
    char *b = realloc(*state, total + si.bytes);
    if (!b) break;
    *state = b;
    CHECK(cnnrt_get_state(m, si.name, b + total, si.bytes) == CNNRT_OK, "get_state %s", si.name);
    total += si.bytes;
  }
  cnnrt_close(m);
  return total;
}

static void test_training(void) {
  cnnrt_model *m = open_model(train_so, NULL, CNNRT_HUGEPAGES_INFERENCE);
  if (!m) return;
  cnnrt_tensor_info ti;
  cnnrt_input_info(m, &ti);
  size_t in = ti.bytes;
  cnnrt_close(m);
  float *x = malloc(in), labels[BATCH], loss[4][2];
  fill(x, in / 4, 5);
  for (int i = 0; i < BATCH; i++) labels[i] = (float)(i * 3 % 10);
  char *st[4];
  size_t n[4];
  int adv[4];
  const char *what[4] = {"default", "CNNRT_HUGEPAGES_OFF", "user allocator", "CNNRT_HUGEPAGES_ALL"};
  const cnnrt_hugepages mode[4] = {CNNRT_HUGEPAGES_INFERENCE, CNNRT_HUGEPAGES_OFF, CNNRT_HUGEPAGES_INFERENCE, CNNRT_HUGEPAGES_ALL};
  counting_alloc c = {PTHREAD_MUTEX_INITIALIZER};
  cnnrt_allocator a = {count_alloc, count_free, &c};
  for (int k = 0; k < 4; k++) n[k] = train(x, in, labels, loss[k], &st[k], k == 2 ? &a : NULL, mode[k], &adv[k]);
  CHECK(loss[0][1] == loss[0][1] && loss[0][1] < loss[0][0], "loss %g -> %g", loss[0][0], loss[0][1]);
  for (int k = 1; k < 4; k++) {
    CHECK(n[k] == n[0] && n[0] > (2u << 20), "state bytes %zu (%s) vs %zu", n[k], what[k], n[0]);
    CHECK(!memcmp(loss[0], loss[k], sizeof loss[0]), "losses differ: %.9g %.9g (default) vs %.9g %.9g (%s)", loss[0][0],
          loss[0][1], loss[k][0], loss[k][1], what[k]);
    if (n[k] == n[0] && st[0] && st[k]) CHECK(!memcmp(st[0], st[k], n[0]), "state differs: default vs %s", what[k]);
  }
  CHECK(adv[0] == 0 && adv[1] == 0 && adv[2] == 0, "advised mappings in training: %d (default) %d %d", adv[0], adv[1], adv[2]);
  if (thp_available()) CHECK(adv[3] > 0, "no advised mapping under CNNRT_HUGEPAGES_ALL");
  CHECK(c.allocs == c.frees && c.biggest >= (2u << 20), "training user allocator: %d allocs, %d frees, biggest %zu",
        c.allocs, c.frees, c.biggest);
  for (int k = 0; k < 4; k++) free(st[k]);
  free(x);
}

int main(void) {
  static char *const path[3] = {src, inf_so, train_so};
  static const char *const file[3] = {"m.yml", "inf.so", "train.so"};
  if (rt_tmpdir(dir, sizeof dir, "cnnc-hugepages", path, file, 3) || !rt_write(src, yml)) return 2;
  if (compile(inf_so, "--pipeline-splits c2")) test_inference();
  if (compile(train_so, "--mode training --optimizer momentum --momentum 0.9")) test_training();
  rt_rmdir(dir, path, 3);
  printf("test_runtime_hugepages: %d checks, %d failed\n", g_checks, g_failures);
  return g_failures ? 1 : 0;
}
