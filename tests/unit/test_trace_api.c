/* test_trace_api.c — cnnrt_trace_begin / cnnrt_trace_write on the fake 2-shard model of
 * tests/tools: argument errors return statuses (never exit), a trace of N micro-batches has
 * N micro-batch events per shard, restarting clears it, a full buffer counts dropped events,
 * an unwritable path is CNNRT_IO, and closing a model with a trace running frees it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/cnnrt.h"
#include "tests/unit/check.h"

#define FAKE CNNC_TEST_BIN "/tests/libfake_model.so"

static char *slurp(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  static char buf[1 << 20];
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = 0;
  return buf;
}

static int count(const char *s, const char *what) {
  int n = 0;
  for (const char *p = s; p && (p = strstr(p, what)); p += strlen(what)) n++;
  return n;
}

static int run(cnnrt_model *m, int n) {
  size_t ib = cnnrt_input_bytes(m), ob = cnnrt_output_bytes(m);
  char *x = calloc((size_t)n, ib), *y = calloc((size_t)n, ob);
  int rc = cnnrt_infer(m, x, (size_t)n * ib, y, (size_t)n * ob, n);
  free(x);
  free(y);
  return rc;
}

int main(void) {
  char path[] = "/tmp/cnnc-trace-XXXXXX";
  int fd = mkstemp(path);
  CHECK(fd >= 0, "mkstemp");
  CHECK(cnnrt_trace_begin(NULL, 0) == CNNRT_INVALID_ARGUMENT, "begin(NULL)");
  CHECK(cnnrt_trace_write(NULL, path) == CNNRT_INVALID_ARGUMENT, "write(NULL)");
  cnnrt_model *m = NULL;
  CHECK(cnnrt_open(FAKE, NULL, &m) == CNNRT_OK, "open: %s", cnnrt_last_error());
  if (!m) return 1;
  CHECK(cnnrt_trace_write(m, path) == CNNRT_INVALID_ARGUMENT && strstr(cnnrt_last_error(), "without"),
        "write before begin: %s", cnnrt_last_error());
  CHECK(cnnrt_trace_write(m, NULL) == CNNRT_INVALID_ARGUMENT, "write(path NULL)");
  CHECK(cnnrt_set_threads(m, -1, 2) == CNNRT_OK, "threads");

  CHECK(cnnrt_trace_begin(m, 0) == CNNRT_OK, "begin: %s", cnnrt_last_error());
  CHECK(run(m, 3) == CNNRT_OK, "infer: %s", cnnrt_last_error());
  CHECK(cnnrt_trace_begin(m, 0) == CNNRT_OK, "restart");
  CHECK(run(m, 5) == CNNRT_OK, "infer: %s", cnnrt_last_error());
  CHECK(cnnrt_trace_write(m, path) == CNNRT_OK, "write: %s", cnnrt_last_error());
  const char *t = slurp(path);
  CHECK(t && strstr(t, "{\"traceEvents\": ["), "not a trace: %.200s", t ? t : "(unreadable)");
  CHECK(count(t, "\"cat\": \"micro-batch\"") == 10, "want 5 micro-batches x 2 shards (restart clears): %d",
        count(t, "\"cat\": \"micro-batch\""));
  CHECK(count(t, "\"name\": \"micro-batch 4\"") == 2 && !strstr(t, "micro-batch 5\""), "micro-batch numbering");
  CHECK(count(t, "\"thread_name\"") == 2 && strstr(t, "shard 1 (2 threads)"), "thread names");
  CHECK(count(t, "\"cat\": \"op\"") > 0, "op events with 2 threads per shard");
  CHECK(strstr(t, "\"dropped_events\": 0"), "no drops");
  CHECK(cnnrt_trace_write(m, path) == CNNRT_INVALID_ARGUMENT, "write stops the trace");

  CHECK(cnnrt_trace_begin(m, 4) == CNNRT_OK, "small buffer");
  CHECK(run(m, 6) == CNNRT_OK, "infer");
  CHECK(cnnrt_trace_write(m, "/nonexistent-dir/t.json") == CNNRT_IO, "unwritable path: %s", cnnrt_last_error());
  CHECK(cnnrt_trace_begin(m, 2) == CNNRT_OK && run(m, 3) == CNNRT_OK, "tiny buffer");
  CHECK(cnnrt_trace_write(m, path) == CNNRT_OK, "write");
  t = slurp(path);
  CHECK(t && !strstr(t, "\"dropped_events\": 0,"), "full buffer counts drops: %.300s", t ? strstr(t, "otherData") : "");
  CHECK(cnnrt_trace_begin(m, (size_t)1 << 40) == CNNRT_INVALID_ARGUMENT, "huge max_events");

  CHECK(cnnrt_trace_begin(m, 0) == CNNRT_OK && run(m, 2) == CNNRT_OK, "trace left running");
  cnnrt_close(m); /* frees it (ASan would report a leak) */
  remove(path);
  printf("test_trace_api: %d failed\n", g_failures);
  return g_failures != 0;
}
