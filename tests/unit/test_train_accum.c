/* test_train_accum.c — --gradient-accumulation and --replicas (issue 5, docs/training.md
 * "Accumulation, replicas, pipelining"); see train_pipeline_common.h:
 *   - accumulation 4 x batch 4 vs batch 16 and vs the interpreter (tolerance 1e-4);
 *   - 2 replicas x batch 8 vs accumulation 2 x batch 8 (bitwise), vs batch 16 (tolerance),
 *     run to run and replicas one after another vs in parallel (bitwise);
 *   - 2 replicas x accumulation 2 x batch 4: parallel vs sequential (bitwise), vs batch 16. */
#include "train_pipeline_common.h"

int main(void) {
  setup();
  int bad = 0;
  result b16, ref, ga4, ga2, rep2, rep2b, rep2ga2, rep2ga2p;
  bad += train("batch 16", NULL, 0, 16, &b16);
  bad += interp(&ref);
  bad += compare("batch 16 vs interpreter", &b16, &ref, 1e-4);
  bad += train("ga 4 x batch 4", KV("gradient-accumulation", "4"), 4, &ga4);
  bad += compare("ga 4 x batch 4 vs batch 16", &ga4, &b16, 1e-4);
  bad += compare("ga 4 x batch 4 vs interpreter", &ga4, &ref, 1e-4);
  bad += train("ga 2 x batch 8", KV("gradient-accumulation", "2"), 8, &ga2);
  bad += train("2 replicas x batch 8", KV("replicas", "2"), 8, &rep2);
  bad += compare("2 replicas x batch 8 vs ga 2 x batch 8 (bitwise)", &rep2, &ga2, -1);
  bad += compare("2 replicas x batch 8 vs batch 16", &rep2, &b16, 1e-4);
  bad += train("2 replicas x batch 8 again", KV("replicas", "2"), 8, &rep2b);
  bad += compare("2 replicas run to run (bitwise)", &rep2, &rep2b, -1);
  result_free(&rep2b);
  replica_mode = CNNRT_REPLICA_PARALLEL;
  bad += train("2 replicas x batch 8, parallel", KV("replicas", "2"), 8, &rep2b);
  bad += compare("2 replicas parallel vs one after another (bitwise)", &rep2b, &rep2, -1);
  bad += train("2 replicas x ga 2 x batch 4, parallel", KV("replicas", "2", "gradient-accumulation", "2"), 4, &rep2ga2p);
  replica_mode = CNNRT_REPLICA_SHARED;
  bad += train("2 replicas x ga 2 x batch 4", KV("replicas", "2", "gradient-accumulation", "2"), 4, &rep2ga2);
  bad += compare("2 replicas x ga 2 parallel vs sequential (bitwise)", &rep2ga2p, &rep2ga2, -1);
  bad += compare("2 replicas x ga 2 x batch 4 vs batch 16", &rep2ga2, &b16, 1e-4);
  result_free(&b16), result_free(&ref), result_free(&ga4), result_free(&ga2), result_free(&rep2), result_free(&rep2b);
  result_free(&rep2ga2), result_free(&rep2ga2p);
  return finish("test_train_accum", bad);
}
