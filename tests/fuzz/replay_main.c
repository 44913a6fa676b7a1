/* replay_main.c — the driver of a fuzz harness built without libFuzzer: runs
 * LLVMFuzzerTestOneInput on every file named on the command line and on every file of every
 * directory named (one level), so the regression corpus (tests/fuzz/regress/<harness>/) and
 * the seeds replay in the ordinary test suite.  Prints "N passed, 0 failed"; a crash is the
 * failure. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv) __attribute__((weak));

static int run_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    fprintf(stderr, "replay: cannot open %s\n", path);
    return -1;
  }
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  rewind(f);
  uint8_t *b = malloc(n > 0 ? (size_t)n : 1);
  if (!b || (n > 0 && fread(b, 1, (size_t)n, f) != (size_t)n)) {
    fprintf(stderr, "replay: cannot read %s\n", path);
    fclose(f);
    free(b);
    return -1;
  }
  fclose(f);
  LLVMFuzzerTestOneInput(b, (size_t)n);
  free(b);
  return 1;
}

static int cmp(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

int main(int argc, char **argv) {
  if (LLVMFuzzerInitialize) LLVMFuzzerInitialize(&argc, &argv);
  int runs = 0, bad = 0, verbose = getenv("CNNC_FUZZ_VERBOSE") != NULL;
  for (int i = 1; i < argc; i++) {
    struct stat st;
    if (stat(argv[i], &st) != 0) {
      fprintf(stderr, "replay: no %s\n", argv[i]);
      bad++;
      continue;
    }
    if (!S_ISDIR(st.st_mode)) {
      int r = run_file(argv[i]);
      r > 0 ? runs++ : bad++;
      continue;
    }
    DIR *d = opendir(argv[i]);
    struct dirent *e;
    char **names = NULL;
    size_t k = 0, cap = 0;
    while (d && (e = readdir(d))) {
      if (e->d_name[0] == '.') continue;
      if (k == cap) names = realloc(names, (cap = cap ? 2 * cap : 64) * sizeof *names);
      names[k++] = strdup(e->d_name);
    }
    if (d) closedir(d);
    if (k > 1) qsort(names, k, sizeof *names, cmp);
    for (size_t j = 0; j < k; j++) {
      char p[4096];
      snprintf(p, sizeof p, "%s/%s", argv[i], names[j]);
      struct stat fs;
      if (stat(p, &fs) == 0 && S_ISREG(fs.st_mode)) {
        if (verbose) fprintf(stderr, "replay: %s\n", p);
        int r = run_file(p);
        r > 0 ? runs++ : bad++;
      }
      free(names[j]);
    }
    free(names);
  }
  printf("%d passed, %d failed\n", runs, bad);
  return bad ? 1 : 0;
}
