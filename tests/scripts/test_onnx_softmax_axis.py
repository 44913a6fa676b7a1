#!/usr/bin/env python3
"""test_onnx_softmax_axis.py BUILD SRC -- ONNX Softmax and Hardmax over an axis other than the
last (frontend/onnx_ops.c softmax_like): before opset 13 the input is coerced to 2-D at axis (one
softmax over all the dims from axis on); from 13 over the axis (a reshape when the dims after it
are 1, else transposes around the op).  Hand-made one-node models are compiled with cnnc, run
with `cnnrun infer` and compared with numpy (|got - want| <= 1e-6 + 1e-5 |want|); axis 0 of a
fixed dim 0 is computed (docs/onnx.md "Dim 0"); axis 0 of a symbolic dim 0 (the batch) or in
--mode training must fail naming the node."""
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from testlib import Checks, build_src, compiles, infer_raw, need_module, run, so_info  # noqa: E402

BUILD, SRC = build_src(__doc__)
onnx = need_module("onnx", "Debian python3-onnx")
np = need_module("numpy", "Debian python3-numpy")
from onnx import TensorProto, helper  # noqa: E402

CNNC, CNNRUN = os.path.join(BUILD, "cnnc"), os.path.join(BUILD, "cnnrun")
checks = Checks(verbose=True)


def model(shape, axis, opset, op="Softmax"):
    node = helper.make_node(op, ["x"], ["y"], name="sm", axis=axis)
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def softmax(x, axis, opset, hardmax=False):
    if opset < 13:  # coerced to 2-D at axis
        x2 = x.reshape(int(np.prod(x.shape[:axis])), -1).astype(np.float64)
        if hardmax:
            return np.eye(x2.shape[1])[x2.argmax(1)].reshape(x.shape)
        e = np.exp(x2 - x2.max(axis=1, keepdims=True))
        return (e / e.sum(axis=1, keepdims=True)).reshape(x.shape)
    x = x.astype(np.float64)
    if hardmax:
        m = np.moveaxis(x, axis, -1)
        h = np.eye(m.shape[-1])[m.argmax(-1)]
        return np.moveaxis(h, -1, axis)
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


rng = np.random.default_rng(3)
with tempfile.TemporaryDirectory(prefix="cnnc-onnx-softmax-") as T:
    for shape, axis, opset, op in [((2, 3, 4, 5), 1, 11, "Softmax"), ((2, 3, 4, 5), 2, 11, "Softmax"),
                                   ((2, 3, 4, 5), -3, 11, "Softmax"), ((3, 4, 5), 1, 11, "Softmax"),
                                   ((2, 6, 1, 1), 1, 13, "Softmax"), ((2, 5, 3, 1), 2, 13, "Softmax"),
                                   ((2, 7), 1, 13, "Softmax"), ((2, 3, 4), 1, 13, "Softmax"),
                                   ((2, 3, 4), 0, 11, "Softmax"), ((2, 3, 4), 0, 13, "Softmax"),
                                   ((2, 3, 4, 5), -3, 13, "Softmax"), ((3, 4, 5), 0, 13, "Hardmax"),
                                   ((3, 4, 5), 1, 13, "Hardmax"), ((3, 4, 5), 2, 13, "Hardmax"),
                                   ((3, 4, 5), 1, 11, "Hardmax")]:
        what = "%s x%s axis %d opset %d" % (op, list(shape), axis, opset)
        p = os.path.join(T, "m.onnx")
        onnx.save(model(shape, axis, opset, op), p)
        if not compiles(checks, CNNC, p, what):
            continue
        # across dim 0 the whole tensor is one sample: batch 1, input [1, all]; else dim 0 is the batch
        info = so_info(CNNRUN, p + ".so")
        crosses = (axis + len(shape)) % len(shape) == 0
        want_b, want_in = (1, [1, int(np.prod(shape))]) if crosses else (shape[0], list(shape))
        checks.check(info["batch_size"] == want_b and info["tensors"][info["input"]]["shape"] == want_in,
                     what + ": batch %d, input %s (want %d, %s)" % (info["batch_size"], info["tensors"][info["input"]]["shape"],
                                                                  want_b, want_in))
        x = rng.standard_normal(shape).astype(np.float32) * 3
        got = infer_raw(checks, CNNRUN, p + ".so", x, what, T)
        if got is None:
            continue
        got = got.reshape(shape)
        want = softmax(x, axis + len(shape) if axis < 0 else axis, opset, op == "Hardmax")
        err = float(np.abs(got - want).max())
        checks.check(bool((np.abs(got - want) <= 1e-6 + 1e-5 * np.abs(want)).all()), what + ": max abs err %.3g" % err)
    # axis 0 is the batch when dim 0 is symbolic or in training: refused, naming node and reason
    for shape, axis, opset, args, pattern in [
            (("N", 3, 4), 0, 13, ["--batch-size", "2"], "Softmax over axis 0 crosses dim 0"),
            (("N", 3, 4), 0, 11, ["--batch-size", "2"], "Softmax over axis 0 crosses dim 0"),
            ((2, 3, 4), 0, 13, ["--mode", "training"], "Softmax over axis 0 crosses dim 0")]:
        p = os.path.join(T, "bad.onnx")
        onnx.save(model(shape, axis, opset), p)
        r = run([CNNC, p, "-o", p + ".so"] + args, timeout=120)
        out = (r.stdout + r.stderr).strip()
        checks.check(r.returncode == 1 and "node 'sm' (#0, Softmax, opset %d)" % opset in out and pattern in out,
                     "x%s axis %d opset %d %s is refused: '%s'" % (list(shape), axis, opset, " ".join(args), out[:200]))
sys.exit(checks.summary())
