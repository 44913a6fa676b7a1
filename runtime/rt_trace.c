/* rt_trace.c — Chrome/Perfetto traces of inference and training (cnnrt_trace_begin /
 * cnnrt_trace_write): each shard's leader thread records one event per micro-batch and, when
 * the shard runs on several threads, one per op, timed when the generated code's barrier
 * after the op releases (so an op's time includes waiting for its slowest thread).  Every
 * shard has its own event buffer written only by its leader: recording takes no lock.
 * Training (rt_train.c): one track per thread group (shard, and replica in parallel replica
 * mode), one event per job (a forward or backward stage on one micro-batch, the optimizer
 * update, an eval stage) and, with several threads, one per op of the stage. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/cm.h"
#include "rt_internal.h"

typedef struct rt_tev {
  uint64_t t0, t1;
  int32_t op;  /* index in the shard's op list, -1: the whole micro-batch, -2: a training job */
  uint32_t mb; /* micro-batch number since cnnrt_trace_begin */
  const cnnc_abi_stage *st; /* training: the stage (op and job events) */
  int32_t frame;            /* training jobs: the frame (reused by the micro-batches of an update) */
} rt_tev;

struct rt_trace {
  int n_shards;
  size_t cap;           /* events per shard */
  uint64_t origin;      /* rt_trace_now_ns() at begin */
  rt_tev **ev;          /* [n_shards][cap] */
  size_t *n;            /* [n_shards] recorded */
  uint64_t *dropped;    /* [n_shards] not recorded: buffer full */
  uint64_t *op_t0;      /* [n_shards] start of the running op */
  int *op_i, *threads;  /* [n_shards] index of the running op; threads at begin */
  uint32_t *mb;         /* [n_shards] micro-batches finished */
  /* training: n_shards = tracks (thread groups); the running stage per track; updates done
   * (written by the leader running the update stage while every other group waits) */
  const cnnc_abi_train *train;
  const cnnc_abi_stage **cur;
  uint32_t *cur_mb;      /* [tracks] micro-batch of the running job */
  int32_t *cur_frame;    /* [tracks] its frame */
  _Atomic uint32_t updates;
};

uint64_t rt_trace_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void rt_trace_push(rt_trace *t, int s, uint64_t t0, uint64_t t1, int op) {
  if (t->n[s] == t->cap) {
    t->dropped[s]++;
    return;
  }
  if (t->cur) t->ev[s][t->n[s]++] = (rt_tev){t0, t1, op, t->cur_mb[s], t->cur[s], t->cur_frame[s]};
  else t->ev[s][t->n[s]++] = (rt_tev){t0, t1, op, t->mb[s], NULL, -1};
}

void rt_trace_barrier_cb(void *ctx) {
  rt_trace_ctx *c = ctx;
  rt_barrier_wait(c->b);
  uint64_t now = rt_trace_now_ns();
  rt_trace_push(c->t, c->shard, c->t->op_t0[c->shard], now, c->t->op_i[c->shard]++);
  c->t->op_t0[c->shard] = now;
}

void rt_trace_mb_begin(rt_trace *t, int shard, uint64_t t0) {
  t->op_t0[shard] = t0;
  t->op_i[shard] = 0;
}

void rt_trace_mb_end(rt_trace *t, int shard, uint64_t t0, uint64_t t1) {
  rt_trace_push(t, shard, t0, t1, -1);
  t->mb[shard]++;
}

/* Training jobs: the micro_batch program's stage k of replica k / P is a forward stage when
 * k % P < n_fwd_stages; update and eval stages are found by address. */
static int rt_stage_in(const cnnc_abi_program *p, const cnnc_abi_stage *st) {
  return p->n_stages > 0 && st >= p->stages && st < p->stages + p->n_stages;
}

static const char *rt_job_kind(const rt_trace *t, const cnnc_abi_stage *st, int *replica) {
  const cnnc_abi_train *tr = t->train;
  *replica = 0;
  if (!tr || !st) return "job";
  if (rt_stage_in(&tr->update, st)) return "optimizer";
  if (rt_stage_in(&tr->eval, st)) return "eval";
  if (!rt_stage_in(&tr->micro_batch, st)) return "job";
  int R = tr->replicas > 1 ? tr->replicas : 1, P = tr->micro_batch.n_stages / R, k = (int)(st - tr->micro_batch.stages);
  if (P < 1) return "job";
  *replica = k / P;
  if (tr->n_fwd_stages <= 0) return "micro-batch";
  return k % P < tr->n_fwd_stages ? "forward" : "backward";
}

/* Micro-batches per update (grad_accum x replicas): job micro-batch = update * that + slot
 * (replica * grad_accum + accumulation index). */
static uint32_t rt_per_update(const rt_trace *t) {
  uint32_t per = t->train && t->train->grad_accum > 0 ? (uint32_t)t->train->grad_accum : 1;
  return t->train && t->train->replicas > 1 ? per * (uint32_t)t->train->replicas : per;
}

void rt_trace_job_begin(rt_trace *t, int track, int nthreads, const cnnc_abi_stage *st, uint64_t t0, int frame, int slot) {
  if (track < 0 || track >= t->n_shards || !t->cur) return;
  t->op_t0[track] = t0;
  t->op_i[track] = 0;
  t->threads[track] = nthreads;
  t->cur[track] = st;
  t->cur_frame[track] = frame;
  t->cur_mb[track] = atomic_load_explicit(&t->updates, memory_order_acquire) * rt_per_update(t) + (uint32_t)(slot > 0 ? slot : 0);
}

void rt_trace_job_end(rt_trace *t, int track, const cnnc_abi_stage *st, int frame, uint64_t t0, uint64_t t1) {
  if (track < 0 || track >= t->n_shards || !t->cur) return;
  if (t->n[track] == t->cap) t->dropped[track]++;
  else t->ev[track][t->n[track]++] = (rt_tev){t0, t1, -2, t->cur_mb[track], st, frame};
  int rep;
  if (!strcmp(rt_job_kind(t, st, &rep), "optimizer")) atomic_fetch_add_explicit(&t->updates, 1, memory_order_release);
  t->cur[track] = NULL;
}

void rt_trace_free(rt_trace *t) {
  if (!t) return;
  for (int s = 0; t->ev && s < t->n_shards; s++) free(t->ev[s]);
  free(t->ev);
  free(t->n);
  free(t->dropped);
  free(t->op_t0);
  free(t->op_i);
  free(t->threads);
  free(t->mb);
  free(t->cur);
  free(t->cur_mb);
  free(t->cur_frame);
  free(t);
}

static rt_trace *rt_trace_new(const cnnrt_model *m, size_t cap) {
  int ns = m->d->n_shards;
  const cnnc_abi_train *tr = m->tr ? m->tr->t : NULL;
  if (tr && tr->replicas > 1) ns *= tr->replicas; /* training: a track per (replica, shard) group */
  rt_trace *t = calloc(1, sizeof *t);
  if (!t) return NULL;
  t->n_shards = ns, t->cap = cap, t->train = tr;
  atomic_init(&t->updates, 0);
  t->ev = calloc((size_t)ns, sizeof *t->ev);
  t->n = calloc((size_t)ns, sizeof *t->n);
  t->dropped = calloc((size_t)ns, sizeof *t->dropped);
  t->op_t0 = calloc((size_t)ns, sizeof *t->op_t0);
  t->op_i = calloc((size_t)ns, sizeof *t->op_i);
  t->threads = calloc((size_t)ns, sizeof *t->threads);
  t->mb = calloc((size_t)ns, sizeof *t->mb);
  if (tr) {
    t->cur = calloc((size_t)ns, sizeof *t->cur);
    t->cur_mb = calloc((size_t)ns, sizeof *t->cur_mb);
    t->cur_frame = calloc((size_t)ns, sizeof *t->cur_frame);
  }
  int ok = t->ev && t->n && t->dropped && t->op_t0 && t->op_i && t->threads && t->mb && (!tr || (t->cur && t->cur_mb && t->cur_frame));
  for (int s = 0; ok && s < ns; s++) {
    ok = (t->ev[s] = malloc(cap * sizeof **t->ev)) != NULL;
    t->threads[s] = m->threads[s % m->d->n_shards];
  }
  if (!ok) {
    rt_trace_free(t);
    return NULL;
  }
  t->origin = rt_trace_now_ns();
  return t;
}

CNNRT_API cnnrt_status cnnrt_trace_begin(cnnrt_model *m, size_t max_events) {
  rt_clear_error();
  if (!m) return rt_fail(CNNRT_INVALID_ARGUMENT, "cnnrt_trace_begin: model is NULL");
  size_t cap = max_events ? max_events : (size_t)1 << 20;
  if (cap > ((size_t)1 << 28)) return rt_fail(CNNRT_INVALID_ARGUMENT, "cnnrt_trace_begin: max_events %zu is too large", cap);
  rt_trace *t = rt_trace_new(m, cap);
  if (!t) return rt_fail(CNNRT_OUT_OF_MEMORY, "%s: out of memory for a trace of %zu events per shard", m->path, cap);
  pthread_mutex_lock(&m->lock);
  rt_trace_free(m->trace);
  m->trace = t;
  pthread_mutex_unlock(&m->lock);
  return CNNRT_OK;
}

/* ---- writing ----------------------------------------------------------------------------- */
static void rt_json_escaped(FILE *f, const char *s) {
  fputc('"', f);
  for (; s && *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
    else if (c < 0x20) fprintf(f, "\\u%04x", c);
    else fputc(c, f);
  }
  fputc('"', f);
}

static void rt_trace_meta(const cnnrt_model *m, const rt_trace *t, FILE *f, int pid) {
  fprintf(f, "{\"traceEvents\": [\n{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": %d, \"tid\": 0, \"args\": {\"name\": ", pid);
  char name[512];
  snprintf(name, sizeof name, "cnnrt %s", m->d->model_name ? m->d->model_name : "model");
  rt_json_escaped(f, name);
  fprintf(f, "}}");
  int ns = m->d->n_shards, groups = 0; /* training: replica groups used (parallel replica mode) */
  for (int s = ns; t->train && s < t->n_shards; s++)
    if (t->n[s] > 0 || t->dropped[s] > 0) groups = 1;
  for (int s = 0; s < t->n_shards; s++) {
    if (s >= ns && !groups) continue; /* replicas sharing their shard's group: no track of their own */
    if (groups)
      fprintf(f, ",\n{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": %d, \"tid\": %d, \"args\": {\"name\": \"shard %d replica group %d "
                 "(%d thread%s)\"}}", pid, s, s % ns, s / ns, t->threads[s], t->threads[s] == 1 ? "" : "s");
    else
      fprintf(f, ",\n{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": %d, \"tid\": %d, \"args\": {\"name\": \"shard %d (%d thread%s)\"}}",
              pid, s, s, t->threads[s], t->threads[s] == 1 ? "" : "s");
    fprintf(f, ",\n{\"name\": \"thread_sort_index\", \"ph\": \"M\", \"pid\": %d, \"tid\": %d, \"args\": {\"sort_index\": %d}}",
            pid, s, s);
  }
}

/* A training job ("X" event named "<stage> mb N", cat forward/backward/optimizer/eval) or
 * an op of a training stage ("<stage> op K": the stage's K-th barrier interval, i.e. its K-th
 * kernel, plus the gradient-accumulation adds that follow kernels in accumulating stages). */
static void rt_trace_train_event(const rt_trace *t, FILE *f, int pid, int s, const rt_tev *e, double ts, double dur) {
  int rep;
  const char *kind = rt_job_kind(t, e->st, &rep), *nm = e->st && e->st->name ? e->st->name : "stage";
  fprintf(f, ",\n{\"name\": \"");
  if (e->op == -2 && strcmp(kind, "optimizer") && strcmp(kind, "eval")) fprintf(f, "%s mb %u", nm, e->mb);
  else if (e->op == -2) fprintf(f, "%s", nm);
  else fprintf(f, "%s op %d", nm, e->op);
  fprintf(f, "\", \"cat\": \"%s\", \"ph\": \"X\", \"ts\": %.3f, \"dur\": %.3f, \"pid\": %d, \"tid\": %d, \"args\": {\"stage\": \"%s\", ",
          e->op == -2 ? kind : "op", ts < 0 ? 0 : ts, dur, pid, s, nm);
  if (e->op == -2)
    fprintf(f, "\"phase\": \"%s\", \"micro_batch\": %u, \"frame\": %d, \"replica\": %d, \"update\": %u, \"flops\": %.17g}}", kind,
            e->mb, e->frame, rep, e->mb / rt_per_update(t),
            e->st ? e->st->flops : 0);
  else fprintf(f, "\"op\": %d, \"micro_batch\": %u, \"frame\": %d}}", e->op, e->mb, e->frame);
}

static void rt_trace_event(const cnnrt_model *m, const rt_trace *t, FILE *f, int pid, int s, const rt_tev *e) {
  double ts = (double)(e->t0 - t->origin) / 1e3, dur = (double)(e->t1 - e->t0) / 1e3;
  if (t->train) {
    rt_trace_train_event(t, f, pid, s, e, ts, dur);
    return;
  }
  const cnnc_abi_shard *sh = &m->d->shards[s];
  if (e->op < 0) {
    fprintf(f, ",\n{\"name\": \"micro-batch %u\", \"cat\": \"micro-batch\", \"ph\": \"X\", \"ts\": %.3f, \"dur\": %.3f, "
               "\"pid\": %d, \"tid\": %d, \"args\": {\"micro_batch\": %u, \"shard\": %d}}",
            e->mb, ts < 0 ? 0 : ts, dur, pid, s, e->mb, s);
    return;
  }
  int known = e->op < sh->n_ops;
  fprintf(f, ",\n{\"name\": ");
  rt_json_escaped(f, known && sh->op_names ? sh->op_names[e->op] : "op");
  fprintf(f, ", \"cat\": \"op\", \"ph\": \"X\", \"ts\": %.3f, \"dur\": %.3f, \"pid\": %d, \"tid\": %d, "
             "\"args\": {\"micro_batch\": %u, \"op\": %d, \"kernel\": ",
          ts < 0 ? 0 : ts, dur, pid, s, e->mb, e->op);
  rt_json_escaped(f, known && sh->kernel_names ? sh->kernel_names[e->op] : "");
  if (known && sh->op_flops && dur > 0) fprintf(f, ", \"gflops_per_second\": %.3f", sh->op_flops[e->op] / (dur * 1e3));
  fprintf(f, "}}");
}

static int rt_trace_to_file(const cnnrt_model *m, const rt_trace *t, FILE *f) {
  int pid = (int)getpid();
  uint64_t dropped = 0;
  rt_trace_meta(m, t, f, pid);
  for (int s = 0; s < t->n_shards; s++) {
    for (size_t i = 0; i < t->n[s]; i++) rt_trace_event(m, t, f, pid, s, &t->ev[s][i]);
    dropped += t->dropped[s];
  }
  fprintf(f, "\n],\n\"displayTimeUnit\": \"ms\",\n\"otherData\": {\"model\": ");
  rt_json_escaped(f, m->d->model_name);
  fprintf(f, ", \"shards\": %d, \"dropped_events\": %llu, \"micro_batches\": [", m->d->n_shards, (unsigned long long)dropped);
  for (int s = 0; s < t->n_shards; s++) fprintf(f, "%s%u", s ? ", " : "", t->mb[s]);
  fprintf(f, "]");
  if (t->train)
    fprintf(f, ", \"mode\": \"training\", \"tracks\": %d, \"updates\": %u, \"gradient_accumulation\": %d, \"replicas\": %d",
            t->n_shards, (unsigned)atomic_load(&t->updates), t->train->grad_accum, t->train->replicas > 1 ? t->train->replicas : 1);
  fprintf(f, "}}\n");
  return ferror(f) ? -1 : 0;
}

CNNRT_API cnnrt_status cnnrt_trace_write(cnnrt_model *m, const char *path) {
  rt_clear_error();
  if (!m || !path) return rt_fail(CNNRT_INVALID_ARGUMENT, "cnnrt_trace_write: %s is NULL", m ? "path" : "model");
  pthread_mutex_lock(&m->lock);
  rt_trace *t = m->trace;
  m->trace = NULL;
  pthread_mutex_unlock(&m->lock);
  if (!t) return rt_fail(CNNRT_INVALID_ARGUMENT, "%s: cnnrt_trace_write without cnnrt_trace_begin", m->path);
  cm_out out; /* PATH.tmp.PID, renamed into place (common/cm.h) */
  char why[512] = "";
  int rc = cm_out_open(&out, path, 0666, why, sizeof why);
  if (!rc && rt_trace_to_file(m, t, out.f))
    rc = -1, snprintf(why, sizeof why, "%s", strerror(errno ? errno : EIO)), cm_out_abort(&out);
  if (!rc) rc = cm_out_commit(&out, why, sizeof why);
  rt_trace_free(t);
  if (rc) return rt_fail(CNNRT_IO, "%s: cannot write the trace%s%s", path, why[0] ? ": " : "", why);
  return CNNRT_OK;
}
