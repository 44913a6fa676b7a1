/* test_train_recompute.c — --recompute pipeline|auto|all (issue 5 acceptance, docs/training.md
 * "Recomputation"); see train_pipeline_common.h.  On 3 shards (interleaved, accumulation 4)
 * and on 1 shard: bitwise the weights without recomputation, and fewer planned train-tensor
 * bytes per micro-batch (cnnrt_train_plan_info: the stashed activations); on 3 shards with 4
 * micro-batches in flight also a lower planned total (state + stashes + scratch). */
#include "train_pipeline_common.h"

int main(void) {
  setup();
  int bad = 0;
  result pipe, b16, x;
  bad += train("3 shards, interleaved, ga 4", KV("shards", "3", "pipeline-schedule", "interleaved", "gradient-accumulation", "4"), 4,
               &pipe);
  const char *modes[3] = {"pipeline", "auto", "all"};
  for (int k = 0; k < 3; k++) {
    char l[200];
    snprintf(l, sizeof l, "3 shards, interleaved, ga 4, --recompute %s vs none (bitwise)", modes[k]);
    bad += train(l, KV("shards", "3", "pipeline-schedule", "interleaved", "gradient-accumulation", "4", "recompute", modes[k]), 4, &x);
    bad += compare(l, &x, &pipe, -1);
    fprintf(stderr, "  planned train-tensor bytes per micro-batch: --recompute none %lld, %s %lld; planned total %lld, %lld\n",
            pipe.tensor_bytes, modes[k], x.tensor_bytes, pipe.planned_bytes, x.planned_bytes);
    CGT_CHECK(x.tensor_bytes > 0 && x.tensor_bytes < pipe.tensor_bytes, "--recompute %s does not lower the planned bytes", modes[k]);
    CGT_CHECK(x.planned_bytes > 0 && x.planned_bytes < pipe.planned_bytes, "--recompute %s does not lower the planned total", modes[k]);
    result_free(&x);
  }
  bad += train("1 shard, batch 16", NULL, 0, 16, &b16);
  bad += train("1 shard, --recompute pipeline", KV("recompute", "pipeline"), 16, &x);
  bad += compare("1 shard, --recompute pipeline vs none (bitwise)", &x, &b16, -1);
  fprintf(stderr, "  1 shard: planned train-tensor bytes per micro-batch: none %lld, pipeline %lld\n", b16.tensor_bytes, x.tensor_bytes);
  CGT_CHECK(x.tensor_bytes > 0 && x.tensor_bytes < b16.tensor_bytes, "--recompute pipeline on 1 shard: %lld vs %lld bytes",
            x.tensor_bytes, b16.tensor_bytes);
  result_free(&x), result_free(&b16), result_free(&pipe);
  return finish("test_train_recompute", bad);
}
