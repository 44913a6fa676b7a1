/* rt_describe.c — cnnrt_describe_json: the whole descriptor (tensors, shards and their ops,
 * compile options) plus the current thread settings and runtime options, as one JSON object. */
#include <math.h>
#include <stdlib.h>

#include "rt_internal.h"

static void rt_j_double(rt_str *b, double v) {
  if (isfinite(v)) rt_str_printf(b, "%.17g", v);
  else rt_str_printf(b, "null");
}

static void rt_j_tensor(rt_str *b, const cnnrt_model *m, int t) {
  const cnnc_abi_tensor *x = &m->d->tensors[t];
  rt_str_printf(b, "{\"index\": %d, \"name\": ", t);
  rt_str_json_string(b, x->name);
  rt_str_printf(b, ", \"dtype\": \"%s\", \"shape\": [", rt_dtype_name(x->dtype));
  for (int k = 0; k < x->rank; k++) rt_str_printf(b, "%s%lld", k ? ", " : "", (long long)x->dims[k]);
  rt_str_printf(b, "], \"bytes\": %lld, \"producer\": %d}", (long long)x->bytes, m->producer[t]);
}

static void rt_j_names(rt_str *b, const cnnrt_model *m, const int32_t *idx, int n) {
  rt_str_printf(b, "[");
  for (int k = 0; k < n; k++) {
    rt_str_printf(b, "%s", k ? ", " : "");
    rt_str_json_string(b, m->d->tensors[idx[k]].name);
  }
  rt_str_printf(b, "]");
}

static void rt_j_ops(rt_str *b, const cnnc_abi_shard *sh) {
  rt_str_printf(b, "[");
  for (int k = 0; k < sh->n_ops; k++) {
    rt_str_printf(b, "%s{\"name\": ", k ? ", " : "");
    rt_str_json_string(b, sh->op_names[k]);
    rt_str_printf(b, ", \"kernel\": ");
    rt_str_json_string(b, sh->kernel_names[k]);
    rt_str_printf(b, ", \"flops\": ");
    rt_j_double(b, sh->op_flops[k]);
    rt_str_printf(b, "}");
  }
  rt_str_printf(b, "]");
}

static void rt_j_shard(rt_str *b, const cnnrt_model *m, int s) {
  const cnnc_abi_shard *sh = &m->d->shards[s];
  rt_str_printf(b, "{\"index\": %d, \"first_layer\": ", s);
  rt_str_json_string(b, sh->first_layer);
  rt_str_printf(b, ", \"last_layer\": ");
  rt_str_json_string(b, sh->last_layer);
  rt_str_printf(b, ", \"inputs\": ");
  rt_j_names(b, m, sh->io, sh->n_inputs);
  rt_str_printf(b, ", \"outputs\": ");
  rt_j_names(b, m, sh->io + sh->n_inputs, sh->n_io - sh->n_inputs);
  rt_str_printf(b, ", \"scratch_bytes\": %lld, \"threads\": %d, \"cpus\": [", (long long)sh->scratch_bytes,
                m->threads[s]);
  for (int k = 0; k < m->n_cpus[s]; k++) rt_str_printf(b, "%s%d", k ? ", " : "", m->cpus[s][k]);
  rt_str_printf(b, "], \"ops\": ");
  rt_j_ops(b, sh);
  rt_str_printf(b, "}");
}

/* "runtime": the cnnrt_options the model runs with; replica_mode as it runs (parallel only
 * where the model allows it, rt_train_replica_parallel). */
static void rt_j_runtime(rt_str *b, const cnnrt_model *m) {
  static const char *const huge[3] = {"inference", "off", "all"};
  const cnnrt_options *o = &m->opts;
  rt_str_printf(b, "\"runtime\": {\"threads_per_shard\": %d, \"pin\": %s, \"allocator\": \"%s\", \"spin_us\": %d, "
                "\"hugepages\": \"%s\", \"replica_mode\": \"%s\", \"allow_nonfinite\": %s}", o->threads_per_shard,
                o->pin ? "true" : "false", o->allocator ? "user" : "default", o->spin_us, huge[o->hugepages % 3],
                rt_train_replica_parallel(m) ? "parallel" : "shared", o->allow_nonfinite ? "true" : "false");
}

static void rt_j_model(rt_str *b, const cnnrt_model *m) {
  const cnnc_abi_model *d = m->d;
  rt_str_printf(b, "{\"model\": ");
  rt_str_json_string(b, d->model_name);
  rt_str_printf(b, ", \"compiler_version\": ");
  rt_str_json_string(b, d->compiler_version);
  rt_str_printf(b, ", \"abi_version\": %u, \"mode\": \"%s\", \"batch_size\": %d, \"total_flops\": ", d->abi_version,
                d->mode ? "training" : "inference", d->batch_size);
  rt_j_double(b, d->total_flops);
  rt_str_printf(b, ", \"input\": %d, \"outputs\": [", d->input);
  for (int k = 0; k < d->n_outputs; k++) rt_str_printf(b, "%s%d", k ? ", " : "", d->outputs[k]);
  rt_str_printf(b, "], \"tensors\": [");
  for (int t = 0; t < d->n_tensors; t++) {
    rt_str_printf(b, "%s", t ? ", " : "");
    rt_j_tensor(b, m, t);
  }
  rt_str_printf(b, "], \"shards\": [");
  for (int s = 0; s < d->n_shards; s++) {
    rt_str_printf(b, "%s", s ? ", " : "");
    rt_j_shard(b, m, s);
  }
  rt_str_printf(b, "], \"options\": %s, ", d->options_json ? d->options_json : "{}");
  rt_j_runtime(b, m);
  rt_str_printf(b, "}");
}

CNNRT_API const char *cnnrt_describe_json(cnnrt_model *m) {
  rt_clear_error();
  if (!m) {
    rt_fail(CNNRT_INVALID_ARGUMENT, "cnnrt_describe_json: model is NULL");
    return NULL;
  }
  rt_str b = {0};
  pthread_mutex_lock(&m->lock);
  rt_j_model(&b, m);
  if (b.oom) {
    free(b.s);
    pthread_mutex_unlock(&m->lock);
    rt_fail(CNNRT_OUT_OF_MEMORY, "%s: out of memory", m->path);
    return NULL;
  }
  free(m->describe);
  m->describe = b.s;
  pthread_mutex_unlock(&m->lock);
  return b.s;
}
