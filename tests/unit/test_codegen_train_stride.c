/* test_codegen_train_stride.c — compiled training of strided convs (grad_input with stride > 1
 * as one stride-1 conv per output phase, docs/training.md: the packed phases of
 * gen_train_pconv.c where they apply, else the direct kernels of gen_train_conv.c, also forced
 * with tune train_phase_pconv=0) and of
 * the 1x1 stride-1 grad_weight GEMM (channel blocks with remainders, planes of 20 / 323 / 600
 * pixels: chunks, a tail chunk, a masked last vector) against the reference interpreter.  Small models whose strided convs follow a conv with weights (so
 * their grad_input is computed and reaches that conv's weight gradient): 3x3 / 1x1 / 5x5 /
 * 7x7 / 2x2 / 3x2 kernels, stride 2, 3 and [2, 3], dilation 2, symmetric and asymmetric
 * padding, odd sizes (phases of unequal size, last input rows/columns no tap reaches), rows
 * of 3..35 phase pixels (masked and overlapping vectors, several vector groups), channel
 * counts with tile remainders.  Momentum for KSTEPS steps with 1 and 2 threads: the loss of
 * every step and every state tensor vs ir_train_step (1e-4 relative), the 2-thread state
 * bitwise equal to the 1-thread state, then cnnrt_evaluate vs the interpreter. */
#include "train_case_check.h"

static const char *a_yml = /* ResNet-like: 3x3 stride 2 and a 1x1 stride-2 downsample, odd sizes */
    "name: st_a\n"
    "input: {shape: [3, 13, 11], dtype: f32, classes: 4}\n"
    "layers:\n"
    "  - {name: c0, op: conv, filters: 6, kernel: 3, padding: 1}\n"
    "  - {name: r0, op: relu}\n"
    "  - {name: s1, op: conv, filters: 10, kernel: 3, stride: 2, padding: 1}\n"
    "  - {name: r1, op: relu}\n"
    "  - {name: s2, op: conv, filters: 9, kernel: 1, stride: 2, bias: false}\n"
    "  - {name: r2, op: relu}\n"
    "  - {name: c3, op: conv, filters: 5, kernel: 3, padding: 1}\n"
    TCC_HEAD("4");
static const char *b_yml = /* stride 3, dilation, asymmetric padding, stride [2, 3] */
    "name: st_b\n"
    "input: {shape: [2, 23, 37], dtype: u8, classes: 3}\n"
    "layers:\n"
    "  - {name: c0, op: conv, filters: 8, kernel: 3, padding: 1}\n"
    "  - {name: r0, op: relu}\n"
    "  - {name: s1, op: conv, filters: 7, kernel: 5, stride: 3, padding: 2}\n"
    "  - {name: r1, op: relu}\n"
    "  - {name: s2, op: conv, filters: 6, kernel: 3, stride: 2, dilation: 2, padding: 2}\n"
    "  - {name: r2, op: relu}\n"
    "  - {name: s3, op: conv, filters: 11, kernel: 3, stride: 2, padding: [0, 1, 1, 0]}\n"
    "  - {name: r3, op: relu}\n"
    "  - {name: s4, op: conv, filters: 5, kernel: [3, 2], stride: [2, 3], padding: [1, 0, 1, 1]}\n"
    TCC_HEAD("3");
static const char *w_yml = /* wide rows: the 7x7 stride-2 stem, 2x2 stride 2, a wide 1x1 downsample */
    "name: st_w\n"
    "input: {shape: [3, 20, 70], dtype: f32, classes: 3}\n"
    "layers:\n"
    "  - {name: c0, op: conv, filters: 4, kernel: 3, padding: 1}\n"
    "  - {name: s1, op: conv, filters: 12, kernel: 7, stride: 2, padding: 3}\n"
    "  - {name: r1, op: relu}\n"
    "  - {name: c2, op: conv, filters: 40, kernel: 1}\n"
    "  - {name: s3, op: conv, filters: 19, kernel: 1, stride: 2, bias: false}\n"
    "  - {name: r3, op: relu}\n"
    "  - {name: s4, op: conv, filters: 16, kernel: 2, stride: 2}\n"
    TCC_HEAD("3");
static const char *g_yml = /* 1x1 grad_weight: 14 -> 27 -> 9 channels (blocks of 8 x 12 with remainders) */
    "name: st_g\n"
    "input: {shape: [5, 17, 19], dtype: f32, classes: 3}\n"
    "layers:\n"
    "  - {name: c0, op: conv, filters: 14, kernel: 3, padding: 1}\n"
    "  - {name: r0, op: relu}\n"
    "  - {name: g1, op: conv, filters: 27, kernel: 1}\n"
    "  - {name: r1, op: relu}\n"
    "  - {name: g2, op: conv, filters: 9, kernel: 1, bias: false}\n"
    "  - {name: r2, op: relu}\n"
    "  - {name: s3, op: conv, filters: 5, kernel: 3, stride: 2, padding: 1}\n"
    TCC_HEAD("3");
static const char *h_yml = /* 1x1 grad_weight on 20- and 600-pixel planes, the first layer too */
    "name: st_h\n"
    "input: {shape: [6, 20, 30], dtype: f32, classes: 3}\n"
    "layers:\n"
    "  - {name: g0, op: conv, filters: 25, kernel: 1}\n"
    "  - {name: r0, op: relu}\n"
    "  - {name: g1, op: conv, filters: 16, kernel: 1}\n"
    "  - {name: r1, op: relu}\n"
    "  - {name: p1, op: maxpool, kernel: 5, stride: 5}\n"
    "  - {name: g2, op: conv, filters: 13, kernel: 1}\n"
    TCC_HEAD("3");

int main(void) {
  cgt_init_dir();
  cgt_failures += run_ymls("st_a", a_yml, 1, 3, 0);
  cgt_failures += run_yml("st_b", b_yml, 2);
  cgt_failures += run_yml("st_w", w_yml, 2);
  cgt_failures += run_yml("st_g", g_yml, 2);
  cgt_failures += run_yml("st_h", h_yml, 3);
  /* the direct phase kernels without the per-tile weight pack (where neither the packed
   * phases of gen_train_pconv.c, test_codegen_train_phase.c, nor the pack apply: batch dy
   * over 2 MB); st_b's strides 3 and [2, 3] take the direct kernels anyway */
  ct_tune("train_phase_pack=0,train_phase_pconv=0");
  cgt_failures += run_yml("st_a_np", a_yml, 3);
  cgt_failures += run_yml("st_b_np", b_yml, 2);
  cgt_failures += run_yml("st_w_np", w_yml, 2);
  ct_tune("train_phase_pconv=1,train_phase_pack=1");
  return cgt_done("test_codegen_train_stride");
}
