/* compile.c — a whole compile as one call (tools/compile.h): the options checked, the tuning
 * knobs resolved, the graph passes (passes/pipeline.c), then the back end: the target, 16-bit
 * inference storage, the memory check and code generation (codegen/), or a dump of a stage. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "runtime/cnnc_abi.h"
#include "tools/compile.h"
#include "codegen/cg.h"
#include "codegen/cg_budget.h"
#include "codegen/gen_store16.h"
#include "frontend/fe.h"
#include "passes/passes.h"


static double seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* --half-type as the IR's format. */
static int half_format(const fe_options *o) { return o->half_type == FE_HALF_FP16 ? IR_HALF_FP16 : IR_HALF_BF16; }

/* Options this back end cannot honour yet. */
static int check_options(const fe_options *o, ir_diag *d) {
  ir_loc loc = {0};
  int train = o->mode == FE_MODE_TRAINING, p16 = o->precision == FE_PRECISION_16_32 || o->precision == FE_PRECISION_16_16;
  if (o->precision == FE_PRECISION_INT8 && train)
    return ir_diag_set(d, loc, NULL, "--precision int8 is for inference: an int8 model does not train (train in 32.32 or 16.x, "
                                     "then compile the checkpoint with --weights and --precision int8)");
  if (o->precision == FE_PRECISION_INT8 && !o->calibrate[0])
    return ir_diag_set(d, loc, NULL, "--precision int8 needs --calibrate FILE: raw input samples whose activation ranges "
                                     "set the int8 scales");
  if (o->calibrate[0] && o->precision != FE_PRECISION_INT8)
    return ir_diag_set(d, loc, NULL, "--calibrate sets the scales of --precision int8; this compile is --precision %s",
                       fe_optval_text(o->precision));
  if (o->calibrate_samples < 1 || o->calibrate_samples > 4096)
    return ir_diag_set(d, loc, NULL, "--calibrate-samples %lld: must be in 1..4096", (long long)o->calibrate_samples);
  if (train && (o->gradient_accumulation < 1 || o->gradient_accumulation > 4096))
    return ir_diag_set(d, loc, NULL, "--gradient-accumulation %lld: must be in 1..4096", (long long)o->gradient_accumulation);
  if (train && (o->replicas < 1 || o->replicas > 64))
    return ir_diag_set(d, loc, NULL, "--replicas %lld: must be in 1..64", (long long)o->replicas);
  if (o->enable_stochastic_rounding && !(train && o->precision == FE_PRECISION_16_16))
    return ir_diag_set(d, loc, NULL, "--enable-stochastic-rounding rounds the 16-bit weight update: it needs "
                                     "--precision 16.16 --mode training (16.32 keeps f32 master weights)");
  if (o->auto_loss_scaling && !(train && p16))
    return ir_diag_set(d, loc, NULL, "--auto-loss-scaling protects 16-bit gradients from overflow and underflow: it needs "
                                     "--mode training and --precision 16.32 or 16.16 (with 32.32 use a fixed --loss-scaling S)");
  if (o->auto_loss_scaling && (o->loss_scaling_interval < 1 || o->loss_scaling_interval > 1000000000))
    return ir_diag_set(d, loc, NULL, "--loss-scaling-interval %lld: must be in 1..1000000000", (long long)o->loss_scaling_interval);
  if (o->enable_half_partials && !p16)
    return ir_diag_set(d, loc, NULL, "--enable-half-partials stores partial sums in the 16-bit --half-type: it needs "
                                     "--precision 16.32 or 16.16");
  if (o->mixed_labels && !train)
    return ir_diag_set(d, loc, NULL, "--mixed-labels changes the training loss's labels: it needs --mode training");
  if (!train && (o->gradient_accumulation != 1 || o->replicas != 1 || o->recompute != FE_RECOMPUTE_NONE ||
                 o->pipeline_schedule != FE_SCHEDULE_SEQUENTIAL))
    return ir_diag_set(d, loc, NULL,
                       "--gradient-accumulation, --replicas, --recompute and --pipeline-schedule need --mode training");
  return 0;
}

int cnnc_build_model(ir_graph *g, const fe_options *o, const char *output, const char *emit, int verbose,
                   ir_diag *d) {
  return cnnc_build_model_report(g, o, output, emit, verbose, NULL, d);
}

/* The pass options of o (the IR passes of passes/pipeline.c). */
static pass_pipeline_opts pipeline_opts(const fe_options *o, const char *stop_after, int verbose) {
  pass_pipeline_opts p = {0};
  p.training = o->mode == FE_MODE_TRAINING;
  p.precision = fe_optval_text(o->precision), p.half_type = fe_optval_text(o->half_type);
  p.splits = o->pipeline_splits.v, p.n_splits = o->pipeline_splits.n, p.shards = (int)o->shards;
  p.recompute = fe_optval_text(o->recompute);
  p.stop_after = stop_after;
  p.log = verbose ? stderr : NULL;
  p.store16_fmt = p.training && (o->precision == FE_PRECISION_16_32 || o->precision == FE_PRECISION_16_16) ? half_format(o) : -1;
  pass_optim_cfg *cfg = &p.optim;
  cfg->optimizer = fe_optval_text(o->optimizer);
  cfg->momentum = (float)o->momentum;
  cfg->weight_decay = (float)o->weight_decay;
  cfg->l2 = (float)o->l2_regularization;
  cfg->exempt_norm = o->exempt_norm;
  cfg->loss_scale = o->loss_scaling > 0 ? (float)o->loss_scaling : 1.0f;
  if (o->precision == FE_PRECISION_16_16) /* the updated weights rounded (docs/precision.md) */
    cfg->round16 = 1 + half_format(o), cfg->stochastic = o->enable_stochastic_rounding;
  cfg->seed = (uint64_t)o->seed;
  if (o->auto_loss_scaling) /* S is runtime state (optimizer.c); the compile-time scale is 1 */
    cfg->auto_loss_scale = o->loss_scaling > 0 && o->loss_scaling != 1 ? (float)o->loss_scaling : 65536.0f,
    cfg->loss_scale = 1.0f, cfg->loss_scale_interval = o->loss_scaling_interval;
  return p;
}

/* --calibrate FILE: up to max whole samples of g's input (raw, in its dtype: f32, or u8 read as
 * 0..255) as f32 values, malloc'd in *x, their count in *n.  A file that is not a regular file,
 * empty, or not a whole number of samples is an error naming it. */
static int load_calibration(const ir_graph *g, const char *path, int64_t max, float **x, int64_t *n, ir_diag *d) {
  ir_loc loc = {0};
  const ir_value *in = &g->values[g->input];
  int u8 = in->dtype == IR_U8;
  int64_t per = ir_shape_numel(&in->shape) / (g->batch > 0 ? g->batch : 1), es = u8 ? 1 : 4;
  FILE *f = fopen(path, "rb");
  if (!f) return ir_diag_set(d, loc, NULL, "--calibrate '%s': %s", path, strerror(errno));
  struct stat sb;
  if (fstat(fileno(f), &sb) || !S_ISREG(sb.st_mode)) {
    fclose(f);
    return ir_diag_set(d, loc, NULL, "--calibrate '%s': not a regular file", path);
  }
  int64_t bytes = (int64_t)sb.st_size, sample = per * es;
  if (bytes <= 0 || bytes % sample) {
    fclose(f);
    return ir_diag_set(d, loc, NULL, "--calibrate '%s': %lld bytes is not a whole number of samples (%lld bytes each: "
                       "%lld %s values, the model's input)", path, (long long)bytes, (long long)sample, (long long)per,
                       u8 ? "u8" : "f32");
  }
  *n = bytes / sample < max ? bytes / sample : max;
  *x = malloc((size_t)(*n * per) * sizeof **x);
  unsigned char *raw = malloc((size_t)(*n * sample));
  if (!*x || !raw) abort();
  size_t got = fread(raw, 1, (size_t)(*n * sample), f);
  fclose(f);
  if (got != (size_t)(*n * sample)) {
    free(raw), free(*x), *x = NULL;
    return ir_diag_set(d, loc, NULL, "--calibrate '%s': short read (%zu of %lld bytes)", path, got, (long long)(*n * sample));
  }
  for (int64_t i = 0; i < *n * per; i++) {
    if (u8) (*x)[i] = (float)raw[i];
    else memcpy(&(*x)[i], raw + 4 * i, 4);
    if (!isfinite((*x)[i])) {
      free(raw), free(*x), *x = NULL;
      return ir_diag_set(d, loc, NULL, "--calibrate '%s': sample %lld has a non-finite value at element %lld", path,
                         (long long)(i / per), (long long)(i % per));
    }
  }
  free(raw);
  return 0;
}

/* --emit ir-after: the graph as text in output. */
static int dump_ir(const ir_graph *g, const char *output, ir_diag *d) {
  FILE *f = fopen(output, "w");
  if (!f) return ir_diag_set(d, (ir_loc){0}, NULL, "cannot write '%s'", output);
  ir_print(g, f);
  int bad = ferror(f);
  return fclose(f) || bad ? ir_diag_set(d, (ir_loc){0}, NULL, "cannot write '%s': %s", output, strerror(errno ? errno : EIO)) : 0;
}

int cnnc_build_model_report(ir_graph *g, const fe_options *o, const char *output, const char *emit, int verbose,
                          const cg_report_sink *report, ir_diag *d) {
  double t0 = seconds();
  if (check_options(o, d)) return -1;
  /* the knobs: the graph's (NULL: the defaults), then --tune's items (ir/tuning.def) */
  ir_tuning *tune = ir_alloc(g->arena, sizeof *tune);
  *tune = *ir_tune(g);
  if (fe_options_tuning(o, tune, d)) return -1;
  g->tune = tune;
  const char *stop = emit && !strncmp(emit, "ir-after=", 9) ? emit + 9 : NULL;
  pass_pipeline_opts po = pipeline_opts(o, stop, verbose);
  float *calib = NULL;
  if (o->precision == FE_PRECISION_INT8) {
    if (load_calibration(g, o->calibrate, o->calibrate_samples, &calib, &po.calib_n, d)) return -1;
    po.calib = calib;
    if (!po.log) po.log = stderr; /* calibration runs the interpreter: minutes on big models, so say so */
  }
  int stopped = 0;
  int prc = pass_pipeline(g, &po, &stopped, d); /* passes/pipeline.c */
  free(calib);
  if (prc < 0) return -1;
  if (stopped) return dump_ir(g, output, d);
  cg_target t;
  if (cg_target_init(&t, o->mtriple, o->target_cpu, o->target_features, d)) return -1;
  if (o->target_cache[0] && cg_target_set_cache(&t, o->target_cache, d)) {
    cg_target_dispose(&t);
    return -1;
  }
  if (o->mode != FE_MODE_TRAINING && (o->precision == FE_PRECISION_16_32 || o->precision == FE_PRECISION_16_16) &&
      !pass_store16_disabled(g) && /* 16-bit inference activations (gen_store16.c), before the budget sees them */
      cg_store16_infer(g, &t, o->available_memory_proportion, half_format(o), verbose ? stderr : NULL, d) < 0) {
    cg_target_dispose(&t);
    return -1;
  }
  if (stop && !strcmp(stop, "store16")) { /* inference: the 16-bit storage pass is the back end's */
    cg_target_dispose(&t);
    return (ir_tune(g)->verify && ir_verify(g, d) < 0) ? -1 : dump_ir(g, output, d);
  }
  if (cg_check_memory_budget(g, o->memory_limit, o->available_memory_proportion, d)) { /* --memory-limit, proportions per shard (cg_budget.c) */
    cg_target_dispose(&t);
    return -1;
  }
  if (report && report->phase) report->phase(report->ctx, "split", seconds() - t0);
  if (report && report->target) report->target(report->ctx, &t);
  if (verbose)
    fprintf(stderr, "cnnc: target %s cpu %s, %d f32 lanes; %d shard%s\n", t.triple, t.cpu, t.vec_f32, g->n_shards,
            g->n_shards == 1 ? "" : "s");
  char *json = fe_options_json_tuned(o, tune);
  cg_options co = {output, emit, g->name, json, 2, verbose, report};
  co.tmpdir = o->tmpdir;
  co.available_memory_proportion = o->available_memory_proportion;
  co.grad_accum = (int)o->gradient_accumulation, co.replicas = (int)o->replicas;
  co.half_partials = o->enable_half_partials ? 1 + half_format(o) : 0;
  co.schedule = o->pipeline_schedule == FE_SCHEDULE_GROUPED       ? CNNC_ABI_SCHED_GROUPED
                : o->pipeline_schedule == FE_SCHEDULE_INTERLEAVED ? CNNC_ABI_SCHED_INTERLEAVED
                                                                  : CNNC_ABI_SCHED_SEQUENTIAL;
  co.recompute = o->recompute == FE_RECOMPUTE_AUTO ? 1 : o->recompute == FE_RECOMPUTE_PIPELINE ? 2 : o->recompute == FE_RECOMPUTE_ALL ? 3 : 0;
  if (co.half_partials) { /* the kernels' own partials too: recorded on g for the interpreter (docs/precision.md) */
    g->half_partials = co.half_partials, g->partial_lanes = t.vec_f32;
    g->partial_kblock = ir_alloc(g->arena, (size_t)(g->n_nodes > 0 ? g->n_nodes : 1) * sizeof *g->partial_kblock);
    g->partial_bytes = ir_alloc(g->arena, (size_t)(g->n_nodes > 0 ? g->n_nodes : 1) * sizeof *g->partial_bytes);
  }
  int rc = cg_compile(g, &t, &co, d);
  free(json);
  cg_target_dispose(&t);
  if (verbose && rc == 0) fprintf(stderr, "cnnc: wrote %s in %.2f s\n", output, seconds() - t0);
  return rc;
}
