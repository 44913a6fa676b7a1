/* test_codegen_flat_wpf.c — the flat (1x1 stride-1) convs' weight prefetch at batch 1
 * (gen_conv.c flat_w_prefetch: every K step of a packed chunk's microkernel prefetches the
 * same K step of the next channel tile's packed weights).  Convs without a fused add and with
 * inputs under the next-chunk prefetch's floor (512 KB at batch 1: the cases read 200 and
 * 345 KB, and the "no other prefetch" checks depend on it), so that in their kernels the weight
 * prefetch is the only llvm.prefetch: a leftover channel tile, a short last chunk and a tail,
 * batch 1 (the prefetch) and batch 2 (none), built with the prefetch (the default) and with
 * tune flat_w_pf=0, for the host and x86-64-v3: every output matches the interpreter, 1, 2
 * and 3 threads are bitwise equal, the two builds are bitwise equal (a prefetch changes no
 * value), and the IR has llvm.prefetch in the flat kernels exactly for batch 1 without the
 * switch.  x86-64-v4 (16 lanes) is checked by its IR on any host. */
#include "test_codegen_harness.h"

#define SHAPE(...) ((ir_shape){sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t), {__VA_ARGS__}})

typedef struct wpf_case {
  int n, cin, cout, h, w;
} wpf_case;

static const wpf_case cases[] = {
    {1, 256, 64, 14, 14},  /* ResNet-50 layer3's 196-pixel plane: chunks, a tail */
    {1, 96, 29, 9, 13},    /* a leftover channel tile */
    {1, 600, 40, 12, 12},  /* K = 600: short chunks */
    {2, 130, 40, 7, 9},    /* batch 2: no weight prefetch */
};

static ir_graph *wpf_graph(const wpf_case *k) {
  ir_graph *g = ir_graph_new("t", k->n);
  int x = ir_add_input(g, "x", IR_F32, SHAPE(k->n, k->cin, k->h, k->w));
  int in[2] = {x, ir_add_param(g, "a/weight", SHAPE(k->cout, k->cin, 1, 1), 1)};
  ir_attr a = {.conv2d = {{1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1}};
  int y = cgt_add_bn(g, "a/bn", cgt_node(g, IR_OP_conv2d, "a", in, 2, &a), k->cout);
  ir_attr none = {0};
  y = cgt_node(g, IR_OP_relu, "relu", &y, 1, &none);
  g->outputs[g->n_outputs++] = y;
  g->n_shards = 1;
  return g;
}

static void set_off(int off) {
  ct_tune(off ? "flat_w_pf=0" : "flat_w_pf=1");
}

/* Lines of g's LLVM IR for t calling llvm.prefetch in pixel-vector flat conv kernels; -1
 * when it does not compile. */
static int ir_prefetches(ir_graph *g, const cg_target *t, int off) {
  char path[512], line[4096];
  set_off(off);
  FILE *f = cgt_llvm_of(g, t, "wpf", path, sizeof path);
  ct_tune("flat_w_pf=1");
  if (!f) return -1;
  int flat = 0, pf = 0;
  while (fgets(line, sizeof line, f)) {
    if (!strncmp(line, "define ", 7)) flat = strstr(line, "conv2d_1x1_") && !strstr(line, "_vc_");
    pf += flat && strstr(line, "call void @llvm.prefetch") != NULL;
  }
  fclose(f);
  unlink(path);
  return pf;
}

/* Builds g (prefetch on or off) for t, runs it with 1..3 threads against ref; the 1-thread
 * output goes to got.  Returns 0 when run. */
static int build_run(ir_graph *g, const cg_target *t, const char *label, int off, float **ref, const float *x, float *got) {
  char so[512];
  snprintf(so, sizeof so, "%s/wpf%d.so", cgt_dir, off);
  cg_options o = {so, NULL, label, "{\"test\": true}", 2, 0};
  ir_diag d = {0};
  set_off(off);
  int rc = cg_compile(ct_g(g), t, &o, &d);
  ct_tune("flat_w_pf=1");
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

static void run_case(const wpf_case *k, const cg_target *t, const char *pfx, int run) {
  char label[160];
  snprintf(label, sizeof label, "%s n%d %d->%d %dx%d", pfx, k->n, k->cin, k->cout, k->h, k->w);
  ir_graph *g = wpf_graph(k);
  cgt_random_params(g, 0.5f);
  int on = ir_prefetches(g, t, 0), off = ir_prefetches(g, t, 1);
  CGT_CHECK(on >= 0 && off >= 0, "%s: no LLVM IR", label);
  CGT_CHECK(k->n == 1 ? on > 0 : on == 0, "%s: %d llvm.prefetch lines in the flat kernels, want %s", label, on,
            k->n == 1 ? "> 0" : "0");
  CGT_CHECK(off == 0, "%s: %d llvm.prefetch lines with flat_w_pf=0, want 0", label, off);
  if (run) {
    int64_t nx = ir_shape_numel(&g->values[g->input].shape), ny = ir_shape_numel(&g->values[g->outputs[0]].shape);
    float *x = malloc((size_t)nx * sizeof *x), *a1 = malloc((size_t)ny * sizeof *a1), *b1 = malloc((size_t)ny * sizeof *b1);
    for (int64_t i = 0; i < nx; i++) x[i] = cgt_uniform(-1.0f, 1.0f);
    float **ref = ir_interp(g, x, NULL);
    char l[256];
    snprintf(l, sizeof l, "%s weight prefetch", label);
    int a = build_run(g, t, l, 0, ref, x, a1);
    snprintf(l, sizeof l, "%s flat_w_pf=0", label);
    int b = build_run(g, t, l, 1, ref, x, b1);
    if (!a && !b) CGT_CHECK(!memcmp(a1, b1, (size_t)ny * sizeof *a1), "%s: the two builds are not bitwise equal", label);
    ir_interp_free(g, ref);
    free(x), free(a1), free(b1);
  }
  ir_graph_free(g);
}

int main(void) {
  (void)cgt_check_graph; /* this test runs 1..3 threads itself */
  cgt_init_dir();
  cg_target t[3];
  const char *cpu[3] = {NULL, "x86-64-v3", "x86-64-v4"}, *name[3] = {"host", "avx2", "avx512 (IR only)"};
  for (int j = 0; j < 3; j++)
    if (cgt_target(&t[j], cpu[j])) return 1;
  for (int j = 0; j < 3; j++)
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) run_case(&cases[i], &t[j], name[j], j < 2 && !cgt_quick_skip(i, j, 2));
  for (int j = 0; j < 3; j++) cg_target_dispose(&t[j]);
  cgt_cleanup_dir();
  if (cgt_failures) fprintf(stderr, "test_codegen_flat_wpf: %d failure(s)\n", cgt_failures);
  else fprintf(stderr, "test_codegen_flat_wpf: ok\n");
  return cgt_failures != 0;
}
