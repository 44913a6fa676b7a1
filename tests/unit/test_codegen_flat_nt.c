/* test_codegen_flat_nt.c — the flat (1x1 stride-1 GEMM) convs' non-temporal output stores
 * (gen_conv.c, flat_store_nt / flat_nt_ok).  Convs with a fused residual add, built with
 * tune flat_nt_all=1 (forced on), tune flat_nt=0 (off) and neither (the default rule:
 * 16-lane vectors, i.e. a whole cache line per store, and outputs of at least 16 MB for the
 * batch), for the host and
 * for AVX2 (x86-64-v3): the LLVM IR has !nontemporal stores exactly when the rule says so;
 * every output matches the interpreter with 1, 2 and 3 threads (bitwise equal between them),
 * with the output buffer 64-byte aligned (the vmovntps path) and 16 bytes off (the tile's
 * run-time alignment check takes the plain stores), and the builds are bitwise equal to each
 * other (a store hint changes no value).  Cases: odd Cout (a leftover channel tile), planes
 * of whole vectors and not (the latter never take the route), a masked plane tail, a short
 * last chunk, batch 1 and 3 (the pixel and the tile thread split). */
#include "test_codegen_harness.h"

#define SHAPE(...) ((ir_shape){sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t), {__VA_ARGS__}})

/* gen_conv.c FLAT_NT_MIN_BYTES */
#define NT_MIN_BYTES (16.0 * 1024 * 1024)

typedef struct nt_case { int n, cin, cout, h, w; } nt_case;

static const nt_case cases[] = {
    {3, 48, 70, 16, 16},   /* 256-px planes (whole vectors), 70 = 11*6 + 4 on 16 lanes */
    {1, 96, 29, 33, 32},   /* 1056-px plane: a short last chunk; batch 1: the tile split */
    {2, 40, 13, 13, 13},   /* 169-px plane: not whole vectors, never non-temporal */
    {2, 16, 65, 180, 180}, /* 16.8 MB of output: the default rule takes it on 16 lanes */
};

static int conv1x1(ir_graph *g, const char *name, int x, int cin, int cout, int bn) {
  char wn[64];
  snprintf(wn, sizeof wn, "%s/weight", name);
  int in[2] = {x, ir_add_param(g, wn, SHAPE(cout, cin, 1, 1), 1)};
  ir_attr a = {.conv2d = {{1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1}};
  int y = cgt_node(g, IR_OP_conv2d, name, in, 2, &a);
  if (!bn) return y;
  char bnn[80];
  snprintf(bnn, sizeof bnn, "%s/bn", name);
  return cgt_add_bn(g, bnn, y, cout);
}

/* relu(bn(conv a(x)) + conv b(x)): a's kernel has the add and the relu fused and writes the
 * model's output. */
static ir_graph *nt_graph(const nt_case *k) {
  ir_graph *g = ir_graph_new("t", k->n);
  int x = ir_add_input(g, "x", IR_F32, SHAPE(k->n, k->cin, k->h, k->w));
  int in2[2] = {conv1x1(g, "a", x, k->cin, k->cout, 1), conv1x1(g, "b", x, k->cin, k->cout, 0)};
  int y = cgt_node(g, IR_OP_add, "add", in2, 2, NULL);
  ir_attr none = {0};
  y = cgt_node(g, IR_OP_relu, "relu", &y, 1, &none);
  g->outputs[g->n_outputs++] = y;
  g->n_shards = 1;
  return g;
}

/* Whether g's LLVM IR for t has a non-temporal store; -1 when it does not compile. */
static int has_nt(ir_graph *g, const cg_target *t) {
  char path[512], line[4096];
  FILE *f = cgt_llvm_of(g, t, "flat_nt", path, sizeof path);
  if (!f) return -1;
  int found = 0;
  while (fgets(line, sizeof line, f)) found |= strstr(line, "store ") && strstr(line, "!nontemporal") != NULL;
  fclose(f);
  unlink(path);
  return found;
}

/* Builds g with the knob item tune (e.g. "flat_nt=0"; NULL: the defaults), checks the IR has
 * non-temporal stores iff want, runs it with 1..3 threads and the output at 64-byte alignment
 * + off bytes (off 0 and 16) against ref; the first run's output goes to got (ny floats).
 * Returns 0 when run. */
static int build_run(ir_graph *g, const cg_target *t, const char *label, const char *tune, int want, float **ref,
                     const float *x, float *got) {
  if (tune) ct_tune(tune);
  int nt = has_nt(g, t);
  CGT_CHECK(nt == want, "%s: non-temporal stores in the IR: %d, want %d", label, nt, want);
  char so[512];
  snprintf(so, sizeof so, "%s/flat_nt.so", cgt_dir);
  cg_options o = {so, NULL, label, "{\"test\": true}", 2, 0};
  ir_diag d = {0};
  int rc = cg_compile(ct_g(g), t, &o, &d);
  ct_tune("flat_nt_all=0,flat_nt=1");
  if (rc) {
    ir_diag_print(&d, stderr);
    CGT_CHECK(0, "%s: compile failed", label);
    return -1;
  }
  void *h = dlopen(so, RTLD_NOW | RTLD_LOCAL);
  const cnnc_abi_model *m = h ? dlsym(h, CNNC_ABI_SYMBOL) : NULL;
  CGT_CHECK(m != NULL, "%s: cannot load: %s", label, h ? "no descriptor" : dlerror());
  if (!m) {
    if (h) dlclose(h);
    unlink(so);
    return -1;
  }
  int flat = 0;
  for (int i = 0; i < m->shards[0].n_ops; i++) flat |= strstr(m->shards[0].kernel_names[i], "conv2d_1x1_") && strstr(m->shards[0].kernel_names[i], "_add_");
  CGT_CHECK(flat, "%s: no flat conv kernel with a fused add (%s)", label, m->shards[0].kernel_names[0]);
  int64_t nx = ir_shape_numel(&g->values[g->input].shape), ny = ir_shape_numel(&g->values[g->outputs[0]].shape);
  void *bufs[64], *obuf = NULL;
  for (int i = 0; i < m->n_tensors; i++) bufs[i] = calloc(1, (size_t)m->tensors[i].bytes + 64);
  memcpy(bufs[m->input], x, (size_t)nx * sizeof *x);
  free(bufs[m->outputs[0]]);
  if (posix_memalign(&obuf, 64, (size_t)ny * sizeof(float) + 64)) abort();
  int first = 1;
  for (int off = 0; off <= 16; off += 16)
    for (int nth = 1; nth <= 3; nth++) {
      float *out = (float *)((char *)obuf + off);
      bufs[m->outputs[0]] = out;
      for (int64_t i = 0; i < ny; i++) out[i] = NAN;
      cgt_run_model(m, bufs, nth);
      char l2[200];
      snprintf(l2, sizeof l2, "%s [%d threads, output +%d B]", label, nth, off);
      cgt_failures += cgt_compare(l2, out, ref[g->outputs[0]], ny, 1e-4);
      if (first) memcpy(got, out, (size_t)ny * sizeof *got), first = 0;
      else CGT_CHECK(!memcmp(got, out, (size_t)ny * sizeof *got), "%s: not bitwise equal to the first run", l2);
    }
  bufs[m->outputs[0]] = NULL;
  free(obuf);
  for (int i = 0; i < m->n_tensors; i++) free(bufs[i]);
  dlclose(h);
  unlink(so);
  return 0;
}

static void run_case(const nt_case *k, const cg_target *t, const char *pfx) {
  char label[160];
  snprintf(label, sizeof label, "%s n%d %d->%d %dx%d", pfx, k->n, k->cin, k->cout, k->h, k->w);
  ir_graph *g = nt_graph(k);
  cgt_random_params(g, 0.5f);
  int64_t nx = ir_shape_numel(&g->values[g->input].shape), ny = ir_shape_numel(&g->values[g->outputs[0]].shape);
  int64_t plane = (int64_t)k->h * k->w;
  int whole = plane % t->vec_f32 == 0, line = t->vec_f32 * 4 >= 64;
  float *x = malloc((size_t)nx * sizeof *x), *got[3];
  for (int64_t i = 0; i < nx; i++) x[i] = cgt_uniform(-1.0f, 1.0f);
  float **ref = ir_interp(g, x, NULL);
  const char *tune[3] = {"flat_nt_all=1", "flat_nt=0", NULL};
  int want[3] = {whole, 0, whole && line && 4.0 * (double)ny >= NT_MIN_BYTES}, ok[3];
  for (int i = 0; i < 3; i++) {
    char l[200];
    snprintf(l, sizeof l, "%s %s", label, tune[i] ? tune[i] : "default");
    got[i] = malloc((size_t)ny * sizeof *got[i]);
    ok[i] = build_run(g, t, l, tune[i], want[i], ref, x, got[i]) == 0;
  }
  for (int i = 1; i < 3; i++)
    if (ok[0] && ok[i]) CGT_CHECK(!memcmp(got[0], got[i], (size_t)ny * sizeof *got[0]), "%s: builds %d and 0 differ", label, i);
  ir_interp_free(g, ref);
  for (int i = 0; i < 3; i++) free(got[i]);
  free(x);
  ir_graph_free(g);
}

int main(void) {
  (void)cgt_check_graph; /* this test runs 1..3 threads itself */
  cgt_init_dir();
  cg_target host, avx2;
  if (cgt_target(&host, NULL) || cgt_target(&avx2, "x86-64-v3")) return 1;
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    run_case(&cases[i], &host, "host");
    run_case(&cases[i], &avx2, "avx2");
  }
  cg_target_dispose(&host);
  cg_target_dispose(&avx2);
  cgt_cleanup_dir();
  if (cgt_failures) fprintf(stderr, "test_codegen_flat_nt: %d failure(s)\n", cgt_failures);
  else fprintf(stderr, "test_codegen_flat_nt: ok\n");
  return cgt_failures != 0;
}
