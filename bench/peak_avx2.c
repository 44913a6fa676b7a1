/* peak_avx2.c — fp32 FMA peak of this machine with AVX2 (256-bit) vectors, 1 and 2 threads:
 * 12 independent accumulator chains of vfmadd231ps per thread (enough to cover the FMA
 * latency x throughput of Zen 3/4 and Intel cores).  Prints GFLOP/s by wall time and by
 * CPU time; `--gflops` prints the four numbers on one line (for bench/run.py).
 *   gcc -O2 -mavx2 -mfma bench/peak_avx2.c -o peak_avx2 -lpthread */
#include <immintrin.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#define ITERS 200000000L

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void *run256(void *p) {
  __m256 b = _mm256_set1_ps(1.0000001f), c = _mm256_set1_ps(1e-7f);
  __m256 a[12];
  for (int i = 0; i < 12; i++) a[i] = _mm256_set1_ps((float)i);
  for (long n = 0; n < ITERS; n++) {
#define F(i) a[i] = _mm256_fmadd_ps(a[i], b, c);
    F(0) F(1) F(2) F(3) F(4) F(5) F(6) F(7) F(8) F(9) F(10) F(11)
  }
  __m256 s = a[0];
  for (int i = 1; i < 12; i++) s = _mm256_add_ps(s, a[i]);
  float out[8];
  _mm256_storeu_ps(out, s);
  struct timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  ((double *)p)[0] = (double)out[0];
  ((double *)p)[1] = (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
  return 0;
}

/* GFLOP/s of nt threads, each 12 chains x 8 lanes x 2 FLOP per iteration; best of 3 by
 * wall time.  *per_cpu: the same work over the threads' CPU time (what an idle machine would
 * give; the two differ when other processes share the cores). */
static double go(int nt, double *per_cpu) {
  double best = 0, best_cpu = 0, flop = (double)ITERS * 12 * 8 * 2;
  for (int rep = 0; rep < 3; rep++) {
    pthread_t th[8];
    double r[8][2], cpu = 0;
    double t0 = now();
    for (int i = 0; i < nt; i++) pthread_create(&th[i], 0, run256, r[i]);
    for (int i = 0; i < nt; i++) pthread_join(th[i], 0);
    double g = nt * flop / (now() - t0) / 1e9;
    for (int i = 0; i < nt; i++) cpu += r[i][1];
    if (g > best) best = g;
    if (nt * nt * flop / cpu / 1e9 > best_cpu) best_cpu = nt * nt * flop / cpu / 1e9;
  }
  *per_cpu = best_cpu;
  return best;
}

int main(int argc, char **argv) {
  double c1, c2, g1 = go(1, &c1), g2 = go(2, &c2);
  if (argc > 1 && !strcmp(argv[1], "--gflops")) {
    printf("%.1f %.1f %.1f %.1f\n", g1, g2, c1, c2);
    return 0;
  }
  printf("avx2 fp32 FMA 1 thread:  %.1f GFLOP/s wall (%.1f per CPU-second)\n", g1, c1);
  printf("avx2 fp32 FMA 2 threads: %.1f GFLOP/s wall (%.1f per CPU-second x 2 threads)\n", g2, c2);
  return 0;
}
