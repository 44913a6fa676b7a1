/* cg.h — code generation through the LLVM C API (LLVM 19).  Prefix: cg_.
 *
 * Shape of the generated code: per shard, one LLVM module; per IR node, one kernel function
 * made by that op's generator (cg_gen_<op>, expanded from ir/ops.def); per shard, one entry
 * function (cnnc_abi_shard_fn, runtime/cnnc_abi.h) that calls the kernels in order with
 * pointers into the shard's scratch arena / io buffers and calls the barrier between them.
 *
 * Kernel calling convention (every generator follows it):
 *     void NAME(ptr act0, ptr act1, ..., ptr out, i32 tid, i32 nthreads)
 * one ptr per *activation* operand (values of kind INPUT, LABEL or ACT, in operand order),
 * then the output, then the thread index and count.  The kernel computes its share of the
 * output (partitioned by tid/nthreads; nthreads may be 1) and returns.  Parameters (weights)
 * are not passed: the generator embeds them as module constants with cg_param_const /
 * cg_blob_const, packed into whatever layout it reads (packing happens at compile time).
 * Activation buffers use the IR's logical layout (NCHW, contiguous, f32) in this version.
 */
#ifndef CNNC_CG_H
#define CNNC_CG_H

#include <llvm-c/Core.h>
#include <llvm-c/TargetMachine.h>

#include "ir/ir.h"

/* The caches cache blocking plans for (codegen/cg_budget.h). */
typedef struct cg_cache_sizes {
  int64_t l2, l3;              /* bytes of one cache instance (0: none) */
  int l2_sharing, l3_sharing;  /* logical cpus sharing one instance (>= 1) */
  int from_sysfs;              /* 1: read from the host's sysfs; 2: --target-cache; 0: the fallbacks */
} cg_cache_sizes;

/* A core's row of codegen/cores.def: what the generators know of it beyond the ISA. */
typedef struct cg_core {
  const char *id, *cpus;  /* row name; the LLVM CPU names it covers, comma separated */
  double bf16_dot_rate;   /* vdpbf16ps multiply-adds per cycle over f32 FMA's (zmm, one core) */
  const char *source;     /* where the figures come from */
} cg_core;
/* The row of LLVM CPU name cpu, or NULL (a core the table does not describe). */
const cg_core *cg_core_of(const char *cpu);

typedef struct cg_target {
  LLVMTargetMachineRef tm;
  char *triple, *cpu, *features;  /* LLVM-owned strings (LLVMDisposeMessage) */
  int vec_f32;                    /* f32 lanes of the widest usable vector: 16 AVX-512, 8 AVX2, 4 SSE */
  int has_avx512bf16;
  int has_amx_bf16;               /* AMX tiles with tdpbf16ps (amx-tile + amx-bf16), 512-bit vectors */
  int has_amx_int8;               /* AMX tiles with tdpbsud (amx-tile + amx-int8), 512-bit vectors */
  int has_avx512vnni;             /* vpdpbusd on zmm (avx512vnni with 512-bit vectors) */
  cg_cache_sizes cache;           /* what cache blocking assumes: the host's, fallbacks, or --target-cache */
  const cg_core *core;            /* cg_core_of(cpu): NULL for a core codegen/cores.def does not describe */
} cg_target;

/* Creates the target machine for the host, or for the given cpu/features/triple (NULL or ""
 * = host).  Returns 0 or -1 with d filled. */
int cg_target_init(cg_target *t, const char *triple, const char *cpu, const char *features, ir_diag *d);
void cg_target_dispose(cg_target *t);
/* --target-cache "L2,L3": the per-core L2 and L3 bytes (K/M/G suffixes) cache blocking plans
 * for, instead of the detected ones (tests pin them: the host is an input).  Returns 0 or -1
 * with d filled. */
int cg_target_set_cache(cg_target *t, const char *spec, ir_diag *d);
/* Sets LLVM's process-wide code generation options (tune sched_huge_region); the first call
 * of a process wins.  cg_compile calls it. */
void cg_llvm_options(int huge_region);

typedef struct cg_ctx {
  LLVMContextRef llc;
  LLVMModuleRef mod;
  LLVMBuilderRef b;
  const cg_target *target;
  const ir_graph *g;
  /* common types */
  LLVMTypeRef t_void, t_i1, t_i8, t_i32, t_i64, t_f32, t_ptr, t_vf32; /* t_vf32 = <vec_f32 x float> */
  LLVMTypeRef t_kernel;  /* void(ptr..., ptr out, i32, i32) is per-kernel; see cg_kernel_begin */
  ir_arena *arena;       /* for names and small tables */
  void *priv;            /* owned by cg_module.c */
} cg_ctx;

/* ---- helpers every generator uses (codegen/cg_util.c) ---------------------------------- */
/* Starts a kernel function following the convention above, with n_act activation operands;
 * positions the builder in its entry block.  args[0..n_act-1] = activations, args[n_act] =
 * out, args[n_act+1] = tid, args[n_act+2] = nthreads. */
LLVMValueRef cg_kernel_begin(cg_ctx *c, const char *name, int n_act, LLVMValueRef *args);
void cg_kernel_end(cg_ctx *c);  /* emits ret void */
/* cg_kernel_begin for node n whose parameter operands are module constants: *f the function,
 * a[] its arguments as above, op[i] = operand i (a kernel argument or cg_param_const's global).
 * In a training layout every operand is an argument (params in the state buffer).  Returns
 * n_act, the operands passed as arguments. */
int cg_kernel_begin_ops(cg_ctx *c, const ir_node *n, const char *fn_name, LLVMValueRef *f, LLVMValueRef *a, LLVMValueRef *op);

/* Counted loop: for (iv = lo; iv < hi; iv += step).  Usage:
 *   cg_loop L; LLVMValueRef i = cg_loop_begin(c, &L, lo, hi, step, "i");  ...body...  cg_loop_end(c, &L);
 * lo/hi/step are i64 values. */
typedef struct cg_loop { LLVMBasicBlockRef head, body, exit, latch; LLVMValueRef iv, step, hi; } cg_loop;
LLVMValueRef cg_loop_begin(cg_ctx *c, cg_loop *L, LLVMValueRef lo, LLVMValueRef hi, LLVMValueRef step, const char *name);
void cg_loop_end(cg_ctx *c, cg_loop *L);

LLVMValueRef cg_i64(cg_ctx *c, int64_t v);
LLVMValueRef cg_i32(cg_ctx *c, int32_t v);
LLVMValueRef cg_f32(cg_ctx *c, float v);
/* [lo, hi) share of thread tid of nthreads over n items (i64 results). */
void cg_thread_range(cg_ctx *c, LLVMValueRef n, LLVMValueRef tid, LLVMValueRef nthreads, LLVMValueRef *lo, LLVMValueRef *hi);
LLVMValueRef cg_gep_f32(cg_ctx *c, LLVMValueRef base, LLVMValueRef idx_i64);
LLVMValueRef cg_load_f32(cg_ctx *c, LLVMValueRef base, LLVMValueRef idx_i64);
void cg_store_f32(cg_ctx *c, LLVMValueRef v, LLVMValueRef base, LLVMValueRef idx_i64);
/* Intrinsic call by name, e.g. cg_intrinsic(c, "llvm.fma", &t_f32, 1, args, 3). */
LLVMValueRef cg_intrinsic(cg_ctx *c, const char *name, LLVMTypeRef *overload, int n_overload, LLVMValueRef *args, int n_args);

/* Embeds the f32 data of parameter value vid as a 64-byte aligned private constant (cached:
 * one global per value).  Returns a ptr.  (These two: codegen/cg_share.c.) */
LLVMValueRef cg_param_const(cg_ctx *c, int vid);
/* Embeds bytes (e.g. packed weights) as a 64-byte aligned private constant named name. */
LLVMValueRef cg_blob_const(cg_ctx *c, const char *name, const void *data, size_t bytes);

/* ---- generators, one per op (codegen/gen_*.c, codegen/conv/; the table: cg_route.c) ----- */
/* Emits the kernel for node n named fn_name and returns the function.  Also returns the
 * kernel's descriptive name (e.g. "conv2d_f32_direct_v16__avx512") in *kind (arena string). */
typedef LLVMValueRef (*cg_gen_fn)(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind);
#define IR_OP(name, attr, min_in, max_in, n_out, kind) \
  LLVMValueRef cg_gen_##name(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind);
#include "ir/ops.def"
extern const cg_gen_fn cg_generators[IR_OP_COUNT];

/* ---- the kernel plan (codegen/cg_select.c, made before any LLVM IR exists) ------------- */
/* What the back end decided for one IR node, read by everyone after it: the emitter builds the
 * kernel of the route named here, 16-bit inference storage (gen_store16.c) asks in16/out16,
 * --emit plan prints it and the compile report reads the cache blocking from it. */
typedef struct cg_kplan {
  int route;           /* anchor nodes: row of codegen/kernels.def taken (cg_routes[]); -1: the op's one generator */
  int R, P, V;         /* register tile of the direct conv route: R channels x P vectors of V lanes (0: none) */
  int64_t tile_block;  /* direct conv route: channel tiles per cache block (> 0 only where blocked) */
  int64_t block_bytes; /* ... and the block's working set: its packed weights + one output row's input rows */
  unsigned in16;       /* inference: bit j set when activation operand j may be stored in 16 bits for this node */
  int out16;           /* inference: the kernel computing this node may store its result in 16 bits */
} cg_kplan;

/* ---- whole-model compile (codegen/cg_module.c, cg_link.c) ------------------------------ */
/* ---- compile report hook (optional; tools/report/report.c fills a report from it) ---------- */
/* One generated kernel (a fused group) as codegen planned and named it. */
typedef struct cg_report_kernel {
  int anchor, last, shard, step; /* node ids of the group's generator and last member; shard; op index */
  int out;                       /* value id written */
  int n_act;
  const int *act;                /* activation operand value ids */
  double flops;
  const char *name, *kind;       /* symbol ("cnnk_s0_...") and descriptive kind */
  const cg_kplan *plan;          /* the anchor's kernel plan */
} cg_report_kernel;
/* One scratch buffer: the usage record the memory planner placed (steps are op indices). */
typedef struct cg_report_buffer {
  int shard, vid, first_step, last_step;
  int64_t bytes, offset;
} cg_report_buffer;
struct pass_fusion; /* passes/passes.h */
/* Everything is valid only during the call; the sink copies what it keeps. */
typedef struct cg_report_sink {
  void *ctx;
  /* After a successful compile: kernels in execution order, the fusion plan codegen used (one
   * row per node: passes/fuse.c pass_fuse or pass_fuse_train), scratch buffers, per-shard arena
   * sizes, and the boundary tensors (value ids; input, outputs, cross-shard activations). */
  void (*layout)(void *ctx, const cg_report_kernel *k, int n_k, const struct pass_fusion *plan, const cg_report_buffer *b,
                 int n_b, const int64_t *scratch_bytes, int n_shards, const int *tensor_vid, int n_tensors);
  void (*phase)(void *ctx, const char *name, double seconds); /* wall time of one phase */
  void (*target)(void *ctx, const cg_target *t);              /* the target compiled for */
} cg_report_sink;

typedef struct cg_options {
  const char *output;        /* .so path */
  const char *emit;          /* NULL, "llvm", "asm", "obj": dump instead of linking */
  const char *model_name;
  const char *options_json;
  int opt_level;             /* 0..3, default 2 */
  int verbose;
  const cg_report_sink *report; /* NULL: none */
  /* --available-memory-proportion as given (NULL = 0.6): P of shard s is
   * cg_budget_proportion(text, s), its working-set budget cg_working_set_budget (cg_budget.h) */
  const char *available_memory_proportion;
  /* training (docs/training.md): 0 fields mean 1 / sequential / none */
  int grad_accum, replicas;  /* --gradient-accumulation, --replicas */
  int schedule;              /* --pipeline-schedule: enum cnnc_abi_schedule */
  int recompute;             /* --recompute: 0 none, 1 auto, 2 pipeline, 3 all */
  int half_partials;         /* --enable-half-partials: 1 + ir_half_format, the gradient accumulators'
                              * partial sums rounded at every store (docs/precision.md); 0 = f32 */
  const char *tmpdir;        /* parent of the compile's temporary directory (NULL: /tmp) */
} cg_options;

/* Compiles graph g (nodes already assigned to shards 0..g->n_shards-1) to opts->output.
 * Returns 0 or -1 with d filled. */
int cg_compile(const ir_graph *g, const cg_target *t, const cg_options *opts, ir_diag *d);

#endif
