/* report_train.c — the compile report of a training compile (docs/reports.md "Training
 * reports").  Codegen hands over the training layout, whose "shards" are the program stages
 * (fwd/s0..s(S-1), bwd/s(S-1)..s0, update/s0); this folds them back into the S model shards
 * (pipeline stages): per shard its forward and backward programs and the updates of its
 * params, memory by category (the group's scratch, stash and other train tensors per
 * in-flight micro-batch, weights, optimizer state, gradient accumulators), the liveness curve
 * across its forward and backward steps (scratch plus the train tensors it holds: the
 * forward/backward "mountain"), and the pipeline balance from a simulation of the runtime's
 * job lists (runtime/rt_train.c rt_push_micro_batches) with the roofline stage estimates. */
#include <stdlib.h>
#include <string.h>

#include "common/cm.h"
#include "ir/grad_train.h"
#include "tools/report/report_internal.h"

#define RP_MAX_JOBS_JSON 512

static const char *const phase_word[3] = {"forward", "backward", "update"};

const char *rp_stage_name(const rp_report *r, int st, char *buf, size_t n) {
  static const char *const ph[3] = {"fwd", "bwd", "update"};
  if (!r->tr || st < 0 || st >= r->tr->n_stages) snprintf(buf, n, "?");
  else snprintf(buf, n, "%s/s%d", ph[r->tr->st_phase[st]], r->tr->st_group[st]);
  return buf;
}

void rp_train_free(rp_train *t) {
  if (!t) return;
  for (int s = 0; t->ts && s < t->S; s++) free(t->ts[s].live);
  free(t->ts);
  free(t->st_phase);
  free(t->st_group);
  free(t->prog_live);
  free(t->jobs);
  free(t->busy_s);
  free(t);
}

/* The runtime's pipeline of one update (common/cm_pipe.c; replicas share their shard's
 * thread group and one pool of frames, the default); group: [n_stages] filled here. */
static cm_pipe train_pipe(const rp_train *t, int *group) {
  int P = 0, F = 0;
  for (int st = 0; st < t->n_stages; st++)
    if (t->st_phase[st] != PASS_PHASE_UPDATE) group[P++] = t->st_group[st], F += t->st_phase[st] == PASS_PHASE_FWD;
  int sched = !strcmp(t->schedule, "grouped") ? 1 : !strcmp(t->schedule, "interleaved") ? 2 : 0;
  return (cm_pipe){.P = P, .F = F, .S = t->S, .N = t->grad_accum, .R = t->replicas, .group = group, .schedule = sched};
}

void rp_train_init(rp_report *r, const cg_report_kernel *k) {
  const ir_graph *g = r->g;
  rp_train *t = ir_calloc(1, sizeof *t);
  r->tr = t;
  t->n_stages = r->n_shards;
  t->update_stage = -1;
  t->st_phase = ir_calloc((size_t)t->n_stages, sizeof(int));
  t->st_group = ir_calloc((size_t)t->n_stages, sizeof(int));
  for (int i = 0; i < r->n_k; i++) {
    int sh = g->nodes[k[i].anchor].shard;
    if (sh + 1 > t->S) t->S = sh + 1;
  }
  if (t->S < 1) t->S = 1;
  for (int st = 0; st < t->n_stages; st++) t->st_phase[st] = -1;
  for (int i = 0; i < r->n_k; i++) {
    int st = k[i].shard;
    if (st < 0 || st >= t->n_stages || t->st_phase[st] >= 0) continue;
    int ph = pass_train_phase(g, k[i].anchor);
    t->st_phase[st] = ph;
    t->st_group[st] = ph == PASS_PHASE_UPDATE ? 0 : g->nodes[k[i].anchor].shard; /* update: shard 0's threads */
    if (ph == PASS_PHASE_UPDATE) t->update_stage = st;
  }
  for (int st = 0; st < t->n_stages; st++)
    if (t->st_phase[st] < 0) t->st_phase[st] = PASS_PHASE_FWD;
  t->grad_accum = r->opt_grad_accum > 0 ? r->opt_grad_accum : 1;
  t->replicas = r->opt_replicas > 0 ? r->opt_replicas : 1;
  t->schedule = r->opt_schedule ? r->opt_schedule : "sequential";
  t->recompute = r->opt_recompute ? r->opt_recompute : "none";
  t->ts = ir_calloc((size_t)t->S, sizeof *t->ts);
  t->busy_s = ir_calloc((size_t)t->S, sizeof(double));
  for (int s = 0; s < t->S; s++) t->ts[s].fwd = t->ts[s].bwd = t->ts[s].first_node = t->ts[s].last_node = -1;
  for (int st = 0; st < t->n_stages; st++) {
    rp_tshard *x = &t->ts[t->st_group[st]];
    if (t->st_phase[st] == PASS_PHASE_FWD) x->fwd = st;
    else if (t->st_phase[st] == PASS_PHASE_BWD) x->bwd = st;
  }
  /* frames: train tensor sets in flight, the runtime's bound for the schedule (cm_pipe_frames) */
  int *group = ir_calloc((size_t)t->n_stages + 1, sizeof(int));
  cm_pipe pipe = train_pipe(t, group);
  t->frames = pipe.P > 0 ? cm_pipe_frames(&pipe) : 1;
  if (t->frames < 1) t->frames = t->grad_accum * t->replicas; /* out of memory: one per micro-batch */
  free(group);
}

/* The state buffer: every param once, in the model shard of the first kernel reading it
 * (weights and buffers in their forward stage; optimizer state in the update of its param,
 * which has the param's shard); gradient accumulators (grad_accum x replicas > 1: the values
 * a backward stage writes and the update reads, one 64-aligned slice per replica, f32 or
 * 16-bit with --enable-half-partials: pass_acc_elem_bytes). */
static void train_state(rp_report *r, const cg_report_kernel *k) {
  const ir_graph *g = r->g;
  rp_train *t = r->tr;
  char *seen = ir_calloc((size_t)g->n_values, 1);
  for (int i = 0; i < r->n_k; i++) {
    const ir_node *n = &g->nodes[k[i].anchor];
    int s = n->shard < 0 || n->shard >= t->S ? 0 : n->shard;
    for (int j = 0; j < n->n_in; j++) {
      int v = n->in[j];
      if (g->values[v].kind != IR_VAL_PARAM || seen[v]) continue;
      seen[v] = 1;
      int64_t b = (ir_value_bytes(g, v) + 63) / 64 * 64;
      if (pass_mem_is_optimizer_state(g, v)) t->ts[s].optimizer_state += b;
      else t->ts[s].weights += b;
    }
  }
  if (t->grad_accum * t->replicas > 1 && t->update_stage >= 0) {
    memset(seen, 0, (size_t)g->n_values);
    for (int i = 0; i < r->n_k; i++) {
      if (k[i].shard != t->update_stage) continue;
      const ir_node *n = &g->nodes[k[i].anchor];
      for (int j = 0; j < n->n_in; j++) {
        int v = n->in[j], p = g->values[v].producer;
        if (seen[v] || p < 0 || pass_train_phase(g, p) != PASS_PHASE_BWD) continue;
        seen[v] = 1;
        int s = g->nodes[p].shard < 0 || g->nodes[p].shard >= t->S ? 0 : g->nodes[p].shard;
        int64_t es = pass_acc_elem_bytes(g, g->half_partials), numel = ir_shape_numel(&g->values[v].shape); /* 16-bit with half partials (cg_layout.c) */
        t->ts[s].accumulators += (numel * es + 63) / 64 * 64 * t->replicas;
        t->acc_f32_bytes += (numel * 4 + 63) / 64 * 64 * t->replicas;
      }
    }
  }
  free(seen);
}

typedef struct rp_tev { double t; int d; } rp_tev;
static int by_time(const void *a, const void *b) {
  const rp_tev *x = a, *y = b;
  return x->t < y->t ? -1 : x->t > y->t ? 1 : x->d - y->d;
}

/* One update's micro-batches as the runtime orders them (cm_pipe_jobs), each job taking its
 * stage's roofline estimate; a job starts when its group is free and its frame finished its
 * previous job (the micro-batch's previous stage, or the last stage of the micro-batch that
 * used the frame before).  Then the update stage on shard 0's group. */
static void simulate(rp_report *r) {
  rp_train *t = r->tr;
  int S = t->S, N = t->grad_accum, R = t->replicas;
  int *group = ir_calloc((size_t)t->n_stages + 1, sizeof(int));
  cm_pipe pipe = train_pipe(t, group);
  int P = pipe.P, B = t->frames > 0 ? t->frames : 1;
  long total = cm_pipe_jobs(&pipe, B, NULL);
  cm_pjob *jl = ir_calloc((size_t)total + 1, sizeof *jl);
  cm_pipe_jobs(&pipe, B, jl);
  int *len = ir_calloc((size_t)S, sizeof(int)); /* per group list of jobs (indices into jl) */
  int **gl = ir_calloc((size_t)S, sizeof(int *));
  for (int s = 0; s < S; s++) gl[s] = ir_calloc((size_t)total + 1, sizeof(int));
  for (long i = 0; i < total; i++) gl[jl[i].group][len[jl[i].group]++] = (int)i;
  double *fin = ir_calloc((size_t)R * N * P + 1, sizeof(double)), *gfree = ir_calloc((size_t)S, sizeof(double));
  double *ffree = ir_calloc((size_t)B, sizeof(double)); /* the frame's last job's end */
  int *fprog = ir_calloc((size_t)B, sizeof(int));
  int *pos = ir_calloc((size_t)S, sizeof(int)), n_done = 0;
  t->jobs = ir_calloc((size_t)total + 1, sizeof *t->jobs);
  for (int progress = 1; progress && n_done < total;) {
    progress = 0;
    for (int s = 0; s < S; s++)
      while (pos[s] < len[s]) {
        const cm_pjob *j = &jl[gl[s][pos[s]]];
        int k = j->stage, f = j->mb;
        if (fprog[j->frame] != j->seq) break;
        double t0 = gfree[s] > ffree[j->frame] ? gfree[s] : ffree[j->frame];
        double d = r->sh[k].est_s;
        fin[f * P + k] = t0 + d, gfree[s] = t0 + d, ffree[j->frame] = t0 + d, fprog[j->frame]++, t->busy_s[s] += d;
        t->jobs[t->n_jobs++] = (rp_tjob){s, k, f, t0, t0 + d};
        pos[s]++, n_done++, progress = 1;
      }
  }
  free(jl), free(group), free(ffree), free(fprog);
  double end = 0;
  for (int s = 0; s < S; s++) end = gfree[s] > end ? gfree[s] : end;
  t->update_s = t->update_stage >= 0 ? r->sh[t->update_stage].est_s : 0;
  if (t->update_stage >= 0) t->jobs[t->n_jobs++] = (rp_tjob){0, t->update_stage, -1, end, end + t->update_s};
  t->makespan_s = end + t->update_s;
  double busy = t->update_s;
  for (int s = 0; s < S; s++) busy += t->busy_s[s];
  t->idle_fraction = t->makespan_s > 0 ? 1.0 - busy / (S * t->makespan_s) : 0;
  /* micro-batches stashed at once per shard: frames whose forward finished and whose
   * backward has not */
  for (int s = 0; s < S; s++) {
    rp_tshard *x = &t->ts[s];
    if (x->fwd < 0) continue;
    x->in_flight = 1;
    if (x->bwd < 0) continue;
    /* sweep: +1 when a frame's forward ends, -1 when its backward ends (ends first on ties) */
    int nf = R * N, cur = 0, best = 0;
    rp_tev *ev = ir_calloc((size_t)nf * 2, sizeof *ev);
    for (int f = 0; f < nf; f++) ev[2 * f] = (rp_tev){fin[f * P + x->fwd], 1}, ev[2 * f + 1] = (rp_tev){fin[f * P + x->bwd], -1};
    qsort(ev, (size_t)nf * 2, sizeof *ev, by_time);
    for (int i = 0; i < 2 * nf; i++) cur += ev[i].d, best = cur > best ? cur : best;
    free(ev);
    x->in_flight = best;
  }
  for (int s = 0; s < S; s++) free(gl[s]);
  free(gl), free(len), free(fin), free(gfree), free(pos);
}

void rp_train_derive(rp_report *r, const cg_report_kernel *k, const int *tensor_vid, int n_tensors) {
  const ir_graph *g = r->g;
  rp_train *t = r->tr;
  /* programs */
  for (int i = 0; i < r->n_k; i++) {
    const rp_kernel *x = &r->k[i];
    int ph = t->st_phase[x->shard], s = g->nodes[x->anchor].shard;
    if (s < 0 || s >= t->S) s = 0;
    rp_tshard *ts = &t->ts[s];
    ts->n_k[ph]++, ts->flops[ph] += x->flops, ts->est_s[ph] += x->est_s;
    if (ph == PASS_PHASE_FWD) {
      if (ts->first_node < 0) ts->first_node = x->anchor;
      ts->last_node = x->last;
    }
  }
  train_state(r, k);
  /* the group's scratch: one buffer of the largest stage it runs */
  for (int st = 0; st < t->n_stages; st++) {
    rp_tshard *ts = &t->ts[t->st_group[st]];
    if (r->sh[st].arena > ts->arena) ts->arena = r->sh[st].arena;
    if (r->sh[st].peak_live > ts->peak_live) ts->peak_live = r->sh[st].peak_live;
  }
  /* train tensors: writer kernel, last reader; stash (forward -> backward) or other, owned by
   * the writing shard (caller inputs: io of each reading shard) */
  t->n_prog = t->update_stage >= 0 ? r->n_k - r->sh[t->update_stage].n_k : r->n_k;
  int *w = ir_calloc((size_t)n_tensors, sizeof(int)), *l = ir_calloc((size_t)n_tensors, sizeof(int));
  for (int ti = 0; ti < n_tensors; ti++) {
    int v = tensor_vid[ti];
    w[ti] = l[ti] = -1;
    char *reads = ir_calloc((size_t)t->S, 1); /* shards that counted this caller input */
    for (int i = 0; i < r->n_k; i++) {
      if (k[i].out == v && w[ti] < 0) w[ti] = i;
      for (int j = 0; j < k[i].n_act; j++)
        if (k[i].act[j] == v) {
          l[ti] = i;
          int s = t->st_group[k[i].shard];
          if (w[ti] < 0 && !reads[s]) reads[s] = 1, t->ts[s].io_mb += ir_value_bytes(g, v);
        }
    }
    free(reads);
    if (w[ti] < 0) continue;
    int s = t->st_group[k[w[ti]].shard];
    if (pass_mem_is_stash(g, v)) t->ts[s].stash_mb += ir_value_bytes(g, v);
    else t->ts[s].io_mb += ir_value_bytes(g, v);
  }
  /* liveness: the program (every train tensor) and per shard (its stages' steps, the train
   * tensors it wrote) */
  t->prog_live = ir_calloc((size_t)t->n_prog, sizeof(int64_t));
  for (int i = 0; i < t->n_prog; i++) t->prog_live[i] = r->sh[k[i].shard].live[k[i].step];
  for (int ti = 0; ti < n_tensors; ti++) {
    if (w[ti] < 0) continue;
    int64_t b = ir_value_bytes(g, tensor_vid[ti]);
    int last = l[ti] < 0 ? w[ti] : l[ti];
    for (int i = w[ti]; i <= last && i < t->n_prog; i++) t->prog_live[i] += b;
  }
  for (int s = 0; s < t->S; s++) {
    rp_tshard *ts = &t->ts[s];
    int nf = ts->fwd >= 0 ? r->sh[ts->fwd].n_k : 0, nb = ts->bwd >= 0 ? r->sh[ts->bwd].n_k : 0;
    ts->n_live = nf + nb, ts->n_live_fwd = nf;
    ts->live = ir_calloc((size_t)ts->n_live, sizeof(int64_t));
    for (int p = 0; p < ts->n_live; p++) {
      int st = p < nf ? ts->fwd : ts->bwd, step = p < nf ? p : p - nf;
      int gi = -1;
      for (int i = 0; i < r->n_k && gi < 0; i++)
        if (k[i].shard == st && k[i].step == step) gi = i;
      ts->live[p] = r->sh[st].live[step];
      for (int ti = 0; ti < n_tensors && gi >= 0; ti++)
        if (w[ti] >= 0 && t->st_group[k[w[ti]].shard] == s && w[ti] <= gi && gi <= (l[ti] < 0 ? w[ti] : l[ti]))
          ts->live[p] += ir_value_bytes(g, tensor_vid[ti]);
      if (ts->live[p] > ts->live[ts->peak_step]) ts->peak_step = p;
    }
  }
  free(w), free(l);
  simulate(r);
  t->bottleneck = 0;
  for (int s = 1; s < t->S; s++)
    if (t->ts[s].est_s[0] + t->ts[s].est_s[1] > t->ts[t->bottleneck].est_s[0] + t->ts[t->bottleneck].est_s[1])
      t->bottleneck = s;
}

int64_t rp_train_limited(const rp_report *r, const rp_tshard *x) {
  int fr = r->tr->frames;
  return x->arena + (x->stash_mb + x->io_mb) * fr + x->weights + x->optimizer_state + x->accumulators;
}

int64_t rp_train_total(const rp_report *r, const rp_tshard *x) { return rp_train_limited(r, x); }

/* ---- JSON -------------------------------------------------------------------------------- */
static void json_prog(const rp_report *r, FILE *f, const char *key, int st, int n_k, double flops, double est_s) {
  char nm[32];
  fprintf(f, "\"%s\": {\"stage\": ", key);
  if (st >= 0) rp_json_str(f, rp_stage_name(r, st, nm, sizeof nm));
  else fprintf(f, "null");
  fprintf(f, ", \"stage_index\": %d, \"n_kernels\": %d, \"flops\": %.17g, \"est_ms\": %.6g", st, n_k, flops, est_s * 1e3);
  if (st >= 0) fprintf(f, ", \"scratch\": %lld", (long long)r->sh[st].arena);
  fprintf(f, "}");
}

static void json_tshard(const rp_report *r, int s, FILE *f) {
  const rp_train *t = r->tr;
  const rp_tshard *x = &t->ts[s];
  const ir_graph *g = r->g;
  fprintf(f, "    {\"index\": %d, \"first_layer\": ", s);
  rp_json_str(f, x->first_node >= 0 ? g->nodes[x->first_node].name : "");
  fprintf(f, ", \"last_layer\": ");
  rp_json_str(f, x->last_node >= 0 ? g->nodes[x->last_node].name : "");
  fprintf(f, ", \"n_kernels\": %d, \"flops\": %.17g, \"est_ms\": %.6g,\n     \"programs\": {", x->n_k[0] + x->n_k[1],
          x->flops[0] + x->flops[1], (x->est_s[0] + x->est_s[1]) * 1e3);
  json_prog(r, f, "forward", x->fwd, x->n_k[0], x->flops[0], x->est_s[0]);
  fprintf(f, ", ");
  json_prog(r, f, "backward", x->bwd, x->n_k[1], x->flops[1], x->est_s[1]);
  fprintf(f, ", ");
  json_prog(r, f, "optimizer", t->update_stage, x->n_k[2], x->flops[2], x->est_s[2]);
  int64_t lim = rp_train_limited(r, x), tot = rp_train_total(r, x), fr = t->frames;
  fprintf(f, "},\n     \"memory\": {\"weights\": %lld, \"activations\": %lld, \"stash\": %lld, \"optimizer_state\": %lld, "
             "\"accumulators\": %lld, \"io\": %lld, \"temporaries\": 0, \"gaps\": %lld, \"total\": %lld, \"limited\": %lld, "
             "\"weights_counted\": true, \"arena\": %lld, \"stash_per_micro_batch\": %lld, \"io_per_micro_batch\": %lld, "
             "\"frames\": %lld, \"micro_batches_in_flight\": %d, \"stash_in_flight\": %lld, \"peak_live\": %lld, "
             "\"peak_step\": %d, \"peak_op\": ",
          (long long)x->weights, (long long)x->peak_live, (long long)(x->stash_mb * fr), (long long)x->optimizer_state,
          (long long)x->accumulators, (long long)(x->io_mb * fr), (long long)(x->arena - x->peak_live), (long long)tot,
          (long long)lim, (long long)x->arena, (long long)x->stash_mb, (long long)x->io_mb, (long long)fr, x->in_flight,
          (long long)(x->stash_mb * x->in_flight), (long long)(x->n_live ? x->live[x->peak_step] : 0), x->peak_step);
  const char *pk = "";
  if (x->n_live) {
    int st = x->peak_step < x->n_live_fwd ? x->fwd : x->bwd, step = x->peak_step < x->n_live_fwd ? x->peak_step : x->peak_step - x->n_live_fwd;
    for (int i = 0; i < r->n_k; i++)
      if (r->k[i].shard == st && r->k[i].step == step) pk = g->nodes[r->k[i].last].name;
  }
  rp_json_str(f, pk);
  if (r->limit > 0)
    fprintf(f, ", \"limit\": %lld, \"fits\": %s, \"headroom\": %lld}", (long long)r->limit, lim <= r->limit ? "true" : "false",
            (long long)(r->limit - lim));
  else fprintf(f, ", \"limit\": null, \"fits\": true, \"headroom\": null}");
  double amp = cg_budget_proportion(r->amp_text, s);
  fprintf(f, ",\n     \"available_memory_proportion\": %.6g, \"working_set_budget\": %lld", amp,
          (long long)cg_working_set_budget(&r->cache, amp));
  fprintf(f, ",\n     \"liveness_forward_steps\": %d, \"liveness\": [", x->n_live_fwd);
  for (int p = 0; p < x->n_live; p++) fprintf(f, "%s%lld", p ? ", " : "", (long long)x->live[p]);
  fprintf(f, "]}");
}

void rp_train_json_shards(const rp_report *r, FILE *f) {
  fprintf(f, "  \"shards\": [\n");
  for (int s = 0; s < r->tr->S; s++) {
    json_tshard(r, s, f);
    fprintf(f, "%s\n", s + 1 < r->tr->S ? "," : "");
  }
  fprintf(f, "  ],\n");
}

/* "balance" and "training" (stages, program liveness, schedule). */
void rp_train_json_section(const rp_report *r, FILE *f) {
  const rp_train *t = r->tr;
  double sum = 0, max = 0;
  fprintf(f, "  \"balance\": {\"flops\": [");
  for (int s = 0; s < t->S; s++) fprintf(f, "%s%.17g", s ? ", " : "", t->ts[s].flops[0] + t->ts[s].flops[1]);
  fprintf(f, "], \"est_ms\": [");
  for (int s = 0; s < t->S; s++) {
    double e = t->ts[s].est_s[0] + t->ts[s].est_s[1];
    sum += t->ts[s].flops[0] + t->ts[s].flops[1], max = e > max ? e : max;
    fprintf(f, "%s%.6g", s ? ", " : "", e * 1e3);
  }
  double fmax = 0;
  for (int s = 0; s < t->S; s++)
    if (t->ts[s].flops[0] + t->ts[s].flops[1] > fmax) fmax = t->ts[s].flops[0] + t->ts[s].flops[1];
  double mean = sum / t->S;
  fprintf(f, "], \"fwd_est_ms\": [");
  for (int s = 0; s < t->S; s++) fprintf(f, "%s%.6g", s ? ", " : "", t->ts[s].est_s[0] * 1e3);
  fprintf(f, "], \"bwd_est_ms\": [");
  for (int s = 0; s < t->S; s++) fprintf(f, "%s%.6g", s ? ", " : "", t->ts[s].est_s[1] * 1e3);
  fprintf(f, "], \"max_flops\": %.17g, \"mean_flops\": %.17g, \"max_over_mean\": %.4f, \"pipeline_est_ms\": %.6g, "
             "\"bottleneck_shard\": %d, \"pipeline_schedule\": \"%s\", \"gradient_accumulation\": %d, \"replicas\": %d, "
             "\"update_est_ms\": %.6g, \"optimizer_est_ms\": %.6g, \"busy_est_ms\": [",
          fmax, mean, mean > 0 ? fmax / mean : 0, max * 1e3, t->bottleneck, t->schedule, t->grad_accum, t->replicas,
          t->makespan_s * 1e3, t->update_s * 1e3);
  for (int s = 0; s < t->S; s++) fprintf(f, "%s%.6g", s ? ", " : "", t->busy_s[s] * 1e3);
  fprintf(f, "], \"idle_fraction\": %.4f},\n", t->idle_fraction);
  fprintf(f, "  \"training\": {\"shards\": %d, \"gradient_accumulation\": %d, \"replicas\": %d, \"frames\": %d, "
             "\"pipeline_schedule\": \"%s\", \"recompute\": \"%s\", \"optimizer_stage\": ",
          t->S, t->grad_accum, t->replicas, t->frames, t->schedule, t->recompute);
  char nm[32];
  if (t->update_stage >= 0) rp_json_str(f, rp_stage_name(r, t->update_stage, nm, sizeof nm));
  else fprintf(f, "null");
  fprintf(f, ",\n   \"stages\": [\n");
  for (int st = 0; st < t->n_stages; st++) {
    const rp_shard *x = &r->sh[st];
    fprintf(f, "    {\"index\": %d, \"name\": ", st);
    rp_json_str(f, rp_stage_name(r, st, nm, sizeof nm));
    fprintf(f, ", \"phase\": \"%s\", \"shard\": %d, \"n_kernels\": %d, \"flops\": %.17g, \"est_ms\": %.6g, \"scratch\": %lld, "
               "\"scratch_peak\": %lld, \"liveness\": [",
            phase_word[t->st_phase[st]], t->st_group[st], x->n_k, x->flops, x->est_s * 1e3, (long long)x->arena,
            (long long)x->peak_live);
    for (int p = 0; p < x->n_k; p++) fprintf(f, "%s%lld", p ? ", " : "", (long long)x->live[p]);
    fprintf(f, "]}%s\n", st + 1 < t->n_stages ? "," : "");
  }
  fprintf(f, "   ],\n   \"program_liveness\": [");
  for (int i = 0; i < t->n_prog; i++) fprintf(f, "%s%lld", i ? ", " : "", (long long)t->prog_live[i]);
  fprintf(f, "],\n   \"schedule_jobs\": [");
  int nj = t->n_jobs < RP_MAX_JOBS_JSON ? t->n_jobs : RP_MAX_JOBS_JSON;
  for (int j = 0; j < nj; j++) {
    const rp_tjob *x = &t->jobs[j];
    fprintf(f, "%s\n    {\"shard\": %d, \"stage\": ", j ? "," : "", x->group);
    rp_json_str(f, rp_stage_name(r, x->stage, nm, sizeof nm));
    fprintf(f, ", \"micro_batch\": %d, \"start_ms\": %.6g, \"end_ms\": %.6g}", x->frame, x->t0 * 1e3, x->t1 * 1e3);
  }
  fprintf(f, "],\n   \"schedule_jobs_total\": %d},\n", t->n_jobs);
}
