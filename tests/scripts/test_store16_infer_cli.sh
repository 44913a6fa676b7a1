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
BUILD=${1:?usage: test_store16_infer_cli.sh BUILD SRC}
SRC=${2:?usage: test_store16_infer_cli.sh BUILD SRC}
CNNC="$BUILD/cnnc"
CNNRUN="$BUILD/cnnrun"
. "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3

M="$SRC/models/cifar_resnet8.yml"
"$PY" -c "
import random, struct, sys
r = random.Random(7)
open(sys.argv[1], 'wb').write(struct.pack('<%df' % (5 * 3 * 32 * 32), *[r.gauss(0, 1) for _ in range(5 * 3 * 32 * 32)]))
" "$T/x.f32" || { bad "input generation"; finish; exit; }

scratch() { "$CNNRUN" "$1" info | sed -n 's/.*scratch \([0-9]*\) bytes.*/\1/p' | head -1; }
mem() { "$PY" -c "import json,sys; print(json.load(open(sys.argv[1]))['shards'][0]['memory'][sys.argv[2]])" "$1" "$2"; }

for half in bf16 fp16; do
  for bs in 1 5; do
    tag="$half batch $bs"
    if ! "$CNNC" "$M" --precision 16.16 --half-type "$half" --batch-size "$bs" --seed 3 -v --report "$T/s" -o "$T/s.so" >"$T/log" 2>&1 ||
       ! "$CNNC" "$M" --tune store16=0 --precision 16.16 --half-type "$half" --batch-size "$bs" --seed 3 --report "$T/f" -o "$T/f.so" >>"$T/log" 2>&1; then
      bad "$tag: compile: $(tail -3 "$T/log")"
      continue
    fi
    if grep -q "16-bit storage (inference): [1-9][0-9]* values" "$T/log"; then ok; else bad "$tag: cnnc -v reports no 16-bit values"; fi
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
    for th in 1 2; do
      if [ "$bs" = 1 ]; then "$PY" -c "import sys; d=open(sys.argv[1],'rb').read(); open(sys.argv[2],'wb').write(d[:3*32*32*4])" "$T/x.f32" "$T/x1.f32"; X="$T/x1.f32"; else X="$T/x.f32"; fi
      "$CNNRUN" "$T/s.so" infer --input "$X" --format raw --output "$T/ys" --threads "$th" >/dev/null 2>&1 &&
        "$CNNRUN" "$T/f.so" infer --input "$X" --format raw --output "$T/yf" --threads "$th" >/dev/null 2>&1 ||
        { bad "$tag threads $th: infer failed"; continue; }
      if [ -s "$T/ys" ] && cmp -s "$T/ys" "$T/yf"; then ok; else bad "$tag threads $th: 16-bit and f32 storage outputs differ"; fi
    done
  done
done
finish
