#!/usr/bin/env bash
# test_pgw_switches.sh BUILD SRC — the packed grad_weight GEMM (codegen/gen_train_pgw.c) keeps
# every weight one running sum over the pixels in (n, oy, ox) order, so its plan does not change
# the trained weights.  A model with a 1x1 whose input-channel blocks depend on the minimum
# block count, 14-row maps (AVX2: chunks of 7 + 7 rows, or 12 + 2 under pgw_uneven_rows=1;
# AVX-512's chunks hold half the pixels: 5 + 5 + 4, or 6 + 6 + 2) and strided 3x3s onto 7x7
# maps (AVX2: chunks of 3 + 1 whole images, or 1 under pgw_one_image=1; AVX-512: one
# image, a 7x7 map is more than half of its chunk) and onto 4x4 maps (one chunk of 4 images on
# either, or 1 image under pgw_one_image=1),
# compiled with the defaults and with each compile-time knob (cnnc --tune pgw_prefetch=0 with
# pgw_dwpf=0, pgw_dwpf=0 alone, pgw_minblk=4, pgw_uneven_rows=1, pgw_one_image=1, all of them:
# the plan of before the fourth round), trained 3 updates at 2 threads: the checkpoints are
# byte for byte equal.  The knobs must change the code: the default grad_weight kernels
# prefetch (llvm.prefetch), those without both prefetches do not, and the code (the LLVM IR
# but its options record) of pgw_dwpf=0, pgw_uneven_rows=1, pgw_one_image=1 and pgw_minblk=4
# differs from the default's.
set -u
. "$(dirname "$0")/lib.sh"
script_args "$@"

cat >"$T/m.yml" <<'Y'
name: pgw_switches
input: {shape: [96, 14, 14], dtype: f32, classes: 5}
layers:
  - {name: c0, op: conv, filters: 32, kernel: 1, bias: false}
  - {name: r0, op: relu}
  - {name: c1, op: conv, filters: 40, kernel: 3, padding: 1}
  - {name: r1, op: relu}
  - {name: c2, op: conv, filters: 24, kernel: 3, stride: 2, padding: 1}
  - {name: r2, op: relu}
  - {name: c3, op: conv, filters: 16, kernel: 3, stride: 2, padding: 1}
  - {name: g, op: global_avgpool}
  - {name: f, op: flatten}
  - {name: d, op: dense, units: 5}
Y

# build NAME ARGS...: $T/NAME.so and $T/NAME.ll with the given cnnc arguments (--tune ...)
build() {
  local n=$1
  shift
  set -- "$T/m.yml" --mode training --optimizer momentum --batch-size 4 --seed 5 "$@"
  cnnc_as "$n" "$@" -o "$T/$n.so" && cnnc_as "$n.ll" "$@" --emit llvm -o "$T/$n.ll" && ok
}
# the knobs of each build but the default's
declare -A TUNE=([nopf]=pgw_prefetch=0,pgw_dwpf=0 [nodwpf]=pgw_dwpf=0 [min4]=pgw_minblk=4 [uneven]=pgw_uneven_rows=1
  [oneimg]=pgw_one_image=1 [old]=pgw_prefetch=0,pgw_minblk=4,pgw_uneven_rows=1,pgw_dwpf=0,pgw_one_image=1)
VARIANTS="nopf nodwpf min4 uneven oneimg old"

build def
for n in $VARIANTS; do build "$n" --tune "${TUNE[$n]}"; done
if grep -q 'define.*conv2d_grad_weight_pk_f32' "$T/def.ll"; then ok; else bad "no packed grad_weight kernel in the module"; fi
# gwfn NAME: the packed grad_weight functions of $T/NAME.ll (other kernels may prefetch too)
gwfn() { awk '/^define.*conv2d_grad_weight_pk_f32/ {on = 1} on {print} /^}/ {on = 0}' "$T/$1.ll"; }
if gwfn def | grep -q 'call void @llvm.prefetch'; then ok; else bad "the default grad_weight does not prefetch"; fi
if gwfn nopf | grep -q 'call void @llvm.prefetch'; then bad "${TUNE[nopf]} still prefetches"; else ok; fi
for n in nodwpf oneimg uneven min4; do
  if same_code "$T/def.ll" "$T/$n.ll"; then bad "${TUNE[$n]} changed nothing"; else ok; fi
done
# 3 updates of 4 synthetic samples at 2 threads, checkpoint in $T/NAME.ck
for n in def $VARIANTS; do train_synth "$T/$n.so" "$T/$n.ck" --limit 12 --lr 0.05 --threads 2 && ok; done
for n in $VARIANTS; do
  same_bytes "$(ckpt "$T/def.ck")" "$(ckpt "$T/$n.ck")" "$n trained differently from the default"
done
finish
