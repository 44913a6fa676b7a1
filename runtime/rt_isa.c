/* rt_isa.c — refuses a model compiled for CPU features this CPU lacks (issue 4: a model built
 * with `cnnc --target-cpu znver4` runs vdpbf16ps, which a Zen 3 cannot execute: SIGILL in the
 * first kernel).  The model exports `cnnc_isa_v1` (codegen/cg_isa.h), the comma-separated x86
 * features its kernels may use; a model without the symbol (older cnnc) is not checked. */
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#if defined(__x86_64__)
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

#include "rt_internal.h"

cnnrt_status rt_isa_check(void *dl, const char *path);

#if defined(__x86_64__)
/* AMX (amx-tile, amx-bf16, amx-int8): CPUID.(7,0):EDX bits 24, 22 and 25, and the OS's XSAVE of the tile
 * state (XCR0 bits 17 XTILECFG and 18 XTILEDATA). */
static int amx_cpu(int bit) {
  unsigned a, b, c, d;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d) || !((d >> bit) & 1)) return 0;
  if (!__get_cpuid(1, &a, &b, &c, &d) || !((c >> 27) & 1)) return 0; /* OSXSAVE */
  unsigned lo, hi;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (lo & (3u << 17)) == (3u << 17);
}
#endif

/* 1 supported, 0 not, -1 a name this runtime does not know */
static int cpu_has(const char *name, size_t n) {
#if defined(__x86_64__)
  if (n == 8 && !strncmp(name, "amx-tile", 8)) return amx_cpu(24);
  if (n == 8 && !strncmp(name, "amx-bf16", 8)) return amx_cpu(22);
  if (n == 8 && !strncmp(name, "amx-int8", 8)) return amx_cpu(25);
#endif
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
#define F(s)                                                 \
  if (n == sizeof(s) - 1 && !strncmp(name, s, n)) return __builtin_cpu_supports(s) != 0;
  F("avx") F("avx2") F("fma") F("f16c") F("avx512f") F("avx512bw") F("avx512vl") F("avx512dq") F("avx512bf16") F("avx512vnni")
#undef F
  return -1;
#else
  (void)name, (void)n;
  return 0;
#endif
}

cnnrt_status rt_isa_check(void *dl, const char *path) {
  const char *need = dlsym(dl, "cnnc_isa_v1");
  if (!need) return CNNRT_OK;
  char missing[256] = "", unknown[256] = "";
  for (const char *p = need; *p;) {
    size_t n = strcspn(p, ",");
    if (n > 0 && n < 32) {
      int h = cpu_has(p, n);
      char *dst = h < 0 ? unknown : missing;
      size_t used = strlen(dst);
      if (h != 1 && used + n + 3 < sizeof missing) snprintf(dst + used, sizeof missing - used, "%s%.*s", used ? ", " : "", (int)n, p);
    }
    p += n + (p[n] == ',');
  }
  if (missing[0])
    return rt_fail(CNNRT_UNSUPPORTED, "%s: compiled for CPU features this CPU lacks: %s (the model needs %s; recompile it "
                   "for this machine, e.g. without --target-cpu)", path, missing, need);
  if (unknown[0])
    return rt_fail(CNNRT_UNSUPPORTED, "%s: needs CPU features this runtime cannot check: %s (the model needs %s)", path,
                   unknown, need);
#if defined(__x86_64__)
  /* Linux (5.16 on) enables the AMX tile data per process on request; without it the first
   * tile instruction raises SIGILL.  Asked once per process (a repeat is harmless). */
  if (strstr(need, "amx-tile") && syscall(SYS_arch_prctl, 0x1023 /* ARCH_REQ_XCOMP_PERM */, 18 /* XFEATURE_XTILEDATA */) != 0)
    return rt_fail(CNNRT_UNSUPPORTED, "%s: the kernel refused this process the AMX tile state (arch_prctl "
                   "ARCH_REQ_XCOMP_PERM: %s); the model runs its convolutions on AMX tiles (recompile with --tune amx=0)",
                   path, strerror(errno));
#endif
  return CNNRT_OK;
}
