/* libfake_train_badstate.c — libfake_train.c with overlapping state slices (refused at open). */
#define FAKE_TRAIN_VARIANT 2
#include "libfake_train.c"
