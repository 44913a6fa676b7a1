/* rt_sched.c — learning-rate schedules (constant, step, cosine, exponential, each with linear
 * warmup) and the logging period of --logs-per-epoch: pure functions of their arguments,
 * formulas in cnnrt.h. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/cm.h"
#include "rt_internal.h"

/* The schedule without warmup at epoch e. */
static double rt_lr_plain(const cnnrt_lr_schedule *s, double e) {
  double w = s->warmup_epochs > 0 ? s->warmup_epochs : 0;
  switch (s->kind) {
  case CNNRT_LR_CONSTANT: return s->base_lr;
  case CNNRT_LR_STEP: {
    double lr = s->base_lr;
    for (int k = 0; k < s->n_decay && s->decay_epochs; k++)
      if (s->decay_epochs[k] <= e) lr *= s->factor;
    return lr;
  }
  case CNNRT_LR_COSINE: {
    double span = s->total_epochs - w;
    double p = span > 0 ? (e - w) / span : 1;
    p = p < 0 ? 0 : p > 1 ? 1 : p;
    return s->base_lr * 0.5 * (1 + cos(M_PI * p));
  }
  case CNNRT_LR_EXPONENTIAL: return s->base_lr * pow(s->factor, e > w ? e - w : 0);
  }
  return s->base_lr;
}

CNNRT_API double cnnrt_lr_at(const cnnrt_lr_schedule *s, double epoch) {
  if (!s) return 0;
  if (!(epoch >= 0)) epoch = 0;
  if (s->warmup_epochs > 0 && epoch < s->warmup_epochs)
    return rt_lr_plain(s, s->warmup_epochs) * epoch / s->warmup_epochs;
  return rt_lr_plain(s, epoch);
}

CNNRT_API cnnrt_status cnnrt_lr_kind_parse(const char *name, cnnrt_lr_kind *kind) {
  static const char *const names[] = {"constant", "step", "cosine", "exponential"};
  rt_clear_error();
  for (int k = 0; name && kind && k < 4; k++)
    if (!strcmp(name, names[k])) {
      *kind = (cnnrt_lr_kind)k;
      return CNNRT_OK;
    }
  return rt_fail(CNNRT_INVALID_ARGUMENT, "unknown learning-rate schedule '%s' (constant, step, cosine, exponential)",
                 name ? name : "(null)");
}

CNNRT_API cnnrt_status cnnrt_parse_fraction(const char *text, double *out) {
  rt_clear_error();
  if (!text || !out) return rt_fail(CNNRT_INVALID_ARGUMENT, "cnnrt_parse_fraction: NULL argument");
  /* A or A/B, each a decimal number by cm_num_scan (no hex, inf, nan: common/cm.h) */
  char a[64];
  const char *slash = strchr(text, '/');
  size_t la = slash ? (size_t)(slash - text) : strlen(text);
  double v = NAN;
  if (la < sizeof a) {
    memcpy(a, text, la), a[la] = 0;
    cm_num x = cm_num_scan(a), y = slash ? cm_num_scan(slash + 1) : (cm_num){CM_INT, 1, 1};
    if ((x.kind == CM_INT || x.kind == CM_REAL) && (y.kind == CM_INT || y.kind == CM_REAL) && y.f != 0) v = x.f / y.f;
  }
  if (!isfinite(v) || v <= 0)
    return rt_fail(CNNRT_INVALID_ARGUMENT, "'%s' is not a positive number or fraction (e.g. 4, 0.5, 1/2)", text);
  *out = v;
  return CNNRT_OK;
}

/* Among the divisors d of spe, the one whose frequency spe/d is nearest to x (ties: more logs). */
static int64_t rt_nearest_divisor(int64_t spe, double x) {
  int64_t best = spe;
  double best_err = INFINITY;
  for (int64_t d = 1; d * d <= spe; d++) {
    if (spe % d) continue;
    int64_t cand[2] = {d, spe / d};
    for (int k = 0; k < 2; k++) {
      double err = fabs((double)spe / (double)cand[k] - x);
      if (err < best_err - 1e-12 || (fabs(err - best_err) <= 1e-12 && cand[k] < best)) best = cand[k], best_err = err;
    }
  }
  return best;
}

CNNRT_API cnnrt_status cnnrt_log_period(double logs_per_epoch, int64_t steps_per_epoch, int epochs, cnnrt_log_plan *out) {
  rt_clear_error();
  if (!out) return rt_fail(CNNRT_INVALID_ARGUMENT, "cnnrt_log_period: out is NULL");
  if (!(logs_per_epoch > 0) || !isfinite(logs_per_epoch))
    return rt_fail(CNNRT_INVALID_ARGUMENT, "--logs-per-epoch must be positive (got %g)", logs_per_epoch);
  if (steps_per_epoch < 1 || epochs < 1)
    return rt_fail(CNNRT_INVALID_ARGUMENT, "cnnrt_log_period: %lld steps per epoch, %d epochs", (long long)steps_per_epoch,
                   epochs);
  memset(out, 0, sizeof *out);
  if (logs_per_epoch < 1) {
    double epochs_per_log = 1 / logs_per_epoch;
    double whole = floor(epochs_per_log + 0.5);
    if (fabs(epochs_per_log - whole) > 1e-9 || fmod((double)epochs, whole) != 0)
      return rt_fail(CNNRT_INVALID_ARGUMENT, "It is not possible to log %.1f epochs a time for %d epochs", epochs_per_log,
                     epochs);
    out->steps_per_log = (int64_t)whole * steps_per_epoch;
    out->logs_per_epoch = 1 / whole;
    return CNNRT_OK;
  }
  int64_t d = rt_nearest_divisor(steps_per_epoch, logs_per_epoch);
  out->steps_per_log = d;
  out->logs_per_epoch = (double)(steps_per_epoch / d);
  out->rounded = fabs(out->logs_per_epoch - logs_per_epoch) > 1e-9;
  return CNNRT_OK;
}
