/* yaml.c — reads a model file with libyaml's document API into the frontend's node tree
 * (fe_node), keeping 1-based line/column of every node.  Malformed YAML becomes a located
 * error with libyaml's problem text.  The file is read whole (a regular file of bounded size:
 * never a FIFO), and its events are scanned first: nesting and node count are refused as they
 * are read, before libyaml builds a document (its cost grows with the square of the depth).
 * Alias loops and alias bombs are cut off by depth and node-count limits while converting. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "common/cm.h"
#include "fe_int.h"

typedef struct conv_state {
  ir_arena *a;
  yaml_document_t *doc;
  const char *file;
  ir_diag *d;
  long count;
} conv_state;

static ir_loc mark_loc(const char *file, yaml_mark_t m) {
  ir_loc l = {file, (int)m.line + 1, (int)m.column + 1};
  return l;
}

static fe_node *convert(conv_state *st, yaml_node_t *y, int depth);

static int convert_kids(conv_state *st, yaml_node_t *y, fe_node *n, int depth) {
  if (y->type == YAML_SEQUENCE_NODE) {
    yaml_node_item_t *b = y->data.sequence.items.start, *e = y->data.sequence.items.top;
    n->n = (int)(e - b);
    n->kids = ir_alloc(st->a, (size_t)(n->n ? n->n : 1) * sizeof *n->kids);
    for (int i = 0; i < n->n; i++)
      if (!(n->kids[i] = convert(st, yaml_document_get_node(st->doc, b[i]), depth + 1))) return -1;
    return 0;
  }
  yaml_node_pair_t *b = y->data.mapping.pairs.start, *e = y->data.mapping.pairs.top;
  n->n = (int)(e - b);
  n->kids = ir_alloc(st->a, (size_t)(n->n ? 2 * n->n : 1) * sizeof *n->kids);
  for (int i = 0; i < n->n; i++) {
    if (!(n->kids[2 * i] = convert(st, yaml_document_get_node(st->doc, b[i].key), depth + 1))) return -1;
    if (!(n->kids[2 * i + 1] = convert(st, yaml_document_get_node(st->doc, b[i].value), depth + 1))) return -1;
  }
  return 0;
}

static fe_node *convert(conv_state *st, yaml_node_t *y, int depth) {
  if (!y) {
    ir_diag_set(st->d, (ir_loc){st->file, 0, 0}, NULL, "malformed YAML document");
    return NULL;
  }
  if (depth > FE_MAX_YAML_DEPTH || ++st->count > FE_MAX_YAML_NODES) {
    ir_diag_set(st->d, mark_loc(st->file, y->start_mark), NULL,
                depth > FE_MAX_YAML_DEPTH ? "YAML nested more than %d levels (or a recursive alias)"
                                          : "YAML expands to more than %d nodes (aliases?)",
                depth > FE_MAX_YAML_DEPTH ? FE_MAX_YAML_DEPTH : FE_MAX_YAML_NODES);
    return NULL;
  }
  fe_node *n = ir_alloc(st->a, sizeof *n);
  n->line = (int)y->start_mark.line + 1;
  n->col = (int)y->start_mark.column + 1;
  if (y->type == YAML_SCALAR_NODE) {
    n->kind = FE_N_SCALAR;
    char *s = ir_alloc(st->a, y->data.scalar.length + 1);
    memcpy(s, y->data.scalar.value, y->data.scalar.length);
    if (memchr(s, 0, y->data.scalar.length)) {
      ir_diag_set(st->d, mark_loc(st->file, y->start_mark), NULL, "NUL character in a YAML scalar");
      return NULL;
    }
    n->s = s;
    n->quoted = y->data.scalar.style != YAML_PLAIN_SCALAR_STYLE;
    return n;
  }
  n->kind = y->type == YAML_SEQUENCE_NODE ? FE_N_SEQ : FE_N_MAP;
  return convert_kids(st, y, n, depth) ? NULL : n;
}

static void parser_error(yaml_parser_t *p, const char *file, ir_diag *d) {
  yaml_mark_t m = p->problem_mark;
  if (p->error == YAML_MEMORY_ERROR) {
    ir_diag_set(d, (ir_loc){file, 0, 0}, NULL, "out of memory reading YAML");
    return;
  }
  if (p->context)
    ir_diag_set(d, mark_loc(file, m), NULL, "%s %s (line %d)", p->problem ? p->problem : "malformed YAML",
                p->context, (int)p->context_mark.line + 1);
  else
    ir_diag_set(d, mark_loc(file, m), NULL, "%s", p->problem ? p->problem : "malformed YAML");
}

/* Reads the events of the whole stream, refusing more than FE_MAX_YAML_DEPTH nested
 * collections or FE_MAX_YAML_NODES nodes as soon as they appear.  0 or -1 with d filled. */
static int scan_events(yaml_parser_t *p, const char *file, ir_diag *d) {
  int depth = 0;
  long nodes = 0;
  for (;;) {
    yaml_event_t e;
    if (!yaml_parser_parse(p, &e)) {
      parser_error(p, file, d);
      return -1;
    }
    yaml_event_type_t t = e.type;
    yaml_mark_t at = e.start_mark;
    yaml_event_delete(&e);
    if (t == YAML_STREAM_END_EVENT) return 0;
    if (t == YAML_SEQUENCE_END_EVENT || t == YAML_MAPPING_END_EVENT) depth--;
    if (t != YAML_SEQUENCE_START_EVENT && t != YAML_MAPPING_START_EVENT && t != YAML_SCALAR_EVENT &&
        t != YAML_ALIAS_EVENT)
      continue;
    if ((t == YAML_SEQUENCE_START_EVENT || t == YAML_MAPPING_START_EVENT) && ++depth > FE_MAX_YAML_DEPTH)
      return ir_diag_set(d, mark_loc(file, at), NULL, "YAML nested more than %d levels", FE_MAX_YAML_DEPTH);
    if (++nodes > FE_MAX_YAML_NODES)
      return ir_diag_set(d, mark_loc(file, at), NULL, "YAML holds more than %d nodes", FE_MAX_YAML_NODES);
  }
}

/* Loads the first document and makes sure no second one follows. */
static const fe_node *load_doc(yaml_parser_t *p, ir_arena *a, const char *file, ir_diag *d) {
  yaml_document_t doc, extra;
  if (!yaml_parser_load(p, &doc)) {
    parser_error(p, file, d);
    return NULL;
  }
  const fe_node *root = NULL;
  yaml_node_t *r = yaml_document_get_root_node(&doc);
  if (!r) {
    ir_diag_set(d, (ir_loc){file, 1, 1}, NULL, "empty model file");
  } else {
    conv_state st = {a, &doc, file, d, 0};
    root = convert(&st, r, 0);
  }
  yaml_document_delete(&doc);
  if (!root) return NULL;
  if (!yaml_parser_load(p, &extra)) {
    parser_error(p, file, d);
    return NULL;
  }
  yaml_node_t *r2 = yaml_document_get_root_node(&extra);
  if (r2) ir_diag_set(d, mark_loc(file, r2->start_mark), NULL, "a model file holds one YAML document; found a second");
  yaml_document_delete(&extra);
  return r2 ? NULL : root;
}

/* pass 0: the event scan; pass 1: the document. */
const fe_node *fe_yaml_parse(ir_arena *a, const char *file, const char *text, size_t len, ir_diag *d) {
  const fe_node *root = NULL;
  for (int pass = 0; pass < 2; pass++) {
    yaml_parser_t p;
    if (!yaml_parser_initialize(&p)) {
      ir_diag_set(d, (ir_loc){file, 0, 0}, NULL, "cannot initialise the YAML parser");
      return NULL;
    }
    yaml_parser_set_input_string(&p, (const unsigned char *)text, len);
    int bad = pass == 0 ? scan_events(&p, file, d) : !(root = load_doc(&p, a, file, d));
    yaml_parser_delete(&p);
    if (bad) return NULL;
  }
  return root;
}

const fe_node *fe_yaml_load(ir_arena *a, const char *path, ir_diag *d) {
  char why[256];
  size_t len;
  char *text = cm_read_regular(path, FE_MAX_YAML_BYTES, &len, why, sizeof why);
  if (!text) {
    ir_diag_set(d, (ir_loc){path, 0, 0}, NULL, "cannot read the model file: %s", why);
    return NULL;
  }
  const fe_node *root = fe_yaml_parse(a, path, text, len, d);
  free(text);
  return root;
}

const fe_node *fe_map_key(const fe_node *map, const char *key) {
  if (!map || map->kind != FE_N_MAP) return NULL;
  for (int i = 0; i < map->n; i++) {
    const fe_node *k = map->kids[2 * i];
    if (k->kind == FE_N_SCALAR && strcmp(k->s, key) == 0) return k;
  }
  return NULL;
}

const fe_node *fe_map_get(const fe_node *map, const char *key) {
  if (!map || map->kind != FE_N_MAP) return NULL;
  for (int i = 0; i < map->n; i++) {
    const fe_node *k = map->kids[2 * i];
    if (k->kind == FE_N_SCALAR && strcmp(k->s, key) == 0) return map->kids[2 * i + 1];
  }
  return NULL;
}

int fe_is_null(const fe_node *n) {
  return n->kind == FE_N_SCALAR && !n->quoted &&
         (!n->s[0] || !strcmp(n->s, "~") || !strcmp(n->s, "null") || !strcmp(n->s, "Null") || !strcmp(n->s, "NULL"));
}
