/* gen_train_norm.c — compiled training of the normalisation layers (issue 5,
 * docs/training.md): batchnorm in training mode (batch statistics over N,H,W per channel, the
 * running statistics updated in place in the state buffer as ir/ref_norm.c does), groupnorm
 * with pointer params, and their input / gamma gradients (ir/ref_grad.c).
 *
 * Every kernel is a few sweeps over contiguous planes of S = H*W floats (vectorised by
 * cg_inner_loop, target width): statistics in two passes (mean, then squared deviations) like
 * the interpreter, each plane summed in f32 vector lanes and the planes added in double.
 * Work is split statically over tid/nthreads by channel (batchnorm), (sample, group)
 * (groupnorm forward / dx) or group (groupnorm dgamma): one writer per output element.
 * Training fusions (passes/fuse.c pass_fuse_train, tune train_fusion=0 off): the batchnorm
 * forward with its [residual add and] relu, and the batchnorm backward with relu_grad, dgamma
 * and dbeta. */
#include <math.h>
#include <stdio.h>

#include "codegen/cg_half_partials.h"
#include "codegen/cg_internal.h"

/* ---- sweeps over planes --------------------------------------------------------------------- */
typedef enum {
  SW_SUM,     /* s0 += x */
  SW_SQDEV,   /* s0 += (x - mean)^2 */
  SW_DYSUM,   /* s0 += dy; s1 += dy (x - mean) */
  SW_DYX,     /* s0 += dy (x - mean) */
  SW_AFFINE,  /* out = (x - mean) k0 + k1 */
  SW_DX,      /* out = k0 dy + (x - mean) k1 + k2 */
} sweep_mode;

typedef struct sweep {
  sweep_mode mode;
  LLVMValueRef x, dy, out; /* base pointers */
  LLVMValueRef base;       /* element offset of the current plane */
  LLVMValueRef mean, k0, k1, k2;
  LLVMValueRef av[2], as[2]; /* vector / scalar f32 accumulators (entry allocas) */
  LLVMValueRef tot32;        /* SW_DYSUM: when set, also the planes' sum dy added in f32 (reduce_sum's order) */
  LLVMValueRef mask;         /* when set, dy is relu_grad's: dy loaded where mask > 0, else 0 */
  int relu;                  /* SW_AFFINE: the result through relu (a fused relu) */
  LLVMValueRef res;          /* SW_AFFINE: a fused residual add's other operand, added before the relu */
  int res_first;             /* the add's operand order: res + y (else y + res) */
} sweep;

static LLVMValueRef ld(cg_ctx *c, LLVMValueRef p, int w) { return LLVMBuildLoad2(c->b, cg_vtype(c, w), p, ""); }

static void acc(cg_ctx *c, sweep *u, int k, int w, LLVMValueRef a, LLVMValueRef b) {
  LLVMValueRef p = w == 1 ? u->as[k] : u->av[k];
  LLVMValueRef cur = ld(c, p, w);
  LLVMBuildStore(c->b, b ? cg_fma(c, a, b, cur) : LLVMBuildFAdd(c->b, cur, a, ""), p);
}

static void sweep_body(cg_ctx *c, LLVMValueRef j, int w, void *user) {
  sweep *u = user;
  LLVMValueRef i = LLVMBuildAdd(c->b, u->base, j, "");
  LLVMValueRef x = u->x ? cg_load_v(c, u->x, i, w) : NULL, dy = u->dy ? cg_load_v(c, u->dy, i, w) : NULL;
  if (dy && u->mask) /* relu_grad's select, as gen_train.c */
    dy = LLVMBuildSelect(c->b, LLVMBuildFCmp(c->b, LLVMRealOGT, cg_load_v(c, u->mask, i, w), cg_fzero(c, w), ""), dy, cg_fzero(c, w), "");
  LLVMValueRef d = x && u->mean ? LLVMBuildFSub(c->b, x, cg_splat(c, u->mean, w), "") : x;
  switch (u->mode) {
  case SW_SUM: acc(c, u, 0, w, x, NULL); break;
  case SW_SQDEV: acc(c, u, 0, w, d, d); break;
  case SW_DYSUM:
    acc(c, u, 0, w, dy, NULL);
    acc(c, u, 1, w, dy, d);
    break;
  case SW_DYX: acc(c, u, 0, w, dy, d); break;
  case SW_AFFINE: {
    LLVMValueRef y = cg_fma(c, d, cg_splat(c, u->k0, w), cg_splat(c, u->k1, w));
    if (u->res) {
      LLVMValueRef r = cg_load_v(c, u->res, i, w);
      y = u->res_first ? LLVMBuildFAdd(c->b, r, y, "") : LLVMBuildFAdd(c->b, y, r, "");
    }
    cg_store_v(c, u->relu ? cg_relu(c, y, w) : y, u->out, i, w);
    break;
  }
  case SW_DX: {
    LLVMValueRef r = cg_fma(c, d, cg_splat(c, u->k1, w), cg_splat(c, u->k2, w));
    cg_store_v(c, cg_fma(c, cg_splat(c, u->k0, w), dy, r), u->out, i, w);
    break;
  }
  }
}

static LLVMTypeRef f64(cg_ctx *c) { return LLVMDoubleTypeInContext(c->llc); }
static LLVMValueRef dconst(cg_ctx *c, double v) { return LLVMConstReal(f64(c), v); }
static LLVMValueRef ext(cg_ctx *c, LLVMValueRef v) { return LLVMBuildFPExt(c->b, v, f64(c), ""); }
static LLVMValueRef trunc32(cg_ctx *c, LLVMValueRef v) { return LLVMBuildFPTrunc(c->b, v, c->t_f32, ""); }
static LLVMValueRef dmul(cg_ctx *c, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildFMul(c->b, a, b, ""); }
static LLVMValueRef i64mul(cg_ctx *c, LLVMValueRef a, int64_t k) { return LLVMBuildMul(c->b, a, cg_i64(c, k), ""); }

static void sweep_init(cg_ctx *c, sweep *u) {
  int v = c->target->vec_f32;
  for (int k = 0; k < 2; k++) {
    u->av[k] = cg_entry_alloca(c, cg_vtype(c, v), "sv");
    u->as[k] = cg_entry_alloca(c, c->t_f32, "ss");
  }
}

/* Runs mode over np planes of len floats at base0 + p*pstride (p < np).  Reducing modes
 * return the sums (double) in s[0] (and s[1] for SW_DYSUM). */
static void run_sweep(cg_ctx *c, sweep *u, sweep_mode mode, LLVMValueRef base0, int64_t np, int64_t pstride, int64_t len,
                      LLVMValueRef s[2]) {
  int v = c->target->vec_f32, nsum = mode == SW_DYSUM ? 2 : mode <= SW_DYX ? 1 : 0;
  LLVMValueRef tot[2] = {0};
  for (int k = 0; k < nsum; k++) {
    tot[k] = cg_entry_alloca(c, f64(c), "tot");
    LLVMBuildStore(c->b, dconst(c, 0.0), tot[k]);
  }
  u->mode = mode;
  cg_loop P;
  LLVMValueRef p = cg_loop_begin(c, &P, cg_i64(c, 0), cg_i64(c, np), cg_i64(c, 1), "pl");
  u->base = LLVMBuildAdd(c->b, base0, i64mul(c, p, pstride), "");
  for (int k = 0; k < nsum; k++) {
    LLVMBuildStore(c->b, cg_fzero(c, v), u->av[k]);
    LLVMBuildStore(c->b, cg_f32(c, 0.0f), u->as[k]);
  }
  cg_inner_loop(c, len, sweep_body, u);
  for (int k = 0; k < nsum; k++) {
    LLVMValueRef ps = LLVMBuildFAdd(c->b, cg_hsum(c, ld(c, u->av[k], v), v), ld(c, u->as[k], 1), "");
    LLVMBuildStore(c->b, LLVMBuildFAdd(c->b, LLVMBuildLoad2(c->b, f64(c), tot[k], ""), ext(c, ps), ""), tot[k]);
    if (k == 0 && mode == SW_DYSUM && u->tot32) LLVMBuildStore(c->b, LLVMBuildFAdd(c->b, ld(c, u->tot32, 1), ps, ""), u->tot32);
  }
  cg_loop_end(c, &P);
  for (int k = 0; k < nsum; k++) s[k] = LLVMBuildLoad2(c->b, f64(c), tot[k], "sum");
}

/* Mean (f32, in u->mean) and 1/sqrt(biased var + eps) (double) of np planes as above. */
static LLVMValueRef stats(cg_ctx *c, sweep *u, LLVMValueRef base0, int64_t np, int64_t pstride, int64_t len, double eps,
                          LLVMValueRef *var_d) {
  LLVMValueRef s[2];
  double m = (double)(np * len);
  u->mean = NULL;
  run_sweep(c, u, SW_SUM, base0, np, pstride, len, s);
  LLVMValueRef mean_d = LLVMBuildFDiv(c->b, s[0], dconst(c, m), "mean");
  u->mean = trunc32(c, mean_d);
  run_sweep(c, u, SW_SQDEV, base0, np, pstride, len, s);
  LLVMValueRef var = LLVMBuildFDiv(c->b, s[0], dconst(c, m), "var");
  if (var_d) *var_d = var;
  LLVMTypeRef dt = f64(c);
  LLVMValueRef q = LLVMBuildFAdd(c->b, var, dconst(c, eps), "");
  return LLVMBuildFDiv(c->b, dconst(c, 1.0), cg_intrinsic(c, "llvm.sqrt", &dt, 1, &q, 1), "inv");
}

static LLVMValueRef par_begin(cg_ctx *c, cg_loop *L, int64_t n, LLVMValueRef tid, LLVMValueRef nth, const char *name) {
  LLVMValueRef lo, hi;
  cg_thread_range(c, cg_i64(c, n), tid, nth, &lo, &hi);
  return cg_loop_begin(c, L, lo, hi, cg_i64(c, 1), name);
}

typedef struct nchw { int64_t n, c, s; } nchw;
static nchw dims_of(cg_ctx *c, int vid) {
  const ir_shape *xs = &c->g->values[vid].shape;
  nchw d = {xs->dim[0], xs->rank > 1 ? xs->dim[1] : 1, 1};
  d.s = ir_shape_numel(xs) / (d.n * d.c);
  return d;
}

/* ---- batchnorm ----------------------------------------------------------------------------- */
/* The batchnorm kernel fn_name: batch statistics when training (and the running statistics
 * updated), else normalisation with the running statistics read at run time. */
static LLVMValueRef bn_forward(cg_ctx *c, const ir_node *n, const char *fn_name, int training, int relu, int res) {
  const ir_batchnorm_attr *at = &n->attr.batchnorm;
  nchw d = dims_of(c, n->in[0]);
  int64_t m = d.n * d.s;
  LLVMValueRef a[10];
  /* a training batchnorm (and its eval twin, same type) takes a record after nthreads: per
   * channel the double terms of its running-statistics update {1-mom, mom*mean, mom*var*m/(m-1)},
   * from which the runtime replays the update in another order (rt_dist.c) */
  int rec = n->attr.batchnorm.training;
  LLVMValueRef f = cg_kernel_begin_x(c, fn_name, 5 + (res != 0), rec, a);
  sweep u = {0};
  sweep_init(c, &u);
  int no = 5 + (res != 0);
  u.x = a[0], u.out = a[no], u.relu = relu, u.res = res ? a[5] : NULL, u.res_first = res > 1;
  cg_loop L;
  LLVMValueRef ch = par_begin(c, &L, d.c, a[no + 1], a[no + 2], "c");
  LLVMValueRef inv, var_d = NULL;
  if (training) {
    inv = stats(c, &u, i64mul(c, ch, d.s), d.n, d.c * d.s, d.s, at->eps, &var_d);
  } else {
    LLVMTypeRef dt = f64(c);
    LLVMValueRef q = LLVMBuildFAdd(c->b, ext(c, cg_load_f32(c, a[4], ch)), dconst(c, at->eps), "");
    inv = LLVMBuildFDiv(c->b, dconst(c, 1.0), cg_intrinsic(c, "llvm.sqrt", &dt, 1, &q, 1), "inv");
    u.mean = cg_load_f32(c, a[3], ch);
  }
  u.k0 = trunc32(c, dmul(c, ext(c, cg_load_f32(c, a[1], ch)), inv));
  u.k1 = cg_load_f32(c, a[2], ch);
  run_sweep(c, &u, SW_AFFINE, i64mul(c, ch, d.s), d.n, d.c * d.s, d.s, NULL);
  if (training) {
    double mom = at->momentum, corr = m > 1 ? (double)m / (double)(m - 1) : 1.0;
    LLVMValueRef keep = dconst(c, 1.0 - mom), mo = dconst(c, mom);
    LLVMValueRef tm = dmul(c, mo, ext(c, u.mean)), tv = dmul(c, mo, dmul(c, var_d, dconst(c, corr)));
    LLVMValueRef rm = LLVMBuildFAdd(c->b, dmul(c, keep, ext(c, cg_load_f32(c, a[3], ch))), tm, "");
    LLVMValueRef rv = LLVMBuildFAdd(c->b, dmul(c, keep, ext(c, cg_load_f32(c, a[4], ch))), tv, "");
    LLVMValueRef terms[3] = {keep, tm, tv};
    for (int q = 0; q < 3; q++) {
      LLVMValueRef ix = LLVMBuildAdd(c->b, i64mul(c, ch, 3), cg_i64(c, q), "");
      LLVMBuildStore(c->b, terms[q], LLVMBuildInBoundsGEP2(c->b, f64(c), a[no + 3], &ix, 1, ""));
    }
    cg_store_f32(c, trunc32(c, rm), a[3], ch);
    cg_store_f32(c, trunc32(c, rv), a[4], ch);
  }
  cg_loop_end(c, &L);
  cg_kernel_end(c);
  return f;
}

/* Training forward.  in: x [N,C,...], gamma, beta, running_mean, running_var [C] (the last
 * two in the state buffer, updated in place: running = (1-mom) running + mom batch, the
 * variance term unbiased).  A training batchnorm also gets its eval-mode twin (running
 * statistics, no update) named cnnk_s<shard>_batchnorm_eval_n<node>, which the eval stages
 * (cg_main.c) call instead.  A frozen batchnorm (training=0) keeps the running statistics as
 * operands (they change between steps) and only normalises. */
LLVMValueRef cg_gen_batchnorm_train(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind) {
  int training = n->attr.batchnorm.training;
  /* pass_fuse_train: [add (res 1: y + other, 2: other + y),] relu */
  const pass_fusion *p = cg_fusion(c, n);
  int relu = p->n_post > 0 && c->g->nodes[p->post[p->n_post - 1]].op == IR_OP_relu, res = 0;
  if (relu && p->n_post == 2) res = c->g->nodes[p->post[0]].in[0] == n->out ? 1 : 2;
  LLVMValueRef f = bn_forward(c, n, fn_name, training, relu, res);
  if (training) {
    char ev[64];
    snprintf(ev, sizeof ev, "cnnk_s%d_batchnorm_eval_n%d", ((cg_priv *)c->priv)->shard, (int)(n - c->g->nodes));
    bn_forward(c, n, ev, 0, relu, res);
  }
  *kind = cg_kind(c, !training ? "batchnorm_frozen" : res ? "batchnorm_add_relu_train" : relu ? "batchnorm_relu_train" : "batchnorm_train", NULL);
  return f;
}

/* Channel ch's mean (u->mean) and inverse deviation (double): batch statistics of x in
 * training, else the running statistics rm, rv (operands). */
static LLVMValueRef bn_stats(cg_ctx *c, sweep *u, const ir_batchnorm_attr *at, nchw d, LLVMValueRef ch, LLVMValueRef rm,
                             LLVMValueRef rv) {
  if (at->training) return stats(c, u, i64mul(c, ch, d.s), d.n, d.c * d.s, d.s, at->eps, NULL);
  LLVMTypeRef dt = f64(c);
  LLVMValueRef q = LLVMBuildFAdd(c->b, ext(c, cg_load_f32(c, rv, ch)), dconst(c, at->eps), "");
  u->mean = cg_load_f32(c, rm, ch);
  return LLVMBuildFDiv(c->b, dconst(c, 1.0), cg_intrinsic(c, "llvm.sqrt", &dt, 1, &q, 1), "inv");
}

/* in: dy, x [N,C,...], gamma [C][, running_mean, running_var]; out dx.  Training:
 * dx = gamma inv (dy - sum dy / M - xhat sum(dy xhat) / M); frozen: dy gamma inv.
 * Fused (passes/fuse.c pass_fuse_train: n_side 1 or 2), the kernel also writes dgamma (the
 * batchnorm_grad_gamma node's result, the operand after the node's own) and dbeta (the
 * reduce_sum of dy, the next one) from the sums of its dy sweep: the same sums in the same
 * order as those nodes' own kernels, so both are bitwise theirs, and their 3 + 1 sweeps over
 * x and dy are gone.  With a fused relu_grad (n_pre 1) the operands are relu_grad's dy and
 * mask (the fused relu's result) instead of dy, the mask after the node's own operands, and
 * dy is relu_grad's select as it is loaded (its pass and its tensor are gone). */
LLVMValueRef cg_gen_batchnorm_grad_input(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind) {
  const ir_batchnorm_attr *at = &n->attr.batchnorm_grad_input;
  nchw d = dims_of(c, n->in[1]);
  const pass_fusion *p = cg_fusion(c, n);
  int nin = n->n_in, npre = at->training ? p->n_pre : 0, nside = at->training ? p->n_side : 0;
  double m = (double)(d.n * d.s);
  LLVMValueRef a[12];
  LLVMValueRef f = cg_kernel_begin(c, fn_name, nin + npre + nside, a);
  sweep u = {0};
  sweep_init(c, &u);
  int no = nin + npre + nside, so = nin + npre; /* dx; dgamma, dbeta */
  u.x = a[1], u.dy = a[0], u.out = a[no], u.mask = npre ? a[nin] : NULL;
  if (nside > 1) u.tot32 = cg_entry_alloca(c, c->t_f32, "dbeta");
  cg_loop L;
  LLVMValueRef ch = par_begin(c, &L, d.c, a[no + 1], a[no + 2], "c");
  LLVMValueRef inv = bn_stats(c, &u, at, d, ch, nin > 3 ? a[3] : NULL, nin > 4 ? a[4] : NULL);
  LLVMValueRef gi = dmul(c, ext(c, cg_load_f32(c, a[2], ch)), inv);
  u.k0 = trunc32(c, gi);
  if (at->training) {
    LLVMValueRef s[2];
    if (u.tot32) LLVMBuildStore(c->b, cg_f32(c, 0.0f), u.tot32);
    run_sweep(c, &u, SW_DYSUM, i64mul(c, ch, d.s), d.n, d.c * d.s, d.s, s);
    if (nside > 0) cg_store_f32(c, trunc32(c, dmul(c, s[1], inv)), a[so], ch);
    if (nside > 1) cg_store_f32(c, ld(c, u.tot32, 1), a[so + 1], ch);
    LLVMValueRef gm = LLVMBuildFDiv(c->b, gi, dconst(c, -m), "");
    u.k1 = trunc32(c, dmul(c, dmul(c, gm, inv), dmul(c, s[1], inv)));
    u.k2 = trunc32(c, dmul(c, gm, s[0]));
  } else {
    u.k1 = u.k2 = cg_f32(c, 0.0f);
  }
  run_sweep(c, &u, SW_DX, i64mul(c, ch, d.s), d.n, d.c * d.s, d.s, NULL);
  cg_loop_end(c, &L);
  cg_kernel_end(c);
  *kind = cg_kind(c, npre ? "relu_batchnorm_grad_fused" : nside > 1 ? "batchnorm_grad_fused" : nside ? "batchnorm_grad_input_gamma" : "batchnorm_grad_input", NULL);
  return f;
}

/* in: dy, x [N,C,...][, running_mean, running_var]; out [C] = sum dy xhat. */
LLVMValueRef cg_gen_batchnorm_grad_gamma(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind) {
  const ir_batchnorm_attr *at = &n->attr.batchnorm_grad_gamma;
  nchw d = dims_of(c, n->in[1]);
  int nin = n->n_in;
  LLVMValueRef a[7];
  LLVMValueRef f = cg_kernel_begin(c, fn_name, nin, a);
  sweep u = {0};
  sweep_init(c, &u);
  u.x = a[1], u.dy = a[0];
  cg_loop L;
  LLVMValueRef ch = par_begin(c, &L, d.c, a[nin + 1], a[nin + 2], "c");
  LLVMValueRef inv = bn_stats(c, &u, at, d, ch, nin > 2 ? a[2] : NULL, nin > 3 ? a[3] : NULL);
  LLVMValueRef s[2];
  run_sweep(c, &u, SW_DYX, i64mul(c, ch, d.s), d.n, d.c * d.s, d.s, s);
  cg_store_f32(c, trunc32(c, dmul(c, s[0], inv)), a[nin], ch);
  cg_loop_end(c, &L);
  cg_kernel_end(c);
  *kind = cg_kind(c, "batchnorm_grad_gamma", NULL);
  return f;
}

/* ---- groupnorm ----------------------------------------------------------------------------- */
typedef struct gn_geom { nchw d; int64_t groups, cpg; } gn_geom;
static gn_geom gn_of(cg_ctx *c, const ir_node *n, int xin) {
  gn_geom g = {dims_of(c, n->in[xin]), n->attr.groupnorm.groups > 0 ? n->attr.groupnorm.groups : 1, 1};
  g.cpg = g.d.c / g.groups;
  return g;
}

/* Training forward with gamma/beta as operands.  in: x [N,C,...], gamma, beta [C].
 * Work: (sample, group) blocks of cpg*S contiguous floats. */
LLVMValueRef cg_gen_groupnorm_train(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind) {
  gn_geom g = gn_of(c, n, 0);
  LLVMValueRef a[6];
  LLVMValueRef f = cg_kernel_begin(c, fn_name, 3, a);
  sweep u = {0};
  sweep_init(c, &u);
  u.x = a[0], u.out = a[3];
  cg_loop L, C;
  LLVMValueRef it = par_begin(c, &L, g.d.n * g.groups, a[4], a[5], "bg");
  LLVMValueRef base = i64mul(c, it, g.cpg * g.d.s);
  LLVMValueRef inv = stats(c, &u, base, 1, 0, g.cpg * g.d.s, n->attr.groupnorm.eps, NULL);
  LLVMValueRef c0 = i64mul(c, LLVMBuildSRem(c->b, it, cg_i64(c, g.groups), ""), g.cpg);
  LLVMValueRef k = cg_loop_begin(c, &C, cg_i64(c, 0), cg_i64(c, g.cpg), cg_i64(c, 1), "k");
  LLVMValueRef ch = LLVMBuildAdd(c->b, c0, k, "");
  u.k0 = trunc32(c, dmul(c, ext(c, cg_load_f32(c, a[1], ch)), inv));
  u.k1 = cg_load_f32(c, a[2], ch);
  run_sweep(c, &u, SW_AFFINE, LLVMBuildAdd(c->b, base, i64mul(c, k, g.d.s), ""), 1, 0, g.d.s, NULL);
  cg_loop_end(c, &C);
  cg_loop_end(c, &L);
  cg_kernel_end(c);
  *kind = cg_kind(c, "groupnorm_train", NULL);
  return f;
}

/* in: dy, x [N,C,...], gamma [C]; out dx.  Per (sample, group) of M = cpg*S values with
 * dxhat = dy gamma: dx = inv (dxhat - sum dxhat / M - xhat sum(dxhat xhat) / M). */
LLVMValueRef cg_gen_groupnorm_grad_input(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind) {
  gn_geom g = gn_of(c, n, 1);
  double m = (double)(g.cpg * g.d.s);
  LLVMValueRef a[6];
  LLVMValueRef f = cg_kernel_begin(c, fn_name, 3, a);
  sweep u = {0};
  sweep_init(c, &u);
  u.x = a[1], u.dy = a[0], u.out = a[3];
  LLVMValueRef sd = cg_entry_alloca(c, f64(c), "sd"), sdx = cg_entry_alloca(c, f64(c), "sdx");
  cg_loop L, C;
  LLVMValueRef it = par_begin(c, &L, g.d.n * g.groups, a[4], a[5], "bg");
  LLVMValueRef base = i64mul(c, it, g.cpg * g.d.s);
  LLVMValueRef inv = stats(c, &u, base, 1, 0, g.cpg * g.d.s, n->attr.groupnorm.eps, NULL);
  LLVMValueRef c0 = i64mul(c, LLVMBuildSRem(c->b, it, cg_i64(c, g.groups), ""), g.cpg);
  LLVMBuildStore(c->b, dconst(c, 0.0), sd);
  LLVMBuildStore(c->b, dconst(c, 0.0), sdx);
  LLVMValueRef k = cg_loop_begin(c, &C, cg_i64(c, 0), cg_i64(c, g.cpg), cg_i64(c, 1), "k");
  LLVMValueRef gam = ext(c, cg_load_f32(c, a[2], LLVMBuildAdd(c->b, c0, k, "")));
  LLVMValueRef s[2];
  run_sweep(c, &u, SW_DYSUM, LLVMBuildAdd(c->b, base, i64mul(c, k, g.d.s), ""), 1, 0, g.d.s, s);
  LLVMBuildStore(c->b, LLVMBuildFAdd(c->b, LLVMBuildLoad2(c->b, f64(c), sd, ""), dmul(c, gam, s[0]), ""), sd);
  LLVMBuildStore(c->b, LLVMBuildFAdd(c->b, LLVMBuildLoad2(c->b, f64(c), sdx, ""), dmul(c, gam, s[1]), ""), sdx);
  cg_loop_end(c, &C);
  LLVMValueRef nm = dconst(c, -1.0 / m);
  LLVMValueRef k1 = trunc32(c, dmul(c, dmul(c, inv, inv), dmul(c, dmul(c, LLVMBuildLoad2(c->b, f64(c), sdx, ""), inv), nm)));
  LLVMValueRef k2 = trunc32(c, dmul(c, inv, dmul(c, LLVMBuildLoad2(c->b, f64(c), sd, ""), nm)));
  k = cg_loop_begin(c, &C, cg_i64(c, 0), cg_i64(c, g.cpg), cg_i64(c, 1), "k");
  u.k0 = trunc32(c, dmul(c, inv, ext(c, cg_load_f32(c, a[2], LLVMBuildAdd(c->b, c0, k, "")))));
  u.k1 = k1, u.k2 = k2;
  run_sweep(c, &u, SW_DX, LLVMBuildAdd(c->b, base, i64mul(c, k, g.d.s), ""), 1, 0, g.d.s, NULL);
  cg_loop_end(c, &C);
  cg_loop_end(c, &L);
  cg_kernel_end(c);
  *kind = cg_kind(c, "groupnorm_grad_input", NULL);
  return f;
}

/* in: dy, x [N,C,...]; out [C] = sum over samples and pixels of dy xhat.  Work: groups (each
 * thread owns its groups' channels and loops over the samples). */
LLVMValueRef cg_gen_groupnorm_grad_gamma(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind) {
  gn_geom g = gn_of(c, n, 1);
  LLVMValueRef a[5];
  LLVMValueRef f = cg_kernel_begin(c, fn_name, 2, a);
  sweep u = {0};
  sweep_init(c, &u);
  u.x = a[1], u.dy = a[0];
  cg_loop L, B, C;
  LLVMValueRef gi = par_begin(c, &L, g.groups, a[3], a[4], "g");
  LLVMValueRef c0 = i64mul(c, gi, g.cpg);
  LLVMValueRef k = cg_loop_begin(c, &C, cg_i64(c, 0), cg_i64(c, g.cpg), cg_i64(c, 1), "k");
  cg_store_f32(c, cg_f32(c, 0.0f), a[2], LLVMBuildAdd(c->b, c0, k, ""));
  cg_loop_end(c, &C);
  LLVMValueRef b = cg_loop_begin(c, &B, cg_i64(c, 0), cg_i64(c, g.d.n), cg_i64(c, 1), "b");
  LLVMValueRef base = LLVMBuildAdd(c->b, i64mul(c, b, g.d.c * g.d.s), i64mul(c, c0, g.d.s), ""); /* (b, c0) */
  LLVMValueRef inv = stats(c, &u, base, 1, 0, g.cpg * g.d.s, n->attr.groupnorm.eps, NULL);
  k = cg_loop_begin(c, &C, cg_i64(c, 0), cg_i64(c, g.cpg), cg_i64(c, 1), "k");
  LLVMValueRef s[2], ch = LLVMBuildAdd(c->b, c0, k, "");
  run_sweep(c, &u, SW_DYX, LLVMBuildAdd(c->b, base, i64mul(c, k, g.d.s), ""), 1, 0, g.d.s, s);
  /* out[ch] holds the partial sum over the samples before b (--enable-half-partials: 16-bit) */
  LLVMValueRef v = LLVMBuildFAdd(c->b, cg_half_partial(c, cg_load_f32(c, a[2], ch), 1), trunc32(c, dmul(c, s[0], inv)), "");
  cg_store_f32(c, v, a[2], ch);
  cg_loop_end(c, &C);
  cg_loop_end(c, &B);
  cg_loop_end(c, &L);
  cg_kernel_end(c);
  *kind = cg_kind(c, "groupnorm_grad_gamma", NULL);
  return f;
}
