/* test_folder_pool.c — runtime/rt_folder.c's decoder pool through the public dataset calls on
 * image folders written here (libspng): two threads reading one dataset at once get exactly the
 * samples one thread reads alone (a reader's job is not cancelled or replaced by another's);
 * with skip_bad a run of corrupt files is counted once per file however many decoder threads
 * meet it, and the substitutes are the same for 0 and 4 threads; shuffles, limits and closes
 * while the read-ahead runs; strided reads (a rank's micro-batches) read ahead at their stride; TFRecord labels at the ends of int64 refused (no overflow in the
 * label_base check).  Linked against cnnrt_static (for libspng; the calls are public). */
#include <pthread.h>
#include <spng.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cnnrt.h"

#include "check.h"

#define SIDE 48 /* stored images; samples are OUT x OUT */
#define OUT 24
#define PER (OUT * OUT)

static char g_root[256];

static void write_file(const char *path, const void *p, size_t n) {
  FILE *f = fopen(path, "wb");
  if (!f || fwrite(p, 1, n, f) != n) fprintf(stderr, "%s: cannot write\n", path), exit(2);
  fclose(f);
}

/* A grey PNG whose pixels encode k (each image differs). */
static void write_png(const char *path, int k) {
  uint8_t img[SIDE * SIDE];
  for (int i = 0; i < SIDE * SIDE; i++) img[i] = (uint8_t)(k * 37 + i * (k % 7 + 1));
  spng_ctx *ctx = spng_ctx_new(SPNG_CTX_ENCODER);
  spng_set_option(ctx, SPNG_ENCODE_TO_BUFFER, 1);
  struct spng_ihdr ih = {SIDE, SIDE, 8, 0, 0, 0, 0};
  spng_set_ihdr(ctx, &ih);
  int e = spng_encode_image(ctx, img, sizeof img, SPNG_FMT_PNG, SPNG_ENCODE_FINALIZE);
  size_t n = 0;
  void *b = e ? NULL : spng_get_png_buffer(ctx, &n, &e);
  if (e) fprintf(stderr, "png encode: %s\n", spng_strerror(e)), exit(2);
  write_file(path, b, n);
  free(b);
  spng_ctx_free(ctx);
}

/* root/NAME/train/classK/...: `good` PNGs per class; with bad > 0, class 1 starts with `bad`
 * corrupt files (a000.png ... sort before the good ones). */
static void make_folder(const char *name, int classes, int good, int bad) {
  char d[512], p[600];
  snprintf(d, sizeof d, "%s/%s", g_root, name);
  mkdir(d, 0777);
  snprintf(d, sizeof d, "%s/%s/train", g_root, name);
  mkdir(d, 0777);
  for (int c = 0; c < classes; c++) {
    snprintf(d, sizeof d, "%s/%s/train/class%d", g_root, name, c);
    mkdir(d, 0777);
    for (int i = 0; i < good; i++) {
      snprintf(p, sizeof p, "%s/img%04d.png", d, i);
      write_png(p, c * 1000 + i);
    }
    for (int i = 0; c == 1 && i < bad; i++) {
      snprintf(p, sizeof p, "%s/a%03d.png", d, i);
      write_file(p, "\x89PNG\r\n\x1a\n not really a PNG", 24);
    }
  }
}

static cnnrt_dataset *open_folder(const char *name, int threads, int skip_bad) {
  char d[512];
  snprintf(d, sizeof d, "%s/%s", g_root, name);
  cnnrt_folder_options o;
  cnnrt_folder_options_init(&o);
  o.channels = 1, o.height = OUT, o.width = OUT;
  o.threads = threads;
  o.skip_bad = skip_bad;
  cnnrt_dataset *ds = NULL;
  if (cnnrt_dataset_open_folder(d, 0, &o, &ds) != CNNRT_OK) fprintf(stderr, "open %s: %s\n", d, cnnrt_last_error()), exit(2);
  return ds;
}

/* ---- two readers on one dataset ----------------------------------------------------------- */
#define WIN 8
typedef struct reader {
  cnnrt_dataset *ds;
  const uint8_t *ref;   /* [n][PER]: the samples read by one thread */
  const float *ref_lab;
  int64_t n;
  int parity, rounds, wrong, failed;
} reader;

static void *read_windows(void *p) {
  reader *r = p;
  uint8_t px[WIN * PER];
  float lab[WIN];
  for (int k = 0; k < r->rounds; k++)
    for (int64_t w = r->parity; (w + 1) * WIN <= r->n; w += 2) {
      if (cnnrt_dataset_read(r->ds, w * WIN, WIN, CNNRT_U8, px, lab) != CNNRT_OK) {
        r->failed++;
        continue;
      }
      if (memcmp(px, r->ref + w * WIN * PER, sizeof px) || memcmp(lab, r->ref_lab + w * WIN, sizeof lab)) r->wrong++;
    }
  return NULL;
}

/* A read of 0 samples (the first read of the dataset: the pool has no buffers yet) succeeds. */
static void test_empty_read(void) {
  cnnrt_dataset *ds = open_folder("plain", 2, 0);
  uint8_t px[PER];
  float lab;
  CHECK(cnnrt_dataset_read(ds, 0, 0, CNNRT_U8, px, &lab) == CNNRT_OK, "a read of 0 samples: %s", cnnrt_last_error());
  CHECK(cnnrt_dataset_read(ds, cnnrt_dataset_size(ds), 0, CNNRT_F32, px, &lab) == CNNRT_OK, "a read of 0 samples at the end: %s",
        cnnrt_last_error());
  CHECK(cnnrt_dataset_read(ds, 1, 1, CNNRT_U8, px, &lab) == CNNRT_OK && lab == 0, "a read after: %s", cnnrt_last_error());
  cnnrt_dataset_close(ds);
}

static void test_two_readers(void) {
  for (int threads = 0; threads <= 2; threads += 2) {
    cnnrt_dataset *ds = open_folder("plain", threads, 0);
    cnnrt_dataset_shuffle(ds, 11);
    int64_t n = cnnrt_dataset_size(ds);
    uint8_t *ref = malloc((size_t)n * PER);
    float *ref_lab = malloc((size_t)n * sizeof *ref_lab);
    CHECK(cnnrt_dataset_read(ds, 0, n, CNNRT_U8, ref, ref_lab) == CNNRT_OK, "read all: %s", cnnrt_last_error());
    reader r[2];
    pthread_t th[2];
    for (int t = 0; t < 2; t++) {
      r[t] = (reader){ds, ref, ref_lab, n, t, 20, 0, 0};
      pthread_create(&th[t], NULL, read_windows, &r[t]);
    }
    for (int t = 0; t < 2; t++) pthread_join(th[t], NULL);
    for (int t = 0; t < 2; t++)
      CHECK(r[t].wrong == 0 && r[t].failed == 0,
            "%d decoder threads, two readers at once: reader %d got %d windows of other samples, %d failed reads", threads,
            t, r[t].wrong, r[t].failed);
    cnnrt_dataset_close(ds);
    free(ref);
    free(ref_lab);
  }
}

/* ---- skip_bad: each corrupt file counted once, the same substitutes for any thread count ---- */
static void test_skip_bad(void) {
  cnnrt_dataset *ds0 = open_folder("bad", 0, 1);
  int64_t n = cnnrt_dataset_size(ds0);
  uint8_t *ref = malloc((size_t)n * PER), *px = malloc((size_t)n * PER);
  float *ref_lab = malloc((size_t)n * sizeof *ref_lab), *lab = malloc((size_t)n * sizeof *lab);
  CHECK(cnnrt_dataset_read(ds0, 0, n, CNNRT_U8, ref, ref_lab) == CNNRT_OK, "skip_bad, no threads: %s", cnnrt_last_error());
  cnnrt_dataset_stats st;
  cnnrt_dataset_stats_get(ds0, &st);
  CHECK(st.skipped == 60 && strstr(st.last_skipped, "class1/a0"), "skip_bad, no threads: %lld skipped (60 corrupt files), last '%s'",
        (long long)st.skipped, st.last_skipped);
  cnnrt_dataset_close(ds0);
  int miscount = 0, differ = 0;
  for (int k = 0; k < 40; k++) {
    cnnrt_dataset *ds = open_folder("bad", 4, 1);
    if (cnnrt_dataset_read(ds, 0, n, CNNRT_U8, px, lab) != CNNRT_OK) {
      CHECK(0, "skip_bad, 4 threads: %s", cnnrt_last_error());
      cnnrt_dataset_close(ds);
      break;
    }
    cnnrt_dataset_stats_get(ds, &st);
    if (st.skipped != 60) {
      if (!miscount) fprintf(stderr, "  run %d: %lld skipped\n", k, (long long)st.skipped);
      miscount++;
    }
    differ += memcmp(px, ref, (size_t)n * PER) != 0 || memcmp(lab, ref_lab, (size_t)n * sizeof *lab) != 0;
    cnnrt_dataset_close(ds);
  }
  CHECK(miscount == 0, "skip_bad, 4 threads: %d of 40 runs did not count the 60 corrupt files once each", miscount);
  CHECK(differ == 0, "skip_bad, 4 threads: %d of 40 runs substituted other samples than 0 threads", differ);
  free(ref), free(px), free(ref_lab), free(lab);
}

/* ---- shuffles, limits and closes while the read-ahead decodes -------------------------- */
static void test_churn(void) {
  uint8_t px[WIN * PER], px0[WIN * PER];
  float lab[WIN], lab0[WIN];
  cnnrt_dataset *ref = open_folder("plain", 0, 0);
  for (int k = 0; k < 30; k++) {
    cnnrt_dataset *ds = open_folder("plain", 3, 0);
    cnnrt_dataset_shuffle(ds, (uint64_t)k + 1);
    cnnrt_dataset_shuffle(ref, (uint64_t)k + 1);
    CHECK(cnnrt_dataset_read(ds, 0, WIN, CNNRT_U8, px, lab) == CNNRT_OK, "churn read: %s", cnnrt_last_error());
    /* the read-ahead now decodes samples WIN.. of this order: change the order under it */
    cnnrt_dataset_shuffle(ds, (uint64_t)k + 100);
    cnnrt_dataset_shuffle(ref, (uint64_t)k + 100);
    CHECK(cnnrt_dataset_read(ds, WIN, WIN, CNNRT_U8, px, lab) == CNNRT_OK, "churn read: %s", cnnrt_last_error());
    CHECK(cnnrt_dataset_read(ref, WIN, WIN, CNNRT_U8, px0, lab0) == CNNRT_OK, "churn read: %s", cnnrt_last_error());
    CHECK(!memcmp(px, px0, sizeof px) && !memcmp(lab, lab0, sizeof lab), "churn %d: a read after a shuffle under the read-ahead", k);
    if (k % 3 == 0) {
      CHECK(cnnrt_dataset_limit(ds, 2 * WIN + k) == CNNRT_OK, "limit: %s", cnnrt_last_error());
      CHECK(cnnrt_dataset_read(ds, 0, WIN, CNNRT_U8, px, lab) == CNNRT_OK, "read after limit: %s", cnnrt_last_error());
    }
    cnnrt_dataset_close(ds); /* with the read-ahead of the last read running */
  }
  cnnrt_dataset_close(ref);
}

/* ---- strided reads (a rank under mpirun reads every N-th micro-batch) -------------------------
 * The read-ahead follows the stride of the last two reads: reading every other window, with
 * time between the reads for the read-ahead to finish, decodes the windows read and one more
 * (the last read-ahead), not the skipped windows too; the samples are those of 0 threads. */
static void test_stride(void) {
  cnnrt_dataset *ds = open_folder("plain", 2, 0), *ref = open_folder("plain", 0, 0);
  int64_t n = cnnrt_dataset_size(ds), reads = 0;
  uint8_t px[WIN * PER], px0[WIN * PER];
  float lab[WIN], lab0[WIN];
  cnnrt_dataset_shuffle(ds, 7);
  cnnrt_dataset_shuffle(ref, 7);
  for (int64_t w = 1; (w + 1) * WIN <= n; w += 2, reads++) { /* windows 1, 3, 5, ...: stride 2 WIN */
    CHECK(cnnrt_dataset_read(ds, w * WIN, WIN, CNNRT_U8, px, lab) == CNNRT_OK, "stride read: %s", cnnrt_last_error());
    CHECK(cnnrt_dataset_read(ref, w * WIN, WIN, CNNRT_U8, px0, lab0) == CNNRT_OK, "stride read: %s", cnnrt_last_error());
    CHECK(!memcmp(px, px0, sizeof px) && !memcmp(lab, lab0, sizeof lab), "stride: window %lld differs from 0 threads",
          (long long)w);
    usleep(30000); /* the read-ahead of the next window finishes */
  }
  cnnrt_dataset_stats st;
  cnnrt_dataset_stats_get(ds, &st);
  /* the first read-ahead guesses the window right after (no stride known yet): one more window */
  CHECK(reads >= 4 && st.decoded <= (reads + 2) * WIN,
        "stride: %lld reads of %d samples at a stride of %d decoded %lld images (at most %lld: the read-ahead "
        "decodes the windows skipped)", (long long)reads, WIN, 2 * WIN, (long long)st.decoded,
        (long long)(reads + 2) * WIN);
  cnnrt_dataset_close(ds);
  cnnrt_dataset_close(ref);
}

/* ---- TFRecord labels at the ends of int64 -------------------------------------------------- */
static uint32_t crc32c(const uint8_t *p, size_t n) {
  uint32_t c = 0xFFFFFFFFu;
  while (n--) {
    c ^= *p++;
    for (int k = 0; k < 8; k++) c = c & 1 ? (c >> 1) ^ 0x82F63B78u : c >> 1;
  }
  return c ^ 0xFFFFFFFFu;
}
static uint32_t masked(const uint8_t *p, size_t n) {
  uint32_t c = crc32c(p, n);
  return ((c >> 15) | (c << 17)) + 0xA282EAD8u;
}
static size_t varint(uint8_t *o, uint64_t v) {
  size_t k = 0;
  do o[k++] = (uint8_t)(v & 0x7F) | (v >> 7 ? 0x80 : 0); while (v >>= 7);
  return k;
}
/* field num, wire type 2, payload p[0..n) appended to o */
static size_t ld(uint8_t *o, int num, const uint8_t *p, size_t n) {
  size_t k = varint(o, (uint64_t)num << 3 | 2);
  k += varint(o + k, n);
  memcpy(o + k, p, n);
  return k + n;
}

static void test_tfrecord_label_ends(void) {
  static uint8_t img[] = "\x89PNG\r\n\x1a\n unused: the label is checked first";
  const int64_t labels[2] = {INT64_MIN, INT64_MAX};
  const int bases[2] = {1, -1};
  for (int t = 0; t < 2; t++) {
    uint8_t a[256], b[256], c[512], ex[1024], rec[1100];
    size_t na, nb, nc, ne = 0, k;
    /* "image/encoded": Feature{bytes_list{value}} */
    na = ld(a, 1, img, sizeof img - 1);
    nb = ld(b, 1, a, na);
    nc = ld(c, 1, (const uint8_t *)"image/encoded", 13);
    nc += ld(c + nc, 2, b, nb);
    uint8_t feats[1024];
    size_t nf = ld(feats, 1, c, nc);
    /* "image/class/label": Feature{int64_list{packed value}} */
    uint8_t v[16];
    size_t nv = varint(v, (uint64_t)labels[t]);
    na = ld(a, 1, v, nv);
    nb = ld(b, 3, a, na);
    nc = ld(c, 1, (const uint8_t *)"image/class/label", 17);
    nc += ld(c + nc, 2, b, nb);
    nf += ld(feats + nf, 1, c, nc);
    ne = ld(ex, 1, feats, nf);
    uint64_t len = ne;
    for (k = 0; k < 8; k++) rec[k] = (uint8_t)(len >> (8 * k));
    uint32_t h = masked(rec, 8), d;
    for (k = 0; k < 4; k++) rec[8 + k] = (uint8_t)(h >> (8 * k));
    memcpy(rec + 12, ex, ne);
    d = masked(ex, ne);
    for (k = 0; k < 4; k++) rec[12 + ne + k] = (uint8_t)(d >> (8 * k));
    char dir[512], path[600];
    snprintf(dir, sizeof dir, "%s/tfr%d", g_root, t);
    mkdir(dir, 0777);
    snprintf(path, sizeof path, "%s/train-00000-of-00001", dir);
    write_file(path, rec, 16 + ne);
    cnnrt_folder_options o;
    cnnrt_folder_options_init(&o);
    o.channels = 1, o.height = OUT, o.width = OUT, o.threads = 0, o.classes = 4, o.label_base = bases[t];
    cnnrt_dataset *ds = NULL;
    if (cnnrt_dataset_open_tfrecord(dir, 0, &o, &ds) != CNNRT_OK) {
      CHECK(0, "open %s: %s", dir, cnnrt_last_error());
      continue;
    }
    uint8_t px[PER];
    float lab;
    char want[64];
    snprintf(want, sizeof want, "label %lld, outside", (long long)labels[t]);
    cnnrt_status st = cnnrt_dataset_read(ds, 0, 1, CNNRT_U8, px, &lab);
    CHECK(st == CNNRT_BAD_MODEL && strstr(cnnrt_last_error(), want) && strstr(cnnrt_last_error(), "train-00000-of-00001"),
          "TFRecord label %lld, label base %d: status %d, '%s'", (long long)labels[t], bases[t], (int)st, cnnrt_last_error());
    cnnrt_dataset_close(ds);
  }
}

int main(void) {
  snprintf(g_root, sizeof g_root, "/tmp/cnnc-folder-pool-XXXXXX");
  if (!mkdtemp(g_root)) return perror("mkdtemp"), 2;
  make_folder("plain", 4, 24, 0);
  make_folder("bad", 3, 6, 60);
  test_empty_read();
  test_two_readers();
  test_skip_bad();
  test_churn();
  test_stride();
  test_tfrecord_label_ends();
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_root);
  if (system(cmd) != 0) fprintf(stderr, "cannot remove %s\n", g_root);
  return check_done("test_folder_pool", g_failures);
}
