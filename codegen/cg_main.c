/* cg_main.c — the main module of a compiled model: one entry per shard (cnnc_abi_shard_fn:
 * resolves every kernel operand to an io buffer or a scratch offset, calls the kernels in
 * order with a barrier between them) and the exported cnnc_abi_model descriptor (tensors,
 * shards, op and kernel names, FLOPs, options), laid out with the target's data layout. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cnnc_config.h"
#include "codegen/cg_isa.h"
#include "codegen/cg_acc.h"
#include "codegen/cg_main.h"
#include "codegen/gen_round16.h"
#include "ir/grad_train.h"
#include "runtime/cnnc_abi.h"
#include "runtime/cnnc_seal.h"

/* A training batchnorm: its kernel takes a batch-statistics record (gen_train_norm.c). */
static int train_bn(const ir_graph *g, int node) {
  return g->nodes[node].op == IR_OP_batchnorm && g->nodes[node].attr.batchnorm.training;
}

/* The record of training batchnorm `node` in the "bn_stats" train tensor: doubles before it
 * (3 per channel of every training batchnorm before it in node order); node n_nodes: all. */
static int64_t bn_rec_off(const ir_graph *g, int node) {
  int64_t o = 0;
  for (int i = 0; i < node; i++)
    if (train_bn(g, i)) {
      const ir_shape *xs = &g->values[g->nodes[i].in[0]].shape;
      o += 3 * (xs->rank > 1 ? xs->dim[1] : 1);
    }
  return o;
}

static LLVMValueRef kernel_decl(cg_ctx *c, const cg_kernel *k) {
  LLVMValueRef f = LLVMGetNamedFunction(c->mod, k->name);
  if (!f) f = LLVMGetNamedGlobalAlias(c->mod, k->name, strlen(k->name)); /* a shared kernel (cg_share.c) */
  if (f) return f;
  LLVMTypeRef p[CG_MAX_ACT + 4];
  int rec = c->priv && ((cg_priv *)c->priv)->train && train_bn(c->g, k->anchor);
  for (int i = 0; i <= k->n_act; i++) p[i] = c->t_ptr;
  p[k->n_act + 1] = p[k->n_act + 2] = c->t_i32;
  p[k->n_act + 3] = c->t_ptr;
  f = LLVMAddFunction(c->mod, k->name, LLVMFunctionType(c->t_void, p, (unsigned)(k->n_act + 3 + rec), 0));
  LLVMSetVisibility(f, LLVMHiddenVisibility);
  return f;
}

/* Pointer to value v inside shard s's entry: io[slot] or scratch + offset. */
static LLVMValueRef value_ptr(cg_ctx *c, const cg_layout *L, int s, int v, LLVMValueRef io, LLVMValueRef scratch,
                              LLVMValueRef state) {
  if (state && L->state_alias[v] >= 0) { /* training: a param's (or its update's) state slice */
    LLVMValueRef off = cg_i64(c, L->state_off[L->state_alias[v]]);
    return LLVMBuildInBoundsGEP2(c->b, c->t_i8, state, &off, 1, c->g->values[v].name);
  }
  int t = L->vid_tensor[v];
  if (t >= 0) {
    int slot = cg_layout_io_slot(L, s, t);
    LLVMValueRef idx = cg_i64(c, slot);
    return LLVMBuildLoad2(c->b, c->t_ptr, LLVMBuildInBoundsGEP2(c->b, c->t_ptr, io, &idx, 1, ""), c->g->values[v].name);
  }
  LLVMValueRef off = cg_i64(c, L->scratch_off[v]);
  return LLVMBuildInBoundsGEP2(c->b, c->t_i8, scratch, &off, 1, c->g->values[v].name);
}

/* ---- dynamic shares (docs/runtime.md "Dynamic shares") ------------------------------------
 * At batch 1 a static split leaves one thread waiting at every op barrier for the other
 * (uneven items, a preempted or slower core).  An inference entry therefore calls each kernel
 * of at least DYN_MIN_FLOPS (but the first, and 1x1 convs: below) as `parts` virtual threads
 * per thread: kernel(args, vt, nthreads * parts), vt = owner * parts + j.  Thread t runs its
 * own parts first
 * (together the items of the static share (t, nthreads), in the same order), then takes the
 * remaining parts of the other threads: each thread's next part is an i64 counter on its own
 * 128-byte line in scratch (after the planner's arena), taken with a relaxed atomic add (the
 * op barriers order the data).  No kernel changes: every kernel computes the share (tid,
 * nthreads) for any nthreads.  Counters are zeroed by thread 0 one dynamic op ahead: dynamic
 * op j uses counter set j % 2 (the last one set 2 when their number is odd, so that adjacent
 * ones and the last and the first differ), and thread 0 zeroes the next dynamic op's set
 * while running op j (cyclically: the last zeroes the first's for the next micro-batch; the
 * entry's start zeroes it too, published by the barrier before the first dynamic op, which
 * is why kernel 0 stays static).  tune dyn_parts=1 keeps the static
 * split (A/B); =N sets the parts per thread.  nthreads above DYN_MAX_THREADS runs static.
 * 1x1 convs stay static: a flat conv's tile split is
 * balanced to a channel tile already, and cut finer it reads the input once per tile part
 * (ResNet-50 b1 layer1/layer2 conv3s 0.85-0.93x per CPU-second with 4 parts).  Micro-batches
 * of DYN_MAX_BATCH images or more stay static too (ResNet-50 b16: 48.4 vs 47.7 img/s). */
#define DYN_MAX_THREADS 16
#define DYN_LINE 128
#define DYN_SETS 3
#define DYN_PARTS 4
#define DYN_MIN_FLOPS 4e6
#define DYN_MAX_BATCH 4 /* from 4 images up, static shares hand whole images to the threads */

static int dyn_parts(const ir_graph *g) { return ir_tune(g)->dyn_parts; }

/* Fills set[i] with the counter set of shard s's i-th kernel, -1 for a static call; returns
 * the number of dynamic kernels (0 when fewer than 2: see above). */
static int dyn_plan(const cg_layout *L, int s, int *set) {
  const cg_shard_plan *sp = &L->sh[s];
  int J = 0;
  for (int i = 0; i < sp->n_k; i++) set[i] = -1;
  if (L->train || L->g->batch >= DYN_MAX_BATCH || dyn_parts(L->g) < 2) return 0;
  for (int i = 1; i < sp->n_k; i++) {
    const cg_kernel *k = &L->k[sp->first_k + i];
    const ir_node *an = &L->g->nodes[k->anchor];
    int one = an->op == IR_OP_conv2d && an->attr.conv2d.kernel[0] * an->attr.conv2d.kernel[1] == 1;
    if (k->flops >= DYN_MIN_FLOPS && !one) set[i] = J++ % 2;
  }
  if (J < 2) {
    for (int i = 0; i < sp->n_k; i++) set[i] = -1;
    return 0;
  }
  for (int i = sp->n_k - 1; J % 2 && i >= 0; i--)
    if (set[i] >= 0) {
      set[i] = 2;
      break;
    }
  return J;
}

static int64_t dyn_off(const cg_shard_plan *sp) { return (sp->scratch_bytes + DYN_LINE - 1) / DYN_LINE * DYN_LINE; }

/* Bytes of shard s's scratch: the planner's arena, plus the counters when it has dynamic ops
 * (cg_main.h). */
int64_t cg_shard_scratch(const cg_layout *L, int s) {
  int set[L->sh[s].n_k > 0 ? L->sh[s].n_k : 1];
  return dyn_plan(L, s, set) ? dyn_off(&L->sh[s]) + DYN_SETS * DYN_MAX_THREADS * DYN_LINE : L->sh[s].scratch_bytes;
}

static LLVMValueRef dyn_ctr(cg_ctx *c, LLVMValueRef sets, int set, LLVMValueRef t) {
  LLVMValueRef off = LLVMBuildAdd(c->b, cg_i64(c, (int64_t)set * DYN_MAX_THREADS * DYN_LINE),
                                  LLVMBuildMul(c->b, LLVMBuildZExt(c->b, t, c->t_i64, ""), cg_i64(c, DYN_LINE), ""), "");
  return LLVMBuildInBoundsGEP2(c->b, c->t_i8, sets, &off, 1, "dyn_ctr");
}

static void dyn_reset(cg_ctx *c, LLVMValueRef sets, int set) {
  for (int t = 0; t < DYN_MAX_THREADS; t++) {
    LLVMValueRef st = LLVMBuildStore(c->b, cg_i64(c, 0), dyn_ctr(c, sets, set, cg_i32(c, t)));
    LLVMSetOrdering(st, LLVMAtomicOrderingMonotonic);
    LLVMSetAlignment(st, 8);
  }
}

/* Calls kernel fn (n_args: the pointers, then tid, nthreads) dynamically as above with counter
 * set `set`; thread 0 first zeroes set `next` (the next dynamic op's). */
static void dyn_call(cg_ctx *c, LLVMValueRef fn, LLVMValueRef *args, int n_args, LLVMValueRef sets, int set, int next,
                     int parts) {
  LLVMValueRef tid = args[n_args - 2], nth = args[n_args - 1];
  cg_if f0;
  cg_if_begin(c, &f0, LLVMBuildICmp(c->b, LLVMIntEQ, tid, cg_i32(c, 0), ""));
  dyn_reset(c, sets, next);
  cg_if_end(c, &f0);
  LLVMValueRef a[CG_MAX_ACT + 3];
  memcpy(a, args, (size_t)n_args * sizeof *a);
  a[n_args - 1] = LLVMBuildMul(c->b, nth, cg_i32(c, parts), "vn");
  cg_loop K; /* owners tid, tid + 1, ... (mod nthreads) */
  LLVMValueRef k = cg_loop_begin(c, &K, cg_i64(c, 0), LLVMBuildZExt(c->b, nth, c->t_i64, ""), cg_i64(c, 1), "owner_k");
  LLVMValueRef own = LLVMBuildURem(c->b, LLVMBuildAdd(c->b, tid, LLVMBuildTrunc(c->b, k, c->t_i32, ""), ""), nth, "owner");
  LLVMValueRef ctr = dyn_ctr(c, sets, set, own);
  LLVMValueRef fnf = LLVMGetBasicBlockParent(LLVMGetInsertBlock(c->b));
  LLVMBasicBlockRef take = LLVMAppendBasicBlockInContext(c->llc, fnf, "dyn_take");
  LLVMBasicBlockRef run = LLVMAppendBasicBlockInContext(c->llc, fnf, "dyn_run");
  LLVMBasicBlockRef done = LLVMAppendBasicBlockInContext(c->llc, fnf, "dyn_done");
  LLVMBuildBr(c->b, take);
  LLVMPositionBuilderAtEnd(c->b, take);
  LLVMValueRef j = LLVMBuildAtomicRMW(c->b, LLVMAtomicRMWBinOpAdd, ctr, cg_i64(c, 1), LLVMAtomicOrderingMonotonic, 0);
  LLVMBuildCondBr(c->b, LLVMBuildICmp(c->b, LLVMIntSLT, j, cg_i64(c, parts), ""), run, done);
  LLVMPositionBuilderAtEnd(c->b, run);
  a[n_args - 2] = LLVMBuildAdd(c->b, LLVMBuildMul(c->b, own, cg_i32(c, parts), ""), LLVMBuildTrunc(c->b, j, c->t_i32, ""), "vt");
  LLVMBuildCall2(c->b, LLVMGlobalGetValueType(fn), fn, a, (unsigned)n_args, "");
  LLVMBuildBr(c->b, take);
  LLVMPositionBuilderAtEnd(c->b, done);
  cg_loop_end(c, &K);
}

/* Shard entry (cnnc_abi_shard_fn), or with train a training stage (cnnc_abi_stage_fn: the
 * state pointer second; after the loss kernel, thread 0 counts top-1 hits into the io slot
 * after the shard's own io list).  train 2: the eval stage, the kernels up to the loss only
 * (the forward of the supported models is the same in training and inference: no BN/dropout).
 * train -1: the profiled entry of the profiling extension (cnnc_abi.h): barrier after every
 * op, the last one included, whatever nthreads is, and the static split of every op: with
 * dynamic shares the thread released first takes the parts of one woken late, so the per-op
 * busy / CPU / bal figures described the race, not the kernel (docs/reports.md "Profiling (libcnnrt)"). */
static LLVMValueRef build_entry(cg_ctx *c, const cg_layout *L, int s, int train) {
  int prof = train < 0;
  if (prof) train = 0;
  LLVMTypeRef p[7] = {c->t_ptr, c->t_ptr, c->t_ptr, c->t_i32, c->t_i32, c->t_ptr, c->t_ptr};
  char name[64];
  snprintf(name, sizeof name,
           train == 2 ? "cnnc_eval%d_run" : train ? "cnnc_train%d_run" : prof ? "cnnc_shard%d_prof" : "cnnc_shard%d_run", s);
  LLVMValueRef f = LLVMAddFunction(c->mod, name, LLVMFunctionType(c->t_i32, train ? p : p + 1, train ? 7 : 6, 0));
  LLVMSetLinkage(f, LLVMInternalLinkage);
  cg_set_fn_attrs(c, f);
  LLVMPositionBuilderAtEnd(c->b, LLVMAppendBasicBlockInContext(c->llc, f, "entry"));
  int a0 = train ? 1 : 0;
  LLVMValueRef io = LLVMGetParam(f, 0), state = train ? LLVMGetParam(f, 1) : NULL, scratch = LLVMGetParam(f, (unsigned)a0 + 1);
  LLVMValueRef tid = LLVMGetParam(f, (unsigned)a0 + 2), nth = LLVMGetParam(f, (unsigned)a0 + 3);
  LLVMValueRef barrier = LLVMGetParam(f, (unsigned)a0 + 4), bctx = LLVMGetParam(f, (unsigned)a0 + 5);
  LLVMTypeRef bar_t = LLVMFunctionType(c->t_void, &c->t_ptr, 1, 0);
  const cg_shard_plan *sp = &L->sh[s];
  int dset[sp->n_k > 0 ? sp->n_k : 1], dyn = train || prof ? 0 : dyn_plan(L, s, dset), parts = dyn_parts(L->g), d_first = -1;
  LLVMValueRef dyn_ok = NULL, dsets = NULL;
  if (dyn) { /* nthreads in 2..DYN_MAX_THREADS; thread 0 zeroes the first dynamic op's counters */
    LLVMValueRef off = cg_i64(c, dyn_off(sp));
    dsets = LLVMBuildInBoundsGEP2(c->b, c->t_i8, scratch, &off, 1, "dyn_sets");
    dyn_ok = LLVMBuildAnd(c->b, LLVMBuildICmp(c->b, LLVMIntSGT, nth, cg_i32(c, 1), ""),
                          LLVMBuildICmp(c->b, LLVMIntSLE, nth, cg_i32(c, DYN_MAX_THREADS), ""), "dyn_ok");
    for (int i = 0; i < sp->n_k && d_first < 0; i++)
      if (dset[i] >= 0) d_first = i;
    cg_if f0;
    cg_if_begin(c, &f0, LLVMBuildAnd(c->b, dyn_ok, LLVMBuildICmp(c->b, LLVMIntEQ, tid, cg_i32(c, 0), ""), ""));
    dyn_reset(c, dsets, dset[d_first]);
    cg_if_end(c, &f0);
  }
  for (int i = sp->first_k; i < sp->first_k + sp->n_k; i++) {
    const cg_kernel *k = &L->k[i];
    if (k->inplace && !prof) continue; /* an in-place concat: its producers wrote the result */
    if (i > sp->first_k && !prof) { /* every thread finished the previous op */
      cg_if fi;
      cg_if_begin(c, &fi, LLVMBuildICmp(c->b, LLVMIntSGT, nth, cg_i32(c, 1), ""));
      LLVMBuildCall2(c->b, bar_t, barrier, &bctx, 1, "");
      cg_if_end(c, &fi);
    }
    LLVMValueRef args[CG_MAX_ACT + 3];
    for (int j = 0; j < k->n_act; j++) args[j] = value_ptr(c, L, s, k->act[j], io, scratch, state);
    args[k->n_act] = value_ptr(c, L, s, k->out, io, scratch, state);
    args[k->n_act + 1] = tid;
    args[k->n_act + 2] = nth;
    LLVMValueRef fn = kernel_decl(c, k);
    int ds = dyn ? dset[i - sp->first_k] : -1;
    cg_if fd;
    if (ds >= 0) {
      int next = -1; /* the next dynamic op's set, cyclically */
      for (int q = i - sp->first_k + 1; q < sp->n_k && next < 0; q++) next = dset[q];
      if (next < 0) next = dset[d_first];
      cg_if_begin(c, &fd, dyn_ok);
      dyn_call(c, fn, args, k->n_act + 3, dsets, ds, next, parts);
      cg_if_else(c, &fd);
    }
    LLVMBuildCall2(c->b, LLVMGlobalGetValueType(fn), fn, args, (unsigned)k->n_act + 3, "");
    if (ds >= 0) cg_if_end(c, &fd);
    if (prof) LLVMBuildCall2(c->b, bar_t, barrier, &bctx, 1, ""); /* the runtime timestamps op i's end */
    if (train && k->out == L->loss_vid) { /* top-1 count, same step (logits still live) */
      const ir_shape *ls = &c->g->values[L->logits_vid].shape;
      LLVMValueRef top = cg_gen_top1(c, "cnnc_top1", ls->dim[0], ir_shape_numel(ls) / ls->dim[0]);
      LLVMPositionBuilderAtEnd(c->b, LLVMGetLastBasicBlock(f));
      LLVMValueRef slot = cg_i64(c, sp->n_io);
      LLVMValueRef targs[5] = {value_ptr(c, L, s, L->logits_vid, io, scratch, state),
                               value_ptr(c, L, s, L->label_vid, io, scratch, state),
                               LLVMBuildLoad2(c->b, c->t_ptr, LLVMBuildInBoundsGEP2(c->b, c->t_ptr, io, &slot, 1, ""), "correct"),
                               tid, nth};
      LLVMBuildCall2(c->b, LLVMGlobalGetValueType(top), top, targs, 5, "");
      if (train == 2) break;
    }
  }
  LLVMBuildRet(c->b, cg_i32(c, 0));
  return f;
}

/* ---- descriptor constants ---------------------------------------------------------------- */
static LLVMValueRef const_global(cg_ctx *c, LLVMValueRef init, const char *name) {
  LLVMValueRef g = LLVMAddGlobal(c->mod, LLVMTypeOf(init), name);
  LLVMSetInitializer(g, init);
  LLVMSetGlobalConstant(g, 1);
  LLVMSetLinkage(g, LLVMPrivateLinkage);
  return g;
}

static LLVMValueRef cstr(cg_ctx *c, const char *s) {
  if (!s) return LLVMConstNull(c->t_ptr);
  return const_global(c, LLVMConstStringInContext2(c->llc, s, strlen(s), 0), "str");
}

static LLVMValueRef array_of(cg_ctx *c, LLVMTypeRef t, LLVMValueRef *v, int n, const char *name) {
  return const_global(c, LLVMConstArray2(t, v, (uint64_t)n), name);
}

static LLVMValueRef i32_array(cg_ctx *c, const int *x, int n, const char *name) {
  LLVMValueRef v[n > 0 ? n : 1];
  for (int i = 0; i < n; i++) v[i] = cg_i32(c, x[i]);
  return array_of(c, c->t_i32, v, n, name);
}

static LLVMValueRef tensor_const(cg_ctx *c, LLVMTypeRef tt, const ir_value *v) {
  LLVMValueRef dims[4];
  for (int d = 0; d < 4; d++) dims[d] = cg_i64(c, d < v->shape.rank ? v->shape.dim[d] : 0);
  int64_t bytes = ir_shape_numel(&v->shape) * (int64_t)ir_dtype_size(v->dtype);
  LLVMValueRef f[5] = {cstr(c, v->name), cg_i32(c, (int32_t)v->dtype), cg_i32(c, v->shape.rank),
                       LLVMConstArray2(c->t_i64, dims, 4), cg_i64(c, bytes)};
  return LLVMConstNamedStruct(tt, f, 5);
}

static LLVMValueRef shard_const(cg_ctx *c, LLVMTypeRef st, const cg_layout *L, int s, LLVMValueRef run, const int *io,
                                int n_io, int n_inputs) {
  const cg_shard_plan *sp = &L->sh[s];
  LLVMValueRef names[sp->n_k], kernels[sp->n_k], flops[sp->n_k];
  LLVMTypeRef dt = LLVMDoubleTypeInContext(c->llc);
  for (int i = 0; i < sp->n_k; i++) {
    const cg_kernel *k = &L->k[sp->first_k + i];
    names[i] = cstr(c, c->g->nodes[k->anchor].name);
    kernels[i] = cstr(c, k->name);
    flops[i] = LLVMConstReal(dt, k->flops);
  }
  const ir_node *first = &c->g->nodes[L->k[sp->first_k].anchor], *last = &c->g->nodes[L->k[sp->first_k + sp->n_k - 1].last];
  LLVMValueRef f[11] = {cstr(c, first->name), cstr(c, last->name), cg_i32(c, n_io), cg_i32(c, n_inputs),
                        i32_array(c, io, n_io, "io"), cg_i64(c, cg_shard_scratch(L, s)), cg_i32(c, sp->n_k),
                        array_of(c, c->t_ptr, names, sp->n_k, "op_names"),
                        array_of(c, c->t_ptr, kernels, sp->n_k, "kernel_names"),
                        array_of(c, dt, flops, sp->n_k, "op_flops"), run};
  return LLVMConstNamedStruct(st, f, 11);
}

static LLVMTypeRef named_struct(cg_ctx *c, const char *name, LLVMTypeRef *f, int n) {
  LLVMTypeRef t = LLVMStructCreateNamed(c->llc, name);
  LLVMStructSetBody(t, f, (unsigned)n, 0);
  return t;
}

/* Stub shard entry of a training model's cnnc_model_v1 (never called: returns 1). */
static LLVMValueRef stub_entry(cg_ctx *c) {
  LLVMTypeRef p[6] = {c->t_ptr, c->t_ptr, c->t_i32, c->t_i32, c->t_ptr, c->t_ptr};
  LLVMValueRef f = LLVMAddFunction(c->mod, "cnnc_shard_stub", LLVMFunctionType(c->t_i32, p, 6, 0));
  LLVMSetLinkage(f, LLVMInternalLinkage);
  cg_set_fn_attrs(c, f);
  LLVMPositionBuilderAtEnd(c->b, LLVMAppendBasicBlockInContext(c->llc, f, "entry"));
  LLVMBuildRet(c->b, cg_i32(c, 1));
  return f;
}

/* ---- training programs (docs/training.md "Pipelined training") ---------------------------- */
/* The accumulators' number format and replica count while build_train runs (cg_acc.h). */
static cg_acc_cfg acc;

static LLVMValueRef state_ptr(cg_ctx *c, LLVMValueRef state, int64_t off) {
  LLVMValueRef o = cg_i64(c, off);
  return LLVMBuildInBoundsGEP2(c->b, c->t_i8, state, &o, 1, "");
}

/* Pointer to v inside training stage st: state slice, accumulator (update stage: replica 0's,
 * which holds the replicas' averaged sum), io slot or scratch. */
static LLVMValueRef stage_value_ptr(cg_ctx *c, const cg_layout *L, int st, int v, LLVMValueRef io, LLVMValueRef scratch,
                                    LLVMValueRef state) {
  if (L->accum && L->acc_index[v] >= 0 && st == L->update_stage) {
    if (L->acc16) { /* the f32 mean cg_acc_mean_helper widened into the update's scratch */
      LLVMValueRef off = cg_i64(c, L->acc_tmp_off[L->acc_index[v]]);
      return LLVMBuildInBoundsGEP2(c->b, c->t_i8, scratch, &off, 1, c->g->values[v].name);
    }
    return state_ptr(c, state, L->acc_off[L->acc_index[v] * L->replicas]);
  }
  return value_ptr(c, L, st, v, io, scratch, state);
}

static int64_t value_numel(const cg_layout *L, int v) { return ir_shape_numel(&L->g->values[v].shape); }

/* Entry (cnnc_abi_stage_fn) of training stage st for replica r: its kernels in order with a
 * barrier between them; after the loss kernel the top-1 count (io slot n_io = "correct");
 * with accumulation, each gradient the update reads is added into replica r's slice right
 * after it is computed, and the update stage first sums the replicas' slices into replica 0's
 * in replica order and scales by 1/(grad_accum*replicas), and zeroes every slice at the end.
 * eval: the eval twin of a forward stage (training batchnorm kernels replaced by their
 * running-statistics twins, see gen_train_norm.c). */
static LLVMValueRef build_stage_fn(cg_ctx *c, const cg_layout *L, int st, int r, int eval) {
  LLVMTypeRef p[8] = {c->t_ptr, c->t_ptr, c->t_ptr, c->t_i32, c->t_i32, c->t_ptr, c->t_ptr, c->t_i64};
  char name[64];
  /* r < 0: the body the replicas' backward stages share, its 8th parameter the byte offset
   * of the replica's accumulator block (r * acc_stride): one body instead of R copies. */
  if (r < 0) snprintf(name, sizeof name, "cnnc_stage%d_body", st);
  else snprintf(name, sizeof name, eval ? "cnnc_stage%d_eval" : "cnnc_stage%d_r%d", st, r);
  LLVMValueRef f = LLVMAddFunction(c->mod, name, LLVMFunctionType(c->t_i32, p, r < 0 ? 8 : 7, 0));
  LLVMSetLinkage(f, LLVMInternalLinkage);
  cg_set_fn_attrs(c, f);
  if (r < 0) cg_enum_attr(c, f, LLVMAttributeFunctionIndex, "noinline", 0);
  LLVMPositionBuilderAtEnd(c->b, LLVMAppendBasicBlockInContext(c->llc, f, "entry"));
  LLVMValueRef io = LLVMGetParam(f, 0), state = LLVMGetParam(f, 1), scratch = LLVMGetParam(f, 2);
  LLVMValueRef tid = LLVMGetParam(f, 3), nth = LLVMGetParam(f, 4), barrier = LLVMGetParam(f, 5), bctx = LLVMGetParam(f, 6);
  LLVMValueRef racc = r < 0 ? LLVMGetParam(f, 7) : cg_i64(c, (int64_t)r * L->acc_stride);
  LLVMTypeRef bar_t = LLVMFunctionType(c->t_void, &c->t_ptr, 1, 0);
  int need_barrier = 0;
#define STAGE_BARRIER()                                                                                                \
  do {                                                                                                                 \
    if (need_barrier) {                                                                                                \
      cg_if fi;                                                                                                        \
      cg_if_begin(c, &fi, LLVMBuildICmp(c->b, LLVMIntSGT, nth, cg_i32(c, 1), ""));                                     \
      LLVMBuildCall2(c->b, bar_t, barrier, &bctx, 1, "");                                                              \
      cg_if_end(c, &fi);                                                                                               \
    }                                                                                                                  \
    need_barrier = 1;                                                                                                  \
  } while (0)
  int upd = st == L->update_stage && L->accum;
  char *meaned = upd && L->acc16 ? calloc((size_t)L->n_acc + 1, 1) : NULL; /* acc16: accumulators widened so far */
  if (upd && L->acc16 && !meaned) abort();
  if (upd && !L->acc16) { /* acc_0 = (acc_0 + acc_1 + ... + acc_{R-1}) / (grad_accum * R): same partition, no barrier */
    float inv = 1.0f / (float)(L->grad_accum * L->replicas);
    STAGE_BARRIER();
    for (int a = 0; a < L->n_acc; a++) {
      int64_t n = value_numel(L, L->acc_vid[a]);
      LLVMValueRef a0 = state_ptr(c, state, L->acc_off[a * L->replicas]);
      for (int q = 1; q < L->replicas; q++) cg_acc_call(c, &acc, 0, a0, state_ptr(c, state, L->acc_off[a * L->replicas + q]), n, 1, tid, nth);
      cg_acc_call(c, &acc, 1, a0, NULL, n, inv, tid, nth);
    }
  }
  const cg_shard_plan *sp = &L->sh[st];
  for (int i = sp->first_k; i < sp->first_k + sp->n_k; i++) {
    const cg_kernel *k = &L->k[i];
    STAGE_BARRIER();
    int widened = 0;
    for (int j = 0; meaned && j < k->n_act; j++) { /* acc16: the means this kernel reads first, then a barrier */
      int a = L->acc_index[k->act[j]];
      if (a < 0 || meaned[a]) continue;
      meaned[a] = 1;
      LLVMValueRef mf = cg_acc_mean_helper(c, &acc), off = cg_i64(c, L->acc_tmp_off[a]);
      LLVMValueRef ma[7] = {LLVMBuildInBoundsGEP2(c->b, c->t_i8, scratch, &off, 1, ""), state_ptr(c, state, L->acc_off[a * L->replicas]),
                            cg_i64(c, value_numel(L, L->acc_vid[a])), cg_f32(c, 1.0f / (float)(L->grad_accum * L->replicas)),
                            tid, nth, cg_i64(c, L->acc_stride)};
      LLVMBuildCall2(c->b, LLVMGlobalGetValueType(mf), mf, ma, 7, "");
      widened = 1;
    }
    if (widened) STAGE_BARRIER();
    LLVMValueRef args[CG_MAX_ACT + 4];
    for (int j = 0; j < k->n_act; j++) args[j] = stage_value_ptr(c, L, st, k->act[j], io, scratch, state);
    args[k->n_act] = stage_value_ptr(c, L, st, k->out, io, scratch, state);
    args[k->n_act + 1] = tid;
    args[k->n_act + 2] = nth;
    int rec = train_bn(c->g, k->anchor); /* its record in "bn_stats", io slot n_io + 1 */
    if (rec) {
      LLVMValueRef slot = cg_i64(c, sp->n_io + 1), off = cg_i64(c, bn_rec_off(c->g, k->anchor));
      LLVMValueRef base = LLVMBuildLoad2(c->b, c->t_ptr, LLVMBuildInBoundsGEP2(c->b, c->t_ptr, io, &slot, 1, ""), "bn_stats");
      args[k->n_act + 3] = LLVMBuildInBoundsGEP2(c->b, LLVMDoubleTypeInContext(c->llc), base, &off, 1, "");
    }
    LLVMValueRef fn = kernel_decl(c, k);
    const ir_node *an = &c->g->nodes[k->anchor];
    int ev_drop = eval && an->op == IR_OP_dropout && an->attr.dropout.training && an->attr.dropout.rate > 0.0f;
    if ((eval && an->op == IR_OP_batchnorm && an->attr.batchnorm.training) || ev_drop) { /* running statistics (gen_train_norm.c), identity dropout (gen_train.c) */
      char ev[64];
      snprintf(ev, sizeof ev, ev_drop ? "cnnk_s%d_dropout_eval_n%d" : "cnnk_s%d_batchnorm_eval_n%d", k->shard, k->anchor);
      if (!(fn = LLVMGetNamedFunction(c->mod, ev))) {
        fn = LLVMAddFunction(c->mod, ev, LLVMGlobalGetValueType(kernel_decl(c, k)));
        LLVMSetVisibility(fn, LLVMHiddenVisibility);
      }
    }
    LLVMBuildCall2(c->b, LLVMGlobalGetValueType(fn), fn, args, (unsigned)(k->n_act + 3 + rec), "");
    if (k->out == L->loss_vid) { /* top-1 count, same step (logits still live) */
      const ir_shape *ls = &c->g->values[L->logits_vid].shape;
      LLVMValueRef top = cg_gen_top1(c, "cnnc_top1", ls->dim[0], ir_shape_numel(ls) / ls->dim[0]);
      LLVMPositionBuilderAtEnd(c->b, LLVMGetLastBasicBlock(f));
      LLVMValueRef slot = cg_i64(c, sp->n_io);
      LLVMValueRef targs[5] = {stage_value_ptr(c, L, st, L->logits_vid, io, scratch, state),
                               stage_value_ptr(c, L, st, L->label_vid, io, scratch, state),
                               LLVMBuildLoad2(c->b, c->t_ptr, LLVMBuildInBoundsGEP2(c->b, c->t_ptr, io, &slot, 1, ""), "correct"),
                               tid, nth};
      LLVMBuildCall2(c->b, LLVMGlobalGetValueType(top), top, targs, 5, "");
    }
    if (L->accum && !upd && L->acc_index[k->out] >= 0) { /* replica r's accumulator += gradient */
      STAGE_BARRIER();
      LLVMValueRef a0 = state_ptr(c, state, L->acc_off[L->acc_index[k->out] * L->replicas]);
      cg_acc_call(c, &acc, 0, LLVMBuildInBoundsGEP2(c->b, c->t_i8, a0, &racc, 1, ""), args[k->n_act], value_numel(L, k->out), 1, tid, nth);
    }
  }
  if (upd && !L->acc16) { /* (acc16: cg_acc_mean_helper zeroed them) */
    STAGE_BARRIER();
    for (int a = 0; a < L->n_acc; a++)
      for (int q = 0; q < L->replicas; q++)
        cg_acc_call(c, &acc, 2, state_ptr(c, state, L->acc_off[a * L->replicas + q]), NULL, value_numel(L, L->acc_vid[a]), 0, tid, nth);
  }
#undef STAGE_BARRIER
  free(meaned);
  LLVMBuildRet(c->b, cg_i32(c, 0));
  return f;
}

/* Replica r's backward stage st: calls the shared body with r's accumulator offset. */
static LLVMValueRef stage_thunk(cg_ctx *c, const cg_layout *L, int st, int r, LLVMValueRef body) {
  LLVMTypeRef p[7] = {c->t_ptr, c->t_ptr, c->t_ptr, c->t_i32, c->t_i32, c->t_ptr, c->t_ptr};
  char name[64];
  snprintf(name, sizeof name, "cnnc_stage%d_r%d", st, r);
  LLVMValueRef f = LLVMAddFunction(c->mod, name, LLVMFunctionType(c->t_i32, p, 7, 0));
  LLVMSetLinkage(f, LLVMInternalLinkage);
  cg_set_fn_attrs(c, f);
  LLVMPositionBuilderAtEnd(c->b, LLVMAppendBasicBlockInContext(c->llc, f, "entry"));
  LLVMValueRef a[8];
  for (int i = 0; i < 7; i++) a[i] = LLVMGetParam(f, (unsigned)i);
  a[7] = cg_i64(c, (int64_t)r * L->acc_stride);
  LLVMValueRef call = LLVMBuildCall2(c->b, LLVMGlobalGetValueType(body), body, a, 8, "");
  LLVMSetTailCall(call, 1);
  LLVMBuildRet(c->b, call);
  return f;
}

static double stage_flops(const cg_layout *L, int st) {
  double fl = 0;
  for (int i = L->sh[st].first_k; i < L->sh[st].first_k + L->sh[st].n_k; i++) fl += L->k[i].flops;
  return fl;
}

static LLVMValueRef stage_const(cg_ctx *c, LLVMTypeRef stage_t, const cg_layout *L, int st, int r, LLVMValueRef fn) {
  static const char *const ph[3] = {"fwd", "bwd", "update"};
  const cg_shard_plan *sp = &L->sh[st];
  int io[sp->n_io + 2], n_io = sp->n_io + 1 + (bn_rec_off(L->g, L->g->n_nodes) > 0);
  memcpy(io, sp->io, (size_t)sp->n_io * sizeof(int));
  io[sp->n_io] = L->n_tensors;     /* correct */
  io[sp->n_io + 1] = L->n_tensors + 1; /* bn_stats, when there are training batchnorms */
  char nm[48];
  if (L->replicas > 1 && L->stage_phase[st] != PASS_PHASE_UPDATE)
    snprintf(nm, sizeof nm, "%s/s%d/r%d", ph[L->stage_phase[st]], L->stage_shard[st], r);
  else snprintf(nm, sizeof nm, "%s/s%d", ph[L->stage_phase[st]], L->stage_shard[st]);
  LLVMValueRef f[8] = {cstr(c, nm), cg_i32(c, L->stage_shard[st]), cg_i32(c, n_io), cg_i32(c, sp->n_inputs),
                       i32_array(c, io, n_io, "stage_io"), cg_i64(c, sp->scratch_bytes), LLVMConstReal(LLVMDoubleTypeInContext(c->llc), stage_flops(L, st)),
                       fn};
  return LLVMConstNamedStruct(stage_t, f, 8);
}

/* The exported CNNC_ABI_BN_STATS_SYMBOL (cnnc_abi.h): per training batchnorm its running
 * statistics' state indices, channels, forward stage and record offset in "bn_stats". */
static void build_bn_stats(cg_ctx *c, const cg_layout *L) {
  const ir_graph *g = c->g;
  LLVMTypeRef i32 = c->t_i32, i64 = c->t_i64, ef[5] = {i32, i32, i32, i32, i64};
  LLVMTypeRef e_t = named_struct(c, "cnnc_abi_bn_stat", ef, 5);
  int n = 0, *sidx = malloc(((size_t)g->n_values + 1) * sizeof *sidx);
  if (!sidx) abort();
  for (int v = 0, k = 0; v < g->n_values; v++) sidx[v] = L->state_off[v] >= 0 ? k++ : -1;
  for (int i = 0; i < g->n_nodes; i++) n += train_bn(g, i);
  LLVMValueRef e[n > 0 ? n : 1];
  n = 0;
  for (int i = 0; i < g->n_nodes; i++) {
    if (!train_bn(g, i)) continue;
    const ir_node *nd = &g->nodes[i];
    int st = -1, rm = L->state_alias[nd->in[3]], rv = L->state_alias[nd->in[4]];
    for (int s = 0; s < L->n_fwd_stages && st < 0; s++)
      for (int q = L->sh[s].first_k; q < L->sh[s].first_k + L->sh[s].n_k; q++)
        if (L->k[q].anchor == i) st = s;
    const ir_shape *xs = &g->values[nd->in[0]].shape;
    LLVMValueRef f[5] = {cg_i32(c, rm >= 0 ? sidx[rm] : -1), cg_i32(c, rv >= 0 ? sidx[rv] : -1), cg_i32(c, (int)(xs->rank > 1 ? xs->dim[1] : 1)),
                         cg_i32(c, st), cg_i64(c, bn_rec_off(g, i))};
    e[n++] = LLVMConstNamedStruct(e_t, f, 5);
  }
  free(sidx);
  LLVMTypeRef tf[4] = {i32, i32, i32, c->t_ptr};
  LLVMTypeRef t_t = named_struct(c, "cnnc_abi_bn_stats", tf, 4);
  LLVMValueRef tv[4] = {cg_i32(c, (int32_t)CNNC_ABI_BN_STATS_MAGIC), cg_i32(c, n), cg_i32(c, L->n_tensors + 1), array_of(c, e_t, e, n, "bn_stat")};
  LLVMValueRef desc = LLVMAddGlobal(c->mod, t_t, CNNC_ABI_BN_STATS_SYMBOL);
  LLVMSetInitializer(desc, LLVMConstNamedStruct(t_t, tv, 4));
  LLVMSetGlobalConstant(desc, 1);
  LLVMSetLinkage(desc, LLVMExternalLinkage);
  LLVMSetVisibility(desc, LLVMDefaultVisibility);
}

/* The exported cnnc_abi_train descriptor (training extension of cnnc_abi.h): train tensors =
 * the layout's tensors + "correct"; micro_batch = per replica the forward stages (shard order)
 * then the backward stages (reverse shard order); update = the update stage; eval = the
 * forward stages of replica 0; state = every param at its 64-aligned offset with its initial
 * bytes, then the gradient accumulators (one per replica). */
static void build_train(cg_ctx *c, const cg_layout *L, LLVMTypeRef tensor_t, const cg_options *o) {
  LLVMTypeRef i32 = c->t_i32, i64 = c->t_i64, ptr = c->t_ptr, dbl = LLVMDoubleTypeInContext(c->llc);
  (void)dbl;
  const ir_graph *g = c->g;
  acc = (cg_acc_cfg){.half = o ? o->half_partials : 0, .acc16 = L->acc16, .replicas = L->replicas};
  int64_t n_rec = bn_rec_off(g, g->n_nodes); /* doubles of the batch-statistics records */
  int nt = L->n_tensors + 1 + (n_rec > 0);
  LLVMValueRef tensors[nt];
  for (int i = 0; i < L->n_tensors; i++) tensors[i] = tensor_const(c, tensor_t, &g->values[L->tensor_vid[i]]);
  LLVMValueRef one[4] = {cg_i64(c, 1), cg_i64(c, 0), cg_i64(c, 0), cg_i64(c, 0)};
  LLVMValueRef cf[5] = {cstr(c, "correct"), cg_i32(c, CNNC_ABI_F32), cg_i32(c, 1), LLVMConstArray2(i64, one, 4), cg_i64(c, 4)};
  tensors[L->n_tensors] = LLVMConstNamedStruct(tensor_t, cf, 5);
  if (n_rec > 0) { /* the records, n_rec doubles described as 2 n_rec f32 */
    LLVMValueRef rd[4] = {cg_i64(c, 2 * n_rec), cg_i64(c, 0), cg_i64(c, 0), cg_i64(c, 0)};
    LLVMValueRef rf[5] = {cstr(c, CNNC_ABI_BN_STATS_TENSOR), cg_i32(c, CNNC_ABI_F32), cg_i32(c, 1), LLVMConstArray2(i64, rd, 4), cg_i64(c, 8 * n_rec)};
    tensors[L->n_tensors + 1] = LLVMConstNamedStruct(tensor_t, rf, 5);
  }
  /* state */
  LLVMTypeRef stf[9] = {ptr, i32, i32, i32, i32, LLVMArrayType2(i64, 4), i64, i64, ptr};
  LLVMTypeRef state_t = named_struct(c, "cnnc_abi_state_tensor", stf, 9);
  int n_state = 0;
  for (int v = 0; v < g->n_values; v++) n_state += L->state_off[v] >= 0;
  int n_accs = L->accum ? L->n_acc * L->replicas : 0;
  LLVMValueRef st[n_state + n_accs > 0 ? n_state + n_accs : 1];
  char *is_opt = calloc((size_t)g->n_values + 1, 1);
  for (int i = 0; i < g->n_nodes; i++)
    if (L->state_alias[g->nodes[i].out] >= 0) is_opt[L->state_alias[g->nodes[i].out]] = 1;
  n_state = 0;
  for (int v = 0; v < g->n_values; v++) {
    if (L->state_off[v] < 0) continue;
    const ir_value *x = &g->values[v];
    int64_t bytes = ir_shape_numel(&x->shape) * (int64_t)ir_dtype_size(x->dtype);
    LLVMValueRef dims[4];
    for (int d = 0; d < 4; d++) dims[d] = cg_i64(c, d < x->shape.rank ? x->shape.dim[d] : 0);
    int kind = x->trainable ? CNNC_ABI_STATE_PARAM : is_opt[v] ? CNNC_ABI_STATE_OPTIMIZER : CNNC_ABI_STATE_BUFFER;
    int dt = x->dtype == IR_F32 ? CNNC_ABI_F32 : CNNC_ABI_I32;
    LLVMValueRef f[9] = {cstr(c, x->name), cg_i32(c, dt), cg_i32(c, kind), cg_i32(c, x->shape.rank), cg_i32(c, 0),
                         LLVMConstArray2(i64, dims, 4), cg_i64(c, L->state_off[v]), cg_i64(c, bytes),
                         x->data ? cg_blob_const(c, "init", x->data, (size_t)bytes) : LLVMConstNull(ptr)};
    st[n_state++] = LLVMConstNamedStruct(state_t, f, 9);
  }
  free(is_opt);
  for (int a = 0; a < L->n_acc && L->accum; a++)
    for (int r = 0; r < L->replicas; r++) {
      const ir_value *x = &g->values[L->acc_vid[a]];
      char nm[600];
      if (r == 0) snprintf(nm, sizeof nm, "%s/accum", x->name);
      else snprintf(nm, sizeof nm, "%s/accum/r%d", x->name, r);
      LLVMValueRef dims[4];
      for (int d = 0; d < 4; d++) dims[d] = cg_i64(c, d < x->shape.rank ? x->shape.dim[d] : 0);
      int adt = !L->acc16 ? CNNC_ABI_F32 : L->acc16 - 1 == IR_HALF_FP16 ? CNNC_ABI_F16 : CNNC_ABI_BF16;
      LLVMValueRef f[9] = {cstr(c, nm), cg_i32(c, adt), cg_i32(c, CNNC_ABI_STATE_GRAD_ACCUM), cg_i32(c, x->shape.rank),
                           cg_i32(c, 0), LLVMConstArray2(i64, dims, 4), cg_i64(c, L->acc_off[a * L->replicas + r]),
                           cg_i64(c, ir_shape_numel(&x->shape) * (L->acc16 ? 2 : 4)), LLVMConstNull(ptr)};
      st[n_state++] = LLVMConstNamedStruct(state_t, f, 9);
    }
  /* programs */
  LLVMTypeRef sgf[8] = {ptr, i32, i32, i32, ptr, i64, dbl, ptr};
  LLVMTypeRef stage_t = named_struct(c, "cnnc_abi_stage", sgf, 8);
  int per = L->update_stage >= 0 ? L->update_stage : L->n_shards; /* forward + backward stages */
  int R = L->replicas;
  LLVMValueRef mb[per * R > 0 ? per * R : 1], evals[L->n_fwd_stages > 0 ? L->n_fwd_stages : 1], fwd_fn[per > 0 ? per : 1],
               bwd_body[per > 0 ? per : 1];
  for (int r = 0; r < R; r++)
    for (int k = 0; k < per; k++) {
      LLVMValueRef fn;
      if (L->stage_phase[k] == PASS_PHASE_FWD) fn = r == 0 ? (fwd_fn[k] = build_stage_fn(c, L, k, 0, 0)) : fwd_fn[k];
      else if (R == 1 || !L->accum) fn = build_stage_fn(c, L, k, r, 0);
      else fn = stage_thunk(c, L, k, r, r == 0 ? (bwd_body[k] = build_stage_fn(c, L, k, -1, 0)) : bwd_body[k]);
      mb[r * per + k] = stage_const(c, stage_t, L, k, r, fn);
      if (r == 0 && k < L->n_fwd_stages) evals[k] = mb[k];
    }
  LLVMValueRef upd_stage[1];
  if (L->update_stage >= 0) upd_stage[0] = stage_const(c, stage_t, L, L->update_stage, 0, build_stage_fn(c, L, L->update_stage, 0, 0));
  LLVMTypeRef pf[2] = {i32, ptr};
  LLVMTypeRef prog_t = named_struct(c, "cnnc_abi_program", pf, 2);
  LLVMValueRef mbp[2] = {cg_i32(c, per * R), array_of(c, stage_t, mb, per * R, "mb_stages")};
  LLVMValueRef up[2] = {cg_i32(c, L->update_stage >= 0), L->update_stage >= 0 ? array_of(c, stage_t, upd_stage, 1, "update_stages") : LLVMConstNull(ptr)};
  int train_fwd = 0, train_bn = 0; /* training-only forward ops (batchnorm, dropout): eval twins of the forward stages */
  for (int i = 0; i < g->n_nodes; i++) {
    if (g->nodes[i].op == IR_OP_dropout && g->nodes[i].attr.dropout.training && g->nodes[i].attr.dropout.rate > 0.0f)
      train_fwd = 1;
    train_bn |= g->nodes[i].op == IR_OP_batchnorm && g->nodes[i].attr.batchnorm.training;
  }
  for (int k = 0; (train_bn || train_fwd) && k < L->n_fwd_stages; k++) /* eval: running statistics, no dropout */
    evals[k] = stage_const(c, stage_t, L, k, 0, build_stage_fn(c, L, k, 0, 1));
  LLVMValueRef ev[2] = {cg_i32(c, L->n_fwd_stages), array_of(c, stage_t, evals, L->n_fwd_stages, "eval_stages")};
  LLVMTypeRef trf[23] = {i32, i32, i32, i32, i32, ptr, i32, i32, i32, i32, i32, i32, i64, i32, ptr, prog_t, prog_t, prog_t, ptr,
                         i32, i32, i32, i32};
  LLVMTypeRef train_t = named_struct(c, "cnnc_abi_train", trf, 23);
  int lr = ir_find_value(g, IR_LR_INPUT_NAME);
  LLVMTargetDataRef td = LLVMGetModuleDataLayout(c->mod);
  LLVMValueRef tv[23] = {cg_i32(c, (int32_t)CNNC_ABI_TRAIN_MAGIC), cg_i32(c, CNNC_ABI_TRAIN_VERSION),
                         cg_i32(c, (int32_t)LLVMABISizeOfType(td, train_t)), cg_i32(c, 0), cg_i32(c, nt),
                         array_of(c, tensor_t, tensors, nt, "train_tensors"), cg_i32(c, L->vid_tensor[g->input]),
                         cg_i32(c, L->label_vid >= 0 ? L->vid_tensor[L->label_vid] : -1),
                         cg_i32(c, lr >= 0 ? L->vid_tensor[lr] : -1),
                         cg_i32(c, L->loss_vid >= 0 ? L->vid_tensor[L->loss_vid] : -1), cg_i32(c, L->n_tensors),
                         cg_i32(c, L->grad_accum), cg_i64(c, L->state_bytes), cg_i32(c, n_state),
                         array_of(c, state_t, st, n_state, "state"), LLVMConstNamedStruct(prog_t, mbp, 2),
                         LLVMConstNamedStruct(prog_t, up, 2), LLVMConstNamedStruct(prog_t, ev, 2),
                         cstr(c, o->options_json ? o->options_json : "{}"), cg_i32(c, R), cg_i32(c, L->n_fwd_stages),
                         cg_i32(c, L->schedule), cg_i32(c, L->recompute)};
  LLVMValueRef desc = LLVMAddGlobal(c->mod, train_t, CNNC_ABI_TRAIN_SYMBOL);
  LLVMSetInitializer(desc, LLVMConstNamedStruct(train_t, tv, 23));
  LLVMSetGlobalConstant(desc, 1);
  LLVMSetLinkage(desc, LLVMExternalLinkage);
  LLVMSetVisibility(desc, LLVMDefaultVisibility);
  if (n_rec > 0) build_bn_stats(c, L);
}

/* The exported cnnc_abi_profile (profiling extension of cnnc_abi.h): one profiled entry per
 * shard. */
static void build_profile(cg_ctx *c, const cg_layout *L) {
  LLVMTypeRef i32 = c->t_i32, ptr = c->t_ptr;
  LLVMValueRef runs[L->n_shards];
  for (int s = 0; s < L->n_shards; s++) runs[s] = build_entry(c, L, s, -1);
  LLVMTypeRef pf[5] = {i32, i32, i32, i32, ptr};
  LLVMTypeRef prof_t = named_struct(c, "cnnc_abi_profile", pf, 5);
  LLVMValueRef pv[5] = {cg_i32(c, (int32_t)CNNC_ABI_PROFILE_MAGIC), cg_i32(c, CNNC_ABI_PROFILE_VERSION),
                        cg_i32(c, L->n_shards), cg_i32(c, 0), array_of(c, ptr, runs, L->n_shards, "prof_runs")};
  LLVMValueRef desc = LLVMAddGlobal(c->mod, prof_t, CNNC_ABI_PROFILE_SYMBOL);
  LLVMSetInitializer(desc, LLVMConstNamedStruct(prof_t, pv, 5));
  LLVMSetGlobalConstant(desc, 1);
  LLVMSetLinkage(desc, LLVMExternalLinkage);
  LLVMSetVisibility(desc, LLVMDefaultVisibility);
}

/* The checksum note of runtime/cnnc_seal.h, unsealed (cg_link_shared seals the linked .so):
 * ".note.cnnc" makes it SHT_NOTE, so the linker puts it in a PT_NOTE segment. */
static void emit_seal_note(cg_ctx *c) {
  unsigned char note[CNNC_SEAL_NOTE_BYTES];
  cnnc_seal_template(note);
  LLVMValueRef init = LLVMConstStringInContext2(c->llc, (const char *)note, sizeof note, 1);
  LLVMValueRef g = LLVMAddGlobal(c->mod, LLVMTypeOf(init), CNNC_SEAL_SYMBOL);
  LLVMSetInitializer(g, init);
  LLVMSetGlobalConstant(g, 1);
  LLVMSetSection(g, ".note.cnnc");
  LLVMSetAlignment(g, 4);
  LLVMSetLinkage(g, LLVMExternalLinkage);
  LLVMSetVisibility(g, LLVMDefaultVisibility);
}

int cg_build_main(cg_ctx *c, const cg_layout *L, const cg_options *o, ir_diag *d) {
  LLVMTypeRef i32 = c->t_i32, i64 = c->t_i64, ptr = c->t_ptr, dbl = LLVMDoubleTypeInContext(c->llc);
  LLVMTypeRef tf[5] = {ptr, i32, i32, LLVMArrayType2(i64, 4), i64};
  LLVMTypeRef tensor_t = named_struct(c, "cnnc_abi_tensor", tf, 5);
  LLVMTypeRef sf[11] = {ptr, ptr, i32, i32, ptr, i64, i32, ptr, ptr, ptr, ptr};
  LLVMTypeRef shard_t = named_struct(c, "cnnc_abi_shard", sf, 11);
  LLVMTypeRef mf[17] = {i32, i32, i32, i32, ptr, ptr, ptr, i32, i32, i32, ptr, i32, i32, ptr, i32, ptr, dbl};
  LLVMTypeRef model_t = named_struct(c, "cnnc_abi_model", mf, 17);
  const ir_graph *g = c->g;
  double total = 0;
  for (int i = 0; i < L->n_k; i++) total += L->k[i].flops;
  int n_tensors, outs[8], n_outs = g->n_outputs, input;
  LLVMValueRef tensors[L->n_tensors > 0 ? L->n_tensors : 1], shards[L->n_shards];
  if (L->train) { /* cnnc_model_v1 describes the forward: images -> logits (stub entry) */
    if (g->input < 0 || L->logits_vid < 0 || L->loss_vid < 0 || L->n_fwd_stages != L->n_groups)
      return ir_diag_set(d, (ir_loc){0}, NULL, "training codegen needs an image input, a softmax_xent loss and a forward layer per shard");
    tensors[0] = tensor_const(c, tensor_t, &g->values[g->input]);
    tensors[1] = tensor_const(c, tensor_t, &g->values[L->logits_vid]);
    n_tensors = 2, input = 0, outs[0] = 1, n_outs = 1;
    LLVMValueRef stub = stub_entry(c);
    for (int s = 0; s < L->n_groups; s++) { /* shard s = its forward stage s (reads images; the last writes logits) */
      int io[2] = {0, 1};
      shards[s] = shard_const(c, shard_t, L, s, stub, io, s == L->n_groups - 1 ? 2 : 1, 1);
    }
    build_train(c, L, tensor_t, o);
  } else {
    for (int i = 0; i < L->n_tensors; i++) tensors[i] = tensor_const(c, tensor_t, &g->values[L->tensor_vid[i]]);
    n_tensors = L->n_tensors, input = g->input >= 0 ? L->vid_tensor[g->input] : -1;
    for (int s = 0; s < L->n_shards; s++)
      shards[s] = shard_const(c, shard_t, L, s, build_entry(c, L, s, 0), L->sh[s].io, L->sh[s].n_io, L->sh[s].n_inputs);
    for (int i = 0; i < g->n_outputs; i++) outs[i] = L->vid_tensor[g->outputs[i]];
    build_profile(c, L);
  }
  LLVMTargetDataRef td = LLVMGetModuleDataLayout(c->mod);
  LLVMValueRef mv[17] = {
      cg_i32(c, (int32_t)CNNC_ABI_MAGIC), cg_i32(c, CNNC_ABI_VERSION),
      cg_i32(c, (int32_t)LLVMABISizeOfType(td, model_t)), cg_i32(c, 0),
      cstr(c, o->model_name ? o->model_name : g->name), cstr(c, "cnnc " CNNC_VERSION), cstr(c, o->options_json ? o->options_json : "{}"),
      cg_i32(c, g->batch), cg_i32(c, L->train), cg_i32(c, n_tensors),
      array_of(c, tensor_t, tensors, n_tensors, "tensors"), cg_i32(c, input),
      cg_i32(c, n_outs), i32_array(c, outs, n_outs, "outputs"), cg_i32(c, L->n_groups),
      array_of(c, shard_t, shards, L->n_groups, "shards"), LLVMConstReal(dbl, total)};
  cg_target_emit_isa(c); /* cnnc_isa_v1: the CPU features the runtime checks (cg_isa.h) */
  emit_seal_note(c);     /* cnnc_seal_v1: the checksum note cg_link_shared fills in */
  LLVMValueRef desc = LLVMAddGlobal(c->mod, model_t, CNNC_ABI_SYMBOL);
  LLVMSetInitializer(desc, LLVMConstNamedStruct(model_t, mv, 17));
  LLVMSetGlobalConstant(desc, 1);
  LLVMSetLinkage(desc, LLVMExternalLinkage);
  LLVMSetVisibility(desc, LLVMDefaultVisibility);
  return 0;
}
