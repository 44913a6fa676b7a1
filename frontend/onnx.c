/* onnx.c — fe_load_onnx: reads an ONNX model (protobuf-c over Debian's onnx.proto), checks the
 * opset, turns initializers and Constant nodes into constants, walks the nodes in order
 * (onnx_ops.c converts each into IR nodes), and adds outputs and the training loss.  The file
 * is untrusted: its size, the node count, every tensor's rank, dims and data length are
 * bounded before use; every error names the file and the node. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cm.h"
#include "onnx_int.h"
#include "weights.h"

/* ---- messages ----------------------------------------------------------------------------- */
/* Names come from the file: no control bytes or broken UTF-8 reach the terminal ('?'). */
static void printable(char *s) {
  for (unsigned char *p = (unsigned char *)s; *p; p++)
    if (*p < 0x20 || *p >= 0x7f) *p = '?';
}

int ox_err(ox_ctx *x, const char *fmt, ...) {
  char msg[sizeof x->d->msg];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  printable(msg);
  if (!x->node) return ir_diag_set(x->d, (ir_loc){x->file, 0, 0}, NULL, "%s", msg);
  const char *nm = x->node->name && x->node->name[0] ? x->node->name : NULL;
  char safe[2][96];
  const char *src[2] = {nm ? nm : "", x->node->op_type ? x->node->op_type : "?"};
  for (int k = 0; k < 2; k++) {
    snprintf(safe[k], sizeof safe[k], "%s", src[k]);
    printable(safe[k]);
  }
  return ir_diag_set(x->d, (ir_loc){x->file, 0, 0}, NULL, "node %s%s%s (#%d, %s, opset %d): %s", nm ? "'" : "",
                     nm ? safe[0] : "without a name", nm ? "'" : "", x->node_index, safe[1], x->opset, msg);
}

/* A layer name ([A-Za-z0-9_.-] segments joined by '/') from an ONNX name: "/layer1/0/Conv"
 * keeps its segments, other characters become '_'. */
static const char *clean_name(ox_ctx *x, const char *s) {
  size_t n = strlen(s);
  char *r = ir_alloc(x->a, n + 1), *p = r;
  for (size_t i = 0; i < n; i++) {
    char ch = s[i];
    int ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '_' ||
             ch == '.' || ch == '-';
    if (ch == '/') {
      if (p == r || p[-1] == '/') continue; /* no empty segments */
      *p++ = '/';
    } else {
      *p++ = ok ? ch : '_';
    }
  }
  while (p > r && p[-1] == '/') p--;
  *p = 0;
  return r;
}

const char *ox_layer_name(ox_ctx *x) {
  const Onnx__NodeProto *n = x->node;
  const char *base = n->name && n->name[0] ? clean_name(x, n->name) : "";
  if (!base[0]) base = ir_fmt(x->a, "%s_%d", n->op_type, x->node_index);
  if (ir_find_value(x->g, base) < 0) return ir_strdup(x->g->arena, base);
  for (int k = 1;; k++) { /* a name an earlier node or value took */
    const char *alt = ir_fmt(x->a, "%s_%d", base, k);
    if (ir_find_value(x->g, alt) < 0) return ir_strdup(x->g->arena, alt);
  }
}

/* ---- values ------------------------------------------------------------------------------ */
ox_val *ox_find(ox_ctx *x, const char *name) {
  int i = name ? fe_strmap_get(&x->names, name) : -1;
  return i < 0 ? NULL : &x->vals[i];
}

int ox_bind(ox_ctx *x, const char *name, int ir, ox_const *c) {
  if (!name || !name[0]) return 0; /* an unused optional output */
  if (ox_find(x, name)) return ox_err(x, "value '%s' is defined twice (the graph must be in SSA form)", name);
  if (x->n_vals == x->cap_vals) {
    int cap = x->cap_vals ? 2 * x->cap_vals : 256;
    ox_val *nv = ir_alloc(x->a, (size_t)cap * sizeof *nv);
    if (x->n_vals) memcpy(nv, x->vals, (size_t)x->n_vals * sizeof *nv);
    x->vals = nv;
    x->cap_vals = cap;
  }
  const char *k = ir_strdup(x->a, name);
  x->vals[x->n_vals] = (ox_val){k, ir, c, 0, 0, {0}, 0, 0, 0};
  fe_strmap_put(x->a, &x->names, k, x->n_vals);
  x->n_vals++;
  return 0;
}

int ox_has_input(ox_ctx *x, int i) { return i < (int)x->node->n_input && x->node->input[i][0]; }

ox_val *ox_input(ox_ctx *x, int i) {
  if (!ox_has_input(x, i)) return ox_err(x, "input %d is missing", i), NULL;
  ox_val *v = ox_find(x, x->node->input[i]);
  if (!v)
    ox_err(x, "input %d '%s' is not produced before this node (no initializer, graph input or earlier node "
              "output has that name: the nodes are out of order or form a cycle)",
           i, x->node->input[i]);
  return v;
}

ox_const *ox_const_new(ox_ctx *x, int rank, const int64_t *dims, int is_int) {
  ox_const *c = ir_alloc(x->a, sizeof *c);
  c->rank = rank;
  c->numel = 1;
  for (int i = 0; i < rank; i++) c->dims[i] = dims[i], c->numel *= dims[i];
  c->is_int = is_int;
  if (is_int) c->i = ir_alloc(x->a, (size_t)(c->numel ? c->numel : 1) * sizeof *c->i);
  else c->f = ir_alloc(x->a, (size_t)(c->numel ? c->numel : 1) * sizeof *c->f);
  return c;
}

int ox_param(ox_ctx *x, const char *suffix, const ox_const *c, int trainable, int n_dims, const int64_t *dims) {
  ir_shape s = {0};
  if (!dims) n_dims = c->rank, dims = c->dims;
  if (n_dims > IR_MAX_RANK) return ox_err(x, "a constant of rank %d is more than cnnc's tensors hold (%d)", n_dims, IR_MAX_RANK);
  s.rank = n_dims;
  for (int i = 0; i < n_dims; i++) s.dim[i] = dims[i];
  if (n_dims == 0) s.rank = 1, s.dim[0] = 1; /* a scalar is a one-element tensor */
  if (ir_shape_numel(&s) != c->numel) return ox_err(x, "internal: parameter shape does not match its data");
  const char *name = ir_fmt(x->g->arena, "%s/%s", ox_layer_name(x), suffix);
  if (ir_find_value(x->g, name) >= 0) return ox_err(x, "parameter name '%s' is taken", name);
  int v = ir_add_param(x->g, name, s, trainable);
  float *dst = x->g->values[v].data;
  for (int64_t k = 0; k < c->numel; k++) {
    if (c->is_int && (c->i[k] > IR_F32_EXACT_INT || c->i[k] < -IR_F32_EXACT_INT))
      return ox_err(x, "parameter '%s' holds the integer %lld (element %lld): beyond 2^24, f32 does not hold every integer, "
                    "so cnnc would not compute with it exactly", name, (long long)c->i[k], (long long)k);
    dst[k] = c->is_int ? (float)c->i[k] : c->f[k];
    if (!x->o->allow_nonfinite && !isfinite(dst[k])) /* as for --weights (frontend/weights.c) */
      return ox_err(x, "parameter '%s' holds a non-finite value (%g at element %lld); --allow-nonfinite accepts it", name,
                    dst[k], (long long)k);
    if (!x->o->allow_nonfinite && dst[k] < 0 && !strcmp(suffix, "running_var"))
      return ox_err(x, "parameter '%s' holds a negative variance (%g at element %lld)", name, dst[k], (long long)k);
  }
  return v;
}

int ox_act(ox_ctx *x, int i) {
  ox_val *v = ox_input(x, i);
  if (!v) return -1;
  if (v->view && strcmp(x->node->op_type, "Reshape") && strcmp(x->node->op_type, "Transpose"))
    return ox_err(x, "input %d '%s' is a rank-5 view (of a channel shuffle) read by an op other than Transpose or Reshape", i,
                  v->name);
  if (v->ir >= 0) return v->ir;
  if (!v->c) return ox_err(x, "internal: input %d '%s' has no value", i, v->name);
  /* A constant operand of an element-wise op: a non-trainable parameter, made once. */
  const char *suffix = ir_fmt(x->a, "const%d", i);
  int p = ox_param(x, suffix, v->c, 0, 0, NULL);
  if (p >= 0) v->ir = p;
  return p;
}

const ox_const *ox_need_const(ox_ctx *x, int i, const char *what) {
  ox_val *v = ox_input(x, i);
  if (!v) return NULL;
  if (!v->c)
    return ox_err(x, "input %d '%s' (%s) must be a constant (an initializer or a Constant), not computed at run time", i,
                  v->name, what),
           NULL;
  return v->c;
}

int ox_node(ox_ctx *x, ir_op op, const int *in, int n_in, const ir_attr *a) {
  ir_diag sub = {0};
  const char *name = ox_layer_name(x);
  ir_loc loc = {x->gfile, 0, 0}; /* messages name the ONNX node instead of a line */
  int v = ir_add_node(x->g, op, name, loc, in, n_in, a, &sub);
  if (v < 0) return ox_err(x, "%s", sub.msg);
  return ox_bind(x, x->node->n_output ? x->node->output[0] : NULL, v, NULL);
}

/* An IR node of the current ONNX node that is not its result (a part of a chain or one of
 * several outputs): named "<layer>/<suffix>".  Returns the value id or -1. */
int ox_part_node(ox_ctx *x, const char *suffix, ir_op op, const int *in, int n_in, const ir_attr *a) {
  ir_diag sub = {0};
  const char *name = ir_fmt(x->g->arena, "%s/%s", ox_layer_name(x), suffix);
  int v = ir_add_node(x->g, op, name, (ir_loc){x->gfile, 0, 0}, in, n_in, a, &sub);
  return v < 0 ? ox_err(x, "%s", sub.msg) : v;
}

/* ---- attributes ------------------------------------------------------------------------- */
const Onnx__AttributeProto *ox_attr(ox_ctx *x, const char *name) {
  for (size_t i = 0; i < x->node->n_attribute; i++)
    if (x->node->attribute[i]->name && !strcmp(x->node->attribute[i]->name, name)) return x->node->attribute[i];
  return NULL;
}

int ox_check_attrs(ox_ctx *x, const char *known) {
  for (size_t i = 0; i < x->node->n_attribute; i++) {
    const char *nm = x->node->attribute[i]->name ? x->node->attribute[i]->name : "";
    size_t l = strlen(nm);
    const char *p = known;
    int found = 0;
    while (l && *p) {
      const char *e = strchr(p, ',');
      size_t k = e ? (size_t)(e - p) : strlen(p);
      if (k == l && !strncmp(p, nm, l)) found = 1;
      if (!e) break;
      p = e + 1;
    }
    if (x->node->attribute[i]->ref_attr_name && x->node->attribute[i]->ref_attr_name[0])
      return ox_err(x, "attribute '%s' refers to a function attribute, which cnnc does not support", nm);
    if (!found)
      return ox_err(x, "attribute '%s' is not supported for this operator (known: %s)", nm, known[0] ? known : "none");
  }
  return 0;
}

static int attr_typed(ox_ctx *x, const char *name, Onnx__AttributeProto__AttributeType t, const char *tname,
                      const Onnx__AttributeProto **out) {
  const Onnx__AttributeProto *at = ox_attr(x, name);
  *out = at;
  if (!at) return 0;
  if (at->has_type && at->type != t) return ox_err(x, "attribute '%s' must be %s", name, tname);
  return 1;
}

int ox_attr_int(ox_ctx *x, const char *name, int64_t def, int64_t *out) {
  const Onnx__AttributeProto *at;
  int r = attr_typed(x, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT, "an int", &at);
  *out = def;
  if (r <= 0) return r;
  if (!at->has_i && at->has_type) return ox_err(x, "attribute '%s' has no value", name);
  *out = at->i;
  return 1;
}

int ox_attr_float(ox_ctx *x, const char *name, double def, double *out) {
  const Onnx__AttributeProto *at;
  int r = attr_typed(x, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT, "a float", &at);
  *out = def;
  if (r <= 0) return r;
  if (!at->has_f && at->has_type) return ox_err(x, "attribute '%s' has no value", name);
  if (!(at->f == at->f) || at->f > 3.4e38f || at->f < -3.4e38f)
    return ox_err(x, "attribute '%s' is not a finite number", name);
  *out = at->f;
  return 1;
}

int ox_attr_ints(ox_ctx *x, const char *name, int max, int64_t *out, int *n) {
  const Onnx__AttributeProto *at;
  int r = attr_typed(x, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS, "a list of ints", &at);
  *n = 0;
  if (r <= 0) return r;
  if (at->n_ints > (size_t)max) return ox_err(x, "attribute '%s' has %zu items (at most %d here)", name, at->n_ints, max);
  for (size_t i = 0; i < at->n_ints; i++) out[i] = at->ints[i];
  *n = (int)at->n_ints;
  return 1;
}

int ox_attr_str(ox_ctx *x, const char *name, const char *def, const char **out) {
  const Onnx__AttributeProto *at;
  int r = attr_typed(x, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING, "a string", &at);
  *out = def;
  if (r <= 0) return r;
  size_t l = at->s.len;
  if (l > 256 || (l && memchr(at->s.data, 0, l))) return ox_err(x, "attribute '%s' is not a short string", name);
  char *s = ir_alloc(x->a, l + 1);
  if (l) memcpy(s, at->s.data, l);
  *out = s;
  return 1;
}

/* ---- tensors ---------------------------------------------------------------------------- */
static const char *dtype_name(int t) {
  static const char *const n[] = {"UNDEFINED", "FLOAT", "UINT8", "INT8", "UINT16", "INT16", "INT32", "INT64", "STRING",
                                  "BOOL", "FLOAT16", "DOUBLE", "UINT32", "UINT64", "COMPLEX64", "COMPLEX128", "BFLOAT16"};
  return t >= 0 && t < (int)(sizeof n / sizeof *n) ? n[t] : "unknown";
}

ox_const *ox_tensor(ox_ctx *x, const Onnx__TensorProto *t, const char *what) {
  int dt = t->has_data_type ? t->data_type : 0;
  if (t->has_data_location && t->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL)
    return ox_err(x, "%s '%s' keeps its data in an external file, which cnnc does not read yet", what, t->name),
           NULL;
  if (t->segment) return ox_err(x, "%s '%s' is segmented, which cnnc does not support", what, t->name), NULL;
  size_t esize;
  switch (dt) {
  case OX_FLOAT: case OX_INT32: esize = 4; break;
  case OX_INT64: case OX_DOUBLE: esize = 8; break;
  case OX_UINT8: case OX_INT8: esize = 1; break;
  default:
    return ox_err(x, "%s '%s' has data type %s (%d); cnnc reads FLOAT, DOUBLE, INT64, INT32, INT8 and UINT8", what,
                  t->name, dtype_name(dt), dt),
           NULL;
  }
  if (t->n_dims > OX_MAX_RANK) return ox_err(x, "%s '%s' has rank %zu (at most %d)", what, t->name, t->n_dims, OX_MAX_RANK), NULL;
  int64_t numel = 1;
  for (size_t i = 0; i < t->n_dims; i++) {
    if (t->dims[i] < 0 || t->dims[i] > OX_MAX_CONST_NUMEL)
      return ox_err(x, "%s '%s': dim %zu is %lld", what, t->name, i, (long long)t->dims[i]), NULL;
    numel *= t->dims[i];
    if (numel > OX_MAX_CONST_NUMEL)
      return ox_err(x, "%s '%s' has more than %lld elements", what, t->name, (long long)OX_MAX_CONST_NUMEL), NULL;
  }
  int is_int = dt != OX_FLOAT && dt != OX_DOUBLE;
  ox_const *c = ox_const_new(x, (int)t->n_dims, t->dims, is_int);
  if (t->has_raw_data) {
    if (t->raw_data.len != (size_t)numel * esize)
      return ox_err(x, "%s '%s' has %zu bytes of raw data; its %s[%lld] needs %lld", what, t->name, t->raw_data.len,
                    dtype_name(dt), (long long)numel, (long long)numel * (long long)esize),
             NULL;
    const uint8_t *p = t->raw_data.data;
    for (int64_t k = 0; k < numel; k++, p += esize) { /* little-endian, as ONNX stores it */
      switch (dt) {
      case OX_FLOAT: { float v; memcpy(&v, p, 4); c->f[k] = v; } break;
      case OX_DOUBLE: { double v; memcpy(&v, p, 8); c->f[k] = (float)v; } break;
      case OX_INT32: { int32_t v; memcpy(&v, p, 4); c->i[k] = v; } break;
      case OX_INT64: { int64_t v; memcpy(&v, p, 8); c->i[k] = v; } break;
      case OX_INT8: c->i[k] = (int8_t)*p; break;
      case OX_UINT8: c->i[k] = *p; break;
      }
    }
    return c;
  }
  size_t have = dt == OX_FLOAT ? t->n_float_data : dt == OX_DOUBLE ? t->n_double_data
              : dt == OX_INT64 ? t->n_int64_data : t->n_int32_data;
  if (have != (size_t)numel)
    return ox_err(x, "%s '%s' has %zu values; its shape needs %lld", what, t->name, have, (long long)numel), NULL;
  for (int64_t k = 0; k < numel; k++) {
    switch (dt) {
    case OX_FLOAT: c->f[k] = t->float_data[k]; break;
    case OX_DOUBLE: c->f[k] = (float)t->double_data[k]; break;
    case OX_INT64: c->i[k] = t->int64_data[k]; break;
    default: c->i[k] = t->int32_data[k]; break; /* INT32, INT8, UINT8 live in int32_data */
    }
  }
  return c;
}

/* ---- the file --------------------------------------------------------------------------- */
static Onnx__ModelProto *unpack(ox_ctx *x, const uint8_t *buf, size_t len) {
  if (len == 0 || (int64_t)len > OX_MAX_FILE_BYTES)
    return ox_err(x, "is %zu bytes; an ONNX model is 1 byte to 2 GiB (larger models keep weights in external data)", len),
           NULL;
  Onnx__ModelProto *m = onnx__model_proto__unpack(NULL, len, buf);
  if (!m) ox_err(x, "not a valid ONNX model: the protobuf does not parse (truncated or not an ONNX file)");
  return m;
}

static Onnx__ModelProto *read_model(ox_ctx *x) {
  if (x->mem) return unpack(x, x->mem, x->mem_len);
  char why[256];
  size_t len;
  uint8_t *buf = (uint8_t *)cm_read_regular(x->file, (uint64_t)OX_MAX_FILE_BYTES, &len, why, sizeof why);
  if (!buf) return ox_err(x, "%s", why), NULL;
  Onnx__ModelProto *m = unpack(x, buf, len);
  free(buf);
  return m;
}

static int read_opset(ox_ctx *x, const Onnx__ModelProto *m) {
  x->opset = -1;
  for (size_t i = 0; i < m->n_opset_import; i++) {
    const Onnx__OperatorSetIdProto *o = m->opset_import[i];
    if (!o->domain || !o->domain[0] || !strcmp(o->domain, "ai.onnx")) x->opset = o->has_version ? (int)o->version : -1;
  }
  if (x->opset < 0 && m->has_ir_version && m->ir_version <= 2 && m->n_opset_import == 0) x->opset = 1;
  if (x->opset < OX_MIN_OPSET || x->opset > OX_MAX_OPSET)
    return ox_err(x, "the model uses opset %d of the default ONNX domain; cnnc imports opsets %d to %d", x->opset,
                  OX_MIN_OPSET, OX_MAX_OPSET);
  return 0;
}

static int read_initializers(ox_ctx *x, const Onnx__GraphProto *gp) {
  if (gp->n_sparse_initializer) return ox_err(x, "sparse initializers are not supported");
  for (size_t i = 0; i < gp->n_initializer; i++) {
    const Onnx__TensorProto *t = gp->initializer[i];
    if (!t->name || !t->name[0]) return ox_err(x, "initializer %zu has no name", i);
    ox_const *c = ox_tensor(x, t, "initializer");
    if (!c || ox_bind(x, t->name, -1, c)) return -1;
  }
  return 0;
}

/* The one runtime input: a float tensor whose first dim is the batch. */
static int read_input(ox_ctx *x, const Onnx__GraphProto *gp) {
  const Onnx__ValueInfoProto *in = NULL;
  for (size_t i = 0; i < gp->n_input; i++) {
    const Onnx__ValueInfoProto *v = gp->input[i];
    if (!v->name || !v->name[0]) return ox_err(x, "graph input %zu has no name", i);
    if (ox_find(x, v->name)) continue; /* an initializer listed as an input (IR version < 4) */
    if (in)
      return ox_err(x, "the graph has several run-time inputs ('%s', '%s'); cnnc models take one input tensor",
                    in->name, v->name);
    in = v;
  }
  if (!in) return ox_err(x, "the graph has no run-time input");
  const Onnx__TypeProto *tp = in->type;
  if (!tp || tp->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !tp->tensor_type)
    return ox_err(x, "input '%s' is not a tensor", in->name);
  const Onnx__TypeProto__Tensor *tt = tp->tensor_type;
  int et = tt->elem_type, it = et == OX_UINT8 ? IR_U8 : et == OX_INT8 ? IR_I8 : et == OX_INT32 ? IR_I32 : IR_F32;
  if (et != OX_FLOAT && it == IR_F32)
    return ox_err(x, "input '%s' has element type %s; cnnc's ONNX inputs are FLOAT, or UINT8, INT8 and INT32 (integers "
                     "computed exactly as f32 values up to 2^24; INT64 could exceed that)", in->name, dtype_name(et));
  if (it != IR_F32 && (x->training || x->o->precision != FE_PRECISION_32_32))
    return ox_err(x, "input '%s' is %s: integer tensors are computed exactly in f32, inference with --precision 32.32 "
                     "only", in->name, dtype_name(et));
  const Onnx__TensorShapeProto *sh = tt->shape;
  if (!sh) return ox_err(x, "input '%s' has no shape; cnnc needs a known rank and dims", in->name);
  if (sh->n_dim < 1 || sh->n_dim > IR_MAX_RANK)
    return ox_err(x, "input '%s' has rank %zu; cnnc's tensors have rank 1 to %d", in->name, sh->n_dim, IR_MAX_RANK);
  ir_shape s = {(int)sh->n_dim, {0}};
  for (size_t i = 0; i < sh->n_dim; i++) {
    const Onnx__TensorShapeProto__Dimension *dm = sh->dim[i];
    int sym = dm->value_case != ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
    if (i == 0) {
      if (!sym && dm->dim_value < 1)
        return ox_err(x, "input '%s' has a batch (dim 0) of %lld; it must be at least 1", in->name, (long long)dm->dim_value);
      if (!sym && dm->dim_value >= 1 && !x->o->set[FE_OPTK_batch_size] && dm->dim_value <= FE_MAX_UNITS)
        x->o->batch_size = dm->dim_value; /* a fixed batch is the default --batch-size */
      else if (!sym && dm->dim_value != x->o->batch_size)
        return ox_err(x, "input '%s' has a fixed batch of %lld but --batch-size is %lld", in->name,
                      (long long)dm->dim_value, (long long)x->o->batch_size);
      s.dim[0] = x->o->batch_size;
      x->dim0_free = !sym && !x->training;
      continue;
    }
    if (sym)
      return ox_err(x, "input '%s': dim %zu is symbolic ('%s'); only the batch (dim 0) may be", in->name, i,
                    dm->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM ? dm->dim_param : "");
    if (dm->dim_value < 1 || dm->dim_value > FE_MAX_DIM)
      return ox_err(x, "input '%s': dim %zu is %lld (1 to %d)", in->name, i, (long long)dm->dim_value, FE_MAX_DIM);
    s.dim[i] = dm->dim_value;
  }
  x->g->batch = (int)x->o->batch_size;
  int v = ir_add_input(x->g, "input", (ir_dtype)it, s);
  x->g->input = v;
  if (it == IR_F32) return ox_bind(x, in->name, v, NULL);
  ir_attr a = {.cast = {IR_F32, IR_F32}}; /* the integers as f32 values (docs/onnx.md "Integer tensors") */
  ir_diag sub = {0};
  int c = ir_add_node(x->g, IR_OP_cast, "input/cast", (ir_loc){x->gfile, 0, 0}, &v, 1, &a, &sub);
  if (c < 0) return ox_err(x, "input '%s': %s", in->name, sub.msg);
  if (ox_bind(x, in->name, c, NULL)) return -1;
  ox_find(x, in->name)->itype = et;
  return 0;
}

/* The storage dtype of a graph output of ONNX element type et holding an integer activation
 * of type itype: its integer dtype (BOOL as u8 0/1), IR_F32 for a float output. */
static int output_dtype(int et, int itype) {
  if (!et) et = itype;
  return et == OX_UINT8 || et == OX_BOOL ? IR_U8 : et == OX_INT8 ? IR_I8 : et == OX_INT32 ? IR_I32 : et == OX_INT64 ? IR_I64 : IR_F32;
}

static int set_outputs(ox_ctx *x, const Onnx__GraphProto *gp) {
  x->node = NULL;
  int max = x->training ? 7 : 8;
  if (gp->n_output < 1 || gp->n_output > (size_t)max)
    return ox_err(x, "the graph has %zu outputs (cnnc models have 1 to %d)", gp->n_output, max);
  for (size_t i = 0; i < gp->n_output; i++) {
    const char *nm = gp->output[i]->name;
    ox_val *v = ox_find(x, nm);
    if (!v) return ox_err(x, "graph output '%s' is produced by no node", nm ? nm : "");
    for (size_t j = 0; j < i; j++) /* by name: the value may have become a reshape or cast below */
      if (gp->output[j]->name && !strcmp(gp->output[j]->name, nm)) return ox_err(x, "graph output '%s' is listed twice", nm);
    if (v->ir >= 0 && x->g->values[v->ir].kind == IR_VAL_INPUT) { /* the input itself (an Identity): a copy */
      ir_attr a = {.reshape = {x->g->values[v->ir].shape}};
      ir_diag sub = {0};
      int cp = ir_add_node(x->g, IR_OP_reshape, ir_fmt(x->g->arena, "output/%zu", i), (ir_loc){x->gfile, 0, 0}, &v->ir, 1,
                           &a, &sub);
      if (cp < 0) return ox_err(x, "graph output '%s': %s", nm, sub.msg);
      v->ir = cp;
    }
    if (v->ir < 0 || x->g->values[v->ir].kind != IR_VAL_ACT)
      return ox_err(x, "graph output '%s' is a constant; cnnc outputs are computed tensors", nm);
    const ir_shape *os = &x->g->values[v->ir].shape;
    if (x->crossed && (os->dim[0] != 1 || os->rank < 2)) { /* one sample (one_sample()): [1, all] */
      ir_attr a = {.reshape = {(ir_shape){2, {1, ir_shape_numel(os)}}}};
      ir_diag sub = {0};
      int r = ir_add_node(x->g, IR_OP_reshape, ir_fmt(x->g->arena, "output/%zu", i), (ir_loc){x->gfile, 0, 0}, &v->ir, 1,
                          &a, &sub);
      if (r < 0) return ox_err(x, "graph output '%s': %s", nm, sub.msg);
      v->ir = r;
    }
    const Onnx__TypeProto *tp = gp->output[i]->type;
    int et = tp && tp->value_case == ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE && tp->tensor_type ? tp->tensor_type->elem_type : 0;
    int odt = v->itype ? output_dtype(et, v->itype) : IR_F32;
    if (odt != IR_F32) { /* an integer output: written in its dtype */
      ir_attr a = {.cast = {odt, IR_F32}};
      ir_diag sub = {0};
      int r = ir_add_node(x->g, IR_OP_cast, ir_fmt(x->g->arena, "output/%zu/%s", i, ir_dtype_name((ir_dtype)odt)),
                          (ir_loc){x->gfile, 0, 0}, &v->ir, 1, &a, &sub);
      if (r < 0) return ox_err(x, "graph output '%s': %s", nm, sub.msg);
      v->ir = r;
    }
    for (int j = 0; j < x->g->n_outputs; j++)
      if (x->g->outputs[j] == v->ir) return ox_err(x, "graph output '%s' is listed twice", nm);
    x->g->outputs[x->g->n_outputs++] = v->ir;
  }
  return 0;
}

/* A graph whose ops crossed dim 0 (x->crossed: an inference graph with a fixed input dim 0,
 * docs/onnx.md "Dim 0") computes one function of the whole input tensor: it is one sample.
 * The IR input becomes [1, all elements] (the same bytes), a reshape to the ONNX shape is put
 * in front of every node (the nodes that read the input read it), the batch is 1, and
 * set_outputs made the outputs [1, all elements]. */
static int one_sample(ox_ctx *x) {
  ir_graph *g = x->g;
  int vin = g->input, n0 = g->n_nodes, at = 0;
  ir_shape s = g->values[vin].shape;
  if (g->values[vin].dtype != IR_F32) vin = g->nodes[0].out, at = 1; /* an integer input: the reshape follows its cast */
  ir_attr a = {.reshape = {s}};
  ir_diag sub = {0};
  x->node = NULL;
  int64_t n = 1;
  for (int i = 0; i < s.rank; i++) n = n > OX_MAX_CONST_NUMEL ? n : n * s.dim[i]; /* dims <= 2^16: no overflow */
  if (n > OX_MAX_CONST_NUMEL)
    return ox_err(x, "the input, one sample (an op crosses dim 0), would have over 2^30 elements");
  int v = ir_add_node(g, IR_OP_reshape, "input/onnx_shape", (ir_loc){x->gfile, 0, 0}, &vin, 1, &a, &sub);
  if (v < 0) return ox_err(x, "the input's reshape: %s", sub.msg);
  for (int i = 0; i < n0; i++)
    for (int j = 0; j < g->nodes[i].n_in; j++)
      if (g->nodes[i].in[j] == vin) g->nodes[i].in[j] = v;
  ir_node front = g->nodes[n0];
  memmove(g->nodes + at + 1, g->nodes + at, (size_t)(n0 - at) * sizeof *g->nodes);
  g->nodes[at] = front;
  for (int i = 0; i <= n0; i++) g->nodes[i].id = i;
  for (int k = 0; k < g->n_values; k++)
    if (g->values[k].producer >= at) g->values[k].producer = g->values[k].producer == n0 ? at : g->values[k].producer + 1;
  g->values[g->input].shape = g->values[vin].shape = (ir_shape){2, {1, ir_shape_numel(&s)}};
  g->batch = 1;
  x->o->batch_size = 1;
  return 0;
}

static int add_loss(ox_ctx *x) {
  if (!x->training) return 0;
  ir_graph *g = x->g;
  const ir_value *o = &g->values[g->outputs[0]];
  char buf[96];
  if (o->shape.rank != 2)
    return ox_err(x, "training needs [N, classes] logits, but output '%s' has shape %s", o->name,
                  ir_shape_str(&o->shape, buf, sizeof buf));
  ir_attr a = {0};
  a.softmax_xent.label_smoothing = (float)x->o->label_smoothing;
  int in[2] = {g->outputs[0], x->o->mixed_labels ? ir_add_label_mixed(g, "label") : ir_add_label(g, "label")};
  ir_diag sub = {0};
  int v = ir_add_node(g, IR_OP_softmax_xent, "loss", (ir_loc){x->gfile, 0, 0}, in, 2, &a, &sub);
  if (v < 0) return ox_err(x, "loss: %s", sub.msg);
  g->outputs[g->n_outputs++] = v;
  return 0;
}

static int walk(ox_ctx *x, const Onnx__GraphProto *gp) {
  if (gp->n_node > OX_MAX_NODES) return ox_err(x, "the graph has %zu nodes (at most %d)", gp->n_node, OX_MAX_NODES);
  x->skip = ir_alloc(x->a, gp->n_node + 1);
  /* Uses of each value name, for the fusions in onnx_ops.c. */
  fe_strmap *cnt = &x->use_names;
  int *uses = x->use_count = ir_alloc(x->a, (2 * gp->n_node + gp->n_output + 1) * sizeof *uses);
  int n_names = 0, max_names = (int)(2 * gp->n_node + gp->n_output);
  for (size_t i = 0; i < gp->n_node; i++)
    for (size_t j = 0; j < gp->node[i]->n_input; j++) {
      const char *nm = gp->node[i]->input[j];
      if (!nm || !nm[0]) continue;
      int k = fe_strmap_get(cnt, nm);
      if (k < 0 && n_names < max_names) fe_strmap_put(x->a, cnt, nm, k = n_names++);
      if (k >= 0) uses[k]++;
    }
  for (size_t i = 0; i < gp->n_output; i++) {
    const char *nm = gp->output[i]->name;
    if (!nm || !nm[0]) continue;
    int k = fe_strmap_get(cnt, nm);
    if (k < 0 && n_names < max_names) fe_strmap_put(x->a, cnt, nm, k = n_names++);
    if (k >= 0) uses[k]++;
  }
  x->graph = gp;
  for (size_t i = 0; i < gp->n_node; i++) {
    x->node = gp->node[i];
    x->node_index = (int)i;
    if (!x->node->op_type || !x->node->op_type[0]) return ox_err(x, "the node has no op_type");
    if (x->node->domain && x->node->domain[0] && strcmp(x->node->domain, "ai.onnx"))
      return ox_err(x, "operator domain '%s' is not supported (only the default ONNX domain)", x->node->domain);
    if (x->skip[i]) continue;
    if (ox_convert(x)) return -1;
  }
  x->node = NULL;
  return 0;
}

int ox_uses(ox_ctx *x, const char *name) {
  int k = name ? fe_strmap_get(&x->use_names, name) : -1;
  return k < 0 ? 0 : x->use_count[k];
}

/* The node after the current one that reads value name, with the input slot it reads it at;
 * -1 if none.  With ox_uses(x, name) == 1 it is the value's only reader. */
int ox_next_reader(ox_ctx *x, const char *name, int *slot) {
  for (size_t k = (size_t)x->node_index + 1; name && k < x->graph->n_node; k++)
    for (size_t j = 0; j < x->graph->node[k]->n_input; j++)
      if (!strcmp(x->graph->node[k]->input[j], name)) return *slot = (int)j, (int)k;
  return -1;
}

/* ---- entry ------------------------------------------------------------------------------- */
static ir_graph *load(ox_ctx *x) {
  Onnx__ModelProto *m = read_model(x);
  if (!m) return NULL;
  ir_graph *g = NULL;
  if (read_opset(x, m)) goto out;
  const Onnx__GraphProto *gp = m->graph;
  if (!gp) {
    ox_err(x, "the model has no graph");
    goto out;
  }
  if (m->n_functions) {
    ox_err(x, "model-local functions are not supported");
    goto out;
  }
  x->training = x->o->mode == FE_MODE_TRAINING;
  fe_options_mode_defaults(x->o); /* a fixed batch dim of the input still wins (read_input) */
  const char *name = gp->name && gp->name[0] ? clean_name(x, gp->name) : "";
  if (!name[0]) { /* the file name without directory and extension */
    const char *b = strrchr(x->file, '/');
    b = b ? b + 1 : x->file;
    size_t l = strcspn(b, ".");
    name = clean_name(x, ir_fmt(x->a, "%.*s", (int)l, b));
    if (!name[0]) name = "model";
  }
  x->g = g = ir_graph_new(name, (int)x->o->batch_size);
  x->gfile = ir_strdup(g->arena, x->file);
  if (read_initializers(x, gp) || read_input(x, gp) || walk(x, gp) || set_outputs(x, gp) || (x->crossed && one_sample(x)) || add_loss(x)) goto fail;
  if (x->o->weights[0] && fe_load_safetensors_note(g, x->o->weights, x->o->allow_nonfinite, x->o->weights_note, sizeof x->o->weights_note, x->d)) goto fail;
  if (ir_verify(g, x->d)) goto fail;
  goto out;
fail:
  ir_graph_free(g);
  g = NULL;
out:
  onnx__model_proto__free_unpacked(m, NULL);
  return g;
}

static ir_graph *import(const char *path, const uint8_t *mem, size_t len, fe_options *o, ir_diag *d) {
  fe_options saved = *o;
  ox_ctx x = {0};
  x.file = path;
  x.mem = mem;
  x.mem_len = len;
  x.o = o;
  x.d = d;
  x.a = ir_arena_new();
  if (!x.a) {
    ir_diag_set(d, (ir_loc){path, 0, 0}, NULL, "out of memory");
    return NULL;
  }
  ir_graph *g = load(&x);
  if (!g) {
    if (!d->failed) ir_diag_set(d, (ir_loc){path, 0, 0}, NULL, "cannot import the ONNX model");
    if (d->loc.file && x.gfile && d->loc.file == x.gfile) d->loc.file = path;
    *o = saved;
  }
  ir_arena_free(x.a);
  return g;
}

ir_graph *fe_load_onnx(const char *path, fe_options *o, ir_diag *d) { return import(path, NULL, 0, o, d); }

ir_graph *fe_load_onnx_mem(const char *name, const void *data, size_t len, fe_options *o, ir_diag *d) {
  static const uint8_t empty[1];
  return import(name, len ? data : empty, len, o, d);
}
