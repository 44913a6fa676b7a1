#!/usr/bin/env bash
# test_report.sh BUILD SRC — `cnnc --report` and `cnnc report-diff` (docs/reports.md): the JSON
# parses and agrees with the compiled .so's descriptor (op FLOPs, kernel names, scratch
# arena per shard), memory categories add up, liveness peaks fit the arena, a 2-shard compile
# reports 2 shards, the HTML is self-contained with its SVG charts (and renders them in
# headless chromium when installed), report-diff of 1 vs 2 shards names the shard change,
# and usage errors exit 2.
set -u
BUILD=${1:?usage: test_report.sh BUILD SRC}
SRC=${2:?usage: test_report.sh BUILD SRC}
CNNC="$BUILD/cnnc"
CNNRUN="$BUILD/cnnrun"
MODEL="$SRC/models/cifar_resnet8.yml"
. "$(dirname "$0")/lib.sh"
check() { # check NAME CMD...: CMD must succeed
  local name=$1
  shift
  if "$@" >"$T/check.out" 2>&1; then ok; else bad "$name: $(head -c 600 "$T/check.out")"; fi
}

# Consistency of REPORT.json with the descriptor of MODEL.so (cnnrun info --json).
cat >"$T/consistent.py" <<'EOF'
import json, subprocess, sys
report, so, cnnrun, want_shards = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
r = json.load(open(report))
d = json.loads(subprocess.run([cnnrun, so, "info", "--json"], check=True, capture_output=True, text=True).stdout)
errs = []
def expect(cond, msg):
    if not cond: errs.append(msg)
def close(a, b): return abs(a - b) <= 1e-9 * max(1.0, abs(a), abs(b))
expect(r["n_shards"] == want_shards and len(r["shards"]) == want_shards, f"want {want_shards} shards, got {r['n_shards']}")
expect(close(sum(o["flops"] for o in r["ops"]), d["total_flops"]), "per-op flops do not sum to the descriptor's total_flops")
expect(close(sum(k["flops"] for k in r["kernels"]), d["total_flops"]), "per-kernel flops do not sum to total_flops")
expect(close(r["totals"]["flops"], d["total_flops"]), "totals.flops != total_flops")
expect(close(sum(r["balance"]["flops"]), d["total_flops"]), "balance flops do not sum to total_flops")
for s, (rs, ds) in enumerate(zip(r["shards"], d["shards"])):
    m = rs["memory"]
    expect(m["weights"] + m["activations"] + m["io"] + m["temporaries"] + m["gaps"] == m["total"], f"shard {s}: categories do not sum to total")
    expect(m["activations"] + m["gaps"] == m["arena"], f"shard {s}: activations + gaps != arena")
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
if errs:
    print("\n".join(errs)); sys.exit(1)
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
if "$CNNC" "$MODEL" -o "$T/m1.so" --report "$T/r1" >"$T/c1.out" 2>&1 && [ -s "$T/r1.json" ] && [ -s "$T/r1.html" ]; then ok
else bad "cnnc --report r1 (r1.json + r1.html): $(head -c 400 "$T/c1.out")"; fi
if "$CNNC" "$MODEL" -o "$T/m2.so" --shards 2 --report "$T/r2.json" >"$T/c2.out" 2>&1 && [ -s "$T/r2.json" ] && [ -s "$T/r2.html" ]; then ok
else bad "cnnc --report r2.json writes r2.json and r2.html: $(head -c 400 "$T/c2.out")"; fi
check "report 1 shard consistent with the .so" python3 "$T/consistent.py" "$T/r1.json" "$T/m1.so" "$CNNRUN" 1
check "report 2 shards consistent with the .so" python3 "$T/consistent.py" "$T/r2.json" "$T/m2.so" "$CNNRUN" 2
check "html has the svg charts, no scripts or links" python3 "$T/html.py" "$T/r2.html" 2
"$CNNC" "$MODEL" -o "$T/m3.so" --report "$T/r3.html" >/dev/null 2>&1 && [ -s "$T/r3.json" ] && [ -s "$T/r3.html" ] && ok ||
  bad "--report r3.html writes r3.json and r3.html"

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
CHROMIUM=$(command -v chromium || command -v chromium-browser || true)
if [ -z "$CHROMIUM" ]; then
  echo "skip: chromium not installed (tools/install-deps.sh installs it); the HTML was checked statically"
else
  timeout 120 "$CHROMIUM" --headless --no-sandbox --disable-gpu --disable-background-networking \
    --enable-logging=stderr --v=0 --dump-dom "file://$T/r2.html" >"$T/dom.html" 2>"$T/chromium.err"
  if grep -q 'id="liveness-1"' "$T/dom.html" && grep -q 'id="memory"' "$T/dom.html" && grep -q '<polyline' "$T/dom.html"; then ok
  else bad "chromium --dump-dom lacks the charts: $(head -c 300 "$T/chromium.err")"; fi
  if grep -q "CONSOLE" "$T/chromium.err"; then bad "console messages: $(grep CONSOLE "$T/chromium.err" | head -3)"; else ok; fi
fi

finish
