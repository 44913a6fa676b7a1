/* cg_target.c — target selection: the host (LLVMGetHostCPUName/Features) or a cpu/feature/
 * triple override, the resulting vector width (probed by compiling a <16 x float> add) and
 * the ISA-dependent tile budget.  The only codegen file that names ISAs. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <llvm-c/Target.h>

#include "codegen/cg_internal.h"

static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static void init_llvm(void) {
  LLVMInitializeAllTargetInfos();
  LLVMInitializeAllTargets();
  LLVMInitializeAllTargetMCs();
  LLVMInitializeAllAsmPrinters();
}

static int is_x86(const cg_target *t) { return strncmp(t->triple, "x86_64", 6) == 0 || t->triple[0] == 'i'; }

/* LLVM 19: 512-bit registers need +evex512 next to +avx512f in a hand-written string. */
static char *fix_features(const char *f) {
  size_t n = strlen(f);
  int need = strstr(f, "+avx512f") && !strstr(f, "evex512");
  char *s = malloc(n + 16);
  if (!s) abort();
  strcpy(s, f);
  if (need) strcat(s, ",+evex512");
  char *r = LLVMCreateMessage(s);
  free(s);
  return r;
}

/* Compiles `store (fadd <16 x float>)` for the target and reports the widest register used. */
static int probe_vec_width(const cg_target *t) {
  if (!is_x86(t)) return 4;
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
  LLVMValueRef y = LLVMBuildLoad2(b, v16, LLVMGetParam(f, 1), "y");
  LLVMBuildStore(b, LLVMBuildFAdd(b, x, y, "s"), LLVMGetParam(f, 0));
  LLVMBuildRetVoid(b);
  LLVMDisposeBuilder(b);
  LLVMMemoryBufferRef buf = NULL;
  char *err = NULL;
  int w = 4;
  if (!LLVMTargetMachineEmitToMemoryBuffer(t->tm, m, LLVMAssemblyFile, &err, &buf)) {
    const char *s = LLVMGetBufferStart(buf);
    size_t n = LLVMGetBufferSize(buf);
    char *z = malloc(n + 1);
    if (!z) abort();
    memcpy(z, s, n);
    z[n] = 0;
    w = strstr(z, "zmm") ? 16 : strstr(z, "ymm") ? 8 : 4;
    free(z);
    LLVMDisposeMemoryBuffer(buf);
  } else {
    LLVMDisposeMessage(err);
  }
  LLVMDisposeTargetData(td);
  LLVMDisposeModule(m);
  LLVMContextDispose(ctx);
  return w;
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
    t->features = fix_features(has_feat ? features : "");
  }
  LLVMTargetRef T = NULL;
  char *err = NULL;
  if (LLVMGetTargetFromTriple(t->triple, &T, &err)) {
    ir_diag_set(d, loc, NULL, "unknown target triple '%s': %s", t->triple, err ? err : "");
    LLVMDisposeMessage(err);
    cg_target_dispose(t);
    return -1;
  }
  t->tm = cg_target_clone_tm(t, 2);
  if (!t->tm) {
    ir_diag_set(d, loc, NULL, "cannot create a target machine for %s (cpu '%s')", t->triple, t->cpu);
    cg_target_dispose(t);
    return -1;
  }
  t->vec_f32 = probe_vec_width(t);
  t->has_avx512bf16 = t->vec_f32 == 16 && strstr(t->features, "+avx512bf16") != NULL;
  return 0;
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

int cg_acc_budget(const cg_target *t) {
  return is_x86(t) && t->vec_f32 >= 16 ? 24 : 12;  /* 32 zmm vs 16 ymm/xmm registers */
}
