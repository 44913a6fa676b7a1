#!/usr/bin/env bash
# test_amx.sh BUILD SRC — the AMX microkernel of the bf16 conv route (conv/bf16.c amx_tile,
# cg_isa.c cg_amx_*) for a CPU with AMX-BF16, on a machine that may not have it.
#  1. tests/bf16/bottleneck_bf16.yml --precision 16.16 --half-type bf16 --target-cpu
#     sapphirerapids --emit asm: the six flat 1x1 convs are `..._bf16_<RxP>__amxbf16` kernels,
#     each with one ldtilecfg and one tilerelease, tdpbf16ps and tile loads in a K loop or
#     unrolled, and every tdpbf16ps of the .s is in such a kernel (the 3x3 and the other ops
#     have none); the plan says "AMX tdpbf16ps tiles".  --tune amx=0: no tile instruction.
#  2. The sapphirerapids .so needs amx-tile,amx-bf16 (cnnrun info on an AMX host; refused at
#     open elsewhere with a message naming them and exit status 1, not SIGILL).
#  3. The emulated kernels (--tune amx=2, the host's target) run everywhere: logits bitwise
#     those of the vdpbf16ps route (--tune amx=0,bf16=2,bf16_emulate=1: the same summation
#     order; the K padding adds +0s only), 1 and 2 threads.
#  4. On a CPU with AMX: the tdpbf16ps build's logits within 5e-3 of the max |logit| of the
#     emulated build's (AMX sums in another order, docs/precision.md "AMX"), 1 and 2 threads
#     bitwise.  Elsewhere this part is skipped (exit 77 when everything else passed).
#  5. int8 on tdpbsud tiles (cifar_resnet8 --precision int8): the sapphirerapids asm has
#     `_amxint8` kernels with tdpbsud, one ldtilecfg and one tilerelease each; the emulated
#     (tune amx=2) and, on a CPU with AMX-INT8, native logits are bitwise the vector int8 build's.
set -u
. "$(dirname "$0")/lib.sh"
script_args "$@"
M="$SRC/tests/bf16/bottleneck_bf16.yml"
B16=(--precision 16.16 --half-type bf16 --batch-size 2)

# 1. the kernels for an AMX target
if cnnc_as sasm "$M" "${B16[@]}" --target-cpu sapphirerapids --emit asm -o "$T/s.s"; then
  awk '
    function flush() { if (k != "") print k, dp, cfg, rel, ld }
    /^cnnk_[A-Za-z0-9_]*:/ { flush(); k = $1; sub(":", "", k); dp = 0; cfg = 0; rel = 0; ld = 0; next }
    /^\.Lfunc_end/ { flush(); k = ""; next }
    k == "" { next }
    /tdpbf16ps/ { dp++ }
    /ldtilecfg/ { cfg++ }
    /tilerelease/ { rel++ }
    /tileloadd/ { ld++ }
  ' "$T/s.s" >"$T/kernels"
  namx=$(grep -c '_bf16_[0-9]*x[0-9]*__amxbf16' "$T/kernels")
  [ "$namx" = 6 ] && ok || bad "want 6 AMX conv kernels, got $namx: $(cat "$T/kernels")"
  in_k=0
  while read -r k dp cfg rel ld; do
    case "$k" in
    *__amxbf16*)
      in_k=$((in_k + dp))
      [ "$dp" -gt 0 ] && [ "$ld" -gt 0 ] && [ "$cfg" = 1 ] && [ "$rel" = 1 ] && ok ||
        bad "$k: tdpbf16ps $dp, tileloadd $ld, ldtilecfg $cfg, tilerelease $rel" ;;
    *) [ "$dp$cfg$rel$ld" = 0000 ] && ok || bad "$k: tile instructions outside the AMX kernels" ;;
    esac
  done <"$T/kernels"
  [ "$in_k" = "$(grep -c tdpbf16ps "$T/s.s")" ] && ok || bad "tdpbf16ps outside the kernels"
fi
if cnnc_as splan "$M" "${B16[@]}" --target-cpu sapphirerapids --emit plan -o "$T/s.plan"; then
  grep -q '^# bf16 convs: AMX tdpbf16ps tiles' "$T/s.plan" && ok || bad "plan header: $(grep '^# bf16' "$T/s.plan")"
fi
if cnnc_as s0 "$M" "${B16[@]}" --target-cpu sapphirerapids --tune amx=0 --emit asm -o "$T/s0.s"; then
  [ "$(grep -c -E 'tdpbf16ps|ldtilecfg|tileloadd' "$T/s0.s")" = 0 ] && ok || bad "--tune amx=0: tile instructions"
fi

# 2. the .so needs AMX
cnnc_as spr "$M" "${B16[@]}" --target-cpu sapphirerapids -o "$T/spr.so"
amx=0
grep -qw amx_bf16 /proc/cpuinfo && grep -qw amx_tile /proc/cpuinfo && amx=1
if [ $amx = 1 ]; then
  expect 0 "amx-tile,amx-bf16" -- "$T/spr.so" info
else
  expect 1 "compiled for CPU features this CPU lacks: .*amx-tile, amx-bf16" -- "$T/spr.so" benchmark --batches 1 --runs 1 --warmup 0
fi

# 3. emulated tiles vs the vdpbf16ps route (both emulated where the host lacks avx512bf16)
randn "$T/x.raw" 5 $((4 * 5 * 14 * 14))
cnnc_as emu "$M" "${B16[@]}" --tune amx=2 -o "$T/emu.so" &&
  cnnc_as vdp "$M" "${B16[@]}" --tune amx=0,bf16=2,bf16_emulate=1 -o "$T/vdp.so" &&
  same_infer emu vdp "$T/x.raw" "emulated AMX logits vs the vdpbf16ps route's"

# 5. int8 (--precision int8) on tdpbsud tiles: integer sums are exact in any order, so the
#    emulated (tune amx=2) and native AMX logits are bitwise those of the vector int8 kernels
R8="$SRC/models/cifar_resnet8.yml"
randn "$T/cal8.raw" 7 $((8 * 3 * 32 * 32))
randn "$T/x8.raw" 8 $((8 * 3 * 32 * 32))
I8=(--precision int8 --calibrate "$T/cal8.raw" --batch-size 8)
if cnnc_as s8 "$R8" "${I8[@]}" --target-cpu sapphirerapids --emit asm -o "$T/s8.s"; then
  n8=$(grep -c '^cnnk_[A-Za-z0-9_]*_int8_[us]8_[0-9x]*__amxint8_n[0-9]*:' "$T/s8.s")
  [ "$n8" -ge 3 ] && [ "$(grep -c tdpbsud "$T/s8.s")" -ge "$n8" ] && [ "$(grep -c ldtilecfg "$T/s8.s")" = "$n8" ] &&
    [ "$(grep -c tilerelease "$T/s8.s")" = "$n8" ] && ok ||
    bad "int8 AMX kernels $n8, tdpbsud $(grep -c tdpbsud "$T/s8.s"), ldtilecfg $(grep -c ldtilecfg "$T/s8.s")"
fi
cnnc_as e8 "$R8" "${I8[@]}" --tune amx=2 -o "$T/e8.so" && cnnc_as v8 "$R8" "${I8[@]}" --tune amx=0 -o "$T/v8.so" &&
  same_infer e8 v8 "$T/x8.raw" "emulated AMX int8 logits vs the vector int8 kernels'"
grep -qw amx_int8 /proc/cpuinfo || amx=0
if [ $amx = 1 ]; then
  cnnc_as n8 "$R8" "${I8[@]}" --target-cpu sapphirerapids -o "$T/n8.so" &&
    same_infer n8 v8 "$T/x8.raw" "native AMX int8 logits vs the vector int8 kernels'"
fi

# 4. natively
if [ $amx = 1 ]; then
  same_infer spr spr "$T/x.raw" "AMX logits, run twice"
  infer_as spr "$T/x.raw" --threads 1 && cp "$T/spr.y" "$T/spr1.y" && infer_as spr "$T/x.raw" --threads 2 &&
    same_bytes "$T/spr1.y" "$T/spr.y" "AMX logits, 1 vs 2 threads"
  infer_as emu "$T/x.raw" --threads 2
  if msg=$("$PY" - "$T" <<'P'
import struct, sys
def rd(p):
    b = open(sys.argv[1] + "/" + p + ".y", "rb").read()
    return struct.unpack("%df" % (len(b) // 4), b)
a, e = rd("spr"), rd("emu")
assert len(a) == 40 and len(e) == 40, (len(a), len(e))
r = max(abs(x - y) for x, y in zip(a, e)) / max(abs(y) for y in e)
print("AMX vs emulated: %.3g of max |logit| (bound 5e-3)" % r)
sys.exit(0 if r <= 5e-3 else 1)
P
  ); then
    ok
    echo "$msg"
  else
    bad "$msg"
  fi
else
  skip_part "no AMX on this CPU: the tdpbf16ps kernels were compiled and inspected, not run"
fi
finish
