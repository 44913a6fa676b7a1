#!/usr/bin/env bash
# test_cnnrun_replicas.sh BUILD SRC — inference replicas (docs/cli.md "benchmark|infer
# --replicas R"): model instances on core groups in one process.  `infer --replicas 3` writes
# the outputs of one instance byte for byte (2 shards, 1 thread each, micro-batches split
# unevenly); `benchmark --replicas 2 --json` reports 2 instances on disjoint core groups, each
# with runs and img/s, and the total; with --pin too; usage errors (training model, --trace,
# --profile, 0) exit 2.  Ends with "N passed, M failed".
set -u
. "$(dirname "$0")/lib.sh"
script_args "$@"
M="$SRC/models/fmnist_cnn.yml"

run_ok "compile fmnist_cnn, 2 shards" "$CNNC" "$M" --batch-size 4 --shards 2 -o "$T/m.so"
# 37 samples: 10 micro-batches of 4 (the last one padded), 3 replicas take 3, 3 and 4
head -c $((37 * 784)) /dev/urandom >"$T/in.raw"
run_ok "infer, 1 instance" "$CNNRUN" "$T/m.so" infer --input "$T/in.raw" --output "$T/o1.bin" --threads 1 --batches 2
run_ok "infer --replicas 3" "$CNNRUN" "$T/m.so" infer --input "$T/in.raw" --output "$T/o3.bin" --threads 1 --batches 2 --replicas 3
same_bytes "$T/o3.bin" "$T/o1.bin" "infer --replicas 3: outputs differ from one instance's"

for pin in "" --pin; do
  "$CNNRUN" "$T/m.so" benchmark --replicas 2 --runs 3 --batches 2 --json $pin >"$T/b.json" 2>"$T/b.err" &&
    python3 - "$T/b.json" "$pin" <<'PY' && ok || bad "benchmark --replicas 2 $pin: $(head -c 600 "$T/b.json" "$T/b.err")"
import json, os, sys
r = json.load(open(sys.argv[1]))
reps = r["replica"]
ncpu = len(os.sched_getaffinity(0))
cores = [set(x["cores"]) for x in reps]
ok = (r["replicas"] == 2 and len(reps) == 2 and r["images_per_second"] > 0 and r["pinned"] == (sys.argv[2] == "--pin") and
      all(x["runs"] >= 3 and x["images_per_second"] > 0 and len(x["threads"]) == 2 for x in reps) and
      (ncpu < 2 or not (cores[0] & cores[1])) and all(cores))
sys.exit(0 if ok else 1)
PY
done
expect 0 "2 replicas \(model instances\) on core groups" -- "$T/m.so" benchmark --replicas 2 --runs 2 --batches 1
expect 0 "replica 1: cores" -- "$T/m.so" benchmark --replicas 2 --runs 2 --batches 1

run_ok "compile a training model" "$CNNC" "$M" --mode training --batch-size 4 -o "$T/t.so"
expect 2 "training model; its replicas are compiled in" -- "$T/t.so" benchmark --replicas 2
expect 2 "no --trace or --profile" -- "$T/m.so" benchmark --replicas 2 --trace "$T/x.json"
expect 2 "no --trace or --profile" -- "$T/m.so" benchmark --replicas 2 --profile
expect 2 "--replicas: must be an integer in 1..1024" -- "$T/m.so" infer --input "$T/in.raw" --top 1 --replicas 0
finish
