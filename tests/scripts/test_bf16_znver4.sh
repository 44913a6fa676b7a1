#!/usr/bin/env bash
# test_bf16_znver4.sh BUILD SRC — the bf16 route (codegen/gen_conv_bf16.c) for a CPU with
# avx512bf16, on a machine that may not have it: only compiled and inspected here.
#  1. tests/bf16/bottleneck_bf16.yml --precision 16.16 --target-cpu znver4 --emit asm: the six
#     flat 1x1 convs are `..._bf16_<RxP>__avx512bf16` kernels containing vdpbf16ps, the 3x3
#     conv keeps its f32 kernel without it, and no vdpbf16ps loop (a block branching back to
#     itself) touches a fixed stack slot (a spill or reload would be `N(%rsp)`; the packed
#     input panel is read as `N(%rsp,%reg)`).  32.32 and fp16 builds for znver4 have no vdpbf16ps.
#  2. A .so for znver4 is refused at open on a CPU without avx512f/avx512bf16 with a clear
#     message and exit status 1 (not SIGILL).  The host build runs.
#  3. On a CPU with them the znver4 .so runs: its logits (6 N(0,1) samples, 3 micro-batches, 2
#     threads) must be bitwise those of the same kernels with vdpbf16ps emulated (znver4
#     -avx512bf16 with --tune bf16_emulate=1: the same tiles, an exact emulation), within 5e-3 of
#     the max |logit| of the f32 kernels' 16.16 build (--tune bf16=0; docs/precision.md "bf16
#     arithmetic": an f32 sum in another order) and within 0.1 of fp32's (32.32).
set -u
. "$(dirname "$0")/lib.sh"
script_args "$@"
M="$SRC/tests/bf16/bottleneck_bf16.yml"
# z4 NAME ARGS...: cnnc_as NAME, the model for znver4 at batch 2 with ARGS
z4() {
  local n=$1
  shift
  cnnc_as "$n" "$M" --target-cpu znver4 --batch-size 2 "$@"
}

if z4 zasm --precision 16.16 --emit asm -o "$T/z.s"; then
  # per kernel: name, vdpbf16ps count, dot-product loops (a block holding vdpbf16ps that
  # branches back to its own label: the K loop; small K is unrolled into straight code), and
  # fixed stack operands inside those loops (spills/reloads)
  awk '
    function flush() { if (k != "") print k, n, loops, s }
    /^cnnk_[A-Za-z0-9_]*:/ { flush(); k = $1; sub(":", "", k); n = 0; loops = 0; s = 0; lab = ""; next }
    /^\.Lfunc_end/ { flush(); k = ""; next }
    k == "" { next }
    /^\.LBB[0-9_]*:/ { lab = $1; sub(":", "", lab); hasdp = 0; bs = 0; next }
    /vdpbf16ps/ { n++; hasdp = 1 }
    /[-0-9]*\(%r[sb]p\)/ { bs++ }
    /^[ \t]*j[a-z]*[ \t]+\.LBB/ { if ($2 == lab && hasdp) { loops++; s += bs } lab = ""; hasdp = 0; bs = 0 }
  ' "$T/z.s" >"$T/kernels"
  nbf=$(grep -c '_bf16_[0-9]*x[0-9]*__avx512bf16' "$T/kernels")
  [ "$nbf" = 6 ] && ok || bad "want 6 bf16 conv kernels for znver4, got $nbf: $(cat "$T/kernels")"
  all_loops=0
  while read -r k n l s; do
    case "$k" in
    *_bf16_*__avx512bf16*)
      all_loops=$((all_loops + l))
      [ "$n" -gt 0 ] && ok || bad "$k: no vdpbf16ps"
      [ "$s" = 0 ] && ok || bad "$k: $s fixed stack operands in its vdpbf16ps loops (spills)" ;;
    *conv2d*)
      [ "$n" = 0 ] && ok || bad "$k: an f32 kernel with vdpbf16ps" ;;
    esac
  done <"$T/kernels"
  [ "$all_loops" -ge 4 ] && ok || bad "only $all_loops vdpbf16ps loops found (the spill check would be empty)"
  grep -q 'conv2d_vc_bn_relu_round16_f32_.*__avx512' "$T/kernels" && ok || bad "the 3x3 conv's f32 kernel is missing"
  echo "znver4 kernels (name, vdpbf16ps, vdpbf16ps loops, stack operands in them):"
  cat "$T/kernels"
fi
for opt in "--precision 32.32" "--precision 16.16 --half-type fp16 --target-features +f16c"; do
  # shellcheck disable=SC2086
  if z4 other $opt --emit asm -o "$T/o.s"; then
    [ "$(grep -c vdpbf16ps "$T/o.s")" = 0 ] && ok || bad "znver4 $opt: vdpbf16ps without bf16 inputs"
  fi
done

# 2. refused at open, not SIGILL
z4 z4 --precision 16.16 -o "$T/z4.so"
cnnc_as h "$M" --precision 16.16 --batch-size 2 -o "$T/h.so"
if grep -qwE "avx512_?bf16" /proc/cpuinfo && grep -qw avx512f /proc/cpuinfo; then # Linux: avx512_bf16
  expect 0 "img/s|latency" -- "$T/z4.so" benchmark --batches 1 --runs 1 --warmup 0
  # 3. the vdpbf16ps kernels executed: vs their emulation, the f32 kernels and fp32
  z4 e4 --tune bf16_emulate=1 --precision 16.16 --target-features=-avx512bf16 -o "$T/e4.so"
  z4 n4 --tune bf16=0 --precision 16.16 -o "$T/n4.so"
  z4 f4 --precision 32.32 -o "$T/f4.so"
  if z4 e4asm --tune bf16_emulate=1 --precision 16.16 --target-features=-avx512bf16 --emit asm -o "$T/e4.s"; then
    # the emulated build has the same bf16 tiles as the native one, and no vdpbf16ps
    want=$(grep -o '_bf16_[0-9]*x[0-9]*__avx512bf16' "$T/kernels" | sed 's/bf16$//' | sort | tr '\n' ' ')
    got=$(grep -o '^cnnk_[A-Za-z0-9_]*_bf16_[0-9]*x[0-9]*__avx512_bf16emu' "$T/e4.s" | grep -o '_bf16_[0-9]*x[0-9]*__avx512' |
      sort | tr '\n' ' ')
    [ -n "$want" ] && [ "$want" = "$got" ] && ok || bad "emulated tiles '$got', native '$want'"
    [ "$(grep -c vdpbf16ps "$T/e4.s")" = 0 ] && ok || bad "the emulated build has vdpbf16ps"
  fi
  randn "$T/x.raw" 3 $((6 * 5 * 14 * 14))
  for s in z4 e4 n4 f4; do infer_as "$s" "$T/x.raw" --threads 2; done
  same_bytes "$T/z4.y" "$T/e4.y" "vdpbf16ps logits not bitwise the emulation's"
  if msg=$(python3 - "$T" <<'P'
import struct, sys
def rd(p):
    b = open(sys.argv[1] + "/" + p + ".y", "rb").read()
    return struct.unpack("%df" % (len(b) // 4), b)
z, n, f = rd("z4"), rd("n4"), rd("f4")
assert len(z) == 60 and len(n) == len(z) and len(f) == len(z), (len(z), len(n), len(f))
def rel(a, b):
    return max(abs(x - y) for x, y in zip(a, b)) / max(abs(y) for y in b)
rn, rf = rel(z, n), rel(z, f)
print("vdpbf16ps vs the f32 kernels' 16.16 %.3g (bound 5e-3), vs fp32 %.3g (bound 0.1)" % (rn, rf))
sys.exit(0 if rn <= 5e-3 and rf <= 0.1 else 1)
P
  ); then
    ok
    echo "$msg"
  else
    bad "$msg"
  fi
else
  expect 1 "compiled for CPU features this CPU lacks: .*avx512bf16" -- "$T/z4.so" benchmark --batches 1 --runs 1 --warmup 0
  expect 1 "compiled for CPU features this CPU lacks" -- "$T/z4.so" info
fi
expect 0 "img/s|latency" -- "$T/h.so" benchmark --batches 1 --runs 1 --warmup 0
finish
