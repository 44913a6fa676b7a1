/* libfake_model_abi99.c — variant of the fake model (see libfake_model.c). */
#define FAKE_VARIANT FAKE_ABI99
#include "libfake_model.c"
