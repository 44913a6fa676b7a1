/* test_train_pipeline.c — pipelined training over shards (issue 5 acceptance, docs/training.md
 * "Accumulation, replicas, pipelining"); see train_pipeline_common.h.  Every
 * --pipeline-schedule (sequential, grouped, interleaved) on 2 shards (--pipeline-splits) and
 * 3 shards (--shards 3, cost-balanced) with --gradient-accumulation 4, and grouped/interleaved
 * on --shards 2 with 2 replicas x accumulation 2, gives bitwise the weights of the single-shard run with the same
 * accumulation/replicas; 2 shards updating every micro-batch equal 1 shard bitwise.
 * CNNC_TEST_QUICK=1 (quick mode): sequential on 2 shards, grouped on 3, interleaved
 * on 2, 3 and with replicas (every schedule and shard setup once: 9 trainings of 12). */
#include "train_pipeline_common.h"

int main(void) {
  setup();
  int bad = 0;
  result ga4, rep2ga2, b16, x;
  bad += train("1 shard, ga 4 x batch 4", KV("gradient-accumulation", "4"), 4, &ga4);
  bad += train("1 shard, 2 replicas x ga 2 x batch 4", KV("replicas", "2", "gradient-accumulation", "2"), 4, &rep2ga2);
  const char *scheds[3] = {"sequential", "grouped", "interleaved"};
  int quick = cgt_quick(); /* CNNC_TEST_QUICK: sequential 2 shards, grouped 3, interleaved all */
  for (int s = 0; s < 3; s++) {
    char l[200];
    if (!quick || s != 1) {
      snprintf(l, sizeof l, "2 shards (split c3), %s, ga 4 vs 1 shard (bitwise)", scheds[s]);
      bad += train(l, KV("pipeline-splits", "c3", "pipeline-schedule", scheds[s], "gradient-accumulation", "4"), 4, &x);
      bad += compare(l, &x, &ga4, -1);
      result_free(&x);
    }
    if (!quick || s != 0) {
      snprintf(l, sizeof l, "--shards 3, %s, ga 4 vs 1 shard (bitwise)", scheds[s]);
      bad += train(l, KV("shards", "3", "pipeline-schedule", scheds[s], "gradient-accumulation", "4"), 4, &x);
      bad += compare(l, &x, &ga4, -1);
      result_free(&x);
    }
    if (s == 0 || (quick && s == 1)) continue; /* replicas: the pipelined schedules only (time) */
    snprintf(l, sizeof l, "--shards 2, %s, 2 replicas x ga 2 vs 1 shard (bitwise)", scheds[s]);
    bad += train(l, KV("shards", "2", "pipeline-schedule", scheds[s], "replicas", "2", "gradient-accumulation", "2"), 4, &x);
    bad += compare(l, &x, &rep2ga2, -1);
    result_free(&x);
  }
  bad += train("1 shard, batch 16", NULL, 0, 16, &b16);
  bad += train("3 shards (split c2, d1), batch 16", KV("pipeline-splits", "c2", "pipeline-splits", "d1"), 16, &x);
  bad += compare("3 shards, batch 16 vs 1 shard (bitwise)", &x, &b16, -1);
  result_free(&x), result_free(&b16), result_free(&ga4), result_free(&rep2ga2);
  return finish("test_train_pipeline", bad);
}
