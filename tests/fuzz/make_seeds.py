#!/usr/bin/env python3
"""make_seeds.py OUT [BUILD] — seed corpora of the fuzz harnesses (tests/fuzz/fuzz_*.c), one
directory per harness under OUT: valid files of each format and a few damaged ones, so the
fuzzers start from every branch of the readers.  YAML seeds are not made here: run_fuzz.sh
passes models/ and tests/golden/{ok,err} directly.  With BUILD (a normal build directory),
also .so seeds: tiny models compiled by BUILD/cnnc and the hand-made BUILD/tests/libfake_*.so."""
import gzip, json, os, random, shutil, struct, subprocess, sys

out = sys.argv[1]
build = sys.argv[2] if len(sys.argv) > 2 else None
rnd = random.Random(26)


def put(harness, name, data):
    d = os.path.join(out, harness)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def safetensors(tensors, meta=None, pad=True):
    """tensors: [(name, dtype, shape, bytes)] -> contiguous safetensors bytes."""
    h, off, data = {}, 0, b""
    if meta is not None:
        h["__metadata__"] = meta
    for name, dt, shape, raw in tensors:
        h[name] = {"dtype": dt, "shape": shape, "data_offsets": [off, off + len(raw)]}
        off += len(raw)
        data += raw
    hs = json.dumps(h, separators=(",", ":")).encode()
    while pad and len(hs) % 8:
        hs += b" "
    return struct.pack("<Q", len(hs)) + hs + data


def f32(n, scale=0.1):
    return struct.pack("<%df" % n, *[rnd.uniform(-scale, scale) for _ in range(n)])


def half(n, bf16):
    raw = f32(n)
    words = struct.unpack("<%dI" % n, raw)
    if bf16:
        return struct.pack("<%dH" % n, *[w >> 16 for w in words])
    return struct.pack("<%de" % n, *struct.unpack("<%df" % n, raw))


# ---- weights of fuzz_weights.c's fixed model ------------------------------------------------
def weights(dt="F32"):
    shapes = [("conv1/weight", [4, 2, 3, 3]), ("conv1/bias", [4]), ("bn1/gamma", [4]), ("bn1/beta", [4]),
              ("bn1/running_mean", [4]), ("bn1/running_var", [4]), ("fc/weight", [3, 144]), ("fc/bias", [3])]
    ts = []
    for name, shape in shapes:
        n = 1
        for s in shape:
            n *= s
        raw = f32(n) if dt == "F32" else half(n, dt == "BF16")
        if name.endswith("running_var"):
            raw = struct.pack("<%df" % n, *[1.0] * n) if dt == "F32" else half(n, dt == "BF16")
        ts.append((name, dt, shape, raw))
    return ts


w = weights()
put("weights", "ok_f32.safetensors", safetensors(w))
put("weights", "ok_meta.safetensors", safetensors(w, {"format": "pt", "source": "seed"}))
put("weights", "ok_bf16.safetensors", safetensors(weights("BF16")))
put("weights", "ok_f16.safetensors", safetensors(weights("F16")))
put("weights", "missing.safetensors", safetensors(w[1:]))
put("weights", "extra.safetensors", safetensors(w + [("extra", "F32", [1], f32(1))]))
put("weights", "shape.safetensors", safetensors([(n, d, list(reversed(s)), r) for n, d, s, r in w]))
full = safetensors(w)
put("weights", "truncated.safetensors", full[: len(full) - 7])
put("weights", "nan.safetensors", safetensors([(w[0][0], "F32", w[0][2], struct.pack("<f", float("nan")) * 72)] + w[1:]))
put("weights", "empty", b"")
put("weights", "hdr_only.safetensors", struct.pack("<Q", 2) + b"{}")

# ---- checkpoints of tests/libfake_train.so (runtime/rt_ckpt.c's layout) ----------------------
K, D = 10, 784
state = [("fc/weight", "F32", [K, D], f32(K * D)), ("fc/bias", "F32", [K], f32(K)),
         ("fc/weight/momentum", "F32", [K, D], f32(K * D, 0.01)), ("fc/bias/momentum", "F32", [K], f32(K, 0.01)),
         ("input/running_mean", "F32", [1], f32(1)), ("optimizer/step", "I32", [], struct.pack("<i", 7))]
step = [("step", "I64", [], struct.pack("<q", 7))]
meta = {"format": "cnnc-checkpoint", "model": "fake_train", "step": "7"}
put("ckpt", "ok.safetensors", safetensors(state + step, meta))
put("ckpt", "nometa.safetensors", safetensors(state + step))
put("ckpt", "small_step.safetensors", safetensors(step, meta))
put("ckpt", "reordered.safetensors", safetensors(list(reversed(state)) + step, meta))
put("ckpt", "i32step.safetensors", safetensors(state + [("step", "I32", [], struct.pack("<i", 7))], meta))
put("ckpt", "unicode.safetensors", safetensors(step, {"format": "cnnc-checkpoint", "model": "f\u00e9\\\"\u2603", "step": "7"}))

# ---- datasets (fuzz_data.c: first byte = case) ----------------------------------------------
def idx(dims, data):
    return bytes([0, 0, 8, len(dims)]) + b"".join(struct.pack(">I", d) for d in dims) + data


img = idx([3, 4, 4], bytes(rnd.randrange(256) for _ in range(48)))
lab = idx([2], bytes([1, 0]))  # fuzz_data.c's valid images file holds 2 samples
put("data", "idx_images", b"\0" + idx([2, 3, 3], bytes(range(18))))
put("data", "idx_images_28", b"\0" + idx([2, 28, 28], bytes(rnd.randrange(256) for _ in range(2 * 784))))
put("data", "idx_labels", b"\1" + lab)
put("data", "idx_labels_bad", b"\1" + idx([2], bytes([1, 250])))
put("data", "gz_images", b"\2" + gzip.compress(idx([2, 3, 3], bytes(range(18))), mtime=0))
put("data", "gz_labels", b"\3" + gzip.compress(lab, mtime=0))
put("data", "gz_plain", b"\3" + lab)
put("data", "gz_truncated", b"\2" + gzip.compress(idx([2, 3, 3], bytes(range(18))), mtime=0)[:-6])
rec = lambda l: bytes([l]) + bytes(rnd.randrange(256) for _ in range(3072))
put("data", "cifar_one", b"\4" + rec(3))
put("data", "cifar_two", b"\4" + rec(9) + rec(0))
put("data", "cifar_badlabel", b"\4" + rec(10))
put("data", "cifar_short", b"\4" + rec(1)[:100])
put("data", "empty", b"")

# ---- TFRecord shards (fuzz_tfrecord.c: first byte % 3 = case) --------------------------------
def crc32c(b):
    c = 0xFFFFFFFF
    for x in b:
        c ^= x
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
    return c ^ 0xFFFFFFFF


def tfr_mask(c):
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def tfr_record(data):
    n = struct.pack("<Q", len(data))
    return n + struct.pack("<I", tfr_mask(crc32c(n))) + data + struct.pack("<I", tfr_mask(crc32c(data)))


def pb_varint(v):
    v &= (1 << 64) - 1
    out = bytearray()
    while True:
        out.append((v & 0x7F) | (0x80 if v >> 7 else 0))
        v >>= 7
        if not v:
            return bytes(out)


def pb_ld(num, payload):
    return pb_varint(num << 3 | 2) + pb_varint(len(payload)) + payload


def tf_example(img, label, packed=True, extra=()):
    lab = pb_ld(1, pb_varint(label)) if packed else pb_varint(8) + pb_varint(label)
    feats = [("image/height", pb_ld(3, pb_ld(1, pb_varint(4)))), ("image/format", pb_ld(1, pb_ld(1, b"JPEG"))),
             ("image/object/bbox/xmin", pb_ld(2, pb_ld(1, struct.pack("<2f", 0.1, 0.5))))] + list(extra)
    feats += [("image/encoded", pb_ld(1, pb_ld(1, img))), ("image/class/label", pb_ld(3, lab))]
    return pb_ld(1, b"".join(pb_ld(1, pb_ld(1, k.encode()) + pb_ld(2, f)) for k, f in feats))


jpg = b"\xff\xd8\xff\xe0\x00\x10JFIF\x00" + bytes(rnd.randrange(256) for _ in range(40)) + b"\xff\xd9"
ex1, ex2 = tf_example(jpg, 7), tf_example(jpg[:20], -1, packed=False)
put("tfrecord", "shard_two", b"\0" + tfr_record(ex1) + tfr_record(ex2))
put("tfrecord", "shard_empty_record", b"\0" + tfr_record(b"") + tfr_record(ex1))
put("tfrecord", "shard_truncated", b"\0" + (tfr_record(ex1) + tfr_record(ex2))[:-9])
put("tfrecord", "shard_bad_crc", b"\0" + tfr_record(ex1)[:-1] + b"\0")
put("tfrecord", "example", b"\1" + ex1)
put("tfrecord", "example_unpacked", b"\1" + ex2)
put("tfrecord", "example_label_bytes", b"\1" + tf_example(jpg, 1, extra=[("image/class/label", pb_ld(1, pb_ld(1, b"1")))]))
put("tfrecord", "wrapped", b"\2" + ex1)
put("tfrecord", "wrapped_unknown", b"\2" + ex2 + pb_varint(7 << 3 | 1) + b"\1" * 8 + pb_varint(9 << 3 | 5) + b"\2" * 4)
put("tfrecord", "empty", b"")

# ---- ONNX models: Debian's libonnx-testdata node tests, the small ones ----------------------------
NODE = "/usr/share/libonnx-testdata/data/node"
if os.path.isdir(NODE):
    small = []
    for t in sorted(os.listdir(NODE)):
        p = os.path.join(NODE, t, "model.onnx")
        if os.path.isfile(p) and os.path.getsize(p) <= 4096:
            small.append((t, p))
    for t, p in small[::max(1, len(small) // 300)]:  # ~300 of them: seeding stays a few seconds
        with open(p, "rb") as f:
            put("onnx", t + ".onnx", f.read())
put("onnx", "empty.onnx", b"")

# ---- .so files ----------------------------------------------------------------------------------
TINY = """name: tiny%d
input: {shape: [%d, 4, 4], classes: 3}
layers:
  - {name: conv1, op: conv, filters: 2, kernel: 3, padding: 1}
  - {name: relu1, op: relu}
  - {name: flatten, op: flatten}
  - {name: fc, op: dense, units: 3}
"""
if build:
    cnnc = os.path.join(build, "cnnc")
    tmp = os.path.join(out, "tmp")
    os.makedirs(tmp, exist_ok=True)
    for i, extra in enumerate([[], ["--mode", "training"], ["--shards", "2"]]):
        y = os.path.join(tmp, "tiny%d.yml" % i)
        with open(y, "w") as f:
            f.write(TINY % (i, 1 + i))
        so = os.path.join(out, "so", "tiny%d.so" % i)
        os.makedirs(os.path.dirname(so), exist_ok=True)
        r = subprocess.run([cnnc, y, "-o", so, "--target-cpu", "x86-64"] + extra, capture_output=True, text=True)
        if r.returncode:
            sys.exit("make_seeds.py: cnnc %s failed: %s" % (y, r.stderr))
    for name in ("libfake_model.so", "libfake_train.so"):
        p = os.path.join(build, "tests", name)
        if os.path.exists(p):
            shutil.copy(p, os.path.join(out, "so", name))
    shutil.rmtree(tmp)
