/* test_train_dropout.c — training dropout draws a new mask every step (issue 5,
 * docs/training.md): the keep-mask hashes (seed, step counter "optimizer/step", element).
 * Model: f32 input [1, 64, 64] at batch 1 -> 1x1 conv (so the dropout has a gradient node) ->
 * flatten -> dropout 0.3 -> dense 2, trained with SGD at lr 0.01.  The dense weight row 0
 * changes exactly where its input element was kept (dW[0, j] = dlogits[0] * mask[j] *
 * conv(x)[j] / 0.7), so the weight before and after a step reads back the step's mask, from the compiled model (cnnrt_get_state) and from the interpreter
 * (ir_train_step).  Checks over 3 steps:
 *   (a) the masks of different steps differ, and the fraction kept in both steps is near
 *       (1-rate)^2 (a fixed mask would give 1-rate);
 *   (b) compiled == interpreter: the same mask bit for bit, the loss and, after the steps,
 *       every state tensor within 1e-4;
 *   (c) 1 vs 2 threads: the same masks and bitwise the same state;
 *   (d) the kept fraction of every step within 4.5 binomial sigmas of 1-rate;
 * and the graph wiring: every training dropout node (forward and gradient) reads the step. */
#include "test_codegen_harness.h"
#include "train_codegen_check.h"

enum { STEPS = 3, IN = 64 * 64 };
static const float RATE = 0.3f;

static const char *yml =
    "name: drop_train\n"
    "input: {shape: [1, 64, 64], dtype: f32, classes: 2}\n"
    "layers:\n"
    "  - {name: c, op: conv, filters: 1, kernel: 1}\n"
    "  - {name: f, op: flatten}\n"
    "  - {name: dr, op: dropout, rate: 0.3}\n"
    "  - {name: d, op: dense, units: 2}\n";

static ir_graph *load(const char *path, fe_options *o) {
  const char *const kv[][2] = {{"mode", "training"}, {"batch-size", "1"}, {"optimizer", "sgd"}, {"seed", "5"}};
  return cgt_load(path, kv, 4, o);
}

/* Both training dropout nodes (forward, gradient) read "optimizer/step" as in[1]. */
static int check_wiring(const ir_graph *gr) {
  int t = ir_find_value(gr, "optimizer/step"), n = 0, bad = 0;
  for (int i = 0; i < gr->n_nodes; i++) {
    const ir_node *nd = &gr->nodes[i];
    if (nd->op != IR_OP_dropout) continue;
    n++;
    bad += !(nd->n_in == 2 && nd->in[1] == t);
  }
  CGT_CHECK(t >= 0 && n == 2 && !bad, "wiring: step %d, %d dropout nodes, %d without the step operand", t, n, bad);
  return !(t >= 0 && n == 2 && !bad);
}

/* mask[j] = row 0 of the dense weight changed (before -> after).  Returns the kept count. */
static int mask_of(const float *before, const float *after, unsigned char *mask) {
  int k = 0;
  for (int j = 0; j < IN; j++) k += mask[j] = before[j] != after[j];
  return k;
}

static int get_w(cnnrt_model *m, float *w) { return cnnrt_get_state(m, "d/weight", w, 2 * IN * sizeof *w) != CNNRT_OK; }

int main(void) {
  cgt_init_dir();
  char path[512], so[512];
  if (cgt_write_tmp(path, "drop_train.yml", yml)) return 1;
  snprintf(so, sizeof so, "%s/drop_train.so", cgt_dir);
  fe_options o;
  ir_graph *gc = load(path, &o), *gr = load(path, &o);
  cnnrt_model *m[2] = {NULL, NULL};
  if (!gc || !gr || !(m[0] = tct_build(gr, gc, &o, "sgd", so, NULL, "drop_train"))) return 1;
  CGT_CHECK(cnnrt_open(so, NULL, &m[1]) == CNNRT_OK, "second open: %s", cnnrt_last_error());
  for (int t = 0; t < 2 && m[1]; t++) {
    CGT_CHECK(cnnrt_set_threads(m[t], -1, t + 1) == CNNRT_OK, "%d threads: %s", t + 1, cnnrt_last_error());
    cnnrt_set_learning_rate(m[t], 0.01);
  }
  int wv = ir_find_value(gr, "d/weight");
  static float wb[2][2 * IN], wa[2][2 * IN], rb[2 * IN];
  static unsigned char mk[STEPS][IN], mc[IN];
  tct_batch b = tct_batch_alloc(gr);
  double sd = sqrt(RATE * (1.0 - RATE) / IN);
  for (int s = 0; s < STEPS && m[1] && wv >= 0 && !cgt_failures; s++) {
    tct_batch_fill(&b);
    memcpy(rb, gr->values[wv].data, sizeof rb);
    float **vals = ir_train_step(gr, b.x, b.labels, 0.01f);
    float want = vals[ir_find_value(gr, "loss")][0];
    int kept_ref = mask_of(rb, gr->values[wv].data, mk[s]);
    ir_interp_free(gr, vals);
    for (int t = 0; t < 2; t++) {
      float loss = NAN;
      if (get_w(m[t], wb[t]) ||
          cnnrt_train_step(m[t], b.img, (size_t)(b.nx * b.esz), b.labels, 1, &loss, NULL) != CNNRT_OK ||
          get_w(m[t], wa[t])) {
        fprintf(stderr, "  step %d, %d thread(s): %s\n", s + 1, t + 1, cnnrt_last_error());
        cgt_failures++;
        continue;
      }
      char l[96];
      snprintf(l, sizeof l, "step %d, %d thread(s): loss", s + 1, t + 1);
      cgt_failures += cgt_compare(l, &loss, &want, 1, 1e-4); /* (b) */
      int kept = mask_of(wb[t], wa[t], mc);
      CGT_CHECK(!memcmp(mc, mk[s], IN), "step %d, %d thread(s): compiled mask != interpreter mask (%d vs %d kept)",
                s + 1, t + 1, kept, kept_ref); /* (b), (c) */
    }
    double frac = (double)kept_ref / IN;
    CGT_CHECK(fabs(frac - (1.0 - RATE)) < 4.5 * sd, "step %d: kept %.4f, want %.2f +- %.4f", s + 1, frac, 1.0 - RATE,
              4.5 * sd); /* (d) */
    fprintf(stderr, "step %d: kept %d of %d (%.4f)\n", s + 1, kept_ref, IN, frac);
    for (int p = 0; p < s; p++) { /* (a) */
      int both = 0, diff = 0;
      for (int j = 0; j < IN; j++) both += mk[p][j] && mk[s][j], diff += mk[p][j] != mk[s][j];
      double q = (1.0 - RATE) * (1.0 - RATE), fb = (double)both / IN;
      CGT_CHECK(diff > 0 && fabs(fb - q) < 4.5 * sqrt(q * (1.0 - q) / IN),
                "steps %d and %d: %d elements differ, kept in both %.4f (want %.2f: independent masks)", p + 1, s + 1,
                diff, fb, q);
      fprintf(stderr, "steps %d/%d: %d mask bits differ, kept in both %.4f\n", p + 1, s + 1, diff, fb);
    }
  }
  cgt_failures += check_wiring(gr);
  int seen = 0;
  if (!cgt_failures && m[1]) cgt_failures += tct_compare_state(m[0], m[1], gr, STEPS, "drop_train", &seen); /* (b), (c) */
  CGT_CHECK(seen == 5, "%d state tensors checked, want 5 (c and d weight, bias; optimizer/step)", seen);
  tct_batch_free(&b);
  cnnrt_close(m[0]), cnnrt_close(m[1]);
  unlink(so), unlink(path);
  ir_graph_free(gc), ir_graph_free(gr);
  return cgt_done("test_train_dropout");
}
