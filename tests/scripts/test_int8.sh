#!/bin/bash
# test_int8.sh BUILD SRC — `cnnc --precision int8 --calibrate FILE` (passes/quantize.c;
# docs/precision.md "int8") from the command line.
#  1. Bad use is an error with exit status 1 naming the option or file: no --calibrate,
#     --calibrate without int8, --mode training, --calibrate-samples 0, a missing file, a file
#     that is not a whole number of samples, a sample with a NaN.
#  2. cifar_resnet8 (random weights) at batch 8 on 20 N(0,1) samples: --emit ir-after=precision
#     has a quantize8 before each of its 9 convs and "int8: 9 convs quantised" is printed; the
#     .so runs, its logits within 5 % of the largest fp32 logit, the same top-1 on 16 samples;
#     built with tune int8=3 (vpmaddwd) or quantize8_fusion=0 (quantize8 kernels of their own
#     instead of conv epilogues) its logits are bitwise the default build's.
#  3. Fashion-MNIST (skipped without it): fmnist_cnn trained for 60 Adam steps, its checkpoint
#     compiled fp32 and int8 (calibrated on 256 training images, u8 as the model's input):
#     top-1 accuracy on the first 2000 test images within 0.5 points of fp32's.
set -uo pipefail
. "$(dirname "$0")/lib.sh"
script_args "$@"
M="$SRC/models/cifar_resnet8.yml"
randn "$T/cal.raw" 1 $((20 * 3 * 32 * 32))
randn "$T/x.raw" 2 $((16 * 3 * 32 * 32))
head -c 1000 "$T/cal.raw" >"$T/short.raw"
"$PY" -c 'import struct; open("'"$T"'/nan.raw", "wb").write(struct.pack("<f", float("nan")) * (3 * 32 * 32))'

# 1. errors
err() { # err PATTERN ARGS...: cnnc ARGS exits 1 with PATTERN in its stderr
  local pat=$1
  shift
  "$CNNC" "$@" >"$T/e.out" 2>&1
  local rc=$?
  [ $rc = 1 ] && grep -q -- "$pat" "$T/e.out" && ok || bad "cnnc $* -> exit $rc, want 1 and /$pat/: $(head -c 400 "$T/e.out")"
}
err "needs --calibrate FILE" "$M" --precision int8 -o "$T/a.so"
err "sets the scales of --precision int8" "$M" --calibrate "$T/cal.raw" -o "$T/a.so"
err "int8 is for inference" "$M" --precision int8 --calibrate "$T/cal.raw" --mode training -o "$T/a.so"
err "calibrate-samples 0: must be in 1..4096" "$M" --precision int8 --calibrate "$T/cal.raw" --calibrate-samples 0 -o "$T/a.so"
err "calibrate '$T/none.raw': No such file" "$M" --precision int8 --calibrate "$T/none.raw" -o "$T/a.so"
err "1000 bytes is not a whole number of samples (12288 bytes each" "$M" --precision int8 --calibrate "$T/short.raw" -o "$T/a.so"
err "sample 0 has a non-finite value at element 0" "$M" --precision int8 --calibrate "$T/nan.raw" -o "$T/a.so"

# 2. cifar_resnet8
if cnnc_as ir "$M" --precision int8 --calibrate "$T/cal.raw" --batch-size 8 --emit ir-after=precision -o "$T/q.ir"; then
  [ "$(grep -c '= quantize8(' "$T/q.ir")" -ge 7 ] && [ "$(grep -c '= conv2d(%[^,]*/quantize8,' "$T/q.ir")" = 9 ] && ok ||
    bad "quantize8 nodes: $(grep -c quantize8 "$T/q.ir"), convs reading them: $(grep -c '= conv2d(%[^,]*/quantize8,' "$T/q.ir")"
  grep -q "int8: 9 convs quantised" "$T/ir.log" && grep -q "calibration: batch 3 of 3" "$T/ir.log" && ok ||
    bad "progress lines: $(cat "$T/ir.log")"
fi
cnnc_as q "$M" --precision int8 --calibrate "$T/cal.raw" --batch-size 8 -o "$T/q.so" &&
  cnnc_as f "$M" --batch-size 8 -o "$T/f.so" && infer_as q "$T/x.raw" && infer_as f "$T/x.raw" &&
  if msg=$("$PY" - "$T" <<'P'
import struct, sys
def rd(p):
    b = open(sys.argv[1] + "/" + p + ".y", "rb").read()
    return struct.unpack("%df" % (len(b) // 4), b)
q, f = rd("q"), rd("f")
assert len(q) == 160 == len(f), (len(q), len(f))
r = max(abs(a - b) for a, b in zip(q, f)) / max(abs(b) for b in f)
top = sum(max(range(10), key=lambda k: q[10 * i + k]) == max(range(10), key=lambda k: f[10 * i + k]) for i in range(16))
print("cifar_resnet8 int8 vs fp32: %.3g of the largest logit, top-1 equal on %d of 16" % (r, top))
sys.exit(0 if r <= 0.05 and top == 16 else 1)
P
  ); then ok; echo "$msg"; else bad "$msg"; fi
# the vpmaddwd kernels (tune int8=3; the default where VNNI is missing) sum the same integers:
# logits bitwise those of the default build, whichever dot product the host's build took
cnnc_as q3 "$M" --precision int8 --calibrate "$T/cal.raw" --batch-size 8 --tune int8=3 -o "$T/q3.so" &&
  infer_as q3 "$T/x.raw" && { cmp -s "$T/q.y" "$T/q3.y" && ! cmp -s "$T/q.y" "$T/f.y" && ok ||
  bad "tune int8=3 logits differ from the default int8 build's"; }
# quantize8 in the producing conv's epilogue or as its own kernel: the same values
cnnc_as q0 "$M" --precision int8 --calibrate "$T/cal.raw" --batch-size 8 --tune quantize8_fusion=0 --emit plan -o "$T/q0.plan" &&
  cnnc_as q1 "$M" --precision int8 --calibrate "$T/cal.raw" --batch-size 8 --emit plan -o "$T/q1.plan" &&
  { [ "$(grep -c '_quantize8_' "$T/q1.plan")" -ge 3 ] && ! grep -q '_quantize8_' "$T/q0.plan" && ok ||
    bad "fused quantize8 epilogues: $(grep -c '_quantize8_' "$T/q1.plan") with fusion, $(grep -c '_quantize8_' "$T/q0.plan") without"; }
cnnc_as q0 "$M" --precision int8 --calibrate "$T/cal.raw" --batch-size 8 --tune quantize8_fusion=0 -o "$T/q0.so" &&
  infer_as q0 "$T/x.raw" && { cmp -s "$T/q.y" "$T/q0.y" && ok || bad "tune quantize8_fusion=0 logits differ from the fused build's"; }

# 3. a trained Fashion-MNIST model
if have_fmnist train && have_fmnist t10k; then
  "$CNNC" "$SRC/models/fmnist_cnn.yml" --mode training --optimizer adam --batch-size 64 -o "$T/tr.so" >"$T/c1" 2>&1 || bad "cnnc training: $(tail -3 "$T/c1")"
  "$CNNRUN" "$T/tr.so" train --dataset fashion-mnist --data-dir "$DATA" --limit 3840 --lr 0.001 --no-validation \
    --checkpoint-dir "$T/ck" >"$T/train" 2>&1 || bad "train: $(tail -3 "$T/train")"
  CK="$T/ck/ckpt-step-00000060.safetensors"
  "$PY" - "$DATA" "$T" <<'P' || bad "writing the idx files"
import gzip, os, struct, sys
d, t = sys.argv[1], sys.argv[2]
def rd(name):
    p = os.path.join(d, name)
    return gzip.open(p + ".gz").read() if os.path.exists(p + ".gz") else open(p, "rb").read()
im, lb, n = rd("t10k-images-idx3-ubyte"), rd("t10k-labels-idx1-ubyte"), 2000
open(os.path.join(t, "img"), "wb").write(im[:4] + struct.pack(">I", n) + im[8:16] + im[16:16 + n * 784])
open(os.path.join(t, "lab"), "wb").write(lb[:4] + struct.pack(">I", n) + lb[8:8 + n])
open(os.path.join(t, "cal8.raw"), "wb").write(rd("train-images-idx3-ubyte")[16:16 + 256 * 784])
P
  if [ -f "$CK" ] && cnnc_as f8 "$SRC/models/fmnist_cnn.yml" --weights "$CK" --batch-size 50 -o "$T/f8.so" &&
    cnnc_as q8 "$SRC/models/fmnist_cnn.yml" --weights "$CK" --batch-size 50 --precision int8 --calibrate "$T/cal8.raw" \
      --calibrate-samples 256 -o "$T/q8.so"; then
    for s in f8 q8; do "$CNNRUN" "$T/$s.so" infer --input "$T/img" --labels "$T/lab" >"$T/$s.acc" 2>&1 || bad "infer $s: $(tail -3 "$T/$s.acc")"; done
    af=$(sed -n 's/^accuracy \([0-9.]*\) .*/\1/p' "$T/f8.acc")
    aq=$(sed -n 's/^accuracy \([0-9.]*\) .*/\1/p' "$T/q8.acc")
    if "$PY" -c "import sys; f, q = float('$af'), float('$aq'); print('fmnist_cnn top-1: fp32 %s, int8 %s' % (f, q)); sys.exit(0 if abs(f - q) <= 0.005 and f > 0.5 else 1)"; then
      ok
    else
      bad "fmnist_cnn int8 accuracy '$aq' vs fp32 '$af': $(cat "$T/f8.acc" "$T/q8.acc" | head -c 600)"
    fi
  else
    bad "fmnist compile: $(ls "$T/ck" 2>&1) $(tail -2 "$T"/q8.log 2>/dev/null)"
  fi
else
  skip_part "Fashion-MNIST is not installed: the trained-model accuracy check did not run"
fi
finish
