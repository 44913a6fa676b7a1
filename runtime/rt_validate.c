/* rt_validate.c — consistency checks of a model descriptor's tables (after the magic and
 * ABI version were accepted): strings and arrays point into the .so, indices are in range,
 * byte counts match shapes, and data flows forward from the input through the shards to the
 * outputs.  A bad descriptor yields CNNRT_BAD_MODEL naming the file and the field. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt_internal.h"

#define RT_MAX_TENSORS (1 << 20)
#define RT_MAX_SHARDS 4096
#define RT_MAX_OPS (1 << 24)

typedef struct rt_vctx {
  const cnnc_abi_model *d;
  const char *path;
  const void *base; /* load address of the .so holding d; NULL = cannot check pointers */
} rt_vctx;

size_t rt_dtype_size(int32_t dtype) {
  switch (dtype) {
  case CNNC_ABI_F32: return 4;
  case CNNC_ABI_BF16: return 2;
  case CNNC_ABI_F16: return 2;
  case CNNC_ABI_U8: return 1;
  case CNNC_ABI_I32: return 4;
  case CNNC_ABI_I8: return 1;
  case CNNC_ABI_I64: return 8;
  }
  return 0;
}

const char *rt_dtype_name(int32_t dtype) {
  static const char *const names[] = {"f32", "bf16", "f16", "u8", "i32", "i8", "i64"};
  return rt_dtype_size(dtype) ? names[dtype] : "?";
}

/* Nonzero if [p, p+bytes) lies in the .so that holds the descriptor. */
static int rt_in_object(const rt_vctx *v, const void *p, size_t bytes) {
  if (!p) return 0;
  if (!v->base) return 1;
  Dl_info a, b;
  const char *last = (const char *)p + (bytes ? bytes - 1 : 0);
  if (!dladdr(p, &a) || a.dli_fbase != v->base) return 0;
  return dladdr(last, &b) && b.dli_fbase == v->base;
}

/* p: bytes inside the model file, aligned to align (an array of pointers read misaligned is
 * undefined behaviour, and a sign of a corrupt descriptor). */
static cnnrt_status rt_check_ptr_al(const rt_vctx *v, const void *p, size_t bytes, size_t align, const char *what) {
  if (!p) return rt_fail(CNNRT_BAD_MODEL, "%s: descriptor field %s is NULL", v->path, what);
  if ((uintptr_t)p % align)
    return rt_fail(CNNRT_BAD_MODEL, "%s: descriptor field %s is misaligned (%p)", v->path, what, p);
  if (!rt_in_object(v, p, bytes))
    return rt_fail(CNNRT_BAD_MODEL, "%s: descriptor field %s points outside the model file", v->path, what);
  return CNNRT_OK;
}

int rt_in_model(const void *anchor, const void *p, size_t bytes, size_t align) {
  Dl_info info;
  if (!p || (uintptr_t)p % (align ? align : 1)) return 0;
  if (!dladdr(anchor, &info)) return 1; /* not in a loaded object (a test's descriptor): nothing to check against */
  rt_vctx v = {NULL, NULL, info.dli_fbase};
  return rt_in_object(&v, p, bytes);
}

#define RT_CHECK_ARR(v, p, bytes, what) rt_check_ptr_al(v, p, bytes, _Alignof(__typeof__(*(p))), what)

static cnnrt_status rt_check_str(const rt_vctx *v, const char *s, int nullable, const char *what) {
  if (!s && nullable) return CNNRT_OK;
  return rt_check_ptr_al(v, s, 1, 1, what);
}

static cnnrt_status rt_check_tensor(const rt_vctx *v, int i) {
  const cnnc_abi_tensor *t = &v->d->tensors[i];
  if (rt_check_str(v, t->name, 0, "tensor name") != CNNRT_OK) return CNNRT_BAD_MODEL;
  size_t es = rt_dtype_size(t->dtype);
  if (!es) return rt_fail(CNNRT_BAD_MODEL, "%s: tensor %d ('%s'): unknown dtype %d", v->path, i, t->name, t->dtype);
  if (t->rank < 1 || t->rank > 4)
    return rt_fail(CNNRT_BAD_MODEL, "%s: tensor %d ('%s'): rank %d not in 1..4", v->path, i, t->name, t->rank);
  int64_t n = (int64_t)es;
  for (int k = 0; k < t->rank; k++) {
    if (t->dims[k] < 1 || t->dims[k] > ((int64_t)1 << 40) / n)
      return rt_fail(CNNRT_BAD_MODEL, "%s: tensor %d ('%s'): dim %d is %lld", v->path, i, t->name, k,
                     (long long)t->dims[k]);
    n *= t->dims[k];
  }
  if (t->bytes != n)
    return rt_fail(CNNRT_BAD_MODEL, "%s: tensor %d ('%s'): bytes %lld but its shape and dtype need %lld", v->path, i,
                   t->name, (long long)t->bytes, (long long)n);
  return CNNRT_OK;
}

/* The model input and outputs: in range, distinct, leading dim = the batch size. */
static cnnrt_status rt_check_io_tensor(const rt_vctx *v, int32_t idx, const char *what) {
  const cnnc_abi_model *d = v->d;
  if (idx < 0 || idx >= d->n_tensors)
    return rt_fail(CNNRT_BAD_MODEL, "%s: %s tensor index %d not in 0..%d", v->path, what, idx, d->n_tensors - 1);
  const cnnc_abi_tensor *t = &d->tensors[idx];
  if (t->dims[0] != d->batch_size)
    return rt_fail(CNNRT_BAD_MODEL, "%s: %s tensor '%s' has leading dim %lld, batch size is %d", v->path, what,
                   t->name, (long long)t->dims[0], d->batch_size);
  return CNNRT_OK;
}

static cnnrt_status rt_check_model_io(const rt_vctx *v) {
  const cnnc_abi_model *d = v->d;
  if (rt_check_io_tensor(v, d->input, "input") != CNNRT_OK) return CNNRT_BAD_MODEL;
  if (d->n_outputs < 1 || d->n_outputs > d->n_tensors)
    return rt_fail(CNNRT_BAD_MODEL, "%s: n_outputs is %d", v->path, d->n_outputs);
  if (RT_CHECK_ARR(v, d->outputs, (size_t)d->n_outputs * sizeof *d->outputs, "outputs") != CNNRT_OK)
    return CNNRT_BAD_MODEL;
  for (int k = 0; k < d->n_outputs; k++) {
    if (rt_check_io_tensor(v, d->outputs[k], "output") != CNNRT_OK) return CNNRT_BAD_MODEL;
    if (d->outputs[k] == d->input) return rt_fail(CNNRT_BAD_MODEL, "%s: output %d is the input tensor", v->path, k);
    for (int j = 0; j < k; j++)
      if (d->outputs[j] == d->outputs[k])
        return rt_fail(CNNRT_BAD_MODEL, "%s: outputs %d and %d are the same tensor", v->path, j, k);
  }
  return CNNRT_OK;
}

static cnnrt_status rt_check_shard_ops(const rt_vctx *v, int s) {
  const cnnc_abi_shard *sh = &v->d->shards[s];
  if (sh->n_ops < 0 || sh->n_ops > RT_MAX_OPS)
    return rt_fail(CNNRT_BAD_MODEL, "%s: shard %d: n_ops is %d", v->path, s, sh->n_ops);
  if (sh->n_ops == 0) return CNNRT_OK;
  size_t n = (size_t)sh->n_ops;
  if (RT_CHECK_ARR(v, sh->op_names, n * sizeof(char *), "shard op_names") != CNNRT_OK ||
      RT_CHECK_ARR(v, sh->kernel_names, n * sizeof(char *), "shard kernel_names") != CNNRT_OK ||
      RT_CHECK_ARR(v, sh->op_flops, n * sizeof(double), "shard op_flops") != CNNRT_OK)
    return CNNRT_BAD_MODEL;
  for (size_t k = 0; k < n; k++)
    if (rt_check_str(v, sh->op_names[k], 0, "op name") != CNNRT_OK ||
        rt_check_str(v, sh->kernel_names[k], 0, "kernel name") != CNNRT_OK)
      return CNNRT_BAD_MODEL;
  return CNNRT_OK;
}

/* producer[t]: -2 not produced yet, -1 the model input, s >= 0 the shard writing it. */
static cnnrt_status rt_check_shard(const rt_vctx *v, int s, int *producer) {
  const cnnc_abi_shard *sh = &v->d->shards[s];
  char what[64];
  snprintf(what, sizeof what, "shards[%d].run", s);
  if (rt_check_ptr_al(v, (const void *)(uintptr_t)sh->run, 1, 1, what) != CNNRT_OK ||
      rt_check_str(v, sh->first_layer, 1, "shard first_layer") != CNNRT_OK ||
      rt_check_str(v, sh->last_layer, 1, "shard last_layer") != CNNRT_OK)
    return CNNRT_BAD_MODEL;
  if (sh->n_io < 1 || sh->n_io > v->d->n_tensors || sh->n_inputs < 0 || sh->n_inputs > sh->n_io)
    return rt_fail(CNNRT_BAD_MODEL, "%s: shard %d: n_io %d, n_inputs %d", v->path, s, sh->n_io, sh->n_inputs);
  if (sh->scratch_bytes < 0 || sh->scratch_bytes > ((int64_t)1 << 40))
    return rt_fail(CNNRT_BAD_MODEL, "%s: shard %d: scratch_bytes %lld", v->path, s, (long long)sh->scratch_bytes);
  if (RT_CHECK_ARR(v, sh->io, (size_t)sh->n_io * sizeof *sh->io, "shard io") != CNNRT_OK) return CNNRT_BAD_MODEL;
  for (int k = 0; k < sh->n_io; k++) {
    int32_t t = sh->io[k];
    if (t < 0 || t >= v->d->n_tensors)
      return rt_fail(CNNRT_BAD_MODEL, "%s: shard %d: io[%d] = %d is not a tensor index", v->path, s, k, t);
    const char *name = v->d->tensors[t].name;
    if (k < sh->n_inputs && (producer[t] == -2 || producer[t] >= s))
      return rt_fail(CNNRT_BAD_MODEL, "%s: shard %d reads tensor '%s' that no earlier shard writes", v->path, s,
                     name);
    if (k >= sh->n_inputs && producer[t] != -2)
      return rt_fail(CNNRT_BAD_MODEL, "%s: shard %d writes tensor '%s' that is already %s", v->path, s, name,
                     producer[t] == -1 ? "the model input" : "written by another shard");
    if (k >= sh->n_inputs) producer[t] = s;
  }
  return rt_check_shard_ops(v, s);
}

static cnnrt_status rt_check_header(const rt_vctx *v) {
  const cnnc_abi_model *d = v->d;
  if (rt_check_str(v, d->model_name, 0, "model_name") != CNNRT_OK ||
      rt_check_str(v, d->compiler_version, 1, "compiler_version") != CNNRT_OK ||
      rt_check_str(v, d->options_json, 1, "options_json") != CNNRT_OK)
    return CNNRT_BAD_MODEL;
  if (d->options_json && !rt_json_valid(d->options_json, 1))
    return rt_fail(CNNRT_BAD_MODEL, "%s: options_json is not a JSON object", v->path);
  if (d->batch_size < 1) return rt_fail(CNNRT_BAD_MODEL, "%s: batch_size is %d", v->path, d->batch_size);
  if (d->mode != 0 && d->mode != 1) return rt_fail(CNNRT_BAD_MODEL, "%s: mode is %d", v->path, d->mode);
  if (d->n_tensors < 1 || d->n_tensors > RT_MAX_TENSORS)
    return rt_fail(CNNRT_BAD_MODEL, "%s: n_tensors is %d", v->path, d->n_tensors);
  if (d->n_shards < 1 || d->n_shards > RT_MAX_SHARDS)
    return rt_fail(CNNRT_BAD_MODEL, "%s: n_shards is %d", v->path, d->n_shards);
  if (RT_CHECK_ARR(v, d->tensors, (size_t)d->n_tensors * sizeof *d->tensors, "tensors") != CNNRT_OK ||
      RT_CHECK_ARR(v, d->shards, (size_t)d->n_shards * sizeof *d->shards, "shards") != CNNRT_OK)
    return CNNRT_BAD_MODEL;
  return CNNRT_OK;
}

static cnnrt_status rt_check_all(const rt_vctx *v, int *producer) {
  const cnnc_abi_model *d = v->d;
  if (rt_check_header(v) != CNNRT_OK) return CNNRT_BAD_MODEL;
  for (int i = 0; i < d->n_tensors; i++)
    if (rt_check_tensor(v, i) != CNNRT_OK) return CNNRT_BAD_MODEL;
  if (rt_check_model_io(v) != CNNRT_OK) return CNNRT_BAD_MODEL;
  for (int i = 0; i < d->n_tensors; i++) producer[i] = -2;
  producer[d->input] = -1;
  for (int s = 0; s < d->n_shards; s++)
    if (rt_check_shard(v, s, producer) != CNNRT_OK) return CNNRT_BAD_MODEL;
  for (int k = 0; k < d->n_outputs; k++)
    if (producer[d->outputs[k]] < 0)
      return rt_fail(CNNRT_BAD_MODEL, "%s: no shard writes output tensor '%s'", v->path,
                     d->tensors[d->outputs[k]].name);
  return CNNRT_OK;
}

cnnrt_status rt_validate(const cnnc_abi_model *d, const char *path, int **producer_out) {
  rt_vctx v = {d, path, NULL};
  Dl_info info;
  if (dladdr(d, &info)) v.base = info.dli_fbase;
  *producer_out = NULL;
  /* n_tensors is bounded by rt_check_header before producer is used. */
  int n = d->n_tensors > 0 && d->n_tensors <= RT_MAX_TENSORS ? d->n_tensors : 1;
  int *producer = malloc((size_t)n * sizeof *producer);
  if (!producer) return rt_fail(CNNRT_OUT_OF_MEMORY, "%s: out of memory", path);
  cnnrt_status s = rt_check_all(&v, producer);
  if (s != CNNRT_OK) {
    free(producer);
    return s;
  }
  *producer_out = producer;
  return CNNRT_OK;
}
