/* ref_round16.c — reference kernel of round16 (issue 6, docs/precision.md): every element
 * rounded to a 16-bit float format and widened back to f32, bit by bit:
 *   bf16  round-to-nearest-even on the top 16 bits of the f32 (same exponent range, so only
 *         the rounding carry can overflow to inf); a NaN stays a quiet NaN.
 *   fp16  IEEE binary16 round-to-nearest-even: magnitudes >= 65520 become inf, below 2^-14
 *         they round to the subnormal grid (multiples of 2^-24), NaN stays a quiet NaN.
 * The compiled kernel (codegen/gen_round16.c) must agree bit for bit. */
#include <math.h>
#include <string.h>

#include "ref_util.h"

static uint32_t bits_of(float x) {
  uint32_t u;
  memcpy(&u, &x, sizeof u);
  return u;
}
static float float_of(uint32_t u) {
  float x;
  memcpy(&x, &u, sizeof x);
  return x;
}

float ir_round16_f32(float x, int format) {
  uint32_t u = bits_of(x), a = u & 0x7fffffffu, sign = u & 0x80000000u;
  if (a > 0x7f800000u) /* NaN: quiet, payload truncated like a hardware conversion */
    return float_of((u | 0x00400000u) & (format == IR_HALF_FP16 ? 0xffffe000u : 0xffff0000u));
  if (format != IR_HALF_FP16) return float_of((u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u);
  if (a >= 0x477ff000u) return float_of(sign | 0x7f800000u); /* >= 65520 (incl. inf): inf */
  if (a < 0x38800000u) { /* below 2^-14: subnormal grid 2^-24 (the scaling is exact) */
    float m = rintf(float_of(a) * 0x1p24f) * 0x1p-24f;
    return float_of(sign | bits_of(m));
  }
  return float_of(sign | ((a + 0xfffu + ((a >> 13) & 1u)) & ~0x1fffu)); /* 10 mantissa bits */
}

REF_VECTORIZE
void ir_ref_round16(const ir_graph *g, const ir_node *n, const float *const *in, float *out) {
  int64_t k = ir_shape_numel(ref_out_shape(g, n));
  int f = n->attr.round16.format;
  if (n->n_in == 2) { /* --auto-loss-scaling: the gradient as it would be stored scaled by s (passes/optimizer.c) */
    float s = in[1][0];
    for (int64_t i = 0; i < k; i++) out[i] = ir_round16_f32(in[0][i] * s, f) / s;
    return;
  }
  for (int64_t i = 0; i < k; i++) out[i] = ir_round16_f32(in[0][i], f);
}

/* 16-bit storage (passes/store16.c).  The interpreter holds a 16-bit value as its f32 value:
 * narrow16 = round16 (keep_sign: a positive x never becomes 0, the smallest positive 16-bit
 * value instead), widen16 = a copy. */
float ir_narrow16_f32(float x, int format, int keep_sign) {
  float r = ir_round16_f32(x, format);
  if (keep_sign && x > 0 && r == 0) return format == IR_HALF_FP16 ? 0x1p-24f : 0x1p-133f;
  return r;
}

REF_VECTORIZE
void ir_ref_narrow16(const ir_graph *g, const ir_node *n, const float *const *in, float *out) {
  int64_t k = ir_shape_numel(ref_out_shape(g, n));
  for (int64_t i = 0; i < k; i++) out[i] = ir_narrow16_f32(in[0][i], n->attr.narrow16.format, n->attr.narrow16.keep_sign);
}

REF_VECTORIZE
void ir_ref_widen16(const ir_graph *g, const ir_node *n, const float *const *in, float *out) {
  int64_t k = ir_shape_numel(ref_out_shape(g, n));
  for (int64_t i = 0; i < k; i++) out[i] = in[0][i];
}
