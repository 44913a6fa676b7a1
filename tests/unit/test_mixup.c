/* test_mixup.c — mixup and cutmix (docs/runtime.md "Mixup and cutmix"): a model compiled with
 * --mixed-labels (labels [N,3] = (a, b, lam), loss lam CE(a) + (1-lam) CE(b)) trained by
 * cnnrt_train_step_mixed against the interpreter (ir_train_step) on the same mixed rows, loss
 * per step and every state tensor within 1e-4 (label smoothing 0.1), class ids through
 * cnnrt_train_step and the eval program on such a model; cnnrt_mix_batch: same seed and index
 * give the same bytes, the lam statistics of Beta(alpha, alpha), the mixup formula element by
 * element (u8 and f32, odd batch), the cutmix box and its area-corrected lam; bad input. */
#include <math.h>

#include "train_case_check.h"

enum { BATCH = 5, STEPS = 3 };

static const char *mix_yml =
    "name: mix_train\n"
    "input: {shape: [3, 8, 7], dtype: u8, mean: [0.5, 0.4, 0.3], std: [0.2, 0.3, 0.25], classes: 6}\n"
    "layers:\n"
    "  - {name: c1, op: conv, filters: 4, kernel: 3, padding: 1}\n"
    "  - {name: r1, op: relu}\n"
    "  - {name: f, op: flatten}\n"
    "  - {name: d, op: dense, units: 6}\n";

static ir_graph *load_mixed(const char *path, int mixed, fe_options *o) {
  const char *const kv[][2] = {{"mode", "training"},  {"batch-size", "5"},        {"optimizer", "momentum"},
                               {"seed", "3"},         {"label-smoothing", "0.1"}, {"mixed-labels", mixed ? "1" : "0"}};
  return cgt_load(path, kv, 6, o);
}

/* Random mixed rows for b's batch: classes a, b, lam uniform in [0, 1] (a == b and lam 0 / 1
 * included). */
static void fill_mixed(const tct_batch *b, float *rows, int step) {
  for (int i = 0; i < b->batch; i++) {
    rows[3 * i] = (float)cgt_int(0, b->classes - 1);
    rows[3 * i + 1] = i == 1 ? rows[3 * i] : (float)cgt_int(0, b->classes - 1);
    rows[3 * i + 2] = i == 2 ? (float)(step & 1) : cgt_uniform(0.0f, 1.0f);
  }
}

static int compiled_vs_interp(const char *path) {
  fe_options o;
  char so[512];
  snprintf(so, sizeof so, "%s/mix.so", cgt_dir);
  ir_graph *gc = load_mixed(path, 1, &o), *gr = load_mixed(path, 1, &o);
  cnnrt_model *m = gc && gr ? tct_build(gr, gc, &o, "momentum", so, NULL, "mixed labels") : NULL;
  CGT_CHECK(m != NULL, "mixed labels: build");
  if (!m) return 1;
  CGT_CHECK(cnnrt_mixed_labels(m) == 1, "cnnrt_mixed_labels of a --mixed-labels model");
  cnnrt_set_learning_rate(m, 0.05);
  tct_batch b = tct_batch_alloc(gr);
  float rows[3 * BATCH], wide[3 * BATCH];
  int bad = 0;
  for (int s = 0; s < STEPS && !bad; s++) {
    tct_batch_fill(&b);
    fill_mixed(&b, rows, s);
    const float *lab = rows;
    float loss = NAN, acc = NAN;
    cnnrt_status st;
    if (s == STEPS - 1) { /* class ids through cnnrt_train_step: rows (y, y, 1) */
      for (int i = 0; i < BATCH; i++) wide[3 * i] = wide[3 * i + 1] = b.labels[i], wide[3 * i + 2] = 1.0f;
      lab = wide;
      st = cnnrt_train_step(m, b.img, (size_t)(b.nx * b.esz), b.labels, 1, &loss, &acc);
    } else {
      st = cnnrt_train_step_mixed(m, b.img, (size_t)(b.nx * b.esz), rows, 1, &loss, &acc);
    }
    float **vals = ir_train_step(gr, b.x, lab, 0.05f);
    float want = vals[ir_find_value(gr, "loss")][0];
    ir_interp_free(gr, vals);
    char l[64];
    snprintf(l, sizeof l, "mixed labels: step %d loss", s + 1);
    CGT_CHECK(st == CNNRT_OK, "%s: %s", l, cnnrt_last_error());
    CGT_CHECK(acc >= 0 && acc <= 1, "%s: accuracy %g", l, acc);
    bad += st != CNNRT_OK || cgt_compare(l, &loss, &want, 1, 1e-4);
  }
  int seen = 0;
  if (!bad) bad += tct_compare_state(m, NULL, gr, STEPS, "mixed labels", &seen);
  CGT_CHECK(seen == cnnrt_num_state(m) && seen > 0, "mixed labels: %d of %d state tensors compared", seen, cnnrt_num_state(m));
  /* the eval program reads class ids widened as the training does: its top-1 count equals
   * the ranks' */
  float el = NAN, ea = NAN, sl[BATCH];
  int32_t rk[BATCH];
  CGT_CHECK(cnnrt_evaluate(m, b.img, (size_t)(b.nx * b.esz), b.labels, 1, &el, &ea) == CNNRT_OK &&
                cnnrt_evaluate_samples(m, b.img, (size_t)(b.nx * b.esz), b.labels, 1, sl, rk) == CNNRT_OK,
            "mixed labels: evaluate: %s", cnnrt_last_error());
  int hits = 0;
  for (int i = 0; i < BATCH; i++) hits += rk[i] == 0;
  CGT_CHECK(fabsf(ea - (float)hits / BATCH) < 1e-6f, "mixed labels: eval accuracy %g, ranks give %d of %d", ea, hits, BATCH);
  /* bad rows */
  rows[2] = 1.5f;
  CGT_CHECK(cnnrt_train_step_mixed(m, b.img, (size_t)(b.nx * b.esz), rows, 1, NULL, NULL) == CNNRT_INVALID_ARGUMENT &&
                strstr(cnnrt_last_error(), "weight"),
            "lam 1.5 refused: %s", cnnrt_last_error());
  rows[2] = 0.5f, rows[4] = 6;
  CGT_CHECK(cnnrt_train_step_mixed(m, b.img, (size_t)(b.nx * b.esz), rows, 1, NULL, NULL) == CNNRT_INVALID_ARGUMENT &&
                strstr(cnnrt_last_error(), "class b"),
            "class 6 of 6 refused: %s", cnnrt_last_error());
  bad = tct_free(&b, m, so, gc, gr, "mixed labels", bad);
  /* a plain model refuses mixed rows */
  ir_graph *gp = load_mixed(path, 0, &o);
  cnnrt_model *mp = NULL;
  ir_diag d = {0};
  snprintf(so, sizeof so, "%s/plain.so", cgt_dir);
  CGT_CHECK(gp && !cnnc_build_model(ct_g(gp), &o, so, NULL, 0, &d) && cnnrt_open(so, NULL, &mp) == CNNRT_OK,
            "plain model: %s", d.msg);
  if (mp) {
    float r3[3 * BATCH] = {0};
    unsigned char img[BATCH * 3 * 8 * 7] = {0};
    CGT_CHECK(cnnrt_mixed_labels(mp) == 0, "cnnrt_mixed_labels of a plain model");
    CGT_CHECK(cnnrt_train_step_mixed(mp, img, sizeof img, r3, 1, NULL, NULL) == CNNRT_UNSUPPORTED &&
                  strstr(cnnrt_last_error(), "--mixed-labels"),
              "plain model: mixed rows refused: %s", cnnrt_last_error());
    cnnrt_close(mp);
  }
  unlink(so);
  if (gp) ir_graph_free(gp);
  return bad;
}

/* ---- cnnrt_mix_batch ------------------------------------------------------------------------ */
enum { MC = 2, MH = 9, MW = 11, ME = MC * MH * MW };

static void test_determinism(void) {
  cnnrt_mix_options o = {0.4, 1.0, 42};
  unsigned char x[4][ME], y[4][ME];
  float lab[4] = {0, 1, 2, 3}, r1[12], r2[12];
  int changed = 0;
  for (uint64_t idx = 0; idx < 20; idx++) {
    for (int i = 0; i < 4 * ME; i++) ((unsigned char *)x)[i] = ((unsigned char *)y)[i] = (unsigned char)cgt_int(0, 255);
    double l1, l2;
    cnnrt_mix_kind k1, k2;
    CGT_CHECK(cnnrt_mix_batch(&o, idx, CNNRT_U8, x, 4, MC, MH, MW, lab, r1, &l1, &k1) == CNNRT_OK &&
                  cnnrt_mix_batch(&o, idx, CNNRT_U8, y, 4, MC, MH, MW, lab, r2, &l2, &k2) == CNNRT_OK,
              "mix: %s", cnnrt_last_error());
    CGT_CHECK(!memcmp(x, y, sizeof x) && !memcmp(r1, r2, sizeof r1) && l1 == l2 && k1 == k2,
              "index %llu: same seed and index, different bytes", (unsigned long long)idx);
    double l3;
    cnnrt_mix_options o2 = o;
    o2.seed = 43;
    cnnrt_mix_batch(&o2, idx, CNNRT_U8, y, 4, MC, MH, MW, lab, r2, &l3, NULL);
    changed += l3 != l1;
  }
  CGT_CHECK(changed >= 19, "another seed changed lam in only %d of 20 batches", changed);
}

/* lam over 4000 batches: mean 1/2 and variance 1/(4(2a+1)) of Beta(a, a) for mixup; cutmix's
 * corrected lam stays in [0, 1]; with both, about half are cutmix. */
static void test_lam_stats(void) {
  const double alphas[] = {0.2, 1.0, 2.0};
  float lab[2] = {0, 1}, rows[6], img[2 * 4];
  for (int a = 0; a < 3; a++) {
    cnnrt_mix_options o = {alphas[a], 0, 7};
    double s = 0, s2 = 0;
    int n = 4000;
    for (int i = 0; i < n; i++) {
      double lam;
      cnnrt_mix_batch(&o, (uint64_t)i, CNNRT_F32, img, 2, 1, 2, 2, lab, rows, &lam, NULL);
      s += lam, s2 += lam * lam;
    }
    double mean = s / n, var = s2 / n - mean * mean, want = 1.0 / (4.0 * (2.0 * alphas[a] + 1.0));
    CGT_CHECK(fabs(mean - 0.5) < 0.02 && fabs(var - want) < 0.1 * want, "alpha %g: lam mean %.4f (0.5), variance %.4f (%.4f)",
              alphas[a], mean, var, want);
  }
  cnnrt_mix_options o = {0.5, 1.0, 9};
  int cut = 0, n = 4000;
  for (int i = 0; i < n; i++) {
    double lam;
    cnnrt_mix_kind k;
    float big[2 * 32 * 32];
    cnnrt_mix_batch(&o, (uint64_t)i, CNNRT_F32, big, 2, 1, 32, 32, lab, rows, &lam, &k);
    cut += k == CNNRT_MIX_CUTMIX;
    CGT_CHECK(lam >= 0 && lam <= 1 && (k == CNNRT_MIX_CUTMIX || k == CNNRT_MIX_MIXUP), "batch %d: lam %g kind %d", i, lam, k);
  }
  CGT_CHECK(fabs((double)cut / n - 0.5) < 0.03, "both alphas: %d of %d batches cutmix", cut, n);
}

/* Every element of a mixup batch of 5 (the middle one mixed with itself) is the formula's. */
static void test_mixup_formula(void) {
  cnnrt_mix_options o = {0.7, 0, 5};
  unsigned char x[5][ME], x0[5][ME];
  float f[5][ME], f0[5][ME], lab[5] = {4, 3, 2, 1, 0}, rows[15];
  for (int i = 0; i < 5 * ME; i++) {
    ((unsigned char *)x)[i] = ((unsigned char *)x0)[i] = (unsigned char)cgt_int(0, 255);
    ((float *)f)[i] = ((float *)f0)[i] = cgt_uniform(-2, 2);
  }
  double lam, lam2;
  cnnrt_mix_kind k;
  CGT_CHECK(cnnrt_mix_batch(&o, 11, CNNRT_U8, x, 5, MC, MH, MW, lab, rows, &lam, &k) == CNNRT_OK && k == CNNRT_MIX_MIXUP,
            "mixup u8: %s", cnnrt_last_error());
  cnnrt_mix_batch(&o, 11, CNNRT_F32, f, 5, MC, MH, MW, lab, rows, &lam2, NULL);
  CGT_CHECK(lam == lam2 && lam > 0 && lam < 1, "lam %g, f32 %g", lam, lam2);
  float la = (float)lam, lb = (float)(1.0 - lam);
  int bad = 0, moved = 0;
  for (int i = 0; i < 5; i++) {
    int j = 4 - i;
    for (int e = 0; e < ME; e++) {
      float p = (float)x0[i][e] * la, q = (float)x0[j][e] * lb;
      bad += x[i][e] != (unsigned char)rintf(p + q);
      float pf = f0[i][e] * la, qf = f0[j][e] * lb;
      bad += f[i][e] != pf + qf;
      moved += x[i][e] != x0[i][e];
    }
    CGT_CHECK(rows[3 * i] == lab[i] && rows[3 * i + 1] == lab[j] && rows[3 * i + 2] == (float)lam, "row %d: %g %g %g", i,
              rows[3 * i], rows[3 * i + 1], rows[3 * i + 2]);
  }
  CGT_CHECK(bad == 0 && moved > ME, "mixup: %d elements differ from lam x_i + (1 - lam) x_(n-1-i); %d changed", bad, moved);
}

/* Cutmix on samples of constant value i + 1: sample i's box holds n - i, a rectangle of area
 * (1 - lam) H W in every channel. */
static void test_cutmix_box(void) {
  cnnrt_mix_options o = {0, 1.0, 8};
  float lab[4] = {0, 1, 2, 3}, rows[12];
  int boxes = 0;
  for (uint64_t idx = 0; idx < 50; idx++) {
    unsigned char x[4][ME];
    for (int i = 0; i < 4; i++) memset(x[i], i + 1, ME);
    double lam;
    cnnrt_mix_kind k;
    cnnrt_mix_batch(&o, idx, CNNRT_U8, x, 4, MC, MH, MW, lab, rows, &lam, &k);
    CGT_CHECK(k == CNNRT_MIX_CUTMIX, "cutmix only: kind %d", k);
    for (int i = 0; i < 4; i++) {
      int cnt = 0, y0 = MH, y1 = -1, x0 = MW, x1 = -1, other = 0;
      for (int c = 0; c < MC; c++)
        for (int yy = 0; yy < MH; yy++)
          for (int xx = 0; xx < MW; xx++) {
            unsigned char v = x[i][(c * MH + yy) * MW + xx];
            if (v == 4 - i) {
              cnt++;
              if (c == 0) y0 = yy < y0 ? yy : y0, y1 = yy > y1 ? yy : y1, x0 = xx < x0 ? xx : x0, x1 = xx > x1 ? xx : x1;
            } else {
              other += v != i + 1;
            }
          }
      int area = cnt / MC, rect = y1 >= y0 ? (y1 - y0 + 1) * (x1 - x0 + 1) : 0;
      boxes += area > 0;
      CGT_CHECK(other == 0 && cnt == MC * area && area == rect && fabs(lam - (1.0 - (double)area / (MH * MW))) < 1e-12 &&
                    rows[3 * i + 2] == (float)lam,
                "index %llu sample %d: box of %d pixels (rectangle %d), lam %g", (unsigned long long)idx, i, area, rect, lam);
    }
  }
  CGT_CHECK(boxes > 100, "only %d of 200 samples got a box", boxes);
}

static void test_bad_input(void) {
  float lab[2] = {0, 1}, rows[6], img[8];
  cnnrt_mix_options o = {-0.2, 0, 1};
  CGT_CHECK(cnnrt_mix_batch(&o, 0, CNNRT_F32, img, 2, 1, 2, 2, lab, rows, NULL, NULL) == CNNRT_INVALID_ARGUMENT &&
                strstr(cnnrt_last_error(), "alphas"),
            "negative alpha: %s", cnnrt_last_error());
  o.mixup_alpha = NAN;
  CGT_CHECK(cnnrt_mix_batch(&o, 0, CNNRT_F32, img, 2, 1, 2, 2, lab, rows, NULL, NULL) == CNNRT_INVALID_ARGUMENT, "NaN alpha");
  o.mixup_alpha = 1;
  CGT_CHECK(cnnrt_mix_batch(&o, 0, CNNRT_I32, img, 2, 1, 2, 2, lab, rows, NULL, NULL) == CNNRT_INVALID_ARGUMENT, "i32 images");
  CGT_CHECK(cnnrt_mix_batch(&o, 0, CNNRT_F32, img, 0, 1, 2, 2, lab, rows, NULL, NULL) == CNNRT_INVALID_ARGUMENT, "n 0");
  o.mixup_alpha = 0;
  double lam;
  float keep[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  memcpy(img, keep, sizeof img);
  CGT_CHECK(cnnrt_mix_batch(&o, 0, CNNRT_F32, img, 2, 1, 2, 2, lab, rows, &lam, NULL) == CNNRT_OK && lam == 1 &&
                !memcmp(img, keep, sizeof img) && rows[1] == 1 && rows[2] == 1,
            "alphas 0: lam %g, images unchanged", lam);
}

int main(void) {
  cgt_init_dir();
  char path[512];
  snprintf(path, sizeof path, "%s/mix_train.yml", cgt_dir);
  if (cgt_write_file(path, mix_yml) == 0) cgt_failures += compiled_vs_interp(path);
  else cgt_failures++;
  unlink(path);
  test_determinism();
  test_lam_stats();
  test_mixup_formula();
  test_cutmix_box();
  test_bad_input();
  return cgt_done("test_mixup");
}
