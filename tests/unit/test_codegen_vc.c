/* test_codegen_vc.c — the channel-vector conv kernels (codegen/gen_conv_vc.c) vs the
 * reference interpreter: 1x1 rows read through input panels (stride-1 GEMMs on 7x7 / 5x5
 * maps, strided per-row 1x1 convs, sub convs over a subsampled plane; K-blocked and not;
 * grouped), the transposed tile epilogue (bias, BN, fused residual add and relu/swish,
 * remainder channel tiles, 1..P-pixel tiles), and kxk convs that keep the plane reads
 * (stride 1 and 2; short rows K-blocked over input channels or not; interior loops, borders,
 * odd maps; the tiles that load every tap's broadcasts and, under tune vc_shared_taps=1, those
 * that share them); batch 1 and 3, odd channel counts and maps.  Each case runs with 1 and 2 threads:
 * both must match the interpreter and be bitwise equal to each other.  The cases run for
 * the AVX2 target (V = 8: the unpack/shufps/vperm2f128 transpose), the SSE one (V = 4:
 * the perfect-shuffle transpose) and, where the CPU runs it, x86-64-v4 (V = 16, 24
 * accumulators); the strided 1x1 cases also with tune vc_pack_scalar=1 (panels packed lane
 * by lane instead of one contiguous load per run of pixels).  CNNC_TEST_QUICK=1 (CI's sanitizer
 * stage): each case on one of the targets (round robin, test_codegen_harness.h
 * cgt_quick_skip_home; the 16-lane tile cases, v16, on x86-64-v4 where this CPU runs it),
 * every second case of the shared-taps and scalar-pack runs. */
#include "test_codegen_harness.h"

#define SHAPE(...) ((ir_shape){sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t), {__VA_ARGS__}})

static const double TOL = 1e-4;


typedef struct vc_case {
  int n, cin, cout, h, w, k, s, pad, groups; /* pad < 0: -pad rows/columns at the bottom/right only */
  int epi; /* 0 bias only, 1 bn + relu, 2 bn + residual add (a second 1x1 conv of x) + relu, 3 bn + swish */
  const char *what;
  int v16; /* 1: a 16-lane tile case: CNNC_TEST_QUICK keeps it on x86-64-v4 where this CPU runs it */
} vc_case;

static const vc_case cases[] = {
    {1, 37, 29, 7, 7, 1, 1, 0, 1, 0, "7x7 1x1 GEMM, odd channels (rem tile of 13), panel unblocked"},
    {3, 64, 48, 7, 7, 1, 1, 0, 1, 2, "7x7 1x1 GEMM, residual + relu, batch 3"},
    {2, 1040, 40, 7, 7, 1, 1, 0, 1, 1, "7x7 1x1 GEMM, K-blocked panel (4 blocks)"},
    {1, 24, 20, 5, 5, 1, 1, 0, 1, 3, "5x5 1x1 GEMM, swish"},
    {1, 33, 50, 14, 14, 1, 2, 0, 1, 1, "sub conv 14x14 -> 7x7, 24x4 tiles + rem 2"},
    {3, 600, 40, 14, 14, 1, 2, 0, 1, 2, "sub conv K-blocked, residual, batch 3"},
    {1, 30, 27, 15, 15, 1, 2, 0, 1, 0, "sub conv 15x15 -> 8x8 (odd map)"},
    {1, 33, 100, 14, 14, 1, 2, 0, 1, 2, "sub conv 14x14 -> 7x7, 3 channel vectors at 16 lanes (48x8), rem tile of 4", 1},
    {2, 40, 70, 56, 56, 1, 2, 0, 1, 1, "1x1 stride 2 per row 56x56 -> 28x28 (16-lane tiles 10+9+9, rem tile of 6)", 1},
    {1, 29, 36, 15, 19, 1, 3, 0, 1, 0, "1x1 stride 3 per row, odd map 15x19 -> 5x7, bias only"},
    {3, 24, 40, 28, 28, 1, 2, 0, 1, 2, "1x1 stride 2 per row (14 wide), residual, batch 3"},
    {1, 17, 19, 9, 11, 1, 2, 0, 1, 1, "1x1 stride 2 per row, odd map and channels"},
    {2, 32, 32, 14, 14, 1, 2, 0, 2, 1, "grouped 1x1 stride 2 (2 groups of 16)"},
    {1, 20, 24, 9, 9, 1, 2, 1, 1, 1, "1x1 stride 2 padded (no panel)"},
    {3, 20, 30, 14, 14, 3, 2, 1, 1, 2, "3x3 stride 2 padded, residual, batch 3"},
    {1, 13, 21, 7, 7, 3, 1, 1, 1, 1, "3x3 stride 1 on 7x7, odd channels"},
    {1, 32, 48, 9, 9, 3, 2, 1, 4, 1, "grouped 3x3 stride 2 (4 groups of 12)"},
    {2, 64, 64, 7, 7, 3, 1, 1, 2, 1, "grouped 3x3 stride 1 on 7x7, 2 groups of 32 (2 channel vectors per group at 16 lanes)", 1},
    {1, 96, 99, 9, 9, 3, 1, 1, 3, 2, "grouped 3x3 stride 1 on 9x9, 3 groups of 33 (rem tile of 1 at 16 lanes), residual", 1},
    {3, 19, 35, 14, 14, 3, 1, 1, 1, 2, "3x3 stride 1 on 14x14 (short row 4+5+5), residual, batch 3"},
    {1, 21, 32, 28, 28, 3, 1, 1, 1, 1, "3x3 stride 1 on 28x28 (borders + interior loop)"},
    {1, 11, 17, 27, 23, 3, 1, 1, 1, 0, "3x3 stride 1 on 27x23 (odd map, rem tile of 1)"},
    {3, 16, 24, 28, 28, 3, 2, 1, 1, 1, "3x3 stride 2 28x28 -> 14x14, batch 3"},
    {1, 9, 40, 56, 56, 3, 2, 1, 1, 2, "3x3 stride 2 56x56 -> 28x28 (interior loop), residual"},
    {1, 13, 16, 13, 11, 3, 2, 1, 1, 3, "3x3 stride 2 odd map 13x11 -> 7x6, swish"},
    {1, 8, 24, 14, 14, 3, 2, 1, 1, 1, "3x3 stride 2 14x14 -> 7x7"},
    {1, 70, 40, 7, 7, 3, 1, 1, 1, 2, "3x3 stride 1 7x7 K-blocked (28+28+14 channels), rem tile, residual"},
    {3, 60, 32, 14, 14, 3, 2, 1, 1, 1, "3x3 stride 2 14x14 -> 7x7 K-blocked, batch 3"},
    {1, 64, 16, 13, 13, 3, 1, 1, 1, 3, "3x3 stride 1 13x13 K-blocked (tiles 4+4+5), swish"},
    {1, 37, 29, 7, 7, 1, 1, -1, 1, 1, "7x7 1x1 padded at the bottom/right only (no panel)"},
    {2, 1040, 40, 7, 7, 1, 1, -1, 1, 1, "7x7 1x1 K-blocked size, padded at the bottom/right only"},
    {1, 30, 27, 14, 14, 1, 2, -1, 1, 0, "1x1 stride 2 padded at the bottom/right only"},
    {1, 12, 20, 16, 16, 3, 1, 1, 1, 1, "3x3 stride 1 on 16x16, rows filling pixel vectors (vc_wide), rem tile"},
    {3, 9, 32, 8, 24, 3, 1, 1, 1, 2, "3x3 stride 1 on 8x24 (vc_wide, interior loop), residual, batch 3"},
};

static ir_graph *case_graph(const vc_case *k) {
  ir_graph *g = ir_graph_new("vc", k->n);
  int x = ir_add_input(g, "x", IR_F32, SHAPE(k->n, k->cin, k->h, k->w));
  int in[3] = {x, cgt_param(g, "conv/weight", SHAPE(k->cout, k->cin / k->groups, k->k, k->k)), 0};
  if (k->epi == 0) in[2] = cgt_param(g, "conv/bias", SHAPE(k->cout));
  int pt = k->pad < 0 ? 0 : k->pad, pb = k->pad < 0 ? -k->pad : k->pad;
  ir_attr a = {.conv2d = {{k->k, k->k}, {k->s, k->s}, {pt, pt, pb, pb}, {1, 1}, k->groups}};
  int y = cgt_node(g, IR_OP_conv2d, "conv", in, k->epi == 0 ? 3 : 2, &a);
  if (k->epi > 0) y = cgt_add_bn(g, "bn", y, k->cout);
  if (k->epi == 2) { /* residual: the same-shaped output of a second (1x1, stride s) conv of x */
    int64_t oh = (k->h + 2 * k->pad - k->k) / k->s + 1, ow = (k->w + 2 * k->pad - k->k) / k->s + 1;
    int64_t rh = (k->h - 1) / k->s + 1, rw = (k->w - 1) / k->s + 1;
    if (oh != rh || ow != rw) abort(); /* the case table must give matching shapes */
    int in2[2] = {x, cgt_param(g, "down/weight", SHAPE(k->cout, k->cin, 1, 1))};
    ir_attr a2 = {.conv2d = {{1, 1}, {k->s, k->s}, {0, 0, 0, 0}, {1, 1}, 1}};
    int r = cgt_node(g, IR_OP_conv2d, "down", in2, 2, &a2);
    int add[2] = {y, r};
    y = cgt_node(g, IR_OP_add, "add", add, 2, NULL);
  }
  ir_attr none = {0};
  if (k->epi == 1 || k->epi == 2) y = cgt_node(g, IR_OP_relu, "relu", &y, 1, &none);
  if (k->epi == 3) y = cgt_node(g, IR_OP_swish, "swish", &y, 1, &none);
  g->outputs[g->n_outputs++] = y;
  g->n_shards = 1;
  return g;
}

/* Compiles g, runs it with 1 and 2 threads (both against the interpreter), and checks the
 * two runs are bitwise equal. */
static void check_case(const vc_case *k, const cg_target *t, const char *pfx) {
  char label[300];
  snprintf(label, sizeof label, "%s: %s (n%d %d->%d %dx%d k%d s%d p%d g%d)", pfx, k->what, k->n, k->cin, k->cout, k->h,
           k->w, k->k, k->s, k->pad, k->groups);
  ir_graph *g = case_graph(k);
  cgt_random_params(g, 0.5f);
  static int counter;
  char so[512];
  snprintf(so, sizeof so, "%s/vc%d.so", cgt_dir, counter++);
  cg_options o = {so, NULL, label, "{\"test\": true}", 2, 0};
  ir_diag d = {0};
  if (cg_compile(ct_g(g), t, &o, &d)) {
    CGT_CHECK(0, "%s: compile failed: %s", label, d.msg);
    ir_graph_free(g);
    return;
  }
  void *h = dlopen(so, RTLD_NOW | RTLD_LOCAL);
  CGT_CHECK(h != NULL, "%s: dlopen: %s", label, dlerror());
  const cnnc_abi_model *m = h ? dlsym(h, CNNC_ABI_SYMBOL) : NULL;
  if (m) {
    int64_t nx = ir_shape_numel(&g->values[g->input].shape), ny = ir_shape_numel(&g->values[g->outputs[0]].shape);
    float *x = malloc((size_t)nx * sizeof *x), *y1 = malloc((size_t)ny * sizeof *y1);
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
    for (int i = 0; i < m->n_tensors; i++) free(bufs[i]);
    ir_interp_free(g, ref);
    free(x);
    free(y1);
  } else CGT_CHECK(0, "%s: no model descriptor", label);
  if (h) dlclose(h);
  unlink(so);
  ir_graph_free(g);
}

int main(void) {
  (void)cgt_check_graph; /* check_case is its variant with the bitwise 1-vs-2-thread check */
  cgt_init_dir();
  cg_target avx2, sse;
  ir_diag d = {0};
  if (cg_target_init(&avx2, NULL, "x86-64-v3", NULL, &d) || cg_target_init(&sse, NULL, "x86-64", NULL, &d)) {
    fprintf(stderr, "target init: %s\n", d.msg);
    return 1;
  }
  int has_v4 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
               __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
  /* CNNC_TEST_QUICK: case i on target i % npass only, the v16 cases on x86-64-v4 (pass 2) */
  int npass = has_v4 ? 3 : 2;
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
    if (!cgt_quick_skip_home(i, 0, npass, cases[i].v16 ? 2 : -1)) check_case(&cases[i], &avx2, "avx2");
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
    if (!cgt_quick_skip_home(i, 1, npass, cases[i].v16 ? 2 : -1)) check_case(&cases[i], &sse, "sse");
  /* the kxk tiles with broadcasts shared between taps (2/3 of the accumulator budget) */
  ct_tune("vc_shared_taps=1");
  for (size_t i = 0, j = 0; i < sizeof cases / sizeof *cases; i++)
    if (cases[i].k > 1 && !cgt_quick_skip(j++, 0, 2)) check_case(&cases[i], &avx2, "avx2 shared taps");
  ct_tune("vc_shared_taps=0");
  /* strided / sub input panels packed lane by lane (vc_pack_strided's A/B switch) */
  ct_tune("vc_pack_scalar=1");
  for (size_t i = 0, j = 0; i < sizeof cases / sizeof *cases; i++)
    if (cases[i].k == 1 && cases[i].s > 1 && !cgt_quick_skip(j++, 0, 2)) check_case(&cases[i], &avx2, "avx2 scalar pack");
  ct_tune("vc_pack_scalar=0");
  cg_target_dispose(&avx2);
  cg_target_dispose(&sse);
  /* 16 lanes, 32 registers (the 24-accumulator tiles, 48x8 sub tiles) where this CPU can run
   * x86-64-v4 code */
  cg_target v4;
  if (has_v4 && cg_target_init(&v4, NULL, "x86-64-v4", NULL, &d) == 0) {
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
      if (!cgt_quick_skip_home(i, 2, npass, cases[i].v16 ? 2 : -1)) check_case(&cases[i], &v4, "avx512");
    cg_target_dispose(&v4);
  } else fprintf(stderr, "x86-64-v4: not run (no AVX-512 on this CPU)\n");
  static const char *const pass_name[] = {"avx2", "sse", "avx512"};
  int nv16 = 0;
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) nv16 += cases[i].v16;
  int total = cgt_quick_report("test_codegen_vc", pass_name, npass);
  if (cgt_quick() && has_v4) /* every case once, the v16 ones on x86-64-v4 */
    CGT_CHECK(total == (int)(sizeof cases / sizeof *cases) && cgt_quick_kept[2] == nv16 && cgt_quick_kept[0] + cgt_quick_kept[1] == 0,
              "quick mode: %d of %d cases run, %d of the %d v16 cases on x86-64-v4", total,
              (int)(sizeof cases / sizeof *cases), cgt_quick_kept[2], nv16);
  cgt_cleanup_dir();
  if (cgt_failures) fprintf(stderr, "test_codegen_vc: %d failure(s)\n", cgt_failures);
  else fprintf(stderr, "test_codegen_vc: ok\n");
  return cgt_failures != 0;
}
