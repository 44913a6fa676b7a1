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

/* In --emit llvm of g for t: *se = kernels named conv2d_1x1..._se_..._vc, *planes = of those,
 * the ones whose body has the se_planes stack buffer; -1 when g does not compile. */
static int se_kernels(ir_graph *g, const cg_target *t, int *se, int *planes) {
  cgt_ir ir;
  int rc = cgt_ir_open(&ir, g, t, "se_big"), in_se = 0;
  *se = *planes = 0;
  while (cgt_ir_next(&ir)) {
    const char *line = ir.line;
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
  return rc;
}

static void run_cases(const cg_target *t, const char *pfx, int pass) {
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    const big_case *k = &cases[i];
    if (t->vec_f32 < 8 && !k->sse) continue;
    ir_graph *g = dw_se_graph("se_big", k->n, k->c, k->h, k->w, 3, 1, k->sq, k->cout, 0);
    cgt_random_params(g, 0.5f);
    char label[200];
    snprintf(label, sizeof label, "%s se n%d c%d %dx%d sq%d cout%d (%d B of planes)", pfx, k->n, k->c, k->h, k->w, k->sq,
             k->cout, k->c * k->h * k->w * 4);
    int se = -1, planes = -1;
    CGT_CHECK(se_kernels(g, t, &se, &planes) == 0, "%s: does not compile", label);
    CGT_CHECK(se == 1, "%s: %d channel-vector conv2d_1x1 _se_ kernels, want 1", label, se);
    CGT_CHECK(planes == k->buffered, "%s: se_planes buffer %s, want %s", label, planes ? "present" : "absent",
              k->buffered ? "present" : "absent (scaled where loaded)");
    dw_se_check(g, t, label, 0);
    fprintf(stderr, "%s: se kernel %d, se_planes %d\n", label, se, planes);
    ir_graph_free(g);
  }
}

int main(void) { return dw_main("test_codegen_se_big", run_cases, 0); }
