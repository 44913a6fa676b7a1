/* libfake_model_bytes.c — variant of the fake model (see libfake_model.c). */
#define FAKE_VARIANT FAKE_BYTES
#include "libfake_model.c"
