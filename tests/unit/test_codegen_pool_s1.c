/* test_codegen_pool_s1.c — the stride-1 max pooling rows of gen_pool.c (pool_s1_row: chunks of
 * V outputs in registers, one constant-mask load per tap and input row; GoogLeNet's 3x3/s1
 * pad-1 branch pools), for the host and an AVX2-only (x86-64-v3) target:
 *  - the kernel takes the row path (its name carries `s1_rows`) exactly when eligible (f32,
 *    stride 1 across, at most 16 chunks of V outputs per row);
 *  - compiled vs the interpreter, 1 and 2 threads, with and without NaN inputs;
 *  - bitwise equal to the generic path (tune pool_s1=0), signed zeros included (the input
 *    goes through x * relu(x): -0 for x < 0).
 * Shapes: rows narrower than V (7x7, 14x14: the generic row's all-scalar case), one chunk and a
 * remainder, several, width 1, kernels 1..5 wide with left and right pads, ceil mode,
 * vertical stride 2, and one row too wide for the row path. */
#include "test_codegen_harness.h"

#define SHAPE(...) ((ir_shape){sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t), {__VA_ARGS__}})

typedef struct s1_case {
  int n, c, h, w, kh, kw, sh, pad[4], ceil; /* sw 1 */
} s1_case;

static const s1_case cases[] = {
    {2, 3, 7, 7, 3, 3, 1, {1, 1, 1, 1}, 0},     {1, 4, 14, 14, 3, 3, 1, {1, 1, 1, 1}, 1}, {2, 2, 28, 28, 3, 3, 1, {1, 1, 1, 1}, 0},
    {1, 2, 9, 70, 3, 3, 1, {1, 1, 1, 1}, 0},    {1, 3, 6, 1, 3, 3, 1, {1, 1, 1, 1}, 0},   {1, 2, 8, 17, 2, 2, 1, {0, 0, 1, 1}, 0},
    {1, 2, 9, 33, 5, 5, 2, {2, 2, 2, 2}, 1},    {2, 1, 5, 20, 1, 4, 1, {0, 1, 0, 2}, 0},  {1, 1, 4, 9, 3, 1, 1, {1, 0, 1, 0}, 0},
    {1, 1, 3, 300, 3, 3, 1, {1, 1, 1, 1}, 0},
};

static int row_path(int64_t ow, int v) { return (ow + v - 1) / v <= 16; }

/* x -> x * relu(x) (signed zeros; or x itself with NaNs) -> maxpool */
static ir_graph *build(const s1_case *k, int zeros, int64_t *ow) {
  ir_graph *g = ir_graph_new("t", k->n);
  int x = ir_add_input(g, "x", IR_F32, SHAPE(k->n, k->c, k->h, k->w));
  if (zeros) x = cgt_node(g, IR_OP_mul, "signed0", (int[]){x, cgt_node(g, IR_OP_relu, "r0", &x, 1, NULL)}, 2, NULL);
  ir_attr a = {.maxpool = {{k->kh, k->kw}, {k->sh, 1}, {k->pad[0], k->pad[1], k->pad[2], k->pad[3]}, 0, k->ceil}};
  int y = cgt_node(g, IR_OP_maxpool, "pool", &x, 1, &a);
  *ow = g->values[y].shape.dim[3];
  g->outputs[g->n_outputs++] = y;
  g->n_shards = 1;
  return g;
}

static void run_target(const cg_target *t, const char *tname) {
  int v = t->vec_f32;
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
    for (int mode = 0; mode < 2; mode++) { /* 0 signed zeros, 1 NaNs */
      const s1_case *k = &cases[i];
      char label[160];
      snprintf(label, sizeof label, "%s case %zu (%dx%d %dx%d/s%d,1 pad %d,%d,%d,%d%s)%s", tname, i, k->h, k->w, k->kh, k->kw,
               k->sh, k->pad[0], k->pad[1], k->pad[2], k->pad[3], k->ceil ? " ceil" : "", mode ? " NaNs" : "");
      int64_t ow;
      ir_graph *g = build(k, mode == 0, &ow);
      int want = row_path(ow, v);
      if (mode == 0) CGT_CHECK(cgt_kernel_marked(g, t, "pool_s1", "_maxpool_", "s1_rows_v", want), "%s: row path expected %d",
                               label, want);
      cgt_nan_every = mode ? 5 : 0;
      cgt_check_knob_bitwise(g, t, label, 1e-6, "pool_s1=0", "pool_s1=1");
      cgt_nan_every = 0;
      ir_graph_free(g);
    }
}

int main(void) {
  cgt_init_dir();
  cg_target host, v3;
  ir_diag d = {0};
  if (cgt_target(&host, NULL) || cg_target_init(&v3, NULL, "x86-64-v3", NULL, &d)) return ir_diag_print(&d, stderr), 1;
  run_target(&v3, "x86-64-v3");
  if (host.vec_f32 != v3.vec_f32) run_target(&host, "host");
  cg_target_dispose(&host);
  cg_target_dispose(&v3);
  return cgt_done("test_codegen_pool_s1");
}
