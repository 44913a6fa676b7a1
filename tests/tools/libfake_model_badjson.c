/* libfake_model_badjson.c — variant of the fake model (see libfake_model.c). */
#define FAKE_VARIANT FAKE_BADJSON
#include "libfake_model.c"
