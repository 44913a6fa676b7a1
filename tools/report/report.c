/* report.c — the compile report (`cnnc --report`, docs/reports.md): collects what codegen
 * planned (kernels, their names, the memory planner's usage records, phase times) through a
 * cg_report_sink, derives per-shard memory by category, liveness per program step, a
 * roofline time estimate per op and kernel and the pipeline balance, and writes it as JSON.
 * The HTML page is report_html.c, `cnnc report-diff` is report_diff.c. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "codegen/cg_isa.h"
#include "ir/grad_train.h"
#include "tools/report/report_internal.h"

static char *xstrdup(const char *s) {
  char *p = strdup(s ? s : "");
  if (!p) abort();
  return p;
}

rp_report *rp_report_new(const ir_graph *g, int64_t memory_limit) {
  rp_report *r = ir_calloc(1, sizeof *r);
  r->g = g;
  r->limit = memory_limit;
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  r->cores = n < 1 ? 1 : (int)n;
  r->vec_f32 = 4;
  snprintf(r->triple, sizeof r->triple, "?");
  snprintf(r->cpu, sizeof r->cpu, "?");
  cg_cache_sizes_for(NULL, &r->cache);
  return r;
}

void rp_report_set_proportion(rp_report *r, const char *amp) { r->amp_text = amp; }

void rp_report_set_training(rp_report *r, int grad_accum, int replicas, const char *schedule, const char *recompute) {
  r->opt_grad_accum = grad_accum, r->opt_replicas = replicas;
  r->opt_schedule = schedule, r->opt_recompute = recompute;
}

void rp_report_set_half_partials(rp_report *r, const char *half_type) { r->opt_half_partials = half_type; }

/* "half_partials": where --enable-half-partials stores partial sums in 16 bits: one entry per
 * place (the gradient accumulators, and every kernel that keeps partial sums in memory
 * between reduction blocks, from the settings cnnc_build_model recorded on the graph), each with
 * the error against f32 partials measured for that kind of place (docs/precision.md "Half
 * partials": test_half_partials_kernels / test_precision_train_partials, 1 step on their test
 * models, relative to the f32-partials result; the figures are those runs', not this model's),
 * and how it is stored with the bytes that saves (accumulators: pass_acc_elem_bytes; kernels:
 * the graph's partial_bytes, written by codegen). */
typedef struct hp_kind {
  const char *kind, *what, *buffer; /* buffer: where the partials are kept */
  double bf16[2], fp16[2];          /* max, mean relative error; < 0: none */
} hp_kind;
static const hp_kind hp_kinds[] = {
    {"conv_kblock", "output partial sums in a buffer between blocks of input channels (conv/chanvec_row.c K-blocked 1x1 row)",
     "stack buffer of each kernel thread", {0.812, 2.66e-3}, {0.0528, 3.27e-4}},
    {"conv_grad_input_kblock", "dx partial sums in a buffer between blocks of output channels (K-blocked 1x1 row)",
     "stack buffer of each kernel thread", {-1, -1}, {-1, -1}},
    {"grad_weight_lanes", "dw lane partials in a stack array between images (gen_train_conv.c)",
     "stack buffer of each kernel thread", {0.352, 1.66e-3}, {0.0244, 1.54e-4}},
    {"grad_weight_gemm", "dw lane partials of the 1x1 GEMM between images and 256-pixel chunks (gen_train_conv.c)",
     "stack buffer of each kernel thread", {0.0647, 1.43e-3}, {0.00896, 1.53e-4}},
    {"grad_weight_grouped", "dw lane partials in a stack array between images (gen_train_gconv.c)",
     "stack buffer of each kernel thread", {0.0996, 1.09e-3}, {0.00414, 8.51e-5}},
    {"groupnorm_dgamma", "dgamma partial sums in the output between samples (gen_train_norm.c)", "output",
     {0.0122, 3.17e-3}, {0.00208, 1.40e-4}},
};
enum { HP_KBLOCK, HP_KBLOCK_DX, HP_GW, HP_GW_GEMM, HP_GW_GROUPED, HP_GN };

static int hp_gemm(const ir_conv2d_attr *a) {
  return a->kernel[0] == 1 && a->kernel[1] == 1 && a->stride[0] == 1 && a->stride[1] == 1 && !a->pad[0] && !a->pad[1] &&
         !a->pad[2] && !a->pad[3];
}

/* Kind of the partials node n keeps in memory, -1 for none; *kb: its K block. */
static int hp_node_kind(const ir_graph *g, const ir_node *n, int *kb) {
  *kb = g->partial_kblock ? g->partial_kblock[n->id] : 0;
  switch (n->op) {
  case IR_OP_conv2d: return *kb > 0 ? HP_KBLOCK : -1;
  case IR_OP_conv2d_grad_input: return *kb > 0 ? HP_KBLOCK_DX : -1;
  case IR_OP_conv2d_grad_weight: {
    const ir_conv2d_attr *a = &n->attr.conv2d_grad_weight.conv;
    return a->groups > 1 ? HP_GW_GROUPED : hp_gemm(a) ? HP_GW_GEMM : HP_GW;
  }
  case IR_OP_groupnorm_grad_gamma: return HP_GN;
  default: return -1;
  }
}

static void hp_measured(FILE *f, const char *half, const double bf16[2], const double fp16[2]) {
  const double *e = half && !strcmp(half, "fp16") ? fp16 : bf16;
  if (e[0] < 0) fprintf(f, "null");
  else fprintf(f, "{\"max_rel\": %.3g, \"mean_rel\": %.3g}", e[0], e[1]);
}

/* "stored": how the place keeps its partials; "bytes_saved": against f32 storage, in "saved_in"
 * (the state buffer, or the buffer of each kernel thread). */
static void hp_stored(FILE *f, int64_t saved, const char *where) {
  fprintf(f, ", \"stored\": \"%s\", \"bytes_saved\": %lld, \"saved_in\": ", saved > 0 ? "16 bits" : "f32, rounded to 16 bits",
          (long long)saved);
  rp_json_str(f, where);
}

static void json_half_partials(const rp_report *r, FILE *f) {
  const ir_graph *g = r->g;
  int ga = r->opt_grad_accum > 0 ? r->opt_grad_accum : 1, rep = r->opt_replicas > 0 ? r->opt_replicas : 1, n = 0;
  const char *half = r->opt_half_partials;
  fprintf(f, "  \"half_partials\": {\"enabled\": %s, \"format\": ", half ? "true" : "false");
  rp_json_str(f, half ? half : "");
  fprintf(f, ", \"lanes\": %d, \"where\": [", half ? g->partial_lanes : 0);
  if (half && r->tr && ga * rep > 1) {
    char what[200];
    snprintf(what, sizeof what, "the gradient-accumulation sums over %d micro-batch%s x %d replica%s and their mean", ga,
             ga == 1 ? "" : "es", rep, rep == 1 ? "" : "s");
    fprintf(f, "\n    {\"kind\": \"gradient_accumulators\", \"node\": null, \"what\": ");
    rp_json_str(f, what);
    int64_t acc = 0;
    for (int s = 0; s < r->tr->S; s++) acc += r->tr->ts[s].accumulators;
    hp_stored(f, r->tr->acc_f32_bytes - acc, "state buffer");
    /* test_precision_train_partials: fmnist_cnn, accumulation 2 x replicas 2, 3 updates (kernel partials included) */
    fprintf(f, ", \"measured\": {\"update_rel_norm\": %.3g}}", half && !strcmp(half, "fp16") ? 3.78e-3 : 8.06e-3);
    n++;
  }
  for (int i = 0; half && i < g->n_nodes; i++) {
    int kb, k = hp_node_kind(g, &g->nodes[i], &kb);
    if (k < 0) continue;
    fprintf(f, "%s\n    {\"kind\": \"%s\", \"node\": ", n++ ? "," : "", hp_kinds[k].kind);
    rp_json_str(f, g->nodes[i].name);
    fprintf(f, ", \"what\": ");
    rp_json_str(f, hp_kinds[k].what);
    if (kb > 0) fprintf(f, ", \"k_block\": %d", kb);
    hp_stored(f, g->partial_bytes ? g->partial_bytes[i] : 0, hp_kinds[k].buffer);
    fprintf(f, ", \"measured\": ");
    hp_measured(f, half, hp_kinds[k].bf16, hp_kinds[k].fp16);
    fprintf(f, "}");
  }
  fprintf(f, "%s], \"note\": ", n ? "\n  " : "");
  rp_json_str(f, !half ? "off: every partial sum is f32"
                 : n ? "measured: max / mean relative error against f32 partials of that kind of place on the test models "
                       "of docs/precision.md (Half partials), not of this model"
                     : "nowhere: no partial-sum buffers, and every kernel of this model keeps its partial sums in registers");
  fprintf(f, "},\n");
}

void rp_report_free(rp_report *r) {
  if (!r) return;
  for (int i = 0; i < r->n_k; i++) free(r->k[i].name), free(r->k[i].kind);
  for (int s = 0; s < r->n_shards; s++) free(r->sh[s].live);
  free(r->k);
  free(r->b);
  free(r->sh);
  free(r->node_kernel);
  free(r->is_tensor);
  rp_train_free(r->tr);
  free(r);
}

void rp_report_phase(rp_report *r, const char *name, double seconds) {
  for (int i = 0; i < r->n_phases; i++)
    if (!strcmp(r->phase_name[i], name)) {
      r->phase_s[i] += seconds;
      return;
    }
  if (r->n_phases == RP_MAX_PHASES) return;
  snprintf(r->phase_name[r->n_phases], sizeof r->phase_name[0], "%s", name);
  r->phase_s[r->n_phases++] = seconds;
}

/* ---- the roofline ------------------------------------------------------------------------ */
int rp_cores_per_shard(const rp_report *r) {
  int n = r->tr ? r->tr->S : r->n_shards; /* training: the model shards, not the stages */
  int c = r->cores / (n > 0 ? n : 1);
  return c < 1 ? 1 : c;
}

double rp_roofline(const rp_report *r, double flops, double bytes, int cores) {
  double tc = flops / (r->peak_flops_core * cores), tm = bytes / (r->peak_bw_core * cores);
  return tc > tm ? tc : tm;
}

void rp_node_cost(const rp_report *r, int node, double *flops, double *bytes, double *est_s) {
  ir_cost c;
  ir_node_cost(r->g, &r->g->nodes[node], &c);
  *flops = c.flops, *bytes = c.bytes;
  *est_s = rp_roofline(r, c.flops, c.bytes, rp_cores_per_shard(r));
}

/* ---- sink callbacks ---------------------------------------------------------------------- */
static void on_phase(void *ctx, const char *name, double seconds) { rp_report_phase(ctx, name, seconds); }

static void on_target(void *ctx, const cg_target *t) {
  rp_report *r = ctx;
  snprintf(r->triple, sizeof r->triple, "%s", t->triple ? t->triple : "?");
  snprintf(r->cpu, sizeof r->cpu, "%s", t->cpu ? t->cpu : "?");
  snprintf(r->core, sizeof r->core, "%s", t->core ? t->core->id : "");
  if (r->g) cg_bf16_route(t, ir_tune(r->g), r->bf16_route, sizeof r->bf16_route);
  r->vec_f32 = t->vec_f32 > 0 ? t->vec_f32 : 4;
  cg_cache_sizes_for(t, &r->cache);
}

static int is_budget_op(ir_op op) {
  return op == IR_OP_conv2d || op == IR_OP_dense || op == IR_OP_conv2d_grad_input || op == IR_OP_conv2d_grad_weight ||
         op == IR_OP_dense_grad_input || op == IR_OP_dense_grad_weight;
}

int64_t rp_node_budget(const rp_report *r, int n) {
  const ir_node *nd = &r->g->nodes[n];
  if (!is_budget_op(nd->op)) return -1;
  return cg_working_set_budget(&r->cache, cg_budget_proportion(r->amp_text, nd->shard));
}

int64_t rp_conv_block(const rp_kernel *k, int64_t *tiles_out) {
  if (k->tile_block <= 0) return -1;
  *tiles_out = k->tile_block;
  return k->block_bytes;
}

int64_t rp_limited(const rp_report *r, const rp_shard *s) {
  return s->arena + s->io + s->stash_io + s->temporaries + (r->training ? s->weights + s->optimizer_state : 0);
}

/* Bytes of the constants a fused group embeds: its params, where a folded batchnorm becomes
 * one bias vector (none if the conv already has a bias). */
static int64_t group_weights(const rp_report *r, const pass_fusion *plan, int a) {
  const ir_graph *g = r->g;
  int64_t w = 0;
  int n_param = 0;
  for (int j = 0; j < g->nodes[a].n_in; j++)
    if (g->values[g->nodes[a].in[j]].kind == IR_VAL_PARAM) w += ir_value_bytes(g, g->nodes[a].in[j]), n_param++;
  const pass_fusion *p = &plan[a];
  if (p->bn >= 0 && n_param < 2) w += ir_value_bytes(g, g->nodes[p->bn].in[1]);
  for (int i = 0; i < p->n_post; i++) {
    const ir_node *m = &g->nodes[p->post[i]];
    for (int j = 0; j < m->n_in; j++)
      if (g->values[m->in[j]].kind == IR_VAL_PARAM) w += ir_value_bytes(g, m->in[j]);
  }
  return w;
}

/* Training: every param is one 64-aligned slice of the state buffer, counted once, in the
 * shard of the first kernel reading it: weights (trainable and buffers) or optimizer state. */
static void derive_train_state(rp_report *r, const cg_report_kernel *k) {
  const ir_graph *g = r->g;
  char *seen = ir_calloc((size_t)g->n_values, 1);
  for (int s = 0; s < r->n_shards; s++) r->sh[s].weights = 0;
  for (int i = 0; i < r->n_k; i++) {
    const ir_node *n = &g->nodes[k[i].anchor];
    for (int j = 0; j < n->n_in; j++) {
      int v = n->in[j];
      if (g->values[v].kind != IR_VAL_PARAM || seen[v]) continue;
      seen[v] = 1;
      int64_t b = (ir_value_bytes(g, v) + 63) / 64 * 64;
      if (pass_mem_is_optimizer_state(g, v)) r->sh[k[i].shard].optimizer_state += b;
      else r->sh[k[i].shard].weights += b;
    }
  }
  free(seen);
}

static void derive_kernels(rp_report *r, const cg_report_kernel *k, const pass_fusion *plan) {
  const ir_graph *g = r->g;
  int cores = rp_cores_per_shard(r);
  for (int i = 0; i < r->n_k; i++) {
    rp_kernel *x = &r->k[i];
    *x = (rp_kernel){k[i].anchor, k[i].last, k[i].shard, k[i].step, k[i].out, k[i].flops, 0, 0,
                     xstrdup(k[i].name), xstrdup(k[i].kind), 0, 0};
    if (k[i].plan) x->tile_block = k[i].plan->tile_block, x->block_bytes = k[i].plan->block_bytes;
    int64_t w = group_weights(r, plan, x->anchor);
    double bytes = (double)w + (double)ir_value_bytes(g, x->out);
    for (int j = 0; j < k[i].n_act; j++) bytes += (double)ir_value_bytes(g, k[i].act[j]);
    x->bytes = bytes;
    x->est_s = rp_roofline(r, x->flops, bytes, cores);
    rp_shard *s = &r->sh[x->shard];
    if (s->n_k++ == 0) s->first_node = x->anchor;
    s->last_node = x->last;
    s->weights += w;
    s->flops += x->flops;
    s->est_s += x->est_s;
    for (int n = 0; n < g->n_nodes; n++)
      if (plan[n].anchor == x->anchor) r->node_kernel[n] = i;
  }
}

/* io: the boundary tensors (one micro-batch) a shard reads from elsewhere or writes. */
static void derive_io(rp_report *r, const cg_report_kernel *k, const int *tensor_vid, int n_tensors) {
  const ir_graph *g = r->g;
  for (int s = 0; s < r->n_shards; s++)
    for (int t = 0; t < n_tensors; t++) {
      int v = tensor_vid[t], p = g->values[v].producer, used = 0, written = 0;
      for (int i = 0; i < r->n_k && !used; i++) {
        if (k[i].shard != s) continue;
        used = written = k[i].out == v;
        for (int j = 0; j < k[i].n_act && !used; j++) used = k[i].act[j] == v && (p < 0 || g->nodes[p].shard != s);
      }
      if (!used) continue;
      /* training: a forward result kept for the backward in a boundary buffer is stash, in
       * the shard (stage) writing it */
      if (written && r->training && pass_mem_is_stash(g, v)) r->sh[s].stash_io += ir_value_bytes(g, v);
      else r->sh[s].io += ir_value_bytes(g, v);
    }
}

static void derive_liveness(rp_report *r) {
  for (int s = 0; s < r->n_shards; s++) r->sh[s].live = ir_calloc((size_t)r->sh[s].n_k, sizeof(int64_t));
  for (int i = 0; i < r->n_b; i++) {
    const cg_report_buffer *b = &r->b[i];
    rp_shard *s = &r->sh[b->shard];
    for (int t = b->first_step; t <= b->last_step && t < s->n_k; t++) s->live[t] += b->bytes;
  }
  for (int s = 0; s < r->n_shards; s++) {
    rp_shard *sh = &r->sh[s];
    for (int t = 0; t < sh->n_k; t++)
      if (sh->live[t] > sh->peak_live) sh->peak_live = sh->live[t], sh->peak_step = t;
  }
  if (!r->training) return;
  for (int i = 0; i < r->n_b; i++) { /* stash: forward results live at the peak for the backward */
    const cg_report_buffer *b = &r->b[i];
    rp_shard *s = &r->sh[b->shard];
    if (b->first_step <= s->peak_step && s->peak_step <= b->last_step && pass_mem_is_stash(r->g, b->vid))
      s->stash_scratch += b->bytes;
  }
}

static void on_layout(void *ctx, const cg_report_kernel *k, int n_k, const pass_fusion *plan, const cg_report_buffer *b,
                      int n_b, const int64_t *scratch_bytes, int n_shards, const int *tensor_vid, int n_tensors) {
  rp_report *r = ctx;
  const ir_graph *g = r->g;
  if (r->have_layout) return;
  r->have_layout = 1;
  r->n_k = n_k, r->n_b = n_b, r->n_shards = n_shards;
  r->k = ir_calloc((size_t)n_k, sizeof *r->k);
  r->b = ir_calloc((size_t)n_b, sizeof *r->b);
  memcpy(r->b, b, (size_t)n_b * sizeof *b);
  r->sh = ir_calloc((size_t)n_shards, sizeof *r->sh);
  for (int s = 0; s < n_shards; s++) r->sh[s].arena = scratch_bytes[s];
  for (int i = 0; i < g->n_nodes; i++) r->training |= ir_op_is_optimizer(g->nodes[i].op);
  r->node_kernel = ir_calloc((size_t)g->n_nodes, sizeof(int));
  r->is_tensor = ir_calloc((size_t)g->n_values, 1);
  r->peak_flops_core = 4.0 * r->vec_f32 * RP_CLOCK_HZ;
  r->peak_bw_core = RP_BW_PER_CORE;
  /* groups are read from the plan codegen used (training: pass_fuse_train's) */
  if (r->training) rp_train_init(r, k);
  for (int t = 0; t < n_tensors; t++) r->is_tensor[tensor_vid[t]] = 1;
  derive_kernels(r, k, plan);
  derive_io(r, k, tensor_vid, n_tensors);
  if (r->training) derive_train_state(r, k);
  for (int s = 0; s < n_shards; s++) r->sh[s].amp = cg_budget_proportion(r->amp_text, s);
  derive_liveness(r);
  if (r->training) rp_train_derive(r, k, tensor_vid, n_tensors);
}

void rp_report_sink(rp_report *r, cg_report_sink *sink) {
  memset(sink, 0, sizeof *sink);
  sink->ctx = r;
  sink->layout = on_layout;
  sink->phase = on_phase;
  sink->target = on_target;
}

/* ---- JSON -------------------------------------------------------------------------------- */
void rp_json_str(FILE *f, const char *s) {
  fputc('"', f);
  for (; s && *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
    else if (c < 0x20) fprintf(f, "\\u%04x", c);
    else fputc(c, f);
  }
  fputc('"', f);
}

static void json_shape(FILE *f, const ir_shape *s) {
  fputc('[', f);
  for (int d = 0; d < s->rank; d++) fprintf(f, "%s%lld", d ? ", " : "", (long long)s->dim[d]);
  fputc(']', f);
}

static int64_t shard_total(const rp_report *r, const rp_shard *s) {
  return s->weights + s->optimizer_state + s->arena + s->io + s->stash_io + s->temporaries;
}

static void json_shard(const rp_report *r, int i, FILE *f) {
  const rp_shard *s = &r->sh[i];
  const ir_graph *g = r->g;
  fprintf(f, "    {\"index\": %d, \"first_layer\": ", i);
  rp_json_str(f, s->n_k ? g->nodes[s->first_node].name : "");
  fprintf(f, ", \"last_layer\": ");
  rp_json_str(f, s->n_k ? g->nodes[s->last_node].name : "");
  fprintf(f, ", \"n_kernels\": %d, \"flops\": %.17g, \"est_ms\": %.6g,\n", s->n_k, s->flops, s->est_s * 1e3);
  int64_t total = shard_total(r, s), limited = rp_limited(r, s);
  fprintf(f, "     \"memory\": {\"weights\": %lld, \"activations\": %lld, \"stash\": %lld, \"optimizer_state\": %lld, "
             "\"io\": %lld, \"temporaries\": %lld, \"gaps\": %lld, \"total\": %lld, \"limited\": %lld, "
             "\"weights_counted\": %s, \"arena\": %lld, \"peak_live\": %lld, \"peak_step\": %d, \"peak_op\": ",
          (long long)s->weights, (long long)(s->peak_live - s->stash_scratch), (long long)(s->stash_scratch + s->stash_io),
          (long long)s->optimizer_state,
          (long long)s->io, (long long)s->temporaries, (long long)(s->arena - s->peak_live), (long long)total,
          (long long)limited, r->training ? "true" : "false", (long long)s->arena, (long long)s->peak_live, s->peak_step);
  int pk = -1;
  for (int k = 0; k < r->n_k; k++)
    if (r->k[k].shard == i && r->k[k].step == s->peak_step) pk = k;
  rp_json_str(f, pk >= 0 ? g->nodes[r->k[pk].last].name : "");
  if (r->limit > 0)
    fprintf(f, ", \"limit\": %lld, \"fits\": %s, \"headroom\": %lld}", (long long)r->limit,
            limited <= r->limit ? "true" : "false", (long long)(r->limit - limited));
  else fprintf(f, ", \"limit\": null, \"fits\": true, \"headroom\": null}");
  fprintf(f, ",\n     \"available_memory_proportion\": %.6g, \"working_set_budget\": %lld", s->amp,
          (long long)cg_working_set_budget(&r->cache, s->amp));
  fprintf(f, ",\n     \"liveness\": [");
  for (int t = 0; t < s->n_k; t++) fprintf(f, "%s%lld", t ? ", " : "", (long long)s->live[t]);
  fprintf(f, "]}");
}

static void json_kernels(const rp_report *r, FILE *f) {
  fprintf(f, "  \"kernels\": [\n");
  for (int i = 0; i < r->n_k; i++) {
    const rp_kernel *k = &r->k[i];
    fprintf(f, "    {\"name\": ");
    rp_json_str(f, k->name);
    fprintf(f, ", \"kind\": ");
    rp_json_str(f, k->kind);
    if (r->tr) {
      char nm[32];
      fprintf(f, ", \"shard\": %d, \"stage\": ", r->g->nodes[k->anchor].shard);
      rp_json_str(f, rp_stage_name(r, k->shard, nm, sizeof nm));
      fprintf(f, ", \"step\": %d, \"first_op\": ", k->step);
    } else fprintf(f, ", \"shard\": %d, \"step\": %d, \"first_op\": ", k->shard, k->step);
    rp_json_str(f, r->g->nodes[k->anchor].name);
    fprintf(f, ", \"last_op\": ");
    rp_json_str(f, r->g->nodes[k->last].name);
    fprintf(f, ", \"flops\": %.17g, \"bytes\": %.17g, \"est_ms\": %.6g}%s\n", k->flops, k->bytes, k->est_s * 1e3,
            i + 1 < r->n_k ? "," : "");
  }
  fprintf(f, "  ],\n");
}

static const char *fusion_role(const rp_report *r, int n, const rp_kernel *k) {
  if (k->anchor == n) return "anchor";
  return r->g->nodes[n].op == IR_OP_batchnorm ? "folded" : "epilogue";
}

static void json_ops(const rp_report *r, FILE *f) {
  const ir_graph *g = r->g;
  fprintf(f, "  \"ops\": [\n");
  for (int n = 0; n < g->n_nodes; n++) {
    const ir_node *nd = &g->nodes[n];
    const rp_kernel *k = &r->k[r->node_kernel[n]];
    double fl, by, est;
    rp_node_cost(r, n, &fl, &by, &est);
    fprintf(f, "    {\"name\": ");
    rp_json_str(f, nd->name);
    fprintf(f, ", \"op\": \"%s\", \"shard\": %d, \"output_shape\": ", ir_ops[nd->op].name, nd->shard);
    json_shape(f, &g->values[nd->out].shape);
    fprintf(f, ", \"flops\": %.17g, \"bytes\": %.17g, \"est_ms\": %.6g, \"bound\": \"%s\", \"kernel\": ", fl, by,
            est * 1e3, fl / r->peak_flops_core >= by / r->peak_bw_core ? "compute" : "memory");
    rp_json_str(f, k->name);
    if (r->tr) {
      char nm[32];
      static const char *const ph[3] = {"forward", "backward", "update"};
      fprintf(f, ", \"stage\": ");
      rp_json_str(f, rp_stage_name(r, k->shard, nm, sizeof nm));
      fprintf(f, ", \"phase\": \"%s\"", ph[r->tr->st_phase[k->shard]]);
    }
    fprintf(f, ", \"step\": %d, \"fusion\": \"%s\", \"fused_into\": ", k->step, fusion_role(r, n, k));
    if (k->anchor == n) fprintf(f, "null");
    else rp_json_str(f, g->nodes[k->anchor].name);
    int64_t budget = rp_node_budget(r, n);
    if (budget >= 0) fprintf(f, ", \"working_set_budget\": %lld, \"working_set\": %.17g", (long long)budget, by);
    else fprintf(f, ", \"working_set_budget\": null, \"working_set\": null");
    int64_t blk_tiles = 0, blk = k->anchor == n ? rp_conv_block(k, &blk_tiles) : -1;
    if (blk >= 0) fprintf(f, ", \"tile_block\": %lld, \"block_working_set\": %lld", (long long)blk_tiles, (long long)blk);
    fprintf(f, "}%s\n", n + 1 < g->n_nodes ? "," : "");
  }
  fprintf(f, "  ]\n");
}

static void json_totals(const rp_report *r, FILE *f) {
  double flops = 0, bytes = 0, est = 0, fmax = 0, emax = 0;
  int64_t mem[4] = {0};
  for (int s = 0; s < r->n_shards; s++) {
    const rp_shard *sh = &r->sh[s];
    flops += sh->flops, est += sh->est_s;
    if (sh->flops > fmax) fmax = sh->flops;
    if (sh->est_s > emax) emax = sh->est_s;
    mem[0] += sh->weights, mem[1] += sh->arena, mem[2] += sh->io;
  }
  for (int i = 0; r->tr && i < r->tr->S; i++) { /* training: the model shards' groups and frames */
    const rp_tshard *x = &r->tr->ts[i];
    if (!i) mem[0] = mem[1] = mem[2] = 0;
    mem[0] += x->weights, mem[1] += x->arena, mem[2] += (x->stash_mb + x->io_mb) * r->tr->frames;
  }
  for (int i = 0; i < r->n_k; i++) bytes += r->k[i].bytes;
  double mean = flops / (r->n_shards ? r->n_shards : 1);
  fprintf(f, "  \"totals\": {\"flops\": %.17g, \"kernel_bytes\": %.17g, \"est_ms\": %.6g, \"n_ops\": %d, "
             "\"n_kernels\": %d, \"weights\": %lld, \"arena\": %lld, \"io\": %lld},\n",
          flops, bytes, est * 1e3, r->g->n_nodes, r->n_k, (long long)mem[0], (long long)mem[1], (long long)mem[2]);
  if (r->tr) return; /* the training section writes the balance between model shards */
  fprintf(f, "  \"balance\": {\"flops\": [");
  for (int s = 0; s < r->n_shards; s++) fprintf(f, "%s%.17g", s ? ", " : "", r->sh[s].flops);
  fprintf(f, "], \"est_ms\": [");
  for (int s = 0; s < r->n_shards; s++) fprintf(f, "%s%.6g", s ? ", " : "", r->sh[s].est_s * 1e3);
  fprintf(f, "], \"max_flops\": %.17g, \"mean_flops\": %.17g, \"max_over_mean\": %.4f, "
             "\"pipeline_est_ms\": %.6g},\n",
          fmax, mean, mean > 0 ? fmax / mean : 0, emax * 1e3);
}

int rp_report_write_json(const rp_report *r, FILE *f) {
  if (!r->have_layout) return -1;
  const ir_graph *g = r->g;
  fprintf(f, "{\n  \"cnnc_report\": 1,\n  \"model\": ");
  rp_json_str(f, g->name);
  fprintf(f, ",\n  \"mode\": \"%s\",\n  \"batch_size\": %d,\n  \"n_shards\": %d,\n", r->tr ? "training" : "inference", g->batch,
          r->tr ? r->tr->S : r->n_shards);
  json_half_partials(r, f);
  fprintf(f, "  \"target\": {\"triple\": ");
  rp_json_str(f, r->triple);
  fprintf(f, ", \"cpu\": ");
  rp_json_str(f, r->cpu);
  fprintf(f, ", \"core\": ");
  if (r->core[0]) rp_json_str(f, r->core);
  else fprintf(f, "null");
  fprintf(f, ", \"bf16_route\": ");
  rp_json_str(f, r->bf16_route);
  fprintf(f, ", \"vec_f32\": %d, \"cores\": %d, \"cores_per_shard\": %d, \"peak_gflops_per_core\": %.4g, "
             "\"peak_gbytes_per_core\": %.4g},\n",
          r->vec_f32, r->cores, rp_cores_per_shard(r), r->peak_flops_core / 1e9, r->peak_bw_core / 1e9);
  fprintf(f, "  \"cache\": {\"l2\": %lld, \"l2_sharing\": %d, \"l3\": %lld, \"l3_sharing\": %d, \"source\": \"%s\"},\n",
          (long long)r->cache.l2, r->cache.l2_sharing, (long long)r->cache.l3, r->cache.l3_sharing,
          r->cache.from_sysfs == 2 ? "target-cache" : r->cache.from_sysfs ? "sysfs" : "fallback");
  char *tune = ir_tune_json(ir_tune(r->g)); /* the knobs of this compile (ir/tuning.def) */
  fprintf(f, "  \"tune\": %s,\n", tune ? tune : "{}");
  free(tune);
  fprintf(f, "  \"memory_limit\": ");
  if (r->limit > 0) fprintf(f, "%lld,\n", (long long)r->limit);
  else fprintf(f, "null,\n");
  fprintf(f, "  \"compile_seconds\": {");
  for (int i = 0; i < r->n_phases; i++) {
    fprintf(f, "%s", i ? ", " : "");
    rp_json_str(f, r->phase_name[i]);
    fprintf(f, ": %.4f", r->phase_s[i]);
  }
  fprintf(f, "},\n");
  json_totals(r, f);
  if (r->tr) {
    rp_train_json_section(r, f);
    rp_train_json_shards(r, f);
  } else {
    fprintf(f, "  \"shards\": [\n");
    for (int s = 0; s < r->n_shards; s++) {
      json_shard(r, s, f);
      fprintf(f, "%s\n", s + 1 < r->n_shards ? "," : "");
    }
    fprintf(f, "  ],\n");
  }
  json_kernels(r, f);
  json_ops(r, f);
  fprintf(f, "}\n");
  return ferror(f) ? -1 : 0;
}
