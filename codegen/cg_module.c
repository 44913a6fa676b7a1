/* cg_module.c — cg_compile: kernels are generated into N compile units (one LLVM context
 * and module each, built, optimised and emitted on N threads), then a main module holds the
 * per-shard entry functions (cnnc_abi_shard_fn) and the exported cnnc_abi_model descriptor;
 * the objects are linked into the .so.  --emit llvm|asm|obj builds one module instead.  Also
 * the --memory-limit check before code generation (cg_check_memory_budget, cg_budget.h), which
 * plans the layout as cg_compile does. */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "codegen/cg_budget.h"
#include "codegen/cg_isa.h"
#include "codegen/cg_layout.h"
#include "codegen/cg_link.h"
#include "codegen/cg_main.h"
#include "codegen/cg_route.h"
#include "ir/grad_train.h"

/* The main module declares every kernel by the name its generator gave it: it is built once
 * every kernel unit has generated its IR (the units still optimising and emitting meanwhile). */
typedef struct gen_sync {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int left;   /* kernel units whose IR is not generated yet */
  int failed; /* a kernel unit's generation failed: the main module is not built */
} gen_sync;

typedef struct cg_unit {
  cg_layout *L;
  gen_sync *sync; /* NULL: single module */
  const cg_target *t;
  const cg_options *o;
  int id, with_kernels, with_main;
  const char *what; /* "obj", "asm", "llvm" */
  char path[4200];
  ir_diag d;
  double seconds, t_gen, t_opt; /* total, IR generation, optimisation (rest: emission) */
  double t_start, cpu;          /* now_s() when a worker took the unit, thread CPU seconds (cnnc -v) */
  int worker;
  int n_kernels, n_bodies;      /* kernels generated, distinct bodies emitted (cg_share.c) */
} cg_unit;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double thread_cpu_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void cg_ctx_init(cg_ctx *c, const cg_target *t, const ir_graph *g, LLVMTargetMachineRef tm, const char *name) {
  memset(c, 0, sizeof *c);
  c->llc = LLVMContextCreate();
  c->mod = LLVMModuleCreateWithNameInContext(name, c->llc);
  LLVMSetTarget(c->mod, t->triple);
  LLVMTargetDataRef td = LLVMCreateTargetDataLayout(tm);
  LLVMSetModuleDataLayout(c->mod, td);
  LLVMDisposeTargetData(td);
  c->b = LLVMCreateBuilderInContext(c->llc);
  c->target = t;
  c->g = g;
  c->t_void = LLVMVoidTypeInContext(c->llc);
  c->t_i1 = LLVMInt1TypeInContext(c->llc);
  c->t_i8 = LLVMInt8TypeInContext(c->llc);
  c->t_i32 = LLVMInt32TypeInContext(c->llc);
  c->t_i64 = LLVMInt64TypeInContext(c->llc);
  c->t_f32 = LLVMFloatTypeInContext(c->llc);
  c->t_ptr = LLVMPointerTypeInContext(c->llc, 0);
  c->t_vf32 = LLVMVectorType(c->t_f32, (unsigned)t->vec_f32);
  c->arena = ir_arena_new();
}

void cg_ctx_dispose(cg_ctx *c) {
  LLVMDisposeBuilder(c->b);
  LLVMDisposeModule(c->mod);
  LLVMContextDispose(c->llc);
  ir_arena_free(c->arena);
}

/* Generates the kernels assigned to unit u into c's module. */
static int gen_unit_kernels(cg_ctx *c, cg_unit *u) {
  cg_layout *L = u->L;
  cg_share *sh = ((cg_priv *)c->priv)->share;
  for (int i = 0; i < L->n_k; i++) {
    cg_kernel *k = &L->k[i];
    if (!u->with_main && k->unit != u->id) continue; /* single-module mode: all kernels */
    const ir_node *n = &L->g->nodes[k->anchor];
    ((cg_priv *)c->priv)->shard = k->shard;
    ((cg_priv *)c->priv)->node = k->anchor;
    char tmp[64];
    snprintf(tmp, sizeof tmp, "cnnk.tmp.%d", i);
    const char *kind = NULL;
    if (sh) cg_share_begin(sh);
    LLVMValueRef f = cg_route_emit(c, n, &L->kplan[k->anchor], L->train, tmp, &kind); /* the route of its plan */
    if (!f) {
      if (!u->d.failed) ir_diag_set(&u->d, n->loc, n->name, "no code generator for %s", ir_ops[n->op].name);
      return -1;
    }
    snprintf(k->kind, sizeof k->kind, "%s", kind);
    snprintf(k->name, sizeof k->name, "cnnk_s%d_%s_n%d", k->shard, kind, k->anchor);
    if (sh) cg_share_end(c, sh, f, k->name);
    else LLVMSetValueName2(f, k->name, strlen(k->name)), u->n_kernels++, u->n_bodies++;
  }
  ((cg_priv *)c->priv)->share = NULL;
  cg_share_finish(c, sh, &u->n_kernels, &u->n_bodies); /* names the kernels before the main module's calls */
  return 0;
}

static void gen_done(cg_unit *u, int rc) {
  if (!u->sync || !u->with_kernels) return;
  pthread_mutex_lock(&u->sync->mu);
  u->sync->failed |= rc != 0;
  if (--u->sync->left == 0) pthread_cond_broadcast(&u->sync->cv);
  pthread_mutex_unlock(&u->sync->mu);
}

/* 0, or -1 when a kernel unit failed (its error is reported by the unit itself). */
static int gen_wait(cg_unit *u) {
  if (!u->sync || !u->with_main) return 0;
  pthread_mutex_lock(&u->sync->mu);
  while (u->sync->left > 0) pthread_cond_wait(&u->sync->cv, &u->sync->mu);
  int failed = u->sync->failed;
  pthread_mutex_unlock(&u->sync->mu);
  return failed ? -1 : 0;
}

/* --emit plan: one line per kernel in execution order — shard, step, node, the nodes fused
 * into it, its route and kind (op, tile, 16-bit operands, ISA: what the generator chose),
 * the cache blocking of its plan and FLOPs — after a header naming the target and each
 * shard's arena.  Deterministic for a
 * pinned target (--target-cpu, --target-cache), so tests/golden/plan pins kernel choice. */
static void plan_fused(FILE *f, const ir_graph *g, const pass_fusion *p, int anchor) {
  for (int i = 0, n = 0; p && i < g->n_nodes; i++) /* the group: every node computed by anchor's kernel */
    if (i != anchor && p[i].anchor == anchor) fprintf(f, "%s%s", n++ ? "," : " +", g->nodes[i].name);
}

static int write_plan(const cg_layout *L, const cg_target *t, const char *path, ir_diag *d) {
  FILE *f = fopen(path, "w");
  if (!f) return ir_diag_set(d, (ir_loc){0}, NULL, "cannot write '%s'", path);
  const ir_graph *g = L->g;
  fprintf(f, "# cnnc kernel plan: %s, batch %d, %s; target %s, cpu %s, %d f32 lanes, L2 %lld, L3 %lld\n", g->name,
          g->batch, L->train ? "training" : "inference", t->triple, t->cpu, t->vec_f32, (long long)t->cache.l2,
          (long long)t->cache.l3);
  int bf16 = 0; /* a --half-type bf16 inference model: say which route its convs may take and why */
  for (int i = 0; i < g->n_nodes && !bf16 && !L->train; i++) bf16 = g->nodes[i].op == IR_OP_round16 && g->nodes[i].attr.round16.format == IR_HALF_BF16;
  if (bf16) {
    char why[192];
    cg_bf16_route(t, ir_tune(g), why, sizeof why);
    fprintf(f, "# bf16 convs: %s\n", why);
  }
  for (int s = 0; s < L->n_shards; s++)
    fprintf(f, "# shard %d: %d kernels, arena %lld bytes\n", s, L->sh[s].n_k, (long long)cg_shard_scratch(L, s));
  for (int i = 0; i < L->n_k; i++) {
    const cg_kernel *k = &L->k[i];
    fprintf(f, "s%d %3d %s", k->shard, k->step, g->nodes[k->anchor].name);
    plan_fused(f, g, L->plan, k->anchor);
    const cg_kplan *kp = &L->kplan[k->anchor];
    fprintf(f, " -> %s%s%s", kp->route >= 0 ? cg_routes[kp->route].name : "", kp->route >= 0 ? ": " : "", k->kind);
    if (kp->tile_block > 0) fprintf(f, " [%lld tiles/block, %lld KB]", (long long)kp->tile_block, (long long)(kp->block_bytes + 1023) / 1024);
    fprintf(f, "  %.4g MFLOP\n", k->flops / 1e6);
  }
  int bad = ferror(f);
  if (fclose(f) || bad) return ir_diag_set(d, (ir_loc){0}, NULL, "cannot write '%s': %s", path, strerror(errno ? errno : EIO));
  return 0;
}

static void *unit_run(void *arg) {
  cg_unit *u = arg;
  double t0 = now_s();
  u->t_start = t0;
  double c0 = thread_cpu_s();
  LLVMTargetMachineRef tm = cg_target_clone_tm(u->t, u->o->opt_level);
  if (!tm) {
    ir_diag_set(&u->d, (ir_loc){0}, NULL, "cannot create a target machine");
    gen_done(u, -1);
    return NULL;
  }
  char name[32];
  snprintf(name, sizeof name, "cnnc_unit%d", u->id);
  cg_ctx c;
  cg_ctx_init(&c, u->t, u->L->g, tm, name);
  cg_priv priv = {.d = &u->d, .plan = u->L->plan, .kplan = u->L->kplan,
                  .param_global = calloc((size_t)u->L->g->n_values + 1, sizeof(LLVMValueRef))};
  priv.train = u->L->train;
  priv.amp = u->o->available_memory_proportion;
  priv.plan_only = u->what && !strcmp(u->what, "plan");
  c.priv = &priv;
  int rc = 0;
  if (u->with_kernels) {
    priv.share = priv.plan_only ? NULL : cg_share_new(ir_tune(u->L->g)); /* sharing hashes the bodies' IR and blobs */
    rc = gen_unit_kernels(&c, u);
    if (priv.share) cg_share_finish(&c, priv.share, &u->n_kernels, &u->n_bodies); /* failed: just freed */
  }
  gen_done(u, rc);
  if (u->what && !strcmp(u->what, "plan")) { /* --emit plan: the kernels' choices, no machine code */
    if (!rc) rc = write_plan(u->L, u->t, u->path, &u->d);
    free(priv.param_global);
    cg_ctx_dispose(&c);
    LLVMDisposeTargetMachine(tm);
    return NULL;
  }
  int others = gen_wait(u); /* a failed kernel unit: its diagnostic is the one reported */
  if (!rc && u->with_main) rc = others ? others : cg_build_main(&c, u->L, u->o, &u->d);
  double t1 = now_s();
  if (!rc) rc = cg_optimize(c.mod, tm, u->o->opt_level, &u->d);
  double t2 = now_s();
  if (!rc) rc = cg_write_module(c.mod, tm, u->what, u->path, &u->d);
  u->t_gen = t1 - t0, u->t_opt = t2 - t1;
  free(priv.param_global);
  cg_ctx_dispose(&c);
  LLVMDisposeTargetMachine(tm);
  u->seconds = now_s() - t0;
  u->cpu = thread_cpu_s() - c0;
  return NULL;
}

/* A hint for kernel sharing (cg_share.c): kernels whose nodes agree in op, attributes,
 * operand shapes and fusion are likely to generate the same body, so they go to one unit
 * (the body's IR text decides; a wrong hint only loses sharing). */
static uint64_t mix(uint64_t h, const void *p, size_t n) {
  for (size_t i = 0; i < n; i++) h = (h ^ ((const unsigned char *)p)[i]) * 1099511628211ull;
  return h;
}

/* rank and dims only: the padding after rank is not hashed (the hint, and so the units and
 * which bodies are shared, must not depend on uninitialised bytes). */
static uint64_t mix_shape(uint64_t h, const ir_shape *s) {
  h = mix(h, &s->rank, sizeof s->rank);
  return mix(h, s->dim, (size_t)(s->rank > 0 && s->rank <= IR_MAX_RANK ? s->rank : 0) * sizeof s->dim[0]);
}

static uint64_t node_hint(const ir_graph *g, const ir_node *n, uint64_t h) {
  h = mix(h, &n->op, sizeof n->op);
  h = mix(h, &n->attr, sizeof n->attr);
  for (int j = 0; j < n->n_in; j++) {
    const ir_value *v = &g->values[n->in[j]];
    h = mix(h, &v->kind, sizeof v->kind);
    h = mix(h, &v->dtype, sizeof v->dtype);
    h = mix_shape(h, &v->shape);
  }
  h = mix(h, &g->values[n->out].dtype, sizeof g->values[n->out].dtype);
  return mix_shape(h, &g->values[n->out].shape);
}

static uint64_t share_hint(const cg_layout *L, const cg_kernel *k) {
  const ir_graph *g = L->g;
  const pass_fusion *f = L->plan ? &L->plan[k->anchor] : NULL;
  uint64_t h = node_hint(g, &g->nodes[k->anchor], 1469598103934665603ull);
  h = mix(h, &k->n_act, sizeof k->n_act);
  if (!f) return h;
  int shape[5] = {f->bn >= 0, f->n_post, f->n_pre, f->n_side, f->side2 > 0};
  h = mix(h, shape, sizeof shape);
  if (f->bn >= 0) h = node_hint(g, &g->nodes[f->bn], h);
  for (int j = 0; j < f->n_post; j++) h = node_hint(g, &g->nodes[f->post[j]], h);
  if (f->n_pre) h = node_hint(g, &g->nodes[f->pre], h);
  if (f->n_side) h = node_hint(g, &g->nodes[f->side], h);
  return h;
}

/* Kernels -> units, longest first to the least loaded unit (estimate: 1 + weight elements
 * / 1e6; a kernel with the same sharing hint as an earlier one joins that one's unit at a
 * twentieth of its estimate: cg_share.c keeps one body).  The estimate is rough (the code
 * size decides: ResNet-50 b16's 1x1 s2 downsample of layer3, `sub_vc` 48x8 with 0.5 M
 * weights, is 28 % of the compile, its layer4 twin with 2.1 M weights 8 %), so every group
 * of kernels gets its own unit, up to CG_MAX_UNITS, and workers take units from a queue,
 * heaviest estimate first: a misjudged unit delays one worker by at most its own time.
 * The plan depends on the kernels only, not on the number of threads, so the .so does not
 * either.  tune units_per_thread=1: the previous plan, 4 units per online CPU (A/B).
 * Returns the number of units (each holds at least one kernel). */
#define CG_MAX_UNITS 32
static int assign_units(cg_layout *L, int workers, double **loadp) {
  int *ord = malloc((size_t)L->n_k * sizeof *ord), *lead = malloc((size_t)L->n_k * sizeof *lead);
  double *est = malloc((size_t)L->n_k * sizeof *est);
  uint64_t *hint = malloc((size_t)L->n_k * sizeof *hint);
  if (!ord || !est || !lead || !hint) abort();
  int share = ir_tune(L->g)->kernel_share, groups = 0;
  for (int i = 0; i < L->n_k; i++) {
    const ir_node *nd = &L->g->nodes[L->k[i].anchor];
    est[i] = 1.0;
    for (int j = 0; j < nd->n_in; j++)
      if (L->g->values[nd->in[j]].kind == IR_VAL_PARAM) est[i] += (double)ir_shape_numel(&L->g->values[nd->in[j]].shape) / 1e6;
    hint[i] = share ? share_hint(L, &L->k[i]) : (uint64_t)i;
    lead[i] = i;
    for (int j = 0; j < i && lead[i] == i; j++)
      if (hint[j] == hint[i]) lead[i] = lead[j];
    groups += lead[i] == i;
  }
  int n = groups < CG_MAX_UNITS ? groups : CG_MAX_UNITS;
  if (ir_tune(L->g)->units_per_thread) n = workers == 1 ? 1 : 4 * workers < L->n_k ? 4 * workers : L->n_k;
  if (n < 1) n = 1;
  double *load = calloc((size_t)n, sizeof *load);
  if (!load) abort();
  for (int i = 0; i < L->n_k; i++) ord[i] = i;
  for (int i = 1; i < L->n_k; i++) /* insertion sort, heaviest first, stable (n_k is small) */
    for (int j = i; j > 0 && est[ord[j]] > est[ord[j - 1]]; j--) {
      int t = ord[j];
      ord[j] = ord[j - 1], ord[j - 1] = t;
    }
  for (int r = 0; r < L->n_k; r++) { /* group leaders first */
    int i = ord[r], best = 0;
    if (lead[i] != i) continue;
    for (int u = 1; u < n; u++)
      if (load[u] < load[best]) best = u;
    L->k[i].unit = best;
    load[best] += est[i];
  }
  for (int i = 0; i < L->n_k; i++)
    if (lead[i] != i) L->k[i].unit = L->k[lead[i]].unit, load[L->k[i].unit] += est[i] / 20;
  free(ord);
  free(est);
  free(lead);
  free(hint);
  *loadp = load;
  return n;
}

/* Workers take the next unit of the queue (units ordered by estimated load, heaviest first). */
typedef struct unit_queue {
  pthread_mutex_t mu;
  cg_unit *u;
  const int *order;
  int n, next, workers;
} unit_queue;

static void *unit_worker(void *arg) {
  unit_queue *q = arg;
  pthread_mutex_lock(&q->mu);
  int w = q->workers++;
  pthread_mutex_unlock(&q->mu);
  for (;;) {
    pthread_mutex_lock(&q->mu);
    int i = q->next < q->n ? q->order[q->next++] : -1;
    pthread_mutex_unlock(&q->mu);
    if (i < 0) return NULL;
    q->u[i].worker = w;
    unit_run(&q->u[i]);
  }
}

/* Units 0..n-1 hold kernels, unit n the main module: queued last, it waits for the others' IR. */
static int run_units(cg_unit *u, int n, int workers, const double *load) {
  int *order = malloc((size_t)(n + 1) * sizeof *order);
  pthread_t *th = calloc((size_t)workers, sizeof *th);
  int *started = calloc((size_t)workers, sizeof *started);
  if (!order || !th || !started) abort();
  for (int i = 0; i < n; i++) order[i] = i;
  for (int i = 1; i < n; i++)
    for (int j = i; j > 0 && load[order[j]] > load[order[j - 1]]; j--) {
      int t = order[j];
      order[j] = order[j - 1], order[j - 1] = t;
    }
  order[n] = n;
  gen_sync sync = {.left = n};
  pthread_mutex_init(&sync.mu, NULL);
  pthread_cond_init(&sync.cv, NULL);
  for (int i = 0; i <= n; i++) u[i].sync = &sync;
  unit_queue q = {.u = u, .order = order, .n = n + 1, .next = 0};
  pthread_mutex_init(&q.mu, NULL);
  for (int i = 1; i < workers; i++) started[i] = pthread_create(&th[i], NULL, unit_worker, &q) == 0;
  unit_worker(&q); /* a worker that failed to start leaves its units to the others */
  for (int i = 1; i < workers; i++)
    if (started[i]) pthread_join(th[i], NULL);
  pthread_mutex_destroy(&q.mu);
  pthread_cond_destroy(&sync.cv);
  pthread_mutex_destroy(&sync.mu);
  free(order);
  free(th);
  free(started);
  for (int i = 0; i <= n; i++)
    if (u[i].d.failed) return i;
  return -1;
}

static int compile_single(cg_layout *L, const cg_target *t, const cg_options *o, ir_diag *d) {
  cg_unit u;
  memset(&u, 0, sizeof u);
  u.L = L, u.t = t, u.o = o, u.with_kernels = 1, u.with_main = 1, u.what = o->emit;
  snprintf(u.path, sizeof u.path, "%s", o->output);
  unit_run(&u);
  if (u.d.failed) {
    *d = u.d;
    return -1;
  }
  return 0;
}

static int compile_so(cg_layout *L, const cg_target *t, const cg_options *o, ir_diag *d) {
  int want = ir_tune(L->g)->compile_threads; /* worker threads; default: the online CPUs, <= 16 */
  long ncpu = want > 0 ? want : sysconf(_SC_NPROCESSORS_ONLN);
  int workers = (int)(ncpu < 1 ? 1 : ncpu > 16 ? 16 : ncpu);
  char dir[4096];
  if (cg_tmpdir(dir, sizeof dir, o->tmpdir, d)) return -1;
  double *load;
  int n = assign_units(L, workers, &load);
  if (workers > n) workers = n;
  cg_unit *u = calloc((size_t)n + 1, sizeof *u);
  const char **objs = calloc((size_t)n + 1, sizeof *objs);
  if (!u || !objs) abort();
  for (int i = 0; i <= n; i++) {
    u[i].L = L, u[i].t = t, u[i].o = o, u[i].id = i, u[i].what = "obj";
    u[i].with_kernels = i < n, u[i].with_main = i == n;
    snprintf(u[i].path, sizeof u[i].path, "%s/unit%d.o", dir, i);
    objs[i] = u[i].path;
  }
  double t0 = now_s();
  int bad = run_units(u, n, workers, load); /* kernel units in parallel, the main module last */
  free(load);
  double t1 = now_s();
  int rc = bad >= 0 ? -1 : cg_link_shared(objs, n + 1, o->output, dir, d);
  if (o->report && o->report->phase && rc == 0) {
    o->report->phase(o->report->ctx, "codegen", t1 - t0);
    o->report->phase(o->report->ctx, "link", now_s() - t1);
  }
  if (bad >= 0) *d = u[bad].d;
  if (o->verbose && bad < 0) {
    int nb = 0;
    for (int i = 0; i < n; i++) nb += u[i].n_bodies;
    fprintf(stderr, "cnnc: codegen %d kernels (%d distinct bodies) in %d units on %d threads: %.2f s, link %.2f s\n",
            L->n_k, nb, n, workers, t1 - t0, now_s() - t1);
    for (int i = 0; i <= n; i++) {
      fprintf(stderr, "cnnc:   unit %d%s: worker %d, %.2f-%.2f s, %.2f CPU-s: IR %.2f s, optimise %.2f s, emit %.2f s;", i,
              i == n ? " (main)" : "", u[i].worker, u[i].t_start - t0, u[i].t_start - t0 + u[i].seconds, u[i].cpu, u[i].t_gen,
              u[i].t_opt, u[i].seconds - u[i].t_gen - u[i].t_opt);
      for (int k = 0; k < L->n_k && i < n; k++)
        if (L->k[k].unit == i) fprintf(stderr, " %s", L->k[k].kind);
      fprintf(stderr, "\n");
    }
  }
  cg_rmtree_flat(dir, objs, n + 1);
  free(u);
  free(objs);
  return rc;
}

/* The kernel plan of every node of L's graph (cg_select). */
static int cg_layout_select(cg_layout *L, const cg_target *t, const char *amp, ir_diag *d) {
  L->kplan = calloc((size_t)L->g->n_nodes + 1, sizeof *L->kplan);
  if (!L->kplan) abort();
  return cg_select(L->g, L->plan, t, amp, L->train, L->kplan, d);
}

/* Hands the compiled plan (kernel names filled) to a report sink as plain records. */
static void report_layout(const cg_layout *L, const cg_report_sink *r) {
  int n_b = 0;
  for (int s = 0; s < L->n_shards; s++) n_b += L->sh[s].n_usage;
  cg_report_kernel *k = calloc((size_t)L->n_k + 1, sizeof *k);
  cg_report_buffer *b = calloc((size_t)n_b + 1, sizeof *b);
  int64_t *arena = calloc((size_t)L->n_shards, sizeof *arena);
  if (!k || !b || !arena) abort();
  for (int i = 0; i < L->n_k; i++) {
    const cg_kernel *x = &L->k[i];
    k[i] = (cg_report_kernel){x->anchor, x->last, x->shard, x->step, x->out, x->n_act, x->act, x->flops, x->name, x->kind,
                              &L->kplan[x->anchor]};
  }
  n_b = 0;
  for (int s = 0; s < L->n_shards; s++) {
    const cg_shard_plan *sp = &L->sh[s];
    arena[s] = cg_shard_scratch(L, s);
    for (int i = 0; i < sp->n_usage; i++) {
      const pass_usage *u = &sp->usage[i];
      b[n_b++] = (cg_report_buffer){s, sp->usage_vid[i], u->first_step, u->last_step, u->bytes, u->offset};
    }
  }
  r->layout(r->ctx, k, L->n_k, L->plan, b, n_b, arena, L->n_shards, L->tensor_vid, L->n_tensors);
  free(k);
  free(b);
  free(arena);
}

int cg_compile(const ir_graph *g, const cg_target *t, const cg_options *o, ir_diag *d) {
  if (!o->output || !*o->output) return ir_diag_set(d, (ir_loc){0}, NULL, "no output file given");
  if (o->emit && strcmp(o->emit, "llvm") && strcmp(o->emit, "asm") && strcmp(o->emit, "obj") && strcmp(o->emit, "plan"))
    return ir_diag_set(d, (ir_loc){0}, NULL, "unknown --emit kind '%s' (llvm, asm, obj, plan)", o->emit);
  cg_llvm_options(ir_tune(g)->sched_huge_region);
  cg_layout L;
  if (cg_layout_build_opts(&L, g, 1, o, d) || cg_layout_select(&L, t, o->available_memory_proportion, d)) {
    cg_layout_free(&L);
    return -1;
  }
  int rc = o->emit ? compile_single(&L, t, o, d) : compile_so(&L, t, o, d);
  if (rc == 0 && o->report && o->report->layout) report_layout(&L, o->report);
  cg_layout_free(&L);
  return rc;
}

/* ---- --memory-limit (cg_budget.h: the check before code generation plans the layout as cg_compile
 * does) ---------------------------------------------------------------------------------------- */
static int64_t value_bytes(const ir_graph *g, int v) {
  return ir_shape_numel(&g->values[v].shape) * (int64_t)ir_dtype_size(g->values[v].dtype);
}

/* Inference: the records of codegen's own layout (the same cg_layout_build call). */
static void inference_records(const cg_layout *L, pass_mem_shard *sh) {
  for (int s = 0; s < L->n_shards; s++) {
    const cg_shard_plan *sp = &L->sh[s];
    pass_mem_shard *x = &sh[s];
    memset(x, 0, sizeof *x);
    x->n_steps = sp->n_k;
    x->step_node = calloc((size_t)sp->n_k + 1, sizeof(int));
    if (!x->step_node) abort();
    for (int i = 0; i < sp->n_k; i++) x->step_node[i] = L->k[sp->first_k + i].last;
    x->usage = sp->usage, x->usage_vid = sp->usage_vid, x->n_usage = sp->n_usage;
    x->arena = cg_shard_scratch(L, s);
    for (int i = 0; i < sp->n_io; i++) x->io += value_bytes(L->g, L->tensor_vid[sp->io[i]]);
  }
}

static int is_training(const ir_graph *g) {
  for (int i = 0; i < g->n_nodes; i++)
    if (ir_op_is_optimizer(g->nodes[i].op)) return 1;
  return 0;
}

int cg_check_memory_budget(const ir_graph *g, int64_t memory_limit, const char *amp, ir_diag *d) {
  int n_shards = g->n_shards > 0 ? g->n_shards : 1;
  if (cg_budget_check_proportions(amp, n_shards, d)) return -1;
  if (memory_limit <= 0) return 0;
  pass_mem_shard *sh = calloc((size_t)n_shards, sizeof *sh);
  if (!sh) abort();
  int rc;
  if (is_training(g)) {
    pass_mem_train_estimate(g, sh);
    rc = pass_memory_limit_check(g, sh, n_shards, memory_limit, d);
    pass_mem_shards_free(sh, n_shards);
  } else {
    cg_layout L;
    rc = cg_layout_build(&L, g, 1, d);
    if (rc == 0) {
      inference_records(&L, sh);
      rc = pass_memory_limit_check(g, sh, L.n_shards < n_shards ? L.n_shards : n_shards, memory_limit, d);
      for (int s = 0; s < L.n_shards && s < n_shards; s++) free(sh[s].step_node);
    }
    cg_layout_free(&L);
  }
  free(sh);
  return rc;
}
