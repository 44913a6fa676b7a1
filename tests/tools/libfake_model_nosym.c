/* libfake_model_nosym.c — variant of the fake model (see libfake_model.c). */
#define FAKE_VARIANT FAKE_NOSYM
#include "libfake_model.c"
