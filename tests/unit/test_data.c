/* test_data.c — the dataset readers of libcnnrt on small files generated here: idx (plain and
 * gzip), CIFAR-10 batches, synthetic; and every corrupt case (bad magic, truncated data,
 * trailing bytes, label/image count mismatch, labels out of range, missing files, partial
 * CIFAR records) giving its status and a message naming the file.  Shuffling is a seeded
 * permutation; reading converts u8 to f32 as x/255. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/cnnrt.h"

#include "check.h"

static char g_dir[256];

static void write_bytes(const char *name, const void *p, size_t n) {
  char path[512];
  snprintf(path, sizeof path, "%s/%s", g_dir, name);
  FILE *f = fopen(path, "wb");
  if (!f || fwrite(p, 1, n, f) != n) fprintf(stderr, "cannot write %s\n", path), exit(2);
  fclose(f);
}

static void be32(unsigned char *p, uint32_t v) { p[0] = v >> 24, p[1] = v >> 16, p[2] = v >> 8, p[3] = v; }

/* An idx3 image file of n 2x3 images (pixel = 10 i + j) and an idx1 label file (i % 3). */
static void write_idx(const char *prefix, int n, int cut_images, int label_count, int image_magic) {
  unsigned char buf[4096] = {0};
  be32(buf, (uint32_t)image_magic);
  be32(buf + 4, (uint32_t)n), be32(buf + 8, 2), be32(buf + 12, 3);
  for (int i = 0; i < n; i++)
    for (int j = 0; j < 6; j++) buf[16 + i * 6 + j] = (unsigned char)(10 * i + j);
  char name[128];
  snprintf(name, sizeof name, "%s-images-idx3-ubyte", prefix);
  write_bytes(name, buf, (size_t)(16 + 6 * n - cut_images));
  memset(buf, 0, sizeof buf);
  be32(buf, 0x801), be32(buf + 4, (uint32_t)label_count);
  for (int i = 0; i < label_count; i++) buf[8 + i] = (unsigned char)(i % 3);
  snprintf(name, sizeof name, "%s-labels-idx1-ubyte", prefix);
  write_bytes(name, buf, (size_t)(8 + label_count));
}

static void clean_dir(void) {
  char cmd[512];
  snprintf(cmd, sizeof cmd, "rm -f %s/*", g_dir);
  if (system(cmd) != 0) fprintf(stderr, "cannot clean %s\n", g_dir);
}

/* Opening kind in g_dir fails with status want and a message containing sub. */
static void expect_error(const char *kind, int test, cnnrt_status want, const char *sub) {
  cnnrt_dataset *ds = (cnnrt_dataset *)&g_checks;
  cnnrt_status s = cnnrt_dataset_open(kind, g_dir, test, &ds);
  const char *msg = cnnrt_last_error();
  CHECK(s == want, "%s: status %s, want %s (%s)", sub, cnnrt_status_name(s), cnnrt_status_name(want), msg);
  CHECK(ds == NULL, "%s: *out not NULL after failure", sub);
  CHECK(strstr(msg, sub) != NULL, "message lacks '%s': %s", sub, msg);
  CHECK(want == CNNRT_INVALID_ARGUMENT || strstr(msg, g_dir) != NULL, "message does not name the file: %s", msg);
  if (s == CNNRT_OK) cnnrt_dataset_close(ds);
}

static void test_idx_good(void) {
  clean_dir();
  write_idx("train", 5, 0, 5, 0x803);
  write_idx("t10k", 2, 0, 2, 0x803);
  char cmd[512];
  snprintf(cmd, sizeof cmd, "gzip -f %s/t10k-images-idx3-ubyte", g_dir); /* the test split reads .gz */
  CHECK(system(cmd) == 0, "gzip");
  cnnrt_dataset *ds = NULL;
  CHECK(cnnrt_dataset_open("fashion-mnist", g_dir, 0, &ds) == CNNRT_OK, "open: %s", cnnrt_last_error());
  if (!ds) return;
  int c, h, w, k;
  cnnrt_dataset_shape(ds, &c, &h, &w, &k);
  CHECK(cnnrt_dataset_size(ds) == 5 && c == 1 && h == 2 && w == 3 && k == 10, "shape %lld %d %d %d %d",
        (long long)cnnrt_dataset_size(ds), c, h, w, k);
  unsigned char img[30];
  float lab[5], f32[30];
  CHECK(cnnrt_dataset_read(ds, 0, 5, CNNRT_U8, img, lab) == CNNRT_OK, "read");
  CHECK(img[0] == 0 && img[7] == 11 && img[29] == 45 && lab[0] == 0 && lab[4] == 1, "values %d %d %d %g %g", img[0], img[7],
        img[29], lab[0], lab[4]);
  CHECK(cnnrt_dataset_read(ds, 3, 2, CNNRT_F32, f32, lab) == CNNRT_OK && f32[0] == 30 / 255.0f && lab[1] == 1, "f32 %g",
        f32[0]);
  CHECK(cnnrt_dataset_read(ds, 4, 2, CNNRT_U8, img, lab) == CNNRT_INVALID_ARGUMENT, "read past the end");
  cnnrt_dataset_shuffle(ds, 42);
  CHECK(cnnrt_dataset_read(ds, 0, 5, CNNRT_U8, img, lab) == CNNRT_OK, "read shuffled");
  int seen[5] = {0}, moved = 0;
  for (int i = 0; i < 5; i++) {
    int s = img[i * 6] / 10;
    seen[s]++;
    moved += s != i;
    CHECK(lab[i] == s % 3, "label follows its image");
  }
  for (int i = 0; i < 5; i++) CHECK(seen[i] == 1, "sample %d seen %d times", i, seen[i]);
  CHECK(moved > 0, "shuffle moved nothing");
  unsigned char again[30];
  cnnrt_dataset_shuffle(ds, 42);
  cnnrt_dataset_read(ds, 0, 5, CNNRT_U8, again, lab);
  CHECK(!memcmp(img, again, 30), "same seed, same order");
  CHECK(cnnrt_dataset_limit(ds, 2) == CNNRT_OK && cnnrt_dataset_size(ds) == 2, "limit");
  CHECK(cnnrt_dataset_limit(ds, 3) == CNNRT_INVALID_ARGUMENT, "limit above size");
  cnnrt_dataset_close(ds);
  CHECK(cnnrt_dataset_open("mnist", g_dir, 1, &ds) == CNNRT_OK && cnnrt_dataset_size(ds) == 2, "gz test split: %s",
        cnnrt_last_error());
  cnnrt_dataset_close(ds);
}

static void test_idx_corrupt(void) {
  clean_dir();
  expect_error("mnist", 0, CNNRT_IO, "train-images-idx3-ubyte: cannot open");
  write_idx("train", 5, 0, 5, 0x801);
  expect_error("mnist", 0, CNNRT_BAD_MODEL, "not an idx3 u8 file");
  write_idx("train", 5, 7, 5, 0x803);
  expect_error("mnist", 0, CNNRT_BAD_MODEL, "truncated: the header promises 30 bytes of data, the file has 23");
  write_idx("train", 5, -3, 5, 0x803);
  expect_error("mnist", 0, CNNRT_BAD_MODEL, "trailing bytes");
  write_idx("train", 5, 0, 4, 0x803);
  expect_error("mnist", 0, CNNRT_BAD_MODEL, "4 labels, but");
  unsigned char hdr[3] = {0, 0, 8};
  write_bytes("train-images-idx3-ubyte", hdr, 3);
  expect_error("fashion-mnist", 0, CNNRT_BAD_MODEL, "not an idx3");
  write_idx("train", 5, 0, 5, 0x803);
  unsigned char lab[13] = {0, 0, 8, 1, 0, 0, 0, 5, 1, 2, 3, 4, 11};
  write_bytes("train-labels-idx1-ubyte", lab, 13);
  expect_error("mnist", 0, CNNRT_BAD_MODEL, "label 11, the dataset has 10 classes");
  unsigned char junk[64] = {0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3, 1, 2, 3};
  write_bytes("train-images-idx3-ubyte.gz", junk, 64);
  char p[512];
  snprintf(p, sizeof p, "%s/train-images-idx3-ubyte", g_dir);
  unlink(p);
  expect_error("mnist", 0, CNNRT_IO, "corrupt gzip");
  expect_error("imagenet", 0, CNNRT_INVALID_ARGUMENT, "unknown dataset 'imagenet'");
}

static void test_cifar(void) {
  clean_dir();
  static unsigned char rec[3 * 3073];
  for (int r = 0; r < 3; r++) {
    rec[r * 3073] = (unsigned char)(r + 7);
    for (int j = 0; j < 3072; j++) rec[r * 3073 + 1 + j] = (unsigned char)(r + j);
  }
  write_bytes("test_batch.bin", rec, sizeof rec);
  cnnrt_dataset *ds = NULL;
  CHECK(cnnrt_dataset_open("cifar10", g_dir, 1, &ds) == CNNRT_OK, "cifar test: %s", cnnrt_last_error());
  if (ds) {
    int c, h, w, k;
    cnnrt_dataset_shape(ds, &c, &h, &w, &k);
    CHECK(cnnrt_dataset_size(ds) == 3 && c == 3 && h == 32 && w == 32 && k == 10, "cifar shape");
    static unsigned char img[3 * 3072];
    float lab[3];
    CHECK(cnnrt_dataset_read(ds, 0, 3, CNNRT_U8, img, lab) == CNNRT_OK && lab[2] == 9 && img[3072 + 5] == 6, "cifar values");
    cnnrt_dataset_close(ds);
  }
  for (int b = 1; b <= 5; b++) {
    char name[32];
    snprintf(name, sizeof name, "data_batch_%d.bin", b);
    write_bytes(name, rec, b == 4 ? sizeof rec - 100 : sizeof rec);
  }
  expect_error("cifar10", 0, CNNRT_BAD_MODEL, "data_batch_4.bin: 9119 bytes is not a whole number of 3073-byte CIFAR-10 records");
  write_bytes("data_batch_4.bin", rec, sizeof rec);
  CHECK(cnnrt_dataset_open("cifar10", g_dir, 0, &ds) == CNNRT_OK && cnnrt_dataset_size(ds) == 15, "cifar train: %s",
        cnnrt_last_error());
  cnnrt_dataset_close(ds);
  rec[3073] = 10;
  write_bytes("data_batch_2.bin", rec, sizeof rec);
  expect_error("cifar10", 0, CNNRT_BAD_MODEL, "data_batch_2.bin: record 1 has label 10");
  mkdir(g_dir, 0755);
}

static void test_synthetic(void) {
  cnnrt_dataset *a = NULL, *b = NULL;
  CHECK(cnnrt_dataset_open("synthetic", NULL, 0, &a) == CNNRT_OK && cnnrt_dataset_size(a) == 1024, "synthetic");
  CHECK(cnnrt_dataset_synthetic(64, 1, 28, 28, 10, 1, &b) == CNNRT_OK, "synthetic 64");
  if (!a || !b) return;
  static unsigned char x[64 * 784], y[64 * 784];
  float la[64], lb[64];
  cnnrt_dataset_read(a, 0, 64, CNNRT_U8, x, la);
  cnnrt_dataset_read(b, 0, 64, CNNRT_U8, y, lb);
  CHECK(!memcmp(x, y, sizeof x) && !memcmp(la, lb, sizeof la), "deterministic in the seed");
  int band_ok = 1;
  for (int i = 0; i < 64; i++) /* the label's band is bright, others are not */
    for (int r = 0; r < 28; r++) {
      int in_band = r * 10 / 28 == (int)la[i], v = x[i * 784 + r * 28 + 5];
      band_ok &= in_band ? v >= 150 : v < 100;
    }
  CHECK(band_ok, "class bands");
  cnnrt_dataset_close(b);
  CHECK(cnnrt_dataset_synthetic(10, 1, 4, 4, 10, 1, &b) == CNNRT_INVALID_ARGUMENT, "more classes than rows");
  cnnrt_dataset_close(a);
}

int main(void) {
  snprintf(g_dir, sizeof g_dir, "/tmp/cnnc_test_data_%ld", (long)getpid());
  mkdir(g_dir, 0755);
  test_idx_good();
  test_idx_corrupt();
  test_cifar();
  test_synthetic();
  clean_dir();
  rmdir(g_dir);
  printf("%d checks, %d failed\n", g_checks, g_failures);
  return g_failures != 0;
}
