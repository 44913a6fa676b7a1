/* rt_eval.c — evaluation of training models: cnnrt_evaluate and cnnrt_evaluate_samples run
 * the eval program (rt_train.c) and compute, from the logits train tensor it writes, each
 * sample's plain softmax cross-entropy (without the label smoothing of the compiled loss) and
 * the rank of its label (top-1, top-5); and the label check every training call makes. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt_internal.h"

/* Labels must be class ids: whole numbers in 0..k-1 (the loss kernels index the logits row
 * with them). */
cnnrt_status rt_check_labels(const char *fn, const float *labels, int64_t n, int64_t k) {
  for (int64_t i = 0; i < n; i++)
    if (!(labels[i] >= 0 && labels[i] < (float)k && labels[i] == floorf(labels[i])))
      return rt_fail(CNNRT_INVALID_ARGUMENT, "%s: label %lld is %g, not a class id in 0..%lld", fn, (long long)i,
                     (double)labels[i], (long long)(k - 1));
  return CNNRT_OK;
}

/* The train tensor of the logits the eval program writes: an output of an eval stage named as
 * the model's output 0 (cnnc_model_v1 describes images -> logits), f32 [batch, K]; -1 if none
 * (hand-written models may keep the logits inside a stage). */
static int rt_eval_logits(const cnnrt_model *m) {
  const cnnc_abi_train *t = m->tr->t;
  const char *name = m->d->tensors[m->d->outputs[0]].name;
  for (int s = 0; s < t->eval.n_stages; s++) {
    const cnnc_abi_stage *st = &t->eval.stages[s];
    for (int j = st->n_inputs; j < st->n_io; j++) {
      const cnnc_abi_tensor *x = &t->tensors[st->io[j]];
      if (!strcmp(x->name, name) && x->dtype == CNNC_ABI_F32 && x->rank == 2 && x->dims[0] == m->d->batch_size)
        return st->io[j];
    }
  }
  return -1;
}

/* Row r of logits x [*, k] with label y: the plain softmax cross-entropy (no label smoothing),
 * in double, and the label's rank: the classes before it in the order of the compiled top-1
 * (greater logit first, ties to the lower class); k when the label's logit is NaN. */
static void rt_row_eval(const float *x, int64_t k, int64_t y, double *loss, int32_t *rank) {
  float mx = x[0];
  for (int64_t j = 1; j < k; j++) mx = x[j] > mx || mx != mx ? x[j] : mx;
  double sum = 0;
  for (int64_t j = 0; j < k; j++) sum += exp((double)x[j] - (double)mx);
  *loss = (double)mx + log(sum) - (double)x[y];
  int64_t r = 0;
  float xy = x[y];
  if (xy != xy) r = k;
  else
    for (int64_t j = 0; j < k; j++) r += x[j] > xy || (j < y && x[j] == xy);
  *rank = (int32_t)(r < INT32_MAX ? r : INT32_MAX);
}

/* cnnrt_evaluate and cnnrt_evaluate_samples: the eval program over n micro-batches; per
 * sample, from the logits (when the eval program writes them, lg >= 0), its plain
 * cross-entropy and rank into sloss/srank (either may be NULL); the sums of the losses (plain
 * CE per micro-batch mean, else the compiled loss) and top-1 counts into *loss_sum,
 * *correct_sum. */
static cnnrt_status rt_eval_run(cnnrt_model *m, const char *fn, const void *images, size_t images_bytes, const float *labels,
                                int n, int lg, float *sloss, int32_t *srank, double *loss_sum, double *correct_sum) {
  cnnrt_status s = rt_check_batch_args(m, fn, images, images_bytes, labels, n);
  if (s != CNNRT_OK) return s;
  const cnnc_abi_train *t = m->tr->t;
  if (t->eval.n_stages == 0) return rt_fail(CNNRT_UNSUPPORTED, "%s: %s has no eval program", fn, m->path);
  int b = m->d->batch_size;
  int64_t k = m->d->tensors[m->d->outputs[0]].rank == 2 ? m->d->tensors[m->d->outputs[0]].dims[1] : 0;
  if (k > 0 && (s = rt_check_labels(fn, labels, (int64_t)n * b, k)) != CNNRT_OK) return s;
  if (lg >= 0 && t->tensors[lg].dims[1] != k) lg = -1;
  pthread_mutex_lock(&m->lock);
  s = rt_pools_ready(m);
  const float *fed = s == CNNRT_OK ? rt_labels_widen(m, labels, (int64_t)n * b) : labels; /* the model's width */
  if (!fed) s = rt_fail(CNNRT_OUT_OF_MEMORY, "%s: out of memory for %lld mixed-label rows", fn, (long long)n * b);
  for (int i = 0; i < n && s == CNNRT_OK; i++) {
    double kl = 0, ce = 0;
    s = rt_feed_and_run(m, &t->eval, images, fed, i, &kl, correct_sum);
    if (s != CNNRT_OK) break;
    if (lg < 0) {
      *loss_sum += kl;
      continue;
    }
    const float *x = rt_frame_tensor(m, 0, lg);
    for (int r = 0; r < b; r++) {
      size_t at = (size_t)i * (size_t)b + (size_t)r;
      double l;
      int32_t rk;
      rt_row_eval(x + (size_t)r * (size_t)k, k, (int64_t)labels[at], &l, &rk);
      ce += l;
      if (sloss) sloss[at] = (float)l;
      if (srank) srank[at] = rk;
    }
    *loss_sum += ce / b;
  }
  pthread_mutex_unlock(&m->lock);
  return s;
}

CNNRT_API cnnrt_status cnnrt_evaluate(cnnrt_model *m, const void *images, size_t images_bytes, const float *labels,
                                      int n_batches, float *loss, float *accuracy) {
  rt_clear_error();
  cnnrt_status s = rt_need_train(m, "cnnrt_evaluate");
  if (s != CNNRT_OK) return s;
  double loss_sum = 0, correct_sum = 0;
  s = rt_eval_run(m, "cnnrt_evaluate", images, images_bytes, labels, n_batches, rt_eval_logits(m), NULL, NULL, &loss_sum,
                  &correct_sum);
  if (s == CNNRT_OK) rt_report(n_batches, m->d->batch_size, loss_sum, correct_sum, loss, accuracy);
  return s;
}

CNNRT_API cnnrt_status cnnrt_evaluate_samples(cnnrt_model *m, const void *images, size_t images_bytes, const float *labels,
                                              int n_batches, float *loss, int32_t *rank) {
  rt_clear_error();
  cnnrt_status s = rt_need_train(m, "cnnrt_evaluate_samples");
  if (s != CNNRT_OK) return s;
  int lg = rt_eval_logits(m);
  if (lg < 0)
    return rt_fail(CNNRT_UNSUPPORTED, "cnnrt_evaluate_samples: the eval program of %s does not write the logits '%s' as a "
                   "train tensor", m->path, m->d->tensors[m->d->outputs[0]].name);
  double loss_sum = 0, correct_sum = 0;
  return rt_eval_run(m, "cnnrt_evaluate_samples", images, images_bytes, labels, n_batches, lg, loss, rank, &loss_sum,
                     &correct_sum);
}
