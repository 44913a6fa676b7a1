/* rt_error.c — the thread-local error message, status names and the version string.
 * This is the library's only mutable state outside the model handles. */
#include <stdio.h>

#include "cnnc_config.h"
#include "rt_internal.h"

/* The version string names the ABI literally; keep it in step with cnnc_abi.h. */
_Static_assert(CNNC_ABI_VERSION == 1u, "update the ABI number in cnnrt_version()");

static _Thread_local char rt_error_msg[1024];

cnnrt_status rt_fail(cnnrt_status s, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(rt_error_msg, sizeof rt_error_msg, fmt, ap);
  va_end(ap);
  return s;
}

void rt_clear_error(void) { rt_error_msg[0] = '\0'; }

CNNRT_API const char *cnnrt_last_error(void) { return rt_error_msg; }

CNNRT_API const char *cnnrt_status_name(cnnrt_status s) {
  switch (s) {
  case CNNRT_OK: return "OK";
  case CNNRT_INVALID_ARGUMENT: return "INVALID_ARGUMENT";
  case CNNRT_IO: return "IO";
  case CNNRT_BAD_MODEL: return "BAD_MODEL";
  case CNNRT_ABI_MISMATCH: return "ABI_MISMATCH";
  case CNNRT_SHAPE_MISMATCH: return "SHAPE_MISMATCH";
  case CNNRT_OUT_OF_MEMORY: return "OUT_OF_MEMORY";
  case CNNRT_UNSUPPORTED: return "UNSUPPORTED";
  case CNNRT_INTERNAL: return "INTERNAL";
  }
  return "UNKNOWN";
}

CNNRT_API const char *cnnrt_version(void) { return CNNC_VERSION " (model ABI 1)"; }
