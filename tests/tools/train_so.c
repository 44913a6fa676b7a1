/* train_so.c — compiled training steps through the runtime (issue 5): opens a training .so
 * (cnnc --mode training), runs K cnnrt_train_step calls on one given batch and dumps the
 * losses and the state after every step.  Test support for test_train_torch.py (the
 * compiled twin of train_interp).
 *
 *   train_so MODEL.so --input X.f32 --labels L.f32 [--steps K] [--lr LR] [--threads T]
 *       --dump-dir D
 *
 * X: raw f32 (u8 models: one byte per element) of exactly one micro-batch; L: f32 class ids.
 * Writes D/loss.f32 (one loss per step) and, for step k = 1..K, D/stepk/NAME.f32 for every
 * state tensor (weights, optimizer state, BN running statistics), '/' in NAME replaced by
 * '.' (--no-state: losses only).  Prints "step k loss V  T s  R img/s" (the step's wall time)
 * and, after 3 or more steps, the img/s over the steps after the first.  Without --input /
 * --labels the batch is random (f32 in [-1, 1), labels i mod 10).  Exit status 0 ok, 1 error. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "runtime/cnnrt.h"

static void *slurp(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long len = ftell(f);
  fseek(f, 0, SEEK_SET);
  void *b = malloc(len > 0 ? (size_t)len : 1);
  if (!b || fread(b, 1, (size_t)len, f) != (size_t)len) {
    free(b);
    fclose(f);
    return NULL;
  }
  fclose(f);
  *n = (size_t)len;
  return b;
}

static int dump_state(cnnrt_model *m, const char *dir) {
  mkdir(dir, 0777);
  for (int i = 0; i < cnnrt_num_state(m); i++) {
    cnnrt_state_info si;
    if (cnnrt_state_info_at(m, i, &si) != CNNRT_OK) return -1;
    void *buf = malloc(si.bytes ? si.bytes : 1);
    if (!buf || cnnrt_get_state(m, si.name, buf, si.bytes) != CNNRT_OK) {
      free(buf);
      return -1;
    }
    char name[512], path[2048];
    snprintf(name, sizeof name, "%s", si.name);
    for (char *p = name; *p; p++)
      if (*p == '/') *p = '.';
    snprintf(path, sizeof path, "%s/%s.f32", dir, name);
    FILE *f = fopen(path, "wb");
    int ok = f && fwrite(buf, 1, si.bytes, f) == si.bytes;
    if (f && fclose(f)) ok = 0;
    free(buf);
    if (!ok) return -1;
  }
  return 0;
}

int main(int argc, char **argv) {
  const char *so = NULL, *xin = NULL, *lin = NULL, *dump = NULL;
  int steps = 1, threads = 0, no_state = 0;
  double lr = 0.01;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (a[0] != '-' && !so) so = a;
    else if (v && !strcmp(a, "--input")) xin = v, i++;
    else if (v && !strcmp(a, "--labels")) lin = v, i++;
    else if (v && !strcmp(a, "--steps")) steps = atoi(v), i++;
    else if (v && !strcmp(a, "--lr")) lr = atof(v), i++;
    else if (v && !strcmp(a, "--threads")) threads = atoi(v), i++;
    else if (v && !strcmp(a, "--dump-dir")) dump = v, i++;
    else if (!strcmp(a, "--no-state")) no_state = 1;
    else {
      fprintf(stderr, "train_so: unknown or incomplete argument '%s'\n", a);
      return 1;
    }
  }
  if (!so || !dump || steps < 1 || !xin != !lin) {
    fprintf(stderr, "usage: train_so MODEL.so [--input X.f32 --labels L.f32] [--steps K] [--lr LR] [--threads T]\n"
                    "  [--no-state] --dump-dir D\n");
    return 1;
  }
  size_t nx = 0, nl = 0;
  void *x = xin ? slurp(xin, &nx) : NULL;
  float *labels = lin ? slurp(lin, &nl) : NULL;
  if (xin && (!x || !labels)) {
    fprintf(stderr, "train_so: cannot read %s\n", !x ? xin : lin);
    return 1;
  }
  cnnrt_options o;
  cnnrt_options_init(&o);
  o.threads_per_shard = threads;
  cnnrt_model *m = NULL;
  if (cnnrt_open(so, &o, &m) != CNNRT_OK || cnnrt_set_learning_rate(m, lr) != CNNRT_OK) {
    fprintf(stderr, "train_so: %s\n", cnnrt_last_error());
    cnnrt_close(m);
    return 1;
  }
  cnnrt_tensor_info in;
  cnnrt_input_info(m, &in);
  if (!x) { /* random batch */
    nx = in.bytes;
    x = malloc(nx);
    labels = malloc((size_t)in.dims[0] * sizeof *labels);
    uint64_t r = 1;
    for (size_t i = 0; x && i < nx / 4; i++) ((float *)x)[i] = (float)((r = r * 6364136223846793005ull + 1) >> 40) / 8388608.0f - 1.0f;
    for (int64_t i = 0; labels && i < in.dims[0]; i++) labels[i] = (float)(i % 10);
    if (!x || !labels) return 1;
  }
  mkdir(dump, 0777);
  double t_rest = 0;
  char path[1024];
  snprintf(path, sizeof path, "%s/loss.f32", dump);
  FILE *lf = fopen(path, "wb");
  int rc = lf ? 0 : 1;
  for (int s = 1; s <= steps && !rc; s++) {
    float loss = 0, acc = 0;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    if (cnnrt_train_step(m, x, nx, labels, 1, &loss, &acc) != CNNRT_OK) {
      fprintf(stderr, "train_so: step %d: %s\n", s, cnnrt_last_error());
      rc = 1;
      break;
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double dt = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    if (s > 1) t_rest += dt;
    printf("step %d loss %.7g  %.3f s  %.2f img/s\n", s, loss, dt, (double)in.dims[0] / dt);
    fflush(stdout);
    if (no_state) {
      if (fwrite(&loss, 4, 1, lf) != 1) rc = 1;
      continue;
    }
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/step%d", dump, s);
    if (fwrite(&loss, 4, 1, lf) != 1 || dump_state(m, dir)) {
      fprintf(stderr, "train_so: cannot write the dump in %s\n", dump);
      rc = 1;
    }
  }
  if (lf && fclose(lf)) rc = 1;
  if (!rc && steps >= 3) printf("steps 2..%d: %.2f img/s\n", steps, (double)in.dims[0] * (steps - 1) / t_rest);
  cnnrt_close(m);
  free(x);
  free(labels);
  return rc;
}
