/* test_store16_infer.c — 16-bit storage of inference activations (issue 6, docs/precision.md
 * "16-bit storage of inference activations"; passes/store16.c pass_store16_infer,
 * codegen/gen_store16.c cg_store16_infer).  For a ResNet-ish model (7x7 s2 stem, maxpool,
 * 1x1 / 3x3 / stride-2 bottlenecks, projection and identity residual adds, global average
 * pool, dense) and an MBConv model (depthwise 3x3 / 5x5 s1 and s2, squeeze-excite, swish,
 * residual adds), --precision 16.16, bf16 and fp16, compiled through cg_build_model (the
 * driver's hook) for x86-64-v3 (and on a host with other kernels, such as AVX-512's, for the
 * host too: there the values only) with and without tune store16=0:
 *  - the pass stored values in 16 bits (16-bit dtypes in the graph, a 16-bit conv epilogue
 *    store and a 16-bit maxpool in the ResNet-ish model), the model's input and outputs stay
 *    f32 at the ABI;
 *  - the planned scratch arena (sum over shards) is smaller with 16-bit storage;
 *  - the logits are bitwise equal with 16-bit and f32 storage, with 1 and 2 threads each;
 *  - the compiled 16-bit model matches the interpreter running the same graph (which holds
 *    16-bit values as their f32 values) within 5e-3 of the logit scale (test_precision's
 *    16.16 tolerance: an f32 sum in another order can round to the other neighbour).
 * CNNC_TEST_QUICK=1 (quick mode): resnetish bf16 and dwse fp16 for x86-64-v3 and
 * dwse bf16 for the host only. */
#include "codegen/cg_isa.h"
#include "test_codegen_harness.h"

typedef struct built {
  ir_graph *g;
  void *h;
  const cnnc_abi_model *m;
  char so[512];
} built;

static int build(built *b, const char *model, const char *half, int store16, int batch, const char *cpu) {
  char path[1024], bs[16];
  snprintf(path, sizeof path, "%s/tests/store16/%s.yml", CNNC_TEST_SRC, model);
  snprintf(bs, sizeof bs, "%d", batch);
  static int counter;
  snprintf(b->so, sizeof b->so, "%s/s%d.so", cgt_dir, counter++);
  const char *const kv[][2] = {{"batch-size", bs}, {"seed", "5"}, {"precision", "16.16"}, {"half-type", half},
                               {"target-cpu", cpu}, {"target-features", "+f16c"}};
  ct_tune(store16 ? "store16=1" : "store16=0");
  int rc = cgt_build(path, kv, cpu ? 6 : 4, b->so, &b->g);
  ct_tune("store16=1");
  if (rc) return -1;
  b->h = dlopen(b->so, RTLD_NOW | RTLD_LOCAL);
  if (!b->h) return fprintf(stderr, "dlopen: %s\n", dlerror()), -1;
  b->m = dlsym(b->h, CNNC_ABI_SYMBOL);
  return b->m && b->m->magic == CNNC_ABI_MAGIC ? 0 : -1;
}

static void unbuild(built *b) {
  if (b->h) dlclose(b->h);
  unlink(b->so);
  if (b->g) ir_graph_free(b->g);
}

static int64_t arena(const cnnc_abi_model *m) {
  int64_t s = 0;
  for (int i = 0; i < m->n_shards; i++) s += m->shards[i].scratch_bytes;
  return s;
}

/* The logits of the builds b[0..n) (nth[i] threads) on one random input of b[0]'s graph in
 * [-2, 2] (*x, malloc'd; *ny logits): each bitwise equal to b[0]'s (what[i] names run i);
 * returns b[0]'s (malloc'd). */
static float *same_logits(const char *label, const built *const *b, const int *nth, const char *const *what, int n, float **x,
                          int64_t *ny) {
  int64_t nx = ir_shape_numel(&b[0]->g->values[b[0]->g->input].shape);
  *ny = ir_shape_numel(&b[0]->g->values[b[0]->g->outputs[0]].shape);
  *x = malloc((size_t)nx * sizeof **x);
  for (int64_t i = 0; i < nx; i++) (*x)[i] = cgt_uniform(-2.0f, 2.0f);
  float *y0 = cgt_run_copy(b[0]->m, *x, nx, nth[0]);
  for (int i = 1; i < n; i++) {
    float *y = cgt_run_copy(b[i]->m, *x, nx, nth[i]);
    CGT_CHECK(!memcmp(y0, y, (size_t)*ny * 4), "%s: %s differ from %s", label, what[i], what[0]);
    free(y);
  }
  return y0;
}

/* cpu: the target (NULL: the host); strict: check what the pass stored (16-bit values and conv
 * results, the 16-bit maxpool, a smaller arena), else only that the values are right. */
static void check_model(const char *model, const char *half, int batch, const char *cpu, int strict) {
  built s = {0}, f = {0};
  char label[128];
  snprintf(label, sizeof label, "%s %s batch %d %s", model, half, batch, cpu ? cpu : "host");
  if (build(&s, model, half, 1, batch, cpu) || build(&f, model, half, 0, batch, cpu)) {
    CGT_CHECK(0, "%s: build failed", label);
    unbuild(&s), unbuild(&f);
    return;
  }
  /* what the pass did */
  int n16 = 0, nwiden = 0, conv_out16 = 0, pool16 = 0;
  for (int v = 0; v < s.g->n_values; v++) n16 += s.g->values[v].kind == IR_VAL_ACT && s.g->values[v].dtype != IR_F32;
  for (int i = 0; i < s.g->n_nodes; i++) {
    const ir_node *n = &s.g->nodes[i];
    nwiden += n->op == IR_OP_widen16;
    pool16 += n->op == IR_OP_maxpool && s.g->values[n->out].dtype != IR_F32;
    int p = s.g->values[n->in[0]].producer; /* a rounded conv result (fused: the conv's epilogue stores 16 bits) */
    ir_op po = p >= 0 ? s.g->nodes[p].op : IR_OP_COUNT;
    conv_out16 += n->op == IR_OP_round16 && s.g->values[n->out].dtype != IR_F32 &&
                  (po == IR_OP_conv2d || po == IR_OP_batchnorm || po == IR_OP_relu || po == IR_OP_add || po == IR_OP_swish);
  }
  int f16 = 0;
  for (int v = 0; v < f.g->n_values; v++) f16 += f.g->values[v].kind == IR_VAL_ACT && f.g->values[v].dtype != IR_F32;
  CGT_CHECK(!strict || (n16 > 0 && conv_out16 > 0), "%s: %d values, %d conv results stored in 16 bits", label, n16, conv_out16);
  CGT_CHECK(f16 == 0, "%s: store16=0 still stored %d values in 16 bits", label, f16);
  if (strict && !strcmp(model, "resnetish")) CGT_CHECK(pool16 == 1, "%s: the maxpool does not write 16 bits", label);
  for (int i = 0; i < s.m->n_tensors; i++)
    CGT_CHECK(s.m->tensors[i].dtype == CNNC_ABI_F32, "%s: ABI tensor %s is not f32", label, s.m->tensors[i].name);
  int64_t a16 = arena(s.m), a32 = arena(f.m);
  fprintf(stderr, "%s: %d values in 16 bits, %d widen16 nodes, %d conv results; arena %lld bytes (f32 storage %lld, "
          "%.1f %%)\n", label, n16, nwiden, conv_out16, (long long)a16, (long long)a32, 100.0 * (double)a16 / (double)a32);
  CGT_CHECK(!strict || a16 < a32, "%s: arena %lld not below f32 storage's %lld", label, (long long)a16, (long long)a32);
  /* bitwise: 16-bit vs f32 storage, 1 vs 2 threads */
  static const char *const what[4] = {"16-bit storage logits (1 thread)", "16-bit storage logits (2 threads)",
                                      "f32 storage logits (1 thread)", "f32 storage logits (2 threads)"};
  int64_t ny;
  float *x, *ys1 = same_logits(label, (const built *[]){&s, &s, &f, &f}, (const int[]){1, 2, 1, 2}, what, 4, &x, &ny);
  int finite = 1;
  for (int64_t i = 0; i < ny; i++) finite &= isfinite(ys1[i]);
  CGT_CHECK(finite, "%s: non-finite logits", label);
  /* vs the interpreter on the same graph */
  float **ref = ir_interp(s.g, x, NULL);
  char l2[160];
  snprintf(l2, sizeof l2, "%s vs interpreter", label);
  CGT_CHECK(cgt_compare(l2, ys1, ref[s.g->outputs[0]], ny, 5e-3) == 0, "%s: compiled differs from the interpreter", label);
  double worst = 0, scale = 0;
  for (int64_t i = 0; i < ny; i++) scale = fmax(scale, fabs(ref[s.g->outputs[0]][i]));
  for (int64_t i = 0; i < ny; i++) worst = fmax(worst, fabs(ys1[i] - ref[s.g->outputs[0]][i]) / scale);
  fprintf(stderr, "%s: max |compiled - interpreter| / max |logit| %.3g\n", label, worst);
  ir_interp_free(s.g, ref);
  free(x), free(ys1);
  unbuild(&s), unbuild(&f);
}

/* Kernels of m whose name has the emulated bf16 route and contains part before "_bf16_" ("_x16_":
 * reads x in bf16, "_o16": writes bf16, "_r16": reads a bf16 residual; NULL: any); *pool_reader: the
 * kernel of layer1/0/conv1 (the maxpool's reader) when not NULL. */
static int bf16_kernels(const cnnc_abi_model *m, const char *part, const char **pool_reader) {
  int k = 0;
  for (int s = 0; s < m->n_shards; s++)
    for (int i = 0; i < m->shards[s].n_ops; i++) {
      const char *kn = m->shards[s].kernel_names[i], *b = strstr(kn, "_bf16_");
      if (pool_reader && !strcmp(m->shards[s].op_names[i], "layer1/0/conv1")) *pool_reader = kn;
      if (!strncmp(kn, "cnnk_", 5) && strstr(kn, "conv2d") && strstr(kn, "_bf16emu") && b)
        k += !part || (strstr(kn, part) && strstr(kn, part) < b);
    }
  return k;
}

/* The bf16 route's 16-bit operands (gen_conv_bf16.c, emulated on x86-64-v3: tune bf16_emulate=1):
 * resnetish bf16 at batch 3, its 1x1 convs on the route read x (the maxpool's result too),
 * read the identity residual and write their results in bf16; bf16kxk (kxk = 1: 64-channel
 * 3x3 s1 / s2 and 1x1 s2 convs on the route's row-segment panels) at batch 1, and at batch 2
 * with tune bf16_span_force=1 (panels across images), those read x in bf16 too.  The logits are bitwise those of f32 storage (tune store16=0) and of
 * tune bf16_io16=0 (the route on f32 operands, the maxpool's readers still on it), with 1
 * and 2 threads. */
static void check_bf16_route(const char *model, int batch, int kxk) {
  built s = {0}, f = {0}, o = {0};
  char label[96];
  snprintf(label, sizeof label, "%s bf16 emulated route x86-64-v3", model);
  ct_tune("bf16_emulate=1");
  int rc = build(&s, model, "bf16", 1, batch, "x86-64-v3") || build(&f, model, "bf16", 0, batch, "x86-64-v3");
  ct_tune("bf16_io16=0");
  rc = rc || build(&o, model, "bf16", 1, batch, "x86-64-v3");
  ct_tune("bf16_io16=1,bf16_emulate=0");
  CGT_CHECK(!rc, "%s: build failed", label);
  if (!rc) {
    const char *pr = "", *pro = "";
    int nb = bf16_kernels(s.m, NULL, &pr), x16 = bf16_kernels(s.m, "_x16_", NULL), o16 = bf16_kernels(s.m, "_o16", NULL);
    int r16 = bf16_kernels(s.m, "_r16", NULL);
    int io_off = bf16_kernels(o.m, "_x16_", &pro) + bf16_kernels(o.m, "_o16", NULL) + bf16_kernels(o.m, "_r16", NULL);
    fprintf(stderr, "%s: %d bf16 convs, %d read x, %d write, %d read a residual in 16 bits; maxpool reader %s\n", label, nb,
            x16, o16, r16, pr);
    CGT_CHECK(nb >= 5 && x16 >= 4 && o16 >= 3 && (r16 >= 1 || kxk), "%s: bf16 convs %d, 16-bit x %d, out %d, residual %d", label,
              nb, x16, o16, r16);
    if (!kxk) {
      CGT_CHECK(strstr(pr, "_x16_") && strstr(pr, "_bf16emu"), "%s: the maxpool's reader is %s", label, pr);
      CGT_CHECK(strstr(pro, "_bf16emu") && !strstr(pro, "_x16"), "%s: bf16_io16=0: maxpool reader %s", label, pro);
    } else {
      int k[3] = {0, 0, 0}; /* kxk kernels on the route reading x in bf16: 3x3 s1, 3x3 s2, 1x1 s2 */
      const char *kk[3] = {"conv2d_3x3s1_", "conv2d_3x3s2_", "conv2d_1x1s2_"};
      for (int i = 0; i < s.m->shards[0].n_ops; i++)
        for (int j = 0; j < 3; j++) {
          const char *kn = s.m->shards[0].kernel_names[i];
          k[j] += strstr(kn, kk[j]) && strstr(kn, "_x16_") && strstr(kn, "_bf16emu");
        }
      CGT_CHECK(k[0] == 1 && k[1] == 1 && k[2] == 1, "%s: kxk kernels reading bf16: 3x3 s1 %d, 3x3 s2 %d, 1x1 s2 %d", label, k[0],
                k[1], k[2]);
      int span = 0; /* tune bf16_span_force=1: all 5 convs span the batch (flat 1x1s and the fused add's 3x3 s2 too) */
      for (int i = 0; i < s.m->shards[0].n_ops; i++) {
        const char *kn = s.m->shards[0].kernel_names[i];
        span += strstr(kn, "_span_") && strstr(kn, "_x16_");
      }
      CGT_CHECK(span == (batch > 1 && ct_tuning.bf16_span_force ? 5 : 0), "%s: %d spanned kernels reading bf16", label, span);
    }
    CGT_CHECK(io_off == 0, "%s: bf16_io16=0: %d bf16 convs on 16-bit operands", label, io_off);
    static const char *const what[4] = {"16-bit storage logits (1 thread)", "f32 storage logits (2 threads)",
                                        "bf16_io16=0's logits (1 thread)", "16-bit storage logits (2 threads)"};
    int64_t ny;
    float *x, *ys1 = same_logits(label, (const built *[]){&s, &f, &o, &s}, (const int[]){1, 2, 1, 2}, what, 4, &x, &ny);
    free(x), free(ys1);
  }
  unbuild(&s), unbuild(&f), unbuild(&o);
}

int main(void) {
  cgt_init_dir();
  /* x86-64-v3: what the pass stores there.  The host (AVX-512: vectors of 16 lanes, maybe
   * avx512bf16) only for the values: there the models' small maps (10x10 and 5x5: 100 of 112
   * and 25 of 32 lanes) take the channel-vector kernels, and with avx512bf16 the 1x1 convs the
   * bf16 route, neither of which reads or writes 16 bits (gen_conv.c io16_route). */
  cg_target host;
  if (cgt_target(&host, NULL)) return 1;
  ct_tune_reset();
  int same = host.vec_f32 == 8 && !cg_bf16_dot(&host, &ct_tuning);
  cg_target_dispose(&host);
  /* CNNC_TEST_QUICK=1 (quick mode): each model and each half type once, x86-64-v3
   * (resnetish fp16 also runs there in test_codegen_flat's 16-bit check), the host once */
  int quick = cgt_quick();
  check_model("resnetish", "bf16", 3, "x86-64-v3", 1);
  if (!quick) check_model("resnetish", "fp16", 3, "x86-64-v3", 1);
  if (!quick) check_model("dwse", "bf16", 3, "x86-64-v3", 1);
  check_model("dwse", "fp16", 2, "x86-64-v3", 1);
  check_bf16_route("resnetish", 3, 0);
  check_bf16_route("bf16kxk", 1, 1);
  ct_tune("bf16_span_force=1"); /* pixel vectors across the batch's images (span_plan) on bf16 x */
  check_bf16_route("bf16kxk", 2, 1);
  ct_tune("bf16_span_force=0");
  if (!same) { /* resnetish fp16 left out: its 5-10 s AVX-512 compiles (channel-vector kernels) */
    if (!quick) check_model("resnetish", "bf16", 3, NULL, 0);
    check_model("dwse", "bf16", 3, NULL, 0);
    if (!quick) check_model("dwse", "fp16", 2, NULL, 0);
  }
  return cgt_done("test_store16_infer");
}
