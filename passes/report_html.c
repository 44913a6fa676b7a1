/* report_html.c — the compile report as one self-contained HTML page: inline CSS and inline
 * SVG charts (memory by category per shard, liveness per shard, top ops by estimated time,
 * pipeline balance, compile phases) and the op table.  No script, no network. */
#include <stdlib.h>
#include <string.h>

#include "passes/report_internal.h"

#define W 760 /* chart width in px */

/* Counted against --memory-limit first, weights last (inference: constants in the .so, not
 * counted, drawn faded). */
static const char *const cat_name[] = {"activations", "stash", "gaps", "io", "temporaries", "optimizer state", "weights"};
static const char *const cat_color[] = {"#f28e2b", "#e15759", "#d3d3d3", "#59a14f", "#b07aa1", "#76b7b2", "#4e79a7"};
#define N_CAT 7

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

static void cats(const pass_report *r, int s, int64_t v[N_CAT]) {
  const rp_shard *sh = &r->sh[s];
  v[0] = sh->peak_live - sh->stash_scratch, v[1] = sh->stash_scratch + sh->stash_io, v[2] = sh->arena - sh->peak_live;
  v[3] = sh->io, v[4] = sh->temporaries, v[5] = sh->optimizer_state, v[6] = sh->weights;
}

static void chart_memory(const pass_report *r, FILE *f) {
  double max = (double)r->limit;
  for (int s = 0; s < r->n_shards; s++) {
    int64_t v[N_CAT], t = 0;
    cats(r, s, v);
    for (int c = 0; c < N_CAT; c++) t += v[c];
    if (t > max) max = (double)t;
  }
  if (max <= 0) max = 1;
  int bar = 26, h = 30 + r->n_shards * (bar + 10), x0 = 80, w = W - x0 - 20;
  char b1[32];
  fprintf(f, "<h2>Memory by category per shard</h2>\n<svg class=\"chart\" id=\"memory\" width=\"%d\" height=\"%d\" "
             "xmlns=\"http://www.w3.org/2000/svg\">\n", W, h + 20);
  for (int s = 0; s < r->n_shards; s++) {
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
  for (int c = 0; c < N_CAT; c++, lx += 104)
    fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"10\" height=\"10\" fill=\"%s\"/><text x=\"%d\" y=\"%d\" font-size=\"11\">%s</text>\n",
            lx, h + 2, cat_color[c], lx + 14, h + 11, cat_name[c]);
  fprintf(f, "</svg>\n<p>Counted against <code>--memory-limit</code>: everything the runtime allocates for a shard "
             "(arena = activations + stash + gaps, io%s).", r->training ? ", the state buffer's weights and optimizer state"
                                                                         : "; the weights are constants in the .so and are not counted");
  char b2[32];
  for (int s = 0; s < r->n_shards; s++) {
    int64_t lim = rp_limited(r, &r->sh[s]);
    fprintf(f, " Shard %d: %s", s, human((double)lim, b1, sizeof b1));
    if (r->limit > 0)
      fprintf(f, " (%s %s)", human((double)(lim > r->limit ? lim - r->limit : r->limit - lim), b2, sizeof b2),
              lim > r->limit ? "over the limit" : "headroom");
    fprintf(f, ".");
  }
  fprintf(f, "</p>\n");
}

static void chart_liveness(const pass_report *r, FILE *f) {
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

static void chart_top_ops(const pass_report *r, FILE *f) {
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

static void chart_balance(const pass_report *r, FILE *f) {
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

static void chart_phases(const pass_report *r, FILE *f) {
  const char *labels[RP_MAX_PHASES];
  double v[RP_MAX_PHASES];
  int n = 0;
  for (int i = 0; i < r->n_phases; i++)
    if (strcmp(r->phase_name[i], "total")) labels[n] = r->phase_name[i], v[n++] = r->phase_s[i];
  bars(f, "phases", "Compile time per phase", labels, v, n, "s", 1);
}

static void op_table(const pass_report *r, FILE *f) {
  const ir_graph *g = r->g;
  char b1[64];
  fprintf(f, "<h2>Ops</h2>\n<table id=\"ops\">\n<tr><th>#</th><th>name</th><th>op</th><th>shard</th><th>output shape</th>"
             "<th>MFLOP</th><th>MB</th><th>est. ms</th><th>working-set budget</th><th>kernel</th><th>fused into</th></tr>\n");
  for (int n = 0; n < g->n_nodes; n++) {
    const ir_node *nd = &g->nodes[n];
    const rp_kernel *k = &r->k[r->node_kernel[n]];
    double fl, by, est;
    rp_node_cost(r, n, &fl, &by, &est);
    fprintf(f, "<tr><td>%d</td><td>", n);
    rp_html_str(f, nd->name);
    fprintf(f, "</td><td>%s</td><td>%d</td><td>%s</td><td>%.3f</td><td>%.3f</td><td>%.4f</td><td>", ir_ops[nd->op].name,
            nd->shard, ir_shape_str(&g->values[nd->out].shape, b1, sizeof b1), fl / 1e6, by / 1e6, est * 1e3);
    int64_t budget = rp_node_budget(r, n);
    if (budget >= 0) fprintf(f, "%s%s", human((double)budget, b1, sizeof b1), by > (double)budget ? " (op bytes exceed it)" : "");
    fprintf(f, "</td><td>");
    if (k->anchor == n) rp_html_str(f, k->name);
    fprintf(f, "</td><td>");
    if (k->anchor != n) rp_html_str(f, g->nodes[k->anchor].name);
    fprintf(f, "</td></tr>\n");
  }
  fprintf(f, "</table>\n");
}

static void header(const pass_report *r, FILE *f) {
  double flops = 0, est = 0, emax = 0;
  for (int s = 0; s < r->n_shards; s++) {
    flops += r->sh[s].flops, est += r->sh[s].est_s;
    if (r->sh[s].est_s > emax) emax = r->sh[s].est_s;
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
  fprintf(f, "</h1>\n<dl><dt>batch size</dt><dd>%d</dd><dt>shards</dt><dd>%d</dd><dt>target</dt><dd>", r->g->batch,
          r->n_shards);
  rp_html_str(f, r->triple);
  fprintf(f, ", cpu ");
  rp_html_str(f, r->cpu);
  fprintf(f, ", %d f32 lanes</dd><dt>ops / kernels</dt><dd>%d / %d</dd><dt>compute</dt><dd>%.4g GFLOP per micro-batch"
             "</dd><dt>estimate</dt><dd>%.3f ms per micro-batch in sequence, %.3f ms for the slowest stage "
             "(roofline: %.0f GFLOP/s and %.0f GB/s per core, %d core(s) per shard)</dd>",
          r->vec_f32, r->g->n_nodes, r->n_k, flops / 1e9, est * 1e3, emax * 1e3, r->peak_flops_core / 1e9,
          r->peak_bw_core / 1e9, rp_cores_per_shard(r));
  for (int i = 0; i < r->n_phases; i++)
    if (!strcmp(r->phase_name[i], "total")) fprintf(f, "<dt>compile time</dt><dd>%.2f s</dd>", r->phase_s[i]);
  char b1[32], b2[32];
  fprintf(f, "<dt>memory limit</dt><dd>%s</dd>", r->limit > 0 ? human((double)r->limit, b1, sizeof b1) : "none");
  fprintf(f, "<dt>available memory proportion</dt><dd>");
  for (int s = 0; s < r->n_shards; s++) fprintf(f, "%s%.3g", s ? ", " : "", r->sh[s].amp);
  fprintf(f, " (working-set budget = P &times; (L2 %s + L3 %s per core), caches from %s)</dd>",
          human((double)r->cache.l2 / r->cache.l2_sharing, b1, sizeof b1),
          human((double)r->cache.l3 / r->cache.l3_sharing, b2, sizeof b2), r->cache.from_sysfs ? "sysfs" : "the fallbacks");
  fprintf(f, "</dl>\n");
}

int pass_report_write_html(const pass_report *r, FILE *f) {
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
