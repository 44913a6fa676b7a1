#!/usr/bin/env bash
# test_report.sh BUILD SRC — `cnnc --report` and `cnnc report-diff` (docs/reports.md): the JSON
# parses and agrees with the compiled .so's descriptor (op FLOPs, kernel names, scratch
# arena per shard), memory categories add up, liveness peaks fit the arena, a 2-shard compile
# reports 2 shards, the HTML is self-contained with its SVG charts (and renders them in
# headless chromium when installed), report-diff of 1 vs 2 shards names the shard change,
# --memory-limit and --available-memory-proportion (per shard) show up in the JSON, the HTML
# (limit line, working-set budget column) and report-diff, and usage errors exit 2.
set -u
. "$(dirname "$0")/lib.sh"
script_args "$@"
MODEL="$SRC/models/cifar_resnet8.yml"

# Consistency of REPORT.json with the descriptor of MODEL.so (cnnrun info --json).
cat >"$T/consistent.py" <<'EOF'
import json, sys
from testlib import Expect, close, so_info
report, so, cnnrun, want_shards = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
r = json.load(open(report))
d = so_info(cnnrun, so)
expect = Expect()
expect(r["n_shards"] == want_shards and len(r["shards"]) == want_shards, f"want {want_shards} shards, got {r['n_shards']}")
expect(close(sum(o["flops"] for o in r["ops"]), d["total_flops"]), "per-op flops do not sum to the descriptor's total_flops")
expect(close(sum(k["flops"] for k in r["kernels"]), d["total_flops"]), "per-kernel flops do not sum to total_flops")
expect(close(r["totals"]["flops"], d["total_flops"]), "totals.flops != total_flops")
expect(close(sum(r["balance"]["flops"]), d["total_flops"]), "balance flops do not sum to total_flops")
for s, (rs, ds) in enumerate(zip(r["shards"], d["shards"])):
    m = rs["memory"]
    cats = ("weights", "activations", "stash", "optimizer_state", "io", "temporaries", "gaps")
    expect(sum(m[c] for c in cats) == m["total"], f"shard {s}: categories do not sum to total")
    expect(m["stash"] == 0 and m["optimizer_state"] == 0, f"shard {s}: inference has no stash or optimizer state")
    expect(m["activations"] + m["gaps"] == m["arena"], f"shard {s}: activations + gaps != arena")
    expect(m["limited"] == m["arena"] + m["io"] + m["temporaries"] and not m["weights_counted"],
           f"shard {s}: inference limit covers arena + io + temporaries, not the .so's weights")
    if m["limit"] is None:
        expect(m["fits"] and m["headroom"] is None, f"shard {s}: no limit")
    else:
        expect(m["fits"] == (m["limited"] <= m["limit"]) and m["headroom"] == m["limit"] - m["limited"], f"shard {s}: fits/headroom")
    for o in r["ops"]:
        if o["shard"] != s: continue
        if o["op"] in ("conv2d", "dense"):
            expect(o["working_set_budget"] == rs["working_set_budget"] > 0 and o["working_set"] > 0,
                   f"op {o['name']}: working-set budget {o['working_set_budget']} != its shard's {rs['working_set_budget']}")
        else:
            expect(o["working_set_budget"] is None, f"op {o['name']}: a budget on a non-conv/dense op")
    expect(m["arena"] == ds["scratch_bytes"], f"shard {s}: arena {m['arena']} != descriptor scratch {ds['scratch_bytes']}")
    expect(max(rs["liveness"]) == m["peak_live"] <= m["arena"], f"shard {s}: liveness peak exceeds the arena")
    expect(len(rs["liveness"]) == len(ds["ops"]) == rs["n_kernels"], f"shard {s}: one liveness point per op")
    expect(m["weights"] > 0 and m["io"] > 0, f"shard {s}: no weights or no io")
    kern = [k["name"] for k in r["kernels"] if k["shard"] == s]
    expect(kern == [o["kernel"] for o in ds["ops"]], f"shard {s}: kernel names differ from the descriptor's")
for o in r["ops"]:
    expect(o["est_ms"] >= 0 and o["kernel"].startswith("cnnk_s"), f"op {o['name']}: estimate/kernel")
    expect((o["fused_into"] is None) == (o["fusion"] == "anchor"), f"op {o['name']}: fusion info")
expect(set(r["compile_seconds"]) >= {"load", "split", "codegen", "link", "total"}, f"phases: {list(r['compile_seconds'])}")
c = r["cache"]
expect(c["l2"] > 0 and c["l2_sharing"] >= 1 and c["l3_sharing"] >= 1 and c["source"] in ("sysfs", "fallback"), f"cache: {c}")
if len(sys.argv) > 5:  # the proportions given, one per shard, and the limit
    props, limit = [float(x) for x in sys.argv[5].split(",")], int(sys.argv[6])
    expect(r["memory_limit"] == limit, f"memory_limit {r['memory_limit']} != {limit}")
    l3 = c["l3"] // c["l3_sharing"]
    for s, rs in enumerate(r["shards"]):
        p = props[s if len(props) > 1 else 0]
        want = int(p * c["l2"] / c["l2_sharing"]) + int(p * l3)
        expect(rs["available_memory_proportion"] == p, f"shard {s}: proportion {rs['available_memory_proportion']} != {p}")
        expect(abs(rs["working_set_budget"] - want) <= 2, f"shard {s}: budget {rs['working_set_budget']}, want {want}")
        expect(rs["memory"]["limit"] == limit, f"shard {s}: limit")
else:
    expect(r["memory_limit"] is None and all(rs["available_memory_proportion"] == 0.6 for rs in r["shards"]), "defaults")
expect.exit_on_errors()
EOF

cat >"$T/html.py" <<'EOF'
import re, sys
h = open(sys.argv[1]).read()
n = int(sys.argv[2])
ids = ["memory", "top-ops", "balance", "phases"] + [f"liveness-{s}" for s in range(n)]
missing = [i for i in ids if f'<svg class="chart' not in h or f'id="{i}"' not in h]
bad = [p for p in ("<script", "src=", "href=", "@import", "url(") if p in h]
if missing or bad or '<table id="ops">' not in h or not h.rstrip().endswith("</html>"):
    print("missing charts", missing, "external/script refs", bad); sys.exit(1)
EOF

# ---- 1 and 2 shards ------------------------------------------------------------------------
# report N ARGS...: cnnc MODEL ARGS writes $T/rN.json and $T/rN.html
report() {
  cnnc_as "c$1" "$MODEL" "${@:2}" || return
  [ -s "$T/r$1.json" ] && [ -s "$T/r$1.html" ] && ok || bad "cnnc ${*:2}: no r$1.json and r$1.html"
}
report 1 -o "$T/m1.so" --report "$T/r1"
report 2 -o "$T/m2.so" --shards 2 --report "$T/r2.json"
run_ok "report 1 shard consistent with the .so" python3 "$T/consistent.py" "$T/r1.json" "$T/m1.so" "$CNNRUN" 1
run_ok "report 2 shards consistent with the .so" python3 "$T/consistent.py" "$T/r2.json" "$T/m2.so" "$CNNRUN" 2
run_ok "html has the svg charts, no scripts or links" python3 "$T/html.py" "$T/r2.html" 2
report 3 -o "$T/m3.so" --report "$T/r3.html"

# ---- memory limit and available memory proportion (per shard) ------------------------------
cnnc_as c4 "$MODEL" -o "$T/m4.so" --shards 2 --memory-limit 2M --available-memory-proportion 0.3,0.6 --report "$T/r4" && ok
run_ok "report with a limit and proportions per shard" python3 "$T/consistent.py" "$T/r4.json" "$T/m4.so" "$CNNRUN" 2 0.3,0.6 2097152
grep -q 'stroke="red"' "$T/r4.html" && grep -q '>limit 2.0 MiB<' "$T/r4.html" && ok || bad "r4.html lacks the limit line"
grep -q '<th>working-set budget</th>' "$T/r4.html" && grep -q 'headroom' "$T/r4.html" && ok ||
  bad "r4.html lacks the working-set budget column or the headroom"
"$CNNC" report-diff "$T/r2.json" "$T/r4.json" >"$T/diff4.out" 2>&1 &&
  grep -qE "available_memory_proportion +0.6 -> 0.3" "$T/diff4.out" && grep -qE "memory_limit +none -> 2.09715e\+06" "$T/diff4.out" &&
  grep -qE "conv1: working-set budget [0-9.e+]+ -> [0-9.e+]+ bytes" "$T/diff4.out" && grep -qE "[1-9][0-9]* budget changes" "$T/diff4.out" &&
  ok || bad "report-diff r2 r4 lacks the proportion/limit/budget changes: $(head -c 900 "$T/diff4.out")"

# ---- report-diff ---------------------------------------------------------------------------
if "$CNNC" report-diff "$T/r1.json" "$T/r2.json" >"$T/diff.out" 2>&1; then ok; else bad "report-diff exit status $?"; fi
grep -q "shards: 1 -> 2 (shard count changed)" "$T/diff.out" && ok || bad "report-diff lacks the shard change: $(head -c 600 "$T/diff.out")"
grep -qE "shard 1 added" "$T/diff.out" && ok || bad "report-diff lacks 'shard 1 added'"
grep -qE "moved to another shard" "$T/diff.out" && ok || bad "report-diff lacks the op summary"
"$CNNC" report-diff "$T/r1.json" "$T/r1.json" >"$T/same.out" 2>&1 && grep -q "0 added, 0 removed, 0 moved" "$T/same.out" && ok ||
  bad "report-diff of a report with itself: $(head -c 300 "$T/same.out")"
echo '{"a": [1, 2' >"$T/broken.json"
"$CNNC" report-diff "$T/r1.json" "$T/broken.json" >"$T/e.out" 2>&1
[ $? = 1 ] && grep -q "broken.json: not valid JSON" "$T/e.out" && ok || bad "report-diff on broken JSON: $(cat "$T/e.out")"
"$CNNC" report-diff "$T/r1.json" >/dev/null 2>&1
[ $? = 2 ] && ok || bad "report-diff with one file must exit 2"
"$CNNC" "$MODEL" --report "$T/x" >/dev/null 2>&1
[ $? = 2 ] && ok || bad "--report without -o must exit 2"

# ---- headless browser (optional: Debian chromium, tools/install-deps.sh) -------------------
CHROMIUM=$(chromium_path)
if [ -z "$CHROMIUM" ]; then
  skip_part "chromium not installed (tools/install-deps.sh installs it); the HTML was checked statically, not rendered"
else
  chromium_dom "$T/r2.html" "$T/dom.html"
  if grep -q 'id="liveness-1"' "$T/dom.html" && grep -q 'id="memory"' "$T/dom.html" && grep -q '<polyline' "$T/dom.html"; then ok
  else bad "chromium --dump-dom lacks the charts: $(head -c 300 "$T/dom.html.err")"; fi
  if grep -q "CONSOLE" "$T/dom.html.err"; then bad "console messages: $(grep CONSOLE "$T/dom.html.err" | head -3)"; else ok; fi
  chromium_dom "$T/r4.html" "$T/dom4.html"
  if grep -q 'stroke="red"' "$T/dom4.html" && grep -q 'working-set budget' "$T/dom4.html" && ! grep -q "CONSOLE" "$T/dom4.html.err"; then ok
  else bad "chromium: the report with a limit lacks the limit line or logs console messages"; fi
fi

finish
