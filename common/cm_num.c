/* cm_num.c — the one number parser of the command lines and the model file: a strict decimal
 * syntax (no spaces, hex, inf or nan, nothing after the number), integers kept apart from
 * reals, overflow reported instead of clamped, and the range check with its message. */
#include <errno.h>
#include <stdint.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cm.h"

static const char *digits(const char *p) {
  while (*p >= '0' && *p <= '9') p++;
  return p;
}

cm_num cm_num_scan(const char *s) {
  cm_num x = {CM_NOT_NUMBER, 0, 0};
  if (!s) return x;
  const char *p = s;
  if (*p == '+' || *p == '-') p++;
  const char *a = p, *b = digits(p);
  int n_digits = (int)(b - a), real = 0;
  p = b;
  if (*p == '.') {
    real = 1;
    const char *c = digits(p + 1);
    n_digits += (int)(c - p - 1);
    p = c;
  }
  if (!n_digits) return x;
  if (*p == 'e' || *p == 'E') {
    real = 1;
    p++;
    if (*p == '+' || *p == '-') p++;
    const char *c = digits(p);
    if (c == p) return x;
    p = c;
  }
  if (*p) return x;
  char *end;
  errno = 0;
  if (!real) {
    long long v = strtoll(s, &end, 10);
    if (errno) return (cm_num){CM_INT_RANGE, 0, 0};
    return (cm_num){CM_INT, v, (double)v};
  }
  double d = strtod(s, &end);
  if (errno || !isfinite(d)) return (cm_num){CM_REAL_RANGE, 0, 0};
  return (cm_num){CM_REAL, 0, d};
}

const char *cm_num_rule(double lo, double hi, int flags, char *buf, size_t n) {
  int integer = flags & CM_NUM_INTEGER, has_lo = !isinf(lo), has_hi = !isinf(hi);
  const char *what = integer ? "an integer" : "a number";
  const char *gt = flags & CM_NUM_LO_OPEN ? ">" : ">=", *lt = flags & CM_NUM_HI_OPEN ? "<" : "<=";
  if (integer && has_lo && has_hi) /* (double)INT64_MAX prints as 2^63 */
    snprintf(buf, n, "%s in %lld..%lld", what, (long long)lo, hi >= 9.2e18 ? (long long)INT64_MAX : (long long)hi);
  else if (has_lo && has_hi) snprintf(buf, n, "%s %s %.10g and %s %.10g", what, gt, lo, lt, hi);
  else if (has_lo) snprintf(buf, n, "%s %s %.10g", what, gt, lo);
  else if (has_hi) snprintf(buf, n, "%s %s %.10g", what, lt, hi);
  else snprintf(buf, n, "%s", what);
  return buf;
}

int cm_num_parse(const char *s, double lo, double hi, int flags, double *v, int64_t *iv, char *why, size_t n) {
  cm_num x = cm_num_scan(s);
  int ok = x.kind == CM_INT || (x.kind == CM_REAL && !(flags & CM_NUM_INTEGER));
  if (ok) {
    ok = flags & CM_NUM_LO_OPEN ? x.f > lo : x.f >= lo;
    ok = ok && (flags & CM_NUM_HI_OPEN ? x.f < hi : x.f <= hi);
  }
  if (!ok) {
    char rule[160];
    if (why)
      snprintf(why, n, "must be %s (got '%.60s'%s)", cm_num_rule(lo, hi, flags, rule, sizeof rule), s ? s : "",
               x.kind == CM_INT_RANGE || x.kind == CM_REAL_RANGE ? ": out of range" : "");
    return -1;
  }
  if (v) *v = x.f;
  if (iv) *iv = x.kind == CM_INT ? x.i : (int64_t)x.f;
  return 0;
}
