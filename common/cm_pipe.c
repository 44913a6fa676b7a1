/* cm_pipe.c — the job lists of one pipelined training update and the frames they need
 * (cm.h "pipelined training").  Pure functions of their arguments. */
#include <stdlib.h>

#include "common/cm.h"

static int cm_pipe_ok(const cm_pipe *p) {
  return p && p->P >= 1 && p->S >= 1 && p->N >= 1 && p->R >= 1 && p->F >= 0 && p->F <= p->P && p->group &&
         (long)p->P * p->N * p->R <= (1l << 30);
}

int cm_pipe_pools(const cm_pipe *p) { return p->par && p->R > 1 ? p->R : 1; }

static int cm_pipe_sched(const cm_pipe *p) { return p->F > 0 && p->F <= p->P ? p->schedule : 0; }

/* The schedule's frames per pool before any deadlock check. */
static int cm_pipe_bound(const cm_pipe *p) {
  int stream = cm_pipe_pools(p) > 1 ? p->N : p->N * p->R, b = cm_pipe_sched(p) == 0 ? 1 : 2 * p->S;
  return b < stream ? b : stream;
}

typedef struct cm_pctx {
  const cm_pipe *p;
  int B, r;
  cm_pjob *out;
  long n;
} cm_pctx;

static void cm_push(cm_pctx *c, int k, int a) {
  const cm_pipe *p = c->p;
  int par = cm_pipe_pools(p) > 1, i = par ? a : c->r * p->N + a;
  if (c->out)
    c->out[c->n] = (cm_pjob){(par ? c->r : 0) * p->S + p->group[k], k, c->r * p->N + a, (par ? c->r * c->B : 0) + i % c->B,
                             (i / c->B) * p->P + k};
  c->n++;
}

long cm_pipe_jobs(const cm_pipe *p, int B, cm_pjob *out) {
  if (!cm_pipe_ok(p) || B < 1) return 0;
  int P = p->P, F = p->F, N = p->N, sched = cm_pipe_sched(p);
  int chunk = 2 * p->S < N ? 2 * p->S : N; /* grouped: micro-batches per forward-then-backward round */
  cm_pctx c = {p, B, 0, out, 0};
  for (c.r = 0; c.r < p->R; c.r++) {
    if (sched == 0) {
      for (int a = 0; a < N; a++)
        for (int k = 0; k < P; k++) cm_push(&c, k, a);
      continue;
    }
    for (int sh = 0; sh < p->S; sh++) {
      int kf = -1, kb = -1, nf = 0, nb = 0;
      for (int k = 0; k < P; k++)
        if (p->group[k] == sh) {
          if (k < F) kf = k, nf++;
          else kb = k, nb++;
        }
      if (sched == 2 && nf == 1 && nb <= 1) { /* 1F1B */
        int warm = F - kf < N ? F - kf : N, next = 0;
        for (; next < warm; next++) cm_push(&c, kf, next);
        for (int a = 0; a < N; a++) {
          if (kb >= 0) cm_push(&c, kb, a);
          if (next < N) cm_push(&c, kf, next), next++;
        }
        continue;
      }
      for (int a0 = 0; a0 < N; a0 += chunk) { /* grouped: the chunk's forwards, then its backwards */
        int a1 = a0 + chunk < N ? a0 + chunk : N;
        for (int k = 0; k < F; k++)
          for (int a = a0; a < a1 && p->group[k] == sh; a++) cm_push(&c, k, a);
        for (int k = F; k < P; k++)
          for (int a = a0; a < a1 && p->group[k] == sh; a++) cm_push(&c, k, a);
      }
    }
  }
  return c.n;
}

int cm_pipe_runs(const cm_pipe *p, int B) {
  long n = cm_pipe_jobs(p, B, NULL);
  int G = cm_pipe_pools(p) * p->S, nf = cm_pipe_pools(p) * B;
  cm_pjob *j = calloc((size_t)n, sizeof *j);
  long *start = calloc((size_t)G + 1, sizeof *start), *pos = calloc((size_t)G, sizeof *pos), *order = calloc((size_t)n, sizeof *order);
  long *progress = calloc((size_t)nf, sizeof *progress);
  int ok = -1;
  if (!j || !start || !pos || !order || !progress) goto out;
  cm_pipe_jobs(p, B, j);
  for (long i = 0; i < n; i++) start[j[i].group + 1]++;
  for (int g = 0; g < G; g++) start[g + 1] += start[g], pos[g] = start[g];
  for (long i = 0; i < n; i++) order[pos[j[i].group]++] = i;
  for (int g = 0; g < G; g++) pos[g] = start[g];
  long done = 0;
  for (int moved = 1; moved;) { /* any order of runnable jobs reaches the same end */
    moved = 0;
    for (int g = 0; g < G; g++)
      while (pos[g] < start[g + 1] && progress[j[order[pos[g]]].frame] == j[order[pos[g]]].seq)
        progress[j[order[pos[g]]].frame]++, pos[g]++, done++, moved = 1;
  }
  ok = done == n;
out:
  free(j), free(start), free(pos), free(order), free(progress);
  return ok;
}

int cm_pipe_frames(const cm_pipe *p) {
  if (!cm_pipe_ok(p)) return 0;
  int stream = cm_pipe_pools(p) > 1 ? p->N : p->N * p->R;
  for (int B = cm_pipe_bound(p); B < stream; B = B < stream / 2 ? 2 * B : stream) { /* doubling: a few simulations */
    int r = cm_pipe_runs(p, B);
    if (r != 0) return r < 0 ? -1 : B;
  }
  return stream; /* a frame per micro-batch: every list order runs */
}
