/* ref_util.h — private helpers shared by the reference kernels (ir/ref_*.c): operand and
 * result shapes of a node, NCHW index arithmetic.  Not part of the public IR API. */
#ifndef CNNC_REF_UTIL_H
#define CNNC_REF_UTIL_H

#include "ir.h"

#define IR_OP(name, attr, min_in, max_in, n_out, kind) \
  void ir_ref_##name(const ir_graph *g, const ir_node *n, const float *const *in, float *out);
#include "ops.def"

/* Put before a reference kernel's hot function: lets GCC vectorize its plain element-wise
 * loops at -O2 too (GCC 12's -O2 only vectorizes loops whose trip count is a known multiple
 * of the vector width).  Results are unchanged: without -ffast-math GCC never reorders a
 * floating-point sum, it only does independent elements side by side. */
#if defined(__GNUC__) && !defined(__clang__)
#define REF_VECTORIZE __attribute__((optimize("tree-vectorize", "vect-cost-model=dynamic")))
#else
#define REF_VECTORIZE
#endif

/* ref_pool.c: the plane index of the element maxpool picks in window (oy, ox), or -1. */
int64_t ir_ref_pool_argmax(const ir_pool_attr *a, const float *plane, int64_t h, int64_t w, int64_t oy, int64_t ox);

/* Shape of operand i of n. */
static inline const ir_shape *ref_in_shape(const ir_graph *g, const ir_node *n, int i) {
  return &g->values[n->in[i]].shape;
}

/* Shape of the result of n. */
static inline const ir_shape *ref_out_shape(const ir_graph *g, const ir_node *n) {
  return &g->values[n->out].shape;
}

/* Dimension d of s, or 1 when s has fewer dimensions (so [N,C] is [N,C,1,1]). */
static inline int64_t ref_dim(const ir_shape *s, int d) {
  return d < s->rank ? s->dim[d] : 1;
}

/* Product of the dimensions from `from` on (the "spatial" size for from = 2). */
static inline int64_t ref_inner(const ir_shape *s, int from) {
  int64_t p = 1;
  for (int d = from; d < s->rank; d++) p *= s->dim[d];
  return p;
}

/* splitmix64 finaliser (Steele et al.); the hash behind dropout masks and weight init. */
static inline uint64_t ref_mix64(uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

#endif
