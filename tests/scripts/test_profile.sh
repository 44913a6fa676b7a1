#!/usr/bin/env bash
# test_profile.sh BUILD SRC — `cnnrun MODEL.so benchmark --profile` (docs/cli.md): one row per
# op of every shard, named (layer and kernel) exactly as `cnnrun info --json` lists the ops,
# every op timed on every profiled micro-batch with wall, busy and CPU times > 0, and the ops
# of a shard summing to about the shard entry's time; 1 and 2 shards, 1 and 2 threads; text
# and JSON; --peak; a model without profiled entries fails with a clear message.
set -u
. "$(dirname "$0")/lib.sh"
script_args "$@"
MODEL="$SRC/models/cifar_resnet8.yml"

cat >"$T/check.py" <<'EOF'
import json, sys
from testlib import Expect, so_info
so, cnnrun, out, mbs = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
d = so_info(cnnrun, so)
b = json.load(open(out))
p = b["profile"]
expect = Expect()
expect(p["micro_batches"] == mbs, f"micro_batches {p['micro_batches']}, want {mbs}")
expect(p["peak_gflops_per_core"] > 0, "no peak")
want = [(s, k, o["name"], o["kernel"]) for s, sh in enumerate(d["shards"]) for k, o in enumerate(sh["ops"])]
got = [(o["shard"], o["op"], o["name"], o["kernel"]) for o in p["ops"]]
expect(got == want, f"rows {got[:3]}... ({len(got)}) != info ops {want[:3]}... ({len(want)})")
for o in p["ops"]:
    tag = f"{o['name']} ({o['kernel']})"
    expect(o["calls"] == mbs, f"{tag}: calls {o['calls']}, want {mbs}")
    expect(o["seconds"] > 0 and o["max_busy_seconds"] > 0 and o["busy_seconds"] > 0, f"{tag}: zero time {o}")
    # each thread times an op from its own wake-up after the previous barrier, thread 0's wall
    # from its own: a descheduled thread 0 can start late, so allow 10 ms per call
    expect(o["max_busy_seconds"] <= o["seconds"] + 0.01 * o["calls"], f"{tag}: slowest thread {o['max_busy_seconds']} >> op wall {o['seconds']}")
    expect(o["max_busy_seconds"] <= o["busy_seconds"] * 1.0001 + 1e-9, f"{tag}: max busy > sum of busy")
    expect(o["cpu_seconds"] >= 0, f"{tag}: negative cpu time")
for s, sh in enumerate(d["shards"]):
    tot = sum(o["seconds"] for o in p["ops"] if o["shard"] == s)
    busy = b["shard_busy"][s] * b["runs"] * b["batches_per_run"] / (b["images_per_second"] / b["batch_size"])
    # shard_busy is a fraction of the timed runs' wall time; the ops cover the shard entry but
    # not the join after it, where a descheduled worker (busy machine) can keep the leader a
    # few ms per micro-batch: ops never exceed the shard time, and cover it up to that jitter
    expect(0.5 * busy - 0.005 * mbs <= tot <= 1.02 * busy + 1e-4, f"shard {s}: ops sum {tot:.6f} s, shard entry busy {busy:.6f} s")
expect.exit_on_errors()
print("ok")
EOF

cnnc_as m1 "$MODEL" -o "$T/m1.so"
cnnc_as m2 "$MODEL" --shards 2 -o "$T/m2.so"
for so in m1 m2; do
  for th in 1 2; do
    if "$CNNRUN" "$T/$so.so" benchmark --profile --json --runs 3 --batches 2 --threads $th >"$T/p.json" 2>"$T/err"; then
      r=$("$PY" "$T/check.py" "$T/$so.so" "$CNNRUN" "$T/p.json" 6 2>&1)
      if [ "$r" = ok ]; then ok; else bad "$so, $th threads: $r"; fi
    else
      bad "$so, $th threads: benchmark --profile --json failed: $(head -c 400 "$T/err")"
    fi
  done
done

# Text table: header, one row per op with the kernel name last, the per-shard sum line.
"$CNNRUN" "$T/m2.so" benchmark --profile --runs 2 --threads 2 --peak 50 >"$T/p.txt" 2>&1 || bad "text profile failed"
n_ops=$("$CNNRUN" "$T/m2.so" info --json | "$PY" -c 'import json,sys; print(sum(len(s["ops"]) for s in json.load(sys.stdin)["shards"]))')
rows=$(grep -cE '^ +[0-9]+ +[0-9]+  .* cnnk_s[0-9]+_' "$T/p.txt")
if [ "$rows" = "$n_ops" ] && [ "$n_ops" -gt 0 ]; then ok; else bad "text profile: $rows op rows, model has $n_ops ops"; fi
grep -q 'peak 50.0 GFLOP/s per core (--peak)' "$T/p.txt" && ok || bad "text profile: --peak not shown: $(head -c 600 "$T/p.txt")"
[ "$(grep -c '^shard [01]: ops sum to' "$T/p.txt")" = 2 ] && ok || bad "text profile: no per-shard sum lines"
# Without --profile: no profile section (the normal entries run).
"$CNNRUN" "$T/m1.so" benchmark --runs 1 >"$T/n.txt" 2>&1 && ! grep -q profile "$T/n.txt" && ok || bad "profile printed without --profile"

# A .so without profiled entries (the fake model): clear error, exit 1.
expect 1 "no profiled entries \(symbol cnnc_profile_v1\)" -- "$BUILD/tests/libfake_model.so" benchmark --profile --runs 1
expect 2 "--peak: must be a number" -- "$T/m1.so" benchmark --profile --peak abc
finish
