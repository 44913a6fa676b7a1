#!/usr/bin/python3
"""test_python_zoo.py BUILD SRC -- cnnrt.Model.run (python/cnnrt, docs/python.md) gives bitwise the
outputs of `cnnrun infer` on ResNet-50 and EfficientNet-B0: each compiled by the build's cnnc
(host target, batch 1, 1 shard) with He-initialised weights (--weights: conv and dense weights
N(0, 2/fan_in), batchnorm gamma 1, running variance 1, the rest 0, as torchvision initialises
them; cnnc's own --seed initialisation lets EfficientNet-B0's logits come out the same for any
image), two seeded random f32 images run by `cnnrun infer --output`
(one call of two micro-batches) and by Model.run (the same) and Model.run_batches(x, 1) (one
micro-batch per call); the logits of the two images differ, so the comparison can fail.
CNNC_PY_ZOO_MODELS=a,b restricts the models.  Ends with "N passed, M failed"."""
import json
import os
import re
import sys
import tempfile

import numpy as np

import testlib

BUILD, SRC = testlib.build_src(__doc__)
BUILD = os.path.abspath(BUILD)
CNNC, CNNRUN = os.path.join(BUILD, "cnnc"), os.path.join(BUILD, "cnnrun")
testlib.need_built(CNNC, CNNRUN, os.path.join(BUILD, "python", "cnnrt", "_config.py"))
os.environ.pop("CNNRT_LIBRARY", None)
sys.path.insert(0, os.path.join(BUILD, "python"))
import cnnrt  # noqa: E402

MODELS = os.environ.get("CNNC_PY_ZOO_MODELS", "resnet50,efficientnet_b0").split(",")
CHECKS = testlib.Checks(verbose=True)
check = CHECKS.check


def he_weights(yml, path):
    """Writes path: a safetensors file with every param of yml (from `cnnc --emit ir`), He-initialised."""
    r = testlib.run([CNNC, yml, "--emit", "ir"])
    params = re.findall(r"^param %(\S+) : f32\[([\d,]+)\]", r.stdout, re.M)
    rnd = np.random.RandomState(3)
    header, blobs, off = {}, [], 0
    for name, dims in params:
        shape = [int(d) for d in dims.split(",")]
        leaf = name.rsplit("/", 1)[-1]
        if leaf == "weight":
            a = rnd.standard_normal(shape) * np.sqrt(2.0 / max(1, int(np.prod(shape[1:]))))
        else:
            a = np.full(shape, 1.0 if leaf in ("gamma", "running_var") else 0.0)
        b = a.astype("<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": shape, "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(len(h).to_bytes(8, "little") + h)
        for b in blobs:
            f.write(b)
    return len(params)


def one(tmp, name):
    so, raw, out = (os.path.join(tmp, name + ext) for ext in (".so", ".in.raw", ".out.raw"))
    yml, weights = os.path.join(SRC, "models", name + ".yml"), os.path.join(tmp, name + ".safetensors")
    n = he_weights(yml, weights)
    check(n > 50, f"{name}: {n} params He-initialised")
    rc, msg = testlib.run_output([CNNC, yml, "--weights", weights, "-o", so])
    os.remove(weights)
    if not check(rc == 0, f"{name}: compile ({msg.strip()[-200:]})"):
        return
    with cnnrt.Model(so) as m:
        x = np.random.RandomState(11).standard_normal((2,) + m.inputs[0].shape[1:]).astype(m.inputs[0].dtype)
        x.tofile(raw)
        r = testlib.run([CNNRUN, so, "infer", "--input", raw, "--format", "raw", "--output", out])
        if not check(r.returncode == 0, f"{name}: cnnrun infer ({r.stderr.strip()[-200:]})"):
            return
        ref = np.fromfile(out, np.float32)
        (y,) = m.run(None, {m.inputs[0].name: x})
        (y1,) = m.run_batches(x, 1)
    check(y.shape == (2,) + m.outputs[0].shape[1:] and y.dtype == np.float32, f"{name}: output {y.shape} {y.dtype}")
    diff = float(np.max(np.abs(y.ravel() - ref))) if y.size == ref.size else float("inf")
    check(y.tobytes() == ref.tobytes(), f"{name}: Model.run is bitwise cnnrun infer (max |diff| {diff:g})")
    check(y1.tobytes() == ref.tobytes(), f"{name}: Model.run_batches(x, 1) is bitwise cnnrun infer")
    check(not np.array_equal(y[0], y[1]) and np.all(np.isfinite(y)),
          f"{name}: the two images' logits differ (max |y0 - y1| {float(np.max(np.abs(y[0] - y[1]))):g})")


def main():
    with tempfile.TemporaryDirectory(prefix="cnnc_py_zoo_") as tmp:
        for name in MODELS:
            one(tmp, name)
    return CHECKS.summary()


if __name__ == "__main__":
    sys.exit(main())
