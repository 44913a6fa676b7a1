/* fuzz_tfrecord.c — the TFRecord reader (runtime/rt_tfrecord.c).  The first byte of the input
 * picks the case (modulo 3), the rest is:
 *   0: a whole shard file, the one shard of a set (train-00000-of-00001): rt_tfr_open indexes
 *      it, then rt_tfr_sample reads up to 64 of its records
 *   1: a serialized tf.train.Example, parsed by rt_tfr_parse_example in memory
 *   2: a tf.train.Example wrapped into one record with valid CRCs, written as case 0 (the
 *      reader's whole path to the decoded features)
 * Each must succeed (an image span inside the input) or refuse naming the shard / record. */
#include "fuzz_common.h"
#include "rt_tfrecord.h"

static void put_le(uint8_t *p, uint64_t v, int n) {
  for (int k = 0; k < n; k++) p[k] = (uint8_t)(v >> (8 * k));
}

static void check_refusal(const char *what) {
  if (!strstr(cnnrt_last_error(), what)) {
    fprintf(stderr, "fuzz_tfrecord: refusal without naming %s: %s\n", what, cnnrt_last_error());
    abort();
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  int kind = data[0] % 3;
  data++, size--;
  if (kind == 1) {
    size_t off = 0, len = 0;
    int64_t label;
    if (rt_tfr_parse_example(data, size, "fuzz-example", &off, &len, &label) == CNNRT_OK) {
      if (len == 0 || off > size || len > size - off) {
        fprintf(stderr, "fuzz_tfrecord: image span %zu+%zu outside the %zu-byte Example\n", off, len, size);
        abort();
      }
    } else {
      check_refusal("fuzz-example");
    }
    return 0;
  }
  char path[512], dir[300];
  snprintf(dir, sizeof dir, "%s/t", fz_dir());
  if (kind == 0) {
    fz_write("t/train-00000-of-00001", data, size, path, sizeof path);
  } else {
    uint8_t *rec = malloc(size + 16);
    if (!rec) return 0;
    put_le(rec, size, 8);
    put_le(rec + 8, rt_tfr_mask(rt_tfr_crc32c(0, rec, 8)), 4);
    if (size) memcpy(rec + 12, data, size);
    put_le(rec + 12 + size, rt_tfr_mask(rt_tfr_crc32c(0, data, size)), 4);
    fz_write("t/train-00000-of-00001", rec, size + 16, path, sizeof path);
    free(rec);
  }
  rt_tfr *t = NULL;
  int64_t n = 0;
  if (rt_tfr_open(dir, 0, &t, &n) == CNNRT_OK) {
    for (int64_t i = 0; i < n && i < 64; i++) {
      uint8_t *img = NULL;
      size_t len = 0;
      int64_t label;
      char what[600];
      rt_tfr_describe(t, i, what, sizeof what);
      if (rt_tfr_sample(t, i, &img, &len, &label) == CNNRT_OK) {
        if (!img || len == 0 || len > size) {
          fprintf(stderr, "fuzz_tfrecord: record %lld: image of %zu bytes from a %zu-byte input\n", (long long)i, len, size);
          abort();
        }
        volatile uint8_t last = img[len - 1]; /* ASan: the whole buffer is ours */
        (void)last;
        free(img);
      } else {
        check_refusal(what);
      }
    }
    rt_tfr_close(t);
  } else {
    check_refusal(dir);
  }
  fz_remove(path);
  return 0;
}
