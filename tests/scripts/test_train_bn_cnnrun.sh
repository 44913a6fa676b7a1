#!/bin/bash
# test_train_bn_cnnrun.sh BUILD SRC — compiled training of a batch-norm / group-norm model end to
# end (issue 5, docs/training.md "Compiled normalisation layers"): a small residual CNN for
# Fashion-MNIST (conv-BN-relu, a residual block with a 1x1 projection + BN, a group-norm conv
# with swish, global average pool, dense) compiled with --mode training --optimizer adam
# (batch 32) trains for 1 epoch on the first 3200 samples with cnnrun train: the loss must fall
# (last log < first log - 0.2) and the validation accuracy over the test split (the eval
# program: batchnorm with running statistics) must be well above chance (> 0.4; chance 0.1).
# Skipped (exit 77, ctest SKIP_RETURN_CODE) when the dataset is not installed.
set -euo pipefail
B=$1 S=$2
. "$S/tests/scripts/lib.sh"
need_fmnist train
need_fmnist t10k
cat > "$T/bn.yml" <<'YML'
name: fmnist_bn_resnet
input: {shape: [1, 28, 28], dtype: u8, mean: [0.2860], std: [0.3530], classes: 10}
layers:
  - {name: conv1, op: conv, filters: 16, kernel: 3, padding: 1, bias: false}
  - {name: bn1, op: batchnorm}
  - {name: relu1, op: relu}
  - {name: pool1, op: maxpool, kernel: 2}
  - {name: b/conv1, op: conv, filters: 32, kernel: 3, stride: 2, padding: 1, bias: false}
  - {name: b/bn1, op: batchnorm}
  - {name: b/relu1, op: relu}
  - {name: b/conv2, op: conv, filters: 32, kernel: 3, padding: 1, bias: false}
  - {name: b/bn2, op: batchnorm}
  - {name: b/down, op: conv, filters: 32, kernel: 1, stride: 2, bias: false, inputs: [pool1]}
  - {name: b/down_bn, op: batchnorm}
  - {name: b/add, op: add, inputs: [b/bn2, b/down_bn]}
  - {name: b/relu, op: relu}
  - {name: conv3, op: conv, filters: 32, kernel: 3, padding: 1}
  - {name: gn3, op: groupnorm, groups: 4}
  - {name: act3, op: swish}
  - {name: gap, op: global_avgpool}
  - {name: flat, op: flatten}
  - {name: fc, op: dense, units: 10}
YML
"$B/cnnc" "$T/bn.yml" --mode training --optimizer adam --batch-size 32 -o "$T/bn.so"
"$B/cnnrun" "$T/bn.so" train --dataset fashion-mnist --data-dir "$DATA" --epochs 1 --lr 0.002 --limit 3200 \
  --logs-per-epoch 5 2>&1 | tee "$T/log"
loss_falls "$T/log" 0.4
