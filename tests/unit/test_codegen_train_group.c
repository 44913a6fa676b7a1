/* test_codegen_train_group.c — compiled training of grouped and depthwise convs
 * (codegen/gen_train_gconv.c, docs/training.md) against the reference interpreter:
 *  1. kernel cases: small models whose grouped / depthwise convs reach every path of the
 *     generator (stride 1 and 2, 3x3 and 5x5, dilation 2, asymmetric padding, 1x3 kernels,
 *     channel multiplier 2, channel counts that are no multiple of 8, rows of 3..37 pixels:
 *     masked and overlapping vectors, several vector groups), each conv placed after another
 *     one so grad_input runs too.  Momentum for KSTEPS steps with 1 and 2 threads: the loss
 *     of every step and every state tensor vs ir_train_step (1e-4 relative), and the 2-thread
 *     state bitwise equal to the 1-thread state; then cnnrt_evaluate (the eval program) vs
 *     the interpreter in inference mode.
 *  2. tests/train/gconv_mix.yml (an MBConv block with squeeze-excitation and a ResNeXt-like
 *     grouped block, batch norm in training mode, dropout): the same compiled-vs-interpreter check, and
 *     the interpreter's gradient of every trainable param against central finite differences
 *     of the loss. */
#include "frontend/fe.h"
#include "ir/grad_train.h"
#include "runtime/cnnrt.h"
#include "test_codegen_harness.h"

enum { KSTEPS = 2 };

static const char *dw_yml = /* depthwise paths (groups == C == K) */
    "name: gk_dw\n"
    "input: {shape: [3, 9, 13], dtype: f32, classes: 4}\n"
    "layers:\n"
    "  - {name: c0, op: conv, filters: 12, kernel: 3, padding: 1}\n"
    "  - {name: r0, op: relu}\n"
    "  - {name: dw1, op: conv, filters: 12, kernel: 3, padding: 1, groups: 12}\n"
    "  - {name: a1, op: swish}\n"
    "  - {name: dw2, op: conv, filters: 12, kernel: 5, stride: 2, padding: 2, groups: 12, bias: false}\n"
    "  - {name: a2, op: swish}\n"
    "  - {name: dw3, op: conv, filters: 12, kernel: 3, stride: 2, padding: [0, 1, 1, 0], groups: 12}\n"
    "  - {name: a3, op: sigmoid}\n"
    "  - {name: dw4, op: conv, filters: 12, kernel: 3, dilation: 2, padding: 2, groups: 12}\n"
    "  - {name: f, op: flatten}\n"
    "  - {name: d, op: dense, units: 4}\n";
static const char *grp_yml = /* grouped paths, multiplier 2, wide rows */
    "name: gk_grp\n"
    "input: {shape: [4, 5, 37], dtype: u8, classes: 3}\n"
    "layers:\n"
    "  - {name: c0, op: conv, filters: 8, kernel: 3, padding: 1}\n"
    "  - {name: r0, op: relu}\n"
    "  - {name: g1, op: conv, filters: 12, kernel: 3, padding: 1, groups: 4}\n"
    "  - {name: r1, op: relu}\n"
    "  - {name: g2, op: conv, filters: 18, kernel: 3, stride: 2, padding: 1, groups: 6, bias: false}\n"
    "  - {name: r2, op: relu}\n"
    "  - {name: m2, op: conv, filters: 36, kernel: [1, 3], padding: [0, 1], groups: 18}\n"
    "  - {name: r3, op: relu}\n"
    "  - {name: g3, op: conv, filters: 9, kernel: 3, padding: [1, 2], dilation: [1, 2], groups: 9}\n"
    "  - {name: p, op: global_avgpool}\n"
    "  - {name: f, op: flatten}\n"
    "  - {name: d, op: dense, units: 3}\n";
static const char *wide_yml = /* ResNeXt-like 32 groups of 4, 23-pixel rows */
    "name: gk_wide\n"
    "input: {shape: [2, 6, 23], dtype: f32, classes: 3}\n"
    "layers:\n"
    "  - {name: c0, op: conv, filters: 128, kernel: 1}\n"
    "  - {name: g1, op: conv, filters: 128, kernel: 3, padding: 1, groups: 32, bias: false}\n"
    "  - {name: r1, op: relu}\n"
    "  - {name: g2, op: conv, filters: 64, kernel: 3, stride: 2, padding: 1, groups: 32}\n"
    "  - {name: p, op: global_avgpool}\n"
    "  - {name: f, op: flatten}\n"
    "  - {name: d, op: dense, units: 3}\n";

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
  if (!gc || !gr || pass_autodiff(gr, 1.0f, &d) < 0 || pass_optimizer(gr, &cfg, &d) < 0 || cg_build_model(gc, &o, so, NULL, 0, &d)) {
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

/* ---- gradients of gconv_mix vs central finite differences (interpreter) ------------------ */
#define FD_SAMPLES 6
#define FD_H 1e-2f

static float loss_of(ir_graph *g, const float *x, const float *labels) {
  float **vals = ir_interp(g, x, labels);
  float l = vals[ir_find_value(g, "loss")][0];
  ir_interp_free(g, vals);
  return l;
}

static int fd_check(const char *path) {
  fe_options o;
  ir_graph *g = load_case(path, 3, &o);
  ir_diag d = {0};
  if (!g || pass_autodiff(g, 1.0f, &d) < 0) {
    ir_diag_print(&d, stderr);
    return 1;
  }
  const ir_value *iv = &g->values[g->input];
  int64_t nx = ir_shape_numel(&iv->shape);
  float *x = malloc((size_t)nx * sizeof *x), labels[3] = {1, 4, 2};
  for (int64_t i = 0; i < nx; i++) x[i] = cgt_uniform(-1.0f, 1.0f);
  float **vals = ir_interp(g, x, labels);
  int bad = 0, checked = 0, grouped = 0;
  for (int p = 0; p < g->n_values; p++) {
    ir_value *pv = &g->values[p];
    if (pv->kind != IR_VAL_PARAM || !pv->trainable) continue;
    char gname[300];
    snprintf(gname, sizeof gname, "grad/%s", pv->name);
    int gv = ir_find_value(g, gname);
    CGT_CHECK(gv >= 0, "gconv_mix: no gradient for %s", pv->name);
    if (gv < 0) {
      bad++;
      continue;
    }
    grouped += !strcmp(pv->name, "dw/weight") || !strcmp(pv->name, "g_conv/weight");
    int64_t n = ir_shape_numel(&pv->shape);
    for (int s = 0; s < FD_SAMPLES && s < n; s++) {
      int64_t i = s == 0 ? 0 : s == 1 ? n - 1 : (int64_t)cgt_int(0, (int)(n - 1));
      float keep = pv->data[i];
      pv->data[i] = keep + FD_H;
      double lp = loss_of(g, x, labels);
      pv->data[i] = keep - FD_H;
      double lm = loss_of(g, x, labels);
      pv->data[i] = keep;
      double fd = (lp - lm) / (2.0 * FD_H), an = vals[gv][i];
      checked++;
      if (fabs(an - fd) > 3e-3 * (1.0 + fabs(fd))) {
        fprintf(stderr, "gconv_mix: d loss / d %s[%lld]: analytic %.6g, finite differences %.6g\n", pv->name, (long long)i, an, fd);
        bad++;
      }
    }
  }
  CGT_CHECK(grouped == 2 && checked > 40, "gconv_mix: %d grouped weights, %d elements checked", grouped, checked);
  bad += !(grouped == 2 && checked > 40);
  ir_interp_free(g, vals);
  free(x);
  ir_graph_free(g);
  fprintf(stderr, "%s gconv_mix finite differences (%d elements)\n", bad ? "FAIL" : "ok", checked);
  return bad;
}

int main(void) {
  (void)cgt_check_graph, (void)cgt_random_params;
  cgt_init_dir();
  char mix[512];
  snprintf(mix, sizeof mix, "%s/tests/train/gconv_mix.yml", CNNC_TEST_SRC);
  cgt_failures += run_yml("gk_dw", dw_yml, 1);
  cgt_failures += run_yml("gk_dw", dw_yml, 3);
  cgt_failures += run_yml("gk_grp", grp_yml, 2);
  cgt_failures += run_yml("gk_wide", wide_yml, 2);
  cgt_failures += run_case("gconv_mix", mix, 4);
  cgt_failures += fd_check(mix);
  cgt_cleanup_dir();
  if (cgt_failures) {
    fprintf(stderr, "%d failure(s)\n", cgt_failures);
    return 1;
  }
  printf("test_codegen_train_group: ok\n");
  return 0;
}
