/* ref_runner.c — runs one op through the reference interpreter for external comparisons
 * (tests/scripts/test_ref_vs_torch.py).  Usage: ref_runner SPEC.  SPEC is line-based text,
 * '#' starts a comment; operand lines come in operand order; files are raw little-endian f32:
 *
 *   op conv2d                     row name of ops.def
 *   attr stride 2 2               typed attribute (names as in the ir_<attr>_attr structs)
 *   input 2 3 8 8 x.bin           operand 0: the graph input, dims then file
 *   param 4 3 3 3 w.bin           a parameter operand (data copied into the graph)
 *   label y.bin                   softmax_xent labels, shape [N]
 *   output y.out                  where the result goes
 *   dump 3 rm.out                 after running, write param operand 3 (e.g. running_mean)
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir.h"

#define MAX_TOK 16

typedef enum { A_INT, A_FLOAT, A_U64, A_SHAPE } attr_type;

/* One settable attribute: op, key, type, byte offset in ir_attr, element count. */
typedef struct attr_field {
  ir_op op;
  const char *key;
  attr_type type;
  size_t off;
  int count;
} attr_field;

#define F(op, member, key, type, count) {IR_OP_##op, key, type, offsetof(ir_attr, op.member), count}
static const attr_field attr_fields[] = {
    F(conv2d, kernel, "kernel", A_INT, 2),       F(conv2d, stride, "stride", A_INT, 2),
    F(conv2d, pad, "pad", A_INT, 4),             F(conv2d, dilation, "dilation", A_INT, 2),
    F(conv2d, groups, "groups", A_INT, 1),       F(batchnorm, eps, "eps", A_FLOAT, 1),
    F(batchnorm, momentum, "momentum", A_FLOAT, 1), F(batchnorm, training, "training", A_INT, 1),
    F(groupnorm, groups, "groups", A_INT, 1),    F(groupnorm, eps, "eps", A_FLOAT, 1),
    F(maxpool, kernel, "kernel", A_INT, 2),      F(maxpool, stride, "stride", A_INT, 2),
    F(maxpool, pad, "pad", A_INT, 4),            F(maxpool, ceil_mode, "ceil_mode", A_INT, 1),
    F(avgpool, kernel, "kernel", A_INT, 2),      F(avgpool, stride, "stride", A_INT, 2),
    F(avgpool, pad, "pad", A_INT, 4),            F(avgpool, ceil_mode, "ceil_mode", A_INT, 1),
    F(avgpool, count_include_pad, "count_include_pad", A_INT, 1),
    F(dense, units, "units", A_INT, 1),          F(softmax_xent, label_smoothing, "label_smoothing", A_FLOAT, 1),
    F(dropout, rate, "rate", A_FLOAT, 1),        F(dropout, training, "training", A_INT, 1),
    F(dropout, seed, "seed", A_U64, 1),          F(reshape, shape, "shape", A_SHAPE, 0),
    F(normalize, scale, "scale", A_FLOAT, 1),    F(normalize, channels, "channels", A_INT, 1),
    F(normalize, mean, "mean", A_FLOAT, -1),     F(normalize, std, "std", A_FLOAT, -1),
    F(round16, format, "format", A_INT, 1),      F(clip, lo, "lo", A_FLOAT, 1),
    F(clip, hi, "hi", A_FLOAT, 1),               F(hardsigmoid, alpha, "alpha", A_FLOAT, 1),
    F(hardsigmoid, beta, "beta", A_FLOAT, 1),    F(leaky_relu, alpha, "alpha", A_FLOAT, 1),
    F(lrn, size, "size", A_INT, 1),              F(lrn, alpha, "alpha", A_FLOAT, 1),
    F(lrn, beta, "beta", A_FLOAT, 1),            F(lrn, bias, "bias", A_FLOAT, 1),
};
#undef F

/* The parsed spec (operands keep their file names; data is read when the graph is built). */
typedef struct spec {
  const char *path;
  ir_op op;
  ir_attr attr;
  int n_in;
  char kind[IR_MAX_IN];  /* 'i' input, 'p' param, 'l' label */
  ir_shape shape[IR_MAX_IN];
  char file[IR_MAX_IN][512];
  char output[512];
  int n_dump, dump_idx[IR_MAX_IN];
  char dump_file[IR_MAX_IN][512];
} spec;

static void die(const spec *s, int line, const char *msg, const char *arg) {
  fprintf(stderr, "ref_runner: %s:%d: %s%s%s\n", s->path, line, msg, arg ? " " : "", arg ? arg : "");
  exit(1);
}

/* Splits line at whitespace into at most MAX_TOK tokens; returns their count. */
static int tokenize(char *line, char **tok) {
  int n = 0;
  char *c = strchr(line, '#');
  if (c) *c = 0;
  for (char *t = strtok(line, " \t\r\n"); t && n < MAX_TOK; t = strtok(NULL, " \t\r\n")) tok[n++] = t;
  return n;
}

/* "attr KEY V..." for the spec's op (the op line must come first). */
static void parse_attr(spec *s, int line, char **tok, int n) {
  for (size_t i = 0; i < sizeof attr_fields / sizeof *attr_fields; i++) {
    const attr_field *f = &attr_fields[i];
    if (f->op != s->op || strcmp(f->key, tok[1]) != 0) continue;
    int nv = n - 2, want = f->count > 0 ? f->count : nv;
    if (nv != want || nv < 1 || nv > (f->count < 0 ? IR_MAX_CHANNELS_NORMALIZE : IR_MAX_RANK))
      die(s, line, "wrong number of values for attribute", tok[1]);
    char *base = (char *)&s->attr + f->off;
    for (int v = 0; v < nv; v++) {
      const char *t = tok[2 + v];
      if (f->type == A_INT) ((int *)base)[v] = atoi(t);
      if (f->type == A_FLOAT) ((float *)base)[v] = strtof(t, NULL);
      if (f->type == A_U64) ((uint64_t *)base)[v] = strtoull(t, NULL, 0);
      if (f->type == A_SHAPE) ((ir_shape *)base)->dim[v] = strtoll(t, NULL, 10);
    }
    if (f->type == A_SHAPE) ((ir_shape *)base)->rank = nv;
    return;
  }
  die(s, line, "unknown attribute for this op:", tok[1]);
}

/* "input|param DIMS... FILE" or "label FILE". */
static void parse_operand(spec *s, int line, char **tok, int n) {
  int i = s->n_in;
  if (i >= IR_MAX_IN) die(s, line, "too many operands", NULL);
  if (n < 2 || (tok[0][0] != 'l' && n < 3) || n - 2 > IR_MAX_RANK) die(s, line, "bad operand line", NULL);
  s->kind[i] = tok[0][0];
  s->shape[i].rank = n - 2;
  for (int d = 0; d < n - 2; d++) s->shape[i].dim[d] = strtoll(tok[1 + d], NULL, 10);
  snprintf(s->file[i], sizeof s->file[i], "%s", tok[n - 1]);
  s->n_in++;
}

static void parse_line(spec *s, int line, char **tok, int n) {
  if (strcmp(tok[0], "op") == 0 && n == 2) {
    s->op = ir_op_from_name(tok[1]);
    if (s->op == IR_OP_COUNT) die(s, line, "unknown op", tok[1]);
  } else if (strcmp(tok[0], "attr") == 0 && n >= 3) {
    if (s->op == IR_OP_COUNT) die(s, line, "'attr' before 'op'", NULL);
    parse_attr(s, line, tok, n);
  } else if (!strcmp(tok[0], "input") || !strcmp(tok[0], "param") || !strcmp(tok[0], "label")) {
    parse_operand(s, line, tok, n);
  } else if (strcmp(tok[0], "output") == 0 && n == 2) {
    snprintf(s->output, sizeof s->output, "%s", tok[1]);
  } else if (strcmp(tok[0], "dump") == 0 && n == 3 && s->n_dump < IR_MAX_IN) {
    s->dump_idx[s->n_dump] = atoi(tok[1]);
    snprintf(s->dump_file[s->n_dump++], sizeof s->dump_file[0], "%s", tok[2]);
  } else {
    die(s, line, "cannot parse line starting with", tok[0]);
  }
}

static void parse_spec(spec *s, const char *path) {
  FILE *f = fopen(path, "r");
  char buf[4096], *tok[MAX_TOK];
  memset(s, 0, sizeof *s);
  s->path = path;
  s->op = IR_OP_COUNT;
  if (!f) die(s, 0, "cannot open spec", NULL);
  for (int line = 1; fgets(buf, sizeof buf, f); line++) {
    int n = tokenize(buf, tok);
    if (n) parse_line(s, line, tok, n);
  }
  fclose(f);
  if (s->op == IR_OP_COUNT || s->n_in < 1 || s->kind[0] != 'i' || !s->output[0])
    die(s, 0, "spec needs an op, an input operand first, and an output", NULL);
}

/* Reads exactly k floats from path into dst. */
static void read_f32(const spec *s, const char *path, float *dst, int64_t k) {
  FILE *f = fopen(path, "rb");
  if (!f) die(s, 0, "cannot open", path);
  size_t got = fread(dst, sizeof(float), (size_t)k, f);
  int extra = fgetc(f) != EOF;
  fclose(f);
  if ((int64_t)got != k || extra) die(s, 0, "wrong size (expected numel*4 bytes):", path);
}

static void write_f32(const spec *s, const char *path, const float *src, int64_t k) {
  FILE *f = fopen(path, "wb");
  if (!f || fwrite(src, sizeof(float), (size_t)k, f) != (size_t)k || fclose(f)) die(s, 0, "cannot write", path);
}

/* Builds the one-node graph; *x and *labels get malloc'd feeds.  Returns the result id. */
static int build_graph(const spec *s, ir_graph *g, int *in, float **x, float **labels) {
  for (int i = 0; i < s->n_in; i++) {
    char name[32];
    snprintf(name, sizeof name, "operand%d", i);
    if (s->kind[i] == 'l') {
      in[i] = ir_add_label(g, name);
      *labels = malloc((size_t)g->batch * sizeof **labels);
      read_f32(s, s->file[i], *labels, g->batch);
    } else if (s->kind[i] == 'i') {
      in[i] = ir_add_input(g, name, IR_F32, s->shape[i]);
      *x = malloc((size_t)ir_shape_numel(&s->shape[i]) * sizeof **x);
      read_f32(s, s->file[i], *x, ir_shape_numel(&s->shape[i]));
    } else {
      in[i] = ir_add_param(g, name, s->shape[i], 1);
      read_f32(s, s->file[i], g->values[in[i]].data, ir_shape_numel(&s->shape[i]));
    }
  }
  ir_diag d = {0};
  int out = ir_add_node(g, s->op, "node", (ir_loc){0}, in, s->n_in, &s->attr, &d);
  if (out < 0) {
    ir_diag_print(&d, stderr);
    exit(1);
  }
  return out;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: ref_runner SPEC\n");
    return 2;
  }
  spec s;
  parse_spec(&s, argv[1]);
  ir_graph *g = ir_graph_new("ref_runner", (int)s.shape[0].dim[0]);
  int in[IR_MAX_IN];
  float *x = NULL, *labels = NULL;
  int out = build_graph(&s, g, in, &x, &labels);
  float **vals = ir_interp(g, x, labels);
  write_f32(&s, s.output, vals[out], ir_shape_numel(&g->values[out].shape));
  for (int i = 0; i < s.n_dump; i++) {
    int k = s.dump_idx[i];
    if (k < 0 || k >= s.n_in || s.kind[k] != 'p') die(&s, 0, "dump index is not a param operand", NULL);
    write_f32(&s, s.dump_file[i], g->values[in[k]].data, ir_shape_numel(&s.shape[k]));
  }
  ir_interp_free(g, vals);
  ir_graph_free(g);
  free(x);
  free(labels);
  return 0;
}
