#!/usr/bin/env python3
"""test_onnx_softmax_axis.py BUILD SRC -- ONNX Softmax over an axis other than the last
(frontend/onnx_ops.c softmax): before opset 13 the input is coerced to 2-D at axis (one softmax
over all the dims from axis on); from 13 over the axis, importable when the dims after it are 1.
Hand-made one-node models are compiled with cnnc, run with `cnnrun infer` and compared with
numpy (|got - want| <= 1e-6 + 1e-5 |want|); the unsupported ones (axis 0, the batch; opset 13
over a non-last axis with dims > 1 after it) must fail naming the node."""
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from testlib import Checks, build_src, need_module, run  # noqa: E402

BUILD, SRC = build_src(__doc__)
onnx = need_module("onnx", "Debian python3-onnx")
np = need_module("numpy", "Debian python3-numpy")
from onnx import TensorProto, helper  # noqa: E402

CNNC, CNNRUN = os.path.join(BUILD, "cnnc"), os.path.join(BUILD, "cnnrun")
checks = Checks(verbose=True)


def model(shape, axis, opset):
    node = helper.make_node("Softmax", ["x"], ["y"], name="sm", axis=axis)
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def softmax(x, axis, opset):
    if opset < 13:  # coerced to 2-D at axis
        x2 = x.reshape(int(np.prod(x.shape[:axis])), -1).astype(np.float64)
        e = np.exp(x2 - x2.max(axis=1, keepdims=True))
        return (e / e.sum(axis=1, keepdims=True)).reshape(x.shape)
    x = x.astype(np.float64)
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


rng = np.random.default_rng(3)
with tempfile.TemporaryDirectory(prefix="cnnc-onnx-softmax-") as T:
    for shape, axis, opset in [((2, 3, 4, 5), 1, 11), ((2, 3, 4, 5), 2, 11), ((2, 3, 4, 5), -3, 11),
                               ((3, 4, 5), 1, 11), ((2, 6, 1, 1), 1, 13), ((2, 5, 3, 1), 2, 13),
                               ((2, 7), 1, 13)]:
        what = "Softmax x%s axis %d opset %d" % (list(shape), axis, opset)
        p = os.path.join(T, "m.onnx")
        onnx.save(model(shape, axis, opset), p)
        r = run([CNNC, p, "-o", p + ".so"], timeout=120)
        if not checks.check(r.returncode == 0, what + ": compiles (" + r.stderr.strip()[:200] + ")"):
            continue
        x = rng.standard_normal(shape).astype(np.float32) * 3
        xin, yout = os.path.join(T, "x.raw"), os.path.join(T, "y.raw")
        x.tofile(xin)
        r = run([CNNRUN, p + ".so", "infer", "--input", xin, "--output", yout, "--format", "raw"], timeout=120)
        if not checks.check(r.returncode == 0, what + ": runs (" + (r.stderr + r.stdout).strip()[:200] + ")"):
            continue
        got = np.fromfile(yout, dtype=np.float32).reshape(shape)
        want = softmax(x, axis + len(shape) if axis < 0 else axis, opset)
        err = float(np.abs(got - want).max())
        checks.check(bool((np.abs(got - want) <= 1e-6 + 1e-5 * np.abs(want)).all()), what + ": max abs err %.3g" % err)
    for shape, axis, opset, pattern in [((2, 3, 4), 1, 13, "softmax over axis 1 of a rank-3 tensor is not supported"),
                                        ((2, 3, 4), 0, 11, "softmax over axis 0 of a rank-3 tensor is not supported")]:
        p = os.path.join(T, "bad.onnx")
        onnx.save(model(shape, axis, opset), p)
        r = run([CNNC, p, "-o", p + ".so"], timeout=120)
        out = (r.stdout + r.stderr).strip()
        checks.check(r.returncode == 1 and "node 'sm' (#0, Softmax, opset %d)" % opset in out and pattern in out,
                     "x%s axis %d opset %d is refused: '%s'" % (list(shape), axis, opset, out[:200]))
sys.exit(checks.summary())
