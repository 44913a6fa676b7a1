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
  int out2;                    /* a second value written (also the last act; fuse.c's pool), 0: none */
  int out3;                    /* training: a third value written (the act after out2; pass_fuse_train), 0: none */
  double flops;
  int inplace;                 /* an in-place concat (cg_concat_inplace): no code, no call */
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
  cg_kplan *kplan;             /* n_nodes rows: the kernel plan (cg_select; cg_compile makes it) */
  cg_kernel *k;
  int n_k;
  int *tensor_vid, n_tensors;  /* boundary tensors: input, outputs, cross-shard acts */
  int *vid_tensor;             /* per value: tensor index or -1 */
  int64_t *scratch_off;        /* per value: offset in its shard's scratch or -1 */
  int *alias_of;               /* per value: the in-place concat result holding it, or -1 */
  int64_t *alias_off;          /* per value: its byte offset in that result */
  cg_shard_plan *sh;
  int n_shards;
  /* training (graph with optimizer nodes): params are kernel operands living in the state
   * buffer; an optimizer node's result is written into its target param's slice. */
  int train;
  int64_t *state_off;          /* per value: offset in the state buffer or -1 (params) */
  int *state_alias;            /* per value: the param whose slice holds it (itself for params), or -1 */
  int64_t state_bytes;
  int loss_vid, logits_vid, label_vid; /* the softmax_xent node's result and operands (-1: none) */
  /* training programs (cg_layout_build_opts with a training graph): sh[0..n_shards) are then
   * the STAGES (kernels sorted by stage; k->shard is the stage index): forward stages of
   * shards 0..S-1, backward stages of shards S-1..0 (empty ones dropped), then one update
   * stage.  Values crossing stages are train tensors (one buffer per in-flight micro-batch). */
  int n_groups;                /* model shards S (thread groups) */
  int *stage_shard, *stage_phase; /* per stage: thread group; PASS_PHASE_FWD/BWD/UPDATE */
  int n_fwd_stages, update_stage; /* update_stage: index or -1 */
  int *val_stage;              /* per value: stage of the kernel writing it, -1 none */
  int grad_accum, replicas, schedule, recompute;
  int accum;                   /* grad_accum * replicas > 1: gradients go to GRAD_ACCUM slices */
  int n_acc, *acc_vid;         /* accumulated values (produced by backward, read by update) */
  int *acc_index;              /* per value: index into acc_vid or -1 */
  int64_t *acc_off;            /* [n_acc * replicas]: state offset of value i's replica r slice */
  int acc16;                   /* accumulator storage: 0 f32, else 1 + ir_half_format (--enable-half-partials:
                                * 16-bit slices; pass_acc_elem_bytes) */
  int64_t acc_stride;          /* bytes from replica r's slice of an accumulator to replica r + 1's */
  int64_t *acc_tmp_off;        /* acc16: [n_acc] update-stage scratch offset of the f32 mean each
                                * update kernel reads (cg_main.c widens into it), else NULL */
  int64_t *stage_io_bytes;     /* per stage: bytes of its io tensors (planning figures) */
} cg_layout;

/* Builds the layout of g (shards assigned).  fuse enables epilogue fusion.  Returns 0 or -1
 * with d filled (unsupported dtype use, labels in inference).  Free with cg_layout_free. */
int cg_layout_build(cg_layout *L, const ir_graph *g, int fuse, ir_diag *d);
/* Same, with the training options of o (grad_accum, replicas, ...; ignored for inference). */
int cg_layout_build_opts(cg_layout *L, const ir_graph *g, int fuse, const cg_options *o, ir_diag *d);
void cg_layout_free(cg_layout *L);
/* Whether concat node i of inference graph g (fusion plan fu) is computed in place
 * (kernels.def "concat inplace", docs/codegen.md "In-place concats"): its inputs are written by
 * their producers into consecutive byte ranges of its result and its kernel does nothing. */
int cg_concat_inplace(const ir_graph *g, const pass_fusion *fu, int i);
/* The channels per image of the in-place concat result that value v is written into when
 * that concat has a batch > 1 (its producer's kernel stores each image at that stride:
 * conv_geom.ocs), else 0. */
int64_t cg_concat_out_channels(const ir_graph *g, const pass_fusion *fu, int v);
/* Index of tensor t in shard s's io list, or -1. */
int cg_layout_io_slot(const cg_layout *L, int s, int tensor);

#endif
