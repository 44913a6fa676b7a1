/* rt_case_check.h — shared by the runtime tests that compile their models with the cnnc binary
 * (test_runtime_exec.c, test_runtime_hugepages.c, test_runtime_options.c): a scratch directory,
 * models written there and compiled by cnnc, and a counting cnnrt_allocator.  Include after
 * check.h. */
#ifndef CNNC_TEST_RT_CASE_CHECK_H
#define CNNC_TEST_RT_CASE_CHECK_H

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

/* A new directory <$TMPDIR or /tmp>/<tag>-XXXXXX in dir (cap bytes) and the paths of its files:
 * path[i] = <dir>/<file[i]> (RT_PATH bytes each) for i < n.  0, or 1 with the reason on stderr. */
enum { RT_PATH = 300 };
static inline int rt_tmpdir(char *dir, size_t cap, const char *tag, char *const *path, const char *const *file, int n) {
  const char *t = getenv("TMPDIR");
  snprintf(dir, cap, "%s/%s-XXXXXX", t && *t ? t : "/tmp", tag);
  if (!mkdtemp(dir)) {
    perror("mkdtemp");
    return 1;
  }
  for (int i = 0; i < n; i++) snprintf(path[i], RT_PATH, "%s/%s", dir, file[i]);
  return 0;
}

/* The files of rt_tmpdir and the directory removed. */
static inline void rt_rmdir(const char *dir, char *const *path, int n) {
  for (int i = 0; i < n; i++) unlink(path[i]);
  rmdir(dir);
}

/* text written to path: 1, or 0 with the reason on stderr. */
static inline int rt_write(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  if (!f || fputs(text, f) < 0 || fclose(f)) {
    perror(path);
    return 0;
  }
  return 1;
}

/* cnnc <in> <args> -o <out> (the build's cnnc): 1 when it succeeds (checked). */
static inline int rt_cnnc(const char *in, const char *out, const char *args) {
  char cmd[2048];
  snprintf(cmd, sizeof cmd, "%s/cnnc %s %s -o %s", CNNC_TEST_BIN, in, args, out);
  int rc = system(cmd);
  CHECK(rc == 0, "%s failed (%d)", cmd, rc);
  return rc == 0;
}

/* A cnnrt_allocator (count_alloc, count_free, &c) that counts its calls: misaligned, requests of
 * an alignment under 64 or a size not a multiple of it; not64, of another alignment than 64;
 * biggest, the largest size asked for. */
typedef struct counting_alloc {
  pthread_mutex_t mu;
  int allocs, frees, misaligned, not64;
  size_t biggest;
} counting_alloc;

static inline void *count_alloc(void *ctx, size_t size, size_t align) {
  counting_alloc *c = ctx;
  pthread_mutex_lock(&c->mu);
  c->allocs++;
  c->misaligned += align < 64 || (size % align) != 0;
  c->not64 += align != 64;
  if (size > c->biggest) c->biggest = size;
  pthread_mutex_unlock(&c->mu);
  return aligned_alloc(align, (size + align - 1) / align * align);
}

static inline void count_free(void *ctx, void *p) {
  counting_alloc *c = ctx;
  pthread_mutex_lock(&c->mu);
  c->frees++;
  pthread_mutex_unlock(&c->mu);
  free(p);
}

#endif
