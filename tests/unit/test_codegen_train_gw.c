/* test_codegen_train_gw.c — compiled training's groups-1 conv2d_grad_weight as a GEMM over
 * pixel chunks with the im2col of x packed transposed (codegen/gen_train_pgw.c): 7x7 stride 2
 * padded on 3 channels (one channel per item, a 1-lane last vector), 3x3 stride 1 and 2 with
 * odd channel counts, flat and strided 1x1 convs, dilation 2, asymmetric padding, a 3x5 kernel,
 * chunks of whole rows with a shorter last chunk (23-wide rows), several input-channel blocks
 * with a narrower last one, output-channel blocks with a narrower last one (few input
 * channels), batch 1 and 3; the pack's plain-load blocks inside 40- and 20-wide rows at stride 1
 * and 2 beside its masked border blocks, a loop over groups of 8 channels with a remainder,
 * flat 1x1 chunks, the 12x1 and 6x2 tiles of narrow column remainders; a 4-lane (SSE) target.  Each model: its LLVM module must define a packed grad_weight kernel, then
 * momentum steps with 1 and 2 threads vs ir_train_step (loss per step, every state tensor,
 * 1e-4), 2 threads bitwise equal to 1, the eval program vs the interpreter
 * (train_case_check.h), and the compiled first-step gradient of every weight vs central finite
 * differences of the interpreter's loss (smooth models: no relu; under CNNC_TEST_QUICK=1, quick
 * mode, gw_a's only: the others run the same compile and interpreter code again). */
#include "train_case_check.h"

static const char *a_yml = /* 7x7 s2 stem on 3 channels, 3x3 on 23-wide rows, flat 1x1 */
    "name: gw_a\n"
    "input: {shape: [3, 25, 23], dtype: f32, classes: 3}\n"
    "layers:\n"
    "  - {name: c0, op: conv, filters: 10, kernel: 7, stride: 2, padding: 3}\n"
    "  - {name: c1, op: conv, filters: 13, kernel: 3, padding: 1}\n"
    "  - {name: c2, op: conv, filters: 30, kernel: 1, bias: false}\n"
    "  - {name: c3, op: conv, filters: 9, kernel: 3, stride: 2, padding: 1}\n"
    TCC_HEAD("3");
static const char *b_yml = /* many channels: input-channel blocks with a remainder, strided 1x1 */
    "name: gw_b\n"
    "input: {shape: [40, 6, 6], dtype: f32, classes: 3}\n"
    "layers:\n"
    "  - {name: c0, op: conv, filters: 70, kernel: 3, padding: 1}\n"
    "  - {name: c1, op: conv, filters: 300, kernel: 1}\n"
    "  - {name: c2, op: conv, filters: 33, kernel: 1, stride: 2, bias: false}\n"
    "  - {name: c3, op: conv, filters: 8, kernel: 3, padding: [0, 1, 2, 1]}\n"
    TCC_HEAD("3");
static const char *c_yml = /* dilation 2, 3x5, padded 1x1, output-channel blocks */
    "name: gw_c\n"
    "input: {shape: [5, 11, 16], dtype: f32, classes: 3}\n"
    "layers:\n"
    "  - {name: c0, op: conv, filters: 30, kernel: 1}\n"
    "  - {name: c1, op: conv, filters: 10, kernel: 5, dilation: 2, padding: 4}\n"
    "  - {name: c2, op: conv, filters: 11, kernel: [3, 5], padding: [1, 2]}\n"
    "  - {name: c3, op: conv, filters: 7, kernel: 1, padding: 1}\n"
    TCC_HEAD("3");

static const char *d_yml = /* the pack's paths: plain loads inside rows of 40 / 20 at stride 1 / 2,
                              * a group of 8 channels and a remainder, 12x1 and 6x2 tiles */
    "name: gw_d\n"
    "input: {shape: [11, 6, 40], dtype: f32, classes: 3}\n"
    "layers:\n"
    "  - {name: c0, op: conv, filters: 64, kernel: 3, padding: 1}\n"
    "  - {name: c1, op: conv, filters: 30, kernel: 1}\n"
    "  - {name: c2, op: conv, filters: 13, kernel: 3, stride: 2, padding: 1}\n"
    "  - {name: c3, op: conv, filters: 40, kernel: 1, bias: false}\n"
    TCC_HEAD("3");

static const char *e_yml = /* 4 lanes (SSE): the pack's transpose by rounds of perfect shuffles */
    "name: gw_e\n"
    "input: {shape: [11, 6, 20], dtype: f32, classes: 3}\n"
    "compile: {target_cpu: x86-64}\n"
    "layers:\n"
    "  - {name: c0, op: conv, filters: 16, kernel: 3, padding: 1}\n"
    "  - {name: c1, op: conv, filters: 9, kernel: 1}\n"
    "  - {name: c2, op: conv, filters: 13, kernel: 3, stride: 2, padding: 1}\n"
    TCC_HEAD("3");

/* Dumps yml's training module as LLVM IR and checks that a function of the packed
 * grad_weight kind is defined in it. */
static int has_pgw(const char *name, const char *yml) {
  char *text = tcc_module_ir(name, yml, 2), *at = text;
  int found = 0;
  while (at && !found && (at = strstr(at, "conv2d_grad_weight_pk_f32"))) {
    const char *line = at;
    while (line > text && line[-1] != '\n') line--;
    found = !strncmp(line, "define", 6), at++;
  }
  CGT_CHECK(found, "%s: no conv2d_grad_weight_pk_f32 kernel defined", name);
  free(text);
  return !found;
}

int main(void) {
  cgt_init_dir();
  cgt_failures += has_pgw("gw_a", a_yml);
  cgt_failures += has_pgw("gw_b", b_yml);
  cgt_failures += has_pgw("gw_c", c_yml);
  cgt_failures += has_pgw("gw_d", d_yml);
  cgt_failures += has_pgw("gw_e", e_yml);
  cgt_failures += run_yml("gw_a", a_yml, 3);
  cgt_failures += run_yml("gw_b", b_yml, 1);
  cgt_failures += run_yml("gw_c", c_yml, 3);
  cgt_failures += run_yml("gw_d", d_yml, 2);
  cgt_failures += run_yml("gw_e", e_yml, 2);
  cgt_failures += fd_case("gw_a", a_yml, 3);
  if (!cgt_quick()) { /* CNNC_TEST_QUICK (quick mode): gw_a's finite differences only */
    cgt_failures += fd_case("gw_c", c_yml, 1);
    cgt_failures += fd_case("gw_d", d_yml, 2);
  }
  return cgt_done("test_codegen_train_gw");
}
