#!/bin/bash
# test_cnnrun_validate_pad.sh BUILD SRC — cnnrun's validation covers every test sample: the
# last partial micro-batch is padded and only its real samples are counted
# (tools/cnnrun_train.inc, evaluate_dataset).  fmnist_cnn is trained for 100 steps at batch 64
# (a checkpoint), then `cnnrun validate` evaluates that checkpoint with the model compiled at
# batch 8 (10000 = 1250 whole batches: no padding), 64 (156 x 64 + 16) and 48 (208 x 48 + 16):
# the same weights on the same 10000 images, so equal accuracy and loss within 1e-5 relative.
# Skipped (exit 77, ctest SKIP_RETURN_CODE) when Fashion-MNIST is not installed.
# CNNC_TEST_QUICK=1 (quick mode, lib.sh quick): 10 training steps and the first 1000
# test images (125 x 8, 15 x 64 + 40, 20 x 48 + 40: a padded last batch at 64 and 48 still).
set -uo pipefail
B=$1 S=$2
. "$S/tests/scripts/lib.sh"
need_fmnist train
need_fmnist t10k
N=10000 STEPS=100 VLIMIT=()
if quick; then N=1000 STEPS=10 VLIMIT=(--limit 1000); fi

compile() { "$B/cnnc" "$S/models/fmnist_cnn.yml" --mode training --optimizer momentum --batch-size "$1" -o "$T/f$1.so"; }
# validation BATCH -> "loss accuracy samples" of the checkpoint's JSON line
validation() {
  "$B/cnnrun" "$T/f$1.so" validate --dataset fashion-mnist --data-dir "$DATA" "${VLIMIT[@]}" --checkpoint "$T/ck" --json >"$T/log$1" 2>&1 || return 1
  grep '"checkpoint"' "$T/log$1" | sed -E 's/.*"samples": ([0-9]+), "loss": ([0-9.e+-]+), "accuracy": ([0-9.e+-]+).*/\2 \3 \1/'
}

for b in 8 64 48; do compile $b || { bad "cnnc batch $b"; finish; exit; }; done
"$B/cnnrun" "$T/f64.so" train --dataset fashion-mnist --data-dir "$DATA" --epochs 1 --lr 0.05 --limit $((STEPS * 64)) --logs-per-epoch 1 \
  --checkpoint-dir "$T/ck" >"$T/train" 2>&1 || { bad "train: $(tail -3 "$T/train")"; finish; exit; }
ref=$(validation 8) || { bad "batch 8: $(tail -3 "$T/log8" 2>/dev/null)"; finish; exit; }
for b in 64 48; do
  got=$(validation $b) || { bad "batch $b: $(tail -3 "$T/log$b" 2>/dev/null)"; continue; }
  echo "batch 8: $ref; batch $b: $got"
  if awk -v r="$ref" -v g="$got" -v n="$N" 'BEGIN { split(r, x, " "); split(g, y, " ");
        d = x[1] - y[1]; if (d < 0) d = -d;
        exit !(x[2] == y[2] && x[3] == n && y[3] == n && d <= 1e-5 * x[1] + 2e-6) }'; then
    ok
  else
    bad "batch $b validation ($got) differs from batch 8 ($ref)"
  fi
done
finish
