/* gen_pool.c — pooling kernels on NCHW: max/avg pooling (one work item per output row of a
 * plane; interior columns vectorised over output pixels with strided loads, border columns
 * scalar with clipped windows; PyTorch window/divisor semantics as ir/ref_pool.c) and global
 * average pooling (one plane per item, vector sum).  Dilated windows: gen_pool_pick.c. */
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

/* ---- max pooling 3 wide, stride 2, left pad 1 (ResNet's 3x3/s2 maxpool) ------------------------
 * One output row as ceil(ow/V) chunks of V pixels, all in registers: for each input row of the
 * window, chunk q loads the 2V contiguous inputs [2qV, 2qV + 2V) (a masked load, -inf outside
 * the row, at the right edge) and splits them into even E (x = 2ox) and odd O (x = 2ox + 1)
 * lanes; the tap x = 2ox - 1 is O moved up one lane with the previous chunk's last odd lane
 * (-inf, the padding, for chunk 0).  The combine order is the scalar one (row by row, taps left
 * to right, cg_max_nan): bitwise equal to the interpreter, NaN and signed zeros included.
 * bf16 splits with integer ops (an i32 lane holds an even and an odd value: odd = lane &
 * 0xffff0000, even = lane << 16).  tune pool_s2=0: the generic row (pool_emit_row). */
enum { S2_MAX_CHUNKS = 16 };

static int pool_s2_ok(cg_ctx *c, const pool_geom *p) {
  int v = c->target->vec_f32;
  return p->is_max && p->kw == 3 && p->sw == 2 && (p->pl == 1 || p->pl == 0) && v >= 4 && v <= 16 &&
         (p->ow + v - 1) / v <= S2_MAX_CHUNKS && cg_tune(c)->pool_s2;
}

static LLVMValueRef s2_splat_i(cg_ctx *c, LLVMTypeRef et, uint64_t x, int w) {
  LLVMValueRef e[64];
  for (int i = 0; i < w; i++) e[i] = LLVMConstInt(et, x, 0);
  return LLVMConstVector(e, (unsigned)w);
}

static LLVMValueRef s2_lanes(cg_ctx *c, LLVMValueRef a, LLVMValueRef b, int first, int step, int w) {
  LLVMValueRef e[64];
  for (int i = 0; i < w; i++) e[i] = cg_i32(c, first + step * i);
  return LLVMBuildShuffleVector(c->b, a, b, LLVMConstVector(e, (unsigned)w), "");
}

/* Inputs [x0, x0 + 2V) of a row (cnt of them inside it, the rest -inf) as even / odd f32 lanes. */
static void s2_load(cg_ctx *c, const pool_row *r, LLVMValueRef idx, int cnt, int v, LLVMValueRef *ev, LLVMValueRef *od) {
  int f = cg_dt_half(r->xdt), w = 2 * v;
  LLVMTypeRef et = f < 0 ? c->t_f32 : LLVMInt16TypeInContext(c->llc), vt = LLVMVectorType(et, (unsigned)w);
  LLVMValueRef ninf = f < 0 ? cg_fconst(c, -__builtin_inff(), w)
                            : s2_splat_i(c, et, f == IR_HALF_FP16 ? 0xfc00u : 0xff80u, w), x;
  LLVMValueRef ptr = LLVMBuildGEP2(c->b, et, r->x, &idx, 1, "");
  if (cnt <= 0) x = ninf;
  else if (cnt >= w) {
    x = LLVMBuildLoad2(c->b, vt, ptr, "s2row");
    LLVMSetAlignment(x, f < 0 ? 4 : 2);
  } else {
    LLVMValueRef m[64];
    for (int l = 0; l < w; l++) m[l] = LLVMConstInt(c->t_i1, l < cnt, 0);
    LLVMTypeRef ov[2] = {vt, c->t_ptr};
    LLVMValueRef args[4] = {ptr, cg_i32(c, f < 0 ? 4 : 2), LLVMConstVector(m, (unsigned)w), ninf};
    x = cg_intrinsic(c, "llvm.masked.load", ov, 2, args, 4);
  }
  if (f < 0) {
    *ev = s2_lanes(c, x, x, 0, 2, v);
    *od = s2_lanes(c, x, x, 1, 2, v);
  } else if (f == IR_HALF_BF16) {
    LLVMTypeRef it = LLVMVectorType(c->t_i32, (unsigned)v);
    LLVMValueRef u = LLVMBuildBitCast(c->b, x, it, "");
    *ev = LLVMBuildBitCast(c->b, LLVMBuildShl(c->b, u, s2_splat_i(c, c->t_i32, 16, v), ""), cg_vtype(c, v), "even");
    *od = LLVMBuildBitCast(c->b, LLVMBuildAnd(c->b, u, s2_splat_i(c, c->t_i32, 0xffff0000u, v), ""), cg_vtype(c, v), "odd");
  } else {
    *ev = cg_widen16_v(c, r->n, s2_lanes(c, x, x, 0, 2, v), f, v);
    *od = cg_widen16_v(c, r->n, s2_lanes(c, x, x, 1, 2, v), f, v);
  }
}

static void pool_s2_row(cg_ctx *c, const pool_geom *p, const pool_row *r) {
  int v = c->target->vec_f32, nch = (int)((p->ow + v - 1) / v);
  LLVMValueRef accp[S2_MAX_CHUNKS];
  for (int q = 0; q < nch; q++) {
    accp[q] = cg_entry_alloca(c, cg_vtype(c, v), "s2acc");
    LLVMBuildStore(c->b, cg_fconst(c, -__builtin_inff(), v), accp[q]);
  }
  cg_loop L;
  LLVMValueRef y = cg_loop_begin(c, &L, r->y0, r->y1, cg_i64(c, 1), "s2y");
  LLVMValueRef rowi = LLVMBuildAdd(c->b, r->plane_in, LLVMBuildMul(c->b, y, cg_i64(c, p->w), ""), "");
  LLVMValueRef carry = cg_fconst(c, -__builtin_inff(), v), ev, od, pev = NULL, pod = NULL;
  /* pad 1: the window of ox is x = 2ox-1 .. 2ox+1 (the previous chunk's last odd lane on the
   * left); pad 0: x = 2ox .. 2ox+2 (the next chunk's first even lane on the right: chunk q
   * is finished once chunk q+1 is loaded, and one chunk past the last is loaded for it). */
  for (int q = 0; q < nch + (p->pl == 0); q++) {
    int64_t x0 = 2 * (int64_t)q * v, left_in = p->w - x0;
    s2_load(c, r, LLVMBuildAdd(c->b, rowi, cg_i64(c, x0), ""), (int)(left_in < 2 * v ? left_in : 2 * v), v, &ev, &od);
    if (p->pl == 1) {
      LLVMValueRef left = s2_lanes(c, carry, od, v - 1, 1, v); /* x = 2ox - 1 */
      LLVMValueRef h = cg_max_nan(c, od, cg_max_nan(c, ev, left));
      LLVMBuildStore(c->b, cg_max_nan(c, h, LLVMBuildLoad2(c->b, cg_vtype(c, v), accp[q], "")), accp[q]);
      carry = od;
      continue;
    }
    if (q > 0) {
      LLVMValueRef right = s2_lanes(c, pev, ev, 1, 1, v); /* x = 2ox + 2 */
      LLVMValueRef h = cg_max_nan(c, pev, cg_max_nan(c, pod, right));
      LLVMBuildStore(c->b, cg_max_nan(c, h, LLVMBuildLoad2(c->b, cg_vtype(c, v), accp[q - 1], "")), accp[q - 1]);
    }
    pev = ev, pod = od;
  }
  cg_loop_end(c, &L);
  for (int q = 0; q < nch; q++) {
    int64_t n = p->ow - (int64_t)q * v;
    LLVMValueRef acc = LLVMBuildLoad2(c->b, cg_vtype(c, v), accp[q], ""), at = LLVMBuildAdd(c->b, r->out_row, cg_i64(c, (int64_t)q * v), "");
    if (n >= v) cg_act_store(c, r->n, acc, r->out, at, v, r->odt);
    else cg_act_masked_store(c, r->n, acc, r->out, at, (1u << n) - 1u, v, r->odt);
  }
}

/* ---- max pooling, stride 1 (GoogLeNet's 3x3/s1 pad-1 branch pools) ------------------------
 * One output row as ceil(ow/V) chunks of V pixels in registers: per input row of the window and
 * tap k, chunk q loads the V inputs x = qV + l + k - pl with a constant mask (lanes outside
 * the row or past ow read nothing and give -inf, the padding) and combines them in the generic
 * row's order (row by row, taps left to right, cg_max_nan): bitwise equal to it.  The generic
 * row does rows narrower than V (7x7, 14x14 maps) one scalar window per pixel.  f32 operands
 * only.  tune pool_s1=0: the generic row. */
static int pool_s1_ok(cg_ctx *c, const pool_geom *p, const pool_row *r) {
  int v = c->target->vec_f32;
  return p->is_max && p->sw == 1 && r->xdt == IR_F32 && r->odt == IR_F32 && v >= 4 && v <= 16 && p->kw <= 16 &&
         (p->ow + v - 1) / v <= S2_MAX_CHUNKS && cg_tune(c)->pool_s1;
}

static void pool_s1_row(cg_ctx *c, const pool_geom *p, const pool_row *r) {
  int v = c->target->vec_f32, nch = (int)((p->ow + v - 1) / v);
  LLVMTypeRef vt = cg_vtype(c, v);
  LLVMValueRef ninf = cg_fconst(c, -__builtin_inff(), v), accp[S2_MAX_CHUNKS];
  for (int q = 0; q < nch; q++) {
    accp[q] = cg_entry_alloca(c, vt, "s1acc");
    LLVMBuildStore(c->b, ninf, accp[q]);
  }
  cg_loop L;
  LLVMValueRef y = cg_loop_begin(c, &L, r->y0, r->y1, cg_i64(c, 1), "s1y");
  LLVMValueRef rowi = LLVMBuildAdd(c->b, r->plane_in, LLVMBuildMul(c->b, y, cg_i64(c, p->w), ""), "");
  for (int q = 0; q < nch; q++) {
    LLVMValueRef acc = LLVMBuildLoad2(c->b, vt, accp[q], "");
    for (int k = 0; k < p->kw; k++) {
      int64_t x0 = (int64_t)q * v + k - p->pl;
      LLVMValueRef m[16];
      int n = 0;
      for (int l = 0; l < v; l++) {
        int on = x0 + l >= 0 && x0 + l < p->w && (int64_t)q * v + l < p->ow;
        m[l] = LLVMConstInt(c->t_i1, (unsigned long long)on, 0), n += on;
      }
      if (!n) continue; /* every lane in the padding: the generic row skips these taps */
      LLVMValueRef idx = LLVMBuildAdd(c->b, rowi, cg_i64(c, x0), ""), x;
      LLVMValueRef ptr = LLVMBuildGEP2(c->b, c->t_f32, r->x, &idx, 1, ""); /* may point before the row: masked */
      if (n == v) {
        x = LLVMBuildLoad2(c->b, vt, ptr, "s1x");
        LLVMSetAlignment(x, 4);
      } else {
        LLVMTypeRef ov[2] = {vt, c->t_ptr};
        LLVMValueRef args[4] = {ptr, cg_i32(c, 4), LLVMConstVector(m, (unsigned)v), ninf};
        x = cg_intrinsic(c, "llvm.masked.load", ov, 2, args, 4);
      }
      acc = cg_max_nan(c, x, acc);
    }
    LLVMBuildStore(c->b, acc, accp[q]);
  }
  cg_loop_end(c, &L);
  for (int q = 0; q < nch; q++) {
    int64_t n = p->ow - (int64_t)q * v;
    LLVMValueRef acc = LLVMBuildLoad2(c->b, vt, accp[q], ""), at = LLVMBuildAdd(c->b, r->out_row, cg_i64(c, (int64_t)q * v), "");
    if (n >= v) cg_act_store(c, r->n, acc, r->out, at, v, r->odt);
    else cg_act_masked_store(c, r->n, acc, r->out, at, (1u << n) - 1u, v, r->odt);
  }
}

static LLVMValueRef gen_pool(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind) {
  const ir_pool_attr *at = n->op == IR_OP_maxpool ? &n->attr.maxpool : &n->attr.avgpool;
  if (ir_pool_dilation(at, 0) != 1 || ir_pool_dilation(at, 1) != 1) return cg_gen_maxpool_pick(c, n, fn_name, kind);
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
  int s2 = pool_s2_ok(c, &p), s1 = !s2 && pool_s1_ok(c, &p, &r);
  if (s2) pool_s2_row(c, &p, &r);
  else if (s1) pool_s1_row(c, &p, &r);
  else pool_emit_row(c, &p, &r);
  cg_loop_end(c, &L);
  cg_kernel_end(c);
  char tile[32];
  snprintf(tile, sizeof tile, "%dx%ds%d%s_v%d%s", p.kh, p.kw, p.sw, s2 || s1 ? "_rows" : "", c->target->vec_f32,
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
