/* passes.h — graph passes used by the back end, one file and one entry point each:
 * split.c (pipeline stages), fuse.c (conv epilogue fusion incl. BN folding), plan_memory.c
 * (scratch offsets from usage records).  Prefix: pass_. */
#ifndef CNNC_PASSES_H
#define CNNC_PASSES_H

#include "ir/ir.h"

/* ---- split.c ------------------------------------------------------------------------- */
/* Assigns node->shard and g->n_shards.  With n_splits > 0, each split NAME starts a new
 * stage at the first node whose name equals NAME or starts with "NAME/" (a layer or a block
 * instance such as "layer2/3"); splits must name strictly increasing positions.  With
 * n_shards > 1, splits the node list contiguously so that the largest stage cost
 * (ir_node_cost flops) is minimal.  Neither: one shard.  Returns 0 or -1 with d filled (an
 * unknown name gets the closest existing layer or block by edit distance). */
int pass_split(ir_graph *g, const char *const *splits, int n_splits, int n_shards, ir_diag *d);

/* Levenshtein distance of a and b (exposed for tests). */
int pass_edit_distance(const char *a, const char *b);

/* ---- fuse.c -------------------------------------------------------------------------- */
#define PASS_MAX_POST 4
/* One row per node.  A fused group is an anchor (conv2d) followed by a chain of nodes each
 * consuming only the previous one's single-use result, in the same shard: an optional
 * inference batchnorm (folded into the conv's weights and bias at compile time), then up to
 * PASS_MAX_POST epilogue ops (relu, sigmoid, swish, add of a same-shape activation).  The
 * group's kernel runs at the position of its last member and writes that member's output. */
typedef struct pass_fusion {
  int anchor;   /* node whose kernel computes this node (itself when not fused) */
  int last;     /* anchors: last member of the group (itself when alone) */
  int bn;       /* anchors: folded batchnorm node, or -1 */
  int n_post;   /* anchors: epilogue nodes after the batchnorm, in order */
  int post[PASS_MAX_POST];
} pass_fusion;

/* Fills plan[0..g->n_nodes-1].  enable = 0 gives the identity plan (every node alone). */
void pass_fuse(const ir_graph *g, int enable, pass_fusion *plan);

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

#endif
