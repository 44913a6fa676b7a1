/* test_codegen_flat_wpf.c — the flat (1x1 stride-1) convs' weight prefetch at batch 1
 * (gen_conv.c flat_w_prefetch: every K step of a packed chunk's microkernel prefetches the
 * same K step of the next channel tile's packed weights).  Convs without a fused add and with
 * inputs under the next-chunk prefetch's floor (512 KB at batch 1: the cases read 200 and
 * 345 KB, and the "no other prefetch" checks depend on it), so that in their kernels the weight
 * prefetch is the only llvm.prefetch: a leftover channel tile, a short last chunk and a tail,
 * batch 1 (the prefetch) and batch 2 (none), built with the prefetch (the default) and with
 * tune flat_w_pf=0, for the host and x86-64-v3: every output matches the interpreter, 1, 2
 * and 3 threads are bitwise equal, the two builds are bitwise equal (a prefetch changes no
 * value), and the IR has llvm.prefetch in the flat kernels exactly for batch 1 without the
 * switch.  x86-64-v4 (16 lanes) is checked by its IR on any host. */
#include "test_codegen_harness.h"

#include "conv_case_check.h"

typedef struct wpf_case {
  int n, cin, cout, h, w;
} wpf_case;

static const wpf_case cases[] = {
    {1, 256, 64, 14, 14},  /* ResNet-50 layer3's 196-pixel plane: chunks, a tail */
    {1, 96, 29, 9, 13},    /* a leftover channel tile */
    {1, 600, 40, 12, 12},  /* K = 600: short chunks */
    {2, 130, 40, 7, 9},    /* batch 2: no weight prefetch */
};

static void set_off(int off) {
  ct_tune(off ? "flat_w_pf=0" : "flat_w_pf=1");
}

/* Lines of g's LLVM IR for t calling llvm.prefetch in pixel-vector flat conv kernels; -1
 * when it does not compile. */
static int ir_prefetches(ir_graph *g, const cg_target *t, int off) {
  cgt_ir ir;
  set_off(off);
  int pf = cgt_ir_open(&ir, g, t, "wpf"), flat = 0;
  ct_tune("flat_w_pf=1");
  while (cgt_ir_next(&ir)) {
    if (!strncmp(ir.line, "define ", 7)) flat = strstr(ir.line, "conv2d_1x1_") && !strstr(ir.line, "_vc_");
    pf += flat && strstr(ir.line, "call void @llvm.prefetch") != NULL;
  }
  return pf;
}

static void run_case(const wpf_case *k, const cg_target *t, const char *pfx, int run) {
  char label[160];
  snprintf(label, sizeof label, "%s n%d %d->%d %dx%d", pfx, k->n, k->cin, k->cout, k->h, k->w);
  ir_graph *g = cgt_flat_graph(k->n, k->cin, k->cout, k->h, k->w, 1, 0, 1);
  cgt_random_params(g, 0.5f);
  int on = ir_prefetches(g, t, 0), off = ir_prefetches(g, t, 1);
  CGT_CHECK(on >= 0 && off >= 0, "%s: no LLVM IR", label);
  CGT_CHECK(k->n == 1 ? on > 0 : on == 0, "%s: %d llvm.prefetch lines in the flat kernels, want %s", label, on,
            k->n == 1 ? "> 0" : "0");
  CGT_CHECK(off == 0, "%s: %d llvm.prefetch lines with flat_w_pf=0, want 0", label, off);
  static const char *const tag[2] = {"weight prefetch", "flat_w_pf=0"}, *const tune[2] = {"flat_w_pf=1", "flat_w_pf=0"};
  if (run) flat_ab(g, t, label, tag, tune, "flat_w_pf=1");
  ir_graph_free(g);
}

int main(void) {
  cgt_init_dir();
  cg_target t[3];
  const char *cpu[3] = {NULL, "x86-64-v3", "x86-64-v4"}, *name[3] = {"host", "avx2", "avx512 (IR only)"};
  for (int j = 0; j < 3; j++)
    if (cgt_target(&t[j], cpu[j])) return 1;
  for (int j = 0; j < 3; j++)
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) run_case(&cases[i], &t[j], name[j], j < 2 && !cgt_quick_skip(i, j, 2));
  for (int j = 0; j < 3; j++) cg_target_dispose(&t[j]);
  return cgt_done("test_codegen_flat_wpf");
}
