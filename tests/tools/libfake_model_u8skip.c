/* libfake_model_u8skip.c — variant of the fake model (see libfake_model.c). */
#define FAKE_VARIANT FAKE_U8SKIP
#include "libfake_model.c"
