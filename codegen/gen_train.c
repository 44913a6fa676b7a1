/* gen_train.c — code generators of compiled training (issue 5, docs/training.md): the loss,
 * reduce_sum, the relu gradient (with a fused residual gradient add), training dropout, and
 * the table of training generators (cg_train_generator; the helpers they share are
 * cg_util.c's).  In a training layout (cg_layout.train) every
 * operand of a node is a kernel argument in operand order: params point into the runtime's
 * state buffer, an optimizer node's output is its target param's slice (updated in place:
 * each element is read before it is written, by the same thread).  Work is split over
 * tid/nthreads on an outer dimension where each output element has one writer.  The
 * register-tiled conv2d and dense kernels (training forward with weights by pointer,
 * grad_input, grad_weight) are in gen_train_conv.c and gen_train_dense.c; normalisation
 * layers and their gradients in gen_train_norm.c, the optimizer updates in gen_train_optim.c,
 * the activation / pool / softmax gradients in gen_train_act.c. */
#include <math.h>

#include "codegen/gen_train.h"

static LLVMValueRef kbegin(cg_ctx *c, const char *name, int n_act, LLVMValueRef *args) {
  return cg_train_kbegin(c, name, n_act, args);
}

static LLVMValueRef add64(cg_ctx *c, LLVMValueRef a, LLVMValueRef b) { return cg_tadd(c, a, b); }
static LLVMValueRef mul64(cg_ctx *c, LLVMValueRef a, int64_t k) { return LLVMBuildMul(c->b, a, cg_i64(c, k), ""); }
static LLVMValueRef addk(cg_ctx *c, LLVMValueRef a, int64_t k) { return LLVMBuildAdd(c->b, a, cg_i64(c, k), ""); }
static LLVMValueRef vload(cg_ctx *c, LLVMValueRef p, LLVMValueRef i, int w) { return cg_load_v(c, p, i, w); }

/* Loop over this thread's share of [0, n): returns the index; close with cg_loop_end. */
static LLVMValueRef par_loop(cg_ctx *c, cg_loop *L, int64_t n, LLVMValueRef tid, LLVMValueRef nth, const char *name) {
  LLVMValueRef lo, hi;
  cg_thread_range(c, cg_i64(c, n), tid, nth, &lo, &hi);
  return cg_loop_begin(c, L, lo, hi, cg_i64(c, 1), name);
}
static LLVMValueRef seq_loop(cg_ctx *c, cg_loop *L, int64_t lo, int64_t hi, const char *name) {
  return cg_loop_begin(c, L, cg_i64(c, lo), cg_i64(c, hi), cg_i64(c, 1), name);
}

/* ---- reductions, element-wise grads, pooling ------------------------------------------------- */
/* x -> sum to attr shape; supports shapes reduced-kept-reduced (A, K, I): bias gradients. */
LLVMValueRef cg_gen_reduce_sum(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind) {
  const ir_shape *xs = &c->g->values[n->in[0]].shape, *ts = &n->attr.reduce_sum.shape;
  int first = -1, last = -1;
  for (int d = 0; d < xs->rank; d++)
    if (ts->dim[d] == xs->dim[d] && xs->dim[d] != 1) {
      if (first < 0) first = d;
      last = d;
    }
  int64_t A = 1, K = 1, I = 1;
  for (int d = 0; d < xs->rank; d++) {
    int kept = ts->dim[d] == xs->dim[d];
    if (first >= 0 && d >= first && d <= last) {
      if (!kept) { /* kept dims apart (a [N,1,H,W] operand's gradient): the any-dims kernel */
        ir_reduce_attr ra = {*ts, IR_REDUCE_SUM};
        return cg_gen_reduce_to(c, n, &ra, fn_name, kind);
      }
      K *= xs->dim[d];
    } else if (first < 0 || d < first) A *= kept ? 1 : xs->dim[d];
    else I *= kept ? 1 : xs->dim[d];
  }
  LLVMValueRef a[4];
  LLVMValueRef f = kbegin(c, fn_name, 1, a);
  LLVMValueRef acc = cg_entry_alloca(c, c->t_f32, "acc");
  cg_loop L, B;
  LLVMValueRef k = par_loop(c, &L, K, a[2], a[3], "k");
  LLVMBuildStore(c->b, cg_f32(c, 0.0f), acc);
  LLVMValueRef i = seq_loop(c, &B, 0, A, "a");
  LLVMValueRef s = cg_reduce_sum(c, a[0], mul64(c, add64(c, mul64(c, i, K), k), I), I, NULL);
  LLVMBuildStore(c->b, LLVMBuildFAdd(c->b, LLVMBuildLoad2(c->b, c->t_f32, acc, ""), s, ""), acc);
  cg_loop_end(c, &B);
  cg_store_f32(c, LLVMBuildLoad2(c->b, c->t_f32, acc, ""), a[1], k);
  cg_loop_end(c, &L);
  cg_kernel_end(c);
  *kind = cg_kind(c, "reduce_sum", NULL);
  return f;
}

typedef struct ew_ctx { const ir_node *n; LLVMValueRef in[5], out, lr; } ew_ctx;

static void relu_grad_body(cg_ctx *c, LLVMValueRef i, int w, void *user) {
  ew_ctx *u = user;
  LLVMValueRef dy = vload(c, u->in[0], i, w), x = vload(c, u->in[1], i, w);
  LLVMValueRef r = LLVMBuildSelect(c->b, LLVMBuildFCmp(c->b, LLVMRealOGT, x, cg_fzero(c, w), ""), dy, cg_fzero(c, w), "");
  cg_store_v(c, r, u->out, i, w);
}

LLVMValueRef cg_gen_relu_grad(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind) {
  LLVMValueRef a[5];
  LLVMValueRef f = kbegin(c, fn_name, 2, a);
  ew_ctx u = {n, {a[0], a[1]}, a[2], NULL};
  cg_foreach_elem(c, cg_numel(c, n->out), a[3], a[4], relu_grad_body, &u);
  cg_kernel_end(c);
  *kind = cg_kind(c, "relu_grad", NULL);
  return f;
}

/* ---- loss ------------------------------------------------------------------------------------ */
/* Natural log of a positive finite double: x = 2^e m, m in [sqrt(1/2), sqrt(2)),
 * log m = 2 atanh((m-1)/(m+1)) by its series (|t| < 0.172: 10 terms, ~1e-16). */
static LLVMValueRef log_d(cg_ctx *c, LLVMValueRef x) {
  LLVMTypeRef dt = LLVMDoubleTypeInContext(c->llc);
  LLVMValueRef bits = LLVMBuildBitCast(c->b, x, c->t_i64, "");
  LLVMValueRef e = addk(c, LLVMBuildAnd(c->b, LLVMBuildLShr(c->b, bits, cg_i64(c, 52), ""), cg_i64(c, 0x7ff), ""), -1023);
  LLVMValueRef mb = LLVMBuildOr(c->b, LLVMBuildAnd(c->b, bits, cg_i64(c, 0x000fffffffffffffLL), ""),
                                cg_i64(c, 0x3ff0000000000000LL), "");
  LLVMValueRef m = LLVMBuildBitCast(c->b, mb, dt, "");
  LLVMValueRef big = LLVMBuildFCmp(c->b, LLVMRealOGT, m, LLVMConstReal(dt, 1.4142135623730951), "");
  m = LLVMBuildSelect(c->b, big, LLVMBuildFMul(c->b, m, LLVMConstReal(dt, 0.5), ""), m, "");
  e = LLVMBuildSelect(c->b, big, addk(c, e, 1), e, "");
  LLVMValueRef one = LLVMConstReal(dt, 1.0);
  LLVMValueRef t = LLVMBuildFDiv(c->b, LLVMBuildFSub(c->b, m, one, ""), LLVMBuildFAdd(c->b, m, one, ""), "");
  LLVMValueRef t2 = LLVMBuildFMul(c->b, t, t, "");
  LLVMValueRef s = LLVMConstReal(dt, 1.0 / 21.0);
  for (int k = 19; k >= 1; k -= 2) s = LLVMBuildFAdd(c->b, LLVMBuildFMul(c->b, s, t2, ""), LLVMConstReal(dt, 1.0 / k), "");
  LLVMValueRef lm = LLVMBuildFMul(c->b, LLVMBuildFMul(c->b, s, t, ""), LLVMConstReal(dt, 2.0), "");
  return LLVMBuildFAdd(c->b, LLVMBuildFMul(c->b, LLVMBuildSIToFP(c->b, e, dt, ""), LLVMConstReal(dt, 0.6931471805599453), ""),
                       lm, "log");
}

/* Row b of logits [N,K]: max into *mx, sum of exp(x - max) (double) into *sum. */
static void row_softmax_stats(cg_ctx *c, LLVMValueRef x, LLVMValueRef rb, int64_t k, LLVMValueRef *mx, LLVMValueRef *sum) {
  LLVMTypeRef dt = LLVMDoubleTypeInContext(c->llc);
  LLVMValueRef ma = cg_entry_alloca(c, c->t_f32, "mx"), sa = cg_entry_alloca(c, dt, "se");
  LLVMBuildStore(c->b, cg_f32(c, -INFINITY), ma);
  LLVMBuildStore(c->b, LLVMConstReal(dt, 0.0), sa);
  cg_loop J;
  LLVMValueRef j = seq_loop(c, &J, 0, k, "j");
  LLVMBuildStore(c->b, cg_max_nan(c, cg_load_f32(c, x, add64(c, rb, j)), LLVMBuildLoad2(c->b, c->t_f32, ma, "")), ma);
  cg_loop_end(c, &J);
  *mx = LLVMBuildLoad2(c->b, c->t_f32, ma, "max");
  j = seq_loop(c, &J, 0, k, "j");
  LLVMValueRef e = cg_exp(c, LLVMBuildFSub(c->b, cg_load_f32(c, x, add64(c, rb, j)), *mx, ""), 1);
  LLVMBuildStore(c->b, LLVMBuildFAdd(c->b, LLVMBuildLoad2(c->b, dt, sa, ""), LLVMBuildFPExt(c->b, e, dt, ""), ""), sa);
  cg_loop_end(c, &J);
  *sum = LLVMBuildLoad2(c->b, dt, sa, "sum");
}

/* The labels of row b (docs/training.md "Mixup"): width 1 = class ids [N]; width 3 = mixed
 * labels [N,3] (a, b, lam).  *ya, *yb as i64 (yb = ya for width 1), *lam as double (1). */
static void load_labels(cg_ctx *c, LLVMValueRef lab, LLVMValueRef b, int w, LLVMValueRef *ya, LLVMValueRef *yb,
                        LLVMValueRef *lam) {
  LLVMTypeRef dt = LLVMDoubleTypeInContext(c->llc);
  LLVMValueRef rb = mul64(c, b, w);
  *ya = LLVMBuildFPToSI(c->b, cg_load_f32(c, lab, rb), c->t_i64, "ya");
  *yb = w == 3 ? LLVMBuildFPToSI(c->b, cg_load_f32(c, lab, add64(c, rb, cg_i64(c, 1))), c->t_i64, "yb") : *ya;
  *lam = w == 3 ? LLVMBuildFPExt(c->b, cg_load_f32(c, lab, add64(c, rb, cg_i64(c, 2))), dt, "lam") : LLVMConstReal(dt, 1.0);
}

/* Forward loss: logits [N,K], labels [N] -> [1] mean (label smoothing s); thread 0 only. */
static LLVMValueRef gen_xent_train(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind) {
  const ir_shape *xs = &c->g->values[n->in[0]].shape;
  int64_t nb = xs->dim[0], k = ir_shape_numel(xs) / nb;
  double s = n->attr.softmax_xent.label_smoothing;
  int w = ir_label_width(&c->g->values[n->in[1]].shape);
  LLVMTypeRef dt = LLVMDoubleTypeInContext(c->llc);
  LLVMValueRef a[5];
  LLVMValueRef f = kbegin(c, fn_name, 2, a);
  LLVMValueRef tot = cg_entry_alloca(c, dt, "tot");
  cg_if fi;
  cg_if_begin(c, &fi, LLVMBuildICmp(c->b, LLVMIntEQ, a[3], cg_i32(c, 0), ""));
  LLVMBuildStore(c->b, LLVMConstReal(dt, 0.0), tot);
  cg_loop B;
  LLVMValueRef b = seq_loop(c, &B, 0, nb, "b");
  LLVMValueRef rb = mul64(c, b, k), mx, sum;
  row_softmax_stats(c, a[0], rb, k, &mx, &sum);
  LLVMValueRef lse = LLVMBuildFAdd(c->b, LLVMBuildFPExt(c->b, mx, dt, ""), log_d(c, sum), "lse");
  LLVMValueRef ya, yb, lam;
  load_labels(c, a[1], b, w, &ya, &yb, &lam);
  LLVMValueRef xy = LLVMBuildFPExt(c->b, cg_load_f32(c, a[0], add64(c, rb, ya)), dt, "");
  if (w == 3) { /* lam x[a] + (1 - lam) x[b]: the mixed loss lam CE(a) + (1 - lam) CE(b) */
    LLVMValueRef xb = LLVMBuildFPExt(c->b, cg_load_f32(c, a[0], add64(c, rb, yb)), dt, "");
    xy = LLVMBuildFAdd(c->b, LLVMBuildFMul(c->b, lam, xy, ""),
                       LLVMBuildFMul(c->b, LLVMBuildFSub(c->b, LLVMConstReal(dt, 1.0), lam, ""), xb, ""), "");
  }
  LLVMValueRef row = LLVMBuildFMul(c->b, LLVMConstReal(dt, 1.0 - s), LLVMBuildFSub(c->b, lse, xy, ""), "");
  if (s != 0.0) {
    LLVMValueRef mean = LLVMBuildFDiv(c->b, LLVMBuildFPExt(c->b, cg_reduce_sum(c, a[0], rb, k, NULL), dt, ""),
                                      LLVMConstReal(dt, (double)k), "");
    row = LLVMBuildFAdd(c->b, row, LLVMBuildFMul(c->b, LLVMConstReal(dt, s), LLVMBuildFSub(c->b, lse, mean, ""), ""), "");
  }
  LLVMBuildStore(c->b, LLVMBuildFAdd(c->b, LLVMBuildLoad2(c->b, dt, tot, ""), row, ""), tot);
  cg_loop_end(c, &B);
  LLVMValueRef mean = LLVMBuildFDiv(c->b, LLVMBuildLoad2(c->b, dt, tot, ""), LLVMConstReal(dt, (double)nb), "");
  cg_store_f32(c, LLVMBuildFPTrunc(c->b, mean, c->t_f32, ""), a[2], cg_i64(c, 0));
  cg_if_end(c, &fi);
  cg_kernel_end(c);
  *kind = cg_kind(c, "softmax_xent", NULL);
  return f;
}

/* logits, labels -> dlogits = (softmax - target) * scale / N.  Work: rows. */
LLVMValueRef cg_gen_softmax_xent_grad(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind) {
  const ir_shape *xs = &c->g->values[n->in[0]].shape;
  int64_t nb = xs->dim[0], k = ir_shape_numel(xs) / nb;
  float s = n->attr.softmax_xent_grad.label_smoothing, scale = n->attr.softmax_xent_grad.scale / (float)nb;
  int w = ir_label_width(&c->g->values[n->in[1]].shape);
  LLVMTypeRef dt = LLVMDoubleTypeInContext(c->llc);
  LLVMValueRef a[5];
  LLVMValueRef f = kbegin(c, fn_name, 2, a);
  cg_loop B, J;
  LLVMValueRef b = par_loop(c, &B, nb, a[3], a[4], "b");
  LLVMValueRef rb = mul64(c, b, k), mx, sum;
  row_softmax_stats(c, a[0], rb, k, &mx, &sum);
  LLVMValueRef inv = LLVMBuildFDiv(c->b, LLVMConstReal(dt, 1.0), sum, "");
  LLVMValueRef ya, yb, lam;
  load_labels(c, a[1], b, w, &ya, &yb, &lam);
  LLVMValueRef j = seq_loop(c, &J, 0, k, "j");
  LLVMValueRef e = LLVMBuildFPExt(c->b, cg_exp(c, LLVMBuildFSub(c->b, cg_load_f32(c, a[0], add64(c, rb, j)), mx, ""), 1), dt, "");
  LLVMValueRef t;
  if (w == 1) {
    t = LLVMBuildSelect(c->b, LLVMBuildICmp(c->b, LLVMIntEQ, j, ya, ""), LLVMConstReal(dt, 1.0 - s + s / (double)k),
                        LLVMConstReal(dt, s / (double)k), "");
  } else { /* s/K + (1 - s) (lam [j = a] + (1 - lam) [j = b]) */
    LLVMValueRef z = LLVMConstReal(dt, 0.0);
    LLVMValueRef ha = LLVMBuildSelect(c->b, LLVMBuildICmp(c->b, LLVMIntEQ, j, ya, ""), lam, z, "");
    LLVMValueRef hb = LLVMBuildSelect(c->b, LLVMBuildICmp(c->b, LLVMIntEQ, j, yb, ""),
                                      LLVMBuildFSub(c->b, LLVMConstReal(dt, 1.0), lam, ""), z, "");
    t = LLVMBuildFAdd(c->b, LLVMConstReal(dt, s / (double)k),
                      LLVMBuildFMul(c->b, LLVMConstReal(dt, 1.0 - s), LLVMBuildFAdd(c->b, ha, hb, ""), ""), "");
  }
  LLVMValueRef v = LLVMBuildFMul(c->b, LLVMBuildFSub(c->b, LLVMBuildFMul(c->b, e, inv, ""), t, ""), LLVMConstReal(dt, scale), "");
  cg_store_f32(c, LLVMBuildFPTrunc(c->b, v, c->t_f32, ""), a[2], add64(c, rb, j));
  cg_loop_end(c, &J);
  cg_loop_end(c, &B);
  cg_kernel_end(c);
  *kind = cg_kind(c, "softmax_xent_grad", NULL);
  return f;
}

/* log_softmax over the last axis (ir_ref_log_softmax; an inference op too): per row the
 * loss's statistics, then x - (max + log sum) in double.  Work: rows. */
LLVMValueRef cg_gen_log_softmax(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind) {
  const ir_shape *xs = &c->g->values[n->in[0]].shape;
  int64_t k = xs->dim[xs->rank - 1], rows = ir_shape_numel(xs) / k;
  LLVMTypeRef dt = LLVMDoubleTypeInContext(c->llc);
  LLVMValueRef a[4];
  LLVMValueRef f = cg_kernel_begin(c, fn_name, 1, a);
  cg_loop R, J;
  LLVMValueRef r = par_loop(c, &R, rows, a[2], a[3], "row");
  LLVMValueRef rb = mul64(c, r, k), mx, sum;
  row_softmax_stats(c, a[0], rb, k, &mx, &sum);
  LLVMValueRef lse = LLVMBuildFAdd(c->b, LLVMBuildFPExt(c->b, mx, dt, ""), log_d(c, sum), "lse");
  LLVMValueRef j = seq_loop(c, &J, 0, k, "j");
  LLVMValueRef x = LLVMBuildFPExt(c->b, cg_load_f32(c, a[0], add64(c, rb, j)), dt, "");
  cg_store_f32(c, LLVMBuildFPTrunc(c->b, LLVMBuildFSub(c->b, x, lse, ""), c->t_f32, ""), a[1], add64(c, rb, j));
  cg_loop_end(c, &J);
  cg_loop_end(c, &R);
  cg_kernel_end(c);
  *kind = cg_kind(c, "log_softmax", NULL);
  return f;
}

/* dy, y = log_softmax(x) -> dy - exp(y) * sum_j dy_j per row (sum in double).  Work: rows. */
LLVMValueRef cg_gen_log_softmax_grad(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind) {
  const ir_shape *s = &c->g->values[n->out].shape;
  int64_t k = s->dim[s->rank - 1], rows = ir_shape_numel(s) / k;
  LLVMTypeRef dt = LLVMDoubleTypeInContext(c->llc);
  LLVMValueRef a[5];
  LLVMValueRef f = kbegin(c, fn_name, 2, a);
  LLVMValueRef sa = cg_entry_alloca(c, dt, "sum");
  cg_loop R, J;
  LLVMValueRef r = par_loop(c, &R, rows, a[3], a[4], "row");
  LLVMValueRef rb = mul64(c, r, k);
  LLVMBuildStore(c->b, LLVMConstReal(dt, 0.0), sa);
  LLVMValueRef j = seq_loop(c, &J, 0, k, "j");
  LLVMValueRef dy = LLVMBuildFPExt(c->b, cg_load_f32(c, a[0], add64(c, rb, j)), dt, "");
  LLVMBuildStore(c->b, LLVMBuildFAdd(c->b, LLVMBuildLoad2(c->b, dt, sa, ""), dy, ""), sa);
  cg_loop_end(c, &J);
  LLVMValueRef sum = LLVMBuildFPTrunc(c->b, LLVMBuildLoad2(c->b, dt, sa, ""), c->t_f32, "sum");
  j = seq_loop(c, &J, 0, k, "j");
  LLVMValueRef e = cg_exp(c, cg_load_f32(c, a[1], add64(c, rb, j)), 1);
  LLVMValueRef v = LLVMBuildFSub(c->b, cg_load_f32(c, a[0], add64(c, rb, j)), LLVMBuildFMul(c->b, e, sum, ""), "");
  cg_store_f32(c, v, a[2], add64(c, rb, j));
  cg_loop_end(c, &J);
  cg_loop_end(c, &R);
  cg_kernel_end(c);
  *kind = cg_kind(c, "log_softmax_grad", NULL);
  return f;
}

LLVMValueRef cg_gen_top1(cg_ctx *c, const char *name, int64_t nb, int64_t k) {
  int w = c->g->label >= 0 ? ir_label_width(&c->g->values[c->g->label].shape) : 1;
  LLVMValueRef a[5];
  LLVMBasicBlockRef saved = LLVMGetInsertBlock(c->b);
  LLVMValueRef f = kbegin(c, name, 2, a);
  LLVMValueRef cnt = cg_entry_alloca(c, c->t_f32, "cnt"), best = cg_entry_alloca(c, c->t_i64, "best");
  LLVMValueRef bv = cg_entry_alloca(c, c->t_f32, "bv");
  cg_if fi;
  cg_if_begin(c, &fi, LLVMBuildICmp(c->b, LLVMIntEQ, a[3], cg_i32(c, 0), ""));
  LLVMBuildStore(c->b, cg_f32(c, 0.0f), cnt);
  cg_loop B, J;
  LLVMValueRef b = seq_loop(c, &B, 0, nb, "b");
  LLVMValueRef rb = mul64(c, b, k);
  LLVMBuildStore(c->b, cg_i64(c, 0), best);
  LLVMBuildStore(c->b, cg_load_f32(c, a[0], rb), bv);
  LLVMValueRef j = seq_loop(c, &J, 1, k, "j");
  LLVMValueRef v = cg_load_f32(c, a[0], add64(c, rb, j));
  LLVMValueRef gt = LLVMBuildFCmp(c->b, LLVMRealOGT, v, LLVMBuildLoad2(c->b, c->t_f32, bv, ""), "");
  LLVMBuildStore(c->b, LLVMBuildSelect(c->b, gt, v, LLVMBuildLoad2(c->b, c->t_f32, bv, ""), ""), bv);
  LLVMBuildStore(c->b, LLVMBuildSelect(c->b, gt, j, LLVMBuildLoad2(c->b, c->t_i64, best, ""), ""), best);
  cg_loop_end(c, &J);
  LLVMValueRef ya, yb, lam; /* mixed labels: the label of the larger weight (a at lam >= 0.5) */
  load_labels(c, a[1], b, w, &ya, &yb, &lam);
  LLVMValueRef half = LLVMConstReal(LLVMDoubleTypeInContext(c->llc), 0.5);
  LLVMValueRef y = w == 1 ? ya : LLVMBuildSelect(c->b, LLVMBuildFCmp(c->b, LLVMRealOGE, lam, half, ""), ya, yb, "y");
  LLVMValueRef hit = LLVMBuildICmp(c->b, LLVMIntEQ, y, LLVMBuildLoad2(c->b, c->t_i64, best, ""), "");
  LLVMValueRef add = LLVMBuildSelect(c->b, hit, cg_f32(c, 1.0f), cg_f32(c, 0.0f), "");
  LLVMBuildStore(c->b, LLVMBuildFAdd(c->b, LLVMBuildLoad2(c->b, c->t_f32, cnt, ""), add, ""), cnt);
  cg_loop_end(c, &B);
  cg_store_f32(c, LLVMBuildLoad2(c->b, c->t_f32, cnt, ""), a[2], cg_i64(c, 0));
  cg_if_end(c, &fi);
  cg_kernel_end(c);
  LLVMSetLinkage(f, LLVMInternalLinkage);
  if (saved) LLVMPositionBuilderAtEnd(c->b, saved);
  return f;
}

/* ---- dropout (training) ---------------------------------------------------------------- */
/* The interpreter's mask (ir/ref_eltwise.c): element i is kept iff
 * (mix64(key ^ mix64(i)) >> 40) * 2^-24 >= rate, mix64 = splitmix64 step; kept * 1/(1-rate).
 * key = mix64(seed ^ mix64(t)) for the optional operand in[1] = the step counter t (read
 * before the step's increment, passes/optimizer.c), else seed: a new mask every step.
 * The backward is the same node applied to dy (same seed, same t, same indices). */
static LLVMValueRef ic(cg_ctx *c, uint64_t v, int w) {
  LLVMValueRef s = LLVMConstInt(c->t_i64, v, 0);
  if (w == 1) return s;
  LLVMValueRef e[64];
  for (int i = 0; i < w; i++) e[i] = s;
  return LLVMConstVector(e, (unsigned)w);
}
static LLVMValueRef mix64(cg_ctx *c, LLVMValueRef z, int w) {
  LLVMBuilderRef b = c->b;
  z = LLVMBuildAdd(b, z, ic(c, 0x9e3779b97f4a7c15ull, w), "");
  z = LLVMBuildMul(b, LLVMBuildXor(b, z, LLVMBuildLShr(b, z, ic(c, 30, w), ""), ""), ic(c, 0xbf58476d1ce4e5b9ull, w), "");
  z = LLVMBuildMul(b, LLVMBuildXor(b, z, LLVMBuildLShr(b, z, ic(c, 27, w), ""), ""), ic(c, 0x94d049bb133111ebull, w), "");
  return LLVMBuildXor(b, z, LLVMBuildLShr(b, z, ic(c, 31, w), ""), "");
}

/* <w x i64> splat of the scalar i64 v (v itself when w == 1). */
static LLVMValueRef splat64(cg_ctx *c, LLVMValueRef v, int w) {
  if (w == 1) return v;
  LLVMTypeRef vt = LLVMVectorType(c->t_i64, (unsigned)w);
  LLVMValueRef sp = LLVMBuildInsertElement(c->b, LLVMGetPoison(vt), v, cg_i32(c, 0), "");
  return LLVMBuildShuffleVector(c->b, sp, LLVMGetPoison(vt), LLVMConstNull(LLVMVectorType(c->t_i32, (unsigned)w)), "");
}

typedef struct drop_ctx { const ir_node *n; LLVMValueRef in, out, key; } drop_ctx; /* key: i64 scalar */

static void dropout_body(cg_ctx *c, LLVMValueRef i, int w, void *user) {
  drop_ctx *u = user;
  const ir_dropout_attr *at = &u->n->attr.dropout;
  LLVMValueRef iv = i;
  if (w > 1) {
    LLVMValueRef e[64];
    for (int l = 0; l < w; l++) e[l] = cg_i64(c, l);
    iv = LLVMBuildAdd(c->b, splat64(c, i, w), LLVMConstVector(e, (unsigned)w), "");
  }
  LLVMValueRef h = mix64(c, LLVMBuildXor(c->b, splat64(c, u->key, w), mix64(c, iv, w), ""), w);
  LLVMValueRef uf = LLVMBuildFMul(c->b, LLVMBuildUIToFP(c->b, LLVMBuildLShr(c->b, h, ic(c, 40, w), ""), cg_vtype(c, w), ""),
                                  cg_fconst(c, 1.0f / 16777216.0f, w), "");
  LLVMValueRef keep = LLVMBuildFCmp(c->b, LLVMRealOGE, uf, cg_fconst(c, at->rate, w), "keep");
  float scale = at->rate < 1.0f ? 1.0f / (1.0f - at->rate) : 0.0f;
  LLVMValueRef x = LLVMBuildFMul(c->b, vload(c, u->in, i, w), cg_fconst(c, scale, w), "");
  cg_store_v(c, LLVMBuildSelect(c->b, keep, x, cg_fzero(c, w), ""), u->out, i, w);
}

static void dropout_copy_body(cg_ctx *c, LLVMValueRef i, int w, void *user) {
  drop_ctx *u = user;
  cg_store_v(c, vload(c, u->in, i, w), u->out, i, w);
}

static LLVMValueRef gen_dropout_train(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind) {
  if (!n->attr.dropout.training || n->attr.dropout.rate <= 0.0f) return cg_gen_dropout(c, n, fn_name, kind);
  LLVMValueRef a[5];
  int nin = n->n_in; /* x[, t] */
  LLVMValueRef f = kbegin(c, fn_name, nin, a);
  LLVMValueRef key = LLVMConstInt(c->t_i64, n->attr.dropout.seed, 0);
  if (nin > 1) { /* mix64(seed ^ mix64(t)), t a whole number >= 0 in f32 */
    LLVMValueRef t = LLVMBuildFPToSI(c->b, cg_load_f32(c, a[1], cg_i64(c, 0)), c->t_i64, "t");
    key = mix64(c, LLVMBuildXor(c->b, key, mix64(c, t, 1), ""), 1);
  }
  drop_ctx u = {n, a[0], a[nin], key};
  cg_foreach_elem(c, cg_numel(c, n->out), a[nin + 1], a[nin + 2], dropout_body, &u);
  cg_kernel_end(c);
  /* eval twin (the identity, as in inference; same signature: it ignores t), called by the
   * eval stages (cg_main.c) */
  char ev[64];
  snprintf(ev, sizeof ev, "cnnk_s%d_dropout_eval_n%d", ((cg_priv *)c->priv)->shard, (int)(n - c->g->nodes));
  kbegin(c, ev, nin, a);
  drop_ctx ue = {n, a[0], a[nin], NULL};
  cg_foreach_elem(c, cg_numel(c, n->out), a[nin + 1], a[nin + 2], dropout_copy_body, &ue);
  cg_kernel_end(c);
  *kind = cg_kind(c, "dropout_train", NULL);
  return f;
}

/* ---- training: residual gradient add + relu_grad ------------------------------------------ */
/* relu_grad whose dy is an add read by it alone (passes/fuse.c pass_fuse_train: the add is the
 * group's pre).  Operands (codegen/cg_layout.c make_kernel): the add's first operand in dy's
 * place, relu_grad's mask, the add's second operand; out = mask > 0 ? a + b : 0, the add's
 * f32 sum and relu_grad's select (cg_gen_relu_grad above), so bitwise the two kernels' result, with one
 * pass over 3 inputs instead of two passes over 2 each and the sum never stored. */
typedef struct add_relu_grad_ctx { LLVMValueRef a, mask, b, out; } add_relu_grad_ctx;

static void add_relu_grad_body(cg_ctx *c, LLVMValueRef i, int w, void *user) {
  add_relu_grad_ctx *u = user;
  LLVMValueRef s = LLVMBuildFAdd(c->b, cg_load_v(c, u->a, i, w), cg_load_v(c, u->b, i, w), "");
  LLVMValueRef pos = LLVMBuildFCmp(c->b, LLVMRealOGT, cg_load_v(c, u->mask, i, w), cg_fzero(c, w), "");
  cg_store_v(c, LLVMBuildSelect(c->b, pos, s, cg_fzero(c, w), ""), u->out, i, w);
}

static LLVMValueRef gen_relu_grad_train(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind) {
  if (!cg_fusion(c, n)->n_pre) return cg_gen_relu_grad(c, n, fn_name, kind);
  LLVMValueRef a[6];
  LLVMValueRef f = cg_kernel_begin(c, fn_name, 3, a);
  add_relu_grad_ctx u = {a[0], a[1], a[2], a[3]};
  cg_foreach_elem(c, cg_numel(c, n->out), a[4], a[5], add_relu_grad_body, &u);
  cg_kernel_end(c);
  *kind = cg_kind(c, "add_relu_grad", NULL);
  return f;
}

/* Training-mode forward generators of the normalisation layers (gen_train_norm.c); the
 * backward ops, optimizer updates (gen_train_optim.c) and activation/pool/softmax gradients
 * (gen_train_act.c) are the cg_gen_<op> of their ops.def rows. */
LLVMValueRef cg_gen_batchnorm_train(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind);
LLVMValueRef cg_gen_groupnorm_train(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind);

cg_gen_fn cg_train_generator(ir_op op) {
  switch (op) {
  case IR_OP_dropout: return gen_dropout_train;
  case IR_OP_dense: return cg_train_dense_fwd;
  case IR_OP_softmax_xent: return gen_xent_train;
  case IR_OP_batchnorm: return cg_gen_batchnorm_train; /* gen_train_norm.c */
  case IR_OP_groupnorm: return cg_gen_groupnorm_train;
  case IR_OP_relu_grad: return gen_relu_grad_train; /* with a fused add */
  default: return NULL;
  }
}
