#!/usr/bin/env bash
# test_precision_fusion.sh BUILD SRC — --precision 16.16 inference: round16 fused into the conv
# epilogue (passes/fuse.c, cg_epilogue) is bitwise the separate round16 kernels
# (--tune round16_fusion=0), bf16 and fp16, batch 1 and 5 (partial tiles), 1 and 2 threads;
# and the fused model has fewer kernels (cifar_resnet8: 12 + 9 round16 kernels -> 14).
# CNNC_TEST_QUICK=1 (quick mode): bf16 at batch 1 and fp16 at batch 5 only.
set -u
. "$(dirname "$0")/lib.sh"
script_args "$@"

M="$SRC/models/cifar_resnet8.yml"
# 10 samples of N(0,1) input, deterministic
randn "$T/x.f32" 5 $((10 * 3 * 32 * 32)) || { finish; exit; }

ops() { "$CNNRUN" "$1" info | sed -n 's/.*: \([0-9]*\) ops,.*/\1/p' | head -1; }

for half in bf16 fp16; do
  for bs in 1 5; do
    tag="$half batch $bs"
    if quick && [ "$half$bs" = bf165 -o "$half$bs" = fp161 ]; then continue; fi
    set -- "$M" --precision 16.16 --half-type "$half" --batch-size "$bs" --seed 3
    cnnc_as f "$@" -o "$T/f.so" && cnnc_as u "$@" --tune round16_fusion=0 -o "$T/u.so" || continue
    nf=$(ops "$T/f.so") nu=$(ops "$T/u.so")
    if [ "$nf" = 14 ] && [ "$nu" = 21 ]; then ok; else bad "$tag: kernels fused $nf (want 14), unfused $nu (want 21)"; fi
    if "$CNNRUN" "$T/f.so" benchmark --profile --batches 1 --runs 1 2>&1 | grep -q "conv2d_bn_add_relu_round16"; then ok
    else bad "$tag: no conv2d_bn_add_relu_round16 kernel in the profile"; fi
    same_infer f u "$T/x.f32" "$tag: fused and unfused outputs differ" --format raw
  done
done
# the fused outputs are 16-bit-rounded values, not f32 (the rounding was not dropped): the
# unfused pre-round values of an f32 compile differ
cnnc_as f32 "$M" --batch-size 5 --seed 3 -o "$T/f32.so" && infer_as f32 "$T/x.f32" --format raw
differ "$T/f32.y" "$T/f.y" "16.16 outputs equal to f32: rounding lost"
finish
