/* init.c — deterministic framework-style parameter initialisation.  Each parameter draws
 * from its own splitmix64 stream seeded by (seed, FNV-1a hash of its name), so adding or
 * removing a layer never changes the other layers' weights.  Roles come from the name
 * suffix (/weight, /bias, /gamma, ...) and the consuming op (conv vs dense). */
#include <math.h>
#include <string.h>

#include "ref_util.h"

typedef enum { ROLE_UNKNOWN, ROLE_WEIGHT, ROLE_BIAS, ROLE_ZERO, ROLE_ONE } param_role;

static uint64_t fnv1a64(const char *s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
  return h;
}

/* splitmix64 generator: state advances by the golden gamma, output is the finaliser. */
static uint64_t rng_next(uint64_t *state) {
  uint64_t z = ref_mix64(*state);
  *state += 0x9e3779b97f4a7c15ull;
  return z;
}

/* Uniform double in [0,1) with 53 random bits. */
static double rng_uniform(uint64_t *state) {
  return (double)(rng_next(state) >> 11) * (1.0 / 9007199254740992.0);
}

static int ends_with(const char *s, const char *suffix) {
  size_t n = strlen(s), m = strlen(suffix);
  return n >= m && strcmp(s + n - m, suffix) == 0;
}

static param_role role_from_name(const char *name) {
  if (ends_with(name, "/weight")) return ROLE_WEIGHT;
  if (ends_with(name, "/bias")) return ROLE_BIAS;
  if (ends_with(name, "/gamma") || ends_with(name, "/running_var")) return ROLE_ONE;
  if (ends_with(name, "/beta") || ends_with(name, "/running_mean")) return ROLE_ZERO;
  return ROLE_UNKNOWN;
}

/* Role from the operand position in the consumer (ops.def order), for unconventional names. */
static param_role role_from_use(ir_op op, int pos) {
  switch (op) {
  case IR_OP_conv2d:
  case IR_OP_dense: return pos == 1 ? ROLE_WEIGHT : pos == 2 ? ROLE_BIAS : ROLE_UNKNOWN;
  case IR_OP_batchnorm: return pos == 1 || pos == 4 ? ROLE_ONE : pos >= 2 ? ROLE_ZERO : ROLE_UNKNOWN;
  case IR_OP_groupnorm: return pos == 1 ? ROLE_ONE : pos == 2 ? ROLE_ZERO : ROLE_UNKNOWN;
  default: return ROLE_UNKNOWN;
  }
}

/* First node reading value v; *pos gets the operand index.  NULL if unused. */
static const ir_node *first_consumer(const ir_graph *g, int v, int *pos) {
  for (int i = 0; i < g->n_nodes; i++)
    for (int j = 0; j < g->nodes[i].n_in; j++)
      if (g->nodes[i].in[j] == v) {
        *pos = j;
        return &g->nodes[i];
      }
  return NULL;
}

static void fill(float *p, int64_t k, float v) {
  for (int64_t i = 0; i < k; i++) p[i] = v;
}

/* Fan-in of a conv weight [Cout,Cin/g,KH,KW] (Cin/g*KH*KW) or a dense weight [Out,In] (In). */
static int64_t fan_in(const ir_shape *w) { return w->rank >= 2 ? ref_inner(w, 1) : 1; }

/* Uniform(+-bound) from the param's own stream. */
static void fill_uniform(float *p, int64_t k, double bound, uint64_t *st) {
  for (int64_t i = 0; i < k; i++) p[i] = (float)((2.0 * rng_uniform(st) - 1.0) * bound);
}

/* PyTorch's defaults (nn.Conv2d / nn.Linear reset_parameters): weights kaiming_uniform with
 * a = sqrt(5), i.e. uniform(+-1/sqrt(fan_in)); biases uniform(+-1/sqrt(fan_in)) with the fan-in
 * of the weight of the same conv/dense.  Other biases (consumers that are not conv/dense) are
 * 0.  Models that want another scheme load --weights. */
static void init_weight(ir_value *v, uint64_t *st) {
  fill_uniform(v->data, ir_shape_numel(&v->shape), 1.0 / sqrt((double)fan_in(&v->shape)), st);
}

static void init_bias(const ir_graph *g, ir_value *v, const ir_node *use, int pos, uint64_t *st) {
  int64_t k = ir_shape_numel(&v->shape);
  if (!use || (use->op != IR_OP_conv2d && use->op != IR_OP_dense) || pos != 2) {
    fill(v->data, k, 0.0f);
    return;
  }
  fill_uniform(v->data, k, 1.0 / sqrt((double)fan_in(&g->values[use->in[1]].shape)), st);
}

void ir_init_params(ir_graph *g, uint64_t seed) {
  for (int i = 0; i < g->n_values; i++) {
    ir_value *v = &g->values[i];
    if (v->kind != IR_VAL_PARAM || !v->data) continue;
    int pos = -1;
    const ir_node *use = first_consumer(g, i, &pos);
    param_role role = role_from_name(v->name);
    if (role == ROLE_UNKNOWN && use) role = role_from_use(use->op, pos);
    uint64_t st = ref_mix64(seed) ^ fnv1a64(v->name);
    int64_t k = ir_shape_numel(&v->shape);
    switch (role) {
    case ROLE_WEIGHT: init_weight(v, &st); break;
    case ROLE_BIAS: init_bias(g, v, use, pos, &st); break;
    case ROLE_ZERO: fill(v->data, k, 0.0f); break;
    case ROLE_ONE: fill(v->data, k, 1.0f); break;
    case ROLE_UNKNOWN: break; /* left as is (zeros or loaded data) */
    }
  }
}
