/* test_codegen_se_big.c — the squeeze-excite scale fused into a channel-vector project conv
 * whose input planes do not fit the stack buffer (codegen/gen_conv_se.c: cin x h x w x 4 bytes
 * > 256 KB, SE_COPY_MAX_BYTES): no `se_planes` copy, each broadcast input pixel is multiplied
 * by its channel's factor where it is loaded (cg_conv_xscale).  An SE block (depthwise conv +
 * BN + swish -> global_avgpool -> fc1 -> fc2 -> sigmoid -> mul -> project 1x1 conv + BN) with
 * 1344 channels at 7x7 (257 KB of planes) and 2622 at 5x5 (256.05 KB), batch 1 and 2, next
 * to 2621 at 5x5 (255.96 KB: the buffer path), compiled for the host, AVX2 and SSE: the project
 * kernel must be `conv2d_1x1_se_..._vc` and hold the `se_planes` buffer exactly when the planes
 * fit (checked in --emit llvm); results vs ir_interp (1e-4), 1 vs 2 threads bitwise, and vs the
 * tune se_fusion=0 build (unfused mul kernel; the pool is fused in both, so 1e-5). */
#include "test_codegen_harness.h"

#include "dw_case_check.h"

typedef struct big_case {
  int n, c, h, w, sq, cout;
  int buffered; /* 1: the planes fit the stack buffer (se_planes), 0: scaled where loaded */
  int sse;      /* also for SSE (4 lanes: a 7x7 plane fills 49/52 lanes, so pixel vectors) */
} big_case;

/* The project conv is a flat 1x1 GEMM over h*w pixels: channel vectors when pixel vectors
 * would fill <= 90 % of their lanes (gen_conv_vc.c): 49 and 25 pixels at 8 lanes. */
static const big_case cases[] = {
    {1, 1344, 7, 7, 8, 16, 0, 0}, /* 1344 x 49 x 4 = 263424 B > 256 KB (EfficientNet-B0 has 1152) */
    {2, 2622, 5, 5, 6, 24, 0, 1}, /* 262200 B: just over, batch 2 (per-image factors) */
    {2, 2621, 5, 5, 6, 24, 1, 1}, /* 262100 B: just under: the stack-buffer path */
};

static ir_attr conv_attr(int k, int groups) {
  int p = k / 2;
  ir_attr a = {.conv2d = {{k, k}, {1, 1}, {p, p, p, p}, {1, 1}, groups}};
  return a;
}

static ir_graph *se_graph(const big_case *k) {
  ir_graph *g = ir_graph_new("se_big", k->n);
  ir_attr none = {0};
  int x = ir_add_input(g, "x", IR_F32, SHAPE(k->n, k->c, k->h, k->w));
  int in[2] = {x, cgt_param(g, "dw/weight", SHAPE(k->c, 1, 3, 3))};
  ir_attr a = conv_attr(3, k->c);
  int y = cgt_node(g, IR_OP_conv2d, "dw", in, 2, &a);
  y = cgt_node(g, IR_OP_swish, "dw/act", (int[]){cgt_add_bn(g, "dw/bn", y, k->c)}, 1, &none);
  int p = cgt_node(g, IR_OP_global_avgpool, "se/avgpool", &y, 1, &none);
  ir_attr a1 = conv_attr(1, 1);
  int f1[3] = {p, cgt_param(g, "se/fc1/weight", SHAPE(k->sq, k->c, 1, 1)), cgt_param(g, "se/fc1/bias", SHAPE(k->sq))};
  int s = cgt_node(g, IR_OP_swish, "se/act", (int[]){cgt_node(g, IR_OP_conv2d, "se/fc1", f1, 3, &a1)}, 1, &none);
  int f2[3] = {s, cgt_param(g, "se/fc2/weight", SHAPE(k->c, k->sq, 1, 1)), cgt_param(g, "se/fc2/bias", SHAPE(k->c))};
  s = cgt_node(g, IR_OP_sigmoid, "se/gate", (int[]){cgt_node(g, IR_OP_conv2d, "se/fc2", f2, 3, &a1)}, 1, &none);
  int m = cgt_node(g, IR_OP_mul, "se/scale", (int[]){y, s}, 2, NULL);
  int pj[2] = {m, cgt_param(g, "project/weight", SHAPE(k->cout, k->c, 1, 1))};
  y = cgt_add_bn(g, "project/bn", cgt_node(g, IR_OP_conv2d, "project", pj, 2, &a1), k->cout);
  g->outputs[g->n_outputs++] = y;
  g->n_shards = 1;
  return g;
}

/* In --emit llvm of g for t: *se = kernels named conv2d_1x1..._se_..._vc, *planes = of those,
 * the ones whose body has the se_planes stack buffer; -1 when g does not compile. */
static int se_kernels(ir_graph *g, const cg_target *t, int *se, int *planes) {
  char ll[512], line[8192];
  FILE *f = cgt_llvm_of(g, t, "se_big", ll, sizeof ll);
  if (!f) return -1;
  *se = *planes = 0;
  int in_se = 0;
  while (fgets(line, sizeof line, f)) {
    if (!strncmp(line, "define", 6)) {
      in_se = strstr(line, "conv2d_1x1") && strstr(line, "_se_") && strstr(line, "_vc");
      *se += in_se;
      if (in_se) fprintf(stderr, "  kernel: %.*s\n", (int)strcspn(line, "("), line);
    } else if (line[0] == '}') {
      in_se = 0;
    } else if (in_se && strstr(line, "%se_planes")) {
      *planes += 1, in_se = 0;
    }
  }
  fclose(f);
  unlink(ll);
  return 0;
}

/* Output 0 of g for t, nth threads (malloc'd), or NULL. */
static float *se_run(ir_graph *g, const cg_target *t, int nth) {
  static int counter;
  char so[512];
  snprintf(so, sizeof so, "%s/se_big%d.so", cgt_dir, counter++);
  cg_options o = {so, NULL, "se_big", "{\"test\": true}", 2, 0};
  ir_diag d = {0};
  if (cg_compile(ct_g(g), t, &o, &d)) {
    ir_diag_print(&d, stderr);
    return NULL;
  }
  void *h = dlopen(so, RTLD_NOW | RTLD_LOCAL);
  unlink(so);
  if (!h) return NULL;
  const cnnc_abi_model *m = dlsym(h, CNNC_ABI_SYMBOL);
  void *bufs[64];
  for (int i = 0; i < m->n_tensors; i++) bufs[i] = calloc(1, (size_t)m->tensors[i].bytes + 64);
  float *x = bufs[m->input];
  for (int64_t i = 0; i < m->tensors[m->input].bytes / 4; i++) x[i] = (float)((i * 7919) % 2001) / 1000.0f - 1.0f;
  cgt_run_model(m, bufs, nth);
  int64_t n = m->tensors[m->outputs[0]].bytes / 4;
  float *out = malloc((size_t)n * sizeof *out);
  memcpy(out, bufs[m->outputs[0]], (size_t)n * sizeof *out);
  for (int i = 0; i < m->n_tensors; i++) free(bufs[i]);
  dlclose(h);
  return out;
}

static void run_cases(const cg_target *t, const char *pfx) {
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    const big_case *k = &cases[i];
    if (t->vec_f32 < 8 && !k->sse) continue;
    ir_graph *g = se_graph(k);
    cgt_random_params(g, 0.5f);
    char label[200];
    snprintf(label, sizeof label, "%s se n%d c%d %dx%d sq%d cout%d (%d B of planes)", pfx, k->n, k->c, k->h, k->w, k->sq,
             k->cout, k->c * k->h * k->w * 4);
    int se = -1, planes = -1;
    CGT_CHECK(se_kernels(g, t, &se, &planes) == 0, "%s: does not compile", label);
    CGT_CHECK(se == 1, "%s: %d channel-vector conv2d_1x1 _se_ kernels, want 1", label, se);
    CGT_CHECK(planes == k->buffered, "%s: se_planes buffer %s, want %s", label, planes ? "present" : "absent",
              k->buffered ? "present" : "absent (scaled where loaded)");
    CGT_CHECK(cgt_check_graph(g, t, label, 1e-4, NULL) == 0, "%s: compiled result differs from the interpreter", label);
    int64_t n = ir_shape_numel(&g->values[g->outputs[0]].shape);
    float *o1 = se_run(g, t, 1), *o2 = se_run(g, t, 2);
    ct_tune("se_fusion=0");
    float *u = se_run(g, t, 2);
    ct_tune("se_fusion=1");
    CGT_CHECK(o1 && o2 && u, "%s: build or run failed", label);
    if (o1 && o2 && u) {
      CGT_CHECK(memcmp(o1, o2, (size_t)n * sizeof *o1) == 0, "%s: 1 and 2 threads differ", label);
      CGT_CHECK(cgt_compare(label, o2, u, n, 1e-5) == 0, "%s: differs from the se_fusion=0 build", label);
    }
    fprintf(stderr, "%s: se kernel %d, se_planes %d\n", label, se, planes);
    free(o1), free(o2), free(u);
    ir_graph_free(g);
  }
}

int main(void) {
  (void)dw_build_graph, (void)dw_is_rows_kernel; /* dw_case_check.h: only its helpers are used here */
  cgt_init_dir();
  cg_target host, avx2, sse;
  if (dw_target(&host, NULL) || dw_target(&avx2, "x86-64-v3") || dw_target(&sse, "x86-64")) return 1;
  run_cases(&host, "host");
  run_cases(&avx2, "avx2");
  run_cases(&sse, "sse");
  cg_target_dispose(&host);
  cg_target_dispose(&avx2);
  cg_target_dispose(&sse);
  cgt_cleanup_dir();
  if (cgt_failures) fprintf(stderr, "test_codegen_se_big: %d failure(s)\n", cgt_failures);
  else fprintf(stderr, "test_codegen_se_big: ok\n");
  return cgt_failures != 0;
}
