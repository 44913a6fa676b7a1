/* libfake_model_badio.c — variant of the fake model (see libfake_model.c). */
#define FAKE_VARIANT FAKE_BADIO
#include "libfake_model.c"
