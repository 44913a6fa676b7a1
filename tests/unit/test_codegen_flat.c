/* test_codegen_flat.c — the flat (1x1 stride-1 GEMM) convs' next-chunk prefetch (gen_conv.c,
 * flat_prefetch_line): the items that read a chunk's packed panels prefetch the thread's next
 * chunk of x.  Odd K (chunks of odd pixel counts), odd Cout (a leftover channel tile), planes
 * not a multiple of the tile (a masked tail, a short last chunk), batch 1 and 3 (the pixel and
 * the tile thread split), a fused residual add (its residual lines prefetched, not x), built with the prefetch and with
 * tune flat_prefetch=0: every output matches the interpreter, 1, 2 and 3 threads are bitwise
 * equal, the two builds are bitwise equal (a prefetch changes no value), and the LLVM IR of
 * each build has llvm.prefetch exactly when the prefetch is on (the next chunk of x for convs
 * without a fused add whose batch input is at least 4 MB, 512 KB at batch 1, the residual lines for those with
 * one; a wide conv, over gen_conv.c's FLAT_PF_MAX_SPL slots per prefetched line, has none
 * unless tune flat_pf_max_spl=0).  16-bit storage (--precision
 * 16.16, bf16 and fp16, tests/store16/resnetish.yml at batch 3: flat convs reading and writing
 * 16 bits, with residual adds; compiled for x86-64-v3): the two builds differ in code and give bitwise equal logits
 * with 1 and 2 threads, within test_store16_infer's 5e-3 of the interpreter.
 * CNNC_TEST_QUICK=1 (quick mode): each case for one of the two targets (round robin,
 * test_codegen_harness.h cgt_quick_skip_home; the cin16 case on the host where it has 16 lanes). */
#include "test_codegen_harness.h"

#include "conv_case_check.h"

typedef struct flat_case {
  int n, cin, cout, h, w, resid; /* resid: bn + residual add of a second 1x1 conv + relu */
  int wide; /* more than FLAT_PF_MAX_SPL slots per line, Cin > 64: no x prefetch unless tune flat_pf_max_spl=0 */
  int cin16; /* Cin on 16-lane targets (0: cin): a 64-pixel tile of 1030 channels is over gen_conv.c's
              * CONV_PACK_MAX_BYTES (no packed chunk, no prefetch), one of 1000 is not */
} flat_case;

/* gen_conv.c FLAT_PF_MIN_BYTES (FLAT_PF_MIN_BYTES_B1 at batch 1): smaller inputs (for the
 * batch) get no next-chunk prefetch */
#define PF_MIN_BYTES(n) ((n) == 1 ? 512.0 * 1024 : 4.0 * 1024 * 1024)

static const flat_case cases[] = {
    {1, 257, 13, 91, 91, 0},   /* K 257: 127-px chunks of whole tiles, a 1-px masked tail; 13 = 2*6 + 1 */
    {3, 64, 21, 105, 107, 0},  /* batch 3: 2 threads split the tiles; a short last chunk */
    {2, 1030, 29, 33, 35, 0, 0, 1000}, /* K 1030 (1000): one-tile chunks, whole images per thread */
    {1, 64, 70, 11, 13, 0},    /* 36 KB of input: no next-chunk prefetch */
    {1, 128, 40, 40, 40, 0},   /* 800 KB at batch 1: over the batch-1 floor */
    {3, 48, 70, 11, 13, 1},    /* a fused residual add: its residual lines prefetched */
    {1, 240, 13, 95, 97, 1},   /* both: the add conv's residuals, the other conv's next chunks */
    /* 4.5 MB, 1001 channels (tiles of 4 to 8 with a leftover): ~Cout * 16 / (accumulators x
     * lanes) slots per line, ~160 on 8 lanes, ~40 on 16: x prefetch off by default */
    {1, 96, 1001, 107, 109, 0, 1},
};

/* Which kernels of g's LLVM IR for t call llvm.prefetch: 1 a conv without a fused add, 2 one
 * with it (or'ed); -1 when it does not compile. */
static int has_prefetch(ir_graph *g, const cg_target *t) {
  cgt_ir ir;
  int found = cgt_ir_open(&ir, g, t, "flat"), add = 0;
  while (cgt_ir_next(&ir)) {
    if (!strncmp(ir.line, "define ", 7)) add = strstr(ir.line, "_add_") != NULL; /* kernel name, not local_unnamed_addr */
    if (strstr(ir.line, "call void @llvm.prefetch")) found |= add ? 2 : 1;
  }
  return found;
}

/* Compiles g (prefetch on or off), checks its kernel is a flat conv and its IR, runs it with
 * 1..3 threads against r; the 1-thread output goes to got (ny floats).  Returns 0 when run. */
static int build_run(ir_graph *g, const cg_target *t, const char *label, int pf, int want, const cgt_ref *r, float *got) {
  ct_tune(pf ? "flat_prefetch=1" : "flat_prefetch=0");
  if (pf == 2) ct_tune("flat_pf_max_spl=0"); /* no slots-per-line limit */
  int hp = has_prefetch(g, t);
  CGT_CHECK(hp == want, "%s: llvm.prefetch in the IR of kernels without (1) / with (2) an add: %d, want %d", label, hp, want);
  return flat_build_run(g, t, label, "flat_prefetch=1,flat_pf_max_spl=30", 0, NULL, 3, 0, r, got);
}

static void run_case(const flat_case *k, const cg_target *t, const char *pfx) {
  char label[160];
  int cin = t->vec_f32 >= 16 && k->cin16 ? k->cin16 : k->cin;
  snprintf(label, sizeof label, "%s n%d %d->%d %dx%d%s", pfx, k->n, cin, k->cout, k->h, k->w, k->resid ? " resid" : "");
  ir_graph *g = cgt_flat_graph(k->n, cin, k->cout, k->h, k->w, 1, k->resid, 1);
  cgt_random_params(g, 0.5f);
  cgt_ref r = cgt_ref_make(g);
  size_t ybytes = (size_t)r.ny * sizeof(float);
  float *on = malloc(ybytes), *off = malloc(ybytes);
  char l[200];
  snprintf(l, sizeof l, "%s prefetch", label);
  if (k->wide) CGT_CHECK(4.0 * (double)r.nx >= PF_MIN_BYTES(k->n), "%s: input under the prefetch floor", label);
  int want = (4.0 * (double)r.nx >= PF_MIN_BYTES(k->n) && !k->wide ? 1 : 0) | (k->resid ? 2 : 0);
  int a = build_run(g, t, l, 1, want, &r, on);
  if (k->wide) { /* tune flat_pf_max_spl=0 puts the x prefetch back; same values */
    float *lim = malloc(ybytes);
    snprintf(l, sizeof l, "%s flat_pf_max_spl=0", label);
    if (!build_run(g, t, l, 2, want | 1, &r, lim) && !a)
      CGT_CHECK(!memcmp(on, lim, ybytes), "%s: not bitwise equal to the default build", l);
    free(lim);
  }
  snprintf(l, sizeof l, "%s flat_prefetch=0", label);
  int b = build_run(g, t, l, 0, 0, &r, off);
  if (!a && !b) CGT_CHECK(!memcmp(on, off, ybytes), "%s: prefetch build not bitwise equal to the other", label);
  cgt_ref_free(g, &r);
  free(on), free(off);
  ir_graph_free(g);
}

/* tests/store16/resnetish.yml at --precision 16.16 (half) and batch 3 for x86-64-v3, with the
 * prefetch or without, to a .so at so; the graph goes to *gp, the dlopen handle to *h.  AVX2:
 * on 16 lanes its 10x10 maps fill 100 of 112 lanes and take the channel-vector kernels, and an
 * avx512bf16 target's bf16 route reads f32 (neither has 16-bit operands, gen_store16.c). */
static const cnnc_abi_model *build16(const char *half, int pf, char *so, size_t cap, ir_graph **gp, void **h) {
  char path[1024];
  snprintf(path, sizeof path, "%s/tests/store16/resnetish.yml", CNNC_TEST_SRC);
  snprintf(so, cap, "%s/r16_%s_%d.so", cgt_dir, half, pf);
  const char *const kv[][2] = {{"batch-size", "3"}, {"seed", "5"}, {"precision", "16.16"}, {"half-type", half},
                               {"target-cpu", "x86-64-v3"}, {"target-features", "+f16c"}};
  ct_tune(pf ? "flat_prefetch=1" : "flat_prefetch=0");
  int rc = cgt_build(path, kv, 6, so, gp);
  ct_tune("flat_prefetch=1");
  if (rc) return NULL;
  *h = dlopen(so, RTLD_NOW | RTLD_LOCAL);
  if (!*h) return fprintf(stderr, "dlopen: %s\n", dlerror()), NULL;
  return dlsym(*h, CNNC_ABI_SYMBOL);
}

static void check16(const char *half) {
  char so[2][512];
  ir_graph *g[2] = {NULL, NULL};
  void *h[2] = {NULL, NULL};
  const cnnc_abi_model *m[2];
  for (int pf = 0; pf < 2; pf++) m[pf] = build16(half, pf, so[pf], sizeof so[pf], &g[pf], &h[pf]);
  CGT_CHECK(m[0] && m[1], "16.16 %s: build failed", half);
  if (m[0] && m[1]) {
    int flat16 = 0;
    for (int i = 0; i < m[1]->shards[0].n_ops; i++) {
      const char *k = m[1]->shards[0].kernel_names[i];
      flat16 += strstr(k, "conv2d_1x1_") && strstr(k, "_add_") && (strstr(k, "_x16") || strstr(k, "_o16"));
    }
    CGT_CHECK(flat16 > 0, "16.16 %s: no flat conv with an add on 16-bit operands", half);
    CGT_CHECK(cgt_file_size(so[0]) != cgt_file_size(so[1]), "16.16 %s: flat_prefetch=0 gave the same .so size", half);
    int64_t nx = ir_shape_numel(&g[1]->values[g[1]->input].shape), ny = ir_shape_numel(&g[1]->values[g[1]->outputs[0]].shape);
    float *x = malloc((size_t)nx * sizeof *x);
    for (int64_t i = 0; i < nx; i++) x[i] = cgt_uniform(-2.0f, 2.0f);
    float *on1 = cgt_run_copy(m[1], x, nx, 1), *on2 = cgt_run_copy(m[1], x, nx, 2), *off1 = cgt_run_copy(m[0], x, nx, 1);
    CGT_CHECK(!memcmp(on1, off1, (size_t)ny * 4), "16.16 %s: prefetch build not bitwise equal to the other", half);
    CGT_CHECK(!memcmp(on1, on2, (size_t)ny * 4), "16.16 %s: 1 vs 2 threads differ", half);
    float **ref = ir_interp(g[1], x, NULL);
    char l[80];
    snprintf(l, sizeof l, "16.16 %s vs interpreter", half);
    cgt_failures += cgt_compare(l, on1, ref[g[1]->outputs[0]], ny, 5e-3);
    ir_interp_free(g[1], ref);
    free(x), free(on1), free(on2), free(off1);
  }
  for (int pf = 0; pf < 2; pf++) {
    if (h[pf]) dlclose(h[pf]);
    if (g[pf]) ir_graph_free(g[pf]);
    unlink(so[pf]);
  }
}

int main(void) {
  cgt_init_dir();
  ct_tune("flat_w_pf=0"); /* the weight prefetch (batch 1) has its own test: test_codegen_flat_wpf */
  cg_target host, avx2;
  if (cgt_target(&host, NULL) || cgt_target(&avx2, "x86-64-v3")) return 1;
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    /* CNNC_TEST_QUICK: round robin; a cin16 case (16 lanes) on the host, 16 lanes where it has them */
    int home = cases[i].cin16 && host.vec_f32 >= 16 ? 0 : -1;
    if (!cgt_quick_skip_home(i, 0, 2, home)) run_case(&cases[i], &host, "host");
    if (!cgt_quick_skip_home(i, 1, 2, home)) run_case(&cases[i], &avx2, "avx2");
  }
  static const char *const pass_name[] = {"host", "avx2"};
  cgt_quick_report("test_codegen_flat", pass_name, 2);
  cg_target_dispose(&host);
  cg_target_dispose(&avx2);
  check16("bf16");
  check16("fp16");
  return cgt_done("test_codegen_flat");
}
