/* cg_main.c — the main module of a compiled model: one entry per shard (cnnc_abi_shard_fn:
 * resolves every kernel operand to an io buffer or a scratch offset, calls the kernels in
 * order with a barrier between them) and the exported cnnc_abi_model descriptor (tensors,
 * shards, op and kernel names, FLOPs, options), laid out with the target's data layout. */
#include <stdio.h>
#include <string.h>

#include "cnnc_config.h"
#include "codegen/cg_main.h"
#include "runtime/cnnc_abi.h"

static LLVMValueRef kernel_decl(cg_ctx *c, const cg_kernel *k) {
  LLVMValueRef f = LLVMGetNamedFunction(c->mod, k->name);
  if (f) return f;
  LLVMTypeRef p[CG_MAX_ACT + 3];
  for (int i = 0; i <= k->n_act; i++) p[i] = c->t_ptr;
  p[k->n_act + 1] = p[k->n_act + 2] = c->t_i32;
  f = LLVMAddFunction(c->mod, k->name, LLVMFunctionType(c->t_void, p, (unsigned)k->n_act + 3, 0));
  LLVMSetVisibility(f, LLVMHiddenVisibility);
  return f;
}

/* Pointer to value v inside shard s's entry: io[slot] or scratch + offset. */
static LLVMValueRef value_ptr(cg_ctx *c, const cg_layout *L, int s, int v, LLVMValueRef io, LLVMValueRef scratch) {
  int t = L->vid_tensor[v];
  if (t >= 0) {
    int slot = cg_layout_io_slot(L, s, t);
    LLVMValueRef idx = cg_i64(c, slot);
    return LLVMBuildLoad2(c->b, c->t_ptr, LLVMBuildInBoundsGEP2(c->b, c->t_ptr, io, &idx, 1, ""), c->g->values[v].name);
  }
  LLVMValueRef off = cg_i64(c, L->scratch_off[v]);
  return LLVMBuildInBoundsGEP2(c->b, c->t_i8, scratch, &off, 1, c->g->values[v].name);
}

static LLVMValueRef build_entry(cg_ctx *c, const cg_layout *L, int s) {
  LLVMTypeRef p[6] = {c->t_ptr, c->t_ptr, c->t_i32, c->t_i32, c->t_ptr, c->t_ptr};
  char name[64];
  snprintf(name, sizeof name, "cnnc_shard%d_run", s);
  LLVMValueRef f = LLVMAddFunction(c->mod, name, LLVMFunctionType(c->t_i32, p, 6, 0));
  LLVMSetLinkage(f, LLVMInternalLinkage);
  cg_set_fn_attrs(c, f);
  LLVMPositionBuilderAtEnd(c->b, LLVMAppendBasicBlockInContext(c->llc, f, "entry"));
  LLVMValueRef io = LLVMGetParam(f, 0), scratch = LLVMGetParam(f, 1), tid = LLVMGetParam(f, 2), nth = LLVMGetParam(f, 3);
  LLVMValueRef barrier = LLVMGetParam(f, 4), bctx = LLVMGetParam(f, 5);
  LLVMTypeRef bar_t = LLVMFunctionType(c->t_void, &c->t_ptr, 1, 0);
  const cg_shard_plan *sp = &L->sh[s];
  for (int i = sp->first_k; i < sp->first_k + sp->n_k; i++) {
    const cg_kernel *k = &L->k[i];
    if (i > sp->first_k) { /* every thread finished the previous op */
      cg_if fi;
      cg_if_begin(c, &fi, LLVMBuildICmp(c->b, LLVMIntSGT, nth, cg_i32(c, 1), ""));
      LLVMBuildCall2(c->b, bar_t, barrier, &bctx, 1, "");
      cg_if_end(c, &fi);
    }
    LLVMValueRef args[CG_MAX_ACT + 3];
    for (int j = 0; j < k->n_act; j++) args[j] = value_ptr(c, L, s, k->act[j], io, scratch);
    args[k->n_act] = value_ptr(c, L, s, k->out, io, scratch);
    args[k->n_act + 1] = tid;
    args[k->n_act + 2] = nth;
    LLVMValueRef fn = kernel_decl(c, k);
    LLVMBuildCall2(c->b, LLVMGlobalGetValueType(fn), fn, args, (unsigned)k->n_act + 3, "");
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

static LLVMValueRef shard_const(cg_ctx *c, LLVMTypeRef st, const cg_layout *L, int s, LLVMValueRef run) {
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
  LLVMValueRef f[11] = {cstr(c, first->name), cstr(c, last->name), cg_i32(c, sp->n_io), cg_i32(c, sp->n_inputs),
                        i32_array(c, sp->io, sp->n_io, "io"), cg_i64(c, sp->scratch_bytes), cg_i32(c, sp->n_k),
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

int cg_build_main(cg_ctx *c, const cg_layout *L, const cg_options *o, ir_diag *d) {
  LLVMTypeRef i32 = c->t_i32, i64 = c->t_i64, ptr = c->t_ptr, dbl = LLVMDoubleTypeInContext(c->llc);
  LLVMTypeRef tf[5] = {ptr, i32, i32, LLVMArrayType2(i64, 4), i64};
  LLVMTypeRef tensor_t = named_struct(c, "cnnc_abi_tensor", tf, 5);
  LLVMTypeRef sf[11] = {ptr, ptr, i32, i32, ptr, i64, i32, ptr, ptr, ptr, ptr};
  LLVMTypeRef shard_t = named_struct(c, "cnnc_abi_shard", sf, 11);
  LLVMTypeRef mf[17] = {i32, i32, i32, i32, ptr, ptr, ptr, i32, i32, i32, ptr, i32, i32, ptr, i32, ptr, dbl};
  LLVMTypeRef model_t = named_struct(c, "cnnc_abi_model", mf, 17);
  const ir_graph *g = c->g;
  LLVMValueRef tensors[L->n_tensors > 0 ? L->n_tensors : 1], shards[L->n_shards];
  for (int i = 0; i < L->n_tensors; i++) tensors[i] = tensor_const(c, tensor_t, &g->values[L->tensor_vid[i]]);
  double total = 0;
  for (int i = 0; i < L->n_k; i++) total += L->k[i].flops;
  for (int s = 0; s < L->n_shards; s++) shards[s] = shard_const(c, shard_t, L, s, build_entry(c, L, s));
  int outs[8];
  for (int i = 0; i < g->n_outputs; i++) outs[i] = L->vid_tensor[g->outputs[i]];
  LLVMTargetDataRef td = LLVMGetModuleDataLayout(c->mod);
  LLVMValueRef mv[17] = {
      cg_i32(c, (int32_t)CNNC_ABI_MAGIC), cg_i32(c, CNNC_ABI_VERSION),
      cg_i32(c, (int32_t)LLVMABISizeOfType(td, model_t)), cg_i32(c, 0),
      cstr(c, o->model_name ? o->model_name : g->name), cstr(c, "cnnc " CNNC_VERSION), cstr(c, o->options_json ? o->options_json : "{}"),
      cg_i32(c, g->batch), cg_i32(c, 0), cg_i32(c, L->n_tensors),
      array_of(c, tensor_t, tensors, L->n_tensors, "tensors"), cg_i32(c, g->input >= 0 ? L->vid_tensor[g->input] : -1),
      cg_i32(c, g->n_outputs), i32_array(c, outs, g->n_outputs, "outputs"), cg_i32(c, L->n_shards),
      array_of(c, shard_t, shards, L->n_shards, "shards"), LLVMConstReal(dbl, total)};
  LLVMValueRef desc = LLVMAddGlobal(c->mod, model_t, CNNC_ABI_SYMBOL);
  LLVMSetInitializer(desc, LLVMConstNamedStruct(model_t, mv, 17));
  LLVMSetGlobalConstant(desc, 1);
  LLVMSetLinkage(desc, LLVMExternalLinkage);
  LLVMSetVisibility(desc, LLVMDefaultVisibility);
  (void)d;
  return 0;
}
