/* libfake_model_size0.c — variant of the fake model (see libfake_model.c). */
#define FAKE_VARIANT FAKE_SIZE0
#include "libfake_model.c"
