/* test_codegen_split.c — the thread partition of flat (1x1 stride-1 GEMM) convs: when the
 * batch does not divide among the threads, the threads split the channel tiles of every
 * pixel chunk (gen_conv.c, conv_flat_split_item) instead of the chunks.  For batches 1, 2, 3
 * and odd shapes (tile remainders, a short last chunk, several chunks, a fused residual add)
 * every output must match the interpreter and be bitwise equal for 1, 2, 3 and 4 threads; each
 * case checks that its kernel is the flat conv (conv2d_1x1) it means to test, and the small-K
 * cases the register tile conv_choose_tile picks for them on AVX2. */
#include "test_codegen_harness.h"

#define SHAPE(...) ((ir_shape){sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t), {__VA_ARGS__}})

typedef struct split_case {
  int n, cin, cout, h, w, resid; /* resid: bn + residual add of a 1x1 branch + relu */
  const char *tile;              /* when set, the AVX2 kernel's register tile (conv_choose_tile) */
} split_case;

static const split_case cases[] = {
    {1, 5, 7, 7, 9, 0},      /* 63 px, 7 channels: a remainder tile */
    {1, 64, 45, 13, 11, 0},  /* one chunk, many tiles, odd tile count */
    {1, 300, 37, 15, 15, 0}, /* 225 px, chunks of ~100 px: a short last chunk */
    {3, 33, 50, 9, 9, 1},    /* batch 3 on 2 threads: split tiles across images */
    {2, 40, 21, 9, 9, 1},    /* batch 2: whole images per thread (the unsplit order) */
    {1, 256, 64, 14, 14, 1}, /* ResNet-50 layer3-like plane, 2 chunks of 128 + 68 px */
    /* small-K expand convs (EfficientNet-B0's 16/24 -> 96/144): 6x16, not the 3x32 tile
     * whose 12 accumulators + 4 pixel vectors + a broadcast need 17 ymm registers */
    {1, 16, 96, 32, 32, 0, "6x16"},
    {2, 24, 144, 12, 12, 1, "6x16"}, /* 144 px: 6x16 and 4x24 both whole; fewer pixel loads wins */
    {3, 16, 100, 9, 13, 1, NULL},    /* batch 3, odd map, a 4-channel remainder tile */
    {2, 7, 30, 5, 3, 0, NULL},       /* 15 px: one masked tile per chunk */
};

static int conv1x1(ir_graph *g, const char *name, int x, int cin, int cout, int bn) {
  char wn[64];
  snprintf(wn, sizeof wn, "%s/weight", name);
  int in[2] = {x, ir_add_param(g, wn, SHAPE(cout, cin, 1, 1), 1)};
  ir_attr a = {.conv2d = {{1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1}};
  int y = cgt_node(g, IR_OP_conv2d, name, in, 2, &a);
  if (!bn) return y;
  const char *sfx[4] = {"gamma", "beta", "running_mean", "running_var"};
  char nm[4][80];
  int b[5] = {y};
  for (int i = 0; i < 4; i++) {
    snprintf(nm[i], sizeof nm[i], "%s/bn/%s", name, sfx[i]);
    b[i + 1] = ir_add_param(g, nm[i], SHAPE(cout), 1);
  }
  ir_attr ba = {.batchnorm = {1e-5f, 0.1f, 0}};
  char bnn[80];
  snprintf(bnn, sizeof bnn, "%s/bn", name);
  return cgt_node(g, IR_OP_batchnorm, bnn, b, 5, &ba);
}

/* x -> conv a (the tested one); with resid, relu(bn(conv a(x)) + conv b(x)). */
static ir_graph *split_graph(const split_case *k) {
  ir_graph *g = ir_graph_new("t", k->n);
  int x = ir_add_input(g, "x", IR_F32, SHAPE(k->n, k->cin, k->h, k->w));
  int y = conv1x1(g, "a", x, k->cin, k->cout, k->resid);
  if (k->resid) {
    int in2[2] = {y, conv1x1(g, "b", x, k->cin, k->cout, 0)};
    y = cgt_node(g, IR_OP_add, "add", in2, 2, NULL);
    ir_attr none = {0};
    y = cgt_node(g, IR_OP_relu, "relu", &y, 1, &none);
  }
  g->outputs[g->n_outputs++] = y;
  g->n_shards = 1;
  return g;
}

static void run_case(const split_case *k, const cg_target *t, const char *pfx) {
  char label[160];
  snprintf(label, sizeof label, "%s n%d %d->%d %dx%d%s", pfx, k->n, k->cin, k->cout, k->h, k->w, k->resid ? " resid" : "");
  ir_graph *g = split_graph(k);
  cgt_random_params(g, 0.5f);
  char so[512];
  snprintf(so, sizeof so, "%s/split.so", cgt_dir);
  cg_options o = {so, NULL, label, "{\"test\": true}", 2, 0};
  ir_diag d = {0};
  if (cg_compile(ct_g(g), t, &o, &d)) {
    ir_diag_print(&d, stderr);
    CGT_CHECK(0, "%s: compile failed", label);
    return;
  }
  void *h = dlopen(so, RTLD_NOW | RTLD_LOCAL);
  const cnnc_abi_model *m = h ? dlsym(h, CNNC_ABI_SYMBOL) : NULL;
  CGT_CHECK(m != NULL, "%s: cannot load: %s", label, h ? "no descriptor" : dlerror());
  if (!m) goto out;
  int flat = 0;
  for (int i = 0; i < m->shards[0].n_ops; i++) flat |= strstr(m->shards[0].kernel_names[i], "conv2d_1x1_") != NULL;
  CGT_CHECK(flat, "%s: no flat conv kernel (%s)", label, m->shards[0].kernel_names[0]);
  if (k->tile && strstr(pfx, "avx2")) {
    char want[32];
    snprintf(want, sizeof want, "_f32_%s__avx2", k->tile);
    CGT_CHECK(strstr(m->shards[0].kernel_names[0], want) != NULL, "%s: kernel %s, want tile %s", label,
              m->shards[0].kernel_names[0], k->tile);
  }
  int64_t nx = ir_shape_numel(&g->values[g->input].shape), ny = ir_shape_numel(&g->values[g->outputs[0]].shape);
  float *x = malloc((size_t)nx * sizeof *x), *first = malloc((size_t)ny * sizeof *first);
  for (int64_t i = 0; i < nx; i++) x[i] = cgt_uniform(-1.0f, 1.0f);
  float **ref = ir_interp(g, x, NULL);
  void *bufs[64];
  for (int i = 0; i < m->n_tensors; i++) bufs[i] = calloc(1, (size_t)m->tensors[i].bytes + 64);
  memcpy(bufs[m->input], x, (size_t)nx * sizeof *x);
  float *out = bufs[m->outputs[0]];
  for (int nth = 1; nth <= 4; nth++) {
    for (int64_t i = 0; i < ny; i++) out[i] = NAN;
    cgt_run_model(m, bufs, nth);
    char l2[200];
    snprintf(l2, sizeof l2, "%s [%d threads]", label, nth);
    cgt_failures += cgt_compare(l2, out, ref[g->outputs[0]], ny, 1e-4);
    if (nth == 1) memcpy(first, out, (size_t)ny * sizeof *first);
    else CGT_CHECK(!memcmp(first, out, (size_t)ny * sizeof *first), "%s: not bitwise equal to 1 thread", l2);
  }
  for (int i = 0; i < m->n_tensors; i++) free(bufs[i]);
  ir_interp_free(g, ref);
  free(x);
  free(first);
out:
  if (h) dlclose(h);
  unlink(so);
  ir_graph_free(g);
}

int main(void) {
  (void)cgt_check_graph; /* the harness's 1/2-thread check; this test runs 1..4 threads itself */
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
  if (cgt_failures) fprintf(stderr, "test_codegen_split: %d failure(s)\n", cgt_failures);
  else fprintf(stderr, "test_codegen_split: ok\n");
  return cgt_failures != 0;
}
