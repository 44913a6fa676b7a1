/* values.c — typed reading of YAML values against the key tables: literals (ints, floats,
 * true/false), `=` expressions, pairs, paddings, lists, enums and names; range checks; and
 * the defaults of absent keys ("@k" from the defaults: section, "%k" from a sibling key). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/cm.h"
#include "fe_int.h"

enum { V_NUM = 0, V_TEXT = 1, V_RANGE = 2, V_ERR = -1 };

/* Plain literals: ints, floats (cm_num_scan's strict syntax: sign, digits, '.', exponent; no
 * inf/nan, as on the command line), true/false. */
static int literal(const char *s, fe_value *v) {
  static const char *const t[] = {"true", "True", "TRUE"}, *const f[] = {"false", "False", "FALSE"};
  for (int i = 0; i < 3; i++)
    if (!strcmp(s, t[i]) || !strcmp(s, f[i])) return *v = (fe_value){FE_V_BOOL, !strcmp(s, t[i]), 0}, V_NUM;
  cm_num x = cm_num_scan(s);
  if (x.kind == CM_INT) return *v = (fe_value){FE_V_INT, x.i, 0}, V_NUM;
  if (x.kind == CM_REAL) return *v = (fe_value){FE_V_FLOAT, 0, x.f}, V_NUM;
  return x.kind == CM_NOT_NUMBER ? V_TEXT : V_RANGE;
}

/* V_NUM with *v, V_TEXT for anything that is not a number/bool, V_ERR after a bad expression. */
static int try_value(fe_ctx *c, const fe_node *n, const fe_env *env, const char *layer, const char *key,
                     fe_value *v) {
  if (n->kind != FE_N_SCALAR) return V_TEXT;
  if (n->s[0] == '=') {
    char err[256];
    if (fe_expr_eval(n->s + 1, env, v, err, sizeof err) == 0) return V_NUM;
    fe_err(c, n, layer, "'%s': bad expression '%s': %s", key, n->s, err);
    return V_ERR;
  }
  int r = n->quoted ? V_TEXT : literal(n->s, v);
  if (r != V_RANGE) return r;
  fe_err(c, n, layer, "'%s': %s is out of the %s range", key, n->s, cm_num_scan(n->s).kind == CM_INT_RANGE ? "integer" : "double");
  return V_ERR;
}

const char *fe_node_desc(ir_arena *a, const fe_node *n) {
  fe_value v;
  char buf[64];
  if (n->kind == FE_N_MAP) return "a mapping";
  if (n->kind == FE_N_SEQ) return "a sequence";
  if (fe_is_null(n)) return "null";
  if (!n->quoted && literal(n->s, &v) == V_NUM)
    return ir_fmt(a, "%s %s", fe_vtype_name(v.t), fe_value_str(v, buf, sizeof buf));
  if (strlen(n->s) > 40) return ir_fmt(a, "string '%.40s...'", n->s);
  return ir_fmt(a, "string '%s'", n->s);
}

static int type_error(fe_ctx *c, const fe_node *n, const char *layer, const char *key, const char *want,
                      const fe_value *v) {
  char buf[64];
  if (v)
    return fe_err(c, n, layer, "'%s' must be %s (got %s %s)", key, want, fe_vtype_name(v->t),
                  fe_value_str(*v, buf, sizeof buf));
  return fe_err(c, n, layer, "'%s' must be %s (got %s)", key, want, fe_node_desc(c->a, n));
}

int fe_scalar(fe_ctx *c, const fe_node *n, const fe_env *env, const char *layer, const char *key, fe_value *v) {
  int r = try_value(c, n, env, layer, key, v);
  if (r == V_TEXT) return type_error(c, n, layer, key, "a number or bool", NULL);
  return r == V_NUM ? 0 : -1;
}

static int check_range(fe_ctx *c, const fe_node *n, const char *layer, const char *key, const fe_key *k, double x,
                       fe_value v) {
  char buf[64];
  int lo_bad = k->flags & FE_XLO ? !(x > k->lo) : !(x >= k->lo);
  int hi_bad = k->flags & FE_XHI ? !(x < k->hi) : !(x <= k->hi);
  if (!lo_bad && !hi_bad) return 0;
  return fe_err(c, n, layer, "'%s' must be %s %.10g (got %s)", key,
                lo_bad ? (k->flags & FE_XLO ? ">" : ">=") : (k->flags & FE_XHI ? "<" : "<="), lo_bad ? k->lo : k->hi,
                fe_value_str(v, buf, sizeof buf));
}

/* One number of type t (FE_T_INT / FE_T_FLOAT / FE_T_BOOL) with the key's range. */
static int read_number(fe_ctx *c, const fe_node *n, const fe_key *k, fe_ktype t, const fe_env *env,
                       const char *layer, const char *key, fe_value *v) {
  static const char *const want[] = {"an int", "a float", "a bool"};
  int r = try_value(c, n, env, layer, key, v);
  if (r == V_ERR) return -1;
  int ti = t == FE_T_INT ? 0 : t == FE_T_FLOAT ? 1 : 2;
  if (r == V_TEXT) return type_error(c, n, layer, key, want[ti], NULL);
  if (t == FE_T_FLOAT && v->t == FE_V_INT) *v = (fe_value){FE_V_FLOAT, 0, (double)v->i};
  if ((t == FE_T_INT && v->t != FE_V_INT) || (t == FE_T_FLOAT && v->t != FE_V_FLOAT) ||
      (t == FE_T_BOOL && v->t != FE_V_BOOL))
    return type_error(c, n, layer, key, want[ti], v);
  if (t == FE_T_BOOL) return 0;
  return check_range(c, n, layer, key, k, v->t == FE_V_INT ? (double)v->i : v->f, *v);
}

/* A sequence of numbers into f->iv / f->fv, with an item count in [min_n, max_n]. */
static int read_list(fe_ctx *c, const fe_node *n, const fe_key *k, fe_ktype item, int min_n, int max_n,
                     const fe_env *env, const char *layer, const char *key, fe_field *f) {
  const char *what = item == FE_T_INT ? "ints" : "floats";
  if (n->kind != FE_N_SEQ || n->n < min_n || n->n > max_n) {
    if (n->kind == FE_N_SEQ)
      return fe_err(c, n, layer, "'%s' must have %s%d %s (got %d)", key, min_n == max_n ? "" : "1 to ", max_n,
                    min_n == max_n && max_n == 1 ? "item" : "items", n->n);
    return fe_err(c, n, layer, "'%s' must be a list of %s (got %s)", key, what, fe_node_desc(c->a, n));
  }
  f->n = n->n;
  for (int i = 0; i < n->n; i++) {
    fe_value v;
    if (read_number(c, n->kids[i], k, item, env, layer, key, &v)) return -1;
    f->iv[i] = v.i;
    f->fv[i] = v.t == FE_V_FLOAT ? v.f : (double)v.i;
  }
  return 0;
}

static int read_pair(fe_ctx *c, const fe_node *n, const fe_key *k, const fe_env *env, const char *layer,
                     const char *key, fe_field *f) {
  if (n->kind == FE_N_SEQ) return read_list(c, n, k, FE_T_INT, 2, 2, env, layer, key, f);
  fe_value v;
  if (read_number(c, n, k, FE_T_INT, env, layer, key, &v)) return -1;
  f->n = 2;
  f->iv[0] = f->iv[1] = v.i;
  return 0;
}

/* int (all sides), [v, h], [t, l, b, r] or "same". */
static int read_pad(fe_ctx *c, const fe_node *n, const fe_key *k, const fe_env *env, const char *layer,
                    const char *key, fe_field *f) {
  f->n = 4;
  if (n->kind == FE_N_SCALAR && !strcmp(n->s, "same")) return f->same = 1, 0;
  if (n->kind == FE_N_SEQ) {
    if (n->n != 2 && n->n != 4)
      return fe_err(c, n, layer, "'%s' must be an int, [v, h], [t, l, b, r] or same (got %d items)", key, n->n);
    if (read_list(c, n, k, FE_T_INT, n->n, n->n, env, layer, key, f)) return -1;
    if (n->n == 2) f->iv[2] = f->iv[0], f->iv[3] = f->iv[1];
    f->n = 4;
    return 0;
  }
  fe_value v;
  int r = try_value(c, n, env, layer, key, &v);
  if (r == V_TEXT) return type_error(c, n, layer, key, "an int, [v, h], [t, l, b, r] or same", NULL);
  if (r == V_ERR || read_number(c, n, k, FE_T_INT, env, layer, key, &v)) return -1;
  for (int i = 0; i < 4; i++) f->iv[i] = v.i;
  return 0;
}

static int read_enum(fe_ctx *c, const fe_node *n, const fe_key *k, const char *layer, const char *key,
                     fe_field *f) {
  if (n->kind != FE_N_SCALAR || fe_is_null(n)) return type_error(c, n, layer, key, "a string", NULL);
  const char *vals[16];
  int nv = 0;
  for (const char *p = k->values; *p && nv < 16;) {
    size_t len = strcspn(p, "|");
    vals[nv] = ir_fmt(c->a, "%.*s", (int)len, p);
    if (!strcmp(vals[nv], n->s)) return f->s = vals[nv], 0;
    nv++;
    p += len + (p[len] == '|');
  }
  return fe_err(c, n, layer, "'%s' must be one of %s (got '%s')%s", key, k->values, n->s,
                fe_did_you_mean(c->a, n->s, vals, nv));
}

static int read_string(fe_ctx *c, const fe_node *n, const fe_key *k, const char *layer, const char *key,
                       fe_field *f) {
  if (n->kind != FE_N_SCALAR || fe_is_null(n) || !n->s[0])
    return type_error(c, n, layer, key, "a non-empty string", NULL);
  if (k->type == FE_T_NAME && !fe_valid_name(n->s))
    return fe_err(c, n, layer, "'%s' must be names of letters, digits, '_', '.', '-' joined by '/' (got '%s')", key,
                  n->s);
  f->s = n->s;
  return 0;
}

static int read_value(fe_ctx *c, const fe_node *n, const fe_key *k, const fe_env *env, const char *layer,
                      const char *key, fe_field *f) {
  switch (k->type) {
  case FE_T_INT: case FE_T_FLOAT: case FE_T_BOOL: return read_number(c, n, k, k->type, env, layer, key, &f->v);
  case FE_T_STR: case FE_T_NAME: return read_string(c, n, k, layer, key, f);
  case FE_T_ENUM: return read_enum(c, n, k, layer, key, f);
  case FE_T_PAIR: return read_pair(c, n, k, env, layer, key, f);
  case FE_T_PAD: return read_pad(c, n, k, env, layer, key, f);
  case FE_T_INTS: return read_list(c, n, k, FE_T_INT, 1, FE_MAX_ITEMS, env, layer, key, f);
  case FE_T_FLOATS: return read_list(c, n, k, FE_T_FLOAT, 1, FE_MAX_ITEMS, env, layer, key, f);
  case FE_T_NAMES:
    if (n->kind != FE_N_SEQ) return type_error(c, n, layer, key, "a list of layer names", NULL);
    for (int i = 0; i < n->n; i++)
      if (n->kids[i]->kind != FE_N_SCALAR || fe_is_null(n->kids[i]))
        return type_error(c, n->kids[i], layer, key, "a list of layer names", NULL);
    return 0;
  case FE_T_MAP: return n->kind == FE_N_MAP ? 0 : type_error(c, n, layer, key, "a mapping", NULL);
  case FE_T_SEQ: return n->kind == FE_N_SEQ ? 0 : type_error(c, n, layer, key, "a sequence", NULL);
  }
  return 0;
}

/* Default of an absent key.  Literal defaults are constants of the tables: parsing them
 * cannot fail unless a table is wrong (a compiler bug, reported like any other error). */
static int apply_default(fe_ctx *c, const fe_key *k, const char *layer, const char *what, const char *key,
                         const fe_node *m, fe_field *f) {
  if (!strcmp(k->def, "!")) return fe_err(c, m, layer, "missing required key '%s' in %s", key, what);
  if (!k->def[0] || k->def[0] == '%') return 0;
  if (k->def[0] == '@') {
    for (int i = 0; i < fe_tab_defaults.n; i++)
      if (!strcmp(fe_tab_defaults.keys[i].name, k->def + 1)) return *f = c->defs[i], f->node = NULL, 0;
    return fe_err(c, m, layer, "internal error: no default '%s' for '%s'", k->def, key);
  }
  fe_node lit = {FE_N_SCALAR, 0, 0, k->def, 0, 0, NULL};
  if (read_value(c, &lit, k, NULL, layer, key, f)) return -1;
  f->node = NULL;
  return 0;
}

int fe_read_key(fe_ctx *c, const fe_node *m, const fe_table *t, int i, const fe_env *env, const char *layer,
                const char *prefix, fe_field *f) {
  const fe_key *k = &t->keys[i];
  const char *key = prefix && prefix[0] ? ir_fmt(c->a, "%s%s", prefix, k->name) : k->name;
  const fe_node *n = fe_map_get(m, k->name);
  memset(f, 0, sizeof *f);
  if (!n) return apply_default(c, k, layer, t->what, key, m, f);
  f->node = n;
  return read_value(c, n, k, env, layer, key, f);
}

int fe_read_table(fe_ctx *c, const fe_node *m, const fe_table *t, const fe_env *env, const char *layer,
                  const char *prefix, fe_field *f) {
  for (int i = 0; i < t->n; i++)
    if (fe_read_key(c, m, t, i, env, layer, prefix, &f[i])) return -1;
  for (int i = 0; i < t->n; i++) /* "%k": same as key k when absent */
    if (!f[i].node && t->keys[i].def[0] == '%')
      for (int j = 0; j < t->n; j++)
        if (!strcmp(t->keys[j].name, t->keys[i].def + 1)) f[i] = f[j], f[i].node = NULL;
  return 0;
}
