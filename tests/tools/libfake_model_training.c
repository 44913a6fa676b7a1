/* libfake_model_training.c — variant of the fake model (see libfake_model.c). */
#define FAKE_VARIANT FAKE_TRAINING
#include "libfake_model.c"
