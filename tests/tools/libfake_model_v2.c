/* libfake_model_v2.c — variant of the fake model (see libfake_model.c). */
#define FAKE_VARIANT FAKE_V2
#include "libfake_model.c"
