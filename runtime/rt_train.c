/* rt_train.c — training models: the training descriptor (cnnc_abi.h, "training extension")
 * is validated at open, its state buffer allocated and initialised; cnnrt_train_step and
 * cnnrt_evaluate run the stages of a program one after another on per-shard thread groups
 * (the caller's thread is tid 0 of each group), feeding images, labels and lr and reading
 * loss and top-1 count.  Also the state accessors of the public API. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt_internal.h"

#define RT_MAX_STATE (1 << 20)
#define RT_MAX_STAGES 65536

/* ---- thread groups ---------------------------------------------------------------------- */
typedef struct rt_pool_arg {
  rt_pool *p;
  int tid;
} rt_pool_arg;

struct rt_pool {
  int nthreads, n_started;
  pthread_t *tids;          /* [nthreads]; [0] unused: the caller is thread 0 */
  rt_pool_arg *args;
  rt_barrier barrier;
  _Atomic uint32_t job_gen;
  _Atomic int stop;
  _Atomic int32_t rc;
  const cnnc_abi_stage *stage; /* the job: set by the caller before bumping job_gen */
  void **io;
  void *state, *scratch;
};

static void rt_pool_share(rt_pool *p, int tid) {
  int32_t rc = p->stage->run(p->io, p->state, p->scratch, tid, p->nthreads, rt_barrier_cb, &p->barrier);
  if (rc != 0) {
    int32_t zero = 0;
    atomic_compare_exchange_strong(&p->rc, &zero, rc);
  }
  rt_barrier_wait(&p->barrier);
}

static void *rt_pool_main(void *arg) {
  rt_pool_arg *a = arg;
  uint32_t seen = 0;
  for (;;) {
    rt_wait_change(&a->p->job_gen, seen);
    seen = atomic_load_explicit(&a->p->job_gen, memory_order_acquire);
    if (atomic_load_explicit(&a->p->stop, memory_order_acquire)) return NULL;
    rt_pool_share(a->p, a->tid);
  }
}

static void rt_pool_stop(rt_pool *p) {
  atomic_store_explicit(&p->stop, 1, memory_order_release);
  atomic_fetch_add_explicit(&p->job_gen, 1, memory_order_release);
  rt_wake_all(&p->job_gen);
  for (int t = 1; t < p->n_started; t++) pthread_join(p->tids[t], NULL);
  free(p->tids);
  free(p->args);
  memset(p, 0, sizeof *p);
}

static void rt_pools_stop(cnnrt_model *m) {
  if (!m->tr || !m->tr->pools) return;
  for (int s = 0; s < m->d->n_shards; s++) rt_pool_stop(&m->tr->pools[s]);
  free(m->tr->pools);
  m->tr->pools = NULL;
}

static cnnrt_status rt_pool_start(cnnrt_model *m, rt_pool *p, int nthreads) {
  p->nthreads = nthreads;
  p->n_started = 1;
  rt_barrier_init(&p->barrier, (uint32_t)nthreads);
  atomic_init(&p->job_gen, 0);
  atomic_init(&p->stop, 0);
  atomic_init(&p->rc, 0);
  p->tids = calloc((size_t)nthreads, sizeof *p->tids);
  p->args = calloc((size_t)nthreads, sizeof *p->args);
  if (!p->tids || !p->args) return rt_fail(CNNRT_OUT_OF_MEMORY, "%s: out of memory", m->path);
  for (int t = 1; t < nthreads; t++) {
    p->args[t] = (rt_pool_arg){p, t};
    int e = pthread_create(&p->tids[t], NULL, rt_pool_main, &p->args[t]);
    if (e != 0) return rt_fail(CNNRT_INTERNAL, "%s: cannot start a training thread: %s", m->path, strerror(e));
    p->n_started++;
  }
  return CNNRT_OK;
}

/* (Re)starts the groups when absent or when cnnrt_set_threads changed a count. */
static cnnrt_status rt_pools_ready(cnnrt_model *m) {
  rt_trainer *tr = m->tr;
  int ns = m->d->n_shards;
  for (int s = 0; tr->pools && s < ns; s++)
    if (tr->pools[s].nthreads != m->threads[s]) {
      rt_pools_stop(m);
      break;
    }
  if (tr->pools) return CNNRT_OK;
  if (!(tr->pools = calloc((size_t)ns, sizeof *tr->pools))) return rt_fail(CNNRT_OUT_OF_MEMORY, "%s: out of memory", m->path);
  for (int s = 0; s < ns; s++) {
    cnnrt_status st = rt_pool_start(m, &tr->pools[s], m->threads[s]);
    if (st != CNNRT_OK) {
      rt_pools_stop(m);
      return st;
    }
  }
  return CNNRT_OK;
}

static cnnrt_status rt_run_stage(cnnrt_model *m, const cnnc_abi_stage *st) {
  rt_trainer *tr = m->tr;
  rt_pool *p = &tr->pools[st->shard];
  for (int k = 0; k < st->n_io; k++) tr->io[k] = tr->tbuf[st->io[k]];
  p->stage = st;
  p->io = tr->io;
  p->state = tr->state;
  p->scratch = tr->scratch;
  atomic_store(&p->rc, 0);
  if (p->nthreads > 1) {
    atomic_fetch_add_explicit(&p->job_gen, 1, memory_order_release);
    rt_wake_all(&p->job_gen);
  }
  rt_pool_share(p, 0);
  int32_t rc = atomic_load(&p->rc);
  atomic_fetch_add_explicit(&m->runs[st->shard], 1, memory_order_relaxed);
  if (rc != 0) return rt_fail(CNNRT_INTERNAL, "%s: training stage '%s' (shard %d) returned %d", m->path, st->name, st->shard, rc);
  return CNNRT_OK;
}

static cnnrt_status rt_run_program(cnnrt_model *m, const cnnc_abi_program *prog) {
  for (int k = 0; k < prog->n_stages; k++) {
    cnnrt_status s = rt_run_stage(m, &prog->stages[k]);
    if (s != CNNRT_OK) return s;
  }
  return CNNRT_OK;
}

/* ---- descriptor validation -------------------------------------------------------------- */
static int rt_tensor_ok(const cnnc_abi_tensor *x) {
  size_t es = rt_dtype_size(x->dtype);
  if (!x->name || !es || x->rank < 1 || x->rank > 4 || x->bytes <= 0) return 0;
  int64_t n = 1;
  for (int k = 0; k < x->rank; k++) {
    if (x->dims[k] < 1 || x->dims[k] > (1ll << 40) / n) return 0;
    n *= x->dims[k];
  }
  return (int64_t)es * n == x->bytes;
}

/* Tensor index k has dtype f32 and count elements. */
static cnnrt_status rt_check_special(const cnnrt_model *m, int32_t k, const char *what, int64_t count) {
  const cnnc_abi_train *t = m->tr->t;
  if (k < 0 || k >= t->n_tensors)
    return rt_fail(CNNRT_BAD_MODEL, "%s: training descriptor: %s tensor index %d, there are %d", m->path, what, k, t->n_tensors);
  const cnnc_abi_tensor *x = &t->tensors[k];
  if (count >= 0 && (x->dtype != CNNC_ABI_F32 || x->bytes != 4 * count))
    return rt_fail(CNNRT_BAD_MODEL, "%s: training descriptor: %s tensor '%s' must be f32 with %lld elements", m->path, what,
                   x->name, (long long)count);
  return CNNRT_OK;
}

static cnnrt_status rt_check_state(const cnnrt_model *m) {
  const cnnc_abi_train *t = m->tr->t;
  if (t->n_state < 0 || t->n_state > RT_MAX_STATE || (t->n_state > 0 && !t->state) || t->state_bytes < 0)
    return rt_fail(CNNRT_BAD_MODEL, "%s: training descriptor: n_state %d, state_bytes %lld", m->path, t->n_state,
                   (long long)t->state_bytes);
  for (int i = 0; i < t->n_state; i++) {
    const cnnc_abi_state_tensor *x = &t->state[i];
    if (!x->name || !*x->name) return rt_fail(CNNRT_BAD_MODEL, "%s: state tensor %d has no name", m->path, i);
    if (!strcmp(x->name, "step") || !strcmp(x->name, "__metadata__"))
      return rt_fail(CNNRT_BAD_MODEL, "%s: state tensor name '%s' is reserved for checkpoints", m->path, x->name);
    int64_t n = 1;
    for (int k = 0; k < x->rank && k < 4; k++) n = x->dims[k] >= 1 && x->dims[k] < (1ll << 40) / n ? n * x->dims[k] : -1;
    if ((x->dtype != CNNC_ABI_F32 && x->dtype != CNNC_ABI_I32) || x->rank < 0 || x->rank > 4 || n < 1 ||
        x->bytes != 4 * n || x->kind < 0 || x->kind > CNNC_ABI_STATE_GRAD_ACCUM)
      return rt_fail(CNNRT_BAD_MODEL, "%s: state tensor '%s': bad dtype, kind, rank, dims or bytes", m->path, x->name);
    if (x->offset < 0 || x->offset % RT_ALIGN || x->offset > t->state_bytes - x->bytes)
      return rt_fail(CNNRT_BAD_MODEL, "%s: state tensor '%s': offset %lld (+%lld bytes) is not 64-aligned inside %lld bytes",
                     m->path, x->name, (long long)x->offset, (long long)x->bytes, (long long)t->state_bytes);
    for (int j = 0; j < i; j++) {
      const cnnc_abi_state_tensor *y = &t->state[j];
      if (!strcmp(x->name, y->name)) return rt_fail(CNNRT_BAD_MODEL, "%s: state tensor '%s' appears twice", m->path, x->name);
      if (x->offset < y->offset + y->bytes && y->offset < x->offset + x->bytes)
        return rt_fail(CNNRT_BAD_MODEL, "%s: state tensors '%s' and '%s' overlap", m->path, y->name, x->name);
    }
  }
  return CNNRT_OK;
}

static cnnrt_status rt_check_program(const cnnrt_model *m, const cnnc_abi_program *p, const char *what) {
  const cnnc_abi_train *t = m->tr->t;
  if (p->n_stages < 0 || p->n_stages > RT_MAX_STAGES || (p->n_stages > 0 && !p->stages))
    return rt_fail(CNNRT_BAD_MODEL, "%s: training program %s: n_stages %d", m->path, what, p->n_stages);
  for (int k = 0; k < p->n_stages; k++) {
    const cnnc_abi_stage *st = &p->stages[k];
    const char *nm = st->name ? st->name : "?";
    if (!st->run) return rt_fail(CNNRT_BAD_MODEL, "%s: %s stage %d '%s' has no entry function", m->path, what, k, nm);
    if (st->shard < 0 || st->shard >= m->d->n_shards)
      return rt_fail(CNNRT_BAD_MODEL, "%s: %s stage '%s': shard %d, the model has %d", m->path, what, nm, st->shard,
                     m->d->n_shards);
    if (st->n_io < 0 || st->n_inputs < 0 || st->n_inputs > st->n_io || (st->n_io > 0 && !st->io) || st->scratch_bytes < 0)
      return rt_fail(CNNRT_BAD_MODEL, "%s: %s stage '%s': bad io table or scratch size", m->path, what, nm);
    for (int j = 0; j < st->n_io; j++)
      if (st->io[j] < 0 || st->io[j] >= t->n_tensors)
        return rt_fail(CNNRT_BAD_MODEL, "%s: %s stage '%s': io[%d] = %d, there are %d tensors", m->path, what, nm, j,
                       st->io[j], t->n_tensors);
  }
  return CNNRT_OK;
}

static cnnrt_status rt_check_train(const cnnrt_model *m) {
  const cnnc_abi_train *t = m->tr->t;
  const char *p = m->path;
  if (t->magic != CNNC_ABI_TRAIN_MAGIC)
    return rt_fail(CNNRT_BAD_MODEL, "%s: training descriptor magic is 0x%08x, expected 0x%08x", p, t->magic, CNNC_ABI_TRAIN_MAGIC);
  if (t->version != CNNC_ABI_TRAIN_VERSION)
    return rt_fail(CNNRT_ABI_MISMATCH, "%s: training descriptor version %u, this runtime supports version %u", p, t->version,
                   CNNC_ABI_TRAIN_VERSION);
  if (t->struct_size < sizeof *t)
    return rt_fail(CNNRT_ABI_MISMATCH, "%s: training descriptor struct_size %u, expected >= %zu", p, t->struct_size, sizeof *t);
  if (t->n_tensors < 1 || t->n_tensors > RT_MAX_STATE || !t->tensors)
    return rt_fail(CNNRT_BAD_MODEL, "%s: training descriptor: n_tensors %d", p, t->n_tensors);
  for (int k = 0; k < t->n_tensors; k++)
    if (!rt_tensor_ok(&t->tensors[k]))
      return rt_fail(CNNRT_BAD_MODEL, "%s: training tensor %d (%s): bad dtype, rank, dims or bytes", p, k,
                     t->tensors[k].name ? t->tensors[k].name : "?");
  if (t->grad_accum < 1) return rt_fail(CNNRT_BAD_MODEL, "%s: training descriptor: grad_accum %d", p, t->grad_accum);
  int64_t b = m->d->batch_size;
  cnnrt_status s;
  if ((s = rt_check_special(m, t->images, "images", -1)) || (s = rt_check_special(m, t->labels, "labels", b)) ||
      (s = rt_check_special(m, t->lr, "lr", 1)) || (s = rt_check_special(m, t->loss, "loss", 1)) ||
      (s = rt_check_special(m, t->correct, "correct", 1)))
    return s;
  const cnnc_abi_tensor *in = &m->d->tensors[m->d->input], *im = &t->tensors[t->images];
  if (im->dtype != in->dtype || im->bytes != in->bytes)
    return rt_fail(CNNRT_BAD_MODEL, "%s: training images tensor '%s' differs from the model input '%s'", p, im->name, in->name);
  if ((s = rt_check_state(m)) || (s = rt_check_program(m, &t->micro_batch, "micro_batch")) ||
      (s = rt_check_program(m, &t->update, "update")) || (s = rt_check_program(m, &t->eval, "eval")))
    return s;
  if (t->micro_batch.n_stages == 0) return rt_fail(CNNRT_BAD_MODEL, "%s: training program micro_batch has no stages", p);
  if (t->grad_accum > 1 && t->update.n_stages == 0)
    return rt_fail(CNNRT_BAD_MODEL, "%s: grad_accum %d needs an update program", p, t->grad_accum);
  return CNNRT_OK;
}

/* ---- attach / free ---------------------------------------------------------------------- */
static size_t rt_max_stage(const cnnc_abi_program *p, int io) {
  size_t best = 0;
  for (int k = 0; k < p->n_stages; k++) {
    size_t v = io ? (size_t)p->stages[k].n_io : (size_t)p->stages[k].scratch_bytes;
    if (v > best) best = v;
  }
  return best;
}

static cnnrt_status rt_train_alloc(cnnrt_model *m) {
  rt_trainer *tr = m->tr;
  const cnnc_abi_train *t = tr->t;
  tr->state = rt_alloc(m, (size_t)t->state_bytes);
  tr->tbuf = calloc((size_t)t->n_tensors, sizeof *tr->tbuf);
  size_t nio = 1, sb = RT_ALIGN;
  const cnnc_abi_program *progs[3] = {&t->micro_batch, &t->update, &t->eval};
  for (int k = 0; k < 3; k++) {
    if (rt_max_stage(progs[k], 1) > nio) nio = rt_max_stage(progs[k], 1);
    if (rt_max_stage(progs[k], 0) > sb) sb = rt_max_stage(progs[k], 0);
  }
  tr->io = calloc(nio, sizeof *tr->io);
  tr->scratch = rt_alloc(m, sb);
  if (!tr->state || !tr->tbuf || !tr->io || !tr->scratch)
    return rt_fail(CNNRT_OUT_OF_MEMORY, "%s: out of memory for the training state (%lld bytes)", m->path,
                   (long long)t->state_bytes);
  for (int k = 0; k < t->n_tensors; k++) {
    if (k == t->images || k == t->labels) continue;
    if (!(tr->tbuf[k] = rt_alloc(m, (size_t)t->tensors[k].bytes)))
      return rt_fail(CNNRT_OUT_OF_MEMORY, "%s: out of memory for training tensor '%s'", m->path, t->tensors[k].name);
  }
  for (int i = 0; i < t->n_state; i++)
    if (t->state[i].init) memcpy((char *)tr->state + t->state[i].offset, t->state[i].init, (size_t)t->state[i].bytes);
  return CNNRT_OK;
}

cnnrt_status rt_train_attach(cnnrt_model *m) {
  if (m->d->mode != 1) return CNNRT_OK;
  const cnnc_abi_train *t = dlsym(m->dl, CNNC_ABI_TRAIN_SYMBOL);
  if (!t) return CNNRT_OK; /* training calls say why they cannot run */
  if (!(m->tr = calloc(1, sizeof *m->tr))) return rt_fail(CNNRT_OUT_OF_MEMORY, "%s: out of memory", m->path);
  m->tr->t = t;
  m->tr->lr = 0.01;
  cnnrt_status s = rt_check_train(m);
  return s != CNNRT_OK ? s : rt_train_alloc(m);
}

void rt_train_free(cnnrt_model *m) {
  rt_trainer *tr = m->tr;
  if (!tr) return;
  rt_pools_stop(m);
  for (int k = 0; tr->tbuf && k < tr->t->n_tensors; k++)
    if (k != tr->t->images && k != tr->t->labels) rt_free(m, tr->tbuf[k]); /* those two are the caller's */
  free(tr->tbuf);
  free(tr->io);
  free(tr->decay);
  rt_free(m, tr->scratch);
  rt_free(m, tr->state);
  free(tr);
  m->tr = NULL;
}

/* ---- public API ------------------------------------------------------------------------- */
static cnnrt_status rt_need_train(const cnnrt_model *m, const char *fn) {
  if (!m) return rt_fail(CNNRT_INVALID_ARGUMENT, "%s: model is NULL", fn);
  if (m->tr) return CNNRT_OK;
  if (m->d->mode == 1)
    return rt_fail(CNNRT_UNSUPPORTED, "%s: %s: compiled for training but has no %s descriptor (a cnnc without training codegen?)",
                   fn, m->path, CNNC_ABI_TRAIN_SYMBOL);
  return rt_fail(CNNRT_UNSUPPORTED, "%s: %s: an inference model; compile with --mode training to train it", fn, m->path);
}

CNNRT_API int cnnrt_is_training(const cnnrt_model *m) { return m && m->tr; }
CNNRT_API int cnnrt_grad_accum(const cnnrt_model *m) { return m && m->tr ? m->tr->t->grad_accum : 0; }
CNNRT_API int64_t cnnrt_train_steps_done(const cnnrt_model *m) { return m && m->tr ? m->tr->step : 0; }
CNNRT_API double cnnrt_learning_rate(const cnnrt_model *m) { return m && m->tr ? m->tr->lr : 0; }

CNNRT_API cnnrt_status cnnrt_set_learning_rate(cnnrt_model *m, double lr) {
  rt_clear_error();
  cnnrt_status s = rt_need_train(m, "cnnrt_set_learning_rate");
  if (s != CNNRT_OK) return s;
  if (!isfinite(lr) || lr < 0) return rt_fail(CNNRT_INVALID_ARGUMENT, "cnnrt_set_learning_rate: %g is not a finite lr >= 0", lr);
  pthread_mutex_lock(&m->lock);
  m->tr->lr = lr;
  m->tr->have_sched = 0;
  pthread_mutex_unlock(&m->lock);
  return CNNRT_OK;
}

CNNRT_API cnnrt_status cnnrt_set_lr_schedule(cnnrt_model *m, const cnnrt_lr_schedule *s, int64_t steps_per_epoch) {
  rt_clear_error();
  cnnrt_status st = rt_need_train(m, "cnnrt_set_lr_schedule");
  if (st != CNNRT_OK) return st;
  if (s && (steps_per_epoch < 1 || !isfinite(s->base_lr) || s->base_lr < 0 || s->n_decay < 0 || s->n_decay > 4096 ||
            (s->n_decay > 0 && !s->decay_epochs)))
    return rt_fail(CNNRT_INVALID_ARGUMENT, "cnnrt_set_lr_schedule: bad schedule (base_lr %g, %d decay epochs) or %lld steps per epoch",
                   s->base_lr, s->n_decay, (long long)steps_per_epoch);
  double *decay = s && s->n_decay ? malloc((size_t)s->n_decay * sizeof *decay) : NULL;
  if (s && s->n_decay && !decay) return rt_fail(CNNRT_OUT_OF_MEMORY, "cnnrt_set_lr_schedule: out of memory");
  if (decay) memcpy(decay, s->decay_epochs, (size_t)s->n_decay * sizeof *decay);
  pthread_mutex_lock(&m->lock);
  rt_trainer *tr = m->tr;
  free(tr->decay);
  tr->decay = decay;
  tr->have_sched = s != NULL;
  if (s) tr->sched = *s, tr->sched.decay_epochs = decay, tr->steps_per_epoch = steps_per_epoch;
  pthread_mutex_unlock(&m->lock);
  return CNNRT_OK;
}

static cnnrt_status rt_check_batch_args(cnnrt_model *m, const char *fn, const void *images, size_t images_bytes,
                                        const float *labels, int n_mb) {
  cnnrt_status s = rt_need_train(m, fn);
  if (s != CNNRT_OK) return s;
  if (!images || !labels) return rt_fail(CNNRT_INVALID_ARGUMENT, "%s: images or labels is NULL", fn);
  if (n_mb < 1) return rt_fail(CNNRT_INVALID_ARGUMENT, "%s: %d micro-batches, must be >= 1", fn, n_mb);
  size_t per = (size_t)m->tr->t->tensors[m->tr->t->images].bytes;
  if ((size_t)n_mb > SIZE_MAX / per || images_bytes != per * (size_t)n_mb)
    return rt_fail(CNNRT_SHAPE_MISMATCH, "%s: %s: images buffer is %zu bytes; %d micro-batches of %zu bytes need %zu", fn,
                   m->path, images_bytes, n_mb, per, per * (size_t)n_mb);
  return CNNRT_OK;
}

/* Runs prog on micro-batches [0, n_mb), adding the loss and correct counts. */
static cnnrt_status rt_feed_and_run(cnnrt_model *m, const cnnc_abi_program *prog, const void *images, const float *labels,
                                    int i, double *loss_sum, double *correct_sum) {
  rt_trainer *tr = m->tr;
  const cnnc_abi_train *t = tr->t;
  size_t per = (size_t)t->tensors[t->images].bytes;
  int b = m->d->batch_size;
  tr->tbuf[t->images] = (char *)(uintptr_t)images + (size_t)i * per; /* stages only read inputs */
  tr->tbuf[t->labels] = (float *)(uintptr_t)(labels + (size_t)i * (size_t)b);
  *(float *)tr->tbuf[t->lr] = (float)tr->lr;
  cnnrt_status s = rt_run_program(m, prog);
  *loss_sum += *(const float *)tr->tbuf[t->loss];
  *correct_sum += *(const float *)tr->tbuf[t->correct];
  return s;
}

static void rt_report(int n_mb, int b, double loss_sum, double correct_sum, float *loss, float *accuracy) {
  if (loss) *loss = (float)(loss_sum / n_mb);
  if (accuracy) *accuracy = (float)(correct_sum / ((double)n_mb * b));
}

CNNRT_API cnnrt_status cnnrt_train_step(cnnrt_model *m, const void *images, size_t images_bytes, const float *labels,
                                        int n, float *loss, float *accuracy) {
  rt_clear_error();
  if (m && m->tr && (n < 1 || n > INT32_MAX / m->tr->t->grad_accum))
    return rt_fail(CNNRT_INVALID_ARGUMENT, "cnnrt_train_step: n is %d, must be >= 1", n);
  int ga = m && m->tr ? m->tr->t->grad_accum : 1;
  cnnrt_status s = rt_check_batch_args(m, "cnnrt_train_step", images, images_bytes, labels, n * ga);
  if (s != CNNRT_OK) return s;
  const cnnc_abi_train *t = m->tr->t;
  double loss_sum = 0, correct_sum = 0;
  pthread_mutex_lock(&m->lock);
  s = rt_pools_ready(m);
  for (int u = 0; u < n && s == CNNRT_OK; u++) {
    rt_trainer *tr = m->tr;
    if (tr->have_sched) tr->lr = cnnrt_lr_at(&tr->sched, (double)tr->step / (double)tr->steps_per_epoch);
    for (int a = 0; a < ga && s == CNNRT_OK; a++)
      s = rt_feed_and_run(m, &t->micro_batch, images, labels, u * ga + a, &loss_sum, &correct_sum);
    if (s == CNNRT_OK) s = rt_run_program(m, &t->update);
    if (s == CNNRT_OK) m->tr->step++;
  }
  pthread_mutex_unlock(&m->lock);
  if (s == CNNRT_OK) rt_report(n * ga, m->d->batch_size, loss_sum, correct_sum, loss, accuracy);
  return s;
}

CNNRT_API cnnrt_status cnnrt_evaluate(cnnrt_model *m, const void *images, size_t images_bytes, const float *labels,
                                      int n_batches, float *loss, float *accuracy) {
  rt_clear_error();
  cnnrt_status s = rt_check_batch_args(m, "cnnrt_evaluate", images, images_bytes, labels, n_batches);
  if (s != CNNRT_OK) return s;
  if (m->tr->t->eval.n_stages == 0)
    return rt_fail(CNNRT_UNSUPPORTED, "cnnrt_evaluate: %s has no eval program", m->path);
  double loss_sum = 0, correct_sum = 0;
  pthread_mutex_lock(&m->lock);
  s = rt_pools_ready(m);
  for (int i = 0; i < n_batches && s == CNNRT_OK; i++)
    s = rt_feed_and_run(m, &m->tr->t->eval, images, labels, i, &loss_sum, &correct_sum);
  pthread_mutex_unlock(&m->lock);
  if (s == CNNRT_OK) rt_report(n_batches, m->d->batch_size, loss_sum, correct_sum, loss, accuracy);
  return s;
}

/* ---- state access ----------------------------------------------------------------------- */
int rt_state_find(const cnnc_abi_train *t, const char *name) {
  for (int i = 0; name && i < t->n_state; i++)
    if (!strcmp(t->state[i].name, name)) return i;
  return -1;
}

CNNRT_API int cnnrt_num_state(const cnnrt_model *m) { return m && m->tr ? m->tr->t->n_state : 0; }

CNNRT_API cnnrt_status cnnrt_state_info_at(const cnnrt_model *m, int index, cnnrt_state_info *out) {
  rt_clear_error();
  cnnrt_status s = rt_need_train(m, "cnnrt_state_info_at");
  if (s != CNNRT_OK) return s;
  if (!out || index < 0 || index >= m->tr->t->n_state)
    return rt_fail(CNNRT_INVALID_ARGUMENT, "cnnrt_state_info_at: index %d of %d (or out NULL)", index, m->tr->t->n_state);
  const cnnc_abi_state_tensor *x = &m->tr->t->state[index];
  memset(out, 0, sizeof *out);
  out->name = x->name;
  out->dtype = (cnnrt_dtype)x->dtype;
  out->kind = (cnnrt_state_kind)x->kind;
  out->rank = x->rank;
  for (int k = 0; k < x->rank; k++) out->dims[k] = x->dims[k];
  out->bytes = (size_t)x->bytes;
  return CNNRT_OK;
}

static cnnrt_status rt_state_copy(cnnrt_model *m, const char *fn, const char *name, void *buf, size_t bytes, int to_state) {
  rt_clear_error();
  cnnrt_status s = rt_need_train(m, fn);
  if (s != CNNRT_OK) return s;
  int i = rt_state_find(m->tr->t, name);
  if (i < 0 || !buf) return rt_fail(CNNRT_INVALID_ARGUMENT, "%s: no state tensor '%s' in %s (or buffer NULL)", fn, name ? name : "(null)", m->path);
  const cnnc_abi_state_tensor *x = &m->tr->t->state[i];
  if (bytes != (size_t)x->bytes)
    return rt_fail(CNNRT_SHAPE_MISMATCH, "%s: state tensor '%s' has %lld bytes, buffer %zu", fn, name, (long long)x->bytes, bytes);
  pthread_mutex_lock(&m->lock);
  char *p = (char *)m->tr->state + x->offset;
  if (to_state) memcpy(p, buf, bytes);
  else memcpy(buf, p, bytes);
  pthread_mutex_unlock(&m->lock);
  return CNNRT_OK;
}

CNNRT_API cnnrt_status cnnrt_get_state(cnnrt_model *m, const char *name, void *out, size_t bytes) {
  return rt_state_copy(m, "cnnrt_get_state", name, out, bytes, 0);
}
CNNRT_API cnnrt_status cnnrt_set_state(cnnrt_model *m, const char *name, const void *in, size_t bytes) {
  return rt_state_copy(m, "cnnrt_set_state", name, (void *)(uintptr_t)in, bytes, 1);
}
