/* libfake_model_orphan.c — variant of the fake model (see libfake_model.c). */
#define FAKE_VARIANT FAKE_ORPHAN
#include "libfake_model.c"
