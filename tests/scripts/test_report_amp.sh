#!/usr/bin/env bash
# test_report_amp.sh BUILD SRC — the effect of --available-memory-proportion P in the compile
# report (docs/reports.md "Available memory proportion: effect"): ResNet-18 compiled with P
# 0.1, 0.6 and 1.0 for a pinned target (AVX2, 1 MB L2).  The shard's working-set budget grows
# with P; every conv kernel that runs blocks of channel tiles (the kernel plan's, cg_kplan;
# Winograd kernels do not) reports its tiles per block and the block's working set, which
# never grows when P falls, fits the L2 budget P x L2 per core whenever a block holds more
# than one tile, and is smaller in total at P 0.1 than at 0.6; the model computes the same
# thing (FLOPs, kernels' kinds up to the K-blocked plane variant a smaller P may select)
# whatever P is; report-diff lists the block changes.  CNNC_TEST_QUICK=1 (CI's sanitizer
# stage, lib.sh quick): P 0.1 and 0.6 only (the same compile paths as a third P).
set -u
. "$(dirname "$0")/lib.sh"
script_args "$@"
M="$SRC/models/resnet18.yml"

PS="0.1 0.6 1.0"
if quick; then PS="0.1 0.6"; fi
for P in $PS; do
  cnnc_as "P$P" "$M" -o "$T/m$P.so" --available-memory-proportion "$P" --report "$T/r$P" \
    --target-cpu x86-64-v3 --target-cache 1M,32M && ok
done

python3 - "$T" $PS <<'EOF' && ok || bad "report figures do not follow P"
import json, sys
from testlib import Expect
T, ps = sys.argv[1], sys.argv[2:]
r = {p: json.load(open(f"{T}/r{p}.json")) for p in ps}
expect = Expect()
budget = {p: r[p]["shards"][0]["working_set_budget"] for p in r}
expect(all(budget[a] < budget[b] for a, b in zip(ps, ps[1:])), f"budgets {budget}")
c = r["0.6"]["cache"]
blocks = {p: {o["name"]: o for o in r[p]["ops"] if "block_working_set" in o} for p in r}
expect(len(blocks["0.6"]) >= 5 and all(blocks[p].keys() == blocks["0.6"].keys() for p in ps), "blocked conv ops")
kind_of = {p: {k["name"]: k["kind"] for k in r[p]["kernels"]} for p in r}
expect(not any("wino" in kind_of[p][o["kernel"]] for p in r for o in blocks[p].values()), "a Winograd kernel reports a tile block")
expect(any("wino" in k for k in kind_of["0.6"].values()), "no Winograd kernel (the check above checks nothing)")
for p in r:
    l2 = int(float(p) * c["l2"] / c["l2_sharing"])
    for n, o in blocks[p].items():
        expect(o["tile_block"] >= 1 and (o["tile_block"] == 1 or o["block_working_set"] <= l2),
               f"P {p} {n}: {o['tile_block']} tiles, {o['block_working_set']} bytes over the L2 budget {l2}")
for n in blocks["0.6"]:
    ws = [blocks[p][n]["block_working_set"] for p in ps]
    expect(all(a <= b for a, b in zip(ws, ws[1:])), f"{n}: working set not monotonic in P")
tot = {p: sum(o["block_working_set"] for o in blocks[p].values()) for p in r}
expect(tot["0.1"] < tot["0.6"], f"total block working set {tot}")
expect(sum(blocks["0.1"][n]["tile_block"] < blocks["0.6"][n]["tile_block"] for n in blocks["0.6"]) >= 3, "few ops shrink their blocks")
# a kxk channel-vector conv whose tile weights + input no longer fit the smaller budget runs
# on K-blocked planes (conv2d_vcp, gen_conv_vc.c): the same conv, another loop order, and only
# in that direction (never vcp at a larger P where the smaller one kept rows)
kinds = {p: [k["kind"] for k in r[p]["kernels"]] for p in r}
base = {p: [k.replace("conv2d_vcp_", "conv2d_vc_") for k in kinds[p]] for p in r}
expect(all(base[p] == base["0.1"] and r[p]["totals"]["flops"] == r["0.1"]["totals"]["flops"] for p in ps), "P changed the model")
for lo, hi in zip(ps, ps[1:]):
    expect(not any("conv2d_vcp_" in b and "conv2d_vcp_" not in a for a, b in zip(kinds[lo], kinds[hi])),
           f"a conv on planes at P {hi} but rows at P {lo}")
print("block working set total:", tot, "budgets:", budget)
expect.exit_on_errors(10)
EOF
"$CNNC" report-diff "$T/r0.6.json" "$T/r0.1.json" >"$T/diff.out" 2>&1 &&
  grep -qE "block working set [0-9.e+]+ -> [0-9.e+]+ bytes \([0-9]+ -> [0-9]+ tiles\)" "$T/diff.out" &&
  grep -qE "available_memory_proportion +0.6 -> 0.1" "$T/diff.out" && ok || bad "report-diff 0.6 -> 0.1: $(head -c 900 "$T/diff.out")"
grep -q "; block " "$T/r0.1.html" && ok || bad "the HTML op table lacks the block working sets"

finish
