/* test_codegen_shards.c — pipeline shards: a small residual network compiled to 1, 2, 3 and
 * 4 shards (cost-balanced and by names, including splits where a residual crosses from one
 * shard into a later one and where a conv and its batchnorm land in different shards) must
 * match the interpreter and the 1-shard build; the descriptor must list the boundary
 * tensors each shard reads and writes. */
#include "test_codegen_harness.h"

#define SHAPE(...) ((ir_shape){sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t), {__VA_ARGS__}})

static int conv_bn(ir_graph *g, const char *blk, int x, int cin, int cout, int stride) {
  char n[64], w[64];
  snprintf(n, sizeof n, "%s/conv", blk);
  snprintf(w, sizeof w, "%s/conv/weight", blk);
  ir_attr a = {.conv2d = {{3, 3}, {stride, stride}, {1, 1, 1, 1}, {1, 1}, 1}};
  int y = cgt_node(g, IR_OP_conv2d, n, (int[]){x, ir_add_param(g, w, SHAPE(cout, cin, 3, 3), 1)}, 2, &a);
  int in[5] = {y};
  const char *sfx[4] = {"gamma", "beta", "running_mean", "running_var"};
  for (int i = 0; i < 4; i++) {
    snprintf(w, sizeof w, "%s/bn/%s", blk, sfx[i]);
    in[i + 1] = ir_add_param(g, w, SHAPE(cout), i < 2);
  }
  snprintf(n, sizeof n, "%s/bn", blk);
  ir_attr b = {.batchnorm = {1e-5f, 0.1f, 0}};
  return cgt_node(g, IR_OP_batchnorm, n, in, 5, &b);
}

/* stem -> [block1: conv-bn-relu-conv-bn + x -> relu] -> [block2 same] -> pool -> fc. */
static ir_graph *resnet_tiny(void) {
  ir_graph *g = ir_graph_new("resnet_tiny", 2);
  int x = ir_add_input(g, "image", IR_U8, SHAPE(2, 3, 16, 16));
  ir_attr na = {.normalize = {1.0f / 255, 3, {0.5f, 0.5f, 0.5f}, {0.25f, 0.25f, 0.25f}}};
  int h = cgt_node(g, IR_OP_normalize, "normalize", &x, 1, &na);
  h = conv_bn(g, "stem", h, 3, 8, 1);
  h = cgt_node(g, IR_OP_relu, "stem/relu", &h, 1, NULL);
  for (int b = 1; b <= 2; b++) {
    char blk[32], nm[48];
    snprintf(blk, sizeof blk, "block%d/a", b);
    int y = conv_bn(g, blk, h, 8, 8, 1);
    snprintf(nm, sizeof nm, "block%d/relu1", b);
    y = cgt_node(g, IR_OP_relu, nm, &y, 1, NULL);
    snprintf(blk, sizeof blk, "block%d/b", b);
    y = conv_bn(g, blk, y, 8, 8, 1);
    snprintf(nm, sizeof nm, "block%d/add", b);
    y = cgt_node(g, IR_OP_add, nm, (int[]){y, h}, 2, NULL);
    snprintf(nm, sizeof nm, "block%d/relu2", b);
    h = cgt_node(g, IR_OP_relu, nm, &y, 1, NULL);
  }
  ir_attr pa = {.maxpool = {{2, 2}, {2, 2}, {0, 0, 0, 0}, 0, 0}};
  h = cgt_node(g, IR_OP_maxpool, "pool", &h, 1, &pa);
  h = cgt_node(g, IR_OP_global_avgpool, "gap", &h, 1, NULL);
  ir_attr ra = {.reshape = {{2, {2, -1}}}};
  h = cgt_node(g, IR_OP_reshape, "flatten", &h, 1, &ra);
  ir_attr da = {.dense = {5}};
  h = cgt_node(g, IR_OP_dense, "fc", (int[]){h, ir_add_param(g, "fc/weight", SHAPE(5, 8), 1), ir_add_param(g, "fc/bias", SHAPE(5), 1)}, 3, &da);
  g->outputs[g->n_outputs++] = h;
  cgt_random_params(g, 0.5f);
  return g;
}

static int compile_open(ir_graph *g, const cg_target *t, const char *so, void **h, const cnnc_abi_model **m) {
  cg_options o = {so, NULL, "resnet_tiny", "{}", 2, 0};
  ir_diag d = {0};
  if (cg_compile(ct_g(g), t, &o, &d)) {
    ir_diag_print(&d, stderr);
    return -1;
  }
  *h = dlopen(so, RTLD_NOW | RTLD_LOCAL);
  *m = *h ? dlsym(*h, CNNC_ABI_SYMBOL) : NULL;
  return *m ? 0 : -1;
}

/* Boundary tensors: every shard input is the model input or produced by an earlier shard. */
static void check_descriptor(const cnnc_abi_model *m, int shards, const char *label) {
  CGT_CHECK(m->n_shards == shards, "%s: %d shards in the descriptor", label, m->n_shards);
  int *produced = calloc((size_t)m->n_tensors, sizeof(int));
  produced[m->input] = 1;
  for (int s = 0; s < m->n_shards; s++) {
    const cnnc_abi_shard *sh = &m->shards[s];
    for (int k = 0; k < sh->n_inputs; k++)
      CGT_CHECK(produced[sh->io[k]], "%s: shard %d reads tensor '%s' before it is produced", label, s,
                m->tensors[sh->io[k]].name);
    for (int k = sh->n_inputs; k < sh->n_io; k++) produced[sh->io[k]] = 1;
    CGT_CHECK(sh->n_ops > 0 && sh->run && sh->kernel_names[0] && strncmp(sh->kernel_names[0], "cnnk_s", 6) == 0,
              "%s: shard %d ops/kernels", label, s);
  }
  for (int i = 0; i < m->n_outputs; i++) CGT_CHECK(produced[m->outputs[i]], "%s: output never produced", label);
  free(produced);
}

static double max_diff(const float *a, const float *b, int64_t n) {
  double m = 0;
  for (int64_t i = 0; i < n; i++) m = fabs(a[i] - b[i]) > m ? fabs(a[i] - b[i]) : m;
  return m;
}

int main(void) {
  cgt_init_dir();
  cg_target t;
  if (cgt_target(&t, NULL)) return 1;
  ir_diag d = {0};
  ir_graph *g = resnet_tiny();
  int64_t nout = ir_shape_numel(&g->values[g->outputs[0]].shape);
  float *one = NULL;
  CGT_CHECK(pass_split(g, NULL, 0, 1, &d) == 0, "1 shard");
  CGT_CHECK(cgt_check_graph(g, &t, "1 shard", 1e-4, &one) == 0, "1 shard vs interpreter");
  struct { int shards; const char *names[3]; int n; } cases[] = {
      {2, {0}, 0}, {3, {0}, 0}, {4, {0}, 0},
      {2, {"block1/b"}, 1},                        /* residual block1's input crosses the split */
      {3, {"block1/a/bn", "block2/add"}, 2},       /* conv|bn split, block2's residual crosses */
      {4, {"stem/relu", "block1/relu1", "block2/a"}, 3},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    char label[128];
    snprintf(label, sizeof label, "%d shards%s%s", cases[i].shards, cases[i].n ? " at " : " balanced",
             cases[i].n ? cases[i].names[0] : "");
    memset(&d, 0, sizeof d);
    if (pass_split(g, cases[i].names, cases[i].n, cases[i].n ? 0 : cases[i].shards, &d)) {
      CGT_CHECK(0, "%s: split failed: %s", label, d.msg);
      continue;
    }
    float *got = NULL;
    CGT_CHECK(cgt_check_graph(g, &t, label, 1e-4, &got) == 0, "%s vs interpreter", label);
    if (got && one) {
      double md = max_diff(got, one, nout);
      CGT_CHECK(md <= 1e-5, "%s: differs from the 1-shard build by %g", label, md);
      if (md != 0) fprintf(stderr, "  %s: max |diff| vs 1 shard %g (fusion differs across the split)\n", label, md);
    }
    free(got);
    char so[400];
    snprintf(so, sizeof so, "%s/desc%zu.so", cgt_dir, i);
    void *h = NULL;
    const cnnc_abi_model *m = NULL;
    if (compile_open(g, &t, so, &h, &m) == 0) check_descriptor(m, cases[i].shards, label);
    else CGT_CHECK(0, "%s: compile/open for descriptor check", label);
    if (h) dlclose(h);
    unlink(so);
  }
  free(one);
  ir_graph_free(g);
  cg_target_dispose(&t);
  return cgt_done("test_codegen_shards");
}
