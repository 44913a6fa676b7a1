/* test_half_partials_storage.c — --enable-half-partials keeps the gradient accumulators in
 * 16 bits (docs/precision.md "Half partials"): fmnist_cnn batch 8, 16.32, momentum, compiled
 * with 16-bit accumulators and with tune half_partials_f32=1 (f32 slices rounded to the
 * 16-bit grid at every store, the previous storage), from the same initial weights and data:
 *  - the accumulators are bf16 / fp16 state slices of 2 bytes per element (f32: 4);
 *  - after 3 updates every param and momentum element is bitwise equal to the f32-storage
 *    run's, and every accumulator is zero again (bf16 with accumulation 2 x replicas 2, fp16
 *    with accumulation 3 x replicas 3: several partial sums per slot and a 3-replica sum);
 *  - the planned micro_batch memory (cnnrt_train_plan_info, what `cnnrun info` prints) drops by
 *    exactly the accumulator bytes saved, about half of the f32 accumulators. */
#include <math.h>

#include "frontend/fe.h"
#include "runtime/cnnrt.h"
#include "test_codegen_harness.h"

enum { BATCH = 8, NX = BATCH * 28 * 28, STEPS = 3, MAXMB = 9 };

static unsigned char imgs[STEPS][MAXMB][NX];
static float labels[STEPS][MAXMB][BATCH];

static int build(const char *half, const char *ga, const char *rep, int f32_storage, const char *so_name, char *so) {
  const char *const kv[][2] = {{"mode", "training"}, {"batch-size", "8"}, {"optimizer", "momentum"}, {"seed", "5"},
                               {"precision", "16.32"}, {"half-type", half}, {"gradient-accumulation", ga},
                               {"replicas", rep}, {"enable-half-partials", "1"}};
  ct_tune(f32_storage ? "half_partials_f32=1" : "half_partials_f32=0");
  int rc = cgt_build_at("models/fmnist_cnn.yml", kv, 9, so_name, so, NULL);
  ct_tune("half_partials_f32=0");
  return rc;
}

typedef struct run_out {
  float *w;                /* params and optimizer state (f32), concatenated */
  long n;
  long acc_bytes, acc_padded, acc_elems, acc_nonzero_bytes; /* acc_padded: their 64-aligned slices */
  int acc_dtype, n_acc;
  size_t planned;
} run_out;

static int run(const char *so, int mb, run_out *r) {
  memset(r, 0, sizeof *r);
  cnnrt_model *m = NULL;
  if (cnnrt_open(so, NULL, &m) != CNNRT_OK) {
    fprintf(stderr, "cnnrt_open: %s\n", cnnrt_last_error());
    return -1;
  }
  cnnrt_set_learning_rate(m, 0.05);
  cnnrt_train_plan p;
  if (cnnrt_train_plan_info(m, 0, &p) == CNNRT_OK) r->planned = p.planned_bytes;
  int rc = 0;
  for (int s = 0; s < STEPS && !rc; s++) {
    float loss, acc;
    if (cnnrt_train_step(m, imgs[s], (size_t)mb * NX, &labels[s][0][0], 1, &loss, &acc) != CNNRT_OK) {
      fprintf(stderr, "cnnrt_train_step: %s\n", cnnrt_last_error());
      rc = -1;
    }
  }
  for (int i = 0; !rc && i < cnnrt_num_state(m); i++) {
    cnnrt_state_info si;
    if (cnnrt_state_info_at(m, i, &si) != CNNRT_OK) continue;
    unsigned char *buf = malloc(si.bytes ? si.bytes : 1);
    cnnrt_get_state(m, si.name, buf, si.bytes);
    if (si.kind == CNNRT_STATE_GRAD_ACCUM) {
      long ne = 1;
      for (int k = 0; k < si.rank; k++) ne *= (long)si.dims[k];
      r->acc_bytes += (long)si.bytes, r->acc_padded += ((long)si.bytes + 63) / 64 * 64, r->acc_elems += ne, r->acc_dtype = (int)si.dtype, r->n_acc++;
      for (size_t b = 0; b < si.bytes; b++) r->acc_nonzero_bytes += buf[b] != 0;
    } else if (si.dtype == CNNRT_F32 && (si.kind == CNNRT_STATE_PARAM || si.kind == CNNRT_STATE_OPTIMIZER)) {
      r->w = realloc(r->w, (size_t)(r->n + (long)si.bytes / 4) * 4);
      memcpy(r->w + r->n, buf, si.bytes);
      r->n += (long)si.bytes / 4;
    }
    free(buf);
  }
  cnnrt_close(m);
  return rc;
}

static void compare(const char *half, const char *ga, const char *rep) {
  char s16[512], s32[512];
  int mb = atoi(ga) * atoi(rep);
  if (build(half, ga, rep, 0, "h16.so", s16) || build(half, ga, rep, 1, "h32.so", s32)) {
    cgt_failures++;
    return;
  }
  run_out a, b;
  if (run(s16, mb, &a) || run(s32, mb, &b)) {
    cgt_failures++;
    return;
  }
  long differ = 0;
  for (long i = 0; i < a.n && a.n == b.n; i++) differ += memcmp(&a.w[i], &b.w[i], 4) != 0;
  int want_dt = strcmp(half, "fp16") ? CNNRT_BF16 : CNNRT_F16;
  fprintf(stderr, "%s, accumulation %s x replicas %s, %d updates: %ld of %ld param/momentum elements differ between "
          "16-bit and f32 accumulator storage; accumulators %ld -> %ld bytes (%d slices); planned %zu -> %zu bytes "
          "(-%zu)\n", half, ga, rep, STEPS, differ, a.n, b.acc_bytes, a.acc_bytes, a.n_acc, b.planned, a.planned,
          b.planned - a.planned);
  CGT_CHECK(a.n == b.n && a.n > 1000000, "%s: %ld vs %ld state elements", half, a.n, b.n);
  CGT_CHECK(differ == 0, "%s: %ld elements differ from the f32-storage run", half, differ);
  CGT_CHECK(a.n_acc == b.n_acc && a.n_acc > 0 && a.acc_elems == b.acc_elems, "%s: accumulator slices %d vs %d", half, a.n_acc,
            b.n_acc);
  CGT_CHECK(a.acc_dtype == want_dt && a.acc_bytes == 2 * a.acc_elems, "%s: accumulators dtype %d, %ld bytes for %ld elements",
            half, a.acc_dtype, a.acc_bytes, a.acc_elems);
  CGT_CHECK(b.acc_dtype == CNNRT_F32 && b.acc_bytes == 4 * b.acc_elems, "%s: f32-storage accumulators dtype %d", half,
            b.acc_dtype);
  CGT_CHECK(a.acc_nonzero_bytes == 0 && b.acc_nonzero_bytes == 0, "%s: accumulators not zero after the update", half);
  /* planned = state + in-flight tensors + scratch: only the 64-aligned accumulator slices shrink */
  CGT_CHECK(b.planned > a.planned && (long)(b.planned - a.planned) == b.acc_padded - a.acc_padded,
            "%s: planned %zu -> %zu, accumulator slices %ld -> %ld bytes", half, b.planned, a.planned, b.acc_padded,
            a.acc_padded);
  free(a.w), free(b.w);
  unlink(s16), unlink(s32);
}

int main(void) {
  cgt_init_dir();
  for (int s = 0; s < STEPS; s++)
    for (int b = 0; b < MAXMB; b++) {
      for (int i = 0; i < NX; i++) imgs[s][b][i] = (unsigned char)cgt_int(0, 255);
      for (int j = 0; j < BATCH; j++) labels[s][b][j] = (float)cgt_int(0, 9);
    }
  compare("bf16", "2", "2");
  compare("fp16", "3", "3");
  return cgt_done("test_half_partials_storage");
}
