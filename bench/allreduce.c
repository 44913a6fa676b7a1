/* allreduce.c — the gradient exchange of data-parallel training (docs/mpi.md, docs/scaling.md)
 * on its own, timed per message size under mpirun:
 *
 *   mpirun --allow-run-as-root --oversubscribe -np 2 build/bench_allreduce [--reps N] [--max-mib M]
 *
 * Per size S (bytes of gradients per rank: 4 KiB, 16 KiB, ... powers of 4, then 128 MiB):
 *   allgather  what cnnc does per update: the cnnrt_comm allgather of libcnnrt_mpi (MPI_Allgather
 *              of S bytes per rank into N*S bytes, on its MPI_COMM_WORLD duplicate), called through
 *              the cnnrt_comm that cnnrt_mpi_init fills, exactly as rt_dist.c calls it;
 *   +sum       the same plus what the compiled update stage then does with it, as a reference cost:
 *              summing the N float slices in rank order into one (one pass, single thread);
 *   allreduce  reference: MPI_Allreduce(MPI_FLOAT, MPI_SUM) of S bytes on MPI_COMM_WORLD (the
 *              implementation's algorithm; its summation order is not fixed, so cnnc does not use it).
 * Each is the median (and min) over N repetitions, each repetition started after an MPI_Barrier;
 * a repetition's time is the maximum over the ranks (MPI_Allreduce MAX of the local times).
 * Rank 0 prints a table and then one JSON line.  Bandwidths: "algbw" = S / t; "busbw" as
 * nccl-tests: allgather (N-1)/N * N*S / t, allreduce 2(N-1)/N * S / t. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cnnrt_mpi.h"

static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

typedef struct {
  double med, min;
} stat;

static stat stats(double *t, int n) {
  qsort(t, (size_t)n, sizeof *t, cmp_d);
  stat s = {n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]), t[0]};
  return s;
}

int main(int argc, char **argv) {
  cnnrt_comm c;
  char err[512];
  if (cnnrt_mpi_init(&argc, &argv, &c, err, sizeof err)) {
    fprintf(stderr, "bench_allreduce: %s\n", err);
    return 1;
  }
  int reps = 21, max_mib = 128;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--max-mib") && i + 1 < argc) max_mib = atoi(argv[++i]);
    else {
      if (c.rank == 0) fprintf(stderr, "usage: mpirun -np N bench_allreduce [--reps N] [--max-mib M]\n");
      cnnrt_mpi_finalize();
      return 2;
    }
  }
  if (reps < 1) reps = 1;
  size_t sizes[16];
  int ns = 0;
  for (size_t s = 4096; s <= (size_t)max_mib << 20 && ns < 15; s *= 4) sizes[ns++] = s;
  if (((size_t)max_mib << 20) > sizes[ns - 1]) sizes[ns++] = (size_t)max_mib << 20;
  size_t maxb = sizes[ns - 1];
  int n = c.size;
  float *send = malloc(maxb), *all = malloc(maxb * (size_t)n), *red = malloc(maxb), *sum = malloc(maxb);
  double *t = malloc(3 * (size_t)reps * sizeof *t);
  if (!send || !all || !red || !sum || !t) {
    fprintf(stderr, "bench_allreduce: out of memory for %zu MiB\n", maxb >> 20);
    cnnrt_mpi_abort(1);
  }
  for (size_t i = 0; i < maxb / sizeof(float); i++) send[i] = (float)(i % 1000) * 1e-3f + (float)c.rank;
  memset(all, 0, maxb * (size_t)n), memset(red, 0, maxb), memset(sum, 0, maxb);
  if (c.rank == 0) {
    char host[MPI_MAX_PROCESSOR_NAME];
    int hl = 0;
    MPI_Get_processor_name(host, &hl);
    printf("# %d ranks on %s, median (min) of %d repetitions, time = slowest rank\n", n, host, reps);
    printf("%10s  %12s %12s  %12s %12s  %12s %12s  %9s %9s\n", "bytes/rank", "allgather_us", "(min)", "+sum_us", "(min)",
           "allreduce_us", "(min)", "ag_busGB/s", "ar_busGB/s");
  }
  stat res[16][3];
  for (int k = 0; k < ns; k++) {
    size_t b = sizes[k], nf = b / sizeof(float);
    int r = reps;
    for (int rep = -2; rep < r; rep++) { /* 2 warm-up repetitions */
      double tt[3];
      MPI_Barrier(MPI_COMM_WORLD);
      double t0 = MPI_Wtime();
      if (c.allgather(c.ctx, send, b, all)) {
        fprintf(stderr, "bench_allreduce: %s\n", c.last_error(c.ctx));
        cnnrt_mpi_abort(1);
      }
      tt[0] = MPI_Wtime() - t0;
      MPI_Barrier(MPI_COMM_WORLD);
      t0 = MPI_Wtime();
      c.allgather(c.ctx, send, b, all);
      for (size_t i = 0; i < nf; i++) {
        float v = all[i];
        for (int q = 1; q < n; q++) v += all[(size_t)q * nf + i];
        sum[i] = v;
      }
      tt[1] = MPI_Wtime() - t0;
      MPI_Barrier(MPI_COMM_WORLD);
      t0 = MPI_Wtime();
      MPI_Allreduce(send, red, (int)nf, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      tt[2] = MPI_Wtime() - t0;
      double mx[3];
      MPI_Allreduce(tt, mx, 3, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
      if (rep >= 0)
        for (int j = 0; j < 3; j++) t[j * reps + rep] = mx[j];
    }
    for (int j = 0; j < 3; j++) res[k][j] = stats(t + j * reps, r);
    if (c.rank == 0) {
      double ag_bus = (double)(n - 1) * (double)b / res[k][0].med / 1e9;
      double ar_bus = 2.0 * (n - 1) / n * (double)b / res[k][2].med / 1e9;
      printf("%10zu  %12.1f %12.1f  %12.1f %12.1f  %12.1f %12.1f  %9.2f %9.2f\n", b, res[k][0].med * 1e6, res[k][0].min * 1e6,
             res[k][1].med * 1e6, res[k][1].min * 1e6, res[k][2].med * 1e6, res[k][2].min * 1e6, ag_bus, ar_bus);
      fflush(stdout);
    }
  }
  if (c.rank == 0) {
    printf("{\"ranks\": %d, \"reps\": %d, \"rows\": [", n, reps);
    for (int k = 0; k < ns; k++)
      printf("%s{\"bytes\": %zu, \"allgather_us\": %.2f, \"allgather_sum_us\": %.2f, \"allreduce_us\": %.2f, "
             "\"allgather_min_us\": %.2f, \"allreduce_min_us\": %.2f}",
             k ? ", " : "", sizes[k], res[k][0].med * 1e6, res[k][1].med * 1e6, res[k][2].med * 1e6, res[k][0].min * 1e6,
             res[k][2].min * 1e6);
    printf("]}\n");
  }
  free(send), free(all), free(red), free(sum), free(t);
  cnnrt_mpi_finalize();
  return 0;
}
