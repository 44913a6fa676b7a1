/* test_codegen_flat_tail.c — two flat (1x1 stride-1) conv variants of gen_conv.c: the plane's
 * masked tail of at most 8 pixels on channel vectors (flat_tail_cv: masked weight loads, pixel
 * broadcasts, residual gathered, result scattered) and the prefetch of the item that packs a
 * chunk (flat_pack_prefetch, opt-in).  Small planes with a tail (7x9, 10x10, 13x13, 14x14), a
 * leftover channel tile, a fused residual add, batch 1 to 3, built with both variants
 * (tune flat_pack_pf=48) and with neither (tune flat_tail_cv=0), for the host and x86-64-v3: every output
 * matches the interpreter, 1, 2 and 3 threads are bitwise equal, the two builds are bitwise
 * equal (the tail's fmuladd chains and epilogue are the pixel tiles'), and the LLVM IR has
 * llvm.masked.scatter (some case per target, none without the variants) and, for the convs
 * without an add (inputs under the next-chunk prefetch's 4 MB floor), llvm.prefetch only with
 * them.  x86-64-v4 (16 lanes) is checked by its IR on any host. */
#include "test_codegen_harness.h"

#include "conv_case_check.h"

typedef struct tail_case {
  int n, cin, cout, h, w, resid; /* resid: relu(bn(conv a(x)) + conv b(x)), else relu(bn(conv a(x))) */
} tail_case;

static const tail_case cases[] = {
    {1, 256, 64, 14, 14, 0}, /* ResNet-50 layer3's 196-pixel plane */
    {1, 96, 29, 14, 14, 1},  /* a fused add; 29 channels: a leftover tile */
    {2, 130, 40, 7, 9, 1},   /* batch 2: whole images per thread */
    {3, 64, 70, 10, 10, 0},  /* batch 3: the tile split */
    {1, 300, 40, 13, 13, 0}, /* 169 pixels */
};

/* off: the tail's masked pixel tiles, no packing prefetch (the default); else both variants */
static void set_off(int off) {
  ct_tune(off ? "flat_tail_cv=0,flat_pack_pf=0" : "flat_tail_cv=1,flat_pack_pf=48");
}

/* Lines of g's LLVM IR for t (variants off or on) in pixel-vector flat conv kernels calling
 * llvm.masked.scatter (*sc) and llvm.prefetch (*pf); -1 when it does not compile. */
static int ir_counts(ir_graph *g, const cg_target *t, int off, int *sc, int *pf) {
  cgt_ir ir;
  set_off(off);
  int rc = cgt_ir_open(&ir, g, t, "tail");
  ct_tune("flat_tail_cv=1,flat_pack_pf=0");
  *sc = *pf = 0;
  int flat = 0; /* in a pixel-vector flat kernel (not the channel-vector ones, which prefetch weights) */
  while (cgt_ir_next(&ir)) {
    if (!strncmp(ir.line, "define ", 7)) flat = strstr(ir.line, "conv2d_1x1_") && !strstr(ir.line, "_vc_");
    *sc += flat && strstr(ir.line, "call void @llvm.masked.scatter") != NULL;
    *pf += flat && strstr(ir.line, "call void @llvm.prefetch") != NULL;
  }
  return rc;
}

/* One case for t: IR counts added to sc[off] / pf[off] (pf: convs without an add only); run
 * both builds when run is set. */
static void run_case(const tail_case *k, const cg_target *t, const char *pfx, int run, int *sc, int *pf) {
  char label[160];
  snprintf(label, sizeof label, "%s n%d %d->%d %dx%d%s", pfx, k->n, k->cin, k->cout, k->h, k->w, k->resid ? " resid" : "");
  ir_graph *g = cgt_flat_graph(k->n, k->cin, k->cout, k->h, k->w, 1, k->resid, 1);
  cgt_random_params(g, 0.5f);
  for (int off = 0; off < 2; off++) {
    int s, p;
    CGT_CHECK(!ir_counts(g, t, off, &s, &p), "%s: no LLVM IR", label);
    sc[off] += s;
    if (!k->resid) pf[off] += p;
  }
  static const char *const tag[2] = {"flat_pack_pf=48", "flat_tail_cv=0"};
  static const char *const tune[2] = {"flat_tail_cv=1,flat_pack_pf=48", "flat_tail_cv=0,flat_pack_pf=0"};
  if (run) flat_ab(g, t, label, tag, tune, "flat_tail_cv=1,flat_pack_pf=0");
  ir_graph_free(g);
}

int main(void) {
  cgt_init_dir();
  ct_tune("flat_w_pf=0"); /* the weight prefetch (batch 1) has its own test: test_codegen_flat_wpf */
  cg_target t[3];
  const char *cpu[3] = {NULL, "x86-64-v3", "x86-64-v4"}, *name[3] = {"host", "avx2", "avx512 (IR only)"};
  for (int j = 0; j < 3; j++)
    if (cgt_target(&t[j], cpu[j])) return 1;
  for (int j = 0; j < 3; j++) {
    int sc[2] = {0, 0}, pf[2] = {0, 0};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
      run_case(&cases[i], &t[j], name[j], j < 2 && !cgt_quick_skip(i, j, 2), sc, pf);
    CGT_CHECK(sc[0] > 0 && sc[1] == 0, "%s: llvm.masked.scatter lines %d with the variants, %d without; want > 0, 0",
              name[j], sc[0], sc[1]);
    CGT_CHECK(pf[0] > 0 && pf[1] == 0, "%s: llvm.prefetch lines of the convs without an add %d with the variants, %d "
              "without; want > 0, 0", name[j], pf[0], pf[1]);
  }
  for (int j = 0; j < 3; j++) cg_target_dispose(&t[j]);
  return cgt_done("test_codegen_flat_tail");
}
