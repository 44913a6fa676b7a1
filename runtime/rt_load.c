/* rt_load.c — opening and closing a model: ELF pre-check, dlopen, descriptor lookup, magic /
 * ABI version / struct size checks, table validation; the model handle and the query and
 * thread-setting functions of the public API (its buffers: rt_mem.c). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt_internal.h"

cnnrt_status rt_isa_check(void *dl, const char *path); /* rt_isa.c */

#define RT_MAX_THREADS 1024

CNNRT_API void cnnrt_options_init(cnnrt_options *opts) {
  if (!opts) return;
  memset(opts, 0, sizeof *opts);
  opts->struct_size = sizeof *opts;
  opts->spin_us = CNNRT_SPIN_US_DEFAULT;
  opts->hugepages = CNNRT_HUGEPAGES_INFERENCE;
  opts->replica_mode = CNNRT_REPLICA_SHARED;
}

static cnnrt_status rt_copy_options(const cnnrt_options *in, cnnrt_options *o) {
  cnnrt_options_init(o);
  if (!in) return CNNRT_OK;
  if (in->struct_size == 0 || in->struct_size > sizeof *o)
    return rt_fail(CNNRT_INVALID_ARGUMENT, "cnnrt_open: options struct_size is %u, expected %zu (use cnnrt_options_init)",
                   (unsigned)in->struct_size, sizeof *o);
  memcpy(o, in, in->struct_size);
  o->struct_size = sizeof *o;
  if (o->threads_per_shard < 0 || o->threads_per_shard > RT_MAX_THREADS)
    return rt_fail(CNNRT_INVALID_ARGUMENT, "cnnrt_open: threads_per_shard is %d, must be in 0..%d",
                   o->threads_per_shard, RT_MAX_THREADS);
  if (o->allocator && (!o->allocator->alloc || !o->allocator->free))
    return rt_fail(CNNRT_INVALID_ARGUMENT, "cnnrt_open: the allocator needs both alloc and free");
  if (o->spin_us < 0 || o->spin_us > CNNRT_SPIN_US_MAX)
    return rt_fail(CNNRT_INVALID_ARGUMENT, "cnnrt_open: spin_us is %d, must be in 0..%d (microseconds)", o->spin_us,
                   CNNRT_SPIN_US_MAX);
  if ((unsigned)o->hugepages > CNNRT_HUGEPAGES_ALL)
    return rt_fail(CNNRT_INVALID_ARGUMENT,
                   "cnnrt_open: hugepages is %d, must be CNNRT_HUGEPAGES_INFERENCE (0), CNNRT_HUGEPAGES_OFF (1) or "
                   "CNNRT_HUGEPAGES_ALL (2)", (int)o->hugepages);
  if ((unsigned)o->replica_mode > CNNRT_REPLICA_PARALLEL)
    return rt_fail(CNNRT_INVALID_ARGUMENT,
                   "cnnrt_open: replica_mode is %d, must be CNNRT_REPLICA_SHARED (0) or CNNRT_REPLICA_PARALLEL (1)",
                   (int)o->replica_mode);
  return CNNRT_OK;
}

/* dlopen searches the library path for a name without '/'; a model path is a file path. */
static char *rt_file_path(const char *path) {
  size_t n = strlen(path);
  int dot = strchr(path, '/') == NULL;
  char *p = malloc(n + 3);
  if (p) snprintf(p, n + 3, "%s%s", dot ? "./" : "", path);
  return p;
}

/* No cnnc_model_v1: name another ABI version's descriptor if the .so has one. */
static cnnrt_status rt_missing_symbol(void *dl, const char *path) {
  for (unsigned v = 0; v <= 32; v++) {
    char name[32];
    snprintf(name, sizeof name, "cnnc_model_v%u", v);
    if (v != CNNC_ABI_VERSION && dlsym(dl, name))
      return rt_fail(CNNRT_ABI_MISMATCH, "%s: model built for ABI version %u (%s); this runtime supports version %u", path,
                     v, name, CNNC_ABI_VERSION);
  }
  return rt_fail(CNNRT_BAD_MODEL, "%s: no model descriptor (symbol %s not found); not a model compiled by cnnc", path,
                 CNNC_ABI_SYMBOL);
}

static cnnrt_status rt_check_abi(const void *sym, const char *path) {
  Dl_info info;
  const ElfW(Sym) *es = NULL;
  size_t have = 0;
  if (dladdr1(sym, &info, (void **)&es, RTLD_DL_SYMENT) && es) have = (size_t)es->st_size;
  if (have && have < 3 * sizeof(uint32_t))
    return rt_fail(CNNRT_BAD_MODEL, "%s: descriptor %s is only %zu bytes", path, CNNC_ABI_SYMBOL, have);
  if ((uintptr_t)sym % _Alignof(cnnc_abi_model))
    return rt_fail(CNNRT_BAD_MODEL, "%s: descriptor %s is at a misaligned address (%p)", path, CNNC_ABI_SYMBOL, sym);
  const cnnc_abi_model *d = sym;
  if (d->magic != CNNC_ABI_MAGIC)
    return rt_fail(CNNRT_BAD_MODEL, "%s: descriptor magic is 0x%08x, expected 0x%08x (\"CNNC\")", path, d->magic,
                   CNNC_ABI_MAGIC);
  if (d->abi_version != CNNC_ABI_VERSION)
    return rt_fail(CNNRT_ABI_MISMATCH, "%s: model ABI version %u, this runtime supports version %u; recompile the model",
                   path, d->abi_version, CNNC_ABI_VERSION);
  if (d->struct_size < sizeof *d)
    return rt_fail(CNNRT_ABI_MISMATCH, "%s: descriptor struct_size %u is smaller than %zu, the size in ABI version %u",
                   path, d->struct_size, sizeof *d, CNNC_ABI_VERSION);
  if (have && have < sizeof *d)
    return rt_fail(CNNRT_BAD_MODEL, "%s: descriptor %s is only %zu bytes, expected %zu", path, CNNC_ABI_SYMBOL, have,
                   sizeof *d);
  return CNNRT_OK;
}

/* The cnnrt_model around a validated descriptor; default thread counts per shard. */
static cnnrt_status rt_model_init(cnnrt_model *m) {
  const cnnc_abi_model *d = m->d;
  int ns = d->n_shards;
  m->threads = calloc((size_t)ns, sizeof *m->threads);
  m->cpus = calloc((size_t)ns, sizeof *m->cpus);
  m->n_cpus = calloc((size_t)ns, sizeof *m->n_cpus);
  m->busy_ns = calloc((size_t)ns, sizeof *m->busy_ns);
  m->runs = calloc((size_t)ns, sizeof *m->runs);
  if (!m->threads || !m->cpus || !m->n_cpus || !m->busy_ns || !m->runs) return rt_fail(CNNRT_OUT_OF_MEMORY, "%s: out of memory", m->path);
  int usable[CPU_SETSIZE];
  int nu = rt_usable_cpus(usable, CPU_SETSIZE);
  int t = m->opts.threads_per_shard ? m->opts.threads_per_shard : (nu / ns > 1 ? nu / ns : 1);
  for (int s = 0; s < ns; s++) m->threads[s] = t;
  for (int k = 0; k < d->n_outputs; k++) m->out_bytes += (size_t)d->tensors[d->outputs[k]].bytes;
  if (m->opts.allocator) m->alloc = *m->opts.allocator;
  if (!(m->mem = rt_mem_new(m->opts.hugepages))) return rt_fail(CNNRT_OUT_OF_MEMORY, "%s: out of memory", m->path);
  if (pthread_mutex_init(&m->lock, NULL) != 0) return rt_fail(CNNRT_INTERNAL, "%s: cannot create a mutex", m->path);
  m->lock_ok = 1;
  return CNNRT_OK;
}

static cnnrt_status rt_open(cnnrt_model *m, const char *path) {
  cnnrt_status s = rt_elf_check(path);
  if (s != CNNRT_OK) return s;
  char *file = rt_file_path(path);
  if (!file) return rt_fail(CNNRT_OUT_OF_MEMORY, "%s: out of memory", path);
  m->dl = dlopen(file, RTLD_NOW | RTLD_LOCAL);
  free(file);
  if (!m->dl) return rt_fail(CNNRT_BAD_MODEL, "%s: cannot load: %s", path, dlerror());
  const void *sym = dlsym(m->dl, CNNC_ABI_SYMBOL);
  if (!sym) return rt_missing_symbol(m->dl, path);
  if ((s = rt_check_abi(sym, path)) != CNNRT_OK) return s;
  if ((s = rt_isa_check(m->dl, path)) != CNNRT_OK) return s; /* rt_isa.c: before any kernel runs */
  m->d = sym;
  if ((s = rt_validate(m->d, path, &m->producer)) != CNNRT_OK) return s;
  if ((s = rt_model_init(m)) != CNNRT_OK) return s;
  return rt_train_attach(m);
}

CNNRT_API cnnrt_status cnnrt_open(const char *path, const cnnrt_options *opts, cnnrt_model **out) {
  rt_clear_error();
  if (!out) return rt_fail(CNNRT_INVALID_ARGUMENT, "cnnrt_open: out is NULL");
  *out = NULL;
  if (!path || !*path) return rt_fail(CNNRT_INVALID_ARGUMENT, "cnnrt_open: path is %s", path ? "empty" : "NULL");
  cnnrt_model *m = calloc(1, sizeof *m);
  if (!m || !(m->path = strdup(path))) {
    free(m);
    return rt_fail(CNNRT_OUT_OF_MEMORY, "%s: out of memory", path);
  }
  cnnrt_status s = rt_copy_options(opts, &m->opts);
  if (s == CNNRT_OK) s = rt_open(m, path);
  if (s != CNNRT_OK) {
    cnnrt_close(m);
    return s;
  }
  *out = m;
  return CNNRT_OK;
}

CNNRT_API void cnnrt_close(cnnrt_model *m) {
  if (!m) return;
  rt_exec_stop(m);
  rt_train_free(m);
  rt_mem_free(m->mem); /* after every rt_free */
  if (m->lock_ok) pthread_mutex_destroy(&m->lock);
  for (int s = 0; m->cpus && s < m->d->n_shards; s++) free(m->cpus[s]);
  free(m->cpus);
  free(m->n_cpus);
  free(m->threads);
  free(m->busy_ns);
  free(m->runs);
  free(m->producer);
  free(m->describe);
  rt_trace_free(m->trace);
  rt_profile_free(m->prof);
  free(m->path);
  if (m->dl) dlclose(m->dl); /* last: m->d points into the .so */
  free(m);
}
