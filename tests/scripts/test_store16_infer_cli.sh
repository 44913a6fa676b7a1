#!/usr/bin/env bash
# test_store16_infer_cli.sh BUILD SRC — 16-bit storage of inference activations (docs/precision.md
# "16-bit storage of inference activations"): cifar_resnet8 --precision 16.16, bf16 and fp16,
# with and without --tune store16=0:
#  - the outputs of `cnnrun infer` are cmp-identical (1 and 2 threads, batch 1 and 5);
#  - `cnnrun info`'s scratch bytes, the report's `arena` and `activations` are lower with 16-bit
#    storage; the model's input and output stay f32 in `cnnrun info`;
#  - `cnnc -v` reports the values stored in 16 bits; the kernels carry the 16-bit markers;
#  - --memory-limit counts the 16-bit sizes (a limit between the two needs fits only 16-bit).
set -u
. "$(dirname "$0")/lib.sh"
script_args "$@"

M="$SRC/models/cifar_resnet8.yml"
randn "$T/x5.f32" 7 $((5 * 3 * 32 * 32)) || { finish; exit; }
head -c $((3 * 32 * 32 * 4)) "$T/x5.f32" >"$T/x1.f32"

scratch() { "$CNNRUN" "$1" info | sed -n 's/.*scratch \([0-9]*\) bytes.*/\1/p' | head -1; }
mem() { "$PY" -c "import json,sys; print(json.load(open(sys.argv[1]))['shards'][0]['memory'][sys.argv[2]])" "$1" "$2"; }

for half in bf16 fp16; do
  for bs in 1 5; do
    tag="$half batch $bs"
    set -- "$M" --precision 16.16 --half-type "$half" --batch-size "$bs" --seed 3
    cnnc_as s "$@" -v --report "$T/s" -o "$T/s.so" && cnnc_as f "$@" --tune store16=0 --report "$T/f" -o "$T/f.so" || continue
    if grep -q "16-bit storage (inference): [1-9][0-9]* values" "$T/s.log"; then ok; else bad "$tag: cnnc -v reports no 16-bit values"; fi
    ss=$(scratch "$T/s.so") sf=$(scratch "$T/f.so")
    if [ -n "$ss" ] && [ -n "$sf" ] && [ "$ss" -lt "$sf" ]; then ok; else bad "$tag: info scratch 16-bit $ss not below f32 $sf"; fi
    for k in arena activations; do
      a=$(mem "$T/s.json" $k) b=$(mem "$T/f.json" $k)
      if [ -n "$a" ] && [ -n "$b" ] && [ "$a" -lt "$b" ]; then ok; else bad "$tag: report $k 16-bit $a not below f32 $b"; fi
    done
    echo "$tag: scratch $ss vs $sf bytes, report activations $(mem "$T/s.json" activations) vs $(mem "$T/f.json" activations)"
    if "$CNNRUN" "$T/s.so" info | grep -q "input  *input  f32" && "$CNNRUN" "$T/s.so" info | grep -q "outputs  *fc  f32"; then ok
    else bad "$tag: input/output not f32 in cnnrun info"; fi
    if "$CNNRUN" "$T/s.so" benchmark --profile --batches 1 --runs 1 2>&1 | grep -q "_${half}_x16_o16_"; then ok
    else bad "$tag: no conv kernel reading and writing $half in the profile"; fi
    if [ "$bs" = 5 ]; then # --memory-limit sees the 16-bit sizes: 800 000 bytes fit 16-bit storage (~717 000), not f32 (~1 045 000)
      if "$CNNC" "$M" --precision 16.16 --half-type "$half" --batch-size 5 --memory-limit 800000 -o "$T/ml.so" >"$T/ml.log" 2>&1; then ok
      else bad "$tag: --memory-limit 800000 refused with 16-bit storage: $(tail -1 "$T/ml.log")"; fi
      if ! "$CNNC" "$M" --tune store16=0 --precision 16.16 --half-type "$half" --batch-size 5 --memory-limit 800000 -o "$T/ml.so" >"$T/ml.log" 2>&1 &&
         grep -q "over --memory-limit" "$T/ml.log"; then ok
      else bad "$tag: --memory-limit 800000 accepted with f32 storage"; fi
    fi
    same_infer s f "$T/x$bs.f32" "$tag: 16-bit and f32 storage outputs differ" --format raw
  done
done
finish
