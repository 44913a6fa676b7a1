/* gen_train.c — code generators of the training ops (backward and optimizer rows of
 * ir/ops.def).  Compiled training is the next step of issue 5: until then each generator
 * reports, through the usual diagnostic, that the op runs in the reference interpreter only
 * (tests/tools/train_interp.c; docs/training.md lists what the kernels need). */
#include "codegen/cg_internal.h"

static LLVMValueRef unsupported(cg_ctx *c, const ir_node *n, const char **kind) {
  *kind = ir_ops[n->op].name;
  return cg_fail(c, n, "%s (training) is not supported by codegen yet; it runs in the reference interpreter only",
                 ir_ops[n->op].name);
}

#define TRAIN_GEN(op)                                                                              \
  LLVMValueRef cg_gen_##op(cg_ctx *c, const ir_node *n, const char *fn_name, const char **kind) { \
    (void)fn_name;                                                                                 \
    return unsupported(c, n, kind);                                                                \
  }

TRAIN_GEN(conv2d_grad_input)
TRAIN_GEN(conv2d_grad_weight)
TRAIN_GEN(reduce_sum)
TRAIN_GEN(relu_grad)
TRAIN_GEN(sigmoid_grad)
TRAIN_GEN(swish_grad)
TRAIN_GEN(maxpool_grad)
TRAIN_GEN(avgpool_grad)
TRAIN_GEN(global_avgpool_grad)
TRAIN_GEN(batchnorm_grad_input)
TRAIN_GEN(batchnorm_grad_gamma)
TRAIN_GEN(groupnorm_grad_input)
TRAIN_GEN(groupnorm_grad_gamma)
TRAIN_GEN(dense_grad_input)
TRAIN_GEN(dense_grad_weight)
TRAIN_GEN(softmax_grad)
TRAIN_GEN(softmax_xent_grad)
TRAIN_GEN(sgd_update)
TRAIN_GEN(momentum_acc)
TRAIN_GEN(momentum_update)
TRAIN_GEN(rmsprop_acc)
TRAIN_GEN(rmsprop_update)
TRAIN_GEN(adam_moment1)
TRAIN_GEN(adam_moment2)
TRAIN_GEN(adam_update)
TRAIN_GEN(step_count)
