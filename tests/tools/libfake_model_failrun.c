/* libfake_model_failrun.c — variant of the fake model (see libfake_model.c). */
#define FAKE_VARIANT FAKE_FAILRUN
#include "libfake_model.c"
