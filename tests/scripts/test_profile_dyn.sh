#!/usr/bin/env bash
# test_profile_dyn.sh BUILD SRC — per-op profiles of a batch-1 model with dynamic shares
# (docs/runtime.md "Dynamic shares", "Profiling"): the normal entry takes parts through the
# atomic counters, the profiled entry runs the static split (no atomicrmw in it), and a
# 2-thread `benchmark --profile --json` gives every op CPU time > 0, GF per CPU-second below a
# physical bound, and bal (busy sum / (threads x slowest)) of every dynamic-size op above the
# 0.5 that "one thread ran every part" gives.
set -u
. "$(dirname "$0")/lib.sh"
script_args "$@"
MODEL="$SRC/models/cifar_resnet8.yml"

# The IR: body of function $2 in file $1.
fn_body() { awk -v f="@$2(" 'index($0, "define") == 1 && index($0, f) { on = 1 } on { print } on && /^}/ { exit }' "$1"; }

cnnc_as ll "$MODEL" --batch-size 1 --emit llvm -o "$T/m.ll"
run=$(fn_body "$T/m.ll" cnnc_shard0_run | grep -c atomicrmw)
prof=$(fn_body "$T/m.ll" cnnc_shard0_prof | grep -c atomicrmw)
lines=$(fn_body "$T/m.ll" cnnc_shard0_prof | wc -l)
# the model must have dynamic ops at all, else this test checks nothing
[ "$run" -gt 0 ] && ok || bad "cnnc_shard0_run has no atomicrmw: cifar_resnet8 b1 has no dynamic op any more"
[ "$lines" -gt 5 ] && [ "$prof" = 0 ] && ok || bad "cnnc_shard0_prof ($lines lines) has $prof atomicrmw: profiled entry uses dynamic shares"

cnnc_as so "$MODEL" --batch-size 1 -o "$T/m.so"
cat >"$T/check.py" <<'EOF'
import json, sys
b = json.load(open(sys.argv[1]))
p = b["profile"]
peak = p["peak_gflops_per_core"]
errs, big = [], []
if not peak > 0: errs.append("no measured peak")
for o in p["ops"]:
    tag = f"{o['name']} ({o['kernel']})"
    if not o["cpu_seconds"] > 0: errs.append(f"{tag}: cpu_seconds {o['cpu_seconds']}")
    # the measured peak is the widest FMA the CPU has, and Winograd ops count direct-conv
    # FLOPs (up to 4x the multiplies): 10x the measured peak is beyond any kernel
    elif peak > 0 and o["gflops_per_cpu_second"] > 10 * peak:
        errs.append(f"{tag}: {o['gflops_per_cpu_second']:.0f} GF per CPU-second > 10 x peak {peak:.0f}")
    # static split: both threads have items in every op of >= 4 MFLOP (the dynamic-share size),
    # so neither thread's busy time is ~0; with the dynamic entry the late-woken thread found
    # every part taken and bal sat at 0.50-0.55 on EVERY such op (loaded 2-vCPU host).  One
    # preempted thread can push a single op there too, so only a majority of them fails.
    if o["flops"] >= 4e6 and o["max_busy_seconds"] > 0:
        big.append((tag, o["busy_seconds"] / (2 * o["max_busy_seconds"])))
low = [f"{t}: bal {b:.3f}" for t, b in big if b < 0.55]
if not big: errs.append("no op of >= 4 MFLOP in the profile")
elif 2 * len(low) > len(big): errs.append(f"{len(low)} of {len(big)} big ops have one thread idle: " + "; ".join(low))
print("\n".join(errs) if errs else "ok")
sys.exit(1 if errs else 0)
EOF
if "$CNNRUN" "$T/m.so" benchmark --profile --json --runs 10 --batches 1 --threads 2 >"$T/p.json" 2>"$T/err"; then
  r=$("$PY" "$T/check.py" "$T/p.json" 2>&1)
  [ "$r" = ok ] && ok || bad "profile: $r"
else
  bad "benchmark --profile --json failed: $(head -c 400 "$T/err")"
fi
"$CNNRUN" "$T/m.so" benchmark --profile --runs 1 --threads 2 --peak 50 2>&1 | grep -q 'split every op statically' && ok ||
  bad "text profile header does not say profiled runs use the static split"
finish
