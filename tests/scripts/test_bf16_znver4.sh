#!/usr/bin/env bash
# test_bf16_znver4.sh BUILD SRC — the bf16 route (codegen/gen_conv_bf16.c) for a CPU with
# avx512bf16, on a machine that may not have it: only compiled and inspected here.
#  1. tests/bf16/bottleneck_bf16.yml --precision 16.16 --target-cpu znver4 --emit asm: the six
#     flat 1x1 convs are `..._bf16_<RxP>__avx512bf16` kernels containing vdpbf16ps, the 3x3
#     conv keeps its f32 kernel without it, and no vdpbf16ps loop (a block branching back to
#     itself) touches a fixed stack slot (a spill or reload would be `N(%rsp)`; the packed
#     input panel is read as `N(%rsp,%reg)`).  32.32 and fp16 builds for znver4 have no vdpbf16ps.
#  2. A .so for znver4 is refused at open on a CPU without avx512f/avx512bf16 with a clear
#     message and exit status 1 (not SIGILL); on a CPU with them it must run.  The host build runs.
set -u
BUILD=${1:?usage: test_bf16_znver4.sh BUILD SRC}
SRC=${2:?usage: test_bf16_znver4.sh BUILD SRC}
CNNC="$BUILD/cnnc"
CNNRUN="$BUILD/cnnrun"
. "$(dirname "$0")/lib.sh"
M="$SRC/tests/bf16/bottleneck_bf16.yml"

if ! "$CNNC" "$M" --precision 16.16 --target-cpu znver4 --batch-size 2 --emit asm -o "$T/z.s" >"$T/log" 2>&1; then
  bad "znver4 --emit asm: $(tail -3 "$T/log")"
else
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
  if "$CNNC" "$M" $opt --target-cpu znver4 --batch-size 2 --emit asm -o "$T/o.s" >"$T/log" 2>&1; then
    [ "$(grep -c vdpbf16ps "$T/o.s")" = 0 ] && ok || bad "znver4 $opt: vdpbf16ps without bf16 inputs"
  else
    bad "znver4 $opt: $(tail -3 "$T/log")"
  fi
done

# 2. refused at open, not SIGILL
"$CNNC" "$M" --precision 16.16 --target-cpu znver4 --batch-size 2 -o "$T/z4.so" >"$T/log" 2>&1 || bad "znver4 .so: $(tail -3 "$T/log")"
"$CNNC" "$M" --precision 16.16 --batch-size 2 -o "$T/h.so" >"$T/log" 2>&1 || bad "host .so: $(tail -3 "$T/log")"
if grep -q avx512bf16 /proc/cpuinfo && grep -q avx512f /proc/cpuinfo; then
  expect 0 "img/s|latency" -- "$T/z4.so" benchmark --batches 1 --runs 1 --warmup 0
else
  expect 1 "compiled for CPU features this CPU lacks: .*avx512bf16" -- "$T/z4.so" benchmark --batches 1 --runs 1 --warmup 0
  expect 1 "compiled for CPU features this CPU lacks" -- "$T/z4.so" info
fi
expect 0 "img/s|latency" -- "$T/h.so" benchmark --batches 1 --runs 1 --warmup 0
finish
