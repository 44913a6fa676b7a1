/* test_train_pipeline_bn.c — pipelined training and recomputation of a batchnorm model with a
 * residual add (batch statistics; the forward stages update the running statistics in the
 * state buffer), see train_pipeline_common.h: 2 shards, grouped and interleaved, with
 * --gradient-accumulation 4 give bitwise the weights of the 1-shard run; --recompute pipeline
 * (the training batchnorm itself is never recomputed) too, with fewer planned train-tensor
 * bytes per micro-batch. */
#include "train_pipeline_common.h"

int main(void) {
  setup();
  FILE *f = fopen(model_path, "w");
  if (!f || fputs(bn_model_yml, f) < 0 || fclose(f)) return 2;
  int bad = 0;
  result bn, x;
  const char *scheds[3] = {"sequential", "grouped", "interleaved"};
  bad += train("bn model, 1 shard, ga 4", KV("gradient-accumulation", "4"), 4, &bn);
  for (int s = 1; s < 3; s++) {
    char l[200];
    snprintf(l, sizeof l, "bn model, 2 shards (split c2), %s, ga 4 vs 1 shard (bitwise)", scheds[s]);
    bad += train(l, KV("pipeline-splits", "c2", "pipeline-schedule", scheds[s], "gradient-accumulation", "4"), 4, &x);
    bad += compare(l, &x, &bn, -1);
    if (s == 2) {
      result rc;
      snprintf(l, sizeof l, "bn model, 2 shards, interleaved, ga 4, --recompute pipeline vs 1 shard (bitwise)");
      bad += train(l, KV("pipeline-splits", "c2", "pipeline-schedule", "interleaved", "gradient-accumulation", "4", "recompute",
                         "pipeline"),
                   4, &rc);
      bad += compare(l, &rc, &bn, -1);
      fprintf(stderr, "  planned train-tensor bytes per micro-batch: none %lld, pipeline %lld\n", x.tensor_bytes, rc.tensor_bytes);
      CGT_CHECK(rc.tensor_bytes > 0 && rc.tensor_bytes < x.tensor_bytes, "--recompute pipeline does not lower the planned bytes");
      result_free(&rc);
    }
    result_free(&x);
  }
  result_free(&bn);
  return finish("test_train_pipeline_bn", bad);
}
