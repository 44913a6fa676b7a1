/* test_codegen_split.c — the thread partition of flat (1x1 stride-1 GEMM) convs: when the
 * batch does not divide among the threads, the threads split the channel tiles of every
 * pixel chunk (gen_conv.c, conv_flat_split_item) instead of the chunks.  For batches 1, 2, 3
 * and odd shapes (tile remainders, a short last chunk, several chunks, a fused residual add)
 * every output must match the interpreter and be bitwise equal for 1, 2, 3 and 4 threads; each
 * case checks that its kernel is the flat conv (conv2d_1x1) it means to test, and the small-K
 * cases the register tile conv_choose_tile picks for them on AVX2. */
#include "test_codegen_harness.h"

#include "conv_case_check.h"

typedef struct split_case {
  int n, cin, cout, h, w, resid; /* resid: bn + residual add of a 1x1 branch + relu */
  const char *tile;              /* when set, the AVX2 kernel's register tile (conv_choose_tile) */
} split_case;

static const split_case cases[] = {
    {1, 5, 7, 7, 9, 0},      /* 63 px, 7 channels: a remainder tile */
    {1, 64, 45, 13, 11, 0},  /* one chunk, many tiles, odd tile count */
    {1, 300, 37, 15, 15, 0}, /* 225 px, chunks of ~100 px: a short last chunk */
    {3, 33, 50, 9, 9, 1},    /* batch 3 on 2 threads: split tiles across images */
    {2, 40, 21, 9, 9, 1},    /* batch 2: whole images per thread (the unsplit order) */
    {1, 256, 64, 14, 14, 1}, /* ResNet-50 layer3-like plane, 2 chunks of 128 + 68 px */
    /* small-K expand convs (EfficientNet-B0's 16/24 -> 96/144): 6x16, not the 3x32 tile
     * whose 12 accumulators + 4 pixel vectors + a broadcast need 17 ymm registers */
    {1, 16, 96, 32, 32, 0, "6x16"},
    {2, 24, 144, 12, 12, 1, "6x16"}, /* 144 px: 6x16 and 4x24 both whole; fewer pixel loads wins */
    {3, 16, 100, 9, 13, 1, NULL},    /* batch 3, odd map, a 4-channel remainder tile */
    {2, 7, 30, 5, 3, 0, NULL},       /* 15 px: one masked tile per chunk */
};

static void run_case(const split_case *k, const cg_target *t, const char *pfx) {
  char label[160];
  snprintf(label, sizeof label, "%s n%d %d->%d %dx%d%s", pfx, k->n, k->cin, k->cout, k->h, k->w, k->resid ? " resid" : "");
  /* x -> conv a (the tested one); with resid, relu(bn(conv a(x)) + conv b(x)) */
  ir_graph *g = cgt_flat_graph(k->n, k->cin, k->cout, k->h, k->w, k->resid, k->resid, k->resid);
  cgt_random_params(g, 0.5f);
  char want[32];
  snprintf(want, sizeof want, "_f32_%s__avx2", k->tile ? k->tile : "");
  cgt_ref r = cgt_ref_make(g);
  flat_build_run(g, t, label, NULL, 0, k->tile && strstr(pfx, "avx2") ? want : NULL, 4, 0, &r, NULL);
  cgt_free_case(g, &r);
}

static void run_one(size_t i, const cg_target *t, const char *name) { run_case(&cases[i], t, name); }

int main(void) { return cgt_sweep_main("test_codegen_split", sizeof cases / sizeof *cases, run_one); }
