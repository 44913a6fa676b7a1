/* peak.c — FMA peak of this machine, 1 and 2 threads, for the widest fp32 ISA it has:
 * AVX-512 (zmm vfmadd231ps) when the CPU reports avx512f, else AVX2 (ymm); plus the
 * AVX512_BF16 vdpbf16ps peak where the CPU has it, and the AMX tdpbf16ps (bf16) and tdpbssd
 * (int8) peaks where it has AMX (after Linux's arch_prctl(ARCH_REQ_XCOMP_PERM) for the tiles).  12 independent accumulator chains per
 * thread (Zen 5 needs >= 2 FMA/cycle x latency 4 = 8; 12 also covers Zen 3/4 and Intel).
 * The kernels carry target attributes and run only after __builtin_cpu_supports says the
 * CPU has the ISA, so one plain build works on any x86-64 host:
 *   gcc -O2 bench/peak.c -o peak -lpthread && ./peak
 * Prints GFLOP/s by wall time and by CPU time; `--gflops` prints one line for bench/run.py:
 *   ISA g1 g2 c1 c2 [bf16 b1 b2 bc1 bc2] [amx_bf16 a1 a2 ac1 ac2 amx_int8 i1 i2 ic1 ic2]
 * (ISA avx512|avx2; g = wall, c = per CPU-second x threads; a group when available; int8 in
 * GOP/s). */
#include <cpuid.h>
#include <immintrin.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define ITERS 100000000L

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* r[0] keeps the result live, r[1] = the thread's CPU seconds */
static void thread_cpu(double *r, float sink) {
  struct timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  r[0] = (double)sink;
  r[1] = (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

#define CHAINS(F) F(0) F(1) F(2) F(3) F(4) F(5) F(6) F(7) F(8) F(9) F(10) F(11)

/* The body of every kernel: 12 accumulators a[i] = i, ITERS iterations of STEP(i) on each
 * (a[i] = op(a[i], b, c)), then their sum s.  VEC: the f32 vector type, SET1 and ADD its
 * broadcast and add. */
#define RUN_CHAINS(VEC, SET1, ADD, STEP)                  \
  VEC a[12];                                              \
  for (int i = 0; i < 12; i++) a[i] = SET1((float)i);     \
  for (long n = 0; n < ITERS; n++) {                      \
    CHAINS(STEP)                                          \
  }                                                       \
  VEC s = a[0];                                           \
  for (int i = 1; i < 12; i++) s = ADD(s, a[i]);

__attribute__((target("avx2,fma"))) static void *run256(void *p) {
  __m256 b = _mm256_set1_ps(1.0000001f), c = _mm256_set1_ps(1e-7f);
#define F256(i) a[i] = _mm256_fmadd_ps(a[i], b, c);
  RUN_CHAINS(__m256, _mm256_set1_ps, _mm256_add_ps, F256)
  float out[8];
  _mm256_storeu_ps(out, s);
  thread_cpu(p, out[0]);
  return 0;
}

__attribute__((target("avx512f"))) static void *run512(void *p) {
  __m512 b = _mm512_set1_ps(1.0000001f), c = _mm512_set1_ps(1e-7f);
#define F512(i) a[i] = _mm512_fmadd_ps(a[i], b, c);
  RUN_CHAINS(__m512, _mm512_set1_ps, _mm512_add_ps, F512)
  thread_cpu(p, _mm512_reduce_add_ps(s));
  return 0;
}

/* vdpbf16ps: 32 bf16 products summed pairwise into 16 f32 lanes = 64 FLOP per instruction */
__attribute__((target("avx512f,avx512bf16"))) static void *runbf16(void *p) {
  __m512bh b = (__m512bh)_mm512_set1_epi16(0x3f80), c = b;
#define FBF(i) a[i] = _mm512_dpbf16_ps(a[i], b, c);
  RUN_CHAINS(__m512, _mm512_set1_ps, _mm512_add_ps, FBF)
  thread_cpu(p, _mm512_reduce_add_ps(s));
  return 0;
}

/* AMX: 4 independent accumulator tiles (0-3) += A (tile 4) . B (tile 6), 16 x 64-byte tiles;
 * ITERS / 16 iterations of 4 instructions (one tdpbf16ps is 16 x 16 x 32 x 2 = 16,384 FLOP,
 * one tdpbssd 32,768 OP). */
#define AMX_ITERS (ITERS / 16)
static unsigned char amx_cfg[64] __attribute__((aligned(64)));
static unsigned char amx_src[1024] __attribute__((aligned(64)));

/* run<NAME>: 4 accumulator tiles, ITERS / 16 iterations of 4 INSTR(c, 4, 6); OUT the C type
 * of a stored accumulator. */
#define AMX_RUN(NAME, FEATURES, INSTR, OUT)                                     \
  __attribute__((target(FEATURES))) static void *run##NAME(void *p) {           \
    _tile_loadconfig(amx_cfg);                                                  \
    _tile_zero(0);                                                              \
    _tile_zero(1);                                                              \
    _tile_zero(2);                                                              \
    _tile_zero(3);                                                              \
    _tile_loadd(4, amx_src, 64);                                                \
    _tile_loadd(6, amx_src, 64);                                                \
    for (long n = 0; n < AMX_ITERS; n++) {                                      \
      INSTR(0, 4, 6);                                                           \
      INSTR(1, 4, 6);                                                           \
      INSTR(2, 4, 6);                                                           \
      INSTR(3, 4, 6);                                                           \
    }                                                                           \
    OUT out[256] __attribute__((aligned(64)));                                  \
    _tile_stored(0, out, 64);                                                   \
    _tile_release();                                                            \
    thread_cpu(p, (float)out[0]);                                               \
    return 0;                                                                   \
  }
AMX_RUN(amxbf16, "amx-tile,amx-bf16", _tile_dpbf16ps, float)
AMX_RUN(amxint8, "amx-tile,amx-int8", _tile_dpbssd, int)

/* AMX bits of CPUID.(7,0):EDX (22 bf16, 24 tile, 25 int8) with the OS's tile state in XCR0 and
 * the process's permission granted: 1 bf16, 2 int8, 3 both, 0 none. */
static int amx_ready(void) {
  unsigned a, b, c, d;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d) || !((d >> 24) & 1)) return 0;
  int r = ((d >> 22) & 1) | ((d >> 25) & 1) << 1;
  if (!__get_cpuid(1, &a, &b, &c, &d) || !((c >> 27) & 1)) return 0;
  unsigned lo, hi;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  if ((lo & (3u << 17)) != (3u << 17) || syscall(SYS_arch_prctl, 0x1023, 18) != 0) return 0;
  amx_cfg[0] = 1;
  for (int t = 0; t < 8; t++) amx_cfg[16 + 2 * t] = 64, amx_cfg[48 + t] = 16;
  for (int i = 0; i < 1024; i += 2) amx_src[i + 1] = 0x3f; /* bf16 ~1.0 pairs; int8: 0 and 63 */
  return r;
}

/* GFLOP/s of nt threads running f (flop_it FLOP per iteration), best of 3 by wall time.
 * *per_cpu: the same work over the threads' CPU time x nt (what idle cores would give; the
 * two differ when other processes share the cores). */
static double go(void *(*f)(void *), double flop_it, int nt, double *per_cpu) {
  double best = 0, best_cpu = 0, flop = (double)ITERS * flop_it;
  for (int rep = 0; rep < 3; rep++) {
    pthread_t th[8];
    double r[8][2], cpu = 0, t0 = now();
    for (int i = 0; i < nt; i++) pthread_create(&th[i], 0, f, r[i]);
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
  int gf = argc > 1 && !strcmp(argv[1], "--gflops");
  __builtin_cpu_init();
  int z = __builtin_cpu_supports("avx512f"), bf = z && __builtin_cpu_supports("avx512bf16");
  const char *isa = z ? "avx512" : "avx2";
  double c1, c2, w = z ? 16 : 8, g1 = go(z ? run512 : run256, 12 * w * 2, 1, &c1), g2 = go(z ? run512 : run256, 12 * w * 2, 2, &c2);
  double bc1 = 0, bc2 = 0, b1 = bf ? go(runbf16, 12 * 64, 1, &bc1) : 0, b2 = bf ? go(runbf16, 12 * 64, 2, &bc2) : 0;
  int amx = amx_ready();
  double a[4] = {0}, q[4] = {0}, f_it = 4.0 * 16384 / 16; /* go() counts ITERS iterations */
  if ((amx & 3) == 3) {
    a[0] = go(runamxbf16, f_it, 1, &a[2]), a[1] = go(runamxbf16, f_it, 2, &a[3]);
    q[0] = go(runamxint8, 2 * f_it, 1, &q[2]), q[1] = go(runamxint8, 2 * f_it, 2, &q[3]);
  }
  if (gf) {
    printf("%s %.1f %.1f %.1f %.1f", isa, g1, g2, c1, c2);
    if (bf) printf(" bf16 %.1f %.1f %.1f %.1f", b1, b2, bc1, bc2);
    if ((amx & 3) == 3) printf(" amx_bf16 %.1f %.1f %.1f %.1f amx_int8 %.1f %.1f %.1f %.1f", a[0], a[1], a[2], a[3], q[0], q[1], q[2], q[3]);
    printf("\n");
    return 0;
  }
  printf("%s fp32 FMA 1 thread:  %.1f GFLOP/s wall (%.1f per CPU-second)\n", isa, g1, c1);
  printf("%s fp32 FMA 2 threads: %.1f GFLOP/s wall (%.1f per CPU-second x 2 threads)\n", isa, g2, c2);
  if (bf) {
    printf("avx512_bf16 vdpbf16ps 1 thread:  %.1f GFLOP/s wall (%.1f per CPU-second)\n", b1, bc1);
    printf("avx512_bf16 vdpbf16ps 2 threads: %.1f GFLOP/s wall (%.1f per CPU-second x 2 threads)\n", b2, bc2);
  }
  if ((amx & 3) == 3) {
    printf("amx_bf16 tdpbf16ps 1 thread:  %.1f GFLOP/s wall (%.1f per CPU-second)\n", a[0], a[2]);
    printf("amx_bf16 tdpbf16ps 2 threads: %.1f GFLOP/s wall (%.1f per CPU-second x 2 threads)\n", a[1], a[3]);
    printf("amx_int8 tdpbssd 1 thread:  %.1f GOP/s wall (%.1f per CPU-second)\n", q[0], q[2]);
    printf("amx_int8 tdpbssd 2 threads: %.1f GOP/s wall (%.1f per CPU-second x 2 threads)\n", q[1], q[3]);
  } else
    printf("AMX: not on this CPU (or the OS does not grant the tile state): no AMX rows\n");
  return 0;
}
