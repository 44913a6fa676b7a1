#!/usr/bin/env bash
# test_cnnrun_train.sh BUILD SRC — cnnrun train / validate on the hand-written training models
# (tests/tools/libfake_train*.c, softmax regression): Fashion-MNIST from Debian's
# dataset-fashion-mnist (a --limit subset) reaches well above chance, checkpoints are written
# at every log and `validate --checkpoint DIR` lists them by step; --restore continues from a
# checkpoint; --logs-per-epoch rounding and its errors; usage and model errors with their exit
# statuses (1 error, 2 usage).  Ends with "N passed, M failed".
set -u
. "$(dirname "$0")/lib.sh"
script_args "$@"
FT="$BUILD/tests/libfake_train.so"
FT2="$BUILD/tests/libfake_train2.so"

# accuracy_above MIN FILE: the validation accuracy printed in FILE is > MIN.
accuracy_above() {
  local acc
  acc=$(sed -n 's/^validation: .*accuracy \([0-9.]*\).*/\1/p' "$2" | tail -1)
  if [ -n "$acc" ] && python3 -c "import sys; sys.exit(0 if float('$acc') > $1 else 1)"; then ok; else bad "validation accuracy '$acc' not > $1: $(tail -3 "$2")"; fi
}

[ -x "$CNNRUN" ] || { echo "FAIL: no $CNNRUN"; echo "0 passed, 1 failed"; exit 1; }

# ---- usage and errors ------------------------------------------------------------------------
expect 0 "--logs-per-epoch X" -- "$FT" train --help
expect 0 "--checkpoint FILE\|DIR" -- "$FT" validate --help
expect 2 "--checkpoint FILE\|DIR is required" -- "$FT" validate
expect 2 "--epochs: must be an integer in 1..1048576 \\(got '0'\\)" -- "$FT" train --epochs 0
expect 2 "unknown learning-rate schedule 'linear'" -- "$FT" train --dataset synthetic --lr-schedule linear
expect 2 "--logs-per-epoch: '1/0' is not" -- "$FT" train --dataset synthetic --logs-per-epoch 1/0
expect 2 "step needs --lr-decay-epochs" -- "$FT" train --dataset synthetic --lr-schedule step
expect 1 "It is not possible to log 2.0 epochs a time for 5 epochs" -- "$FT" train --dataset synthetic --epochs 5 --logs-per-epoch 1/2
expect 1 "an inference model; compile with --mode training" -- "$BUILD/tests/libfake_model.so" train --dataset synthetic
expect 1 "unknown dataset 'imagenet'" -- "$FT" train --dataset imagenet --data-dir "$T"
expect 1 "$T/train-images-idx3-ubyte: cannot open" -- "$FT" train --dataset mnist --data-dir "$T"
printf '\0\0\x08\x03\0\0\0\x05\0\0\0\x1c\0\0\0\x1c' >"$T/train-images-idx3-ubyte"
expect 1 "train-images-idx3-ubyte: truncated: the header promises 3920 bytes" -- "$FT" train --dataset mnist --data-dir "$T"
mkdir -p "$T/c" && head -c 3073 /dev/zero >"$T/c/test_batch.bin"
for b in 1 2 3 4 5; do head -c 3073 /dev/zero >"$T/c/data_batch_$b.bin"; done
expect 1 "cifar10 samples are 3x32x32, the model input 'images' takes 784 values" -- "$FT" train --dataset cifar10 --data-dir "$T/c"

# ---- synthetic: log rounding, schedules, 2 shards with accumulation -------------------------
expect 0 "rounded to 4 \(a log every 16 steps\)" -- "$FT" train --dataset synthetic --logs-per-epoch 3
expect 0 "validation: loss [0-9.]+  accuracy (0\.9|1\.0)" -- "$FT2" train --dataset synthetic --epochs 2 --lr-schedule cosine --warmup-epochs 0.5
expect 0 "\"event\": \"log\", \"epoch\": 2.0000, \"step\": 128" -- "$FT" train --dataset synthetic --epochs 4 --logs-per-epoch 1/2 --json
expect 0 "lr 0.005" -- "$FT" train --dataset synthetic --epochs 3 --lr 0.5 --lr-schedule step --lr-decay-epochs 1,2 --lr-factor 0.1
# --validate-every / --no-validation (issue 23): validations after epochs 1 and 2 and the final
# one; top-1, top-5; JSON events marked final or not
expect 2 "--no-validation and --validate-every exclude each other" -- "$FT" train --dataset synthetic --no-validation --validate-every 1
expect 2 "--validate-every: must be an integer in 1..1048576 \\(got '0'\\)" -- "$FT" train --dataset synthetic --validate-every 0
expect 2 "--no-validation takes no value" -- "$FT" train --dataset synthetic --no-validation=1
expect 0 "validation at epoch 2.00 \(step 128\): loss [0-9.]+  accuracy [0-9.]+  top-5 [0-9.]+  \(256 test images" -- \
  "$FT" train --dataset synthetic --epochs 3 --validate-every 1
[ "$(grep -c '^validation' "$T/out")" = 3 ] && grep -qE '^validation: loss [0-9.]+  accuracy [0-9.]+  top-5 ' "$T/out" && ok ||
  bad "--validate-every 1 over 3 epochs: $(grep ^validation "$T/out")"
expect 0 '"event": "validation", "step": 128, .*"top5_accuracy": [0-9.]+, .*"final": false' -- "$FT" train --dataset synthetic --epochs 3 --validate-every 2 --json
[ "$(grep -c '"event": "validation"' "$T/out")" = 2 ] && grep -q '"step": 192, .*"final": true' "$T/out" && ok ||
  bad "--validate-every 2 over 3 epochs: $(grep validation "$T/out")"
expect 0 "no validation \(--no-validation\)" -- "$FT" train --dataset synthetic --no-validation
grep -q "^validation" "$T/out" && bad "--no-validation validated" || ok
# --restore at or past --epochs: exit 1 and say so (not 0 steps in silence)
expect 0 "checkpoint" -- "$FT" train --dataset synthetic --epochs 2 --checkpoint-dir "$T/rk"
expect 1 "--restore $T/rk/ckpt-step-00000128.safetensors is at step 128 \(epoch 2.00 at 64 steps per epoch\): --epochs 2 ends at step 128, so there is nothing left to train; .*give --epochs 3 or more" -- \
  "$FT" train --dataset synthetic --epochs 2 --restore "$T/rk/ckpt-step-00000128.safetensors"
expect 1 "is at step 128 .*--epochs 1 ends at step 64" -- "$FT" train --dataset synthetic --epochs 1 --restore "$T/rk/ckpt-step-00000128.safetensors"
expect 0 "epoch 3.00 \(step 192/192\)" -- "$FT" train --dataset synthetic --epochs 3 --restore "$T/rk/ckpt-step-00000128.safetensors"
# --lr-per-256: fake_train2 takes 16 x 2 = 32 samples per update, so 0.4 per 256 is --lr 0.05
expect 2 "--lr and --lr-per-256 exclude each other" -- "$FT2" train --dataset synthetic --lr 0.1 --lr-per-256 0.4
expect 0 "^lr 0.05 = --lr-per-256 0.4 x 32 samples per update / 256" -- "$FT2" train --dataset synthetic --lr-per-256 0.4
a=$("$CNNRUN" "$FT2" train --dataset synthetic --lr-per-256 0.4 --json 2>&1 | grep '"log"' | sed 's/, "images_per_second.*//')
b=$("$CNNRUN" "$FT2" train --dataset synthetic --lr 0.05 --json 2>&1 | grep '"log"' | sed 's/, "images_per_second.*//')
[ -n "$a" ] && [ "$a" = "$b" ] && ok || bad "--lr-per-256 0.4 '$a' vs --lr 0.05 '$b'"
# fewer than 5 classes: no top-5 (every sample would be a hit): null in JSON, absent in text
printf 'name: three\ninput: {shape: [1, 8, 8], classes: 3}\nlayers:\n  - {name: flatten, op: flatten}\n  - {name: fc, op: dense, units: 3}\n' >"$T/three.yml"
cnnc_as three "$T/three.yml" --mode training --optimizer sgd --batch-size 8 -o "$T/three.so" &&
  expect 0 '"event": "validation", .*"accuracy": [0-9.]+, "top5_accuracy": null' -- "$T/three.so" train --dataset synthetic --json &&
  expect 0 "^validation: loss [0-9.]+  accuracy [0-9.]+  \(256 test images" -- "$T/three.so" train --dataset synthetic

# synthetic data takes a compiled model's own input shape (3x32x32) and class count (10)
cnnc_as r8 "$SRC/models/cifar_resnet8.yml" --mode training --optimizer momentum --batch-size 8 -o "$T/r8.so" &&
  expect 0 "training cifar_resnet8 on synthetic: 128 samples" -- "$T/r8.so" train --dataset synthetic --limit 128 --epochs 1

# ---- Fashion-MNIST (Debian dataset-fashion-mnist) ------------------------------------------
if have_fmnist train && have_fmnist t10k; then
  "$CNNRUN" "$FT" train --dataset fashion-mnist --data-dir "$DATA" --epochs 1 --limit 8000 --lr 0.01 --logs-per-epoch 4 \
    --checkpoint-dir "$T/ck" >"$T/fm" 2>&1
  rc=$?
  if [ $rc = 0 ]; then ok; else bad "fashion-mnist train exit $rc: $(tail -5 "$T/fm")"; fi
  grep -qE '^epoch 1.00 \(step 500/500\): loss [0-9.]+  accuracy 0\.[6-9]' "$T/fm" && ok || bad "per-log line: $(grep ^epoch "$T/fm")"
  accuracy_above 0.70 "$T/fm"
  n=$(ls "$T/ck"/ckpt-step-*.safetensors 2>/dev/null | wc -l)
  [ "$n" = 4 ] && ok || bad "$n checkpoints in $T/ck, want 4"
  ls "$T/ck" | grep -q tmp && bad "temporary checkpoint files left" || ok
  expect 0 "ckpt-step-00000125.safetensors: step 125 .*accuracy 0\.[6-9]" -- "$FT" validate --data-dir "$DATA" --checkpoint "$T/ck"
  # sorted by step: 125, 250, 375, 500
  steps=$(grep -oE 'step [0-9]+ ' "$T/out" | tr -d 'step ' | tr '\n' ,)
  [ "$steps" = "125,250,375,500," ] && ok || bad "validate order: $steps"
  expect 0 "ckpt-step-00000500.safetensors: step 500" -- "$FT" validate --data-dir "$DATA" --checkpoint "$T/ck/ckpt-step-00000500.safetensors"
  expect 0 "\(restored\)" -- "$FT" train --dataset fashion-mnist --data-dir "$DATA" --epochs 1 --limit 8000 --restore "$T/ck/ckpt-step-00000250.safetensors" \
    --lr 0.01 --logs-per-epoch 4 --checkpoint-dir "$T/ck2"
  grep -q "step 250/500" "$T/out" && bad "restored run logged step 250 again" || ok
  # mid-epoch: the rest of the epoch in the same shuffled order, so the same end as the run without a stop
  cmp -s "$T/ck/ckpt-step-00000500.safetensors" "$T/ck2/ckpt-step-00000500.safetensors" && ok ||
    bad "--restore at step 250 of 500 (mid-epoch) ends in another checkpoint than the uninterrupted run"
  expect 1 "is not in the state of model fake_train2" -- "$FT2" validate --data-dir "$DATA" --checkpoint "$T/ck"
else
  skip_part "no Fashion-MNIST in $DATA (Debian dataset-fashion-mnist): its training, checkpoint and validate checks did not run"
fi

finish
