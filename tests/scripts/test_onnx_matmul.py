#!/usr/bin/env python3
"""test_onnx_matmul.py BUILD SRC -- ONNX MatMul of an activation A by a constant B beyond
[N, K] x [K, P] (frontend/onnx_ops.c matmul, batched_matmul): A of rank 3 or 4 by a rank-2 B
(rows, dense, reshape back) and by a B of A's rank (one dense per matrix, concatenated along
dim 0), compiled with cnnc and run with `cnnrun infer` against numpy (|got - want| <= 1e-5 +
1e-4 |want|).  Both cross dim 0 (docs/onnx.md "Dim 0"): with a symbolic dim 0 they must fail
naming the node."""
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
rng = np.random.default_rng(5)


def model(ashape, b):
    node = helper.make_node("MatMul", ["a", "b"], ["y"], name="mm")
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("a", TensorProto.FLOAT, list(ashape))],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                          [onnx.numpy_helper.from_array(b, "b")])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])


with tempfile.TemporaryDirectory(prefix="cnnc-onnx-matmul-") as T:
    p = os.path.join(T, "m.onnx")
    for ashape, bshape in [((2, 3, 4), (4, 5)), ((2, 2, 3, 4), (4, 3)), ((3, 2, 5), (3, 5, 4)),
                           ((2, 3, 1, 4), (2, 3, 4, 6)), ((1, 7, 4), (1, 4, 9))]:
        what = f"MatMul A{list(ashape)} B{list(bshape)}"
        b = rng.standard_normal(bshape).astype(np.float32)
        onnx.save(model(ashape, b), p)
        so = compiles(checks, CNNC, p, what)
        a = rng.standard_normal(ashape).astype(np.float32)
        got = infer_raw(checks, CNNRUN, so, a, what, T) if so else None
        if got is None:
            continue
        want = np.matmul(a.astype(np.float64), b.astype(np.float64))
        if not checks.check(got.size == want.size, what + f": {got.size} values, want {want.size}"):
            continue
        got = got.reshape(want.shape)
        checks.check(bool((np.abs(got - want) <= 1e-5 + 1e-4 * np.abs(want)).all()),
                     what + f": max abs err {float(np.abs(got - want).max()):.3g}")
    for ashape, bshape in [(("N", 3, 4), (4, 5)), (("N", 3, 4), (2, 4, 5))]:
        onnx.save(model(ashape, rng.standard_normal(bshape).astype(np.float32)), p)
        r = run([CNNC, p, "-o", p + ".so", "--batch-size", "2"], timeout=120)
        out = (r.stdout + r.stderr).strip()
        checks.check(r.returncode == 1 and "node 'mm' (#0, MatMul, opset 13)" in out and "crosses dim 0" in out,
                     f"MatMul A{list(ashape)} B{list(bshape)} with a symbolic dim 0 is refused: '{out[:200]}'")
sys.exit(checks.summary())
