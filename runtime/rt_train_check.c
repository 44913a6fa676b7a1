/* rt_train_check.c — validation of a training model's descriptor (cnnc_abi.h, "training
 * extension") at open: tensors, state slices, programs and their stages, the special tensors,
 * replicas, accumulation and schedule.  A bad descriptor is CNNRT_BAD_MODEL (or
 * CNNRT_ABI_MISMATCH) naming what is wrong; nothing here runs model code. */
#include <dlfcn.h>
#include <string.h>

#include "rt_internal.h"

#define RT_MAX_STATE (1 << 20)
#define RT_MAX_STAGES 65536

/* ---- descriptor validation -------------------------------------------------------------- */
static cnnrt_status rt_check_bn_stats(const cnnrt_model *m);
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
  if (t->n_state < 0 || t->n_state > RT_MAX_STATE || (t->n_state > 0 && !RT_IN_MODEL(t, t->state, t->n_state)) ||
      t->state_bytes < 0)
    return rt_fail(CNNRT_BAD_MODEL, "%s: training descriptor: n_state %d, state_bytes %lld (or the table lies outside the "
                   "model file)", m->path, t->n_state, (long long)t->state_bytes);
  for (int i = 0; i < t->n_state; i++) {
    const cnnc_abi_state_tensor *x = &t->state[i];
    if (!rt_in_model(t, x->name, 1, 1) || !*x->name) return rt_fail(CNNRT_BAD_MODEL, "%s: state tensor %d has no name", m->path, i);
    if (x->init && (x->bytes < 0 || !rt_in_model(t, x->init, (size_t)x->bytes, 1)))
      return rt_fail(CNNRT_BAD_MODEL, "%s: state tensor '%s': init data outside the model file", m->path, x->name);
    if (!strcmp(x->name, "step") || !strcmp(x->name, "__metadata__"))
      return rt_fail(CNNRT_BAD_MODEL, "%s: state tensor name '%s' is reserved for checkpoints", m->path, x->name);
    int64_t n = 1;
    for (int k = 0; k < x->rank && k < 4; k++) n = x->dims[k] >= 1 && x->dims[k] < (1ll << 40) / n ? n * x->dims[k] : -1;
    /* gradient accumulators may be 16-bit (--enable-half-partials), everything else is 4-byte */
    int h16 = x->kind == CNNC_ABI_STATE_GRAD_ACCUM && (x->dtype == CNNC_ABI_BF16 || x->dtype == CNNC_ABI_F16);
    if ((x->dtype != CNNC_ABI_F32 && x->dtype != CNNC_ABI_I32 && !h16) || x->rank < 0 || x->rank > 4 || n < 1 ||
        x->bytes != (h16 ? 2 : 4) * n || x->kind < 0 || x->kind > CNNC_ABI_STATE_GRAD_ACCUM)
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
  if (p->n_stages < 0 || p->n_stages > RT_MAX_STAGES || (p->n_stages > 0 && !RT_IN_MODEL(t, p->stages, p->n_stages)))
    return rt_fail(CNNRT_BAD_MODEL, "%s: training program %s: n_stages %d (or the table lies outside the model file)", m->path,
                   what, p->n_stages);
  for (int k = 0; k < p->n_stages; k++) {
    const cnnc_abi_stage *st = &p->stages[k];
    if (st->name && !rt_in_model(t, st->name, 1, 1))
      return rt_fail(CNNRT_BAD_MODEL, "%s: %s stage %d: name outside the model file", m->path, what, k);
    const char *nm = st->name ? st->name : "?";
    if (!rt_in_model(t, (const void *)(uintptr_t)st->run, 1, 1))
      return rt_fail(CNNRT_BAD_MODEL, "%s: %s stage %d '%s' has no entry function in the model file", m->path, what, k, nm);
    if (st->shard < 0 || st->shard >= m->d->n_shards)
      return rt_fail(CNNRT_BAD_MODEL, "%s: %s stage '%s': shard %d, the model has %d", m->path, what, nm, st->shard,
                     m->d->n_shards);
    if (st->n_io < 0 || st->n_inputs < 0 || st->n_inputs > st->n_io || (st->n_io > 0 && !RT_IN_MODEL(t, st->io, st->n_io)) ||
        st->scratch_bytes < 0)
      return rt_fail(CNNRT_BAD_MODEL, "%s: %s stage '%s': bad io table or scratch size", m->path, what, nm);
    for (int j = 0; j < st->n_io; j++)
      if (st->io[j] < 0 || st->io[j] >= t->n_tensors)
        return rt_fail(CNNRT_BAD_MODEL, "%s: %s stage '%s': io[%d] = %d, there are %d tensors", m->path, what, nm, j,
                       st->io[j], t->n_tensors);
  }
  return CNNRT_OK;
}

cnnrt_status rt_check_train(const cnnrt_model *m) {
  const cnnc_abi_train *t = m->tr->t;
  const char *p = m->path;
  if (t->magic != CNNC_ABI_TRAIN_MAGIC)
    return rt_fail(CNNRT_BAD_MODEL, "%s: training descriptor magic is 0x%08x, expected 0x%08x", p, t->magic, CNNC_ABI_TRAIN_MAGIC);
  if (t->version != CNNC_ABI_TRAIN_VERSION)
    return rt_fail(CNNRT_ABI_MISMATCH, "%s: training descriptor version %u, this runtime supports version %u", p, t->version,
                   CNNC_ABI_TRAIN_VERSION);
  if (t->struct_size < sizeof *t)
    return rt_fail(CNNRT_ABI_MISMATCH, "%s: training descriptor struct_size %u, expected >= %zu", p, t->struct_size, sizeof *t);
  if (t->n_tensors < 1 || t->n_tensors > RT_MAX_STATE || !RT_IN_MODEL(t, t->tensors, t->n_tensors))
    return rt_fail(CNNRT_BAD_MODEL, "%s: training descriptor: n_tensors %d (or the table lies outside the model file)", p,
                   t->n_tensors);
  if (t->optimizer_json && !rt_in_model(t, t->optimizer_json, 1, 1))
    return rt_fail(CNNRT_BAD_MODEL, "%s: training descriptor: optimizer_json points outside the model file", p);
  for (int k = 0; k < t->n_tensors; k++)
    if (!rt_in_model(t, t->tensors[k].name, 1, 1) || !rt_tensor_ok(&t->tensors[k]))
      return rt_fail(CNNRT_BAD_MODEL, "%s: training tensor %d: bad name, dtype, rank, dims or bytes", p, k);
  if (t->grad_accum < 1) return rt_fail(CNNRT_BAD_MODEL, "%s: training descriptor: grad_accum %d", p, t->grad_accum);
  int64_t b = m->d->batch_size;
  cnnrt_status s;
  /* labels: b class ids, or b rows (a, b, lam) of a --mixed-labels model */
  int64_t lw = t->labels >= 0 && t->labels < t->n_tensors && t->tensors[t->labels].bytes == 12 * b ? 3 : 1;
  if ((s = rt_check_special(m, t->images, "images", -1)) || (s = rt_check_special(m, t->labels, "labels", lw * b)) ||
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
  if (t->replicas < 0 || t->replicas > 4096 || t->micro_batch.n_stages % rt_train_replicas(t) != 0 || t->n_fwd_stages < 0 ||
      t->n_fwd_stages > t->micro_batch.n_stages / rt_train_replicas(t) || t->schedule < 0 || t->schedule > CNNC_ABI_SCHED_INTERLEAVED ||
      t->grad_accum > 65536)
    return rt_fail(CNNRT_BAD_MODEL, "%s: training descriptor: replicas %d, grad_accum %d, %d micro_batch stages, %d forward, schedule %d",
                   p, t->replicas, t->grad_accum, t->micro_batch.n_stages, t->n_fwd_stages, t->schedule);
  for (int k = t->micro_batch.n_stages / rt_train_replicas(t); k < t->micro_batch.n_stages; k++)
    if (t->micro_batch.stages[k].shard != t->micro_batch.stages[k % (t->micro_batch.n_stages / rt_train_replicas(t))].shard)
      return rt_fail(CNNRT_BAD_MODEL, "%s: micro_batch stage %d: shard %d differs from replica 0's stage %d", p, k,
                     t->micro_batch.stages[k].shard, k % (t->micro_batch.n_stages / rt_train_replicas(t)));
  if (t->grad_accum > 1 && t->update.n_stages == 0)
    return rt_fail(CNNRT_BAD_MODEL, "%s: grad_accum %d needs an update program", p, t->grad_accum);
  return rt_check_bn_stats(m);
}

/* The batch-statistics records of the training batch norms (CNNC_ABI_BN_STATS_SYMBOL, optional):
 * the tensor is the one after "correct", each record inside it, each pair of state tensors f32
 * BUFFER slices of `channels`, each stage a forward stage (or -1 when the split is unknown). */
static cnnrt_status rt_check_bn_stats(const cnnrt_model *m) {
  const cnnc_abi_train *t = m->tr->t;
  const cnnc_abi_bn_stats *b = dlsym(m->dl, CNNC_ABI_BN_STATS_SYMBOL);
  m->tr->bn = NULL;
  if (!b) return CNNRT_OK;
  const char *p = m->path;
  if (!RT_IN_MODEL(t, b, 1) || b->magic != CNNC_ABI_BN_STATS_MAGIC || b->n < 1 || b->n > RT_MAX_STATE ||
      b->tensor != t->correct + 1 || b->tensor >= t->n_tensors || strcmp(t->tensors[b->tensor].name, CNNC_ABI_BN_STATS_TENSOR) ||
      !RT_IN_MODEL(t, b->stats, b->n))
    return rt_fail(CNNRT_BAD_MODEL, "%s: %s: bad magic, count, tensor or table", p, CNNC_ABI_BN_STATS_SYMBOL);
  int64_t doubles = t->tensors[b->tensor].bytes / 8;
  for (int i = 0; i < b->n; i++) {
    const cnnc_abi_bn_stat *e = &b->stats[i];
    int ok = e->channels >= 1 && e->offset >= 0 && e->offset <= doubles - 3 * (int64_t)e->channels &&
             e->stage >= (t->n_fwd_stages > 0 ? 0 : -1) && e->stage < t->n_fwd_stages + (t->n_fwd_stages == 0);
    for (int q = 0; q < 2 && ok; q++) {
      int k = q ? e->var_state : e->mean_state;
      ok = k >= 0 && k < t->n_state && t->state[k].kind == CNNC_ABI_STATE_BUFFER && t->state[k].dtype == CNNC_ABI_F32 &&
           t->state[k].bytes == 4 * (int64_t)e->channels;
    }
    if (!ok) return rt_fail(CNNRT_BAD_MODEL, "%s: %s: entry %d: bad state tensors, channels, stage or offset", p, CNNC_ABI_BN_STATS_SYMBOL, i);
  }
  m->tr->bn = b;
  return CNNRT_OK;
}

