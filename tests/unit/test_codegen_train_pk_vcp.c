/* test_codegen_train_pk_vcp.c — compiled training's kxk channel-vector convs on K-blocked
 * planes (codegen/gen_train_pconv.c: g->vc_plane, one item per (image, channel tile) plane,
 * cg_conv_vc_plane; kinds conv2d_train_pk_vcp_..., conv2d_grad_input_pk_vcp_...), forced on
 * these small shapes with tune vc_plane_force=1 (the plane route for every kxk channel-vector conv
 * it can run): odd maps (7x7, 9x11, 5x5), channel counts not multiples of 8 (20, 36, 44),
 * stride 1 and 2 forward, stride-1 grad_input, the phase views of a strided grad_input
 * (2x2 sub-kernels of 3x3 stride 2 on planes through the scratch), batch 1 and 3.  Each model:
 * the .so names the plane kinds (and not with tune train_pconv_vcp=0), then momentum steps
 * with 1 and 2 threads vs ir_train_step (loss per step, every state tensor, 1e-4), 2 threads
 * bitwise equal to 1, and the eval program vs the interpreter (train_case_check.h). */
#include "train_case_check.h"

static const char *a_yml = /* stride 1 on 7x7 and 9x11, channels 20 / 36 / 44 (remainder tiles) */
    "name: vcp_a\n"
    "input: {shape: [5, 9, 11], dtype: f32, classes: 3}\n"
    "layers:\n"
    "  - {name: c0, op: conv, filters: 20, kernel: 3, padding: 1}\n"
    "  - {name: r0, op: relu}\n"
    "  - {name: c1, op: conv, filters: 36, kernel: 3, padding: 1}\n"
    "  - {name: r1, op: relu}\n"
    "  - {name: s2, op: conv, filters: 44, kernel: 3, stride: 2, padding: 1}\n"
    "  - {name: r2, op: relu}\n"
    "  - {name: c3, op: conv, filters: 20, kernel: 3, padding: 1}\n"
    TCC_HEAD("3");
static const char *b_yml = /* 7x7 stride 1, then 3x3 stride 2 on 7x7 (odd: phases of 4x4/4x3/3x4/3x3) */
    "name: vcp_b\n"
    "input: {shape: [12, 7, 7], dtype: f32, classes: 3}\n"
    "layers:\n"
    "  - {name: c0, op: conv, filters: 36, kernel: 3, padding: 1}\n"
    "  - {name: r0, op: relu}\n"
    "  - {name: s1, op: conv, filters: 28, kernel: 3, stride: 2, padding: 1}\n"
    "  - {name: r1, op: relu}\n"
    "  - {name: c2, op: conv, filters: 17, kernel: 3, padding: 1}\n"
    TCC_HEAD("3");

int main(void) {
  cgt_init_dir();
  ct_tune("vc_plane_force=1,train_winograd=0"); /* stride-1 3x3 convs: the packed route, not gen_train_wino.c */
  const char *ka[] = {"conv2d_train_pk_vcp_f32", "conv2d_grad_input_pk_vcp_f32"};
  cgt_failures += has_kinds("vcp_a", a_yml, ka, 2);
  cgt_failures += has_kinds("vcp_b", b_yml, ka, 2);
  ct_tune("train_pconv_vcp=0");
  cgt_failures += lacks_kind("vcp_a_off", a_yml, "_vcp_");
  ct_tune("train_pconv_vcp=1");
  cgt_failures += run_ymls("vcp_a", a_yml, 3, 1, 0);
  cgt_failures += run_ymls("vcp_b", b_yml, 3, 1, 0);
  return cgt_done("test_codegen_train_pk_vcp");
}
