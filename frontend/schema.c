/* schema.c — the key tables of the model format, expanded from layers.def and sections.def,
 * the list of layer ops, and the check that a mapping holds only declared keys, each once
 * (an unknown key is reported with the closest valid one and the full list). */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "fe_int.h"

#define FE_OP(id, irop, lower, n_in) static const fe_key keys_##id[] = {
#define FE_SECTION(id, what) static const fe_key keys_##id[] = {
#define FE_KEY(id, key, type, def, lo, hi, flags, values) {#key, FE_T_##type, def, lo, hi, flags, values},
#define FE_END(id) {NULL, FE_T_INT, "", 0, 0, 0, ""}};
#include "layers.def"
#include "sections.def"
#undef FE_OP
#undef FE_SECTION
#undef FE_KEY
#undef FE_END

#define FE_OP(id, irop, lower, n_in) const fe_table fe_tab_##id = {"op '" #id "'", keys_##id, FE_K_##id##__count};
#define FE_SECTION(id, what) const fe_table fe_tab_##id = {what, keys_##id, FE_K_##id##__count};
#define FE_KEY(id, key, type, def, lo, hi, flags, values)
#define FE_END(id)
#include "layers.def"
#include "sections.def"
#undef FE_OP
#undef FE_SECTION

#define FE_OP(id, irop, lower, n_in) {#id, IR_OP_##irop, &fe_tab_##id, lower, n_in},
#define FE_SECTION(id, what)
const fe_op_def fe_op_defs[] = {
#include "layers.def"
};
const int fe_n_op_defs = (int)(sizeof fe_op_defs / sizeof fe_op_defs[0]);
#undef FE_OP
#undef FE_SECTION
#undef FE_KEY
#undef FE_END

ir_loc fe_loc(const fe_ctx *c, const fe_node *n) {
  ir_loc l = {c->file, n ? n->line : 0, n ? n->col : 0};
  return l;
}

int fe_err(fe_ctx *c, const fe_node *n, const char *layer, const char *fmt, ...) {
  if (c->d->failed) return -1;
  char msg[sizeof c->d->msg];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return ir_diag_set(c->d, fe_loc(c, n), layer, "%s", msg);
}

static int table_has(const fe_table *t, const char *k) {
  for (int i = 0; t && i < t->n; i++)
    if (strcmp(t->keys[i].name, k) == 0) return 1;
  return 0;
}

static int unknown_key(fe_ctx *c, const fe_node *k, const fe_table *t, const fe_table *t2, const char *layer,
                       const char *where) {
  const char *names[64];
  int n = 0;
  for (int i = 0; i < t->n && n < 64; i++) names[n++] = t->keys[i].name;
  for (int i = 0; t2 && i < t2->n && n < 64; i++)
    if (!table_has(t, t2->keys[i].name)) names[n++] = t2->keys[i].name;
  return fe_err(c, k, layer, "unknown key '%s' in %s%s; valid keys: %s", k->s, where,
                fe_did_you_mean(c->a, k->s, names, n), fe_join(c->a, names, n));
}

int fe_check_keys(fe_ctx *c, const fe_node *m, const fe_table *t, const fe_table *t2, const char *layer,
                  const char *where) {
  if (m->kind != FE_N_MAP)
    return fe_err(c, m, layer, "%s must be a mapping (got %s)", where, fe_node_desc(c->a, m));
  for (int i = 0; i < m->n; i++) {
    const fe_node *k = m->kids[2 * i];
    if (k->kind != FE_N_SCALAR) return fe_err(c, k, layer, "keys of %s must be plain names", where);
    if (!table_has(t, k->s) && !table_has(t2, k->s)) return unknown_key(c, k, t, t2, layer, where);
    for (int j = 0; j < i; j++) {
      const fe_node *prev = m->kids[2 * j];
      if (prev->kind == FE_N_SCALAR && strcmp(prev->s, k->s) == 0)
        return fe_err(c, k, layer, "duplicate key '%s' in %s (first at line %d)", k->s, where, prev->line);
    }
  }
  return 0;
}

int fe_valid_name(const char *s) {
  int seg = 0;
  if (!*s) return 0;
  for (; *s; s++) {
    if (*s == '/') {
      if (!seg) return 0;
      seg = 0;
    } else if ((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') || *s == '_' ||
               *s == '.' || *s == '-') {
      seg++;
    } else {
      return 0;
    }
  }
  return seg > 0;
}
