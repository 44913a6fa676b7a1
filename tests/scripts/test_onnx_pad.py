#!/usr/bin/env python3
"""test_onnx_pad.py BUILD SRC -- ONNX Pad beyond the zero pads folded into a Conv or
AveragePool (frontend/onnx_ops.c pad_node): constant mode with nonzero values, pads of the
channel dim, negative pads (crops), a pad followed by a Relu; reflect and edge modes, compiled with cnnc and run with `cnnrun
infer` against numpy's np.pad (exact); padding dim 0 crosses it (docs/onnx.md "Dim 0"), so
with a symbolic dim 0 it must fail naming the node; a zero pad compiles for training, a
nonzero value is refused there."""
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from testlib import Checks, build_src, compiles, infer_raw, need_module, run  # noqa: E402

BUILD, SRC = build_src(__doc__)
onnx = need_module("onnx", "Debian python3-onnx")
np = need_module("numpy", "Debian python3-numpy")
import onnx.numpy_helper  # noqa: E402
from onnx import TensorProto, helper  # noqa: E402

CNNC, CNNRUN = os.path.join(BUILD, "cnnc"), os.path.join(BUILD, "cnnrun")
checks = Checks(verbose=True)
rng = np.random.default_rng(7)


def model(shape, pads, value, tail=None, mode="constant"):
    inits = [onnx.numpy_helper.from_array(np.array(pads, np.int64), "pads"),
             onnx.numpy_helper.from_array(np.array(value, np.float32), "value")]
    nodes = [helper.make_node("Pad", ["x", "pads", "value"], ["p" if tail else "y"], name="pad", mode=mode)]
    if tail:
        nodes.append(helper.make_node(tail, ["p"], ["y"], name="tail"))
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])


def np_pad(x, pads, value, mode="constant"):
    r = x.ndim
    for d in range(r):  # crops first
        b, e = pads[d], pads[r + d]
        x = x[(slice(None),) * d + (slice(-b if b < 0 else 0, x.shape[d] + e if e < 0 else None),)]
    widths = [(max(pads[d], 0), max(pads[r + d], 0)) for d in range(r)]
    return np.pad(x, widths, constant_values=value) if mode == "constant" else np.pad(x, widths, mode=mode)


def train_model(p, value):
    inits = [onnx.numpy_helper.from_array(np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int64), "pads"),
             onnx.numpy_helper.from_array(np.array(value, np.float32), "value"),
             onnx.numpy_helper.from_array(rng.standard_normal((3 * 6 * 7, 4)).astype(np.float32), "w")]
    nodes = [helper.make_node("Pad", ["x", "pads", "value"], ["p"], name="pad", mode="constant"),
             helper.make_node("Flatten", ["p"], ["f"], name="flat"), helper.make_node("MatMul", ["f", "w"], ["y"], name="fc")]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 4, 5])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), p)


with tempfile.TemporaryDirectory(prefix="cnnc-onnx-pad-") as T:
    p = os.path.join(T, "m.onnx")
    for shape, pads, value, tail, mode in [((2, 3, 4, 5), [0, 0, 1, 2, 0, 0, 2, 1], 1.5, None, "constant"),
                                           ((2, 3, 4, 5), [0, 1, 0, 0, 0, 2, 0, 0], 0.0, None, "constant"),
                                           ((2, 3, 4, 5), [0, 0, -1, 2, 0, 0, 1, -2], -2.0, "Relu", "constant"),
                                           ((2, 3, 6), [0, 0, 3, 0, 0, 4], 0.0, "Relu", "constant"),
                                           ((3, 4), [1, 0, 0, 2], 0.25, None, "constant"),
                                           ((2, 3, 4, 5), [0, 0, 2, 3, 0, 0, 3, 4], 9.0, None, "reflect"),
                                           ((2, 3, 4, 5), [0, 0, 2, 1, 0, 0, 3, 5], 9.0, "Relu", "edge"),
                                           ((2, 5, 7), [0, 0, 6, 0, 0, 1], 0.0, None, "reflect")]:
        what = f"Pad {mode} x{list(shape)} pads {pads} value {value}" + (f" then {tail}" if tail else "")
        onnx.save(model(shape, pads, value, tail, mode), p)
        so = compiles(checks, CNNC, p, what)
        x = rng.standard_normal(shape).astype(np.float32)
        got = infer_raw(checks, CNNRUN, so, x, what, T) if so else None
        if got is None:
            continue
        want = np_pad(x, pads, np.float32(value), mode)
        if tail == "Relu":
            want = np.maximum(want, 0)
        if checks.check(got.size == want.size, what + f": {got.size} values, want {want.size}"):
            checks.check(bool((got.reshape(want.shape) == want).all()), what + ": equal to np.pad")
    onnx.save(model(("N", 4), [1, 0, 0, 2], 0.0), p)
    r = run([CNNC, p, "-o", p + ".so", "--batch-size", "2"], timeout=120)
    out = (r.stdout + r.stderr).strip()
    checks.check(r.returncode == 1 and "node 'pad' (#0, Pad, opset 13)" in out and "padding dim 0 crosses dim 0" in out,
                 f"padding a symbolic dim 0 is refused: '{out[:200]}'")
    # training: a zero pad before a Flatten and MatMul compiles (slice_grad, its gradient a slice);
    # a nonzero value is refused naming node and value
    for value, ok in [(0.0, True), (0.5, False)]:
        train_model(p, value)
        r = run([CNNC, p, "-o", p + ".so", "--mode", "training", "--batch-size", "4"], timeout=120)
        out = (r.stdout + r.stderr).strip()
        checks.check(r.returncode == 0 if ok else
                     r.returncode == 1 and "node 'pad' (#0, Pad, opset 13): padding with 0.5 is not supported with --mode "
                     "training" in out, f"training, pad value {value}: '{out[:200]}'")
sys.exit(checks.summary())
