#!/usr/bin/env bash
# test_cnnrun_bench_train.sh BUILD SRC — `cnnrun X.so benchmark` on a --mode training model
# (issue 5): steady-state cnnrt_train_step calls after --warmup, the JSON fields and what they
# must equal (steps run, the compiled training FLOPs of `cnnc --report`, img/s and GFLOP/s from
# the timed seconds), --batches / --seconds / gradient accumulation, --trace; the model file is
# not changed and no file is written next to it (two benchmarks start from the same weights:
# same first loss); refusals: --profile on a training model, --lr on an inference model, bad
# numbers.  Ends with "N passed, M failed".
set -u
. "$(dirname "$0")/lib.sh"
script_args "$@"
[ -x "$CNNC" ] && [ -x "$CNNRUN" ] || { echo "FAIL: no $CNNC or $CNNRUN"; echo "0 passed, 1 failed"; exit 1; }

cat >"$T/tiny.yml" <<'YML'
name: tiny_train
input: {shape: [1, 12, 12], dtype: u8, mean: [0.0], std: [1.0], classes: 5}
layers:
  - {name: conv1, op: conv, filters: 8, kernel: 3, padding: 1}
  - {name: relu1, op: relu}
  - {name: pool1, op: maxpool, kernel: 2}
  - {name: flatten, op: flatten}
  - {name: fc1, op: dense, units: 5}
YML
mkdir -p "$T/m"
cnnc_as training "$T/tiny.yml" --mode training --optimizer momentum --momentum 0.9 --batch-size 4 -o "$T/m/t.so" --report "$T/rep" ||
  { finish; exit; }
cnnc_as accumulation "$T/tiny.yml" --mode training --optimizer momentum --batch-size 4 --gradient-accumulation 3 -o "$T/ga.so"
cnnc_as inference "$T/tiny.yml" --batch-size 4 -o "$T/inf.so"
sum0=$(sha256sum "$T/m/t.so")
ls0=$(find "$T/m" -printf '%p %s %T@ %m\n' | sort)

# check_json FILE PYTHON-EXPR...: each expression (over d = the JSON, rep = the report) is true.
check_json() {
  local f=$1
  shift
  for e in "$@"; do
    if python3 - "$f" "$T/rep.json" "$e" <<'PY'
import json, math, sys
d = json.load(open(sys.argv[1])); rep = json.load(open(sys.argv[2]))
sys.exit(0 if eval(sys.argv[3]) else 1)
PY
    then ok; else bad "$f: not ($e): $(head -c 700 "$f")"; fi
  done
}

"$CNNRUN" "$T/m/t.so" benchmark --runs 2 --warmup 1 --json >"$T/a.json" 2>"$T/a.err" || bad "benchmark --json: $(cat "$T/a.err")"
check_json "$T/a.json" \
  'd["mode"] == "training" and d["model"] == "tiny_train" and d["batch_size"] == 4' \
  'd["runs"] == 2 and d["warmup"] == 1 and d["steps_per_call"] == 1 and d["timed_steps"] == 2 and d["steps_done"] == 3' \
  'd["micro_batches_per_step"] == 1 and d["images_per_step"] == 4' \
  'd["flops_per_step"] == rep["totals"]["flops"] and d["flops_per_step"] > 0' \
  'd["total_seconds"] > 0 and abs(d["images_per_second"] - 2 * 4 / d["total_seconds"]) <= 1e-3 * d["images_per_second"] + 2e-3' \
  'abs(d["gflops_per_second"] - 2 * d["flops_per_step"] / d["total_seconds"] / 1e9) <= 1e-3 * d["gflops_per_second"] + 2e-3' \
  'd["step_ms"]["min"] <= d["step_ms"]["p50"] <= d["step_ms"]["p90"] and d["step_ms"]["min"] > 0' \
  'abs(d["step_ms"]["mean"] * 2 - 1e3 * d["total_seconds"]) <= 1e-3 * 1e3 * d["total_seconds"] + 1e-2' \
  'math.isfinite(d["loss"]["first"]) and math.isfinite(d["loss"]["last"]) and d["loss"]["nonfinite_calls"] == 0' \
  'd["lr"] == 0.01 and d["cpu_seconds"] >= 0 and d["threads"] and d["shards"] == 1'

# a second run starts from the .so's weights again (the first changed them in memory only)
"$CNNRUN" "$T/m/t.so" benchmark --runs 2 --warmup 1 --json >"$T/b.json" 2>"$T/b.err" || bad "benchmark again: $(cat "$T/b.err")"
python3 - "$T/a.json" "$T/b.json" <<'PY' && ok || bad "second benchmark's first loss differs: $(cat "$T/a.json" "$T/b.json")"
import json, sys
a, b = (json.load(open(p))["loss"]["first"] for p in sys.argv[1:])
sys.exit(0 if abs(a - b) <= 1e-6 * abs(a) else 1)
PY
# --lr changes the steps (the warm-up step's update differs, so does the first timed loss)
"$CNNRUN" "$T/m/t.so" benchmark --runs 1 --warmup 1 --json --lr 0.5 >"$T/c.json" 2>&1 || bad "--lr 0.5: $(cat "$T/c.json")"
check_json "$T/c.json" 'd["lr"] == 0.5'
python3 - "$T/a.json" "$T/c.json" <<'PY' && ok || bad "--lr 0.5 gave the same first loss as 0.01"
import json, sys
a, c = (json.load(open(p))["loss"]["first"] for p in sys.argv[1:])
sys.exit(0 if a != c else 1)
PY

# default warm-up 2 steps; --batches: weight updates per call; --seconds: time at least that
"$CNNRUN" "$T/m/t.so" benchmark --runs 3 --batches 2 --json >"$T/d.json" 2>&1 || bad "--batches 2: $(cat "$T/d.json")"
check_json "$T/d.json" 'd["warmup"] == 2 and d["steps_per_call"] == 2 and d["timed_steps"] == 6 and d["steps_done"] == 10' \
  'abs(d["images_per_second"] - 6 * 4 / d["total_seconds"]) <= 1e-3 * d["images_per_second"] + 2e-3'
"$CNNRUN" "$T/m/t.so" benchmark --runs 1 --warmup 0 --seconds 0.3 --json >"$T/e.json" 2>&1 || bad "--seconds: $(cat "$T/e.json")"
check_json "$T/e.json" 'd["total_seconds"] >= 0.3 and d["runs"] >= 1 and d["timed_steps"] == d["runs"] and d["steps_done"] == d["runs"]' \
  'd["min_seconds"] == 0.3'

# gradient accumulation: a step is 3 micro-batches of 4 images
if [ -f "$T/ga.so" ]; then
  "$CNNRUN" "$T/ga.so" benchmark --runs 2 --warmup 1 --json >"$T/g.json" 2>&1 || bad "accumulation: $(cat "$T/g.json")"
  "$CNNRUN" "$T/ga.so" info --json >"$T/gi.json" 2>&1
  check_json "$T/g.json" 'd["micro_batches_per_step"] == 3 and d["images_per_step"] == 12 and d["timed_steps"] == 2' \
    'abs(d["images_per_second"] - 2 * 12 / d["total_seconds"]) <= 1e-3 * d["images_per_second"] + 2e-3' \
    "d['flops_per_step'] == 3 * json.load(open('$T/gi.json'))['total_flops']"
fi

# text output and --trace
expect 0 "training, batch 4 x 1 micro-batch per step" -- "$T/m/t.so" benchmark --runs 2 --warmup 1 --trace "$T/tr.json"
grep -q "img/s" "$T/out" && grep -q "ms per step  mean" "$T/out" && ok || bad "text output: $(cat "$T/out")"
python3 -c "import json,sys; ev=json.load(open('$T/tr.json'))['traceEvents']; sys.exit(0 if len(ev) >= 3 else 1)" && ok ||
  bad "trace of the training benchmark: $(head -c 300 "$T/tr.json")"
expect 0 "profile is refused there" -- "$T/m/t.so" benchmark --help

# the model file is unchanged, and nothing was written next to it
[ "$(sha256sum "$T/m/t.so")" = "$sum0" ] && ok || bad "the .so changed on disk"
[ "$(find "$T/m" -printf '%p %s %T@ %m\n' | sort)" = "$ls0" ] && ok || bad "files appeared or changed next to the .so: $(ls -la "$T/m")"

# refusals
expect 2 "is a training model; the runtime's per-op profiler times inference" -- "$T/m/t.so" benchmark --profile --runs 1
expect 2 "--lr applies to training models; .*inf.so was compiled for inference" -- "$T/inf.so" benchmark --lr 0.1 --runs 1
expect 2 "--peak is for --profile" -- "$T/m/t.so" benchmark --peak 100
expect 2 "--seconds: must be a number >= 0 \\(got '-1'\\)" -- "$T/m/t.so" benchmark --seconds -1
expect 2 "--lr: must be a number >= 0 \\(got 'nan'\\)" -- "$T/m/t.so" benchmark --lr nan
expect 2 "--warmup: must be an integer in 0..1048576 \\(got '-1'\\)" -- "$T/m/t.so" benchmark --warmup -1
expect 2 "--runs: must be an integer in 1..1048576 \\(got '0'\\)" -- "$T/m/t.so" benchmark --runs 0
expect 2 "unknown option '--epochs'" -- "$T/m/t.so" benchmark --epochs 1
# the inference benchmark still works, with --seconds too
"$CNNRUN" "$T/inf.so" benchmark --runs 1 --seconds 0.2 --json >"$T/i.json" 2>&1 || bad "inference benchmark: $(cat "$T/i.json")"
python3 -c "import json,sys; d=json.load(open('$T/i.json')); sys.exit(0 if d['runs'] >= 1 and 'latency_ms' in d and 'mode' not in d else 1)" &&
  ok || bad "inference benchmark JSON: $(cat "$T/i.json")"
finish
