/* cg_target.c — target selection: the host (LLVMGetHostCPUName/Features) or a cpu/feature/
 * triple override, the resulting vector width (probed by compiling a <16 x float> add) and
 * the ISA-dependent tile budget.  With cg_isa.c the only codegen files that name ISAs. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <llvm-c/Support.h>
#include <llvm-c/Target.h>

#include "codegen/cg_budget.h"
#include "codegen/cg_internal.h"
#include "codegen/cg_isa.h"

/* LLVM's machine scheduler builds a dependence graph per scheduling region, and keeps every
 * load and store of a region in its memory chains until there are -dag-maps-huge-region of
 * them (default 1000): on the long unrolled blocks of the 16-lane kernels that graph grows
 * quadratically (SUnit::addPred, addChainDependencies and mayAlias were 22 % of cnnc's CPU
 * time on ResNet-50).  200 (tune sched_huge_region, 0: LLVM's default) folds the chains
 * earlier.  LLVM's options are process-wide: the first compile of a process sets them.
 * docs/codegen.md, "Compile time". */
void cg_llvm_options(int huge_region) {
  static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
  static int done;
  pthread_mutex_lock(&mu);
  if (!done && huge_region > 0) {
    char opt[64];
    snprintf(opt, sizeof opt, "-dag-maps-huge-region=%d", huge_region);
    const char *argv[] = {"cnnc", opt};
    LLVMParseCommandLineOptions(2, argv, NULL);
  }
  done = 1;
  pthread_mutex_unlock(&mu);
}

static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static void init_llvm(void) {
  LLVMInitializeAllTargetInfos();
  LLVMInitializeAllTargets();
  LLVMInitializeAllTargetMCs();
  LLVMInitializeAllAsmPrinters();
}

static int is_x86(const cg_target *t) { return strncmp(t->triple, "x86_64", 6) == 0 || t->triple[0] == 'i'; }

/* LLVM 19: 512-bit registers need +evex512 next to +avx512f in a hand-written string; an
 * x86_64 triple needs +64bit (a 32-bit --target-cpu would otherwise abort in codegen). */
static char *fix_features(const char *f, const char *triple) {
  size_t n = strlen(f);
  char *s = malloc(n + 32);
  if (!s) abort();
  strcpy(s, f);
  if (strstr(f, "+avx512f") && !strstr(f, "evex512")) strcat(s, ",+evex512");
  if (strncmp(triple, "x86_64", 6) == 0 && !strstr(f, "64bit")) strcat(s, ",+64bit");
  if (s[0] == ',') memmove(s, s + 1, strlen(s));
  char *r = LLVMCreateMessage(s);
  free(s);
  return r;
}

/* Compiles `store (OP <16 x float>)` for the target and returns its assembly (malloc'd,
 * NULL on failure).  bf16 1: OP = fptrunc to <16 x bfloat>; 2: llvm.fma(x, x, y); 3: add of
 * <16 x i32>; 4: fptrunc to <16 x half>; 0: fadd; the AVX-512 subsets: 5: add of <32 x i16>
 * (one zmm vpaddw needs avx512bw), 6: mul of <8 x i64> (zmm vpmullq: avx512dq), 7: llvm.abs of
 * <4 x i64> (ymm vpabsq: avx512vl; avx512f alone widens it to zmm). */
static char *probe_asm(const cg_target *t, int bf16) {
  LLVMContextRef ctx = LLVMContextCreate();
  LLVMModuleRef m = LLVMModuleCreateWithNameInContext("probe", ctx);
  LLVMTargetDataRef td = LLVMCreateTargetDataLayout(t->tm);
  LLVMSetModuleDataLayout(m, td);
  LLVMSetTarget(m, t->triple);
  LLVMTypeRef ptr = LLVMPointerTypeInContext(ctx, 0), v16 = LLVMVectorType(LLVMFloatTypeInContext(ctx), 16);
  LLVMTypeRef params[2] = {ptr, ptr};
  LLVMValueRef f = LLVMAddFunction(m, "probe", LLVMFunctionType(LLVMVoidTypeInContext(ctx), params, 2, 0));
  /* as for kernels: CPUs tuned for 256-bit vectors (skylake-avx512) still get zmm */
  LLVMAddAttributeAtIndex(f, LLVMAttributeFunctionIndex,
                          LLVMCreateStringAttribute(ctx, "min-legal-vector-width", 22, "512", 3));
  LLVMBuilderRef b = LLVMCreateBuilderInContext(ctx);
  LLVMPositionBuilderAtEnd(b, LLVMAppendBasicBlockInContext(ctx, f, "e"));
  LLVMValueRef x = LLVMBuildLoad2(b, v16, LLVMGetParam(f, 0), "x");
  if (bf16 >= 5) { /* the AVX-512 subset probes: integer vectors */
    int bits = bf16 == 5 ? 16 : 64, lanes = bf16 == 5 ? 32 : bf16 == 6 ? 8 : 4;
    LLVMTypeRef it = LLVMIntTypeInContext(ctx, (unsigned)bits), vt = LLVMVectorType(it, (unsigned)lanes);
    LLVMValueRef xi = LLVMBuildLoad2(b, vt, LLVMGetParam(f, 1), "xi"), r;
    if (bf16 == 5) r = LLVMBuildAdd(b, xi, xi, "s");
    else if (bf16 == 6) r = LLVMBuildMul(b, xi, xi, "s");
    else {
      LLVMTypeRef fp[2] = {vt, LLVMInt1TypeInContext(ctx)}, ft = LLVMFunctionType(vt, fp, 2, 0);
      LLVMValueRef args[2] = {xi, LLVMConstInt(LLVMInt1TypeInContext(ctx), 0, 0)};
      r = LLVMBuildCall2(b, ft, LLVMAddFunction(m, "llvm.abs.v4i64", ft), args, 2, "s");
    }
    LLVMBuildStore(b, r, LLVMGetParam(f, 0));
  } else if (bf16 == 3) { /* integer add on 16 x i32: AVX2 does it in ymm */
    LLVMTypeRef i16v = LLVMVectorType(LLVMInt32TypeInContext(ctx), 16);
    LLVMValueRef xi = LLVMBuildLoad2(b, i16v, LLVMGetParam(f, 1), "xi");
    LLVMBuildStore(b, LLVMBuildAdd(b, xi, xi, "s"), LLVMGetParam(f, 0));
  } else if (bf16 == 4) { /* f32 -> f16: F16C's vcvtps2ph */
    LLVMTypeRef ht = LLVMVectorType(LLVMHalfTypeInContext(ctx), 16);
    LLVMBuildStore(b, LLVMBuildFPTrunc(b, x, ht, "h"), LLVMGetParam(f, 1));
  } else if (bf16 == 2) {
    LLVMValueRef y = LLVMBuildLoad2(b, v16, LLVMGetParam(f, 1), "y"), args[3] = {x, x, y};
    LLVMTypeRef fp[3] = {v16, v16, v16}, ft = LLVMFunctionType(v16, fp, 3, 0);
    LLVMValueRef fma = LLVMAddFunction(m, "llvm.fma.v16f32", ft);
    LLVMBuildStore(b, LLVMBuildCall2(b, ft, fma, args, 3, "f"), LLVMGetParam(f, 0));
  } else if (bf16) {
    LLVMTypeRef bt = LLVMVectorType(LLVMBFloatTypeInContext(ctx), 16);
    LLVMBuildStore(b, LLVMBuildFPTrunc(b, x, bt, "h"), LLVMGetParam(f, 1));
  } else {
    LLVMValueRef y = LLVMBuildLoad2(b, v16, LLVMGetParam(f, 1), "y");
    LLVMBuildStore(b, LLVMBuildFAdd(b, x, y, "s"), LLVMGetParam(f, 0));
  }
  LLVMBuildRetVoid(b);
  LLVMDisposeBuilder(b);
  LLVMMemoryBufferRef buf = NULL;
  char *err = NULL, *z = NULL;
  if (!LLVMTargetMachineEmitToMemoryBuffer(t->tm, m, LLVMAssemblyFile, &err, &buf)) {
    const char *s = LLVMGetBufferStart(buf);
    size_t n = LLVMGetBufferSize(buf);
    z = malloc(n + 1);
    if (!z) abort();
    memcpy(z, s, n);
    z[n] = 0;
    LLVMDisposeMemoryBuffer(buf);
  } else {
    LLVMDisposeMessage(err);
  }
  LLVMDisposeTargetData(td);
  LLVMDisposeModule(m);
  LLVMContextDispose(ctx);
  return z;
}

/* The widest register the fadd probe uses: zmm 16, ymm 8, else 4. */
static int probe_vec_width(const cg_target *t) {
  if (!is_x86(t)) return 4;
  char *z = probe_asm(t, 0);
  int w = !z ? 4 : strstr(z, "zmm") ? 16 : strstr(z, "ymm") ? 8 : 4;
  free(z);
  return w;
}

/* avx512bf16 is in the feature string only when it was given or is the host's; a
 * --target-cpu's own features are not, so ask the backend: with avx512bf16 an f32 -> bf16
 * vector conversion is one vcvtneps2bf16 (without it, calls to __truncsfbf2). */
static int probe_avx512bf16(const cg_target *t) {
  if (!is_x86(t) || t->vec_f32 != 16 || strstr(t->features, "-avx512bf16")) return 0;
  char *z = probe_asm(t, 1);
  int ok = z && strstr(z, "vcvtneps2bf16") != NULL;
  free(z);
  return ok;
}

/* AMX (amx-tile and amx-bf16): in a host's feature string as +/- (a host whose CPU model has
 * AMX but whose hypervisor hides it says -amx-bf16); a --target-cpu's own features are not in
 * its string and cannot be probed by compiling (a tile intrinsic the target lacks aborts
 * instruction selection), so the LLVM 19 CPUs whose definitions include AMX-BF16 are listed
 * here; --target-features -amx-bf16 (or -amx-tile) turns it off, +amx-tile,+amx-bf16 on. */
static int detect_amx(const cg_target *t, const char *f) { /* f: "amx-bf16" or "amx-int8" */
  char minus[16], plus[16];
  snprintf(minus, sizeof minus, "-%s", f), snprintf(plus, sizeof plus, "+%s", f);
  if (!is_x86(t) || t->vec_f32 != 16 || strstr(t->features, minus) || strstr(t->features, "-amx-tile")) return 0;
  if (strstr(t->features, plus) && strstr(t->features, "+amx-tile")) return 1;
  static const char *const amx_cpus[] = {"sapphirerapids", "emeraldrapids", "graniterapids", "graniterapids-d"};
  for (size_t i = 0; i < sizeof amx_cpus / sizeof amx_cpus[0]; i++)
    if (!strcmp(t->cpu, amx_cpus[i]) && !strstr(t->features, f)) return 1; /* a host lists it as + or - */
  return 0;
}

/* avx512vnni, as AMX above: the host's +/-, a given +avx512vnni, or a --target-cpu whose LLVM 19
 * definition has it (an intrinsic the target lacks would abort instruction selection). */
static int detect_avx512vnni(const cg_target *t) {
  if (!is_x86(t) || t->vec_f32 != 16 || strstr(t->features, "-avx512vnni")) return 0;
  if (strstr(t->features, "+avx512vnni")) return 1;
  static const char *const cpus[] = {"cascadelake", "cooperlake", "icelake-client", "icelake-server", "tigerlake",
                                     "rocketlake", "sapphirerapids", "emeraldrapids", "graniterapids", "graniterapids-d",
                                     "znver4", "znver5"};
  for (size_t i = 0; i < sizeof cpus / sizeof cpus[0]; i++)
    if (!strcmp(t->cpu, cpus[i])) return 1;
  return 0;
}

/* LLVM reports an unknown CPU or feature only as a warning on stderr (and may abort later),
 * so target creation runs with stderr captured and the warning becomes our error. */
typedef struct err_capture { int saved; FILE *tmp; } err_capture;

static void capture_begin(err_capture *c) {
  fflush(stderr);
  c->tmp = tmpfile();
  c->saved = c->tmp ? dup(2) : -1;
  if (c->saved >= 0) dup2(fileno(c->tmp), 2);
}

/* Restores stderr; copies the first captured line into buf (empty if none). */
static void capture_end(err_capture *c, char *buf, size_t n) {
  buf[0] = 0;
  fflush(stderr);
  if (c->saved < 0) return;
  dup2(c->saved, 2);
  close(c->saved);
  rewind(c->tmp);
  if (!fgets(buf, (int)n, c->tmp)) buf[0] = 0;
  char *nl = strchr(buf, '\n');
  if (nl) *nl = 0;
  fclose(c->tmp);
}

LLVMTargetMachineRef cg_target_clone_tm(const cg_target *t, int opt_level) {
  LLVMTargetRef T = NULL;
  char *err = NULL;
  if (LLVMGetTargetFromTriple(t->triple, &T, &err)) {
    LLVMDisposeMessage(err);
    return NULL;
  }
  LLVMCodeGenOptLevel lv = opt_level <= 0   ? LLVMCodeGenLevelNone
                           : opt_level == 1 ? LLVMCodeGenLevelLess
                           : opt_level == 2 ? LLVMCodeGenLevelDefault
                                            : LLVMCodeGenLevelAggressive;
  return LLVMCreateTargetMachine(T, t->triple, t->cpu, t->features, lv, LLVMRelocPIC, LLVMCodeModelDefault);
}

int cg_target_init(cg_target *t, const char *triple, const char *cpu, const char *features, ir_diag *d) {
  ir_loc loc = {0};
  pthread_once(&init_once, init_llvm);
  memset(t, 0, sizeof *t);
  int has_triple = triple && *triple, has_cpu = cpu && *cpu, has_feat = features && *features;
  char *def = LLVMGetDefaultTargetTriple();
  t->triple = LLVMNormalizeTargetTriple(has_triple ? triple : def);
  int host = !has_cpu && !has_feat && strcmp(t->triple, def) == 0;
  LLVMDisposeMessage(def);
  if (host) {
    t->cpu = LLVMGetHostCPUName();
    t->features = LLVMGetHostCPUFeatures();
  } else {
    /* a feature string alone starts from the generic CPU, so it is the whole ISA */
    t->cpu = LLVMCreateMessage(has_cpu ? cpu : "generic");
    t->features = fix_features(has_feat ? features : "", t->triple);
  }
  LLVMTargetRef T = NULL;
  char *err = NULL;
  if (LLVMGetTargetFromTriple(t->triple, &T, &err)) {
    ir_diag_set(d, loc, NULL, "unknown target triple '%s': %s", t->triple, err ? err : "");
    LLVMDisposeMessage(err);
    cg_target_dispose(t);
    return -1;
  }
  err_capture cap;
  char warn[300];
  capture_begin(&cap);
  t->tm = cg_target_clone_tm(t, 2);
  capture_end(&cap, warn, sizeof warn);
  if (!t->tm || strstr(warn, "not a recognized")) {
    ir_diag_set(d, loc, NULL, "target %s, cpu '%s', features '%s': %s", t->triple, t->cpu, t->features,
                warn[0] ? warn : "cannot create a target machine");
    cg_target_dispose(t);
    return -1;
  }
  t->vec_f32 = probe_vec_width(t);
  t->has_avx512bf16 = probe_avx512bf16(t);
  t->has_amx_bf16 = detect_amx(t, "amx-bf16");
  t->has_amx_int8 = detect_amx(t, "amx-int8");
  t->has_avx512vnni = detect_avx512vnni(t);
  cg_cache_sizes_detect(t, &t->cache);
  t->core = cg_core_of(t->cpu);
  return 0;
}

static const cg_core cores[] = {
#define CORE(id, cpus, bf16, source) {#id, cpus, bf16, source},
#include "codegen/cores.def"
};

const cg_core *cg_core_of(const char *cpu) {
  size_t n = cpu ? strlen(cpu) : 0;
  for (size_t i = 0; n && i < sizeof cores / sizeof cores[0]; i++)
    for (const char *p = cores[i].cpus; *p;) { /* one comma-separated name at a time */
      size_t len = strcspn(p, ",");
      if (len == n && !strncmp(p, cpu, n)) return &cores[i];
      p += len + (p[len] == ',');
    }
  return NULL;
}

void cg_target_dispose(cg_target *t) {
  if (t->tm) LLVMDisposeTargetMachine(t->tm);
  if (t->triple) LLVMDisposeMessage(t->triple);
  if (t->cpu) LLVMDisposeMessage(t->cpu);
  if (t->features) LLVMDisposeMessage(t->features);
  memset(t, 0, sizeof *t);
}

const char *cg_isa_name(const cg_target *t) {
  if (!is_x86(t)) return "generic";
  return t->vec_f32 >= 16 ? "avx512" : t->vec_f32 == 8 ? "avx2" : "sse";
}

int cg_has_f16c(const cg_target *t) {
  if (t->triple && strncmp(t->triple, "x86_64", 6) && strncmp(t->triple, "i386", 4) && strncmp(t->triple, "i686", 4))
    return 1; /* other targets (AArch64 ...) convert natively */
  return t->features && strstr(t->features, "+f16c") != NULL;
}

int cg_acc_budget(const cg_target *t) {
  return is_x86(t) && t->vec_f32 >= 16 ? 24 : 12;  /* 32 zmm vs 16 ymm/xmm registers */
}

/* ---- bf16 dot products (issue 4; conv/bf16.c, docs/matrix.md "bf16 kernels") ---------- */

/* 2: vdpbf16ps is executable on the target (has_avx512bf16: +avx512bf16 with 512-bit vectors);
 * 1: tune bf16_emulate=1 on any other x86 target (the same kernels,
 * each vdpbf16ps emulated exactly: how they are run on CPUs without the instruction);
 * 0: none (the f32 kernels). */
int cg_bf16_dot(const cg_target *t, const ir_tuning *tune) {
  if (!is_x86(t)) return 0;
  if (t->has_avx512bf16) return 2;
  if (!tune->bf16_emulate && tune->amx != 2) return 0; /* tune amx=2 emulates the tiles' vdpbf16ps steps too */
  /* the emulation's llvm.fma must be an instruction (a target without FMA would import fmaf) */
  cg_target own = *t; /* codegen threads call this: a target machine of its own */
  own.tm = cg_target_clone_tm(t, 2);
  char *z = own.tm ? probe_asm(&own, 2) : NULL;
  int fma = z && strstr(z, "vfmadd") != NULL;
  free(z);
  if (own.tm) LLVMDisposeTargetMachine(own.tm);
  return fma ? 1 : 0;
}

int cg_int8_dot(const cg_target *t, const ir_tuning *tune) {
  if (!is_x86(t) || !tune->int8) return 0;
  if (t->has_avx512vnni && tune->int8 == 1) return 2;
  if (t->vec_f32 < 8) return 0;   /* i32 lanes of AVX2 or wider */
  return tune->int8 == 2 ? 1 : 3; /* the vpdpbusd emulation (tests), or vpmaddwd on 16-bit pairs */
}

const char *cg_int8_isa_name(const cg_target *t, int mode, int amx) {
  if (amx) return amx == 1 ? "amxint8" : t->vec_f32 >= 16 ? "avx512_amx8emu" : "avx2_amx8emu";
  if (mode == 2) return "avx512vnni";
  if (mode == 3) return t->vec_f32 >= 16 ? "avx512_pmaddwd" : "avx2_pmaddwd";
  return t->vec_f32 >= 16 ? "avx512_vnniemu" : "avx2_vnniemu";
}

int cg_amx_mode(const cg_target *t, const ir_tuning *tune) {
  if (!tune->bf16 || !tune->amx) return 0;
  if (tune->amx == 2) return cg_bf16_dot(t, tune) ? 2 : 0;
  return t->has_amx_bf16 && t->has_avx512bf16 ? 1 : 0;
}

int cg_amx_int8_mode(const cg_target *t, const ir_tuning *tune) {
  if (!tune->int8 || tune->int8 == 3 || !tune->amx || !is_x86(t) || t->vec_f32 < 8) return 0; /* int8=3: vpmaddwd */
  if (tune->amx == 2) return 2;
  return t->has_amx_int8 ? 1 : 0;
}

int cg_bf16_route(const cg_target *t, const ir_tuning *tune, char *why, size_t n) {
  int mode = tune->bf16 ? cg_bf16_dot(t, tune) : 0, amx = cg_amx_mode(t, tune);
  const cg_core *k = t->core;
  if (amx) { /* AMX: 16 x 16 x 32 bf16 products per instruction, far above any vector route */
    if (why && n) snprintf(why, n, amx == 1 ? "AMX tdpbf16ps tiles (the target has amx-bf16; tune amx=0: not)" : "AMX tiles emulated (tune amx=2)");
    return mode;
  }
  if (why && n) {
    if (!tune->bf16) snprintf(why, n, "off (tune bf16=0)");
    else if (mode == 1) snprintf(why, n, "vdpbf16ps emulated (tune bf16_emulate=1)");
    else if (!mode) snprintf(why, n, "none (the target has no avx512bf16)");
    else if (!k) snprintf(why, n, "vdpbf16ps (cpu %s: no row in codegen/cores.def)", t->cpu);
    else if (tune->bf16 == 2) snprintf(why, n, "vdpbf16ps (tune bf16=2; core %s: %.2fx f32 FMA)", k->id, k->bf16_dot_rate);
    else if (k->bf16_dot_rate > 1.0) snprintf(why, n, "vdpbf16ps (core %s: %.2fx f32 FMA)", k->id, k->bf16_dot_rate);
    else snprintf(why, n, "f32 FMA on bf16 storage (core %s: vdpbf16ps %.2fx f32 FMA; tune bf16=2 takes it)", k->id, k->bf16_dot_rate);
  }
  if (mode == 2 && tune->bf16 == 1 && k && k->bf16_dot_rate <= 1.0) return 0; /* the faster route wins */
  return mode;
}

/* ---- the CPU features a model needs (runtime/rt_isa.c refuses a model whose features the CPU
 * lacks instead of dying of SIGILL in a kernel) -------------------------------------------- */

/* Whether the probe kind compiles to an instruction containing want (and, if also, that too,
 * on the same line: `vpaddd %xmm` next to a `vmovdqu %ymm` load is not an AVX2 add). */
static int probe_has(const cg_target *t, int kind, const char *want, const char *also) {
  cg_target own = *t; /* may run on a codegen thread: a target machine of its own */
  own.tm = cg_target_clone_tm(t, 2);
  char *z = own.tm ? probe_asm(&own, kind) : NULL;
  int ok = 0;
  for (char *line = z; line && *line && !ok;) {
    char *end = strchr(line, '\n');
    if (end) *end = 0;
    ok = strstr(line, want) && (!also || strstr(line, also));
    line = end ? end + 1 : NULL;
  }
  free(z);
  if (own.tm) LLVMDisposeTargetMachine(own.tm);
  return ok;
}

void cg_target_isa_needs(const cg_target *t, char *buf, size_t n) {
  buf[0] = 0;
  if (!is_x86(t) || n < 64) return;
  const char *names[16];
  int k = 0;
  if (t->vec_f32 >= 8) names[k++] = "avx";
  if (t->vec_f32 >= 8 && (probe_has(t, 3, "vpaddd", "%ymm") || probe_has(t, 3, "vpaddd", "%zmm"))) names[k++] = "avx2";
  if (probe_has(t, 2, "vfmadd", NULL)) names[k++] = "fma";
  if (probe_has(t, 4, "vcvtps2ph", NULL)) names[k++] = "f16c";
  if (t->vec_f32 >= 16) {
    names[k++] = "avx512f";
    /* the subsets LLVM uses once the target has them (znver4, sapphirerapids, skylake-avx512:
     * mask registers as 32/64-bit (kmovd: bw), EVEX xmm/ymm and registers 16-31 (vl), ...) */
    if (probe_has(t, 5, "vpaddw", "%zmm")) names[k++] = "avx512bw";
    if (probe_has(t, 6, "vpmullq", "%zmm")) names[k++] = "avx512dq";
    if (probe_has(t, 7, "vpabsq", "%ymm")) names[k++] = "avx512vl";
  }
  if (t->has_avx512bf16) names[k++] = "avx512bf16";
  if (t->has_avx512vnni) names[k++] = "avx512vnni";
  if (t->has_amx_bf16 || t->has_amx_int8) names[k++] = "amx-tile";
  if (t->has_amx_bf16) names[k++] = "amx-bf16";
  if (t->has_amx_int8) names[k++] = "amx-int8";
  size_t used = 0;
  for (int i = 0; i < k && used + 16 < n; i++) used += (size_t)snprintf(buf + used, n - used, "%s%s", i ? "," : "", names[i]);
}

void cg_target_emit_isa(cg_ctx *c) {
  char needs[256];
  cg_target_isa_needs(c->target, needs, sizeof needs);
  LLVMValueRef init = LLVMConstStringInContext2(c->llc, needs, strlen(needs), 0); /* NUL-terminated */
  LLVMValueRef g = LLVMAddGlobal(c->mod, LLVMTypeOf(init), CNNC_ISA_SYMBOL);
  LLVMSetInitializer(g, init);
  LLVMSetGlobalConstant(g, 1);
  LLVMSetLinkage(g, LLVMExternalLinkage);
  LLVMSetVisibility(g, LLVMDefaultVisibility);
}

const char *cg_bf16_isa_name(const cg_target *t, int amx) {
  if (amx) return amx == 1 ? "amxbf16" : t->vec_f32 >= 16 ? "avx512_amxemu" : "avx2_amxemu";
  if (t->has_avx512bf16) return "avx512bf16";
  static const char *const emu[] = {"generic_bf16emu", "sse_bf16emu", "avx2_bf16emu", "avx512_bf16emu"};
  const char *isa = cg_isa_name(t);
  return !strcmp(isa, "avx512") ? emu[3] : !strcmp(isa, "avx2") ? emu[2] : !strcmp(isa, "sse") ? emu[1] : emu[0];
}
