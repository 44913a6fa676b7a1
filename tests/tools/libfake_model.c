/* libfake_model.c — a hand-written "compiled model" for the runtime tests: a C shared library
 * exporting a cnnc_abi_model descriptor with simple shard functions.  FAKE_VARIANT selects a
 * valid model or a broken one; each libfake_model_<variant>.c defines it and includes this
 * file, so CMake builds one .so per variant (this file alone is the valid 2-shard model).
 *
 * Valid 2-shard model (batch 2): input f32 [2,1,4,4] -> shard 0: s = 2x (scratch), barrier,
 * mid[i] = s[(i+7) % 32] (reads other threads' results) -> shard 1: logits[b,k] =
 * mid[b,k] + 1, logits f32 [2,10].  So logits[b,k] = 2 x[(16b+k+7) % 32] + 1.
 * U8SKIP (3 shards): input u8 [2,3,2,2]; shard 0: a = x/255, b = x; shard 1: c = 3a and
 * aux[n] = sum of a over sample n; shard 2: out = c + b (b skips shard 1).  Outputs out, aux. */
#include <stdatomic.h>
#include <stdint.h>
#include <unistd.h>

#include "runtime/cnnc_abi.h"

#define FAKE_VALID 0
#define FAKE_NOSYM 1
#define FAKE_MAGIC 2
#define FAKE_ABI99 3
#define FAKE_SIZE0 4
#define FAKE_NOSHARDS 5
#define FAKE_BADIO 6
#define FAKE_ORPHAN 7
#define FAKE_NULLRUN 8
#define FAKE_BYTES 9
#define FAKE_FAILRUN 10
#define FAKE_BADJSON 11
#define FAKE_V2 12
#define FAKE_DUPWRITE 13
#define FAKE_BATCHDIM 14
#define FAKE_U8SKIP 15
#define FAKE_TRAINING 16

#ifndef FAKE_VARIANT
#define FAKE_VARIANT FAKE_VALID
#endif

#define FAKE_EXPORT __attribute__((visibility("default")))
#ifndef FAKE_DELAY_US
#define FAKE_DELAY_US 1000 /* -DFAKE_DELAY_US=0 measures the runtime's own overhead */
#endif
#define FAKE_UNUSED __attribute__((unused)) /* not every variant uses every function */

/* ---- instrumentation the tests read through dlsym --------------------------------------- */
static _Atomic int fake_active, fake_max_active, fake_calls[3], fake_nthreads[3], fake_bad_scratch, fake_wait_ms;

FAKE_EXPORT void fake_reset(void) {
  atomic_store(&fake_max_active, 0);
  atomic_store(&fake_bad_scratch, 0);
  for (int s = 0; s < 3; s++) atomic_store(&fake_calls[s], 0), atomic_store(&fake_nthreads[s], 0);
}

/* ms > 0: thread 0 of a shard after the first stays active (1 ms steps, at most ms) until
 * two shards have been active at once; on a loaded machine a fixed 1 ms sleep can end
 * before the other shard's thread gets a core, so overlap was missed (test_runtime_exec).
 * A runtime that never overlaps shards still gives fake_stat(0) == 1, only slower. */
FAKE_EXPORT void fake_wait_overlap(int ms) { atomic_store(&fake_wait_ms, ms); }

/* what: 0 most shards running at once, 1..3 calls of shard 0..2 (thread 0 only), 4..6 the
 * nthreads shard 0..2 last saw, 7 misaligned scratch pointers seen. */
FAKE_EXPORT int fake_stat(int what) {
  if (what == 0) return atomic_load(&fake_max_active);
  if (what >= 1 && what <= 3) return atomic_load(&fake_calls[what - 1]);
  if (what >= 4 && what <= 6) return atomic_load(&fake_nthreads[what - 4]);
  if (what == 7) return atomic_load(&fake_bad_scratch);
  return -1;
}

/* The start of every shard function: thread 0 marks the shard active for the length of a
 * short sleep, so that overlapping shards (two micro-batches in flight) are visible in
 * fake_max_active.  Returns the calling thread's part [lo, hi) of the shard's n items. */
typedef struct {
  int64_t lo, hi;
} fake_part;

static fake_part fake_enter(int shard, int64_t n, void *scratch, int32_t tid, int32_t nthreads) {
  fake_part part = {n * tid / nthreads, n * (tid + 1) / nthreads};
  if ((uintptr_t)scratch % 64 != 0) atomic_fetch_add(&fake_bad_scratch, 1);
  if (tid != 0) return part;
  atomic_fetch_add(&fake_calls[shard], 1);
  atomic_store(&fake_nthreads[shard], nthreads);
  int cur = atomic_fetch_add(&fake_active, 1) + 1;
  int max = atomic_load(&fake_max_active);
  while (cur > max && !atomic_compare_exchange_weak(&fake_max_active, &max, cur)) {
  }
  usleep(FAKE_DELAY_US);
  for (int w = 0; shard > 0 && w < atomic_load(&fake_wait_ms) && atomic_load(&fake_max_active) < 2; w++) usleep(1000);
  atomic_fetch_sub(&fake_active, 1);
  return part;
}

/* ---- the valid 2-shard model ---------------------------------------------------------- */
static FAKE_UNUSED int32_t fake_shard0(void *const *io, void *scratch, int32_t tid, int32_t nthreads, cnnc_abi_barrier_fn barrier,
                           void *ctx) {
  const float *x = io[0];
  float *mid = io[1], *s = scratch;
  fake_part p = fake_enter(0, 32, scratch, tid, nthreads);
  for (int64_t i = p.lo; i < p.hi; i++) s[i] = 2.0f * x[i];
  barrier(ctx);
  for (int64_t i = p.lo; i < p.hi; i++) mid[i] = s[(i + 7) % 32];
  return 0;
}

static FAKE_UNUSED int32_t fake_shard1(void *const *io, void *scratch, int32_t tid, int32_t nthreads, cnnc_abi_barrier_fn barrier,
                           void *ctx) {
  const float *mid = io[0];
  float *logits = io[1];
  fake_part p = fake_enter(1, 20, scratch, tid, nthreads);
  for (int64_t i = p.lo; i < p.hi; i++) logits[i] = mid[(i / 10) * 16 + i % 10] + 1.0f;
  barrier(ctx);
#if FAKE_VARIANT == FAKE_FAILRUN
  return 3;
#else
  return 0;
#endif
}

/* ---- the 3-shard u8 model with a skip tensor ---------------------------------------------- */
static FAKE_UNUSED int32_t fake_u8_shard0(void *const *io, void *scratch, int32_t tid, int32_t nthreads,
                              cnnc_abi_barrier_fn barrier, void *ctx) {
  const uint8_t *x = io[0];
  float *a = io[1], *b = io[2];
  fake_part p = fake_enter(0, 24, scratch, tid, nthreads);
  for (int64_t i = p.lo; i < p.hi; i++) a[i] = x[i] / 255.0f, b[i] = x[i];
  barrier(ctx);
  return 0;
}

static FAKE_UNUSED int32_t fake_u8_shard1(void *const *io, void *scratch, int32_t tid, int32_t nthreads,
                              cnnc_abi_barrier_fn barrier, void *ctx) {
  const float *a = io[0];
  float *c = io[1], *aux = io[2];
  fake_part p = fake_enter(1, 24, scratch, tid, nthreads);
  for (int64_t i = p.lo; i < p.hi; i++) c[i] = 3.0f * a[i];
  barrier(ctx);
  for (int n = 0; n < 2 && tid == 0; n++) {
    float sum = 0;
    for (int j = 0; j < 12; j++) sum += a[n * 12 + j];
    aux[n] = sum;
  }
  return 0;
}

static FAKE_UNUSED int32_t fake_u8_shard2(void *const *io, void *scratch, int32_t tid, int32_t nthreads,
                              cnnc_abi_barrier_fn barrier, void *ctx) {
  const float *c = io[0], *b = io[1];
  float *out = io[2];
  fake_part p = fake_enter(2, 24, scratch, tid, nthreads);
  for (int64_t i = p.lo; i < p.hi; i++) out[i] = c[i] + b[i];
  return 0;
}

/* ---- descriptors -------------------------------------------------------------------------- */
static FAKE_UNUSED const char *const fake_ops0[] = {"double", "rotate"};
static FAKE_UNUSED const char *const fake_kernels0[] = {"fake_double_f32", "fake_rotate_f32"};
static FAKE_UNUSED const double fake_flops0[] = {32, 0};
static const char *const fake_ops1[] = {"inc"};
static const char *const fake_kernels1[] = {"fake_inc_f32"};
static const double fake_flops1[] = {20};

#if FAKE_VARIANT == FAKE_U8SKIP
static const cnnc_abi_tensor fake_tensors[] = {
    {"input", CNNC_ABI_U8, 4, {2, 3, 2, 2}, 24}, {"a", CNNC_ABI_F32, 2, {2, 12}, 96},
    {"b", CNNC_ABI_F32, 2, {2, 12}, 96},         {"c", CNNC_ABI_F32, 2, {2, 12}, 96},
    {"out", CNNC_ABI_F32, 2, {2, 12}, 96},       {"aux", CNNC_ABI_F32, 2, {2, 1}, 8},
};
static const int32_t fake_io0[] = {0, 1, 2}, fake_io1[] = {1, 3, 5}, fake_io2[] = {3, 2, 4};
static const int32_t fake_outputs[] = {4, 5};
static const cnnc_abi_shard fake_shards[] = {
    {"norm", "norm", 3, 1, fake_io0, 0, 1, fake_ops1, fake_kernels1, fake_flops1, fake_u8_shard0},
    {"scale", "sum", 3, 1, fake_io1, 64, 1, fake_ops1, fake_kernels1, fake_flops1, fake_u8_shard1},
    {"add", "add", 3, 2, fake_io2, 128, 0, NULL, NULL, NULL, fake_u8_shard2},
};
#define FAKE_NAME "fake_u8skip"
#define FAKE_N_OUTPUTS 2
#define FAKE_N_SHARDS 3
#define FAKE_BATCH 2
#else
static const cnnc_abi_tensor fake_tensors[] = {
#if FAKE_VARIANT == FAKE_BATCHDIM
    {"input", CNNC_ABI_F32, 4, {4, 1, 2, 4}, 128},
#else
    {"input", CNNC_ABI_F32, 4, {2, 1, 4, 4}, 128},
#endif
#if FAKE_VARIANT == FAKE_BYTES
    {"mid", CNNC_ABI_F32, 2, {2, 16}, 100},
#else
    {"mid", CNNC_ABI_F32, 2, {2, 16}, 128},
#endif
    {"logits", CNNC_ABI_F32, 2, {2, 10}, 80},
    {"ghost", CNNC_ABI_F32, 2, {2, 16}, 128},
};
static const int32_t fake_io0[] = {0, 1};
#if FAKE_VARIANT == FAKE_BADIO
static const int32_t fake_io1[] = {1, 7};
#elif FAKE_VARIANT == FAKE_ORPHAN
static const int32_t fake_io1[] = {3, 2};
#elif FAKE_VARIANT == FAKE_DUPWRITE
static const int32_t fake_io1[] = {0, 1};
#else
static const int32_t fake_io1[] = {1, 2};
#endif
static const int32_t fake_outputs[] = {2};
#if FAKE_VARIANT == FAKE_NULLRUN
#define FAKE_RUN1 NULL
#else
#define FAKE_RUN1 fake_shard1
#endif
static const cnnc_abi_shard fake_shards[] = {
    {"double", "rotate", 2, 1, fake_io0, 32 * sizeof(float), 2, fake_ops0, fake_kernels0, fake_flops0, fake_shard0},
    {"inc", "inc", 2, 1, fake_io1, 0, 1, fake_ops1, fake_kernels1, fake_flops1, FAKE_RUN1},
};
#define FAKE_NAME "fake_model"
#define FAKE_N_OUTPUTS 1
#define FAKE_N_SHARDS (FAKE_VARIANT == FAKE_NOSHARDS ? 0 : 2)
#define FAKE_BATCH 2
#endif

#if FAKE_VARIANT == FAKE_NOSYM
#define FAKE_SYMBOL not_a_cnnc_model
#elif FAKE_VARIANT == FAKE_V2
#define FAKE_SYMBOL cnnc_model_v2
#else
#define FAKE_SYMBOL cnnc_model_v1
#endif

FAKE_EXPORT const cnnc_abi_model FAKE_SYMBOL = {
    .magic = FAKE_VARIANT == FAKE_MAGIC ? 0xdeadbeefu : CNNC_ABI_MAGIC,
    .abi_version = FAKE_VARIANT == FAKE_ABI99 ? 99u : CNNC_ABI_VERSION,
    .struct_size = FAKE_VARIANT == FAKE_SIZE0 ? 0u : (uint32_t)sizeof(cnnc_abi_model),
    .model_name = FAKE_NAME,
    .compiler_version = "fake 1.0",
#if FAKE_VARIANT == FAKE_BADJSON
    .options_json = "{\"batch_size\": 2,",
#else
    .options_json = "{\"batch_size\": 2, \"precision\": \"32.32\", \"pipeline_splits\": [\"inc\"], \"note\": \"q\\\"uote\"}",
#endif
    .batch_size = FAKE_BATCH,
    .mode = FAKE_VARIANT == FAKE_TRAINING ? 1 : 0,
    .n_tensors = (int32_t)(sizeof fake_tensors / sizeof fake_tensors[0]),
    .tensors = fake_tensors,
    .input = 0,
    .n_outputs = FAKE_N_OUTPUTS,
    .outputs = fake_outputs,
    .n_shards = FAKE_N_SHARDS,
    .shards = fake_shards,
    .total_flops = 52,
};
