/* run_interp.c — runs a model through the reference interpreter from the command line (test
 * support for test_zoo_interp.py and test_torch_parity.py):
 *
 *   run_interp MODEL.yml [--batch N] [--seed S] [--weights W.safetensors] [--input X.f32]
 *              [--input-seed S] [--output Y.f32] [--emit-ir FILE]
 *
 * Loads MODEL with fe_load (params from --seed, or from --weights), feeds raw f32 NCHW input
 * (batch * C*H*W floats; u8 models take the values 0..255 as floats) or seeded random input
 * (uniform [-1, 1), or integers 0..255 for u8 inputs), runs ir_interp and prints the output's
 * shape and checksums; --output writes the first output as raw f32.  Exit status: 0 ok,
 * 1 model/weights/input error (diagnostic printed), 3 NaN or Inf in the output. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fe.h"
#include "ir.h"
#include "tool_f32.h"
#include "weights.h"

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static uint64_t rng_next(uint64_t *s) { /* splitmix64 */
  uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

static int usage(void) {
  fprintf(stderr, "usage: run_interp MODEL.yml [--batch N] [--seed S] [--weights W.safetensors]\n"
                  "                  [--input X.f32] [--input-seed S] [--output Y.f32] [--emit-ir FILE]\n");
  return 2;
}

int main(int argc, char **argv) {
  const char *model = NULL, *weights = NULL, *input = NULL, *output = NULL, *emit_ir = NULL;
  const char *batch = NULL, *seed = NULL;
  uint64_t input_seed = 1;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (a[0] != '-') { if (model) return usage(); model = a; continue; }
    if (!v) return usage();
    if (!strcmp(a, "--batch")) batch = v;
    else if (!strcmp(a, "--seed")) seed = v;
    else if (!strcmp(a, "--weights")) weights = v;
    else if (!strcmp(a, "--input")) input = v;
    else if (!strcmp(a, "--input-seed")) input_seed = strtoull(v, NULL, 10);
    else if (!strcmp(a, "--output")) output = v;
    else if (!strcmp(a, "--emit-ir")) emit_ir = v;
    else return usage();
    i++;
  }
  if (!model) return usage();

  fe_options o;
  ir_diag d = {0};
  fe_options_init(&o);
  if ((batch && fe_option_set(&o, fe_option_find("batch-size"), batch, &d) < 0) ||
      (seed && fe_option_set(&o, fe_option_find("seed"), seed, &d) < 0)) {
    ir_diag_print(&d, stderr);
    return 1;
  }
  double t0 = now();
  ir_graph *g = fe_load(model, &o, &d);
  if (!g) { ir_diag_print(&d, stderr); return 1; }
  if (weights && fe_load_safetensors(g, weights, 0, &d) < 0) {
    ir_diag_print(&d, stderr);
    ir_graph_free(g);
    return 1;
  }
  if (emit_ir) {
    FILE *f = fopen(emit_ir, "w");
    if (!f) { perror(emit_ir); ir_graph_free(g); return 1; }
    ir_print(g, f);
    fclose(f);
  }
  double t1 = now();

  const ir_value *in = &g->values[g->input];
  size_t n_in = (size_t)ir_shape_numel(&in->shape);
  float *x = malloc(n_in * sizeof *x);
  if (!x) { fprintf(stderr, "out of memory\n"); ir_graph_free(g); return 1; }
  if (input) {
    if (read_f32_exact(input, x, n_in) < 0) { free(x); ir_graph_free(g); return 1; }
  } else {
    uint64_t s = input_seed;
    for (size_t i = 0; i < n_in; i++) {
      uint64_t r = rng_next(&s);
      x[i] = in->dtype == IR_U8 ? (float)(r >> 56) : (float)((double)(r >> 11) * 0x1p-53 * 2.0 - 1.0);
    }
  }

  float **vals = ir_interp(g, x, NULL);
  double t2 = now();
  int status = 0;
  for (int k = 0; k < g->n_outputs; k++) {
    const ir_value *ov = &g->values[g->outputs[k]];
    const float *y = vals[ov->id];
    size_t n = (size_t)ir_shape_numel(&ov->shape);
    double sum = 0, asum = 0, mn = INFINITY, mx = -INFINITY;
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) {
      if (!isfinite(y[i])) { bad++; continue; }
      sum += y[i];
      asum += fabs(y[i]);
      if (y[i] < mn) mn = y[i];
      if (y[i] > mx) mx = y[i];
    }
    char sb[96];
    printf("output %s shape %s sum %.9g abs_sum %.9g min %.9g max %.9g nonfinite %zu\n", ov->name,
           ir_shape_str(&ov->shape, sb, sizeof sb), sum, asum, mn, mx, bad);
    if (bad) status = 3;
    if (k == 0 && output) {
      FILE *f = fopen(output, "wb");
      if (!f || fwrite(y, sizeof(float), n, f) != n) { perror(output); status = status ? status : 1; }
      if (f && fclose(f) != 0) { perror(output); status = status ? status : 1; }
    }
  }
  printf("model %s batch %d nodes %d params %lld load %.3f s interp %.3f s\n", g->name, g->batch,
         g->n_nodes, (long long)ir_param_count(g, 0), t1 - t0, t2 - t1);
  ir_interp_free(g, vals);
  free(x);
  ir_graph_free(g);
  return status;
}
