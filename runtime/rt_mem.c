/* rt_mem.c — the runtime's buffers.  rt_alloc/rt_free serve the caller's allocator when one
 * was given.  Otherwise a buffer of RT_HUGE_MIN bytes or more is an anonymous mapping aligned
 * to 2 MB (zero pages from the kernel: no memset pass, each page is first touched by the
 * kernel thread that writes it), advised MADV_HUGEPAGE for RT_MEM_HUGE buffers (THP in
 * `madvise` mode backs them with 2 MB pages: fewer TLB misses); smaller ones come from
 * aligned_alloc.  cnnrt_options.hugepages (fixed at open): CNNRT_HUGEPAGES_OFF keeps every
 * buffer on aligned_alloc, CNNRT_HUGEPAGES_ALL advises RT_MEM_PLAIN mappings too.
 * docs/runtime.md "Memory" has the measurements behind the policy. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "rt_internal.h"

#define RT_HUGE_PAGE ((size_t)2 << 20)
#define RT_SMALL_PAGE ((size_t)4096)

/* The default path's big mappings (address, length), so rt_free knows what to munmap. */
typedef struct rt_map {
  void *p;
  size_t len;
} rt_map;

struct rt_mem {
  pthread_mutex_t mu;
  rt_map *v;
  int n, cap;
  int huge;       /* 0 under CNNRT_HUGEPAGES_OFF */
  int train_huge; /* CNNRT_HUGEPAGES_ALL: RT_MEM_PLAIN buffers are advised too */
};

rt_mem *rt_mem_new(cnnrt_hugepages mode) {
  rt_mem *r = calloc(1, sizeof *r);
  if (!r) return NULL;
  if (pthread_mutex_init(&r->mu, NULL) != 0) {
    free(r);
    return NULL;
  }
  r->huge = mode != CNNRT_HUGEPAGES_OFF;
  r->train_huge = mode == CNNRT_HUGEPAGES_ALL;
  return r;
}

void rt_mem_free(rt_mem *r) {
  if (!r) return;
  for (int i = 0; i < r->n; i++) munmap(r->v[i].p, r->v[i].len); /* buffers the owner leaked */
  free(r->v);
  pthread_mutex_destroy(&r->mu);
  free(r);
}

int rt_mem_hugepages(const rt_mem *r) { return r && r->huge; }

/* Mapping length for n bytes: whole 2 MB pages when that costs at most 1/8 more, so the tail
 * is a huge page too, else whole 4 KB pages (the tail stays on small pages). */
static size_t rt_map_len(size_t n) {
  size_t h = (n + RT_HUGE_PAGE - 1) & ~(RT_HUGE_PAGE - 1);
  if (h >= n && h - n <= n / 8) return h;
  return (n + RT_SMALL_PAGE - 1) & ~(RT_SMALL_PAGE - 1);
}

/* A zeroed anonymous mapping of at least n bytes at a 2 MB boundary, advised MADV_HUGEPAGE if
 * huge (a kernel without THP refuses the advice with EINVAL: the mapping is used as it is),
 * and recorded in r; NULL if the mapping or the record fails. */
static void *rt_map_big(rt_mem *r, size_t n, int huge) {
  size_t len = rt_map_len(n);
  if (len < n || len + RT_HUGE_PAGE < len) return NULL;
  char *raw = mmap(NULL, len + RT_HUGE_PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) return NULL;
  char *p = (char *)(((uintptr_t)raw + RT_HUGE_PAGE - 1) & ~(uintptr_t)(RT_HUGE_PAGE - 1));
  if (p > raw) munmap(raw, (size_t)(p - raw));
  if (raw + RT_HUGE_PAGE > p) munmap(p + len, (size_t)(raw + RT_HUGE_PAGE - p));
  /* plain buffers ask for small pages explicitly: with THP "always" the kernel would otherwise
   * back them with huge pages too (the slow first touch that training avoids) */
  (void)madvise(p, len, huge ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
  pthread_mutex_lock(&r->mu);
  int ok = 1;
  if (r->n == r->cap) {
    int cap = r->cap ? 2 * r->cap : 32;
    rt_map *v = realloc(r->v, (size_t)cap * sizeof *v);
    if (v) r->v = v, r->cap = cap;
    else ok = 0;
  }
  if (ok) r->v[r->n++] = (rt_map){p, len};
  pthread_mutex_unlock(&r->mu);
  if (!ok) {
    munmap(p, len);
    return NULL;
  }
  return p;
}

/* Unmaps p if r mapped it; 0 if p is not one of r's mappings. */
static int rt_unmap_big(rt_mem *r, void *p) {
  pthread_mutex_lock(&r->mu);
  int i = r->n - 1;
  while (i >= 0 && r->v[i].p != p) i--;
  rt_map e = i >= 0 ? r->v[i] : (rt_map){0};
  if (i >= 0) r->v[i] = r->v[--r->n];
  pthread_mutex_unlock(&r->mu);
  if (i < 0) return 0;
  munmap(e.p, e.len);
  return 1;
}

void *rt_alloc_use(const cnnrt_model *m, size_t bytes, rt_mem_use use) {
  size_t n = (bytes + RT_ALIGN - 1) & ~(size_t)(RT_ALIGN - 1);
  if (n < bytes) return NULL;
  if (n == 0) n = RT_ALIGN;
  if (m->alloc.alloc) {
    void *p = m->alloc.alloc(m->alloc.ctx, n, RT_ALIGN);
    if (p && ((uintptr_t)p & (RT_ALIGN - 1)) != 0) { /* a misbehaving user allocator */
      m->alloc.free(m->alloc.ctx, p);
      return NULL;
    }
    if (p) memset(p, 0, n);
    return p;
  }
  if (n >= RT_HUGE_MIN && rt_mem_hugepages(m->mem)) {
    void *p = rt_map_big(m->mem, n, use == RT_MEM_HUGE || m->mem->train_huge); /* zeroed by the kernel */
    if (p) return p;
  }
  void *p = aligned_alloc(RT_ALIGN, n);
  if (p) memset(p, 0, n);
  return p;
}

void *rt_alloc(const cnnrt_model *m, size_t bytes) { return rt_alloc_use(m, bytes, RT_MEM_HUGE); }

void rt_free(const cnnrt_model *m, void *p) {
  if (!p) return;
  if (m->alloc.free) m->alloc.free(m->alloc.ctx, p);
  else if (!m->mem || !rt_unmap_big(m->mem, p)) free(p);
}
