/* libfake_model_batchdim.c — variant of the fake model (see libfake_model.c). */
#define FAKE_VARIANT FAKE_BATCHDIM
#include "libfake_model.c"
