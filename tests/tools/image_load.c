/* image_load.c — runtime/rt_image.c from the command line, for tests/scripts/test_image_pil.py
 * and the loader benchmark (linked against cnnrt_static: rt_image_load is internal).
 *   image_load load FILE KIND C H W SEED [RESIZE_SHORT]   the u8 CHW sample on stdout
 *   image_load crops W H SEED0 COUNT                     "x0 y0 cw ch flip" per seed (TRAIN)
 *   image_load bench SECONDS THREADS KIND C H W FILE...  loads the files round robin (seeds
 *       0, 1, ...) on THREADS threads for SECONDS; one JSON line with images/s
 * KIND: resize, train or center (the recipe defaults of rt_xform_default). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rt_image.h"

typedef struct file {
  uint8_t *p;
  size_t n;
  const char *path;
} file;

static file read_file(const char *path) {
  file f = {NULL, 0, path};
  FILE *fp = fopen(path, "rb");
  if (!fp) fprintf(stderr, "image_load: cannot open %s\n", path), exit(2);
  fseek(fp, 0, SEEK_END);
  long n = ftell(fp);
  rewind(fp);
  f.p = malloc(n > 0 ? (size_t)n : 1), f.n = (size_t)(n > 0 ? n : 0);
  if (f.n && fread(f.p, 1, f.n, fp) != f.n) fprintf(stderr, "image_load: cannot read %s\n", path), exit(2);
  fclose(fp);
  return f;
}

static void xform(rt_xform *x, const char *kind, int c, int h, int w) {
  rt_xform_kind k = !strcmp(kind, "train") ? RT_XFORM_TRAIN : !strcmp(kind, "center") ? RT_XFORM_CENTER : RT_XFORM_RESIZE;
  if (k == RT_XFORM_RESIZE && strcmp(kind, "resize")) fprintf(stderr, "image_load: unknown kind %s\n", kind), exit(2);
  rt_xform_default(x, k, c, h, w);
}

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

typedef struct bench {
  file *f;
  int nf;
  rt_xform x;
  double end;
  _Atomic long next, done;
} bench;

static void *bench_thread(void *p) {
  bench *b = p;
  uint8_t *out = malloc((size_t)b->x.out_c * b->x.out_h * b->x.out_w);
  while (now() < b->end) {
    long i = atomic_fetch_add(&b->next, 1);
    const file *f = &b->f[i % b->nf];
    if (rt_image_load(f->p, f->n, f->path, &b->x, (uint64_t)i, out) != CNNRT_OK)
      fprintf(stderr, "image_load: %s\n", cnnrt_last_error()), exit(1);
    atomic_fetch_add(&b->done, 1);
  }
  free(out);
  return NULL;
}

int main(int argc, char **argv) {
  if (argc >= 8 && !strcmp(argv[1], "load")) {
    file f = read_file(argv[2]);
    rt_xform x;
    xform(&x, argv[3], atoi(argv[4]), atoi(argv[5]), atoi(argv[6]));
    if (argc > 8) x.resize_short = atoi(argv[8]);
    size_t n = (size_t)x.out_c * x.out_h * x.out_w;
    uint8_t *out = malloc(n);
    if (rt_image_load(f.p, f.n, f.path, &x, strtoull(argv[7], NULL, 0), out) != CNNRT_OK) {
      fprintf(stderr, "%s\n", cnnrt_last_error());
      return 1;
    }
    fwrite(out, 1, n, stdout);
    return 0;
  }
  if (argc == 6 && !strcmp(argv[1], "crops")) {
    rt_xform x;
    xform(&x, "train", 3, 224, 224);
    uint64_t s0 = strtoull(argv[4], NULL, 0);
    for (long i = 0; i < atol(argv[5]); i++) {
      int x0, y0, cw, ch, fl;
      rt_xform_train_crop(&x, atoi(argv[2]), atoi(argv[3]), s0 + (uint64_t)i, &x0, &y0, &cw, &ch, &fl);
      printf("%d %d %d %d %d\n", x0, y0, cw, ch, fl);
    }
    return 0;
  }
  if (argc >= 9 && !strcmp(argv[1], "bench")) {
    static bench b;
    int threads = atoi(argv[3]);
    xform(&b.x, argv[4], atoi(argv[5]), atoi(argv[6]), atoi(argv[7]));
    b.nf = argc - 8;
    b.f = malloc(sizeof *b.f * (size_t)b.nf);
    for (int i = 0; i < b.nf; i++) b.f[i] = read_file(argv[8 + i]);
    pthread_t t[64];
    if (threads < 1 || threads > 64) return 2;
    struct timespec c0, c1;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c0);
    double t0 = now();
    b.end = t0 + atof(argv[2]);
    for (int i = 0; i < threads; i++) pthread_create(&t[i], NULL, bench_thread, &b);
    for (int i = 0; i < threads; i++) pthread_join(t[i], NULL);
    double dt = now() - t0;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c1);
    double cpu = (double)(c1.tv_sec - c0.tv_sec) + 1e-9 * (double)(c1.tv_nsec - c0.tv_nsec);
    printf("{\"peer\":\"cnnrt\",\"threads\":%d,\"kind\":\"%s\",\"images\":%ld,\"seconds\":%.2f,\"img_per_s\":%.1f,"
           "\"cpu_ms_per_img\":%.3f}\n", threads, argv[4], (long)b.done, dt, (double)b.done / dt, 1e3 * cpu / (double)b.done);
    return 0;
  }
  fprintf(stderr, "usage: see the head of tests/tools/image_load.c\n");
  return 2;
}
