/* rt_dist.c — data-parallel training across processes (docs/mpi.md): cnnrt_set_comm gives a
 * training model a communicator (cnnrt_comm, filled by an engine such as libcnnrt_mpi; this
 * library links none).  The model's --replicas R is the total; rank k of N runs replicas
 * k*R/N .. (k+1)*R/N-1 on its frames (the other replicas' frames stay idle).  Per update:
 *   1. the local micro-batches run (rt_train.c), every replica adding into its own GRAD_ACCUM
 *      slices as in one process;
 *   2. batch-norm running statistics (BUFFER state): when the model exports batch-statistics
 *      records (cnnc_abi.h CNNC_ABI_BN_STATS_SYMBOL) every rank runs its forwards at once and
 *      afterwards the records of all R replicas are gathered and the updates replayed in one
 *      process's order (rt_replay_*); else (older .so files) rank k > 0 receives the state
 *      from rank k-1 before its micro-batches, rank k < N-1 sends it on after its forward
 *      stage jobs (rt_dist_pass; rt_train.c runs the job list in two parts for it) and the
 *      last rank broadcasts it after the step.  Either way every rank ends with the statistics
 *      of all R replicas' forwards applied in replica order;
 *   3. every rank's slices are gathered (allgather, rank order) into every replica's slices;
 *   4. the compiled update stage sums the R slices in replica order and scales them, as in one
 *      process: the state is bitwise the state of one process running all R replicas.
 * The loss and top-1 count of every frame are gathered too and summed in frame order. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cm.h"
#include "rt_internal.h"

typedef struct rt_dist {
  cnnrt_comm c;
  int R, r0, r1;      /* total replicas, this rank's [r0, r1) */
  int n_acc;          /* GRAD_ACCUM slices per replica */
  int *acc;           /* [R][n_acc] state indices, each replica's in state order */
  size_t acc_bytes;   /* one replica's slices together */
  int n_buf;          /* BUFFER state tensors */
  int *buf;
  size_t buf_bytes;
  char *pack, *all;   /* send (local replicas' slices or BUFFER state) and gathered buffers */
  float *frames;      /* [2][frames of the rank] loss, top-1 */
  float *frames_all;
  /* batch-norm statistics replayed (the model exports records, cnnc_abi.h): no hand-over */
  int replay, n_mb;   /* n_mb = R * grad_accum micro-batch slots of an update */
  char *bn_in;        /* the BUFFER state before the update (d->buf order) */
  char *recs;         /* [n_mb] every slot's record, gathered */
  int *order;         /* [F][n_mb] per forward stage the slots in one process's order */
} rt_dist;

static const char *rt_comm_msg(const cnnrt_comm *c) {
  const char *e = c->last_error ? c->last_error(c->ctx) : NULL;
  return e && *e ? e : "(the engine gave no message)";
}

/* The replica of GRAD_ACCUM slice name: ".../accum" is replica 0's, ".../accum/r<r>" replica r's. */
static int rt_acc_replica(const char *name) {
  size_t n = strlen(name);
  if (n >= 6 && !strcmp(name + n - 6, "/accum")) return 0;
  const char *p = strstr(name, "/accum/r");
  if (!p) return -1;
  char *end;
  long r = strtol(p + 8, &end, 10);
  return *end || r < 1 || r > 1 << 20 ? -1 : (int)r;
}

void rt_dist_free(rt_trainer *tr) {
  rt_dist *d = tr ? tr->dist : NULL;
  if (!d) return;
  free(d->acc);
  free(d->buf);
  free(d->pack);
  free(d->all);
  free(d->frames);
  free(d->frames_all);
  free(d->bn_in);
  free(d->recs);
  free(d->order);
  free(d);
  tr->dist = NULL;
}

int rt_dist_replicas(const cnnrt_model *m, int *r0, int *r1) {
  const cnnc_abi_train *t = m->tr->t;
  const rt_dist *d = m->tr->dist;
  int a = d ? d->r0 : 0, b = d ? d->r1 : (t->replicas > 1 ? t->replicas : 1);
  if (r0) *r0 = a;
  if (r1) *r1 = b;
  return b - a;
}

/* Batch-norm statistics by replay: every rank runs its forwards at once, each micro-batch's
 * forward kernels writing their records (the double terms of their running-statistics update,
 * cnnc_abi.h); after the step the records of all R * grad_accum slots are gathered and every
 * rank replays the updates from the state before the step, per batch norm in the order one
 * process runs that stage's forward jobs (the pipeline's job list for R replicas): the bits of
 * one process.  d->order[k] lists the slots of stage k in that order (F = 0: slot order). */
static cnnrt_status rt_replay_build(cnnrt_model *m, rt_dist *d) {
  const cnnc_abi_train *t = m->tr->t;
  int R = d->R, P = t->micro_batch.n_stages / R, F = t->n_fwd_stages > 0 ? t->n_fwd_stages : 1;
  d->n_mb = R * t->grad_accum;
  int *group = calloc((size_t)P, sizeof *group), *fill = calloc((size_t)F, sizeof *fill);
  d->order = malloc((size_t)F * (size_t)d->n_mb * sizeof *d->order);
  d->bn_in = malloc(d->buf_bytes);
  d->recs = malloc((size_t)d->n_mb * (size_t)t->tensors[m->tr->bn->tensor].bytes);
  cnnrt_status s = group && fill && d->order && d->bn_in && d->recs ? CNNRT_OK : rt_fail(CNNRT_OUT_OF_MEMORY, "cnnrt_set_comm: out of memory");
  for (int k = 0; s == CNNRT_OK && k < P; k++) group[k] = t->micro_batch.stages[k].shard;
  cm_pipe p = {.P = P, .F = t->n_fwd_stages, .S = m->d->n_shards, .N = t->grad_accum, .R = R, .group = group, .schedule = t->schedule};
  int B = s == CNNRT_OK && t->n_fwd_stages > 0 ? cm_pipe_frames(&p) : 0;
  long n = B > 0 ? cm_pipe_jobs(&p, B, NULL) : 0;
  cm_pjob *jobs = n > 0 ? calloc((size_t)n, sizeof *jobs) : NULL;
  if (jobs) cm_pipe_jobs(&p, B, jobs);
  for (long i = 0; jobs && i < n; i++)
    if (jobs[i].stage < F && fill[jobs[i].stage] < d->n_mb) d->order[jobs[i].stage * d->n_mb + fill[jobs[i].stage]++] = jobs[i].mb;
  for (int k = 0; s == CNNRT_OK && k < F; k++) {
    if (!jobs) /* the split unknown: sequential, slot order */
      for (fill[k] = 0; fill[k] < d->n_mb; fill[k]++) d->order[k * d->n_mb + fill[k]] = fill[k];
    if (fill[k] != d->n_mb) s = rt_fail(CNNRT_BAD_MODEL, "cnnrt_set_comm: %s: forward stage %d runs %d micro-batches of %d", m->path, k, fill[k], d->n_mb);
  }
  free(jobs);
  free(group);
  free(fill);
  d->replay = s == CNNRT_OK;
  return s;
}

/* The running statistics of batch norm e after the records of the n_mb slots (d->recs, slot
 * order) in one process's order: x = (float)(k * (double)x + t), the product rounded apart
 * (no fused multiply-add), as the compiled kernel does. */
static void rt_replay_one(cnnrt_model *m, const rt_dist *d, const cnnc_abi_bn_stat *e) {
  const cnnc_abi_train *t = m->tr->t;
  size_t rec = (size_t)t->tensors[m->tr->bn->tensor].bytes;
  float *mean = (float *)((char *)m->tr->state + t->state[e->mean_state].offset);
  float *var = (float *)((char *)m->tr->state + t->state[e->var_state].offset);
  const int *ord = d->order + (size_t)(e->stage > 0 ? e->stage : 0) * (size_t)d->n_mb;
  for (int i = 0; i < d->n_mb; i++) {
    const double *r = (const double *)(d->recs + (size_t)ord[i] * rec) + e->offset;
    for (int c = 0; c < e->channels; c++) {
      volatile double a = r[3 * c] * (double)mean[c], b = r[3 * c] * (double)var[c];
      mean[c] = (float)(a + r[3 * c + 1]);
      var[c] = (float)(b + r[3 * c + 2]);
    }
  }
}

static cnnrt_status rt_dist_build(cnnrt_model *m, rt_dist *d) {
  const cnnc_abi_train *t = m->tr->t;
  int *cnt = calloc((size_t)d->R, sizeof *cnt);
  if (!cnt) return rt_fail(CNNRT_OUT_OF_MEMORY, "cnnrt_set_comm: out of memory");
  for (int i = 0; i < t->n_state; i++) {
    if (t->state[i].kind == CNNC_ABI_STATE_BUFFER) d->n_buf++, d->buf_bytes += (size_t)t->state[i].bytes;
    if (t->state[i].kind != CNNC_ABI_STATE_GRAD_ACCUM) continue;
    int r = rt_acc_replica(t->state[i].name);
    if (r < 0 || r >= d->R) {
      free(cnt);
      return rt_fail(CNNRT_BAD_MODEL, "cnnrt_set_comm: %s: gradient accumulator '%s' names no replica of %d", m->path,
                     t->state[i].name, d->R);
    }
    cnt[r]++;
  }
  d->n_acc = cnt[0];
  for (int r = 1; r < d->R; r++)
    if (cnt[r] != d->n_acc) {
      int have = cnt[r];
      free(cnt);
      return rt_fail(CNNRT_BAD_MODEL, "cnnrt_set_comm: %s: replica %d has %d gradient accumulators, replica 0 %d", m->path, r,
                     have, d->n_acc);
    }
  free(cnt);
  if (d->n_acc == 0)
    return rt_fail(CNNRT_UNSUPPORTED, "cnnrt_set_comm: %s has no gradient accumulators (compile it with --replicas R >= 2)", m->path);
  d->acc = malloc((size_t)d->R * (size_t)d->n_acc * sizeof *d->acc);
  d->buf = malloc((size_t)(d->n_buf ? d->n_buf : 1) * sizeof *d->buf);
  int *fill = calloc((size_t)d->R, sizeof *fill), nb = 0;
  if (!d->acc || !d->buf || !fill) {
    free(fill);
    return rt_fail(CNNRT_OUT_OF_MEMORY, "cnnrt_set_comm: out of memory");
  }
  for (int i = 0; i < t->n_state; i++) {
    if (t->state[i].kind == CNNC_ABI_STATE_BUFFER) d->buf[nb++] = i;
    if (t->state[i].kind != CNNC_ABI_STATE_GRAD_ACCUM) continue;
    int r = rt_acc_replica(t->state[i].name);
    d->acc[r * d->n_acc + fill[r]++] = i;
  }
  free(fill);
  for (int j = 0; j < d->n_acc; j++) {
    d->acc_bytes += (size_t)t->state[d->acc[j]].bytes;
    for (int r = 1; r < d->R; r++)
      if (t->state[d->acc[r * d->n_acc + j]].bytes != t->state[d->acc[j]].bytes)
        return rt_fail(CNNRT_BAD_MODEL, "cnnrt_set_comm: %s: accumulator '%s' differs in size from '%s'", m->path,
                       t->state[d->acc[r * d->n_acc + j]].name, t->state[d->acc[j]].name);
  }
  int n = d->c.size, rl = d->R / n, nf = rl * t->grad_accum;
  size_t pack = (size_t)rl * d->acc_bytes > d->buf_bytes ? (size_t)rl * d->acc_bytes : d->buf_bytes;
  d->pack = malloc(pack);
  d->all = malloc((size_t)n * (size_t)rl * d->acc_bytes);
  d->frames = malloc(2 * (size_t)nf * sizeof *d->frames);
  d->frames_all = malloc(2 * (size_t)nf * (size_t)n * sizeof *d->frames_all);
  if (!d->pack || !d->all || !d->frames || !d->frames_all)
    return rt_fail(CNNRT_OUT_OF_MEMORY, "cnnrt_set_comm: out of memory for %zu bytes of gradients per rank", (size_t)rl * d->acc_bytes);
  return d->n_buf && m->tr->bn ? rt_replay_build(m, d) : CNNRT_OK;
}

CNNRT_API cnnrt_status cnnrt_set_comm(cnnrt_model *m, const cnnrt_comm *comm) {
  rt_clear_error();
  cnnrt_status s = rt_need_train(m, "cnnrt_set_comm");
  if (s != CNNRT_OK) return s;
  const cnnc_abi_train *t = m->tr->t;
  int R = t->replicas > 1 ? t->replicas : 1;
  if (comm) {
    if (comm->struct_size < sizeof *comm || !comm->allgather || !comm->broadcast || !comm->barrier || !comm->send || !comm->recv)
      return rt_fail(CNNRT_INVALID_ARGUMENT, "cnnrt_set_comm: struct_size %u (want %zu) or a function is NULL", comm->struct_size,
                     sizeof *comm);
    if (comm->size < 1 || comm->rank < 0 || comm->rank >= comm->size)
      return rt_fail(CNNRT_INVALID_ARGUMENT, "cnnrt_set_comm: rank %d of %d", comm->rank, comm->size);
    if (R % comm->size)
      return rt_fail(CNNRT_INVALID_ARGUMENT,
                     "cnnrt_set_comm: %s was compiled with --replicas %d, which %d processes cannot share (give a multiple "
                     "of the process count: replicas per process x processes)",
                     m->path, R, comm->size);
  }
  rt_dist *d = NULL;
  if (comm && comm->size > 1) {
    if (!(d = calloc(1, sizeof *d))) return rt_fail(CNNRT_OUT_OF_MEMORY, "cnnrt_set_comm: out of memory");
    d->c = *comm;
    d->R = R, d->r0 = comm->rank * (R / comm->size), d->r1 = d->r0 + R / comm->size;
    rt_trainer tmp = {.t = t, .dist = d};
    if ((s = rt_dist_build(m, d)) != CNNRT_OK) {
      rt_dist_free(&tmp);
      return s;
    }
  }
  pthread_mutex_lock(&m->lock);
  rt_dist_free(m->tr);
  m->tr->dist = d;
  pthread_mutex_unlock(&m->lock);
  return CNNRT_OK;
}

CNNRT_API cnnrt_status cnnrt_comm_sum_f64(const cnnrt_comm *c, double *buf, int n) {
  rt_clear_error();
  if (!c || !c->allgather || c->size < 1 || n < 0 || (n && !buf))
    return rt_fail(CNNRT_INVALID_ARGUMENT, "cnnrt_comm_sum_f64: communicator or buffer NULL, or n %d", n);
  if (c->size == 1 || n == 0) return CNNRT_OK;
  double *all = malloc((size_t)c->size * (size_t)n * sizeof *all);
  if (!all) return rt_fail(CNNRT_OUT_OF_MEMORY, "cnnrt_comm_sum_f64: out of memory");
  if (c->allgather(c->ctx, buf, (size_t)n * sizeof *buf, all)) {
    free(all);
    return rt_fail(CNNRT_INTERNAL, "cnnrt_comm_sum_f64: allgather failed: %s", rt_comm_msg(c));
  }
  for (int i = 0; i < n; i++) {
    double v = all[i];
    for (int r = 1; r < c->size; r++) v += all[(size_t)r * (size_t)n + (size_t)i];
    buf[i] = v;
  }
  free(all);
  return CNNRT_OK;
}

CNNRT_API cnnrt_status cnnrt_comm_broadcast_state(cnnrt_model *m, int root) {
  rt_clear_error();
  cnnrt_status s = rt_need_train(m, "cnnrt_comm_broadcast_state");
  if (s != CNNRT_OK) return s;
  rt_dist *d = m->tr->dist;
  if (!d) return CNNRT_OK;
  if (root < 0 || root >= d->c.size) return rt_fail(CNNRT_INVALID_ARGUMENT, "cnnrt_comm_broadcast_state: root %d of %d ranks", root, d->c.size);
  pthread_mutex_lock(&m->lock);
  int64_t step = m->tr->step;
  int bad = d->c.broadcast(d->c.ctx, m->tr->state, (size_t)m->tr->t->state_bytes, root) || d->c.broadcast(d->c.ctx, &step, sizeof step, root);
  if (!bad) m->tr->step = step;
  pthread_mutex_unlock(&m->lock);
  if (bad) return rt_fail(CNNRT_INTERNAL, "%s: rank %d: broadcasting the state from rank %d failed: %s", m->path, d->c.rank, root, rt_comm_msg(&d->c));
  return CNNRT_OK;
}

/* BUFFER state <-> d->pack. */
static void rt_buf_copy(cnnrt_model *m, rt_dist *d, int to_state) {
  const cnnc_abi_train *t = m->tr->t;
  size_t o = 0;
  for (int j = 0; j < d->n_buf; j++) {
    const cnnc_abi_state_tensor *x = &t->state[d->buf[j]];
    char *p = (char *)m->tr->state + x->offset;
    if (to_state) memcpy(p, d->pack + o, (size_t)x->bytes);
    else memcpy(d->pack + o, p, (size_t)x->bytes);
    o += (size_t)x->bytes;
  }
}

cnnrt_status rt_dist_before(cnnrt_model *m) {
  rt_dist *d = m->tr->dist;
  if (d && d->replay) { /* the state the replay starts from */
    rt_buf_copy(m, d, 0);
    memcpy(d->bn_in, d->pack, d->buf_bytes);
    return CNNRT_OK;
  }
  if (!d || d->n_buf == 0 || d->c.rank == 0) return CNNRT_OK;
  if (d->c.recv(d->c.ctx, d->pack, d->buf_bytes, d->c.rank - 1))
    return rt_fail(CNNRT_INTERNAL, "%s: rank %d: receiving the batch-norm statistics from rank %d failed: %s", m->path, d->c.rank,
                   d->c.rank - 1, rt_comm_msg(&d->c));
  rt_buf_copy(m, d, 1);
  return CNNRT_OK;
}

int rt_dist_pass_stats(const cnnrt_model *m) {
  const rt_dist *d = m->tr->dist;
  return d && d->n_buf && !d->replay && d->c.rank < d->c.size - 1;
}

/* After the rank's last forward job: its BUFFER state to the next rank, which waits for it in
 * rt_dist_before (the backward stages leave BUFFER state alone, so these are the bytes the
 * whole step ends with). */
cnnrt_status rt_dist_pass(cnnrt_model *m) {
  rt_dist *d = m->tr->dist;
  if (!rt_dist_pass_stats(m)) return CNNRT_OK;
  rt_buf_copy(m, d, 0);
  if (d->c.send(d->c.ctx, d->pack, d->buf_bytes, d->c.rank + 1))
    return rt_fail(CNNRT_INTERNAL, "%s: rank %d: sending the batch-norm statistics to rank %d failed: %s", m->path, d->c.rank,
                   d->c.rank + 1, rt_comm_msg(&d->c));
  return CNNRT_OK;
}

cnnrt_status rt_dist_after(cnnrt_model *m, double *loss_sum, double *correct_sum) {
  rt_dist *d = m->tr->dist;
  const cnnc_abi_train *t = m->tr->t;
  int n = d->c.size, rank = d->c.rank, rl = d->r1 - d->r0, ga = t->grad_accum, nf = rl * ga;
  if (d->replay) { /* every slot's records to all, then the updates in one process's order */
    size_t rec = (size_t)t->tensors[m->tr->bn->tensor].bytes;
    if (d->c.allgather(d->c.ctx, rt_frame_tensor(m, d->r0 * ga, m->tr->bn->tensor), (size_t)nf * rec, d->recs))
      return rt_fail(CNNRT_INTERNAL, "%s: rank %d: gathering the batch-norm statistics failed: %s", m->path, rank, rt_comm_msg(&d->c));
    memcpy(d->pack, d->bn_in, d->buf_bytes);
    rt_buf_copy(m, d, 1);
    for (int i = 0; i < m->tr->bn->n; i++) rt_replay_one(m, d, &m->tr->bn->stats[i]);
  } else if (d->n_buf) { /* the last rank's statistics to all (each passed its own on in rt_dist_pass) */
    rt_buf_copy(m, d, 0);
    if (d->c.broadcast(d->c.ctx, d->pack, d->buf_bytes, n - 1))
      return rt_fail(CNNRT_INTERNAL, "%s: rank %d: broadcasting the batch-norm statistics failed: %s", m->path, rank,
                     rt_comm_msg(&d->c));
    rt_buf_copy(m, d, 1);
  }
  /* the update runs on frame 0, which only rank 0's replica 0 was fed: its lr */
  *(float *)rt_frame_tensor(m, 0, t->lr) = (float)m->tr->lr;
  size_t o = 0;
  for (int r = d->r0; r < d->r1; r++)
    for (int j = 0; j < d->n_acc; j++) {
      const cnnc_abi_state_tensor *x = &t->state[d->acc[r * d->n_acc + j]];
      memcpy(d->pack + o, (const char *)m->tr->state + x->offset, (size_t)x->bytes);
      o += (size_t)x->bytes;
    }
  if (d->c.allgather(d->c.ctx, d->pack, o, d->all))
    return rt_fail(CNNRT_INTERNAL, "%s: rank %d: gathering the gradients failed: %s", m->path, rank, rt_comm_msg(&d->c));
  o = 0; /* rank q's block holds replicas q*rl .. q*rl+rl-1: in rank order, every replica's */
  for (int r = 0; r < d->R; r++)
    for (int j = 0; j < d->n_acc; j++) {
      const cnnc_abi_state_tensor *x = &t->state[d->acc[r * d->n_acc + j]];
      memcpy((char *)m->tr->state + x->offset, d->all + o, (size_t)x->bytes);
      o += (size_t)x->bytes;
    }
  for (int i = 0; i < nf; i++) { /* the rank's frames r*ga + a, r in [r0, r1): global frames in order */
    d->frames[2 * i] = *(const float *)rt_frame_tensor(m, d->r0 * ga + i, t->loss);
    d->frames[2 * i + 1] = *(const float *)rt_frame_tensor(m, d->r0 * ga + i, t->correct);
  }
  if (d->c.allgather(d->c.ctx, d->frames, 2 * (size_t)nf * sizeof *d->frames, d->frames_all))
    return rt_fail(CNNRT_INTERNAL, "%s: rank %d: gathering the losses failed: %s", m->path, rank, rt_comm_msg(&d->c));
  for (int i = 0; i < nf * n; i++) *loss_sum += d->frames_all[2 * i], *correct_sum += d->frames_all[2 * i + 1];
  return CNNRT_OK;
}
