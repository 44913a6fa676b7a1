#!/usr/bin/env bash
# test_core_route.sh BUILD SRC — the routes chosen from a core's row of codegen/cores.def and the
# Winograd convs of --precision 16.x graphs (tune wino16), on any host (targets pinned):
#  1. the bf16 conv route (vdpbf16ps) where the row says it outruns f32 FMA: znver4 and znver5
#     take it; sapphirerapids has AMX-BF16 and takes the route's AMX kernels (tune amx=1); with
#     --tune amx=0 (vdpbf16ps 0.49x f32 FMA, measured) it keeps bf16 storage on the f32
#     kernels, with --tune amx=0,bf16=2 it takes vdpbf16ps, with bf16=0 no core does; a core without
#     a row (cooperlake) keeps the ISA's choice; skylake-avx512 has no avx512bf16.  The plan's
#     "# bf16 convs:" line and the report's target.core / target.bf16_route say so.
#  2. --precision 16.16 on the f32 kernels: cifar_resnet8's 3x3 stride-1 convs take Winograd
#     (--tune wino16=0: none); on this host the two builds' logits agree within 2^-6 of the
#     largest (Winograd's f32 sums rounded to bf16 at each layer), 1 and 2 threads bitwise, and
#     the f32 model's logits within 2^-5 of the largest.
set -u
. "$(dirname "$0")/lib.sh"
script_args "$@"

M="$SRC/models/cifar_resnet8.yml"
plan() { # plan NAME ARGS...: the plan of M at 16.16 bf16 batch 2 into $T/NAME.plan
  local n=$1
  shift
  "$CNNC" "$M" --precision 16.16 --half-type bf16 --batch-size 2 --target-cache 1M,32M --emit plan -o "$T/$n.plan" "$@" \
    >"$T/$n.log" 2>&1 || { bad "plan $n: $(tail -c 300 "$T/$n.log")"; return 1; }
}
routes() { grep -c -- "-> \(bf16\|stem\): " "$T/$1.plan"; }
header() { sed -n 's/^# bf16 convs: //p' "$T/$1.plan"; }

# ---- 1. the bf16 route by core ----------------------------------------------------------------
for cpu in znver4 znver5; do
  plan "$cpu" --target-cpu "$cpu" || continue
  [ "$(routes "$cpu")" -gt 0 ] && ok || bad "$cpu: no conv on the bf16 route"
  case "$(header "$cpu")" in "vdpbf16ps (core zen"*) ok ;; *) bad "$cpu: header '$(header "$cpu")'" ;; esac
done
if plan amx --target-cpu sapphirerapids; then
  [ "$(routes amx)" -gt 0 ] && [ "$(grep -c -- '-> bf16: .*_amxbf16' "$T/amx.plan")" = "$(routes amx)" ] && ok ||
    bad "sapphirerapids: $(routes amx) convs on the bf16 route, $(grep -c _amxbf16 "$T/amx.plan") on AMX"
  case "$(header amx)" in "AMX tdpbf16ps tiles (the target has amx-bf16"*) ok ;; *) bad "sapphirerapids: header '$(header amx)'" ;; esac
fi
if plan spr --target-cpu sapphirerapids --tune amx=0; then
  [ "$(routes spr)" = 0 ] && ok || bad "sapphirerapids: $(routes spr) convs on vdpbf16ps, slower there than f32 FMA"
  case "$(header spr)" in "f32 FMA on bf16 storage (core sapphirerapids: vdpbf16ps 0.49x"*) ok ;; *) bad "sapphirerapids: header '$(header spr)'" ;; esac
fi
if plan spr2 --target-cpu sapphirerapids --tune amx=0,bf16=2; then
  [ "$(routes spr2)" -gt 0 ] && ok || bad "sapphirerapids --tune bf16=2: no conv on the bf16 route"
  case "$(header spr2)" in "vdpbf16ps (tune bf16=2; core sapphirerapids"*) ok ;; *) bad "bf16=2: header '$(header spr2)'" ;; esac
fi
if plan z0 --target-cpu znver5 --tune bf16=0; then
  [ "$(routes z0)" = 0 ] && ok || bad "znver5 --tune bf16=0: $(routes z0) convs on the bf16 route"
fi
if plan cpl --target-cpu cooperlake; then
  [ "$(routes cpl)" -gt 0 ] && ok || bad "cooperlake (no row): no conv on the bf16 route"
  case "$(header cpl)" in *"no row in codegen/cores.def"*) ok ;; *) bad "cooperlake: header '$(header cpl)'" ;; esac
fi
if plan skx --target-cpu skylake-avx512; then
  case "$(header skx)" in "none (the target has no avx512bf16)") ok ;; *) bad "skylake-avx512: header '$(header skx)'" ;; esac
fi
# the report names the core and the decision (a full compile for the pinned target; not run)
if cnnc_as rep "$M" --precision 16.16 --batch-size 1 --target-cpu sapphirerapids --tune amx=0 --target-cache 1M,32M \
  -o "$T/rep.so" --report "$T/rep.json"; then
  "$PY" - "$T/rep.json" >"$T/rep.out" 2>&1 <<'P' && ok || bad "report: $(cat "$T/rep.out")"
import json, sys
t = json.load(open(sys.argv[1]))["target"]
assert t["core"] == "sapphirerapids", t
assert t["bf16_route"].startswith("f32 FMA on bf16 storage"), t
P
fi
# a 32.32 model has no bf16 line
"$CNNC" "$M" --batch-size 2 --target-cpu znver4 --emit plan -o "$T/f32.plan" >/dev/null 2>&1
grep -q "^# bf16 convs" "$T/f32.plan" && bad "32.32 plan has a bf16 line" || ok

# ---- 2. Winograd under --precision 16.x ------------------------------------------------------
plan w1 --target-cpu skylake-avx512 && plan w0 --target-cpu skylake-avx512 --tune wino16=0 && {
  n1=$(grep -c -- "-> wino: " "$T/w1.plan") n0=$(grep -c -- "-> wino: " "$T/w0.plan")
  [ "$n1" -gt 0 ] && [ "$n0" = 0 ] && ok || bad "Winograd convs: wino16=1 $n1 (want > 0), wino16=0 $n0 (want 0)"
  # the Winograd convs read and write f32: no 16-bit operand on them
  grep -- "-> wino: " "$T/w1.plan" | grep -q "_x16\|_o16" && bad "a Winograd conv with 16-bit operands" || ok
}
randn "$T/x.f32" 7 $((4 * 3 * 32 * 32))
S="$M --precision 16.16 --half-type bf16 --batch-size 2 --seed 3"
if cnnc_as a $S -o "$T/a.so" && cnnc_as b $S --tune wino16=0 -o "$T/b.so" &&
  cnnc_as f "$M" --batch-size 2 --seed 3 -o "$T/f.so"; then
  grep -q "wino" <("$CNNRUN" "$T/a.so" benchmark --profile --batches 1 --runs 1 2>&1) && ok ||
    bad "host: no Winograd kernel in the 16.16 build's profile"
  for th in 1 2; do
    infer_as a "$T/x.f32" --format raw --threads $th && mv "$T/a.y" "$T/a$th.y"
  done
  same_bytes "$T/a1.y" "$T/a2.y" "16.16 Winograd: 1 and 2 threads differ"
  infer_as b "$T/x.f32" --format raw && infer_as f "$T/x.f32" --format raw &&
    "$PY" - "$T/a1.y" "$T/b.y" "$T/f.y" >"$T/cmp.out" 2>&1 <<'P' && ok || bad "$(cat "$T/cmp.out")"
import struct, sys
def rd(p):
    b = open(p, "rb").read()
    return struct.unpack("<%df" % (len(b) // 4), b)
a, b, f = (rd(p) for p in sys.argv[1:4])
assert len(a) == len(b) == len(f) == 40, (len(a), len(b), len(f))
m = max(abs(v) for v in f)
eb = max(abs(x - y) for x, y in zip(a, b)) / m
ef = max(abs(x - y) for x, y in zip(a, f)) / m
print("wino16 vs direct %.3g, vs f32 %.3g of max |logit|" % (eb, ef))
assert eb <= 2**-6 and ef <= 2**-5, "wino16 vs direct %.3g (max 2^-6), vs f32 %.3g (max 2^-5)" % (eb, ef)
P
  cat "$T/cmp.out"
fi
finish
