/* gen_store16.c — 16-bit storage kernels (issue 6, passes/store16.c, docs/precision.md):
 *   narrow16  x f32 -> out bf16/fp16 (round to nearest even, as round16; keep_sign)
 *   widen16   x bf16/fp16 -> out f32 (exact)
 * Element-wise over the flat tensor, <V x float> <-> <V x i16> per vector (AVX2: bf16 by
 * vpaddd/vpsrld + a pack, fp16 by vcvtps2ph $4 / vcvtph2ps), the scalar tail on the last
 * thread (cg_foreach_elem).  The vector bodies are gen_round16.c's cg_narrow16_v /
 * cg_widen16_v; widen16(narrow16(x)) is bitwise round16(x).
 * Also the back end's side of 16-bit inference storage (cg_store16_infer, at the end): the
 * pass asks the kernel plan (cg_select.c) which kernels read and write 16-bit activations. */
#include <stdlib.h>
#include <string.h>

#include "codegen/cg_internal.h"
#include "codegen/cg_route.h"
#include "codegen/gen_round16.h"
#include "codegen/gen_store16.h"

typedef struct s16_ctx { const ir_node *n; LLVMValueRef x, out; } s16_ctx;

static LLVMValueRef gep16(cg_ctx *c, LLVMValueRef base, LLVMValueRef idx) {
  return LLVMBuildInBoundsGEP2(c->b, LLVMInt16TypeInContext(c->llc), base, &idx, 1, "");
}
static LLVMTypeRef t16(cg_ctx *c, int w) {
  LLVMTypeRef i16 = LLVMInt16TypeInContext(c->llc);
  return w == 1 ? i16 : LLVMVectorType(i16, (unsigned)w);
}

static void narrow_body(cg_ctx *c, LLVMValueRef idx, int w, void *user) {
  s16_ctx *u = user;
  const ir_store16_attr *a = &u->n->attr.narrow16;
  LLVMValueRef h = cg_narrow16_v(c, u->n, cg_load_v(c, u->x, idx, w), a->format, a->keep_sign, w);
  LLVMValueRef s = LLVMBuildStore(c->b, h, gep16(c, u->out, idx));
  LLVMSetAlignment(s, 2);
}

static void widen_body(cg_ctx *c, LLVMValueRef idx, int w, void *user) {
  s16_ctx *u = user;
  LLVMValueRef l = LLVMBuildLoad2(c->b, t16(c, w), gep16(c, u->x, idx), "h");
  LLVMSetAlignment(l, 2);
  cg_store_v(c, cg_widen16_v(c, u->n, l, u->n->attr.widen16.format, w), u->out, idx, w);
}

static LLVMValueRef gen(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind, int narrow) {
  int train = ((cg_priv *)c->priv)->train;
  if (c->g->values[n->in[0]].kind == IR_VAL_PARAM && !train)
    return cg_fail(c, n, "internal error: %s of a param", narrow ? "narrow16" : "widen16");
  LLVMValueRef a[4];
  LLVMValueRef f = train ? cg_train_kbegin(c, fn_name, 1, a) : cg_kernel_begin(c, fn_name, 1, a);
  s16_ctx u = {n, a[0], a[1]};
  cg_foreach_elem(c, cg_numel(c, n->out), a[2], a[3], narrow ? narrow_body : widen_body, &u);
  cg_kernel_end(c);
  int fp16 = n->attr.narrow16.format == IR_HALF_FP16;
  char tile[16];
  snprintf(tile, sizeof tile, "v%d", c->target->vec_f32);
  *kind = cg_kind(c, narrow ? (fp16 ? (n->attr.narrow16.keep_sign ? "narrow16_fp16_sign" : "narrow16_fp16")
                                    : (n->attr.narrow16.keep_sign ? "narrow16_bf16_sign" : "narrow16_bf16"))
                            : (fp16 ? "widen16_fp16" : "widen16_bf16"),
                  tile);
  return f;
}

LLVMValueRef cg_gen_narrow16(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind) {
  return gen(c, n, fn_name, kind, 1);
}
LLVMValueRef cg_gen_widen16(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind) {
  return gen(c, n, fn_name, kind, 0);
}

/* ---- inference: which kernels read / write 16-bit activations (pass_store16_infer) -------
 * The kernel plan says it (cg_select: in16 / out16), made for the graph before the pass (the
 * pass asks about its node ids) and again for the graph after it. */
typedef struct s16_plan { pass_fusion *fu; cg_kplan *kp; } s16_plan;

static int writes16(void *ctx, const ir_graph *g, int p) {
  (void)g;
  return ((s16_plan *)ctx)->kp[p].out16;
}

static int reads16(void *ctx, const ir_graph *g, int i, int j) {
  (void)g;
  return j < 32 && (((s16_plan *)ctx)->kp[i].in16 >> j & 1);
}

static int plan_of(s16_plan *h, const ir_graph *g, const cg_target *t, const char *amp, ir_diag *d) {
  free(h->fu), free(h->kp);
  size_t n = (size_t)(g->n_nodes > 0 ? g->n_nodes : 1);
  h->fu = calloc(n, sizeof *h->fu), h->kp = calloc(n, sizeof *h->kp);
  if (!h->fu || !h->kp) abort();
  pass_fuse(g, 1, h->fu); /* the plan cg_layout_build makes */
  return cg_select(g, h->fu, t, amp, 0, h->kp, d);
}

int cg_store16_infer(ir_graph *g, const cg_target *t, const char *amp, int fmt, FILE *log, ir_diag *d) {
  s16_plan h = {NULL, NULL};
  pass_store16_hooks hk = {writes16, reads16, &h};
  pass_store16_stats st = {.log = log};
  int rc = plan_of(&h, g, t, amp, d);
  if (rc >= 0) rc = pass_store16_infer(g, fmt, &hk, &st, d);
  if (rc >= 0 && plan_of(&h, g, t, amp, d) < 0) rc = -1;
  for (int i = 0; i < g->n_nodes && rc >= 0; i++) /* the kernels of the new graph read 16-bit values only where they can */
    for (int j = 0; j < g->nodes[i].n_in; j++) {
      const ir_value *v = &g->values[g->nodes[i].in[j]];
      if (v->kind == IR_VAL_ACT && v->dtype != IR_F32 && g->nodes[i].op != IR_OP_widen16 && !reads16(&h, g, i, j)) {
        rc = ir_diag_set(d, g->nodes[i].loc, g->nodes[i].name, "internal error: 16-bit storage: '%s' reaches a kernel "
                         "that reads f32 (the fusion changed); tune store16=0 avoids it", v->name);
        break;
      }
    }
  if (rc >= 0 && log)
    fprintf(log, "cnnc: 16-bit storage (inference): %d values %lld -> %lld bytes, %d widen16 nodes\n", st.values,
            (long long)st.bytes32, (long long)st.bytes32 / 2, st.f32_values);
  free(h.fu), free(h.kp);
  return rc;
}
