/* cg_select.c — the kernel plan (cg_route.h cg_select): one cg_kplan per node, made before any
 * LLVM IR exists, in a planning context (a cg_ctx with no LLVM context: the routes' matches
 * read the graph, the target, the knobs and the fusion plan only).  Anchors get their route;
 * the nodes of an inference graph also get what 16-bit storage may give their kernel
 * (passes/store16.c through gen_store16.c). */
#include <stdlib.h>
#include <string.h>

#include "codegen/cg_route.h"
#include "codegen/conv/bf16_plan.h"
#include "codegen/conv/direct.h"

typedef struct sel_ctx {
  cg_ctx c;
  cg_priv priv;
  const pass_fusion *fu;
  cg_kplan *kp;
  int *bf16;  /* per node: a conv on the bf16 routes (cg_conv_bf16_ok) */
  int *io16;  /* per conv node: its epilogue reads residuals and writes the result in 16 bits */
} sel_ctx;

static void at_node(sel_ctx *s, int i) {
  s->priv.shard = s->c.g->nodes[i].shard, s->priv.node = i;
}

/* Whether node i's kernel is a Winograd conv (it reads and writes f32 only: its input,
 * residual and result stay f32 so that the route holds after store16). */
static int on_wino(const sel_ctx *s, int i) {
  int a = s->fu[i].anchor, r = s->kp[a].route;
  return s->c.g->nodes[a].op == IR_OP_conv2d && r >= 0 && !strcmp(cg_routes[r].name, "wino");
}

/* A conv's 16-bit operands: the bf16 route's epilogue (cg_conv_bf16_io16), none on Winograd,
 * else the direct route's pixel vectors.  x: whether it reads its input x in 16 bits. */
static int conv16(sel_ctx *s, int i, int x) {
  at_node(s, i);
  const ir_node *n = &s->c.g->nodes[i];
  if (s->bf16[i]) return cg_conv_bf16_io16(&s->c, n, x);
  if (on_wino(s, i)) return 0;
  return cg_conv_direct_io16_ok(&s->c, n);
}

/* in16: which operands of node i its kernel reads in 16 bits. */
static unsigned in16(sel_ctx *s, int i) {
  const ir_graph *g = s->c.g;
  const ir_node *n = &g->nodes[i];
  int a = s->fu[i].anchor;
  if (a != i) { /* fused into kernel a */
    const pass_fusion *fa = &s->fu[a];
    if (g->nodes[a].op != IR_OP_conv2d) return 0;
    if (fa->n_side && fa->side == i) return ~0u; /* the depthwise kernel's pool: summed from registers */
    if (fa->n_pre && fa->pre == i) { /* squeeze-excite: the map (widened on load, then scaled), not the factors */
      const ir_shape *p0 = &g->values[n->in[0]].shape, *p1 = &g->values[n->in[1]].shape;
      return s->io16[a] ? 1u << (p1->dim[2] * p1->dim[3] > p0->dim[2] * p0->dim[3]) : 0;
    }
    for (int q = 0; q < fa->n_post; q++) /* the residual of an add epilogue */
      if (fa->post[q] == i) return n->op == IR_OP_add && s->io16[a] ? ~0u : 0;
    return 0;
  }
  switch (n->op) {
  case IR_OP_maxpool: case IR_OP_global_avgpool: /* gen_pool.c */
  case IR_OP_relu: case IR_OP_sigmoid: case IR_OP_swish: case IR_OP_reshape: /* cg_gen_unary (gen_eltwise.c) */
  case IR_OP_clip: case IR_OP_hardsigmoid: case IR_OP_hardswish: case IR_OP_leaky_relu:
  case IR_OP_add: case IR_OP_mul: /* gen_eltwise.c binary, either operand */
    return ~0u;
  case IR_OP_dropout: return n->attr.dropout.training && n->attr.dropout.rate > 0.0f ? 0 : ~0u;
  case IR_OP_conv2d: return conv16(s, i, 1) ? 1u : 0;
  default: return 0;
  }
}

/* out16: whether the kernel computing node p may store its result in 16 bits. */
static int out16(sel_ctx *s, int p) {
  const ir_graph *g = s->c.g;
  int a = s->fu[p].anchor, v = g->nodes[p].out;
  for (int i = p + 1; i < g->n_nodes; i++) { /* a bf16-route conv that reads its input in f32 (conv/bf16.c gathered kxk panels) */
    if (g->nodes[i].op == IR_OP_conv2d && g->nodes[i].in[0] == v && s->bf16[i] && !(s->kp[i].in16 & 1)) return 0;
    for (int q = 0; q < g->nodes[i].n_in; q++) /* an input or residual of a Winograd conv */
      if (g->nodes[i].in[q] == v && on_wino(s, i)) return 0;
  }
  if (g->nodes[p].op == IR_OP_maxpool) return a == p; /* gen_pool.c */
  if (g->nodes[p].op != IR_OP_round16) return 0;
  if (a == p) return 1; /* the round16 kernel narrows in its store (gen_round16.c) */
  return g->nodes[a].op == IR_OP_conv2d && s->fu[a].last == p && s->io16[a]; /* the conv epilogue's store */
}

int cg_select(const ir_graph *g, const pass_fusion *fu, const cg_target *t, const char *amp, int train, cg_kplan *kp,
              ir_diag *d) {
  sel_ctx s;
  memset(&s, 0, sizeof s);
  s.c.target = t, s.c.g = g;
  s.priv.d = d, s.priv.plan = fu, s.priv.amp = amp, s.priv.train = train;
  s.c.priv = &s.priv;
  s.fu = fu, s.kp = kp;
  int n = g->n_nodes, rc = 0;
  memset(kp, 0, (size_t)n * sizeof *kp);
  for (int i = 0; i < n && rc == 0; i++) {
    kp[i].route = -1;
    if (fu && fu[i].anchor != i) continue;
    at_node(&s, i);
    rc = cg_route_select(&s.c, &g->nodes[i], train, &kp[i]);
  }
  if (rc || train || !fu) return rc;
  s.bf16 = calloc((size_t)n + 1, sizeof *s.bf16), s.io16 = calloc((size_t)n + 1, sizeof *s.io16);
  if (!s.bf16 || !s.io16) abort();
  for (int i = 0; i < n; i++)
    if (g->nodes[i].op == IR_OP_conv2d) {
      at_node(&s, i);
      s.bf16[i] = cg_conv_bf16_ok(&s.c, &g->nodes[i]);
      s.io16[i] = conv16(&s, i, 0);
    }
  for (int i = 0; i < n; i++) kp[i].in16 = in16(&s, i);
  for (int i = 0; i < n; i++) kp[i].out16 = out16(&s, i);
  free(s.bf16), free(s.io16);
  return d && d->failed ? -1 : 0;
}
