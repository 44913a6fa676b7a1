/* train_fd_check.h — finite-difference check of a compiled training step (fd_case); included by
 * train_case_check.h. */
#ifndef TRAIN_FD_CHECK_H
#define TRAIN_FD_CHECK_H

#include "ct_tune.h"

/* Interpreter loss of g on (x, labels). */
static inline float interp_loss(ir_graph *g, const float *x, const float *labels) {
  float **vals = ir_interp(g, x, labels);
  float l = vals[ir_find_value(g, "loss")][0];
  ir_interp_free(g, vals);
  return l;
}

/* One compiled momentum step at lr 1 from v = 0 moves every weight by its gradient (w1 = w0 -
 * g); g of every trainable tensor at 8 positions vs (L(w + e) - L(w - e)) / 2e of the
 * interpreter, within 1 % of the tensor's largest gradient. */
static inline int fd_case(const char *name, const char *yml, int batch) {
  char nm[128], path[512], so[512];
  snprintf(nm, sizeof nm, "%s_fd", name);
  snprintf(so, sizeof so, "%s/%s.so", cgt_dir, nm);
  fe_options o;
  ir_graph *gc = load_yml(nm, yml, batch, path, &o), *gf = gc ? load_case(path, batch, &o) : NULL;
  ir_diag d = {0};
  cnnrt_model *m = NULL;
  if (!gc || !gf || cnnc_build_model(ct_g(gc), &o, so, NULL, 0, &d) || cnnrt_open(so, NULL, &m) != CNNRT_OK ||
      cnnrt_set_threads(m, -1, 2) != CNNRT_OK) {
    fprintf(stderr, "  %s fd: setup failed: %s\n", name, cnnrt_last_error());
    ir_diag_print(&d, stderr);
    if (gc) ir_graph_free(gc);
    if (gf) ir_graph_free(gf);
    unlink(so), unlink(path);
    return 1;
  }
  int64_t nx = ir_shape_numel(&gf->values[gf->input].shape);
  int classes = (int)gf->values[gf->outputs[0]].shape.dim[1];
  float *x = malloc((size_t)nx * sizeof *x), *labels = malloc((size_t)batch * sizeof *labels);
  for (int64_t i = 0; i < nx; i++) x[i] = cgt_uniform(-1.0f, 1.0f);
  for (int b = 0; b < batch; b++) labels[b] = (float)cgt_int(0, classes - 1);
  int n_state = cnnrt_num_state(m), bad = 0, checked = 0;
  float **w0 = calloc((size_t)n_state, sizeof *w0);
  cnnrt_state_info si;
  for (int i = 0; i < n_state; i++)
    if (cnnrt_state_info_at(m, i, &si) == CNNRT_OK && !strstr(si.name, "momentum")) {
      w0[i] = malloc(si.bytes);
      bad += cnnrt_get_state(m, si.name, w0[i], si.bytes) != CNNRT_OK;
    }
  float loss = NAN;
  cnnrt_set_learning_rate(m, 1.0);
  bad += cnnrt_train_step(m, x, (size_t)nx * sizeof *x, labels, 1, &loss, NULL) != CNNRT_OK;
  for (int i = 0; i < n_state && !bad; i++) {
    if (!w0[i] || cnnrt_state_info_at(m, i, &si) != CNNRT_OK) continue;
    int v = ir_find_value(gf, si.name);
    int64_t cnt = (int64_t)(si.bytes / 4);
    float *w1 = malloc(si.bytes), *g = malloc(si.bytes), gmax = 0;
    if (v < 0 || cnnrt_get_state(m, si.name, w1, si.bytes) != CNNRT_OK) {
      bad++;
      free(w1), free(g);
      continue;
    }
    for (int64_t j = 0; j < cnt; j++) g[j] = w0[i][j] - w1[j], gmax = fmaxf(gmax, fabsf(g[j]));
    float *wv = gf->values[v].data;
    for (int s = 0; s < 8; s++) {
      int64_t j = s == 0 ? 0 : s == 7 ? cnt - 1 : (int64_t)(cgt_next() % (uint64_t)cnt);
      const float e = 1e-2f, keep = wv[j];
      wv[j] = keep + e;
      float lp = interp_loss(gf, x, labels);
      wv[j] = keep - e;
      float lm = interp_loss(gf, x, labels);
      wv[j] = keep;
      double fd = ((double)lp - (double)lm) / (2.0 * e);
      int ok = fabs(fd - g[j]) <= 1e-2 * gmax + 1e-5;
      CGT_CHECK(ok, "%s batch %d: d loss / d %s[%lld]: compiled %.6g, finite differences %.6g (largest %.3g)", name, batch,
                si.name, (long long)j, g[j], fd, gmax);
      bad += !ok;
      checked++;
    }
    free(w1), free(g);
  }
  CGT_CHECK(checked >= 8 * 4, "%s: only %d finite-difference checks", name, checked);
  bad += checked < 8 * 4;
  for (int i = 0; i < n_state; i++) free(w0[i]);
  free(w0), free(x), free(labels);
  cnnrt_close(m);
  ir_graph_free(gc), ir_graph_free(gf);
  unlink(so), unlink(path);
  fprintf(stderr, "%s %s finite differences batch %d (%d weights)\n", bad ? "FAIL" : "ok", name, batch, checked);
  return bad;
}

#endif
