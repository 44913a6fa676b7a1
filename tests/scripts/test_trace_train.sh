#!/usr/bin/env bash
# test_trace_train.sh BUILD SRC — `cnnrun … train --trace FILE.json` (docs/reports.md): the
# training trace is Chrome trace JSON with one track (tid) per shard thread group, one event
# per job — every micro-batch's forward and backward stage on its shard, the optimizer update
# on shard 0's track, the validation's eval stages — and, with 2 threads per shard, one event
# per op of each stage nested in its job (a forward stage: exactly its kernels from the
# compile report; a backward stage: at least its kernels, plus the gradient-accumulation
# adds).  The order of the jobs on each track in an update is the compile report's simulated
# schedule (interleaved 1F1B with 2 shards and 2 micro-batches per update), and every
# update's optimizer event comes after that update's micro-batches and before the next ones.
# Replicas get tracks of their own only when they run in parallel thread groups.
set -u
. "$(dirname "$0")/lib.sh"
script_args "$@"

cat >"$T/check.py" <<'EOF'
import json, sys
from testlib import Expect
path, report, updates, want_ops = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4] == "ops"
t = json.load(open(path))
r = json.load(open(report))
S, N = r["n_shards"], r["training"]["gradient_accumulation"]
expect = Expect()
ev = [e for e in t["traceEvents"] if e["ph"] == "X"]
names = {e["tid"]: e["args"]["name"] for e in t["traceEvents"] if e["ph"] == "M" and e["name"] == "thread_name"}
expect(sorted(names) == list(range(S)), f"tracks {sorted(names)}, want one per shard (0..{S - 1})")
threads = 2 if want_ops else 1
for s in range(S):
    expect(names.get(s) == f"shard {s} ({threads} thread{'s' if threads > 1 else ''})", f"track {s} named {names.get(s)}")
expect(all(e["dur"] >= 0 and e["pid"] == ev[0]["pid"] for e in ev), "bad dur/pid")
o = t["otherData"]
expect(o.get("mode") == "training" and o["dropped_events"] == 0 and o.get("updates") == updates, f"otherData {o}")
kernels = {}  # stage name -> kernels in the compile report
for k in r["kernels"]:
    kernels[k["stage"]] = kernels.get(k["stage"], 0) + 1
jobs = [e for e in ev if e["cat"] in ("forward", "backward", "optimizer")]
for s in range(S):
    for cat, st in (("forward", f"fwd/s{s}"), ("backward", f"bwd/s{s}")):
        mb = sorted(e["args"]["micro_batch"] for e in jobs if e["tid"] == s and e["cat"] == cat)
        expect(mb == list(range(updates * N)), f"shard {s}: {cat} micro-batches {mb}, want 0..{updates * N - 1}")
        expect(all(e["args"]["stage"] == st for e in jobs if e["tid"] == s and e["cat"] == cat), f"shard {s}: {cat} stage names")
opt = sorted((e for e in jobs if e["cat"] == "optimizer"), key=lambda e: e["ts"])
expect(len(opt) == updates and all(e["tid"] == 0 and e["args"]["stage"] == "update/s0" for e in opt),
       f"{len(opt)} optimizer events (want {updates}, on shard 0's track)")
for u, e in enumerate(opt):
    mine = [j for j in jobs if j["cat"] != "optimizer" and j["args"]["micro_batch"] // N == u]
    later = [j for j in jobs if j["cat"] != "optimizer" and j["args"]["micro_batch"] // N == u + 1]
    expect(mine and max(j["ts"] + j["dur"] for j in mine) <= e["ts"] + 0.002, f"update {u}: optimizer before its micro-batches ended")
    expect(all(j["ts"] >= e["ts"] + e["dur"] - 0.002 for j in later), f"update {u}: next micro-batches started before the optimizer ended")
# the order of each track's jobs in the first update = the report's simulated schedule
sim = {}
for j in r["training"]["schedule_jobs"]:
    if j["micro_batch"] >= 0: sim.setdefault(j["shard"], []).append((j["stage"], j["micro_batch"]))
for s in range(S):
    got = [(e["args"]["stage"], e["args"]["micro_batch"]) for e in sorted(jobs, key=lambda e: e["ts"])
           if e["tid"] == s and e["cat"] != "optimizer" and e["args"]["micro_batch"] < N]
    expect(got == sim.get(s), f"shard {s}: job order {got} != the report's schedule {sim.get(s)}")
# a forward stage's jobs never overlap on one track, and backward waits for its forward
for s in range(S):
    mine = sorted((e for e in jobs if e["tid"] == s), key=lambda e: e["ts"])
    expect(all(a["ts"] + a["dur"] <= b["ts"] + 0.002 for a, b in zip(mine, mine[1:])), f"shard {s}: overlapping jobs")
fwd_end = {e["args"]["micro_batch"]: e["ts"] + e["dur"] for e in jobs if e["cat"] == "forward" and e["tid"] == S - 1}
for e in jobs:
    if e["cat"] == "backward":
        expect(e["ts"] >= fwd_end.get(e["args"]["micro_batch"], 1e30) - 0.002, f"{e['name']} before the last forward of its micro-batch")
ops = [e for e in ev if e["cat"] == "op"]
if want_ops:
    for j in jobs:
        inside = [p for p in ops if p["tid"] == j["tid"] and p["args"]["stage"] == j["args"]["stage"] and
                  p["args"]["micro_batch"] == j["args"]["micro_batch"] and j["ts"] - 0.002 <= p["ts"] and
                  p["ts"] + p["dur"] <= j["ts"] + j["dur"] + 0.002]
        want = kernels.get(j["args"]["stage"], 0)
        ok = len(inside) == want if j["cat"] == "forward" else len(inside) >= want
        expect(ok, f"{j['name']}: {len(inside)} op events inside, the report has {want} kernels in {j['args']['stage']}")
        expect(sorted(p["args"]["op"] for p in inside) == list(range(len(inside))), f"{j['name']}: op indices")
    expect(all(p["name"].startswith(p["args"]["stage"] + " op ") for p in ops), "op event names")
else:
    expect(not ops, "op events with one thread per shard")
expect(any(e["cat"] == "eval" for e in ev), "no eval (validation) events")
expect.exit_on_errors(12)
EOF


M="$SRC/models/fmnist_cnn.yml"
run_ok "compile: 2 shards, accumulation 2, interleaved" "$CNNC" "$M" --mode training --optimizer momentum --batch-size 8 --shards 2 \
  --gradient-accumulation 2 --pipeline-schedule interleaved -o "$T/f.so" --report "$T/f"
# 48 samples = 3 updates of 2 micro-batches of 8 (synthetic data: the model's input shape; 256 validation images)
run_ok "train --trace, 2 threads per shard" "$CNNRUN" "$T/f.so" train --dataset synthetic --limit 48 --threads 2 --trace "$T/t2.json"
grep -q "trace written to" "$T/run.out" && ok || bad "train --trace did not say where the trace went"
run_ok "trace: tracks, jobs, optimizer, ops, schedule" python3 "$T/check.py" "$T/t2.json" "$T/f.json" 3 ops
run_ok "train --trace, 1 thread per shard" "$CNNRUN" "$T/f.so" train --dataset synthetic --limit 32 --threads 1 --trace "$T/t1.json"
run_ok "trace with one thread: jobs, no ops" python3 "$T/check.py" "$T/t1.json" "$T/f.json" 2 none
# replicas: sharing their shard's group by default (2 tracks); --replica-mode parallel gives
# every (replica, shard) group its own track, each running its replica's micro-batches
run_ok "compile: 2 shards, 2 replicas" "$CNNC" "$M" --mode training --batch-size 8 --shards 2 --replicas 2 -o "$T/r.so"
for mode in shared parallel; do
  run_ok "train --trace, replicas $mode" "$CNNRUN" "$T/r.so" train --dataset synthetic --limit 32 --threads 2 \
    --replica-mode "$mode" --trace "$T/r-$mode.json"
  python3 - "$T/r-$mode.json" "$mode" <<'PY' && ok || bad "replica tracks ($mode)"
import json, sys
t = json.load(open(sys.argv[1]))
names = {e["tid"]: e["args"]["name"] for e in t["traceEvents"] if e["ph"] == "M" and e["name"] == "thread_name"}
jobs = [e for e in t["traceEvents"] if e["ph"] == "X" and e["cat"] in ("forward", "backward")]
if sys.argv[2] == "shared":
    ok = sorted(names) == [0, 1] and {e["tid"] for e in jobs} == {0, 1} and {e["args"]["replica"] for e in jobs} == {0, 1}
else:
    ok = (sorted(names) == [0, 1, 2, 3] and names[3] == "shard 1 replica group 1 (1 thread)" and
          all(e["args"]["replica"] == e["tid"] // 2 for e in jobs) and {e["tid"] for e in jobs} == {0, 1, 2, 3})
ok = ok and len(jobs) == 2 * 2 * 4  # 2 updates x 2 replicas x (2 forward + 2 backward stages)
sys.exit(0 if ok else print(names, sorted({(e["tid"], e["args"]["replica"]) for e in jobs}), len(jobs)) or 1)
PY
done
"$CNNRUN" "$T/f.so" train --dataset synthetic --limit 16 --trace "$T/no/such/dir/t.json" >"$T/e.out" 2>&1
[ $? = 1 ] && grep -q "cannot be created: directory .*: No such file" "$T/e.out" && ok || bad "unwritable trace path: $(cat "$T/e.out")"

finish
