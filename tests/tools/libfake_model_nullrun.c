/* libfake_model_nullrun.c — variant of the fake model (see libfake_model.c). */
#define FAKE_VARIANT FAKE_NULLRUN
#include "libfake_model.c"
