/* cnnrun_bench.c — the benchmark command of cnnrun: timed cnnrt_infer calls on synthetic
 * input (img/s, latency, per-shard busy time) and --profile's per-op table; training models
 * are handed to cmd_benchmark_train (cnnrun_train.inc). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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
#endif

/* fp32 AVX2 FMA peak of one core per CPU-second (GFLOP/s; best of 3 x ~30 ms), 0 without AVX2. */
static double measure_peak(void) {
#if defined(__x86_64__) && defined(__GNUC__)
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) return 0;
  double best = 0;
  volatile float sink = 0;
  for (int rep = 0; rep < 3; rep++) {
    struct timespec a, b;
    long iters = 1000000;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &a);
    sink = sink + fma_chains(iters, (float)rep);
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &b);
    double dt = (double)(b.tv_sec - a.tv_sec) + 1e-9 * (double)(b.tv_nsec - a.tv_nsec);
    if (dt > 0 && 160.0 * (double)iters / dt / 1e9 > best) best = 160.0 * (double)iters / dt / 1e9;
  }
  return best;
#else
  return 0;
#endif
}

/* Per-op table of the profiled runs (cnnrt_op_profile_at); shard_busy = each shard's busy
 * seconds over the same runs. */
static void profile_print(const opts *o, cnnrt_model *m, const double *shard_busy, uint64_t mbs) {
  double peak = o->peak > 0 ? o->peak : measure_peak();
  int ns = cnnrt_num_shards(m);
  if (o->json) {
    printf(", \"profile\": {\"peak_gflops_per_core\": %.3f, \"peak_measured\": %s, \"micro_batches\": %llu, \"ops\": [", peak,
           o->peak > 0 ? "false" : "true", (unsigned long long)mbs);
  } else {
    printf("\nprofile: %llu micro-batch%s; peak %.1f GFLOP/s per core (%s)\n", (unsigned long long)mbs, mbs == 1 ? "" : "es",
           peak, o->peak > 0 ? "--peak" : peak > 0 ? "measured now, AVX2 FMA, per CPU-second" : "unknown: no AVX2");
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

int cmd_benchmark(const opts *o) {
  cnnrt_model *m = open_model(o);
  if (cnnrt_is_training(m)) return cmd_benchmark_train(o, m);
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
