/* test_codegen_train_phase.c — compiled training's strided grad_input through the packed
 * inference microkernels (codegen/gen_train_pconv.c, kind conv2d_grad_input_ph_pk...): one
 * stride-1 conv per output phase of dx with its sub-kernel, its rows copied to the phase's
 * sub-grid; 1x1 unpadded strided convs as one GEMM over the subsampled grid whose items write
 * whole dx rows (zeros between).  3x3 stride 2 pad 1 (ResNet), the 1x1 stride-2 downsample,
 * the 7x7 stride-2 stem, 2x2 stride 2, 3x3 stride 3 and [2, 3], dilation 2, asymmetric
 * padding, odd sizes (grids of unequal size, last rows/columns no tap reaches), channel
 * counts with tile remainders, pixel- and channel-vector tiles, batch 1 and 3.  Each model:
 * the .so must hold the phase kernel; momentum steps with 1 and 2 threads vs ir_train_step
 * (loss per step, every state tensor, 1e-4), 2 threads bitwise equal to 1, the eval program
 * vs the interpreter (train_case_check.h), and the compiled first-step gradient of every
 * weight vs central finite differences of the interpreter's loss (smooth models, no relu). */
#include "train_case_check.h"

static const char *a_yml = /* 3x3 stride 2 pad 1 on odd sizes, the 1x1 downsample, channel vectors */
    "name: ph_a\n"
    "input: {shape: [3, 15, 13], dtype: f32, classes: 4}\n"
    "layers:\n"
    "  - {name: c0, op: conv, filters: 20, kernel: 3, padding: 1}\n"
    "  - {name: s1, op: conv, filters: 36, kernel: 3, stride: 2, padding: 1}\n"
    "  - {name: s2, op: conv, filters: 40, kernel: 1, stride: 2, bias: false}\n"
    "  - {name: c3, op: conv, filters: 5, kernel: 3, padding: 1}\n"
    TCC_HEAD("4");
static const char *b_yml = /* stride 3 (1x1 views), 5x5 stride 2 (3x3 .. 2x2 views), stride [2, 3] */
    "name: ph_b\n"
    "input: {shape: [2, 24, 36], dtype: f32, classes: 3}\n"
    "layers:\n"
    "  - {name: c0, op: conv, filters: 8, kernel: 3, padding: 1}\n"
    "  - {name: s1, op: conv, filters: 7, kernel: 3, stride: 3}\n"
    "  - {name: c1, op: conv, filters: 9, kernel: 3, padding: 1}\n"
    "  - {name: s2, op: conv, filters: 6, kernel: 5, stride: 2, padding: 2}\n"
    "  - {name: s3, op: conv, filters: 11, kernel: 3, stride: [2, 3], padding: [1, 0, 1, 0]}\n"
    TCC_HEAD("3");
static const char *w_yml = /* wide rows: the 7x7 stride-2 stem (after a conv), a wide 1x1 downsample, 2x2 */
    "name: ph_w\n"
    "input: {shape: [3, 20, 70], dtype: f32, classes: 3}\n"
    "layers:\n"
    "  - {name: c0, op: conv, filters: 4, kernel: 3, padding: 1}\n"
    "  - {name: s1, op: conv, filters: 12, kernel: 7, stride: 2, padding: 3}\n"
    "  - {name: c2, op: conv, filters: 40, kernel: 1}\n"
    "  - {name: s3, op: conv, filters: 19, kernel: 1, stride: 2, bias: false}\n"
    "  - {name: s4, op: conv, filters: 16, kernel: 2, stride: 2}\n"
    TCC_HEAD("3");

static const char *p_yml = /* padding at the bottom/right only: 1x1 stride 2 and 3x3 stride 2 on odd maps */
    "name: ph_p\n"
    "input: {shape: [3, 15, 13], dtype: f32, classes: 3}\n"
    "layers:\n"
    "  - {name: c0, op: conv, filters: 20, kernel: 3, padding: 1}\n"
    "  - {name: q1, op: conv, filters: 24, kernel: 1, stride: 2, padding: [0, 0, 1, 1]}\n"
    "  - {name: q2, op: conv, filters: 16, kernel: 3, stride: 2, padding: [0, 0, 1, 1]}\n"
    TCC_HEAD("3");

static const char *const ph_kind[1] = {"conv2d_grad_input_ph_pk"};

int main(void) {
  cgt_init_dir();
  cgt_failures += has_kinds("ph_a", a_yml, ph_kind, 1);
  cgt_failures += has_kinds("ph_b", b_yml, ph_kind, 1);
  cgt_failures += has_kinds("ph_w", w_yml, ph_kind, 1);
  cgt_failures += run_ymls("ph_a", a_yml, 1, 3, 0);
  cgt_failures += run_yml("ph_b", b_yml, 3);
  cgt_failures += run_yml("ph_w", w_yml, 2);
  cgt_failures += fd_case("ph_a", a_yml, 3);
  cgt_failures += fd_case("ph_b", b_yml, 1);
  cgt_failures += run_ymls("ph_p", p_yml, 1, 2, 0);
  return cgt_done("test_codegen_train_phase");
}
