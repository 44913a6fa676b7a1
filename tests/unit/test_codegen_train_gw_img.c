/* test_codegen_train_gw_img.c — the packed grad_weight GEMM (codegen/gen_train_pgw.c) on maps
 * of at most half a pixel chunk, whose chunks hold several whole images (the tiles run over
 * the images' pixels one image after the other, the pack writes image after image): 7x7 maps
 * (3 images per chunk: batch 5 as 3 + 2, batch 3 as one chunk), 3x3 padded, flat 1x1, 1x1
 * stride 2 (4x4 output maps), 3x3 stride 2 on 2x2 output maps, a 7x7 kernel padded on 9x9
 * maps (2 images per chunk, batch 3 as 2 + 1), 5x5 output maps of a 3x3 stride 2, channel
 * counts that are not multiples of 8 (masked last vectors, the 6x2 and 12x1 tiles), output-
 * channel blocks; batch 1 (one image per chunk), 3 and 5.  Each model: its LLVM module must
 * define a packed grad_weight kernel and differ from the one of tune pgw_one_image=1 (one
 * image per chunk), then momentum steps with 1 and 2 threads vs ir_train_step (loss per step,
 * every state tensor, 1e-4), 2 threads bitwise equal to 1, the eval program vs the
 * interpreter (train_case_check.h), and the first-step gradient of every weight vs central
 * finite differences of the interpreter's loss. */
#include "train_case_check.h"

static const char *f_yml = /* 7x7 maps: 3x3, flat 1x1, 1x1 stride 2, 3x3 stride 2 */
    "name: gwi_f\n"
    "input: {shape: [11, 7, 7], dtype: f32, classes: 3}\n"
    "layers:\n"
    "  - {name: c0, op: conv, filters: 13, kernel: 3, padding: 1}\n"
    "  - {name: c1, op: conv, filters: 20, kernel: 1}\n"
    "  - {name: c2, op: conv, filters: 9, kernel: 1, stride: 2, bias: false}\n"
    "  - {name: c3, op: conv, filters: 12, kernel: 3, stride: 2, padding: 1}\n"
    TCC_HEAD("3");
static const char *g_yml = /* 7x7 kernel on 9x9 maps, 3x3 stride 2 to 5x5, many output channels */
    "name: gwi_g\n"
    "input: {shape: [3, 9, 9], dtype: f32, classes: 3}\n"
    "layers:\n"
    "  - {name: c0, op: conv, filters: 10, kernel: 7, padding: 3}\n"
    "  - {name: c1, op: conv, filters: 17, kernel: 3, stride: 2, padding: 1}\n"
    "  - {name: c2, op: conv, filters: 70, kernel: 1, bias: false}\n"
    "  - {name: c3, op: conv, filters: 30, kernel: 1}\n"
    TCC_HEAD("3");

/* yml's training module as LLVM IR (malloc'd text, NULL on failure), without the line of the
 * options record: it names every tune knob's value, so modules built with different knobs
 * always differ there; the comparison below is of the code. */
static char *module_ir(const char *name, const char *yml) {
  char *text = tcc_module_ir(name, yml, 3);
  char *rec = text ? strstr(text, "\\22tune\\22: {") : NULL, *a = rec, *b = rec;
  while (a && a > text && a[-1] != '\n') a--;
  while (b && *b && *b != '\n') b++;
  if (rec) memmove(a, b, strlen(b) + 1);
  else if (text) fprintf(stderr, "%s: no options record in the module\n", name), free(text), text = NULL;
  return text;
}

/* The module defines a packed grad_weight kernel, and tune pgw_one_image=1 changes it (the
 * multi-image chunks are taken). */
static int has_img_chunks(const char *name, const char *yml) {
  char *def = module_ir(name, yml);
  ct_tune("pgw_one_image=1");
  char *one = module_ir(name, yml);
  ct_tune("pgw_one_image=0");
  int ok = def && one && strstr(def, "conv2d_grad_weight_pk_f32") && strcmp(def, one);
  CGT_CHECK(ok, "%s: no packed grad_weight kernel, or pgw_one_image=1 changed nothing", name);
  free(def), free(one);
  return !ok;
}

int main(void) {
  cgt_init_dir();
  cgt_failures += has_img_chunks("gwi_f", f_yml);
  cgt_failures += has_img_chunks("gwi_g", g_yml);
  cgt_failures += run_ymls("gwi_f", f_yml, 5, 3, 1, 0);
  cgt_failures += run_yml("gwi_g", g_yml, 3);
  cgt_failures += fd_case("gwi_f", f_yml, 5);
  cgt_failures += fd_case("gwi_g", g_yml, 3);
  return cgt_done("test_codegen_train_gw_img");
}
