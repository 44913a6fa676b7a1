#!/usr/bin/env python3
"""test_onnx_convtranspose.py BUILD SRC -- ONNX ConvTranspose (frontend/onnx_ops.c conv_transpose:
zeros spread between the input's pixels, then a stride-1 conv2d with the weight flipped and its
channels swapped per group) against PyTorch's nn.ConvTranspose1d/2d: strides, pads, output
padding, dilations, groups, with and without bias, exported with torch.onnx (opset 13, fixed
shapes), compiled with cnnc and run with `cnnrun infer`: max |got - want| <= 1e-5 + 1e-4 |want|.
An output_padding not less than the stride or the dilation must fail naming the node."""
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from testlib import Checks, build_src, compiles, infer_raw, need_module, run  # noqa: E402

BUILD, SRC = build_src(__doc__)
torch = need_module("torch", "Debian python3-torch")
np = need_module("numpy", "Debian python3-numpy")
onnx = need_module("onnx", "Debian python3-onnx")
import onnx.numpy_helper  # noqa: E402

CNNC, CNNRUN = os.path.join(BUILD, "cnnc"), os.path.join(BUILD, "cnnrun")
checks = Checks(verbose=True)
nn = torch.nn

# (input shape, cin, cout, kernel, stride, padding, output_padding, dilation, groups, bias)
CASES = [
    ((2, 3, 5, 6), 3, 4, 3, 1, 0, 0, 1, 1, True),
    ((2, 3, 5, 6), 3, 4, 3, 2, 1, 1, 1, 1, True),
    ((1, 4, 4, 5), 4, 6, (3, 2), (3, 2), (1, 0), (2, 1), 1, 2, False),
    ((2, 6, 4, 4), 6, 6, 3, 2, 2, 0, 2, 3, True),  # pads over the dilated kernel's reach: crops
    ((1, 8, 3, 3), 8, 8, 4, 2, 1, 0, 1, 8, True),  # depthwise
    ((2, 3, 7), 3, 5, 4, 3, 1, 2, 1, 1, True),     # 1-D
]

with tempfile.TemporaryDirectory(prefix="cnnc-onnx-convt-") as T:
    torch.manual_seed(0)
    for shape, cin, cout, k, s, p, op, d, g, bias in CASES:
        conv = (nn.ConvTranspose1d if len(shape) == 3 else nn.ConvTranspose2d)(
            cin, cout, k, stride=s, padding=p, output_padding=op, dilation=d, groups=g, bias=bias).eval()
        what = f"ConvTranspose x{list(shape)} k {k} s {s} p {p} op {op} d {d} g {g} bias {bias}"
        x = torch.randn(*shape)
        path = os.path.join(T, "m.onnx")
        torch.onnx.export(conv, x, path, opset_version=13, input_names=["x"], output_names=["y"])
        so = compiles(checks, CNNC, path, what)
        got = infer_raw(checks, CNNRUN, so, x.numpy(), what, T) if so else None
        if got is None:
            continue
        with torch.no_grad():
            want = conv(x).numpy()
        if not checks.check(got.size == want.size, what + f": {got.size} values, want {want.size}"):
            continue
        got = got.reshape(want.shape)
        err = float(np.abs(got - want).max())
        checks.check(bool((np.abs(got - want) <= 1e-5 + 1e-4 * np.abs(want)).all()), what + f": max abs err {err:.3g}")
    # output_padding 2 with stride 2 and dilation 1: refused, naming node and attribute
    node = onnx.helper.make_node("ConvTranspose", ["x", "w"], ["y"], name="up", strides=[2], output_padding=[2])
    w = onnx.numpy_helper.from_array(np.ones((3, 5, 4), np.float32), "w")
    gr = onnx.helper.make_graph([node], "g", [onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2, 3, 7])],
                                [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)], [w])
    onnx.save(onnx.helper.make_model(gr, opset_imports=[onnx.helper.make_opsetid("", 13)]), path)
    r = run([CNNC, path, "-o", path + ".so"], timeout=120)
    out = (r.stdout + r.stderr).strip()
    checks.check(r.returncode == 1 and "node 'up' (#0, ConvTranspose, opset 13)" in out and "'output_padding'" in out,
                 "output_padding 2 with stride 2 is refused: '%s'" % out[:200])
sys.exit(checks.summary())
