/* test_codegen_harness.h — shared by the codegen tests: compile a graph with cg_compile to a
 * temporary .so and dlopen it (cgt_so), run every shard in sequence on 1 or more threads
 * (pthreads and a pthread barrier), and compare the outputs with ir_interp (cgt_check_graph;
 * cgt_so_runs: every thread count against the interpreter and bitwise against the first);
 * cgt_io.h: files, LLVM IR lines, models from YAML, runtime models.  CGT_CHECK counts its
 * failures in cgt_failures, cgt_done ends main(). */
#ifndef CNNC_TEST_CODEGEN_HARNESS_H
#define CNNC_TEST_CODEGEN_HARNESS_H

#include <dlfcn.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "codegen/cg.h"
#include "tools/compile.h"
#include "passes/passes.h"
#include "runtime/cnnc_abi.h"
#include "check.h"   /* CHECK_INTO, check_done */
#include "ct_tune.h" /* ct_g: in-process compiles take the test's knobs */

static char cgt_dir[256];

#define SHAPE(...) ((ir_shape){sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t), {__VA_ARGS__}})

/* Graph building for the tests: a node (aborts on a graph error, printing it) and a param. */
static inline int cgt_node(ir_graph *g, ir_op op, const char *name, const int *in, int n, const ir_attr *a) {
  ir_diag d = {0};
  int v = ir_add_node(g, op, name, (ir_loc){0}, in, n, a, &d);
  if (v < 0) {
    ir_diag_print(&d, stderr);
    abort();
  }
  return v;
}

static inline int cgt_param(ir_graph *g, const char *name, ir_shape s) { return ir_add_param(g, name, s, 1); }

/* An inference batchnorm named name over c channels of x, its params "<name>/gamma" etc. */
static inline int cgt_add_bn(ir_graph *g, const char *name, int x, int64_t c) {
  const char *sfx[4] = {"gamma", "beta", "running_mean", "running_var"};
  char b[4][96];
  int in[5] = {x};
  for (int i = 0; i < 4; i++) {
    snprintf(b[i], sizeof b[i], "%s/%s", name, sfx[i]);
    in[i + 1] = cgt_param(g, b[i], (ir_shape){1, {c}});
  }
  ir_attr a = {.batchnorm = {1e-5f, 0.1f, 0}};
  return cgt_node(g, IR_OP_batchnorm, name, in, 5, &a);
}

/* g compiled for t with --emit llvm into <cgt_dir>/<stem>.ll, opened for reading (the caller
 * closes it and unlinks path); NULL, with the error printed, when it does not compile. */
static inline FILE *cgt_llvm_of(ir_graph *g, const cg_target *t, const char *stem, char *path, size_t cap) {
  snprintf(path, cap, "%s/%s.ll", cgt_dir, stem);
  cg_options o = {path, "llvm", stem, "{\"test\": true}", 2, 0};
  ir_diag d = {0};
  if (cg_compile(ct_g(g), t, &o, &d)) {
    ir_diag_print(&d, stderr);
    return NULL;
  }
  return fopen(path, "r");
}

/* t for LLVM cpu name cpu (NULL: the host); 1, with the error printed, when it fails. */
static inline int cgt_target(cg_target *t, const char *cpu) {
  ir_diag d = {0};
  if (cg_target_init(t, NULL, cpu, NULL, &d)) {
    ir_diag_print(&d, stderr);
    return 1;
  }
  return 0;
}

/* Quick mode, CNNC_TEST_QUICK=1 (set for the default suite's run of these tests by
 * tests/CMakeLists.txt CNNC_QUICK_TESTS, whose <name>_full twins, label "long", run every case,
 * and by .ci/run's sanitizer stage): a kernel sweep that runs one case table for npasses targets runs case
 * i only in pass i % npasses, so every case still runs once and every target on 1/npasses of
 * the cases.  The sanitizers instrument the compiler and the runtime, not the generated
 * kernels: the same generator over more shapes adds little there.  Returns 1: skip case i. */
static inline int cgt_quick(void) {
  const char *q = getenv("CNNC_TEST_QUICK");
  return q && *q && strcmp(q, "0") != 0;
}
static inline int cgt_quick_skip(size_t i, int pass, int npasses) {
  return cgt_quick() && npasses > 1 && (int)(i % (size_t)npasses) != pass;
}

/* The same for a case that exists for one target's planner (a 16-lane shape, say): home is the
 * pass of that target, and quick mode runs the case in that pass only, so the round robin never
 * moves it off its target.  home < 0 (any target), or home >= npasses (that target does not run
 * on this CPU): the round robin.  Counts the cases run per pass (cgt_quick_report). */
#define CGT_QUICK_MAXPASS 4
static int cgt_quick_ran[CGT_QUICK_MAXPASS], cgt_quick_kept[CGT_QUICK_MAXPASS];
static inline int cgt_quick_skip_home(size_t i, int pass, int npasses, int home) {
  int homed = home >= 0 && home < npasses;
  int skip = cgt_quick() && npasses > 1 && (homed ? pass != home : (int)(i % (size_t)npasses) != pass);
  if (!skip && pass >= 0 && pass < CGT_QUICK_MAXPASS) {
    cgt_quick_ran[pass]++;
    cgt_quick_kept[pass] += homed;
  }
  return skip;
}

/* Prints how many cases ran in each of the npasses passes named name[] (and how many of them
 * were kept there as their home target); returns the total. */
static inline int cgt_quick_report(const char *test, const char *const *name, int npasses) {
  int total = 0;
  fprintf(stderr, "%s: %s cases run per target:", test, cgt_quick() ? "CNNC_TEST_QUICK" : "all");
  for (int p = 0; p < npasses && p < CGT_QUICK_MAXPASS; p++) {
    fprintf(stderr, " %s %d (%d on their home target)", name[p], cgt_quick_ran[p], cgt_quick_kept[p]);
    total += cgt_quick_ran[p];
  }
  fprintf(stderr, "\n");
  return total;
}

static int cgt_failures;
static int cgt_nan_every; /* > 0: every k-th input element is NaN */

#define CGT_CHECK(cond, ...) CHECK_INTO(cgt_failures, cond, __VA_ARGS__)

static uint64_t cgt_rng = 0x1234567u;
static inline uint64_t cgt_next(void) {
  uint64_t z = (cgt_rng += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
static inline float cgt_uniform(float lo, float hi) { return lo + (hi - lo) * (float)((cgt_next() >> 40) * (1.0 / 16777216.0)); }
static inline int cgt_int(int lo, int hi) { return lo + (int)(cgt_next() % (uint64_t)(hi - lo + 1)); }

static inline void cgt_init_dir(void) {
  const char *t = getenv("TMPDIR");
  snprintf(cgt_dir, sizeof cgt_dir, "%s/cnnc-cgtest-XXXXXX", t && *t ? t : "/tmp");
  if (!mkdtemp(cgt_dir)) {
    perror("mkdtemp");
    exit(2);
  }
}
static inline void cgt_cleanup_dir(void) { rmdir(cgt_dir); }

/* The end of main(): removes cgt_dir, reports cgt_failures; the exit status. */
static inline int cgt_done(const char *test) {
  cgt_cleanup_dir();
  return check_done(test, cgt_failures);
}

/* Fills every parameter with uniform values in [-a, a] (running_var: positive). */
static inline void cgt_random_params(ir_graph *g, float a) {
  for (int i = 0; i < g->n_values; i++) {
    ir_value *v = &g->values[i];
    if (v->kind != IR_VAL_PARAM) continue;
    int positive = strstr(v->name, "var") != NULL;
    for (int64_t k = 0; k < ir_shape_numel(&v->shape); k++)
      v->data[k] = positive ? cgt_uniform(0.2f, 2.0f) : cgt_uniform(-a, a);
  }
}

/* ---- running a compiled model ------------------------------------------------------------ */
typedef struct cgt_thread {
  const cnnc_abi_shard *sh;
  void **io;
  void *scratch;
  int tid, nth;
  pthread_barrier_t *bar;
} cgt_thread;

static inline void cgt_barrier(void *ctx) { pthread_barrier_wait(ctx); }

static inline void *cgt_thread_main(void *arg) {
  cgt_thread *t = arg;
  t->sh->run((void *const *)t->io, t->scratch, t->tid, t->nth, cgt_barrier, t->bar);
  return NULL;
}

/* Runs every shard of m in order on nth threads; bufs[i] is tensor i's buffer. */
static inline void cgt_run_model(const cnnc_abi_model *m, void **bufs, int nth) {
  for (int s = 0; s < m->n_shards; s++) {
    const cnnc_abi_shard *sh = &m->shards[s];
    void *io[64];
    for (int k = 0; k < sh->n_io; k++) io[k] = bufs[sh->io[k]];
    size_t sb = (size_t)(sh->scratch_bytes + 63) / 64 * 64;
    float *scratch = aligned_alloc(64, sb ? sb : 64);
    for (size_t i = 0; i < sb / 4; i++) scratch[i] = NAN; /* reads of unwritten scratch show */
    pthread_barrier_t bar;
    pthread_barrier_init(&bar, NULL, (unsigned)nth);
    cgt_thread th[8];
    pthread_t pt[8];
    for (int i = 0; i < nth; i++) th[i] = (cgt_thread){sh, io, scratch, i, nth, &bar};
    for (int i = 1; i < nth; i++) pthread_create(&pt[i], NULL, cgt_thread_main, &th[i]);
    cgt_thread_main(&th[0]);
    for (int i = 1; i < nth; i++) pthread_join(pt[i], NULL);
    pthread_barrier_destroy(&bar);
    free(scratch);
  }
}

/* Compares got with want: |got - want| <= tol * max(|want|, mean |want|) + 1e-6. */
static inline int cgt_compare(const char *label, const float *got, const float *want, int64_t n, double tol) {
  double mean = 0, worst = 0;
  int64_t at = -1, finite = 0;
  for (int64_t i = 0; i < n; i++)
    if (!isnan(want[i])) mean += fabs(want[i]), finite++;
  mean = finite ? mean / (double)finite : 0;
  for (int64_t i = 0; i < n; i++) {
    double e;
    if (isnan(got[i]) || isnan(want[i])) {
      e = isnan(got[i]) && isnan(want[i]) ? 0 : INFINITY; /* NaN where and only where expected */
    } else {
      double scale = fabs(want[i]) > mean ? fabs(want[i]) : mean;
      e = fabs((double)got[i] - want[i]) / (scale + 1e-6 / tol);
    }
    if (e > worst) worst = e, at = i;
    if (isinf(worst)) break;
  }
  if (worst <= tol) return 0;
  fprintf(stderr, "  %s: mismatch at %lld: got %.8g want %.8g (rel err %.3g > %.1g)\n", label, (long long)at,
          at >= 0 ? got[at] : 0.0, at >= 0 ? want[at] : 0.0, worst, tol);
  return 1;
}

/* ---- a compiled .so of one graph, loaded ------------------------------------------------ */
typedef struct cgt_so {
  void *h;
  const cnnc_abi_model *m;
  char path[512];
} cgt_so;

static inline void cgt_so_close(cgt_so *s) {
  if (s->h) dlclose(s->h);
  unlink(s->path);
  s->h = NULL, s->m = NULL;
}

/* Compiles g (shards already assigned) for t with the knobs of ct_tune to a new .so under
 * cgt_dir and loads it: 0, or 1 with the reason on stderr (nothing left open). */
static inline int cgt_so_open(cgt_so *s, ir_graph *g, const cg_target *t, const char *label) {
  static int counter;
  snprintf(s->path, sizeof s->path, "%s/g%d.so", cgt_dir, counter++);
  s->h = NULL, s->m = NULL;
  cg_options o = {s->path, NULL, label, "{\"test\": true}", 2, 0};
  ir_diag d = {0};
  if (cg_compile(ct_g(g), t, &o, &d)) {
    fprintf(stderr, "  %s: compile failed: ", label);
    ir_diag_print(&d, stderr);
    return 1;
  }
  s->h = dlopen(s->path, RTLD_NOW | RTLD_LOCAL);
  const cnnc_abi_model *m = s->h ? dlsym(s->h, CNNC_ABI_SYMBOL) : NULL;
  if (!m || m->magic != CNNC_ABI_MAGIC || m->abi_version != CNNC_ABI_VERSION || m->struct_size != sizeof *m) {
    fprintf(stderr, "  %s: cannot load: %s\n", label, s->h ? "bad descriptor" : dlerror());
    cgt_so_close(s);
    return 1;
  }
  s->m = m;
  return 0;
}

/* g's LLVM module for t (the .ll named after stem): 1 when some kernel defined there has
 * `kind` in its name and every such kernel has `mark` in it exactly when want is set (a
 * kernel kind's variant, e.g. maxpool's "s1_rows_v"); 0 otherwise. */
static inline int cgt_kernel_marked(ir_graph *g, const cg_target *t, const char *stem, const char *kind, const char *mark,
                                    int want) {
  char path[512], line[4096];
  FILE *f = cgt_llvm_of(g, t, stem, path, sizeof path);
  if (!f) return 0;
  int marked = 0, any = 0;
  while (fgets(line, sizeof line, f))
    if (!strncmp(line, "define", 6) && strstr(line, kind)) any = 1, marked |= strstr(line, mark) != NULL;
  fclose(f);
  unlink(path);
  return any && marked == want;
}

/* 1 when a kernel of shard 0 has a in its name (and b, unless NULL). */
static inline int cgt_so_kernel(const cgt_so *s, const char *a, const char *b) {
  const cnnc_abi_shard *sh = &s->m->shards[0];
  for (int i = 0; i < sh->n_ops; i++)
    if (strstr(sh->kernel_names[i], a) && (!b || strstr(sh->kernel_names[i], b))) return 1;
  return 0;
}

/* Output 0 of m run on x (nx floats) with nth threads, malloc'd. */
static inline float *cgt_run_copy(const cnnc_abi_model *m, const float *x, int64_t nx, int nth) {
  void *bufs[64];
  for (int i = 0; i < m->n_tensors; i++) bufs[i] = calloc(1, (size_t)m->tensors[i].bytes + 64);
  memcpy(bufs[m->input], x, (size_t)nx * sizeof *x);
  cgt_run_model(m, bufs, nth);
  size_t n = (size_t)m->tensors[m->outputs[0]].bytes;
  float *y = malloc(n);
  memcpy(y, bufs[m->outputs[0]], n);
  for (int i = 0; i < m->n_tensors; i++) free(bufs[i]);
  return y;
}

/* A random input of g in [-1, 1] and the interpreter's values on it (want: output 0). */
typedef struct cgt_ref {
  float *x, **vals;
  const float *want;
  int64_t nx, ny;
} cgt_ref;

static inline cgt_ref cgt_ref_make(ir_graph *g) {
  cgt_ref r = {0};
  r.nx = ir_shape_numel(&g->values[g->input].shape), r.ny = ir_shape_numel(&g->values[g->outputs[0]].shape);
  r.x = malloc((size_t)r.nx * sizeof *r.x);
  for (int64_t i = 0; i < r.nx; i++) r.x[i] = cgt_uniform(-1.0f, 1.0f);
  r.vals = ir_interp(g, r.x, NULL);
  r.want = r.vals[g->outputs[0]];
  return r;
}

static inline void cgt_ref_free(ir_graph *g, cgt_ref *r) {
  ir_interp_free(g, r->vals);
  free(r->x);
}

/* The end of a case: its reference and g freed. */
static inline void cgt_free_case(ir_graph *g, cgt_ref *r) {
  cgt_ref_free(g, r);
  ir_graph_free(g);
}

/* Runs s on r's input with 1..max_nth threads, output 0 poisoned with NaN before each run:
 * within tol of r's (cgt_compare) and bitwise equal to the first run, whose output goes to got
 * (ny floats; NULL: not kept).  off16 = 16: the output buffer 64-byte aligned, every thread
 * count again at 16 bytes off it.  Failures are counted in cgt_failures. */
static inline void cgt_so_runs(const cgt_so *s, const cgt_ref *r, double tol, int max_nth, int off16, const char *label,
                               float *got) {
  const cnnc_abi_model *m = s->m;
  size_t ybytes = (size_t)r->ny * sizeof(float);
  void *bufs[64], *obuf = NULL;
  for (int i = 0; i < m->n_tensors; i++) bufs[i] = calloc(1, (size_t)m->tensors[i].bytes + 64);
  memcpy(bufs[m->input], r->x, (size_t)r->nx * sizeof *r->x);
  float *first = got ? got : malloc(ybytes);
  if (off16) {
    free(bufs[m->outputs[0]]);
    if (posix_memalign(&obuf, 64, ybytes + 64)) abort();
  }
  for (int off = 0, run = 0; off <= off16; off += 16)
    for (int nth = 1; nth <= max_nth; nth++, run++) {
      float *out = off16 ? (float *)((char *)obuf + off) : bufs[m->outputs[0]];
      bufs[m->outputs[0]] = out;
      for (int64_t i = 0; i < r->ny; i++) out[i] = NAN;
      cgt_run_model(m, bufs, nth);
      char l2[400];
      if (off16) snprintf(l2, sizeof l2, "%s [%d thread%s, output +%d B]", label, nth, nth > 1 ? "s" : "", off);
      else snprintf(l2, sizeof l2, "%s [%d thread%s]", label, nth, nth > 1 ? "s" : "");
      cgt_failures += cgt_compare(l2, out, r->want, r->ny, tol);
      if (!run) memcpy(first, out, ybytes);
      else CGT_CHECK(!memcmp(first, out, ybytes), "%s: not bitwise equal to the first run", l2);
    }
  if (off16) bufs[m->outputs[0]] = NULL, free(obuf);
  for (int i = 0; i < m->n_tensors; i++) free(bufs[i]);
  if (!got) free(first);
}

/* cgt_so_open + cgt_so_runs + cgt_so_close: 0 when it ran, -1 (a failure) when it could not be
 * compiled or loaded. */
static inline int cgt_check_so(ir_graph *g, const cg_target *t, const char *label, const cgt_ref *r, double tol,
                               int max_nth, float *got) {
  cgt_so s;
  if (cgt_so_open(&s, g, t, label)) return cgt_failures++, -1;
  cgt_so_runs(&s, r, tol, max_nth, 0, label, got);
  cgt_so_close(&s);
  return 0;
}

/* Compiles g (shards already assigned) for t, runs it with 1 and 2 threads on a random input
 * and compares every output with the interpreter.  If out_copy is non-NULL, a malloc'd copy
 * of output 0 (1-thread run) is returned there.  Returns the number of mismatches. */
static inline int cgt_check_graph(ir_graph *g, const cg_target *t, const char *label, double tol, float **out_copy) {
  cgt_so s;
  if (cgt_so_open(&s, g, t, label)) return 1;
  const cnnc_abi_model *m = s.m;
  int bad = 0;
  const ir_value *xv = &g->values[g->input];
  int64_t nx = ir_shape_numel(&xv->shape);
  float *x = malloc((size_t)nx * sizeof *x);
  uint64_t saved = cgt_rng; /* the same input for every build of one graph */
  cgt_rng = 0xfeedu + (uint64_t)nx;
  for (int64_t i = 0; i < nx; i++)
    x[i] = xv->dtype == IR_U8 ? (float)cgt_int(0, 255) : xv->dtype == IR_I8 ? (float)cgt_int(-128, 127)
         : xv->dtype == IR_I32 ? (float)cgt_int(-70000, 70000) : cgt_uniform(-1.0f, 1.0f);
  if (cgt_nan_every > 0 && xv->dtype == IR_F32)
    for (int64_t i = 3; i < nx; i += cgt_nan_every) x[i] = NAN;
  cgt_rng = saved;
  float **ref = ir_interp(g, x, NULL);
  void *bufs[64];
  for (int i = 0; i < m->n_tensors; i++) bufs[i] = calloc(1, (size_t)m->tensors[i].bytes + 64);
  if (xv->dtype == IR_U8 || xv->dtype == IR_I8)
    for (int64_t i = 0; i < nx; i++) ((signed char *)bufs[m->input])[i] = (signed char)(int)x[i];
  else if (xv->dtype == IR_I32)
    for (int64_t i = 0; i < nx; i++) ((int32_t *)bufs[m->input])[i] = (int32_t)x[i];
  else
    memcpy(bufs[m->input], x, (size_t)nx * sizeof *x);
  for (int nth = 1; nth <= 2; nth++) {
    for (int o2 = 0; o2 < m->n_outputs; o2++) { /* poison outputs */
      float *ob = bufs[m->outputs[o2]];
      for (int64_t i = 0; i < m->tensors[m->outputs[o2]].bytes / 4; i++) ob[i] = NAN;
    }
    cgt_run_model(m, bufs, nth);
    for (int o2 = 0; o2 < g->n_outputs; o2++) {
      char l2[300];
      snprintf(l2, sizeof l2, "%s [%d thread%s, output %d]", label, nth, nth > 1 ? "s" : "", o2);
      const ir_value *ov = &g->values[g->outputs[o2]];
      int64_t no = ir_shape_numel(&ov->shape);
      float *got = bufs[m->outputs[o2]], *conv = NULL;
      if (ir_dtype_is_int(ov->dtype)) { /* an integer output (cast): its values as f32 */
        conv = malloc((size_t)no * sizeof *conv);
        for (int64_t i = 0; i < no; i++) {
          const void *b = bufs[m->outputs[o2]];
          conv[i] = ov->dtype == IR_U8 ? (float)((const uint8_t *)b)[i] : ov->dtype == IR_I8 ? (float)((const int8_t *)b)[i]
                  : ov->dtype == IR_I32 ? (float)((const int32_t *)b)[i] : (float)((const int64_t *)b)[i];
        }
        got = conv;
      }
      bad += cgt_compare(l2, got, ref[g->outputs[o2]], no, tol);
      free(conv);
    }
    if (nth == 1 && out_copy) {
      int64_t n0 = ir_shape_numel(&g->values[g->outputs[0]].shape);
      *out_copy = malloc((size_t)n0 * sizeof(float));
      memcpy(*out_copy, bufs[m->outputs[0]], (size_t)n0 * sizeof(float));
    }
  }
  for (int i = 0; i < m->n_tensors; i++) free(bufs[i]);
  ir_interp_free(g, ref);
  free(x);
  cgt_so_close(&s);
  return bad;
}

#include "cgt_io.h" /* files, LLVM IR lines, models from YAML, runtime models */

/* An A/B of one knob: runs g (cgt_check_graph: 1 and 2 threads against the interpreter) with the
 * current knobs, then with the ct_tune item `off`, then restores `on`; a failure for each build
 * that differs from the interpreter and when output 0 of the two is not bitwise the same. */
static inline void cgt_check_knob_bitwise(ir_graph *g, const cg_target *t, const char *label, double tol, const char *off,
                                          const char *on) {
  float *a = NULL, *b = NULL;
  int bad = cgt_check_graph(g, t, label, tol, &a);
  ct_tune(off);
  bad += cgt_check_graph(g, t, label, tol, &b);
  ct_tune(on);
  CGT_CHECK(bad == 0, "%s: compiled result differs from the interpreter", label);
  int64_t n = ir_shape_numel(&g->values[g->outputs[0]].shape);
  CGT_CHECK(a && b && !memcmp(a, b, (size_t)n * sizeof(float)), "%s: not bitwise equal with %s", label, off);
  free(a), free(b);
}

#endif
