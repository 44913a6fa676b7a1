/* test_half_partials_kernels.c — --enable-half-partials inside the kernels (docs/precision.md
 * "Half partials"): a small training model with every kernel that keeps partial sums in memory
 * between reduction blocks — a 3x3 conv (grad_weight lane partials between images), a 1x1
 * stride-1 conv on a 20x20 plane (the 1x1 grad_weight GEMM: partials between images and
 * 256-pixel chunks), a grouped 3x3 conv (gen_train_gconv.c) and a groupnorm (dgamma partials
 * between samples) — plus a dense layer and biases, whose reductions stay in registers.
 * 16.32, bf16 and fp16, momentum (after one step the momentum buffer is the gradient):
 *  1. compiled (1 and 2 threads, bitwise equal) vs ir_train_step on the same passed graph,
 *     which rounds at the same points: per place the gradient's mean relative difference is
 *     printed and must be far below the half-vs-f32 partials error (<= 1/8 of it);
 *  2. the error of half partials against f32 partials (the interpreter with
 *     g->half_partials = 0, same weights and data): max and mean relative error per place,
 *     printed (docs/precision.md quotes them), > 0 where partials exist, bounded (bf16 mean <
 *     2e-2, fp16 < 2e-2), exactly 0 where there are none (dense weight, biases, beta);
 *  3. a dense-only model: the flag changes nothing, compiled, bitwise (no partials to round);
 *  4. inference, 16.16: a 1x1 conv over 512 channels of 7x7 on channel vectors, K-blocked
 *     (gen_conv_vc.c: partial sums in a buffer between blocks of input channels; the block is
 *     recorded on the graph): compiled (1 and 2 threads) vs ir_interp with the same rounding,
 *     and the conv output's error against f32 partials (printed, > 0, bounded).  The K-blocked
 *     row is forced with tune bf16=0: on an avx512bf16 target (cg_bf16_dot) bf16 takes the
 *     vdpbf16ps kernel (gen_conv_bf16.c), whose whole K sum stays in f32 registers; that
 *     default route is checked too: no K block, no rounding, where the target has it.
 * Set CNNC_HALF_PARTIALS_JSON=FILE to append the per-place figures as JSON lines. */
#include <math.h>

#include "codegen/cg_isa.h"
#include "frontend/fe.h"
#include "ir/grad_train.h"
#include "runtime/cnnrt.h"
#include "test_codegen_harness.h"

static const char *hp_yml =
    "name: half_partials\n"
    "input: {shape: [4, 20, 20], dtype: f32, classes: 5}\n"
    "layers:\n"
    "  - {name: c1, op: conv, filters: 16, kernel: 3, padding: 1}\n"
    "  - {name: gn1, op: groupnorm, groups: 4}\n"
    "  - {name: r1, op: relu}\n"
    "  - {name: c2, op: conv, filters: 16, kernel: 1}\n"
    "  - {name: r2, op: relu}\n"
    "  - {name: c3, op: conv, filters: 16, kernel: 3, padding: 1, groups: 4}\n"
    "  - {name: r3, op: relu}\n"
    "  - {name: g, op: global_avgpool}\n"
    "  - {name: f, op: flatten}\n"
    "  - {name: d1, op: dense, units: 5}\n";

static const char *kb_yml =
    "name: kblock\n"
    "input: {shape: [512, 7, 7], dtype: f32, classes: 10}\n"
    "layers:\n"
    "  - {name: c1, op: conv, filters: 32, kernel: 1}\n"
    "  - {name: r1, op: relu}\n"
    "  - {name: g, op: global_avgpool}\n"
    "  - {name: f, op: flatten}\n"
    "  - {name: d1, op: dense, units: 10}\n";

static const char *mlp_yml =
    "name: mlp\n"
    "input: {shape: [3, 10, 10], dtype: f32, classes: 5}\n"
    "layers:\n"
    "  - {name: f, op: flatten}\n"
    "  - {name: d1, op: dense, units: 40}\n"
    "  - {name: r1, op: relu}\n"
    "  - {name: d2, op: dense, units: 5}\n";

enum { BATCH = 4 };

/* Where partials exist (the gradient of these params) and where they do not. */
static const char *const with_partials[] = {"c1/weight", "c2/weight", "c3/weight", "gn1/gamma"};
static const char *const without_partials[] = {"d1/weight", "d1/bias", "c1/bias", "c2/bias", "c3/bias", "gn1/beta"};

static char *write_model(const char *name, const char *text) {
  static char path[2][512];
  static int k;
  char *p = path[k++ & 1], file[256];
  snprintf(file, sizeof file, "%s.yml", name);
  return cgt_write_tmp(p, file, text) ? NULL : p;
}

/* Loads yml with the options kv and compiles it to so; the passed graph (half-partials settings
 * recorded by cg_build_model) is returned for the interpreter, NULL on failure. */
static ir_graph *build(const char *yml, const char *const (*kv)[2], int nkv, const char *so) {
  ir_graph *g = NULL;
  return cgt_build(yml, kv, nkv, so, &g) ? NULL : g;
}

static cnnrt_model *open_t(const char *so, int threads) { return cgt_rt_open(so, threads); }

/* Copies of the data of every param of g (to restore a graph to its initial state). */
static float **save_params(const ir_graph *g) {
  float **s = calloc((size_t)g->n_values, sizeof *s);
  for (int v = 0; v < g->n_values; v++)
    if (g->values[v].kind == IR_VAL_PARAM && g->values[v].data) {
      size_t b = (size_t)ir_shape_numel(&g->values[v].shape) * sizeof(float);
      s[v] = malloc(b);
      memcpy(s[v], g->values[v].data, b);
    }
  return s;
}
static void restore_params(ir_graph *g, float **s) {
  for (int v = 0; v < g->n_values; v++)
    if (s[v]) memcpy(g->values[v].data, s[v], (size_t)ir_shape_numel(&g->values[v].shape) * sizeof(float));
}
static void free_params(const ir_graph *g, float **s) {
  for (int v = 0; v < g->n_values; v++) free(s[v]);
  free(s);
}

/* Relative error of got against want: max over elements with |want| >= 1e-3 max|want| of
 * |got - want| / |want|, and mean |got - want| / mean |want|. */
typedef struct relerr { double max, mean; } relerr;
static relerr rel_error(const float *got, const float *want, int64_t n) {
  double amax = 0, sw = 0, sd = 0;
  relerr r = {0, 0};
  for (int64_t i = 0; i < n; i++) amax = fmax(amax, fabs(want[i]));
  for (int64_t i = 0; i < n; i++) {
    double dlt = fabs((double)got[i] - want[i]);
    sw += fabs(want[i]), sd += dlt;
    if (fabs(want[i]) >= 1e-3 * amax && fabs(want[i]) > 0) r.max = fmax(r.max, dlt / fabs(want[i]));
    else if (dlt > 0 && amax == 0) r.max = INFINITY;
  }
  r.mean = sw > 0 ? sd / sw : sd > 0 ? INFINITY : 0;
  return r;
}

/* The gradient of param name in vals (the interpreter's "grad/NAME"), a malloc'd copy. */
static float *grad_of(const ir_graph *g, float **vals, const char *name, int64_t *n) {
  char gn[256];
  snprintf(gn, sizeof gn, "grad/%s", name);
  int v = ir_find_value(g, gn);
  if (v < 0 || !vals[v]) return NULL;
  *n = ir_shape_numel(&g->values[v].shape);
  float *c = malloc((size_t)*n * sizeof *c);
  memcpy(c, vals[v], (size_t)*n * sizeof *c);
  return c;
}

static void half_case(const char *half, const char *yml, FILE *json) {
  char so[512];
  snprintf(so, sizeof so, "%s/hp_%s.so", cgt_dir, half);
  const char *const kv[][2] = {{"mode", "training"}, {"batch-size", "4"},  {"optimizer", "momentum"},
                               {"seed", "5"},        {"precision", "16.32"}, {"half-type", half},
                               {"enable-half-partials", "1"}};
  ir_graph *g = build(yml, kv, 7, so);
  if (!g) {
    cgt_failures++;
    return;
  }
  CGT_CHECK(g->half_partials == 1 + (strcmp(half, "fp16") == 0) && g->partial_lanes > 0,
            "%s: the graph records half_partials %d, lanes %d", half, g->half_partials, g->partial_lanes);
  cnnrt_model *m[2] = {open_t(so, 1), open_t(so, 2)};
  int64_t nx = ir_shape_numel(&g->values[g->input].shape);
  float *x = malloc((size_t)nx * sizeof *x), labels[BATCH];
  for (int64_t i = 0; i < nx; i++) x[i] = cgt_uniform(-1.0f, 1.0f);
  for (int b = 0; b < BATCH; b++) labels[b] = (float)cgt_int(0, 4);
  const float lr = 0.05f;
  float **init = save_params(g);
  /* compiled, 1 and 2 threads */
  float loss[2] = {NAN, NAN}, acc;
  for (int t = 0; t < 2; t++) {
    if (!m[t] || cnnrt_set_learning_rate(m[t], lr) != CNNRT_OK ||
        cnnrt_train_step(m[t], x, (size_t)nx * sizeof *x, labels, 1, &loss[t], &acc) != CNNRT_OK) {
      fprintf(stderr, "%s: compiled step (%d threads): %s\n", half, t + 1, cnnrt_last_error());
      cgt_failures++;
      goto out;
    }
  }
  /* the interpreter with the same rounding points, then with f32 partials from the same state */
  float **vh = ir_train_step(g, x, labels, lr);
  float lh = vh[ir_find_value(g, "loss")][0];
  restore_params(g, init);
  int hp = g->half_partials;
  g->half_partials = 0;
  float **vf = ir_train_step(g, x, labels, lr);
  g->half_partials = hp;
  fprintf(stderr, "%s: loss compiled %.7g (1 thread) %.7g (2 threads), interpreter %.7g\n", half, loss[0], loss[1], lh);
  cgt_failures += cgt_compare("loss", &loss[0], &lh, 1, 1e-4);
  CGT_CHECK(!memcmp(&loss[0], &loss[1], 4), "%s: 1 vs 2 threads loss differ", half);
  for (int p = 0; p < (int)(sizeof with_partials / sizeof *with_partials); p++) {
    const char *name = with_partials[p];
    int64_t n = 0, n2 = 0;
    float *gh = grad_of(g, vh, name, &n), *gf = grad_of(g, vf, name, &n2);
    char mom[256];
    snprintf(mom, sizeof mom, "%s/momentum", name);
    float *gc[2] = {malloc((size_t)n * 4), malloc((size_t)n * 4)};
    if (!gh || !gf || n != n2 || cnnrt_get_state(m[0], mom, gc[0], (size_t)n * 4) != CNNRT_OK ||
        cnnrt_get_state(m[1], mom, gc[1], (size_t)n * 4) != CNNRT_OK) {
      fprintf(stderr, "%s: %s: no gradient / momentum state (%s)\n", half, name, cnnrt_last_error());
      cgt_failures++;
    } else {
      relerr hf = rel_error(gh, gf, n), ci = rel_error(gc[0], gh, n), cf = rel_error(gc[0], gf, n);
      fprintf(stderr, "%s %-10s: half vs f32 partials max %.3g mean %.3g | compiled vs interpreter (same rounding) "
              "max %.3g mean %.3g | compiled vs f32-partials interpreter mean %.3g\n",
              half, name, hf.max, hf.mean, ci.max, ci.mean, cf.mean);
      if (json)
        fprintf(json, "{\"half\": \"%s\", \"param\": \"%s\", \"max_rel\": %.4g, \"mean_rel\": %.4g, \"compiled_vs_interp_mean\": %.4g}\n",
                half, name, hf.max, hf.mean, ci.mean);
      CGT_CHECK(hf.mean > 0 && hf.mean < 2e-2, "%s: %s: half partials mean relative error %.3g", half, name, hf.mean);
      CGT_CHECK(ci.mean <= hf.mean / 8, "%s: %s: compiled vs interpreter %.3g is not far below the half-partials error %.3g",
                half, name, ci.mean, hf.mean);
      CGT_CHECK(!memcmp(gc[0], gc[1], (size_t)n * 4), "%s: %s: 1 vs 2 threads differ", half, name);
    }
    free(gh), free(gf), free(gc[0]), free(gc[1]);
  }
  for (int p = 0; p < (int)(sizeof without_partials / sizeof *without_partials); p++) {
    int64_t n = 0, n2 = 0;
    float *gh = grad_of(g, vh, without_partials[p], &n), *gf = grad_of(g, vf, without_partials[p], &n2);
    CGT_CHECK(gh && gf && n == n2 && !memcmp(gh, gf, (size_t)n * 4), "%s: %s: no partials, yet the gradient changed",
              half, without_partials[p]);
    free(gh), free(gf);
  }
  ir_interp_free(g, vh);
  ir_interp_free(g, vf);
out:
  free_params(g, init);
  free(x);
  for (int t = 0; t < 2; t++) cnnrt_close(m[t]);
  unlink(so);
  ir_graph_free(g);
}

/* Trainable params of m after two steps on fixed data, concatenated. */
static float *train2(const char *so, long *n) {
  cnnrt_model *m = open_t(so, 2);
  if (!m) return NULL;
  cnnrt_set_learning_rate(m, 0.05);
  float x[BATCH * 300], labels[BATCH];
  uint64_t seed = 99;
  for (int s = 0; s < 2; s++) {
    for (int i = 0; i < BATCH * 300; i++) seed = seed * 6364136223846793005ull + 1, x[i] = (float)((seed >> 40) % 2001) / 1000.0f - 1;
    for (int b = 0; b < BATCH; b++) labels[b] = (float)((b + s) % 5);
    float loss, acc;
    if (cnnrt_train_step(m, x, sizeof x, labels, 1, &loss, &acc) != CNNRT_OK) fprintf(stderr, "step: %s\n", cnnrt_last_error());
  }
  float *w = NULL;
  long k = 0;
  for (int i = 0; i < cnnrt_num_state(m); i++) {
    cnnrt_state_info si;
    if (cnnrt_state_info_at(m, i, &si) != CNNRT_OK || si.kind == CNNRT_STATE_BUFFER) continue;
    w = realloc(w, (size_t)(k + (long)si.bytes / 4) * 4);
    cnnrt_get_state(m, si.name, w + k, si.bytes);
    k += (long)si.bytes / 4;
  }
  cnnrt_close(m);
  *n = k;
  return w;
}

static void no_partials_case(const char *yml) {
  char sa[512], sb[512];
  snprintf(sa, sizeof sa, "%s/mlp_f.so", cgt_dir);
  snprintf(sb, sizeof sb, "%s/mlp_h.so", cgt_dir);
  const char *const kv[][2] = {{"mode", "training"}, {"batch-size", "4"},   {"optimizer", "momentum"},
                               {"seed", "5"},        {"precision", "16.32"}, {"enable-half-partials", "1"}};
  ir_graph *ga = build(yml, kv, 5, sa), *gb = build(yml, kv, 6, sb);
  long na = 0, nb = 0;
  float *a = ga ? train2(sa, &na) : NULL, *b = gb ? train2(sb, &nb) : NULL;
  CGT_CHECK(a && b && na == nb && na > 0 && !memcmp(a, b, (size_t)na * 4),
            "dense-only model: --enable-half-partials changed the training (no partials leave registers there)");
  fprintf(stderr, "dense-only model, 2 steps: %ld state elements, %s with and without --enable-half-partials\n", na,
          a && b && na == nb && !memcmp(a, b, (size_t)na * 4) ? "bitwise equal" : "DIFFERENT");
  free(a), free(b);
  ir_graph_free(ga), ir_graph_free(gb);
  unlink(sa), unlink(sb);
}

/* 1 when the host target runs bf16 1x1 convs on vdpbf16ps (no K blocks there). */
static int host_bf16_dot(void) {
  cg_target t;
  ir_diag d = {0};
  if (cg_target_init(&t, "", "", "", &d)) return ir_diag_print(&d, stderr), 0;
  int dot = cg_bf16_route(&t, &ct_tuning, NULL, 0) != 0 /* the knobs build() compiled with */;
  cg_target_dispose(&t);
  return dot;
}

/* row: force the K-blocked row (tune bf16=0, which only bf16 needs); else the default route. */
static void kblock_case(const char *half, const char *yml, FILE *json, int row) {
  char so[512];
  snprintf(so, sizeof so, "%s/kb_%s.so", cgt_dir, half);
  const char *const kv[][2] = {{"batch-size", "2"}, {"seed", "5"}, {"precision", "16.16"}, {"half-type", half},
                               {"available-memory-proportion", "0.1"}, {"enable-half-partials", "1"},
                               {"target-cache", "1M,2M"}}; /* the blocking the checks expect, on any host */
  if (row) ct_tune("bf16=0");
  ir_graph *g = build(yml, kv, 7, so);
  ct_tune("bf16=1");
  if (!g) {
    cgt_failures++;
    return;
  }
  int conv = ir_find_node(g, "c1");
  int kb = conv >= 0 && g->partial_kblock ? g->partial_kblock[conv] : 0;
  int64_t cin = 512;
  int blocked = row || strcmp(half, "bf16") || !host_bf16_dot();
  if (blocked) CGT_CHECK(kb > 0 && kb < cin, "%s: the 1x1 conv was not K-blocked (block %d)", half, kb);
  else CGT_CHECK(kb == 0, "%s: the vdpbf16ps route K-blocked the 1x1 conv (block %d)", half, kb);
  int64_t nx = ir_shape_numel(&g->values[g->input].shape), ny = ir_shape_numel(&g->values[g->outputs[0]].shape);
  float *x = malloc((size_t)nx * 4), *y[2] = {malloc((size_t)ny * 4), malloc((size_t)ny * 4)};
  for (int64_t i = 0; i < nx; i++) x[i] = cgt_uniform(0.0f, 1.0f); /* one sign: partials grow, as after a relu */
  for (int t = 0; t < 2; t++) {
    cnnrt_model *m = open_t(so, t + 1);
    if (!m || cnnrt_infer(m, x, (size_t)nx * 4, y[t], (size_t)ny * 4, 1) != CNNRT_OK) {
      fprintf(stderr, "%s: cnnrt_infer: %s\n", half, cnnrt_last_error());
      cgt_failures++;
    }
    cnnrt_close(m);
  }
  CGT_CHECK(!memcmp(y[0], y[1], (size_t)ny * 4), "%s: K-blocked conv: 1 vs 2 threads differ", half);
  float **vh = ir_interp(g, x, NULL);
  int hp = g->half_partials;
  g->half_partials = 0;
  float **vf = ir_interp(g, x, NULL);
  g->half_partials = hp;
  int cv = conv >= 0 ? g->nodes[conv].out : -1, out = g->outputs[0];
  int64_t nc = cv >= 0 ? ir_shape_numel(&g->values[cv].shape) : 0;
  relerr hf = cv >= 0 ? rel_error(vh[cv], vf[cv], nc) : (relerr){0, 0}, ci = rel_error(y[0], vh[out], ny),
         cf = rel_error(y[0], vf[out], ny);
  fprintf(stderr, "%s%s 1x1 conv K-blocked (%d of %lld input channels per block): conv output half vs f32 partials max %.3g "
          "mean %.3g | logits compiled vs interpreter (same rounding) max %.3g mean %.3g, vs f32-partials interpreter mean %.3g\n",
          half, row ? " (row forced)" : "", kb, (long long)cin, hf.max, hf.mean, ci.max, ci.mean, cf.mean);
  if (json && row)
    fprintf(json, "{\"half\": \"%s\", \"param\": \"kblock conv output\", \"max_rel\": %.4g, \"mean_rel\": %.4g, "
            "\"compiled_vs_interp_mean\": %.4g}\n", half, hf.max, hf.mean, ci.mean);
  if (blocked) CGT_CHECK(hf.mean > 0 && hf.mean < 2e-2, "%s: K-block partials: mean relative error %.3g", half, hf.mean);
  else CGT_CHECK(hf.mean == 0, "%s: no K blocks, yet half vs f32 partials differ (mean %.3g)", half, hf.mean);
  CGT_CHECK(ci.mean < 1e-3, "%s: compiled vs interpreter logits %.3g", half, ci.mean);
  ir_interp_free(g, vh);
  ir_interp_free(g, vf);
  free(x), free(y[0]), free(y[1]);
  unlink(so);
  ir_graph_free(g);
}

int main(void) {
  cgt_init_dir();
  const char *jp = getenv("CNNC_HALF_PARTIALS_JSON");
  FILE *json = jp && *jp ? fopen(jp, "a") : NULL;
  char *hp = write_model("half_partials", hp_yml), *mlp = write_model("mlp", mlp_yml);
  char kbp[512];
  int kbad = cgt_write_tmp(kbp, "kblock.yml", kb_yml);
  if (!hp || !mlp || kbad) {
    fprintf(stderr, "cannot write the models to %s\n", cgt_dir);
    return 1;
  }
  half_case("bf16", hp, json);
  half_case("fp16", hp, json);
  no_partials_case(mlp);
  kblock_case("bf16", kbp, json, 1);
  kblock_case("bf16", kbp, json, 0);
  kblock_case("fp16", kbp, json, 1);
  unlink(kbp);
  if (json) fclose(json);
  unlink(hp), unlink(mlp);
  return cgt_done("test_half_partials_kernels");
}
