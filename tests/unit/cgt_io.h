/* cgt_io.h — files and models in and out of the codegen tests (included by
 * test_codegen_harness.h): reading and writing files, the lines of a graph's --emit llvm
 * module, YAML models loaded and built with compile options, and runtime models opened with a
 * thread count. */
#ifndef CNNC_TEST_CGT_IO_H
#define CNNC_TEST_CGT_IO_H

#include <sys/stat.h>

#include "runtime/cnnrt.h"

/* ---- files ------------------------------------------------------------------------------- */
/* The bytes of the file at path, malloc'd and NUL-terminated (*len: the size, unless NULL);
 * NULL when it cannot be read. */
static inline char *cgt_read_file(const char *path, long *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  char *buf = NULL;
  long n = -1;
  if (!fseek(f, 0, SEEK_END) && (n = ftell(f)) >= 0 && !fseek(f, 0, SEEK_SET) && (buf = malloc((size_t)n + 1)) &&
      fread(buf, 1, (size_t)n, f) == (size_t)n) {
    buf[n] = 0;
    if (len) *len = n;
  } else {
    free(buf);
    buf = NULL;
  }
  fclose(f);
  return buf;
}

/* 1 when the file at path holds the bytes of s (a .so's descriptor names every kernel kind),
 * 0 when not, -1 when it cannot be read. */
static inline int cgt_file_has(const char *path, const char *s) {
  long n = 0;
  char *buf = cgt_read_file(path, &n);
  if (!buf) return -1;
  int hit = memmem(buf, (size_t)n, s, strlen(s)) != NULL;
  free(buf);
  return hit;
}

/* The size of the file at path, -1 when it cannot be opened. */
static inline long cgt_file_size(const char *path) {
  struct stat st;
  return stat(path, &st) ? -1 : (long)st.st_size;
}

/* Writes text to path: 0, or 1 with the reason on stderr. */
static inline int cgt_write_file(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  if (!f || fputs(text, f) < 0 || fclose(f)) {
    fprintf(stderr, "cannot write %s\n", path);
    return 1;
  }
  return 0;
}

/* text written to path = <cgt_dir>/<name> (512 bytes): 0, or 1 with the reason on stderr. */
static inline int cgt_write_tmp(char *path, const char *name, const char *text) {
  snprintf(path, 512, "%s/%s", cgt_dir, name);
  return cgt_write_file(path, text);
}

/* ---- the lines of a graph's LLVM IR ------------------------------------------------------ */
/* for (cgt_ir_open(&ir, g, t, stem); cgt_ir_next(&ir);) ... ir.line ...: the lines of g's
 * --emit llvm module for t (cgt_llvm_of); the last cgt_ir_next closes and removes it. */
typedef struct cgt_ir {
  FILE *f;
  char *line;
  size_t cap;
  char path[512];
} cgt_ir;

/* 0, or -1 when g does not compile (cgt_ir_next then returns 0). */
static inline int cgt_ir_open(cgt_ir *ir, ir_graph *g, const cg_target *t, const char *stem) {
  ir->line = NULL, ir->cap = 0;
  ir->f = cgt_llvm_of(g, t, stem, ir->path, sizeof ir->path);
  return ir->f ? 0 : -1;
}

static inline int cgt_ir_next(cgt_ir *ir) {
  if (ir->f && getline(&ir->line, &ir->cap, ir->f) >= 0) return 1;
  if (ir->f) fclose(ir->f), unlink(ir->path);
  ir->f = NULL;
  free(ir->line);
  ir->line = NULL;
  return 0;
}

/* ---- models from YAML ------------------------------------------------------------------- */
/* The model at path loaded with the compile options kv[0..n) (name, value) set on o; NULL, with
 * the diagnostic on stderr, on failure. */
static inline ir_graph *cgt_load(const char *path, const char *const (*kv)[2], int n, fe_options *o) {
  ir_diag d = {0};
  fe_options_init(o);
  for (int i = 0; i < n; i++)
    if (fe_option_set(o, fe_option_find(kv[i][0]), kv[i][1], &d)) {
      ir_diag_print(&d, stderr);
      return NULL;
    }
  ir_graph *g = fe_load(path, o, &d);
  if (!g) ir_diag_print(&d, stderr);
  return g;
}

/* The model at path at batch size batch with seed 5 (cgt_load). */
static inline ir_graph *cgt_load_batch(const char *path, int batch) {
  char b[16];
  snprintf(b, sizeof b, "%d", batch);
  const char *const kv[][2] = {{"batch-size", b}, {"seed", "5"}};
  fe_options o;
  return cgt_load(path, kv, 2, &o);
}

/* text as <cgt_dir>/<name>.yml, loaded at batch size batch with seed 5, the file removed. */
static inline ir_graph *cgt_load_text(const char *text, const char *name, int batch) {
  char path[512];
  snprintf(path, sizeof path, "%s/%s.yml", cgt_dir, name);
  ir_graph *g = cgt_write_file(path, text) ? NULL : cgt_load_batch(path, batch);
  unlink(path);
  return g;
}

/* The model at path loaded with kv and built (cnnc_build_model, the knobs of ct_tune) to so:
 * 0, or nonzero with the diagnostic on stderr.  The graph after the passes goes to *passed
 * (NULL: freed; left NULL on failure). */
static inline int cgt_build(const char *path, const char *const (*kv)[2], int n, const char *so, ir_graph **passed) {
  fe_options o;
  ir_diag d = {0};
  ir_graph *g = cgt_load(path, kv, n, &o);
  if (passed) *passed = NULL;
  if (!g) return -1;
  int rc = cnnc_build_model(ct_g(g), &o, so, NULL, 0, &d);
  if (rc) ir_diag_print(&d, stderr);
  if (passed && !rc) *passed = g; /* cnnc_build_model runs the passes in place */
  else ir_graph_free(g);
  return rc;
}

/* cgt_build of <source tree>/rel to so = <cgt_dir>/so_name (so: 512 bytes). */
static inline int cgt_build_at(const char *rel, const char *const (*kv)[2], int n, const char *so_name, char *so,
                               ir_graph **passed) {
  char path[1024];
  snprintf(path, sizeof path, "%s/%s", CNNC_TEST_SRC, rel);
  snprintf(so, 512, "%s/%s", cgt_dir, so_name);
  return cgt_build(path, kv, n, so, passed);
}

/* The runtime model at so on threads threads per shard (0: auto); NULL, with the error on
 * stderr, on failure. */
static inline cnnrt_model *cgt_rt_open(const char *so, int threads) {
  cnnrt_options ro;
  cnnrt_options_init(&ro);
  ro.threads_per_shard = threads;
  cnnrt_model *m = NULL;
  if (cnnrt_open(so, &ro, &m) != CNNRT_OK) fprintf(stderr, "cnnrt_open %s: %s\n", so, cnnrt_last_error());
  return m;
}

#endif
