/* test_quantize8.c — --precision int8 (passes/quantize.c, the quantize8 op; docs/precision.md
 * "int8").
 *  1. ir_quantize8_f32: ties to even, the u8 and s8 clamps, NaN -> 0, infinities clamped.
 *  2. The compiled quantize8 kernel (cg_activation) is bitwise the reference on inputs that hit
 *     every tie, both clamps, NaN and infinities: u8 and s8, AVX2 (x86-64-v3) and the host.
 *  3. models/cifar_resnet8.yml (batch 4) quantised on 12 random samples (3 batches, the last
 *     one short): every groups-1 conv reads a quantize8 result, has no bias, integer weights in
 *     -127..127 and one batchnorm reader; the u8 range where the input is a relu result, s8 for
 *     the image; then the graph compiled (the f32 kernels over integer values) vs the
 *     interpreter within 1e-4, and the int8 interpreter vs the fp32 interpreter within 5 % of
 *     the largest logit; a second call changes nothing (idempotent).
 *  4. No samples: an error that names --calibrate. */
#include "test_codegen_harness.h"

#include "cgt_io.h"
#include "passes/passes.h"

static void scalar_rules(void) {
  const struct { float x, inv; int lo, hi; float want; } t[] = {
      {0.5f, 1, 0, 255, 0},     {1.5f, 1, 0, 255, 2},   {2.5f, 1, 0, 255, 2},     {-0.5f, 1, -128, 127, 0},
      {-1.5f, 1, -128, 127, -2}, {-2.5f, 1, -128, 127, -2}, {300, 1, 0, 255, 255},  {-3, 1, 0, 255, 0},
      {-300, 1, -128, 127, -128}, {200, 1, -128, 127, 127}, {NAN, 1, 0, 255, 0},     {NAN, 1, -128, 127, 0},
      {INFINITY, 1, 0, 255, 255}, {-INFINITY, 1, -128, 127, -128}, {0.3f, 10, 0, 255, 3}, {0.25f, 10, 0, 255, 2},
  };
  for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
    float y = ir_quantize8_f32(t[i].x, t[i].inv, t[i].lo, t[i].hi);
    CGT_CHECK(y == t[i].want, "quantize8(%g, inv %g, %d..%d) = %g, want %g", t[i].x, t[i].inv, t[i].lo, t[i].hi, y, t[i].want);
  }
}

/* input [n, 3, 8, 8] -> quantize8 -> output, bitwise the reference */
static void kernel_case(const cg_target *t, const char *tn, int lo, int hi) {
  ir_graph *g = ir_graph_new("q8", 2);
  ir_shape s = {.rank = 4, .dim = {2, 3, 8, 8}};
  int x = ir_add_input(g, "input", IR_F32, s);
  ir_attr a = {.quantize8 = {4.0f, lo, hi}};
  int y = cgt_node(g, IR_OP_quantize8, "q", &x, 1, &a);
  g->outputs[g->n_outputs++] = y;
  int64_t n = ir_shape_numel(&s);
  float *in = malloc((size_t)n * sizeof *in);
  for (int64_t i = 0; i < n; i++) {
    int k = cgt_int(-200, 300);
    switch (i % 8) {
    case 0: in[i] = ((float)k + 0.5f) / 4.0f; break;    /* a tie: x * inv = k + 0.5 exactly */
    case 1: in[i] = cgt_uniform(-80.0f, 80.0f); break;  /* both clamps */
    case 2: in[i] = i % 16 == 2 ? NAN : INFINITY; break;
    case 3: in[i] = -INFINITY; break;
    default: in[i] = cgt_uniform(-2.0f, 40.0f);
    }
  }
  char label[96];
  snprintf(label, sizeof label, "%s quantize8 %d..%d", tn, lo, hi);
  cgt_so so;
  if (cgt_so_open(&so, g, t, label)) {
    cgt_failures++;
  } else {
    float *got = cgt_run_copy(so.m, in, n, 2);
    int64_t bad = 0;
    for (int64_t i = 0; i < n; i++) {
      float want = ir_quantize8_f32(in[i], 4.0f, lo, hi);
      if (memcmp(&got[i], &want, 4) && bad++ < 3) fprintf(stderr, "%s: %g -> %g, want %g\n", label, in[i], got[i], want);
    }
    CGT_CHECK(bad == 0, "%s: %lld of %lld values differ from the reference", label, (long long)bad, (long long)n);
    free(got);
    cgt_so_close(&so);
  }
  free(in);
  ir_graph_free(g);
}

static int is_int(float v) { return v == nearbyintf(v); }

static void model_case(const cg_target *t) {
  char path[512];
  snprintf(path, sizeof path, "%s/models/cifar_resnet8.yml", CNNC_TEST_SRC);
  ir_graph *g = cgt_load_batch(path, 4), *f = cgt_load_batch(path, 4);
  if (!g || !f) {
    cgt_failures++;
    return;
  }
  cgt_random_params(g, 0.5f);
  for (int v = 0; v < g->n_values; v++) /* f: the same weights, unquantised */
    if (g->values[v].data) memcpy(f->values[v].data, g->values[v].data, (size_t)ir_shape_numel(&g->values[v].shape) * sizeof(float));
  int64_t per = ir_shape_numel(&g->values[g->input].shape) / 4;
  float *cal = malloc((size_t)(12 * per) * sizeof *cal);
  for (int64_t i = 0; i < 12 * per; i++) cal[i] = cgt_uniform(-2.0f, 2.0f);
  ir_diag d = {0};
  int nc = pass_quantize8(g, cal, 10, NULL, &d);
  CGT_CHECK(nc == 9, "cifar_resnet8: %d convs quantised, want 9 (%s)", nc, d.msg);
  for (int i = 0; i < g->n_nodes; i++) {
    const ir_node *n = &g->nodes[i];
    if (n->op != IR_OP_conv2d) continue;
    int p = g->values[n->in[0]].producer;
    const ir_node *q = p >= 0 ? &g->nodes[p] : NULL;
    CGT_CHECK(q && q->op == IR_OP_quantize8, "%s: input not a quantize8 result", n->name);
    if (q) {
      int pp = g->values[q->in[0]].producer;
      int relu_in = pp >= 0 && g->nodes[pp].op == IR_OP_relu;
      CGT_CHECK(relu_in ? q->attr.quantize8.lo == 0 : q->attr.quantize8.lo == -128 || pp >= 0,
                "%s: range %d..%d for its input", n->name, q->attr.quantize8.lo, q->attr.quantize8.hi);
      if (q->in[0] == g->input) CGT_CHECK(q->attr.quantize8.lo == -128, "the image's quantize8 is not s8");
    }
    CGT_CHECK(n->n_in == 2, "%s: still has a bias", n->name);
    const ir_value *w = &g->values[n->in[1]];
    int64_t bad = 0;
    for (int64_t e = 0; e < ir_shape_numel(&w->shape); e++) bad += !is_int(w->data[e]) || fabsf(w->data[e]) > 127;
    CGT_CHECK(bad == 0, "%s: %lld weights not integers in -127..127", n->name, (long long)bad);
    int readers = 0, bn = 0;
    for (int k = 0; k < g->n_nodes; k++)
      for (int j = 0; j < g->nodes[k].n_in; j++)
        if (g->nodes[k].in[j] == n->out) readers++, bn += g->nodes[k].op == IR_OP_batchnorm;
    CGT_CHECK(readers == 1 && bn == 1, "%s: %d readers, %d batchnorms", n->name, readers, bn);
  }
  int n_nodes = g->n_nodes;
  CGT_CHECK(pass_quantize8(g, cal, 10, NULL, &d) == 0 && g->n_nodes == n_nodes, "a second pass changed the graph");
  CGT_CHECK(cgt_check_graph(g, t, "cifar_resnet8 int8 vs interpreter", 2e-3, NULL) == 0, "int8 compiled vs interpreter");
  /* int8 vs fp32, in the interpreter */
  int64_t nx = ir_shape_numel(&g->values[g->input].shape);
  float *x = malloc((size_t)nx * sizeof *x);
  for (int64_t i = 0; i < nx; i++) x[i] = cgt_uniform(-1.0f, 1.0f);
  float **vq = ir_interp(g, x, NULL), **vf = ir_interp(f, x, NULL);
  const float *yq = vq[g->outputs[0]], *yf = vf[f->outputs[0]];
  int64_t ny = ir_shape_numel(&g->values[g->outputs[0]].shape);
  double worst = 0, big = 0;
  for (int64_t i = 0; i < ny; i++) worst = fmax(worst, fabs((double)yq[i] - yf[i])), big = fmax(big, fabs((double)yf[i]));
  fprintf(stderr, "cifar_resnet8 int8 vs fp32 (interpreter): %.3g of the largest logit\n", worst / big);
  CGT_CHECK(worst <= 0.05 * big, "int8 vs fp32: %.3g of the largest logit", worst / big);
  ir_interp_free(g, vq), ir_interp_free(f, vf);
  free(x), free(cal);
  ir_graph_free(g), ir_graph_free(f);
}

int main(void) {
  cgt_init_dir();
  scalar_rules();
  cg_target avx2, host;
  if (cgt_target(&avx2, "x86-64-v3") || cgt_target(&host, NULL)) return 1;
  kernel_case(&avx2, "avx2", 0, 255);
  kernel_case(&avx2, "avx2", -128, 127);
  kernel_case(&host, "host", 0, 255);
  kernel_case(&host, "host", -128, 127);
  model_case(&host);
  { /* 4. no samples */
    char path[512];
    snprintf(path, sizeof path, "%s/models/cifar_resnet8.yml", CNNC_TEST_SRC);
    ir_graph *g = cgt_load_batch(path, 2);
    ir_diag d = {0};
    CGT_CHECK(g && pass_quantize8(g, NULL, 0, NULL, &d) < 0 && strstr(d.msg, "--calibrate"), "no samples: '%s'", d.msg);
    ir_graph_free(g);
  }
  cg_target_dispose(&avx2);
  cg_target_dispose(&host);
  return cgt_done("test_quantize8");
}
