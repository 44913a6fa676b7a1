#!/usr/bin/env bash
# test_train_pipeline_cli.sh BUILD SRC — the training options end to end through cnnc and
# cnnrun (docs/training.md "Accumulation, replicas, pipelining, recomputation"): option
# errors and their exit statuses; `cnnrun info` shows replicas, accumulation, schedule,
# recomputation and the planned bytes; `cnnrun train --dataset synthetic` of a small model
# compiled with 2 replicas x 2 accumulated micro-batches on 1 shard, and with the same on
# 2 shards, interleaved, --recompute pipeline, replicas in parallel, writes byte-identical
# checkpoints (weights + momentum), as does the 1-shard model with --hugepages off --spin-us 0;
# a different lr does not.  The runtime options (--replica-mode, --hugepages, --spin-us) show
# in `info --json` ("runtime"), and bad values exit 2 naming the option.  Ends with
# "N passed, M failed".
set -u
. "$(dirname "$0")/lib.sh"
script_args "$@"

cat > "$T/m.yml" <<'YML'
name: tiny_train
input: {shape: [1, 28, 28], dtype: u8, mean: [0.0], std: [1.0], classes: 10}
layers:
  - {name: c1, op: conv, filters: 4, kernel: 3, padding: 1}
  - {name: r1, op: relu}
  - {name: p1, op: maxpool, kernel: 2}
  - {name: c2, op: conv, filters: 6, kernel: 3, padding: 1}
  - {name: r2, op: relu}
  - {name: f, op: flatten}
  - {name: d, op: dense, units: 10}
YML

# cnnc_expect STATUS PATTERN ARGS...: cnnc exits with STATUS, its stderr matches PATTERN.
cnnc_expect() {
  local want=$1 pat=$2
  shift 2
  "$CNNC" "$T/m.yml" "$@" -o "$T/x.so" >"$T/out" 2>&1
  local got=$?
  if [ "$got" != "$want" ]; then bad "cnnc $* -> exit $got, want $want: $(head -c 400 "$T/out")"
  elif ! grep -qE -- "$pat" "$T/out"; then bad "cnnc $* -> output lacks /$pat/: $(head -c 400 "$T/out")"
  else ok; fi
}
cnnc_expect 2 "--replicas must be an integer in 1..4096" --mode training --replicas 0
cnnc_expect 2 "--gradient-accumulation must be an integer in 1..1048576" --mode training --gradient-accumulation 0
cnnc_expect 2 "--pipeline-schedule must be one of sequential\|grouped\|interleaved" --mode training --pipeline-schedule 1f1b
cnnc_expect 2 "--recompute must be one of" --mode training --recompute some
cnnc_expect 1 "need --mode training" --gradient-accumulation 2
cnnc_expect 1 "need --mode training" --recompute pipeline
cnnc_expect 1 "pipeline split 'c3' is not a layer of the model \(did you mean 'c1'\?\)" --mode training --pipeline-splits c3
cnnc_expect 1 "--shards 40: the model has only" --mode training --shards 40

common=(--mode training --optimizer momentum --batch-size 8 --gradient-accumulation 2 --replicas 2)
cnnc_as a "$T/m.yml" "${common[@]}" -o "$T/a.so" &&
  cnnc_as b "$T/m.yml" "${common[@]}" --shards 2 --pipeline-schedule interleaved --recompute pipeline -o "$T/b.so" && ok
expect 0 "training +2 replicas x 2 micro-batches per update, schedule interleaved, recompute pipeline" -- "$T/b.so" info
expect 0 "micro_batch 8 stages, train tensors [0-9]+ bytes per micro-batch x 4 in flight" -- "$T/b.so" info
expect 0 "shards +2" -- "$T/b.so" info

train() { # SO DIR LR [CNNRUN OPTION...]
  train_synth "$1" "$2" --lr "$3" --limit 512 --logs-per-epoch 1 "${@:4}"
  [ -e "$2"/ckpt-step-00000016.safetensors ] && ok || bad "no checkpoint after 16 updates in $2"
}
# runtime options: what info --json says the model runs with; bad values
runtime_of() { # SO [CNNRUN OPTION...] -> the "runtime" object of info --json, as key=value words
  local so=$1
  shift
  "$CNNRUN" "$so" info --json "$@" | python3 -c 'import json, sys; print(" ".join(f"{k}={v}" for k, v in json.load(sys.stdin)["runtime"].items()))'
}
r=$(runtime_of "$T/b.so")
case "$r" in *"spin_us=2000 hugepages=inference replica_mode=shared"*) ok ;; *) bad "default runtime options: $r" ;; esac
r=$(runtime_of "$T/b.so" --replica-mode parallel --hugepages off --spin-us 0)
case "$r" in *"spin_us=0 hugepages=off replica_mode=parallel"*) ok ;; *) bad "runtime options not taken: $r" ;; esac
r=$(runtime_of "$T/b.so" --replica-mode=parallel --hugepages=all --spin-us=10000000)
case "$r" in *"spin_us=10000000 hugepages=all replica_mode=parallel"*) ok ;; *) bad "runtime options (--opt=value): $r" ;; esac
expect 2 "--replica-mode: 'serial' is not shared or parallel" -- "$T/b.so" train --replica-mode serial
expect 2 "--hugepages: 'on' is not inference, off or all" -- "$T/b.so" benchmark --hugepages on
expect 2 "--spin-us: must be an integer in 0..10000000 \\(got '-1'\\)" -- "$T/b.so" validate --checkpoint x --spin-us -1
expect 2 "--spin-us: must be an integer in 0..10000000 \\(got '10000001'\\)" -- "$T/b.so" info --spin-us 10000001
expect 2 "--spin-us: must be an integer in 0..10000000 \\(got '2ms'\\)" -- "$T/b.so" infer --input x --top 1 --spin-us 2ms
expect 2 "train: --hugepages needs a value" -- "$T/b.so" train --hugepages

train "$T/a.so" "$T/ca" 0.01
train "$T/b.so" "$T/cb" 0.01 --replica-mode parallel
train "$T/a.so" "$T/cd" 0.01 --hugepages off --spin-us 0
train "$T/a.so" "$T/cc" 0.02
ck=ckpt-step-00000016.safetensors
same_bytes "$T/ca/$ck" "$T/cb/$ck" "1 shard sequential and 2 shards interleaved + recompute + parallel replicas differ"
same_bytes "$T/ca/$ck" "$T/cd/$ck" "--hugepages off --spin-us 0 changed the checkpoint"
differ "$T/ca/$ck" "$T/cc/$ck" "lr 0.01 and lr 0.02 gave identical checkpoints (the comparison cannot fail)"
finish
