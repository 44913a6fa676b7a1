/* rt_trace.c — Chrome/Perfetto traces of inference (cnnrt_trace_begin / cnnrt_trace_write):
 * each shard's leader thread records one event per micro-batch and, when the shard runs on
 * several threads, one per op, timed when the generated code's barrier after the op
 * releases (so an op's time includes waiting for its slowest thread).  Every shard has its
 * own event buffer written only by its leader: recording takes no lock. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "rt_internal.h"

typedef struct rt_tev {
  uint64_t t0, t1;
  int32_t op;  /* index in the shard's op list, -1: the whole micro-batch */
  uint32_t mb; /* micro-batch number since cnnrt_trace_begin */
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
  t->ev[s][t->n[s]++] = (rt_tev){t0, t1, op, t->mb[s]};
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
  free(t);
}

static rt_trace *rt_trace_new(const cnnrt_model *m, size_t cap) {
  int ns = m->d->n_shards;
  rt_trace *t = calloc(1, sizeof *t);
  if (!t) return NULL;
  t->n_shards = ns, t->cap = cap;
  t->ev = calloc((size_t)ns, sizeof *t->ev);
  t->n = calloc((size_t)ns, sizeof *t->n);
  t->dropped = calloc((size_t)ns, sizeof *t->dropped);
  t->op_t0 = calloc((size_t)ns, sizeof *t->op_t0);
  t->op_i = calloc((size_t)ns, sizeof *t->op_i);
  t->threads = calloc((size_t)ns, sizeof *t->threads);
  t->mb = calloc((size_t)ns, sizeof *t->mb);
  int ok = t->ev && t->n && t->dropped && t->op_t0 && t->op_i && t->threads && t->mb;
  for (int s = 0; ok && s < ns; s++) {
    ok = (t->ev[s] = malloc(cap * sizeof **t->ev)) != NULL;
    t->threads[s] = m->threads[s];
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
  for (int s = 0; s < t->n_shards; s++) {
    fprintf(f, ",\n{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": %d, \"tid\": %d, \"args\": {\"name\": \"shard %d (%d thread%s)\"}}",
            pid, s, s, t->threads[s], t->threads[s] == 1 ? "" : "s");
    fprintf(f, ",\n{\"name\": \"thread_sort_index\", \"ph\": \"M\", \"pid\": %d, \"tid\": %d, \"args\": {\"sort_index\": %d}}",
            pid, s, s);
  }
}

static void rt_trace_event(const cnnrt_model *m, const rt_trace *t, FILE *f, int pid, int s, const rt_tev *e) {
  const cnnc_abi_shard *sh = &m->d->shards[s];
  double ts = (double)(e->t0 - t->origin) / 1e3, dur = (double)(e->t1 - e->t0) / 1e3;
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
  fprintf(f, ", \"shards\": %d, \"dropped_events\": %llu, \"micro_batches\": [", t->n_shards, (unsigned long long)dropped);
  for (int s = 0; s < t->n_shards; s++) fprintf(f, "%s%u", s ? ", " : "", t->mb[s]);
  fprintf(f, "]}}\n");
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
  FILE *f = fopen(path, "w");
  int rc = f ? rt_trace_to_file(m, t, f) : -1;
  if (f && fclose(f) != 0) rc = -1;
  rt_trace_free(t);
  if (rc) return rt_fail(CNNRT_IO, "%s: cannot write the trace", path);
  return CNNRT_OK;
}
