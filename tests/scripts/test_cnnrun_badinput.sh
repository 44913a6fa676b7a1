#!/usr/bin/env bash
# test_cnnrun_badinput.sh BUILD SRC — bad input to cnnrun / libcnnrt that the other tests
# (test_cnnrun.sh, test_cnnrun_train.sh, test_data, test_runtime*) do not cover: each case must
# exit 1 (bad file) or 2 (usage) with a message naming the file or option and the fault, and
# never crash (CI runs this under ASan + UBSan too: a sanitizer report fails the case).
#  * .so truncated at every ELF structure boundary (header, program headers, segments);
#  * checkpoints (--restore / validate --checkpoint): a directory, device or FIFO instead of a
#    file (ASan: a 2^63-byte allocation before rt_ckpt.c checked), empty, 7 bytes, header length
#    0, past the end, too short; not JSON, a JSON array, \u at the end, deep __metadata__, junk
#    or a NUL after the header; wrong dtype, wrong shape, rank 9, negative / reversed / 1 / 3
#    data_offsets, overlapping offsets, a gap, bytes after the data, an unknown entry key, a
#    missing tensor, a missing or F32 'step', step -5, an extra tensor, a duplicated name,
#    untyped or missing metadata, NaN / Inf values (loaded with --allow-nonfinite);
#  * idx files: dimensions whose product wraps 64 bits (256 x 2^28 x 2^28 was accepted as 256
#    images of 2^56 bytes from a 16-byte file), a gzip stream missing its trailer (was read
#    silently), a gzip bomb (256 MB of zeros after the promised images: read whole before), a
#    zero dimension, a directory, a FIFO, an empty file, 3-d labels; CIFAR-10: an empty batch,
#    a missing batch, a test-batch label of 255;
#  * --logs-per-epoch 0, -1, nan, inf, '', '1/', '/2', '0/1', '1/2/3', 1e-308, and a huge value
#    (rounded to every step with a warning: exit 0); unknown options of train / validate /
#    infer / benchmark; --seed 1.5, 1e30, -1, '' and 2^64 (strict numbers, common/cm_num.c).
set -u
. "$(dirname "$0")/lib.sh"
script_args "$@"
FM="$BUILD/tests/libfake_model.so"
FT="$BUILD/tests/libfake_train.so"
[ -x "$CNNRUN" ] || { echo "FAIL: no $CNNRUN"; echo "0 passed, 1 failed"; exit 1; }

# refuse STATUS PATTERN -- ARGS...: lib.sh's expect, and no sanitizer report in the output.
refuse() {
  expect "$@"
  if grep -qE "Sanitizer|runtime error:" "$T/out"; then bad "sanitizer report for cnnrun ${*:4}: $(grep -m1 -E 'Sanitizer|runtime error' "$T/out")"; fi
}

# ---- truncated .so at the ELF structure boundaries --------------------------------------------
python3 - "$FM" >"$T/cuts" <<'PY'
import struct, sys
b = open(sys.argv[1], "rb").read()
phoff, = struct.unpack_from("<Q", b, 32); phnum, = struct.unpack_from("<H", b, 56)
cuts = {1, 4, 16, 63, 64, phoff + 1, phoff + 56 * phnum - 1}
for i in range(phnum):
    typ, = struct.unpack_from("<I", b, phoff + 56 * i)
    off, = struct.unpack_from("<Q", b, phoff + 56 * i + 8); fsz, = struct.unpack_from("<Q", b, phoff + 56 * i + 32)
    if typ in (1, 2) and fsz:  # PT_LOAD, PT_DYNAMIC: cut inside and one byte short of the end
        cuts |= {off + fsz // 2, off + fsz - 1}
print(" ".join(str(c) for c in sorted(cuts) if 0 < c < len(b)))
PY
ncut=0
for c in $(cat "$T/cuts"); do
  head -c "$c" "$FM" >"$T/cut.so"
  refuse 1 "cut.so: (not a shared object|truncated)" -- "$T/cut.so" info
  ncut=$((ncut + 1))
done
[ "$ncut" -ge 9 ] && ok || bad "only $ncut truncation points: $(cat "$T/cuts")"

# ---- checkpoints ---------------------------------------------------------------------------------
"$CNNRUN" "$FT" train --dataset synthetic --epochs 1 --limit 64 --checkpoint-dir "$T/ck0" >"$T/out" 2>&1 || bad "train for a checkpoint: $(tail -3 "$T/out")"
CK=$(ls "$T/ck0"/*.safetensors 2>/dev/null | head -1)
mkdir -p "$T/ck"
python3 - "$CK" "$T/ck" <<'PY'
import copy, json, os, struct, sys
b = open(sys.argv[1], "rb").read(); out = sys.argv[2]
n, = struct.unpack("<Q", b[:8]); hdr = json.loads(b[8:8 + n]); data = b[8 + n:]
def w(name, h=None, raw=None, hlen=None, d=None):
    if raw is None:
        hs = h if isinstance(h, bytes) else json.dumps(hdr if h is None else h).encode()
        raw = struct.pack("<Q", len(hs) if hlen is None else hlen) + hs + (data if d is None else d)
    open(os.path.join(out, name + ".safetensors"), "wb").write(raw)
def H(f):
    h = copy.deepcopy(hdr); f(h); return h
w("empty", raw=b""); w("seven", raw=b"1234567")
w("hlen0", hlen=0); w("hlen_past", hlen=10 ** 6); w("hlen_short", hlen=n - 10)
w("notjson", b"this is not json"); w("array", b"[1,2,3]"); w("uend", b'{"\\u'); w("half", json.dumps(hdr).encode()[: n // 2])
w("deep", b'{"__metadata__":' + b"[" * 3000 + b"]" * 3000 + b"}")
w("dtype", H(lambda h: h["fc/weight"].update(dtype="F16")))
w("shape", H(lambda h: h["fc/weight"].update(shape=[784, 10])))
w("rank9", H(lambda h: h["fc/weight"].update(shape=[1] * 9)))
w("offneg", H(lambda h: h["fc/weight"].update(data_offsets=[-4, 31356])))
w("offrev", H(lambda h: h["fc/weight"].update(data_offsets=[31360, 0])))
w("off1", H(lambda h: h["fc/weight"].update(data_offsets=[0])))
w("off3", H(lambda h: h["fc/weight"].update(data_offsets=[0, 31360, 5])))
# The layout kept whole (offsets packed in header order, data moved with them), so a check
# behind the layout's sees the file: tensors keep their bytes (new ones: zeros).
def relaid(name, h):
    h = copy.deepcopy(h); d = b""
    for k, e in h.items():
        if k == "__metadata__": continue
        b0, e0 = hdr[k]["data_offsets"] if k in hdr else (0, 0)
        nb = 8 if e["dtype"] == "I64" else 4
        for x in e["shape"]: nb *= x
        e["data_offsets"] = [len(d), len(d) + nb]; d += data[b0:e0][:nb].ljust(nb, b"\0")
    w(name, h, d=d)
relaid("missing", H(lambda h: h.pop("fc/bias")))
relaid("nostep", H(lambda h: h.pop("step")))
relaid("stepf32", H(lambda h: h["step"].update(dtype="F32")))
relaid("extra", H(lambda h: h.update({"extra/t": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}})))
relaid("i32", H(lambda h: h["fc/weight"].update(dtype="I32")))
w("dup", json.dumps(hdr).encode().replace(b'"fc/bias/momentum"', b'"fc/bias"', 1))
# issue 26: overlapping offsets (loaded the wrong bytes), a gap, bytes after the data or after the
# header, untyped metadata, a negative step (passed validate), NaN / Inf values
wb, bb = hdr["fc/weight"]["data_offsets"], hdr["fc/bias"]["data_offsets"]
w("overlap", H(lambda h: h["fc/bias"].update(data_offsets=[wb[0], wb[0] + bb[1] - bb[0]])))
w("trailing", d=data + b"junk")
hs = json.dumps(hdr).encode(); w("hdrjunk", hs + b" xyz"); w("hdrnul", hs + b"\0\0\0")
w("meta_num", H(lambda h: h["__metadata__"].update(step=5)))
w("meta_fmt", H(lambda h: h["__metadata__"].pop("format")))
w("meta_step", H(lambda h: h["__metadata__"].update(step="999")))
w("entry_key", H(lambda h: h["fc/weight"].update(extra=1)))
sb = hdr["step"]["data_offsets"][0]
w("stepneg", H(lambda h: h["__metadata__"].pop("step")), d=data[:sb] + struct.pack("<q", -5) + data[sb + 8:])
for nm, v in (("nan", float("nan")), ("inf", float("inf"))):
    w("val" + nm, d=data[:wb[0] + 8] + struct.pack("<f", v) + data[wb[0] + 12:])
def gap(h):
    for k in h:
        if k != "__metadata__": h[k]["data_offsets"] = [x + 4 for x in h[k]["data_offsets"]]
w("gap", H(gap), d=bytes(4) + data)
PY
ck() { # NAME PATTERN: --restore and validate --checkpoint both refuse $T/ck/NAME.safetensors
  refuse 1 "$1.safetensors: $2" -- "$FT" train --dataset synthetic --limit 64 --restore "$T/ck/$1.safetensors"
  refuse 1 "$1.safetensors: $2" -- "$FT" validate --dataset synthetic --limit 64 --checkpoint "$T/ck/$1.safetensors"
}
ck empty "0 bytes, too few for a safetensors file"
ck seven "7 bytes, too few"
ck hlen0 "header length 0 does not fit"
ck hlen_past "header length [0-9]+ does not fit in the [0-9]+-byte file"
for c in hlen_short notjson array uend half deep hdrjunk; do ck $c "the header is not one strict JSON object"; done
ck hdrnul "a NUL byte inside the header"
ck rank9 "bad safetensors header at 'fc/weight': 'shape' must be a list of at most 8"
for c in offneg off1 off3; do ck $c "bad safetensors header at 'fc/weight': 'data_offsets' must be two non-negative integers"; done
ck entry_key "bad safetensors header at 'fc/weight': a tensor entry has a key other than dtype, shape and data_offsets"
ck dtype "tensor 'fc/weight': dtype 'F16' \(a checkpoint holds F32, I32 and I64\)"
ck i32 "tensor 'fc/weight' is I32 \[10,784\] in the checkpoint, the model has F32 \[10,784\]"
ck shape "tensor 'fc/weight' is F32 \[784,10\] in the checkpoint"
ck offrev "tensor 'fc/weight': data_offsets \[31360, 0\] outside"
ck missing "the checkpoint lacks state tensor 'fc/bias' of model fake_train"
ck nostep "no 'step' tensor \(not a cnnc checkpoint\)"
ck stepf32 "tensor 'step' must be an I64 scalar"
ck extra "tensor 'extra/t' is not in the state of model fake_train"
ck dup "tensor 'fc/bias' (appears twice|is F32 \[10,784\])"
ck overlap "tensor '(fc/bias|fc/weight)': data_offsets \[[0-9]+, [0-9]+\] overlap those of tensor"
ck gap "tensor '[a-z/_]+': data_offsets \[4, [0-9]+\] leave bytes 0..4 unused"
ck trailing "4 bytes after the last tensor's data"
ck meta_num "bad safetensors header at '__metadata__': __metadata__ values must be strings"
ck meta_fmt "__metadata__ has no \"format\": \"cnnc-checkpoint\""
ck meta_step "__metadata__ says step \"999\", tensor 'step' holds [0-9]+"
ck stepneg "tensor 'step' is -5; a step count must be >= 0"
ck valnan "tensor 'fc/weight': element 2 is nan"
ck valinf "tensor 'fc/weight': element 2 is inf"
refuse 0 "step" -- "$FT" validate --dataset synthetic --limit 64 --checkpoint "$T/ck/valnan.safetensors" --allow-nonfinite
mkdir -p "$T/ckdir"
refuse 1 "ckdir: is a directory" -- "$FT" train --dataset synthetic --limit 64 --restore "$T/ckdir"
refuse 1 "/dev/null: is not a regular file \\(a character device\\)" -- "$FT" train --dataset synthetic --limit 64 --restore /dev/null
mkfifo "$T/ck/fifo.safetensors" # opened without blocking, then refused
refuse 1 "fifo.safetensors: is not a regular file \\(a FIFO\\)" -- "$FT" validate --dataset synthetic --limit 64 --checkpoint "$T/ck/fifo.safetensors"
refuse 1 "fifo.safetensors: is not a regular file \\(a FIFO\\)" -- "$FT" train --dataset synthetic --limit 64 --restore "$T/ck/fifo.safetensors"

# ---- idx and CIFAR-10 files ------------------------------------------------------------------------
python3 - "$T/d" <<'PY'
import gzip, os, random, struct, sys, zlib
out = sys.argv[1]
def idx(dims, data=b"", nd=None):
    return bytes([0, 0, 8, len(dims) if nd is None else nd]) + b"".join(struct.pack(">I", d) for d in dims) + data
def put(case, files):
    d = os.path.join(out, case); os.makedirs(d, exist_ok=True)
    for name, b in files.items():
        if b is None: os.makedirs(os.path.join(d, name), exist_ok=True)
        else: open(os.path.join(d, name), "wb").write(b)
random.seed(1)
N = 64; img = idx([N, 28, 28], bytes(random.randrange(256) for _ in range(N * 784))); lab = idx([N], bytes(N))
put("wrap", {"train-images-idx3-ubyte": idx([256, 1 << 28, 1 << 28]), "train-labels-idx1-ubyte": idx([256], bytes(256))})
z = gzip.compress(img)
put("gztrailer", {"train-images-idx3-ubyte.gz": z[:-4], "train-labels-idx1-ubyte": lab})
put("zerodim", {"train-images-idx3-ubyte": idx([0, 28, 28]), "train-labels-idx1-ubyte": lab})
put("isdir", {"train-images-idx3-ubyte": None})
put("emptyfile", {"train-images-idx3-ubyte": b"", "train-labels-idx1-ubyte": lab})
put("labels3d", {"train-images-idx3-ubyte": img, "train-labels-idx1-ubyte": idx([N, 1, 1], bytes(N))})
# a gzip bomb: 64 images promised, 256 MB of zeros after them (was read whole before the check)
zo = zlib.compressobj(9, zlib.DEFLATED, 31); bomb = zo.compress(img)
for _ in range(256): bomb += zo.compress(bytes(1 << 20))
put("gzbomb", {"train-images-idx3-ubyte.gz": bomb + zo.flush(), "train-labels-idx1-ubyte": lab})
rec = bytes(3073); full = {"data_batch_%d.bin" % k: rec * 2 for k in range(1, 6)}
put("c_empty", dict(full, data_batch_1_bin=b"", **{"data_batch_1.bin": b""}))
put("c_missing", {k: v for k, v in full.items() if k != "data_batch_5.bin"})
put("c_test", {"test_batch.bin": bytes([255]) + bytes(3072)})
PY
fm() { refuse 1 "$2" -- "$FT" train --dataset fashion-mnist --data-dir "$T/d/$1" --epochs 1; }
fm wrap "wrap/train-images-idx3-ubyte: idx dimensions promise more than [0-9]+ bytes"
fm gztrailer "gztrailer/train-images-idx3-ubyte.gz: truncated gzip file"
fm zerodim "zerodim/train-images-idx3-ubyte: idx dimension 0 is 0"
fm isdir "isdir/train-images-idx3-ubyte: cannot open: is a directory"
fm gzbomb "gzbomb/train-images-idx3-ubyte.gz: trailing bytes: the header promises 50176 bytes of data"
mkdir -p "$T/d/fifo" && mkfifo "$T/d/fifo/train-images-idx3-ubyte" # opened without blocking, then refused
fm fifo "fifo/train-images-idx3-ubyte: cannot open: is not a regular file \\(a FIFO\\)"
fm emptyfile "emptyfile/train-images-idx3-ubyte: not an idx3 u8 file"
fm labels3d "labels3d/train-labels-idx1-ubyte: not an idx1 u8 file"
refuse 1 "c_empty/data_batch_1.bin: 0 bytes is not a whole number of 3073-byte CIFAR-10 records" -- "$FT" train --dataset cifar10 --data-dir "$T/d/c_empty"
refuse 1 "c_missing/data_batch_5.bin: cannot open" -- "$FT" train --dataset cifar10 --data-dir "$T/d/c_missing"
refuse 1 "c_test/test_batch.bin: record 0 has label 255" -- "$FT" validate --dataset cifar10 --data-dir "$T/d/c_test" --checkpoint "$CK"

# ---- --logs-per-epoch and unknown options -------------------------------------------------------------
for v in 0 -1 nan inf "" 1/ /2 0/1 1/2/3 1e-308 0x10 1/0x2; do
  refuse 2 "--logs-per-epoch: '$v' is not a positive number or fraction" -- "$FT" train --dataset synthetic --logs-per-epoch "$v"
done
refuse 0 "warning: --logs-per-epoch 99999999999 is not possible with 4 steps per epoch; rounded to 4" -- "$FT" train --dataset synthetic --limit 64 --logs-per-epoch 99999999999
refuse 1 "It is not possible to log 1000000000.0 epochs a time for 1 epochs" -- "$FT" train --dataset synthetic --logs-per-epoch 1e-9
refuse 2 "--lr: must be a number >= 0 \\(got '0x1'\\)" -- "$FT" train --dataset synthetic --lr 0x1
for v in 1.5 1e30 -1 "" 18446744073709551616; do # once cast from a double: 1.5 taken as 1, 1e30 undefined
  refuse 2 "--seed: must be an integer in 0..9223372036854775807 \\(got '$v'" -- "$FT" train --dataset synthetic --seed "$v"
done
for v in 1,,2 ,1 1,2, ; do
  refuse 2 "--lr-decay-epochs: '$v' has an empty or overlong item" -- "$FT" train --dataset synthetic --lr-schedule step --lr-decay-epochs "$v"
done
refuse 2 "--lr-decay-epochs: '2,1' is not strictly increasing" -- "$FT" train --dataset synthetic --lr-schedule step --lr-decay-epochs 2,1
refuse 0 "note: --limit 100000 is more than the" -- "$FT" train --dataset synthetic --limit 100000 --epochs 1
for cmd in train validate; do refuse 2 "$cmd: unknown option '--bogus'" -- "$FT" $cmd --bogus; done
for cmd in infer benchmark; do refuse 2 "$cmd: unknown option '--frobnicate=1'" -- "$FM" $cmd --frobnicate=1; done
refuse 2 "train: --restore needs a value" -- "$FT" train --restore
# an idx file whose size is not its header's (a byte of trailing data, or cut short) is refused,
# never read as raw samples in silence (fake_model takes 1x4x4 per sample); --format raw reads it
python3 -c "import sys; sys.stdout.buffer.write(bytes([0,0,8,3,0,0,0,4,0,0,0,4,0,0,0,4]) + bytes(64) + b'x')" >"$T/t.idx"
refuse 1 "t.idx: an idx header \(type 0x08, 3 dims\) promising 64 bytes of data, but the file holds 65" -- "$FM" infer --input "$T/t.idx" --top 1
head -c 70 "$T/t.idx" >"$T/c.idx"
refuse 1 "c.idx: an idx header .* promising 64 bytes of data, but the file holds 54" -- "$FM" infer --input "$T/c.idx" --top 1
finish
