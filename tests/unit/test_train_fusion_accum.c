/* test_train_fusion_accum.c — the training fusions (passes/fuse.c pass_fuse_train, issue 5,
 * docs/training.md "Non-conv kernels, fused") with --gradient-accumulation and --replicas,
 * see train_pipeline_common.h: the batchnorm model with a residual add (b1 + relu, b2 + add +
 * relu forward; backward, r1's relu_grad takes the add of c2's input gradient and the join's,
 * since the batchnorm backward groups, whose dgamma / dbeta outputs are gradients, are not
 * made with accumulation) trained fused and with tune train_fusion=0: ga 2 x batch 8, 2
 * replicas x batch 8 and 2 shards interleaved x ga 4 give bitwise the same weights, running
 * statistics and losses both ways; the fused .so has the fused kernels and no
 * batchnorm_grad_fused, the unfused one none of them. */
#include "train_pipeline_common.h"

/* Compiles the model with kv and checks which training kernels the .so names. */
static int kernels(const char *label, const char *const *kv, int n_kv, int batch, int fused) {
  fe_options o;
  if (load_opts(&o, kv, n_kv, batch)) return 1;
  ir_diag d = {0};
  ir_graph *g = fe_load(model_path, &o, &d);
  char so[600];
  snprintf(so, sizeof so, "%s/fusion_accum.so", cgt_dir);
  if (!g || cnnc_build_model(ct_g(g), &o, so, NULL, 0, &d)) {
    fprintf(stderr, "  %s: compile failed: ", label);
    ir_diag_print(&d, stderr);
    if (g) ir_graph_free(g);
    return 1;
  }
  ir_graph_free(g);
  int bad = 0;
  CGT_CHECK(cgt_file_has(so, "_batchnorm_relu_train_") == fused, "%s: batchnorm + relu kernel", label);
  CGT_CHECK(cgt_file_has(so, "_batchnorm_add_relu_train_") == fused, "%s: batchnorm + add + relu kernel", label);
  CGT_CHECK(cgt_file_has(so, "_add_relu_grad_") == fused, "%s: add + relu_grad kernel", label);
  CGT_CHECK(!cgt_file_has(so, "_batchnorm_grad_fused_"), "%s: batchnorm backward fused with accumulation", label);
  unlink(so);
  return bad;
}

static int both_ways(const char *label, const char *const *kv, int n_kv, int batch) {
  char l[200];
  result a, b;
  int bad = kernels(label, kv, n_kv, batch, 1);
  ct_tune("train_fusion=0");
  bad += kernels(label, kv, n_kv, batch, 0);
  snprintf(l, sizeof l, "%s, unfused", label);
  bad += train(l, kv, n_kv, batch, &b);
  ct_tune("train_fusion=1");
  snprintf(l, sizeof l, "%s, fused", label);
  bad += train(l, kv, n_kv, batch, &a);
  snprintf(l, sizeof l, "%s: fused vs unfused (bitwise)", label);
  bad += compare(l, &a, &b, -1);
  CGT_CHECK(a.loss == b.loss, "%s: losses %.9g vs %.9g", l, a.loss, b.loss);
  result_free(&a), result_free(&b);
  return bad;
}

int main(void) {
  setup();
  if (cgt_write_file(model_path, bn_model_yml)) return 2;
  int bad = 0;
  bad += both_ways("ga 2 x batch 8", KV("gradient-accumulation", "2"), 8);
  bad += both_ways("2 replicas x batch 8", KV("replicas", "2"), 8);
  bad += both_ways("2 shards interleaved x ga 4",
                   KV("pipeline-splits", "c2", "pipeline-schedule", "interleaved", "gradient-accumulation", "4"), 4);
  return finish("test_train_fusion_accum", bad);
}
