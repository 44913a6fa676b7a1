#!/usr/bin/env bash
# test_kernel_share.sh BUILD SRC — kernel sharing (codegen/cg_share.c, docs/codegen.md "Compile
# time"): nodes whose kernels have the same IR apart from their constant blobs call one body,
# each with its own blob; --tune kernel_share=0 generates one kernel per node.  Checks that
#  - sharing happens: cifar_resnet20's repeated blocks give fewer distinct bodies than kernels
#    (cnnc -v), the knob gives as many as kernels, and the .so has "_shared" bodies;
#  - results do not change: inference logits bitwise equal with and without sharing, and the
#    single-module path (--emit llvm) shares too and names every node's kernel;
#  - training (kernels without blobs: aliases): the weights after 4 synthetic steps are
#    bitwise equal with and without sharing.
set -u
. "$(dirname "$0")/lib.sh"
script_args "$@"
M="$SRC/models/cifar_resnet20.yml"

# build NAME SHARE(0|1) ARGS...: cnnc -v with or without sharing, stderr in $T/NAME.log
build() { cnnc_as "$1" "$M" -v --tune kernel_share="$2" "${@:3}" && ok; }
# counts NAME: "KERNELS BODIES" from cnnc -v's codegen line
counts() { sed -n 's/.*codegen \([0-9]*\) kernels (\([0-9]*\) distinct bodies).*/\1 \2/p' "$T/$1.log"; }

build share 1 --batch-size 2 -o "$T/share.so"
build noshare 0 --batch-size 2 -o "$T/noshare.so"
read -r k b <<<"$(counts share)"
[ -n "${b:-}" ] && [ "$b" -lt "$k" ] && ok || bad "no kernel shared: '$(counts share)' (kernels, bodies)"
read -r k b <<<"$(counts noshare)"
[ -n "${b:-}" ] && [ "$b" = "$k" ] && ok || bad "kernel_share=0 still shares: '$(counts noshare)'"
if command -v nm >/dev/null; then
  nm "$T/share.so" | grep -q "_shared$" && ok || bad "no _shared body in the shared .so"
  nm "$T/noshare.so" | grep -q "_shared$" && bad "a _shared body with kernel_share=0" || ok
fi

randn "$T/x.raw" 7 $((2 * 3 * 32 * 32))
for s in share noshare; do infer_as "$s" "$T/x.raw"; done
same_bytes "$T/share.y" "$T/noshare.y" "logits differ with and without sharing"

build ll 1 --batch-size 2 --emit llvm -o "$T/m.ll"
grep -q "_shared(" "$T/m.ll" && ok || bad "--emit llvm: no shared body"
grep -q "^define hidden void @cnnk_s0_conv2d.*_n[0-9]*(" "$T/m.ll" && ok || bad "--emit llvm: no per-node kernel"

M="$SRC/models/cifar_resnet8.yml"
build trs 1 --mode training --batch-size 4 -o "$T/trs.so"
build trn 0 --mode training --batch-size 4 -o "$T/trn.so"
read -r k b <<<"$(counts trs)"
[ -n "${b:-}" ] && [ "$b" -lt "$k" ] && ok || bad "training: no kernel shared: '$(counts trs)'"
for s in trs trn; do train_synth "$T/$s.so" "$T/ck.$s" --limit 16; done
same_bytes "$(ckpt "$T/ck.trs")" "$(ckpt "$T/ck.trn")" "training: weights differ with and without sharing"
finish
