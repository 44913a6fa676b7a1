/* gen_train_gw.c — the walk over the taps of a kxk conv2d_grad_weight tile that the direct
 * (gen_train_conv.c twg_tile) and grouped (gen_train_gconv.c gwg_tile) training convs share
 * (gen_train.h cg_tgw_taps). */
#include "codegen/cg_half_partials.h"
#include "codegen/gen_train.h"

void cg_tgw_taps(cg_ctx *c, const cg_tgw *k, const cg_tgw_ops *o, LLVMValueRef *reg, int rr) {
  int V = k->V, per = rr * k->KC;
  LLVMTypeRef vt = cg_vtype(c, V), pt = cg_partial_vtype(c, V);
  cg_loop Y;
  for (int64_t ky = 0; ky < k->kh; ky++) {
    int64_t ylo = 0, yhi = k->oh, off = ky * k->dh - k->pt; /* iy = oy*sh + off */
    while (ylo < yhi && ylo * k->sh + off < 0) ylo++;
    while (yhi > ylo && (yhi - 1) * k->sh + off >= k->ih) yhi--;
    if (ylo >= yhi) continue;
    for (int kc = 0; kc < k->nkc; kc++) {
      int kx0 = kc * k->KC, nk = (int)(k->kw - kx0 < k->KC ? k->kw - kx0 : k->KC);
      int64_t base = (ky * k->nkc + kc) * per;
      LLVMValueRef sbase = o->cl ? cg_taddk(c, cg_tmul(c, o->cl, o->slots_cl), base) : NULL;
      LLVMValueRef sp[64], cur[64];
      for (int i = 0; i < rr * nk; i++) {
        LLVMValueRef si = sbase ? cg_taddk(c, sbase, i) : cg_i64(c, base + i);
        sp[i] = LLVMBuildInBoundsGEP2(c->b, pt, o->stack, &si, 1, "");
        LLVMBuildStore(c->b, cg_partial_load(c, sp[i], V), reg[i]); /* a 16-bit partial, widened (cg_half_partials.h) */
      }
      LLVMValueRef oy = cg_loop_begin(c, &Y, cg_i64(c, ylo), cg_i64(c, yhi), cg_i64(c, 1), "oy");
      for (int i = 0; i < rr * nk; i++) cur[i] = LLVMBuildLoad2(c->b, vt, reg[i], "");
      LLVMValueRef drow = cg_tadd(c, o->dplane, cg_tmul(c, oy, k->ow));
      LLVMValueRef xrow = cg_tadd(c, o->xplane, cg_tmul(c, cg_taddk(c, cg_tmul(c, oy, k->sh), off), k->iw));
      for (int64_t pos = 0; pos < k->ow; pos += V) {
        unsigned dm = cg_lanes((int)(k->ow - pos), V);
        LLVMValueRef dv[16];
        for (int r = 0; r < rr; r++) dv[r] = cg_tload(c, o->dy, cg_taddk(c, drow, (int64_t)r * k->oh * k->ow + pos), 1, dm, V);
        for (int j = 0; j < nk; j++) {
          unsigned m = 0;
          int64_t kx = kx0 + j;
          for (int l = 0; l < V; l++) {
            int64_t ix = (pos + l) * k->sw - k->pl + kx * k->dw;
            if (pos + l < k->ow && ix >= 0 && ix < k->iw) m |= 1u << l;
          }
          if (!m) continue;
          LLVMValueRef xv = cg_tload(c, o->x, cg_taddk(c, xrow, pos * k->sw - k->pl + kx * k->dw), (int)k->sw, m, V);
          for (int r = 0; r < rr; r++) cur[r * nk + j] = cg_fma(c, dv[r], xv, cur[r * nk + j]);
        }
      }
      for (int i = 0; i < rr * nk; i++) LLVMBuildStore(c->b, cur[i], reg[i]);
      cg_loop_end(c, &Y);
      cg_if fl; /* after the last image one horizontal sum per weight, straight from the registers */
      cg_if_begin(c, &fl, o->last);
      for (int r = 0; r < rr; r++)
        for (int j = 0; j < nk; j++) o->store(c, o->user, r, ky, kx0 + j, reg[r * nk + j]);
      cg_if_else(c, &fl);
      for (int i = 0; i < rr * nk; i++) cg_partial_store(c, LLVMBuildLoad2(c->b, vt, reg[i], ""), sp[i], V);
      cg_if_end(c, &fl);
    }
  }
}

int cg_tgw_tap_empty(const cg_tgw *k, int64_t ky) {
  int64_t ylo = 0, yhi = k->oh, off = ky * k->dh - k->pt;
  while (ylo < yhi && ylo * k->sh + off < 0) ylo++;
  while (yhi > ylo && (yhi - 1) * k->sh + off >= k->ih) yhi--;
  return ylo >= yhi;
}
