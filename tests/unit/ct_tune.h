/* ct_tune.h — the tuning knobs (ir/tuning.def) of a test's in-process compiles.  ct_tune()
 * sets knobs ("name=value,..."; aborts on a bad item), ct_tune_reset() restores the defaults
 * (then CNNC_TUNE from the test's environment, so a CTest ENVIRONMENT can steer a whole test),
 * and ct_g(g) makes g compile with them: cg_compile(ct_g(g), ...), cnnc_build_model(ct_g(g), ...)
 * (the driver applies the options' --tune items on top).  Include once per test executable. */
#ifndef CNNC_TEST_CT_TUNE_H
#define CNNC_TEST_CT_TUNE_H

#include <stdio.h>
#include <stdlib.h>

#include "ir/ir.h"

static ir_tuning ct_tuning;
static int ct_tuning_ready;

static inline void ct_tune_reset(void) {
  ct_tuning = ir_tune_defaults;
  ct_tuning_ready = 1;
  const char *e = getenv("CNNC_TUNE");
  ir_diag d = {0};
  if (e && *e && ir_tune_set(&ct_tuning, e, &d)) {
    fprintf(stderr, "CNNC_TUNE='%s': %s\n", e, d.msg);
    abort();
  }
}

static inline void ct_tune(const char *items) {
  if (!ct_tuning_ready) ct_tune_reset();
  ir_diag d = {0};
  if (ir_tune_set(&ct_tuning, items, &d)) {
    fprintf(stderr, "ct_tune('%s'): %s\n", items, d.msg);
    abort();
  }
}

static inline ir_graph *ct_g(ir_graph *g) {
  if (!ct_tuning_ready) ct_tune_reset();
  g->tune = &ct_tuning;
  return g;
}

#endif
