/* cg_internal.h — codegen-private helpers shared by the generators and the module builder:
 * per-module state (cg_ctx.priv), error reporting from generators, vector helpers, the
 * exp/sigmoid approximations, fused epilogues.  Not part of the codegen contract (cg.h). */
#ifndef CNNC_CG_INTERNAL_H
#define CNNC_CG_INTERNAL_H

#include "codegen/cg.h"
#include "passes/passes.h"

/* Per-module state behind cg_ctx.priv (owned by cg_module.c). */
typedef struct cg_priv {
  ir_diag *d;                 /* first error of this module */
  const pass_fusion *plan;    /* fusion plan, one row per node */
  const cg_kplan *kplan;      /* kernel plan, one row per node (cg_select), NULL while selecting */
  LLVMValueRef *param_global; /* cache: one global per param value id (cg_param_const) */
  int shard;
  int node;                   /* id of the node whose kernel is being generated */
  int train;                  /* training layout: params are kernel operands (state buffer) */
  const char *amp;            /* --available-memory-proportion text (NULL = default), for cg_budget.h */
  struct cg_share *share;     /* kernel sharing (cg_share.c), NULL: blobs are private globals */
  int plan_only;              /* --emit plan: kernels for their choices; weights neither packed nor stored */
} cg_priv;

/* --emit plan: a generator skips packing its weights (cg_blob_const then stores zeros, never
 * reading the data): the plan is the kernels' choices, which never depend on weight values. */
static inline int cg_plan_only(const cg_ctx *c) { return c->priv && ((const cg_priv *)c->priv)->plan_only; }

/* Records an error for node n (first one wins) and returns NULL, for generators. */
LLVMValueRef cg_fail(cg_ctx *c, const ir_node *n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Fusion row of n (the identity row when there is no plan). */
const pass_fusion *cg_fusion(cg_ctx *c, const ir_node *n);

/* ---- target queries (cg_target.c: with cg_isa.c the only files that name ISAs) --------- */
const char *cg_isa_name(const cg_target *t);   /* "avx512", "avx2", "avx", "sse", "generic" */
/* Register tile budget: f32 vector accumulators a microkernel may keep live. */
int cg_acc_budget(const cg_target *t);
/* Whether the target converts f32 <-> f16 natively (no libcall): +f16c on x86. */
int cg_has_f16c(const cg_target *t);
#define CG_NO_F16C_MSG "--half-type fp16 needs a target with F16C (native f32<->f16 conversions); use bf16 or add +f16c"
/* Creates another target machine equal to t's (one per codegen thread). */
LLVMTargetMachineRef cg_target_clone_tm(const cg_target *t, int opt_level);

/* The tuning knobs of this compile (ir/tuning.def): A/B and test switches, never the
 * environment. */
static inline const ir_tuning *cg_tune(const cg_ctx *c) { return ir_tune(c->g); }

/* ---- vectors (cg_util.c) ---------------------------------------------------------------- */
LLVMTypeRef cg_vtype(cg_ctx *c, int w);                       /* float for w == 1, <w x float> else */
LLVMValueRef cg_splat(cg_ctx *c, LLVMValueRef s, int w);      /* scalar f32 -> w lanes */
LLVMValueRef cg_fzero(cg_ctx *c, int w);
LLVMValueRef cg_fconst(cg_ctx *c, float v, int w);
LLVMValueRef cg_load_v(cg_ctx *c, LLVMValueRef base, LLVMValueRef idx_i64, int w);  /* unaligned */
void cg_store_v(cg_ctx *c, LLVMValueRef v, LLVMValueRef base, LLVMValueRef idx_i64, int w);
/* In-register transpose of np <= V vectors of V lanes (V a power of two): t[l] lane p = a[p]
 * lane l (lanes p >= np of t poison).  V = 8: the unpack / shufps / vperm2f128 network. */
void cg_transpose_v(cg_ctx *c, int V, int np, const LLVMValueRef *a, LLVMValueRef *t);
/* w lanes base[idx + l*stride] (stride >= 1 compile-time); stride 2 reads base[idx+2w-1]. */
LLVMValueRef cg_load_strided(cg_ctx *c, LLVMValueRef base, LLVMValueRef idx_i64, int stride, int w);
/* Lanes 0, 2, 4, ... of the 2w-lane concatenation a:b (a stride-2 pick of two loaded vectors). */
LLVMValueRef cg_even_lanes(cg_ctx *c, LLVMValueRef a, LLVMValueRef b, int w);
LLVMValueRef cg_fma(cg_ctx *c, LLVMValueRef a, LLVMValueRef b, LLVMValueRef acc); /* llvm.fmuladd */
LLVMValueRef cg_hsum(cg_ctx *c, LLVMValueRef v, int w);      /* horizontal sum (tree) */
LLVMValueRef cg_hmax(cg_ctx *c, LLVMValueRef v, int w);
/* NaN-propagating max/relu as the reference defines them. */
LLVMValueRef cg_max_nan(cg_ctx *c, LLVMValueRef x, LLVMValueRef m);
LLVMValueRef cg_relu(cg_ctx *c, LLVMValueRef x, int w);
LLVMValueRef cg_exp(cg_ctx *c, LLVMValueRef x, int w);        /* ~1 ulp-ish polynomial, no libm */
LLVMValueRef cg_sigmoid(cg_ctx *c, LLVMValueRef x, int w);
LLVMValueRef cg_clip(cg_ctx *c, LLVMValueRef x, float lo, float hi, int w);
LLVMValueRef cg_hardsigmoid(cg_ctx *c, LLVMValueRef x, float alpha, float beta, int w);
/* Activation node n (relu, sigmoid, swish, clip, hardsigmoid, hardswish) applied to x; NULL
 * for other ops.  The conv epilogues and the unary kernels share it. */
LLVMValueRef cg_activation(cg_ctx *c, const ir_node *n, LLVMValueRef x, int w);
/* Applies fused epilogue node post to v (w lanes of the output at element idx); resid is
 * the other operand's buffer for add. */
LLVMValueRef cg_epilogue(cg_ctx *c, const ir_node *post, LLVMValueRef v, LLVMValueRef resid, LLVMValueRef idx, int w);
/* i32 constant v (w == 1) or <w x i32> of v. */
LLVMValueRef cg_splat_i32(cg_ctx *c, uint32_t v, int w);
/* x (<w x float>, or float for w == 1) rounded to format (ir_half_format) to nearest even and
 * widened back: bit-identical to ir_round16_f32.  An fp16 rounding on a target without
 * F16C records the error (node n) and returns x.  The round16 kernel, the fused round16
 * epilogues (cg_epilogue) and the rounded optimizer updates use it; the other 16-bit
 * conversions are gen_round16.h's. */
LLVMValueRef cg_round16_v(cg_ctx *c, const ir_node *n, LLVMValueRef x, int format, int w);

/* Target/codegen attributes every generated function carries (cg_util.c). */
void cg_set_fn_attrs(cg_ctx *c, LLVMValueRef f);
/* Enum attribute name (value v: align, dereferenceable; else 0) at index idx of function f
 * (LLVMAttributeFunctionIndex: the function, 0: the return value, k: parameter k - 1). */
void cg_enum_attr(cg_ctx *c, LLVMValueRef f, unsigned idx, const char *name, uint64_t v);
/* An alloca in the function's entry block (promoted to registers by SROA/mem2reg). */
LLVMValueRef cg_entry_alloca(cg_ctx *c, LLVMTypeRef t, const char *name);
LLVMValueRef cg_min64(cg_ctx *c, LLVMValueRef a, LLVMValueRef b);
LLVMValueRef cg_max64(cg_ctx *c, LLVMValueRef a, LLVMValueRef b);
/* if (cond) { ... } helpers: returns the "then" block's continuation. */
typedef struct cg_if { LLVMBasicBlockRef then_bb, else_bb, end_bb; } cg_if;
void cg_if_begin(cg_ctx *c, cg_if *f, LLVMValueRef cond);   /* builder in "then" */
void cg_if_else(cg_ctx *c, cg_if *f);                       /* builder in "else" */
void cg_if_end(cg_ctx *c, cg_if *f);                        /* builder after both */

/* kind string "<op>_f32_<tile>__<isa>" in the module arena. */
const char *cg_kind(cg_ctx *c, const char *op, const char *tile);
/* Number of elements of value vid. */
int64_t cg_numel(cg_ctx *c, int vid);

/* ---- kernel sharing (cg_share.c, docs/codegen.md "Compile time") ------------------------
 * Between cg_share_begin and cg_share_end, cg_blob_const and cg_param_const return
 * placeholders and record the blob bytes; cg_share_end turns the kernel into a body taking
 * its constants as one extra pointer argument, keyed by its IR text (blob bytes excluded), and
 * drops it when an earlier kernel of the unit has the same key; cg_share_finish names the
 * kernels: a body used once gets its own blob back (the code of an unshared kernel), one used
 * by several nodes gets a per-node wrapper passing that node's blob (an alias without blobs).
 * Tune kernel_share=0: cg_share_new returns NULL (one kernel per node, blobs as before). */
typedef struct cg_share cg_share;
cg_share *cg_share_new(const ir_tuning *t);                   /* per compile unit; NULL when disabled */
void cg_share_begin(cg_share *s);
/* Finishes kernel f (generated as a temporary name) of the node whose kernel symbol is name. */
void cg_share_end(cg_ctx *c, cg_share *s, LLVMValueRef f, const char *name);
/* Emits the bodies, wrappers and aliases; adds the number of kernels and of distinct bodies
 * to *n_kernels, *n_bodies; frees s. */
void cg_share_finish(cg_ctx *c, cg_share *s, int *n_kernels, int *n_bodies);
/* A private, constant, 64-byte aligned global holding bytes (cg_blob_const outside sharing). */
LLVMValueRef cg_blob_global(cg_ctx *c, const char *name, const void *data, size_t bytes);
/* The placeholder standing for a blob (cg_blob_const while recording), or NULL. */
LLVMValueRef cg_share_blob(cg_ctx *c, cg_share *s, const void *data, size_t bytes);
/* While recording: this kernel's cache slot of param vid (cg_param_const), else NULL. */
LLVMValueRef *cg_share_param_slot(cg_share *s, int vid);

/* ---- element-wise work split shared by several generators (cg_util.c) ------------------ */
/* Emits: for each element block of this thread's share of [0, n): body(c, idx, w, user),
 * vectorised by the target width with a scalar tail. */
typedef void (*cg_elem_body)(cg_ctx *c, LLVMValueRef idx, int w, void *user);
void cg_foreach_elem(cg_ctx *c, int64_t n, LLVMValueRef tid, LLVMValueRef nth, cg_elem_body body, void *user);

/* Vectorised loop over [0, n) inside the current thread's block: body(j, w). */
void cg_inner_loop(cg_ctx *c, int64_t n, cg_elem_body body, void *user);
/* Unary element-wise kernel (relu/sigmoid/swish, or a copy for other ops) named opname
 * (gen_eltwise.c). */
LLVMValueRef cg_gen_unary(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind, const char *opname);
/* A reduction of node n's operand 0 down to ra (gen_reduce.c: any dims). */
LLVMValueRef cg_gen_reduce_to(cg_ctx *c, const ir_node *n, const ir_reduce_attr *ra, const char *fn_name, const char **kind);
/* Dilated max pooling (gen_pool_pick.c): the forward (gen_pool.c's dilated case) and the
 * training gradient (gen_train_act.c's). */
/* kernels.def "concat inplace": an empty kernel (the producers wrote the result; cg_layout.c). */
LLVMValueRef cg_gen_concat_inplace(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind);
LLVMValueRef cg_gen_maxpool_pick(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind);
LLVMValueRef cg_gen_maxpool_grad_pick(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind);
/* Sum over base[off .. off+cnt) of x, or of (x - mean)^2 when mean != NULL (f32 scalar;
 * gen_norm.c). */
LLVMValueRef cg_reduce_sum(cg_ctx *c, LLVMValueRef base, LLVMValueRef off, int64_t cnt, LLVMValueRef mean);

/* ---- helpers of the training generators (cg_util.c) -------------------------------------- */
/* cg_kernel_begin with n_extra (<= 2) pointer parameters after nthreads: a training batchnorm's
 * batch-statistics record (gen_train_norm.c, cg_main.c). */
LLVMValueRef cg_kernel_begin_x(cg_ctx *c, const char *name, int n_act, int n_extra, LLVMValueRef *args);
/* cg_kernel_begin without the out-noalias promise (optimizer kernels update in place). */
LLVMValueRef cg_train_kbegin(cg_ctx *c, const char *name, int n_act, LLVMValueRef *args);

/* a + b, a * k, a + k (i64) */
LLVMValueRef cg_tadd(cg_ctx *c, LLVMValueRef a, LLVMValueRef b);
LLVMValueRef cg_tmul(cg_ctx *c, LLVMValueRef a, int64_t k);
LLVMValueRef cg_taddk(cg_ctx *c, LLVMValueRef a, int64_t k);

/* Lanes l < n of a w-lane mask (bit l), n clamped to [0, w]. */
unsigned cg_lanes(int n, int w);
/* w lanes base[idx + l*stride] for the lanes of mask m (others 0): a plain (strided) vector
 * load when m is full and last_ok (the last lane's element is inside the buffer row, so a
 * stride-2 pair load stays inside), llvm.masked.load for stride 1, scalar lane loads else.
 * No element of an unmasked-out lane is read. */
LLVMValueRef cg_tload(cg_ctx *c, LLVMValueRef base, LLVMValueRef idx, int stride, unsigned m, int w);
/* Stores the lanes of mask m of v to base[idx + l]. */
void cg_tstore(cg_ctx *c, LLVMValueRef v, LLVMValueRef base, LLVMValueRef idx, unsigned m, int w);

/* Split of n (> 0) positions into groups of at most maxp: number of groups and the size of
 * group i (balanced: sizes differ by at most one). */
int cg_tgroups(int64_t n, int maxp);
int cg_tgroup_size(int64_t n, int groups, int i);

/* ---- training (gen_train.c) ------------------------------------------------------------- */
/* Training-mode generator of op (params are pointer operands, every operand of the node is a
 * kernel argument in operand order), or NULL when the inference generator serves as is. */
cg_gen_fn cg_train_generator(ir_op op);
/* Emits into c's module the kernel name(logits [N,K], labels [N], correct [1], tid, nth):
 * thread 0 writes the number of rows whose first maximum is at the label. */
LLVMValueRef cg_gen_top1(cg_ctx *c, const char *name, int64_t n, int64_t k);

#endif
