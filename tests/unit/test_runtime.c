/* test_runtime.c — libcnnrt loading and bad input: the fake models of tests/tools (valid and
 * broken descriptors), corrupt/truncated/missing files, NULL arguments, wrong buffer sizes,
 * the queries and their JSON.  Every broken case must give its status and a message naming
 * the file and the fault; none may crash.  (Execution is in test_runtime_exec.c.) */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime/cnnrt.h"
#include "runtime/rt_json.c" /* the library's JSON validator (hidden in the .so), for checks */

#include "check.h"

#define FAKE(v) CNNC_TEST_BIN "/tests/libfake_model" v ".so"

static cnnrt_model *open_ok(const char *path) {
  cnnrt_model *m = NULL;
  cnnrt_status s = cnnrt_open(path, NULL, &m);
  CHECK(s == CNNRT_OK && m, "open %s: %s: %s", path, cnnrt_status_name(s), cnnrt_last_error());
  return m;
}

/* Opening path fails with status want and a message containing the file name and sub. */
static void expect_open_error(const char *path, cnnrt_status want, const char *sub) {
  cnnrt_model *m = (cnnrt_model *)&g_checks; /* must be reset to NULL */
  cnnrt_status s = cnnrt_open(path, NULL, &m);
  const char *msg = cnnrt_last_error();
  CHECK(s == want, "%s: status %s, want %s (%s)", path, cnnrt_status_name(s), cnnrt_status_name(want), msg);
  CHECK(m == NULL, "%s: *out not NULL after a failed open", path);
  CHECK(strstr(msg, path) != NULL, "%s: message does not name the file: %s", path, msg);
  CHECK(strstr(msg, sub) != NULL, "%s: message lacks '%s': %s", path, sub, msg);
  if (s == CNNRT_OK) cnnrt_close(m);
}

static void test_bad_variants(void) {
  static const struct {
    const char *variant, *sub;
    cnnrt_status status;
  } cases[] = {
      {"_nosym", "cnnc_model_v1", CNNRT_BAD_MODEL},
      {"_magic", "magic is 0xdeadbeef", CNNRT_BAD_MODEL},
      {"_abi99", "ABI version 99", CNNRT_ABI_MISMATCH},
      {"_size0", "struct_size 0", CNNRT_ABI_MISMATCH},
      {"_v2", "ABI version 2", CNNRT_ABI_MISMATCH},
      {"_noshards", "n_shards is 0", CNNRT_BAD_MODEL},
      {"_badio", "io[1] = 7", CNNRT_BAD_MODEL},
      {"_orphan", "'ghost' that no earlier shard writes", CNNRT_BAD_MODEL},
      {"_nullrun", "shards[1].run is NULL", CNNRT_BAD_MODEL},
      {"_bytes", "bytes 100", CNNRT_BAD_MODEL},
      {"_badjson", "options_json is not a JSON object", CNNRT_BAD_MODEL},
      {"_dupwrite", "'mid' that is already written by another shard", CNNRT_BAD_MODEL},
      {"_batchdim", "leading dim 4, batch size is 2", CNNRT_BAD_MODEL},
  };
  char path[512];
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    snprintf(path, sizeof path, CNNC_TEST_BIN "/tests/libfake_model%s.so", cases[k].variant);
    expect_open_error(path, cases[k].status, cases[k].sub);
  }
}

static void write_file(const char *path, const void *data, size_t n) {
  FILE *f = fopen(path, "wb");
  CHECK(f && fwrite(data, 1, n, f) == n, "cannot write %s", path);
  if (f) fclose(f);
}

/* The first n bytes of the valid model as a new file. */
static void write_prefix(const char *dst, size_t n) {
  FILE *f = fopen(FAKE(""), "rb");
  char *buf = calloc(1, n);
  size_t got = f ? fread(buf, 1, n, f) : 0;
  CHECK(got == n, "cannot read %zu bytes of %s", n, FAKE(""));
  write_file(dst, buf, got);
  free(buf);
  if (f) fclose(f);
}

static void test_bad_files(void) {
  char dir[] = "/tmp/cnnrt_testXXXXXX", path[256];
  CHECK(mkdtemp(dir) != NULL, "mkdtemp");
  snprintf(path, sizeof path, "%s/nonexistent.so", dir);
  expect_open_error(path, CNNRT_IO, "No such file");
  expect_open_error(dir, CNNRT_IO, "not a regular file");
  snprintf(path, sizeof path, "%s/garbage.so", dir);
  char garbage[4096];
  for (size_t i = 0; i < sizeof garbage; i++) garbage[i] = (char)(i * 7919u >> 3);
  write_file(path, garbage, sizeof garbage);
  expect_open_error(path, CNNRT_BAD_MODEL, "no ELF header");
  snprintf(path, sizeof path, "%s/empty.so", dir);
  write_file(path, "", 0);
  expect_open_error(path, CNNRT_BAD_MODEL, "no ELF header");
  snprintf(path, sizeof path, "%s/header_only.so", dir);
  write_prefix(path, 40);
  expect_open_error(path, CNNRT_BAD_MODEL, "truncated");
  snprintf(path, sizeof path, "%s/truncated.so", dir);
  write_prefix(path, 3000);
  expect_open_error(path, CNNRT_BAD_MODEL, "truncated");
  snprintf(path, sizeof path, "%s/script.so", dir);
  write_file(path, "#!/bin/sh\necho hi\n", 18);
  expect_open_error(path, CNNRT_BAD_MODEL, "no ELF header");
  /* An ELF file that is not a loadable library: this test executable. */
  char self[512];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n > 0) {
    self[n] = '\0';
    cnnrt_model *m = NULL;
    cnnrt_status s = cnnrt_open(self, NULL, &m);
    CHECK(s == CNNRT_BAD_MODEL && !m, "open of an executable: %s (%s)", cnnrt_status_name(s), cnnrt_last_error());
  }
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  CHECK(system(cmd) == 0, "%s", cmd);
}

static void test_queries(void) {
  cnnrt_model *m = open_ok(FAKE(""));
  if (!m) return;
  CHECK(strcmp(cnnrt_last_error(), "") == 0, "error left after success: %s", cnnrt_last_error());
  CHECK(strcmp(cnnrt_model_name(m), "fake_model") == 0, "name %s", cnnrt_model_name(m));
  CHECK(cnnrt_batch_size(m) == 2 && cnnrt_num_shards(m) == 2 && cnnrt_num_outputs(m) == 1, "batch/shards/outputs");
  CHECK(cnnrt_input_bytes(m) == 128 && cnnrt_output_bytes(m) == 80, "bytes %zu %zu", cnnrt_input_bytes(m),
        cnnrt_output_bytes(m));
  cnnrt_tensor_info t;
  CHECK(cnnrt_input_info(m, &t) == CNNRT_OK, "input_info");
  CHECK(strcmp(t.name, "input") == 0 && t.dtype == CNNRT_F32 && t.rank == 4 && t.dims[0] == 2 && t.dims[1] == 1 &&
            t.dims[2] == 4 && t.dims[3] == 4 && t.bytes == 128,
        "input info wrong");
  CHECK(cnnrt_output_info(m, 0, &t) == CNNRT_OK, "output_info");
  CHECK(strcmp(t.name, "logits") == 0 && t.rank == 2 && t.dims[1] == 10 && t.bytes == 80, "output info wrong");
  CHECK(cnnrt_output_info(m, 1, &t) == CNNRT_INVALID_ARGUMENT, "output 1 of 1");
  CHECK(cnnrt_output_info(m, -1, &t) == CNNRT_INVALID_ARGUMENT, "output -1");
  CHECK(cnnrt_input_info(m, NULL) == CNNRT_INVALID_ARGUMENT, "input_info NULL out");
  const char *opt = cnnrt_options_json(m);
  CHECK(opt && rt_json_valid(opt, 1) && strstr(opt, "\"pipeline_splits\""), "options json: %s", opt ? opt : "NULL");
  const char *js = cnnrt_describe_json(m);
  CHECK(js && rt_json_valid(js, 1), "describe json invalid: %s", js ? js : "NULL");
  static const char *const want[] = {"\"model\": \"fake_model\"", "\"abi_version\": 1", "\"batch_size\": 2",
                                     "\"name\": \"mid\"", "\"shape\": [2, 1, 4, 4]", "\"kernel\": \"fake_rotate_f32\"",
                                     "\"inputs\": [\"mid\"]", "\"options\": {\"batch_size\": 2",
                                     "\"note\": \"q\\\"uote\""};
  for (size_t k = 0; js && k < sizeof want / sizeof want[0]; k++)
    CHECK(strstr(js, want[k]) != NULL, "describe json lacks %s: %s", want[k], js);
  CHECK(cnnrt_set_threads(m, 1, 3) == CNNRT_OK && cnnrt_threads(m, 1) == 3, "set_threads");
  js = cnnrt_describe_json(m);
  CHECK(js && strstr(js, "\"threads\": 3"), "describe json does not show the thread count");
  cnnrt_close(m);
}

static void test_json_validator(void) {
  static const char *const good[] = {"{}", " {\"a\": [1, -2.5e3, true, false, null, \"x\\u00e9\\n\"]} ", "[]", "0"};
  static const char *const bad[] = {"", "{", "{\"a\" 1}", "{\"a\": 1,}", "[1 2]", "01", "\"abc", "{} x", "tru",
                                    "\"\\q\"", "1.", "-"};
  for (size_t k = 0; k < sizeof good / sizeof good[0]; k++) CHECK(rt_json_valid(good[k], 0), "valid: %s", good[k]);
  for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) CHECK(!rt_json_valid(bad[k], 0), "invalid: %s", bad[k]);
  CHECK(!rt_json_valid("[]", 1), "array is not an object");
  char deep[200];
  memset(deep, '[', sizeof deep - 1);
  deep[sizeof deep - 1] = '\0';
  CHECK(!rt_json_valid(deep, 0), "unterminated deep nesting");
}

static void test_null_arguments(void) {
  cnnrt_model *m = NULL;
  CHECK(cnnrt_open(NULL, NULL, &m) == CNNRT_INVALID_ARGUMENT, "open NULL path");
  CHECK(strstr(cnnrt_last_error(), "path is NULL"), "message: %s", cnnrt_last_error());
  CHECK(cnnrt_open("", NULL, &m) == CNNRT_INVALID_ARGUMENT, "open empty path");
  CHECK(cnnrt_open(FAKE(""), NULL, NULL) == CNNRT_INVALID_ARGUMENT, "open NULL out");
  cnnrt_close(NULL);
  CHECK(cnnrt_model_name(NULL) == NULL && cnnrt_batch_size(NULL) == 0 && cnnrt_input_bytes(NULL) == 0,
        "queries on NULL");
  CHECK(strstr(cnnrt_last_error(), "model is NULL"), "message: %s", cnnrt_last_error());
  CHECK(cnnrt_describe_json(NULL) == NULL && cnnrt_options_json(NULL) == NULL, "json on NULL");
  cnnrt_tensor_info t;
  CHECK(cnnrt_input_info(NULL, &t) == CNNRT_INVALID_ARGUMENT, "input_info NULL");
  CHECK(cnnrt_set_threads(NULL, 0, 1) == CNNRT_INVALID_ARGUMENT, "set_threads NULL");
  float buf[64];
  CHECK(cnnrt_infer(NULL, buf, 128, buf, 80, 1) == CNNRT_INVALID_ARGUMENT, "infer NULL model");
  cnnrt_options o;
  cnnrt_options_init(&o);
  o.struct_size = 0;
  CHECK(cnnrt_open(FAKE(""), &o, &m) == CNNRT_INVALID_ARGUMENT && !m, "options struct_size 0");
  cnnrt_options_init(&o);
  o.threads_per_shard = -1;
  CHECK(cnnrt_open(FAKE(""), &o, &m) == CNNRT_INVALID_ARGUMENT && !m, "threads_per_shard -1");
  cnnrt_allocator half = {.alloc = NULL, .free = NULL};
  cnnrt_options_init(&o);
  o.allocator = &half;
  CHECK(cnnrt_open(FAKE(""), &o, &m) == CNNRT_INVALID_ARGUMENT && !m, "allocator without functions");
}

static void test_bad_buffers(void) {
  cnnrt_model *m = open_ok(FAKE(""));
  if (!m) return;
  float in[64] = {0}, out[40];
  CHECK(cnnrt_infer(m, NULL, 128, out, 80, 1) == CNNRT_INVALID_ARGUMENT, "NULL input");
  CHECK(cnnrt_infer(m, in, 128, NULL, 80, 1) == CNNRT_INVALID_ARGUMENT, "NULL output");
  CHECK(cnnrt_infer(m, in, 128, out, 80, 0) == CNNRT_INVALID_ARGUMENT, "0 batches");
  CHECK(cnnrt_infer(m, in, 128, out, 80, -3) == CNNRT_INVALID_ARGUMENT, "-3 batches");
  CHECK(cnnrt_infer(m, in, 127, out, 80, 1) == CNNRT_SHAPE_MISMATCH, "127-byte input");
  const char *msg = cnnrt_last_error();
  CHECK(strstr(msg, "input buffer is 127 bytes") && strstr(msg, "f32 [2,1,4,4]") && strstr(msg, FAKE("")),
        "message: %s", msg);
  CHECK(cnnrt_infer(m, in, 128, out, 81, 1) == CNNRT_SHAPE_MISMATCH, "81-byte output");
  CHECK(strstr(cnnrt_last_error(), "output buffer is 81 bytes"), "message: %s", cnnrt_last_error());
  CHECK(cnnrt_infer(m, in, 128, out, 80, 2) == CNNRT_SHAPE_MISMATCH, "1 batch of input for 2");
  CHECK(cnnrt_infer(m, in, 256, out, 80, 2) == CNNRT_SHAPE_MISMATCH, "1 batch of output for 2");
  CHECK(cnnrt_infer(m, in, 128, out, 80, 1) == CNNRT_OK, "correct sizes after errors: %s", cnnrt_last_error());
  CHECK(cnnrt_set_threads(m, 2, 1) == CNNRT_INVALID_ARGUMENT, "shard 2 of 2");
  CHECK(cnnrt_set_threads(m, -2, 1) == CNNRT_INVALID_ARGUMENT, "shard -2");
  CHECK(cnnrt_set_threads(m, 0, 0) == CNNRT_INVALID_ARGUMENT, "0 threads");
  CHECK(cnnrt_set_threads(m, 0, 100000) == CNNRT_INVALID_ARGUMENT, "100000 threads");
  int cpu = 100000;
  CHECK(cnnrt_set_cpus(m, 0, &cpu, 1) == CNNRT_INVALID_ARGUMENT, "cpu 100000");
  CHECK(strstr(cnnrt_last_error(), "cpu 100000 is not available"), "message: %s", cnnrt_last_error());
  cpu = -1;
  CHECK(cnnrt_set_cpus(m, 0, &cpu, 1) == CNNRT_INVALID_ARGUMENT, "cpu -1");
  CHECK(cnnrt_set_cpus(m, 0, NULL, 2) == CNNRT_INVALID_ARGUMENT, "NULL cpus");
  CHECK(cnnrt_threads(m, 5) == 0, "threads of shard 5");
  cnnrt_close(m);
}

/* A failing shard entry is reported (status INTERNAL, shard named), and the model stays usable. */
static void test_failing_shard(void) {
  cnnrt_model *m = open_ok(FAKE("_failrun"));
  if (!m) return;
  float in[64] = {0}, out[40];
  for (int rep = 0; rep < 2; rep++) {
    cnnrt_status s = cnnrt_infer(m, in, 256, out, 160, 2);
    CHECK(s == CNNRT_INTERNAL, "failing shard: %s", cnnrt_status_name(s));
    CHECK(strstr(cnnrt_last_error(), "shard 1 (inc .. inc) returned 3"), "message: %s", cnnrt_last_error());
  }
  cnnrt_close(m);
}

/* Inference on a model compiled for training is refused, not run with missing labels. */
static void test_training_model(void) {
  cnnrt_model *m = open_ok(FAKE("_training"));
  if (!m) return;
  float in[32] = {0}, out[20];
  CHECK(cnnrt_infer(m, in, 128, out, 80, 1) == CNNRT_UNSUPPORTED, "infer on a training model");
  CHECK(strstr(cnnrt_last_error(), "a training model"), "message: %s", cnnrt_last_error());
  const char *js = cnnrt_describe_json(m);
  CHECK(js && strstr(js, "\"mode\": \"training\""), "describe json mode");
  cnnrt_close(m);
}

/* A path without '/' is a file in the current directory, not a library search. */
static void test_relative_path(void) {
  char cwd[1024];
  CHECK(getcwd(cwd, sizeof cwd) != NULL, "getcwd");
  CHECK(chdir(CNNC_TEST_BIN "/tests") == 0, "chdir");
  cnnrt_model *m = open_ok("libfake_model.so");
  cnnrt_close(m);
  expect_open_error("libcnnrt_no_such_model.so", CNNRT_IO, "No such file");
  CHECK(chdir(cwd) == 0, "chdir back");
}

static void *other_thread_error(void *arg) {
  *(int *)arg = strcmp(cnnrt_last_error(), "") == 0;
  return NULL;
}

static void test_error_is_thread_local(void) {
  cnnrt_model *m = NULL;
  CHECK(cnnrt_open(NULL, NULL, &m) != CNNRT_OK && *cnnrt_last_error(), "an error on this thread");
  int clean = 0;
  pthread_t t;
  pthread_create(&t, NULL, other_thread_error, &clean);
  pthread_join(t, NULL);
  CHECK(clean, "another thread sees this thread's error");
  CHECK(strcmp(cnnrt_status_name(CNNRT_SHAPE_MISMATCH), "SHAPE_MISMATCH") == 0 &&
            strcmp(cnnrt_status_name((cnnrt_status)99), "UNKNOWN") == 0,
        "status names");
  CHECK(CNNRT_OK == 0 && CNNRT_INVALID_ARGUMENT == 1 && CNNRT_IO == 2 && CNNRT_BAD_MODEL == 3 &&
            CNNRT_ABI_MISMATCH == 4 && CNNRT_SHAPE_MISMATCH == 5 && CNNRT_OUT_OF_MEMORY == 6 &&
            CNNRT_UNSUPPORTED == 7 && CNNRT_INTERNAL == 8,
        "stable status values");
  CHECK(strstr(cnnrt_version(), "model ABI 1") != NULL, "version %s", cnnrt_version());
}

int main(void) {
  test_json_validator();
  test_queries();
  test_bad_variants();
  test_bad_files();
  test_null_arguments();
  test_bad_buffers();
  test_failing_shard();
  test_training_model();
  test_relative_path();
  test_error_is_thread_local();
  printf("test_runtime: %d checks, %d failed\n", g_checks, g_failures);
  return g_failures ? 1 : 0;
}
