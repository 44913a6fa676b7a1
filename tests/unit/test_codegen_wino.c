/* test_codegen_wino.c — the Winograd F(2x2,3x3) and F(4x4,3x3) routes (codegen/gen_conv_wino.c)
 * vs the reference interpreter, to the documented tolerances (docs/precision.md: 5e-5 (F2) and
 * TOL4 (F4) of the larger of |want| and the mean |want|): odd maps (tile remainders at the
 * right and bottom: F4 output sizes 5, 6, 7, 9, 11, 13), padding 1 and 0, channel counts not
 * multiples of 8 (remainder channel tiles), input-channel blocks (K-blocked panels), several
 * channel blocks and row groups, batch 1 and 3, bias only, BN folded, relu fused or not, a
 * residual add fused (masked residual loads at the border).  Each case: the kernel must be
 * the expected one (wino2 / wino4 by the map-size rule, or as forced with tune wino_f4=1 /
 * tune wino_f2=1; none with tune winograd=0), 1 and 2 threads bitwise equal, the direct
 * build's output within twice the tolerance, and for F4 cases the F2 build's output too.
 * Convs the route refuses (fewer than CG_WINO_MIN_C channels, stride 2) must compile to a
 * direct kernel and still match.  CNNC_TEST_QUICK=1 (quick mode): each case on one
 * of the two targets (round robin, test_codegen_harness.h cgt_quick_skip_home), the 16-lane
 * planner cases (v16) on x86-64-v4 where this CPU runs it (without AVX-512: every other case
 * on avx2, and every case compiled for x86-64-v4, as without quick mode). */
#include "test_codegen_harness.h"

#include "conv_case_check.h"

static const double TOL = 5e-5;  /* F(2x2,3x3) in fp32 vs the interpreter, docs/precision.md */
static const double TOL4 = 2e-4; /* F(4x4,3x3): up to 1.1e-4 measured (300 input channels; docs/precision.md) */
/* gen_conv_wino.c wino_tile on 8 lanes: F4 by default on maps of at least 2V = 16 4x4 tiles
 * (AVX2); on 16 lanes the tile of the lower cost estimate (wino_cost16): either is accepted */
#define F4_DEFAULT(ys) ((((ys)->dim[2] + 3) / 4) * (((ys)->dim[3] + 3) / 4) >= 16)
static int wide; /* the target has 16 f32 lanes (x86-64-v4 pass) */
/* cg_conv_wino_match: maps with fewer 2x2 output tiles than lanes keep the direct kernels */
#define ENOUGH_TILES(ys) ((((ys)->dim[2] + 1) / 2) * (((ys)->dim[3] + 1) / 2) >= (wide ? 16 : 8))

enum { RUN_DEFAULT, RUN_DIRECT, RUN_F2, RUN_F4 };

typedef struct wino_case {
  int n, cin, cout, h, w, s, pad; /* 3x3 convs */
  int epi;  /* 0 bias only, 1 bn + relu, 2 bn only, 3 bn + residual add + relu */
  int wino; /* 1: the route must take it */
  int f4;   /* 1: compiled with tune wino_f4=1 (and compared with the tune wino_f2=1 build) */
  const char *what;
  int v16;  /* 1: a 16-lane planner case (wino_plan16): CNNC_TEST_QUICK keeps it on x86-64-v4 */
} wino_case;

static const wino_case cases[] = {
    {1, 32, 32, 8, 8, 1, 1, 1, 1, 0, "8x8 padded, bn + relu"},
    {1, 37, 45, 13, 11, 1, 1, 0, 1, 0, "odd map 13x11, odd channels, bias only"},
    {3, 40, 33, 7, 7, 1, 1, 2, 1, 0, "7x7, batch 3, bn no relu, rem tile of 3"},
    {1, 33, 35, 9, 15, 1, 0, 1, 1, 0, "padding 0 (9x15 -> 7x13)"},
    {2, 64, 64, 56, 56, 1, 1, 1, 1, 0, "56x56 64->64 (ResNet layer1 shape), batch 2"},
    {1, 300, 40, 14, 14, 1, 1, 1, 1, 0, "K-blocked input (300 channels), 14x14"},
    {1, 48, 260, 7, 7, 1, 1, 1, 1, 0, "several channel blocks (260 out, rem tile)"},
    {3, 35, 50, 29, 5, 1, 1, 2, 1, 0, "narrow 29x5 (row groups of several tile rows), batch 3"},
    {1, 32, 32, 3, 17, 1, 1, 1, 1, 0, "3x17 map (the last 2x2 tile row half used)"},
    {1, 32, 32, 3, 3, 1, 1, 1, 0, 0, "3x3 map: refused (4 tiles, fewer than the lanes)"},
    {1, 32, 32, 14, 14, 1, 2, 1, 0, 0, "padding 2: refused"},
    {1, 36, 40, 14, 14, 1, 1, 3, 1, 0, "residual add fused + relu"},
    {3, 33, 37, 13, 9, 1, 1, 3, 1, 0, "residual add fused, odd map 13x9, batch 3"},
    {1, 16, 64, 14, 14, 1, 1, 1, 0, 0, "16 input channels: refused"},
    {1, 64, 64, 14, 14, 2, 1, 1, 0, 0, "stride 2: refused"},
    /* F(4x4): output sizes not multiples of 4 (5, 6, 7, 9, 11, 13), pads 1 and 0 */
    {1, 32, 32, 5, 5, 1, 1, 1, 1, 1, "F4 5x5 (one 4x4 tile + remainder), bn + relu"},
    {1, 37, 45, 13, 11, 1, 1, 0, 1, 1, "F4 odd map 13x11, odd channels, bias only"},
    {3, 40, 33, 7, 7, 1, 1, 2, 1, 1, "F4 7x7, batch 3, bn no relu"},
    {1, 33, 35, 11, 15, 1, 0, 1, 1, 1, "F4 padding 0 (11x15 -> 9x13)"},
    {1, 32, 40, 10, 8, 1, 0, 1, 1, 1, "F4 padding 0 (10x8 -> 8x6)"},
    {1, 300, 40, 14, 14, 1, 1, 1, 1, 1, "F4 K-blocked input (300 channels), 14x14"},
    {1, 48, 260, 9, 9, 1, 1, 1, 1, 1, "F4 several channel blocks (260 out), 9x9"},
    {3, 35, 50, 29, 5, 1, 1, 2, 1, 1, "F4 narrow 29x5 (row groups), batch 3"},
    {1, 36, 40, 14, 14, 1, 1, 3, 1, 1, "F4 residual add fused + relu"},
    {3, 33, 37, 13, 9, 1, 1, 3, 1, 1, "F4 residual add fused, odd map 13x9, batch 3"},
    {1, 64, 72, 30, 29, 1, 1, 3, 1, 0, "default F4 (>= 16 4x4 tiles): 30x29, residual + relu"},
    {1, 40, 48, 13, 13, 1, 1, 1, 1, 0, "default F4: 13x13 (16 4x4 tiles)"},
    {1, 40, 48, 12, 12, 1, 1, 1, 1, 0, "default F2: 12x12 (9 4x4 tiles)"},
    /* 16 lanes (wino_plan16): several whole images per item, the last group short (batch 5, 7),
     * 1 vector x 24 channels and 2 x 12 register tiles, remainder channel tiles */
    {5, 64, 100, 7, 7, 1, 1, 3, 1, 0, "batch 5 7x7 (images per item), residual + relu", 1},
    {7, 96, 70, 7, 7, 1, 1, 1, 1, 1, "F4 batch 7 7x7 (images per item)", 1},
    {5, 128, 128, 14, 14, 1, 1, 1, 1, 1, "F4 batch 5 14x14 (16 tiles an image)", 1},
    {3, 256, 200, 7, 7, 1, 1, 2, 1, 0, "batch 3 7x7 256->200 (U over 512 KB)", 1},
    /* one tile row over 2 WINO_TB_MAX tiles (16 lanes: wino_plan16 must still plan one row) */
    {1, 32, 32, 6, 300, 1, 1, 1, 1, 0, "wide 6x300 (150 2x2 tiles a row)", 1},
    {1, 32, 40, 4, 600, 1, 1, 1, 1, 1, "F4 wide 4x600 (150 4x4 tiles a row)", 1},
};

/* The case's graph: a 3x3 conv [+ bias | + BN] [+ a 1x1 conv c2 of x added] [+ relu]; epi 0 bias
 * only, 1 BN + relu, 2 BN only, 3 BN + residual add + relu (c2 computed before "conv", which
 * takes the add; the table gives its residual cases padding 1, c2's output shape). */
static ir_graph *case_graph(const wino_case *k) {
  cgt_conv c = {"wino", "conv", k->epi ? "bn" : NULL, k->epi == 3 ? "c2" : NULL, k->n, k->cin, k->cout, k->h, k->w, 3, 3, k->s,
                {k->pad, k->pad, k->pad, k->pad}, 1, k->epi == 0, k->epi == 1 || k->epi == 3};
  return cgt_conv_graph(&c);
}

/* Compiles g (Winograd on or off), checks which kernel the "conv" layer got, runs it with 1
 * and 2 threads against the interpreter (bitwise equal to each other); returns the 1-thread
 * output (malloc'd) or NULL. */
static float *run_case(const wino_case *k, ir_graph *g, const cg_target *t, const cgt_ref *r, int mode) {
  static const char *tag[] = {"", " [winograd=0]", " [wino_f2=1]", " [wino_f4=1]"};
  char label[300];
  snprintf(label, sizeof label, "%s%s (n%d %d->%d %dx%d s%d p%d epi%d)", k->what, tag[mode], k->n, k->cin, k->cout, k->h, k->w,
           k->s, k->pad, k->epi);
  const ir_shape *ys = &g->values[g->outputs[0]].shape;
  int want = !k->wino || !ENOUGH_TILES(ys) || mode == RUN_DIRECT               ? 0
             : mode == RUN_F2                                                    ? 2
             : mode == RUN_F4                                                    ? 4
             : wide ? -1 : F4_DEFAULT(ys) ? 4 : 2; /* -1: wino2 or wino4 */
  double tol = want == 2 ? TOL : TOL4;
  if (mode == RUN_DIRECT) ct_tune("winograd=0");
  if (mode == RUN_F2) ct_tune("wino_f2=1");
  if (mode == RUN_F4) ct_tune("wino_f4=1");
  cgt_so so;
  int rc = cgt_so_open(&so, g, t, label);
  ct_tune("winograd=1,wino_f2=0,wino_f4=0");
  if (rc) return cgt_failures++, NULL;
  const cnnc_abi_shard *s = &so.m->shards[0];
  int found = 0;
  for (int i = 0; i < s->n_ops; i++)
    if (!strcmp(s->op_names[i], "conv")) {
      int is_wino = strstr(s->kernel_names[i], "_wino2_") ? 2 : strstr(s->kernel_names[i], "_wino4_") ? 4 : 0;
      found = 1;
      CGT_CHECK(want < 0 ? is_wino != 0 : is_wino == want, "%s: kernel %s (expected %s)", label, s->kernel_names[i],
                want == 4 ? "wino4" : want == 2 ? "wino2" : want < 0 ? "wino" : "direct");
      if (k->epi == 3 && is_wino) CGT_CHECK(strstr(s->kernel_names[i], "_bn_add_relu_") != NULL, "%s: add not fused: %s", label, s->kernel_names[i]);
    }
  CGT_CHECK(found, "%s: no op named conv", label);
  float *y1 = malloc((size_t)r->ny * sizeof *y1);
  cgt_so_runs(&so, r, tol, 2, 0, label, y1);
  cgt_so_close(&so);
  return y1;
}

/* Largest |a - b| / max(|b|, mean |b|) over n, as cgt_compare measures it. */
static double rel_diff(const float *a, const float *b, int64_t n) {
  double mean = 0, worst = 0;
  for (int64_t i = 0; i < n; i++) mean += fabs(b[i]);
  mean /= (double)n;
  for (int64_t i = 0; i < n; i++) {
    double s = fabs(b[i]) > mean ? fabs(b[i]) : mean, e = fabs((double)a[i] - b[i]) / (s + 1e-30);
    if (e > worst) worst = e;
  }
  return worst;
}

static void check_case(const wino_case *k, const cg_target *t) {
  ir_graph *g = case_graph(k);
  cgt_random_params(g, 0.5f);
  cgt_ref r = cgt_ref_make(g);
  int64_t ny = r.ny;
  const ir_shape *ys = &g->values[g->outputs[0]].shape;
  int f4 = k->wino && ENOUGH_TILES(ys) && (k->f4 || wide || F4_DEFAULT(ys)); /* wide: F2 or F4, F4's tolerance */
  double tol = f4 ? TOL4 : TOL;
  float *yw = run_case(k, g, t, &r, k->f4 ? RUN_F4 : RUN_DEFAULT), *yd = run_case(k, g, t, &r, RUN_DIRECT);
  float *y2 = f4 ? run_case(k, g, t, &r, RUN_F2) : NULL;
  if (yw && yd) {
    double e = rel_diff(yw, yd, ny), ei = rel_diff(yw, r.want, ny);
    fprintf(stderr, "  %-62s %s vs direct %.2g, vs interpreter %.2g", k->what, f4 ? (wide && !k->f4 ? "wino" : "wino4") : "wino2", e, ei);
    CGT_CHECK(e <= 2 * tol, "%s: wino vs direct build: %.3g", k->what, e);
    if (y2) {
      double e2 = rel_diff(yw, y2, ny);
      fprintf(stderr, ", vs F2 build %.2g", e2);
      CGT_CHECK(e2 <= TOL + tol, "%s: F4 vs F2 build: %.3g", k->what, e2);
    }
    fprintf(stderr, "\n");
  }
  free(yw);
  free(yd);
  free(y2);
  cgt_free_case(g, &r);
}

int main(void) {
  cgt_init_dir();
  cg_target avx2;
  if (cgt_target(&avx2, "x86-64-v3")) return 1;
  int has_v4 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
               __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
  /* CNNC_TEST_QUICK: case i on avx2 or x86-64-v4 (round robin; v16 cases on x86-64-v4 where it runs) */
#define HOME(k) (has_v4 && (k)->v16 ? 1 : -1)
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
    if (!cgt_quick_skip_home(i, 0, 2, HOME(&cases[i]))) check_case(&cases[i], &avx2);
  cg_target_dispose(&avx2);
  /* 16 lanes (wino_plan16) where this CPU can run x86-64-v4 code */
  cg_target v4;
  if (has_v4 && !cgt_target(&v4, "x86-64-v4")) {
    wide = v4.vec_f32 >= 16;
    fprintf(stderr, "x86-64-v4 (%d lanes):\n", v4.vec_f32);
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
      if (!cgt_quick_skip_home(i, 1, 2, HOME(&cases[i]))) check_case(&cases[i], &v4);
    cg_target_dispose(&v4);
  } else if (!cgt_target(&v4, "x86-64-v4")) {
    /* no AVX-512 here: the 16-lane planning (wino_plan16) still compiles every case to IR */
    wide = v4.vec_f32 >= 16;
    fprintf(stderr, "x86-64-v4 (%d lanes): compiled only (no AVX-512 on this CPU)\n", v4.vec_f32);
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
      ir_graph *g = case_graph(&cases[i]);
      char path[512];
      FILE *f = cgt_llvm_of(g, &v4, "wino_v4", path, sizeof path);
      CGT_CHECK(f != NULL, "x86-64-v4 %s: does not compile", cases[i].what);
      if (f) fclose(f), unlink(path);
      ir_graph_free(g);
    }
    cg_target_dispose(&v4);
  } else fprintf(stderr, "x86-64-v4: not run (no x86-64-v4 target in this LLVM)\n");
  static const char *const pass_name[] = {"avx2", "x86-64-v4"};
  int nv16 = 0;
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) nv16 += cases[i].v16;
  int total = cgt_quick_report("test_codegen_wino", pass_name, 2);
  if (cgt_quick() && has_v4) /* every case once, the v16 ones on x86-64-v4 */
    CGT_CHECK(total == (int)(sizeof cases / sizeof *cases) && cgt_quick_kept[1] == nv16 && cgt_quick_kept[0] == 0,
              "quick mode: %d of %d cases run, %d of the %d v16 cases on x86-64-v4", total,
              (int)(sizeof cases / sizeof *cases), cgt_quick_kept[1], nv16);
  return cgt_done("test_codegen_wino");
}
