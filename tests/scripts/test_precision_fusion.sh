#!/usr/bin/env bash
# test_precision_fusion.sh BUILD SRC — --precision 16.16 inference: round16 fused into the conv
# epilogue (passes/fuse.c, cg_epilogue) is bitwise the separate round16 kernels
# (--tune round16_fusion=0), bf16 and fp16, batch 1 and 5 (partial tiles), 1 and 2 threads;
# and the fused model has fewer kernels (cifar_resnet8: 12 + 9 round16 kernels -> 14).
# CNNC_TEST_QUICK=1 (CI's sanitizer stage): bf16 at batch 1 and fp16 at batch 5 only.
set -u
BUILD=${1:?usage: test_precision_fusion.sh BUILD SRC}
SRC=${2:?usage: test_precision_fusion.sh BUILD SRC}
CNNC="$BUILD/cnnc"
CNNRUN="$BUILD/cnnrun"
. "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3

M="$SRC/models/cifar_resnet8.yml"
# 10 samples of N(0,1) input, deterministic
"$PY" -c "
import random, struct, sys
r = random.Random(5)
open(sys.argv[1], 'wb').write(struct.pack('<%df' % (10 * 3 * 32 * 32), *[r.gauss(0, 1) for _ in range(10 * 3 * 32 * 32)]))
" "$T/x.f32" || { bad "input generation"; finish; exit; }

ops() { "$CNNRUN" "$1" info | sed -n 's/.*: \([0-9]*\) ops,.*/\1/p' | head -1; }

for half in bf16 fp16; do
  for bs in 1 5; do
    tag="$half batch $bs"
    if [ -n "${CNNC_TEST_QUICK:-}" ] && [ "$CNNC_TEST_QUICK" != 0 ] && [ "$half$bs" = bf165 -o "$half$bs" = fp161 ]; then continue; fi
    if ! "$CNNC" "$M" --precision 16.16 --half-type "$half" --batch-size "$bs" --seed 3 -o "$T/f.so" >"$T/log" 2>&1 ||
       ! "$CNNC" "$M" --tune round16_fusion=0 --precision 16.16 --half-type "$half" --batch-size "$bs" --seed 3 -o "$T/u.so" >>"$T/log" 2>&1; then
      bad "$tag: compile: $(tail -3 "$T/log")"
      continue
    fi
    nf=$(ops "$T/f.so") nu=$(ops "$T/u.so")
    if [ "$nf" = 14 ] && [ "$nu" = 21 ]; then ok; else bad "$tag: kernels fused $nf (want 14), unfused $nu (want 21)"; fi
    if "$CNNRUN" "$T/f.so" benchmark --profile --batches 1 --runs 1 2>&1 | grep -q "conv2d_bn_add_relu_round16"; then ok
    else bad "$tag: no conv2d_bn_add_relu_round16 kernel in the profile"; fi
    for th in 1 2; do
      "$CNNRUN" "$T/f.so" infer --input "$T/x.f32" --format raw --output "$T/yf" --threads "$th" >/dev/null 2>&1 &&
        "$CNNRUN" "$T/u.so" infer --input "$T/x.f32" --format raw --output "$T/yu" --threads "$th" >/dev/null 2>&1 ||
        { bad "$tag threads $th: infer failed"; continue; }
      if [ -s "$T/yf" ] && cmp -s "$T/yf" "$T/yu"; then ok; else bad "$tag threads $th: fused and unfused outputs differ"; fi
    done
  done
done
# the fused outputs are 16-bit-rounded values, not f32 (the rounding was not dropped): the
# unfused pre-round values of an f32 compile differ
"$CNNC" "$M" --batch-size 5 --seed 3 -o "$T/f32.so" >"$T/log" 2>&1 &&
  "$CNNRUN" "$T/f32.so" infer --input "$T/x.f32" --format raw --output "$T/y32" >/dev/null 2>&1 || bad "f32 compile/infer"
if [ -s "$T/y32" ] && ! cmp -s "$T/yf" "$T/y32"; then ok; else bad "16.16 outputs equal to f32: rounding lost"; fi
finish
