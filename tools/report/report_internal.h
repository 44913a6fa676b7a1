/* report_internal.h — private to the compile report (passes/report*.c): the collected and
 * derived figures that the JSON (report.c) and HTML (report_html.c) writers print. */
#ifndef CNNC_REPORT_INTERNAL_H
#define CNNC_REPORT_INTERNAL_H

#include <stdio.h>

#include "codegen/cg.h"
#include "codegen/cg_budget.h"
#include "passes/passes.h"
#include "tools/report/report.h"

/* Roofline constants (docs/reports.md): flops per cycle per core = 4 * f32 lanes (two FMA
 * pipes), a nominal clock, and a nominal DRAM bandwidth per core. */
#define RP_CLOCK_HZ 3.0e9
#define RP_BW_PER_CORE 20e9
#define RP_MAX_PHASES 16

typedef struct rp_kernel {
  int anchor, last, shard, step, out;
  double flops, bytes, est_s; /* bytes: operands + weights + output, no reuse */
  char *name, *kind;
  int64_t tile_block, block_bytes; /* the kernel plan's cache blocking (cg_kplan; 0: not blocked) */
} rp_kernel;

typedef struct rp_shard {
  int n_k, first_node, last_node, peak_step;
  int64_t weights, io, arena, peak_live, temporaries;
  /* training: stash = forward results kept for the backward, in the arena at the peak step
   * (part of peak_live) and in boundary buffers the shard writes (not in io); the optimizer
   * state in the state buffer (weights then hold the params and buffers there) */
  int64_t stash_scratch, stash_io, optimizer_state;
  double amp;                     /* --available-memory-proportion of the shard */
  double flops, est_s;
  int64_t *live; /* [n_k] scratch bytes live at each step */
} rp_shard;

/* Training (docs/reports.md "Training reports"): the layout's "shards" are then the program
 * STAGES (fwd/s0.., bwd/s(S-1)..s0, update/s0); report_train.c folds them back into the S
 * model shards (pipeline stages), each with its forward and backward programs. */
typedef struct rp_tshard {
  int fwd, bwd;                            /* stage indices, -1: none */
  int first_node, last_node;               /* the forward range */
  int n_k[3];                              /* kernels: forward, backward, optimizer (its params' updates) */
  double flops[3], est_s[3];
  int64_t weights, optimizer_state, accumulators; /* state buffer slices first read in this shard */
  int64_t arena, peak_live;                /* the group's scratch: max over its stages */
  int64_t stash_mb, io_mb;                 /* train tensors per micro-batch: stash (fwd -> bwd), other */
  int in_flight;                           /* most micro-batches stashed at once (simulated schedule) */
  int n_live, n_live_fwd, peak_step;       /* liveness: forward steps, then backward steps */
  int64_t *live;
} rp_tshard;

typedef struct rp_tjob { int group, stage, frame; double t0, t1; } rp_tjob;

typedef struct rp_train {
  int S;                                   /* model shards (thread groups) */
  int n_stages, update_stage;              /* = the layout's shards; update stage or -1 */
  int *st_phase, *st_group;                /* per stage: PASS_PHASE_*, thread group */
  int grad_accum, replicas, frames;        /* frames: train tensor sets in flight (cm_pipe_frames) */
  int64_t acc_f32_bytes;                   /* the accumulators' slices had they been f32 (half partials: bytes saved) */
  const char *schedule, *recompute;
  rp_tshard *ts;                           /* [S] */
  int n_prog;                              /* micro_batch program steps (kernels before the update) */
  int64_t *prog_live;                      /* [n_prog] scratch of the running stage + live train tensors */
  rp_tjob *jobs;                           /* the simulated schedule of one update */
  int n_jobs;
  double makespan_s, update_s, idle_fraction;
  double *busy_s;                          /* [S] */
  int bottleneck;
} rp_train;

struct rp_report {
  const ir_graph *g;
  int64_t limit;
  const char *amp_text;  /* --available-memory-proportion as given (NULL: the default) */
  cg_cache_sizes cache;  /* the target's, for working-set budgets */
  int training;          /* the graph has optimizer updates: weights live in the state buffer */
  char triple[96], cpu[64], core[32]; /* core: the codegen/cores.def row, "" for none */
  char bf16_route[192];            /* cg_bf16_route's decision in words */
  int vec_f32, cores;
  double peak_flops_core, peak_bw_core;
  int have_layout;
  rp_kernel *k;
  int n_k;
  cg_report_buffer *b;
  int n_b;
  int n_shards;
  rp_shard *sh;
  int *node_kernel;  /* [n_nodes] kernel computing the node */
  char *is_tensor;   /* [n_values] boundary tensor */
  int n_phases;
  char phase_name[RP_MAX_PHASES][16];
  double phase_s[RP_MAX_PHASES];
  /* training (report_train.c); NULL for inference */
  rp_train *tr;
  int opt_grad_accum, opt_replicas;
  const char *opt_schedule, *opt_recompute;
  const char *opt_half_partials; /* --enable-half-partials: the half type, NULL = off */
};

/* Roofline estimate in seconds on `cores` cores. */
double rp_roofline(const rp_report *r, double flops, double bytes, int cores);
int rp_cores_per_shard(const rp_report *r);
/* The node's own cost and estimate (one core group of its shard). */
void rp_node_cost(const rp_report *r, int node, double *flops, double *bytes, double *est_s);
/* Bytes of shard s counted against --memory-limit: the arena, io and (training) the state
 * buffer's weights and optimizer state; inference weights are constants in the .so. */
int64_t rp_limited(const rp_report *r, const rp_shard *s);
/* The working-set budget of node n (cg_working_set_budget with its shard's proportion), or -1
 * for ops that have none (only conv/dense and their gradients block for the cache). */
int64_t rp_node_budget(const rp_report *r, int n);
/* Conv kernels run in blocks of channel tiles (the direct route's kernel plan, cg_kplan): the
 * block's working set (bytes) and the tiles per block in *tiles; -1 for other kernels. */
int64_t rp_conv_block(const rp_kernel *k, int64_t *tiles);
/* Training (report_train.c): stage structure before the kernels are derived, then the
 * per-shard figures, liveness and the simulated schedule; JSON parts; free. */
void rp_train_init(rp_report *r, const cg_report_kernel *k);
void rp_train_derive(rp_report *r, const cg_report_kernel *k, const int *tensor_vid, int n_tensors);
void rp_train_json_shards(const rp_report *r, FILE *f);
void rp_train_json_section(const rp_report *r, FILE *f);
void rp_train_free(rp_train *t);
const char *rp_stage_name(const rp_report *r, int stage, char *buf, size_t n);
int64_t rp_train_limited(const rp_report *r, const rp_tshard *t);
int64_t rp_train_total(const rp_report *r, const rp_tshard *t);
/* Writes s JSON-escaped (with quotes) / HTML-escaped. */
void rp_json_str(FILE *f, const char *s);
void rp_html_str(FILE *f, const char *s);

#endif
