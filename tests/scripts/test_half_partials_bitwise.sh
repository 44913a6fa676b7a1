#!/usr/bin/env bash
# test_half_partials_bitwise.sh BUILD SRC — --enable-half-partials stores its partial sums in 16
# bits (docs/precision.md "Half partials"): the gradient accumulators (state buffer) and the
# kernels' partial-sum buffers.  A model with every kind of kernel partial (3x3 and 1x1 conv
# grad_weight, groupnorm dgamma, grouped / depthwise / strided / dilated grad_weight, and a 5x5
# stride-4 conv whose top taps no output row reaches), accumulation 2 x replicas 2:
#  - trained 4 updates with 16-bit storage and with --tune half_partials_f32=1 (f32 buffers
#    rounded at the same points): the checkpoints are byte for byte equal, bf16 and fp16, and
#    differ from a run without half partials (so the comparison sees the rounding);
#  - the report's half_partials entries say "16 bits" with the bytes saved (> 0: the
#    accumulators and every grad_weight kernel; groupnorm dgamma stays in its f32 output:
#    "f32, rounded to 16 bits", 0), "f32, rounded to 16 bits" and 0 everywhere under
#    half_partials_f32=1; the accumulators' bytes saved are the drop of the report's
#    memory total and of the planned bytes `cnnrun info` prints.
set -u
. "$(dirname "$0")/lib.sh"
script_args "$@"

cat >"$T/m.yml" <<'Y'
name: partials
input: {shape: [8, 12, 12], dtype: f32, classes: 5}
layers:
  - {name: c0, op: conv, filters: 16, kernel: 3, padding: 1}
  - {name: gn0, op: groupnorm, groups: 4}
  - {name: r0, op: relu}
  - {name: p0, op: conv, filters: 16, kernel: 1}
  - {name: q0, op: relu}
  - {name: c1, op: conv, filters: 16, kernel: 3, padding: 1, groups: 2}
  - {name: r1, op: relu}
  - {name: dw1, op: conv, filters: 16, kernel: 3, padding: 1, stride: 2, groups: 16}
  - {name: r2, op: relu}
  - {name: c3, op: conv, filters: 16, kernel: 5, padding: 2, stride: 4, groups: 4}
  - {name: r3, op: relu}
  - {name: c4, op: conv, filters: 32, kernel: 3, padding: 2, dilation: 2, groups: 8}
  - {name: g, op: global_avgpool}
  - {name: f, op: flatten}
  - {name: d1, op: dense, units: 5}
Y

# build NAME HALF F32 [FLAG]: $T/NAME.so and its report $T/NAME.json, --tune half_partials_f32=F32
build() {
  local n=$1 h=$2 f32=$3
  shift 3
  cnnc_as "$n" "$T/m.yml" --tune half_partials_f32="$f32" --mode training --optimizer momentum --batch-size 4 --seed 3 \
    --precision 16.32 --half-type "$h" --gradient-accumulation 2 --replicas 2 "$@" -o "$T/$n.so" --report "$T/$n" && ok
}
planned() { "$CNNRUN" "$T/$1.so" info | sed -n 's/.*micro_batch.*planned \([0-9]*\) bytes.*/\1/p'; }

for h in bf16 fp16; do
  build "h16$h" "$h" 0 --enable-half-partials
  build "h32$h" "$h" 1 --enable-half-partials
  build "off$h" "$h" 0
  # 4 updates of 2 x 2 micro-batches of 4 synthetic samples, checkpoint in $T/NAME.ck
  for n in "h16$h" "h32$h" "off$h"; do train_synth "$T/$n.so" "$T/$n.ck" --limit 64 --lr 0.05 && ok; done
  same_bytes "$(ckpt "$T/h16$h.ck")" "$(ckpt "$T/h32$h.ck")" "$h: 16-bit and f32 partial storage trained differently"
  differ "$(ckpt "$T/h16$h.ck")" "$(ckpt "$T/off$h.ck")" "$h: half partials changed nothing"
  p16=$(planned "h16$h") p32=$(planned "h32$h")
  if "$PY" - "$T" "$h" "$p16" "$p32" >"$T/py.out" 2>&1 <<'P'; then ok; else bad "$(cat "$T/py.out")"; fi
import json, sys
t, h, p16, p32 = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
rep = lambda n: json.load(open(f"{t}/{n}{h}.json"))
a, b = rep("h16"), rep("h32")
wa, wb = a["half_partials"]["where"], b["half_partials"]["where"]
assert [w["kind"] for w in wa] == [w["kind"] for w in wb], (wa, wb)
acc = [w for w in wa if w["kind"] == "gradient_accumulators"]
assert len(acc) == 1 and acc[0]["stored"] == "16 bits" and acc[0]["bytes_saved"] > 0, acc
grouped = [w for w in wa if w["kind"] == "grad_weight_grouped"]
assert len(grouped) == 4, grouped
kinds = sorted(w["kind"] for w in wa if w["node"])
assert "grad_weight_lanes" in kinds and "grad_weight_gemm" in kinds and "groupnorm_dgamma" in kinds, kinds
for w in wa:  # every kernel buffer 16-bit; groupnorm dgamma stays in its f32 output
    want16 = w["kind"] != "groupnorm_dgamma"
    assert (w["stored"] == "16 bits") == want16 and (w["bytes_saved"] > 0) == want16, w
assert all(w["stored"] == "f32, rounded to 16 bits" and w["bytes_saved"] == 0 for w in wb), wb
total = lambda r: sum(s["memory"]["total"] for s in r["shards"])
assert total(b) - total(a) == acc[0]["bytes_saved"], (total(b), total(a), acc[0])
assert p32 - p16 == acc[0]["bytes_saved"], (p32, p16, acc[0])
print(h, "accumulators save", acc[0]["bytes_saved"], "bytes; kernels:",
      ", ".join(f'{w["node"]} {w["bytes_saved"]}' for w in wa if w["node"]))
P
  cat "$T/py.out"
done
finish
