/* dw_case_check.h — shared by test_codegen_dw.c and test_codegen_dw_rows.c: the one-conv
 * depthwise test graph (conv [+ bias] [+ inference BN] [+ add input] [+ swish | relu]) and the
 * probe telling gen_dwconv.c's row-tiled kernel from the flat-plane one (both are named
 * conv2d_dw_plane; the row-tiled one carries the "cnnc-dw-rows" attribute in --emit llvm).
 * Include after test_codegen_harness.h. */
#ifndef DW_CASE_CHECK_H
#define DW_CASE_CHECK_H

#include "ct_tune.h"

#define SHAPE(...) ((ir_shape){sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t), {__VA_ARGS__}})

/* The geometry and epilogue of one case; post: 0 none, 1 swish, 2 relu, 3 add input + relu. */
typedef struct dw_geom {
  int n, c, h, w, kh, kw, stride, pad[4], dil, bias, bn, post;
} dw_geom;

static ir_graph *dw_build_graph(const dw_geom *k) {
  ir_graph *g = ir_graph_new("t", k->n);
  int x = ir_add_input(g, "x", IR_F32, SHAPE(k->n, k->c, k->h, k->w));
  int in[3] = {x, cgt_param(g, "dw/weight", SHAPE(k->c, 1, k->kh, k->kw)), 0};
  if (k->bias) in[2] = cgt_param(g, "dw/bias", SHAPE(k->c));
  ir_attr a = {.conv2d = {{k->kh, k->kw}, {k->stride, k->stride}, {k->pad[0], k->pad[1], k->pad[2], k->pad[3]},
                          {k->dil, k->dil}, k->c}};
  int y = cgt_node(g, IR_OP_conv2d, "dw", in, k->bias ? 3 : 2, &a);
  if (k->bn) {
    const char *sfx[4] = {"gamma", "beta", "running_mean", "running_var"};
    char nm[4][32];
    int b[5] = {y};
    for (int i = 0; i < 4; i++) {
      snprintf(nm[i], sizeof nm[i], "bn/%s", sfx[i]);
      b[i + 1] = cgt_param(g, nm[i], SHAPE(k->c));
    }
    ir_attr ba = {.batchnorm = {1e-5f, 0.1f, 0}};
    y = cgt_node(g, IR_OP_batchnorm, "bn", b, 5, &ba);
  }
  ir_attr none = {0};
  if (k->post == 3) {
    int in2[2] = {y, x};
    y = cgt_node(g, IR_OP_add, "add", in2, 2, NULL);
  }
  if (k->post == 1) y = cgt_node(g, IR_OP_swish, "act", &y, 1, &none);
  if (k->post >= 2) y = cgt_node(g, IR_OP_relu, "act", &y, 1, &none);
  g->outputs[g->n_outputs++] = y;
  g->n_shards = 1;
  return g;
}

/* 1 if g's depthwise kernel for t is the row-tiled one, 0 if not, -1 when g does not compile
 * or has no depthwise kernel. */
static int dw_is_rows_kernel(ir_graph *g, const cg_target *t) {
  char ll[512], line[4096];
  FILE *f = cgt_llvm_of(g, t, "rows", ll, sizeof ll);
  if (!f) return -1;
  int found = 0, conv = 0;
  while (fgets(line, sizeof line, f)) {
    found |= strstr(line, "\"cnnc-dw-rows\"") != NULL;
    conv |= strstr(line, "conv2d_dw") != NULL;
  }
  fclose(f);
  unlink(ll);
  return conv ? found : -1;
}

/* t for cpu (NULL: the host); 1 with the error printed when it cannot be made. */
static int dw_target(cg_target *t, const char *cpu) {
  ir_diag d = {0};
  if (cg_target_init(t, NULL, cpu, NULL, &d) == 0) return 0;
  ir_diag_print(&d, stderr);
  return 1;
}

#endif
