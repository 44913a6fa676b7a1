/* fuzz_onnx.c — the ONNX importer (frontend/onnx*.c: protobuf-c parse, opset, initializers,
 * every operator's converter, shape arithmetic, lowering) on one model in memory
 * (fe_load_onnx_mem): a graph or an error naming the model, never a crash, hang or unbounded
 * allocation.  Seeds: the small node-test models of Debian's libonnx-testdata
 * (tests/fuzz/make_seeds.py).  Without ONNX import (-DCNNC_ONNX=OFF) every input is refused. */
#include "fuzz_common.h"
#include "frontend/fe.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fe_options o;
  fe_options_init(&o);
  ir_diag d = {0};
  ir_graph *g = fe_load_onnx_mem("fuzz.onnx", data, size, &o, &d);
  if (g) {
    ir_graph_free(g);
  } else if (!d.msg[0] || (!strstr(d.msg, "fuzz.onnx") && !(d.loc.file && strstr(d.loc.file, "fuzz.onnx")))) {
    fprintf(stderr, "fuzz_onnx: refusal without the model's name: %s\n", d.msg);
    abort();
  }
  return 0;
}
