/* cg_layout.h — codegen-private: the compiled model's plan before any LLVM IR exists:
 * kernels (fused groups) in execution order per shard, the boundary tensor table, each
 * shard's io list and scratch offsets (cg_layout.c). */
#ifndef CNNC_CG_LAYOUT_H
#define CNNC_CG_LAYOUT_H

#include "codegen/cg_internal.h"

#define CG_MAX_ACT (IR_MAX_IN + PASS_MAX_POST)

typedef struct cg_kernel {
  int anchor, last;            /* node ids: the generator's node, the group's last member */
  int shard, step;             /* shard and position in the shard's op list */
  int n_act, act[CG_MAX_ACT];  /* activation operand value ids, kernel argument order */
  int out;                     /* value id written */
  double flops;
  int unit;                    /* compile unit (module) holding the kernel */
  char name[256], kind[192];   /* symbol and descriptive kind, filled by codegen */
} cg_kernel;

typedef struct cg_shard_plan {
  int first_k, n_k;            /* kernels [first_k, first_k + n_k) */
  int n_io, n_inputs, *io;     /* tensor indices: inputs first */
  int64_t scratch_bytes;
  pass_usage *usage;           /* the planner's records (kept for compile reports) */
  int *usage_vid, n_usage;     /* value id of each record */
} cg_shard_plan;

typedef struct cg_layout {
  const ir_graph *g;
  pass_fusion *plan;           /* n_nodes rows */
  cg_kernel *k;
  int n_k;
  int *tensor_vid, n_tensors;  /* boundary tensors: input, outputs, cross-shard acts */
  int *vid_tensor;             /* per value: tensor index or -1 */
  int64_t *scratch_off;        /* per value: offset in its shard's scratch or -1 */
  cg_shard_plan *sh;
  int n_shards;
  /* training (graph with optimizer nodes): params are kernel operands living in the state
   * buffer; an optimizer node's result is written into its target param's slice. */
  int train;
  int64_t *state_off;          /* per value: offset in the state buffer or -1 (params) */
  int *state_alias;            /* per value: the param whose slice holds it (itself for params), or -1 */
  int64_t state_bytes;
  int loss_vid, logits_vid, label_vid; /* the softmax_xent node's result and operands (-1: none) */
} cg_layout;

/* Builds the layout of g (shards assigned).  fuse enables epilogue fusion.  Returns 0 or -1
 * with d filled (unsupported dtype use, labels in inference).  Free with cg_layout_free. */
int cg_layout_build(cg_layout *L, const ir_graph *g, int fuse, ir_diag *d);
void cg_layout_free(cg_layout *L);
/* Index of tensor t in shard s's io list, or -1. */
int cg_layout_io_slot(const cg_layout *L, int s, int tensor);

#endif
