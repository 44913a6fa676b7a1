/* fuzz_weights.c — the safetensors weights reader (frontend/weights.c) on one file, loading
 * into a small fixed model (conv, batch norm, dense: F32 params and running statistics):
 * fe_load_safetensors must load or refuse naming the file, never crash.  Seeds: files from
 * tests/fuzz/make_seeds.py (the model's own weights, BF16/F16 variants, damaged headers). */
#include "fuzz_common.h"
#include "frontend/fe.h"
#include "frontend/weights.h"

/* Keep in step with tests/fuzz/make_seeds.py (the seeds are this model's weights). */
static const char model_yml[] =
    "name: fuzz_weights\n"
    "input: {shape: [2, 6, 6], classes: 3}\n"
    "layers:\n"
    "  - {name: conv1, op: conv, filters: 4, kernel: 3, padding: 1}\n"
    "  - {name: bn1, op: batchnorm}\n"
    "  - {name: relu1, op: relu}\n"
    "  - {name: flatten, op: flatten}\n"
    "  - {name: fc, op: dense, units: 3}\n";

static ir_graph *g;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  char path[512];
  fz_write("fuzz_weights.yml", model_yml, sizeof model_yml - 1, path, sizeof path);
  fe_options o;
  fe_options_init(&o);
  ir_diag d = {0};
  if (!(g = fe_load(path, &o, &d))) {
    fprintf(stderr, "fuzz_weights: the fixed model does not load: %s\n", d.msg);
    abort();
  }
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char path[512];
  fz_write("w.safetensors", data, size, path, sizeof path);
  ir_diag d = {0};
  if (fe_load_safetensors(g, path, 0, &d) != 0 && !strstr(d.msg, "w.safetensors") &&
      !(d.loc.file && strstr(d.loc.file, "w.safetensors"))) { /* printed as "file: error: msg" */
    fprintf(stderr, "fuzz_weights: refusal without the file name: %s\n", d.msg);
    abort();
  }
  fz_remove(path);
  return 0;
}
