/* pipeline.c — the graph passes of a compile, in order, in one place.  Each runs once; the IR
 * verifier runs after each in debug builds (NDEBUG undefined, e.g. CMAKE_BUILD_TYPE=Debug) and
 * with tune verify=1; --emit ir-after=NAME stops after the pass
 * NAME (the driver prints the graph).  What follows (16-bit inference storage, the memory
 * check, fusion, layout and code generation) is the back end's, called by tools/compile.c. */
#include <stdio.h>
#include <string.h>

#include "passes/passes.h"

/* Every pass an ir-after name may give, in pipeline order. */
static const char *const pass_names[] = {"precision", "autodiff", "optimizer", "split", "recompute", "store16"};
#define N_PASS_NAMES (int)(sizeof pass_names / sizeof pass_names[0])

int pass_pipeline_check_stop(const char *name, int training, ir_diag *d) {
  if (!name) return 0;
  for (int i = 0; i < N_PASS_NAMES; i++)
    if (!strcmp(name, pass_names[i])) {
      int train_only = !strcmp(name, "autodiff") || !strcmp(name, "optimizer") || !strcmp(name, "recompute");
      if (train_only && !training)
        return ir_diag_set(d, (ir_loc){0}, NULL, "--emit ir-after=%s: that pass runs in --mode training only", name);
      return 0;
    }
  return ir_diag_set(d, (ir_loc){0}, NULL, "--emit ir-after=%s: no such pass (precision, autodiff, optimizer, split, "
                     "recompute, store16)", name);
}

#ifdef NDEBUG
#define PIPELINE_VERIFY 0
#else
#define PIPELINE_VERIFY 1 /* debug builds check every pass's result */
#endif

/* After pass name: verify (debug builds, tune verify) and say whether the pipeline stops here. */
static int after(ir_graph *g, const char *name, const pass_pipeline_opts *o, int *stopped, ir_diag *d) {
  if ((PIPELINE_VERIFY || ir_tune(g)->verify) && ir_verify(g, d) < 0) return -1;
  if (o->stop_after && !strcmp(o->stop_after, name)) *stopped = 1;
  return 0;
}

#define PASS(name, call)                                                  \
  do {                                                                    \
    if ((call) < 0 || after(g, name, o, stopped, d) < 0) return -1;       \
    if (*stopped) return 0;                                               \
  } while (0)

int pass_pipeline(ir_graph *g, const pass_pipeline_opts *o, int *stopped, ir_diag *d) {
  *stopped = 0;
  if (pass_pipeline_check_stop(o->stop_after, o->training, d)) return -1;
  /* --precision 16.x: round16 nodes on the forward graph, before autodiff (docs/precision.md) */
  int int8 = o->precision && !strcmp(o->precision, "int8"); /* int8: quantize.c, in the precision slot */
  /* u8 input: the normalisation into the first conv, before the 16-bit rounding (the folded
   * weights are rounded then, the raw 0..255 input is on every 16-bit grid) */
  if (!o->training && !int8) pass_fold_normalize(g);
  PASS("precision", int8 ? pass_quantize8(g, o->calib, o->calib_n, o->log, d)
                         : pass_precision(g, o->precision, o->half_type, o->training, d));
  if (!o->training) {
    PASS("split", pass_split(g, o->splits, o->n_splits, o->shards, d));
    return 0; /* store16 (inference): codegen/gen_store16.c, which asks the kernels */
  }
  /* training: backward graph, optimizer update, split, recomputation (docs/training.md) */
  PASS("autodiff", pass_autodiff(g, o->optim.loss_scale, d));
  PASS("optimizer", pass_optimizer(g, &o->optim, d));
  PASS("split", pass_split_train(g, o->splits, o->n_splits, o->shards, d));
  PASS("recompute", pass_recompute(g, o->recompute, d));
  if (o->store16_fmt >= 0 && !pass_store16_disabled(g)) { /* the 16-bit stash (store16.c) */
    pass_store16_stats st = {.log = o->log};
    PASS("store16", pass_store16_train(g, o->store16_fmt, &st, d));
    if (o->log)
      fprintf(o->log, "cnnc: 16-bit storage: %d values (%d keep-sign) %lld -> %lld bytes; %d values, %lld bytes stay f32; "
              "%d weight copies (%lld bytes) re-rounded, not stashed\n", st.values, st.keep_sign, (long long)st.bytes32,
              (long long)st.bytes32 / 2, st.f32_values, (long long)st.f32_bytes, st.recomputed,
              (long long)st.recomputed_bytes);
  } else if (o->stop_after && !strcmp(o->stop_after, "store16")) {
    *stopped = 1; /* no 16-bit stash: the graph after store16 is the one before it */
  }
  return 0;
}
