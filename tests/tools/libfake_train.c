/* libfake_train.c — a hand-written training "compiled model" for the runtime's training tests:
 * softmax regression (logits = W x + b, W [10, 784]) on 1x28x28 images, batch 16, exporting
 * cnnc_model_v1 (mode 1) and cnnc_train_v1 (cnnc_abi.h, training extension).  Variants
 * (FAKE_TRAIN_VARIANT, set by libfake_train<variant>.c which includes this file):
 *   0 (this file): 1 shard, u8 input (x/255 compiled in), one fused stage per micro-batch
 *     doing forward, softmax cross-entropy, backward and SGD with momentum 0.9 (state
 *     fc/weight, fc/bias, their /momentum, optimizer/step (i32), input/running_mean, a BN-like
 *     running statistic of the mean pixel with momentum 0.1).
 *   1 (libfake_train2.c): 2 shards, f32 input, grad_accum 2: stages fwd/s0 (logits) ->
 *     loss/s1 (loss, correct, dlogits) -> bwd/s0 (adds gradients into the GRAD_ACCUM slices),
 *     and an update program update/s0 (plain SGD on the mean accumulated gradient, zeroes it).
 *   2 (libfake_train_badstate.c): variant 0 with overlapping state slices (must be refused).
 * Both have an eval program (inference-mode forward + loss + top-1 count).  Threads split
 * the classes; tid 0 computes the loss. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "runtime/cnnc_abi.h"

#ifndef FAKE_TRAIN_VARIANT
#define FAKE_TRAIN_VARIANT 0
#endif
#define TWO_SHARDS (FAKE_TRAIN_VARIANT == 1)
#define EXPORT __attribute__((visibility("default")))
#define UNUSED __attribute__((unused))

enum { B = 16, D = 784, K = 10 };
/* State layout: every slice 64-byte aligned. */
enum {
  OFF_W = 0, OFF_B = 31360, OFF_WM = 31424, OFF_BM = 62784, OFF_STEP = 62848, OFF_RM = 62912,
  OFF_GW = 62976, OFF_GB = 94336, STATE_BYTES = 94400
};
#define SW(st) ((float *)((char *)(st) + OFF_W))
#define SB(st) ((float *)((char *)(st) + OFF_B))
#define SWM(st) ((float *)((char *)(st) + OFF_WM))
#define SBM(st) ((float *)((char *)(st) + OFF_BM))
#define SSTEP(st) ((int32_t *)((char *)(st) + OFF_STEP))
#define SRM(st) ((float *)((char *)(st) + OFF_RM))
#define SGW(st) ((float *)((char *)(st) + OFF_GW))
#define SGB(st) ((float *)((char *)(st) + OFF_GB))

/* Scratch: x as f32 [B, D], dlogits [B, K]. */
#define SCRATCH_BYTES ((B * D + B * K) * 4)

static void range(int n, int tid, int nt, int *lo, int *hi) { *lo = n * tid / nt, *hi = n * (tid + 1) / nt; }

/* The input as f32 (u8 / 255 in the u8 variants) into x. */
static void load_x(const void *in, float *x) {
  if (TWO_SHARDS) memcpy(x, in, sizeof(float) * B * D);
  else
    for (int i = 0; i < B * D; i++) x[i] = ((const uint8_t *)in)[i] / 255.0f;
}

static void forward(const float *x, const void *state, float *logits) {
  for (int b = 0; b < B; b++)
    for (int k = 0; k < K; k++) {
      float s = SB(state)[k];
      for (int i = 0; i < D; i++) s += SW(state)[k * D + i] * x[b * D + i];
      logits[b * K + k] = s;
    }
}

/* Mean softmax cross-entropy, top-1 count, and dlogits = (softmax - onehot) / B. */
static void xent(const float *logits, const float *labels, float *loss, float *correct, float *dlogits) {
  double l = 0;
  int hits = 0;
  for (int b = 0; b < B; b++) {
    const float *z = logits + b * K;
    int y = (int)labels[b], best = 0;
    float mx = z[0];
    for (int k = 1; k < K; k++) {
      if (z[k] > mx) mx = z[k];
      if (z[k] > z[best]) best = k;
    }
    double sum = 0;
    for (int k = 0; k < K; k++) sum += exp(z[k] - mx);
    l += log(sum) - (z[y] - mx);
    hits += best == y;
    for (int k = 0; k < K && dlogits; k++) dlogits[b * K + k] = (float)((exp(z[k] - mx) / sum - (k == y)) / B);
  }
  *loss = (float)(l / B);
  *correct = (float)hits;
}

/* Variant 0: the fused stage.  io: images, labels, lr | loss, correct. */
static UNUSED int32_t stage_train(void *const *io, void *state, void *scratch, int32_t tid, int32_t nt,
                                  cnnc_abi_barrier_fn barrier, void *ctx) {
  float *x = scratch, *dl = x + B * D, lr = *(const float *)io[2];
  if (tid == 0) {
    float logits[B * K];
    load_x(io[0], x);
    forward(x, state, logits);
    xent(logits, io[1], io[3], io[4], dl);
    double mean = 0;
    for (int i = 0; i < B * D; i++) mean += x[i];
    *SRM(state) = 0.9f * *SRM(state) + 0.1f * (float)(mean / (B * D));
    *SSTEP(state) += 1;
  }
  barrier(ctx);
  int lo, hi;
  range(K, tid, nt, &lo, &hi);
  for (int k = lo; k < hi; k++) {
    float gb = 0;
    for (int b = 0; b < B; b++) gb += dl[b * K + k];
    SBM(state)[k] = 0.9f * SBM(state)[k] + gb;
    SB(state)[k] -= lr * SBM(state)[k];
    for (int i = 0; i < D; i++) {
      float g = 0;
      for (int b = 0; b < B; b++) g += dl[b * K + k] * x[b * D + i];
      float *v = &SWM(state)[k * D + i];
      *v = 0.9f * *v + g;
      SW(state)[k * D + i] -= lr * *v;
    }
  }
  return 0;
}

/* Variant 1 stages.  fwd/s0: images | logits. */
static UNUSED int32_t stage_fwd(void *const *io, void *state, void *scratch, int32_t tid, int32_t nt,
                                cnnc_abi_barrier_fn barrier, void *ctx) {
  if (tid == 0) forward(io[0], state, io[1]);
  barrier(ctx);
  return 0;
}
/* loss/s1: logits, labels | loss, correct, dlogits. */
static UNUSED int32_t stage_loss(void *const *io, void *state, void *scratch, int32_t tid, int32_t nt,
                                 cnnc_abi_barrier_fn barrier, void *ctx) {
  if (tid == 0) xent(io[0], io[1], io[2], io[3], io[4]);
  return 0;
}
/* bwd/s0: images, dlogits: grad += dW. */
static UNUSED int32_t stage_bwd(void *const *io, void *state, void *scratch, int32_t tid, int32_t nt,
                                cnnc_abi_barrier_fn barrier, void *ctx) {
  const float *x = io[0], *dl = io[1];
  int lo, hi;
  range(K, tid, nt, &lo, &hi);
  for (int k = lo; k < hi; k++)
    for (int b = 0; b < B; b++) {
      SGB(state)[k] += dl[b * K + k];
      for (int i = 0; i < D; i++) SGW(state)[k * D + i] += dl[b * K + k] * x[b * D + i];
    }
  return 0;
}
/* update/s0: lr | (state): w -= lr * g / 2; g = 0. */
static UNUSED int32_t stage_update(void *const *io, void *state, void *scratch, int32_t tid, int32_t nt,
                                   cnnc_abi_barrier_fn barrier, void *ctx) {
  float lr = *(const float *)io[0];
  int lo, hi;
  range(K, tid, nt, &lo, &hi);
  for (int k = lo; k < hi; k++) {
    SB(state)[k] -= lr * SGB(state)[k] / 2, SGB(state)[k] = 0;
    for (int i = 0; i < D; i++) SW(state)[k * D + i] -= lr * SGW(state)[k * D + i] / 2, SGW(state)[k * D + i] = 0;
  }
  barrier(ctx);
  if (tid == 0) *SSTEP(state) += 1;
  return 0;
}

/* eval/s0: images, labels | loss, correct (no state writes). */
static int32_t stage_eval(void *const *io, void *state, void *scratch, int32_t tid, int32_t nt,
                          cnnc_abi_barrier_fn barrier, void *ctx) {
  if (tid == 0) {
    float *x = scratch, logits[B * K];
    load_x(io[0], x);
    forward(x, state, logits);
    xent(logits, io[1], io[2], io[3], NULL);
    memcpy(io[4], logits, sizeof logits); /* the logits as a train tensor: cnnrt_evaluate_samples */
  }
  return 0;
}

/* cnnc_model_v1's shards describe the forward for `info`; never run for training. */
static int32_t shard_stub(void *const *io, void *scratch, int32_t tid, int32_t nt, cnnc_abi_barrier_fn barrier, void *ctx) {
  return 1;
}

#define IMG_DTYPE (TWO_SHARDS ? CNNC_ABI_F32 : CNNC_ABI_U8)
#define IMG_BYTES (TWO_SHARDS ? 4 * B * D : B * D)

static const cnnc_abi_tensor model_tensors[] = {
    {"images", IMG_DTYPE, 4, {B, 1, 28, 28}, IMG_BYTES},
    {"hidden", CNNC_ABI_F32, 2, {B, K}, 4 * B * K},
    {"logits", CNNC_ABI_F32, 2, {B, K}, 4 * B * K},
};
static UNUSED const int32_t model_io0[] = {0, 1}, model_io1[] = {1, 2}, model_io_one[] = {0, 2};
static const int32_t model_outputs[] = {2};
static const char *const op_names[] = {"fc"};
static const char *const kernel_names[] = {"fake_fc_f32"};
static const double op_flops[] = {2.0 * B * D * K};
static const cnnc_abi_shard model_shards[] = {
#if TWO_SHARDS
    {"fc", "fc", 2, 1, model_io0, 0, 1, op_names, kernel_names, op_flops, shard_stub},
    {"loss", "loss", 2, 1, model_io1, 0, 0, NULL, NULL, NULL, shard_stub},
#else
    {"fc", "loss", 2, 1, model_io_one, 0, 1, op_names, kernel_names, op_flops, shard_stub},
#endif
};

EXPORT const cnnc_abi_model cnnc_model_v1 = {
    .magic = CNNC_ABI_MAGIC,
    .abi_version = CNNC_ABI_VERSION,
    .struct_size = sizeof(cnnc_abi_model),
    .model_name = TWO_SHARDS ? "fake_train2" : "fake_train",
    .compiler_version = "fake 1.0",
    .options_json = "{\"mode\": \"training\", \"optimizer\": \"momentum\"}",
    .batch_size = B,
    .mode = 1,
    .n_tensors = 3,
    .tensors = model_tensors,
    .input = 0,
    .n_outputs = 1,
    .outputs = model_outputs,
    .n_shards = TWO_SHARDS ? 2 : 1,
    .shards = model_shards,
    .total_flops = 2.0 * B * D * K,
};

/* ---- the training descriptor ------------------------------------------------------------ */
enum { T_IMAGES, T_LABELS, T_LR, T_LOSS, T_CORRECT, T_LOGITS, T_DLOGITS };
static const cnnc_abi_tensor train_tensors[] = {
    {"images", IMG_DTYPE, 4, {B, 1, 28, 28}, IMG_BYTES},
    {"labels", CNNC_ABI_F32, 1, {B}, 4 * B},
    {"lr", CNNC_ABI_F32, 1, {1}, 4},
    {"loss", CNNC_ABI_F32, 1, {1}, 4},
    {"correct", CNNC_ABI_F32, 1, {1}, 4},
    {"logits", CNNC_ABI_F32, 2, {B, K}, 4 * B * K},
    {"dlogits", CNNC_ABI_F32, 2, {B, K}, 4 * B * K},
};

static const float bias_init[K] = {0.01f, -0.01f, 0.02f, -0.02f, 0.03f, -0.03f, 0.04f, -0.04f, 0.05f, -0.05f};
static const int32_t step_init = 0;

static const cnnc_abi_state_tensor train_state[] = {
    {"fc/weight", CNNC_ABI_F32, CNNC_ABI_STATE_PARAM, 2, 0, {K, D}, OFF_W, 4 * K * D, NULL},
#if FAKE_TRAIN_VARIANT == 2
    {"fc/bias", CNNC_ABI_F32, CNNC_ABI_STATE_PARAM, 1, 0, {K}, OFF_W + 64, 4 * K, bias_init},
#else
    {"fc/bias", CNNC_ABI_F32, CNNC_ABI_STATE_PARAM, 1, 0, {K}, OFF_B, 4 * K, bias_init},
#endif
#if TWO_SHARDS
    {"fc/weight/grad", CNNC_ABI_F32, CNNC_ABI_STATE_GRAD_ACCUM, 2, 0, {K, D}, OFF_GW, 4 * K * D, NULL},
    {"fc/bias/grad", CNNC_ABI_F32, CNNC_ABI_STATE_GRAD_ACCUM, 1, 0, {K}, OFF_GB, 4 * K, NULL},
#else
    {"fc/weight/momentum", CNNC_ABI_F32, CNNC_ABI_STATE_OPTIMIZER, 2, 0, {K, D}, OFF_WM, 4 * K * D, NULL},
    {"fc/bias/momentum", CNNC_ABI_F32, CNNC_ABI_STATE_OPTIMIZER, 1, 0, {K}, OFF_BM, 4 * K, NULL},
    {"input/running_mean", CNNC_ABI_F32, CNNC_ABI_STATE_BUFFER, 1, 0, {1}, OFF_RM, 4, NULL},
#endif
    {"optimizer/step", CNNC_ABI_I32, CNNC_ABI_STATE_OPTIMIZER, 0, 0, {0}, OFF_STEP, 4, &step_init},
};

#if TWO_SHARDS
static const int32_t io_fwd[] = {T_IMAGES, T_LOGITS}, io_loss[] = {T_LOGITS, T_LABELS, T_LOSS, T_CORRECT, T_DLOGITS},
                     io_bwd[] = {T_IMAGES, T_DLOGITS}, io_update[] = {T_LR};
static const cnnc_abi_stage mb_stages[] = {
    {"fwd/s0", 0, 2, 1, io_fwd, 0, 2.0 * B * D * K, stage_fwd},
    {"loss/s1", 1, 5, 2, io_loss, 0, 10.0 * B * K, stage_loss},
    {"bwd/s0", 0, 2, 2, io_bwd, 0, 2.0 * B * D * K, stage_bwd},
};
static const cnnc_abi_stage update_stages[] = {{"update/s0", 0, 1, 1, io_update, 0, 3.0 * D * K, stage_update}};
#else
static const int32_t io_train[] = {T_IMAGES, T_LABELS, T_LR, T_LOSS, T_CORRECT};
static const cnnc_abi_stage mb_stages[] = {{"train/s0", 0, 5, 3, io_train, SCRATCH_BYTES, 6.0 * B * D * K, stage_train}};
#endif
static const int32_t io_eval[] = {T_IMAGES, T_LABELS, T_LOSS, T_CORRECT, T_LOGITS};
static const cnnc_abi_stage eval_stages[] = {{"eval/s0", 0, 5, 2, io_eval, SCRATCH_BYTES, 2.0 * B * D * K, stage_eval}};

EXPORT const cnnc_abi_train cnnc_train_v1 = {
    .magic = CNNC_ABI_TRAIN_MAGIC,
    .version = CNNC_ABI_TRAIN_VERSION,
    .struct_size = sizeof(cnnc_abi_train),
    .n_tensors = sizeof train_tensors / sizeof train_tensors[0],
    .tensors = train_tensors,
    .images = T_IMAGES,
    .labels = T_LABELS,
    .lr = T_LR,
    .loss = T_LOSS,
    .correct = T_CORRECT,
    .grad_accum = TWO_SHARDS ? 2 : 1,
    .state_bytes = STATE_BYTES,
    .n_state = sizeof train_state / sizeof train_state[0],
    .state = train_state,
    .micro_batch = {sizeof mb_stages / sizeof mb_stages[0], mb_stages},
#if TWO_SHARDS
    .update = {1, update_stages},
#endif
    .eval = {1, eval_stages},
    .optimizer_json = TWO_SHARDS ? "{\"optimizer\": \"sgd\"}" : "{\"optimizer\": \"momentum\", \"momentum\": 0.9}",
};
