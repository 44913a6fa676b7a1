/* test_dyn_shares.c — dynamic shares of inference entries (codegen/cg_main.c, docs/runtime.md
 * "Dynamic shares"): small conv chains with an odd and an even number of dynamic ops, batch 1
 * and 3, compiled with the default (4 parts per thread) and with tune dyn_parts=1 (the static
 * split).  The dynamic build must reserve its counters (larger scratch), match the
 * interpreter and be bitwise the static build on 1, 2, 3 and 8 threads of the test harness
 * (NaN-filled scratch: the entry zeroes its counters itself), and through libcnnrt on 2, 5, 8
 * and 17 threads (17: above the counters' limit, static) over many micro-batches, each with
 * its own input (the counters are reused and zeroed one op ahead), without hanging. */
#include <signal.h>

#include "runtime/cnnrt.h"
#include "test_codegen_harness.h"

#define SHAPE(...) ((ir_shape){sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t), {__VA_ARGS__}})

/* x [n,16,24,24] -> conv3x3 16->32 (kernel 0, static) -> relu -> n_dyn x (conv3x3 32->32 ->
 * relu) -> conv1x1 32->32 -> global avgpool -> flatten -> fc 10.  Each 3x3 32->32 is 10.6
 * MFLOP per image: dynamic. */
static ir_graph *chain(int n, int n_dyn) {
  ir_graph *g = ir_graph_new("dyn_chain", n);
  int h = ir_add_input(g, "image", IR_F32, SHAPE(n, 16, 24, 24));
  ir_attr a3 = {.conv2d = {{3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1}};
  ir_attr a1 = {.conv2d = {{1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1}};
  char nm[64], w[64];
  for (int i = 0; i <= n_dyn + 1; i++) {
    int cin = i == 0 ? 16 : 32, k = i == n_dyn + 1 ? 1 : 3;
    snprintf(nm, sizeof nm, "conv%d", i);
    snprintf(w, sizeof w, "conv%d/weight", i);
    h = cgt_node(g, IR_OP_conv2d, nm, (int[]){h, cgt_param(g, w, SHAPE(32, cin, k, k))}, 2, k == 3 ? &a3 : &a1);
    snprintf(nm, sizeof nm, "relu%d", i);
    h = cgt_node(g, IR_OP_relu, nm, &h, 1, NULL);
  }
  h = cgt_node(g, IR_OP_global_avgpool, "gap", &h, 1, NULL);
  ir_attr ra = {.reshape = {{2, {n, -1}}}};
  h = cgt_node(g, IR_OP_reshape, "flatten", &h, 1, &ra);
  ir_attr da = {.dense = {10}};
  h = cgt_node(g, IR_OP_dense, "fc", (int[]){h, cgt_param(g, "fc/weight", SHAPE(10, 32)), cgt_param(g, "fc/bias", SHAPE(10))}, 3,
               &da);
  g->outputs[g->n_outputs++] = h;
  cgt_random_params(g, 0.3f);
  return g;
}

typedef struct built {
  char so[400];
  void *h;
  const cnnc_abi_model *m;
} built;

static int build(ir_graph *g, const cg_target *t, const char *stem, const char *parts, built *b) {
  snprintf(b->so, sizeof b->so, "%s/%s.so", cgt_dir, stem);
  ct_tune(parts ? parts : "dyn_parts=4");
  cg_options o = {b->so, NULL, stem, "{}", 2, 0};
  ir_diag d = {0};
  int rc = cg_compile(ct_g(g), t, &o, &d);
  ct_tune("dyn_parts=4");
  if (rc) {
    ir_diag_print(&d, stderr);
    return 1;
  }
  b->h = dlopen(b->so, RTLD_NOW | RTLD_LOCAL);
  b->m = b->h ? dlsym(b->h, CNNC_ABI_SYMBOL) : NULL;
  return b->m ? 0 : 1;
}

/* Output of model m on x with nth harness threads (malloc'd). */
static float *run_harness(const cnnc_abi_model *m, const float *x, int nth) {
  void *bufs[64];
  for (int i = 0; i < m->n_tensors; i++) bufs[i] = calloc(1, (size_t)m->tensors[i].bytes + 64);
  memcpy(bufs[m->input], x, (size_t)m->tensors[m->input].bytes);
  float *o = bufs[m->outputs[0]]; /* poisoned: a part no thread ran shows */
  for (int64_t i = 0; i < m->tensors[m->outputs[0]].bytes / 4; i++) o[i] = NAN;
  cgt_run_model(m, bufs, nth);
  float *y = malloc((size_t)m->tensors[m->outputs[0]].bytes);
  memcpy(y, bufs[m->outputs[0]], (size_t)m->tensors[m->outputs[0]].bytes);
  for (int i = 0; i < m->n_tensors; i++) free(bufs[i]);
  return y;
}

/* nb micro-batches through libcnnrt on nth threads: each must equal the static build's
 * single-thread output on its input bitwise. */
static void check_runtime(const built *dyn, const built *st, const float *xs, int nb, int nth, const char *label) {
  cnnrt_options o;
  cnnrt_options_init(&o);
  o.threads_per_shard = nth;
  cnnrt_model *m = NULL;
  cnnrt_status s = cnnrt_open(dyn->so, &o, &m);
  CGT_CHECK(s == CNNRT_OK, "%s: open: %s", label, cnnrt_last_error());
  if (s != CNNRT_OK) return;
  size_t ib = cnnrt_input_bytes(m), ob = cnnrt_output_bytes(m);
  float *y = malloc(ob * (size_t)nb);
  for (int rep = 0; rep < 2; rep++) { /* two calls: the counters survive between them */
    s = cnnrt_infer(m, xs, ib * (size_t)nb, y, ob * (size_t)nb, nb);
    CGT_CHECK(s == CNNRT_OK, "%s: infer: %s", label, cnnrt_last_error());
    int bad = 0;
    for (int b = 0; b < nb && s == CNNRT_OK; b++) {
      float *want = run_harness(st->m, (const float *)((const char *)xs + ib * (size_t)b), 1);
      if (memcmp(want, (char *)y + ob * (size_t)b, ob) != 0 && bad++ < 3)
        CGT_CHECK(0, "%s: call %d micro-batch %d differs from the static build", label, rep, b);
      free(want);
    }
  }
  free(y);
  cnnrt_close(m);
}

int main(void) {
  alarm(600); /* a hang fails instead of blocking ctest until its timeout */
  cgt_init_dir();
  cg_target t;
  if (cgt_target(&t, NULL)) return 1;
  struct { int n, n_dyn; } cases[] = {{1, 3}, {1, 2}, {3, 3}};
  for (size_t ci = 0; ci < sizeof cases / sizeof *cases; ci++) {
    char label[96];
    snprintf(label, sizeof label, "batch %d, %d dynamic convs", cases[ci].n, cases[ci].n_dyn);
    ir_graph *g = chain(cases[ci].n, cases[ci].n_dyn);
    built dyn = {0}, st = {0};
    if (build(g, &t, "dyn", NULL, &dyn) || build(g, &t, "static", "dyn_parts=1", &st)) {
      CGT_CHECK(0, "%s: compile/open failed", label);
      ir_graph_free(g);
      continue;
    }
    CGT_CHECK(dyn.m->shards[0].scratch_bytes > st.m->shards[0].scratch_bytes,
              "%s: no counters reserved (scratch %lld vs static %lld): dyn_parts changes nothing", label,
              (long long)dyn.m->shards[0].scratch_bytes, (long long)st.m->shards[0].scratch_bytes);
    int64_t nx = ir_shape_numel(&g->values[g->input].shape), ny = ir_shape_numel(&g->values[g->outputs[0]].shape);
    int nb = 24;
    float *xs = malloc((size_t)(nx * nb) * sizeof *xs);
    for (int64_t i = 0; i < nx * nb; i++) xs[i] = cgt_uniform(-1.0f, 1.0f);
    CGT_CHECK(cgt_check_graph(g, &t, label, 1e-4, NULL) == 0, "%s: dynamic build vs interpreter", label);
    float *y1 = run_harness(st.m, xs, 1);
    int nths[] = {1, 2, 3, 8};
    for (size_t k = 0; k < sizeof nths / sizeof *nths; k++) {
      float *a = run_harness(dyn.m, xs, nths[k]), *b = run_harness(st.m, xs, nths[k]);
      CGT_CHECK(memcmp(a, y1, (size_t)ny * sizeof *a) == 0 && memcmp(b, y1, (size_t)ny * sizeof *b) == 0,
                "%s: %d harness threads: dynamic / static builds differ from 1 thread", label, nths[k]);
      free(a), free(b);
    }
    int rts[] = {2, 5, 8, 17};
    for (size_t k = 0; k < sizeof rts / sizeof *rts; k++) {
      char l2[128];
      snprintf(l2, sizeof l2, "%s, runtime %d threads", label, rts[k]);
      check_runtime(&dyn, &st, xs, rts[k] == 17 ? 4 : nb, rts[k], l2);
    }
    free(y1);
    free(xs);
    dlclose(dyn.h), dlclose(st.h);
    unlink(dyn.so), unlink(st.so);
    ir_graph_free(g);
  }
  cg_target_dispose(&t);
  cgt_cleanup_dir();
  if (cgt_failures) fprintf(stderr, "%d failure(s)\n", cgt_failures);
  return cgt_failures ? 1 : 0;
}
