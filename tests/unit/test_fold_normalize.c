/* test_fold_normalize.c — pass_fold_normalize (passes/fold_normalize.c): a u8 input's
 * normalisation folded into the first conv of an inference graph.  Folded graphs give the
 * unfolded graph's outputs through the reference interpreter (random images, 1e-5 of the
 * output range) and the compiled .so gives them too (1e-4): an unpadded conv with non-zero
 * means and no bias (a bias is added), a padded conv with zero means, 3 channels (folded 1:
 * the kernel `normalize_u8_folded`); a padded conv with non-zero means (zero padding is not
 * -mean/std in raw values: the full fold done by hand changes the outputs), folded 2 (only
 * the scale and std; the node subtracts 255 mean: `normalize_u8_centred`).  Not folded (graph
 * unchanged): a normalize read by two layers, a training graph.  At --precision 16.32 (bf16,
 * fp16) the compiled .so folds as well (before the 16-bit rounding) and stays within 16-bit
 * rounding of the unfolded graph, f32 and 16-bit. */
#include <math.h>

#include "test_codegen_harness.h"

#define HEAD "input: {shape: [3, 9, 8], dtype: u8, mean: [%s], std: [0.2, 0.5, 0.25], classes: 4}\nlayers:\n"
static const char *tail_conv = "  - {name: r1, op: relu}\n  - {name: f, op: flatten}\n  - {name: d, op: dense, units: 4}\n";

/* The model text: name, means, the first conv's padding and bias, and a tail. */
static const char *model(char *buf, size_t n, const char *means, int pad, int bias, const char *tail) {
  int k = snprintf(buf, n, "name: fold\n" HEAD, means);
  snprintf(buf + k, n - (size_t)k, "  - {name: c1, op: conv, filters: 5, kernel: 3, padding: %d, bias: %s}\n%s", pad,
           bias ? "true" : "false", tail);
  return buf;
}

static float *interp_out(ir_graph *g, const float *x, int64_t *n) {
  float **vals = ir_interp(g, x, NULL);
  int o = g->outputs[0];
  *n = ir_shape_numel(&g->values[o].shape);
  float *r = malloc((size_t)*n * sizeof *r);
  memcpy(r, vals[o], (size_t)*n * sizeof *r);
  ir_interp_free(g, vals);
  return r;
}

/* Folds a copy of text's graph and compares it with the unfolded one on random images;
 * want_fold: whether the pass must fold.  Also the compiled .so of the text (the pipeline
 * folds) against the unfolded interpreter. */
static void check(const char *label, const char *text, int want_fold) { /* want_fold: the folded attribute */
  ir_graph *g0 = cgt_load_text(text, "fold", 2), *g1 = cgt_load_text(text, "fold", 2);
  CGT_CHECK(g0 && g1, "%s: load", label);
  if (!g0 || !g1) return;
  int n_vals = g1->n_values, got = pass_fold_normalize(g1);
  CGT_CHECK(got == (want_fold != 0), "%s: pass_fold_normalize returned %d, want %d", label, got, want_fold != 0);
  int nn = ir_find_value(g1, "input/normalize");
  CGT_CHECK(nn >= 0, "%s: no input/normalize", label);
  const ir_node *norm = nn >= 0 ? &g1->nodes[g1->values[nn].producer] : NULL;
  CGT_CHECK(norm && norm->attr.normalize.folded == want_fold && (want_fold || g1->n_values == n_vals),
            "%s: folded flag / values changed", label);
  int64_t nx = ir_shape_numel(&g0->values[g0->input].shape), n0, n1;
  float *x = malloc((size_t)nx * sizeof *x);
  double diff_inputs = 0;
  float *first = NULL;
  for (int r = 0; r < 2; r++) {
    for (int64_t i = 0; i < nx; i++) x[i] = (float)cgt_int(0, 255); /* u8 images arrive as 0..255 */
    float *a = interp_out(g0, x, &n0), *b = interp_out(g1, x, &n1);
    double range = 0, worst = 0;
    for (int64_t i = 0; i < n0; i++) range = fmax(range, fabs(a[i]));
    for (int64_t i = 0; i < n0 && n0 == n1; i++) worst = fmax(worst, fabs(a[i] - b[i]));
    CGT_CHECK(n0 == n1 && range > 0 && worst <= 1e-5 * range, "%s: folded vs unfolded: max diff %g of range %g", label,
              worst, range);
    if (first) {
      for (int64_t i = 0; i < n0; i++) diff_inputs = fmax(diff_inputs, fabs(first[i] - a[i]));
      free(first);
    }
    first = a;
    free(b);
  }
  CGT_CHECK(diff_inputs > 0, "%s: two inputs give the same outputs (the comparison could not fail)", label);
  free(first);
  free(x);
  ir_graph_free(g1);
  ir_graph_free(g0);
}

/* The border effect the padding rule avoids: a padded conv with non-zero means folded by hand
 * (weights and bias as the pass would) differs from the unfolded graph at the borders. */
static void check_padding_matters(void) {
  char buf[1024];
  ir_graph *g0 = cgt_load_text(model(buf, sizeof buf, "0.5, 0.4, 0.3", 1, 1, tail_conv), "fold", 2);
  ir_graph *g1 = cgt_load_text(buf, "fold", 2);
  if (!g0 || !g1) {
    CGT_CHECK(0, "padding: load");
    return;
  }
  ir_node *cv = &g1->nodes[g1->values[ir_find_value(g1, "c1")].producer];
  int pads[4];
  memcpy(pads, cv->attr.conv2d.pad, sizeof pads);
  memset(cv->attr.conv2d.pad, 0, sizeof pads); /* let the pass fold it, then restore the padding */
  int got = pass_fold_normalize(g1);
  cv = &g1->nodes[g1->values[ir_find_value(g1, "c1")].producer];
  memcpy(cv->attr.conv2d.pad, pads, sizeof pads);
  int64_t nx = ir_shape_numel(&g0->values[g0->input].shape), n0, n1;
  float *x = malloc((size_t)nx * sizeof *x);
  for (int64_t i = 0; i < nx; i++) x[i] = (float)cgt_int(0, 255);
  float *a = interp_out(g0, x, &n0), *b = interp_out(g1, x, &n1);
  double worst = 0, range = 0;
  for (int64_t i = 0; i < n0; i++) worst = fmax(worst, fabs(a[i] - b[i])), range = fmax(range, fabs(a[i]));
  CGT_CHECK(got == 1 && worst > 1e-3 * range, "padding: a fold across zero padding with means 0.5/0.4/0.3 changed the "
                                              "outputs by only %g of %g", worst, range);
  free(a), free(b), free(x);
  ir_graph_free(g0), ir_graph_free(g1);
}

/* The compiled .so (the pipeline folds) against the unfolded interpreter; the plan names the
 * folded kernel.  precision NULL: f32, to 1e-4; "16.32" with half_type bf16 or fp16: within
 * 16-bit rounding (2e-2 of the outputs' mean magnitude) of the unfolded f32 graph and of the
 * unfolded graph after the precision pass, and (folded 1) no round16 of the raw input. */
static void check_compiled16(const char *means, int pad, const char *want_kind, const char *precision,
                             const char *half_type) {
  char buf[1024], path[512], so[512];
  snprintf(path, sizeof path, "%s/fold.yml", cgt_dir);
  snprintf(so, sizeof so, "%s/fold.so", cgt_dir);
  if (cgt_write_file(path, model(buf, sizeof buf, means, pad, 0, tail_conv))) {
    CGT_CHECK(0, "compiled: write");
    return;
  }
  fe_options o, o16;
  const char *const kv[][2] = {{"batch-size", "2"}, {"seed", "5"}, {"precision", precision}, {"half-type", half_type}};
  int nkv = precision ? 4 : 2;
  ir_graph *g = cgt_load(path, kv, nkv, &o), *gr = cgt_load(path, kv, 2, &o16), *g16 = NULL;
  ir_diag d = {0};
  if (precision) { /* the unfolded 16-bit graph: the precision pass alone */
    g16 = cgt_load(path, kv, 2, &o16);
    CGT_CHECK(g16 && pass_precision(g16, precision, half_type, 0, &d) > 0, "compiled %s: precision pass: %s", precision,
              d.msg);
  }
  cnnrt_model *m = NULL;
  CGT_CHECK(g && gr && !cnnc_build_model(g, &o, so, NULL, 0, &d) && cnnrt_open(so, NULL, &m) == CNNRT_OK,
            "compiled: %s %s", d.msg, cnnrt_last_error());
  if (m && gr) {
    int64_t nx = ir_shape_numel(&gr->values[gr->input].shape), n0;
    float *x = malloc((size_t)nx * sizeof *x);
    unsigned char *img = malloc((size_t)nx);
    for (int64_t i = 0; i < nx; i++) img[i] = (unsigned char)cgt_int(0, 255), x[i] = img[i];
    float *want = interp_out(gr, x, &n0), *out = malloc((size_t)n0 * sizeof *out);
    CGT_CHECK(cnnrt_infer(m, img, (size_t)nx, out, (size_t)n0 * sizeof *out, 1) == CNNRT_OK, "compiled: infer: %s",
              cnnrt_last_error());
    char label[160];
    snprintf(label, sizeof label, "compiled folded %s %s vs unfolded f32 interpreter", precision ? precision : "32.32",
             precision ? half_type : "");
    cgt_failures += cgt_compare(label, out, want, n0, precision ? 2e-2 : 1e-4);
    if (g16) {
      int64_t n16;
      float *want16 = interp_out(g16, x, &n16);
      snprintf(label, sizeof label, "compiled folded %s %s vs unfolded %s interpreter", precision, half_type, precision);
      CGT_CHECK(n16 == n0, "%s: %lld outputs, want %lld", label, (long long)n16, (long long)n0);
      if (n16 == n0) cgt_failures += cgt_compare(label, out, want16, n0, 2e-2);
      free(want16);
    }
    const char *js = cnnrt_describe_json(m);
    CGT_CHECK(js && strstr(js, want_kind), "%s: the descriptor names no %s kernel", label, want_kind);
    if (precision && !strcmp(want_kind, "normalize_u8_folded"))
      CGT_CHECK(js && !strstr(js, "normalize/round16"), "%s: the raw 0..255 input is rounded to 16 bits", label);
    free(x), free(img), free(want), free(out);
  }
  if (g16) ir_graph_free(g16);
  if (m) cnnrt_close(m);
  if (g) ir_graph_free(g);
  if (gr) ir_graph_free(gr);
  unlink(so), unlink(path);
}

static void check_compiled(const char *means, int pad, const char *want_kind) {
  check_compiled16(means, pad, want_kind, NULL, NULL);
}

int main(void) {
  cgt_init_dir();
  char buf[1024];
  check("unpadded, means 0.5/0.4/0.3, no bias", model(buf, sizeof buf, "0.5, 0.4, 0.3", 0, 0, tail_conv), 1);
  check("padded, zero means, bias", model(buf, sizeof buf, "0, 0, 0", 1, 1, tail_conv), 1);
  check("padded, means 0.5/0.4/0.3: scale and std only", model(buf, sizeof buf, "0.5, 0.4, 0.3", 1, 1, tail_conv), 2);
  check("padded, means 0.5/0.4/0.3, no bias", model(buf, sizeof buf, "0.5, 0.4, 0.3", 1, 0, tail_conv), 2);
  check("normalize read twice: not folded",
        model(buf, sizeof buf, "0.5, 0.4, 0.3", 0, 1,
              "  - {name: c2, op: conv, filters: 5, kernel: 3, inputs: [input]}\n  - {name: s, op: add, inputs: [c1, c2]}\n"
              "  - {name: f, op: flatten}\n  - {name: d, op: dense, units: 4}\n"),
        0);
  check_padding_matters();
  /* a training graph keeps its normalisation (the conv's weights train in normalised space) */
  char path[512];
  snprintf(path, sizeof path, "%s/fold_t.yml", cgt_dir);
  fe_options o;
  const char *const kv[][2] = {{"mode", "training"}, {"batch-size", "2"}};
  ir_graph *gt = cgt_write_file(path, model(buf, sizeof buf, "0.5, 0.4, 0.3", 0, 0, tail_conv)) ? NULL
                                                                                               : cgt_load(path, kv, 2, &o);
  CGT_CHECK(gt && pass_fold_normalize(gt) == 0, "a training graph was folded");
  if (gt) ir_graph_free(gt);
  unlink(path);
  check_compiled("0.5, 0.4, 0.3", 0, "normalize_u8_folded");
  check_compiled("0.5, 0.4, 0.3", 1, "normalize_u8_centred");
  /* 16-bit inference folds too (before the rounding) */
  for (int h = 0; h < 2; h++) {
    const char *ht = h ? "fp16" : "bf16";
    check_compiled16("0.5, 0.4, 0.3", 0, "normalize_u8_folded", "16.32", ht);
    check_compiled16("0.5, 0.4, 0.3", 1, "normalize_u8_centred", "16.32", ht);
  }
  return cgt_done("test_fold_normalize");
}
