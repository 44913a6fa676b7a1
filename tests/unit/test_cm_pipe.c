/* test_cm_pipe.c — common/cm_pipe.c, the job lists of one pipelined training update and the
 * frames they need: for shard counts 1-4, accumulation 1-9, replicas 1-3, every schedule,
 * shared and parallel replicas, cnnc's stage layout (forwards s0..s(S-1), backwards
 * s(S-1)..s0) and one whose last stage is not on shard 0: every (micro-batch, stage) once,
 * frames in flight = the schedule's bound on cnnc's layout (sequential 1, else min(N x R, 2S)
 * per pool), the lists run to the end with them, a micro-batch keeps one frame and its stages
 * follow one another on it, micro-batch i of a stream on frame i % B, and every stage sees a
 * replica's micro-batches in index order (what makes the accumulation bitwise that of one
 * frame per micro-batch); a frame count too small for the lists is detected (deadlock). */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "common/cm.h"

static void check_case(const cm_pipe *p, int cnnc_layout) {
  int P = p->P, N = p->N, R = p->R, S = p->S, par = p->par && R > 1;
  int stream = par ? N : N * R, B = cm_pipe_frames(p);
  int want = p->schedule == 0 || p->F == 0 ? 1 : 2 * S < stream ? 2 * S : stream;
  const char *sn[3] = {"sequential", "grouped", "interleaved"};
  char c[128];
  snprintf(c, sizeof c, "S %d N %d R %d %s%s P %d F %d", S, N, R, sn[p->schedule], par ? " parallel" : "", P, p->F);
  CHECK(B >= 1 && B <= stream, "frames %d: %s", B, c);
  if (cnnc_layout) CHECK(B == want, "frames %d, want %d: %s", B, want, c);
  CHECK(cm_pipe_runs(p, B) == 1, "the lists do not run with %d frames: %s", B, c);
  CHECK(cm_pipe_pools(p) == (par ? R : 1), "pools: %s", c);
  long n = cm_pipe_jobs(p, B, NULL);
  CHECK(n == (long)R * N * P, "%ld jobs: %s", n, c);
  cm_pjob *j = calloc((size_t)n, sizeof *j);
  int *seen = calloc((size_t)R * N * P, sizeof *seen), *frame = calloc((size_t)R * N, sizeof *frame);
  int *last = calloc((size_t)R * P * (par ? R : 1) * S + 1, sizeof *last);
  if (!j || !seen || !frame || !last) abort();
  CHECK(cm_pipe_jobs(p, B, j) == n, "second count: %s", c);
  for (int i = 0; i < R * N; i++) frame[i] = -1;
  for (int i = 0; i < R * P * (par ? R : 1) * S + 1; i++) last[i] = -1;
  int bad_once = 0, bad_frame = 0, bad_order = 0, bad_group = 0;
  for (long i = 0; i < n; i++) {
    const cm_pjob *x = &j[i];
    int r = x->mb / N, a = x->mb % N, si = par ? a : x->mb;
    bad_once += x->mb < 0 || x->mb >= R * N || x->stage < 0 || x->stage >= P || seen[x->mb * P + x->stage]++;
    bad_group += x->group != (par ? r : 0) * S + p->group[x->stage];
    if (frame[x->mb] < 0) frame[x->mb] = x->frame;
    bad_frame += x->frame != frame[x->mb] || x->frame != (par ? r * B : 0) + si % B || x->seq != (si / B) * P + x->stage;
    /* stage k of replica r on its group: micro-batches in increasing index */
    int *l = &last[r * P + x->stage];
    bad_order += *l >= a;
    *l = a;
  }
  CHECK(!bad_once, "%d jobs repeated or out of range: %s", bad_once, c);
  CHECK(!bad_group, "%d jobs on the wrong thread group: %s", bad_group, c);
  CHECK(!bad_frame, "%d jobs with a frame or seq off the rule: %s", bad_frame, c);
  CHECK(!bad_order, "%d jobs see a replica's micro-batches out of order: %s", bad_order, c);
  free(j), free(seen), free(frame), free(last);
}

int main(void) {
  int group[16];
  for (int S = 1; S <= 4; S++)
    for (int odd = 0; odd < 2; odd++) {
      int P = 2 * S;
      for (int k = 0; k < S; k++) group[k] = k, group[S + k] = S - 1 - k; /* cnnc: fwd s0.., bwd ..s0 */
      if (odd) {
        if (S == 1) continue;
        for (int k = 0; k < S; k++) group[S + k] = k; /* backwards s0..s(S-1): the last on s(S-1) */
      }
      for (int N = 1; N <= 9; N++)
        for (int R = 1; R <= 3; R++)
          for (int sched = 0; sched < 3; sched++)
            for (int par = 0; par < 2; par++)
              for (int F = S; F >= 0; F -= S) { /* F = 0: the split unknown, sequential */
                cm_pipe p = {.P = P, .F = F, .S = S, .N = N, .R = R, .group = group, .schedule = sched, .par = par};
                check_case(&p, !odd);
              }
    }
  /* grouped on one shard, 4 micro-batches in chunks of 2: with 1 frame the second forward waits
   * for the first micro-batch's backward, which comes after it (deadlock); 2 frames run */
  int g1[2] = {0, 0};
  cm_pipe p = {.P = 2, .F = 1, .S = 1, .N = 4, .R = 1, .group = g1, .schedule = 1};
  CHECK(cm_pipe_runs(&p, 1) == 0, "grouped, 1 shard, 1 frame: the deadlock is not seen");
  CHECK(cm_pipe_runs(&p, 2) == 1 && cm_pipe_frames(&p) == 2, "grouped, 1 shard: 2 frames");
  /* malformed */
  cm_pipe z = {.P = 0, .S = 1, .N = 1, .R = 1, .group = g1};
  CHECK(cm_pipe_frames(&z) == 0 && cm_pipe_jobs(&z, 1, NULL) == 0, "no stages: not planned");
  cm_pipe big = {.P = 65536, .F = 1, .S = 1, .N = 65536, .R = 4096, .group = g1};
  CHECK(cm_pipe_frames(&big) == 0, "2^44 jobs: not planned");
  return check_done("test_cm_pipe", g_failures);
}
