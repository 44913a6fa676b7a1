/* test_codegen_train_norm.c — compiled training of normalisation layers and the adaptive
 * optimizers (issue 5, docs/training.md) against the reference interpreter: a model is
 * compiled with --mode training, opened with the runtime (cnnrt_open with a fixed thread
 * count), trained for 2 steps with cnnrt_train_step on random f32 images; the loss of each
 * step and, after the steps, every state tensor (weights, optimizer state incl. Adam's step
 * counter, batchnorm running mean/var) must match ir_train_step on the same initial weights
 * within 1e-4 (relative, tests/unit/test_codegen_harness.h cgt_compare).
 *
 * Models: the zoo's CIFAR ResNet-8 (momentum; batchnorm in training mode, residual adds, global average
 * pool), a small model with group norm, swish, sigmoid, clip, concat, lrn, hardswish, relu6, hardsigmoid,
 * batchnorm, both average-pool padding
 * modes, global average pool and softmax (every backward kernel of gen_train_norm.c and
 * gen_train_act.c); optimizers SGD, momentum, RMSprop and Adam, with decoupled weight decay,
 * coupled L2 and loss scaling.  After the steps, cnnrt_evaluate (the eval program: batchnorm
 * with the running statistics, through its eval-mode kernels) vs ir_interp of the forward
 * graph with every batchnorm in inference mode and the trained params. */
#include "test_codegen_harness.h"
#include "train_codegen_check.h"

enum { STEPS = 2 };

static const char *misc_yml =
    "name: norm_train\n"
    "input: {shape: [3, 12, 10], dtype: f32, classes: 5}\n"
    "layers:\n"
    "  - {name: c1, op: conv, filters: 8, kernel: 3, padding: 1}\n"
    "  - {name: gn1, op: groupnorm, groups: 2}\n"
    "  - {name: cl, op: clip, min: -0.5, max: 0.8}\n"
    "  - {name: s1, op: swish}\n"
    "  - {name: c2, op: conv, filters: 6, kernel: 3, padding: 1, bias: false}\n"
    "  - {name: bn2, op: batchnorm, momentum: 0.2}\n"
    "  - {name: sg, op: sigmoid}\n"
    "  - {name: p1, op: avgpool, kernel: 3, stride: 2, padding: 1, count_include_pad: false}\n"
    "  - {name: gn2, op: groupnorm, groups: 3}\n"
    "  - {name: s2, op: swish}\n"
    "  - {name: hs, op: hardswish}\n"
    "  - {name: cat, op: concat, inputs: [hs, p1]}\n"
    "  - {name: p2, op: avgpool, kernel: 2, stride: 2, ceil_mode: true}\n"
    "  - {name: c3, op: conv, filters: 9, kernel: 1, bias: false}\n"
    "  - {name: bn3, op: batchnorm}\n"
    "  - {name: r3, op: relu6}\n"
    "  - {name: ln, op: lrn, size: 3, alpha: 0.5, beta: 0.75, bias: 1.5}\n"
    "  - {name: lk, op: leaky_relu, alpha: 0.2}\n"
    "  - {name: hsg, op: hardsigmoid, alpha: 0.3, beta: 0.4}\n"
    "  - {name: g, op: global_avgpool}\n"
    "  - {name: f, op: flatten}\n"
    "  - {name: d1, op: dense, units: 7}\n"
    "  - {name: sm, op: softmax}\n"
    "  - {name: d2, op: dense, units: 5}\n";

typedef struct tcase {
  const char *model; /* path */
  const char *opt, *wd, *l2, *scale;
  int batch, threads;
  float lr;
} tcase;

static ir_graph *load(const tcase *t, fe_options *o) {
  char b[16];
  snprintf(b, sizeof b, "%d", t->batch);
  const char *const kv[][2] = {{"mode", "training"}, {"batch-size", b}, {"optimizer", t->opt}, {"seed", "11"},
                               {"weight-decay", t->wd}, {"l2-regularization", t->l2}, {"loss-scaling", t->scale}};
  return cgt_load(t->model, kv, 7, o);
}

static int run(const tcase *t) {
  fe_options o;
  ir_graph *gc = load(t, &o), *gr = load(t, &o);
  if (!gc || !gr) return 1;
  const char *name = strrchr(t->model, '/') ? strrchr(t->model, '/') + 1 : t->model;
  char label[128];
  snprintf(label, sizeof label, "%s %s wd %s l2 %s scale %s, %d thr", name, t->opt, t->wd, t->l2, t->scale, t->threads);
  char so[512];
  snprintf(so, sizeof so, "%s/train_norm_%s.so", cgt_dir, t->opt);
  cnnrt_options ro;
  cnnrt_options_init(&ro);
  ro.threads_per_shard = t->threads;
  cnnrt_model *m = tct_build(gr, gc, &o, t->opt, so, &ro, label);
  if (!m) return 1;
  tct_batch b = tct_batch_alloc(gr);
  int bad = tct_steps(m, gr, &b, STEPS, t->lr, label), seen = 0, n_params = 0, n_buffers = 0;
  for (int v = 0; v < gr->n_values; v++)
    if (gr->values[v].kind == IR_VAL_PARAM) n_params++, n_buffers += tct_want_kind(&gr->values[v]) == CNNRT_STATE_BUFFER;
  bad += tct_compare_state(m, NULL, gr, STEPS, label, &seen);
  if (n_buffers > 0) /* the eval program (running statistics) vs the forward in inference mode with the trained params */
    bad += tct_check_eval(m, &b, tct_eval_loss(load(t, &o), gr, b.x, b.labels), label);
  CGT_CHECK(seen == n_params, "%s: %d state tensors checked, the graph has %d params", label, seen, n_params);
  CGT_CHECK(n_buffers > 0 || !strstr(name, "resnet"), "%s: no running statistics in the state", label);
  return tct_free(&b, m, so, gc, gr, label, bad);
}

int main(void) {
  cgt_init_dir();
  char misc[512], r8[512];
  snprintf(r8, sizeof r8, "%s/models/cifar_resnet8.yml", CNNC_TEST_SRC);
  if (cgt_write_tmp(misc, "norm_train.yml", misc_yml)) return 1;
  const tcase cases[] = {
      {r8, "momentum", "0", "0", "1", 3, 2, 0.05f}, /* (Adam on ResNet-8: test_train_torch) */
      {misc, "sgd", "0", "0", "1", 3, 2, 0.1f},
      {misc, "momentum", "0.01", "0.02", "16", 3, 3, 0.1f},
      {misc, "rmsprop", "0.01", "0.02", "8", 3, 1, 0.001f},
      {misc, "adam", "0", "0", "1", 3, 2, 0.001f},
      {misc, "adam", "0.01", "0.02", "32", 3, 3, 0.001f},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) cgt_failures += run(&cases[i]);
  unlink(misc);
  return cgt_done("test_codegen_train_norm");
}
