/* gen_norm.c — normalisation kernels for inference: batchnorm with running statistics
 * (per-channel scale/shift precomputed at compile time; a batchnorm right after a conv is
 * folded into the conv instead, see passes/fuse.c) and groupnorm (statistics per sample and
 * group, computed in the kernel). */
#include <math.h>
#include <stdio.h>

#include "codegen/cg_internal.h"
#include "codegen/gen_round16.h"

LLVMValueRef cg_reduce_sum(cg_ctx *c, LLVMValueRef base, LLVMValueRef off, int64_t cnt, LLVMValueRef mean) {
  return cg_reduce_sum_dt(c, NULL, base, off, cnt, mean, IR_F32);
}

LLVMValueRef cg_reduce_sum_dt(cg_ctx *c, const ir_node *n, LLVMValueRef base, LLVMValueRef off, int64_t cnt,
                              LLVMValueRef mean, ir_dtype dt) {
  int v = c->target->vec_f32;
  int64_t nv = cnt / v * v;
  LLVMValueRef accv = cg_entry_alloca(c, cg_vtype(c, v), "accv"), accs = cg_entry_alloca(c, c->t_f32, "accs");
  LLVMBuildStore(c->b, cg_fzero(c, v), accv);
  LLVMBuildStore(c->b, cg_f32(c, 0.0f), accs);
  for (int pass = 0; pass < 2; pass++) {
    int w = pass == 0 ? v : 1;
    int64_t lo = pass == 0 ? 0 : nv, hi = pass == 0 ? nv : cnt;
    if (lo >= hi) continue;
    LLVMValueRef acc = pass == 0 ? accv : accs;
    cg_loop L;
    LLVMValueRef j = cg_loop_begin(c, &L, cg_i64(c, lo), cg_i64(c, hi), cg_i64(c, w), "r");
    LLVMValueRef x = cg_act_load(c, n, base, LLVMBuildAdd(c->b, off, j, ""), w, dt);
    LLVMValueRef a = LLVMBuildLoad2(c->b, cg_vtype(c, w), acc, "");
    if (mean) {
      LLVMValueRef dlt = LLVMBuildFSub(c->b, x, cg_splat(c, mean, w), "");
      a = cg_fma(c, dlt, dlt, a);
    } else {
      a = LLVMBuildFAdd(c->b, a, x, "");
    }
    LLVMBuildStore(c->b, a, acc);
    cg_loop_end(c, &L);
  }
  LLVMValueRef sv = cg_hsum(c, LLVMBuildLoad2(c->b, cg_vtype(c, v), accv, ""), v);
  return LLVMBuildFAdd(c->b, sv, LLVMBuildLoad2(c->b, c->t_f32, accs, ""), "sum");
}

/* y = act((x - sub) * a + b) over base[0..n) with scalar a, b (act: a fused activation node, or none). */
typedef struct affine_ctx { LLVMValueRef x, out, base, a, b, sub; const ir_node *act; } affine_ctx;
static void affine_body(cg_ctx *c, LLVMValueRef j, int w, void *user) {
  affine_ctx *u = user;
  LLVMValueRef i = LLVMBuildAdd(c->b, u->base, j, "");
  LLVMValueRef x = cg_load_v(c, u->x, i, w);
  if (u->sub) x = LLVMBuildFSub(c->b, x, cg_splat(c, u->sub, w), "");
  LLVMValueRef y = cg_fma(c, x, cg_splat(c, u->a, w), cg_splat(c, u->b, w));
  if (u->act) y = cg_activation(c, u->act, y, w);
  cg_store_v(c, y, u->out, i, w);
}

/* in: x [N,C,...], gamma, beta, running_mean, running_var [C]. */
LLVMValueRef cg_gen_batchnorm(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind) {
  const ir_batchnorm_attr *at = &n->attr.batchnorm;
  if (at->training) return cg_fail(c, n, "training-mode batchnorm (batch statistics) is not supported by codegen yet (compiled training: conv/relu/pool/dense/dropout models; docs/training.md)");
  const ir_shape *xs = &c->g->values[n->in[0]].shape;
  int64_t nb = xs->dim[0], nc = xs->rank > 1 ? xs->dim[1] : 1, s = ir_shape_numel(xs) / (nb * nc);
  const float *gam = c->g->values[n->in[1]].data, *bet = c->g->values[n->in[2]].data;
  const float *mean = c->g->values[n->in[3]].data, *var = c->g->values[n->in[4]].data;
  float *tab = ir_alloc(c->arena, (size_t)(3 * nc) * sizeof(float)); /* scale, shift, mean */
  for (int64_t k = 0; k < nc; k++) {
    tab[k] = (float)(gam[k] / sqrt((double)var[k] + (double)at->eps));
    tab[nc + k] = bet[k];
    tab[2 * nc + k] = mean[k];
  }
  LLVMValueRef a[4];
  LLVMValueRef f = cg_kernel_begin(c, fn_name, 1, a);
  LLVMValueRef t = cg_blob_const(c, "bn.tab", tab, (size_t)(3 * nc) * sizeof(float));
  LLVMValueRef lo, hi;
  cg_thread_range(c, cg_i64(c, nb * nc), a[2], a[3], &lo, &hi);
  cg_loop L;
  LLVMValueRef p = cg_loop_begin(c, &L, lo, hi, cg_i64(c, 1), "plane");
  LLVMValueRef ch = LLVMBuildSRem(c->b, p, cg_i64(c, nc), "c");
  const pass_fusion *pl = c->priv ? ((const cg_priv *)c->priv)->plan : NULL; /* fuse.c: an activation after it */
  const ir_node *act = pl && pl[n->id].n_post == 1 ? &c->g->nodes[pl[n->id].post[0]] : NULL;
  affine_ctx u = {a[0], a[1], LLVMBuildMul(c->b, p, cg_i64(c, s), ""), cg_load_f32(c, t, ch),
                  cg_load_f32(c, t, LLVMBuildAdd(c->b, ch, cg_i64(c, nc), "")),
                  cg_load_f32(c, t, LLVMBuildAdd(c->b, ch, cg_i64(c, 2 * nc), "")), act};
  cg_inner_loop(c, s, affine_body, &u);
  cg_loop_end(c, &L);
  cg_kernel_end(c);
  char k[64];
  snprintf(k, sizeof k, "batchnorm_inference%s%s", act ? "_" : "", act ? ir_ops[act->op].name : "");
  *kind = cg_kind(c, k, NULL);
  return f;
}

/* in: x [N,C,...], gamma [C], beta [C]; one work item per (sample, group). */
LLVMValueRef cg_gen_groupnorm(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind) {
  const ir_groupnorm_attr *at = &n->attr.groupnorm;
  const ir_shape *xs = &c->g->values[n->in[0]].shape;
  int64_t nb = xs->dim[0], nc = xs->rank > 1 ? xs->dim[1] : 1, s = ir_shape_numel(xs) / (nb * nc);
  int64_t groups = at->groups > 0 ? at->groups : 1, cpg = nc / groups, cnt = cpg * s;
  LLVMValueRef a[4];
  LLVMValueRef f = cg_kernel_begin(c, fn_name, 1, a);
  LLVMValueRef gam = cg_param_const(c, n->in[1]), bet = cg_param_const(c, n->in[2]);
  LLVMValueRef lo, hi;
  cg_thread_range(c, cg_i64(c, nb * groups), a[2], a[3], &lo, &hi);
  cg_loop L;
  LLVMValueRef it = cg_loop_begin(c, &L, lo, hi, cg_i64(c, 1), "group");
  LLVMValueRef base = LLVMBuildMul(c->b, it, cg_i64(c, cnt), "base");
  LLVMValueRef fcnt = cg_f32(c, (float)cnt);
  LLVMValueRef mean = LLVMBuildFDiv(c->b, cg_reduce_sum(c, a[0], base, cnt, NULL), fcnt, "mean");
  LLVMValueRef var = LLVMBuildFDiv(c->b, cg_reduce_sum(c, a[0], base, cnt, mean), fcnt, "var");
  LLVMTypeRef ft = c->t_f32;
  LLVMValueRef sq = LLVMBuildFAdd(c->b, var, cg_f32(c, at->eps), "");
  LLVMValueRef inv = LLVMBuildFDiv(c->b, cg_f32(c, 1.0f), cg_intrinsic(c, "llvm.sqrt", &ft, 1, &sq, 1), "inv");
  LLVMValueRef c0 = LLVMBuildMul(c->b, LLVMBuildSRem(c->b, it, cg_i64(c, groups), ""), cg_i64(c, cpg), "c0");
  cg_loop C;
  LLVMValueRef k = cg_loop_begin(c, &C, cg_i64(c, 0), cg_i64(c, cpg), cg_i64(c, 1), "ch");
  LLVMValueRef ch = LLVMBuildAdd(c->b, c0, k, "");
  LLVMValueRef sc = LLVMBuildFMul(c->b, inv, cg_load_f32(c, gam, ch), "");
  affine_ctx u = {a[0], a[1], LLVMBuildAdd(c->b, base, LLVMBuildMul(c->b, k, cg_i64(c, s), ""), ""), sc,
                  cg_load_f32(c, bet, ch), mean};
  cg_inner_loop(c, s, affine_body, &u);
  cg_loop_end(c, &C);
  cg_loop_end(c, &L);
  cg_kernel_end(c);
  *kind = cg_kind(c, "groupnorm", NULL);
  return f;
}
