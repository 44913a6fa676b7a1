/* cnnrun_bench.c — the benchmark command of cnnrun: timed cnnrt_infer calls on synthetic
 * input (img/s, latency, per-shard busy time) and --profile's per-op table; training models
 * are handed to cmd_benchmark_train (cnnrun_train.inc).  Also inference replicas (--replicas:
 * model instances on core groups, for benchmark and infer) and, under mpirun, one instance per
 * rank (bench_ranks). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cnnrun.h"

double now_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* q-quantile of sorted v[n], linear between ranks. */
static double quantile(const double *v, int n, double q) {
  double pos = q * (n - 1);
  int i = (int)pos;
  return i + 1 < n ? v[i] + (v[i + 1] - v[i]) * (pos - i) : v[n - 1];
}

/* Deterministic synthetic input: u8 in 0..255 or f32 in [-1, 1). */
void synth_input(void *buf, size_t bytes, cnnrt_dtype dt) {
  uint32_t x = 12345;
  if (dt == CNNRT_U8) {
    for (size_t i = 0; i < bytes; i++) ((uint8_t *)buf)[i] = (uint8_t)((x = x * 1664525u + 1013904223u) >> 24);
  } else if (dt == CNNRT_F32) {
    for (size_t i = 0; i < bytes / 4; i++)
      ((float *)buf)[i] = (float)((x = x * 1664525u + 1013904223u) >> 8) / 8388608.0f - 1.0f;
  } else {
    memset(buf, 0, bytes);
  }
}

void print_json_string(const char *s) {
  putchar('"');
  for (; *s; s++) {
    if (*s == '"' || *s == '\\') printf("\\%c", *s);
    else if ((unsigned char)*s < 0x20) printf("\\u%04x", (unsigned char)*s);
    else putchar(*s);
  }
  putchar('"');
}


/* Adds sign * each shard's busy seconds so far to r->busy. */
static void add_busy(cnnrt_model *m, bench_result *r, double sign) {
  for (int s = 0; s < cnnrt_num_shards(m) && s < MAX_SHARDS; s++) {
    cnnrt_shard_summary sh;
    if (cnnrt_shard_info(m, s, &sh) == CNNRT_OK) r->busy[s] += sign * sh.busy_seconds;
  }
}

/* ---- benchmark --profile ---------------------------------------------------------------- */
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
/* iters x 10 independent 8-lane FMA chains: 160 flops per iteration. */
__attribute__((target("avx2,fma"), noinline)) static float fma_chains(long iters, float seed) {
  __m256 b = _mm256_set1_ps(0.9999f), c = _mm256_set1_ps(1e-4f);
  __m256 a0 = _mm256_set1_ps(seed), a1 = _mm256_set1_ps(seed + 1), a2 = _mm256_set1_ps(seed + 2);
  __m256 a3 = _mm256_set1_ps(seed + 3), a4 = _mm256_set1_ps(seed + 4), a5 = _mm256_set1_ps(seed + 5);
  __m256 a6 = _mm256_set1_ps(seed + 6), a7 = _mm256_set1_ps(seed + 7), a8 = _mm256_set1_ps(seed + 8);
  __m256 a9 = _mm256_set1_ps(seed + 9);
  for (long i = 0; i < iters; i++) {
    a0 = _mm256_fmadd_ps(a0, b, c), a1 = _mm256_fmadd_ps(a1, b, c), a2 = _mm256_fmadd_ps(a2, b, c);
    a3 = _mm256_fmadd_ps(a3, b, c), a4 = _mm256_fmadd_ps(a4, b, c), a5 = _mm256_fmadd_ps(a5, b, c);
    a6 = _mm256_fmadd_ps(a6, b, c), a7 = _mm256_fmadd_ps(a7, b, c), a8 = _mm256_fmadd_ps(a8, b, c);
    a9 = _mm256_fmadd_ps(a9, b, c);
  }
  __m256 s = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)),
                           _mm256_add_ps(_mm256_add_ps(a4, a5), _mm256_add_ps(_mm256_add_ps(a6, a7), _mm256_add_ps(a8, a9))));
  float out[8];
  _mm256_storeu_ps(out, s);
  return out[0];
}
/* iters x 12 independent 16-lane FMA chains (2 FMA ports x latency 4 and more): 384 flops per
 * iteration. */
__attribute__((target("avx512f"), noinline)) static float fma_chains512(long iters, float seed) {
  __m512 b = _mm512_set1_ps(0.9999f), c = _mm512_set1_ps(1e-4f);
  __m512 a0 = _mm512_set1_ps(seed), a1 = _mm512_set1_ps(seed + 1), a2 = _mm512_set1_ps(seed + 2);
  __m512 a3 = _mm512_set1_ps(seed + 3), a4 = _mm512_set1_ps(seed + 4), a5 = _mm512_set1_ps(seed + 5);
  __m512 a6 = _mm512_set1_ps(seed + 6), a7 = _mm512_set1_ps(seed + 7), a8 = _mm512_set1_ps(seed + 8);
  __m512 a9 = _mm512_set1_ps(seed + 9), a10 = _mm512_set1_ps(seed + 10), a11 = _mm512_set1_ps(seed + 11);
  for (long i = 0; i < iters; i++) {
    a0 = _mm512_fmadd_ps(a0, b, c), a1 = _mm512_fmadd_ps(a1, b, c), a2 = _mm512_fmadd_ps(a2, b, c);
    a3 = _mm512_fmadd_ps(a3, b, c), a4 = _mm512_fmadd_ps(a4, b, c), a5 = _mm512_fmadd_ps(a5, b, c);
    a6 = _mm512_fmadd_ps(a6, b, c), a7 = _mm512_fmadd_ps(a7, b, c), a8 = _mm512_fmadd_ps(a8, b, c);
    a9 = _mm512_fmadd_ps(a9, b, c), a10 = _mm512_fmadd_ps(a10, b, c), a11 = _mm512_fmadd_ps(a11, b, c);
  }
  __m512 s = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)),
                           _mm512_add_ps(_mm512_add_ps(a4, a5), _mm512_add_ps(a6, a7)));
  s = _mm512_add_ps(s, _mm512_add_ps(_mm512_add_ps(a8, a9), _mm512_add_ps(a10, a11)));
  return _mm512_reduce_add_ps(s);
}
#endif

/* fp32 FMA peak of one core per CPU-second (GFLOP/s; best of 3 x ~30 ms) with the widest
 * vectors the CPU has (AVX-512 where it reports avx512f, else AVX2; *isa names it), 0 without
 * AVX2. */
static double measure_peak(const char **isa) {
  *isa = "no AVX2";
#if defined(__x86_64__) && defined(__GNUC__)
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) return 0;
  int z = __builtin_cpu_supports("avx512f");
  *isa = z ? "AVX-512" : "AVX2";
  double best = 0, flops = z ? 384.0 : 160.0;
  volatile float sink = 0;
  for (int rep = 0; rep < 3; rep++) {
    struct timespec a, b;
    long iters = z ? 500000 : 1000000;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &a);
    sink = sink + (z ? fma_chains512(iters, (float)rep) : fma_chains(iters, (float)rep));
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &b);
    double dt = (double)(b.tv_sec - a.tv_sec) + 1e-9 * (double)(b.tv_nsec - a.tv_nsec);
    if (dt > 0 && flops * (double)iters / dt / 1e9 > best) best = flops * (double)iters / dt / 1e9;
  }
  return best;
#else
  return 0;
#endif
}

/* Per-op table of the profiled runs (cnnrt_op_profile_at); shard_busy = each shard's busy
 * seconds over the same runs. */
static void profile_print(const opts *o, cnnrt_model *m, const double *shard_busy, uint64_t mbs) {
  const char *isa = "--peak";
  double peak = o->peak > 0 ? o->peak : measure_peak(&isa);
  int ns = cnnrt_num_shards(m);
  if (o->json) {
    printf(", \"profile\": {\"peak_gflops_per_core\": %.3f, \"peak_measured\": %s, \"micro_batches\": %llu, \"ops\": [", peak,
           o->peak > 0 ? "false" : "true", (unsigned long long)mbs);
  } else {
    printf("\nprofile: %llu micro-batch%s; peak %.1f GFLOP/s per core (%s%s%s)\n", (unsigned long long)mbs, mbs == 1 ? "" : "es",
           peak, o->peak > 0 ? "--peak" : peak > 0 ? "measured now, " : "unknown: ", o->peak > 0 ? "" : isa,
           o->peak > 0 || peak <= 0 ? "" : " FMA, per CPU-second");
    printf("ms = wall per micro-batch (op start to the barrier after it), GFLOP/s and %%peak by wall time against\n"
           "threads x peak; GF/cpu and %%pk/cpu per CPU-second of the threads inside the kernel; bal = mean/max thread time\n"
           "(profiled runs split every op statically: batch-1 dynamic shares are off while profiling)\n");
    printf("%5s %4s  %-22s %9s %6s %8s %6s %8s %7s %5s  %s\n", "shard", "op", "layer", "ms", "time%", "GFLOP/s", "%peak",
           "GF/cpu", "%pk/cpu", "bal", "kernel");
  }
  int first = 1;
  for (int s = 0; s < ns; s++) {
    cnnrt_shard_summary sh;
    if (cnnrt_shard_info(m, s, &sh) != CNNRT_OK) die("%s", cnnrt_last_error());
    double sum = 0;
    for (int k = 0; k < sh.n_ops; k++) {
      cnnrt_op_profile p;
      if (cnnrt_op_profile_at(m, s, k, &p) != CNNRT_OK) die("%s", cnnrt_last_error());
      sum += p.seconds;
    }
    for (int k = 0; k < sh.n_ops; k++) {
      cnnrt_op_profile p;
      if (cnnrt_op_profile_at(m, s, k, &p) != CNNRT_OK) die("%s", cnnrt_last_error());
      double calls = p.calls ? (double)p.calls : 1.0, fl = p.flops * (double)p.calls;
      double gf = p.seconds > 0 ? fl / p.seconds / 1e9 : 0, gfc = p.cpu_seconds > 0 ? fl / p.cpu_seconds / 1e9 : 0;
      double pk = peak > 0 ? 100 * gf / (peak * sh.threads) : 0, pkc = peak > 0 ? 100 * gfc / peak : 0;
      double bal = p.max_busy_seconds > 0 ? p.busy_seconds / (sh.threads * p.max_busy_seconds) : 0;
      if (o->json) {
        printf("%s{\"shard\": %d, \"op\": %d, \"name\": ", first ? "" : ", ", s, k);
        print_json_string(p.name);
        printf(", \"kernel\": ");
        print_json_string(p.kernel);
        printf(", \"flops\": %.17g, \"calls\": %llu, \"seconds\": %.9f, \"max_busy_seconds\": %.9f, "
               "\"busy_seconds\": %.9f, \"cpu_seconds\": %.9f, \"gflops_per_second\": %.3f, "
               "\"gflops_per_cpu_second\": %.3f}",
               p.flops, (unsigned long long)p.calls, p.seconds, p.max_busy_seconds, p.busy_seconds, p.cpu_seconds, gf, gfc);
        first = 0;
        continue;
      }
      printf("%5d %4d  %-22s %9.3f %5.1f%% %8.2f %5.0f%% %8.2f %6.0f%% %5.2f  %s\n", s, k, p.name, 1e3 * p.seconds / calls,
             sum > 0 ? 100 * p.seconds / sum : 0, gf, pk, gfc, pkc, bal, p.kernel);
    }
    if (!o->json)
      printf("shard %d: ops sum to %.3f ms per micro-batch; the shard entry took %.3f ms per micro-batch\n", s,
             mbs ? 1e3 * sum / (double)mbs : 0, mbs && s < MAX_SHARDS ? 1e3 * shard_busy[s] / (double)mbs : 0);
  }
  if (o->json) printf("]}");
}

static void bench_print(const opts *o, cnnrt_model *m, const bench_result *r) {
  int ns = cnnrt_num_shards(m), b = cnnrt_batch_size(m);
  if (o->json) {
    printf("{\"model\": ");
    print_json_string(cnnrt_model_name(m));
    printf(", \"batch_size\": %d, \"batches_per_run\": %d, \"runs\": %d, \"warmup\": %d, \"shards\": %d, \"threads\": [",
           b, o->batches, o->runs, o->warmup, ns);
    for (int s = 0; s < ns; s++) printf("%s%d", s ? ", " : "", cnnrt_threads(m, s));
    printf("], \"shard_busy\": [");
    for (int s = 0; s < ns && s < MAX_SHARDS; s++) printf("%s%.4f", s ? ", " : "", r->busy[s]);
    printf("], \"pinned\": %s, \"images_per_second\": %.3f, \"gflops_per_second\": %.3f, "
           "\"latency_ms\": {\"mean\": %.4f, \"p50\": %.4f, \"p90\": %.4f, \"min\": %.4f}",
           o->pin ? "true" : "false", r->img_s, r->gflop_s, r->mean, r->p50, r->p90, r->min);
    return;
  }
  printf("model %s: batch %d, %d shard%s, threads", cnnrt_model_name(m), b, ns, ns == 1 ? "" : "s");
  for (int s = 0; s < ns; s++) printf("%s%d", s ? "," : " ", cnnrt_threads(m, s));
  printf("%s\n", o->pin ? " (pinned)" : "");
  printf("%d runs of %d batches (%d warm-up run%s dropped), %.3f s\n", o->runs, o->batches, o->warmup,
         o->warmup == 1 ? "" : "s", r->total);
  printf("throughput  %.2f img/s  (%.2f GFLOP/s)\n", r->img_s, r->gflop_s);
  printf("latency per batch  mean %.3f ms  p50 %.3f ms  p90 %.3f ms  min %.3f ms\n", r->mean, r->p50, r->p90, r->min);
  printf("(run time / batches per run; with --batches 1 this is the end-to-end latency)\n");
  printf("shards busy");
  for (int s = 0; s < ns && s < MAX_SHARDS; s++) printf(" %s%.0f%%", s ? "/ " : "", 100 * r->busy[s]);
  printf(" of the time\n");
}

/* Untimed warm-up calls, then timed calls until o->runs of them and o->seconds have passed.
 * Returns the number of timed calls; *ms (malloc'd) receives each one's ms per batch. */
int bench_calls(const opts *o, cnnrt_model *m, bench_result *r, double **ms, int (*call)(cnnrt_model *, void *),
                       void *ctx) {
  int cap = o->runs, n = 0;
  *ms = malloc((size_t)cap * sizeof **ms);
  if (!*ms) die("out of memory");
  for (int i = 0; i < o->warmup; i++)
    if (call(m, ctx) != CNNRT_OK) die("%s", cnnrt_last_error());
  add_busy(m, r, -1); /* what ran before the timed calls */
  if (o->profile && cnnrt_profile_begin(m) != CNNRT_OK) die("%s", cnnrt_last_error());
  struct timespec c0, c1;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c0);
  while (n < o->runs || r->total < o->seconds) {
    if (n == cap) {
      if (cap >= 1 << 24) { /* 16.7M timed calls: --seconds is not reached, say so */
        fprintf(stderr, "cnnrun: benchmark: stopped after %d calls (%.3f s of --seconds %g)\n", n, r->total, o->seconds);
        break;
      }
      double *p = realloc(*ms, (size_t)(cap *= 2) * sizeof **ms);
      if (!p) die("out of memory");
      *ms = p;
    }
    double t0 = now_seconds();
    if (call(m, ctx) != CNNRT_OK) die("%s", cnnrt_last_error());
    double dt = now_seconds() - t0;
    (*ms)[n++] = dt * 1e3 / o->batches;
    r->total += dt;
  }
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c1);
  r->cpu = (double)(c1.tv_sec - c0.tv_sec) + 1e-9 * (double)(c1.tv_nsec - c0.tv_nsec);
  add_busy(m, r, 1);
  return n;
}

/* mean, p50, p90, min of ms[n] (sorted in place). */
void bench_stats(bench_result *r, double *ms, int n) {
  qsort(ms, (size_t)n, sizeof *ms, cmp_double);
  for (int i = 0; i < n; i++) r->mean += ms[i] / n;
  r->p50 = quantile(ms, n, 0.5);
  r->p90 = quantile(ms, n, 0.9);
  r->min = ms[0];
}

typedef struct infer_ctx {
  const opts *o;
  void *in, *out;
  size_t in_bytes, out_bytes;
} infer_ctx;

static int infer_call(cnnrt_model *m, void *p) {
  infer_ctx *c = p;
  return cnnrt_infer(m, c->in, c->in_bytes, c->out, c->out_bytes, c->o->batches);
}

/* ---- inference replicas ----------------------------------------------------------------- */
typedef struct par_arg {
  void (*fn)(int, void *);
  void *ctx;
  int i;
} par_arg;
static void *par_main(void *p) {
  par_arg *a = p;
  a->fn(a->i, a->ctx);
  return NULL;
}

void run_parallel(int n, void (*fn)(int, void *), void *ctx) {
  pthread_t *t = calloc((size_t)n, sizeof *t);
  par_arg *a = calloc((size_t)n, sizeof *a);
  if (!t || !a) die("out of memory for %d threads", n);
  for (int i = 0; i < n; i++) {
    a[i] = (par_arg){fn, ctx, i};
    int e = pthread_create(&t[i], NULL, par_main, &a[i]);
    if (e) die("cannot start a replica thread: %s", strerror(e));
  }
  for (int i = 0; i < n; i++) pthread_join(t[i], NULL);
  free(t);
  free(a);
}

/* The CPUs this process may run on, in order, into cpus (CPU_SETSIZE entries); their count. */
static int usable_cpus(int *cpus) {
  cpu_set_t set;
  int n = 0;
  if (sched_getaffinity(0, sizeof set, &set) != 0) die("cannot read this process's cpu affinity");
  for (int c = 0; c < CPU_SETSIZE; c++)
    if (CPU_ISSET(c, &set)) cpus[n++] = c;
  return n;
}

/* Core group i of R over n cpus: [first, first + size). */
static void core_group(int i, int R, int n, int *first, int *size) {
  *first = (int)((int64_t)n * i / R);
  *size = (int)((int64_t)n * (i + 1) / R) - *first;
  if (*size < 1) *first = i % n, *size = 1; /* more replicas than cpus: they share */
}

void open_replicas(const opts *o, cnnrt_model **ms) {
  static int cpus[CPU_SETSIZE];
  int R = o->replicas > 1 ? o->replicas : 1, n = usable_cpus(cpus);
  opts one = *o;
  one.pin = 0, one.trace = NULL; /* pinning per core group below */
  for (int i = 0; i < R; i++) {
    ms[i] = open_model(&one);
    if (cnnrt_is_training(ms[i])) {
      fprintf(stderr, "cnnrun: --replicas: %s is a training model; its replicas are compiled in (cnnc --replicas)\n", o->model);
      exit(EXIT_USAGE);
    }
    int first, size, ns = cnnrt_num_shards(ms[i]), at = 0;
    core_group(i, R, n, &first, &size);
    for (int s = 0; s < ns; s++) {
      int t = o->n_threads ? o->threads[o->n_threads == 1 ? 0 : s] : size / ns > 1 ? size / ns : 1, pin[1024];
      if (!o->n_threads && cnnrt_set_threads(ms[i], s, t) != CNNRT_OK) die("%s", cnnrt_last_error());
      if (!o->pin) continue;
      for (int k = 0; k < t && k < 1024; k++) pin[k] = cpus[first + (at + k) % size];
      at += t;
      if (cnnrt_set_cpus(ms[i], s, pin, t < 1024 ? t : 1024) != CNNRT_OK) die("%s", cnnrt_last_error());
    }
  }
}

typedef struct rep_bench {
  const opts *o;
  cnnrt_model **ms;
  void *in;
  void **out;
  size_t in_bytes, out_bytes;
  pthread_barrier_t start;
  double t0;         /* the timed calls' start (after every replica's warm-up) */
  double *ms_call;   /* [replica * cap + call] */
  int cap, *n, *failed;
  char (*err)[512];  /* per replica: the runtime's message (thread-local) when a call failed */
  double *end;       /* per replica: when its last timed call ended */
} rep_bench;

static void rep_bench_main(int i, void *p) {
  rep_bench *b = p;
  const opts *o = b->o;
  for (int w = 0; w < o->warmup && !b->failed[i]; w++)
    b->failed[i] = cnnrt_infer(b->ms[i], b->in, b->in_bytes, b->out[i], b->out_bytes, o->batches) != CNNRT_OK;
  if (pthread_barrier_wait(&b->start) == PTHREAD_BARRIER_SERIAL_THREAD) b->t0 = now_seconds();
  pthread_barrier_wait(&b->start); /* t0 is set */
  double t = b->t0;
  while (!b->failed[i] && b->n[i] < b->cap && (b->n[i] < o->runs || t - b->t0 < o->seconds)) {
    double c0 = now_seconds();
    b->failed[i] = cnnrt_infer(b->ms[i], b->in, b->in_bytes, b->out[i], b->out_bytes, o->batches) != CNNRT_OK;
    t = now_seconds();
    b->ms_call[(size_t)i * (size_t)b->cap + (size_t)b->n[i]++] = (t - c0) * 1e3 / o->batches;
  }
  b->end[i] = t;
  if (b->failed[i]) snprintf(b->err[i], sizeof b->err[i], "%s", cnnrt_last_error());
}

/* benchmark --replicas R: every instance runs its warm-up, then all start together and make
 * timed calls (--runs each, until --seconds); img/s = every replica's images / the wall time
 * from the common start to the last one's end. */
static int bench_replicas(const opts *o) {
  int R = o->replicas;
  cnnrt_model *ms[1024];
  open_replicas(o, ms);
  rep_bench b = {.o = o, .ms = ms, .in_bytes = cnnrt_input_bytes(ms[0]) * (size_t)o->batches,
                 .out_bytes = cnnrt_output_bytes(ms[0]) * (size_t)o->batches};
  cnnrt_tensor_info t;
  cnnrt_input_info(ms[0], &t);
  b.cap = o->seconds > 0 && o->runs < 1 << 16 ? 1 << 16 : o->runs;
  b.err = calloc((size_t)R, sizeof *b.err);
  b.in = malloc(b.in_bytes), b.out = calloc((size_t)R, sizeof *b.out), b.n = calloc((size_t)R, sizeof *b.n);
  b.failed = calloc((size_t)R, sizeof *b.failed), b.end = calloc((size_t)R, sizeof *b.end);
  b.ms_call = malloc((size_t)R * (size_t)b.cap * sizeof *b.ms_call);
  if (!b.in || !b.out || !b.n || !b.failed || !b.end || !b.ms_call || !b.err) die("out of memory for %d replicas", R);
  for (int i = 0; i < R; i++)
    if (!(b.out[i] = malloc(b.out_bytes))) die("out of memory for %d replicas", R);
  synth_input(b.in, b.in_bytes, t.dtype);
  pthread_barrier_init(&b.start, NULL, (unsigned)R);
  run_parallel(R, rep_bench_main, &b);
  pthread_barrier_destroy(&b.start);
  double wall = 0, *all = malloc((size_t)R * (size_t)b.cap * sizeof *all);
  int n = 0, bs = cnnrt_batch_size(ms[0]);
  if (!all) die("out of memory");
  for (int i = 0; i < R; i++) {
    if (b.failed[i]) die("replica %d: %s", i, b.err[i]);
    if (b.end[i] - b.t0 > wall) wall = b.end[i] - b.t0;
    for (int k = 0; k < b.n[i]; k++) all[n++] = b.ms_call[(size_t)i * (size_t)b.cap + (size_t)k];
  }
  bench_result r = {0};
  r.total = wall;
  bench_stats(&r, all, n);
  double batches = (double)n * o->batches;
  r.img_s = batches * bs / wall;
  r.gflop_s = batches * cnnrt_model_flops(ms[0]) / wall / 1e9;
  int ns = cnnrt_num_shards(ms[0]);
  static int cpus[CPU_SETSIZE];
  int nc = usable_cpus(cpus);
  if (o->json) {
    printf("{\"model\": ");
    print_json_string(cnnrt_model_name(ms[0]));
    printf(", \"batch_size\": %d, \"batches_per_run\": %d, \"runs\": %d, \"warmup\": %d, \"shards\": %d, \"replicas\": %d, "
           "\"pinned\": %s, \"images_per_second\": %.3f, \"gflops_per_second\": %.3f, "
           "\"latency_ms\": {\"mean\": %.4f, \"p50\": %.4f, \"p90\": %.4f, \"min\": %.4f}, \"replica\": [",
           bs, o->batches, o->runs, o->warmup, ns, R, o->pin ? "true" : "false", r.img_s, r.gflop_s, r.mean, r.p50, r.p90, r.min);
    for (int i = 0; i < R; i++) {
      int first, size;
      core_group(i, R, nc, &first, &size);
      printf("%s{\"cores\": [", i ? ", " : "");
      for (int k = 0; k < size; k++) printf("%s%d", k ? ", " : "", cpus[first + k]);
      printf("], \"threads\": [");
      for (int s = 0; s < ns; s++) printf("%s%d", s ? ", " : "", cnnrt_threads(ms[i], s));
      printf("], \"runs\": %d, \"images_per_second\": %.3f}", b.n[i], (double)b.n[i] * o->batches * bs / (b.end[i] - b.t0));
    }
    printf("]}\n");
  } else {
    printf("model %s: batch %d, %d shard%s, %d replicas (model instances) on core groups%s\n", cnnrt_model_name(ms[0]), bs, ns,
           ns == 1 ? "" : "s", R, o->pin ? " (pinned)" : "");
    for (int i = 0; i < R; i++) {
      int first, size;
      core_group(i, R, nc, &first, &size);
      printf("  replica %d: cores", i);
      for (int k = 0; k < size; k++) printf("%s%d", k ? "," : " ", cpus[first + k]);
      printf(", threads");
      for (int s = 0; s < ns; s++) printf("%s%d", s ? "," : " ", cnnrt_threads(ms[i], s));
      printf(", %d runs, %.2f img/s\n", b.n[i], (double)b.n[i] * o->batches * bs / (b.end[i] - b.t0));
    }
    printf("%d runs of %d batches over %d replicas (%d warm-up run%s each dropped), %.3f s\n", n, o->batches, R, o->warmup,
           o->warmup == 1 ? "" : "s", wall);
    printf("throughput  %.2f img/s  (%.2f GFLOP/s), every replica together\n", r.img_s, r.gflop_s);
    printf("latency per batch  mean %.3f ms  p50 %.3f ms  p90 %.3f ms  min %.3f ms (every replica's calls)\n", r.mean, r.p50,
           r.p90, r.min);
  }
  for (int i = 0; i < R; i++) free(b.out[i]), cnnrt_close(ms[i]);
  free(b.in), free(b.out), free(b.n), free(b.failed), free(b.end), free(b.ms_call), free(b.err), free(all);
  return 0;
}

/* ---- inference over MPI ranks ----------------------------------------------------------------
 * benchmark under mpirun: every rank runs one model instance (its threads: --threads, else the
 * runtime's default on the cores mpirun gave the rank), its warm-up, then a barrier and timed
 * calls (--runs each, until --seconds).  Rank 0 reports img/s = every rank's images / the
 * longest rank's time from the barrier, and the latencies of every rank's calls. */
typedef struct rank_row {
  double secs;
  int64_t calls;
  int32_t threads[8], shards;
  char host[64];
} rank_row;

static int bench_ranks(const opts *o, cnnrt_model *m) {
  const cnnrt_comm *cm = dist_comm_get();
  int N = cm->size, me = cm->rank, bs = cnnrt_batch_size(m), ns = cnnrt_num_shards(m);
  size_t in_bytes = cnnrt_input_bytes(m) * (size_t)o->batches, out_bytes = cnnrt_output_bytes(m) * (size_t)o->batches;
  int cap = o->seconds > 0 && o->runs < 1 << 16 ? 1 << 16 : o->runs;
  void *in = malloc(in_bytes), *out = malloc(out_bytes);
  double *ms = malloc((size_t)cap * sizeof *ms);
  rank_row mine = {0}, *rows = calloc((size_t)N, sizeof *rows);
  if (!in || !out || !ms || !rows) die("out of memory for %d batches", o->batches);
  cnnrt_tensor_info t;
  cnnrt_input_info(m, &t);
  synth_input(in, in_bytes, t.dtype);
  for (int w = 0; w < o->warmup; w++)
    if (cnnrt_infer(m, in, in_bytes, out, out_bytes, o->batches) != CNNRT_OK) die("%s", cnnrt_last_error());
  if (cm->barrier(cm->ctx)) die("benchmark: the ranks' start: %s", cm->last_error(cm->ctx));
  double t0 = now_seconds(), t1 = t0;
  int n = 0;
  while (n < cap && (n < o->runs || t1 - t0 < o->seconds)) {
    double c0 = now_seconds();
    if (cnnrt_infer(m, in, in_bytes, out, out_bytes, o->batches) != CNNRT_OK) die("%s", cnnrt_last_error());
    t1 = now_seconds();
    ms[n++] = (t1 - c0) * 1e3 / o->batches;
  }
  mine.secs = t1 - t0, mine.calls = n, mine.shards = ns;
  for (int s = 0; s < ns && s < 8; s++) mine.threads[s] = cnnrt_threads(m, s);
  if (gethostname(mine.host, sizeof mine.host - 1)) snprintf(mine.host, sizeof mine.host, "?");
  if (cm->allgather(cm->ctx, &mine, sizeof mine, rows)) die("benchmark: gathering the ranks' times: %s", cm->last_error(cm->ctx));
  int64_t total = 0;
  double wall = 0;
  for (int r = 0; r < N; r++) total += rows[r].calls, wall = rows[r].secs > wall ? rows[r].secs : wall;
  if (me > 0) { /* rank 0 gathers the latencies */
    if (cm->send(cm->ctx, ms, (size_t)n * sizeof *ms, 0)) die("benchmark: sending the latencies: %s", cm->last_error(cm->ctx));
    free(in), free(out), free(ms), free(rows);
    return 0;
  }
  double *all = malloc((size_t)total * sizeof *all);
  if (!all) die("out of memory for %lld latencies", (long long)total);
  memcpy(all, ms, (size_t)n * sizeof *ms);
  for (int64_t r = 1, at = n; r < N; at += rows[r++].calls)
    if (cm->recv(cm->ctx, all + at, (size_t)rows[r].calls * sizeof *all, (int)r))
      die("benchmark: the latencies of rank %lld: %s", (long long)r, cm->last_error(cm->ctx));
  bench_result res = {0};
  res.total = wall;
  bench_stats(&res, all, (int)total);
  double batches = (double)total * o->batches;
  res.img_s = batches * bs / wall;
  res.gflop_s = batches * cnnrt_model_flops(m) / wall / 1e9;
  if (o->json) {
    printf("{\"model\": ");
    print_json_string(cnnrt_model_name(m));
    printf(", \"batch_size\": %d, \"batches_per_run\": %d, \"runs\": %d, \"warmup\": %d, \"shards\": %d, \"ranks\": %d, "
           "\"images_per_second\": %.3f, \"gflops_per_second\": %.3f, "
           "\"latency_ms\": {\"mean\": %.4f, \"p50\": %.4f, \"p90\": %.4f, \"min\": %.4f}, \"rank\": [",
           bs, o->batches, o->runs, o->warmup, ns, N, res.img_s, res.gflop_s, res.mean, res.p50, res.p90, res.min);
    for (int r = 0; r < N; r++) {
      printf("%s{\"host\": ", r ? ", " : "");
      print_json_string(rows[r].host);
      printf(", \"threads\": [");
      for (int s = 0; s < rows[r].shards && s < 8; s++) printf("%s%d", s ? ", " : "", rows[r].threads[s]);
      printf("], \"runs\": %lld, \"seconds\": %.6f, \"images_per_second\": %.3f}", (long long)rows[r].calls, rows[r].secs,
             (double)rows[r].calls * o->batches * bs / rows[r].secs);
    }
    printf("]}\n");
  } else {
    printf("model %s: batch %d, %d shard%s, %d ranks (mpirun; one model instance each)\n", cnnrt_model_name(m), bs, ns,
           ns == 1 ? "" : "s", N);
    for (int r = 0; r < N; r++) {
      printf("  rank %d: host %s, threads", r, rows[r].host);
      for (int s = 0; s < rows[r].shards && s < 8; s++) printf("%s%d", s ? "," : " ", rows[r].threads[s]);
      printf(", %lld runs in %.3f s, %.2f img/s\n", (long long)rows[r].calls, rows[r].secs,
             (double)rows[r].calls * o->batches * bs / rows[r].secs);
    }
    printf("%lld runs of %d batches over %d ranks (%d warm-up run%s each dropped), %.3f s\n", (long long)total, o->batches, N,
           o->warmup, o->warmup == 1 ? "" : "s", wall);
    printf("throughput  %.2f img/s  (%.2f GFLOP/s), every rank together\n", res.img_s, res.gflop_s);
    printf("latency per batch  mean %.3f ms  p50 %.3f ms  p90 %.3f ms  min %.3f ms (every rank's calls)\n", res.mean, res.p50,
           res.p90, res.min);
  }
  free(in), free(out), free(ms), free(rows), free(all);
  return 0;
}

int cmd_benchmark(const opts *o) {
  cnnrt_model *m = open_model(o);
  if (dist_comm_get()) { /* under mpirun */
    if (cnnrt_is_training(m)) die("benchmark under mpirun: %s is a training model; train it across ranks with "
                                        "`mpirun ... cnnrun X.so train`", o->model);
    if (o->replicas > 1 || o->profile)
      die("benchmark under mpirun: every rank is one model instance; --replicas and --profile are for one process");
    int rc = bench_ranks(o, m);
    close_model(o, m);
    return rc;
  }
  if (cnnrt_is_training(m) && o->replicas > 1) {
    fprintf(stderr, "cnnrun: --replicas: %s is a training model; its replicas are compiled in (cnnc --replicas)\n", o->model);
    exit(EXIT_USAGE);
  }
  if (cnnrt_is_training(m)) return cmd_benchmark_train(o, m);
  if (o->replicas > 1 && !o->lr_set) {
    cnnrt_close(m);
    return bench_replicas(o);
  }
  if (o->lr_set) {
    fprintf(stderr, "cnnrun: benchmark: --lr applies to training models; %s was compiled for inference\n", o->model);
    exit(EXIT_USAGE);
  }
  infer_ctx c = {o, NULL, NULL, cnnrt_input_bytes(m) * (size_t)o->batches, cnnrt_output_bytes(m) * (size_t)o->batches};
  cnnrt_tensor_info t;
  cnnrt_input_info(m, &t);
  c.in = malloc(c.in_bytes), c.out = malloc(c.out_bytes);
  if (!c.in || !c.out) die("out of memory for %d batches", o->batches);
  synth_input(c.in, c.in_bytes, t.dtype);
  bench_result r = {0};
  double *ms;
  opts oo = *o;
  oo.runs = bench_calls(o, m, &r, &ms, infer_call, &c);
  double busy_s[MAX_SHARDS];
  memcpy(busy_s, r.busy, sizeof busy_s);
  if (o->profile && cnnrt_profile_end(m) != CNNRT_OK) die("%s", cnnrt_last_error());
  for (int s = 0; s < cnnrt_num_shards(m) && s < MAX_SHARDS; s++) r.busy[s] /= r.total;
  bench_stats(&r, ms, oo.runs);
  double batches = (double)oo.runs * o->batches;
  r.img_s = batches * cnnrt_batch_size(m) / r.total;
  r.gflop_s = batches * cnnrt_model_flops(m) / r.total / 1e9;
  bench_print(&oo, m, &r);
  if (o->profile) profile_print(o, m, busy_s, (uint64_t)oo.runs * (uint64_t)o->batches);
  if (o->json) printf("}\n");
  free(c.in);
  free(c.out);
  free(ms);
  close_model(o, m);
  return 0;
}
