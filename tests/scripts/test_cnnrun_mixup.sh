#!/bin/bash
# test_cnnrun_mixup.sh BUILD SRC — `cnnrun train --mixup A --cutmix A` (docs/cli.md, issue 23)
# on the synthetic dataset with a small model compiled with --mixed-labels: two runs with the
# same seed end in the same checkpoint bytes, also with other call sizes (--logs-per-epoch 4)
# and across a --restore at the end of epoch 1; another seed, mixup alone, cutmix alone and no
# mixing each give other bytes; validation still runs (plain labels).  Errors: a negative or
# non-numeric alpha (exit 2), a model compiled without --mixed-labels (exit 1), cnnc
# --mixed-labels without --mode training.
set -uo pipefail
. "$(dirname "$0")/lib.sh"
script_args "$@"
cat >"$T/m.yml" <<'YML'
name: mix_small
input: {shape: [1, 28, 28], dtype: u8, mean: [0.3], std: [0.4], classes: 10}
layers:
  - {name: c1, op: conv, filters: 4, kernel: 3, stride: 2, padding: 1}
  - {name: r1, op: relu}
  - {name: f, op: flatten}
  - {name: d, op: dense, units: 10}
YML
run_ok "compile --mixed-labels" "$CNNC" "$T/m.yml" --mode training --mixed-labels --batch-size 16 -o "$T/mix.so"
run_ok "compile plain" "$CNNC" "$T/m.yml" --mode training --batch-size 16 -o "$T/plain.so"
train() { # train SO DIR ARGS...: 2 epochs of the synthetic data, checkpoints in $T/DIR
  local so=$1 dir=$2
  shift 2
  "$CNNRUN" "$T/$so" train --dataset synthetic --epochs 2 --lr 0.05 --checkpoint-dir "$T/$dir" "$@" >"$T/$dir.log" 2>&1 ||
    bad "train $so $dir $*: $(head -c 600 "$T/$dir.log")"
}
FINAL=ckpt-step-00000128.safetensors # 1024 samples / 16 = 64 steps per epoch
train mix.so a --mixup 0.4 --cutmix 1.0 --seed 5
train mix.so b --mixup 0.4 --cutmix 1.0 --seed 5 --logs-per-epoch 4
train mix.so r1 --mixup 0.4 --cutmix 1.0 --seed 5 --epochs 1 --no-validation
train mix.so r2 --mixup 0.4 --cutmix 1.0 --seed 5 --restore "$T/r1/ckpt-step-00000064.safetensors"
train mix.so c --mixup 0.4 --cutmix 1.0 --seed 6
train mix.so mu --mixup 0.4 --seed 5
train mix.so cu --cutmix 1.0 --seed 5
train mix.so none --seed 5
train plain.so plain --seed 5
same_bytes "$T/a/$FINAL" "$T/b/$FINAL" "same seed, other call sizes: different checkpoints"
same_bytes "$T/a/$FINAL" "$T/r2/$FINAL" "a --restore at epoch 1 does not continue the same mixed batches"
differ "$T/a/$FINAL" "$T/c/$FINAL" "another seed gives the same checkpoint"
differ "$T/a/$FINAL" "$T/mu/$FINAL" "mixup alone gives the checkpoint of mixup + cutmix"
differ "$T/a/$FINAL" "$T/cu/$FINAL" "cutmix alone gives the checkpoint of mixup + cutmix"
differ "$T/mu/$FINAL" "$T/none/$FINAL" "--mixup changes nothing"
# without mixing, a --mixed-labels model trains as the plain one: (y, y, 1) rows give the same loss
same_bytes "$T/none/$FINAL" "$T/plain/$FINAL" "no mixing: a --mixed-labels model differs from the plain one"
if grep -qE '^validation: loss [0-9.]+  accuracy [01]\.[0-9]+' "$T/a.log"; then ok; else bad "no validation line: $(tail -3 "$T/a.log")"; fi
expect 2 "--mixup: .*(>= 0|at least 0)" -- "$T/mix.so" train --dataset synthetic --mixup -0.5
expect 2 "--cutmix" -- "$T/mix.so" train --dataset synthetic --cutmix abc
expect 2 "--mixup: .* over 1e6" -- "$T/mix.so" train --dataset synthetic --mixup 1e7
expect 1 "compiled without --mixed-labels" -- "$T/plain.so" train --dataset synthetic --mixup 0.2
"$CNNC" "$T/m.yml" --mixed-labels -o "$T/inf.so" >"$T/cnnc.out" 2>&1
st=$?
if [ "$st" != 0 ] && grep -q "needs --mode training" "$T/cnnc.out" && [ ! -e "$T/inf.so" ]; then ok; else bad "cnnc --mixed-labels for inference: exit $st: $(cat "$T/cnnc.out")"; fi
finish
