/* test_codegen_train_flat.c — compiled training's packed conv routes of codegen/gen_train_pconv.c
 * that reuse the inference GEMM and row plans: flat 1x1 stride-1 convs on the inference
 * GEMM's pixel chunks (kind conv2d_train_pk_1x1 / conv2d_grad_input_pk_1x1: one long row of
 * the plane, the x chunk packed into a panel by the first tile that reads it), and 1x1
 * strided convs that inference runs on the subsampled plane (sub) on their own output rows
 * (kind conv2d_train_pk_1x1s_vc).  Chunks with a masked tail, several chunks per image, a
 * channel-tile remainder, 2-thread ranges starting inside an image (batch 3), a 1x1 stride-2
 * conv on odd sizes.  Each model: the .so must hold the kernels; with tune train_pconv_flat=0
 * / tune train_pconv_sub=0 the former routes (rows of a divisor of the plane / the direct
 * kernel); a 28x28 1x1 conv keeps the rows (PC_FLAT_MAX_PX); momentum steps with 1 and 2 threads vs ir_train_step (loss per step, every state
 * tensor, 1e-4), 2 threads bitwise equal to 1, the eval program vs the interpreter
 * (train_case_check.h), and the first-step gradient of every weight vs central finite
 * differences of the interpreter's loss (train_fd_check.h; no relu: smooth models). */
#include "train_case_check.h"

static const char *a_yml = /* 14x15 plane: chunks of 144 px (200 input channels), a masked tail; sub convs */
    "name: fl_a\n"
    "input: {shape: [3, 14, 15], dtype: f32, classes: 3}\n"
    "layers:\n"
    "  - {name: c0, op: conv, filters: 200, kernel: 3, padding: 1}\n"
    "  - {name: c1, op: conv, filters: 37, kernel: 1}\n"
    "  - {name: c2, op: conv, filters: 30, kernel: 1, bias: false}\n"
    "  - {name: s3, op: conv, filters: 16, kernel: 1, stride: 2}\n"
    "  - {name: s4, op: conv, filters: 20, kernel: 1, stride: 2, bias: false}\n"
    TCC_HEAD("3");
static const char *c_yml = /* a 28x28 plane: over PC_FLAT_MAX_PX, rows of a divisor of the plane */
    "name: fl_c\n"
    "input: {shape: [4, 28, 28], dtype: f32, classes: 3}\n"
    "layers:\n"
    "  - {name: c0, op: conv, filters: 16, kernel: 3, padding: 1}\n"
    "  - {name: c1, op: conv, filters: 24, kernel: 1}\n"
    TCC_HEAD("3");
static const char *b_yml = /* 16x16 plane (the largest that takes the chunks), 300 input channels: several chunks */
    "name: fl_b\n"
    "input: {shape: [4, 16, 16], dtype: f32, classes: 3}\n"
    "layers:\n"
    "  - {name: c0, op: conv, filters: 300, kernel: 3, padding: 1}\n"
    "  - {name: r0, op: relu}\n"
    "  - {name: c1, op: conv, filters: 50, kernel: 1}\n"
    "  - {name: r1, op: relu}\n"
    "  - {name: c2, op: conv, filters: 64, kernel: 1}\n"
    TCC_HEAD("3");

int main(void) {
  cgt_init_dir();
  const char *kx[] = {"conv2d_train_pk_f32", "conv2d_train_f32"};
  const char *ka[] = {"conv2d_train_pk_1x1_f32", "conv2d_grad_input_pk_1x1_f32", "conv2d_train_pk_1x1s_vc_f32"};
  cgt_failures += has_kinds("fl_a", a_yml, ka, 3);
  cgt_failures += has_kinds("fl_b", b_yml, ka, 2);
  cgt_failures += has_kinds("fl_c", c_yml, kx, 1);
  cgt_failures += lacks_kind("fl_c", c_yml, "_pk_1x1_");
  /* the A/B switches give the former routes back */
  ct_tune("train_pconv_flat=0,train_pconv_sub=0");
  cgt_failures += has_kinds("fl_a_off", a_yml, kx, 2);
  ct_tune("train_pconv_flat=1,train_pconv_sub=1");
  /* CNNC_TEST_QUICK (quick mode): batch 3 only, no finite differences (the same
   * compile and runtime code again; test_codegen_train_gw keeps one fd_case there) */
  if (!cgt_quick()) cgt_failures += run_yml("fl_a", a_yml, 1);
  cgt_failures += run_yml("fl_a", a_yml, 3);
  cgt_failures += run_yml("fl_b", b_yml, 3);
  if (!cgt_quick()) cgt_failures += fd_case("fl_a", a_yml, 2);
  return cgt_done("test_codegen_train_flat");
}
