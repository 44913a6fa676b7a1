/* test_runtime_options.c — the runtime knobs of cnnrt_options (runtime/cnnrt.h, docs/runtime.md
 * "Runtime options"): spin_us, hugepages, replica_mode.
 *   - cnnrt_options_init's defaults;
 *   - an older caller's smaller struct_size (up to the allocator): the fields past it are not
 *     read (garbage there is ignored) and take the defaults;
 *   - every field out of range is CNNRT_INVALID_ARGUMENT naming the field and the value, and
 *     leaves *out NULL; the range ends open;
 *   - cnnrt_describe_json's "runtime" object shows the options, replica_mode as run: parallel
 *     for a 2-replica training model, shared for an inference model and for a 2-replica model
 *     with batchnorm statistics (BUFFER state);
 *   - spin_us takes effect: after a cnnrt_infer on 2 threads the worker waiting for the next
 *     job stays runnable (spinning) with spin_us CNNRT_SPIN_US_MAX, and sleeps with 0.
 * What hugepages and replica_mode change is checked by test_runtime_hugepages (advised
 * mappings, bitwise equal results) and test_train_accum (parallel vs shared replicas, bitwise). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "runtime/cnnrt.h"

#include "check.h"
#include "rt_case_check.h"

static const char *yml =
    "name: rtopts\n"
    "input: {shape: [2, 8, 8], dtype: f32, classes: 5}\n"
    "layers:\n"
    "  - {name: c1, op: conv, filters: 4, kernel: 3, padding: 1}\n"
    "  - {name: r1, op: relu}\n"
    "  - {name: f, op: flatten}\n"
    "  - {name: d, op: dense, units: 5}\n";

static const char *bn_yml =
    "name: rtopts_bn\n"
    "input: {shape: [2, 8, 8], dtype: f32, classes: 5}\n"
    "layers:\n"
    "  - {name: c1, op: conv, filters: 4, kernel: 3, padding: 1, bias: false}\n"
    "  - {name: b1, op: batchnorm}\n"
    "  - {name: r1, op: relu}\n"
    "  - {name: f, op: flatten}\n"
    "  - {name: d, op: dense, units: 5}\n";

static char dir[256], src[RT_PATH], bn_src[RT_PATH], inf_so[RT_PATH], rep_so[RT_PATH], bn_so[RT_PATH];

#define ARGS "--batch-size 4 --seed 5" /* the models' cnnc options */

/* Opens path with o; the "runtime" object of cnnrt_describe_json into rt (empty on failure). */
static cnnrt_model *open_runtime(const char *path, const cnnrt_options *o, char *rt, size_t n) {
  cnnrt_model *m = NULL;
  rt[0] = 0;
  cnnrt_status s = cnnrt_open(path, o, &m);
  CHECK(s == CNNRT_OK && m, "open %s: %s", path, cnnrt_last_error());
  if (s != CNNRT_OK) return NULL;
  const char *js = cnnrt_describe_json(m), *r = js ? strstr(js, "\"runtime\": {") : NULL;
  CHECK(r != NULL, "describe json has no runtime object: %s", js ? js : cnnrt_last_error());
  if (r) snprintf(rt, n, "%.*s", (int)(strchr(r, '}') - r + 1), r);
  return m;
}

static void expect_runtime(const char *path, const cnnrt_options *o, const char *want, const char *what) {
  char rt[512];
  cnnrt_close(open_runtime(path, o, rt, sizeof rt));
  CHECK(strstr(rt, want) != NULL, "%s: runtime %s lacks %s", what, rt, want);
}

static void test_defaults(void) {
  cnnrt_options o;
  memset(&o, 0x5a, sizeof o);
  cnnrt_options_init(&o);
  CHECK(o.struct_size == sizeof o && o.threads_per_shard == 0 && o.pin == 0 && o.allocator == NULL,
        "defaults of the first fields");
  CHECK(o.spin_us == CNNRT_SPIN_US_DEFAULT && CNNRT_SPIN_US_DEFAULT == 2000, "default spin_us %d", o.spin_us);
  CHECK(o.hugepages == CNNRT_HUGEPAGES_INFERENCE && o.replica_mode == CNNRT_REPLICA_SHARED,
        "default hugepages %d, replica_mode %d", (int)o.hugepages, (int)o.replica_mode);
  expect_runtime(inf_so, &o, "\"spin_us\": 2000, \"hugepages\": \"inference\", \"replica_mode\": \"shared\"", "defaults");
  expect_runtime(inf_so, NULL, "\"spin_us\": 2000, \"hugepages\": \"inference\", \"replica_mode\": \"shared\"", "NULL opts");
}

/* A caller built before spin_us existed: struct_size ends at the allocator; what lies past it
 * (here: values out of range) is not read. */
static void test_old_struct(void) {
  cnnrt_options o;
  cnnrt_options_init(&o);
  o.threads_per_shard = 3;
  o.spin_us = -7;
  o.hugepages = (cnnrt_hugepages)99;
  o.replica_mode = (cnnrt_replica_mode)42;
  o.struct_size = (uint32_t)offsetof(cnnrt_options, spin_us);
  CHECK(o.struct_size == offsetof(cnnrt_options, allocator) + sizeof(void *), "old struct size %u", o.struct_size);
  expect_runtime(inf_so, &o,
                 "{\"threads_per_shard\": 3, \"pin\": false, \"allocator\": \"default\", \"spin_us\": 2000, "
                 "\"hugepages\": \"inference\", \"replica_mode\": \"shared\", \"allow_nonfinite\": false}",
                 "old struct");
  o.struct_size = sizeof o + 4;
  cnnrt_model *m = (cnnrt_model *)1;
  CHECK(cnnrt_open(inf_so, &o, &m) == CNNRT_INVALID_ARGUMENT && !m, "struct_size beyond this runtime's");
  CHECK(strstr(cnnrt_last_error(), "struct_size") != NULL, "message: %s", cnnrt_last_error());
}

static void expect_invalid(const cnnrt_options *o, const char *msg, const char *what) {
  cnnrt_model *m = (cnnrt_model *)1;
  cnnrt_status s = cnnrt_open(inf_so, o, &m);
  CHECK(s == CNNRT_INVALID_ARGUMENT && m == NULL, "%s: status %s, model %p", what, cnnrt_status_name(s), (void *)m);
  if (s == CNNRT_OK) cnnrt_close(m);
  CHECK(strstr(cnnrt_last_error(), msg) != NULL, "%s: message '%s' lacks '%s'", what, cnnrt_last_error(), msg);
}

static void test_invalid(void) {
  cnnrt_options o;
  cnnrt_options_init(&o);
  o.spin_us = -1;
  expect_invalid(&o, "spin_us is -1, must be in 0..10000000", "spin_us -1");
  o.spin_us = CNNRT_SPIN_US_MAX + 1;
  expect_invalid(&o, "spin_us is 10000001, must be in 0..10000000", "spin_us max + 1");
  cnnrt_options_init(&o);
  o.hugepages = (cnnrt_hugepages)3;
  expect_invalid(&o, "hugepages is 3, must be CNNRT_HUGEPAGES_INFERENCE (0), CNNRT_HUGEPAGES_OFF (1) or CNNRT_HUGEPAGES_ALL (2)",
                 "hugepages 3");
  o.hugepages = (cnnrt_hugepages)-1;
  expect_invalid(&o, "hugepages is -1", "hugepages -1");
  cnnrt_options_init(&o);
  o.replica_mode = (cnnrt_replica_mode)2;
  expect_invalid(&o, "replica_mode is 2, must be CNNRT_REPLICA_SHARED (0) or CNNRT_REPLICA_PARALLEL (1)", "replica_mode 2");
  cnnrt_options_init(&o);
  o.spin_us = 0;
  o.hugepages = CNNRT_HUGEPAGES_OFF;
  o.replica_mode = CNNRT_REPLICA_PARALLEL;
  expect_runtime(inf_so, &o, "\"spin_us\": 0, \"hugepages\": \"off\", \"replica_mode\": \"shared\"", "0 / off / parallel (inference)");
  o.spin_us = CNNRT_SPIN_US_MAX;
  o.hugepages = CNNRT_HUGEPAGES_ALL;
  expect_runtime(inf_so, &o, "\"spin_us\": 10000000, \"hugepages\": \"all\"", "max / all");
}

static void test_replica_mode(void) {
  cnnrt_options o;
  cnnrt_options_init(&o);
  expect_runtime(rep_so, &o, "\"replica_mode\": \"shared\"", "2 replicas, default");
  o.replica_mode = CNNRT_REPLICA_PARALLEL;
  expect_runtime(rep_so, &o, "\"replica_mode\": \"parallel\"", "2 replicas, parallel");
  expect_runtime(bn_so, &o, "\"replica_mode\": \"shared\"", "2 replicas with batchnorm statistics, parallel asked");
  /* and it trains that way: one step each */
  char rt[512];
  cnnrt_model *m = open_runtime(rep_so, &o, rt, sizeof rt);
  if (!m) return;
  cnnrt_tensor_info in;
  cnnrt_input_info(m, &in);
  int per = cnnrt_grad_accum(m) * cnnrt_batch_size(m);
  size_t bytes = in.bytes / (size_t)cnnrt_batch_size(m) * (size_t)per;
  float *x = calloc(bytes, 1), *labels = calloc((size_t)per, sizeof *labels), loss = -1;
  CHECK(per == 8 && x && labels, "%d samples per update", per);
  if (x && labels)
    CHECK(cnnrt_train_step(m, x, bytes, labels, 1, &loss, NULL) == CNNRT_OK && loss == loss, "parallel replicas step: %s",
          cnnrt_last_error());
  free(x);
  free(labels);
  cnnrt_close(m);
}

/* Threads of this process other than the caller that are runnable (state R in
 * /proc/self/task/TID/stat: running or waiting for a CPU, as a spinning waiter is; a waiter
 * asleep in futex_wait is S). */
static int runnable_others(void) {
  pid_t self = (pid_t)syscall(SYS_gettid);
  DIR *d = opendir("/proc/self/task");
  struct dirent *e;
  int n = 0;
  while (d && (e = readdir(d))) {
    if (e->d_name[0] == '.' || atoi(e->d_name) == self) continue;
    char path[300], buf[512];
    snprintf(path, sizeof path, "/proc/self/task/%s/stat", e->d_name);
    FILE *f = fopen(path, "r");
    size_t got = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
    if (f) fclose(f);
    buf[got] = 0;
    const char *p = strrchr(buf, ')'); /* "pid (comm) S ..." */
    n += p && p[1] == ' ' && p[2] == 'R';
  }
  if (d) closedir(d);
  return n;
}

static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

/* spin_us takes effect: after one cnnrt_infer on 2 threads the worker waits for the next job
 * (the leader waits on its queue's condition variable).  With spin_us CNNRT_SPIN_US_MAX (10 s)
 * it stays runnable, spinning, through 100 ms of samples; with 0 it sleeps in the kernel at
 * once (polled for up to 2 s: on a loaded machine it may wait for a CPU to get there). */
static void test_spin(void) {
  for (int k = 0; k < 2; k++) {
    cnnrt_options o;
    cnnrt_options_init(&o);
    o.threads_per_shard = 2;
    o.spin_us = k == 0 ? CNNRT_SPIN_US_MAX : 0;
    cnnrt_model *m = NULL;
    if (cnnrt_open(inf_so, &o, &m) != CNNRT_OK) {
      CHECK(0, "open: %s", cnnrt_last_error());
      return;
    }
    size_t in = cnnrt_input_bytes(m), out = cnnrt_output_bytes(m);
    void *x = calloc(in, 1), *y = malloc(out);
    CHECK(x && y && cnnrt_infer(m, x, in, y, out, 1) == CNNRT_OK, "infer: %s", cnnrt_last_error());
    int samples = 0, runnable = 0;
    if (k == 0) {
      sleep_ms(20);
      for (; samples < 10; samples++, sleep_ms(10)) runnable += runnable_others() >= 1;
      CHECK(runnable == samples, "spin_us %d: a spinning worker in only %d of %d samples", o.spin_us, runnable, samples);
    } else {
      while (samples++ < 200 && runnable_others() > 0) sleep_ms(10);
      CHECK(runnable_others() == 0, "spin_us 0: a thread still runnable after %d ms", 10 * samples);
    }
    cnnrt_close(m);
    free(x);
    free(y);
  }
}

int main(void) {
  static char *const path[5] = {src, bn_src, inf_so, rep_so, bn_so};
  static const char *const file[5] = {"m.yml", "bn.yml", "inf.so", "rep.so", "bn.so"};
  if (rt_tmpdir(dir, sizeof dir, "cnnc-rtopts", path, file, 5) || !rt_write(src, yml) || !rt_write(bn_src, bn_yml)) return 2;
  if (rt_cnnc(src, inf_so, ARGS)) {
    test_defaults();
    test_old_struct();
    test_invalid();
    test_spin();
  }
  if (rt_cnnc(src, rep_so, ARGS " --mode training --replicas 2") && rt_cnnc(bn_src, bn_so, ARGS " --mode training --replicas 2"))
    test_replica_mode();
  rt_rmdir(dir, path, 5);
  printf("test_runtime_options: %d checks, %d failed\n", g_checks, g_failures);
  return g_failures ? 1 : 0;
}
