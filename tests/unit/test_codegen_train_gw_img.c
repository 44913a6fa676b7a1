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
#include <stdlib.h>

#include "frontend/fe.h"
#include "ir/grad_train.h"
#include "runtime/cnnrt.h"
#include "test_codegen_harness.h"

enum { KSTEPS = 2 };

static const char *f_yml = /* 7x7 maps: 3x3, flat 1x1, 1x1 stride 2, 3x3 stride 2 */
    "name: gwi_f\n"
    "input: {shape: [11, 7, 7], dtype: f32, classes: 3}\n"
    "layers:\n"
    "  - {name: c0, op: conv, filters: 13, kernel: 3, padding: 1}\n"
    "  - {name: c1, op: conv, filters: 20, kernel: 1}\n"
    "  - {name: c2, op: conv, filters: 9, kernel: 1, stride: 2, bias: false}\n"
    "  - {name: c3, op: conv, filters: 12, kernel: 3, stride: 2, padding: 1}\n"
    "  - {name: p, op: global_avgpool}\n"
    "  - {name: f, op: flatten}\n"
    "  - {name: d, op: dense, units: 3}\n";
static const char *g_yml = /* 7x7 kernel on 9x9 maps, 3x3 stride 2 to 5x5, many output channels */
    "name: gwi_g\n"
    "input: {shape: [3, 9, 9], dtype: f32, classes: 3}\n"
    "layers:\n"
    "  - {name: c0, op: conv, filters: 10, kernel: 7, padding: 3}\n"
    "  - {name: c1, op: conv, filters: 17, kernel: 3, stride: 2, padding: 1}\n"
    "  - {name: c2, op: conv, filters: 70, kernel: 1, bias: false}\n"
    "  - {name: c3, op: conv, filters: 30, kernel: 1}\n"
    "  - {name: p, op: global_avgpool}\n"
    "  - {name: f, op: flatten}\n"
    "  - {name: d, op: dense, units: 3}\n";

#include "train_case_check.h"

/* yml's training module as LLVM IR (malloc'd text, NULL on failure), without the line of the
 * options record: it names every tune knob's value, so modules built with different knobs
 * always differ there; the comparison below is of the code. */
static char *module_ir(const char *name, const char *yml) {
  char path[512], ll[512];
  snprintf(path, sizeof path, "%s/%s_k.yml", cgt_dir, name);
  snprintf(ll, sizeof ll, "%s/%s_k.ll", cgt_dir, name);
  FILE *f = fopen(path, "w");
  if (!f || fputs(yml, f) < 0 || fclose(f)) return NULL;
  fe_options o;
  ir_graph *g = load_case(path, 3, &o);
  ir_diag d = {0};
  char *text = NULL;
  if (!g || cnnc_build_model(ct_g(g), &o, ll, "llvm", 0, &d)) {
    ir_diag_print(&d, stderr);
  } else if ((f = fopen(ll, "rb"))) {
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    text = malloc((size_t)n + 1);
    if (text && fread(text, 1, (size_t)n, f) == (size_t)n) {
      text[n] = 0;
      char *rec = strstr(text, "\\22tune\\22: {"), *a = rec, *b = rec;
      while (a && a > text && a[-1] != '\n') a--;
      while (b && *b && *b != '\n') b++;
      if (rec) memmove(a, b, strlen(b) + 1);
      else fprintf(stderr, "%s: no options record in the module\n", name), free(text), text = NULL;
    } else {
      free(text);
      text = NULL;
    }
    fclose(f);
  }
  if (g) ir_graph_free(g);
  unlink(ll), unlink(path);
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

#include "train_fd_check.h" /* interp_loss, fd_case */

int main(void) {
  (void)cgt_check_graph, (void)cgt_random_params;
  cgt_init_dir();
  cgt_failures += has_img_chunks("gwi_f", f_yml);
  cgt_failures += has_img_chunks("gwi_g", g_yml);
  cgt_failures += run_yml("gwi_f", f_yml, 5);
  cgt_failures += run_yml("gwi_f", f_yml, 3);
  cgt_failures += run_yml("gwi_f", f_yml, 1);
  cgt_failures += run_yml("gwi_g", g_yml, 3);
  cgt_failures += fd_case("gwi_f", f_yml, 5);
  cgt_failures += fd_case("gwi_g", g_yml, 3);
  cgt_cleanup_dir();
  if (cgt_failures) {
    fprintf(stderr, "%d failure(s)\n", cgt_failures);
    return 1;
  }
  printf("test_codegen_train_gw_img: ok\n");
  return 0;
}
