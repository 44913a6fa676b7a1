/* test_codegen_train.c — compiled training (issue 5, docs/training.md) against the reference
 * interpreter: fmnist_cnn (conv/relu/maxpool/flatten/dense/softmax_xent) compiled with
 * --mode training at a small batch, opened with the runtime (cnnrt_open, cnnrt_train_step),
 * trained for 2 steps on random u8 images; the loss of each step and, after the steps, every
 * state tensor (weights and momentum buffers, i.e. the accumulated gradients) must match
 * ir_train_step on the same initial weights (rel. tol 1e-4).  Runs for SGD, momentum and
 * Nesterov (CNNC_TEST_QUICK=1: momentum only); also checks the state table (sizes, kinds).  A second, small model covers the
 * other kernel paths (and --label-smoothing 0.1; --weight-decay, --l2-regularization, --loss-scaling): stride-2 and dilated convs, an unpadded 5x5 conv, a padded 3x3 stride-2
 * maxpool, bias-free layers, a non-square f32 input, odd sizes (vector tails). */
#include "train_case_check.h"

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
  char b[16];
  snprintf(b, sizeof b, "%d", BATCH);
  const char *const kv[][2] = {{"mode", "training"}, {"batch-size", b}, {"optimizer", opt}, {"seed", "7"},
                               {"label-smoothing", label_smoothing}, {"weight-decay", weight_decay},
                               {"l2-regularization", l2}, {"loss-scaling", loss_scaling}};
  return cgt_load(path, kv, 8, o);
}

static int run(const char *opt) {
  fe_options o;
  ir_graph *gc = load(opt, &o), *gr = load(opt, &o);
  if (!gc || !gr) return 1;
  char so[512];
  snprintf(so, sizeof so, "%s/train_%s.so", cgt_dir, opt);
  cnnrt_model *m = tct_build(gr, gc, &o, opt, so, NULL, opt);
  if (!m) return 1;
  int bad = 0, seen = 0;
  CGT_CHECK(cnnrt_is_training(m), "%s: not a training model", opt);
  tct_batch b = tct_batch_alloc(gr);
  bad += tct_steps(m, gr, &b, STEPS, 0.05f, opt);
  bad += tct_compare_state(m, NULL, gr, STEPS, opt, &seen);
  int want_state = !strcmp(opt, "sgd") ? n_params : 2 * n_params; /* [+ momentum] */
  want_state += ir_find_value(gr, "optimizer/step") >= 0; /* the step counter training dropout reads */
  CGT_CHECK(seen == want_state, "%s: %d state tensors checked, want %d", opt, seen, want_state);
  return tct_free(&b, m, so, gc, gr, opt, bad);
}

/* ---- training kernel variants (gen_train_conv.c, gen_train_dense.c) -------------------------
 * Models whose shapes reach every tile variant and remainder path of the register-tiled
 * conv/dense kernels: channel counts that are no multiple of the tiles (10, 7, 9, 6, 3, 11,
 * 5), rows of 4, 9, 11, 21, 37 pixels (masked stores below one vector, overlapping last
 * vectors, several vector groups), 1x1, 1x5/3x5/5x5 kernels, stride 2 (strided loads,
 * scatter grad_input), input-channel blocks with a remainder (10 = 8 + 2), batches 1 and 3
 * (row tails of the dense tiles).  Each case runs momentum for KSTEPS steps with 1 and with 2
 * threads: losses and every state tensor vs ir_train_step (1e-4), and the 2-thread state
 * bitwise equal to the 1-thread state (static partitions, one writer per element). */
static const char *kern_a_yml =
    "name: kern_a\n"
    "input: {shape: [3, 7, 21], dtype: f32, classes: 5}\n"
    "layers:\n"
    "  - {name: c1, op: conv, filters: 10, kernel: 3, padding: 1}\n"
    "  - {name: r1, op: relu}\n"
    "  - {name: c2, op: conv, filters: 7, kernel: 3, padding: 1}\n"
    "  - {name: r2, op: relu}\n"
    "  - {name: c3, op: conv, filters: 9, kernel: 1}\n"
    "  - {name: c4, op: conv, filters: 6, kernel: 3, stride: 2, padding: 1}\n"
    "  - {name: r4, op: relu}\n"
    "  - {name: c5, op: conv, filters: 4, kernel: [1, 3]}\n"
    "  - {name: r5, op: relu}\n"
    "  - {name: p, op: maxpool, kernel: 2}\n"
    "  - {name: c6, op: conv, filters: 3, kernel: 3, padding: 1}\n"
    "  - {name: r6, op: relu}\n"
    "  - {name: f, op: flatten}\n"
    "  - {name: d1, op: dense, units: 11}\n"
    "  - {name: r7, op: relu}\n"
    "  - {name: d2, op: dense, units: 5}\n";
static const char *kern_b_yml =
    "name: kern_b\n"
    "input: {shape: [1, 4, 37], dtype: u8, classes: 3}\n"
    "layers:\n"
    "  - {name: c1, op: conv, filters: 8, kernel: 3, padding: 1}\n"
    "  - {name: r1, op: relu}\n"
    "  - {name: c2, op: conv, filters: 12, kernel: [3, 5], padding: [1, 2]}\n"
    "  - {name: r2, op: relu}\n"
    "  - {name: c3, op: conv, filters: 5, kernel: 5, padding: 2, bias: false}\n"
    "  - {name: f, op: flatten}\n"
    "  - {name: d, op: dense, units: 3}\n";

static int run_kernel_cases(void) { /* train_case_check.h run_case, without the eval program */
  tcc_seed = "11", tcc_eval = 0;
  int bad = run_ymls("kern_a", kern_a_yml, 1, 3, 0);
  return bad + run_yml("kern_b", kern_b_yml, 3);
}

int main(void) {
  cgt_init_dir();
  const char *opts[] = {"sgd", "momentum", "nesterov"};
  n_params = 12; /* 6 layers x (weight, bias) */
  /* CNNC_TEST_QUICK (quick mode): fmnist_cnn with momentum only (the small model
   * below runs the three optimizers) */
  for (int i = 0; i < 3; i++)
    if (!cgt_quick() || i == 1) cgt_failures += run(opts[i]);
  char small[512];
  if (cgt_write_tmp(small, "small_train.yml", small_yml)) return 1;
  model_path = small, n_params = 8; /* c1 w+b, c2 w, c3 w+b, d1 w, d2 w+b */
  for (int i = 0; i < 3; i++) cgt_failures += run(opts[i]);
  label_smoothing = "0.1"; /* --label-smoothing: loss and its gradient */
  cgt_failures += run("momentum");
  weight_decay = "0.01", l2 = "0.02", loss_scaling = "64"; /* decoupled + coupled decay, loss scaling */
  cgt_failures += run("nesterov");
  cgt_failures += run("sgd");
  unlink(small);
  cgt_failures += run_kernel_cases();
  return cgt_done("test_codegen_train");
}
