/* libfake_model_dupwrite.c — variant of the fake model (see libfake_model.c). */
#define FAKE_VARIANT FAKE_DUPWRITE
#include "libfake_model.c"
