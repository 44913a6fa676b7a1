/* tool_f32.h — shared by the test tools run_interp.c and train_interp.c (a header, not a tool:
 * tests/CMakeLists.txt builds the .c files of tests/tools): reading a raw f32 file. */
#ifndef CNNC_TEST_TOOL_F32_H
#define CNNC_TEST_TOOL_F32_H

#include <stdio.h>

/* read_f32_exact: exactly n f32 values from the file path into x: 0, else a message on stderr
 * (the file cannot be opened, or holds fewer or more values) and -1. */
static int read_f32_exact(const char *path, float *x, size_t n) {
  FILE *f = fopen(path, "rb");
  if (!f) { perror(path); return -1; }
  size_t got = fread(x, sizeof(float), n, f);
  int extra = fgetc(f) != EOF;
  fclose(f);
  if (got != n || extra) {
    fprintf(stderr, "%s: expected exactly %zu f32 values (%zu bytes)\n", path, n, n * sizeof(float));
    return -1;
  }
  return 0;
}

#endif
