/* test_codegen_concat.c — in-place channel concats at batch > 1 (cg_layout.c
 * cg_concat_inplace, tune concat_inplace=2; docs/codegen.md "In-place concats"): the convs
 * that produce the parts store each image at the result's image stride (conv_geom.ocs), so
 * the concat copies nothing.  Every case against the interpreter (1 and 2 threads, host and
 * AVX2 targets) and against the same graph compiled with concat_inplace=1 (copies at batch
 * > 1): bitwise equal, the same conv kernels computing the same numbers.  The route is taken
 * exactly where the rule allows it: producers that are f32 convs of groups 1 (1x1 flat, 3x3
 * channel vectors, 3x3 Winograd with 32 channels, strided) without a fused residual add, each
 * part read by the concat alone, image strides of whole cache lines; not for a relu part, a
 * conv with a residual add, a part read twice, a depthwise conv, or with the knob at 1. */
#include "test_codegen_harness.h"

#define SHAPE(...) ((ir_shape){sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t), {__VA_ARGS__}})

typedef struct ccase {
  int n, c, hw;      /* input [n, c, hw, hw] */
  int k2, cout2;     /* second part: a k2 x k2 conv (pad k2/2) of cout2 channels */
  int stride;        /* stride of both convs */
  int other;         /* 0 conv parts; 1 the second part a relu of x; 2 the second conv adds x;
                      * 3 the first part also read by the output; 4 the second conv depthwise */
  int want;
  const char *what;
} ccase;

static int conv(ir_graph *g, const char *name, int x, int cin, int cout, int k, int stride, int groups) {
  char w[64], b[64];
  snprintf(w, sizeof w, "%s/weight", name), snprintf(b, sizeof b, "%s/bias", name);
  int in[3] = {x, cgt_param(g, w, SHAPE(cout, cin / groups, k, k)), cgt_param(g, b, SHAPE(cout))};
  ir_attr a = {.conv2d = {{k, k}, {stride, stride}, {k / 2, k / 2, k / 2, k / 2}, {1, 1}, groups}};
  int y = cgt_node(g, IR_OP_conv2d, name, in, 3, &a);
  char r[64];
  snprintf(r, sizeof r, "%s/relu", name);
  return cgt_node(g, IR_OP_relu, r, &y, 1, NULL);
}

static ir_graph *build(const ccase *k) {
  ir_graph *g = ir_graph_new("t", k->n);
  int x = ir_add_input(g, "x", IR_F32, SHAPE(k->n, k->c, k->hw, k->hw));
  int a = conv(g, "c1", x, k->c, 16, 1, k->stride, 1), b;
  if (k->other == 1) b = cgt_node(g, IR_OP_relu, "r", &x, 1, NULL);
  else if (k->other == 4) b = conv(g, "dw", x, k->c, k->c, 3, 1, k->c);
  else if (k->other == 2) { /* conv + residual x + relu (cout2 = c) */
    char *w = "c2/weight";
    int in[2] = {x, cgt_param(g, w, SHAPE(k->c, k->c, 3, 3))};
    ir_attr ca = {.conv2d = {{3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1}};
    int y = cgt_node(g, IR_OP_conv2d, "c2", in, 2, &ca);
    int s = cgt_node(g, IR_OP_add, "c2/add", (int[]){y, x}, 2, NULL);
    b = cgt_node(g, IR_OP_relu, "c2/relu", &s, 1, NULL);
  } else b = conv(g, "c2", x, k->c, k->cout2, k->k2, k->stride, 1);
  ir_attr ca = {.concat = {1}};
  int c = cgt_node(g, IR_OP_concat, "cat", (int[]){a, b}, 2, &ca);
  g->outputs[g->n_outputs++] = cgt_node(g, IR_OP_relu, "y", &c, 1, NULL); /* relu: the result read by a kernel */
  if (k->other == 3) g->outputs[g->n_outputs++] = cgt_node(g, IR_OP_sigmoid, "z", &a, 1, NULL);
  g->n_shards = 1;
  cgt_random_params(g, 0.5f);
  return g;
}

static void run(const ccase *k, const cg_target *t, const char *tname) {
  char label[160];
  snprintf(label, sizeof label, "%s, %s", k->what, tname);
  ir_graph *g = build(k);
  cgt_so s;
  if (cgt_so_open(&s, g, t, label) == 0) {
    CGT_CHECK(cgt_so_kernel(&s, "concat_inplace", NULL) == k->want, "%s: the in-place route %s", label,
              k->want ? "was not taken" : "was taken");
    cgt_so_close(&s);
  } else {
    cgt_failures++;
  }
  /* against the interpreter, and bit for bit the copying layout's numbers (knob 1) */
  cgt_check_knob_bitwise(g, t, label, 1e-4, "concat_inplace=1", "concat_inplace=2");
  ir_graph_free(g);
}

int main(void) {
  cgt_init_dir();
  cg_target host, avx2;
  ir_diag d = {0};
  if (cg_target_init(&host, NULL, NULL, NULL, &d) || cg_target_init(&avx2, NULL, "x86-64-v3", NULL, &d)) {
    fprintf(stderr, "target: %s\n", d.msg);
    return 1;
  }
  static const ccase cases[] = {
      {2, 8, 12, 3, 16, 1, 0, 1, "batch 2, 1x1 + 3x3 convs"},
      {3, 32, 10, 3, 32, 1, 0, 1, "batch 3, 1x1 + 3x3 convs of 32 channels (Winograd)"},
      {2, 16, 14, 1, 32, 2, 0, 1, "batch 2, strided 1x1 convs"},
      {4, 8, 9, 3, 16, 1, 0, 1, "batch 4, 9x9 maps"},
      {2, 8, 12, 3, 16, 1, 1, 0, "batch 2, a relu part (copies)"},
      {2, 16, 12, 3, 16, 1, 2, 0, "batch 2, a conv with a residual add (copies)"},
      {2, 8, 12, 3, 16, 1, 3, 0, "batch 2, a part read twice (copies)"},
      {2, 16, 12, 3, 16, 1, 4, 0, "batch 2, a depthwise part (copies)"},
      {2, 8, 5, 3, 3, 1, 0, 0, "batch 2, an image stride of 1900 bytes (copies)"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    run(&cases[i], &host, "host");
    if (!cgt_quick()) run(&cases[i], &avx2, "x86-64-v3");
  }
  ct_tune("concat_inplace=1"); /* the knob below 2: batch > 1 copies */
  ir_graph *g = build(&cases[0]);
  cgt_so s;
  if (cgt_so_open(&s, g, &host, "knob 1") == 0) {
    CGT_CHECK(!cgt_so_kernel(&s, "concat_inplace", NULL), "concat_inplace=1: batch 2 was done in place");
    cgt_so_close(&s);
  } else {
    cgt_failures++;
  }
  ir_graph_free(g);
  ct_tune_reset();
  return cgt_done("test_codegen_concat");
}
