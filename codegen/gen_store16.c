/* gen_store16.c — 16-bit storage kernels (issue 6, passes/store16.c, docs/precision.md):
 *   narrow16  x f32 -> out bf16/fp16 (round to nearest even, as round16; keep_sign)
 *   widen16   x bf16/fp16 -> out f32 (exact)
 * Element-wise over the flat tensor, <V x float> <-> <V x i16> per vector (AVX2: bf16 by
 * vpaddd/vpsrld + a pack, fp16 by vcvtps2ph $4 / vcvtph2ps), the scalar tail on the last
 * thread (cg_foreach_elem).  The vector bodies are gen_round16.c's cg_narrow16_v /
 * cg_widen16_v; widen16(narrow16(x)) is bitwise round16(x).
 * Also the back end's side of 16-bit inference storage (cg_store16_infer, at the end): which
 * kernels read and write 16-bit activations, for passes/store16.c pass_store16_infer. */
#include <stdlib.h>
#include <string.h>

#include "codegen/cg_internal.h"
#include "codegen/conv/bf16_plan.h"
#include "codegen/conv/direct.h"
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

/* ---- inference: which kernels read / write 16-bit activations (pass_store16_infer) ------- */
typedef struct s16_hooks { cg_ctx c; cg_priv priv; pass_fusion *plan; } s16_hooks;

/* Whether the kernel of inference conv2d node n writes its result and reads its residuals in
 * 16 bits (the bf16 route's epilogue: cg_conv_bf16_io16; the direct route's pixel vectors:
 * its x too), or reads and writes f32 (the direct route's channel vectors).  The stem route
 * is on the bf16 route; the Winograd route reads f32, which its predicate checks. */
static int cg_conv_io16_ok(cg_ctx *c, const ir_node *n) {
  if (n->op != IR_OP_conv2d) return 0;
  if (cg_conv_bf16_ok(c, n)) return cg_conv_bf16_io16(c, n, 0); /* conv/bf16_plan.c: its epilogue */
  return cg_conv_direct_io16_ok(c, n);
}

static int conv_io16(s16_hooks *h, int a) {
  const ir_node *n = &h->c.g->nodes[a];
  h->priv.shard = n->shard, h->priv.node = a;
  return cg_conv_io16_ok(&h->c, n);
}

/* Whether conv a's kernel reads its input x in 16 bits (the bf16 route: flat 1x1 panels). */
static int conv_x16(s16_hooks *h, int a) {
  const ir_node *n = &h->c.g->nodes[a];
  h->priv.shard = n->shard, h->priv.node = a;
  return cg_conv_bf16_ok(&h->c, n) ? cg_conv_bf16_io16(&h->c, n, 1) : cg_conv_io16_ok(&h->c, n);
}

static int writes16(void *ctx, const ir_graph *g, int p) {
  s16_hooks *h = ctx;
  int a = h->plan[p].anchor, v = g->nodes[p].out;
  for (int i = p + 1; i < g->n_nodes; i++) /* a bf16-route conv that reads its input in f32 (conv/bf16.c gathered kxk panels) */
    if (g->nodes[i].op == IR_OP_conv2d && g->nodes[i].in[0] == v) {
      h->priv.shard = g->nodes[i].shard, h->priv.node = i;
      if (cg_conv_bf16_ok(&h->c, &g->nodes[i]) && !conv_x16(h, i)) return 0;
    }
  if (g->nodes[p].op == IR_OP_maxpool) return a == p; /* gen_pool.c */
  if (g->nodes[p].op != IR_OP_round16) return 0;
  if (a == p) return 1; /* the round16 kernel narrows in its store (gen_round16.c) */
  return g->nodes[a].op == IR_OP_conv2d && h->plan[a].last == p && conv_io16(h, a); /* the conv epilogue's store */
}

static int reads16(void *ctx, const ir_graph *g, int i, int j) {
  s16_hooks *h = ctx;
  int a = h->plan[i].anchor;
  const ir_node *n = &g->nodes[i];
  if (a != i) { /* fused into conv a's kernel */
    const pass_fusion *fa = &h->plan[a];
    if (g->nodes[a].op != IR_OP_conv2d) return 0;
    if (fa->n_side && fa->side == i) return 1; /* the depthwise kernel's pool: summed from registers */
    if (fa->n_pre && fa->pre == i) { /* squeeze-excite: the map (widened on load, then scaled), not the factors */
      const ir_shape *p0 = &g->values[n->in[0]].shape, *p1 = &g->values[n->in[1]].shape;
      return j == (p1->dim[2] * p1->dim[3] > p0->dim[2] * p0->dim[3]) && conv_io16(h, a);
    }
    for (int q = 0; q < fa->n_post; q++) /* the residual of an add epilogue */
      if (fa->post[q] == i) return n->op == IR_OP_add && conv_io16(h, a);
    return 0;
  }
  switch (n->op) {
  case IR_OP_maxpool: case IR_OP_global_avgpool: /* gen_pool.c */
  case IR_OP_relu: case IR_OP_sigmoid: case IR_OP_swish: case IR_OP_reshape: /* cg_gen_unary (gen_eltwise.c) */
  case IR_OP_add: case IR_OP_mul: /* gen_eltwise.c binary, either operand */
    return 1;
  case IR_OP_dropout: return !(n->attr.dropout.training && n->attr.dropout.rate > 0.0f);
  case IR_OP_conv2d: return j == 0 && conv_x16(h, i);
  default: return 0;
  }
}

static void hooks_plan(s16_hooks *h, const ir_graph *g) {
  free(h->plan);
  h->plan = calloc((size_t)(g->n_nodes > 0 ? g->n_nodes : 1), sizeof *h->plan);
  if (!h->plan) abort();
  pass_fuse(g, 1, h->plan); /* the plan cg_layout_build makes */
  h->priv.plan = h->plan;
  h->c.g = g;
}

int cg_store16_infer(ir_graph *g, const cg_target *t, const char *amp, int fmt, FILE *log, ir_diag *d) {
  s16_hooks h;
  memset(&h, 0, sizeof h);
  h.c.target = t;
  h.priv.d = d, h.priv.amp = amp;
  h.c.priv = &h.priv;
  hooks_plan(&h, g);
  pass_store16_hooks hk = {writes16, reads16, &h};
  pass_store16_stats st = {.log = log};
  int rc = pass_store16_infer(g, fmt, &hk, &st, d);
  if (rc >= 0) { /* the kernels of the new graph read 16-bit values only where they can */
    hooks_plan(&h, g);
    for (int i = 0; i < g->n_nodes && rc >= 0; i++)
      for (int j = 0; j < g->nodes[i].n_in; j++) {
        const ir_value *v = &g->values[g->nodes[i].in[j]];
        if (v->kind == IR_VAL_ACT && v->dtype != IR_F32 && g->nodes[i].op != IR_OP_widen16 && !reads16(&h, g, i, j)) {
          rc = ir_diag_set(d, g->nodes[i].loc, g->nodes[i].name, "internal error: 16-bit storage: '%s' reaches a kernel "
                           "that reads f32 (the fusion changed); tune store16=0 avoids it", v->name);
          break;
        }
      }
  }
  if (rc >= 0 && log)
    fprintf(log, "cnnc: 16-bit storage (inference): %d values %lld -> %lld bytes, %d widen16 nodes\n", st.values,
            (long long)st.bytes32, (long long)st.bytes32 / 2, st.f32_values);
  free(h.plan);
  return rc;
}
