/* gen_train_optim.c — compiled optimizer updates (issue 5, docs/training.md), torch.optim
 * semantics exactly as ir/ref_grad_optim.c: every formula sees g' = g * grad_scale + l2 * w
 * (loss scaling undone, coupled L2) and adds the decoupled weight decay outside the
 * optimizer, w' = w - lr * (O(g') + wd * w).  SGD, momentum / Nesterov, RMSprop, Adam (bias
 * corrected, 1 - beta^t computed per call from the step counter state) and the step counter.
 *
 * An optimizer node's output is its target param's state slice (updated in place): every
 * element is read before it is written, by the same thread, so the kernels are element-wise
 * over cg_foreach_elem blocks (f32 arithmetic; the interpreter uses double).
 *
 * --precision 16.16 (attr.round16): the weight updates round w' to the 16-bit format before
 * the store (cg_round16_v, to nearest even) or, attr.stochastic, stochastically
 * (cg_round16_sr_v) with the random bits of (attr.seed, step t' = the last operand, element
 * index): reproducible and independent of the thread count (docs/precision.md). */
#include <math.h>

#include "codegen/cg_internal.h"
#include "codegen/gen_round16.h"

/* cg_kernel_begin without the out-noalias promise (the output is an operand's slice). */
static LLVMValueRef kbegin(cg_ctx *c, const char *name, int n_act, LLVMValueRef *args) {
  LLVMValueRef f = cg_kernel_begin(c, name, n_act, args);
  unsigned kind = LLVMGetEnumAttributeKindForName("noalias", 7);
  LLVMRemoveEnumAttributeAtIndex(f, (unsigned)n_act + 1, kind);
  return f;
}

typedef struct optim_ctx {
  const ir_node *n;
  LLVMValueRef in[5], out, lr; /* lr: scalar f32 or NULL */
  LLVMValueRef ic1, ic2;       /* Adam: 1/(1 - beta1^t), 1/(1 - beta2^t) (f32 scalars) */
  LLVMValueRef sr_key;         /* stochastic rounding: the step's key (i64), or NULL */
} optim_ctx;

static LLVMValueRef vload(cg_ctx *c, LLVMValueRef p, LLVMValueRef i, int w) { return cg_load_v(c, p, i, w); }

/* g' = g * grad_scale + l2 * w */
static LLVMValueRef gprime(cg_ctx *c, const ir_optim_attr *o, LLVMValueRef g, LLVMValueRef w, int wd) {
  LLVMValueRef r = LLVMBuildFMul(c->b, g, cg_fconst(c, o->grad_scale, wd), "");
  if (o->l2 != 0.0f) r = cg_fma(c, cg_fconst(c, o->l2, wd), w, r);
  return r;
}
/* w - lr * (d + wd * w) */
static LLVMValueRef apply(cg_ctx *c, const ir_optim_attr *o, LLVMValueRef w, LLVMValueRef d, LLVMValueRef lr, int wd) {
  if (o->weight_decay != 0.0f) d = cg_fma(c, cg_fconst(c, o->weight_decay, wd), w, d);
  return LLVMBuildFSub(c->b, w, LLVMBuildFMul(c->b, cg_splat(c, lr, wd), d, ""), "");
}
/* rho * s + (1 - rho) * x (x = g' or g'^2) */
static LLVMValueRef decay(cg_ctx *c, float rho, LLVMValueRef s, LLVMValueRef x, int w) {
  return cg_fma(c, cg_fconst(c, rho, w), s, LLVMBuildFMul(c->b, cg_fconst(c, 1.0f - rho, w), x, ""));
}
/* num / (sqrt(den) + eps) */
static LLVMValueRef rms_div(cg_ctx *c, LLVMValueRef num, LLVMValueRef den, float eps, int w) {
  LLVMTypeRef vt = cg_vtype(c, w);
  LLVMValueRef r = cg_intrinsic(c, "llvm.sqrt", &vt, 1, &den, 1);
  return LLVMBuildFDiv(c->b, num, LLVMBuildFAdd(c->b, r, cg_fconst(c, eps, w), ""), "");
}

static void optim_body(cg_ctx *c, LLVMValueRef i, int w, void *user) {
  optim_ctx *u = user;
  const ir_optim_attr *o = &u->n->attr.sgd_update;
  LLVMValueRef r, wv, g;
  switch (u->n->op) {
  case IR_OP_sgd_update: /* w, g, lr */
    wv = vload(c, u->in[0], i, w);
    r = apply(c, o, wv, gprime(c, o, vload(c, u->in[1], i, w), wv, w), u->lr, w);
    break;
  case IR_OP_momentum_acc: /* g, v, w -> mu v + g' */
    g = gprime(c, o, vload(c, u->in[0], i, w), vload(c, u->in[2], i, w), w);
    r = cg_fma(c, cg_fconst(c, o->momentum, w), vload(c, u->in[1], i, w), g);
    break;
  case IR_OP_momentum_update: { /* w, v', lr[, g] */
    wv = vload(c, u->in[0], i, w);
    LLVMValueRef v = vload(c, u->in[1], i, w), d = v;
    if (o->nesterov) d = cg_fma(c, cg_fconst(c, o->momentum, w), v, gprime(c, o, vload(c, u->in[3], i, w), wv, w));
    r = apply(c, o, wv, d, u->lr, w);
    break;
  }
  case IR_OP_rmsprop_acc: /* g, s, w -> rho s + (1-rho) g'^2 */
  case IR_OP_adam_moment2: /* g, v, w -> beta2 v + (1-beta2) g'^2 */
    g = gprime(c, o, vload(c, u->in[0], i, w), vload(c, u->in[2], i, w), w);
    r = decay(c, u->n->op == IR_OP_rmsprop_acc ? o->rho : o->beta2, vload(c, u->in[1], i, w), LLVMBuildFMul(c->b, g, g, ""), w);
    break;
  case IR_OP_adam_moment1: /* g, m, w -> beta1 m + (1-beta1) g' */
    g = gprime(c, o, vload(c, u->in[0], i, w), vload(c, u->in[2], i, w), w);
    r = decay(c, o->beta1, vload(c, u->in[1], i, w), g, w);
    break;
  case IR_OP_rmsprop_update: /* w, s', lr, g -> w - lr (g'/(sqrt(s')+eps) + wd w) */
    wv = vload(c, u->in[0], i, w);
    g = gprime(c, o, vload(c, u->in[3], i, w), wv, w);
    r = apply(c, o, wv, rms_div(c, g, vload(c, u->in[1], i, w), o->eps, w), u->lr, w);
    break;
  default: { /* adam_update: w, m', v', lr, t' -> w - lr (mhat/(sqrt(vhat)+eps) + wd w) */
    wv = vload(c, u->in[0], i, w);
    LLVMValueRef mh = LLVMBuildFMul(c->b, vload(c, u->in[1], i, w), cg_splat(c, u->ic1, w), "");
    LLVMValueRef vh = LLVMBuildFMul(c->b, vload(c, u->in[2], i, w), cg_splat(c, u->ic2, w), "");
    r = apply(c, o, wv, rms_div(c, mh, vh, o->eps, w), u->lr, w);
    break;
  }
  }
  if (o->round16) /* 16.16: the stored weight is a 16-bit value */
    r = u->sr_key ? cg_round16_sr_v(c, u->n, r, cg_sr_u24(c, u->sr_key, i, w), o->round16 - 1, w)
                  : cg_round16_v(c, u->n, r, o->round16 - 1, w);
  cg_store_v(c, r, u->out, i, w);
}

/* beta^t (double) for t = the step counter (a whole number >= 0 held in f32), by squaring. */
static LLVMValueRef ipow(cg_ctx *c, double beta, LLVMValueRef t_f32) {
  LLVMTypeRef dt = LLVMDoubleTypeInContext(c->llc);
  LLVMValueRef t = LLVMBuildFPToSI(c->b, t_f32, c->t_i64, "t"), r = LLVMConstReal(dt, 1.0), b = LLVMConstReal(dt, beta);
  for (int k = 0; k < 32; k++) {
    LLVMValueRef bit = LLVMBuildAnd(c->b, LLVMBuildLShr(c->b, t, cg_i64(c, k), ""), cg_i64(c, 1), "");
    LLVMValueRef on = LLVMBuildICmp(c->b, LLVMIntNE, bit, cg_i64(c, 0), "");
    r = LLVMBuildSelect(c->b, on, LLVMBuildFMul(c->b, r, b, ""), r, "");
    b = LLVMBuildFMul(c->b, b, b, "");
  }
  return r;
}
/* f32 1 / (1 - beta^t) */
static LLVMValueRef bias_corr(cg_ctx *c, double beta, LLVMValueRef t) {
  LLVMTypeRef dt = LLVMDoubleTypeInContext(c->llc);
  LLVMValueRef one = LLVMConstReal(dt, 1.0);
  return LLVMBuildFPTrunc(c->b, LLVMBuildFDiv(c->b, one, LLVMBuildFSub(c->b, one, ipow(c, beta, t), ""), ""), c->t_f32, "");
}

static LLVMValueRef gen_optim(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind, int lr_slot) {
  LLVMValueRef a[8];
  int nin = n->n_in;
  LLVMValueRef f = kbegin(c, fn_name, nin, a);
  optim_ctx u = {n, {0}, a[nin], NULL, NULL, NULL, NULL};
  for (int j = 0; j < nin; j++) u.in[j] = a[j];
  if (lr_slot >= 0) u.lr = cg_load_f32(c, a[lr_slot], cg_i64(c, 0));
  if (n->op == IR_OP_adam_update) {
    LLVMValueRef t = cg_load_f32(c, a[4], cg_i64(c, 0));
    u.ic1 = bias_corr(c, n->attr.adam_update.beta1, t);
    u.ic2 = bias_corr(c, n->attr.adam_update.beta2, t);
  }
  const ir_optim_attr *o = &n->attr.sgd_update;
  if (o->round16 && o->stochastic) /* t' is the last operand (a whole number >= 1 in f32) */
    u.sr_key = cg_sr_step_key(c, o->seed, LLVMBuildFPToSI(c->b, cg_load_f32(c, a[nin - 1], cg_i64(c, 0)), c->t_i64, "t"));
  cg_foreach_elem(c, cg_numel(c, n->out), a[nin + 1], a[nin + 2], optim_body, &u);
  cg_kernel_end(c);
  const char *kn = ir_ops[n->op].name;
  if (o->round16)
    kn = ir_fmt(c->arena, "%s_%s%s", kn, o->stochastic ? "sr_" : "", o->round16 - 1 == IR_HALF_FP16 ? "fp16" : "bf16");
  *kind = cg_kind(c, kn, NULL);
  return f;
}

LLVMValueRef cg_gen_sgd_update(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind) {
  return gen_optim(c, n, fn_name, kind, 2);
}
LLVMValueRef cg_gen_momentum_acc(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind) {
  return gen_optim(c, n, fn_name, kind, -1);
}
LLVMValueRef cg_gen_momentum_update(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind) {
  return gen_optim(c, n, fn_name, kind, 2);
}
LLVMValueRef cg_gen_rmsprop_acc(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind) {
  return gen_optim(c, n, fn_name, kind, -1);
}
LLVMValueRef cg_gen_rmsprop_update(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind) {
  return gen_optim(c, n, fn_name, kind, 2);
}
LLVMValueRef cg_gen_adam_moment1(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind) {
  return gen_optim(c, n, fn_name, kind, -1);
}
LLVMValueRef cg_gen_adam_moment2(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind) {
  return gen_optim(c, n, fn_name, kind, -1);
}
LLVMValueRef cg_gen_adam_update(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind) {
  return gen_optim(c, n, fn_name, kind, 3);
}

/* t [1] -> t + 1 (in place; thread 0). */
LLVMValueRef cg_gen_step_count(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind) {
  (void)n;
  LLVMValueRef a[4];
  LLVMValueRef f = kbegin(c, fn_name, 1, a);
  cg_if fi;
  cg_if_begin(c, &fi, LLVMBuildICmp(c->b, LLVMIntEQ, a[2], cg_i32(c, 0), ""));
  LLVMValueRef t = LLVMBuildFAdd(c->b, cg_load_f32(c, a[0], cg_i64(c, 0)), cg_f32(c, 1.0f), "");
  cg_store_f32(c, t, a[1], cg_i64(c, 0));
  cg_if_end(c, &fi);
  cg_kernel_end(c);
  *kind = cg_kind(c, "step_count", NULL);
  return f;
}
