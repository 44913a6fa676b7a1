/* libfake_model_magic.c — variant of the fake model (see libfake_model.c). */
#define FAKE_VARIANT FAKE_MAGIC
#include "libfake_model.c"
