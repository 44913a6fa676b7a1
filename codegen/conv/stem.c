/* conv/stem.c — the bf16 stem conv (ResNet's 3 -> 64 7x7/s2 on a bf16 224x224 image;
 * docs/matrix.md "Stem").  Horizontal stride 2 over 16-bit storage: for the lanes l of a pixel
 * vector (ox = ox0 + l) the tap pair (x[2 ox + kx - pl], x[2 ox + kx + 1 - pl]) is the dword at
 * element 2 ox0 + kx - pl + 2l, so a pixel vector of one (channel, input row, tap pair) is one
 * contiguous 2V-element load, already in vdpbf16ps's pair layout: no im2col panel.  K order: ky
 * (a run-time loop over the window rows inside the map), channel, tap pair (kx = 0, 2, ...; an
 * odd kw's last pair reads its high half as 0 against a zero weight).  Loads are masked per
 * element (0) where x leaves the row.  Microkernel: R = 4 channels x P pixel vectors; a work
 * item is (image, output row, channel group), groups fastest (the item's input rows stay in
 * L1), the output row in segments of at most P vectors.  Epilogue as conv/bf16.c's
 * (the BN scale applied there, post ops, 16-bit store narrowed as its narrow_out). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/cg_isa.h"
#include "codegen/conv/bf16_plan.h"
#include "codegen/conv/conv_core.h"
#include "codegen/conv/stem.h"
#include "codegen/gen_round16.h"

enum { STEM_R = 4, STEM_MAX_CIN = 4, STEM_MAX_KW = 16 };

typedef struct sgeom {
  int64_t n, cin, cout, ih, iw, oh, ow;
  int kh, kw, sh, pt, pl, V, R, P, mode;
  int npx, ncg, nv; /* tap pairs per window row, channel groups, pixel vectors per output row */
} sgeom;

static void plan(cg_ctx *c, const ir_node *n, sgeom *g) {
  const ir_shape *xs = &c->g->values[n->in[0]].shape, *ys = &c->g->values[n->out].shape;
  const ir_conv2d_attr *a = &n->attr.conv2d;
  memset(g, 0, sizeof *g);
  g->n = xs->dim[0], g->cin = xs->dim[1], g->ih = xs->dim[2], g->iw = xs->dim[3];
  g->cout = ys->dim[1], g->oh = ys->dim[2], g->ow = ys->dim[3];
  g->kh = a->kernel[0], g->kw = a->kernel[1], g->sh = a->stride[0], g->pt = a->pad[0], g->pl = a->pad[1];
  g->V = c->target->vec_f32, g->R = STEM_R, g->mode = cg_bf16_dot(c->target, cg_tune(c));
  g->npx = (g->kw + 1) / 2, g->ncg = (int)(g->cout / g->R);
  g->nv = (int)((g->ow + g->V - 1) / g->V);
  /* registers: R x P accumulators, R broadcast weights, an input vector and a spare; the
   * segments of a row as even as possible (112 outputs on 16 lanes: 4 + 3 vectors) */
  int regs = cg_acc_budget(c->target) >= 24 ? 32 : 16, pmax = (regs - 2 - g->R) / g->R;
  int nseg = (g->nv + pmax - 1) / pmax;
  g->P = (g->nv + nseg - 1) / nseg;
}

int cg_conv_stem_match(cg_ctx *c, const ir_node *n, cg_kplan *kp) {
  (void)kp;
  if (!cg_tune(c)->stem_gen || !cg_conv_bf16_ok(c, n)) return 0;
  const ir_conv2d_attr *a = &n->attr.conv2d;
  /* vertical stride 2 and symmetric pads: the shapes test_codegen_stem covers */
  if (a->stride[0] != 2 || a->stride[1] != 2 || a->pad[0] != a->pad[2] || a->pad[1] != a->pad[3] || a->groups != 1 || a->dilation[0] > 1 || a->dilation[1] > 1 ||
      c->g->values[n->in[0]].dtype != IR_BF16)
    return 0;
  sgeom g;
  plan(c, n, &g);
  if (g.cin > STEM_MAX_CIN || g.cout % g.R || g.kw > STEM_MAX_KW || 2 * g.V > 64 || g.P < 1) return 0;
  const pass_fusion *fu = cg_fusion(c, n);
  if (fu->n_pre || fu->n_side) return 0;
  for (int i = 0; i < fu->n_post; i++)
    if (c->g->nodes[fu->post[i]].op == IR_OP_add) return 0;
  return 1;
}

/* Weights as pair dwords [group][ky][ci][pair][R] (pair j: taps 2j low, 2j + 1 high or 0),
 * bias (conv bias, BN shift) and BN scale per channel, as conv/bf16_plan.c's cg_conv_bf16_pack. */
static void pack(cg_ctx *c, const ir_node *n, const ir_node *bn, const sgeom *g, uint32_t *wp, float *bp, float *sp) {
  const float *w = c->g->values[n->in[1]].data;
  for (int64_t co = 0; co < g->cout; co++) {
    double scale, shift;
    cg_conv_bn_fold(c, n, bn, co, &scale, &shift);
    bp[co] = (float)shift, sp[co] = (float)scale;
    int64_t grp = co / g->R, r = co % g->R;
    for (int ky = 0; ky < g->kh; ky++)
      for (int64_t ci = 0; ci < g->cin; ci++)
        for (int j = 0; j < g->npx; j++) {
          const float *wr = w + ((co * g->cin + ci) * g->kh + ky) * g->kw;
          uint32_t lo = cg_conv_bf16_bits(wr[2 * j]), hi = 2 * j + 1 < g->kw ? cg_conv_bf16_bits(wr[2 * j + 1]) : 0;
          wp[(((grp * g->kh + ky) * g->cin + ci) * g->npx + j) * g->R + r] = lo | hi << 16;
        }
  }
}

typedef struct sk {
  LLVMValueRef x, out, wp, bp, sp;
  LLVMValueRef in_base, out_row, wbase, bbase, iy0, ky_lo, ky_hi; /* per work item */
  const conv_epi *e;
  int bn;
  ir_dtype odt;
} sk;

/* The 2V bf16 elements of x from element row + off (off at compile time, may be negative) as
 * V pair dwords; elements outside the row [0, iw), and the high halves when !hi, read as 0. */
static LLVMValueRef pair_load(cg_ctx *c, const sgeom *g, const sk *s, LLVMValueRef row, int64_t off, int hi) {
  int w = 2 * g->V;
  LLVMTypeRef i16 = LLVMInt16TypeInContext(c->llc), vt = LLVMVectorType(i16, (unsigned)w);
  LLVMTypeRef vi = LLVMVectorType(c->t_i32, (unsigned)g->V);
  uint64_t m = 0, full = w >= 64 ? ~0ull : (1ull << w) - 1;
  for (int t = 0; t < w; t++)
    if (off + t >= 0 && off + t < g->iw && (hi || !(t & 1))) m |= 1ull << t;
  if (!m) return LLVMConstNull(vi);
  LLVMValueRef idx = LLVMBuildAdd(c->b, row, cg_i64(c, off), "");
  LLVMValueRef ptr = LLVMBuildGEP2(c->b, i16, s->x, &idx, 1, ""); /* masked lanes may lie outside */
  LLVMValueRef v;
  if (m == full) {
    v = LLVMBuildLoad2(c->b, vt, ptr, "xpairs");
    LLVMSetAlignment(v, 2);
  } else {
    LLVMValueRef e[64];
    for (int t = 0; t < w; t++) e[t] = LLVMConstInt(c->t_i1, (m >> t) & 1, 0);
    LLVMTypeRef ov[2] = {vt, c->t_ptr};
    LLVMValueRef args[4] = {ptr, cg_i32(c, 2), LLVMConstVector(e, (unsigned)w), LLVMConstNull(vt)};
    v = cg_intrinsic(c, "llvm.masked.load", ov, 2, args, 4);
  }
  return LLVMBuildBitCast(c->b, v, vi, "");
}

/* Stores result v (f32) at out[oi] in s->odt, lanes m.  A bf16 result on avx512bf16 (mode 2)
 * narrows with one vcvtneps2bf16 (cg_narrow_bf16_native, as conv/bf16.c's narrow_out:
 * bitwise cg_narrow16_v's rounding, f32 denormal lanes through a branch to it), else with
 * cg_narrow16_v's integer rounding; tune bf16_sw_narrow=1: the integer rounding (A/B). */
static void store_out(cg_ctx *c, const sgeom *g, const sk *s, const ir_node *last, LLVMValueRef v, LLVMValueRef oi, unsigned m) {
  int V = g->V, f = cg_dt_half(s->odt);
  unsigned full = V >= 32 ? ~0u : (1u << V) - 1;
  if (f != IR_HALF_BF16 || g->mode != 2 || cg_tune(c)->bf16_sw_narrow) {
    if (m == full) cg_act_store(c, last, v, s->out, oi, V, s->odt);
    else cg_act_masked_store(c, last, v, s->out, oi, m, V, s->odt);
    return;
  }
  LLVMTypeRef i16 = LLVMInt16TypeInContext(c->llc);
  LLVMValueRef h = cg_narrow_bf16_native(c, last, v, V);
  LLVMValueRef ptr = LLVMBuildGEP2(c->b, i16, s->out, &oi, 1, "");
  if (m == full) {
    LLVMSetAlignment(LLVMBuildStore(c->b, h, ptr), 2);
    return;
  }
  LLVMTypeRef ov[2] = {LLVMTypeOf(h), c->t_ptr};
  LLVMValueRef args[4] = {h, ptr, cg_i32(c, 2), cg_conv_mask_const(c, m, V)};
  cg_intrinsic(c, "llvm.masked.store", ov, 2, args, 4);
}

/* np pixel vectors from output column ox0 of the item's row, R channels. */
static void segment(cg_ctx *c, const sgeom *g, const sk *s, int64_t ox0, int np) {
  int V = g->V, R = g->R;
  LLVMTypeRef vt = cg_vtype(c, V), vi = LLVMVectorType(c->t_i32, (unsigned)V);
  LLVMValueRef acc[64], cur[64], xv[16];
  for (int i = 0; i < R * np; i++) {
    acc[i] = cg_entry_alloca(c, vt, "sacc");
    LLVMBuildStore(c->b, cg_fzero(c, V), acc[i]);
  }
  cg_loop KY;
  LLVMValueRef ky = cg_loop_begin(c, &KY, s->ky_lo, s->ky_hi, cg_i64(c, 1), "ky");
  for (int i = 0; i < R * np; i++) cur[i] = LLVMBuildLoad2(c->b, vt, acc[i], "");
  LLVMValueRef iyw = LLVMBuildMul(c->b, LLVMBuildAdd(c->b, s->iy0, ky, ""), cg_i64(c, g->iw), "");
  LLVMValueRef wrow = LLVMBuildAdd(c->b, s->wbase, LLVMBuildMul(c->b, ky, cg_i64(c, g->cin * g->npx * R), ""), "");
  for (int64_t ci = 0; ci < g->cin; ci++) {
    LLVMValueRef row = LLVMBuildAdd(c->b, LLVMBuildAdd(c->b, s->in_base, cg_i64(c, ci * g->ih * g->iw), ""), iyw, "row");
    for (int j = 0; j < g->npx; j++) {
      for (int q = 0; q < np; q++) xv[q] = pair_load(c, g, s, row, 2 * (ox0 + (int64_t)q * V) + 2 * j - g->pl, 2 * j + 1 < g->kw);
      for (int r = 0; r < R; r++) {
        LLVMValueRef wi = LLVMBuildAdd(c->b, wrow, cg_i64(c, (ci * g->npx + j) * R + r), "");
        LLVMValueRef w = LLVMBuildLoad2(c->b, c->t_i32, LLVMBuildGEP2(c->b, c->t_i32, s->wp, &wi, 1, ""), "wpair");
        LLVMSetAlignment(w, 4);
        LLVMValueRef wv = LLVMBuildShuffleVector(c->b, LLVMBuildInsertElement(c->b, LLVMGetUndef(vi), w, cg_i32(c, 0), ""),
                                                 LLVMGetUndef(vi), LLVMConstNull(vi), "wbc");
        for (int q = 0; q < np; q++) cur[r * np + q] = cg_bf16_dp(c, g->mode, cur[r * np + q], xv[q], wv, V);
      }
    }
  }
  for (int i = 0; i < R * np; i++) LLVMBuildStore(c->b, cur[i], acc[i]);
  cg_loop_end(c, &KY);
  const conv_epi *e = s->e;
  const ir_node *last = e->n_post ? e->post[e->n_post - 1] : NULL;
  for (int r = 0; r < R; r++) {
    LLVMValueRef bi = LLVMBuildAdd(c->b, s->bbase, cg_i64(c, r), "");
    LLVMValueRef bias = cg_splat(c, cg_load_f32(c, s->bp, bi), V);
    LLVMValueRef scale = s->bn ? cg_splat(c, cg_load_f32(c, s->sp, bi), V) : NULL;
    for (int q = 0; q < np; q++) {
      int64_t x0 = ox0 + (int64_t)q * V, nv = g->ow - x0 < V ? g->ow - x0 : V;
      LLVMValueRef oi = LLVMBuildAdd(c->b, s->out_row, cg_i64(c, r * g->oh * g->ow + x0), "oi");
      LLVMValueRef v = LLVMBuildLoad2(c->b, vt, acc[r * np + q], "");
      if (scale) v = LLVMBuildFMul(c->b, v, scale, "bn");
      v = LLVMBuildFAdd(c->b, v, bias, "");
      for (int k = 0; k < e->n_post; k++) {
        if (e->post[k]->op == IR_OP_round16 && s->odt != IR_F32) continue; /* the 16-bit store rounds */
        v = cg_epilogue(c, e->post[k], v, NULL, oi, V);
      }
      store_out(c, g, s, last, v, oi, nv == V ? (V >= 32 ? ~0u : (1u << V) - 1) : (1u << nv) - 1u);
    }
  }
}

static const char *stem_kind(cg_ctx *c, const sgeom *g, const pass_fusion *fu, const sk *s) {
  char op[160];
  int k = snprintf(op, sizeof op, "conv2d_%dx%ds%d_stem", g->kh, g->kw, g->sh);
  if (fu->bn >= 0) k += snprintf(op + k, sizeof op - (size_t)k, "_bn");
  for (int i = 0; i < fu->n_post && k < 100; i++)
    k += snprintf(op + k, sizeof op - (size_t)k, "_%s", ir_ops[c->g->nodes[fu->post[i]].op].name);
  return ir_fmt(c->arena, "%s_x16%s_bf16_%dx%d__%s", op, s->odt != IR_F32 ? "_o16" : "", g->R, g->P * g->V,
                cg_bf16_isa_name(c->target, 0));
}

LLVMValueRef cg_gen_conv2d_stem(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind) {
  sgeom g;
  plan(c, n, &g);
  const pass_fusion *fu = cg_fusion(c, n);
  conv_epi e = {{0}, fu->n_post};
  for (int i = 0; i < fu->n_post; i++) e.post[i] = &c->g->nodes[fu->post[i]];
  size_t wn = (size_t)g.cout * (size_t)(g.kh * g.cin * g.npx);
  uint32_t *wp = malloc(wn * sizeof *wp);
  float *bp = malloc((size_t)g.cout * sizeof(float)), *sp = malloc((size_t)g.cout * sizeof(float));
  if (!wp || !bp || !sp) abort();
  const ir_node *bnn = fu->bn >= 0 ? &c->g->nodes[fu->bn] : NULL;
  if (!cg_plan_only(c)) pack(c, n, bnn, &g, wp, bp, sp);
  LLVMValueRef a[4];
  LLVMValueRef f = cg_kernel_begin(c, fn_name, 1, a);
  sk s;
  memset(&s, 0, sizeof s);
  s.e = &e, s.bn = bnn != NULL, s.x = a[0], s.out = a[1];
  s.odt = c->g->values[c->g->nodes[fu->last].out].dtype;
  s.wp = cg_blob_const(c, "conv_stem.w", wp, wn * sizeof *wp);
  s.bp = cg_blob_const(c, "conv_stem.b", bp, (size_t)g.cout * sizeof(float));
  s.sp = s.bn ? cg_blob_const(c, "conv_stem.s", sp, (size_t)g.cout * sizeof(float)) : NULL;
  free(wp), free(bp), free(sp);
  LLVMValueRef lo, hi;
  cg_thread_range(c, cg_i64(c, g.n * g.oh * g.ncg), a[2], a[3], &lo, &hi);
  cg_loop L;
  LLVMValueRef it = cg_loop_begin(c, &L, lo, hi, cg_i64(c, 1), "item");
  LLVMValueRef grp = LLVMBuildSRem(c->b, it, cg_i64(c, g.ncg), "grp"), rest = LLVMBuildSDiv(c->b, it, cg_i64(c, g.ncg), "");
  LLVMValueRef oy = LLVMBuildSRem(c->b, rest, cg_i64(c, g.oh), "oy"), img = LLVMBuildSDiv(c->b, rest, cg_i64(c, g.oh), "img");
  s.iy0 = LLVMBuildSub(c->b, LLVMBuildMul(c->b, oy, cg_i64(c, g.sh), ""), cg_i64(c, g.pt), "iy0");
  s.ky_lo = cg_max64(c, LLVMBuildNeg(c->b, s.iy0, ""), cg_i64(c, 0));
  s.ky_hi = cg_min64(c, LLVMBuildSub(c->b, cg_i64(c, g.ih), s.iy0, ""), cg_i64(c, g.kh));
  s.in_base = LLVMBuildMul(c->b, img, cg_i64(c, g.cin * g.ih * g.iw), "in_base");
  LLVMValueRef co0 = LLVMBuildMul(c->b, grp, cg_i64(c, g.R), "co0");
  s.out_row = LLVMBuildMul(c->b, LLVMBuildAdd(c->b, LLVMBuildMul(c->b, LLVMBuildAdd(c->b, LLVMBuildMul(c->b, img, cg_i64(c, g.cout), ""), co0, ""),
                                                                 cg_i64(c, g.oh), ""), oy, ""),
                           cg_i64(c, g.ow), "out_row");
  s.wbase = LLVMBuildMul(c->b, grp, cg_i64(c, (int64_t)g.kh * g.cin * g.npx * g.R), "wbase");
  s.bbase = co0;
  for (int v0 = 0; v0 < g.nv; v0 += g.P) segment(c, &g, &s, (int64_t)v0 * g.V, g.nv - v0 < g.P ? g.nv - v0 : g.P);
  cg_loop_end(c, &L);
  cg_kernel_end(c);
  *kind = stem_kind(c, &g, fu, &s);
  return f;
}
