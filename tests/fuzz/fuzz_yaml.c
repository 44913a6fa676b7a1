/* fuzz_yaml.c — the whole model frontend on one file: fe_load (libyaml events -> node tree,
 * schema, expressions, blocks, lowering, shape inference, parameter init) must return a
 * graph or an error naming the file, never crash, hang or allocate without bound.  Seeds:
 * models/, tests/golden/{ok,err}. */
#include "fuzz_common.h"
#include "frontend/fe.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char path[512];
  fz_write("model.yml", data, size, path, sizeof path);
  fe_options o;
  fe_options_init(&o);
  ir_diag d = {0};
  ir_graph *g = fe_load(path, &o, &d);
  if (g) ir_graph_free(g);
  else if (!d.msg[0]) { /* a refusal must say why */
    fprintf(stderr, "fuzz_yaml: fe_load failed without a message\n");
    abort();
  }
  fz_remove(path);
  return 0;
}
