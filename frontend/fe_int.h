/* fe_int.h — private declarations shared by the frontend's files: the YAML node tree with
 * source positions, expression values, the key schemas (layers.def, sections.def), name
 * scopes and the lowering context.  Not part of the public API (fe.h); unit tests may use it. */
#ifndef CNNC_FE_INT_H
#define CNNC_FE_INT_H

#include <math.h>

#include "fe.h"

/* ---- limits: no model may make the frontend crash, hang or exhaust memory --------------- */
#define FE_MAX_DEPTH 16         /* block nesting */
#define FE_MAX_REPEAT 4096      /* repeat: of one block instance */
#define FE_MAX_LAYERS 10000     /* layers after expanding every block */
#define FE_MAX_YAML_DEPTH 64    /* nesting of YAML collections */
#define FE_MAX_YAML_NODES 1000000
#define FE_MAX_YAML_BYTES ((uint64_t)64 << 20) /* a model file */
#define FE_MAX_EXPR_DEPTH 64    /* nesting inside one expression */
#define FE_MAX_PARAM_NUMEL ((int64_t)1 << 30) /* all parameters together (4 GiB of f32) */
#define FE_MAX_CH 65536         /* channels, filters, groups */
#define FE_MAX_K 1024           /* kernel, stride, padding, dilation */
#define FE_MAX_DIM 65536        /* input H, W; reshape dims */
#define FE_MAX_UNITS (1 << 20)  /* dense units, classes */
#define FE_MAX_ITEMS 16         /* items of a list-valued key */
#define FE_MAX_KEYS 8           /* keys of one op table */
#define FE_MAX_PARAMS 32        /* params of one block */
#define FE_INF HUGE_VAL

/* ---- YAML tree (yaml.c) ------------------------------------------------------------------ */
typedef enum fe_node_kind { FE_N_SCALAR, FE_N_SEQ, FE_N_MAP } fe_node_kind;
typedef struct fe_node {
  fe_node_kind kind;
  int line, col;          /* 1-based start of the node */
  const char *s;          /* scalar text */
  int quoted;             /* scalar was quoted or a block scalar: never a number */
  int n;                  /* sequence items / mapping pairs */
  struct fe_node **kids;  /* sequence: kids[i]; mapping: key kids[2i], value kids[2i+1] */
} fe_node;

/* Loads the single YAML document at path into a tree allocated from a.  Returns the root or
 * NULL with d filled (file:line:col and libyaml's problem). */
const fe_node *fe_yaml_load(ir_arena *a, const char *path, ir_diag *d);
/* Parses YAML text (for tests); file is only used for locations. */
const fe_node *fe_yaml_parse(ir_arena *a, const char *file, const char *text, size_t len, ir_diag *d);
const fe_node *fe_map_get(const fe_node *map, const char *key); /* value node or NULL */
const fe_node *fe_map_key(const fe_node *map, const char *key); /* key node or NULL */
int fe_is_null(const fe_node *n);                               /* plain "", "~", "null" */
/* "a mapping", "a sequence", "null", "int 3", "string 'abc'" for messages (values.c). */
const char *fe_node_desc(ir_arena *a, const fe_node *n);

/* ---- expressions (expr.c) ---------------------------------------------------------------- */
typedef enum fe_vtype { FE_V_INT, FE_V_FLOAT, FE_V_BOOL } fe_vtype;
typedef struct fe_value {
  fe_vtype t;
  int64_t i;  /* INT and BOOL (0/1) */
  double f;   /* FLOAT */
} fe_value;
typedef struct fe_var { const char *name; fe_value v; } fe_var;
/* Names visible to an expression: vars, then the enclosing env. */
typedef struct fe_env { const fe_var *vars; int n; const struct fe_env *next; } fe_env;

/* Evaluates text (without the leading '=').  Returns 0, or -1 with a one-line message in
 * err (naming the offending token). */
int fe_expr_eval(const char *text, const fe_env *env, fe_value *out, char *err, size_t errn);
const char *fe_vtype_name(fe_vtype t);           /* "int", "float", "bool" */
char *fe_value_str(fe_value v, char *buf, size_t n);
const fe_value *fe_env_find(const fe_env *env, const char *name);

/* ---- suggestions (suggest.c) ------------------------------------------------------------- */
/* The candidate closest to s by edit distance, or NULL if none is close enough. */
const char *fe_closest(const char *s, const char *const *cand, int n);
/* " (did you mean 'x'?)" or "" (arena string). */
const char *fe_did_you_mean(ir_arena *a, const char *s, const char *const *cand, int n);
/* "a, b, c" (arena string). */
const char *fe_join(ir_arena *a, const char *const *items, int n);

/* ---- options (options.c) ----------------------------------------------------------------- */
/* fe_option_set with label naming the option in messages ("--mode", "compile: 'mode'"). */
int fe_option_set_as(fe_options *o, int k, const char *text, const char *label, ir_diag *d);
/* (A list option with text NULL is cleared and marked set.) */
/* Copies the strings of the options marked in which[] into a (they pointed into the YAML). */
void fe_options_rehome(fe_options *o, const unsigned char *which, ir_arena *a);

/* ---- key schemas (schema.c, layers.def, sections.def) ------------------------------------ */
typedef enum fe_ktype {
  FE_T_INT, FE_T_FLOAT, FE_T_BOOL, FE_T_STR, FE_T_ENUM,
  FE_T_PAIR,   /* int or [a, b] */
  FE_T_PAD,    /* int, [v, h], [t, l, b, r] or "same" */
  FE_T_INTS, FE_T_FLOATS,
  FE_T_NAME,   /* layer name: [A-Za-z0-9_.-]+ segments joined by '/' */
  FE_T_NAMES,  /* sequence of layer references */
  FE_T_MAP, FE_T_SEQ
} fe_ktype;
enum { FE_XLO = 1, FE_XHI = 2 }; /* exclusive range ends */

typedef struct fe_key {
  const char *name;
  fe_ktype type;
  const char *def;    /* "!" required, "" absent, "@k" defaults.k, "%k" key k, else literal */
  double lo, hi;      /* numbers and list items */
  int flags;
  const char *values; /* FE_T_ENUM: "a|b|c" */
} fe_key;

typedef struct fe_table { const char *what; const fe_key *keys; int n; } fe_table;

typedef struct fe_field {
  const fe_node *node;     /* the value node; NULL when defaulted */
  fe_value v;              /* INT, FLOAT, BOOL */
  const char *s;           /* STR, ENUM, NAME */
  int n;                   /* items of PAIR (2), PAD (4), INTS, FLOATS */
  int64_t iv[FE_MAX_ITEMS];
  double fv[FE_MAX_ITEMS];
  int same;                /* PAD: "same" (iv undefined) */
} fe_field;

typedef struct fe_ctx fe_ctx;     /* the lowering context, below */
typedef struct fe_layer fe_layer; /* one layer being lowered, below */

/* Per table: its key table fe_tab_<table> (schema.c), the key indices FE_K_<table>_<key> and
 * FE_K_<table>__count; per op also its lowering function (lower.c, lower_ops.c). */
#define FE_OP(id, irop, lower, n_in) int lower(fe_ctx *c, fe_layer *L); extern const fe_table fe_tab_##id; enum {
#define FE_SECTION(id, what) extern const fe_table fe_tab_##id; enum {
#define FE_KEY(id, key, type, def, lo, hi, flags, values) FE_K_##id##_##key,
#define FE_END(id) FE_K_##id##__count };
#include "layers.def"
#include "sections.def"
#undef FE_OP
#undef FE_SECTION
#undef FE_KEY
#undef FE_END

/* ---- lowering context ------------------------------------------------------------------- */
typedef struct fe_strmap { int cap, n; const char **k; int *v; } fe_strmap;
void fe_strmap_put(ir_arena *a, fe_strmap *m, const char *k, int v); /* k must outlive m */
int fe_strmap_get(const fe_strmap *m, const char *k);                 /* -1 if absent */

struct fe_ctx {
  const char *file;      /* the model path as given (diagnostics) */
  const char *gfile;     /* the same, owned by the graph (node locations) */
  ir_arena *a;           /* the YAML tree and scratch; freed by fe_load */
  ir_graph *g;
  fe_options *o;
  ir_diag *d;
  fe_field defs[FE_K_defaults__count]; /* the defaults: section */
  const fe_node *blocks; /* the blocks: mapping or NULL */
  fe_strmap full;        /* full layer name -> value id (instances and aliases included) */
  int n_layers;
  int64_t param_numel;
  const char *stack[FE_MAX_DEPTH + 1]; /* blocks being instantiated */
  int depth;
  int training;
  int input;             /* the model input after normalisation (what `input` names) */
  int n_dropout;
};

ir_loc fe_loc(const fe_ctx *c, const fe_node *n);
/* Records an error at node n (layer may be NULL).  Returns -1. */
int fe_err(fe_ctx *c, const fe_node *n, const char *layer, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Checks that m is a mapping whose keys are unique and all in t (or in t2 when not NULL).
 * where: how the mapping is called in messages ("op 'conv'", "input"). */
int fe_check_keys(fe_ctx *c, const fe_node *m, const fe_table *t, const fe_table *t2, const char *layer,
                  const char *where);
/* Reads every key of t from mapping m (NULL = empty) into f[t->n]: given values are type- and
 * range-checked (expressions evaluated in env), missing ones defaulted, missing required
 * ones reported.  prefix is prepended to key names in messages ("input." or ""). */
int fe_read_table(fe_ctx *c, const fe_node *m, const fe_table *t, const fe_env *env, const char *layer,
                  const char *prefix, fe_field *f);
/* Reads key i of t only (no "%k" defaults). */
int fe_read_key(fe_ctx *c, const fe_node *m, const fe_table *t, int i, const fe_env *env, const char *layer,
                const char *prefix, fe_field *f);
/* A scalar as a number/bool: literal or "=expr" in env; -1 with an error naming key. */
int fe_scalar(fe_ctx *c, const fe_node *n, const fe_env *env, const char *layer, const char *key, fe_value *v);
int fe_valid_name(const char *s);

/* ---- layers (lower.c, lower_ops.c) -------------------------------------------------------- */
typedef int (*fe_lower_fn)(fe_ctx *c, fe_layer *L);
typedef struct fe_op_def {
  const char *name;
  ir_op op;              /* IR_OP_COUNT: the lowering picks one (norm, act) */
  const fe_table *keys;
  fe_lower_fn lower;
  int n_in;
} fe_op_def;
extern const fe_op_def fe_op_defs[];
extern const int fe_n_op_defs;

struct fe_layer {
  const fe_node *m;       /* the layer mapping */
  const char *name;       /* full name, graph-owned */
  ir_loc loc;
  const fe_env *env;
  const fe_op_def *op;
  fe_field f[FE_MAX_KEYS]; /* the op's keys, FE_K_<op>_<key> */
  int in[IR_MAX_IN], n_in;
  int out;                /* result value id (set by lower) */
};

/* Adds a node for L (relocating shape errors to L), the result to L->out.  0 or -1. */
int fe_add_node(fe_ctx *c, fe_layer *L, ir_op op, const int *in, int n_in, const ir_attr *attr);
/* Adds parameter "<layer>/<suffix>" with shape s.  Returns the value id or -1 (too large). */
int fe_add_param(fe_ctx *c, fe_layer *L, const char *suffix, ir_shape s, int trainable);

/* Lowers the top-level layers: sequence with the model input value in.  Returns the value of
 * the last layer or -1. */
int fe_lower_top(fe_ctx *c, const fe_node *layers, int in);
/* Resolves a name from outputs: (top-level scope rules).  -1 with an error at n. */
int fe_resolve_top(fe_ctx *c, const fe_node *n);

#endif
