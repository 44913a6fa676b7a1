/* train_pipeline_common.h — shared by test_train_accum.c, test_train_pipeline.c and
 * test_train_recompute.c: gradient accumulation, replicas, pipelined multi-shard training and
 * recomputation (issue 5, docs/training.md "Accumulation, replicas, pipelining").  A small conv
 * model is compiled with --mode training in many configurations, trained for STEPS weight
 * updates on the same 16 samples per update (random f32 images and labels), and its trainable
 * params are compared:
 *   - --gradient-accumulation 4 at batch 4 vs batch 16 (one micro-batch): the mean-reduced
 *     loss makes them equal up to float re-association (tolerance), and both vs the interpreter
 *     (ir_train_step at batch 16);
 *   - --replicas 2 at batch 8 vs --gradient-accumulation 2 at batch 8: BITWISE (the replicas'
 *     gradients are summed in replica order, the accumulation adds micro-batches in order:
 *     the same float operations); vs batch 16 (tolerance); run to run and replicas run one
 *     after another vs on their own thread groups (CNNRT_REPLICA_PARALLEL): bitwise;
 *   - 2 and 3 shards (--pipeline-splits / --shards) x every --pipeline-schedule, with
 *     accumulation and replicas: bitwise equal to the single-shard sequential run;
 *   - --recompute pipeline|auto|all: bitwise equal to no recomputation, and the planned
 *     micro-batch memory (train tensors, cnnrt_describe of the program) is lower.
 * Every run uses one thread per shard group so that kernels partition identically. */
#ifndef CNNC_TRAIN_PIPELINE_COMMON_H
#define CNNC_TRAIN_PIPELINE_COMMON_H

#include "frontend/fe.h"
#include "ir/grad_train.h"
#include "runtime/cnnrt.h"
#include "ct_tune.h"
#include "test_codegen_harness.h"

enum { STEPS = 3, TOTAL = 16, MAXP = 16 };

static const char *model_yml =
    "name: pipe_train\n"
    "input: {shape: [2, 12, 12], dtype: f32, classes: 5}\n"
    "layers:\n"
    "  - {name: c1, op: conv, filters: 4, kernel: 3, padding: 1}\n"
    "  - {name: r1, op: relu}\n"
    "  - {name: c2, op: conv, filters: 6, kernel: 3, stride: 2, padding: 1}\n"
    "  - {name: r2, op: relu}\n"
    "  - {name: p1, op: maxpool, kernel: 2, stride: 2}\n"
    "  - {name: c3, op: conv, filters: 6, kernel: 3, padding: 1}\n"
    "  - {name: r3, op: relu}\n"
    "  - {name: f, op: flatten}\n"
    "  - {name: d1, op: dense, units: 12}\n"
    "  - {name: r4, op: relu}\n"
    "  - {name: d2, op: dense, units: 5}\n";

/* A batchnorm model with a residual add (batch statistics, running stats in the state). */
static __attribute__((unused)) const char *bn_model_yml =
    "name: pipe_train_bn\n"
    "input: {shape: [2, 12, 12], dtype: f32, classes: 5}\n"
    "layers:\n"
    "  - {name: c1, op: conv, filters: 4, kernel: 3, padding: 1, bias: false}\n"
    "  - {name: b1, op: batchnorm}\n"
    "  - {name: r1, op: relu}\n"
    "  - {name: c2, op: conv, filters: 4, kernel: 3, padding: 1, bias: false}\n"
    "  - {name: b2, op: batchnorm}\n"
    "  - {name: a2, op: add, inputs: [b2, r1]}\n"
    "  - {name: r2, op: relu}\n"
    "  - {name: p1, op: maxpool, kernel: 2, stride: 2}\n"
    "  - {name: f, op: flatten}\n"
    "  - {name: d2, op: dense, units: 5}\n";

static char model_path[512];
static cnnrt_replica_mode replica_mode = CNNRT_REPLICA_SHARED; /* cnnrt_options.replica_mode of train() */
static float *images, *labels; /* STEPS * TOTAL samples */
static int64_t sample_elems;

typedef struct result {
  int n;                      /* trainable params and buffers (batchnorm running statistics) */
  char name[MAXP][64];
  float *w[MAXP];
  int64_t numel[MAXP];
  double loss;
  long long tensor_bytes;     /* planned: train tensors of one micro-batch (descriptor) */
  long long planned_bytes;    /* planned: state + frames x train tensors + group scratch */
} result;

static void result_free(result *r) {
  for (int i = 0; i < r->n; i++) free(r->w[i]);
  memset(r, 0, sizeof *r);
}

static int load_opts(fe_options *o, const char *const *kv, int n_kv, int batch) {
  ir_diag d = {0};
  fe_options_init(o);
  char b[16];
  snprintf(b, sizeof b, "%d", batch);
  const char *base[][2] = {{"mode", "training"}, {"batch-size", b}, {"optimizer", "momentum"}, {"seed", "11"}};
  for (int i = 0; i < 4; i++)
    if (fe_option_set(o, fe_option_find(base[i][0]), base[i][1], &d)) goto fail;
  for (int i = 0; i < n_kv; i++)
    if (fe_option_set(o, fe_option_find(kv[2 * i]), kv[2 * i + 1], &d)) goto fail;
  return 0;
fail:
  ir_diag_print(&d, stderr);
  return -1;
}

/* Planned train-tensor bytes of one micro-batch (cnnrt_train_plan_info: what cnnrun info shows). */
static long long tensor_bytes_of(cnnrt_model *m) {
  cnnrt_train_plan p;
  return cnnrt_train_plan_info(m, 0, &p) == CNNRT_OK ? (long long)p.tensor_bytes : -1;
}

/* Compiles with kv, trains STEPS updates of TOTAL samples; r gets the params. */
static int train(const char *label, const char *const *kv, int n_kv, int batch, result *r) {
  memset(r, 0, sizeof *r);
  fe_options o;
  if (load_opts(&o, kv, n_kv, batch)) return 1;
  ir_diag d = {0};
  ir_graph *g = fe_load(model_path, &o, &d);
  if (!g) {
    ir_diag_print(&d, stderr);
    return 1;
  }
  char so[600];
  snprintf(so, sizeof so, "%s/pipe.so", cgt_dir);
  if (cnnc_build_model(ct_g(g), &o, so, NULL, 0, &d)) {
    fprintf(stderr, "  %s: compile failed: ", label);
    ir_diag_print(&d, stderr);
    ir_graph_free(g);
    return 1;
  }
  ir_graph_free(g);
  cnnrt_options ro;
  cnnrt_options_init(&ro);
  ro.threads_per_shard = 1;
  ro.replica_mode = replica_mode;
  cnnrt_model *m = NULL;
  if (cnnrt_open(so, &ro, &m) != CNNRT_OK) {
    fprintf(stderr, "  %s: cnnrt_open: %s\n", label, cnnrt_last_error());
    unlink(so);
    return 1;
  }
  unlink(so);
  int bad = 0;
  int per_update = cnnrt_grad_accum(m); /* micro-batches per update, every replica */
  CGT_CHECK(per_update * batch == TOTAL, "%s: %d micro-batches of %d per update", label, per_update, batch);
  if (replica_mode == CNNRT_REPLICA_PARALLEL) { /* the option reached the executor (rt_train_replica_parallel) */
    const char *js = cnnrt_describe_json(m);
    CGT_CHECK(js && strstr(js, "\"replica_mode\": \"parallel\""), "%s: replicas not in parallel: %s", label, js ? js : "NULL");
  }
  cnnrt_set_learning_rate(m, 0.05);
  r->tensor_bytes = tensor_bytes_of(m);
  cnnrt_train_plan plan;
  r->planned_bytes = cnnrt_train_plan_info(m, 0, &plan) == CNNRT_OK ? (long long)plan.planned_bytes : -1;
  for (int s = 0; s < STEPS && !bad; s++) {
    float loss = NAN;
    size_t bytes = (size_t)TOTAL * (size_t)sample_elems * 4;
    if (cnnrt_train_step(m, images + (size_t)s * TOTAL * (size_t)sample_elems, bytes, labels + s * TOTAL, 1, &loss, NULL) !=
        CNNRT_OK) {
      fprintf(stderr, "  %s: cnnrt_train_step: %s\n", label, cnnrt_last_error());
      bad++;
    }
    r->loss += loss;
  }
  for (int i = 0; i < cnnrt_num_state(m) && !bad; i++) {
    cnnrt_state_info si;
    if (cnnrt_state_info_at(m, i, &si) != CNNRT_OK || (si.kind != CNNRT_STATE_PARAM && si.kind != CNNRT_STATE_BUFFER)) continue;
    if (r->n == MAXP) break;
    snprintf(r->name[r->n], sizeof r->name[0], "%s", si.name);
    r->numel[r->n] = (int64_t)si.bytes / 4;
    r->w[r->n] = malloc(si.bytes);
    if (cnnrt_get_state(m, si.name, r->w[r->n], si.bytes) != CNNRT_OK) bad++;
    r->n++;
  }
  cnnrt_close(m);
  return bad;
}

/* tol < 0: bitwise. */
static int compare(const char *label, const result *a, const result *b, double tol) {
  int bad = a->n != b->n || a->n == 0;
  if (bad) fprintf(stderr, "  %s: %d vs %d params\n", label, a->n, b->n);
  for (int i = 0; i < a->n && !bad; i++) {
    int j = 0;
    while (j < b->n && strcmp(a->name[i], b->name[j])) j++;
    if (j == b->n || a->numel[i] != b->numel[j]) {
      fprintf(stderr, "  %s: param %s missing\n", label, a->name[i]);
      bad++;
      continue;
    }
    char l[300];
    snprintf(l, sizeof l, "%s: %s", label, a->name[i]);
    if (tol < 0) {
      if (memcmp(a->w[i], b->w[j], (size_t)a->numel[i] * 4)) {
        int64_t k = 0;
        while (a->w[i][k] == b->w[j][k]) k++;
        fprintf(stderr, "  %s: not bitwise equal at %lld: %.9g vs %.9g\n", l, (long long)k, a->w[i][k], b->w[j][k]);
        bad++;
      }
    } else {
      bad += cgt_compare(l, a->w[i], b->w[j], a->numel[i], tol);
    }
  }
  fprintf(stderr, "%s %s\n", bad ? "FAIL" : "ok", label);
  return bad;
}

/* The interpreter at batch 16: STEPS ir_train_step calls. */
static __attribute__((unused)) int interp(result *r) {
  memset(r, 0, sizeof *r);
  fe_options o;
  if (load_opts(&o, NULL, 0, TOTAL)) return 1;
  ir_diag d = {0};
  ir_graph *g = fe_load(model_path, &o, &d);
  pass_optim_cfg cfg = {0};
  cfg.optimizer = "momentum", cfg.momentum = (float)o.momentum, cfg.loss_scale = 1;
  if (!g || pass_autodiff(g, 1, &d) < 0 || pass_optimizer(g, &cfg, &d) < 0) {
    ir_diag_print(&d, stderr);
    return 1;
  }
  for (int s = 0; s < STEPS; s++) ir_interp_free(g, ir_train_step(g, images + (size_t)s * TOTAL * (size_t)sample_elems, labels + s * TOTAL, 0.05f));
  for (int v = 0; v < g->n_values && r->n < MAXP; v++) {
    const ir_value *x = &g->values[v];
    if (x->kind != IR_VAL_PARAM || !x->trainable) continue;
    snprintf(r->name[r->n], sizeof r->name[0], "%s", x->name);
    r->numel[r->n] = ir_shape_numel(&x->shape);
    r->w[r->n] = malloc((size_t)r->numel[r->n] * 4);
    memcpy(r->w[r->n], x->data, (size_t)r->numel[r->n] * 4);
    r->n++;
  }
  ir_graph_free(g);
  return 0;
}

#define KV(...) ((const char *const[]){__VA_ARGS__}), (int)(sizeof((const char *const[]){__VA_ARGS__}) / sizeof(char *) / 2)

static void setup(void) {
  cgt_init_dir();
  if (cgt_write_tmp(model_path, "pipe_train.yml", model_yml)) exit(2);
  sample_elems = 2 * 12 * 12;
  images = malloc((size_t)STEPS * TOTAL * (size_t)sample_elems * 4);
  labels = malloc((size_t)STEPS * TOTAL * 4);
  for (int64_t i = 0; i < STEPS * TOTAL * sample_elems; i++) images[i] = cgt_uniform(-1, 1);
  for (int i = 0; i < STEPS * TOTAL; i++) labels[i] = (float)cgt_int(0, 4);
}

static int finish(const char *name, int bad) {
  free(images);
  free(labels);
  unlink(model_path);
  cgt_failures += bad;
  return cgt_done(name);
}

#endif
