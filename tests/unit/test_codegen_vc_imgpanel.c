/* test_codegen_vc_imgpanel.c — two routes of codegen/gen_conv_vc.c that move data, not
 * arithmetic: image panels of strided per-row 1x1 channel-vector convs (vc_img_panel: every
 * output row's gathered input kept for the image, one key per row, so later blocks of channel
 * tiles read it back instead of gathering again) and the weight prefetch of the K-blocked 1x1
 * rows (vc_w_pf_dist), the next-block weight prefetch spread over a block's tiles
 * (vc_w_spread: K-blocked 1x1 rows and 3x3 plane tiles) and the block-variant buffer pointer
 * of the K-blocked 1x1 rows (vc_kb_buf).  Each case is compiled with its route on (default)
 * and off (tune vc_img_panel=0 / tune vc_w_prefetch=0 / tune vc_w_spread=0 /
 * tune vc_kbuf_hoist=1); the LLVM IR must show the route's mark (the per-row keys /
 * llvm.prefetch / the %wspf prefetches / the %kbuf_kb pointer) only when on; both builds run with 1 and 2 threads, must
 * match the interpreter, and the four outputs must be bitwise equal.  Cases: several blocks of channel tiles (rows revisited across blocks), batch 1
 * and 2-3 (a new image must re-gather every row), odd maps, channels not multiples of 8 (a
 * remainder channel tile), bias only / BN + relu / BN + residual add + relu, stride 2 and 3,
 * AVX2 (V = 8) and SSE (V = 4) targets. */
#include "test_codegen_harness.h"

#define SHAPE(...) ((ir_shape){sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t), {__VA_ARGS__}})

static const double TOL = 1e-4;

typedef struct ip_case {
  int n, cin, cout, h, w, s, sw; /* sw: which switch (0 image panel, 1 weight prefetch, 2 spread prefetch, 3 kbuf pointer) */
  int epi; /* 0 bias only, 1 bn + relu, 2 bn + residual add (a second conv of x) + relu */
  const char *what;
  int k; /* kernel size (0: 1), padding k/2 */
} ip_case;

static const ip_case cases[] = {
    {1, 256, 300, 28, 28, 2, 0, 1, "28x28 -> 14x14, 19 channel tiles in blocks (rows revisited), rem tile of 12"},
    {3, 256, 300, 27, 25, 2, 0, 2, "odd map 27x25 -> 14x13, residual, batch 3"},
    {3, 37, 21, 31, 33, 2, 0, 0, "odd channels 37 -> 21 (rem tile of 5), 31x33 -> 16x17, bias only, batch 3"},
    {1, 20, 44, 46, 50, 3, 0, 1, "stride 3, 46x50 -> 16x17"},
    {2, 512, 64, 28, 28, 2, 0, 2, "512 -> 64 on 28x28 -> 14x14, residual, batch 2"},
    /* weight prefetch of the K-blocked rows: 7x7 GEMMs (K-blocked, one block), a sub conv */
    {1, 1040, 40, 7, 7, 1, 1, 2, "7x7 1x1 GEMM, K-blocked panel, rem tile of 8, residual"},
    {3, 37, 29, 7, 7, 1, 1, 1, "7x7 1x1 GEMM, odd channels, batch 3"},
    {3, 600, 50, 14, 14, 2, 1, 2, "sub conv 14x14 -> 7x7, K-blocked, residual, batch 3"},
    {1, 30, 27, 15, 15, 2, 1, 0, "sub conv 15x15 -> 8x8 (odd map), bias only"},
    /* spread prefetch of the next block's weights: K-blocked 1x1 rows, sub convs, 3x3 planes */
    {1, 1040, 40, 7, 7, 1, 2, 2, "7x7 1x1 GEMM, K-blocked panel, rem tile of 8, residual", 0},
    {3, 600, 50, 14, 14, 2, 2, 1, "sub conv 14x14 -> 7x7, K-blocked, batch 3", 0},
    {2, 256, 40, 14, 14, 2, 2, 1, "3x3 s2 14x14 -> 7x7, plane tiles in blocks, rem tile of 8, batch 2", 3},
    {1, 130, 24, 13, 13, 1, 2, 2, "3x3 s1 13x13, plane tiles in blocks of odd size, residual", 3},
    /* the K-blocked rows' buffer pointer varying with the block */
    {3, 600, 50, 14, 14, 2, 3, 2, "sub conv 14x14 -> 7x7, K-blocked, residual, batch 3", 0},
};

static ir_graph *case_graph(const ip_case *k) {
  ir_graph *g = ir_graph_new("ip", k->n);
  int x = ir_add_input(g, "x", IR_F32, SHAPE(k->n, k->cin, k->h, k->w));
  int kk = k->k ? k->k : 1, pd = kk / 2;
  int in[3] = {x, cgt_param(g, "conv/weight", SHAPE(k->cout, k->cin, kk, kk)), 0};
  if (k->epi == 0) in[2] = cgt_param(g, "conv/bias", SHAPE(k->cout));
  ir_attr ak = {.conv2d = {{kk, kk}, {k->s, k->s}, {pd, pd, pd, pd}, {1, 1}, 1}};
  ir_attr a = {.conv2d = {{1, 1}, {k->s, k->s}, {0, 0, 0, 0}, {1, 1}, 1}};
  int y = cgt_node(g, IR_OP_conv2d, "conv", in, k->epi == 0 ? 3 : 2, &ak);
  if (k->epi > 0) y = cgt_add_bn(g, "bn", y, k->cout);
  if (k->epi == 2) { /* residual: a second 1x1 conv of x with the same stride (same output shape for odd maps) */
    int in2[2] = {x, cgt_param(g, "down/weight", SHAPE(k->cout, k->cin, 1, 1))};
    int r = cgt_node(g, IR_OP_conv2d, "down", in2, 2, &a);
    int add[2] = {y, r};
    y = cgt_node(g, IR_OP_add, "add", add, 2, NULL);
  }
  ir_attr none = {0};
  if (k->epi >= 1) y = cgt_node(g, IR_OP_relu, "relu", &y, 1, &none);
  g->outputs[g->n_outputs++] = y;
  g->n_shards = 1;
  return g;
}

static const char *const sw_off[4] = {"vc_img_panel=0", "vc_w_prefetch=0", "vc_w_spread=0", "vc_kbuf_hoist=1"};
static const char *const sw_def[4] = {"vc_img_panel=1", "vc_w_prefetch=1", "vc_w_spread=1", "vc_kbuf_hoist=0"};
static const char *const sw_mark[4] = {"vcpanel_keys", "@llvm.prefetch", "%wspf", "%kbuf_kb"};
static const char *const sw_name[4] = {"image panel", "weight prefetch", "spread prefetch", "kbuf pointer"};

/* Whether the LLVM IR of g for t has the mark of switch sw's route. */
static int has_route(ir_graph *g, const cg_target *t, int sw) {
  char path[512], line[4096];
  FILE *f = cgt_llvm_of(g, t, "ip", path, sizeof path);
  if (!f) return -1;
  int found = 0;
  while (!found && fgets(line, sizeof line, f)) found = strstr(line, sw_mark[sw]) != NULL;
  fclose(f);
  unlink(path);
  return found;
}

/* Compiles g, runs it with 1 and 2 threads on x; out[0..1] get malloc'd copies of the output.
 * Returns 0, or 1 when it could not be compiled/loaded. */
static int run_build(ir_graph *g, const cg_target *t, const char *label, const float *x, int64_t nx, float **out) {
  static int counter;
  char so[512];
  snprintf(so, sizeof so, "%s/ip%d.so", cgt_dir, counter++);
  cg_options o = {so, NULL, label, "{\"test\": true}", 2, 0};
  ir_diag d = {0};
  if (cg_compile(ct_g(g), t, &o, &d)) {
    CGT_CHECK(0, "%s: compile failed: %s", label, d.msg);
    return 1;
  }
  void *h = dlopen(so, RTLD_NOW | RTLD_LOCAL);
  const cnnc_abi_model *m = h ? dlsym(h, CNNC_ABI_SYMBOL) : NULL;
  if (!m) {
    CGT_CHECK(0, "%s: no model (%s)", label, h ? "no descriptor" : dlerror());
    if (h) dlclose(h);
    unlink(so);
    return 1;
  }
  int64_t ny = ir_shape_numel(&g->values[g->outputs[0]].shape);
  void *bufs[64];
  for (int i = 0; i < m->n_tensors; i++) bufs[i] = calloc(1, (size_t)m->tensors[i].bytes + 64);
  memcpy(bufs[m->input], x, (size_t)nx * sizeof *x);
  for (int nth = 1; nth <= 2; nth++) {
    float *y = bufs[m->outputs[0]];
    for (int64_t i = 0; i < ny; i++) y[i] = NAN;
    cgt_run_model(m, bufs, nth);
    out[nth - 1] = malloc((size_t)ny * sizeof(float));
    memcpy(out[nth - 1], y, (size_t)ny * sizeof(float));
  }
  for (int i = 0; i < m->n_tensors; i++) free(bufs[i]);
  dlclose(h);
  unlink(so);
  return 0;
}

static void check_case(const ip_case *k, const cg_target *t, const char *pfx, int strict) {
  char label[300];
  snprintf(label, sizeof label, "%s: %s (n%d %d->%d %dx%d s%d)", pfx, k->what, k->n, k->cin, k->cout, k->h, k->w, k->s);
  ir_graph *g = case_graph(k);
  cgt_random_params(g, 0.5f);
  int64_t nx = ir_shape_numel(&g->values[g->input].shape), ny = ir_shape_numel(&g->values[g->outputs[0]].shape);
  float *x = malloc((size_t)nx * sizeof *x);
  for (int64_t i = 0; i < nx; i++) x[i] = cgt_uniform(-1.0f, 1.0f);
  float **ref = ir_interp(g, x, NULL);
  float *out[2][2] = {{NULL, NULL}, {NULL, NULL}}; /* [route off/on][threads - 1] */
  for (int on = 0; on <= 1; on++) {
    if (!on) ct_tune(sw_off[k->sw]);
    if (k->sw == 1) ct_tune("vc_w_spread=0");  /* its mark: the other prefetches only */
    if (k->k > 1) ct_tune("vc_plane_force=1"); /* plane tiles whatever the L2 budget */
    char l2[360];
    snprintf(l2, sizeof l2, "%s [%s %s]", label, sw_name[k->sw], on ? "on" : "off");
    int has = has_route(g, t, k->sw);
    /* AVX2: every case takes its route; SSE (V = 4, other tile sizes) may make a case a sub
     * conv (no image panel), but never shows the keys with the route off */
    CGT_CHECK(strict ? has == on : has >= 0 && has <= on, "%s: route's mark in the IR: %d, want %d", l2, has, on);
    int bad = run_build(g, t, l2, x, nx, out[on]);
    ct_tune(sw_def[k->sw]);
    ct_tune("vc_w_spread=1,vc_plane_force=0");
    if (bad) continue;
    for (int nth = 1; nth <= 2; nth++) {
      char l3[400];
      snprintf(l3, sizeof l3, "%s [%d thread%s]", l2, nth, nth > 1 ? "s" : "");
      CGT_CHECK(cgt_compare(l3, out[on][nth - 1], ref[g->outputs[0]], ny, TOL) == 0, "%s: differs from the interpreter", l3);
    }
    CGT_CHECK(memcmp(out[on][0], out[on][1], (size_t)ny * sizeof(float)) == 0, "%s: 1 and 2 threads not bitwise equal", l2);
  }
  if (out[0][0] && out[1][0])
    CGT_CHECK(memcmp(out[0][0], out[1][0], (size_t)ny * sizeof(float)) == 0, "%s: %s on/off not bitwise equal", label, sw_name[k->sw]);
  for (int i = 0; i < 4; i++) free(out[i / 2][i % 2]);
  ir_interp_free(g, ref);
  free(x);
  ir_graph_free(g);
}

int main(void) {
  (void)cgt_check_graph;
  cgt_init_dir();
  cg_target avx2, sse;
  ir_diag d = {0};
  if (cg_target_init(&avx2, NULL, "x86-64-v3", NULL, &d) || cg_target_init(&sse, NULL, "x86-64", NULL, &d)) {
    fprintf(stderr, "target init: %s\n", d.msg);
    return 1;
  }
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) check_case(&cases[i], &avx2, "avx2", 1);
  /* SSE: the odd image-panel cases (time); its 7x7 GEMMs may take pixel vectors, whose flat
   * convs prefetch too, so weight-prefetch cases run on AVX2 only */
  for (size_t i = 1; i <= 2; i++) check_case(&cases[i], &sse, "sse", 0);
  cg_target_dispose(&avx2);
  cg_target_dispose(&sse);
  cgt_cleanup_dir();
  if (cgt_failures) fprintf(stderr, "test_codegen_vc_imgpanel: %d failure(s)\n", cgt_failures);
  else fprintf(stderr, "test_codegen_vc_imgpanel: ok\n");
  return cgt_failures != 0;
}
