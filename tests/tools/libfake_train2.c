/* libfake_train2.c — 2-shard, f32-input, grad_accum 2 variant of libfake_train.c. */
#define FAKE_TRAIN_VARIANT 1
#include "libfake_train.c"
