/* check.h — the unit tests' one assertion macro: CHECK(cond, fmt, ...) counts the check in
 * g_checks and, when cond is false, reports file:line and the message and counts the failure
 * in g_failures, so a test runs every case and main() returns g_failures != 0
 * (check_done).  CHECK_INTO(count, cond, fmt, ...) is the same report counted in another
 * variable (test_codegen_harness.h's CGT_CHECK).  Include once per test executable. */
#ifndef CNNC_TEST_CHECK_H
#define CNNC_TEST_CHECK_H

#include <stdio.h>

static int g_failures __attribute__((unused));
static int g_checks __attribute__((unused));

#define CHECK_INTO(count, cond, ...)                  \
  do {                                                \
    if (!(cond)) {                                    \
      fprintf(stderr, "%s:%d: ", __FILE__, __LINE__); \
      fprintf(stderr, __VA_ARGS__);                   \
      fputc('\n', stderr);                            \
      (count)++;                                      \
    }                                                 \
  } while (0)

#define CHECK(cond, ...)                       \
  do {                                         \
    g_checks++;                                \
    CHECK_INTO(g_failures, cond, __VA_ARGS__); \
  } while (0)

/* The end of main(): "<test>: N failure(s)" or "<test>: ok"; the exit status. */
static inline int check_done(const char *test, int failures) {
  if (failures) fprintf(stderr, "%s: %d failure(s)\n", test, failures);
  else fprintf(stderr, "%s: ok\n", test);
  return failures != 0;
}

#endif
