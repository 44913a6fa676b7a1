/* gen_pool.c — pooling kernels on NCHW: max/avg pooling (one work item per output row of a
 * plane; interior columns vectorised over output pixels with strided loads, border columns
 * scalar with clipped windows; PyTorch window/divisor semantics as ir/ref_pool.c) and global
 * average pooling (one plane per item, vector sum). */
#include "codegen/cg_internal.h"
#include "codegen/gen_round16.h"

typedef struct pool_geom {
  int64_t h, w, oh, ow, planes;
  int kh, kw, sh, sw, pt, pl, pb, pr, is_max, incl_pad;
} pool_geom;

typedef struct pool_row {
  LLVMValueRef x, out, plane_in, out_row; /* plane_in = plane*h*w, out_row = (plane*oh+oy)*ow */
  LLVMValueRef y0, y1, rows_padded;       /* real rows [y0,y1), rows inside the padded input */
  ir_dtype xdt, odt;                      /* 16-bit inference storage (passes/store16.c): maxpool */
  const ir_node *n;
} pool_row;

static LLVMValueRef combine(cg_ctx *c, const pool_geom *p, LLVMValueRef acc, LLVMValueRef x) {
  return p->is_max ? cg_max_nan(c, x, acc) : LLVMBuildFAdd(c->b, acc, x, "");
}

/* Interior: w output pixels from ox (all kw taps inside the row). */
static void pool_vec(cg_ctx *c, const pool_geom *p, const pool_row *r, LLVMValueRef ox, int w) {
  LLVMValueRef accp = cg_entry_alloca(c, cg_vtype(c, w), "pacc");
  LLVMBuildStore(c->b, cg_fconst(c, p->is_max ? -__builtin_inff() : 0.0f, w), accp);
  LLVMValueRef x0 = LLVMBuildSub(c->b, LLVMBuildMul(c->b, ox, cg_i64(c, p->sw), ""), cg_i64(c, p->pl), "");
  cg_loop L;
  LLVMValueRef y = cg_loop_begin(c, &L, r->y0, r->y1, cg_i64(c, 1), "py");
  LLVMValueRef rowi = LLVMBuildAdd(c->b, r->plane_in, LLVMBuildMul(c->b, y, cg_i64(c, p->w), ""), "");
  LLVMValueRef acc = LLVMBuildLoad2(c->b, cg_vtype(c, w), accp, "");
  for (int k = 0; k < p->kw; k++) {
    LLVMValueRef idx = LLVMBuildAdd(c->b, rowi, LLVMBuildAdd(c->b, x0, cg_i64(c, k), ""), "");
    acc = combine(c, p, acc, cg_act_load_strided(c, r->n, r->x, idx, p->sw, w, r->xdt));
  }
  LLVMBuildStore(c->b, acc, accp);
  cg_loop_end(c, &L);
  acc = LLVMBuildLoad2(c->b, cg_vtype(c, w), accp, "");
  if (!p->is_max) {
    LLVMValueRef rows = p->incl_pad ? r->rows_padded : LLVMBuildSub(c->b, r->y1, r->y0, "");
    LLVMValueRef cnt = LLVMBuildSIToFP(c->b, LLVMBuildMul(c->b, rows, cg_i64(c, p->kw), ""), c->t_f32, "");
    acc = LLVMBuildFDiv(c->b, acc, cg_splat(c, cnt, w), "");
  }
  cg_act_store(c, r->n, acc, r->out, LLVMBuildAdd(c->b, r->out_row, ox, ""), w, r->odt);
}

/* Border: one output pixel with the window clipped at run time. */
static void pool_scalar(cg_ctx *c, const pool_geom *p, const pool_row *r, LLVMValueRef ox) {
  LLVMValueRef xs = LLVMBuildSub(c->b, LLVMBuildMul(c->b, ox, cg_i64(c, p->sw), ""), cg_i64(c, p->pl), "");
  LLVMValueRef xe = cg_min64(c, LLVMBuildAdd(c->b, xs, cg_i64(c, p->kw), ""), cg_i64(c, p->w + p->pr));
  LLVMValueRef x0 = cg_max64(c, xs, cg_i64(c, 0)), x1 = cg_min64(c, xe, cg_i64(c, p->w));
  LLVMValueRef accp = cg_entry_alloca(c, c->t_f32, "sacc");
  LLVMBuildStore(c->b, cg_f32(c, p->is_max ? -__builtin_inff() : 0.0f), accp);
  cg_loop Y, X;
  LLVMValueRef y = cg_loop_begin(c, &Y, r->y0, r->y1, cg_i64(c, 1), "sy");
  LLVMValueRef rowi = LLVMBuildAdd(c->b, r->plane_in, LLVMBuildMul(c->b, y, cg_i64(c, p->w), ""), "");
  LLVMValueRef xx = cg_loop_begin(c, &X, x0, x1, cg_i64(c, 1), "sx");
  LLVMValueRef v = cg_act_load(c, r->n, r->x, LLVMBuildAdd(c->b, rowi, xx, ""), 1, r->xdt);
  LLVMBuildStore(c->b, combine(c, p, LLVMBuildLoad2(c->b, c->t_f32, accp, ""), v), accp);
  cg_loop_end(c, &X);
  cg_loop_end(c, &Y);
  LLVMValueRef acc = LLVMBuildLoad2(c->b, c->t_f32, accp, "");
  if (!p->is_max) {
    LLVMValueRef cnt = p->incl_pad ? LLVMBuildMul(c->b, r->rows_padded, LLVMBuildSub(c->b, xe, xs, ""), "")
                                   : LLVMBuildMul(c->b, LLVMBuildSub(c->b, r->y1, r->y0, ""),
                                                  LLVMBuildSub(c->b, x1, x0, ""), "");
    LLVMValueRef fc = LLVMBuildSIToFP(c->b, cnt, c->t_f32, "");
    LLVMValueRef pos = LLVMBuildICmp(c->b, LLVMIntSGT, cnt, cg_i64(c, 0), "");
    acc = LLVMBuildSelect(c->b, pos, LLVMBuildFDiv(c->b, acc, fc, ""), cg_f32(c, 0.0f), "");
  }
  cg_act_store(c, r->n, acc, r->out, LLVMBuildAdd(c->b, r->out_row, ox, ""), 1, r->odt);
}

static void scalar_range(cg_ctx *c, const pool_geom *p, const pool_row *r, int64_t lo, int64_t hi) {
  if (lo >= hi) return;
  cg_loop L;
  LLVMValueRef ox = cg_loop_begin(c, &L, cg_i64(c, lo), cg_i64(c, hi), cg_i64(c, 1), "bx");
  pool_scalar(c, p, r, ox);
  cg_loop_end(c, &L);
}

/* Emits one output row: scalar borders, vector interior [a, b), scalar interior tail. */
static void pool_emit_row(cg_ctx *c, const pool_geom *p, const pool_row *r) {
  int v = c->target->vec_f32, extra = p->sw == 2 ? 1 : 0;
  int64_t a = (p->pl + p->sw - 1) / p->sw;                                   /* first ox with xs >= 0 */
  int64_t lim = p->w - 1 - extra + p->pl - (p->kw - 1), b = lim < 0 ? 0 : lim / p->sw + 1; /* last read in row */
  if (b > p->ow) b = p->ow;
  if (a > b) a = b;
  int64_t nvec = (b - a) / v;
  scalar_range(c, p, r, 0, a);
  if (nvec > 0) {
    cg_loop L;
    LLVMValueRef i = cg_loop_begin(c, &L, cg_i64(c, 0), cg_i64(c, nvec), cg_i64(c, 1), "vx");
    pool_vec(c, p, r, LLVMBuildAdd(c->b, cg_i64(c, a), LLVMBuildMul(c->b, i, cg_i64(c, v), ""), ""), v);
    cg_loop_end(c, &L);
  }
  scalar_range(c, p, r, a + nvec * v, p->ow);
}

static LLVMValueRef gen_pool(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind) {
  const ir_pool_attr *at = n->op == IR_OP_maxpool ? &n->attr.maxpool : &n->attr.avgpool;
  const ir_shape *xs = &c->g->values[n->in[0]].shape, *ys = &c->g->values[n->out].shape;
  pool_geom p = {xs->dim[2], xs->dim[3], ys->dim[2], ys->dim[3], xs->dim[0] * xs->dim[1],
                 at->kernel[0], at->kernel[1], at->stride[0], at->stride[1], at->pad[0], at->pad[1],
                 at->pad[2], at->pad[3], n->op == IR_OP_maxpool, at->count_include_pad};
  LLVMValueRef a[4];
  LLVMValueRef f = cg_kernel_begin(c, fn_name, 1, a);
  LLVMValueRef lo, hi;
  cg_thread_range(c, cg_i64(c, p.planes * p.oh), a[2], a[3], &lo, &hi);
  cg_loop L;
  LLVMValueRef it = cg_loop_begin(c, &L, lo, hi, cg_i64(c, 1), "item");
  LLVMValueRef oy = LLVMBuildSRem(c->b, it, cg_i64(c, p.oh), "oy"), plane = LLVMBuildSDiv(c->b, it, cg_i64(c, p.oh), "");
  LLVMValueRef ys0 = LLVMBuildSub(c->b, LLVMBuildMul(c->b, oy, cg_i64(c, p.sh), ""), cg_i64(c, p.pt), "");
  LLVMValueRef ye = cg_min64(c, LLVMBuildAdd(c->b, ys0, cg_i64(c, p.kh), ""), cg_i64(c, p.h + p.pb));
  pool_row r = {a[0], a[1], LLVMBuildMul(c->b, plane, cg_i64(c, p.h * p.w), ""),
                LLVMBuildMul(c->b, it, cg_i64(c, p.ow), ""), cg_max64(c, ys0, cg_i64(c, 0)),
                cg_min64(c, ye, cg_i64(c, p.h)), LLVMBuildSub(c->b, ye, ys0, ""), c->g->values[n->in[0]].dtype,
                c->g->values[n->out].dtype, n};
  if ((r.xdt != IR_F32 || r.odt != IR_F32) && !p.is_max) return cg_fail(c, n, "internal error: 16-bit operand of avgpool");
  pool_emit_row(c, &p, &r);
  cg_loop_end(c, &L);
  cg_kernel_end(c);
  char tile[32];
  snprintf(tile, sizeof tile, "%dx%ds%d_v%d%s", p.kh, p.kw, p.sw, c->target->vec_f32,
           r.xdt == IR_BF16 || r.odt == IR_BF16 ? "_bf16" : r.xdt == IR_F16 || r.odt == IR_F16 ? "_fp16" : "");
  *kind = cg_kind(c, p.is_max ? "maxpool" : "avgpool", tile);
  return f;
}

LLVMValueRef cg_gen_maxpool(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind) {
  return gen_pool(c, n, fn_name, kind);
}
LLVMValueRef cg_gen_avgpool(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind) {
  return gen_pool(c, n, fn_name, kind);
}

/* in: x [N,C,H,W]; out [N,C,1,1]. */
LLVMValueRef cg_gen_global_avgpool(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind) {
  const ir_shape *xs = &c->g->values[n->in[0]].shape;
  int64_t planes = xs->dim[0] * xs->dim[1], hw = ir_shape_numel(xs) / planes;
  LLVMValueRef a[4];
  LLVMValueRef f = cg_kernel_begin(c, fn_name, 1, a);
  LLVMValueRef lo, hi;
  cg_thread_range(c, cg_i64(c, planes), a[2], a[3], &lo, &hi);
  cg_loop L;
  LLVMValueRef pl = cg_loop_begin(c, &L, lo, hi, cg_i64(c, 1), "plane");
  ir_dtype xdt = c->g->values[n->in[0]].dtype; /* 16-bit inference storage: widened on load */
  LLVMValueRef s = cg_reduce_sum_dt(c, n, a[0], LLVMBuildMul(c->b, pl, cg_i64(c, hw), ""), hw, NULL, xdt);
  cg_store_f32(c, LLVMBuildFDiv(c->b, s, cg_f32(c, (float)hw), ""), a[1], pl);
  cg_loop_end(c, &L);
  cg_kernel_end(c);
  *kind = cg_kind(c, "global_avgpool", xdt == IR_BF16 ? "bf16" : xdt == IR_F16 ? "fp16" : NULL);
  return f;
}
