/* test_runtime_train.c — training through libcnnrt on the hand-written training models of
 * tests/tools (libfake_train*.c: softmax regression, 1 shard fused / 2 shards with gradient
 * accumulation): the state table and its initial values, train_step lowering the loss and
 * reaching high accuracy on a separable synthetic problem, learning-rate feeding, evaluate
 * not changing the state, thread counts not changing results, checkpoint round trip, refused
 * checkpoints (another model, corrupt, truncated) leaving the state unchanged, and the
 * errors of non-training models, a bad training descriptor and wrong buffer sizes. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime/cnnrt.h"

#include "check.h"

#define LIB(v) CNNC_TEST_BIN "/tests/lib" v ".so"
enum { B = 16, D = 784, K = 10 };

static cnnrt_model *open_ok(const char *path) {
  cnnrt_model *m = NULL;
  cnnrt_status s = cnnrt_open(path, NULL, &m);
  CHECK(s == CNNRT_OK && m, "open %s: %s: %s", path, cnnrt_status_name(s), cnnrt_last_error());
  return m;
}

/* n samples of the synthetic separable problem in the model's input dtype. */
typedef struct data {
  void *x;
  float *y;
  size_t bytes;
} data;

static data make_data(cnnrt_model *m, int64_t n, uint64_t seed) {
  cnnrt_dataset *ds = NULL;
  cnnrt_tensor_info in;
  cnnrt_input_info(m, &in);
  data d = {0};
  if (cnnrt_dataset_synthetic(n, 1, 28, 28, 10, seed, &ds) != CNNRT_OK) return d;
  d.bytes = (size_t)n * (in.bytes / B);
  d.x = malloc(d.bytes);
  d.y = malloc((size_t)n * sizeof *d.y);
  cnnrt_dataset_read(ds, 0, n, in.dtype, d.x, d.y);
  cnnrt_dataset_close(ds);
  return d;
}

static void free_data(data *d) { free(d->x), free(d->y); }

static void test_state_table(void) {
  cnnrt_model *m = open_ok(LIB("fake_train"));
  if (!m) return;
  CHECK(cnnrt_is_training(m) && cnnrt_grad_accum(m) == 1 && cnnrt_num_state(m) == 6, "training model, 6 state tensors");
  cnnrt_state_info si;
  CHECK(cnnrt_state_info_at(m, 0, &si) == CNNRT_OK && !strcmp(si.name, "fc/weight") && si.kind == CNNRT_STATE_PARAM &&
            si.rank == 2 && si.dims[0] == K && si.dims[1] == D && si.bytes == 4 * K * D,
        "fc/weight info");
  CHECK(cnnrt_state_info_at(m, 5, &si) == CNNRT_OK && !strcmp(si.name, "optimizer/step") && si.dtype == CNNRT_I32 &&
            si.rank == 0,
        "optimizer/step info");
  CHECK(cnnrt_state_info_at(m, 6, &si) == CNNRT_INVALID_ARGUMENT, "index 6");
  float bias[K];
  CHECK(cnnrt_get_state(m, "fc/bias", bias, sizeof bias) == CNNRT_OK && bias[0] == 0.01f && bias[9] == -0.05f,
        "bias initialised from the descriptor: %g", bias[0]);
  CHECK(cnnrt_get_state(m, "fc/bias", bias, 8) == CNNRT_SHAPE_MISMATCH, "short buffer");
  CHECK(cnnrt_get_state(m, "nope", bias, 8) == CNNRT_INVALID_ARGUMENT && strstr(cnnrt_last_error(), "'nope'"), "unknown name");
  cnnrt_close(m);
}

/* Trains `updates` steps of n updates per call; returns the first and last call's loss and
 * the last accuracy. */
static void train(cnnrt_model *m, const data *d, int calls, int n, float *first, float *last, float *acc) {
  int per = n * cnnrt_grad_accum(m) * B; /* samples per call */
  size_t sb = d->bytes / 2048;            /* bytes per sample (data has 2048 samples) */
  for (int c = 0; c < calls; c++) {
    int off = (c * per) % 2048;
    float loss = NAN, a = NAN;
    cnnrt_status s = cnnrt_train_step(m, (char *)d->x + (size_t)off * sb, (size_t)per * sb, d->y + off, n, &loss, &a);
    CHECK(s == CNNRT_OK, "train_step: %s", cnnrt_last_error());
    if (c == 0) *first = loss;
    *last = loss, *acc = a;
  }
}

static void test_learns(const char *lib, int threads) {
  cnnrt_model *m = open_ok(lib);
  if (!m) return;
  data d = make_data(m, 2048, 7);
  if (threads) cnnrt_set_threads(m, -1, threads);
  CHECK(cnnrt_set_learning_rate(m, 0.05) == CNNRT_OK && cnnrt_learning_rate(m) == 0.05, "set lr");
  float first, last, acc;
  train(m, &d, 32, 4, &first, &last, &acc);
  CHECK(first > 1.5f && last < 0.5f * first && acc > 0.9f, "%s: loss %g -> %g, accuracy %g", lib, first, last, acc);
  CHECK(cnnrt_train_steps_done(m) == 128, "%s: %lld steps", lib, (long long)cnnrt_train_steps_done(m));
  int32_t step = 0;
  CHECK(cnnrt_get_state(m, "optimizer/step", &step, 4) == CNNRT_OK && step == 128, "model step counter %d", step);
  /* evaluate: high accuracy on fresh data, state untouched */
  data t = make_data(m, B * 8, 99);
  float w0[K], w1[K], vl, va;
  cnnrt_get_state(m, "fc/bias", w0, sizeof w0);
  CHECK(cnnrt_evaluate(m, t.x, t.bytes, t.y, 8, &vl, &va) == CNNRT_OK && va > 0.9f, "%s: eval accuracy %g loss %g (%s)", lib,
        va, vl, cnnrt_last_error());
  cnnrt_get_state(m, "fc/bias", w1, sizeof w1);
  CHECK(!memcmp(w0, w1, sizeof w0) && cnnrt_train_steps_done(m) == 128, "evaluate changed the state");
  { /* per sample: the losses average to cnnrt_evaluate's, rank 0 counts its accuracy */
    float sl[B * 8];
    int32_t rk[B * 8];
    double ls = 0, hits = 0;
    CHECK(cnnrt_evaluate_samples(m, t.x, t.bytes, t.y, 8, sl, rk) == CNNRT_OK, "%s: evaluate_samples: %s", lib, cnnrt_last_error());
    for (int i = 0; i < B * 8; i++) ls += sl[i], hits += rk[i] == 0;
    CHECK(fabs(ls / (B * 8) - vl) < 1e-5 * (1 + vl) && fabs(hits / (B * 8) - va) < 1e-6, "%s: samples loss %g acc %g, evaluate %g %g",
          lib, ls / (B * 8), hits / (B * 8), vl, va);
    float bad = t.y[5];
    t.y[5] = K; /* not a class id: refused, before anything runs */
    CHECK(cnnrt_evaluate_samples(m, t.x, t.bytes, t.y, 8, sl, rk) == CNNRT_INVALID_ARGUMENT && strstr(cnnrt_last_error(), "label 5 is 10"),
          "%s: label K: %s", lib, cnnrt_last_error());
    t.y[5] = 1.5f;
    CHECK(cnnrt_evaluate(m, t.x, t.bytes, t.y, 8, &vl, &va) == CNNRT_INVALID_ARGUMENT, "%s: label 1.5 evaluated", lib);
    CHECK(cnnrt_train_step(m, t.x, t.bytes / 8 * (size_t)cnnrt_grad_accum(m), t.y, 1, &vl, NULL) == CNNRT_INVALID_ARGUMENT &&
              cnnrt_train_steps_done(m) == 128, "%s: label 1.5 trained: %s", lib, cnnrt_last_error());
    t.y[5] = bad;
  }
  /* lr 0 freezes the weights */
  cnnrt_set_learning_rate(m, 0);
  float l;
  CHECK(cnnrt_train_step(m, d.x, d.bytes / 2048 * (size_t)(B * cnnrt_grad_accum(m)), d.y, 1, &l, NULL) == CNNRT_OK, "lr 0 step");
  cnnrt_get_state(m, "fc/bias", w1, sizeof w1);
  CHECK(!memcmp(w0, w1, sizeof w0), "lr 0 changed the weights");
  CHECK(cnnrt_set_learning_rate(m, -1) == CNNRT_INVALID_ARGUMENT && cnnrt_set_learning_rate(m, NAN) == CNNRT_INVALID_ARGUMENT,
        "bad lr");
  free_data(&t);
  free_data(&d);
  cnnrt_close(m);
}

/* The same steps on 1 and 3 threads give bitwise the same weights (classes are split). */
static void test_threads_same(void) {
  float w[2][K * D];
  for (int r = 0; r < 2; r++) {
    cnnrt_model *m = open_ok(LIB("fake_train"));
    if (!m) return;
    cnnrt_set_threads(m, -1, r ? 3 : 1);
    data d = make_data(m, 2048, 3);
    float a, b, c;
    train(m, &d, 4, 8, &a, &b, &c);
    cnnrt_get_state(m, "fc/weight", w[r], sizeof w[r]);
    free_data(&d);
    cnnrt_close(m);
  }
  CHECK(!memcmp(w[0], w[1], sizeof w[0]), "1 and 3 threads differ");
}

static int64_t file_size(const char *p) {
  FILE *f = fopen(p, "rb");
  if (!f) return -1;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fclose(f);
  return n;
}

static void test_checkpoints(void) {
  char path[256], other[256], bad[256];
  snprintf(path, sizeof path, "/tmp/cnnc_ckpt_%ld.safetensors", (long)getpid());
  snprintf(other, sizeof other, "/tmp/cnnc_ckpt2_%ld.safetensors", (long)getpid());
  snprintf(bad, sizeof bad, "/tmp/cnnc_ckpt3_%ld.safetensors", (long)getpid());
  cnnrt_model *m = open_ok(LIB("fake_train")), *m2 = open_ok(LIB("fake_train2"));
  if (!m || !m2) return;
  data d = make_data(m, 2048, 5);
  float a, b, c;
  train(m, &d, 2, 5, &a, &b, &c);
  static float w_saved[K * D], w_now[K * D], mom_saved[K * D], mom_now[K * D];
  cnnrt_get_state(m, "fc/weight", w_saved, sizeof w_saved);
  cnnrt_get_state(m, "fc/weight/momentum", mom_saved, sizeof mom_saved);
  CHECK(cnnrt_save_checkpoint(m, path) == CNNRT_OK, "save: %s", cnnrt_last_error());
  char tmp[300];
  snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
  CHECK(access(tmp, F_OK) != 0, "temporary file left behind");
  int64_t step = -1;
  CHECK(cnnrt_checkpoint_step(path, &step) == CNNRT_OK && step == 10, "checkpoint step %lld", (long long)step);
  train(m, &d, 1, 3, &a, &b, &c);
  cnnrt_get_state(m, "fc/weight", w_now, sizeof w_now);
  CHECK(memcmp(w_now, w_saved, sizeof w_now) != 0 && cnnrt_train_steps_done(m) == 13, "training moved on");
  CHECK(cnnrt_load_checkpoint(m, path) == CNNRT_OK, "load: %s", cnnrt_last_error());
  cnnrt_get_state(m, "fc/weight", w_now, sizeof w_now);
  cnnrt_get_state(m, "fc/weight/momentum", mom_now, sizeof mom_now);
  CHECK(!memcmp(w_now, w_saved, sizeof w_now) && !memcmp(mom_now, mom_saved, sizeof mom_now), "weights/momentum restored");
  CHECK(cnnrt_train_steps_done(m) == 10, "step restored: %lld", (long long)cnnrt_train_steps_done(m));
  /* the same steps after a restore give the same weights */
  float w_a[K * D];
  train(m, &d, 1, 3, &a, &b, &c);
  cnnrt_get_state(m, "fc/weight", w_a, sizeof w_a);
  cnnrt_load_checkpoint(m, path);
  train(m, &d, 1, 3, &a, &b, &c);
  cnnrt_get_state(m, "fc/weight", w_now, sizeof w_now);
  CHECK(!memcmp(w_a, w_now, sizeof w_a), "restored training is not reproducible");
  /* another model's checkpoint: refused, state unchanged */
  CHECK(cnnrt_save_checkpoint(m2, other) == CNNRT_OK, "save m2: %s", cnnrt_last_error());
  CHECK(cnnrt_load_checkpoint(m, other) == CNNRT_SHAPE_MISMATCH, "m2's checkpoint into m");
  CHECK(strstr(cnnrt_last_error(), other) && strstr(cnnrt_last_error(), "lacks state tensor 'fc/weight/momentum'"),
        "message: %s", cnnrt_last_error());
  CHECK(cnnrt_load_checkpoint(m2, path) == CNNRT_SHAPE_MISMATCH && strstr(cnnrt_last_error(), "'fc/weight/momentum' is not in the state"),
        "m's checkpoint into m2: %s", cnnrt_last_error());
  cnnrt_get_state(m, "fc/weight", w_a, sizeof w_a);
  CHECK(!memcmp(w_a, w_now, sizeof w_a), "refused load changed the state");
  /* corrupt and truncated files */
  FILE *f = fopen(path, "rb");
  int64_t n = file_size(path);
  char *buf = malloc((size_t)n);
  if (!f || !buf || fread(buf, 1, (size_t)n, f) != (size_t)n) CHECK(0, "read back %s", path);
  if (f) fclose(f);
  f = fopen(bad, "wb");
  fwrite(buf, 1, (size_t)n - 100, f);
  fclose(f);
  CHECK(cnnrt_load_checkpoint(m, bad) == CNNRT_BAD_MODEL && strstr(cnnrt_last_error(), "outside the") &&
            strstr(cnnrt_last_error(), bad),
        "truncated: %s", cnnrt_last_error());
  char *shape = strstr(buf + 8, "[10,784]");
  if (shape) memcpy(shape, "[784,10]", 8);
  f = fopen(bad, "wb");
  fwrite(buf, 1, (size_t)n, f);
  fclose(f);
  CHECK(cnnrt_load_checkpoint(m, bad) == CNNRT_SHAPE_MISMATCH && strstr(cnnrt_last_error(), "is F32 [784,10] in the checkpoint, the model has F32 [10,784]"),
        "shape: %s", cnnrt_last_error());
  buf[12] = '!';
  f = fopen(bad, "wb");
  fwrite(buf, 1, (size_t)n, f);
  fclose(f);
  CHECK(cnnrt_load_checkpoint(m, bad) == CNNRT_BAD_MODEL && strstr(cnnrt_last_error(), "bad safetensors header"), "garbled: %s",
        cnnrt_last_error());
  f = fopen(bad, "wb");
  fwrite("\xff\xff\xff\xff\xff\xff\xff\x7f", 1, 8, f);
  fclose(f);
  CHECK(cnnrt_load_checkpoint(m, bad) == CNNRT_BAD_MODEL && strstr(cnnrt_last_error(), "header length"), "huge header: %s",
        cnnrt_last_error());
  CHECK(cnnrt_load_checkpoint(m, "/nonexistent/x.safetensors") == CNNRT_IO, "missing file");
  CHECK(cnnrt_save_checkpoint(m, "/nonexistent/x.safetensors") == CNNRT_IO && strstr(cnnrt_last_error(), "cannot create"),
        "unwritable: %s", cnnrt_last_error());
  cnnrt_get_state(m, "fc/weight", w_a, sizeof w_a);
  CHECK(!memcmp(w_a, w_now, sizeof w_a), "refused loads changed the state");
  free(buf);
  free_data(&d);
  unlink(path), unlink(other), unlink(bad);
  cnnrt_close(m);
  cnnrt_close(m2);
}

static void test_errors(void) {
  cnnrt_model *m = open_ok(LIB("fake_model")); /* inference */
  float l;
  char x[8];
  if (m) {
    CHECK(!cnnrt_is_training(m) && cnnrt_train_step(m, x, 8, (float *)x, 1, &l, NULL) == CNNRT_UNSUPPORTED &&
              strstr(cnnrt_last_error(), "an inference model"),
          "train on an inference model: %s", cnnrt_last_error());
    CHECK(cnnrt_save_checkpoint(m, "/tmp/x") == CNNRT_UNSUPPORTED, "checkpoint of an inference model");
    cnnrt_close(m);
  }
  m = open_ok(LIB("fake_model_training")); /* mode 1, no cnnc_train_v1 */
  if (m) {
    CHECK(cnnrt_evaluate(m, x, 8, (float *)x, 1, &l, NULL) == CNNRT_UNSUPPORTED && strstr(cnnrt_last_error(), "cnnc_train_v1"),
          "no training descriptor: %s", cnnrt_last_error());
    cnnrt_close(m);
  }
  m = (cnnrt_model *)&g_checks;
  CHECK(cnnrt_open(LIB("fake_train_badstate"), NULL, &m) == CNNRT_BAD_MODEL && !m &&
            strstr(cnnrt_last_error(), "'fc/weight' and 'fc/bias' overlap"),
        "overlapping state: %s", cnnrt_last_error());
  m = open_ok(LIB("fake_train2"));
  if (m) {
    data d = make_data(m, 64, 1);
    CHECK(cnnrt_train_step(m, d.x, d.bytes, d.y, 1, &l, NULL) == CNNRT_SHAPE_MISMATCH &&
              strstr(cnnrt_last_error(), "2 micro-batches"),
          "64 samples for 1 update of 2 x 16: %s", cnnrt_last_error());
    CHECK(cnnrt_train_step(m, d.x, d.bytes, d.y, 2, &l, NULL) == CNNRT_OK, "2 updates: %s", cnnrt_last_error());
    CHECK(cnnrt_train_step(m, d.x, d.bytes, d.y, 0, &l, NULL) == CNNRT_INVALID_ARGUMENT, "n 0");
    CHECK(cnnrt_train_step(m, NULL, d.bytes, d.y, 2, &l, NULL) == CNNRT_INVALID_ARGUMENT, "NULL images");
    CHECK(cnnrt_train_step(NULL, d.x, d.bytes, d.y, 2, &l, NULL) == CNNRT_INVALID_ARGUMENT, "NULL model");
    free_data(&d);
    cnnrt_close(m);
  }
}

int main(void) {
  test_state_table();
  test_learns(LIB("fake_train"), 0);
  test_learns(LIB("fake_train"), 2);
  test_learns(LIB("fake_train2"), 1);
  test_learns(LIB("fake_train2"), 2);
  test_threads_same();
  test_checkpoints();
  test_errors();
  printf("%d checks, %d failed\n", g_checks, g_failures);
  return g_failures != 0;
}
