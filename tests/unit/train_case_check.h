/* Shared by test_codegen_train_group.c and test_codegen_train_stride.c: one YAML training case
 * compiled and stepped against the interpreter (ir_train_step), 1 vs 2 threads bitwise, and the
 * eval program against the model in inference mode.  Include after test_codegen_harness.h. */
#ifndef TRAIN_CASE_CHECK_H
#define TRAIN_CASE_CHECK_H

#include "ct_tune.h"

static ir_graph *load_case(const char *path, int batch, fe_options *o) {
  ir_diag d = {0};
  fe_options_init(o);
  char b[16];
  snprintf(b, sizeof b, "%d", batch);
  const char *kv[][2] = {{"mode", "training"}, {"batch-size", b}, {"optimizer", "momentum"}, {"seed", "5"}};
  for (int i = 0; i < 4; i++)
    if (fe_option_set(o, fe_option_find(kv[i][0]), kv[i][1], &d)) {
      ir_diag_print(&d, stderr);
      return NULL;
    }
  ir_graph *g = fe_load(path, o, &d);
  if (!g) ir_diag_print(&d, stderr);
  return g;
}

/* Loss of the eval program's reference: the model at path in inference mode (batchnorm on
 * running statistics, dropout the identity) with the params of trained. */
static float eval_ref(const char *path, int batch, const ir_graph *trained, const float *x, const float *labels) {
  fe_options o;
  ir_graph *g = load_case(path, batch, &o);
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

/* Compiled (1 and 2 threads) vs ir_train_step for KSTEPS momentum steps of the model at path. */
static int run_case(const char *name, const char *path, int batch) {
  char so[512];
  snprintf(so, sizeof so, "%s/%s_b%d.so", cgt_dir, name, batch);
  fe_options o;
  ir_graph *gc = load_case(path, batch, &o), *gr = load_case(path, batch, &o);
  ir_diag d = {0};
  pass_optim_cfg cfg = {0};
  cfg.optimizer = "momentum", cfg.momentum = (float)o.momentum, cfg.loss_scale = 1.0f;
  if (!gc || !gr || pass_autodiff(gr, 1.0f, &d) < 0 || pass_optimizer(gr, &cfg, &d) < 0 || cnnc_build_model(ct_g(gc), &o, so, NULL, 0, &d)) {
    fprintf(stderr, "  %s batch %d: setup failed: ", name, batch);
    ir_diag_print(&d, stderr);
    if (gc) ir_graph_free(gc);
    if (gr) ir_graph_free(gr);
    return 1;
  }
  cnnrt_model *m[2] = {NULL, NULL};
  int bad = 0;
  for (int t = 0; t < 2; t++) {
    if (cnnrt_open(so, NULL, &m[t]) != CNNRT_OK || cnnrt_set_threads(m[t], -1, t + 1) != CNNRT_OK) {
      fprintf(stderr, "  %s: open / %d threads: %s\n", name, t + 1, cnnrt_last_error());
      bad++;
    }
  }
  const ir_value *iv = &gr->values[gr->input];
  int64_t nx = ir_shape_numel(&iv->shape), esz = iv->dtype == IR_U8 ? 1 : 4;
  int classes = (int)gr->values[gr->outputs[0]].shape.dim[1];
  unsigned char *img = malloc((size_t)(nx * esz));
  float *x = malloc((size_t)nx * sizeof *x), *labels = malloc((size_t)batch * sizeof *labels);
  for (int s = 0; s < KSTEPS && !bad; s++) {
    for (int64_t i = 0; i < nx; i++) {
      if (esz == 1) img[i] = (unsigned char)cgt_int(0, 255), x[i] = img[i];
      else x[i] = cgt_uniform(-1.0f, 1.0f), memcpy(img + 4 * i, &x[i], 4);
    }
    for (int b = 0; b < batch; b++) labels[b] = (float)cgt_int(0, classes - 1);
    float **vals = ir_train_step(gr, x, labels, 0.05f);
    float want = vals[ir_find_value(gr, "loss")][0];
    for (int t = 0; t < 2; t++) {
      float loss = NAN;
      cnnrt_set_learning_rate(m[t], 0.05);
      if (cnnrt_train_step(m[t], img, (size_t)(nx * esz), labels, 1, &loss, NULL) != CNNRT_OK) {
        fprintf(stderr, "  %s: cnnrt_train_step: %s\n", name, cnnrt_last_error());
        bad++;
        continue;
      }
      char l[160];
      snprintf(l, sizeof l, "%s batch %d, %d thread(s), step %d loss", name, batch, t + 1, s + 1);
      bad += cgt_compare(l, &loss, &want, 1, 1e-4);
    }
    ir_interp_free(gr, vals);
  }
  int n_state = bad ? 0 : cnnrt_num_state(m[0]), seen = 0;
  for (int i = 0; i < n_state; i++) {
    cnnrt_state_info si;
    if (cnnrt_state_info_at(m[0], i, &si) != CNNRT_OK) {
      bad++;
      continue;
    }
    int v = ir_find_value(gr, si.name);
    float *got1 = malloc(si.bytes), *got2 = malloc(si.bytes);
    if (v >= 0 && cnnrt_get_state(m[0], si.name, got1, si.bytes) == CNNRT_OK &&
        cnnrt_get_state(m[1], si.name, got2, si.bytes) == CNNRT_OK) {
      char l[300];
      snprintf(l, sizeof l, "%s batch %d after %d steps: %s", name, batch, KSTEPS, si.name);
      bad += cgt_compare(l, got1, gr->values[v].data, (int64_t)(si.bytes / 4), 1e-4);
      CGT_CHECK(memcmp(got1, got2, si.bytes) == 0, "%s batch %d: %s differs between 1 and 2 threads", name, batch, si.name);
      bad += memcmp(got1, got2, si.bytes) != 0;
      seen++;
    } else {
      bad++;
    }
    free(got1);
    free(got2);
  }
  CGT_CHECK(seen > 0 && seen == n_state, "%s batch %d: %d of %d state tensors checked", name, batch, seen, n_state);
  bad += !(seen > 0 && seen == n_state);
  if (!bad) { /* the eval program (cnnrt_evaluate: running statistics, no dropout) on the last batch */
    float loss = NAN, acc = NAN, want = eval_ref(path, batch, gr, x, labels);
    if (cnnrt_evaluate(m[1], img, (size_t)(nx * esz), labels, 1, &loss, &acc) != CNNRT_OK) {
      fprintf(stderr, "  %s: cnnrt_evaluate: %s\n", name, cnnrt_last_error());
      bad++;
    } else {
      char l[160];
      snprintf(l, sizeof l, "%s batch %d: eval loss", name, batch);
      if (getenv("CNNC_TEST_VERBOSE")) fprintf(stderr, "  %s %.8g want %.8g\n", l, loss, want);
      bad += cgt_compare(l, &loss, &want, 1, 1e-4);
    }
  }
  free(img), free(x), free(labels);
  cnnrt_close(m[0]), cnnrt_close(m[1]);
  unlink(so);
  ir_graph_free(gc), ir_graph_free(gr);
  fprintf(stderr, "%s %s batch %d\n", bad ? "FAIL" : "ok", name, batch);
  return bad;
}

static int run_yml(const char *name, const char *yml, int batch) {
  char path[512];
  snprintf(path, sizeof path, "%s/%s.yml", cgt_dir, name);
  FILE *f = fopen(path, "w");
  if (!f || fputs(yml, f) < 0 || fclose(f)) {
    fprintf(stderr, "cannot write %s\n", path);
    return 1;
  }
  int bad = run_case(name, path, batch);
  unlink(path);
  return bad;
}

#endif
