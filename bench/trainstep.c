/* trainstep.c — per-step cost of cnnrt_train_step on one random batch: wall time, process
 * user and system CPU, minor page faults, and the CPU of the calling thread (work done
 * outside the kernel threads, e.g. buffer allocation at the first step).  For A/B runs of
 * runtime settings (cnnrt_options.hugepages, spin_us) on a loaded machine: compare CPU, not
 * wall.
 *
 *   gcc -O2 -Iruntime bench/trainstep.c -o trainstep -LBUILD -lcnnrt -Wl,-rpath,BUILD
 *   ./trainstep MODEL.so [STEPS=3] [THREADS=2] [HUGEPAGES=inference|off|all] [SPIN_US=2000] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "cnnrt.h"

static double clock_s(clockid_t c) {
  struct timespec t;
  clock_gettime(c, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

typedef struct sample { double wall, user, sys, self; long faults; } sample;

static sample take(void) {
  struct rusage r;
  getrusage(RUSAGE_SELF, &r);
  return (sample){clock_s(CLOCK_MONOTONIC), (double)r.ru_utime.tv_sec + 1e-6 * (double)r.ru_utime.tv_usec,
                  (double)r.ru_stime.tv_sec + 1e-6 * (double)r.ru_stime.tv_usec, clock_s(CLOCK_THREAD_CPUTIME_ID),
                  r.ru_minflt};
}

static void show(const char *what, sample a, sample b) {
  printf("%-7s wall %7.3f  user %7.3f  sys %6.3f  caller-cpu %6.3f  faults %7ld\n", what, b.wall - a.wall, b.user - a.user,
         b.sys - a.sys, b.self - a.self, b.faults - a.faults);
}

int main(int argc, char **argv) {
  static const char *const huge[] = {"inference", "off", "all"}; /* CNNRT_HUGEPAGES_* */
  int h = 0;
  while (argc > 4 && h < 3 && strcmp(argv[4], huge[h])) h++;
  if (argc < 2 || h == 3) {
    fprintf(stderr, "usage: trainstep MODEL.so [STEPS] [THREADS] [HUGEPAGES=inference|off|all] [SPIN_US]\n");
    return 2;
  }
  int steps = argc > 2 ? atoi(argv[2]) : 3, threads = argc > 3 ? atoi(argv[3]) : 2;
  cnnrt_options o;
  cnnrt_options_init(&o);
  o.threads_per_shard = threads;
  o.hugepages = (cnnrt_hugepages)h;
  if (argc > 5) o.spin_us = atoi(argv[5]); /* cnnrt_open rejects a value out of range */
  cnnrt_model *m;
  sample a = take();
  if (cnnrt_open(argv[1], &o, &m) != CNNRT_OK) {
    fprintf(stderr, "trainstep: %s\n", cnnrt_last_error());
    return 1;
  }
  show("open", a, take());
  cnnrt_tensor_info in;
  cnnrt_input_info(m, &in);
  int batch = (int)in.dims[0];
  float *x = malloc(in.bytes), *labels = malloc((size_t)batch * sizeof *labels);
  if (!x || !labels) return 1;
  unsigned seed = 1;
  for (size_t i = 0; i < in.bytes / 4; i++) {
    seed = seed * 1103515245u + 12345u;
    x[i] = (float)((seed >> 8) % 2001) / 1000.0f - 1.0f;
  }
  for (int i = 0; i < batch; i++) labels[i] = (float)(i % 10);
  for (int s = 1; s <= steps; s++) {
    float loss, acc;
    a = take();
    if (cnnrt_train_step(m, x, in.bytes, labels, 1, &loss, &acc) != CNNRT_OK) {
      fprintf(stderr, "trainstep: step %d: %s\n", s, cnnrt_last_error());
      return 1;
    }
    char what[16];
    snprintf(what, sizeof what, "step %d", s);
    show(what, a, take());
  }
  a = take();
  cnnrt_close(m);
  show("close", a, take());
  free(x);
  free(labels);
  return 0;
}
