/* passes.h — graph passes used by the back end, one file and one entry point each:
 * split.c (pipeline stages), fuse.c (conv epilogue fusion incl. BN folding), plan_memory.c
 * (scratch offsets from usage records).  Prefix: pass_. */
#ifndef CNNC_PASSES_H
#define CNNC_PASSES_H

#include <stdio.h>

#include "ir/ir.h"

/* ---- split.c ------------------------------------------------------------------------- */
/* Assigns node->shard and g->n_shards.  With n_splits > 0, each split NAME starts a new
 * stage at the first node whose name equals NAME or starts with "NAME/" (a layer or a block
 * instance such as "layer2/3"); splits must name strictly increasing positions.  With
 * n_shards > 1, splits the node list contiguously so that the largest stage cost
 * (ir_node_cost flops) is minimal.  Neither: one shard.  Returns 0 or -1 with d filled (an
 * unknown name gets the closest existing layer or block by edit distance). */
int pass_split(ir_graph *g, const char *const *splits, int n_splits, int n_shards, ir_diag *d);

/* Training graphs (after pass_autodiff and pass_optimizer): splits the forward nodes like
 * pass_split, then gives every backward node the shard of the forward layer it belongs to
 * ("bwd/<layer>/...", "grad/<param>"), lowered when needed so that backward data only flows
 * from a shard to the same or an earlier one; optimizer nodes get their param's shard. */
int pass_split_train(ir_graph *g, const char *const *splits, int n_splits, int n_shards, ir_diag *d);
/* Phase of a training graph's node: forward (incl. loss), backward, optimizer update. */
enum { PASS_PHASE_FWD = 0, PASS_PHASE_BWD = 1, PASS_PHASE_UPDATE = 2 };
int pass_train_phase(const ir_graph *g, int node);

/* ---- recompute.c (training) ----------------------------------------------------------- */
/* --recompute MODE ("none", "auto", "pipeline", "all") on a split training graph: see
 * passes/recompute.c.  Returns the number of forward nodes re-emitted, or -1 with d filled. */
int pass_recompute(ir_graph *g, const char *mode, ir_diag *d);

/* Levenshtein distance of a and b (exposed for tests). */
int pass_edit_distance(const char *a, const char *b);

/* ---- fuse.c -------------------------------------------------------------------------- */
#define PASS_MAX_POST 4
/* One row per node.  A fused group is an anchor (conv2d) followed by a chain of nodes each
 * consuming only the previous one's single-use result, in the same shard: an optional
 * inference batchnorm (folded into the conv's weights and bias at compile time), then up to
 * PASS_MAX_POST epilogue ops (relu, sigmoid, swish, clip, hardsigmoid, hardswish, add of a same-shape activation).  The
 * group's kernel runs at the position of its last member and writes that member's output. */
typedef struct pass_fusion {
  int anchor;   /* node whose kernel computes this node (itself when not fused) */
  int last;     /* anchors: last member of the group (itself when alone) */
  int bn;       /* anchors: folded batchnorm node, or -1 */
  int n_post;   /* anchors: epilogue nodes after the batchnorm, in order */
  int post[PASS_MAX_POST];
  /* anchors (1x1 convs): a squeeze-excite scale fused before the conv.  n_pre 1: node pre, a
   * mul of an [N,C,H,W] activation by an [N,C,1,1] one whose only reader is this conv; the
   * kernel reads the mul's operands instead of its result (passes/fuse.c).  0: none. */
  int n_pre, pre;
  /* anchors (depthwise convs): n_side 1: node side, a global_avgpool of the group's result,
   * computed in the kernel's epilogue as a second output (an extra kernel operand after the
   * residuals, written by the kernel; passes/fuse.c, codegen/gen_dwconv.c).  0: none. */
  int n_side, side;
  /* anchors (training, pass_fuse_train): n_side 2: node side2's result is a third output,
   * after side's (batchnorm_grad_input with its batchnorm_grad_gamma and dbeta reduce_sum). */
  int side2;
} pass_fusion;

/* Fills plan[0..g->n_nodes-1].  enable = 0 gives the identity plan (every node alone). */
void pass_fuse(const ir_graph *g, int enable, pass_fusion *plan);
/* Training graphs (after autodiff, on the identity plan), groups within one shard and phase:
 * a training batchnorm takes the relu after it, or a residual add and the relu after that, as
 * its epilogue (post) when its result (the add's) is otherwise read only as relu_grad masks
 * (which then read the relu's result: cg_layout.c); a training batchnorm_grad_input takes its
 * batchnorm_grad_gamma (side), the reduce_sum of the same dy to [C] (dbeta, side2) and the
 * relu_grad producing dy when nothing else reads dy (pre: the kernel reads the relu_grad's
 * operands); a relu_grad takes the add producing its dy when nothing else reads it (pre).
 * accum (gradient accumulation or replicas): no batchnorm_grad_input groups (their extra
 * outputs are gradients, and the accumulators' add covers a kernel's first output only:
 * cg_main.c).  tune train_fusion=0 keeps every node alone (A/B, tests).  Returns the number
 * of nodes absorbed. */
int pass_fuse_train(const ir_graph *g, int accum, pass_fusion *plan);

/* ---- plan_memory.c ------------------------------------------------------------------- */
/* A buffer needed from step first_step to last_step inclusive (XNNPACK-style record). */
typedef struct pass_usage {
  int first_step, last_step;
  int64_t bytes, align;   /* align: power of two */
  int64_t offset;         /* result */
} pass_usage;

/* Assigns offsets so that records whose step ranges overlap never overlap in memory
 * (greedy by size, first fit).  Returns the arena size (a multiple of 64). */
int64_t pass_plan_memory(pass_usage *u, int n);

/* Bytes per element of a gradient accumulator (--gradient-accumulation / --replicas sums in
 * the state buffer): 2 when half_partials (1 + ir_half_format, --enable-half-partials) is on —
 * bf16/fp16 storage, docs/precision.md "Half partials" — unless g's tune half_partials_f32
 * is set (f32 storage rounded to the 16-bit grid at every store: bitwise the same numbers, the
 * reference the tests compare with); 4 otherwise. */
int pass_acc_elem_bytes(const ir_graph *g, int half_partials);

/* ---- memory_limit.c (--memory-limit; docs/cli.md) ------------------------------------ */
/* One shard's planned memory as plain records.  Steps are the shard's program steps. */
typedef struct pass_mem_shard {
  int n_steps;
  int *step_node;          /* [n_steps]: the node whose result step t writes (names the step) */
  pass_usage *usage;       /* [n_usage] scratch usage records, planned (offsets filled) */
  int *usage_vid, n_usage; /* value of each record */
  int64_t arena;           /* the scratch arena: pass_plan_memory's result */
  int64_t io;              /* boundary tensors the shard reads or writes (one micro-batch) */
  int64_t state;           /* training: params, optimizer state, buffers (the state buffer) */
  int owned;               /* arrays owned (pass_mem_train_estimate): pass_mem_shards_free */
} pass_mem_shard;

/* Bytes counted against --memory-limit: everything the runtime allocates for the shard,
 * arena + io + state (weights embedded in the .so are not). */
int64_t pass_mem_counted(const pass_mem_shard *s);
/* 0 if every shard's counted bytes are <= limit (or limit <= 0); else -1 with d located at the
 * first such shard's peak step, naming the shard, the step, the largest live tensors, the
 * amount over and what would make it fit (shards, batch size, recomputation). */
int pass_memory_limit_check(const ir_graph *g, const pass_mem_shard *sh, int n_shards, int64_t limit, ir_diag *d);
/* Training graphs (after autodiff + optimizer + split): per model shard, from the graph alone:
 * state = 64-aligned params read in the shard; one buffer per activation, live from its
 * producer to its last reader in the shard's node order, planned with pass_plan_memory; io =
 * graph inputs read.  An estimate with one micro-batch in flight.  Fills sh[0..g->n_shards)
 * and returns that count; free with pass_mem_shards_free. */
int pass_mem_train_estimate(const ir_graph *g, pass_mem_shard *sh);
void pass_mem_shards_free(pass_mem_shard *sh, int n);
/* Training graph queries: v is a forward result read by the backward pass (a stash); v is a
 * non-trainable param an optimizer node updates (optimizer state). */
int pass_mem_is_stash(const ir_graph *g, int v);
int pass_mem_is_optimizer_state(const ir_graph *g, int v);
/* bytes as "12.3 MiB" into buf; returns buf. */
const char *pass_mem_human(int64_t bytes, char *buf, size_t n);

/* ---- fold_normalize.c (issue 23; docs/model-format.md "input") ------------------------------ */
/* Inference (every precision but int8; the pipeline runs it before the precision pass, so the
 * folded weights are rounded to 16 bits after folding): moves a u8 input's normalisation
 * ((x/255 - mean[c]) / std[c]) into the conv that is its only consumer (groups 1, weights and
 * bias read by that conv alone).  Unpadded, or every mean[c] 0: w' = w / (255 std[c]),
 * b' = b - sum w mean[c] / std[c], the node a plain u8 -> f32 copy (folded 1).  Padded with
 * non-zero means: only w' = w / (255 std[c]), the node subtracts 255 mean[c] (folded 2).
 * Returns 1 if folded, 0 if not. */
int pass_fold_normalize(ir_graph *g);

/* ---- precision.c (issue 6; docs/precision.md) ------------------------------------------- */
/* --precision 16.32 / 16.16 as exact 16-bit numerics in f32 storage: inserts round16 nodes on
 * the stored activations and (training) on the weights as they are read; inference rounds
 * the weights' data in place.  Run on the forward graph, before autodiff.  half_type "bf16"
 * (default, NULL) or "fp16".  Returns the number of round16 nodes added (0 for 32.32 or when
 * already applied) or -1 with d filled (16.16 training: not implemented). */
int pass_precision(ir_graph *g, const char *precision, const char *half_type, int training, ir_diag *d);
/* --precision int8 (passes/quantize.c; docs/precision.md "int8"): calibrates on the n samples
 * x (whole input samples, f32 values; u8 inputs as 0..255) through the interpreter, then
 * quantises every groups-1 conv (quantize8 before it, integer weights, the dequantisation in
 * a batchnorm after it).  log: progress, or NULL.  Returns the number of convs, or -1. */
int pass_quantize8(ir_graph *g, const float *x, int64_t n, FILE *log, ir_diag *d);
/* IR_HALF_BF16 / IR_HALF_FP16 for a --half-type value, -1 if unknown. */
int pass_precision_format(const char *half_type);

/* ---- store16.c (issue 6; docs/precision.md "16-bit storage") ------------------------------ */
/* What pass_store16_train did: values (and their f32 bytes) now stored in 16 bits, of them
 * keep_sign (relu_grad-only pre-activations), and the cross-stage values left in f32. */
typedef struct pass_store16_stats {
  int values, keep_sign, f32_values, recomputed; /* recomputed: weight copies re-rounded, not stashed */
  int64_t bytes32, f32_bytes, recomputed_bytes;
  FILE *log; /* in: when set, one line per value left in f32 (cnnc -v) */
} pass_store16_stats;
/* Training graph after pass_split_train + pass_recompute, --precision 16.x applied: stores every
 * forward value read in another stage (stash, shard boundaries) in the 16-bit format fmt
 * (ir_half_format) via narrow16/widen16 nodes, exactly (see passes/store16.c).  Returns the
 * number of nodes inserted or -1 with d filled; stats may be NULL (its log is read first). */
int pass_store16_train(ir_graph *g, int fmt, pass_store16_stats *stats, ir_diag *d);
/* Nonzero when g's tune store16 is 0 (f32 storage, the reference the tests compare with). */
int pass_store16_disabled(const ir_graph *g);
/* Inference (after pass_split): what the back end's kernels can do with 16-bit operands.
 * writes16(ctx, node): the kernel whose result is node's result stores it as 16-bit values
 * (the node is a round16, the last op of its kernel, or a maxpool of a 16-bit value);
 * reads16(ctx, node, j): the kernel computing node reads its operand j as 16-bit directly
 * (node may be an epilogue op fused into another node's kernel).  Node ids are the graph's
 * before the pass. */
typedef struct pass_store16_hooks {
  int (*writes16)(void *ctx, const ir_graph *g, int node);
  int (*reads16)(void *ctx, const ir_graph *g, int node, int operand);
  void *ctx;
} pass_store16_hooks;
/* Inference graph after pass_split, --precision 16.x applied: every value on the 16-bit grid
 * whose producing kernel writes 16-bit (hooks->writes16) and that is not a graph output or a
 * shard boundary gets the 16-bit dtype of fmt (values[v].dtype = IR_BF16 / IR_F16, the
 * producer unchanged); every reader whose kernel does not read 16-bit (hooks->reads16) gets a
 * widen16 node right before it.  Bitwise the f32-storage model.  Returns the number of values
 * stored in 16 bits or -1 with d filled; stats (values, bytes32; f32_values = widen16 nodes
 * added) may be NULL. */
int pass_store16_infer(ir_graph *g, int fmt, const pass_store16_hooks *hooks, pass_store16_stats *stats, ir_diag *d);

/* ---- autodiff.c (training, issue 5; docs/training.md) --------------------------------- */
/* Appends the backward graph of the loss: the last output produced by softmax_xent, seeded
 * with d(loss) = loss_scale (the gradients come out scaled by it).  Every trainable param P
 * the loss depends on gets one value "grad/P" (same shape as P).  Returns the number of such
 * params, or -1 with d filled (no loss, an op whose rule fails). */
int pass_autodiff(ir_graph *g, float loss_scale, ir_diag *d);
/* Same from any value y with an explicit seed gradient dy (a value shaped like y), e.g. for
 * finite-difference tests of single rules.  Returns the number of grads or -1. */
int pass_autodiff_seed(ir_graph *g, int y, int dy, ir_diag *d);

/* One gradient rule per row of ir/ops.def, pass_grad_<op>(ad, n, dy): given dy, the gradient
 * of n's result (-1 for the loss itself: the seed), emits the gradients of n's operands with
 * pass_grad_give / pass_grad_give_value.  Backward and optimizer ops have a rule that fails
 * (no second-order gradients).  n is a copy that stays valid while nodes are appended. */
typedef struct pass_ad pass_ad;
typedef int (*pass_grad_fn)(pass_ad *ad, const ir_node *n, int dy);
#define IR_OP(name, attr, min_in, max_in, n_out, kind) int pass_grad_##name(pass_ad *ad, const ir_node *n, int dy);
#include "ir/ops.def"
extern const pass_grad_fn pass_grad_rules[IR_OP_COUNT];
/* Nonzero when op is a forward (differentiable primitive) op: its rule must produce gradients. */
int pass_grad_is_forward(ir_op op);

/* Helpers for rules.  Whether operand slot of n needs a gradient at all. */
int pass_grad_needed(const pass_ad *ad, const ir_node *n, int slot);
/* Appends an intermediate backward node "bwd/<n>/<what>"; returns its value id or -1. */
int pass_grad_node(pass_ad *ad, const ir_node *n, const char *what, ir_op op, const int *in, int n_in,
                   const ir_attr *a);
/* Appends node op(in) as (a contribution to) the gradient of operand slot of n, summing with
 * earlier contributions; no-op returning 0 when the slot needs no gradient.  0 or -1. */
int pass_grad_give(pass_ad *ad, const ir_node *n, int slot, const char *what, ir_op op, const int *in, int n_in,
                   const ir_attr *a);
/* Same with an existing value r as the contribution. */
int pass_grad_give_value(pass_ad *ad, const ir_node *n, int slot, int r);
int pass_grad_fail(pass_ad *ad, const ir_node *n, const char *why); /* -1, error on n */
float pass_grad_loss_scale(const pass_ad *ad);
ir_graph *pass_grad_graph(pass_ad *ad);

/* ---- optimizer.c (training) ------------------------------------------------------------- */
typedef struct pass_optim_cfg {
  const char *optimizer;  /* "sgd", "momentum", "nesterov", "rmsprop", "adam" */
  float momentum;         /* momentum/nesterov (torch SGD momentum), default 0.9 when 0 */
  float rho;              /* rmsprop (torch alpha), default 0.99 */
  float beta1, beta2;     /* adam, defaults 0.9, 0.999 */
  float eps;              /* rmsprop/adam, default 1e-8 */
  float weight_decay;     /* decoupled: delta_w = -lr*(O(g) + wd*w) */
  float l2;               /* coupled:   delta_w = -lr*O(g + l2*w) */
  float loss_scale;       /* the gradients are divided by it (1 = none; 0 taken as 1) */
  int exempt_norm;        /* no weight decay / L2 on batchnorm/groupnorm gamma and beta */
  int round16;            /* --precision 16.16: 1 + ir_half_format, the updated weights rounded (0: f32) */
  int stochastic;         /* --enable-stochastic-rounding (needs round16) */
  uint64_t seed;          /* its seed (--seed) */
  float auto_loss_scale;  /* --auto-loss-scaling: the initial scale S (0 = off; loss_scale is then 1) */
  int64_t loss_scale_interval; /* its growth interval */
} pass_optim_cfg;
/* Appends, for every trainable P with a "grad/P" value, the update of P (node "update/P") and
 * of its optimizer state, kept as non-trainable params "P/momentum", "P/rms", "P/m", "P/v"
 * (zeros) and, for Adam, one "optimizer/step" counter.  Adds the runtime scalar input "lr"
 * ([1] f32, kind INPUT).  Each update node's attr.target names the param it replaces
 * (ir_train_apply, ir/grad_train.h).  Returns the number of updated weights or -1 with d. */
int pass_optimizer(ir_graph *g, const pass_optim_cfg *cfg, ir_diag *d);

/* ---- the pipeline (pipeline.c) ---------------------------------------------------------- */
typedef struct pass_pipeline_opts {
  int training;                      /* --mode training */
  const char *precision, *half_type; /* --precision, --half-type */
  const float *calib;                /* --precision int8: calibration samples (f32 values) ... */
  int64_t calib_n;                   /* ... and how many */
  const char *const *splits;         /* --pipeline-splits */
  int n_splits, shards;              /* ... and --shards */
  pass_optim_cfg optim;              /* training: the optimizer update */
  const char *recompute;             /* training: --recompute */
  int store16_fmt;                   /* training: 16-bit stash format (ir_half_format), -1: none */
  const char *stop_after;            /* --emit ir-after=NAME: stop after that pass; NULL: run all */
  FILE *log;                         /* progress (verbose), or NULL */
} pass_pipeline_opts;
/* Runs the graph passes in order: precision, then split (inference) or autodiff, optimizer,
 * split, recompute and the 16-bit stash (training).  *stopped is set when o->stop_after
 * ended it early.  Returns 0 or -1 with d filled. */
int pass_pipeline(ir_graph *g, const pass_pipeline_opts *o, int *stopped, ir_diag *d);
/* 0 when name (NULL: none) names a pass that runs for this mode, else -1 with d filled. */
int pass_pipeline_check_stop(const char *name, int training, ir_diag *d);

#endif
