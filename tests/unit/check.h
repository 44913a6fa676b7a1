/* check.h — the unit tests' one assertion macro: CHECK(cond, fmt, ...) counts the check in
 * g_checks and, when cond is false, reports file:line and the message and counts the failure
 * in g_failures, so a test runs every case and main() returns g_failures != 0.  Include once
 * per test executable. */
#ifndef CNNC_TEST_CHECK_H
#define CNNC_TEST_CHECK_H

#include <stdio.h>

static int g_failures;
static int g_checks __attribute__((unused));

#define CHECK(cond, ...)                              \
  do {                                                \
    g_checks++;                                       \
    if (!(cond)) {                                    \
      fprintf(stderr, "%s:%d: ", __FILE__, __LINE__); \
      fprintf(stderr, __VA_ARGS__);                   \
      fputc('\n', stderr);                            \
      g_failures++;                                   \
    }                                                 \
  } while (0)

#endif
