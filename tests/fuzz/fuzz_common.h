/* fuzz_common.h — shared by the fuzz harnesses (tests/fuzz/fuzz_*.c): the readers under test
 * take file paths, so each input is written to a file in a per-process temporary directory
 * (under /dev/shm when it exists), removed at exit.  Harnesses define LLVMFuzzerTestOneInput;
 * with -DCNNC_FUZZ=ON libFuzzer drives them, otherwise replay_main.c replays files. */
#ifndef CNNC_FUZZ_COMMON_H
#define CNNC_FUZZ_COMMON_H

#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char fz_root[256];

static __attribute__((unused)) void fz_cleanup(void) {
  DIR *d = fz_root[0] ? opendir(fz_root) : NULL;
  if (!d) return;
  struct dirent *e;
  char p[600];
  while ((e = readdir(d))) {
    if (e->d_name[0] == '.') continue;
    snprintf(p, sizeof p, "%s/%s", fz_root, e->d_name);
    DIR *sub = opendir(p);
    if (sub) { /* one level of subdirectories (dataset directories) */
      struct dirent *f;
      char q[900];
      while ((f = readdir(sub)))
        if (f->d_name[0] != '.') snprintf(q, sizeof q, "%s/%s", p, f->d_name), unlink(q);
      closedir(sub);
      rmdir(p);
    } else {
      unlink(p);
    }
  }
  closedir(d);
  rmdir(fz_root);
}

/* The per-process directory (created on the first call). */
static __attribute__((unused)) const char *fz_dir(void) {
  if (fz_root[0]) return fz_root;
  struct stat st;
  const char *base = stat("/dev/shm", &st) == 0 && S_ISDIR(st.st_mode) && access("/dev/shm", W_OK) == 0 ? "/dev/shm"
                     : getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
  snprintf(fz_root, sizeof fz_root, "%s/cnnc-fuzz-XXXXXX", base);
  if (!mkdtemp(fz_root)) {
    perror("fuzz: mkdtemp");
    abort();
  }
  atexit(fz_cleanup);
  return fz_root;
}

/* Writes size bytes to DIR/name (name may hold one '/', its directory is created); the
 * path goes to out. */
static __attribute__((unused)) void fz_write(const char *name, const void *data, size_t size, char *out, size_t n) {
  snprintf(out, n, "%s/%s", fz_dir(), name);
  char *slash = strrchr(out, '/');
  if (slash && slash > out + strlen(fz_root)) {
    *slash = 0;
    mkdir(out, 0700);
    *slash = '/';
  }
  FILE *f = fopen(out, "wb");
  if (!f || (size && fwrite(data, 1, size, f) != size) || fclose(f) != 0) {
    perror(out);
    abort();
  }
}

static __attribute__((unused)) void fz_remove(const char *path) { unlink(path); }

#endif
