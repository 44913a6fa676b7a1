/* test_isa_needs.c — the CPU features a compiled model declares (cnnc_isa_v1, codegen/cg_isa.h,
 * cg_target_isa_needs): probed from the LLVM backend for --target-cpu / --target-features, so
 * the runtime (runtime/rt_isa.c) can refuse a model this CPU cannot run.  The AVX-512 subsets
 * LLVM uses for znver4 / sapphirerapids / skylake-avx512 (avx512bw, avx512dq, avx512vl) must be
 * listed for those CPUs and not for a bare +avx512f, an AVX2 or an SSE target; each subset is
 * probed on its own (+avx512f,+avx512vl gives vl without bw/dq). */
#include <stdio.h>
#include <string.h>

#include "codegen/cg_isa.h"

#include "check.h"

/* whether name is one of the comma-separated items of list */
static int has(const char *list, const char *name) {
  size_t n = strlen(name);
  for (const char *p = list; *p;) {
    size_t k = strcspn(p, ",");
    if (k == n && !strncmp(p, name, n)) return 1;
    p += k + (p[k] == ',');
  }
  return 0;
}

typedef struct isa_case {
  const char *cpu, *features;
  const char *want, *not_want; /* comma-separated: must be listed / must not be */
} isa_case;

static const isa_case cases[] = {
    {"znver4", NULL, "avx,avx2,fma,f16c,avx512f,avx512bw,avx512dq,avx512vl,avx512bf16,avx512vnni", "amx-tile,amx-bf16,amx-int8"},
    {"sapphirerapids", NULL, "avx,avx2,fma,f16c,avx512f,avx512bw,avx512dq,avx512vl,avx512bf16,avx512vnni,amx-tile,amx-bf16,amx-int8", ""},
    {"sapphirerapids", "-amx-bf16", "avx512vnni,amx-tile,amx-int8", "amx-bf16"},
    {"sapphirerapids", "-amx-int8", "avx512vnni,amx-tile,amx-bf16", "amx-int8"},
    {"sapphirerapids", "-amx-tile", "avx512vnni", "amx-tile,amx-bf16,amx-int8"},
    {"skylake-avx512", NULL, "avx,avx2,fma,f16c,avx512f,avx512bw,avx512dq,avx512vl", "avx512bf16,avx512vnni,amx-tile"},
    {"x86-64-v4", NULL, "avx,avx2,fma,f16c,avx512f,avx512bw,avx512dq,avx512vl", "avx512bf16,avx512vnni,amx-tile"},
    {"x86-64-v3", NULL, "avx,avx2,fma,f16c", "avx512f,avx512bw,avx512dq,avx512vl,avx512bf16"},
    {"znver3", NULL, "avx,avx2,fma,f16c", "avx512f,avx512bw,avx512dq,avx512vl,avx512bf16"},
    {"sandybridge", NULL, "avx", "avx2,fma,f16c,avx512f"}, /* AVX1: 256-bit loads, no 256-bit integer add */
    {"x86-64", NULL, "", "avx,avx2,fma,f16c,avx512f,avx512bw,avx512dq,avx512vl,avx512bf16"},
    {NULL, "+avx,+avx2,+fma,+avx512f", "avx,avx2,fma,avx512f", "avx512bw,avx512dq,avx512vl,avx512bf16"},
    {NULL, "+avx,+avx2,+fma,+avx512f,+avx512vl", "avx512f,avx512vl", "avx512bw,avx512dq"},
    {NULL, "+avx,+avx2,+fma,+avx512f,+avx512bw", "avx512f,avx512bw", "avx512dq,avx512vl"},
    {NULL, "+avx,+avx2,+fma,+avx512f,+avx512dq", "avx512f,avx512dq", "avx512bw,avx512vl"},
    {"znver4", "-avx512bw,-avx512vl", "avx512f,avx512dq", "avx512bw,avx512vl"},
};

int main(void) {
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    const isa_case *k = &cases[i];
    char label[160];
    snprintf(label, sizeof label, "cpu %s features %s", k->cpu ? k->cpu : "-", k->features ? k->features : "-");
    cg_target t;
    ir_diag d = {0};
    if (cg_target_init(&t, "x86_64-unknown-linux-gnu", k->cpu, k->features, &d)) {
      ir_diag_print(&d, stderr);
      CHECK(0, "%s: target init failed", label);
      continue;
    }
    char needs[256];
    cg_target_isa_needs(&t, needs, sizeof needs);
    fprintf(stderr, "%-50s -> %s\n", label, needs);
    for (int pass = 0; pass < 2; pass++) {
      const char *list = pass ? k->not_want : k->want;
      for (const char *p = list; *p;) {
        size_t n = strcspn(p, ",");
        char name[32];
        snprintf(name, sizeof name, "%.*s", (int)n, p);
        if (pass) CHECK(!has(needs, name), "%s: needs '%s' lists %s", label, needs, name);
        else CHECK(has(needs, name), "%s: needs '%s' lacks %s", label, needs, name);
        p += n + (p[n] == ',');
      }
    }
    cg_target_dispose(&t);
  }
  fprintf(stderr, "test_isa_needs: %d checks, %d failure(s)\n", g_checks, g_failures);
  return g_failures != 0;
}
