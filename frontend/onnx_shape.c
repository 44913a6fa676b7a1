/* onnx_shape.c — ONNX data movement and shape arithmetic: Concat, Slice and Split of
 * activations (IR concat / slice nodes), and the ops exports use to compute shapes at run time
 * (Shape, Gather, Unsqueeze, Squeeze, Cast, Concat and Add/Sub/Mul/Div of constants), folded
 * into constants at import because cnnc's shapes are static; Pad (folded into its reader's
 * window, or slices, slice_grads and concats). */
#include <string.h>

#include "onnx_int.h"

/* ---- shape arithmetic on constants (folded at import) --------------------------------------
 * Exports compute shapes at run time (Shape -> Gather -> Unsqueeze -> Concat -> Reshape); cnnc's
 * shapes are static, so these fold into constants.  An op of these kinds on an activation is
 * not supported (Concat of activations, below, is the exception to come). */
int ox_op_shape_op(ox_ctx *x) {
  if (ox_check_attrs(x, "start,end")) return -1;
  ox_val *v = ox_input(x, 0);
  if (!v) return -1;
  int rank = v->c ? v->c->rank : ox_shape(x, v->ir)->rank;
  int64_t start, end;
  if (ox_attr_int(x, "start", 0, &start) < 0 || ox_attr_int(x, "end", rank, &end) < 0) return -1;
  if (start < 0) start += rank;
  if (end < 0) end += rank;
  if (start < 0) start = 0;
  if (end > rank) end = rank;
  int64_t n = end > start ? end - start : 0;
  ox_const *c = ox_const_new(x, 1, &n, 1);
  for (int64_t i = 0; i < n; i++) c->i[i] = v->c ? v->c->dims[start + i] : ox_shape(x, v->ir)->dim[start + i];
  return ox_bind(x, x->node->output[0], -1, c);
}

int ox_op_gather(ox_ctx *x) {
  if (ox_check_attrs(x, "axis")) return -1;
  const ox_const *d = ox_need_const(x, 0, "the data"), *ix = d ? ox_need_const(x, 1, "the indices") : NULL;
  int64_t axis;
  if (!ix || ox_attr_int(x, "axis", 0, &axis) < 0) return -1;
  if (axis != 0 || d->rank != 1 || !ix->is_int || ix->rank > 1)
    return ox_err(x, "only Gather of a 1-D constant along axis 0 with scalar or 1-D indices is supported");
  ox_const *c = ox_const_new(x, ix->rank, ix->dims, d->is_int);
  for (int64_t i = 0; i < ix->numel; i++) {
    int64_t k = ix->i[i] < 0 ? ix->i[i] + d->numel : ix->i[i];
    if (k < 0 || k >= d->numel) return ox_err(x, "index %lld is out of range for %lld values", (long long)ix->i[i], (long long)d->numel);
    if (d->is_int) c->i[i] = d->i[k];
    else c->f[i] = d->f[k];
  }
  return ox_bind(x, x->node->output[0], -1, c);
}

/* Unsqueeze and Squeeze of a constant: the data stay, the dims change. */
static int squeeze(ox_ctx *x, int un) {
  if (ox_check_attrs(x, x->opset < 13 ? "axes" : "")) return -1;
  const ox_val *src = ox_input(x, 0);
  if (!src) return -1;
  /* an activation: the dims of its IR shape, the result a reshape (dim 0 stays the batch
   * unless x->dim0_free) */
  ox_const act = {0};
  const ox_const *d = src->c;
  if (!d) {
    const ir_shape *s = ox_shape(x, src->ir);
    act.rank = s->rank;
    act.numel = ir_shape_numel(s);
    for (int i = 0; i < s->rank; i++) act.dims[i] = s->dim[i];
    d = &act;
  }
  int64_t axes[OX_MAX_RANK];
  int n = 0;
  if (x->opset < 13) {
    if (ox_attr_ints(x, "axes", OX_MAX_RANK, axes, &n) < 0) return -1;
  } else if (ox_has_input(x, 1)) {
    const ox_const *a = ox_need_const(x, 1, "the axes");
    if (!a) return -1;
    if (!a->is_int || a->numel > OX_MAX_RANK) return ox_err(x, "the axes must be at most %d integers", OX_MAX_RANK);
    for (int64_t i = 0; i < a->numel; i++) axes[n++] = a->i[i];
  }
  int out_rank = un ? d->rank + n : d->rank;
  if (un && !n) return ox_err(x, "Unsqueeze needs axes");
  if (out_rank > OX_MAX_RANK) return ox_err(x, "the result would have rank %d", out_rank);
  unsigned char mark[OX_MAX_RANK] = {0};
  for (int i = 0; i < n; i++) {
    int64_t a = axes[i] < 0 ? axes[i] + (un ? out_rank : d->rank) : axes[i];
    if (a < 0 || a >= (un ? out_rank : d->rank) || mark[a]) return ox_err(x, "axis %lld is out of range or repeated", (long long)axes[i]);
    if (!un && d->dims[a] != 1) return ox_err(x, "axis %lld has size %lld, not 1", (long long)axes[i], (long long)d->dims[a]);
    mark[a] = 1;
  }
  int64_t dims[OX_MAX_RANK];
  int r = 0;
  for (int i = 0, j = 0; i < (un ? out_rank : d->rank); i++) {
    if (un) dims[r++] = mark[i] ? 1 : d->dims[j++];
    else if (!(n ? mark[i] : d->dims[i] == 1)) dims[r++] = d->dims[i];
  }
  if (d == &act) {
    if ((un ? mark[0] : (n ? mark[0] : d->dims[0] == 1)) &&
        ox_cross_dim0(x, un ? "inserting a dim 0 into an activation" : "removing dim 0 of an activation"))
      return -1;
    return ox_reshape_to(x, src->ir, dims, r);
  }
  ox_const *c = ox_const_new(x, r, dims, d->is_int);
  memcpy(d->is_int ? (void *)c->i : (void *)c->f, d->is_int ? (void *)d->i : (void *)d->f,
         (size_t)d->numel * (d->is_int ? sizeof *d->i : sizeof *d->f));
  return ox_bind(x, x->node->output[0], -1, c);
}
int ox_op_unsqueeze(ox_ctx *x) { return squeeze(x, 1); }
int ox_op_squeeze(ox_ctx *x) { return squeeze(x, 0); }

/* Reshape of a constant (called by Reshape's converter): the data stay, the dims change. */
int ox_fold_reshape(ox_ctx *x, const ox_const *d, const int64_t *dims, int rank) {
  ox_const *c = ox_const_new(x, rank, dims, d->is_int);
  if (c->numel != d->numel) return ox_err(x, "reshaping %lld constant values to %lld", (long long)d->numel, (long long)c->numel);
  if (d->is_int) memcpy(c->i, d->i, (size_t)d->numel * sizeof *c->i);
  else memcpy(c->f, d->f, (size_t)d->numel * sizeof *c->f);
  return ox_bind(x, x->node->output[0], -1, c);
}

/* Row-major strides of c's dims. */
static void strides_of(const ox_const *c, int64_t *st) {
  int64_t s = 1;
  for (int k = c->rank - 1; k >= 0; k--) st[k] = s, s *= c->dims[k];
}

/* c[src] -> r[dst] for the element at multi-index idx of r (src from the map). */
static void copy_elem(ox_const *r, int64_t dst, const ox_const *c, int64_t src) {
  if (r->is_int) r->i[dst] = c->i[src];
  else r->f[dst] = c->f[src];
}

/* Transpose of a constant by perm (default: reversed dims). */
int ox_fold_transpose(ox_ctx *x, const ox_const *c, const int64_t *perm, int n) {
  int64_t p[OX_MAX_RANK], dims[OX_MAX_RANK], st[OX_MAX_RANK], idx[OX_MAX_RANK] = {0};
  if (n && n != c->rank) return ox_err(x, "perm has %d items for a rank-%d tensor", n, c->rank);
  unsigned char seen[OX_MAX_RANK] = {0};
  for (int k = 0; k < c->rank; k++) {
    p[k] = n ? perm[k] : c->rank - 1 - k;
    if (p[k] < 0 || p[k] >= c->rank || seen[p[k]]) return ox_err(x, "perm is not a permutation");
    seen[p[k]] = 1;
    dims[k] = c->dims[p[k]];
  }
  strides_of(c, st);
  ox_const *r = ox_const_new(x, c->rank, dims, c->is_int);
  for (int64_t e = 0; e < r->numel; e++) {
    int64_t src = 0;
    for (int k = 0; k < c->rank; k++) src += idx[k] * st[p[k]];
    copy_elem(r, e, c, src);
    for (int k = c->rank - 1; k >= 0 && ++idx[k] == dims[k]; k--) idx[k] = 0;
  }
  return ox_bind(x, x->node->output[0], -1, r);
}

/* Slice of a constant: any axes and steps (negative too), as ONNX clamps them. */
static int fold_slice(ox_ctx *x, const ox_const *c, const int64_t *st0, const int64_t *en0, const int64_t *ax, int na,
                      const int64_t *sp, int ns, int n) {
  int64_t start[OX_MAX_RANK], step[OX_MAX_RANK], dims[OX_MAX_RANK], st[OX_MAX_RANK], idx[OX_MAX_RANK] = {0};
  for (int k = 0; k < c->rank; k++) start[k] = 0, step[k] = 1, dims[k] = c->dims[k];
  for (int i = 0; i < n; i++) {
    int64_t a = na >= 0 ? ax[i] : i, s = ns >= 0 ? sp[i] : 1, d;
    if (a < 0) a += c->rank;
    if (a < 0 || a >= c->rank) return ox_err(x, "axis %lld is out of range", (long long)a);
    if (s == 0) return ox_err(x, "step 0");
    d = c->dims[a];
    int64_t b = st0[i], e = en0[i];
    if (b < 0) b += d;
    if (e < 0) e += d;
    if (s > 0) {
      b = b < 0 ? 0 : b > d ? d : b;
      e = e < 0 ? 0 : e > d ? d : e;
      dims[a] = e > b ? (e - b + s - 1) / s : 0;
    } else {
      b = b < 0 ? -1 : b > d - 1 ? d - 1 : b;
      e = e < -1 ? -1 : e > d - 1 ? d - 1 : e;
      dims[a] = b > e ? (b - e - s - 1) / -s : 0;
    }
    start[a] = b, step[a] = s;
  }
  strides_of(c, st);
  ox_const *r = ox_const_new(x, c->rank, dims, c->is_int);
  for (int64_t e = 0; e < r->numel; e++) {
    int64_t src = 0;
    for (int k = 0; k < c->rank; k++) src += (start[k] + idx[k] * step[k]) * st[k];
    copy_elem(r, e, c, src);
    for (int k = c->rank - 1; k >= 0 && ++idx[k] == dims[k]; k--) idx[k] = 0;
  }
  return ox_bind(x, x->node->output[0], -1, r);
}

/* ConstantOfShape: a constant tensor of the given (constant) shape filled with one value. */
int ox_op_constant_of_shape(ox_ctx *x) {
  if (ox_check_attrs(x, "value")) return -1;
  const ox_const *s = ox_need_const(x, 0, "the shape");
  if (!s) return -1;
  if (!s->is_int || s->rank != 1 || s->numel > OX_MAX_RANK) return ox_err(x, "the shape must be at most %d integers", OX_MAX_RANK);
  int64_t numel = 1;
  for (int64_t i = 0; i < s->numel; i++) {
    if (s->i[i] < 0 || s->i[i] > OX_MAX_CONST_NUMEL) return ox_err(x, "shape item %lld is %lld", (long long)i, (long long)s->i[i]);
    numel *= s->i[i];
    if (numel > OX_MAX_CONST_NUMEL) return ox_err(x, "the result would have more than %lld elements", (long long)OX_MAX_CONST_NUMEL);
  }
  const Onnx__AttributeProto *at = ox_attr(x, "value");
  const ox_const *v = NULL;
  if (at) {
    if (!at->t) return ox_err(x, "attribute 'value' holds no tensor");
    if (!(v = ox_tensor(x, at->t, "value"))) return -1;
    if (v->numel != 1) return ox_err(x, "attribute 'value' must hold one element");
  }
  ox_const *c = ox_const_new(x, (int)s->numel, s->i, v ? v->is_int : 0);
  for (int64_t i = 0; i < numel; i++) {
    if (c->is_int) c->i[i] = v->i[0];
    else c->f[i] = v ? v->f[0] : 0.0f;
  }
  return ox_bind(x, x->node->output[0], -1, c);
}

int ox_op_cast(ox_ctx *x) {
  if (ox_check_attrs(x, "to")) return -1;
  const ox_const *d = ox_need_const(x, 0, "the data (Cast of activations is not supported)");
  int64_t to;
  if (!d || ox_attr_int(x, "to", 0, &to) < 0) return -1;
  int is_int;
  switch (to) {
  case OX_FLOAT: case OX_DOUBLE: is_int = 0; break;
  case OX_INT64: case OX_INT32: case OX_INT8: case OX_UINT8: is_int = 1; break;
  default: return ox_err(x, "Cast to type %lld is not supported", (long long)to);
  }
  ox_const *c = ox_const_new(x, d->rank, d->dims, is_int);
  for (int64_t i = 0; i < d->numel; i++) {
    if (is_int) {
      double v = d->is_int ? (double)d->i[i] : d->f[i];
      if (!(v > -9.2e18 && v < 9.2e18)) return ox_err(x, "value %g does not fit an integer", v);
      c->i[i] = (int64_t)v; /* truncation toward zero, as ONNX casts */
    } else {
      c->f[i] = d->is_int ? (float)d->i[i] : d->f[i];
    }
  }
  return ox_bind(x, x->node->output[0], -1, c);
}

/* Concat of constants along an axis. */
static int concat_const(ox_ctx *x, int64_t axis) {
  int n = (int)x->node->n_input;
  const ox_const *c0 = ox_need_const(x, 0, "a concatenated value");
  if (!c0) return -1;
  if (axis < 0) axis += c0->rank;
  if (axis < 0 || axis >= c0->rank) return ox_err(x, "axis is out of range for rank %d", c0->rank);
  int64_t dims[OX_MAX_RANK];
  memcpy(dims, c0->dims, sizeof dims);
  dims[axis] = 0;
  int is_int = 1;
  for (int i = 0; i < n; i++) {
    const ox_const *c = ox_need_const(x, i, "a concatenated value");
    if (!c) return -1;
    if (c->rank != c0->rank) return ox_err(x, "input %d has rank %d, input 0 rank %d", i, c->rank, c0->rank);
    for (int k = 0; k < c->rank; k++)
      if (k != axis && c->dims[k] != c0->dims[k]) return ox_err(x, "input %d's dim %d differs from input 0's", i, k);
    dims[axis] += c->dims[axis];
    is_int &= c->is_int;
  }
  ox_const *r = ox_const_new(x, c0->rank, dims, is_int);
  int64_t outer = 1, inner = 1;
  for (int k = 0; k < axis; k++) outer *= dims[k];
  for (int k = (int)axis + 1; k < c0->rank; k++) inner *= dims[k];
  int64_t at = 0;
  for (int64_t o = 0; o < outer; o++)
    for (int i = 0; i < n; i++) {
      const ox_const *c = ox_find(x, x->node->input[i])->c;
      int64_t len = c->dims[axis] * inner;
      for (int64_t k = 0; k < len; k++, at++) {
        int64_t s = o * len + k;
        if (is_int) r->i[at] = c->i[s];
        else r->f[at] = c->is_int ? (float)c->i[s] : c->f[s];
      }
    }
  return ox_bind(x, x->node->output[0], -1, r);
}

/* Concat of activations along a dim past the batch (or dim 0 when x->dim0_free): one IR concat of up to IR_MAX_IN inputs,
 * a chain of them for more (the running result is the first input of the next link). */
int ox_op_concat(ox_ctx *x) {
  if (ox_check_attrs(x, "axis")) return -1;
  int64_t axis;
  if (ox_attr_int(x, x->opset < 4 ? "axis" : "axis", 1, &axis) < 0) return -1;
  int n = (int)x->node->n_input, all_const = 1;
  if (n < 1) return ox_err(x, "needs at least one input");
  for (int i = 0; i < n; i++) {
    ox_val *v = ox_input(x, i);
    if (!v) return -1;
    all_const &= v->c != NULL && v->ir < 0;
  }
  if (all_const) return concat_const(x, axis);
  int first = ox_act(x, 0);
  if (first < 0) return -1;
  int rank = ox_shape(x, first)->rank;
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= rank) return ox_err(x, "attribute 'axis' is out of range for rank %d", rank);
  if (axis == 0 && ox_cross_dim0(x, "concatenation along axis 0")) return -1;
  ir_attr a = {0};
  a.concat.axis = (int)axis;
  if (n == 1) return ox_bind(x, x->node->output[0], first, NULL);
  int acc = first, i = 1, link = 0;
  while (i < n) {
    int in[IR_MAX_IN], k = 0;
    in[k++] = acc;
    while (k < IR_MAX_IN && i < n) {
      if ((in[k++] = ox_act(x, i++)) < 0) return -1;
    }
    if (i == n) return ox_node(x, IR_OP_concat, in, k, &a);
    if ((acc = ox_part_node(x, ir_fmt(x->a, "part%d", link++), IR_OP_concat, in, k, &a)) < 0) return -1;
  }
  return -1; /* not reached */
}

/* Slice: starts/ends/axes/steps as constant inputs (opset >= 10) or attributes; any nonzero step along
 * dims past the batch, or dim 0 when x->dim0_free (a chain of IR slices for several axes). */
int ox_op_slice(ox_ctx *x) {
  if (ox_check_attrs(x, x->opset < 10 ? "starts,ends,axes" : "")) return -1;
  const ox_val *src = ox_input(x, 0);
  if (!src) return -1;
  int folded = src->c && src->ir < 0, in = folded ? -1 : ox_act(x, 0);
  if (!folded && in < 0) return -1;
  int64_t st[OX_MAX_RANK], en[OX_MAX_RANK], ax[OX_MAX_RANK], sp[OX_MAX_RANK];
  int n = 0, na = -1, ns = -1;
  if (x->opset < 10) {
    int ne;
    if (ox_attr_ints(x, "starts", OX_MAX_RANK, st, &n) < 0 || ox_attr_ints(x, "ends", OX_MAX_RANK, en, &ne) < 0 ||
        ox_attr_ints(x, "axes", OX_MAX_RANK, ax, &na) < 0)
      return -1;
    if (!ox_attr(x, "axes")) na = -1;
    if (ne != n) return ox_err(x, "starts and ends differ in length");
  } else {
    int64_t *dst[4] = {st, en, ax, sp};
    int *cnt[4] = {&n, NULL, &na, &ns};
    static const char *const what[] = {"starts", "ends", "axes", "steps"};
    for (int k = 0; k < 4; k++) {
      if (k >= 2 && !ox_has_input(x, k + 1)) continue;
      const ox_const *c = ox_need_const(x, k + 1, what[k]);
      if (!c) return -1;
      if (!c->is_int || c->rank != 1 || c->numel > OX_MAX_RANK)
        return ox_err(x, "%s must be a list of at most %d integers", what[k], OX_MAX_RANK);
      for (int64_t i = 0; i < c->numel; i++) dst[k][i] = c->i[i];
      if (cnt[k]) *cnt[k] = (int)c->numel;
      else if (c->numel != n) return ox_err(x, "starts and ends differ in length");
    }
  }
  if ((na >= 0 && na != n) || (ns >= 0 && ns != n)) return ox_err(x, "starts, axes and steps differ in length");
  if (folded) return fold_slice(x, src->c, st, en, ax, na, sp, ns, n);
  int cur = in;
  const ir_shape *s0 = ox_shape(x, in);
  int rank = s0->rank, last = -1;
  for (int i = 0; i < n; i++) last = i;
  if (n == 0) return ox_bind(x, x->node->output[0], in, NULL);
  for (int i = 0; i < n; i++) {
    int64_t a = na >= 0 ? ax[i] : i, step = ns >= 0 ? sp[i] : 1;
    if (a < 0) a += rank;
    if (a < 0 || a >= rank) return ox_err(x, "axis %lld is out of range", (long long)(na >= 0 ? ax[i] : i));
    if (step == 0 || step < -FE_MAX_DIM || step > FE_MAX_DIM)
      return ox_err(x, "step %lld is out of range (a nonzero step of at most %d either way)", (long long)step, FE_MAX_DIM);
    int64_t dim = ox_shape(x, cur)->dim[a], b = st[i], e = en[i], len;
    if (b < 0) b += dim;
    if (e < 0) e += dim;
    if (step > 0) { /* ONNX's clamps: [0, dim] going forward, [0, dim - 1] and [-1, dim - 1] going back */
      b = b < 0 ? 0 : b > dim ? dim : b;
      e = e < 0 ? 0 : e > dim ? dim : e;
      len = e > b ? (e - b + step - 1) / step : 0;
    } else {
      b = b < 0 ? 0 : b > dim - 1 ? dim - 1 : b;
      e = e < -1 ? -1 : e > dim - 1 ? dim - 1 : e;
      len = b > e ? (b - e - step - 1) / -step : 0;
    }
    if (len < 1) return ox_err(x, "the slice of axis %lld is empty (cnnc's tensors have no empty dims)", (long long)a);
    if (a == 0 && (len != dim || step != 1) && ox_cross_dim0(x, "slicing axis 0")) return -1;
    if (step == 1 && len == dim) {
      if (i == last) return ox_bind(x, x->node->output[0], cur, NULL);
      continue;
    }
    ir_attr at = {0};
    at.slice = (ir_slice_attr){(int)a, b, len, step};
    if (i == last) return ox_node(x, IR_OP_slice, &cur, 1, &at);
    if ((cur = ox_part_node(x, ir_fmt(x->a, "axis%lld", (long long)a), IR_OP_slice, &cur, 1, &at)) < 0) return -1;
  }
  return -1; /* not reached */
}

/* Split into several outputs along a dim past the batch (or dim 0 when x->dim0_free): one IR
 * slice per output. */
int ox_op_split(ox_ctx *x) {
  if (ox_check_attrs(x, x->opset < 13 ? "axis,split" : "axis")) return -1;
  int in = ox_act(x, 0);
  if (in < 0) return -1;
  int64_t axis, parts[IR_MAX_IN * 8];
  int np = 0, nout = (int)x->node->n_output;
  if (ox_attr_int(x, "axis", 0, &axis) < 0) return -1;
  const ir_shape *s = ox_shape(x, in);
  if (axis < 0) axis += s->rank;
  if (axis < 0 || axis >= s->rank) return ox_err(x, "attribute 'axis' is out of range for rank %d", s->rank);
  if (axis == 0 && nout > 1 && ox_cross_dim0(x, "a split along axis 0")) return -1;
  if (nout < 1 || nout > IR_MAX_IN * 8) return ox_err(x, "%d outputs (1 to %d)", nout, IR_MAX_IN * 8);
  if (x->opset < 13) {
    if (ox_attr_ints(x, "split", IR_MAX_IN * 8, parts, &np) < 0) return -1;
  } else if (ox_has_input(x, 1)) {
    const ox_const *c = ox_need_const(x, 1, "split");
    if (!c) return -1;
    if (!c->is_int || c->rank != 1 || c->numel > IR_MAX_IN * 8) return ox_err(x, "split must be a list of integers");
    for (int64_t i = 0; i < c->numel; i++) parts[np++] = c->i[i];
  }
  int64_t dim = s->dim[axis];
  if (!np) {
    if (dim % nout) return ox_err(x, "dim %lld of size %lld does not split into %d equal parts", (long long)axis, (long long)dim, nout);
    for (int i = 0; i < nout; i++) parts[np++] = dim / nout;
  }
  if (np != nout) return ox_err(x, "split has %d sizes for %d outputs", np, nout);
  int64_t off = 0;
  for (int i = 0; i < np; i++) {
    if (parts[i] < 1) return ox_err(x, "split size %d is %lld (empty outputs are not supported)", i, (long long)parts[i]);
    off += parts[i];
  }
  if (off != dim) return ox_err(x, "split sizes add up to %lld, the dim is %lld", (long long)off, (long long)dim);
  off = 0;
  for (int i = 0; i < np; i++) {
    ir_attr a = {0};
    a.slice = (ir_slice_attr){(int)axis, off, parts[i]};
    off += parts[i];
    if (!x->node->output[i][0]) continue;
    int v = i == 0 && np == 1 ? in : ox_part_node(x, ir_fmt(x->a, "out%d", i), IR_OP_slice, &in, 1, &a);
    if (v < 0 || ox_bind(x, x->node->output[i], v, NULL)) return -1;
  }
  return 0;
}

/* Add, Sub, Mul, Div of two constants (same shape, or one of them a single value). */
static int fold_binary(ox_ctx *x, char op) {
  const ox_const *a = ox_find(x, x->node->input[0])->c, *b = ox_find(x, x->node->input[1])->c;
  const ox_const *big = a->numel > b->numel || (a->numel == b->numel && a->rank >= b->rank) ? a : b;
  if (a->numel != b->numel && a->numel != 1 && b->numel != 1)
    return ox_err(x, "folding this op on constants of different shapes is not supported");
  int is_int = a->is_int && b->is_int;
  ox_const *r = ox_const_new(x, big->rank, big->dims, is_int);
  for (int64_t i = 0; i < big->numel; i++) {
    int64_t ia = a->numel == 1 ? 0 : i, ib = b->numel == 1 ? 0 : i;
    if (is_int) {
      int64_t u = a->i[ia], v = b->i[ib];
      if (op == '/' && v == 0) return ox_err(x, "integer division by zero");
      r->i[i] = op == '+' ? u + v : op == '-' ? u - v : op == '*' ? u * v : u / v;
    } else {
      double u = a->is_int ? (double)a->i[ia] : a->f[ia], v = b->is_int ? (double)b->i[ib] : b->f[ib];
      r->f[i] = (float)(op == '+' ? u + v : op == '-' ? u - v : op == '*' ? u * v : u / v);
    }
  }
  return ox_bind(x, x->node->output[0], -1, r);
}

/* A constant with c's dims (a scalar when c is NULL) holding f(c) (or k), as a parameter. */
static int const_param(ox_ctx *x, const char *suffix, const ox_const *c, double k, int neg_or_inv) {
  ox_const *r = ox_const_new(x, c ? c->rank : 0, c ? c->dims : NULL, 0);
  for (int64_t i = 0; i < r->numel; i++) {
    double v = c ? (c->is_int ? (double)c->i[i] : c->f[i]) : k;
    r->f[i] = (float)(neg_or_inv == '-' ? -v : neg_or_inv == '/' ? 1.0 / v : v);
  }
  return ox_param(x, suffix, r, 0, 0, NULL);
}

/* a - b as IR adds and muls: a + (-b) for a constant b; a + b * -1 otherwise. */
static int sub_act(ox_ctx *x, ox_val *u, ox_val *v) {
  int in[2];
  if (v->c && v->ir < 0) { /* a - c = a + (-c) */
    if ((in[0] = ox_act(x, 0)) < 0 || (in[1] = const_param(x, "neg1", v->c, 0, '-')) < 0) return -1;
    if (ir_shape_numel(ox_shape(x, in[1])) > ir_shape_numel(ox_shape(x, in[0])))
      return ox_err(x, "the constant operand is larger than the activation");
    return ox_node(x, IR_OP_add, in, 2, NULL);
  }
  int b = ox_act(x, 1), m1 = const_param(x, "minus_one", NULL, -1.0, 0);
  if (b < 0 || m1 < 0) return -1;
  int nb[2] = {b, m1};
  if ((in[1] = ox_part_node(x, "neg", IR_OP_mul, nb, 2, NULL)) < 0 || (in[0] = ox_act(x, 0)) < 0) return -1;
  (void)u;
  if (ir_shape_numel(ox_shape(x, in[1])) > ir_shape_numel(ox_shape(x, in[0]))) {
    if (x->g->values[in[0]].kind == IR_VAL_PARAM || ir_shape_numel(ox_shape(x, in[0])) < ir_shape_numel(ox_shape(x, in[1]))) {
      int t = in[0];
      in[0] = in[1], in[1] = t; /* -b + a: add broadcasts its second operand */
    }
  }
  return ox_node(x, IR_OP_add, in, 2, NULL);
}

/* a / c = a * (1/c) for a constant c (within an ulp of the quotient). */
static int div_act(ox_ctx *x, ox_val *v) {
  if (!(v->c && v->ir < 0)) return ox_div_act(x); /* onnx_reduce.c */
  for (int64_t i = 0; i < v->c->numel; i++)
    if ((v->c->is_int ? (double)v->c->i[i] : v->c->f[i]) == 0) return ox_err(x, "division by a constant 0");
  int in[2];
  if ((in[0] = ox_act(x, 0)) < 0 || (in[1] = const_param(x, "reciprocal1", v->c, 0, '/')) < 0) return -1;
  if (ir_shape_numel(ox_shape(x, in[1])) > ir_shape_numel(ox_shape(x, in[0])))
    return ox_err(x, "the constant divisor is larger than the dividend");
  return ox_node(x, IR_OP_mul, in, 2, NULL);
}

/* Both operands constant: fold; else the IR op (Add, Mul) or unsupported (Sub, Div). */
static int arith(ox_ctx *x, char op) {
  if (x->node->n_input != 2) return ox_err(x, "takes 2 inputs (got %zu)", x->node->n_input);
  ox_val *u = ox_input(x, 0), *v = u ? ox_input(x, 1) : NULL;
  if (!v) return -1;
  if (u->c && v->c) {
    if (ox_check_attrs(x, x->opset < 7 ? "broadcast,axis,consumed_inputs" : "")) return -1;
    return fold_binary(x, op);
  }
  if ((u->ir >= 0 && u->itype) || (v->ir >= 0 && v->itype)) return ox_int_arith(x, op); /* onnx_integer.c */
  if (op == '+') return ox_binary(x, IR_OP_add);
  if (op == '*') return ox_binary(x, IR_OP_mul);
  if (ox_check_attrs(x, x->opset < 7 ? "broadcast,consumed_inputs" : "")) return -1;
  return op == '-' ? sub_act(x, u, v) : div_act(x, v);
}
int ox_op_add(ox_ctx *x) { return arith(x, '+'); }
int ox_op_sub(ox_ctx *x) { return arith(x, '-'); }
int ox_op_mul(ox_ctx *x) { return arith(x, '*'); }
int ox_op_div(ox_ctx *x) { return arith(x, '/'); }

/* ---- Pad ---------------------------------------------------------------------------------- */
/* Pad with zeros of the two spatial dims of an [N, C, H, W] tensor: an alias when it pads
 * nothing, else folded into its one reader when that is a Conv or an AveragePool (the window's
 * padding grows); other Pads are not supported. */
/* A Pad as IR ops: per padded dim a slice (a negative pad crops), then for mode constant a
 * slice_grad (x placed with zeros around it), for reflect and edge pad_from_x; a nonzero
 * constant value is then added where the padding is (a frozen parameter of the result's shape
 * holding value there and 0 elsewhere).  Padding dim 0 crosses it (docs/onnx.md "Dim 0"). */
/* x along dim d with b elements before and e after from x itself (reflect: the mirror image
 * without the edge, slices with step -1; edge: the edge element repeated), joined by concats. */
static int pad_from_x(ox_ctx *x, int in, int d, int64_t b, int64_t e, int reflect) {
  int64_t dim = ox_shape(x, in)->dim[d];
  if (reflect && (b >= dim || e >= dim))
    return ox_err(x, "reflect pads of %lld and %lld for dim %d of size %lld (at most size - 1)", (long long)b, (long long)e, d,
                  (long long)dim);
  if (b > FE_MAX_K || e > FE_MAX_K) return ox_err(x, "pads over %d", FE_MAX_K);
  int acc = -1, k = 0;
  for (int side = 0; side < 3; side++) {
    int64_t n = side == 0 ? b : side == 2 ? e : 1;
    for (int64_t j = 0; j < n; j++) {
      ir_attr sa = {0};
      int v = in;
      if (side != 1) {
        if (reflect) { /* before: x[b], x[b-1], .., x[1]; after: x[dim-2], x[dim-3], .. */
          sa.slice = side == 0 ? (ir_slice_attr){d, b, b, -1} : (ir_slice_attr){d, dim - 2, e, -1};
          j = n; /* one slice for the whole side */
        } else {
          sa.slice = (ir_slice_attr){d, side == 0 ? 0 : dim - 1, 1};
        }
        if ((v = ox_part_node(x, ir_fmt(x->a, "pad%d/part%d", d, k++), IR_OP_slice, &in, 1, &sa)) < 0) return -1;
      }
      if (acc < 0) {
        acc = v;
        continue;
      }
      ir_attr ca = {.concat = {d}};
      int two[2] = {acc, v};
      if ((acc = ox_part_node(x, ir_fmt(x->a, "pad%d/cat%d", d, k++), IR_OP_concat, two, 2, &ca)) < 0) return -1;
    }
  }
  return acc;
}

static int pad_node(ox_ctx *x, int in, const int64_t *p, double value, const char *mode) {
  int r = ox_shape(x, in)->rank, reflect = !strcmp(mode, "reflect"), edge = !strcmp(mode, "edge");
  for (int d = 0; d < r; d++) {
    int64_t b = p[d], e = p[r + d], dim = ox_shape(x, in)->dim[d];
    if (!b && !e) continue;
    if (d == 0 && ox_cross_dim0(x, "padding dim 0")) return -1;
    if (b < 0 || e < 0) { /* crop first */
      int64_t c0 = b < 0 ? -b : 0, c1 = e < 0 ? -e : 0;
      if (c0 + c1 >= dim) return ox_err(x, "the pads of dim %d leave nothing (cnnc's tensors have no empty dims)", d);
      ir_attr sa = {0};
      sa.slice = (ir_slice_attr){d, c0, dim - c0 - c1};
      if ((in = ox_part_node(x, ir_fmt(x->a, "crop%d", d), IR_OP_slice, &in, 1, &sa)) < 0) return -1;
      dim -= c0 + c1, b = b < 0 ? 0 : b, e = e < 0 ? 0 : e;
      if (!b && !e) continue;
    }
    if (reflect || edge) {
      if ((in = pad_from_x(x, in, d, b, e, reflect)) < 0) return -1;
      continue;
    }
    ir_attr za = {0};
    za.slice_grad.slice = (ir_slice_attr){d, b, dim};
    za.slice_grad.x_shape = *ox_shape(x, in);
    za.slice_grad.x_shape.dim[d] = dim + b + e;
    if (ir_shape_numel(&za.slice_grad.x_shape) > OX_MAX_CONST_NUMEL) return ox_err(x, "the padded tensor would have over 2^30 elements");
    if ((in = ox_part_node(x, ir_fmt(x->a, "pad%d", d), IR_OP_slice_grad, &in, 1, &za)) < 0) return -1;
  }
  if (value == 0 || reflect || edge) return ox_bind(x, x->node->output[0], in, NULL) ? -1 : 0;
  if (x->training) /* the training kernels read parameters by pointer; an add's frozen operand is a constant */
    return ox_err(x, "padding with %g is not supported with --mode training (only zeros)", value);
  const ir_shape *ys = ox_shape(x, in);
  int64_t dims[IR_MAX_RANK], idx[IR_MAX_RANK] = {0}, total = ir_shape_numel(ys);
  for (int d = 0; d < r; d++) dims[d] = ys->dim[d];
  ox_const *m = ox_const_new(x, r, dims, 0);
  if (!m) return -1;
  for (int64_t i = 0; i < total; i++) {
    int inside = 1;
    for (int d = 0; d < r; d++) inside &= idx[d] >= (p[d] > 0 ? p[d] : 0) && idx[d] < dims[d] - (p[r + d] > 0 ? p[r + d] : 0);
    m->f[i] = inside ? 0.0f : (float)value;
    for (int d = r - 1; d >= 0 && ++idx[d] == dims[d]; d--) idx[d] = 0;
  }
  int add[2] = {in, ox_param(x, "value", m, 0, 0, NULL)};
  return add[1] < 0 ? -1 : ox_node(x, IR_OP_add, add, 2, NULL);
}

int ox_op_pad(ox_ctx *x) {
  if (ox_check_attrs(x, x->opset < 11 ? "mode,pads,value" : "mode")) return -1;
  int in = ox_act(x, 0);
  if (in < 0) return -1;
  const char *mode;
  if (ox_attr_str(x, "mode", "constant", &mode) < 0) return -1;
  if (strcmp(mode, "constant") && strcmp(mode, "reflect") && strcmp(mode, "edge"))
    return ox_err(x, "mode '%s' is not supported (constant, reflect or edge)", mode);
  int64_t p[8];
  int n = 0;
  double value = 0;
  if (x->opset < 11) {
    if (ox_attr_ints(x, "pads", 8, p, &n) < 0 || ox_attr_float(x, "value", 0, &value) < 0) return -1;
  } else {
    const ox_const *c = ox_need_const(x, 1, "pads");
    if (!c) return -1;
    if (!c->is_int || c->rank != 1 || c->numel > 8) return ox_err(x, "pads must be at most 8 integers");
    for (int64_t i = 0; i < c->numel; i++) p[n++] = c->i[i];
    if (ox_has_input(x, 2)) {
      const ox_const *v = ox_need_const(x, 2, "the constant value");
      if (!v) return -1;
      if (v->numel != 1) return ox_err(x, "the constant value must be one number");
      if (v->is_int && (v->i[0] > IR_F32_EXACT_INT || v->i[0] < -IR_F32_EXACT_INT))
        return ox_err(x, "the constant value %lld is beyond 2^24, not an exact f32", (long long)v->i[0]);
      value = v->is_int ? (double)v->i[0] : v->f[0];
    }
    if (ox_has_input(x, 3)) return ox_err(x, "input 3 (axes) is not supported");
  }
  const ir_shape *s = ox_shape(x, in);
  if (n != 2 * s->rank) return ox_err(x, "pads has %d items for a rank-%d input", n, s->rank);
  int any = 0, neg = 0;
  for (int i = 0; i < n; i++) {
    if (p[i] < -FE_MAX_DIM || p[i] > FE_MAX_DIM) return ox_err(x, "pads item %d is %lld (at most %d either way)", i, (long long)p[i], FE_MAX_DIM);
    any |= p[i] != 0;
    neg |= p[i] < 0;
  }
  if (!any) return ox_bind(x, x->node->output[0], in, NULL);
  const char *out = x->node->output[0];
  int slot = -1, k = ox_uses(x, out) == 1 ? ox_next_reader(x, out, &slot) : -1;
  const Onnx__NodeProto *reader = k >= 0 ? x->graph->node[k] : NULL;
  if (value != 0 || neg || strcmp(mode, "constant") || s->rank != 4 || p[0] || p[1] || p[4] || p[5] || !reader || slot != 0 || !reader->op_type ||
      (strcmp(reader->op_type, "Conv") && strcmp(reader->op_type, "AveragePool")))
    return pad_node(x, in, p, value, mode);
  if (ox_bind(x, out, in, NULL)) return -1;
  ox_val *v = ox_find(x, out);
  v->padded = 1;
  v->pad[0] = (int)p[2], v->pad[1] = (int)p[3], v->pad[2] = (int)p[6], v->pad[3] = (int)p[7];
  return 0;
}
