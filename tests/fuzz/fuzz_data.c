/* fuzz_data.c — the dataset readers (runtime/rt_data.c).  The first byte of the input picks
 * the case, the rest is one file:
 *   0: idx images (train-images-idx3-ubyte) beside a valid labels file
 *   1: idx labels (train-labels-idx1-ubyte) beside a valid images file
 *   2, 3: as 0, 1 but the fuzzed file is named .gz (read through zlib; gzip or plain)
 *   4: a CIFAR-10 test batch (test_batch.bin)
 * cnnrt_dataset_open must open (then every sample is read) or refuse naming the file. */
#include "fuzz_common.h"
#include "cnnrt.h"

static void valid_idx(const char *name, int images, char *path, size_t n) {
  uint8_t b[16 + 2 * 3 * 3];
  memset(b, 0, sizeof b);
  b[2] = 8, b[3] = images ? 3 : 1, b[7] = 2; /* 2 samples */
  size_t len = images ? 16 + 18 : 8 + 2;
  if (images) b[11] = 3, b[15] = 3;
  for (size_t i = images ? 16 : 8; i < len; i++) b[i] = (uint8_t)(i & 1);
  fz_write(name, b, len, path, n);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  int kind = data[0] % 5;
  data++, size--;
  char dir[300], p1[512], p2[512];
  snprintf(dir, sizeof dir, "%s/d%d", fz_dir(), kind);
  const char *dskind = kind == 4 ? "cifar10" : "mnist";
  p2[0] = 0;
  if (kind == 4) {
    fz_write("d4/test_batch.bin", data, size, p1, sizeof p1);
  } else {
    int gz = kind >= 2, img = kind % 2 == 0;
    char name[80];
    snprintf(name, sizeof name, "d%d/%s%s", kind, img ? "train-images-idx3-ubyte" : "train-labels-idx1-ubyte", gz ? ".gz" : "");
    fz_write(name, data, size, p1, sizeof p1);
    snprintf(name, sizeof name, "d%d/%s", kind, img ? "train-labels-idx1-ubyte" : "train-images-idx3-ubyte");
    valid_idx(name, !img, p2, sizeof p2);
  }
  cnnrt_dataset *ds = NULL;
  cnnrt_status s = cnnrt_dataset_open(dskind, dir, kind == 4, &ds);
  if (s == CNNRT_OK) {
    int64_t n = cnnrt_dataset_size(ds);
    int c, h, w, classes;
    cnnrt_dataset_shape(ds, &c, &h, &w, &classes);
    size_t per = (size_t)c * (size_t)h * (size_t)w;
    if (n > 0 && per > 0 && per <= ((size_t)1 << 24)) {
      int64_t k = n < 4 ? n : 4;
      float *x = malloc((size_t)k * per * sizeof *x), *y = malloc((size_t)k * sizeof *y);
      if (x && y) cnnrt_dataset_read(ds, n - k, k, CNNRT_F32, x, y);
      free(x);
      free(y);
    }
    cnnrt_dataset_close(ds);
  } else if (!strstr(cnnrt_last_error(), dir)) {
    fprintf(stderr, "fuzz_data: refusal without the file name: %s\n", cnnrt_last_error());
    abort();
  }
  fz_remove(p1);
  if (p2[0]) fz_remove(p2);
  return 0;
}
