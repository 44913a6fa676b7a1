/* test_codegen_train_wino.c — compiled training's Winograd F(2x2,3x3) route for 3x3 stride-1
 * convs (codegen/gen_train_wino.c): forward and stride-1 grad_input with the weight transform
 * at run time.  Models: odd maps (13x11, 11x9, 8x8: tile remainders at the right and bottom),
 * padding 1 and 0 (grad_input of a pad-0 conv: a pad-2 view), channel counts not multiples of
 * 8 (remainder channel tiles, several channel blocks), a K-blocked input (more channels than
 * one panel holds), bias and conv + batchnorm + relu, batch 1 and 3.  Each model: the .so
 * must name the wino2 kernels (and not with tune train_winograd=0, nor convs with fewer
 * than 32 channels), then momentum steps with 1 and 2 threads vs ir_train_step (loss per
 * step, every state tensor incl. the momentum buffers = the gradients of step 1, 1e-4 as the
 * other training tests), 2 threads bitwise equal to 1, and the eval program vs the
 * interpreter (train_case_check.h). */
#include "train_case_check.h"

static const char *a_yml = /* odd maps, pads 1 and 0, channels not multiples of 8, bias, K blocks and channel blocks */
    "name: tw_a\n"
    "input: {shape: [33, 13, 11], dtype: f32, classes: 3}\n"
    "layers:\n"
    "  - {name: c0, op: conv, filters: 45, kernel: 3, padding: 1}\n"
    "  - {name: r0, op: relu}\n"
    "  - {name: c1, op: conv, filters: 130, kernel: 3, padding: 0}\n"
    "  - {name: r1, op: relu}\n"
    "  - {name: c2, op: conv, filters: 34, kernel: 3, padding: 1}\n"
    TCC_HEAD("3");
static const char *b_yml = /* conv + batchnorm + relu (ResNet style) */
    "name: tw_b\n"
    "input: {shape: [35, 8, 8], dtype: f32, classes: 3}\n"
    "layers:\n"
    "  - {name: c0, op: conv, filters: 40, kernel: 3, padding: 1, bias: false}\n"
    "  - {name: b0, op: batchnorm}\n"
    "  - {name: r0, op: relu}\n"
    "  - {name: c1, op: conv, filters: 64, kernel: 3, padding: 1, bias: false}\n"
    "  - {name: b1, op: batchnorm}\n"
    "  - {name: r1, op: relu}\n"
    "  - {name: c2, op: conv, filters: 36, kernel: 3, padding: 1, bias: false}\n"
    "  - {name: b2, op: batchnorm}\n"
    "  - {name: r2, op: relu}\n"
    TCC_HEAD("3");
static const char *c_yml = /* below 32 channels: no Winograd */
    "name: tw_c\n"
    "input: {shape: [16, 12, 12], dtype: f32, classes: 3}\n"
    "layers:\n"
    "  - {name: c0, op: conv, filters: 24, kernel: 3, padding: 1}\n"
    "  - {name: r0, op: relu}\n"
    "  - {name: c1, op: conv, filters: 20, kernel: 3, padding: 1}\n"
    TCC_HEAD("3");

int main(void) {
  cgt_init_dir();
  const char *kw[] = {"conv2d_train_wino2_f32", "conv2d_grad_input_wino2_f32"};
  cgt_failures += has_kinds("tw_a", a_yml, kw, 2);
  cgt_failures += has_kinds("tw_b", b_yml, kw, 2);
  cgt_failures += lacks_kind("tw_c", c_yml, "wino2");
  ct_tune("train_winograd=0");
  cgt_failures += lacks_kind("tw_a_off", a_yml, "wino2");
  ct_tune("train_winograd=1");
  cgt_failures += run_ymls("tw_a", a_yml, 1, 3, 0);
  cgt_failures += run_yml("tw_b", b_yml, 3);
  return cgt_done("test_codegen_train_wino");
}
