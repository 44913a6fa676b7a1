#!/usr/bin/env bash
# test_report_half_partials.sh BUILD SRC — the compile report's "half_partials" (docs/precision.md
# "Half partials", docs/reports.md): where --enable-half-partials stores partial sums in 16 bits.
#  - training, accumulation 2: the accumulators and every kernel with partials in memory (3x3,
#    1x1 and grouped conv grad_weight, groupnorm dgamma), each with its measured error; no
#    dense or batchnorm entry;
#  - inference 16.16 with a K-blocked 1x1 conv (P 0.1): a conv_kblock entry with its block
#    (--tune bf16=0: on an avx512bf16 target the default bf16 compile runs this conv on the
#    vdpbf16ps kernel, gen_conv_bf16.c, whose whole K sum stays in f32 registers; that compile
#    must then say nowhere, and K-block like the forced one elsewhere: the kernel's kind says which);
#  - a dense-only model: an empty list and a note that says nowhere; without the flag: off.
set -u
. "$(dirname "$0")/lib.sh"
script_args "$@"

cat >"$T/hp.yml" <<'Y'
name: half_partials
input: {shape: [4, 20, 20], dtype: f32, classes: 5}
layers:
  - {name: c1, op: conv, filters: 16, kernel: 3, padding: 1}
  - {name: gn1, op: groupnorm, groups: 4}
  - {name: r1, op: relu}
  - {name: c2, op: conv, filters: 16, kernel: 1}
  - {name: r2, op: relu}
  - {name: c3, op: conv, filters: 16, kernel: 3, padding: 1, groups: 4}
  - {name: r3, op: relu}
  - {name: g, op: global_avgpool}
  - {name: f, op: flatten}
  - {name: d1, op: dense, units: 5}
Y
cat >"$T/kb.yml" <<'Y'
name: kblock
input: {shape: [512, 7, 7], dtype: f32, classes: 10}
layers:
  - {name: c1, op: conv, filters: 32, kernel: 1}
  - {name: r1, op: relu}
  - {name: g, op: global_avgpool}
  - {name: f, op: flatten}
  - {name: d1, op: dense, units: 10}
Y
cat >"$T/mlp.yml" <<'Y'
name: mlp
input: {shape: [3, 10, 10], dtype: f32, classes: 5}
layers:
  - {name: f, op: flatten}
  - {name: d1, op: dense, units: 40}
  - {name: r1, op: relu}
  - {name: d2, op: dense, units: 5}
Y

compile() { # NAME ARGS...: compile to $T/NAME.so with a report $T/NAME.json
  cnnc_as "$1" "${@:2}" -o "$T/$1.so" --report "$T/$1" && ok
}
compile tr "$T/hp.yml" --mode training --batch-size 4 --precision 16.32 --half-type fp16 --enable-half-partials \
  --gradient-accumulation 2
# --target-cache: the K blocks depend on the L2 size; pinned so every host plans the same
compile kb "$T/kb.yml" --tune bf16=0 --batch-size 2 --precision 16.16 --available-memory-proportion 0.1 --enable-half-partials --target-cache 1M,2M
compile kbd "$T/kb.yml" --batch-size 2 --precision 16.16 --available-memory-proportion 0.1 --enable-half-partials --target-cache 1M,2M
compile mlp "$T/mlp.yml" --mode training --batch-size 4 --precision 16.32 --enable-half-partials
compile off "$T/hp.yml" --mode training --batch-size 4 --precision 16.32

if "$PY" - "$T" >"$T/py.out" 2>&1 <<'P'; then ok; else bad "$(cat "$T/py.out")"; fi
import json, sys
t = sys.argv[1]
hp = lambda n: json.load(open(f"{t}/{n}.json"))["half_partials"]
tr, kb, mlp, off, kbd = hp("tr"), hp("kb"), hp("mlp"), hp("off"), hp("kbd")
kinds = sorted((w["kind"], w["node"]) for w in tr["where"])
want = sorted([("gradient_accumulators", None), ("grad_weight_lanes", "bwd/c1/dw"), ("grad_weight_gemm", "bwd/c2/dw"),
               ("grad_weight_grouped", "bwd/c3/dw"), ("groupnorm_dgamma", "bwd/gn1/dgamma")])
assert tr["enabled"] and tr["format"] == "fp16" and tr["lanes"] > 0, tr
assert kinds == want, kinds
for w in tr["where"]:
    m = w["measured"]
    assert m and all(0 < v < 1 for v in m.values()), w
k = [w for w in kb["where"] if w["kind"] == "conv_kblock"]
assert len(k) == 1 and k[0]["node"] == "c1" and 0 < k[0]["k_block"] < 512, kb
c1 = [o for o in json.load(open(f"{t}/kbd.json"))["ops"] if o.get("name") == "c1"]
dot = len(c1) == 1 and "avx512bf16" in c1[0]["kernel"]  # gen_conv_bf16.c
assert len(c1) == 1 and (kbd["where"] == [] and kbd["note"].startswith("nowhere") if dot else kbd == kb), (c1, kbd)
assert mlp["enabled"] and mlp["where"] == [] and mlp["note"].startswith("nowhere"), mlp
assert not off["enabled"] and off["where"] == [] and off["note"].startswith("off"), off
print("half_partials report: training", len(tr["where"]), "places, inference K block", k[0]["k_block"],
      "(default bf16 route:", "vdpbf16ps, nowhere)" if dot else "K-blocked too)")
P
cat "$T/py.out"
finish
