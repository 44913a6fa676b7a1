#!/bin/bash
# test_ckpt_deploy.sh BUILD SRC — a training checkpoint becomes a deployable model, and the
# validation reports plain cross-entropy and top-5 (issue 23).  fmnist_cnn is compiled for
# training (Adam) with --label-smoothing 0.1 and trained for 40 steps (a checkpoint); `cnnrun validate`
# evaluates it on the first 1000 test images; `cnnc fmnist_cnn.yml --weights CKPT` compiles the
# checkpoint for inference (one note: the optimizer state and the step counter were ignored);
# `cnnrun infer` over the same 1000 images reproduces validate's top-1 accuracy, and its raw
# logits, read back in Python (no numpy needed), give validate's loss as plain cross-entropy
# (not the label-smoothed loss, which differs by far more than the tolerance) and its top-5.
# Then a small conv + batchnorm model: the note counts its running statistics and infer of its
# compiled checkpoint gives validate's accuracy.
# Skipped (exit 77) when Fashion-MNIST is not installed.
set -uo pipefail
. "$(dirname "$0")/lib.sh"
script_args "$@"
need_fmnist train
need_fmnist t10k

"$CNNC" "$SRC/models/fmnist_cnn.yml" --mode training --optimizer adam --label-smoothing 0.1 --batch-size 64 -o "$T/tr.so" \
  >"$T/c1" 2>&1 || { bad "cnnc training: $(tail -3 "$T/c1")"; finish; exit; }
"$CNNRUN" "$T/tr.so" train --dataset fashion-mnist --data-dir "$DATA" --limit 2560 --lr 0.001 --no-validation \
  --checkpoint-dir "$T/ck" >"$T/train" 2>&1 || { bad "train: $(tail -3 "$T/train")"; finish; exit; }
CK="$T/ck/ckpt-step-00000040.safetensors"
[ -f "$CK" ] && ok || { bad "no $CK: $(ls "$T/ck")"; finish; exit; }
grep -q "^validation" "$T/train" && bad "--no-validation validated: $(grep ^validation "$T/train")" || ok

# the first 1000 test images and labels as idx files (the header's count rewritten)
"$PY" - "$DATA" "$T" <<'EOF' || bad "writing the 1000-image idx files"
import gzip, os, struct, sys
d, t = sys.argv[1], sys.argv[2]
def rd(name):
    p = os.path.join(d, name)
    return gzip.open(p + ".gz").read() if os.path.exists(p + ".gz") else open(p, "rb").read()
im, lb, n = rd("t10k-images-idx3-ubyte"), rd("t10k-labels-idx1-ubyte"), 1000
open(os.path.join(t, "img"), "wb").write(im[:4] + struct.pack(">I", n) + im[8:16] + im[16:16 + n * 784])
open(os.path.join(t, "lab"), "wb").write(lb[:4] + struct.pack(">I", n) + lb[8:8 + n])
EOF

"$CNNRUN" "$T/tr.so" validate --data-dir "$DATA" --checkpoint "$CK" --limit 1000 --json >"$T/val" 2>&1 ||
  { bad "validate: $(tail -3 "$T/val")"; finish; exit; }
grep -qE '"top5_accuracy": [0-9.]+' "$T/val" && ok || bad "no top5_accuracy: $(cat "$T/val")"

"$CNNC" "$SRC/models/fmnist_cnn.yml" --weights "$CK" --batch-size 64 -o "$T/inf.so" >"$T/c2" 2>&1 ||
  { bad "cnnc --weights CKPT: $(tail -3 "$T/c2")"; finish; exit; }
n=$(grep -c "note: .*a cnnc training checkpoint (step 40): took 12 parameters and 0 batch-norm statistics; ignored 25 optimizer-state tensors (.*/m', .*/v'.*) and the step counter" "$T/c2")
[ "$n" = 1 ] && ok || bad "cnnc --weights CKPT: want one note line: $(cat "$T/c2")"
# the checkpoint's parameters alone, as a plain safetensors file: no note; a plain file holding
# the I64 step, or a checkpoint with the momentum of a layer the model lacks: refused
"$PY" - "$CK" "$T" <<'EOF' || bad "writing the stripped weights"
import json, struct, sys
raw = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
hdr, data = json.loads(raw[8:8 + n]), raw[8 + n:]
def write(path, names, meta=None):
    h, out, off = {}, b"", 0
    for k in names:
        b, e = hdr[k]["data_offsets"]
        h[k] = {"dtype": hdr[k]["dtype"], "shape": hdr[k]["shape"], "data_offsets": [off, off + e - b]}
        out += data[b:e]
        off += e - b
    if meta: h["__metadata__"] = meta
    j = json.dumps(h).encode()
    open(path, "wb").write(struct.pack("<Q", len(j)) + j + out)
params = [k for k in hdr if k not in ("__metadata__", "step") and not k.startswith("optimizer/") and k.split("/")[-1] not in ("m", "v")]
write(sys.argv[2] + "/w.safetensors", params)
write(sys.argv[2] + "/wstep.safetensors", params + ["step"])
hdr["conv9/weight/m"] = hdr["conv1/weight/m"]
write(sys.argv[2] + "/wextra.safetensors", params + ["conv9/weight/m"], hdr["__metadata__"])
EOF
"$CNNC" "$SRC/models/fmnist_cnn.yml" --weights "$T/w.safetensors" --summary >/dev/null 2>"$T/c3" && ! grep -q note "$T/c3" && ok ||
  bad "plain --weights: $(cat "$T/c3")"
"$CNNC" "$SRC/models/fmnist_cnn.yml" --weights "$T/wstep.safetensors" --summary >/dev/null 2>"$T/c3"
[ $? = 1 ] && grep -q "tensor 'step': dtype 'I64' is not supported" "$T/c3" && ok || bad "I64 in a plain file: $(cat "$T/c3")"
"$CNNC" "$SRC/models/fmnist_cnn.yml" --weights "$T/wextra.safetensors" --summary >/dev/null 2>"$T/c3"
[ $? = 1 ] && grep -q "1 tensor is not parameters of model 'fmnist_cnn': 'conv9/weight/m'" "$T/c3" && ok ||
  bad "a foreign layer's momentum in a checkpoint: $(cat "$T/c3")"

"$CNNRUN" "$T/inf.so" infer --input "$T/img" --labels "$T/lab" --output "$T/logits" >"$T/inf" 2>&1 ||
  { bad "infer: $(tail -3 "$T/inf")"; finish; exit; }
"$PY" - "$T" <<'EOF' && ok || bad "infer vs validate: $(cat "$T/val" "$T/inf")"
import json, math, re, struct, sys
t = sys.argv[1]
v = json.loads([l for l in open(t + "/val") if l.startswith("{")][0])
m = re.search(r"accuracy ([0-9.]+) \((\d+)/(\d+)\)", open(t + "/inf").read())
lab = open(t + "/lab", "rb").read()[8:]
raw = open(t + "/logits", "rb").read()
n, k = 1000, 10
x = struct.unpack("<%df" % (n * k), raw)
ce = sm = 0.0
top1 = top5 = 0
for i in range(n):
    row, y = x[i * k:(i + 1) * k], lab[i]
    mx = max(row)
    lse = mx + math.log(sum(math.exp(a - mx) for a in row))
    ce += lse - row[y]
    sm += 0.9 * (lse - row[y]) + 0.1 * (lse - sum(row) / k)  # what the loss kernel computes at s = 0.1
    rank = sum(1 for j in range(k) if row[j] > row[y] or (j < y and row[j] == row[y]))
    top1 += rank < 1
    top5 += rank < 5
ce, sm = ce / n, sm / n
errs = []
if not m or int(m.group(2)) != round(v["accuracy"] * n): errs.append("infer top-1 %s, validate %s" % (m and m.group(2), v["accuracy"]))
if top1 != round(v["accuracy"] * n): errs.append("logits top-1 %d, validate %s" % (top1, v["accuracy"]))
if top5 != round(v["top5_accuracy"] * n): errs.append("logits top-5 %d, validate %s" % (top5, v["top5_accuracy"]))
if abs(ce - v["loss"]) > 2e-5 * max(1, ce): errs.append("plain CE %.6f, validate loss %.6f" % (ce, v["loss"]))
if abs(sm - ce) < 1e-3: errs.append("smoothed %.6f too close to plain %.6f to tell them apart" % (sm, ce))
print("plain CE %.6f (validate %.6f), smoothed %.6f; top-1 %d, top-5 %d" % (ce, v["loss"], sm, top1, top5))
if errs:
    print("\n".join(errs))
    sys.exit(1)
EOF

# batch-norm running statistics travel too: a small conv + norm model, 100 momentum steps
printf 'name: bnnet\ninput: {shape: [1, 28, 28], dtype: u8, mean: [0.0], std: [255.0], classes: 10}\nlayers:\n  - {name: conv1, op: conv, filters: 8, kernel: 3, padding: 1}\n  - {name: bn1, op: norm}\n  - {name: relu1, op: relu}\n  - {name: pool, op: maxpool, kernel: 4}\n  - {name: flatten, op: flatten}\n  - {name: fc, op: dense, units: 10}\n' >"$T/bn.yml"
if cnnc_as bntr "$T/bn.yml" --mode training --optimizer momentum --batch-size 32 -o "$T/bntr.so" &&
  run_ok "train bnnet" "$CNNRUN" "$T/bntr.so" train --dataset fashion-mnist --data-dir "$DATA" --limit 3200 --lr 0.05 --no-validation --checkpoint-dir "$T/ckb" &&
  cnnc_as bninf "$T/bn.yml" --weights "$T/ckb/ckpt-step-00000100.safetensors" -o "$T/bninf.so"; then
  grep -q "took 6 parameters and 2 batch-norm statistics; ignored 6 optimizer-state tensors" "$T/bninf.log" && ok || bad "bnnet note: $(cat "$T/bninf.log")"
  v=$("$CNNRUN" "$T/bntr.so" validate --data-dir "$DATA" --checkpoint "$T/ckb" --limit 1000 --json | sed -E 's/.*"accuracy": ([0-9.]+).*/\1/')
  i=$("$CNNRUN" "$T/bninf.so" infer --input "$T/img" --labels "$T/lab" | sed -nE 's/^accuracy ([0-9.]+) .*/\1/p')
  [ -n "$v" ] && "$PY" -c "import sys; sys.exit(0 if round(float('$v') * 1000) == round(float('$i') * 1000) else 1)" && ok ||
    bad "bnnet: validate accuracy '$v', infer '$i'"
fi

finish
