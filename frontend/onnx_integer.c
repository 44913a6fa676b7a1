/* onnx_integer.c — integer tensors of ONNX models (docs/onnx.md "Integer tensors"): they
 * travel as f32 values that are exact integers (every integer up to 2^24 is an f32), which the
 * importer keeps true.  UINT8 / INT8 Add, Sub, Mul and Div compute exactly in f32 (|result| <=
 * 65025) and then wrap to the type (IR cast; Div truncates toward 0); INT32 arithmetic is
 * refused, its result could pass 2^24.  ConvInteger and MatMulInteger subtract the zero points
 * and compute an exact conv / dense whose every partial sum is bounded below 2^24 at import from
 * the weights (else an error naming the node).  Each converter returns 0 or -1 (x->d filled). */
#include <math.h>
#include <string.h>

#include "onnx_int.h"

/* The values an integer type holds (INT32 / INT64: cnnc's f32-exact range). */
static void type_range(int t, double *lo, double *hi) {
  *lo = t == OX_UINT8 ? 0 : t == OX_INT8 ? -128 : -(double)IR_F32_EXACT_INT;
  *hi = t == OX_UINT8 ? 255 : t == OX_INT8 ? 127 : (double)IR_F32_EXACT_INT;
}

static const char *type_name(int t) {
  return t == OX_UINT8 ? "uint8" : t == OX_INT8 ? "int8" : t == OX_INT32 ? "int32" : t == OX_INT64 ? "int64" : "bool";
}

/* Add, Sub, Mul, Div with an integer activation operand. */
int ox_int_arith(ox_ctx *x, char op) {
  if (ox_check_attrs(x, "")) return -1;
  ox_val *u = ox_input(x, 0), *v = u ? ox_input(x, 1) : NULL;
  if (!v) return -1;
  int t = u->ir >= 0 && u->itype ? u->itype : v->itype;
  if (u->ir >= 0 && v->ir >= 0 && u->itype != v->itype) return ox_err(x, "the operands' element types differ");
  if (t != OX_UINT8 && t != OX_INT8)
    return ox_err(x, "%s of %s tensors is not supported: its result could pass 2^24, beyond the integers f32 holds exactly "
                     "(cnnc computes uint8 and int8 arithmetic)", x->node->op_type, type_name(t));
  const ox_val *cv = u->ir < 0 ? u : v->ir < 0 ? v : NULL;
  if (cv && cv->c && !cv->c->is_int) return ox_err(x, "the constant operand is not an integer tensor");
  double lo, hi;
  type_range(t, &lo, &hi);
  for (int64_t i = 0; cv && cv->c && i < cv->c->numel; i++) /* in range: the sums stay exact, Div is not modular */
    if ((double)cv->c->i[i] < lo || (double)cv->c->i[i] > hi)
      return ox_err(x, "the constant operand holds %lld (element %lld), outside %s's range %.0f to %.0f", (long long)cv->c->i[i],
                    (long long)i, type_name(t), lo, hi);
  int a = ox_act(x, 0), b, r;
  if (a < 0) return -1;
  if (op == '-' && v->ir < 0 && v->c) { /* a - c: a + (-c), folded */
    ox_const *nc = ox_const_new(x, v->c->rank, v->c->dims, 1);
    for (int64_t i = 0; i < nc->numel; i++) nc->i[i] = -v->c->i[i];
    b = ox_param(x, "neg1", nc, 0, 0, NULL);
    op = '+';
  } else {
    b = ox_act(x, 1);
  }
  if (b < 0) return -1;
  int64_t na = ir_shape_numel(ox_shape(x, a)), nb = ir_shape_numel(ox_shape(x, b));
  if (op == '/') {
    if (nb > na) return ox_err(x, "the divisor broadcasts to a larger shape than the dividend (not supported)");
    r = ox_part_node(x, "div", IR_OP_div, (int[]){a, b}, 2, NULL);
  } else {
    if (op == '-' && (b = ox_part_node(x, "neg", IR_OP_neg, &b, 1, NULL)) < 0) return -1;
    int in[2] = {nb > na ? b : a, nb > na ? a : b};
    r = ox_part_node(x, op == '*' ? "mul" : op == '-' ? "sub" : "add", op == '*' ? IR_OP_mul : IR_OP_add, in, 2, NULL);
  }
  ir_attr w = {.cast = {IR_F32, t == OX_UINT8 ? IR_U8 : IR_I8}}; /* trunc (Div), wrap modulo 256 */
  if (r < 0 || ox_node(x, IR_OP_cast, &r, 1, &w)) return -1;
  ox_find(x, x->node->output[0])->itype = t;
  return 0;
}

/* Input i (a zero point) as one integer, 0 when absent; -1 with an error otherwise. */
static int scalar_zp(ox_ctx *x, int i, const char *what, int64_t *zp) {
  *zp = 0;
  if (!ox_has_input(x, i)) return 0;
  const ox_const *c = ox_need_const(x, i, what);
  if (!c) return -1;
  if (!c->is_int || c->numel != 1) return ox_err(x, "%s must be one integer (a per-row zero point is not supported)", what);
  *zp = c->i[0];
  return 0;
}

/* ConvInteger / MatMulInteger: the input x (input 0, an integer activation) minus its zero
 * point (input xi), and the weight w minus its zero point (input wi: one value, or one per
 * output: w's dim `axis`) as a float constant.  The bound max|x - xzp| * max over outputs of
 * sum |w - wzp| must stay within 2^24: every partial sum of the product is then exact.
 * Returns the centred input's IR value (or -1); *wf the weight. */
int ox_int_operands(ox_ctx *x, int xi, int wi, int axis, ox_const **wf) {
  int in = ox_act(x, 0);
  if (in < 0) return -1;
  int t = ox_find(x, x->node->input[0])->itype;
  if (t != OX_UINT8 && t != OX_INT8) return ox_err(x, "input 0 must be a uint8 or int8 tensor");
  const ox_const *w = ox_need_const(x, 1, "the weight");
  if (!w) return -1;
  if (!w->is_int) return ox_err(x, "the weight must be an integer tensor");
  int64_t xzp;
  if (scalar_zp(x, xi, "the input's zero point", &xzp)) return -1;
  const ox_const *wz = NULL;
  if (ox_has_input(x, wi) && !(wz = ox_need_const(x, wi, "the weight's zero point"))) return -1;
  if (axis >= w->rank) return ox_err(x, "the weight has rank %d", w->rank);
  if (w->numel < 1) return ox_err(x, "the weight is empty");
  if (xzp > IR_F32_EXACT_INT || xzp < -IR_F32_EXACT_INT) return ox_err(x, "the input's zero point %lld is beyond 2^24", (long long)xzp);
  for (int k = 0; k < 2; k++) { /* weights and zero points bounded first: no int64 overflow below */
    const ox_const *c = k ? wz : w;
    for (int64_t i = 0; c && c->is_int && i < c->numel; i++)
      if (c->i[i] > IR_F32_EXACT_INT || c->i[i] < -IR_F32_EXACT_INT)
        return ox_err(x, "%s holds %lld (element %lld), beyond 2^24", k ? "the weight's zero point" : "the weight",
                      (long long)c->i[i], (long long)i);
  }
  int64_t nout = w->dims[axis], inner = 1;
  for (int d = axis + 1; d < w->rank; d++) inner *= w->dims[d];
  if (wz && (!wz->is_int || (wz->numel != 1 && wz->numel != nout)))
    return ox_err(x, "the weight's zero point must be one integer or %lld (one per output)", (long long)nout);
  ox_const *f = ox_const_new(x, w->rank, w->dims, 0);
  double *sum = ir_alloc(x->a, (size_t)nout * sizeof *sum), lo, hi, most = 0; /* nout <= numel: no bigger than w */
  for (int64_t k = 0; k < w->numel; k++) {
    int64_t o = k / inner % nout, z = wz ? wz->i[wz->numel == 1 ? 0 : o] : 0, d = w->i[k] - z;
    f->f[k] = (float)d;
    sum[o] += fabs((double)d);
  }
  type_range(t, &lo, &hi);
  for (int64_t o = 0; o < nout; o++) most = sum[o] > most ? sum[o] : most;
  double xmax = fmax(fabs(lo - (double)xzp), fabs(hi - (double)xzp)), bound = xmax * most;
  if (bound > (double)IR_F32_EXACT_INT)
    return ox_err(x, "its sums could reach %.0f (%g x the weights' largest |w - zero point| sum %.0f), beyond 2^24: f32 would "
                     "not hold them exactly", bound, xmax, most);
  *wf = f;
  if (!xzp) return in;
  ox_const *c = ox_const_new(x, 0, NULL, 0);
  c->f[0] = (float)-xzp;
  int add[2] = {in, ox_param(x, "minus_zero_point", c, 0, 0, NULL)};
  return add[1] < 0 ? -1 : ox_part_node(x, "centred", IR_OP_add, add, 2, NULL);
}

/* MatMulInteger of A [M, K] (integer activation) by a constant B [K, N]: a dense by B - b_zp
 * (transposed to [N, K]); the result int32. */
int ox_op_matmul_integer(ox_ctx *x) {
  if (ox_check_attrs(x, "")) return -1;
  ox_const *wf;
  int a = ox_int_operands(x, 2, 3, 1, &wf);
  if (a < 0) return -1;
  const ir_shape *as = ox_shape(x, a);
  if (as->rank != 2 || wf->rank != 2 || wf->dims[0] != as->dim[1])
    return ox_err(x, "cnnc imports MatMulInteger of A [M, K] by a constant B [K, N]");
  int64_t K = wf->dims[0], N = wf->dims[1], dims[2] = {N, K};
  if (N > FE_MAX_UNITS) return ox_err(x, "%lld output units (1 to %d)", (long long)N, FE_MAX_UNITS);
  ox_const *wt = ox_const_new(x, 2, dims, 0);
  for (int64_t n = 0; n < N; n++)
    for (int64_t k = 0; k < K; k++) wt->f[n * K + k] = wf->f[k * N + n];
  ir_attr da = {.dense = {(int)N}};
  int in[2] = {a, ox_param(x, "weight", wt, 0, 0, NULL)};
  if (in[1] < 0 || ox_node(x, IR_OP_dense, in, 2, &da)) return -1;
  ox_find(x, x->node->output[0])->itype = OX_INT32;
  return 0;
}
