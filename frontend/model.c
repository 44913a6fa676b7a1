/* model.c — fe_load: reads a model file, checks its top-level sections (input, defaults,
 * compile, blocks, outputs, loss, weights), merges compile: into the options, lowers the
 * layers (lower.c) into an IR graph, adds the training loss, initialises or loads the
 * parameters and verifies the graph.  Every failure is one located diagnostic. */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "fe_int.h"
#include "weights.h"

/* ---- compile: ----------------------------------------------------------------------------- */
static int unknown_option(fe_ctx *c, const fe_node *k) {
  const char *names[FE_OPT_COUNT];
  for (int i = 0; i < FE_OPT_COUNT; i++) names[i] = fe_opt_table[i].field;
  return fe_err(c, k, NULL, "unknown key '%s' in compile%s; valid keys: %s", k->kind == FE_N_SCALAR ? k->s : "?",
                k->kind == FE_N_SCALAR ? fe_did_you_mean(c->a, k->s, names, FE_OPT_COUNT) : "",
                fe_join(c->a, names, FE_OPT_COUNT));
}

static int option_index(const fe_node *k) {
  for (int i = 0; k->kind == FE_N_SCALAR && i < FE_OPT_COUNT; i++)
    if (!strcmp(k->s, fe_opt_table[i].field)) return i;
  return -1;
}

/* Sets option k of *dst from value node v; errors located at v. */
static int set_from_node(fe_ctx *c, fe_options *dst, int k, const fe_node *v) {
  const char *label = ir_fmt(c->a, "'compile.%s'", fe_opt_table[k].field);
  ir_diag sub = {0};
  if (fe_opt_table[k].type != OPT_LIST) {
    if (v->kind != FE_N_SCALAR || fe_is_null(v))
      return fe_err(c, v, NULL, "%s must be a single value (got %s)", label, fe_node_desc(c->a, v));
    return fe_option_set_as(dst, k, v->s, label, &sub) ? fe_err(c, v, NULL, "%s", sub.msg) : 0;
  }
  if (k == FE_OPTK_tune && v->kind == FE_N_MAP) { /* tune: {name: value, ...} */
    if (fe_option_set_as(dst, k, NULL, label, &sub)) return fe_err(c, v, NULL, "%s", sub.msg);
    for (int i = 0; i < v->n; i++) {
      const fe_node *kn = v->kids[2 * i], *vn = v->kids[2 * i + 1];
      if (kn->kind != FE_N_SCALAR || vn->kind != FE_N_SCALAR || fe_is_null(vn))
        return fe_err(c, vn, NULL, "%s: '%s' must be a single value (got %s)", label, kn->kind == FE_N_SCALAR ? kn->s : "?",
                      fe_node_desc(c->a, vn));
      if (fe_option_set_as(dst, k, ir_fmt(c->a, "%s=%s", kn->s, vn->s), label, &sub)) return fe_err(c, kn, NULL, "%s", sub.msg);
    }
    return 0;
  }
  if (v->kind != FE_N_SEQ) return fe_err(c, v, NULL, "%s must be a list (got %s)", label, fe_node_desc(c->a, v));
  if (fe_option_set_as(dst, k, NULL, label, &sub)) return fe_err(c, v, NULL, "%s", sub.msg);
  for (int i = 0; i < v->n; i++) {
    const fe_node *it = v->kids[i];
    if (it->kind != FE_N_SCALAR || fe_is_null(it))
      return fe_err(c, it, NULL, "%s items must be strings (got %s)", label, fe_node_desc(c->a, it));
    if (fe_option_set_as(dst, k, it->s, label, &sub)) return fe_err(c, it, NULL, "%s", sub.msg);
  }
  return 0;
}

/* Options given on the command line stay; their compile: values are still checked. */
static int merge_compile(fe_ctx *c, const fe_node *m, unsigned char *from_model) {
  fe_options scratch = *c->o;
  unsigned char cli[FE_OPT_COUNT];
  memcpy(cli, c->o->set, sizeof cli);
  for (int i = 0; m && i < m->n; i++) {
    const fe_node *k = m->kids[2 * i];
    int idx = option_index(k);
    if (idx < 0) return unknown_option(c, k);
    for (int j = 0; j < i; j++)
      if (!strcmp(m->kids[2 * j]->s, k->s))
        return fe_err(c, k, NULL, "duplicate key '%s' in compile (first at line %d)", k->s, m->kids[2 * j]->line);
    if (set_from_node(c, cli[idx] ? &scratch : c->o, idx, m->kids[2 * i + 1])) return -1;
    if (!cli[idx]) from_model[idx] = 1;
  }
  return 0;
}

/* weights: (top level or compile:) is relative to the model file; --weights to the cwd. */
static int merge_weights(fe_ctx *c, const fe_field *top, const fe_node *compile, unsigned char *from_model) {
  const fe_node *w = top[FE_K_top_weights].node, *cw = fe_map_get(compile, "weights");
  if (w && cw) return fe_err(c, fe_map_key(compile, "weights"), NULL, "'weights' given twice (also at line %d)", w->line);
  if (w && !c->o->set[FE_OPTK_weights]) {
    c->o->weights = top[FE_K_top_weights].s;
    c->o->set[FE_OPTK_weights] = from_model[FE_OPTK_weights] = 1;
  }
  if (!from_model[FE_OPTK_weights] || c->o->weights[0] == '/') return 0;
  const char *slash = strrchr(c->file, '/');
  if (slash) c->o->weights = ir_fmt(c->a, "%.*s/%s", (int)(slash - c->file), c->file, c->o->weights);
  return 0;
}

/* ---- input ------------------------------------------------------------------------------ */
static int lower_normalize(fe_ctx *c, const fe_node *m, const fe_field *f, int x) {
  int64_t ch = f[FE_K_input_shape].iv[0];
  if (ch > IR_MAX_CHANNELS_NORMALIZE)
    return fe_err(c, f[FE_K_input_shape].node, NULL, "dtype u8 supports at most %d channels (got %lld)",
                  IR_MAX_CHANNELS_NORMALIZE, (long long)ch);
  ir_attr a = {0};
  ir_normalize_attr *na = &a.normalize;
  na->scale = 1.0f / 255.0f;
  na->channels = (int)ch;
  for (int i = 0; i < 2; i++) {
    const fe_field *l = &f[i ? FE_K_input_std : FE_K_input_mean];
    if (l->node && l->n != ch)
      return fe_err(c, l->node, NULL, "'input.%s' must have %lld items, one per channel (got %d)", i ? "std" : "mean",
                    (long long)ch, l->n);
    for (int k = 0; k < ch; k++) (i ? na->std : na->mean)[k] = l->node ? (float)l->fv[k] : (float)i;
  }
  ir_diag sub = {0};
  ir_loc loc = {c->gfile, m->line, m->col};
  int v = ir_add_node(c->g, IR_OP_normalize, "input/normalize", loc, &x, 1, &a, &sub);
  return v < 0 ? fe_err(c, m, NULL, "input: %s", sub.msg) : v;
}

static int lower_input(fe_ctx *c, const fe_node *m, fe_field *f) {
  if (fe_check_keys(c, m, &fe_tab_input, NULL, NULL, "input") ||
      fe_read_table(c, m, &fe_tab_input, NULL, NULL, "input.", f))
    return -1;
  const fe_field *s = &f[FE_K_input_shape];
  if (s->n != 3) return fe_err(c, s->node, NULL, "'input.shape' must be [C, H, W] (got %d items)", s->n);
  int u8 = !strcmp(f[FE_K_input_dtype].s, "u8");
  for (int i = 0; i < 2 && !u8; i++) {
    const fe_field *l = &f[i ? FE_K_input_std : FE_K_input_mean];
    if (l->node) return fe_err(c, l->node, NULL, "'input.%s' is only used with dtype: u8", i ? "std" : "mean");
  }
  ir_shape sh = {4, {c->g->batch, s->iv[0], s->iv[1], s->iv[2]}};
  if (ir_shape_bytes_bounded(&sh, u8 ? 1 : 4) < 0)
    return fe_err(c, s->node, NULL, "the input, %lld x %lld x %lld per sample at batch %d, is larger than a tensor may be "
                  "(1 TiB, what the runtime accepts)", (long long)s->iv[0], (long long)s->iv[1], (long long)s->iv[2], c->g->batch);
  int x = ir_add_input(c->g, "input", u8 ? IR_U8 : IR_F32, sh);
  return u8 ? lower_normalize(c, m, f, x) : x;
}

/* ---- outputs and loss ------------------------------------------------------------------ */
static int set_outputs(fe_ctx *c, const fe_node *outs, int last) {
  ir_graph *g = c->g;
  int max = c->training ? 7 : 8;
  if (!outs) return g->outputs[g->n_outputs++] = last, 0;
  if (outs->n == 0 || outs->n > max)
    return fe_err(c, outs, NULL, "'outputs' must list 1 to %d layers (got %d)", max, outs->n);
  for (int i = 0; i < outs->n; i++) {
    int v = fe_resolve_top(c, outs->kids[i]);
    if (v < 0) return -1;
    for (int j = 0; j < g->n_outputs; j++)
      if (g->outputs[j] == v) return fe_err(c, outs->kids[i], NULL, "output '%s' listed twice", outs->kids[i]->s);
    g->outputs[g->n_outputs++] = v;
  }
  return 0;
}

/* The node that made value v, as a location for messages about it. */
static const fe_node *value_site(fe_ctx *c, int v, const fe_node *fallback, fe_node *tmp) {
  int p = c->g->values[v].producer;
  if (p < 0) return fallback;
  *tmp = (fe_node){FE_N_SCALAR, c->g->nodes[p].loc.line, c->g->nodes[p].loc.col, "", 0, 0, NULL};
  return tmp;
}

static int check_classes(fe_ctx *c, const fe_field *in, const fe_node *root) {
  const ir_value *o = &c->g->values[c->g->outputs[0]];
  const fe_field *cl = &in[FE_K_input_classes];
  fe_node tmp;
  const fe_node *site = value_site(c, o->id, root, &tmp);
  char buf[96];
  if (c->training && o->shape.rank != 2)
    return fe_err(c, site, NULL, "training needs [N, classes] logits, but output '%s' has shape %s", o->name,
                  ir_shape_str(&o->shape, buf, sizeof buf));
  if (cl->node && o->shape.rank == 2 && o->shape.dim[1] != cl->v.i)
    return fe_err(c, cl->node, NULL, "'input.classes' is %lld but output '%s' has width %lld", (long long)cl->v.i, o->name,
                  (long long)o->shape.dim[1]);
  return 0;
}

static int add_loss(fe_ctx *c, const fe_node *m, const fe_node *root) {
  fe_field f[FE_K_loss__count];
  if (m && fe_check_keys(c, m, &fe_tab_loss, NULL, NULL, "loss")) return -1;
  if (fe_read_table(c, m, &fe_tab_loss, NULL, NULL, "loss.", f)) return -1;
  if (!c->training) return 0;
  ir_attr a = {0};
  a.softmax_xent.label_smoothing = (float)(c->o->set[FE_OPTK_label_smoothing] ? c->o->label_smoothing
                                                                               : f[FE_K_loss_label_smoothing].v.f);
  const fe_node *at = m ? m : root;
  int in[2] = {c->g->outputs[0], c->o->mixed_labels ? ir_add_label_mixed(c->g, "label") : ir_add_label(c->g, "label")};
  ir_diag sub = {0};
  int v = ir_add_node(c->g, IR_OP_softmax_xent, "loss", (ir_loc){c->gfile, at->line, at->col}, in, 2, &a, &sub);
  if (v < 0) return fe_err(c, at, NULL, "loss: %s", sub.msg);
  c->g->outputs[c->g->n_outputs++] = v;
  return 0;
}

/* ---- the whole model -------------------------------------------------------------------- */
static int check_blocks(fe_ctx *c, const fe_node *b) {
  for (int i = 0; b && i < b->n; i++) {
    const fe_node *k = b->kids[2 * i];
    if (k->kind != FE_N_SCALAR || !fe_valid_name(k->s))
      return fe_err(c, k, NULL, "block names must be names like layer names (got %s)", fe_node_desc(c->a, k));
    for (int j = 0; j < i; j++)
      if (!strcmp(b->kids[2 * j]->s, k->s))
        return fe_err(c, k, NULL, "duplicate block '%s' (first at line %d)", k->s, b->kids[2 * j]->line);
  }
  return 0;
}

static int read_top(fe_ctx *c, const fe_node *root, fe_field *top, unsigned char *from_model) {
  if (fe_check_keys(c, root, &fe_tab_top, NULL, NULL, "the model")) return -1;
  if (fe_read_table(c, root, &fe_tab_top, NULL, NULL, NULL, top)) return -1;
  const fe_node *defs = top[FE_K_top_defaults].node, *comp = top[FE_K_top_compile].node;
  if (defs && fe_check_keys(c, defs, &fe_tab_defaults, NULL, NULL, "defaults")) return -1;
  if (fe_read_table(c, defs, &fe_tab_defaults, NULL, NULL, "defaults.", c->defs)) return -1;
  if (merge_compile(c, comp, from_model) || merge_weights(c, top, comp, from_model)) return -1;
  fe_options_mode_defaults(c->o);
  c->blocks = top[FE_K_top_blocks].node;
  return check_blocks(c, c->blocks);
}

static ir_graph *load(fe_ctx *c) {
  unsigned char from_model[FE_OPT_COUNT] = {0};
  fe_field top[FE_K_top__count], in[FE_K_input__count];
  const fe_node *root = fe_yaml_load(c->a, c->file, c->d);
  if (!root || read_top(c, root, top, from_model)) return NULL;
  c->training = c->o->mode == FE_MODE_TRAINING;
  c->g = ir_graph_new(top[FE_K_top_name].s, (int)c->o->batch_size);
  c->gfile = ir_strdup(c->g->arena, c->file);
  int last;
  if ((c->input = lower_input(c, top[FE_K_top_input].node, in)) < 0 ||
      (last = fe_lower_top(c, top[FE_K_top_layers].node, c->input)) < 0 ||
      set_outputs(c, top[FE_K_top_outputs].node, last) || check_classes(c, in, root) ||
      add_loss(c, top[FE_K_top_loss].node, root))
    return NULL;
  fe_options_rehome(c->o, from_model, c->g->arena);
  ir_init_params(c->g, (uint64_t)c->o->seed);
  if (c->o->weights[0] && fe_load_safetensors_note(c->g, c->o->weights, c->o->allow_nonfinite, c->o->weights_note, sizeof c->o->weights_note, c->d)) return NULL;
  if (ir_verify(c->g, c->d)) return NULL;
  return c->g;
}

int fe_is_onnx_path(const char *path) {
  size_t n = strlen(path);
  return n > 5 && !strcasecmp(path + n - 5, ".onnx");
}

#ifndef CNNC_HAVE_ONNX
ir_graph *fe_load_onnx(const char *path, fe_options *o, ir_diag *d) {
  ir_diag_set(d, (ir_loc){path, 0, 0}, NULL, "this cnnc was built without ONNX import (cmake -DCNNC_ONNX=OFF)");
  return NULL;
}
ir_graph *fe_load_onnx_mem(const char *name, const void *data, size_t len, fe_options *o, ir_diag *d) {
  (void)data, (void)len;
  return fe_load_onnx(name, o, d);
}
#endif

ir_graph *fe_load(const char *path, fe_options *o, ir_diag *d) {
  if (fe_is_onnx_path(path)) return fe_load_onnx(path, o, d);
  fe_options saved = *o;
  fe_ctx c = {0};
  c.file = path;
  c.o = o;
  c.d = d;
  c.a = ir_arena_new();
  if (!c.a) {
    ir_diag_set(d, (ir_loc){path, 0, 0}, NULL, "out of memory");
    return NULL;
  }
  ir_graph *g = load(&c);
  if (!g) {
    if (!d->failed) ir_diag_set(d, (ir_loc){path, 0, 0}, NULL, "cannot load the model");
    if (d->loc.file && c.gfile && d->loc.file == c.gfile) d->loc.file = path;
    ir_graph_free(c.g);
    *o = saved;
  }
  ir_arena_free(c.a);
  return g;
}
