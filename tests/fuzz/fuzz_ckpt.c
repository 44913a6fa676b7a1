/* fuzz_ckpt.c — the checkpoint reader (runtime/rt_ckpt.c) on one file: cnnrt_checkpoint_step
 * and cnnrt_load_checkpoint into the hand-made training model tests/libfake_train.so (its
 * path: CNNC_FUZZ_TRAIN_SO, else next to this executable's build tree) must load or refuse
 * naming the file, never crash.  Seeds: tests/fuzz/make_seeds.py (checkpoints of that model). */
#include "fuzz_common.h"
#include "cnnrt.h"

static cnnrt_model *m;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  const char *so = getenv("CNNC_FUZZ_TRAIN_SO");
  char buf[4096];
  if (!so) { /* <build>/tests/fuzz/fuzz_ckpt -> <build>/tests/libfake_train.so */
    snprintf(buf, sizeof buf, "%s", (*argv)[0]);
    char *s = strrchr(buf, '/');
    if (s) *s = 0, snprintf(s, sizeof buf - (size_t)(s - buf), "/../libfake_train.so");
    else snprintf(buf, sizeof buf, "../libfake_train.so");
    so = buf;
  }
  if (cnnrt_open(so, NULL, &m) != CNNRT_OK) {
    fprintf(stderr, "fuzz_ckpt: cannot open the training model: %s\n", cnnrt_last_error());
    abort();
  }
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char path[512];
  fz_write("c.safetensors", data, size, path, sizeof path);
  int64_t step = 0;
  if (cnnrt_checkpoint_step(path, &step) != CNNRT_OK && !strstr(cnnrt_last_error(), "c.safetensors")) abort();
  if (cnnrt_load_checkpoint(m, path) != CNNRT_OK && !strstr(cnnrt_last_error(), "c.safetensors")) {
    fprintf(stderr, "fuzz_ckpt: refusal without the file name: %s\n", cnnrt_last_error());
    abort();
  }
  fz_remove(path);
  return 0;
}
