/* train_interp.c — interpreter-level training (issue 5): loads a model in training mode,
 * runs passes/autodiff.c and passes/optimizer.c, then N steps through the reference kernels
 * (ir_train_step writes the updates back into the params).  Test support for
 * test_train_torch.py; also a readable example of the training pipeline.
 *
 *   train_interp MODEL.yml [--batch N] [--seed S] [--weights W.safetensors]
 *       [--input X.f32] [--labels L.f32] [--steps K] [--lr LR]
 *       [--optimizer sgd|momentum|nesterov|rmsprop|adam] [--momentum M] [--rho R]
 *       [--beta1 B] [--beta2 B] [--eps E] [--weight-decay L] [--l2-regularization L]
 *       [--loss-scaling S] [--label-smoothing S] [--exempt-norm] [--dump-dir D] [--emit-ir F]
 *
 * Input: raw f32 NCHW (u8 models: values 0..255), default seeded random; labels f32 class
 * ids, default i mod classes.  Prints "step K loss V" per step.  --dump-dir D writes, for
 * every trainable param P, D/grad/P.f32 (the gradient of the first step; D/gradK/P.f32 for
 * step K >= 2) and D/param/P.f32 (every param's value after the last step), with '/' in P replaced by '.', plus D/loss.f32 (one loss
 * per step).  Exit status 0 ok, 1 error (diagnostic printed), 3 non-finite loss. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fe.h"
#include "ir.h"
#include "ir/grad_train.h"
#include "passes/passes.h"
#include "tool_f32.h"
#include "weights.h"

typedef struct args {
  const char *model, *weights, *input, *labels, *dump, *emit_ir, *batch, *seed;
  int steps, exempt_norm;
  float lr, label_smoothing;
  pass_optim_cfg opt;
} args;

static int usage(void) {
  fprintf(stderr, "usage: train_interp MODEL.yml [--batch N] [--seed S] [--weights W] [--input X.f32]\n"
                  "  [--labels L.f32] [--steps K] [--lr LR] [--optimizer O] [--momentum M] [--rho R]\n"
                  "  [--beta1 B] [--beta2 B] [--eps E] [--weight-decay L] [--l2-regularization L]\n"
                  "  [--loss-scaling S] [--label-smoothing S] [--exempt-norm] [--dump-dir D] [--emit-ir F]\n");
  return 2;
}

static int parse(int argc, char **argv, args *a) {
  memset(a, 0, sizeof *a);
  a->steps = 1, a->lr = 0.01f, a->opt.optimizer = "sgd", a->opt.loss_scale = 1.0f;
  for (int i = 1; i < argc; i++) {
    const char *k = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (k[0] != '-') { if (a->model) return -1; a->model = k; continue; }
    if (!strcmp(k, "--exempt-norm")) { a->opt.exempt_norm = 1; continue; }
    if (!v) return -1;
    i++;
    if (!strcmp(k, "--batch")) a->batch = v;
    else if (!strcmp(k, "--seed")) a->seed = v;
    else if (!strcmp(k, "--weights")) a->weights = v;
    else if (!strcmp(k, "--input")) a->input = v;
    else if (!strcmp(k, "--labels")) a->labels = v;
    else if (!strcmp(k, "--dump-dir")) a->dump = v;
    else if (!strcmp(k, "--emit-ir")) a->emit_ir = v;
    else if (!strcmp(k, "--steps")) a->steps = atoi(v);
    else if (!strcmp(k, "--lr")) a->lr = strtof(v, NULL);
    else if (!strcmp(k, "--optimizer")) a->opt.optimizer = v;
    else if (!strcmp(k, "--momentum")) a->opt.momentum = strtof(v, NULL);
    else if (!strcmp(k, "--rho")) a->opt.rho = strtof(v, NULL);
    else if (!strcmp(k, "--beta1")) a->opt.beta1 = strtof(v, NULL);
    else if (!strcmp(k, "--beta2")) a->opt.beta2 = strtof(v, NULL);
    else if (!strcmp(k, "--eps")) a->opt.eps = strtof(v, NULL);
    else if (!strcmp(k, "--weight-decay")) a->opt.weight_decay = strtof(v, NULL);
    else if (!strcmp(k, "--l2-regularization")) a->opt.l2 = strtof(v, NULL);
    else if (!strcmp(k, "--loss-scaling")) a->opt.loss_scale = strtof(v, NULL);
    else if (!strcmp(k, "--label-smoothing")) a->label_smoothing = strtof(v, NULL);
    else return -1;
  }
  return a->model && a->steps >= 1 ? 0 : -1;
}

static int write_f32(const char *dir, const char *sub, const char *name, const float *x, size_t n) {
  char path[1024], fname[512];
  snprintf(fname, sizeof fname, "%s", name);
  for (char *p = fname; *p; p++)
    if (*p == '/') *p = '.';
  snprintf(path, sizeof path, "%s/%s", dir, sub);
  mkdir(path, 0777);
  snprintf(path, sizeof path, "%s/%s/%s.f32", dir, sub, fname);
  FILE *f = fopen(path, "wb");
  if (!f || fwrite(x, sizeof(float), n, f) != n) {
    perror(path);
    if (f) fclose(f);
    return -1;
  }
  return fclose(f);
}

/* Loads the model in training mode and appends backward + optimizer.  NULL on error. */
static ir_graph *build(const args *a, ir_diag *d) {
  fe_options o;
  fe_options_init(&o);
  if ((a->batch && fe_option_set(&o, fe_option_find("batch-size"), a->batch, d) < 0) ||
      (a->seed && fe_option_set(&o, fe_option_find("seed"), a->seed, d) < 0) ||
      fe_option_set(&o, fe_option_find("mode"), "training", d) < 0)
    return NULL;
  if (a->label_smoothing > 0) { /* the option is not wired to cnnc yet: set it directly */
    o.label_smoothing = a->label_smoothing;
    o.set[FE_OPTK_label_smoothing] = 1;
  }
  ir_graph *g = fe_load(a->model, &o, d);
  if (!g) return NULL;
  if ((a->weights && fe_load_safetensors(g, a->weights, 0, d) < 0) || pass_autodiff(g, a->opt.loss_scale, d) < 0 ||
      pass_optimizer(g, &a->opt, d) < 0 || ir_verify(g, d) < 0) {
    ir_graph_free(g);
    return NULL;
  }
  return g;
}

static void feed(const ir_graph *g, const args *a, float *x, float *labels, int *bad) {
  const ir_value *in = &g->values[g->input];
  size_t n = (size_t)ir_shape_numel(&in->shape);
  uint64_t s = 1;
  if (a->input) *bad |= read_f32_exact(a->input, x, n) < 0;
  else
    for (size_t i = 0; i < n; i++) {
      uint64_t z = (s += 0x9E3779B97F4A7C15ull);
      z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
      z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
      z ^= z >> 31;
      x[i] = in->dtype == IR_U8 ? (float)(z >> 56) : (float)((double)(z >> 11) * 0x1p-53 * 2.0 - 1.0);
    }
  int64_t classes = g->values[g->nodes[g->values[g->outputs[g->n_outputs - 1]].producer].in[0]].shape.dim[1];
  if (a->labels) *bad |= read_f32_exact(a->labels, labels, (size_t)g->batch) < 0;
  else
    for (int i = 0; i < g->batch; i++) labels[i] = (float)(i % classes);
}

int main(int argc, char **argv) {
  args a;
  if (parse(argc, argv, &a)) return usage();
  ir_diag d = {0};
  ir_graph *g = build(&a, &d);
  if (!g) { ir_diag_print(&d, stderr); return 1; }
  if (a.emit_ir) {
    FILE *f = fopen(a.emit_ir, "w");
    if (f) ir_print(g, f), fclose(f);
  }
  float *x = malloc((size_t)ir_shape_numel(&g->values[g->input].shape) * sizeof *x);
  float *labels = malloc((size_t)g->batch * sizeof *labels), *losses = malloc((size_t)a.steps * sizeof *losses);
  int bad = !x || !labels || !losses, status = 0;
  if (!bad) feed(g, &a, x, labels, &bad);
  int loss = g->outputs[g->n_outputs - 1];
  for (int s = 0; s < a.steps && !bad; s++) {
    float **vals = ir_train_step(g, x, labels, a.lr);
    losses[s] = vals[loss][0];
    printf("step %d loss %.7g\n", s + 1, losses[s]);
    if (!isfinite(losses[s])) status = 3;
    char sub[32];
    snprintf(sub, sizeof sub, s == 0 ? "grad" : "grad%d", s + 1);
    for (int v = 0; a.dump && v < g->n_values && !bad; v++) {
      const ir_value *p = &g->values[v];
      int gv = p->kind == IR_VAL_PARAM && p->trainable ? ir_find_value(g, ir_fmt(g->arena, "grad/%s", p->name)) : -1;
      if (gv >= 0) bad |= write_f32(a.dump, sub, p->name, vals[gv], (size_t)ir_shape_numel(&p->shape)) < 0;
    }
    ir_interp_free(g, vals);
  }
  for (int v = 0; a.dump && v < g->n_values && !bad; v++) {
    const ir_value *p = &g->values[v];
    if (p->kind == IR_VAL_PARAM) bad |= write_f32(a.dump, "param", p->name, p->data, (size_t)ir_shape_numel(&p->shape)) < 0;
  }
  if (a.dump && !bad) {
    char path[1024];
    snprintf(path, sizeof path, "%s/loss.f32", a.dump);
    FILE *f = fopen(path, "wb");
    bad |= !f || fwrite(losses, sizeof(float), (size_t)a.steps, f) != (size_t)a.steps;
    if (f) fclose(f);
  }
  free(x), free(labels), free(losses);
  ir_graph_free(g);
  return bad ? 1 : status;
}
