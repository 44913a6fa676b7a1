/* train_codegen_check.h — shared by the compiled-training tests (test_codegen_train*.c through
 * train_case_check.h, test_train_*.c): build the reference graph (autodiff + optimizer) and the
 * compiled .so of one training model and open it, run a few steps of random data through both
 * (cnnrt_train_step vs ir_train_step, the loss of each step within a relative tolerance), then
 * walk the compiled model's state table and compare every tensor (size, kind, values) with the
 * reference graph's params (and, for a second model of the same .so run with another thread
 * count, bitwise with its state); the eval program against the interpreter in inference mode.
 * Include after test_codegen_harness.h. */
#ifndef CNNC_TEST_TRAIN_CODEGEN_CHECK_H
#define CNNC_TEST_TRAIN_CODEGEN_CHECK_H

#include "frontend/fe.h"
#include "ir/grad_train.h"
#include "runtime/cnnrt.h"
#include "ct_tune.h"
#include "test_codegen_harness.h"

/* Expected state kind of param pv: trainable -> param, running statistics -> buffer, the rest
 * (momentum, Adam moments and step) -> optimizer state. */
static inline int tct_want_kind(const ir_value *pv) {
  if (pv->trainable) return CNNRT_STATE_PARAM;
  return strstr(pv->name, "running_") ? CNNRT_STATE_BUFFER : CNNRT_STATE_OPTIMIZER;
}

/* Autodiff + optimizer (from o) on the reference graph gr, compile gc to so, open it with ro
 * (NULL: defaults).  Returns the model, NULL (with the reason on stderr) on failure. */
static inline cnnrt_model *tct_build(ir_graph *gr, ir_graph *gc, const fe_options *o, const char *optimizer, const char *so,
                              const cnnrt_options *ro, const char *label) {
  ir_diag d = {0};
  pass_optim_cfg cfg = {0};
  cfg.optimizer = optimizer, cfg.momentum = (float)o->momentum, cfg.loss_scale = (float)o->loss_scaling;
  cfg.weight_decay = (float)o->weight_decay, cfg.l2 = (float)o->l2_regularization, cfg.exempt_norm = o->exempt_norm;
  if (pass_autodiff(gr, cfg.loss_scale, &d) < 0 || pass_optimizer(gr, &cfg, &d) < 0) {
    fprintf(stderr, "  %s: reference graph: ", label);
    ir_diag_print(&d, stderr);
    return NULL;
  }
  if (cnnc_build_model(ct_g(gc), o, so, NULL, 0, &d)) {
    fprintf(stderr, "  %s: compile failed: ", label);
    ir_diag_print(&d, stderr);
    return NULL;
  }
  cnnrt_model *m = NULL;
  if (cnnrt_open(so, ro, &m) != CNNRT_OK) {
    fprintf(stderr, "  %s: cnnrt_open: %s\n", label, cnnrt_last_error());
    unlink(so);
    return NULL;
  }
  return m;
}

/* The input of gr's batch: u8 images (img, 1 byte per value) or f32 (img = x's bytes); x holds
 * the same values as f32 for ir_train_step.  Labels uniform over the classes. */
typedef struct tct_batch {
  unsigned char *img;
  float *x, *labels;
  int64_t nx, esz;
  int batch, classes;
} tct_batch;

static inline tct_batch tct_batch_alloc(const ir_graph *gr) {
  const ir_value *iv = &gr->values[gr->input];
  tct_batch b = {0};
  b.nx = ir_shape_numel(&iv->shape), b.esz = iv->dtype == IR_U8 ? 1 : 4;
  b.batch = (int)iv->shape.dim[0];
  b.classes = (int)gr->values[gr->outputs[0]].shape.dim[1];
  b.img = malloc((size_t)(b.nx * b.esz));
  b.x = malloc((size_t)b.nx * sizeof *b.x);
  b.labels = malloc((size_t)b.batch * sizeof *b.labels);
  return b;
}

static inline void tct_batch_free(tct_batch *b) { free(b->img), free(b->x), free(b->labels); }

static inline void tct_batch_fill(tct_batch *b) {
  for (int64_t i = 0; i < b->nx; i++) {
    if (b->esz == 1) b->img[i] = (unsigned char)cgt_int(0, 255), b->x[i] = b->img[i];
    else b->x[i] = cgt_uniform(-1.0f, 1.0f), memcpy(b->img + 4 * i, &b->x[i], 4);
  }
  for (int k = 0; k < b->batch; k++) b->labels[k] = (float)cgt_int(0, b->classes - 1);
}

/* The end of a compiled-training case: b, m, the .so, gc and gr freed, "ok|FAIL <label>"
 * printed; returns bad. */
static inline int tct_free(tct_batch *b, cnnrt_model *m, const char *so, ir_graph *gc, ir_graph *gr, const char *label,
                           int bad) {
  tct_batch_free(b);
  cnnrt_close(m);
  unlink(so);
  ir_graph_free(gc), ir_graph_free(gr);
  fprintf(stderr, "%s %s\n", bad ? "FAIL" : "ok", label);
  return bad;
}

/* steps training steps of the models m[0..nm) (one .so: nm > 1, the thread counts 1, 2, ...)
 * and of gr (ir_train_step) at lr on fresh random batches (b keeps the last one), up to the
 * first failing step: each model's loss within 1e-4 of the reference's, its accuracy in
 * [0, 1].  Returns failures. */
static inline int tct_steps_n(cnnrt_model *const *m, int nm, ir_graph *gr, tct_batch *b, int steps, float lr,
                              const char *label) {
  int bad = 0;
  for (int s = 0; s < steps && !bad; s++) {
    tct_batch_fill(b);
    float **vals = ir_train_step(gr, b->x, b->labels, lr);
    float want = vals[ir_find_value(gr, "loss")][0];
    for (int t = 0; t < nm; t++) {
      float loss = NAN, acc = NAN;
      char l[300];
      if (nm > 1) snprintf(l, sizeof l, "%s, %d thread(s), step %d", label, t + 1, s + 1);
      else snprintf(l, sizeof l, "%s: step %d", label, s + 1);
      cnnrt_set_learning_rate(m[t], lr);
      if (cnnrt_train_step(m[t], b->img, (size_t)(b->nx * b->esz), b->labels, 1, &loss, &acc) != CNNRT_OK) {
        fprintf(stderr, "  %s: cnnrt_train_step: %s\n", l, cnnrt_last_error());
        bad++;
        continue;
      }
      if (!(acc >= 0.0f && acc <= 1.0f)) {
        fprintf(stderr, "  %s: accuracy %g\n", l, acc);
        bad++;
      }
      strcat(l, " loss");
      bad += cgt_compare(l, &loss, &want, 1, 1e-4);
    }
    ir_interp_free(gr, vals);
  }
  return bad;
}

static inline int tct_steps(cnnrt_model *m, ir_graph *gr, tct_batch *b, int steps, float lr, const char *label) {
  return tct_steps_n(&m, 1, gr, b, steps, lr, label);
}

/* Every state tensor of m against the param of gr with its name: a param of the graph, 4 bytes
 * per element, its kind (tct_want_kind), values within 1e-4; with m2 (NULL: none) also bitwise
 * equal to m2's.  *seen gets the number compared.  Returns failures. */
static inline int tct_compare_state(cnnrt_model *m, cnnrt_model *m2, const ir_graph *gr, int steps, const char *label, int *seen) {
  int n_state = cnnrt_num_state(m), bad = 0;
  *seen = 0;
  for (int i = 0; i < n_state; i++) {
    cnnrt_state_info si;
    if (cnnrt_state_info_at(m, i, &si) != CNNRT_OK) {
      bad++;
      continue;
    }
    int v = ir_find_value(gr, si.name);
    if (v < 0 || gr->values[v].kind != IR_VAL_PARAM) {
      fprintf(stderr, "  %s: state '%s' is not a param of the graph\n", label, si.name);
      bad++;
      continue;
    }
    const ir_value *pv = &gr->values[v];
    int64_t n = ir_shape_numel(&pv->shape);
    if (si.bytes != (size_t)n * 4 || (int)si.kind != tct_want_kind(pv)) {
      fprintf(stderr, "  %s: %s: %zu bytes (want %lld), kind %d (want %d)\n", label, si.name, si.bytes,
              (long long)n * 4, (int)si.kind, tct_want_kind(pv));
      bad++;
      continue;
    }
    float *got = malloc(si.bytes), *got2 = m2 ? malloc(si.bytes) : NULL;
    if (got && cnnrt_get_state(m, si.name, got, si.bytes) == CNNRT_OK &&
        (!m2 || (got2 && cnnrt_get_state(m2, si.name, got2, si.bytes) == CNNRT_OK))) {
      char l[300];
      snprintf(l, sizeof l, "%s: after %d steps: %s", label, steps, si.name);
      bad += cgt_compare(l, got, pv->data, n, 1e-4);
      if (m2 && memcmp(got, got2, si.bytes) != 0) {
        fprintf(stderr, "  %s: %s differs between the two thread counts\n", label, si.name);
        bad++;
      }
      (*seen)++;
    } else {
      bad++;
    }
    free(got);
    free(got2);
  }
  return bad;
}

/* The reference of the eval program: the loss of g (the model freshly loaded; freed here, NULL:
 * NAN) in inference mode (batchnorm on running statistics, dropout the identity) with the
 * params of trained (by name) on (x, labels). */
static inline float tct_eval_loss(ir_graph *g, const ir_graph *trained, const float *x, const float *labels) {
  if (!g) return NAN;
  for (int i = 0; i < g->n_nodes; i++) {
    if (g->nodes[i].op == IR_OP_batchnorm) g->nodes[i].attr.batchnorm.training = 0;
    if (g->nodes[i].op == IR_OP_dropout) g->nodes[i].attr.dropout.training = 0;
  }
  for (int v = 0; v < g->n_values; v++) {
    ir_value *pv = &g->values[v];
    int tv = pv->kind == IR_VAL_PARAM ? ir_find_value(trained, pv->name) : -1;
    if (tv >= 0) memcpy(pv->data, trained->values[tv].data, (size_t)ir_shape_numel(&pv->shape) * sizeof(float));
  }
  float **vals = ir_interp(g, x, labels);
  float loss = vals[ir_find_value(g, "loss")][0];
  ir_interp_free(g, vals);
  ir_graph_free(g);
  return loss;
}

/* cnnrt_evaluate of m (the eval program) on b's batch: its loss within 1e-4 of want.  Returns
 * failures. */
static inline int tct_check_eval(cnnrt_model *m, const tct_batch *b, float want, const char *label) {
  float loss = NAN, acc = NAN;
  if (cnnrt_evaluate(m, b->img, (size_t)(b->nx * b->esz), b->labels, 1, &loss, &acc) != CNNRT_OK) {
    fprintf(stderr, "  %s: cnnrt_evaluate: %s\n", label, cnnrt_last_error());
    return 1;
  }
  char l[300];
  snprintf(l, sizeof l, "%s: eval loss", label);
  if (getenv("CNNC_TEST_VERBOSE")) fprintf(stderr, "  %s %.8g want %.8g\n", l, loss, want);
  return cgt_compare(l, &loss, &want, 1, 1e-4);
}

#endif
