/* report_html.c — the compile report as one self-contained HTML page: inline CSS and inline
 * SVG charts (memory by category per shard, liveness per shard, top ops by estimated time,
 * pipeline balance, compile phases) and the op table.  No script, no network. */
#include <stdlib.h>
#include <string.h>

#include "tools/report/report_internal.h"

#define W 760 /* chart width in px */

/* Counted against --memory-limit first, weights last (inference: constants in the .so, not
 * counted, drawn faded). */
static const char *const cat_name[] = {"activations", "stash", "gaps", "io", "temporaries", "optimizer state", "accumulators", "weights"};
static const char *const cat_color[] = {"#f28e2b", "#e15759", "#d3d3d3", "#59a14f", "#b07aa1", "#76b7b2", "#edc948", "#4e79a7"};
#define N_CAT 8

/* Shards drawn: the model shards (in training the layout's stages fold into them). */
static int n_mem_shards(const rp_report *r) { return r->tr ? r->tr->S : r->n_shards; }
static int64_t limited_of(const rp_report *r, int s) {
  return r->tr ? rp_train_limited(r, &r->tr->ts[s]) : rp_limited(r, &r->sh[s]);
}

void rp_html_str(FILE *f, const char *s) {
  for (; s && *s; s++) {
    switch (*s) {
    case '<': fputs("&lt;", f); break;
    case '>': fputs("&gt;", f); break;
    case '&': fputs("&amp;", f); break;
    case '"': fputs("&quot;", f); break;
    default: fputc(*s, f);
    }
  }
}

/* "12.3 MiB" style (binary units, as --memory-limit reads them). */
static const char *human(double b, char *buf, size_t n) {
  const char *u[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int i = 0;
  while (b >= 1024 && i < 4) b /= 1024, i++;
  snprintf(buf, n, i ? "%.1f %s" : "%.0f %s", b, u[i]);
  return buf;
}

static void cats(const rp_report *r, int s, int64_t v[N_CAT]) {
  if (r->tr) {
    const rp_tshard *x = &r->tr->ts[s];
    int64_t fr = r->tr->frames;
    v[0] = x->peak_live, v[1] = x->stash_mb * fr, v[2] = x->arena - x->peak_live, v[3] = x->io_mb * fr, v[4] = 0;
    v[5] = x->optimizer_state, v[6] = x->accumulators, v[7] = x->weights;
    return;
  }
  const rp_shard *sh = &r->sh[s];
  v[0] = sh->peak_live - sh->stash_scratch, v[1] = sh->stash_scratch + sh->stash_io, v[2] = sh->arena - sh->peak_live;
  v[3] = sh->io, v[4] = sh->temporaries, v[5] = sh->optimizer_state, v[6] = 0, v[7] = sh->weights;
}

static void chart_memory(const rp_report *r, FILE *f) {
  double max = (double)r->limit;
  int ns = n_mem_shards(r);
  for (int s = 0; s < ns; s++) {
    int64_t v[N_CAT], t = 0;
    cats(r, s, v);
    for (int c = 0; c < N_CAT; c++) t += v[c];
    if (t > max) max = (double)t;
  }
  if (max <= 0) max = 1;
  int bar = 26, h = 30 + ns * (bar + 10), x0 = 80, w = W - x0 - 20;
  char b1[32];
  fprintf(f, "<h2>Memory by category per shard</h2>\n<svg class=\"chart\" id=\"memory\" width=\"%d\" height=\"%d\" "
             "xmlns=\"http://www.w3.org/2000/svg\">\n", W, h + 20);
  for (int s = 0; s < ns; s++) {
    int64_t v[N_CAT];
    cats(r, s, v);
    double x = x0;
    int y = 10 + s * (bar + 10);
    fprintf(f, "<text x=\"4\" y=\"%d\">shard %d</text>\n", y + 18, s);
    for (int c = 0; c < N_CAT; c++) {
      double bw = (double)v[c] / max * w;
      int faded = c == N_CAT - 1 && !r->training;
      fprintf(f, "<rect x=\"%.1f\" y=\"%d\" width=\"%.1f\" height=\"%d\" fill=\"%s\"%s><title>shard %d %s: %s%s</title></rect>\n",
              x, y, bw, bar, cat_color[c], faded ? " fill-opacity=\"0.4\"" : "", s, cat_name[c],
              human((double)v[c], b1, sizeof b1), faded ? " (in the .so, not counted against the limit)" : "");
      x += bw;
    }
    fprintf(f, "<text x=\"%.1f\" y=\"%d\" font-size=\"11\">%s</text>\n", x + 4 < W - 60 ? x + 4 : W - 60.0, y + 18,
            human(x > x0 ? (x - x0) / w * max : 0, b1, sizeof b1));
  }
  if (r->limit > 0) {
    double lx = x0 + (double)r->limit / max * w;
    fprintf(f, "<line x1=\"%.1f\" y1=\"4\" x2=\"%.1f\" y2=\"%d\" stroke=\"red\" stroke-dasharray=\"4\"/>"
               "<text x=\"%.1f\" y=\"%d\" fill=\"red\" font-size=\"11\" text-anchor=\"end\">limit %s</text>\n",
            lx, lx, h - 12, lx - 3, h - 4, human((double)r->limit, b1, sizeof b1));
  }
  int lx = 4;
  for (int c = 0; c < N_CAT; c++, lx += 92)
    fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"10\" height=\"10\" fill=\"%s\"/><text x=\"%d\" y=\"%d\" font-size=\"11\">%s</text>\n",
            lx, h + 2, cat_color[c], lx + 14, h + 11, cat_name[c]);
  fprintf(f, "</svg>\n<p>Counted against <code>--memory-limit</code>: everything the runtime allocates for a shard "
             "(arena = activations + stash + gaps, io%s).", r->training ? ", the state buffer's weights, optimizer state and gradient "
                                                                           "accumulators; in training the arena is the shard's scratch (the "
                                                                           "largest of its stages), stash and io are the train tensors of "
                                                                           "every in-flight frame"
                                                                         : "; the weights are constants in the .so and are not counted");
  char b2[32];
  for (int s = 0; s < ns; s++) {
    int64_t lim = limited_of(r, s);
    fprintf(f, " Shard %d: %s", s, human((double)lim, b1, sizeof b1));
    if (r->limit > 0)
      fprintf(f, " (%s %s)", human((double)(lim > r->limit ? lim - r->limit : r->limit - lim), b2, sizeof b2),
              lim > r->limit ? "over the limit" : "headroom");
    fprintf(f, ".");
  }
  fprintf(f, "</p>\n");
}

/* One polyline chart of n points; a dashed line at ref (0: none), a vertical line before
 * point split (0: none) with labels left/right of it. */
static void curve(FILE *f, const char *id, const char *title, const int64_t *v, int n, double ref, int split,
                  const char *left, const char *right, const char *foot) {
  int h = 160, x0 = 70, w = W - x0 - 20, d = n > 1 ? n - 1 : 1;
  char b1[32];
  double max = ref;
  for (int t = 0; t < n; t++) max = (double)v[t] > max ? (double)v[t] : max;
  if (max <= 0) max = 1;
  fprintf(f, "<svg class=\"chart liveness\" id=\"%s\" width=\"%d\" height=\"%d\" xmlns=\"http://www.w3.org/2000/svg\">\n"
             "<text x=\"4\" y=\"14\">", id, W, h + 30);
  rp_html_str(f, title);
  fprintf(f, "</text>\n<text x=\"4\" y=\"34\" font-size=\"11\">%s</text><text x=\"4\" y=\"%d\" font-size=\"11\">0</text>\n",
          human(max, b1, sizeof b1), h + 10);
  if (ref > 0)
    fprintf(f, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#888\" stroke-dasharray=\"4\"/>\n", x0,
            20 + (h - 10) * (1 - ref / max), x0 + w, 20 + (h - 10) * (1 - ref / max));
  if (split > 0 && split < n) {
    double sx = x0 + ((double)split - 0.5) / d * w;
    fprintf(f, "<line x1=\"%.1f\" y1=\"18\" x2=\"%.1f\" y2=\"%d\" stroke=\"#4e79a7\"/>"
               "<text x=\"%.1f\" y=\"30\" font-size=\"11\" text-anchor=\"end\">%s</text>"
               "<text x=\"%.1f\" y=\"30\" font-size=\"11\">%s</text>\n",
            sx, sx, h + 10, sx - 4, left, sx + 4, right);
  }
  fprintf(f, "<polyline fill=\"none\" stroke=\"#f28e2b\" stroke-width=\"2\" points=\"");
  for (int t = 0; t < n; t++) fprintf(f, "%.1f,%.1f ", x0 + (double)t / d * w, 20 + (h - 10) * (1 - (double)v[t] / max));
  fprintf(f, "\"/>\n<text x=\"%d\" y=\"%d\" font-size=\"11\">", x0, h + 26);
  rp_html_str(f, foot);
  fprintf(f, "</text>\n</svg>\n");
}

static void chart_liveness_train(const rp_report *r, FILE *f) {
  const rp_train *t = r->tr;
  char b1[32], b2[32], foot[256], title[64];
  fprintf(f, "<h2>Liveness per program step</h2>\n<p>Per shard: bytes live at each step of its forward program, then "
             "of its backward program &mdash; the running stage's scratch (the memory plan's usage records) plus "
             "the train tensors the shard wrote that are still to be read (the stash of one micro-batch and the "
             "boundaries): the forward/backward mountain.  The dashed line is the shard's scratch arena.</p>\n");
  for (int s = 0; s < t->S; s++) {
    const rp_tshard *x = &t->ts[s];
    char id[32];
    snprintf(id, sizeof id, "liveness-%d", s);
    snprintf(title, sizeof title, "shard %d: fwd/s%d then bwd/s%d", s, s, s);
    snprintf(foot, sizeof foot, "%d forward + %d backward steps; peak %s at step %d; stash per micro-batch %s", x->n_live_fwd,
             x->n_live - x->n_live_fwd, human(x->n_live ? (double)x->live[x->peak_step] : 0, b1, sizeof b1), x->peak_step,
             human((double)x->stash_mb, b2, sizeof b2));
    curve(f, id, title, x->live, x->n_live, (double)x->arena, x->n_live_fwd, "forward", "backward", foot);
  }
  int64_t peak = 0;
  for (int i = 0; i < t->n_prog; i++) peak = t->prog_live[i] > peak ? t->prog_live[i] : peak;
  snprintf(foot, sizeof foot, "%d steps (every forward stage, then every backward stage); peak %s", t->n_prog,
           human((double)peak, b1, sizeof b1));
  int split = 0;
  for (int st = 0; st < t->n_stages; st++)
    if (t->st_phase[st] == PASS_PHASE_FWD) split += r->sh[st].n_k;
  curve(f, "liveness-program", "whole micro-batch program (one micro-batch, every shard)", t->prog_live, t->n_prog, 0, split,
        "forward", "backward", foot);
}

static void chart_liveness(const rp_report *r, FILE *f) {
  if (r->tr) {
    chart_liveness_train(r, f);
    return;
  }
  fprintf(f, "<h2>Liveness per program step</h2>\n<p>Scratch bytes live at each op of a shard (the memory "
             "plan's usage records); the dashed line is the arena size.</p>\n");
  int h = 160, x0 = 70, w = W - x0 - 20;
  char b1[32];
  for (int s = 0; s < r->n_shards; s++) {
    const rp_shard *sh = &r->sh[s];
    double max = (double)(sh->arena > sh->peak_live ? sh->arena : sh->peak_live);
    if (max <= 0) max = 1;
    int n = sh->n_k > 1 ? sh->n_k - 1 : 1;
    fprintf(f, "<svg class=\"chart liveness\" id=\"liveness-%d\" width=\"%d\" height=\"%d\" "
               "xmlns=\"http://www.w3.org/2000/svg\">\n<text x=\"4\" y=\"14\">shard %d</text>\n",
            s, W, h + 30, s);
    fprintf(f, "<text x=\"4\" y=\"34\" font-size=\"11\">%s</text><text x=\"4\" y=\"%d\" font-size=\"11\">0</text>\n",
            human(max, b1, sizeof b1), h + 10);
    fprintf(f, "<line x1=\"%d\" y1=\"20\" x2=\"%d\" y2=\"20\" stroke=\"#888\" stroke-dasharray=\"4\"/>\n", x0, x0 + w);
    fprintf(f, "<polyline fill=\"none\" stroke=\"#f28e2b\" stroke-width=\"2\" points=\"");
    for (int t = 0; t < sh->n_k; t++)
      fprintf(f, "%.1f,%.1f ", x0 + (double)t / n * w, 20 + (h - 10) * (1 - (double)sh->live[t] / max));
    fprintf(f, "\"/>\n<text x=\"%d\" y=\"%d\" font-size=\"11\">op 0 .. %d; peak %s at op %d</text>\n</svg>\n", x0,
            h + 26, sh->n_k - 1, human((double)sh->peak_live, b1, sizeof b1), sh->peak_step);
  }
}

typedef struct est_idx { double est; int node; } est_idx;
static int by_est_desc(const void *a, const void *b) {
  const est_idx *x = a, *y = b;
  return x->est < y->est ? 1 : x->est > y->est ? -1 : x->node - y->node;
}

static void chart_top_ops(const rp_report *r, FILE *f) {
  int n = r->g->n_nodes, top = n < 15 ? n : 15;
  est_idx *e = calloc((size_t)n + 1, sizeof *e);
  if (!e) return;
  for (int i = 0; i < n; i++) {
    double fl, by;
    rp_node_cost(r, i, &fl, &by, &e[i].est);
    e[i].node = i;
  }
  qsort(e, (size_t)n, sizeof *e, by_est_desc);
  int bar = 16, x0 = 230, w = W - x0 - 90;
  double max = top > 0 && e[0].est > 0 ? e[0].est : 1;
  fprintf(f, "<h2>Top ops by estimated time</h2>\n<svg class=\"chart\" id=\"top-ops\" width=\"%d\" height=\"%d\" "
             "xmlns=\"http://www.w3.org/2000/svg\">\n", W, top * (bar + 4) + 8);
  for (int i = 0; i < top; i++) {
    const ir_node *nd = &r->g->nodes[e[i].node];
    int y = 4 + i * (bar + 4);
    fprintf(f, "<text x=\"4\" y=\"%d\" font-size=\"11\">", y + 12);
    rp_html_str(f, nd->name);
    fprintf(f, " (%s)</text><rect x=\"%d\" y=\"%d\" width=\"%.1f\" height=\"%d\" fill=\"#4e79a7\"/>"
               "<text x=\"%.1f\" y=\"%d\" font-size=\"11\">%.3f ms</text>\n",
            ir_ops[nd->op].name, x0, y, e[i].est / max * w, bar, x0 + e[i].est / max * w + 4, y + 12, e[i].est * 1e3);
  }
  fprintf(f, "</svg>\n");
  free(e);
}

static void bars(FILE *f, const char *id, const char *title, const char *const *labels, const double *v, int n,
                 const char *unit, double scale) {
  int bar = 20, x0 = 110, w = W - x0 - 110;
  double max = 0;
  for (int i = 0; i < n; i++)
    if (v[i] > max) max = v[i];
  if (max <= 0) max = 1;
  fprintf(f, "<h2>%s</h2>\n<svg class=\"chart\" id=\"%s\" width=\"%d\" height=\"%d\" xmlns=\"http://www.w3.org/2000/svg\">\n",
          title, id, W, n * (bar + 6) + 8);
  for (int i = 0; i < n; i++) {
    int y = 4 + i * (bar + 6);
    fprintf(f, "<text x=\"4\" y=\"%d\" font-size=\"12\">%s</text><rect x=\"%d\" y=\"%d\" width=\"%.1f\" height=\"%d\" "
               "fill=\"#59a14f\"/><text x=\"%.1f\" y=\"%d\" font-size=\"11\">%.4g %s</text>\n",
            y + 14, labels[i], x0, y, v[i] / max * w, bar, x0 + v[i] / max * w + 4, y + 14, v[i] * scale, unit);
  }
  fprintf(f, "</svg>\n");
}

/* Training: per shard forward + backward estimate (stacked), then the simulated schedule of
 * one update as a Gantt chart (one row per shard's thread group). */
static void chart_balance_train(const rp_report *r, FILE *f) {
  const rp_train *t = r->tr;
  int bar = 20, x0 = 110, w = W - x0 - 140;
  double max = 0;
  for (int s = 0; s < t->S; s++) {
    double e = t->ts[s].est_s[0] + t->ts[s].est_s[1];
    max = e > max ? e : max;
  }
  if (max <= 0) max = 1;
  fprintf(f, "<h2>Pipeline balance (estimated ms per micro-batch: forward + backward)</h2>\n<svg class=\"chart\" id=\"balance\" "
             "width=\"%d\" height=\"%d\" xmlns=\"http://www.w3.org/2000/svg\">\n", W, t->S * (bar + 6) + 24);
  for (int s = 0; s < t->S; s++) {
    const rp_tshard *x = &t->ts[s];
    int y = 4 + s * (bar + 6);
    double wf = x->est_s[0] / max * w, wb = x->est_s[1] / max * w;
    fprintf(f, "<text x=\"4\" y=\"%d\" font-size=\"12\">shard %d%s</text>"
               "<rect x=\"%d\" y=\"%d\" width=\"%.1f\" height=\"%d\" fill=\"#4e79a7\"><title>fwd/s%d %.4g ms</title></rect>"
               "<rect x=\"%.1f\" y=\"%d\" width=\"%.1f\" height=\"%d\" fill=\"#e15759\"><title>bwd/s%d %.4g ms</title></rect>"
               "<text x=\"%.1f\" y=\"%d\" font-size=\"11\">%.4g + %.4g ms</text>\n",
            y + 14, s, s == t->bottleneck ? " *" : "", x0, y, wf, bar, s, x->est_s[0] * 1e3, x0 + wf, y, wb, bar, s,
            x->est_s[1] * 1e3, x0 + wf + wb + 4, y + 14, x->est_s[0] * 1e3, x->est_s[1] * 1e3);
  }
  int ly = t->S * (bar + 6) + 16;
  fprintf(f, "<rect x=\"4\" y=\"%d\" width=\"10\" height=\"10\" fill=\"#4e79a7\"/><text x=\"18\" y=\"%d\" font-size=\"11\">"
             "forward</text><rect x=\"90\" y=\"%d\" width=\"10\" height=\"10\" fill=\"#e15759\"/><text x=\"104\" y=\"%d\" "
             "font-size=\"11\">backward</text>\n</svg>\n", ly - 9, ly, ly - 9, ly);
  fprintf(f, "<p>Bottleneck: shard %d (*).  Schedule <code>%s</code>, %d micro-batch%s per update (gradient accumulation %d "
             "&times; replicas %d): one update is estimated at %.4g ms including the optimizer (%.4g ms on shard 0's threads); "
             "the shards are idle %.1f %% of it.</p>\n",
          t->bottleneck, t->schedule, t->frames, t->frames == 1 ? "" : "es", t->grad_accum, t->replicas, t->makespan_s * 1e3,
          t->update_s * 1e3, t->idle_fraction * 100);
  /* Gantt chart of the simulated update */
  int row = 22, gx = 80, gw = W - gx - 20;
  double span = t->makespan_s > 0 ? t->makespan_s : 1;
  fprintf(f, "<h2>Simulated schedule of one update</h2>\n<svg class=\"chart\" id=\"schedule\" width=\"%d\" height=\"%d\" "
             "xmlns=\"http://www.w3.org/2000/svg\">\n", W, t->S * (row + 4) + 24);
  for (int s = 0; s < t->S; s++) fprintf(f, "<text x=\"4\" y=\"%d\" font-size=\"12\">shard %d</text>\n", 4 + s * (row + 4) + 15, s);
  for (int j = 0; j < t->n_jobs && j < 4096; j++) {
    const rp_tjob *x = &t->jobs[j];
    int ph = t->st_phase[x->stage];
    char nm[32];
    double jx = gx + x->t0 / span * gw, jw = (x->t1 - x->t0) / span * gw;
    fprintf(f, "<rect x=\"%.1f\" y=\"%d\" width=\"%.1f\" height=\"%d\" fill=\"%s\" stroke=\"#fff\"><title>%s",
            jx, 4 + x->group * (row + 4), jw, row, ph == 0 ? "#4e79a7" : ph == 1 ? "#e15759" : "#76b7b2",
            rp_stage_name(r, x->stage, nm, sizeof nm));
    if (x->frame >= 0) fprintf(f, " micro-batch %d", x->frame);
    fprintf(f, " %.4g..%.4g ms</title></rect>\n", x->t0 * 1e3, x->t1 * 1e3);
    if (jw > 14 && x->frame >= 0)
      fprintf(f, "<text x=\"%.1f\" y=\"%d\" font-size=\"10\" fill=\"#fff\">%d</text>\n", jx + 2, 4 + x->group * (row + 4) + 15,
              x->frame);
  }
  fprintf(f, "<text x=\"%d\" y=\"%d\" font-size=\"11\">0 .. %.4g ms (blue forward, red backward, teal optimizer; numbers: "
             "micro-batch)</text>\n</svg>\n", gx, t->S * (row + 4) + 18, t->makespan_s * 1e3);
}

static void chart_balance(const rp_report *r, FILE *f) {
  if (r->tr) {
    chart_balance_train(r, f);
    return;
  }
  int n = r->n_shards;
  double *v = calloc((size_t)n + 1, sizeof *v), sum = 0, max = 0;
  char(*names)[24] = calloc((size_t)n + 1, sizeof *names);
  const char **labels = calloc((size_t)n + 1, sizeof *labels);
  if (!v || !names || !labels) return;
  for (int s = 0; s < n; s++) {
    v[s] = r->sh[s].flops, sum += v[s], max = v[s] > max ? v[s] : max;
    snprintf(names[s], sizeof names[s], "shard %d", s);
    labels[s] = names[s];
  }
  bars(f, "balance", "Pipeline balance (GFLOP per micro-batch)", labels, v, n, "GFLOP", 1e-9);
  fprintf(f, "<p>max / mean = %.3f (1.0 is a perfect balance; the pipeline runs at the pace of its slowest "
             "stage)</p>\n", sum > 0 ? max / (sum / n) : 0);
  free(v);
  free(names);
  free(labels);
}

static void chart_phases(const rp_report *r, FILE *f) {
  const char *labels[RP_MAX_PHASES];
  double v[RP_MAX_PHASES];
  int n = 0;
  for (int i = 0; i < r->n_phases; i++)
    if (strcmp(r->phase_name[i], "total")) labels[n] = r->phase_name[i], v[n++] = r->phase_s[i];
  bars(f, "phases", "Compile time per phase", labels, v, n, "s", 1);
}

static void op_table(const rp_report *r, FILE *f) {
  const ir_graph *g = r->g;
  char b1[64];
  fprintf(f, "<h2>Ops</h2>\n<table id=\"ops\">\n<tr><th>#</th><th>name</th><th>op</th><th>%s</th><th>output shape</th>"
             "<th>MFLOP</th><th>MB</th><th>est. ms</th><th>working-set budget</th><th>kernel</th><th>fused into</th></tr>\n",
          r->tr ? "shard (stage)" : "shard");
  for (int n = 0; n < g->n_nodes; n++) {
    const ir_node *nd = &g->nodes[n];
    const rp_kernel *k = &r->k[r->node_kernel[n]];
    double fl, by, est;
    rp_node_cost(r, n, &fl, &by, &est);
    fprintf(f, "<tr><td>%d</td><td>", n);
    rp_html_str(f, nd->name);
    char stage[40] = "";
    if (r->tr) {
      char nm[32];
      snprintf(stage, sizeof stage, " (%s)", rp_stage_name(r, k->shard, nm, sizeof nm));
    }
    fprintf(f, "</td><td>%s</td><td>%d%s</td><td>%s</td><td>%.3f</td><td>%.3f</td><td>%.4f</td><td>", ir_ops[nd->op].name,
            nd->shard, stage, ir_shape_str(&g->values[nd->out].shape, b1, sizeof b1), fl / 1e6, by / 1e6, est * 1e3);
    int64_t budget = rp_node_budget(r, n);
    if (budget >= 0) fprintf(f, "%s%s", human((double)budget, b1, sizeof b1), by > (double)budget ? " (op bytes exceed it)" : "");
    int64_t blk_tiles = 0, blk = k->anchor == n ? rp_conv_block(k, &blk_tiles) : -1;
    if (blk >= 0) fprintf(f, "; block %s (%lld tile%s)", human((double)blk, b1, sizeof b1), (long long)blk_tiles, blk_tiles == 1 ? "" : "s");
    fprintf(f, "</td><td>");
    if (k->anchor == n) rp_html_str(f, k->name);
    fprintf(f, "</td><td>");
    if (k->anchor != n) rp_html_str(f, g->nodes[k->anchor].name);
    fprintf(f, "</td></tr>\n");
  }
  fprintf(f, "</table>\n");
}

static void header(const rp_report *r, FILE *f) {
  double flops = 0, est = 0, emax = 0;
  for (int s = 0; s < r->n_shards; s++) {
    flops += r->sh[s].flops, est += r->sh[s].est_s;
    if (r->sh[s].est_s > emax) emax = r->sh[s].est_s;
  }
  if (r->tr) { /* the slowest model shard (forward + backward) */
    emax = 0;
    for (int s = 0; s < r->tr->S; s++) {
      double e = r->tr->ts[s].est_s[0] + r->tr->ts[s].est_s[1];
      emax = e > emax ? e : emax;
    }
  }
  fprintf(f, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>cnnc report: ");
  rp_html_str(f, r->g->name);
  fprintf(f, "</title>\n<style>\nbody{font-family:sans-serif;margin:24px;max-width:1100px;color:#222}\n"
             "h1{font-size:22px}h2{font-size:17px;margin-top:28px}svg.chart{display:block;background:#fafafa;"
             "border:1px solid #ddd;margin:6px 0}\ntable{border-collapse:collapse;font-size:12px}"
             "td,th{border:1px solid #ddd;padding:2px 6px;text-align:left}th{background:#eee}\n"
             "dl{display:grid;grid-template-columns:max-content auto;gap:2px 12px}dt{font-weight:bold}\n"
             "</style></head>\n<body>\n<h1>cnnc compile report: ");
  rp_html_str(f, r->g->name);
  fprintf(f, "</h1>\n<dl><dt>mode</dt><dd>%s</dd><dt>batch size</dt><dd>%d</dd><dt>shards</dt><dd>%d</dd>",
          r->tr ? "training" : "inference", r->g->batch, n_mem_shards(r));
  if (r->tr) {
    char nm[32];
    fprintf(f, "<dt>stages</dt><dd>");
    for (int st = 0; st < r->tr->n_stages; st++) fprintf(f, "%s%s", st ? ", " : "", rp_stage_name(r, st, nm, sizeof nm));
    fprintf(f, "</dd><dt>pipeline</dt><dd>schedule %s, gradient accumulation %d, replicas %d, recompute %s</dd>",
            r->tr->schedule, r->tr->grad_accum, r->tr->replicas, r->tr->recompute);
  }
  fprintf(f, "<dt>target</dt><dd>");
  rp_html_str(f, r->triple);
  fprintf(f, ", cpu ");
  rp_html_str(f, r->cpu);
  if (r->core[0]) {
    fprintf(f, ", core ");
    rp_html_str(f, r->core);
  }
  fprintf(f, ", %d f32 lanes; bf16 convs: ", r->vec_f32);
  rp_html_str(f, r->bf16_route);
  fprintf(f, "</dd><dt>ops / kernels</dt><dd>%d / %d</dd><dt>compute</dt><dd>%.4g GFLOP per micro-batch"
             "</dd><dt>estimate</dt><dd>%.3f ms per micro-batch in sequence, %.3f ms for the slowest stage "
             "(roofline: %.0f GFLOP/s and %.0f GB/s per core, %d core(s) per shard)</dd>",
          r->g->n_nodes, r->n_k, flops / 1e9, est * 1e3, emax * 1e3, r->peak_flops_core / 1e9,
          r->peak_bw_core / 1e9, rp_cores_per_shard(r));
  for (int i = 0; i < r->n_phases; i++)
    if (!strcmp(r->phase_name[i], "total")) fprintf(f, "<dt>compile time</dt><dd>%.2f s</dd>", r->phase_s[i]);
  char b1[32], b2[32];
  fprintf(f, "<dt>memory limit</dt><dd>%s</dd>", r->limit > 0 ? human((double)r->limit, b1, sizeof b1) : "none");
  fprintf(f, "<dt>available memory proportion</dt><dd>");
  for (int s = 0; s < n_mem_shards(r); s++) fprintf(f, "%s%.3g", s ? ", " : "", cg_budget_proportion(r->amp_text, s));
  fprintf(f, " (working-set budget = P &times; (L2 %s + L3 %s per core), caches from %s)</dd>",
          human((double)r->cache.l2 / r->cache.l2_sharing, b1, sizeof b1),
          human((double)r->cache.l3 / r->cache.l3_sharing, b2, sizeof b2), r->cache.from_sysfs == 2 ? "--target-cache" : r->cache.from_sysfs ? "sysfs" : "the fallbacks");
  fprintf(f, "</dl>\n");
}

int rp_report_write_html(const rp_report *r, FILE *f) {
  if (!r->have_layout) return -1;
  header(r, f);
  chart_memory(r, f);
  chart_liveness(r, f);
  chart_top_ops(r, f);
  chart_balance(r, f);
  chart_phases(r, f);
  op_table(r, f);
  fprintf(f, "<p style=\"font-size:11px;color:#777\">Written by cnnc; the same figures are in the JSON "
             "report (docs/reports.md).</p>\n</body></html>\n");
  return ferror(f) ? -1 : 0;
}
