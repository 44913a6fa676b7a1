/* test_codegen_train_packed.c — compiled training's groups-1 conv forward and stride-1
 * grad_input through the inference microkernels with per-thread packed weights
 * (codegen/gen_train_pconv.c): pixel-vector rows (31 and 16 wide: full enough vectors of 8 and
 * 16 lanes for the pixel route, gen_conv_vc.c cg_conv_vc_choose), several blocks of channel
 * tiles with a remainder tile (a 2-thread range starting inside a block), flat 1x1 convs (the
 * GEMM's pixel chunks; test_codegen_train_flat.c has more), channel vectors on 14- and 7-wide
 * maps, stride 2 (forward; its grad_input keeps the phases), a 1x1 stride-2 downsample (a sub
 * conv of inference, on its own rows here), a K-blocked 1x1 row (900 input channels on 7x7),
 * dilation 2, asymmetric padding, 3x5 kernels, and a padded 1x1 conv whose grad_input would
 * need negative padding (the direct kernel takes it).  Each model: the .so
 * must name the packed kernels it is meant to reach, then momentum steps with 1 and 2 threads
 * vs ir_train_step (loss per step, every state tensor, 1e-4), 2 threads bitwise equal to 1,
 * and the eval program vs the interpreter (train_case_check.h).  1x1 convs take blocks of up
 * to 1 MB of packed weights: pk_e's 1100-channel ones need two. */
#include "train_case_check.h"

static const char *a_yml = /* pixel vectors (31 of 32 lanes), blocks of tiles with a remainder */
    "name: pk_a\n"
    "input: {shape: [6, 7, 31], dtype: f32, classes: 3}\n"
    "layers:\n"
    "  - {name: c0, op: conv, filters: 40, kernel: 3, padding: 1}\n"
    "  - {name: r0, op: relu}\n"
    "  - {name: c1, op: conv, filters: 118, kernel: 3, padding: 1}\n"
    "  - {name: r1, op: relu}\n"
    "  - {name: c2, op: conv, filters: 9, kernel: [3, 5], padding: [1, 2]}\n"
    TCC_HEAD("3");
static const char *b_yml = /* channel vectors, flat 1x1, stride 2, subsampled 1x1 (20 channels: at least one
                           * channel vector of 16 lanes), padded 1x1 */
    "name: pk_b\n"
    "input: {shape: [5, 14, 14], dtype: f32, classes: 3}\n"
    "layers:\n"
    "  - {name: c0, op: conv, filters: 16, kernel: 3, padding: 1}\n"
    "  - {name: r0, op: relu}\n"
    "  - {name: g1, op: conv, filters: 24, kernel: 1}\n"
    "  - {name: r1, op: relu}\n"
    "  - {name: s2, op: conv, filters: 20, kernel: 3, stride: 2, padding: 1}\n"
    "  - {name: r2, op: relu}\n"
    "  - {name: s3, op: conv, filters: 20, kernel: 1, stride: 2, bias: false}\n"
    "  - {name: r3, op: relu}\n"
    "  - {name: e4, op: conv, filters: 10, kernel: 1, padding: 1}\n"
    TCC_HEAD("3");
static const char *c_yml = /* a K-blocked 1x1 row: 900 channels x 49 pixels */
    "name: pk_c\n"
    "input: {shape: [8, 7, 7], dtype: f32, classes: 3}\n"
    "layers:\n"
    "  - {name: c0, op: conv, filters: 900, kernel: 1}\n"
    "  - {name: r0, op: relu}\n"
    "  - {name: c1, op: conv, filters: 16, kernel: 1, bias: false}\n"
    "  - {name: r1, op: relu}\n"
    "  - {name: c2, op: conv, filters: 9, kernel: 3, padding: 1}\n"
    TCC_HEAD("3");
static const char *d_yml = /* dilation 2, asymmetric padding, 16-wide rows */
    "name: pk_d\n"
    "input: {shape: [4, 11, 16], dtype: f32, classes: 3}\n"
    "layers:\n"
    "  - {name: c0, op: conv, filters: 12, kernel: 3, padding: 1}\n"
    "  - {name: r0, op: relu}\n"
    "  - {name: c1, op: conv, filters: 10, kernel: 5, dilation: 2, padding: 4}\n"
    "  - {name: r1, op: relu}\n"
    "  - {name: c2, op: conv, filters: 11, kernel: 3, padding: [0, 1, 2, 1]}\n"
    TCC_HEAD("3");
static const char *e_yml = /* 1x1 convs whose 1 MB blocks hold fewer tiles than the conv (2 blocks) */
    "name: pk_e\n"
    "input: {shape: [8, 4, 4], dtype: f32, classes: 3}\n"
    "layers:\n"
    "  - {name: c0, op: conv, filters: 1100, kernel: 1}\n"
    "  - {name: r0, op: relu}\n"
    "  - {name: c1, op: conv, filters: 250, kernel: 1}\n"
    "  - {name: r1, op: relu}\n"
    "  - {name: c2, op: conv, filters: 1100, kernel: 1, bias: false}\n"
    TCC_HEAD("3");


int main(void) {
  cgt_init_dir();
  const char *ka[] = {"conv2d_train_pk_f32", "conv2d_grad_input_pk_f32"};
  const char *kb[] = {"conv2d_train_pk_vc_f32", "conv2d_train_pk_1x1s_vc_f32", "conv2d_grad_input_pk", "conv2d_grad_input_f32"};
  const char *kc[] = {"conv2d_train_pk_vc_f32", "conv2d_grad_input_pk"};
  cgt_failures += has_kinds("pk_a", a_yml, ka, 2);
  cgt_failures += has_kinds("pk_b", b_yml, kb, 4);
  cgt_failures += has_kinds("pk_c", c_yml, kc, 2);
  cgt_failures += has_kinds("pk_d", d_yml, ka, 2);
  cgt_failures += has_kinds("pk_e", e_yml, kc + 1, 1);
  cgt_failures += run_yml("pk_a", a_yml, 2);
  cgt_failures += run_yml("pk_b", b_yml, 3);
  cgt_failures += run_yml("pk_c", c_yml, 2);
  cgt_failures += run_yml("pk_d", d_yml, 1);
  cgt_failures += run_yml("pk_e", e_yml, 2);
  return cgt_done("test_codegen_train_packed");
}
