/* test_codegen_train_group.c — compiled training of grouped and depthwise convs
 * (codegen/gen_train_gconv.c, docs/training.md) against the reference interpreter:
 *  1. kernel cases: small models whose grouped / depthwise convs reach every path of the
 *     generator (stride 1 and 2, 3x3 and 5x5, dilation 2, asymmetric padding, 1x3 kernels,
 *     channel multiplier 2, channel counts that are no multiple of 8, rows of 3..37 pixels:
 *     masked and overlapping vectors, several vector groups), each conv placed after another
 *     one so grad_input runs too.  Momentum for KSTEPS steps with 1 and 2 threads: the loss
 *     of every step and every state tensor vs ir_train_step (1e-4 relative), and the 2-thread
 *     state bitwise equal to the 1-thread state; then cnnrt_evaluate (the eval program) vs
 *     the interpreter in inference mode.
 *  2. tests/train/gconv_mix.yml (an MBConv block with squeeze-excitation and a ResNeXt-like
 *     grouped block, batch norm in training mode, dropout): the same compiled-vs-interpreter check, and
 *     the interpreter's gradient of every trainable param against central finite differences
 *     of the loss. */
#include "train_case_check.h"

static const char *dw_yml = /* depthwise paths (groups == C == K) */
    "name: gk_dw\n"
    "input: {shape: [3, 9, 13], dtype: f32, classes: 4}\n"
    "layers:\n"
    "  - {name: c0, op: conv, filters: 12, kernel: 3, padding: 1}\n"
    "  - {name: r0, op: relu}\n"
    "  - {name: dw1, op: conv, filters: 12, kernel: 3, padding: 1, groups: 12}\n"
    "  - {name: a1, op: swish}\n"
    "  - {name: dw2, op: conv, filters: 12, kernel: 5, stride: 2, padding: 2, groups: 12, bias: false}\n"
    "  - {name: a2, op: swish}\n"
    "  - {name: dw3, op: conv, filters: 12, kernel: 3, stride: 2, padding: [0, 1, 1, 0], groups: 12}\n"
    "  - {name: a3, op: sigmoid}\n"
    "  - {name: dw4, op: conv, filters: 12, kernel: 3, dilation: 2, padding: 2, groups: 12}\n"
    "  - {name: f, op: flatten}\n"
    "  - {name: d, op: dense, units: 4}\n";
static const char *grp_yml = /* grouped paths, multiplier 2, wide rows */
    "name: gk_grp\n"
    "input: {shape: [4, 5, 37], dtype: u8, classes: 3}\n"
    "layers:\n"
    "  - {name: c0, op: conv, filters: 8, kernel: 3, padding: 1}\n"
    "  - {name: r0, op: relu}\n"
    "  - {name: g1, op: conv, filters: 12, kernel: 3, padding: 1, groups: 4}\n"
    "  - {name: r1, op: relu}\n"
    "  - {name: g2, op: conv, filters: 18, kernel: 3, stride: 2, padding: 1, groups: 6, bias: false}\n"
    "  - {name: r2, op: relu}\n"
    "  - {name: m2, op: conv, filters: 36, kernel: [1, 3], padding: [0, 1], groups: 18}\n"
    "  - {name: r3, op: relu}\n"
    "  - {name: g3, op: conv, filters: 9, kernel: 3, padding: [1, 2], dilation: [1, 2], groups: 9}\n"
    TCC_HEAD("3");
static const char *wide_yml = /* ResNeXt-like 32 groups of 4, 23-pixel rows */
    "name: gk_wide\n"
    "input: {shape: [2, 6, 23], dtype: f32, classes: 3}\n"
    "layers:\n"
    "  - {name: c0, op: conv, filters: 128, kernel: 1}\n"
    "  - {name: g1, op: conv, filters: 128, kernel: 3, padding: 1, groups: 32, bias: false}\n"
    "  - {name: r1, op: relu}\n"
    "  - {name: g2, op: conv, filters: 64, kernel: 3, stride: 2, padding: 1, groups: 32}\n"
    TCC_HEAD("3");

/* ---- gradients of gconv_mix vs central finite differences (interpreter) ------------------ */
#define FD_SAMPLES 6
#define FD_H 1e-2f

static int fd_check(const char *path) {
  fe_options o;
  ir_graph *g = load_case(path, 3, &o);
  ir_diag d = {0};
  if (!g || pass_autodiff(g, 1.0f, &d) < 0) {
    ir_diag_print(&d, stderr);
    return 1;
  }
  const ir_value *iv = &g->values[g->input];
  int64_t nx = ir_shape_numel(&iv->shape);
  float *x = malloc((size_t)nx * sizeof *x), labels[3] = {1, 4, 2};
  for (int64_t i = 0; i < nx; i++) x[i] = cgt_uniform(-1.0f, 1.0f);
  float **vals = ir_interp(g, x, labels);
  int bad = 0, checked = 0, grouped = 0;
  for (int p = 0; p < g->n_values; p++) {
    ir_value *pv = &g->values[p];
    if (pv->kind != IR_VAL_PARAM || !pv->trainable) continue;
    char gname[300];
    snprintf(gname, sizeof gname, "grad/%s", pv->name);
    int gv = ir_find_value(g, gname);
    CGT_CHECK(gv >= 0, "gconv_mix: no gradient for %s", pv->name);
    if (gv < 0) {
      bad++;
      continue;
    }
    grouped += !strcmp(pv->name, "dw/weight") || !strcmp(pv->name, "g_conv/weight");
    int64_t n = ir_shape_numel(&pv->shape);
    for (int s = 0; s < FD_SAMPLES && s < n; s++) {
      int64_t i = s == 0 ? 0 : s == 1 ? n - 1 : (int64_t)cgt_int(0, (int)(n - 1));
      float keep = pv->data[i];
      pv->data[i] = keep + FD_H;
      double lp = interp_loss(g, x, labels);
      pv->data[i] = keep - FD_H;
      double lm = interp_loss(g, x, labels);
      pv->data[i] = keep;
      double fd = (lp - lm) / (2.0 * FD_H), an = vals[gv][i];
      checked++;
      if (fabs(an - fd) > 3e-3 * (1.0 + fabs(fd))) {
        fprintf(stderr, "gconv_mix: d loss / d %s[%lld]: analytic %.6g, finite differences %.6g\n", pv->name, (long long)i, an, fd);
        bad++;
      }
    }
  }
  CGT_CHECK(grouped == 2 && checked > 40, "gconv_mix: %d grouped weights, %d elements checked", grouped, checked);
  bad += !(grouped == 2 && checked > 40);
  ir_interp_free(g, vals);
  free(x);
  ir_graph_free(g);
  fprintf(stderr, "%s gconv_mix finite differences (%d elements)\n", bad ? "FAIL" : "ok", checked);
  return bad;
}

int main(void) {
  cgt_init_dir();
  char mix[512];
  snprintf(mix, sizeof mix, "%s/tests/train/gconv_mix.yml", CNNC_TEST_SRC);
  cgt_failures += run_ymls("gk_dw", dw_yml, 1, 3, 0);
  cgt_failures += run_yml("gk_grp", grp_yml, 2);
  cgt_failures += run_yml("gk_wide", wide_yml, 2);
  cgt_failures += run_case("gconv_mix", mix, 4);
  cgt_failures += fd_check(mix);
  return cgt_done("test_codegen_train_group");
}
