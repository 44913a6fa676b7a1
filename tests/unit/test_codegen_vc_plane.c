/* test_codegen_vc_plane.c — the K-blocked plane route of kxk channel-vector convs
 * (codegen/gen_conv_vc.c, kind conv2d_vcp: one work item per (image, channel tile) plane):
 * plane tiles (the plane as one row of compile-time pixel tiles spanning output rows, taps
 * outside the input dropped) and, under tune vc_plane_tiles=0, row tiles over the plane.
 * Each case is compiled three ways: plane tiles, plane rows (both forced with tune vc_plane_force=1
 * on these small shapes; the .so must name a conv2d_vcp kernel) and the row kernels
 * (tune vc_plane=0; no conv2d_vcp kernel); each runs with 1 and 2 threads against the
 * interpreter and bitwise 1 vs 2 threads.  With tune vc_split=0 (no second accumulator set,
 * every accumulator summed in (ci, ky, kx) order on every route) the three routes must also
 * be bitwise equal to each other.  Stride 1 and 2, padded and unpadded, odd maps and
 * channels (remainder tiles), several K blocks, batch 1 and 3, fused residual / swish; AVX2
 * (V = 8) and SSE (V = 4). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <string.h>

#include "test_codegen_harness.h"

#define SHAPE(...) ((ir_shape){sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t), {__VA_ARGS__}})

static const double TOL = 1e-4;

typedef struct pl_case {
  int n, cin, cout, h, w, k, s, pad;
  int epi; /* 0 bias only, 1 bn + relu, 2 bn + residual add (1x1 stride s conv of x) + relu, 3 bn + swish */
  const char *what;
} pl_case;

static const pl_case cases[] = {
    {1, 64, 32, 14, 14, 3, 2, 1, 1, "3x3 stride 2 14x14 -> 7x7 (layer4/0 shape), 3 K blocks"},
    {3, 70, 29, 14, 14, 3, 2, 1, 2, "3x3 stride 2 -> 7x7, rem tile of 13, residual, batch 3"},
    {1, 40, 24, 15, 13, 3, 2, 1, 3, "3x3 stride 2 odd map 15x13 -> 8x7, swish"},
    {1, 33, 16, 7, 7, 3, 1, 1, 1, "3x3 stride 1 7x7, odd channels, 2 K blocks"},
    {3, 20, 40, 14, 14, 3, 1, 1, 2, "3x3 stride 1 14x14, residual, batch 3"},
    {1, 30, 17, 9, 11, 3, 1, 0, 0, "3x3 stride 1 unpadded 9x11 -> 7x9, bias, rem tile of 1"},
    {1, 12, 16, 16, 16, 3, 2, 0, 1, "3x3 stride 2 unpadded 16x16 -> 7x7"},
    {1, 9, 8, 11, 11, 5, 2, 2, 1, "5x5 stride 2 padded 11x11 -> 6x6"},
};

static ir_graph *case_graph(const pl_case *k) {
  ir_graph *g = ir_graph_new("vcp", k->n);
  int x = ir_add_input(g, "x", IR_F32, SHAPE(k->n, k->cin, k->h, k->w));
  int in[3] = {x, cgt_param(g, "conv/weight", SHAPE(k->cout, k->cin, k->k, k->k)), 0};
  if (k->epi == 0) in[2] = cgt_param(g, "conv/bias", SHAPE(k->cout));
  ir_attr a = {.conv2d = {{k->k, k->k}, {k->s, k->s}, {k->pad, k->pad, k->pad, k->pad}, {1, 1}, 1}};
  int y = cgt_node(g, IR_OP_conv2d, "conv", in, k->epi == 0 ? 3 : 2, &a);
  if (k->epi > 0) y = cgt_add_bn(g, "bn", y, k->cout);
  if (k->epi == 2) {
    int64_t oh = (k->h + 2 * k->pad - k->k) / k->s + 1, ow = (k->w + 2 * k->pad - k->k) / k->s + 1;
    if (oh != (k->h - 1) / k->s + 1 || ow != (k->w - 1) / k->s + 1) abort(); /* the table must give matching shapes */
    int in2[2] = {x, cgt_param(g, "down/weight", SHAPE(k->cout, k->cin, 1, 1))};
    ir_attr a2 = {.conv2d = {{1, 1}, {k->s, k->s}, {0, 0, 0, 0}, {1, 1}, 1}};
    int add[2] = {y, cgt_node(g, IR_OP_conv2d, "down", in2, 2, &a2)};
    y = cgt_node(g, IR_OP_add, "add", add, 2, NULL);
  }
  ir_attr none = {0};
  if (k->epi == 1 || k->epi == 2) y = cgt_node(g, IR_OP_relu, "relu", &y, 1, &none);
  if (k->epi == 3) y = cgt_node(g, IR_OP_swish, "swish", &y, 1, &none);
  g->outputs[g->n_outputs++] = y;
  g->n_shards = 1;
  return g;
}

/* Whether the .so at path names a conv2d_vcp kernel (the descriptor holds each kind). */
static int so_has_plane(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return -1;
  char *buf = NULL;
  long len = 0;
  int found = -1;
  if (!fseek(f, 0, SEEK_END) && (len = ftell(f)) > 0 && !fseek(f, 0, SEEK_SET) && (buf = malloc((size_t)len)) &&
      fread(buf, 1, (size_t)len, f) == (size_t)len)
    found = memmem(buf, (size_t)len, "conv2d_vcp", 10) != NULL;
  free(buf);
  fclose(f);
  return found;
}

/* Compiles the case (one route, chosen by the knobs: ct_tune), runs it with 1 and 2 threads
 * against the interpreter, checks 1 vs 2 threads bitwise and the route; the 1-thread output
 * is returned in out (ny floats, malloc'd; NULL on failure). */
static float *run_case(const pl_case *k, const cg_target *t, const char *pfx, int want_plane, int64_t *ny_out) {
  char label[300];
  snprintf(label, sizeof label, "%s: %s (n%d %d->%d %dx%d k%d s%d p%d)", pfx, k->what, k->n, k->cin, k->cout, k->h, k->w,
           k->k, k->s, k->pad);
  cgt_rng = 0x1234567u; /* the same parameters and input for every route */
  ir_graph *g = case_graph(k);
  cgt_random_params(g, 0.5f);
  static int counter;
  char so[512];
  snprintf(so, sizeof so, "%s/vcp%d.so", cgt_dir, counter++);
  cg_options o = {so, NULL, label, "{\"test\": true}", 2, 0};
  ir_diag d = {0};
  float *y1 = NULL;
  if (cg_compile(ct_g(g), t, &o, &d)) {
    CGT_CHECK(0, "%s: compile failed: %s", label, d.msg);
    ir_graph_free(g);
    return NULL;
  }
  CGT_CHECK(so_has_plane(so) == want_plane, "%s: conv2d_vcp kernel %s", label, want_plane ? "missing" : "present");
  void *h = dlopen(so, RTLD_NOW | RTLD_LOCAL);
  CGT_CHECK(h != NULL, "%s: dlopen: %s", label, dlerror());
  const cnnc_abi_model *m = h ? dlsym(h, CNNC_ABI_SYMBOL) : NULL;
  if (m) {
    int64_t nx = ir_shape_numel(&g->values[g->input].shape), ny = ir_shape_numel(&g->values[g->outputs[0]].shape);
    float *x = malloc((size_t)nx * sizeof *x);
    y1 = malloc((size_t)ny * sizeof *y1);
    for (int64_t i = 0; i < nx; i++) x[i] = cgt_uniform(-1.0f, 1.0f);
    float **ref = ir_interp(g, x, NULL);
    void *bufs[64];
    for (int i = 0; i < m->n_tensors; i++) bufs[i] = calloc(1, (size_t)m->tensors[i].bytes + 64);
    memcpy(bufs[m->input], x, (size_t)nx * sizeof *x);
    for (int nth = 1; nth <= 2; nth++) {
      float *out = bufs[m->outputs[0]];
      for (int64_t i = 0; i < ny; i++) out[i] = NAN;
      cgt_run_model(m, bufs, nth);
      char l2[340];
      snprintf(l2, sizeof l2, "%s [%d thread%s]", label, nth, nth > 1 ? "s" : "");
      CGT_CHECK(cgt_compare(l2, out, ref[g->outputs[0]], ny, TOL) == 0, "%s: differs from the interpreter", l2);
      if (nth == 1) memcpy(y1, out, (size_t)ny * sizeof *y1);
      else CGT_CHECK(memcmp(y1, out, (size_t)ny * sizeof *y1) == 0, "%s: 1 and 2 threads not bitwise equal", label);
    }
    *ny_out = ny;
    for (int i = 0; i < m->n_tensors; i++) free(bufs[i]);
    ir_interp_free(g, ref);
    free(x);
  } else CGT_CHECK(0, "%s: no model descriptor", label);
  if (h) dlclose(h);
  unlink(so);
  ir_graph_free(g);
  return y1;
}

/* The three routes of one case; nosplit: they must be bitwise equal. */
static void check_case(const pl_case *k, const cg_target *t, const char *tname, int nosplit) {
  char pfx[64];
  float *y[3] = {NULL, NULL, NULL};
  int64_t ny = 0;
  static const char *route[3] = {"plane tiles", "plane rows", "row kernels"};
  for (int r = 0; r < 3; r++) {
    ct_tune("vc_plane_force=1");
    if (r >= 1) ct_tune("vc_plane_tiles=0");
    if (r == 2) ct_tune("vc_plane=0");
    snprintf(pfx, sizeof pfx, "%s%s %s", tname, nosplit ? " no split" : "", route[r]);
    y[r] = run_case(k, t, pfx, r < 2, &ny);
    ct_tune("vc_plane_force=0,vc_plane_tiles=1,vc_plane=1");
  }
  if (nosplit && y[0] && y[1] && y[2]) {
    CGT_CHECK(memcmp(y[0], y[2], (size_t)ny * sizeof(float)) == 0, "%s: %s: plane tiles and row kernels not bitwise equal", tname, k->what);
    CGT_CHECK(memcmp(y[1], y[2], (size_t)ny * sizeof(float)) == 0, "%s: %s: plane rows and row kernels not bitwise equal", tname, k->what);
  }
  for (int r = 0; r < 3; r++) free(y[r]);
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
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) check_case(&cases[i], &avx2, "avx2", 0);
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) check_case(&cases[i], &sse, "sse", 0);
  ct_tune("vc_split=0");
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) check_case(&cases[i], &avx2, "avx2", 1);
  ct_tune("vc_split=1");
  cg_target_dispose(&avx2);
  cg_target_dispose(&sse);
  cgt_cleanup_dir();
  if (cgt_failures) fprintf(stderr, "test_codegen_vc_plane: %d failure(s)\n", cgt_failures);
  else fprintf(stderr, "test_codegen_vc_plane: ok\n");
  return cgt_failures != 0;
}
