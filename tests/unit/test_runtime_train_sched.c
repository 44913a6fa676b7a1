/* test_runtime_train_sched.c — learning-rate schedules against hand-computed values, the
 * --logs-per-epoch period (rounding to a divisor of the epoch, "1/2" values, the error for an
 * epoch count that is not a multiple), and fraction parsing. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "runtime/cnnrt.h"

#include "check.h"

#define NEAR(got, want) CHECK(fabs((got) - (want)) <= 1e-12 * (1 + fabs(want)), "%s = %.15g, want %.15g", #got, (double)(got), (double)(want))

static void test_constant_and_warmup(void) {
  cnnrt_lr_schedule s = {.kind = CNNRT_LR_CONSTANT, .base_lr = 0.1};
  NEAR(cnnrt_lr_at(&s, 0), 0.1);
  NEAR(cnnrt_lr_at(&s, 7.5), 0.1);
  s.warmup_epochs = 2;
  NEAR(cnnrt_lr_at(&s, 0), 0.0);
  NEAR(cnnrt_lr_at(&s, 0.5), 0.025); /* 0.1 * 0.5 / 2 */
  NEAR(cnnrt_lr_at(&s, 1.5), 0.075);
  NEAR(cnnrt_lr_at(&s, 2), 0.1);
  NEAR(cnnrt_lr_at(&s, -1), 0.0); /* negative epochs clamp to 0 */
}

static void test_step(void) {
  double decay[] = {3, 6};
  cnnrt_lr_schedule s = {.kind = CNNRT_LR_STEP, .base_lr = 0.5, .factor = 0.1, .n_decay = 2, .decay_epochs = decay};
  NEAR(cnnrt_lr_at(&s, 0), 0.5);
  NEAR(cnnrt_lr_at(&s, 2.999), 0.5);
  NEAR(cnnrt_lr_at(&s, 3), 0.05);
  NEAR(cnnrt_lr_at(&s, 5), 0.05);
  NEAR(cnnrt_lr_at(&s, 6), 0.005);
  s.warmup_epochs = 1; /* warmup ramps towards lr(1) = 0.5 */
  NEAR(cnnrt_lr_at(&s, 0.25), 0.125);
  NEAR(cnnrt_lr_at(&s, 4), 0.05);
}

static void test_cosine(void) {
  cnnrt_lr_schedule s = {.kind = CNNRT_LR_COSINE, .base_lr = 0.2, .total_epochs = 10};
  NEAR(cnnrt_lr_at(&s, 0), 0.2);
  NEAR(cnnrt_lr_at(&s, 5), 0.1);                           /* (1 + cos(pi/2)) / 2 = 0.5 */
  NEAR(cnnrt_lr_at(&s, 2.5), 0.2 * (1 + sqrt(0.5)) / 2);   /* cos(pi/4) */
  NEAR(cnnrt_lr_at(&s, 10), 0.0);
  NEAR(cnnrt_lr_at(&s, 12), 0.0);
  s.warmup_epochs = 2; /* cosine over [2, 10] */
  NEAR(cnnrt_lr_at(&s, 1), 0.1);
  NEAR(cnnrt_lr_at(&s, 2), 0.2);
  NEAR(cnnrt_lr_at(&s, 6), 0.1);
  NEAR(cnnrt_lr_at(&s, 4), 0.2 * (1 + sqrt(0.5)) / 2);
}

static void test_exponential(void) {
  cnnrt_lr_schedule s = {.kind = CNNRT_LR_EXPONENTIAL, .base_lr = 1.0, .factor = 0.5};
  NEAR(cnnrt_lr_at(&s, 0), 1.0);
  NEAR(cnnrt_lr_at(&s, 1), 0.5);
  NEAR(cnnrt_lr_at(&s, 3), 0.125);
  NEAR(cnnrt_lr_at(&s, 1.5), sqrt(0.125));
  s.warmup_epochs = 1;
  NEAR(cnnrt_lr_at(&s, 0.5), 0.5);
  NEAR(cnnrt_lr_at(&s, 2), 0.5);
  cnnrt_lr_kind k;
  CHECK(cnnrt_lr_kind_parse("cosine", &k) == CNNRT_OK && k == CNNRT_LR_COSINE, "parse cosine");
  CHECK(cnnrt_lr_kind_parse("linear", &k) == CNNRT_INVALID_ARGUMENT, "parse linear");
  CHECK(strstr(cnnrt_last_error(), "'linear'"), "message: %s", cnnrt_last_error());
}

static void test_log_period(void) {
  cnnrt_log_plan p;
  CHECK(cnnrt_log_period(1, 100, 3, &p) == CNNRT_OK && p.steps_per_log == 100 && !p.rounded, "1 per epoch");
  CHECK(cnnrt_log_period(4, 100, 3, &p) == CNNRT_OK && p.steps_per_log == 25 && !p.rounded, "4 per epoch");
  /* 3 logs in 100 steps: feasible frequencies 1,2,4,5,10,20,25,50,100 -> 2 and 4 tie, more wins */
  CHECK(cnnrt_log_period(3, 100, 3, &p) == CNNRT_OK && p.steps_per_log == 25 && p.rounded && p.logs_per_epoch == 4,
        "3 per epoch -> %lld steps (%g)", (long long)p.steps_per_log, p.logs_per_epoch);
  CHECK(cnnrt_log_period(7, 60, 1, &p) == CNNRT_OK && p.steps_per_log == 10 && p.logs_per_epoch == 6, "7 of 60 -> 6");
  CHECK(cnnrt_log_period(1000, 60, 1, &p) == CNNRT_OK && p.steps_per_log == 1 && p.logs_per_epoch == 60, "capped at every step");
  CHECK(cnnrt_log_period(2, 7, 1, &p) == CNNRT_OK && p.steps_per_log == 7 && p.logs_per_epoch == 1 && p.rounded, "prime epoch");
  CHECK(cnnrt_log_period(0.5, 100, 4, &p) == CNNRT_OK && p.steps_per_log == 200 && !p.rounded, "1/2: every 2 epochs");
  CHECK(cnnrt_log_period(0.25, 10, 8, &p) == CNNRT_OK && p.steps_per_log == 40, "1/4 over 8 epochs");
  CHECK(cnnrt_log_period(0.5, 100, 5, &p) == CNNRT_INVALID_ARGUMENT, "1/2 over 5 epochs");
  CHECK(!strcmp(cnnrt_last_error(), "It is not possible to log 2.0 epochs a time for 5 epochs"), "message: %s",
        cnnrt_last_error());
  CHECK(cnnrt_log_period(0.4, 100, 10, &p) == CNNRT_INVALID_ARGUMENT, "2.5 epochs a time");
  CHECK(strstr(cnnrt_last_error(), "2.5 epochs a time for 10 epochs"), "message: %s", cnnrt_last_error());
  CHECK(cnnrt_log_period(0, 100, 1, &p) == CNNRT_INVALID_ARGUMENT, "0 logs");
  CHECK(cnnrt_log_period(1, 0, 1, &p) == CNNRT_INVALID_ARGUMENT, "0 steps per epoch");
  double v;
  CHECK(cnnrt_parse_fraction("1/2", &v) == CNNRT_OK && v == 0.5, "1/2");
  CHECK(cnnrt_parse_fraction("4", &v) == CNNRT_OK && v == 4, "4");
  CHECK(cnnrt_parse_fraction("0.25", &v) == CNNRT_OK && v == 0.25, "0.25");
  CHECK(cnnrt_parse_fraction("1/0", &v) == CNNRT_INVALID_ARGUMENT, "1/0");
  CHECK(cnnrt_parse_fraction("-2", &v) == CNNRT_INVALID_ARGUMENT, "-2");
  CHECK(cnnrt_parse_fraction("2x", &v) == CNNRT_INVALID_ARGUMENT, "2x");
  CHECK(cnnrt_parse_fraction("", &v) == CNNRT_INVALID_ARGUMENT, "empty");
}

int main(void) {
  test_constant_and_warmup();
  test_step();
  test_cosine();
  test_exponential();
  test_log_period();
  printf("%d checks, %d failed\n", g_checks, g_failures);
  return g_failures != 0;
}
