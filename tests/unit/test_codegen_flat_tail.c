/* test_codegen_flat_tail.c — two flat (1x1 stride-1) conv variants of gen_conv.c: the plane's
 * masked tail of at most 8 pixels on channel vectors (flat_tail_cv: masked weight loads, pixel
 * broadcasts, residual gathered, result scattered) and the prefetch of the item that packs a
 * chunk (flat_pack_prefetch, opt-in).  Small planes with a tail (7x9, 10x10, 13x13, 14x14), a
 * leftover channel tile, a fused residual add, batch 1 to 3, built with both variants
 * (tune flat_pack_pf=48) and with neither (tune flat_tail_cv=0), for the host and x86-64-v3: every output
 * matches the interpreter, 1, 2 and 3 threads are bitwise equal, the two builds are bitwise
 * equal (the tail's fmuladd chains and epilogue are the pixel tiles'), and the LLVM IR has
 * llvm.masked.scatter (some case per target, none without the variants) and, for the convs
 * without an add (inputs under the next-chunk prefetch's 4 MB floor), llvm.prefetch only with
 * them.  x86-64-v4 (16 lanes) is checked by its IR on any host. */
#include "test_codegen_harness.h"

#define SHAPE(...) ((ir_shape){sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t), {__VA_ARGS__}})

typedef struct tail_case {
  int n, cin, cout, h, w, resid; /* resid: relu(bn(conv a(x)) + conv b(x)), else relu(bn(conv a(x))) */
} tail_case;

static const tail_case cases[] = {
    {1, 256, 64, 14, 14, 0}, /* ResNet-50 layer3's 196-pixel plane */
    {1, 96, 29, 14, 14, 1},  /* a fused add; 29 channels: a leftover tile */
    {2, 130, 40, 7, 9, 1},   /* batch 2: whole images per thread */
    {3, 64, 70, 10, 10, 0},  /* batch 3: the tile split */
    {1, 300, 40, 13, 13, 0}, /* 169 pixels */
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

static ir_graph *tail_graph(const tail_case *k) {
  ir_graph *g = ir_graph_new("t", k->n);
  int x = ir_add_input(g, "x", IR_F32, SHAPE(k->n, k->cin, k->h, k->w));
  int y = conv1x1(g, "a", x, k->cin, k->cout, 1);
  if (k->resid) {
    int in2[2] = {y, conv1x1(g, "b", x, k->cin, k->cout, 0)};
    y = cgt_node(g, IR_OP_add, "add", in2, 2, NULL);
  }
  ir_attr none = {0};
  y = cgt_node(g, IR_OP_relu, "relu", &y, 1, &none);
  g->outputs[g->n_outputs++] = y;
  g->n_shards = 1;
  return g;
}

/* off: the tail's masked pixel tiles, no packing prefetch (the default); else both variants */
static void set_off(int off) {
  ct_tune(off ? "flat_tail_cv=0,flat_pack_pf=0" : "flat_tail_cv=1,flat_pack_pf=48");
}

/* Lines of g's LLVM IR for t (variants off or on) in pixel-vector flat conv kernels calling
 * llvm.masked.scatter (*sc) and llvm.prefetch (*pf); -1 when it does not compile. */
static int ir_counts(ir_graph *g, const cg_target *t, int off, int *sc, int *pf) {
  char path[512], line[4096];
  set_off(off);
  FILE *f = cgt_llvm_of(g, t, "tail", path, sizeof path);
  ct_tune("flat_tail_cv=1,flat_pack_pf=0");
  if (!f) return -1;
  *sc = *pf = 0;
  int flat = 0; /* in a pixel-vector flat kernel (not the channel-vector ones, which prefetch weights) */
  while (fgets(line, sizeof line, f)) {
    if (!strncmp(line, "define ", 7)) flat = strstr(line, "conv2d_1x1_") && !strstr(line, "_vc_");
    *sc += flat && strstr(line, "call void @llvm.masked.scatter") != NULL;
    *pf += flat && strstr(line, "call void @llvm.prefetch") != NULL;
  }
  fclose(f);
  unlink(path);
  return 0;
}

/* Builds g (variants off or on) for t, runs it with 1..3 threads against ref; the 1-thread
 * output goes to got.  Returns 0 when run. */
static int build_run(ir_graph *g, const cg_target *t, const char *label, int off, float **ref, const float *x, float *got) {
  char so[512];
  snprintf(so, sizeof so, "%s/tail%d.so", cgt_dir, off);
  cg_options o = {so, NULL, label, "{\"test\": true}", 2, 0};
  ir_diag d = {0};
  set_off(off);
  int rc = cg_compile(ct_g(g), t, &o, &d);
  ct_tune("flat_tail_cv=1,flat_pack_pf=0");
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
  for (int i = 0; i < m->shards[0].n_ops; i++) flat |= strstr(m->shards[0].kernel_names[i], "conv2d_1x1_") != NULL;
  CGT_CHECK(flat, "%s: no flat conv kernel (%s)", label, m->shards[0].kernel_names[0]);
  int64_t nx = ir_shape_numel(&g->values[g->input].shape), ny = ir_shape_numel(&g->values[g->outputs[0]].shape);
  void *bufs[64];
  for (int i = 0; i < m->n_tensors; i++) bufs[i] = calloc(1, (size_t)m->tensors[i].bytes + 64);
  memcpy(bufs[m->input], x, (size_t)nx * sizeof *x);
  float *out = bufs[m->outputs[0]];
  for (int nth = 1; nth <= 3; nth++) {
    for (int64_t i = 0; i < ny; i++) out[i] = NAN;
    cgt_run_model(m, bufs, nth);
    char l2[300];
    snprintf(l2, sizeof l2, "%s [%d threads]", label, nth);
    cgt_failures += cgt_compare(l2, out, ref[g->outputs[0]], ny, 1e-4);
    if (nth == 1) memcpy(got, out, (size_t)ny * sizeof *got);
    else CGT_CHECK(!memcmp(got, out, (size_t)ny * sizeof *got), "%s: not bitwise equal to 1 thread", l2);
  }
  for (int i = 0; i < m->n_tensors; i++) free(bufs[i]);
  dlclose(h);
  unlink(so);
  return 0;
}

/* One case for t: IR counts added to sc[off] / pf[off] (pf: convs without an add only); run
 * both builds when run is set. */
static void run_case(const tail_case *k, const cg_target *t, const char *pfx, int run, int *sc, int *pf) {
  char label[160];
  snprintf(label, sizeof label, "%s n%d %d->%d %dx%d%s", pfx, k->n, k->cin, k->cout, k->h, k->w, k->resid ? " resid" : "");
  ir_graph *g = tail_graph(k);
  cgt_random_params(g, 0.5f);
  for (int off = 0; off < 2; off++) {
    int s, p;
    CGT_CHECK(!ir_counts(g, t, off, &s, &p), "%s: no LLVM IR", label);
    sc[off] += s;
    if (!k->resid) pf[off] += p;
  }
  if (run) {
    int64_t nx = ir_shape_numel(&g->values[g->input].shape), ny = ir_shape_numel(&g->values[g->outputs[0]].shape);
    float *x = malloc((size_t)nx * sizeof *x), *on = malloc((size_t)ny * sizeof *on), *off = malloc((size_t)ny * sizeof *off);
    for (int64_t i = 0; i < nx; i++) x[i] = cgt_uniform(-1.0f, 1.0f);
    float **ref = ir_interp(g, x, NULL);
    char l[256];
    snprintf(l, sizeof l, "%s flat_pack_pf=48", label);
    int a = build_run(g, t, l, 0, ref, x, on);
    snprintf(l, sizeof l, "%s flat_tail_cv=0", label);
    int b = build_run(g, t, l, 1, ref, x, off);
    if (!a && !b) CGT_CHECK(!memcmp(on, off, (size_t)ny * sizeof *on), "%s: the two builds are not bitwise equal", label);
    ir_interp_free(g, ref);
    free(x), free(on), free(off);
  }
  ir_graph_free(g);
}

int main(void) {
  (void)cgt_check_graph; /* this test runs 1..3 threads itself */
  cgt_init_dir();
  ct_tune("flat_w_pf=0"); /* the weight prefetch (batch 1) has its own test: test_codegen_flat_wpf */
  cg_target t[3];
  const char *cpu[3] = {NULL, "x86-64-v3", "x86-64-v4"}, *name[3] = {"host", "avx2", "avx512 (IR only)"};
  for (int j = 0; j < 3; j++)
    if (cgt_target(&t[j], cpu[j])) return 1;
  for (int j = 0; j < 3; j++) {
    int sc[2] = {0, 0}, pf[2] = {0, 0};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
      run_case(&cases[i], &t[j], name[j], j < 2 && !cgt_quick_skip(i, j, 2), sc, pf);
    CGT_CHECK(sc[0] > 0 && sc[1] == 0, "%s: llvm.masked.scatter lines %d with the variants, %d without; want > 0, 0",
              name[j], sc[0], sc[1]);
    CGT_CHECK(pf[0] > 0 && pf[1] == 0, "%s: llvm.prefetch lines of the convs without an add %d with the variants, %d "
              "without; want > 0, 0", name[j], pf[0], pf[1]);
  }
  for (int j = 0; j < 3; j++) cg_target_dispose(&t[j]);
  cgt_cleanup_dir();
  if (cgt_failures) fprintf(stderr, "test_codegen_flat_tail: %d failure(s)\n", cgt_failures);
  else fprintf(stderr, "test_codegen_flat_tail: ok\n");
  return cgt_failures != 0;
}
