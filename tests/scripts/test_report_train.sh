#!/usr/bin/env bash
# test_report_train.sh BUILD SRC — compile reports of training compiles (docs/reports.md
# "Training reports"): `n_shards` and `shards[]` are the model shards (pipeline stages), not
# the program stages; each shard names its forward and backward programs (the stages of
# `training.stages`) and its optimizer updates; the memory categories add up, the sum over
# the shards equals the runtime's planned bytes of the micro_batch program (`cnnrun info`),
# stash = stash per micro-batch x frames, micro-batches in flight follow the schedule
# (sequential 1, interleaved min(S - s, N), grouped min(N, 2S)), frames follow the schedule
# (sequential 1, else min(N, 2S)); the liveness curve has one point per
# forward then backward step and holds the whole stash at the end of the forward;
# program and kernel FLOPs agree; the balance names the bottleneck and the simulated idle
# fraction (sequential: the stages run one after another); ops and kernels name their stage;
# the HTML has the training charts (and renders in headless chromium when installed);
# report-diff shows schedule / accumulation / in-flight changes.
set -u
. "$(dirname "$0")/lib.sh"
script_args "$@"
M="$SRC/models/fmnist_cnn.yml"

cat >"$T/check.py" <<'EOF'
import json, re, subprocess, sys
from testlib import Expect, close
report, so, cnnrun, S, N, sched = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), sys.argv[6]
r = json.load(open(report))
expect = Expect()
expect(r["mode"] == "training" and r["n_shards"] == S and len(r["shards"]) == S,
       f"want {S} model shards, got n_shards {r['n_shards']} and {len(r['shards'])} entries")
tr = r["training"]
expect(tr["shards"] == S and tr["gradient_accumulation"] == N and tr["pipeline_schedule"] == sched and tr["frames"] == (1 if sched == "sequential" else min(N, 2 * S)),
       f"training section {({k: tr[k] for k in ('shards', 'gradient_accumulation', 'pipeline_schedule', 'frames')})}")
stages = {s["name"]: s for s in tr["stages"]}
want_stages = [f"fwd/s{s}" for s in range(S)] + [f"bwd/s{s}" for s in reversed(range(S))] + ["update/s0"]
expect([s["name"] for s in tr["stages"]] == want_stages, f"stages {[s['name'] for s in tr['stages']]}")
expect(tr["optimizer_stage"] == "update/s0", "optimizer stage")
info = subprocess.run([cnnrun, so, "info"], check=True, capture_output=True, text=True).stdout
m = re.search(r"micro_batch .*planned (\d+) bytes", info)
expect(m is not None, "cnnrun info has no planned bytes for micro_batch")
total_flops = sum(k["flops"] for k in r["kernels"])
expect(close(total_flops, r["totals"]["flops"]), "kernel flops != totals.flops")
prog_flops = 0
for s, sh in enumerate(r["shards"]):
    p, mem = sh["programs"], sh["memory"]
    expect(p["forward"]["stage"] == f"fwd/s{s}" and p["backward"]["stage"] == f"bwd/s{s}" and p["optimizer"]["stage"] == "update/s0",
           f"shard {s}: programs {p}")
    for key, st in (("forward", f"fwd/s{s}"), ("backward", f"bwd/s{s}")):
        kf = [k for k in r["kernels"] if k["stage"] == st]
        expect(p[key]["n_kernels"] == len(kf) == stages[st]["n_kernels"] and close(p[key]["flops"], sum(k["flops"] for k in kf)),
               f"shard {s}: {key} program != the kernels of {st}")
        expect(all(k["shard"] == s for k in kf), f"shard {s}: kernels of {st} on another shard")
    ko = [k for k in r["kernels"] if k["stage"] == "update/s0" and k["shard"] == s]
    expect(p["optimizer"]["n_kernels"] == len(ko) > 0, f"shard {s}: optimizer updates {p['optimizer']['n_kernels']} vs {len(ko)}")
    prog_flops += p["forward"]["flops"] + p["backward"]["flops"] + p["optimizer"]["flops"]
    expect(close(sh["flops"], p["forward"]["flops"] + p["backward"]["flops"]), f"shard {s}: flops != forward + backward")
    cats = ("weights", "activations", "stash", "optimizer_state", "accumulators", "io", "temporaries", "gaps")
    expect(sum(mem[c] for c in cats) == mem["total"] == mem["limited"], f"shard {s}: categories do not sum to total/limited")
    expect(mem["activations"] + mem["gaps"] == mem["arena"], f"shard {s}: activations + gaps != arena")
    expect(mem["arena"] == max(st["scratch"] for st in tr["stages"] if st["shard"] == s), f"shard {s}: arena != its largest stage scratch")
    expect(mem["stash"] == mem["stash_per_micro_batch"] * mem["frames"] and mem["stash_per_micro_batch"] > 0, f"shard {s}: stash")
    expect(mem["weights"] > 0 and mem["weights_counted"], f"shard {s}: weights")
    expect((mem["optimizer_state"] > 0) == (sys.argv[7] == "momentum"), f"shard {s}: optimizer state {mem['optimizer_state']} ({sys.argv[7]})")
    expect((mem["accumulators"] > 0) == (N > 1), f"shard {s}: accumulators {mem['accumulators']} with accumulation {N}")
    want_if = 1 if sched == "sequential" else min(N, 2 * S) if sched == "grouped" else min(S - s, N)
    expect(mem["micro_batches_in_flight"] == want_if and mem["stash_in_flight"] == want_if * mem["stash_per_micro_batch"],
           f"shard {s}: {mem['micro_batches_in_flight']} micro-batches in flight, want {want_if} ({sched})")
    lv, nf = sh["liveness"], sh["liveness_forward_steps"]
    expect(nf == p["forward"]["n_kernels"] and len(lv) == nf + p["backward"]["n_kernels"], f"shard {s}: liveness points")
    expect(max(lv) == mem["peak_live"] and lv.index(max(lv)) == mem["peak_step"], f"shard {s}: liveness peak")
    # the mountain: the whole stash is live at the end of the forward, released during the backward
    expect(lv[nf - 1] >= mem["stash_per_micro_batch"] and lv[-1] < max(lv),
           f"shard {s}: liveness does not carry the stash over the forward/backward boundary")
expect(close(prog_flops, total_flops), "the shards' programs do not cover every kernel")
expect(sum(sh["memory"]["total"] for sh in r["shards"]) == int(m.group(1)) if m else False,
       f"sum of shard memory {sum(sh['memory']['total'] for sh in r['shards'])} != cnnrun info planned {m.group(1) if m else '?'}")
b = r["balance"]
est = [sh["est_ms"] for sh in r["shards"]]
expect(b["bottleneck_shard"] == est.index(max(est)) and close(b["pipeline_est_ms"], max(est)), "bottleneck")
expect(0 <= b["idle_fraction"] < 1 and b["pipeline_schedule"] == sched, f"balance {b}")
busy = sum(b["busy_est_ms"]) + b["optimizer_est_ms"]
expect(abs(b["idle_fraction"] - (1 - busy / (S * b["update_est_ms"]))) < 1e-3, "idle fraction formula")
if sched == "sequential":  # one stage at a time: the update takes every stage's time
    expect(abs(b["update_est_ms"] - (N * sum(st["est_ms"] for st in tr["stages"] if st["phase"] != "update") +
                                     stages["update/s0"]["est_ms"])) < 1e-3 * b["update_est_ms"], "sequential schedule length")
jobs = [j for j in tr["schedule_jobs"] if j["micro_batch"] >= 0]
expect(len(jobs) == N * 2 * S and len(tr["schedule_jobs"]) == tr["schedule_jobs_total"], f"{len(jobs)} simulated jobs")
for o in r["ops"]:
    ph = "update" if o["name"].startswith("update/") else "backward" if o["name"].split("/")[0] in ("bwd", "grad", "recompute") else "forward"
    want = "update/s0" if ph == "update" else ("fwd/s%d" if ph == "forward" else "bwd/s%d") % o["shard"]
    expect(o["phase"] == ph and o["stage"] == want, f"op {o['name']}: phase {o['phase']} stage {o['stage']}, want {ph} {want}")
# fused ops name the kernel that computes them (the training fusion plan, not the inference one):
# an anchor of the same stage and step, and not every one the first conv
by_name = {o["name"]: o for o in r["ops"]}
fused = [o for o in r["ops"] if o["fused_into"]]
for o in fused:
    a = by_name.get(o["fused_into"])
    expect(a is not None and a["fusion"] == "anchor" and a["stage"] == o["stage"] and a["step"] == o["step"],
           f"op {o['name']}: fused into {o['fused_into']}, which is not its stage's anchor at step {o['step']}")
expect(not fused or len({o["fused_into"] for o in fused}) > 1, "every fused op is attributed to one kernel")
expect(any(o["phase"] == "backward" for o in fused) or not fused, "no backward op is fused (pass_fuse_train fuses some)")
expect.exit_on_errors(12)
EOF

cat >"$T/html.py" <<'EOF'
import sys
h = open(sys.argv[1]).read()
S = int(sys.argv[2])
ids = ["memory", "top-ops", "balance", "schedule", "phases", "liveness-program"] + [f"liveness-{s}" for s in range(S)]
missing = [i for i in ids if f'id="{i}"' not in h]
bad = [p for p in ("<script", "src=", "href=", "@import", "url(") if p in h]
want = ["<dt>mode</dt><dd>training</dd>", "fwd/s0 then bwd/s0", ">accumulators<", "Bottleneck: shard", "shard (stage)", "(bwd/s0)"]
lacks = [w for w in want if w not in h]
if missing or bad or lacks or h.count('<svg class="chart liveness"') != S + 1:
    print("missing charts", missing, "external/script refs", bad, "lacks", lacks); sys.exit(1)
EOF


# the issue's example: 2 shards gave 5 "shards" (the stages)
run_ok "compile sgd, 2 shards" "$CNNC" "$M" --mode training --optimizer sgd --shards 2 --batch-size 16 -o "$T/a.so" --report "$T/a.json"
run_ok "report: sgd, 2 shards, sequential" python3 "$T/check.py" "$T/a.json" "$T/a.so" "$CNNRUN" 2 1 sequential sgd
run_ok "compile momentum, accumulation 4, interleaved" "$CNNC" "$M" --mode training --optimizer momentum --shards 2 --batch-size 16 \
  --gradient-accumulation 4 --pipeline-schedule interleaved -o "$T/b.so" --report "$T/b"
run_ok "report: momentum, accumulation 4, interleaved" python3 "$T/check.py" "$T/b.json" "$T/b.so" "$CNNRUN" 2 4 interleaved momentum
run_ok "compile momentum, accumulation 4, grouped" "$CNNC" "$M" --mode training --optimizer momentum --shards 2 --batch-size 16 \
  --gradient-accumulation 4 --pipeline-schedule grouped -o "$T/c.so" --report "$T/c"
run_ok "report: grouped" python3 "$T/check.py" "$T/c.json" "$T/c.so" "$CNNRUN" 2 4 grouped momentum
run_ok "compile momentum, accumulation 4, sequential" "$CNNC" "$M" --mode training --optimizer momentum --shards 2 --batch-size 16 \
  --gradient-accumulation 4 -o "$T/d.so" --report "$T/d"
run_ok "report: sequential with accumulation" python3 "$T/check.py" "$T/d.json" "$T/d.so" "$CNNRUN" 2 4 sequential momentum
# pipelining pays: interleaved leaves the shards less idle than sequential with the same work
python3 - "$T/b.json" "$T/d.json" <<'EOF' && ok || bad "interleaved is not estimated faster / less idle than sequential"
import json, sys
b, d = (json.load(open(p))["balance"] for p in sys.argv[1:3])
sys.exit(0 if b["update_est_ms"] < d["update_est_ms"] and b["idle_fraction"] < d["idle_fraction"] else 1)
EOF
run_ok "training html" python3 "$T/html.py" "$T/b.html" 2
"$CNNC" report-diff "$T/d.json" "$T/b.json" >"$T/diff.out" 2>&1 &&
  grep -qE "pipeline_schedule +sequential -> interleaved" "$T/diff.out" && grep -qE "idle fraction +[0-9.]+ -> [0-9.]+" "$T/diff.out" &&
  grep -qE "memory.micro_batches_in_flight 1 -> 2" "$T/diff.out" && grep -q "shards: 2 -> 2" "$T/diff.out" && ok ||
  bad "report-diff sequential -> interleaved: $(head -c 900 "$T/diff.out")"
"$CNNC" report-diff "$T/a.json" "$T/d.json" >"$T/diff2.out" 2>&1 &&
  grep -qE "gradient_accumulation +1 -> 4" "$T/diff2.out" && grep -qE "memory.accumulators +0 -> [0-9]" "$T/diff2.out" &&
  grep -qE "added update/.*momentum" "$T/diff2.out" && ok || bad "report-diff sgd -> momentum + accumulation: $(head -c 900 "$T/diff2.out")"

CHROMIUM=$(chromium_path)
if [ -z "$CHROMIUM" ]; then
  skip_part "chromium not installed (tools/install-deps.sh installs it); the HTML was checked statically, not rendered"
else
  chromium_dom "$T/b.html" "$T/dom.html"
  if grep -q 'id="liveness-program"' "$T/dom.html" && grep -q 'id="schedule"' "$T/dom.html" && grep -q '<polyline' "$T/dom.html" &&
    ! grep -q "CONSOLE" "$T/dom.html.err"; then ok
  else bad "chromium --dump-dom of the training report lacks the charts or logs console messages: $(head -c 300 "$T/dom.html.err")"; fi
fi

finish
