/* rt_api.c — the query, thread-setting and inference entry points of the public API:
 * argument checks with clear messages, then the executor (rt_exec.c) under the model lock. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt_internal.h"

#define RT_MAX_THREADS 1024

static int rt_null_model(const cnnrt_model *m, const char *fn) {
  if (m) return 0;
  rt_fail(CNNRT_INVALID_ARGUMENT, "%s: model is NULL", fn);
  return 1;
}

CNNRT_API const char *cnnrt_model_name(const cnnrt_model *m) {
  return rt_null_model(m, "cnnrt_model_name") ? NULL : m->d->model_name;
}
CNNRT_API int cnnrt_batch_size(const cnnrt_model *m) { return rt_null_model(m, "cnnrt_batch_size") ? 0 : m->d->batch_size; }
CNNRT_API int cnnrt_num_shards(const cnnrt_model *m) { return rt_null_model(m, "cnnrt_num_shards") ? 0 : m->d->n_shards; }
CNNRT_API int cnnrt_num_outputs(const cnnrt_model *m) {
  return rt_null_model(m, "cnnrt_num_outputs") ? 0 : m->d->n_outputs;
}
CNNRT_API size_t cnnrt_input_bytes(const cnnrt_model *m) {
  return rt_null_model(m, "cnnrt_input_bytes") ? 0 : (size_t)m->d->tensors[m->d->input].bytes;
}
CNNRT_API size_t cnnrt_output_bytes(const cnnrt_model *m) { return rt_null_model(m, "cnnrt_output_bytes") ? 0 : m->out_bytes; }
CNNRT_API const char *cnnrt_options_json(const cnnrt_model *m) {
  if (rt_null_model(m, "cnnrt_options_json")) return NULL;
  return m->d->options_json ? m->d->options_json : "{}";
}

CNNRT_API const char *cnnrt_compiler_version(const cnnrt_model *m) {
  if (rt_null_model(m, "cnnrt_compiler_version")) return NULL;
  return m->d->compiler_version ? m->d->compiler_version : "";
}
CNNRT_API double cnnrt_model_flops(const cnnrt_model *m) { return rt_null_model(m, "cnnrt_model_flops") ? 0 : m->d->total_flops; }

static void rt_tensor_info(const cnnc_abi_tensor *t, cnnrt_tensor_info *out) {
  memset(out, 0, sizeof *out);
  out->name = t->name;
  out->dtype = (cnnrt_dtype)t->dtype;
  out->rank = t->rank;
  for (int k = 0; k < t->rank; k++) out->dims[k] = t->dims[k];
  out->bytes = (size_t)t->bytes;
}

CNNRT_API cnnrt_status cnnrt_input_info(const cnnrt_model *m, cnnrt_tensor_info *out) {
  rt_clear_error();
  if (rt_null_model(m, "cnnrt_input_info")) return CNNRT_INVALID_ARGUMENT;
  if (!out) return rt_fail(CNNRT_INVALID_ARGUMENT, "cnnrt_input_info: out is NULL");
  rt_tensor_info(&m->d->tensors[m->d->input], out);
  return CNNRT_OK;
}

CNNRT_API cnnrt_status cnnrt_output_info(const cnnrt_model *m, int index, cnnrt_tensor_info *out) {
  rt_clear_error();
  if (rt_null_model(m, "cnnrt_output_info")) return CNNRT_INVALID_ARGUMENT;
  if (!out) return rt_fail(CNNRT_INVALID_ARGUMENT, "cnnrt_output_info: out is NULL");
  if (index < 0 || index >= m->d->n_outputs)
    return rt_fail(CNNRT_INVALID_ARGUMENT, "cnnrt_output_info: output %d, the model has %d", index, m->d->n_outputs);
  rt_tensor_info(&m->d->tensors[m->d->outputs[index]], out);
  return CNNRT_OK;
}

/* ---- threads ---------------------------------------------------------------------------- */
static cnnrt_status rt_check_shard_arg(const cnnrt_model *m, int shard, const char *fn) {
  if (rt_null_model(m, fn)) return CNNRT_INVALID_ARGUMENT;
  if (shard < -1 || shard >= m->d->n_shards)
    return rt_fail(CNNRT_INVALID_ARGUMENT, "%s: shard %d, the model has %d (-1 = all)", fn, shard, m->d->n_shards);
  return CNNRT_OK;
}

CNNRT_API cnnrt_status cnnrt_set_threads(cnnrt_model *m, int shard, int nthreads) {
  rt_clear_error();
  if (rt_check_shard_arg(m, shard, "cnnrt_set_threads") != CNNRT_OK) return CNNRT_INVALID_ARGUMENT;
  if (nthreads < 1 || nthreads > RT_MAX_THREADS)
    return rt_fail(CNNRT_INVALID_ARGUMENT, "cnnrt_set_threads: %d threads, must be in 1..%d", nthreads, RT_MAX_THREADS);
  pthread_mutex_lock(&m->lock);
  rt_exec_stop(m);
  for (int s = 0; s < m->d->n_shards; s++)
    if (shard == -1 || s == shard) m->threads[s] = nthreads;
  pthread_mutex_unlock(&m->lock);
  return CNNRT_OK;
}

CNNRT_API cnnrt_status cnnrt_shard_info(const cnnrt_model *m, int shard, cnnrt_shard_summary *out) {
  rt_clear_error();
  if (rt_check_shard_arg(m, shard, "cnnrt_shard_info") != CNNRT_OK) return CNNRT_INVALID_ARGUMENT;
  if (shard < 0) return rt_fail(CNNRT_INVALID_ARGUMENT, "cnnrt_shard_info: shard -1");
  if (!out) return rt_fail(CNNRT_INVALID_ARGUMENT, "cnnrt_shard_info: out is NULL");
  const cnnc_abi_shard *sh = &m->d->shards[shard];
  memset(out, 0, sizeof *out);
  out->first_layer = sh->first_layer ? sh->first_layer : "";
  out->last_layer = sh->last_layer ? sh->last_layer : "";
  out->n_ops = sh->n_ops;
  out->n_inputs = sh->n_inputs;
  out->n_outputs = sh->n_io - sh->n_inputs;
  out->scratch_bytes = (size_t)sh->scratch_bytes;
  for (int k = 0; k < sh->n_ops; k++) out->flops += sh->op_flops[k];
  out->threads = m->threads[shard];
  out->micro_batches = atomic_load(&m->runs[shard]);
  out->busy_seconds = (double)atomic_load(&m->busy_ns[shard]) * 1e-9;
  return CNNRT_OK;
}

CNNRT_API int cnnrt_threads(const cnnrt_model *m, int shard) {
  if (rt_check_shard_arg(m, shard, "cnnrt_threads") != CNNRT_OK || shard < 0) return 0;
  return m->threads[shard];
}

static cnnrt_status rt_check_cpus(const int *cpus, int n_cpus) {
  if (n_cpus < 0 || n_cpus > CPU_SETSIZE || (n_cpus > 0 && !cpus))
    return rt_fail(CNNRT_INVALID_ARGUMENT, "cnnrt_set_cpus: %d cpus at %p", n_cpus, (const void *)cpus);
  cpu_set_t set;
  if (n_cpus > 0 && sched_getaffinity(0, sizeof set, &set) != 0)
    return rt_fail(CNNRT_INTERNAL, "cnnrt_set_cpus: cannot read this process's cpu affinity");
  for (int k = 0; k < n_cpus; k++)
    if (cpus[k] < 0 || cpus[k] >= CPU_SETSIZE || !CPU_ISSET(cpus[k], &set))
      return rt_fail(CNNRT_INVALID_ARGUMENT, "cnnrt_set_cpus: cpu %d is not available to this process", cpus[k]);
  return CNNRT_OK;
}

CNNRT_API cnnrt_status cnnrt_set_cpus(cnnrt_model *m, int shard, const int *cpus, int n_cpus) {
  rt_clear_error();
  if (rt_check_shard_arg(m, shard, "cnnrt_set_cpus") != CNNRT_OK) return CNNRT_INVALID_ARGUMENT;
  cnnrt_status s = rt_check_cpus(cpus, n_cpus);
  if (s != CNNRT_OK) return s;
  pthread_mutex_lock(&m->lock);
  rt_exec_stop(m);
  for (int k = 0; k < m->d->n_shards && s == CNNRT_OK; k++) {
    if (shard != -1 && k != shard) continue;
    free(m->cpus[k]);
    m->cpus[k] = NULL;
    m->n_cpus[k] = 0;
    if (n_cpus == 0) continue;
    if (!(m->cpus[k] = malloc((size_t)n_cpus * sizeof *cpus))) {
      s = rt_fail(CNNRT_OUT_OF_MEMORY, "cnnrt_set_cpus: out of memory");
      break;
    }
    memcpy(m->cpus[k], cpus, (size_t)n_cpus * sizeof *cpus);
    m->n_cpus[k] = n_cpus;
  }
  pthread_mutex_unlock(&m->lock);
  return s;
}

/* ---- inference -------------------------------------------------------------------------- */
static void rt_shape_str(const cnnc_abi_tensor *t, char *buf, size_t size) {
  int n = snprintf(buf, size, "%s [", rt_dtype_name(t->dtype));
  for (int k = 0; k < t->rank && n > 0 && (size_t)n < size; k++)
    n += snprintf(buf + n, size - (size_t)n, "%s%lld", k ? "," : "", (long long)t->dims[k]);
  if (n > 0 && (size_t)n < size) snprintf(buf + n, size - (size_t)n, "]");
}

/* got must be n micro-batches of per bytes (per >= 1: tensors are validated). */
static cnnrt_status rt_check_bytes(const cnnrt_model *m, const char *what, size_t got, size_t per, int n,
                                   const char *shape) {
  if ((size_t)n > SIZE_MAX / per)
    return rt_fail(CNNRT_SHAPE_MISMATCH, "%s: %d micro-batches of %zu bytes overflow size_t", m->path, n, per);
  if (got == per * (size_t)n) return CNNRT_OK;
  return rt_fail(CNNRT_SHAPE_MISMATCH, "%s: %s buffer is %zu bytes; %d micro-batch%s of %s (%zu bytes each) need %zu",
                 m->path, what, got, n, n == 1 ? "" : "es", shape, per, per * (size_t)n);
}

static cnnrt_status rt_check_infer(cnnrt_model *m, const void *input, size_t input_bytes, void *output,
                                   size_t output_bytes, int n) {
  if (rt_null_model(m, "cnnrt_infer")) return CNNRT_INVALID_ARGUMENT;
  if (!input) return rt_fail(CNNRT_INVALID_ARGUMENT, "cnnrt_infer: input is NULL");
  if (!output) return rt_fail(CNNRT_INVALID_ARGUMENT, "cnnrt_infer: output is NULL");
  if (n < 1) return rt_fail(CNNRT_INVALID_ARGUMENT, "cnnrt_infer: n_batches is %d, must be >= 1", n);
  if (m->d->mode != 0)
    return rt_fail(CNNRT_UNSUPPORTED, "%s: a training model; cnnrt_infer runs models compiled for inference", m->path);
  const cnnc_abi_model *d = m->d;
  char in_shape[128], out_shape[128];
  rt_shape_str(&d->tensors[d->input], in_shape, sizeof in_shape);
  if (d->n_outputs == 1) rt_shape_str(&d->tensors[d->outputs[0]], out_shape, sizeof out_shape);
  else snprintf(out_shape, sizeof out_shape, "%d outputs", d->n_outputs);
  if (rt_check_bytes(m, "input", input_bytes, cnnrt_input_bytes(m), n, in_shape) != CNNRT_OK ||
      rt_check_bytes(m, "output", output_bytes, m->out_bytes, n, out_shape) != CNNRT_OK)
    return CNNRT_SHAPE_MISMATCH;
  if (d->tensors[d->input].dtype == CNNC_ABI_I32) { /* carried as f32 values inside: exact up to 2^24 */
    const unsigned char *b = input; /* the caller's buffer: any alignment */
    size_t k = input_bytes / sizeof(int32_t);
    for (size_t i = 0; i < k; i++) {
      int32_t v;
      memcpy(&v, b + i * sizeof v, sizeof v);
      if (v > (1 << 24) || v < -(1 << 24))
        return rt_fail(CNNRT_INVALID_ARGUMENT, "%s: input element %zu is %ld; the model's i32 input holds integers of "
                       "magnitude up to 2^24 (16777216), which it computes exactly", m->path, i, (long)v);
    }
  }
  return CNNRT_OK;
}

CNNRT_API cnnrt_status cnnrt_infer(cnnrt_model *m, const void *input, size_t input_bytes, void *output,
                                   size_t output_bytes, int n_batches) {
  rt_clear_error();
  cnnrt_status s = rt_check_infer(m, input, input_bytes, output, output_bytes, n_batches);
  if (s != CNNRT_OK) return s;
  pthread_mutex_lock(&m->lock);
  if (!m->exec) s = rt_exec_start(m);
  if (s == CNNRT_OK) s = rt_exec_run(m, input, output, n_batches);
  pthread_mutex_unlock(&m->lock);
  return s;
}
