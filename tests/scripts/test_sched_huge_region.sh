#!/usr/bin/env bash
# test_sched_huge_region.sh BUILD SRC — cnnc sets LLVM's -dag-maps-huge-region (200 by default,
# --tune sched_huge_region=N, 0 = LLVM's 1000; codegen/cg_target.c, docs/codegen.md "Compile
# time"): the machine scheduler then folds its memory chains earlier.  Checks that
#  - the knob reaches LLVM: cifar_resnet8 for znver4 (--emit asm) schedules differently with
#    sched_huge_region=8 than with 0, and the default is not LLVM's default (200 != 1000
#    on this model's long blocks: the asm, but its options record, differs from the =0 one)
#    — x86-64 hosts only;
#  - schedules change, results do not: the host .so built with the default, =0 and =8 give
#    bitwise equal logits on the same input.
set -u
BUILD=${1:?usage: test_sched_huge_region.sh BUILD SRC}
SRC=${2:?usage: test_sched_huge_region.sh BUILD SRC}
CNNC="$BUILD/cnnc"
CNNRUN="$BUILD/cnnrun"
M="$SRC/models/cifar_resnet8.yml"
. "$(dirname "$0")/lib.sh"

# build NAME REGION ARGS...: cnnc with --tune sched_huge_region=REGION ("" = the default)
build() {
  local n=$1 r=$2
  shift 2
  if "$CNNC" "$M" --batch-size 2 ${r:+--tune sched_huge_region=$r} "$@" >"$T/$n.log" 2>&1; then ok; else
    bad "cnnc $n: $(tail -3 "$T/$n.log")"
  fi
}

if [ "$(uname -m)" = x86_64 ]; then
  for r in "" 0 8; do build "asm$r" "$r" --target-cpu znver4 --emit asm -o "$T/asm$r.s"; done
  same_code "$T/asm0.s" "$T/asm8.s" && bad "sched_huge_region=8 and =0 give the same asm" || ok
  same_code "$T/asm0.s" "$T/asm.s" && bad "the default gives LLVM's default schedule (same asm as =0)" || ok
fi

for r in "" 0 8; do build "so$r" "$r" -o "$T/so$r.so"; done
python3 -c "
import random, struct
random.seed(5)
n = 4 * 3 * 32 * 32
open('$T/x.raw', 'wb').write(struct.pack('%df' % n, *[random.gauss(0, 1) for _ in range(n)]))"
for r in "" 0 8; do
  "$CNNRUN" "$T/so$r.so" infer --input "$T/x.raw" --output "$T/y$r" >"$T/out" 2>&1 || bad "infer $r: $(tail -3 "$T/out")"
done
[ -s "$T/y" ] && cmp -s "$T/y" "$T/y0" && ok || bad "logits: default vs sched_huge_region=0 differ"
[ -s "$T/y8" ] && cmp -s "$T/y8" "$T/y0" && ok || bad "logits: sched_huge_region=8 vs =0 differ"
finish
