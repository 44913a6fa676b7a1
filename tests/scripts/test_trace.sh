#!/usr/bin/env bash
# test_trace.sh BUILD SRC — `cnnrun … --trace FILE.json` (docs/reports.md): the trace is
# Chrome trace JSON with "X" events on one track (tid) per shard, one micro-batch event per
# shard and micro-batch of every run (warm-up included), and with more than one thread per
# shard one event per op per micro-batch, nested in its micro-batch and named as the
# descriptor's ops; for benchmark and infer, 1 and 2 shards; a bad path fails with exit 1.
set -u
. "$(dirname "$0")/lib.sh"
script_args "$@"
MODEL="$SRC/models/cifar_resnet8.yml"

cat >"$T/trace.py" <<'EOF'
import json, sys
from testlib import Expect, so_info
path, so, cnnrun, mbs, want_ops = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5] == "ops"
t = json.load(open(path))
d = so_info(cnnrun, so)
ev = [e for e in t["traceEvents"] if e["ph"] == "X"]
names = {e["tid"]: e["args"]["name"] for e in t["traceEvents"] if e["ph"] == "M" and e["name"] == "thread_name"}
expect = Expect()
expect(all(isinstance(e["ts"], (int, float)) and e["dur"] >= 0 and e["pid"] == ev[0]["pid"] for e in ev), "bad ts/dur/pid")
for s, sh in enumerate(d["shards"]):
    expect(s in names, f"no thread_name for shard {s}")
    mb = sorted(e["args"]["micro_batch"] for e in ev if e["tid"] == s and e["cat"] == "micro-batch")
    expect(mb == list(range(mbs)), f"shard {s}: micro-batch events {mb[:5]}.. ({len(mb)}), want 0..{mbs - 1}")
    ops = [e for e in ev if e["tid"] == s and e["cat"] == "op"]
    if want_ops:
        expect(len(ops) == mbs * len(sh["ops"]), f"shard {s}: {len(ops)} op events, want {mbs} x {len(sh['ops'])}")
        box = {e["args"]["micro_batch"]: e for e in ev if e["tid"] == s and e["cat"] == "micro-batch"}
        for o in ops:
            b = box.get(o["args"]["micro_batch"])
            expect(b is not None and b["ts"] - 0.002 <= o["ts"] and o["ts"] + o["dur"] <= b["ts"] + b["dur"] + 0.002,
                   f"op {o['name']} not inside its micro-batch")
            expect(o["name"] == sh["ops"][o["args"]["op"]]["name"], f"op event {o['name']} != descriptor op name")
    else:
        expect(not ops, f"shard {s}: op events with one thread")
expect(t["otherData"]["dropped_events"] == 0, "dropped events")
expect.exit_on_errors(10)
EOF


run_ok "compile 1 shard" "$CNNC" "$MODEL" -o "$T/m1.so"
run_ok "compile 2 shards" "$CNNC" "$MODEL" -o "$T/m2.so" --shards 2
# benchmark: (warmup 1 + runs 2) x batches 3 = 9 micro-batches
run_ok "benchmark 1 shard, 2 threads" "$CNNRUN" "$T/m1.so" benchmark --batches 3 --runs 2 --threads 2 --trace "$T/b1.json"
run_ok "trace 1 shard: micro-batches and ops" python3 "$T/trace.py" "$T/b1.json" "$T/m1.so" "$CNNRUN" 9 ops
run_ok "benchmark 2 shards, 1 thread each" "$CNNRUN" "$T/m2.so" benchmark --batches 3 --runs 2 --threads 1 --trace "$T/b2.json"
run_ok "trace 2 shards: micro-batches, no ops" python3 "$T/trace.py" "$T/b2.json" "$T/m2.so" "$CNNRUN" 9 none
run_ok "benchmark 2 shards, 2 threads each" "$CNNRUN" "$T/m2.so" benchmark --batches 3 --runs 2 --threads 2 --trace "$T/b3.json"
run_ok "trace 2 shards x 2 threads: micro-batches and ops" python3 "$T/trace.py" "$T/b3.json" "$T/m2.so" "$CNNRUN" 9 ops
# infer: 10 samples of 3x32x32 f32, batch 1, --batches 4 -> 10 micro-batches
python3 -c "import sys; sys.stdout.buffer.write(bytes(10 * 3 * 32 * 32 * 4))" >"$T/in.raw"
run_ok "infer --trace" "$CNNRUN" "$T/m2.so" infer --input "$T/in.raw" --output "$T/out.raw" --batches 4 --threads 2 --trace "$T/i.json"
run_ok "trace of infer" python3 "$T/trace.py" "$T/i.json" "$T/m2.so" "$CNNRUN" 10 ops
"$CNNRUN" "$T/m1.so" benchmark --batches 1 --runs 1 --trace "$T/no/such/dir/t.json" >"$T/e.out" 2>&1
[ $? = 1 ] && grep -q "t.json cannot be created: directory .*: No such file" "$T/e.out" && ok || bad "unwritable trace path: $(cat "$T/e.out")"
"$CNNRUN" "$T/m1.so" benchmark --trace >/dev/null 2>&1
[ $? = 2 ] && ok || bad "--trace without a value must exit 2"

finish
