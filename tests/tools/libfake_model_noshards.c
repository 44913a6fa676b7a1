/* libfake_model_noshards.c — variant of the fake model (see libfake_model.c). */
#define FAKE_VARIANT FAKE_NOSHARDS
#include "libfake_model.c"
