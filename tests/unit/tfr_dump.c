/* tfr_dump.c — runtime/rt_tfrecord.c's reader from the command line, for
 * tests/scripts/test_tfrecord.py (linked to the static runtime: rt_tfr_* are internal).
 *   tfr_dump DIR [--test] [--threads N] [--describe I]
 * opens the train (--test: validation) shards of DIR and prints "records N", then one line
 * per record "I LENGTH LABEL FNV1A64-OF-THE-IMAGE" in record order (--threads: read by N
 * threads at once, printed in order), or only rt_tfr_describe's text of record I.
 *   tfr_dump --crc
 * checks the SSE4.2 CRC32C against the table one and the standard check value.
 * A failure prints "tfr_dump: STATUS: message" and exits 1. */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt_tfrecord.h"

typedef struct job {
  rt_tfr *t;
  int64_t n, *len, *label;
  uint64_t *hash;
  int tid, nthreads;
  cnnrt_status s;
  char msg[1100];
} job;

static uint64_t fnv1a(const uint8_t *p, size_t n) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t k = 0; k < n; k++) h = (h ^ p[k]) * 0x100000001b3ull;
  return h;
}

static void *worker(void *arg) {
  job *j = arg;
  for (int64_t i = j->tid; i < j->n; i += j->nthreads) {
    uint8_t *img;
    size_t n;
    int64_t label;
    cnnrt_status s = rt_tfr_sample(j->t, i, &img, &n, &label);
    if (s != CNNRT_OK) {
      j->s = s;
      snprintf(j->msg, sizeof j->msg, "%s", cnnrt_last_error());
      return NULL;
    }
    j->len[i] = (int64_t)n, j->label[i] = label, j->hash[i] = fnv1a(img, n);
    free(img);
  }
  return NULL;
}

static int fail(cnnrt_status s, const char *msg) {
  fprintf(stderr, "tfr_dump: %s: %s\n", cnnrt_status_name(s), msg);
  return 1;
}

static int crc_check(void) {
  uint32_t c = rt_tfr_crc32c(0, "123456789", 9), ct = rt_tfr_crc32c_table(0, "123456789", 9);
  if (c != 0xE3069283u || ct != 0xE3069283u) {
    fprintf(stderr, "tfr_dump: CRC32C(\"123456789\") = %08x / table %08x, expected e3069283\n", c, ct);
    return 1;
  }
  uint8_t b[1100];
  uint64_t x = 1;
  for (size_t k = 0; k < sizeof b; k++) x = x * 6364136223846793005ull + 1442695040888963407ull, b[k] = (uint8_t)(x >> 56);
  for (size_t off = 0; off < 9; off++)
    for (size_t n = 0; n + off <= sizeof b; n += n < 40 ? 1 : 37) {
      uint32_t a = rt_tfr_crc32c(0, b + off, n), t = rt_tfr_crc32c_table(0, b + off, n);
      uint32_t split = rt_tfr_crc32c(rt_tfr_crc32c(0, b + off, n / 3), b + off + n / 3, n - n / 3);
      if (a != t || split != t) {
        fprintf(stderr, "tfr_dump: CRC32C of %zu bytes at +%zu: %08x, table %08x, in two parts %08x\n", n, off, a, t, split);
        return 1;
      }
    }
  printf("crc ok\n");
  return 0;
}

int main(int argc, char **argv) {
  if (argc == 2 && !strcmp(argv[1], "--crc")) return crc_check();
  if (argc < 2) {
    fprintf(stderr, "usage: tfr_dump DIR [--test] [--threads N] [--describe I] | tfr_dump --crc\n");
    return 2;
  }
  int test = 0, nthreads = 1;
  int64_t describe = -1;
  for (int a = 2; a < argc; a++) {
    if (!strcmp(argv[a], "--test")) test = 1;
    else if (!strcmp(argv[a], "--threads") && a + 1 < argc) nthreads = atoi(argv[++a]);
    else if (!strcmp(argv[a], "--describe") && a + 1 < argc) describe = atoll(argv[++a]);
    else {
      fprintf(stderr, "tfr_dump: unknown argument %s\n", argv[a]);
      return 2;
    }
  }
  if (nthreads < 1 || nthreads > 64) return 2;
  rt_tfr *t;
  int64_t n;
  cnnrt_status s = rt_tfr_open(argv[1], test, &t, &n);
  if (s != CNNRT_OK) return fail(s, cnnrt_last_error());
  if (describe >= 0) {
    char buf[4400];
    rt_tfr_describe(t, describe, buf, sizeof buf);
    printf("%s\n", buf);
    rt_tfr_close(t);
    return 0;
  }
  int64_t *len = calloc((size_t)n, sizeof *len), *label = calloc((size_t)n, sizeof *label);
  uint64_t *hash = calloc((size_t)n, sizeof *hash);
  job *jobs = calloc((size_t)nthreads, sizeof *jobs);
  pthread_t *th = calloc((size_t)nthreads, sizeof *th);
  if (!len || !label || !hash || !jobs || !th) return fail(CNNRT_OUT_OF_MEMORY, "out of memory");
  for (int k = 0; k < nthreads; k++) {
    jobs[k] = (job){t, n, len, label, hash, k, nthreads, CNNRT_OK, ""};
    if (nthreads == 1) worker(&jobs[k]);
    else if (pthread_create(&th[k], NULL, worker, &jobs[k])) return fail(CNNRT_INTERNAL, "pthread_create failed");
  }
  int rc = 0;
  for (int k = 0; k < nthreads; k++) {
    if (nthreads > 1) pthread_join(th[k], NULL);
    if (jobs[k].s != CNNRT_OK && !rc) rc = fail(jobs[k].s, jobs[k].msg);
  }
  if (!rc) {
    printf("records %" PRId64 "\n", n);
    for (int64_t i = 0; i < n; i++) printf("%" PRId64 " %" PRId64 " %" PRId64 " %016" PRIx64 "\n", i, len[i], label[i], hash[i]);
  }
  rt_tfr_close(t);
  free(len), free(label), free(hash), free(jobs), free(th);
  return rc;
}
