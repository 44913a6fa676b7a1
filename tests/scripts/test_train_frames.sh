#!/usr/bin/env bash
# test_train_frames.sh BUILD SRC — gradient accumulation in constant memory (docs/training.md
# "Accumulation in constant memory"): the runtime's frames (train tensor sets) are bounded by
# the pipeline schedule, not by accumulation x replicas.  cifar_resnet8 batch 16: `cnnrun info`
# plans at most 1.2x the bytes of --gradient-accumulation 1 with 128 (1 replica and 4), shows
# 1 frame in flight for the sequential schedule and 2 x shards for grouped / interleaved; the
# Graphcore ResNet-50 recipe's shape (4 shards, 4 replicas, accumulation 128, micro-batch 16,
# --precision 16.16) plans within 24 GiB on cifar_resnet8 (and, with CNNC_TRAIN_FRAMES_R50=1,
# the "long" test test_train_frames_r50, on ResNet-50 itself); a 128-micro-batch update runs in
# well under the old one-frame-per-micro-batch RSS; the replicas share their backward stages'
# code; and frames reused across the micro-batches
# of an update give byte-identical checkpoints to runs with one frame per micro-batch (4
# shards interleaved, 8 micro-batches per update: 8 frames), with and without replicas.
# Ends with "N passed, M failed".
set -u
. "$(dirname "$0")/lib.sh"
script_args "$@"
M="$SRC/models/cifar_resnet8.yml"
GIB24=$((24 * 1024 * 1024 * 1024))

# planned SO: the planned bytes of the micro_batch program; frames SO: its frames in flight
planned() { "$CNNRUN" "$1" info | sed -n 's/^  micro_batch .*planned \([0-9]*\) bytes.*/\1/p'; }
frames() { "$CNNRUN" "$1" info | sed -n 's/^  micro_batch .* x \([0-9]*\) in flight.*/\1/p'; }
# compile NAME ARGS...: cifar_resnet8 batch 16 for training into $T/NAME.so
compile() {
  local n=$1
  shift
  run_ok "compile $n: $*" "$CNNC" "$M" --mode training --batch-size 16 "$@" -o "$T/$n.so"
}
# ratio_ok A B MAX: planned(A) <= MAX x planned(B)
ratio_ok() {
  local a b
  a=$(planned "$T/$1.so") b=$(planned "$T/$2.so")
  if [ -n "$a" ] && [ -n "$b" ] && python3 -c "import sys; sys.exit(0 if $a <= $3 * $b else 1)"; then
    ok
    echo "  planned $1 $a bytes, $2 $b bytes"
  else
    bad "planned $1 ${a:-?} bytes > $3 x $2 ${b:-?} bytes"
  fi
}
# frames_are SO N
frames_are() {
  local f
  f=$(frames "$T/$1.so")
  if [ "$f" = "$2" ]; then ok; else bad "$1: ${f:-?} frames in flight, want $2"; fi
}
# within_24g SO
within_24g() {
  local p
  p=$(planned "$1")
  if [ -n "$p" ] && [ "$p" -le "$GIB24" ]; then
    ok
    echo "  planned ${1##*/} $p bytes"
  else
    bad "${1##*/}: planned ${p:-?} bytes, more than 24 GiB"
  fi
}

compile ga1
compile ga128 --gradient-accumulation 128
compile r4ga1 --replicas 4
compile r4ga128 --replicas 4 --gradient-accumulation 128
ratio_ok ga128 ga1 1.2
ratio_ok r4ga128 r4ga1 1.2
frames_are ga128 1
frames_are r4ga128 1
expect 0 "x 1 in flight \(sequential schedule's bound, of 512 per update\)" -- "$T/r4ga128.so" info

gc=(--shards 4 --replicas 4 --gradient-accumulation 128 --precision 16.16)
for s in sequential grouped interleaved; do
  compile "gc_$s" "${gc[@]}" --pipeline-schedule "$s"
  within_24g "$T/gc_$s.so"
  ratio_ok "gc_$s" ga1 12
done
frames_are gc_sequential 1
# the 4 replicas' backward stages share one body each (cg_main.c stage_thunk): per replica only
# a thunk, so the main module does not grow with the replica count
python3 - "$T/gc_sequential.so" <<'PY' && ok || bad "gc_sequential: per-replica backward stages are not thunks"
import subprocess, sys
syms = [l.split() for l in subprocess.run(["nm", "-S", sys.argv[1]], capture_output=True, text=True, check=True).stdout.splitlines()]
size = {s[3]: int(s[1], 16) for s in syms if len(s) == 4}
bodies = [n for n in size if n.startswith("cnnc_stage") and n.endswith("_body")]
thunks = {n: size[n] for n in size if n.startswith("cnnc_stage") and n.rsplit("_", 1)[1] in ("r1", "r2", "r3")}
print(f"  {len(bodies)} shared backward bodies, {len(thunks)} thunks of at most {max(thunks.values(), default=0)} bytes")
sys.exit(0 if len(bodies) == 4 and len(thunks) == 12 and max(thunks.values()) <= 64 else 1)
PY
frames_are gc_grouped 8
frames_are gc_interleaved 8
# replicas on their own thread groups (no BUFFER state: a model without batchnorm) have a pool
# of frames each
cat >"$T/nobn.yml" <<'YML'
name: nobn
input: {shape: [3, 32, 32], classes: 10}
layers:
  - {name: c1, op: conv, filters: 8, kernel: 3, padding: 1}
  - {name: r1, op: relu}
  - {name: c2, op: conv, filters: 8, kernel: 3, padding: 1}
  - {name: r2, op: relu}
  - {name: f, op: flatten}
  - {name: d, op: dense, units: 10}
YML
run_ok "compile nobn" "$CNNC" "$T/nobn.yml" --mode training --batch-size 8 --shards 2 --replicas 4 --gradient-accumulation 64 \
  --pipeline-schedule interleaved -o "$T/nobn.so"
expect 0 "x 4 in flight" -- "$T/nobn.so" info --replica-mode shared
expect 0 "x 16 in flight" -- "$T/nobn.so" info --replica-mode parallel

# the RSS of one 512-micro-batch update (the old runtime: 5.3 GB; the benchmark's own input
# buffer of 512 micro-batches is ~100 MB of it now)
python3 - "$CNNRUN" "$T/r4ga128.so" <<'PY' && ok || bad "RSS of a 4 x 128 micro-batch update"
import resource, subprocess, sys
subprocess.run([sys.argv[1], sys.argv[2], "benchmark", "--runs", "1", "--warmup", "0", "--threads", "1"], check=True,
               stdout=subprocess.DEVNULL)
rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
print(f"  max RSS of cnnrun benchmark, 4 replicas x 128: {rss} bytes")
sys.exit(0 if rss < 400 << 20 else 1)
PY

# bitwise: frames reused = one frame per micro-batch.  Accumulation 8: 1 shard sequential (1
# frame for 8 micro-batches) vs 4 shards interleaved (8 frames); 2 replicas x 4: 1 shard (1
# frame), 2 shards grouped (4 frames) vs 4 shards interleaved (8 frames for 8).
compile a8 --gradient-accumulation 8
compile b8 --gradient-accumulation 8 --shards 4 --pipeline-schedule interleaved
compile r1 --gradient-accumulation 4 --replicas 2
compile r2 --gradient-accumulation 4 --replicas 2 --shards 2 --pipeline-schedule grouped
compile r4 --gradient-accumulation 4 --replicas 2 --shards 4 --pipeline-schedule interleaved
frames_are a8 1
frames_are b8 8
frames_are r1 1
frames_are r2 4
frames_are r4 8
for n in a8 b8 r1 r2 r4; do train_synth "$T/$n.so" "$T/ck_$n" --threads 2 --limit 512; done
same_bytes "$(ckpt "$T/ck_a8")" "$(ckpt "$T/ck_b8")" "checkpoint: accumulation 8, 1 frame reused != 1 frame per micro-batch"
same_bytes "$(ckpt "$T/ck_r1")" "$(ckpt "$T/ck_r4")" "checkpoint: 2 replicas, 1 frame reused != 1 frame per micro-batch"
same_bytes "$(ckpt "$T/ck_r2")" "$(ckpt "$T/ck_r4")" "checkpoint: 2 replicas, 4 frames reused != 1 frame per micro-batch"
differ "$(ckpt "$T/ck_a8")" "$(ckpt "$T/ck_r4")" "checkpoints of different runs are equal: the comparison sees nothing"

if [ "${CNNC_TRAIN_FRAMES_R50:-0}" != 0 ]; then
  for s in grouped interleaved; do
    run_ok "compile resnet50 $s" "$CNNC" "$SRC/models/resnet50.yml" --mode training --batch-size 16 "${gc[@]}" \
      --pipeline-schedule "$s" -o "$T/r50_$s.so"
    within_24g "$T/r50_$s.so"
  done
fi
finish
