/* test_codegen_ops.c — every op compiled with cg_compile vs the reference interpreter:
 * random values, fixed and random shapes/attributes (every conv variant: 1x1, 3x3,
 * strided, padded, asymmetric, dilated, grouped, depthwise, 7x7/2, channel counts that are
 * not multiples of the vector width), fused conv epilogues (BN fold, relu, swish, sigmoid,
 * residual add), each run with 1 and 2 threads; the conv cases again for an AVX2-only
 * (x86-64-v3) and an SSE-only (x86-64) target.  Training-only ops must fail cleanly.
 * CNNC_TEST_QUICK=1 (quick mode): each fixed conv case on one of the three targets
 * (round robin, test_codegen_harness.h cgt_quick_skip) and 8 random convs instead of 24. */
#include "test_codegen_harness.h"

#define SHAPE(...) ((ir_shape){sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t), {__VA_ARGS__}})

static const double TOL = 1e-4;

/* ---- graph building ---------------------------------------------------------------------- */
static ir_graph *graph(ir_shape xs, ir_dtype dt, int *x) {
  ir_graph *g = ir_graph_new("t", (int)xs.dim[0]);
  *x = ir_add_input(g, "x", dt, xs);
  return g;
}

static void output(ir_graph *g, int v) { g->outputs[g->n_outputs++] = v; }

/* Runs g (one shard) for target t and frees it. */
static void check(ir_graph *g, const cg_target *t, const char *label) {
  g->n_shards = 1;
  cgt_random_params(g, 0.5f);
  int bad = cgt_check_graph(g, t, label, TOL, NULL);
  CGT_CHECK(bad == 0, "%s: compiled result differs from the interpreter", label);
  ir_graph_free(g);
}


/* ---- conv ------------------------------------------------------------------------------- */
typedef struct conv_case {
  int n, cin, cout, h, w, kh, kw, sh, sw, pad[4], dh, dw, groups, bias;
} conv_case;

static const conv_case conv_cases[] = {
    {1, 16, 32, 14, 14, 1, 1, 1, 1, {0, 0, 0, 0}, 1, 1, 1, 1},     /* 1x1 (GEMM path) */
    {1, 13, 21, 9, 11, 1, 1, 1, 1, {0, 0, 0, 0}, 1, 1, 1, 0},      /* 1x1, odd channels */
    {2, 8, 16, 10, 10, 1, 1, 2, 2, {0, 0, 0, 0}, 1, 1, 1, 1},      /* 1x1 stride 2 */
    {1, 8, 16, 12, 12, 3, 3, 1, 1, {1, 1, 1, 1}, 1, 1, 1, 1},      /* 3x3 pad 1 */
    {1, 16, 24, 15, 15, 3, 3, 2, 2, {1, 1, 1, 1}, 1, 1, 1, 0},     /* 3x3 stride 2 */
    {1, 3, 10, 9, 9, 3, 3, 1, 1, {0, 0, 0, 0}, 1, 1, 1, 1},        /* no padding */
    {1, 6, 12, 13, 13, 3, 3, 1, 1, {2, 2, 2, 2}, 2, 2, 1, 1},      /* dilation 2 */
    {1, 3, 64, 32, 32, 7, 7, 2, 2, {3, 3, 3, 3}, 1, 1, 1, 0},      /* 7x7/2 stem */
    {1, 4, 7, 10, 9, 3, 2, 1, 2, {1, 0, 2, 1}, 1, 1, 1, 1},        /* asymmetric kernel/stride/pad */
    {1, 16, 32, 10, 10, 3, 3, 1, 1, {1, 1, 1, 1}, 1, 1, 4, 1},     /* grouped */
    {1, 128, 128, 8, 8, 3, 3, 2, 2, {1, 1, 1, 1}, 1, 1, 32, 0},    /* ResNeXt-like 32x4d */
    {1, 24, 24, 14, 14, 3, 3, 1, 1, {1, 1, 1, 1}, 1, 1, 24, 1},    /* depthwise */
    {2, 16, 16, 15, 15, 5, 5, 2, 2, {2, 2, 2, 2}, 1, 1, 16, 0},    /* depthwise 5x5/2 */
    {1, 8, 16, 9, 9, 3, 3, 1, 1, {1, 1, 1, 1}, 1, 1, 8, 1},        /* depthwise multiplier 2 */
    {1, 4, 8, 5, 70, 3, 3, 1, 1, {1, 1, 1, 1}, 1, 1, 1, 1},        /* long rows: interior tiles */
    {1, 64, 96, 7, 7, 3, 3, 1, 1, {1, 1, 1, 1}, 1, 1, 1, 0},       /* 7x7 maps, many channels */
    {1, 5, 9, 16, 16, 3, 3, 3, 3, {1, 1, 1, 1}, 1, 1, 1, 1},       /* stride 3 */
    {3, 8, 12, 6, 6, 3, 3, 1, 1, {1, 1, 1, 1}, 1, 1, 1, 1},        /* batch 3 */
    {1, 6, 10, 9, 12, 1, 7, 1, 1, {0, 3, 0, 3}, 1, 1, 1, 0},       /* 1x7 */
    {1, 6, 10, 12, 9, 7, 1, 1, 1, {3, 0, 3, 0}, 1, 1, 1, 1},       /* 7x1 */
    {1, 3, 5, 40, 40, 3, 3, 2, 2, {0, 0, 1, 1}, 1, 1, 1, 1},       /* TF-style "same" pad (bottom/right) */
    {1, 2, 3, 4, 4, 5, 5, 1, 1, {2, 2, 2, 2}, 1, 1, 1, 1},         /* kernel larger than the map */
    {1, 256, 24, 15, 15, 1, 1, 1, 1, {0, 0, 0, 0}, 1, 1, 1, 1},   /* 1x1: two ~128 KB pixel chunks, the last partial */
    {2, 16, 24, 14, 14, 3, 3, 1, 1, {1, 1, 1, 1}, 1, 1, 1, 1},     /* 14-wide rows: balanced channel-vector tiles */
    /* 1x1 GEMMs with packed input panels (several channel tiles share each packed chunk): */
    {2, 300, 30, 16, 16, 1, 1, 1, 1, {0, 0, 0, 0}, 1, 1, 1, 1},   /* 96-pixel chunks 96+96+64 (2 tiles + 16 masked), rem tile */
    {2, 64, 30, 20, 21, 1, 1, 1, 1, {0, 0, 0, 0}, 1, 1, 1, 0},    /* one partial chunk: 17 packed tiles + 12 masked pixels */
    {1, 1030, 16, 14, 14, 1, 1, 1, 1, {0, 0, 0, 0}, 1, 1, 1, 1},  /* layer3-like: 1-tile chunks of 1030 channels */
    /* tile blocks (conv_tile_block) with the default L2 budget of a 512 KB L2 (307 KB): */
    {2, 32, 312, 5, 5, 3, 3, 1, 1, {1, 1, 1, 1}, 1, 1, 1, 1},     /* channel vectors 16x4, blocks 16 + 4 tiles (last partial) */
    {2, 64, 178, 4, 16, 3, 3, 1, 1, {1, 1, 1, 1}, 1, 1, 1, 0},    /* pixel vectors 6x16, blocks 21 + 9 tiles (last partial) */
    {1, 16, 40, 30, 30, 1, 1, 2, 2, {0, 0, 0, 0}, 1, 1, 1, 1},    /* 1x1 stride 2, 15 wide: 16x6 tiles 5+5+5 */
    {1, 8, 24, 8, 58, 1, 1, 2, 2, {0, 0, 0, 0}, 1, 1, 1, 0},      /* 1x1 stride 2, 29 wide: interior 6-pixel tiles + tail */
    {2, 40, 48, 7, 7, 1, 1, 1, 1, {0, 0, 0, 0}, 1, 1, 1, 1},      /* 1x1 on a 7x7 map: channel-vector GEMM, 49-pixel row */
    {1, 24, 20, 5, 5, 1, 1, 1, 1, {0, 0, 0, 0}, 1, 1, 1, 0},      /* 1x1 on 5x5: 6-pixel interior tiles + 1, partial tile */
    {1, 1040, 24, 7, 7, 1, 1, 1, 1, {0, 0, 0, 0}, 1, 1, 1, 1},    /* 1x1 channel vectors, 4 input blocks of 260 channels */
    {2, 820, 20, 4, 60, 1, 1, 2, 2, {0, 0, 0, 0}, 1, 1, 1, 0},    /* 1x1 stride 2, 2 rows, input blocks of 205, partial tile */
    /* 1x1 strided convs with a small output plane: channel vectors over the subsampled plane
     * as one row (conv2d_sub_vc; 3 vectors x 4 pixels from 3 vectors of channels): */
    {2, 600, 40, 14, 14, 1, 1, 2, 2, {0, 0, 0, 0}, 1, 1, 1, 1},   /* 7x7 out (layer4-like): K-blocked, 24+16 channels */
    {1, 64, 52, 10, 10, 1, 1, 2, 2, {0, 0, 0, 0}, 1, 1, 1, 0},    /* 5x5 out: unblocked, 24+24+4 channels */
    {1, 300, 20, 28, 28, 1, 1, 2, 2, {0, 0, 0, 0}, 1, 1, 1, 0},   /* 14x14 out, 2 vectors x 6: 33 K-blocked tiles */
    {1, 16, 16, 6, 12, 1, 1, 1, 2, {0, 0, 0, 0}, 1, 1, 1, 1},     /* stride 1,2 */
    {2, 16, 20, 12, 7, 1, 1, 2, 1, {0, 0, 0, 0}, 1, 1, 1, 0},     /* stride 2,1 */
    {1, 12, 16, 21, 21, 1, 1, 3, 3, {0, 0, 0, 0}, 1, 1, 1, 1},    /* stride 3 */
    /* ... and planes of more than 40 tiles stay per-row channel vectors: */
    {1, 8, 24, 20, 58, 1, 1, 2, 2, {0, 0, 0, 0}, 1, 1, 1, 0},     /* 10x29 out: interior 6-pixel tiles + tail */
    {1, 500, 16, 6, 180, 1, 1, 2, 2, {0, 0, 0, 0}, 1, 1, 1, 1},   /* 3x90 out: K-blocked 90-pixel rows */
};

static ir_graph *conv_graph(const conv_case *k, int *y) {
  int x;
  ir_graph *g = graph(SHAPE(k->n, k->cin, k->h, k->w), IR_F32, &x);
  int in[3] = {x, cgt_param(g, "conv/weight", SHAPE(k->cout, k->cin / k->groups, k->kh, k->kw)), 0};
  if (k->bias) in[2] = cgt_param(g, "conv/bias", SHAPE(k->cout));
  ir_attr a = {.conv2d = {{k->kh, k->kw}, {k->sh, k->sw}, {k->pad[0], k->pad[1], k->pad[2], k->pad[3]},
                          {k->dh, k->dw}, k->groups}};
  *y = cgt_node(g, IR_OP_conv2d, "conv", in, k->bias ? 3 : 2, &a);
  return g;
}

static void conv_label(char *buf, size_t n, const char *pfx, const conv_case *k) {
  snprintf(buf, n, "%s conv n%d %d->%d %dx%d k%dx%d s%d,%d p%d,%d,%d,%d d%d,%d g%d%s", pfx, k->n, k->cin, k->cout,
           k->h, k->w, k->kh, k->kw, k->sh, k->sw, k->pad[0], k->pad[1], k->pad[2], k->pad[3], k->dh, k->dw,
           k->groups, k->bias ? " bias" : "");
}

/* pass of npasses: CNNC_TEST_QUICK runs case i only in pass i % npasses (cgt_quick_skip). */
static void test_conv_cases(const cg_target *t, const char *pfx, int pass, int npasses) {
  for (size_t i = 0; i < sizeof conv_cases / sizeof *conv_cases; i++) {
    if (cgt_quick_skip(i, pass, npasses)) continue;
    int y;
    char label[256];
    ir_graph *g = conv_graph(&conv_cases[i], &y);
    output(g, y);
    conv_label(label, sizeof label, pfx, &conv_cases[i]);
    check(g, t, label);
  }
}

static conv_case random_conv(void) {
  conv_case k;
  memset(&k, 0, sizeof k);
  int kind = cgt_int(0, 3); /* 0 dense, 1 grouped, 2 depthwise, 3 1x1 */
  k.n = cgt_int(1, 2);
  k.groups = kind == 1 ? cgt_int(2, 4) : 1;
  int cg = cgt_int(1, 9);
  k.cin = k.groups * cg;
  k.cout = k.groups * cgt_int(1, 20);
  if (kind == 2) k.groups = k.cin = cgt_int(1, 20), k.cout = k.cin * cgt_int(1, 2);
  k.kh = kind == 3 ? 1 : cgt_int(1, 5), k.kw = kind == 3 ? 1 : cgt_int(1, 5);
  k.sh = cgt_int(1, 2), k.sw = cgt_int(1, 3);
  k.dh = cgt_int(1, 2), k.dw = cgt_int(1, 2);
  for (int i = 0; i < 4; i++) k.pad[i] = cgt_int(0, 2);
  k.h = (k.kh - 1) * k.dh + 1 + cgt_int(0, 12), k.w = (k.kw - 1) * k.dw + 1 + cgt_int(0, 30);
  k.bias = cgt_int(0, 1);
  return k;
}

static void test_conv_random(const cg_target *t, int count) {
  for (int i = 0; i < count; i++) {
    conv_case k = random_conv();
    int y;
    char label[256];
    ir_graph *g = conv_graph(&k, &y);
    output(g, y);
    conv_label(label, sizeof label, "random", &k);
    check(g, t, label);
  }
}

/* conv -> bn -> [add residual] -> act, fused into one kernel. */
static void test_conv_fused(const cg_target *t) {
  static const ir_op acts[] = {IR_OP_relu,        IR_OP_swish,     IR_OP_sigmoid,   IR_OP_clip,
                               IR_OP_hardsigmoid, IR_OP_hardswish, IR_OP_leaky_relu};
  for (int resid = 0; resid < 2; resid++)
    for (int ai = 0; ai < 7; ai++)
      for (int use_bn = 0; use_bn < 2; use_bn++) {
        conv_case k = {1, 12, 12, 11, 13, 3, 3, 1, 1, {1, 1, 1, 1}, 1, 1, 1, !use_bn};
        int y;
        ir_graph *g = conv_graph(&k, &y);
        if (use_bn) y = cgt_add_bn(g, "bn", y, k.cout);
        if (resid) {
          int in[2] = {y, g->input};
          y = cgt_node(g, IR_OP_add, "add", in, 2, NULL);
        }
        ir_attr act = {0};
        if (acts[ai] == IR_OP_clip) act.clip = (ir_clip_attr){-0.25f, 0.5f};
        if (acts[ai] == IR_OP_hardsigmoid) act.hardsigmoid = (ir_hsig_attr){0.3f, 0.45f};
        if (acts[ai] == IR_OP_leaky_relu) act.leaky_relu = (ir_leaky_attr){0.1f};
        y = cgt_node(g, acts[ai], "act", &y, 1, &act);
        output(g, y);
        char label[128];
        snprintf(label, sizeof label, "fused conv%s%s_%s", use_bn ? "_bn" : "", resid ? "_add" : "", ir_ops[acts[ai]].name);
        check(g, t, label);
      }
}

/* 1x1 stride-2 conv (+bn) whose output adds the output of a second 1x1 stride-2 conv
 * (ResNet's downsample join), then relu: the fused residual epilogue of a conv2d_sub_vc
 * kernel, K-blocked (cin 640, 7x7 out) and not (cin 24); and the same at stride 1 on 16x16 (cin
 * 72): a 1x1 GEMM on packed input panels with the fused residual. */
static void test_conv_sub_fused(const cg_target *t) {
  static const int cins[] = {24, 640, 72};
  for (int ci = 0; ci < 3; ci++) {
    /* cin 72 at stride 1 on 16x16: a packed 1x1 GEMM (pixel vectors) with the fused residual */
    int s = ci == 2 ? 1 : 2;
    conv_case k = {1, cins[ci], 40, 14 + 2 * (ci == 2), 14 + 2 * (ci == 2), 1, 1, s, s, {0, 0, 0, 0}, 1, 1, 1, 0};
    int y;
    ir_graph *g = conv_graph(&k, &y);
    int in[2] = {g->input, cgt_param(g, "conv2/weight", SHAPE(k.cout, k.cin, 1, 1))};
    ir_attr a = {.conv2d = {{1, 1}, {s, s}, {0, 0, 0, 0}, {1, 1}, 1}};
    int y2 = cgt_node(g, IR_OP_conv2d, "conv2", in, 2, &a);
    y2 = cgt_add_bn(g, "bn", y2, k.cout);
    int sum[2] = {y2, y};
    y = cgt_node(g, IR_OP_add, "add", sum, 2, NULL);
    ir_attr none = {0};
    y = cgt_node(g, IR_OP_relu, "act", &y, 1, &none);
    output(g, y);
    char label[128];
    snprintf(label, sizeof label, "fused 1x1/%d conv_bn_add_relu cin %d", s, k.cin);
    check(g, t, label);
  }
}

/* ---- other ops ---------------------------------------------------------------------------- */
static void test_unary(const cg_target *t) {
  static const ir_op ops[] = {IR_OP_relu,        IR_OP_sigmoid,   IR_OP_swish, IR_OP_dropout,
                              IR_OP_clip,        IR_OP_clip,      IR_OP_hardsigmoid, IR_OP_hardswish};
  static const ir_shape shapes[] = {{4, {2, 3, 5, 7}}, {2, {1, 8}}, {4, {1, 16, 4, 4}}, {2, {3, 1}}};
  for (size_t i = 0; i < 8; i++)
    for (size_t s = 0; s < 4; s++) {
      int x;
      ir_graph *g = graph(shapes[s], IR_F32, &x);
      ir_attr a = {.dropout = {0.5f, 0, 1}};
      if (ops[i] == IR_OP_clip) a.clip = i == 4 ? (ir_clip_attr){0.0f, 6.0f} : (ir_clip_attr){-INFINITY, 0.125f};
      if (ops[i] == IR_OP_hardsigmoid) a.hardsigmoid = (ir_hsig_attr){0.2f, 0.5f};
      output(g, cgt_node(g, ops[i], "op", &x, 1, &a));
      char label[64];
      snprintf(label, sizeof label, "%s shape %zu", ir_ops[ops[i]].name, s);
      check(g, t, label);
    }
  /* sigmoid/swish far from 0: exp saturation */
  int x;
  ir_graph *g = graph(SHAPE(1, 64), IR_F32, &x);
  int s = cgt_node(g, IR_OP_mul, "scale", (int[]){x, cgt_param(g, "k", SHAPE(1))}, 2, NULL);
  output(g, cgt_node(g, IR_OP_sigmoid, "sig", &s, 1, NULL));
  g->n_shards = 1;
  cgt_random_params(g, 0.5f);
  g->values[ir_find_value(g, "k")].data[0] = 60.0f; /* inputs in [-60, 60] */
  CGT_CHECK(cgt_check_graph(g, t, "sigmoid large", TOL, NULL) == 0, "sigmoid of large inputs");
  ir_graph_free(g);
}

static void test_binary(const cg_target *t) {
  static const struct { ir_shape a, b; int b_param; } cases[] = {
      {{4, {2, 3, 5, 7}}, {4, {2, 3, 5, 7}}, 0}, {{4, {2, 6, 5, 5}}, {4, {2, 6, 1, 1}}, 0},
      {{4, {2, 6, 5, 5}}, {3, {6, 1, 1}}, 1},    {{4, {1, 4, 3, 9}}, {1, {9}}, 1},
      {{4, {2, 4, 3, 9}}, {4, {1, 4, 3, 1}}, 1}, {{2, {3, 10}}, {2, {1, 10}}, 1},
  };
  for (int op = 0; op < 2; op++)
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
      int x;
      ir_graph *g = graph(cases[i].a, IR_F32, &x);
      int b;
      if (cases[i].b_param) {
        b = cgt_param(g, "b", cases[i].b);
      } else if (ir_shape_eq(&cases[i].a, &cases[i].b)) {
        b = cgt_node(g, IR_OP_relu, "r", &x, 1, NULL);
      } else { /* SE-style [N,C,1,1] gate from the input */
        int p = cgt_node(g, IR_OP_global_avgpool, "gap", &x, 1, NULL);
        b = cgt_node(g, IR_OP_sigmoid, "gate", &p, 1, NULL);
      }
      output(g, cgt_node(g, op ? IR_OP_mul : IR_OP_add, "op", (int[]){x, b}, 2, NULL));
      char label[64];
      snprintf(label, sizeof label, "%s case %zu", op ? "mul" : "add", i);
      check(g, t, label);
    }
}

/* In-place concats (kernels.def "concat inplace", cg_layout.c cg_concat_inplace): the route
 * taken exactly where the rule allows it (batch 1 / dims before the axis 1, 64-byte aligned
 * parts, no chain of in-place concats), and every case equal to the interpreter; an input
 * read again after the concat (its range must stay alive); tune concat_inplace=0 copies. */
static void test_concat_inplace(const cg_target *t) {
  static const struct { ir_shape x; int axis, chain, want, knob_off; const char *what; } cc[] = {
      {{4, {1, 16, 6, 6}}, 1, 0, 1, 0, "batch 1, channels"},
      {{4, {1, 16, 6, 6}}, 1, 0, 0, 1, "tune concat_inplace=0"},
      {{4, {1, 3, 5, 5}}, 1, 0, 0, 0, "parts of 300 bytes (unaligned)"},
      {{4, {2, 16, 6, 6}}, 1, 0, 0, 0, "batch 2"},
      {{4, {1, 1, 8, 16}}, 2, 0, 1, 0, "rows (N = C = 1)"},
      {{4, {1, 16, 6, 6}}, 1, 1, 1, 0, "a concat of an in-place concat (copies)"},
  };
  for (size_t i = 0; i < sizeof cc / sizeof cc[0]; i++) {
    if (cc[i].knob_off) ct_tune("concat_inplace=0");
    int x;
    ir_graph *g = graph(cc[i].x, IR_F32, &x);
    int a = cgt_node(g, IR_OP_relu, "a", &x, 1, NULL), b = cgt_node(g, IR_OP_sigmoid, "b", &x, 1, NULL);
    ir_attr ca = {.concat = {cc[i].axis}};
    int c = cgt_node(g, IR_OP_concat, "cat", (int[]){a, b}, 2, &ca);
    if (cc[i].chain) {
      int e = cgt_node(g, IR_OP_relu, "e", &c, 1, NULL); /* reads the in-place result */
      int h = cgt_node(g, IR_OP_sigmoid, "h", &e, 1, NULL);
      c = cgt_node(g, IR_OP_concat, "cat2", (int[]){c, h}, 2, &ca);
    }
    output(g, cgt_node(g, IR_OP_relu, "y", &c, 1, NULL));
    output(g, cgt_node(g, IR_OP_add, "z", (int[]){a, x}, 2, NULL)); /* a read after the concat */
    g->n_shards = 1;
    cgt_random_params(g, 0.5f);
    char label[96];
    snprintf(label, sizeof label, "in-place concat: %s", cc[i].what);
    cgt_so s;
    if (cgt_so_open(&s, g, t, label) == 0) {
      CGT_CHECK(cgt_so_kernel(&s, "concat_inplace", NULL) == cc[i].want, "%s: the in-place route %s", label,
                cc[i].want ? "was not taken" : "was taken");
      CGT_CHECK(!cc[i].chain || cgt_so_kernel(&s, "concat_f32", NULL), "%s: the second concat must copy", label);
      cgt_so_close(&s);
    } else {
      cgt_failures++;
    }
    CGT_CHECK(cgt_check_graph(g, t, label, TOL, NULL) == 0, "%s: compiled result differs from the interpreter", label);
    ir_graph_free(g);
    if (cc[i].knob_off) ct_tune_reset();
  }
}

/* concat (runs of whole vectors and not; a parameter operand; every axis), slice,
 * channel_shuffle and slice_grad (the block copies of gen_shape.c). */
static void test_shape_ops(const cg_target *t) {
  static const ir_shape xs[] = {{4, {3, 9, 5, 7}}, {4, {1, 8, 4, 4}}};
  for (int s = 0; s < 2; s++)
    for (int ax = s; ax < 4; ax++) { /* axis 0 too (ONNX import, docs/onnx.md "Dim 0") */
      int x;
      ir_graph *g = graph(xs[s], IR_F32, &x);
      int64_t d = xs[s].dim[ax];
      ir_attr a0 = {.slice = {ax, 0, d / 3}}, a1 = {.slice = {ax, d / 3, d - d / 3 - 1}}, a2 = {.slice = {ax, d - 1, 1}};
      int s0 = cgt_node(g, IR_OP_slice, "s0", &x, 1, &a0), s1 = cgt_node(g, IR_OP_slice, "s1", &x, 1, &a1);
      int s2 = cgt_node(g, IR_OP_slice, "s2", &x, 1, &a2), r = cgt_node(g, IR_OP_relu, "r", &x, 1, NULL);
      ir_shape ps = xs[s];
      ps.dim[ax] = 2;
      int p = cgt_param(g, "p", ps);
      ir_attr c = {.concat = {ax}};
      output(g, cgt_node(g, IR_OP_concat, "cat", (int[]){s2, s0, r, p, s1}, 5, &c));
      char label[64];
      snprintf(label, sizeof label, "concat/slice shape %d axis %d", s, ax);
      check(g, t, label);
    }
  static const struct { ir_shape s; int groups; } sh[] = {{{4, {2, 6, 4, 5}}, 3}, {{4, {1, 8, 4, 4}}, 2}, {{2, {3, 12}}, 4}};
  for (int i = 0; i < 3; i++) {
    int x;
    ir_graph *g = graph(sh[i].s, IR_F32, &x);
    ir_attr a = {.channel_shuffle = {sh[i].groups}};
    output(g, cgt_node(g, IR_OP_channel_shuffle, "shuffle", &x, 1, &a));
    char label[64];
    snprintf(label, sizeof label, "channel_shuffle case %d", i);
    check(g, t, label);
  }
  /* slices and slice_grads with steps: back, forward, rows of 1 element and of 30 (vector tails) */
  static const struct { ir_shape s; ir_slice_attr a; } sc[] = {
      {{4, {2, 6, 4, 30}}, {1, 5, 3, -2}}, {{4, {2, 6, 4, 30}}, {3, 1, 10, 3}}, {{3, {7, 3, 9}}, {0, 6, 7, -1}},
      {{2, {3, 17}}, {1, 16, 4, -5}}};
  for (int i = 0; i < 4; i++) {
    int x;
    ir_graph *g = graph(sc[i].s, IR_F32, &x);
    ir_attr a = {.slice = sc[i].a};
    int y = cgt_node(g, IR_OP_slice, "sl", &x, 1, &a);
    ir_attr ga = {.slice_grad = {sc[i].a, sc[i].s}};
    output(g, y);
    output(g, cgt_node(g, IR_OP_slice_grad, "sg", &y, 1, &ga));
    char label[64];
    snprintf(label, sizeof label, "slice step case %d", i);
    check(g, t, label);
  }
  for (int ax = 0; ax < 4; ax++) {
    int x;
    ir_graph *g = graph(SHAPE(2, 3, 4, 5), IR_F32, &x);
    ir_shape full = SHAPE(2, 3, 4, 5);
    full.dim[ax] += 4;
    ir_attr a = {.slice_grad = {{ax, 1, SHAPE(2, 3, 4, 5).dim[ax]}, full}};
    output(g, cgt_node(g, IR_OP_slice_grad, "sg", &x, 1, &a));
    char label[64];
    snprintf(label, sizeof label, "slice_grad axis %d", ax);
    check(g, t, label);
  }
}

/* transpose (gen_shape.c): rows copied (last dim kept) and gathered, ranks 1 to 4, vector
 * tails; hardmax (gen_softmax.c) with ties, short and long rows. */
static void test_transpose_hardmax(const cg_target *t) {
  static const struct { ir_shape s; int perm[4]; } tc[] = {
      {{1, {7}}, {0}},          {{2, {5, 9}}, {1, 0}},          {{3, {3, 4, 13}}, {1, 0, 2}},
      {{3, {3, 4, 5}}, {2, 0, 1}}, {{4, {2, 3, 4, 5}}, {0, 2, 3, 1}}, {{4, {2, 3, 4, 17}}, {2, 1, 0, 3}},
      {{4, {3, 2, 5, 4}}, {3, 2, 1, 0}}};
  for (int i = 0; i < 7; i++) {
    int x;
    ir_graph *g = graph(tc[i].s, IR_F32, &x);
    ir_attr a = {.transpose = {{tc[i].perm[0], tc[i].perm[1], tc[i].perm[2], tc[i].perm[3]}}};
    output(g, cgt_node(g, IR_OP_transpose, "tr", &x, 1, &a));
    char label[64];
    snprintf(label, sizeof label, "transpose case %d", i);
    check(g, t, label);
  }
  static const ir_shape hs[] = {{2, {4, 1}}, {2, {3, 10}}, {4, {2, 3, 4, 5}}, {3, {2, 2, 37}}};
  for (int i = 0; i < 4; i++) {
    int x;
    ir_graph *g = graph(hs[i], IR_F32, &x);
    int q = cgt_node(g, IR_OP_clip, "q", &x, 1, &(ir_attr){.clip = {-0.25f, 0.25f}}); /* ties at the clip bounds */
    output(g, cgt_node(g, IR_OP_hardmax, "hm", &q, 1, NULL));
    char label[64];
    snprintf(label, sizeof label, "hardmax case %d", i);
    check(g, t, label);
  }
  for (int i = 0; i < 4; i++) { /* log_softmax and its gradient (gen_train.c), same shapes */
    int x;
    ir_graph *g = graph(hs[i], IR_F32, &x);
    int y = cgt_node(g, IR_OP_log_softmax, "ls", &x, 1, NULL);
    int dy = cgt_node(g, IR_OP_hardswish, "dy", &y, 1, NULL);
    output(g, y);
    output(g, cgt_node(g, IR_OP_log_softmax_grad, "ls_grad", (int[]){dy, y}, 2, NULL));
    char label[64];
    snprintf(label, sizeof label, "log_softmax case %d", i);
    check(g, t, label);
  }
}

/* lrn and lrn_grad (gen_lrn.c): windows clamped at both ends, even size, pixel counts with and
 * without a vector tail, rank 3, beta 0.75 and others. */
static void test_lrn(const cg_target *t) {
  static const struct { ir_shape s; ir_lrn_attr a; } lc[] = {
      {{4, {2, 7, 5, 6}}, {5, 1e-4f, 0.75f, 1.0f}}, {{4, {1, 6, 4, 4}}, {3, 2.0f, 1.3f, 0.7f}},
      {{4, {1, 5, 3, 3}}, {2, 1.0f, 0.6f, 2.0f}},   {{3, {2, 4, 19}}, {7, 0.8f, -0.5f, 1.2f}},
      {{4, {1, 3, 2, 8}}, {1, 5.0f, 0.75f, 0.5f}}};
  for (int i = 0; i < 5; i++) {
    int x;
    ir_graph *g = graph(lc[i].s, IR_F32, &x);
    ir_attr a = {.lrn = lc[i].a};
    int y = cgt_node(g, IR_OP_lrn, "lrn", &x, 1, &a);
    int dy = cgt_node(g, IR_OP_hardswish, "dy", &y, 1, NULL);
    output(g, cgt_node(g, IR_OP_lrn_grad, "lrn_grad", (int[]){dy, x}, 2, &a));
    char label[64];
    snprintf(label, sizeof label, "lrn case %d", i);
    check(g, t, label);
  }
}

static void test_pool(const cg_target *t) {
  static const struct { int h, w, k, s, p, ceil, incl; } cases[] = {
      {12, 12, 3, 2, 1, 0, 1}, {13, 13, 3, 2, 1, 1, 1}, {8, 8, 2, 2, 0, 0, 1}, {9, 9, 3, 1, 1, 0, 0},
      {9, 9, 3, 1, 1, 0, 1},   {7, 70, 3, 2, 1, 0, 0},  {6, 67, 2, 1, 0, 0, 1}, {10, 11, 3, 3, 1, 1, 0},
      {5, 5, 5, 1, 2, 0, 1},   {14, 14, 3, 2, 0, 1, 0},
      /* 3x3 stride 2 without padding (the rows kernel's right-neighbour form, SqueezeNet's
       * ceil-mode pools): one chunk, a partial last chunk, widths where the last output's
       * window reaches into the chunk past the last */
      {9, 9, 3, 2, 0, 0, 0},   {11, 55, 3, 2, 0, 1, 0}, {7, 65, 3, 2, 0, 0, 0}, {6, 66, 3, 2, 0, 1, 0},
      {5, 33, 3, 2, 0, 0, 0},
      /* pads over half the kernel (ONNX; windows of one real row or column at the borders) */
      {9, 9, 3, 1, 2, 0, 0},   {9, 30, 3, 1, 2, 0, 1},  {10, 10, 3, 2, 2, 1, 0}, {8, 9, 4, 2, 3, 0, 1},
  };
  for (int mx = 0; mx < 2; mx++)
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
      int x;
      ir_graph *g = graph(SHAPE(2, 3, cases[i].h, cases[i].w), IR_F32, &x);
      int p = cases[i].p;
      ir_attr a = {.maxpool = {{cases[i].k, cases[i].k}, {cases[i].s, cases[i].s}, {p, p, p, p}, cases[i].incl, cases[i].ceil}};
      output(g, cgt_node(g, mx ? IR_OP_maxpool : IR_OP_avgpool, "pool", &x, 1, &a));
      char label[64];
      snprintf(label, sizeof label, "%s case %zu", mx ? "maxpool" : "avgpool", i);
      check(g, t, label);
    }
  int x;
  ir_graph *g = graph(SHAPE(2, 5, 7, 9), IR_F32, &x);
  output(g, cgt_node(g, IR_OP_global_avgpool, "gap", &x, 1, NULL));
  check(g, t, "global_avgpool");
}

/* The ONNX import's second round (gen_eltwise.c exp/sqrt/neg/div, gen_reduce.c, gen_pool_pick.c):
 * unary ops, div by a param and by an activation (broadcast), reduce of every mode over
 * several dim sets, reduce_max_grad with ties, expand, dilated maxpool and maxpool_index (ties
 * from a clip), max_unpool of a pool's indices, and cast of u8 / i8 / i32 inputs and to
 * integer outputs. */
static void test_onnx_ops(const cg_target *t) {
  static const ir_op un[] = {IR_OP_exp, IR_OP_sqrt, IR_OP_neg};
  for (int i = 0; i < 3; i++) {
    int x;
    ir_graph *g = graph(SHAPE(3, 5, 7), IR_F32, &x);
    output(g, cgt_node(g, un[i], "u", &x, 1, NULL)); /* sqrt of the negative half: NaN both sides */
    check(g, t, ir_ops[un[i]].name);
  }
  static const ir_shape ds[] = {{4, {2, 3, 4, 5}}, {4, {2, 3, 1, 5}}, {1, {5}}, {4, {1, 3, 1, 1}}};
  for (int i = 0; i < 8; i++) {
    int x;
    ir_graph *g = graph(SHAPE(2, 3, 4, 5), IR_F32, &x);
    int b;
    if (i < 4) b = cgt_param(g, "b", ds[i]);
    else {
      ir_attr ra = {.reduce = {ds[i - 4].rank == 4 ? ds[i - 4] : SHAPE(2, 3, 4, 5), IR_REDUCE_SUM}};
      int e = cgt_node(g, IR_OP_exp, "e", &x, 1, NULL);
      b = cgt_node(g, IR_OP_reduce, "sum", &e, 1, &ra); /* softmax's denominator */
      int num = cgt_node(g, IR_OP_exp, "num", &x, 1, NULL);
      x = num;
    }
    output(g, cgt_node(g, IR_OP_div, "div", (int[]){x, b}, 2, NULL));
    char label[48];
    snprintf(label, sizeof label, "div case %d", i);
    check(g, t, label);
  }
  static const ir_shape rs[] = {{4, {2, 3, 4, 1}}, {4, {1, 3, 1, 1}}, {4, {2, 1, 4, 1}}, {4, {1, 1, 1, 1}}, {4, {2, 3, 1, 5}}};
  for (int m = 0; m < 3; m++)
    for (int i = 0; i < 5; i++) {
      int x;
      ir_graph *g = graph(SHAPE(2, 3, 4, 5), IR_F32, &x);
      int q = cgt_node(g, IR_OP_clip, "q", &x, 1, &(ir_attr){.clip = {-0.5f, 0.5f}}); /* ties for max */
      ir_attr ra = {.reduce = {rs[i], m}};
      int y = cgt_node(g, IR_OP_reduce, "red", &q, 1, &ra);
      output(g, y);
      if (m == IR_REDUCE_MAX) {
        int dy = cgt_node(g, IR_OP_hardswish, "dy", &y, 1, NULL);
        ir_attr ga = {.reduce_max_grad = ra.reduce};
        output(g, cgt_node(g, IR_OP_reduce_max_grad, "grad", (int[]){dy, q, y}, 3, &ga));
      }
      char label[48];
      snprintf(label, sizeof label, "reduce mode %d case %d", m, i);
      check(g, t, label);
    }
  int x;
  ir_graph *g = graph(SHAPE(2, 1, 4, 1), IR_F32, &x);
  output(g, cgt_node(g, IR_OP_expand, "ex", &x, 1, &(ir_attr){.expand = {SHAPE(2, 3, 4, 5), 0.5f}}));
  check(g, t, "expand");
  static const ir_pool_attr pa[] = {{{2, 2}, {1, 1}, {0, 0, 0, 0}, 0, 0, {2, 2}}, {{3, 2}, {2, 1}, {2, 1, 1, 0}, 0, 1, {2, 3}},
                                    {{3, 3}, {2, 2}, {1, 1, 1, 1}, 0, 0, {0, 0}}, {{2, 2}, {2, 2}, {0, 0, 0, 0}, 0, 0, {1, 1}}};
  for (int i = 0; i < 4; i++) {
    g = graph(SHAPE(2, 3, 9, 11), IR_F32, &x);
    int q = cgt_node(g, IR_OP_clip, "q", &x, 1, &(ir_attr){.clip = {-0.5f, 0.5f}});
    ir_attr a = {.maxpool = pa[i]};
    int y = cgt_node(g, IR_OP_maxpool, "pool", &q, 1, &a);
    int idx = cgt_node(g, IR_OP_maxpool_index, "index", &q, 1, &a);
    output(g, y);
    output(g, idx);
    output(g, cgt_node(g, IR_OP_max_unpool, "unpool", (int[]){y, idx}, 2, &(ir_attr){.max_unpool = {SHAPE(2, 3, 9, 11)}}));
    char label[48];
    snprintf(label, sizeof label, "maxpool pick case %d", i);
    check(g, t, label);
  }
  /* cast: integer inputs to f32, integer arithmetic wrapped, integer outputs */
  static const ir_dtype in_dt[] = {IR_U8, IR_I8, IR_I32, IR_F32};
  static const ir_cast_attr out_c[] = {{IR_U8, IR_U8}, {IR_I8, IR_F32}, {IR_I32, IR_I32}, {IR_I64, IR_F32}};
  for (int i = 0; i < 4; i++) {
    g = graph(SHAPE(2, 3, 17), in_dt[i], &x);
    int v = x;
    if (in_dt[i] != IR_F32) v = cgt_node(g, IR_OP_cast, "in", &x, 1, &(ir_attr){.cast = {IR_F32, IR_F32}});
    else /* x in [-1, 1] times 5e9: squares from 0 past the i64 range (saturated), non-integers below 1 */
      v = cgt_node(g, IR_OP_expand, "big", &x, 1, &(ir_attr){.expand = {SHAPE(2, 3, 17), 5e9f}});
    int p = cgt_node(g, IR_OP_mul, "sq", (int[]){v, v}, 2, NULL);
    if (i < 2) p = cgt_node(g, IR_OP_cast, "wrap", &p, 1, &(ir_attr){.cast = {IR_F32, in_dt[i]}});
    output(g, v);
    output(g, cgt_node(g, IR_OP_cast, "out", &p, 1, &(ir_attr){.cast = out_c[i]}));
    char label[48];
    snprintf(label, sizeof label, "cast case %d (%s input)", i, ir_dtype_name(in_dt[i]));
    check(g, t, label);
  }
}

static void test_dense_softmax(const cg_target *t) {
  static const int cases[][3] = {{1, 64, 10}, {3, 37, 1000 / 7}, {5, 8, 3}, {2, 100, 17}, {9, 16, 24}};
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
    for (int bias = 0; bias < 2; bias++) {
      int x;
      ir_graph *g = graph(SHAPE(cases[i][0], cases[i][1], 1, 1), IR_F32, &x);
      ir_attr r = {.reshape = {{2, {cases[i][0], -1}}}};
      int f = cgt_node(g, IR_OP_reshape, "flatten", &x, 1, &r);
      int in[3] = {f, cgt_param(g, "fc/weight", SHAPE(cases[i][2], cases[i][1])), 0};
      if (bias) in[2] = cgt_param(g, "fc/bias", SHAPE(cases[i][2]));
      ir_attr a = {.dense = {cases[i][2]}};
      int y = cgt_node(g, IR_OP_dense, "fc", in, bias ? 3 : 2, &a);
      output(g, y);
      output(g, cgt_node(g, IR_OP_softmax, "softmax", &y, 1, NULL));
      char label[64];
      snprintf(label, sizeof label, "flatten+dense+softmax %dx%d->%d%s", cases[i][0], cases[i][1], cases[i][2],
               bias ? " bias" : "");
      check(g, t, label);
    }
}

static void test_norm(const cg_target *t) {
  int x;
  ir_graph *g = graph(SHAPE(2, 6, 5, 7), IR_F32, &x);
  int r = cgt_node(g, IR_OP_relu, "relu", &x, 1, NULL);
  output(g, cgt_add_bn(g, "bn", r, 6));
  check(g, t, "batchnorm (standalone)");
  /* a batchnorm not after a conv + its activation: one kernel (fuse.c), bitwise the two kernels
   * of tune bn_act_fusion=0 (the activation reads the f32 it would have stored), NaNs too */
  static const ir_op acts[] = {IR_OP_relu, IR_OP_swish, IR_OP_hardswish};
  for (size_t i = 0; i < sizeof acts / sizeof *acts; i++) {
    g = graph(SHAPE(2, 6, 5, 7), IR_F32, &x);
    int b = cgt_add_bn(g, "bn", cgt_node(g, IR_OP_relu, "relu", &x, 1, NULL), 6);
    output(g, cgt_node(g, acts[i], "act", &b, 1, NULL));
    g->n_shards = 1;
    cgt_random_params(g, 0.5f);
    char label[64], kind[64];
    snprintf(label, sizeof label, "batchnorm + %s", ir_ops[acts[i]].name);
    snprintf(kind, sizeof kind, "batchnorm_inference_%s", ir_ops[acts[i]].name);
    for (int off = 0; off < 2; off++) { /* the fused kernel exactly when the knob is on */
      if (off) ct_tune("bn_act_fusion=0");
      cgt_so s;
      if (cgt_so_open(&s, g, t, label) == 0) {
        CGT_CHECK(cgt_so_kernel(&s, kind, NULL) == !off, "%s: kernel %s %s", label, kind, off ? "made with the knob off" : "missing");
        cgt_so_close(&s);
      }
      if (off) ct_tune("bn_act_fusion=1");
    }
    cgt_nan_every = 11;
    cgt_check_knob_bitwise(g, t, label, TOL, "bn_act_fusion=0", "bn_act_fusion=1");
    cgt_nan_every = 0;
    ir_graph_free(g);
  }
  static const int gn[][3] = {{12, 4, 25}, {6, 6, 9}, {8, 1, 3}};
  for (size_t i = 0; i < 3; i++) {
    g = graph(SHAPE(2, gn[i][0], 5, gn[i][2]), IR_F32, &x);
    ir_attr a = {.groupnorm = {gn[i][1], 1e-5f}};
    int in[3] = {x, cgt_param(g, "gn/gamma", SHAPE(gn[i][0])), cgt_param(g, "gn/beta", SHAPE(gn[i][0]))};
    output(g, cgt_node(g, IR_OP_groupnorm, "gn", in, 3, &a));
    check(g, t, "groupnorm");
  }
}

static void test_normalize(const cg_target *t) {
  for (int u8 = 0; u8 < 2; u8++) {
    int x;
    ir_graph *g = graph(SHAPE(2, 3, 9, 13), u8 ? IR_U8 : IR_F32, &x);
    ir_attr a = {.normalize = {u8 ? 1.0f / 255 : 1.0f, 3, {0.485f, 0.456f, 0.406f}, {0.229f, 0.224f, 0.225f}}};
    int y = cgt_node(g, IR_OP_normalize, "normalize", &x, 1, &a);
    output(g, cgt_node(g, IR_OP_relu, "relu", &y, 1, NULL));
    check(g, t, u8 ? "normalize u8" : "normalize f32");
  }
}

/* NaN inputs propagate as the reference defines it (relu, max pooling, sigmoid, swish,
 * softmax rows, a conv with a fused relu). */
static void test_nan(const cg_target *t) {
  static const ir_op ops[] = {IR_OP_relu, IR_OP_sigmoid, IR_OP_swish, IR_OP_maxpool, IR_OP_softmax, IR_OP_conv2d};
  cgt_nan_every = 37;
  for (size_t i = 0; i < sizeof ops / sizeof *ops; i++) {
    int x, y;
    ir_graph *g;
    if (ops[i] == IR_OP_conv2d) {
      conv_case k = {1, 4, 8, 9, 9, 3, 3, 1, 1, {1, 1, 1, 1}, 1, 1, 1, 1};
      g = conv_graph(&k, &y);
      y = cgt_node(g, IR_OP_relu, "relu", &y, 1, NULL);
    } else {
      g = graph(SHAPE(2, 3, 9, 21), IR_F32, &x);
      ir_attr a = {.maxpool = {{3, 3}, {2, 2}, {1, 1, 1, 1}, 0, 0}};
      y = cgt_node(g, ops[i], "op", &x, 1, &a);
    }
    output(g, y);
    char label[64];
    snprintf(label, sizeof label, "NaN through %s", ir_ops[ops[i]].name);
    check(g, t, label);
  }
  cgt_nan_every = 0;
}

/* Training-only ops: a located error, no crash. */
static void test_unsupported(const cg_target *t) {
  int x;
  ir_graph *g = graph(SHAPE(2, 10), IR_F32, &x);
  int lab = ir_add_label(g, "labels");
  ir_attr a = {.softmax_xent = {0.0f}};
  output(g, cgt_node(g, IR_OP_softmax_xent, "loss", (int[]){x, lab}, 2, &a));
  g->n_shards = 1;
  char so[300];
  snprintf(so, sizeof so, "%s/bad.so", cgt_dir);
  cg_options o = {so, NULL, "bad", "{}", 2, 0};
  ir_diag d = {0};
  CGT_CHECK(cg_compile(ct_g(g), t, &o, &d) != 0 && strstr(d.msg, "training"), "softmax_xent must be rejected (got '%s')", d.msg);
  ir_graph_free(g);
  g = graph(SHAPE(2, 10), IR_F32, &x);
  ir_attr dr = {.dropout = {0.5f, 1, 7}};
  output(g, cgt_node(g, IR_OP_dropout, "drop", &x, 1, &dr));
  g->n_shards = 1;
  memset(&d, 0, sizeof d);
  CGT_CHECK(cg_compile(ct_g(g), t, &o, &d) != 0 && strstr(d.msg, "dropout") && strcmp(d.layer, "drop") == 0,
            "training dropout must be rejected naming the layer (got '%s' '%s')", d.layer, d.msg);
  ir_graph_free(g);
  unlink(so);
}

/* AVX-512 code generation (compile only unless the host has it): a hand-written feature
 * string gets +evex512, the kernels use zmm registers and carry the avx512 tag. */
static void test_avx512_emit(void) {
  cg_target t;
  ir_diag d = {0};
  if (cg_target_init(&t, NULL, NULL, "+avx512f,+avx512bw,+avx512vl,+avx512dq,+fma", &d)) {
    CGT_CHECK(0, "avx512 target: %s", d.msg);
    return;
  }
  CGT_CHECK(t.vec_f32 == 16 && strstr(t.features, "+evex512"), "avx512 features: %d lanes, '%s'", t.vec_f32, t.features);
  int y;
  ir_graph *g = conv_graph(&conv_cases[3], &y);
  output(g, y);
  g->n_shards = 1;
  cgt_random_params(g, 0.5f);
  char path[300];
  snprintf(path, sizeof path, "%s/avx512.s", cgt_dir);
  cg_options o = {path, "asm", "avx512", "{}", 2, 0};
  CGT_CHECK(cg_compile(ct_g(g), &t, &o, &d) == 0, "avx512 --emit asm: %s", d.msg);
  FILE *f = fopen(path, "r");
  char line[512];
  int zmm = 0, named = 0;
  while (f && fgets(line, sizeof line, f)) {
    zmm += strstr(line, "zmm") != NULL;
    named += strstr(line, "__avx512_n") != NULL;
  }
  if (f) fclose(f);
  CGT_CHECK(zmm > 0 && named > 0, "avx512 asm: %d zmm lines, %d avx512 kernel names", zmm, named);
  unlink(path);
  ir_graph_free(g);
  cg_target_dispose(&t);
}

static int target(cg_target *t, const char *cpu, const char *features) {
  ir_diag d = {0};
  if (cg_target_init(t, NULL, cpu, features, &d)) {
    ir_diag_print(&d, stderr);
    return -1;
  }
  fprintf(stderr, "target cpu %s: %d f32 lanes\n", t->cpu, t->vec_f32);
  return 0;
}

int main(void) {
  cgt_init_dir();
  cg_target host, avx2, sse;
  if (target(&host, NULL, NULL) || target(&avx2, "x86-64-v3", NULL) || target(&sse, "x86-64", NULL)) return 1;
  cg_target bad;
  ir_diag d = {0};
  CGT_CHECK(cg_target_init(&bad, NULL, "nosuchcpu", NULL, &d) != 0 && strstr(d.msg, "nosuchcpu"),
            "an unknown cpu must be an error naming it (got '%s')", d.msg);
  memset(&d, 0, sizeof d);
  CGT_CHECK(cg_target_init(&bad, NULL, NULL, "+avx2,+nosuchfeature", &d) != 0 && strstr(d.msg, "nosuchfeature"),
            "an unknown feature must be an error naming it (got '%s')", d.msg);
  CGT_CHECK(avx2.vec_f32 == 8, "x86-64-v3 must give 8 lanes (got %d)", avx2.vec_f32);
  CGT_CHECK(sse.vec_f32 == 4, "x86-64 must give 4 lanes (got %d)", sse.vec_f32);
  test_conv_cases(&host, "host", 0, 3);
  test_conv_random(&host, cgt_quick() ? 8 : 24);
  test_conv_fused(&host);
  test_conv_sub_fused(&host);
  test_unary(&host);
  test_binary(&host);
  test_shape_ops(&host);
  test_shape_ops(&sse);
  test_concat_inplace(&host);
  test_concat_inplace(&sse);
  test_lrn(&host);
  test_lrn(&sse);
  test_transpose_hardmax(&host);
  test_transpose_hardmax(&sse);
  test_onnx_ops(&host);
  test_onnx_ops(&sse);
  test_pool(&host);
  test_dense_softmax(&host);
  test_norm(&host);
  test_normalize(&host);
  test_unsupported(&host);
  test_nan(&host);
  test_nan(&sse);
  test_conv_cases(&avx2, "avx2", 1, 3);
  test_conv_fused(&avx2);
  test_conv_sub_fused(&avx2);
  test_pool(&avx2);
  test_conv_cases(&sse, "sse", 2, 3);
  test_avx512_emit();
  test_dense_softmax(&sse);
  cg_target_dispose(&host);
  cg_target_dispose(&avx2);
  cg_target_dispose(&sse);
  return cgt_done("test_codegen_ops");
}
