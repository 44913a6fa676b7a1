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

#include "conv_case_check.h"

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

/* Compiles the case, runs it with 1 and 2 threads (both against the interpreter), and checks
 * the two runs are bitwise equal. */
static void check_case(const vc_case *k, const cg_target *t, const char *pfx) {
  char label[300];
  snprintf(label, sizeof label, "%s: %s (n%d %d->%d %dx%d k%d s%d p%d g%d)", pfx, k->what, k->n, k->cin, k->cout, k->h,
           k->w, k->k, k->s, k->pad, k->groups);
  int pt = k->pad < 0 ? 0 : k->pad, pb = k->pad < 0 ? -k->pad : k->pad;
  cgt_conv c = {"vc", "conv", NULL, NULL, k->n, k->cin, k->cout, k->h, k->w, k->k, k->k, k->s, {pt, pt, pb, pb}, k->groups};
  cgt_conv_epi(&c, k->epi);
  ir_graph *g = cgt_conv_graph(&c);
  cgt_random_params(g, 0.5f);
  cgt_ref r = cgt_ref_make(g);
  cgt_check_so(g, t, label, &r, TOL, 2, NULL);
  cgt_free_case(g, &r);
}

int main(void) {
  cgt_init_dir();
  cg_target avx2, sse;
  if (cgt_target(&avx2, "x86-64-v3") || cgt_target(&sse, "x86-64")) return 1;
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
  if (has_v4 && !cgt_target(&v4, "x86-64-v4")) {
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
  return cgt_done("test_codegen_vc");
}
