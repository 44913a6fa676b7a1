#!/usr/bin/env python3
"""test_onnx_integer.py BUILD SRC -- integer tensors of ONNX models (docs/onnx.md "Integer
tensors") against numpy's integer arithmetic, exactly: uint8 Add/Sub/Mul/Div over the whole
range (results wrapped modulo 256, Div truncated), an int8 chain with negative values, a
ConvInteger of 64 channels 3x3 (which would take the inexact Winograd route as a float conv:
the plan must not name it) and MatMulInteger with zero points, a MaxPool of uint8 with its int64
Indices, an int32 edge Pad; outputs are read in their ONNX dtypes.  The refusals, each naming
the node or input: int32 arithmetic, int64 inputs, a ConvInteger whose sums could pass 2^24,
a float op on an integer tensor, integer constants beyond 2^24, integer inputs with --mode
training or --precision 16.32; and at run time an int32 input value beyond 2^24."""
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from testlib import Checks, build_src, need_module, run  # noqa: E402

BUILD, SRC = build_src(__doc__)
np = need_module("numpy", "Debian python3-numpy")
onnx = need_module("onnx", "Debian python3-onnx")
nh = need_module("onnx.numpy_helper", "Debian python3-onnx")
H = onnx.helper
CNNC, CNNRUN = os.path.join(BUILD, "cnnc"), os.path.join(BUILD, "cnnrun")
T = onnx.TensorProto
NP2T = {np.dtype(np.uint8): T.UINT8, np.dtype(np.int8): T.INT8, np.dtype(np.int32): T.INT32, np.dtype(np.int64): T.INT64,
        np.dtype(np.float32): T.FLOAT, np.dtype(np.bool_): T.BOOL}
checks = Checks(verbose=True)
rng = np.random.default_rng(7)


def model(nodes, x, outs, inits=(), opset=13):
    """A model of nodes with the one input x (an array: its dtype and shape) and outputs
    [(name, numpy dtype)], the initializers inits [(name, array)]."""
    g = H.make_graph(nodes, "g", [H.make_tensor_value_info("x", NP2T[x.dtype], list(x.shape))],
                     [H.make_tensor_value_info(n, NP2T[np.dtype(d)], None) for n, d in outs],
                     [nh.from_array(a, name=n) for n, a in inits])
    return H.make_model(g, opset_imports=[H.make_opsetid("", opset)])


def compile_run(tmp, name, m, x, outs, args=()):
    """cnnc + cnnrun infer of model m on x: the outputs as arrays of the dtypes outs asks, or
    (None, the error text)."""
    p, so = os.path.join(tmp, name + ".onnx"), os.path.join(tmp, name + ".so")
    onnx.save(m, p)
    r = run([CNNC, p, "-o", so, *args], timeout=120)
    if r.returncode:
        return None, r.stderr.strip()
    xin, yout = os.path.join(tmp, name + ".x"), os.path.join(tmp, name + ".y")
    np.ascontiguousarray(x).tofile(xin)
    r = run([CNNRUN, so, "infer", "--input", xin, "--output", yout, "--format", "raw"], timeout=120)
    if r.returncode:
        return None, (r.stderr + r.stdout).strip()
    raw, res = np.fromfile(yout, dtype=np.uint8), []
    for shape, d in outs:
        n = int(np.prod(shape)) * np.dtype(d).itemsize
        res.append(raw[:n].view(d).reshape(shape))
        raw = raw[n:]
    return (res if raw.size == 0 else None), f"{raw.size} bytes left over"


def same(tmp, name, m, x, want, args=()):
    got, err = compile_run(tmp, name, m, x, [(w.shape, w.dtype) for w in want], args)
    ok = got is not None and all(g.dtype == w.dtype and np.array_equal(g, w) for g, w in zip(got, want))
    checks.check(ok, f"{name}: equals numpy exactly" + ("" if got is not None else f" ({err[:300]})"))
    checks.check(any(np.any(w != w.flat[0]) for w in want), f"{name}: the expected values differ between elements")


def refused(tmp, name, m, words, args=()):
    p = os.path.join(tmp, name + ".onnx")
    onnx.save(m, p)
    r = run([CNNC, p, "-o", os.path.join(tmp, name + ".so"), *args], timeout=120)
    checks.check(r.returncode != 0 and all(w in r.stderr for w in words), f"{name}: refused with {words} ({r.stderr.strip()[:300]})")


with tempfile.TemporaryDirectory(prefix="cnnc-onnx-int-") as tmp:
    # uint8 arithmetic over the whole range: numpy's uint8 ops wrap; Div truncates (no zero divisors)
    x = rng.integers(0, 256, (4, 3, 5, 6), dtype=np.uint8)
    y = rng.integers(1, 256, (3, 5, 6), dtype=np.uint8)
    for op, f in (("Add", np.add), ("Sub", np.subtract), ("Mul", np.multiply), ("Div", np.floor_divide)):
        same(tmp, "uint8_" + op, model([H.make_node(op, ["x", "y"], ["z"], name="n_" + op)], x, [("z", np.uint8)], [("y", y)]), x,
             [f(x, y)])
    # int8: x - 100, times 3 (wraps), divided by a negative constant (truncation toward 0), max pooled
    x8 = rng.integers(-128, 128, (2, 2, 6, 6), dtype=np.int8)
    c100, c3, cm7 = np.array(100, np.int8), np.array(3, np.int8), np.array(-7, np.int8)
    t = (x8.astype(np.int64) - 100).astype(np.int8)
    t = (t.astype(np.int64) * 3).astype(np.int8)
    t = np.trunc(t.astype(np.int64) / -7).astype(np.int8)
    want = t.reshape(2, 2, 3, 2, 3, 2).max(axis=(3, 5))
    nodes = [H.make_node("Sub", ["x", "c100"], ["a"]), H.make_node("Mul", ["a", "c3"], ["b"]), H.make_node("Div", ["b", "cm7"], ["c"]),
             H.make_node("MaxPool", ["c"], ["z"], kernel_shape=[2, 2], strides=[2, 2])]
    same(tmp, "int8_chain", model(nodes, x8, [("z", np.int8)], [("c100", c100), ("c3", c3), ("cm7", cm7)]), x8, [want])
    # ConvInteger: u8 input with zero point 100, int8 weights in [-16, 16], 64 -> 64 channels 3x3 pad 1
    xc = rng.integers(0, 256, (1, 64, 28, 28), dtype=np.uint8)
    w = rng.integers(-16, 17, (64, 64, 3, 3), dtype=np.int8)
    xp = np.pad(xc.astype(np.int64) - 100, ((0, 0), (0, 0), (1, 1), (1, 1)))
    ref = np.zeros((1, 64, 28, 28), np.int64)
    for ky in range(3):
        for kx in range(3):
            ref += np.einsum("nchw,oc->nohw", xp[:, :, ky:ky + 28, kx:kx + 28], w[:, :, ky, kx].astype(np.int64))
    conv = model([H.make_node("ConvInteger", ["x", "w", "zp"], ["z"], name="convint", pads=[1, 1, 1, 1])], xc, [("z", np.int32)],
                 [("w", w), ("zp", np.array(100, np.uint8))], opset=10)
    same(tmp, "convinteger_64ch", conv, xc, [ref.astype(np.int32)])
    p = os.path.join(tmp, "convinteger_64ch.onnx")
    pin = ["--target-cpu", "x86-64-v3"]  # 8 lanes: the Winograd route's minimum
    r = run([CNNC, p, "--emit", "plan", "-o", os.path.join(tmp, "plan.txt"), *pin])
    plan = open(os.path.join(tmp, "plan.txt")).read() if r.returncode == 0 and os.path.exists(os.path.join(tmp, "plan.txt")) else ""
    checks.check("convint" in plan and "wino" not in plan, f"ConvInteger's plan takes no Winograd route ({r.stderr.strip()[:200]})")
    mf = model([H.make_node("Conv", ["x", "w"], ["z"], name="convf", pads=[1, 1, 1, 1])], xc.astype(np.float32), [("z", np.float32)],
               [("w", w.astype(np.float32))])
    onnx.save(mf, os.path.join(tmp, "convf.onnx"))
    r = run([CNNC, os.path.join(tmp, "convf.onnx"), "--emit", "plan", "-o", os.path.join(tmp, "planf.txt"), *pin])
    planf = open(os.path.join(tmp, "planf.txt")).read() if r.returncode == 0 else ""
    checks.check("wino" in planf, "the same conv of floats takes Winograd (the check above can fail)")
    # MatMulInteger with both zero points
    a = rng.integers(0, 256, (5, 7), dtype=np.uint8)
    b = rng.integers(0, 256, (7, 3), dtype=np.uint8)
    want = (a.astype(np.int64) - 12) @ (b.astype(np.int64) - 200)
    mm = model([H.make_node("MatMulInteger", ["x", "b", "az", "bz"], ["z"])], a, [("z", np.int32)],
               [("b", b), ("az", np.array(12, np.uint8)), ("bz", np.array(200, np.uint8))], opset=10)
    same(tmp, "matmulinteger", mm, a, [want.astype(np.int32)])
    # uint8 MaxPool with its int64 Indices (a fixed dim 0: one sample); int32 edge Pad
    xm = rng.permutation(256)[:2 * 2 * 4 * 4].astype(np.uint8).reshape(2, 2, 4, 4)
    blocks = xm.reshape(2, 2, 2, 2, 2, 2).transpose(0, 1, 2, 4, 3, 5).reshape(2, 2, 2, 2, 4)
    k = blocks.argmax(axis=4)
    yy, xx = np.arange(2)[:, None] * 2 + k // 2, np.arange(2)[None, :] * 2 + k % 2
    idx = (np.arange(4).reshape(2, 2, 1, 1) * 16 + yy * 4 + xx).astype(np.int64)
    same(tmp, "maxpool_indices_u8", model([H.make_node("MaxPool", ["x"], ["z", "i"], kernel_shape=[2, 2], strides=[2, 2])], xm,
                                          [("z", np.uint8), ("i", np.int64)], opset=12), xm, [blocks.max(axis=4), idx])
    xi = rng.integers(-2**24, 2**24 + 1, (1, 2, 3, 4), dtype=np.int32)
    pad = model([H.make_node("Pad", ["x", "p"], ["z"], mode="edge")], xi, [("z", np.int32)],
                [("p", np.array([0, 0, 1, 2, 0, 0, 2, 1], np.int64))])
    same(tmp, "int32_edge_pad", pad, xi, [np.pad(xi, ((0, 0), (0, 0), (1, 2), (2, 1)), mode="edge")])
    xi[0, 1, 2, 3] = 2**24 + 1
    got, err = compile_run(tmp, "int32_edge_pad", pad, xi, [((1, 2, 6, 7), np.int32)])
    checks.check(got is None and "element 23" in err and "2^24" in err, f"an int32 input beyond 2^24 is refused at run time ({err[:200]})")
    # refusals
    x32 = np.zeros((2, 3), np.int32)
    refused(tmp, "int32_add", model([H.make_node("Add", ["x", "x"], ["z"], name="add32")], x32, [("z", np.int32)]),
            ["'add32'", "int32", "2^24"])
    refused(tmp, "int64_input", model([H.make_node("Identity", ["x"], ["z"])], np.zeros((2, 3), np.int64), [("z", np.int64)]),
            ["input 'x'", "INT64"])
    big = model([H.make_node("ConvInteger", ["x", "w"], ["z"], name="bigconv")], xc, [("z", np.int32)],
                [("w", np.full((8, 64, 3, 3), 127, np.int8))], opset=10)
    refused(tmp, "convinteger_bound", big, ["'bigconv'", "2^24"])
    refused(tmp, "sigmoid_of_u8", model([H.make_node("Sigmoid", ["x"], ["z"], name="sig")], x, [("z", np.float32)]),
            ["'sig'", "integer tensor", "Sigmoid"])
    refused(tmp, "int32_clip_bound", model([H.make_node("Clip", ["x", "lo"], ["z"], name="clip32")], x32, [("z", np.int32)],
                                           [("lo", np.array(2**25, np.int32))]), ["'clip32'", "2^24"])
    refused(tmp, "u8_training", model([H.make_node("Identity", ["x"], ["z"])], x, [("z", np.uint8)]), ["input 'x'", "inference"],
            ["--mode", "training"])
    refused(tmp, "u8_precision16", model([H.make_node("Identity", ["x"], ["z"])], x, [("z", np.uint8)]), ["input 'x'", "32.32"],
            ["--precision", "16.32"])
    # the review's cases (2026-11-29): bounds before arithmetic, ranges, what stays an integer
    refused(tmp, "u8_add_const_range", model([H.make_node("Add", ["x", "c"], ["z"], name="add300")], x, [("z", np.uint8)],
                                             [("c", np.array(300, np.int32))]), ["'add300'", "300", "uint8"])
    refused(tmp, "convinteger_huge_weight", model([H.make_node("ConvInteger", ["x", "w"], ["z"], name="hugew")], xc,
                                                  [("z", np.int32)], [("w", np.full((1, 1, 1, 1), 2**62, np.int64))], opset=10),
            ["'hugew'", "2^24"])
    refused(tmp, "convinteger_huge_zero_point", model([H.make_node("ConvInteger", ["x", "w", "xz"], ["z"], name="hugezp")], xc,
                                                      [("z", np.int32)], [("w", np.ones((1, 1, 1, 1), np.int8)),
                                                                          ("xz", np.array(-2**63, np.int64))], opset=10),
            ["'hugezp'", "2^24"])
    xf = rng.standard_normal((1, 1, 4, 4)).astype(np.float32)
    refused(tmp, "maxpool_indices_precision16", model([H.make_node("MaxPool", ["x"], ["z", "i"], kernel_shape=[2, 2],
                                                                  name="mpi")], xf, [("z", np.float32), ("i", np.int64)], opset=12),
            ["'mpi'", "Indices", "32.32"], ["--precision", "16.32"])
    refused(tmp, "u8_clip_fraction", model([H.make_node("Clip", ["x", "lo"], ["z"], name="clipf")], x, [("z", np.uint8)],
                                           [("lo", np.array(0.5, np.float32))]), ["'clipf'", "0.5", "not an integer"])
    refused(tmp, "maxunpool_negative_pads", model([H.make_node("MaxUnpool", ["x", "i"], ["z"], kernel_shape=[2, 2],
                                                                strides=[2, 2], pads=[0, 0, -5, 0], name="unp")], xf,
                                                  [("z", np.float32)], [("i", np.zeros((1, 1, 4, 4), np.int64))], opset=11),
            ["'unp'", "pads"])
    refused(tmp, "maxunpool_of_u8", model([H.make_node("MaxUnpool", ["x", "i"], ["z"], kernel_shape=[2, 2], name="unp8")], x,
                                          [("z", np.uint8)], [("i", np.zeros(x.shape, np.int64))], opset=11),
            ["'unp8'", "integer tensor", "MaxUnpool"])
    twice = H.make_model(H.make_graph([H.make_node("Relu", ["x"], ["z"], name="r8")], "g",
                                      [H.make_tensor_value_info("x", T.UINT8, list(x.shape))],
                                      [H.make_tensor_value_info("z", T.UINT8, None)] * 2), opset_imports=[H.make_opsetid("", 13)])
    refused(tmp, "int_output_twice", twice, ["'z'", "listed twice"])
sys.exit(checks.summary())
