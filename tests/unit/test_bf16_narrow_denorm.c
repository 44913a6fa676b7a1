/* test_bf16_narrow_denorm.c — bf16 results below 2^-126 on the bf16 route's native narrowing
 * (codegen/gen_round16.c cg_narrow_bf16_native, docs/codegen.md "Native narrowing"):
 * vcvtneps2bf16 reads f32 denormals as zero, so the narrowing branches to the integer rounding
 * for such lanes and keeps bf16 denormals, as the interpreter and f32 storage do.
 * tests/store16/denorm.yml at batch 2, --precision 16.16 --half-type bf16, the host target: the
 * conv's results (input 1e-36 .. 4e-36, weights 1, batchnorm scale 1e-4 .. 3e-4) are mostly bf16
 * denormals, stored in 16 bits, read exactly by the global average pool; the dense layer
 * (weights 1, bias 0) carries them into logits ~1e-37.  Checks: the conv is on the native bf16
 * route and writes 16 bits; the interpreter's relu1 holds denormals; the logits are nonzero and
 * bitwise equal with native narrowing, tune bf16_sw_narrow=1 (integer rounding) and
 * tune store16=0 (f32 storage), and within 1e-2 of the interpreter's.  A build whose
 * narrowing flushes denormals to zero fails it.  Hosts without avx512bf16: skipped (there the
 * route is emulated and narrows with integer ops only). */
#include "codegen/cg_isa.h"
#include "test_codegen_harness.h"

static void set_param(ir_graph *g, const char *name, float lo, float step, int period) {
  for (int v = 0; v < g->n_values; v++) {
    ir_value *p = &g->values[v];
    if (p->kind != IR_VAL_PARAM || strcmp(p->name, name)) continue;
    int64_t n = ir_shape_numel(&p->shape);
    for (int64_t i = 0; i < n; i++) p->data[i] = lo + step * (float)(i % period);
    return;
  }
  CGT_CHECK(0, "no parameter %s", name);
}

/* Builds, runs (batch 2, 2 threads) and returns the logits (8 floats, malloc'd); *route: the
 * conv's kernel name contains want (NULL: not checked). */
static float *build_run(const char *label, const float *x, float **ref, const char *want) {
  char path[1024], so[512];
  snprintf(path, sizeof path, "%s/tests/store16/denorm.yml", CNNC_TEST_SRC);
  snprintf(so, sizeof so, "%s/denorm.so", cgt_dir);
  fe_options o;
  ir_diag d = {0};
  const char *const kv[][2] = {{"batch-size", "2"}, {"seed", "5"}, {"precision", "16.16"}, {"half-type", "bf16"}};
  ir_graph *g = cgt_load(path, kv, 4, &o);
  if (!g) return cgt_failures++, NULL;
  set_param(g, "c1/weight", 1.0f, 0.0f, 1);
  set_param(g, "bn1/gamma", 1e-4f, 1e-4f, 3);
  set_param(g, "bn1/beta", 0.0f, 0.0f, 1);
  set_param(g, "bn1/running_mean", 0.0f, 0.0f, 1);
  set_param(g, "bn1/running_var", 1.0f, 0.0f, 1);
  set_param(g, "fc/weight", 1.0f, 0.0f, 1);
  set_param(g, "fc/bias", 0.0f, 0.0f, 1);
  if (ref && !*ref) { /* the interpreter on the same graph (before the build's passes) */
    float **r = ir_interp(g, x, NULL);
    int relu = -1, den = 0, nz = 0;
    for (int i = 0; i < g->n_nodes; i++)
      if (!strcmp(g->nodes[i].name, "relu1")) relu = g->nodes[i].out;
    if (r && relu >= 0) {
      int64_t n = ir_shape_numel(&g->values[relu].shape);
      for (int64_t i = 0; i < n; i++) {
        float v = r[relu][i];
        nz += v != 0.0f;
        den += v != 0.0f && fabsf(v) < 0x1p-126f;
      }
      CGT_CHECK(den > n / 2, "%s: the interpreter's relu1 has %d denormals of %d nonzero values (%lld)", label, den, nz,
                (long long)n);
      *ref = malloc(8 * sizeof **ref);
      memcpy(*ref, r[g->outputs[0]], 8 * sizeof **ref);
    } else CGT_CHECK(0, "%s: interpreter failed", label);
    if (r) ir_interp_free(g, r);
  }
  if (cnnc_build_model(ct_g(g), &o, so, NULL, 0, &d)) {
    ir_diag_print(&d, stderr);
    CGT_CHECK(0, "%s: build failed", label);
    ir_graph_free(g);
    return NULL;
  }
  void *h = dlopen(so, RTLD_NOW | RTLD_LOCAL);
  const cnnc_abi_model *m = h ? dlsym(h, CNNC_ABI_SYMBOL) : NULL;
  float *y = NULL;
  if (m) {
    int found = !want;
    for (int s = 0; s < m->n_shards; s++)
      for (int i = 0; i < m->shards[s].n_ops; i++)
        if (want && !strcmp(m->shards[s].op_names[i], "c1")) {
          found = strstr(m->shards[s].kernel_names[i], want) != NULL;
          if (!found) fprintf(stderr, "%s: c1 runs %s\n", label, m->shards[s].kernel_names[i]);
        }
    CGT_CHECK(found, "%s: c1's kernel is not %s", label, want);
    y = cgt_run_copy(m, x, m->tensors[m->input].bytes / 4, 2); /* the 8 logits */
  } else CGT_CHECK(0, "%s: cannot load", label);
  if (h) dlclose(h);
  unlink(so);
  ir_graph_free(g);
  return y;
}

int main(void) {
  cg_target host;
  if (cgt_target(&host, NULL)) return 1;
  int native = host.has_avx512bf16;
  cg_target_dispose(&host);
  if (!native) {
    fprintf(stderr, "test_bf16_narrow_denorm: skipped (no avx512bf16 on this host)\n");
    return 0;
  }
  cgt_init_dir();
  ct_tune("bf16=2"); /* the bf16 kernels wherever the ISA has them: this test checks the kernels, not the route choice (codegen/cores.def) */
  enum { NX = 2 * 16 * 8 * 8 };
  static float x[NX];
  cgt_rng = 3;
  for (int i = 0; i < NX; i++) x[i] = cgt_uniform(1e-36f, 4e-36f);
  float *ref = NULL;
  float *a = build_run("native", x, &ref, "o16_bf16");
  ct_tune("bf16_sw_narrow=1");
  float *b = build_run("bf16_sw_narrow=1", x, NULL, "o16_bf16");
  ct_tune("bf16_sw_narrow=0");
  ct_tune("store16=0");
  float *f = build_run("store16=0", x, NULL, NULL);
  ct_tune("store16=1");
  if (a && b && f && ref) {
    int nz = 0, db = 0, df = 0;
    for (int i = 0; i < 8; i++) {
      nz += a[i] != 0.0f;
      db += memcmp(&a[i], &b[i], 4) != 0;
      df += memcmp(&a[i], &f[i], 4) != 0;
    }
    CGT_CHECK(nz == 8, "native: %d of 8 logits nonzero", nz);
    CGT_CHECK(db == 0, "native: %d of 8 logits differ from the integer rounding's (bf16_sw_narrow=1)", db);
    CGT_CHECK(df == 0, "native: %d of 8 logits differ from f32 storage's (store16=0)", df);
    CGT_CHECK(cgt_compare("native vs interpreter", a, ref, 8, 1e-2) == 0, "native: differs from the interpreter");
    fprintf(stderr, "logits[0] native %g, integer rounding %g, f32 storage %g, interpreter %g\n", a[0], b[0], f[0], ref[0]);
  } else cgt_failures++;
  free(a), free(b), free(f), free(ref);
  return cgt_done("test_bf16_narrow_denorm");
}
