/* grad_train.h — interpreter-level training step (issue 5, docs/training.md): runs a graph
 * that passes/autodiff.c and passes/optimizer.c have extended, feeding the learning rate, and
 * writes every optimizer result back into the parameter it replaces.  Prefix: ir_. */
#ifndef CNNC_GRAD_TRAIN_H
#define CNNC_GRAD_TRAIN_H

#include "ir.h"

/* Name of the runtime scalar input holding the learning rate ([1] f32, kind INPUT). */
#define IR_LR_INPUT_NAME "lr"

/* Runs g once through the reference kernels like ir_interp (x: images, labels: class ids),
 * with the INPUT value named "lr" (if any) bound to {lr}, then applies the step
 * (ir_train_apply).  Returns the value buffers like ir_interp (caller frees with
 * ir_interp_free): gradients are read by name, e.g. vals[ir_find_value(g, "grad/conv1/weight")].
 * Side effects on g: running statistics (training batchnorm) and every optimizer target. */
float **ir_train_step(ir_graph *g, const float *x, const float *labels, float lr);

/* Copies the result of every optimizer node (attr .target >= 0) into the data of its target
 * param (weights, momentum buffers, step counters).  All results were computed from the old
 * values, so the order of the copies does not matter.  Returns the number of params written. */
int ir_train_apply(ir_graph *g, float **vals);

/* Nonzero for the optimizer ops (sgd_update ... step_count): ops whose attr is ir_optim_attr. */
int ir_op_is_optimizer(ir_op op);

#endif
