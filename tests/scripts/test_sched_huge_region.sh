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
. "$(dirname "$0")/lib.sh"
script_args "$@"
M="$SRC/models/cifar_resnet8.yml"

# build NAME REGION ARGS...: cnnc with --tune sched_huge_region=REGION ("" = the default)
build() { cnnc_as "$1" "$M" --batch-size 2 ${2:+--tune sched_huge_region=$2} "${@:3}" && ok; }

if [ "$(uname -m)" = x86_64 ]; then
  for r in "" 0 8; do build "asm$r" "$r" --target-cpu znver4 --emit asm -o "$T/asm$r.s"; done
  same_code "$T/asm0.s" "$T/asm8.s" && bad "sched_huge_region=8 and =0 give the same asm" || ok
  same_code "$T/asm0.s" "$T/asm.s" && bad "the default gives LLVM's default schedule (same asm as =0)" || ok
fi

for r in "" 0 8; do build "so$r" "$r" -o "$T/so$r.so"; done
randn "$T/x.raw" 5 $((4 * 3 * 32 * 32))
for r in "" 0 8; do infer_as "so$r" "$T/x.raw"; done
same_bytes "$T/so.y" "$T/so0.y" "logits: default vs sched_huge_region=0 differ"
same_bytes "$T/so8.y" "$T/so0.y" "logits: sched_huge_region=8 vs =0 differ"
finish
