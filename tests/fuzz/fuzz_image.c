/* fuzz_image.c — image decoding and the recipes' transforms (runtime/rt_image.c).  The first
 * byte of the input picks the transform and the seed, the rest is the image file:
 *   kind % 3: RESIZE to 3x8x8, TRAIN (RandomResizedCrop + flip) to 3x24x20, CENTER
 *   (resize_short 19) to 1x16x17;  kind / 3: the seed.
 * rt_image_probe and rt_image_load must succeed or refuse naming the file; the output is
 * read back (MSan / ASan see uninitialised or unwritten bytes). */
#include "fuzz_common.h"
#include "rt_image.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  int kind = data[0] % 3;
  uint64_t seed = data[0] / 3;
  data++, size--;
  /* a copy of exactly size bytes: ASan catches any read past the end */
  uint8_t *copy = malloc(size ? size : 1);
  if (!copy) return 0;
  if (size) memcpy(copy, data, size);
  static const char *name = "fuzz/input.img";
  rt_xform x;
  if (kind == 0) rt_xform_default(&x, RT_XFORM_RESIZE, 3, 8, 8);
  else if (kind == 1) rt_xform_default(&x, RT_XFORM_TRAIN, 3, 24, 20);
  else rt_xform_default(&x, RT_XFORM_CENTER, 1, 16, 17), x.resize_short = 19;
  int w = 0, h = 0, c = 0;
  cnnrt_status s = rt_image_probe(copy, size, name, &w, &h, &c);
  if (s != CNNRT_OK && !strstr(cnnrt_last_error(), name)) {
    fprintf(stderr, "fuzz_image: probe refusal without the file name: %s\n", cnnrt_last_error());
    abort();
  }
  size_t bytes = (size_t)x.out_c * x.out_h * x.out_w;
  uint8_t *out = malloc(bytes);
  if (!out) abort();
  s = rt_image_load(copy, size, name, &x, seed, out);
  if (s == CNNRT_OK) {
    unsigned sum = 0;
    for (size_t i = 0; i < bytes; i++) sum += out[i];
    if (sum == 0xffffffffu) fprintf(stderr, "unlikely\n");
  } else if (!strstr(cnnrt_last_error(), name)) {
    fprintf(stderr, "fuzz_image: refusal without the file name: %s\n", cnnrt_last_error());
    abort();
  }
  free(out);
  free(copy);
  return 0;
}
