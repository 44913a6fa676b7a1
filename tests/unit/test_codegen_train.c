/* test_codegen_train.c — compiled training (issue 5, docs/training.md) against the reference
 * interpreter: fmnist_cnn (conv/relu/maxpool/flatten/dense/softmax_xent) compiled with
 * --mode training at a small batch, opened with the runtime (cnnrt_open, cnnrt_train_step),
 * trained for 2 steps on random u8 images; the loss of each step and, after the steps, every
 * state tensor (weights and momentum buffers, i.e. the accumulated gradients) must match
 * ir_train_step on the same initial weights (rel. tol 1e-4).  Runs for SGD, momentum and
 * Nesterov; also checks the state table (sizes, kinds).  A second, small model covers the
 * other kernel paths (and --label-smoothing 0.1; --weight-decay, --l2-regularization, --loss-scaling): stride-2 and dilated convs, an unpadded 5x5 conv, a padded 3x3 stride-2
 * maxpool, bias-free layers, a non-square f32 input, odd sizes (vector tails). */
#include "frontend/fe.h"
#include "ir/grad_train.h"
#include "runtime/cnnrt.h"
#include "test_codegen_harness.h"

enum { BATCH = 4, STEPS = 2 };

static const char *small_yml =
    "name: small_train\n"
    "input: {shape: [2, 13, 11], dtype: f32, classes: 7}\n"
    "layers:\n"
    "  - {name: c1, op: conv, filters: 5, kernel: 3, stride: 2, padding: 1}\n"
    "  - {name: r1, op: relu}\n"
    "  - {name: c2, op: conv, filters: 6, kernel: 3, dilation: 2, padding: [2, 1], bias: false}\n"
    "  - {name: r2, op: relu}\n"
    "  - {name: p1, op: maxpool, kernel: 3, stride: 2, padding: 1}\n"
    "  - {name: c3, op: conv, filters: 4, kernel: 2}\n"
    "  - {name: r3, op: relu}\n"
    "  - {name: f, op: flatten}\n"
    "  - {name: d1, op: dense, units: 9, bias: false}\n"
    "  - {name: r4, op: relu}\n"
    "  - {name: dr, op: dropout, rate: 0.3}\n"
    "  - {name: d2, op: dense, units: 7}\n";
static const char *model_path = "fmnist";
static const char *label_smoothing = "0", *weight_decay = "0", *l2 = "0", *loss_scaling = "1";
static int n_params;

static ir_graph *load(const char *opt, fe_options *o) {
  char path[1024];
  if (!strcmp(model_path, "fmnist")) snprintf(path, sizeof path, "%s/models/fmnist_cnn.yml", CNNC_TEST_SRC);
  else snprintf(path, sizeof path, "%s", model_path);
  ir_diag d = {0};
  fe_options_init(o);
  char b[16];
  snprintf(b, sizeof b, "%d", BATCH);
  const char *kv[][2] = {{"mode", "training"}, {"batch-size", b}, {"optimizer", opt}, {"seed", "7"},
                         {"label-smoothing", label_smoothing}, {"weight-decay", weight_decay},
                         {"l2-regularization", l2}, {"loss-scaling", loss_scaling}};
  for (int i = 0; i < 8; i++)
    if (fe_option_set(o, fe_option_find(kv[i][0]), kv[i][1], &d)) {
      ir_diag_print(&d, stderr);
      return NULL;
    }
  ir_graph *g = fe_load(path, o, &d);
  if (!g) ir_diag_print(&d, stderr);
  return g;
}

static int run(const char *opt) {
  fe_options o;
  ir_graph *gc = load(opt, &o), *gr = load(opt, &o);
  if (!gc || !gr) return 1;
  ir_diag d = {0};
  pass_optim_cfg cfg = {0};
  cfg.optimizer = opt, cfg.momentum = (float)o.momentum, cfg.loss_scale = (float)o.loss_scaling;
  cfg.weight_decay = (float)o.weight_decay, cfg.l2 = (float)o.l2_regularization;
  if (pass_autodiff(gr, cfg.loss_scale, &d) < 0 || pass_optimizer(gr, &cfg, &d) < 0) {
    ir_diag_print(&d, stderr);
    return 1;
  }
  char so[512];
  snprintf(so, sizeof so, "%s/train_%s.so", cgt_dir, opt);
  if (cg_build_model(gc, &o, so, NULL, 0, &d)) {
    fprintf(stderr, "  %s: compile failed: ", opt);
    ir_diag_print(&d, stderr);
    return 1;
  }
  cnnrt_model *m = NULL;
  if (cnnrt_open(so, NULL, &m) != CNNRT_OK) {
    fprintf(stderr, "  %s: cnnrt_open: %s\n", opt, cnnrt_last_error());
    unlink(so);
    return 1;
  }
  int bad = 0;
  CGT_CHECK(cnnrt_is_training(m), "%s: not a training model", opt);
  const float lr = 0.05f;
  cnnrt_set_learning_rate(m, lr);
  const ir_value *iv = &gr->values[gr->input];
  int64_t nx = ir_shape_numel(&iv->shape), esz = iv->dtype == IR_U8 ? 1 : 4;
  int classes = (int)gr->values[gr->outputs[0]].shape.dim[1];
  unsigned char *img = malloc((size_t)(nx * esz));
  float *x = malloc((size_t)nx * sizeof *x), labels[BATCH];
  for (int s = 0; s < STEPS; s++) {
    for (int64_t i = 0; i < nx; i++) {
      if (esz == 1) img[i] = (unsigned char)cgt_int(0, 255), x[i] = img[i];
      else x[i] = cgt_uniform(-1.0f, 1.0f), memcpy(img + 4 * i, &x[i], 4);
    }
    for (int b = 0; b < BATCH; b++) labels[b] = (float)cgt_int(0, classes - 1);
    float loss = NAN, acc = NAN;
    if (cnnrt_train_step(m, img, (size_t)(nx * esz), labels, 1, &loss, &acc) != CNNRT_OK) {
      fprintf(stderr, "  %s: cnnrt_train_step: %s\n", opt, cnnrt_last_error());
      bad++;
      break;
    }
    float **vals = ir_train_step(gr, x, labels, lr);
    float want = vals[ir_find_value(gr, "loss")][0];
    char l[128];
    snprintf(l, sizeof l, "%s step %d loss", opt, s + 1);
    bad += cgt_compare(l, &loss, &want, 1, 1e-4);
    CGT_CHECK(acc >= 0.0f && acc <= 1.0f, "%s: accuracy %g", opt, acc);
    ir_interp_free(gr, vals);
  }
  int n_state = cnnrt_num_state(m), seen = 0;
  for (int i = 0; i < n_state; i++) {
    cnnrt_state_info si;
    if (cnnrt_state_info_at(m, i, &si) != CNNRT_OK) {
      bad++;
      continue;
    }
    int v = ir_find_value(gr, si.name);
    if (v < 0 || gr->values[v].kind != IR_VAL_PARAM) {
      fprintf(stderr, "  %s: state '%s' is not a param of the graph\n", opt, si.name);
      bad++;
      continue;
    }
    const ir_value *pv = &gr->values[v];
    int64_t n = ir_shape_numel(&pv->shape);
    CGT_CHECK(si.bytes == (size_t)n * 4, "%s: %s: %zu bytes", opt, si.name, si.bytes);
    CGT_CHECK(si.kind == (pv->trainable ? CNNRT_STATE_PARAM : CNNRT_STATE_OPTIMIZER), "%s: %s: kind %d", opt, si.name,
              (int)si.kind);
    float *got = malloc(si.bytes);
    if (cnnrt_get_state(m, si.name, got, si.bytes) == CNNRT_OK) {
      char l[300];
      snprintf(l, sizeof l, "%s after %d steps: %s", opt, STEPS, si.name);
      bad += cgt_compare(l, got, pv->data, n, 1e-4);
      seen++;
    } else {
      bad++;
    }
    free(got);
  }
  int want_state = !strcmp(opt, "sgd") ? n_params : 2 * n_params; /* [+ momentum] */
  CGT_CHECK(seen == want_state, "%s: %d state tensors checked, want %d", opt, seen, want_state);
  free(img);
  free(x);
  cnnrt_close(m);
  unlink(so);
  ir_graph_free(gc);
  ir_graph_free(gr);
  fprintf(stderr, "%s %s\n", bad ? "FAIL" : "ok", opt);
  return bad;
}

int main(void) {
  (void)cgt_check_graph, (void)cgt_random_params;
  cgt_init_dir();
  const char *opts[] = {"sgd", "momentum", "nesterov"};
  n_params = 12; /* 6 layers x (weight, bias) */
  for (int i = 0; i < 3; i++) cgt_failures += run(opts[i]);
  char small[512];
  snprintf(small, sizeof small, "%s/small_train.yml", cgt_dir);
  FILE *f = fopen(small, "w");
  if (!f || fputs(small_yml, f) < 0 || fclose(f)) {
    fprintf(stderr, "cannot write %s\n", small);
    return 1;
  }
  model_path = small, n_params = 8; /* c1 w+b, c2 w, c3 w+b, d1 w, d2 w+b */
  for (int i = 0; i < 3; i++) cgt_failures += run(opts[i]);
  label_smoothing = "0.1"; /* --label-smoothing: loss and its gradient */
  cgt_failures += run("momentum");
  weight_decay = "0.01", l2 = "0.02", loss_scaling = "64"; /* decoupled + coupled decay, loss scaling */
  cgt_failures += run("nesterov");
  cgt_failures += run("sgd");
  unlink(small);
  cgt_cleanup_dir();
  if (cgt_failures) {
    fprintf(stderr, "%d failure(s)\n", cgt_failures);
    return 1;
  }
  printf("test_codegen_train: ok\n");
  return 0;
}
