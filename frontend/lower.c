/* lower.c — walks the layer lists of the model and of block templates: scopes and name
 * lookup (siblings, enclosing scopes, full names, `input`, `$in`), duplicate and cycle
 * detection, `if:` elision, block instances with params/args/repeat, and the dispatch of op
 * layers to their lowering function (lower_ops.c). */
#include <string.h>

#include "fe_int.h"

typedef struct fe_scope {
  const struct fe_scope *parent;
  const char *prefix;       /* "" at top level, else the instance name "layer2/1" */
  const fe_node *layers;    /* the sequence being lowered */
  const char **names;       /* local name of each layer */
  int cur;                  /* index of the layer being lowered */
  fe_strmap defined;        /* local name -> value id, for the layers before cur */
  int in;                   /* $in, -1 at top level */
  int prev;                 /* value of the previous layer (the default input) */
  const fe_env *env;        /* names visible to expressions */
} fe_scope;

static int lower_scope(fe_ctx *c, fe_scope *s);

static int name_index(const fe_scope *s, const char *name) {
  for (int i = 0; i < s->layers->n; i++)
    if (s->names[i] && !strcmp(s->names[i], name)) return i;
  return -1;
}

static const char *full_name(fe_ctx *c, const fe_scope *s, const char *local) {
  return s->prefix[0] ? ir_fmt(c->g->arena, "%s/%s", s->prefix, local) : ir_strdup(c->g->arena, local);
}

/* ---- keys of a layer mapping ------------------------------------------------------------ */
static const fe_op_def *find_op(fe_ctx *c, const fe_node *m, const char *layer) {
  const fe_node *opn = fe_map_get(m, "op");
  if (opn->kind != FE_N_SCALAR || fe_is_null(opn)) {
    fe_err(c, opn, layer, "'op' must be a string (got %s)", fe_node_desc(c->a, opn));
    return NULL;
  }
  const char *names[64];
  for (int i = 0; i < fe_n_op_defs; i++) {
    if (!strcmp(fe_op_defs[i].name, opn->s)) return &fe_op_defs[i];
    names[i] = fe_op_defs[i].name;
  }
  fe_err(c, opn, layer, "unknown op '%s'%s; ops: %s", opn->s, fe_did_you_mean(c->a, opn->s, names, fe_n_op_defs),
         fe_join(c->a, names, fe_n_op_defs));
  return NULL;
}

/* Checks the keys of layer mapping m; *op is set for op layers, NULL for block instances. */
static int check_layer_keys(fe_ctx *c, const fe_node *m, const char *layer, const fe_op_def **op) {
  *op = NULL;
  if (m->kind != FE_N_MAP) return fe_err(c, m, layer, "a layer must be a mapping (got %s)", fe_node_desc(c->a, m));
  int has_op = fe_map_get(m, "op") != NULL, has_block = fe_map_get(m, "block") != NULL;
  if (has_op && has_block) return fe_err(c, fe_map_key(m, "block"), layer, "a layer has either 'op' or 'block', not both");
  if (has_block) return fe_check_keys(c, m, &fe_tab_instance, NULL, layer, "a block instance");
  if (!has_op) {
    if (fe_check_keys(c, m, &fe_tab_layer, &fe_tab_instance, layer, "a layer")) return -1;
    return fe_err(c, m, layer, "missing required key 'op' (or 'block')");
  }
  if (!(*op = find_op(c, m, layer))) return -1;
  return fe_check_keys(c, m, &fe_tab_layer, (*op)->keys, layer, (*op)->keys->what);
}

/* First pass over a layer list: every item is a layer with a unique, valid, unreserved name. */
static int prescan(fe_ctx *c, fe_scope *s) {
  static const char *const reserved_top[] = {"input", "label", "loss"};
  const fe_node *L = s->layers;
  if (L->n == 0) return fe_err(c, L, s->prefix[0] ? s->prefix : NULL, "'layers' must not be empty");
  s->names = ir_alloc(c->a, (size_t)L->n * sizeof *s->names);
  for (int i = 0; i < L->n; i++) {
    const fe_node *m = L->kids[i], *nn = m->kind == FE_N_MAP ? fe_map_get(m, "name") : NULL;
    const fe_op_def *op;
    if (!nn) return check_layer_keys(c, m, NULL, &op) ? -1 : fe_err(c, m, NULL, "missing required key 'name' in a layer");
    fe_field f;
    if (fe_read_key(c, m, &fe_tab_layer, FE_K_layer_name, NULL, NULL, NULL, &f)) return -1;
    for (int r = 0; r < (s->parent ? 1 : 3); r++)
      if (!strcmp(f.s, reserved_top[r]) || (r == 0 && !strncmp(f.s, "input/", 6)))
        return fe_err(c, nn, f.s, "the name '%s' is reserved", reserved_top[r]);
    int j = name_index(s, f.s);
    if (j >= 0) return fe_err(c, nn, f.s, "duplicate layer name (first at line %d)", L->kids[j]->line);
    s->names[i] = f.s;
  }
  return 0;
}

/* ---- name lookup -------------------------------------------------------------------------- */
static int deps_of(const fe_scope *s, int k, int *dep, int max) {
  const fe_node *ins = fe_map_get(s->layers->kids[k], "inputs");
  int n = 0;
  if (!ins || ins->kind != FE_N_SEQ) {
    if (k > 0) dep[n++] = k - 1;
    return n;
  }
  for (int i = 0; i < ins->n && n < max; i++) {
    int j = ins->kids[i]->kind == FE_N_SCALAR ? name_index(s, ins->kids[i]->s) : -1;
    if (j >= 0) dep[n++] = j;
  }
  return n;
}

/* A reference from layer cur to the later sibling j: an error, naming the cycle if there is one. */
static int forward_ref(fe_ctx *c, const fe_scope *s, const fe_node *ref, const char *layer, int j) {
  int n = s->layers->n, *from = ir_alloc(c->a, (size_t)n * sizeof *from), *queue = ir_alloc(c->a, (size_t)n * sizeof *queue);
  for (int i = 0; i < n; i++) from[i] = -2;
  int head = 0, tail = 0;
  queue[tail++] = j, from[j] = -1;
  while (head < tail && from[s->cur] == -2) {
    int k = queue[head++], dep[IR_MAX_IN + 8];
    int nd = deps_of(s, k, dep, IR_MAX_IN + 8);
    for (int d = 0; d < nd; d++)
      if (from[dep[d]] == -2) from[dep[d]] = k, queue[tail++] = dep[d];
  }
  if (from[s->cur] == -2)
    return fe_err(c, ref, layer, "input '%s' refers to a later layer (line %d); a layer must come after its inputs",
                  ref->s, s->layers->kids[j]->line);
  /* data flows cur -> ... -> j -> cur */
  const char *path = s->names[s->cur];
  for (int k = s->cur; k != j;) {
    k = from[k];
    path = ir_fmt(c->a, "%s -> %s", path, s->names[k]);
  }
  return fe_err(c, ref, layer, "cycle: %s -> %s", path, s->names[s->cur]);
}

static int unknown_input(fe_ctx *c, const fe_scope *s, const fe_node *ref, const char *layer) {
  const char *cand[256];
  int n = 0;
  cand[n++] = "input";
  if (s->in >= 0) cand[n++] = "$in";
  for (const fe_scope *sc = s; sc; sc = sc->parent)
    for (int i = 0; i < sc->cur && n < 256; i++) cand[n++] = sc->names[i];
  return fe_err(c, ref, layer, "unknown input '%s'%s", ref->s, fe_did_you_mean(c->a, ref->s, cand, n));
}

/* Resolves one name of `inputs:`: siblings, enclosing scopes, full names. */
static int resolve(fe_ctx *c, const fe_scope *s, const fe_node *ref, const char *layer) {
  const char *name = ref->s;
  if (!strcmp(name, "$in")) {
    if (s->in < 0) return fe_err(c, ref, layer, "'$in' is only defined inside a block");
    return s->in;
  }
  if (!strcmp(name, "input")) return c->input;
  for (const fe_scope *sc = s; sc; sc = sc->parent) {
    int v = fe_strmap_get(&sc->defined, name);
    if (v >= 0) return v;
    int j = name_index(sc, name);
    if (j >= 0 && sc == s) return forward_ref(c, s, ref, layer, j);
    if (j >= 0 && j >= sc->cur)
      return fe_err(c, ref, layer, "cycle: input '%s' is %s that contains this layer", name,
                    j == sc->cur ? "the block instance" : "a later layer of the scope");
  }
  int v = fe_strmap_get(&c->full, name);
  return v >= 0 ? v : unknown_input(c, s, ref, layer);
}

/* inputs: (or the previous layer) into in[]; max_in bounds the list. */
static int resolve_inputs(fe_ctx *c, const fe_scope *s, const fe_node *ins, const char *layer, int max_in, int *in,
                          int *n_in) {
  if (!ins) {
    in[0] = s->prev;
    *n_in = 1;
    return 0;
  }
  if (ins->n == 0 || ins->n > max_in)
    return fe_err(c, ins, layer, "'inputs' must list 1 to %d layer names (got %d)", max_in, ins->n);
  for (int i = 0; i < ins->n; i++)
    if ((in[i] = resolve(c, s, ins->kids[i], layer)) < 0) return -1;
  *n_in = ins->n;
  return 0;
}

/* ---- op layers ---------------------------------------------------------------------------- */
static int lower_op_layer(fe_ctx *c, fe_scope *s, const fe_node *m, const char *full, const fe_op_def *op) {
  fe_layer L = {m, full, {c->gfile, m->line, m->col}, s->env, op, {{0}}, {0}, 0, -1};
  fe_field common[FE_K_layer__count];
  if (fe_read_table(c, m, &fe_tab_layer, s->env, full, NULL, common)) return -1;
  if (resolve_inputs(c, s, common[FE_K_layer_inputs].node, full, IR_MAX_IN, L.in, &L.n_in)) return -1;
  if (!common[FE_K_layer_if].v.i) return L.in[0]; /* elided: an alias of the first input */
  if (op->n_in > 0 && L.n_in != op->n_in) {
    const fe_node *at = common[FE_K_layer_inputs].node ? common[FE_K_layer_inputs].node : m;
    return fe_err(c, at, full, "op '%s' takes %d input%s (got %d)%s", op->name, op->n_in, op->n_in > 1 ? "s" : "",
                  L.n_in, common[FE_K_layer_inputs].node ? "" : "; list them in 'inputs'");
  }
  if (fe_read_table(c, m, op->keys, s->env, full, NULL, L.f)) return -1;
  return op->lower(c, &L) ? -1 : L.out;
}

/* ---- block instances ---------------------------------------------------------------------- */
static int valid_param(const char *p) {
  static const char *const reserved[] = {"i", "in_ch", "true", "false", "min", "max", "round", "floor", "ceil", "int"};
  if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || *p == '_')) return 0;
  for (const char *q = p; *q; q++)
    if (!((*q >= 'a' && *q <= 'z') || (*q >= 'A' && *q <= 'Z') || (*q >= '0' && *q <= '9') || *q == '_')) return 0;
  for (size_t i = 0; i < sizeof reserved / sizeof reserved[0]; i++)
    if (!strcmp(p, reserved[i])) return 0;
  return 1;
}

typedef struct fe_inst {
  const char *block;
  const fe_node *def, *params, *args, *layers;
} fe_inst;

static int find_block(fe_ctx *c, const fe_node *bn, const char *layer, fe_inst *I) {
  I->block = bn->s;
  I->def = fe_map_get(c->blocks, bn->s);
  if (!I->def) {
    const char *names[256];
    int n = 0;
    for (int i = 0; c->blocks && i < c->blocks->n && n < 256; i++) names[n++] = c->blocks->kids[2 * i]->s;
    return fe_err(c, bn, layer, "unknown block '%s'%s%s%s", bn->s, fe_did_you_mean(c->a, bn->s, names, n),
                  n ? "; blocks: " : " (the model has no blocks:)", fe_join(c->a, names, n));
  }
  for (int k = 0; k < c->depth; k++) {
    if (strcmp(c->stack[k], bn->s)) continue;
    const char *path = c->stack[k];
    for (int j = k + 1; j < c->depth; j++) path = ir_fmt(c->a, "%s -> %s", path, c->stack[j]);
    return fe_err(c, bn, layer, "recursive block: %s -> %s", path, bn->s);
  }
  if (c->depth >= FE_MAX_DEPTH) return fe_err(c, bn, layer, "blocks nested more than %d deep", FE_MAX_DEPTH);
  const char *where = ir_fmt(c->a, "block '%s'", bn->s);
  fe_field f[FE_K_block__count];
  if (fe_check_keys(c, I->def, &fe_tab_block, NULL, NULL, where) ||
      fe_read_table(c, I->def, &fe_tab_block, NULL, NULL, ir_fmt(c->a, "%s.", bn->s), f))
    return -1;
  I->params = f[FE_K_block_params].node, I->layers = f[FE_K_block_layers].node;
  int np = I->params ? I->params->n : 0;
  if (np > FE_MAX_PARAMS) return fe_err(c, I->params, NULL, "%s has more than %d params", where, FE_MAX_PARAMS);
  for (int i = 0; i < np; i++) {
    const fe_node *k = I->params->kids[2 * i];
    if (k->kind != FE_N_SCALAR || !valid_param(k->s))
      return fe_err(c, k, NULL, "%s: param names must be identifiers other than i, in_ch, true, false and "
                                "function names (got '%s')", where, k->kind == FE_N_SCALAR ? k->s : "?");
  }
  return 0;
}

/* args: every key is a param of the block. */
static int check_args(fe_ctx *c, const fe_inst *I, const char *layer) {
  for (int i = 0; I->args && i < I->args->n; i++) {
    const fe_node *k = I->args->kids[2 * i];
    const char *names[FE_MAX_PARAMS];
    int np = I->params ? I->params->n : 0;
    for (int p = 0; p < np; p++) names[p] = I->params->kids[2 * p]->s;
    if (k->kind != FE_N_SCALAR || !fe_map_get(I->params, k->s))
      return fe_err(c, k, layer, "block '%s' has no param '%s'%s%s%s", I->block, k->kind == FE_N_SCALAR ? k->s : "?",
                    k->kind == FE_N_SCALAR ? fe_did_you_mean(c->a, k->s, names, np) : "",
                    np ? "; params: " : " (it has no params)", fe_join(c->a, names, np));
    for (int j = 0; j < i; j++)
      if (!strcmp(I->args->kids[2 * j]->s, k->s)) return fe_err(c, k, layer, "duplicate arg '%s'", k->s);
  }
  return 0;
}

/* The env of one instance: params (defaults in {i, in_ch}, args in the instantiating scope),
 * then i and in_ch. */
static int bind_params(fe_ctx *c, const fe_inst *I, const fe_env *args_env, const char *layer, fe_env *out) {
  int np = I->params ? I->params->n : 0;
  fe_var *vars = ir_alloc(c->a, (size_t)(np + 2) * sizeof *vars);
  fe_env own = {args_env->vars, 2, NULL};
  for (int p = 0; p < np; p++) {
    const char *name = I->params->kids[2 * p]->s;
    fe_value def, arg;
    if (fe_scalar(c, I->params->kids[2 * p + 1], &own, layer, name, &def)) return -1;
    vars[p] = (fe_var){name, def};
    const fe_node *an = fe_map_get(I->args, name);
    if (!an) continue;
    if (fe_scalar(c, an, args_env, layer, name, &arg)) return -1;
    if (def.t == FE_V_FLOAT && arg.t == FE_V_INT) arg = (fe_value){FE_V_FLOAT, 0, (double)arg.i};
    char buf[64];
    if (arg.t != def.t)
      return fe_err(c, an, layer, "arg '%s' must be %s like its default (got %s %s)", name,
                    def.t == FE_V_INT ? "an int" : def.t == FE_V_FLOAT ? "a float" : "a bool", fe_vtype_name(arg.t),
                    fe_value_str(arg, buf, sizeof buf));
    vars[p].v = arg;
  }
  vars[np] = args_env->vars[0], vars[np + 1] = args_env->vars[1];
  *out = (fe_env){vars, np + 2, NULL};
  return 0;
}

static int define_full(fe_ctx *c, const fe_node *at, const char *full, int v) {
  if (fe_strmap_get(&c->full, full) >= 0) return fe_err(c, at, full, "duplicate layer name");
  fe_strmap_put(c->a, &c->full, full, v);
  return 0;
}

/* One instance (repeat index r, input in): returns its output value. */
static int lower_one_instance(fe_ctx *c, fe_scope *s, const fe_inst *I, const fe_node *m, const char *iname, int r,
                              int in) {
  const ir_value *x = &c->g->values[in];
  fe_var iv[2] = {{"i", {FE_V_INT, r, 0}}, {"in_ch", {FE_V_INT, x->shape.rank > 1 ? x->shape.dim[1] : 0, 0}}};
  fe_env args_env = {iv, 2, s->env};
  fe_field cond;
  if (fe_read_key(c, m, &fe_tab_instance, FE_K_instance_if, &args_env, iname, NULL, &cond)) return -1;
  if (!cond.v.i) return in;
  fe_env *env = ir_alloc(c->a, sizeof *env);
  if (bind_params(c, I, &args_env, iname, env)) return -1;
  fe_scope child = {s, iname, I->layers, NULL, 0, {0}, in, in, env};
  return lower_scope(c, &child);
}

static int lower_instance(fe_ctx *c, fe_scope *s, const fe_node *m, const char *full) {
  fe_inst I = {0};
  fe_field f[FE_K_instance__count];
  for (int k = 0; k < FE_K_instance__count; k++)
    if (k != FE_K_instance_if && fe_read_key(c, m, &fe_tab_instance, k, s->env, full, NULL, &f[k])) return -1;
  if (find_block(c, f[FE_K_instance_block].node, full, &I)) return -1;
  I.args = f[FE_K_instance_args].node;
  if (check_args(c, &I, full)) return -1;
  int in, n_in;
  if (resolve_inputs(c, s, f[FE_K_instance_inputs].node, full, 1, &in, &n_in)) return -1;
  int repeat = (int)f[FE_K_instance_repeat].v.i, named = f[FE_K_instance_repeat].node != NULL;
  c->stack[c->depth++] = I.block;
  for (int r = 0; r < repeat; r++) {
    const char *iname = named ? ir_fmt(c->g->arena, "%s/%d", full, r) : full;
    if (named && fe_strmap_get(&c->full, iname) >= 0) return fe_err(c, m, iname, "duplicate layer name");
    if ((in = lower_one_instance(c, s, &I, m, iname, r, in)) < 0) return -1;
    if (named && define_full(c, m, iname, in)) return -1;
  }
  c->depth--;
  return in;
}

/* ---- scopes ------------------------------------------------------------------------------- */
static int lower_one(fe_ctx *c, fe_scope *s) {
  const fe_node *m = s->layers->kids[s->cur];
  const char *full = full_name(c, s, s->names[s->cur]);
  const fe_op_def *op;
  if (++c->n_layers > FE_MAX_LAYERS) return fe_err(c, m, full, "the model expands to more than %d layers", FE_MAX_LAYERS);
  if (fe_strmap_get(&c->full, full) >= 0) return fe_err(c, fe_map_get(m, "name"), full, "duplicate layer name");
  if (check_layer_keys(c, m, full, &op)) return -1;
  int out = op ? lower_op_layer(c, s, m, full, op) : lower_instance(c, s, m, full);
  if (out < 0) return -1;
  fe_strmap_put(c->a, &s->defined, s->names[s->cur], out);
  s->prev = out;
  return define_full(c, m, full, out);
}

static int lower_scope(fe_ctx *c, fe_scope *s) {
  if (prescan(c, s)) return -1;
  for (s->cur = 0; s->cur < s->layers->n; s->cur++)
    if (lower_one(c, s)) return -1;
  return s->prev;
}

int fe_lower_top(fe_ctx *c, const fe_node *layers, int in) {
  static const fe_env empty = {NULL, 0, NULL};
  fe_scope top = {NULL, "", layers, NULL, 0, {0}, -1, in, &empty};
  return lower_scope(c, &top);
}

int fe_resolve_top(fe_ctx *c, const fe_node *n) {
  if (!strcmp(n->s, "input")) return c->input;
  int v = fe_strmap_get(&c->full, n->s);
  if (v >= 0) return v;
  const char *cand[1024];
  int k = 0;
  for (int i = 0; i < c->full.cap && k < 1024; i++)
    if (c->full.k[i]) cand[k++] = c->full.k[i];
  return fe_err(c, n, NULL, "unknown layer '%s' in outputs%s", n->s, fe_did_you_mean(c->a, n->s, cand, k));
}

/* ---- string map --------------------------------------------------------------------------- */
static unsigned hash(const char *s) {
  unsigned h = 2166136261u;
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 16777619u;
  return h;
}

int fe_strmap_get(const fe_strmap *m, const char *k) {
  if (!m->cap) return -1;
  for (unsigned i = hash(k) & (unsigned)(m->cap - 1);; i = (i + 1) & (unsigned)(m->cap - 1)) {
    if (!m->k[i]) return -1;
    if (!strcmp(m->k[i], k)) return m->v[i];
  }
}

void fe_strmap_put(ir_arena *a, fe_strmap *m, const char *k, int v) {
  if (2 * (m->n + 1) > m->cap) {
    fe_strmap g = {m->cap ? 2 * m->cap : 16, 0, NULL, NULL};
    g.k = ir_alloc(a, (size_t)g.cap * sizeof *g.k);
    g.v = ir_alloc(a, (size_t)g.cap * sizeof *g.v);
    for (int i = 0; i < m->cap; i++)
      if (m->k[i]) fe_strmap_put(a, &g, m->k[i], m->v[i]);
    *m = g;
  }
  unsigned i = hash(k) & (unsigned)(m->cap - 1);
  while (m->k[i] && strcmp(m->k[i], k)) i = (i + 1) & (unsigned)(m->cap - 1);
  if (!m->k[i]) m->k[i] = k, m->n++;
  m->v[i] = v;
}
