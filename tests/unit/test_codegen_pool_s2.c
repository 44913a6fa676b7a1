/* test_codegen_pool_s2.c — the 3-wide stride-2 left-pad-1 max pooling rows of gen_pool.c
 * (pool_s2_row: contiguous 2V-input loads split into even / odd lanes, masked at the right
 * edge, docs/matrix.md "Stem"), for the host and an AVX2-only (x86-64-v3) target:
 *  - the kernel takes the row path (its name carries `_rows`) exactly when eligible (3 wide,
 *    stride 2, left pad 1, at most 16 chunks of V outputs per row);
 *  - compiled vs the interpreter, 1 and 2 threads, f32 and bf16 input (a round16 to a bf16
 *    value in front), f32 and bf16 output, with and without NaN inputs; fp16 input and output
 *    (F16C loads, -inf as 0xfc00 in the masked right edge) for every other shape;
 *  - bitwise equal to the generic path (tune pool_s2=0), signed zeros included (the input
 *    goes through x * relu(x): -0 for x < 0).
 * Shapes: one chunk, several, a remainder, odd widths (the last window reads the right pad),
 * widths below 2V, ceil mode, asymmetric pads, vertical stride 1 and window heights 1..5, and
 * one row too wide for the row path. */
#include "test_codegen_harness.h"

#define SHAPE(...) ((ir_shape){sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t), {__VA_ARGS__}})

typedef struct s2_case {
  int n, c, h, w, kh, sh, pad[4], ceil; /* kw 3, sw 2 */
} s2_case;

static const s2_case cases[] = {
    {2, 3, 12, 12, 3, 2, {1, 1, 1, 1}, 0}, {1, 2, 13, 13, 3, 2, {1, 1, 1, 1}, 1}, {2, 2, 9, 70, 3, 2, {1, 1, 1, 1}, 0},
    {1, 2, 7, 33, 3, 2, {1, 1, 1, 1}, 0},  {1, 3, 6, 31, 3, 2, {1, 1, 0, 0}, 0}, {2, 1, 5, 129, 3, 2, {1, 1, 1, 1}, 0},
    {1, 1, 4, 2, 3, 2, {1, 1, 1, 1}, 0},   {1, 2, 8, 17, 1, 1, {0, 1, 0, 1}, 0}, {1, 2, 9, 64, 5, 2, {2, 1, 2, 1}, 0},
    {2, 2, 7, 112, 2, 1, {0, 1, 1, 0}, 0}, {1, 1, 3, 600, 3, 2, {1, 1, 1, 1}, 0}, {1, 1, 6, 3, 3, 2, {1, 1, 1, 1}, 1},
};

static int row_path(const s2_case *k, int64_t ow, int v) { return k->pad[1] == 1 && (ow + v - 1) / v <= 16; }

/* x -> [x * relu(x)] -> [round16 (bf16 value)] -> maxpool [-> bf16 value -> relu]. */
static ir_graph *build(const s2_case *k, int zeros, int in16, int out16, int fp16, int64_t *ow) {
  ir_dtype dt = fp16 ? IR_F16 : IR_BF16;
  ir_graph *g = ir_graph_new("t", k->n);
  int x = ir_add_input(g, "x", IR_F32, SHAPE(k->n, k->c, k->h, k->w));
  if (zeros) x = cgt_node(g, IR_OP_mul, "signed0", (int[]){x, cgt_node(g, IR_OP_relu, "r0", &x, 1, NULL)}, 2, NULL);
  if (in16) {
    ir_attr r = {.round16 = {fp16 ? IR_HALF_FP16 : IR_HALF_BF16}};
    x = cgt_node(g, IR_OP_round16, "r16", &x, 1, &r);
    g->values[x].dtype = dt;
  }
  ir_attr a = {.maxpool = {{k->kh, 3}, {k->sh, 2}, {k->pad[0], k->pad[1], k->pad[2], k->pad[3]}, 0, k->ceil}};
  int y = cgt_node(g, IR_OP_maxpool, "pool", &x, 1, &a);
  *ow = g->values[y].shape.dim[3];
  if (out16) {
    g->values[y].dtype = dt;
    y = cgt_node(g, IR_OP_relu, "out", &y, 1, NULL);
  }
  g->outputs[g->n_outputs++] = y;
  g->n_shards = 1;
  return g;
}

static void run_target(const cg_target *t, const char *tname) {
  int v = t->vec_f32;
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
    for (int mode = 0; mode < 6; mode++) { /* 0 f32, 1 bf16 in, 2 bf16 in+out, 3 f32 with NaNs, 4 fp16 in, 5 fp16 in+out */
      const s2_case *k = &cases[i];
      if (mode == 3 && i % 2) continue; /* NaNs for every other shape */
      if (mode >= 4 && i % 2 == 0) continue; /* fp16 for every other shape */
      int in16 = mode == 1 || mode == 2 || mode >= 4, out16 = mode == 2 || mode == 5, fp16 = mode >= 4;
      char label[160];
      snprintf(label, sizeof label, "%s case %zu (%dx%d %dx3/s%d,2 pad %d,%d,%d,%d%s) mode %d", tname, i, k->h, k->w, k->kh,
               k->sh, k->pad[0], k->pad[1], k->pad[2], k->pad[3], k->ceil ? " ceil" : "", mode);
      int64_t ow;
      ir_graph *g = build(k, mode != 3, in16, out16, fp16, &ow);
      cgt_random_params(g, 0.5f);
      int want = row_path(k, ow, v);
      if (mode == 0 || mode == 4) CGT_CHECK(cgt_kernel_marked(g, t, "pool_s2", "_maxpool_", "3s2_rows_v", want), "%s: row path expected %d",
                                            label, want);
      cgt_nan_every = mode == 3 ? 7 : 0;
      cgt_check_knob_bitwise(g, t, label, 1e-6, "pool_s2=0", "pool_s2=1");
      cgt_nan_every = 0;
      ir_graph_free(g);
    }
}

int main(void) {
  cgt_init_dir();
  cg_target host, v3;
  ir_diag d = {0}; /* x86-64-v3 with F16C named: cnnc's fp16 check reads the features */
  if (cgt_target(&host, NULL) || cg_target_init(&v3, NULL, "x86-64-v3", "+f16c", &d)) return ir_diag_print(&d, stderr), 1;
  run_target(&v3, "x86-64-v3");
  if (host.vec_f32 != v3.vec_f32) run_target(&host, "host");
  cg_target_dispose(&host);
  cg_target_dispose(&v3);
  return cgt_done("test_codegen_pool_s2");
}
