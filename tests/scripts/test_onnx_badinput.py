#!/usr/bin/env python3
"""test_onnx_badinput.py BUILD SRC -- bad ONNX files get a clear error from `cnnc X.onnx`: exit
status 1, the file named, the node (name, op type, opset) and the attribute or input where there is
one, and never a crash or a hang.  Hand-made cases (truncated, not protobuf, empty, a directory,
an unknown operator, a missing initializer, nodes out of order, a short raw_data, an unsupported
opset, a symbolic non-batch dim, unknown and mistyped attributes, huge dims, external data, a
custom domain, two run-time inputs), then 300 mutated copies of a small valid model (byte flips,
truncations, inserted bytes; 100 with CNNC_TEST_QUICK=1, as in the sanitizer stage, where the
onnx fuzz harness runs too): no signal, each under 5 s."""
import os
import random
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from testlib import Checks, build_src, need_module, quick, run  # noqa: E402

BUILD, SRC = build_src(__doc__)
onnx = need_module("onnx", "Debian python3-onnx")
np = need_module("numpy", "Debian python3-numpy")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

CNNC = os.path.join(BUILD, "cnnc")


def small_model(opset=13, conv_w="w", order=None, dims=("n", 3, 8, 8), relu_attrs=None, conv_attrs=None,
                extra_inputs=(), w_tensor=None, domain=""):
    w = w_tensor if w_tensor is not None else numpy_helper.from_array(np.ones((4, 3, 3, 3), np.float32), "w")
    nodes = [helper.make_node("Conv", ["x", conv_w], ["c"], name="conv1", pads=[1, 1, 1, 1], **(conv_attrs or {})),
             helper.make_node("Relu", ["c"], ["y"], name="relu1", domain=domain, **(relu_attrs or {}))]
    if order == "reversed":
        nodes = nodes[::-1]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(dims))]
    inputs += [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, 3, 8, 8]) for n in extra_inputs]
    g = helper.make_graph(nodes, "g", inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                          initializer=[w])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


checks = Checks(verbose=True)


def expect(name, path, pattern):
    r = run([CNNC, path, "-o", path + ".so"], timeout=30)
    out = (r.stdout + r.stderr).strip()
    checks.check(r.returncode == 1 and path in out and pattern in out,
                 f"{name}: exit {r.returncode}, '{out[:300]}' names the file and has '{pattern}'")


with tempfile.TemporaryDirectory(prefix="cnnc-onnx-bad-") as T:
    def save(name, model):
        p = os.path.join(T, name + ".onnx")
        onnx.save(model, p)
        return p

    good = save("good", small_model())
    r = run([CNNC, good, "-o", good + ".so"])
    checks.check(r.returncode == 0, f"the valid model compiles ({r.stderr.strip()[:200]})")
    data = open(good, "rb").read()

    def raw(name, b):
        p = os.path.join(T, name + ".onnx")
        open(p, "wb").write(b)
        return p

    expect("truncated", raw("trunc", data[: len(data) // 3]), "does not parse")
    expect("not protobuf", raw("text", b"name: resnet\nlayers: []\n" * 4), "does not parse")
    expect("empty", raw("empty", b""), "is 0 bytes")
    os.mkdir(os.path.join(T, "dir.onnx"))
    expect("a directory", os.path.join(T, "dir.onnx"), "is a directory")
    m = small_model()
    m.graph.node[1].op_type = "FancyOp"
    expect("unknown operator", save("unknown_op", m), "node 'relu1' (#1, FancyOp, opset 13): operator not supported")
    expect("missing initializer", save("missing_w", small_model(conv_w="nope")),
           "node 'conv1' (#0, Conv, opset 13): input 1 'nope' is not produced before this node")
    expect("nodes out of order (a cycle looks the same)", save("order", small_model(order="reversed")),
           "node 'relu1' (#0, Relu, opset 13): input 0 'c' is not produced")
    short = numpy_helper.from_array(np.ones((4, 3, 3, 3), np.float32), "w")
    short.raw_data = short.raw_data[:-4]
    expect("short raw_data", save("short", small_model(w_tensor=short)), "initializer 'w' has 428 bytes of raw data")
    expect("opset 99", save("opset", small_model(opset=99)), "opset 99")
    expect("symbolic non-batch dim", save("sym", small_model(dims=("n", 3, "h", 8))), "dim 2 is symbolic ('h')")
    expect("unknown attribute", save("attr", small_model(relu_attrs={"alpha": 0.1})),
           "node 'relu1' (#1, Relu, opset 13): attribute 'alpha' is not supported")
    expect("mistyped attribute", save("attrtype", small_model(conv_attrs={"strides": 2})),
           "node 'conv1' (#0, Conv, opset 13): attribute 'strides' must be a list of ints")
    for what, attrs, pattern in [("LRN without size", {"alpha": 1e-4}, "attribute 'size' is required"),
                                 ("LRN bias 0", {"size": 3, "bias": 0.0}, "attribute 'bias' (0) must be finite and > 0"),
                                 ("LRN alpha < 0", {"size": 3, "alpha": -1.0}, "attribute 'alpha' (-1) must be finite"),
                                 ("LRN size 0", {"size": 0}, "attribute 'size' (0) is out of range")]:
        m = small_model(relu_attrs=attrs)
        m.graph.node[1].op_type = "LRN"
        expect(what, save("lrn", m), "node 'relu1' (#1, LRN, opset 13): " + pattern)
    huge = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[1 << 20, 1 << 20, 3, 3])
    expect("huge dims", save("huge", small_model(w_tensor=huge)), "more than 1073741824 elements")
    ext = numpy_helper.from_array(np.ones((4, 3, 3, 3), np.float32), "w")
    ext.ClearField("raw_data")
    ext.data_location = TensorProto.EXTERNAL
    ext.external_data.add(key="location", value="w.bin")
    expect("external data", save("ext", small_model(w_tensor=ext)), "external file")
    expect("custom domain", save("domain", small_model(domain="com.example")), "domain 'com.example'")
    expect("two run-time inputs", save("inputs", small_model(extra_inputs=["z"])), "several run-time inputs")

    # Mutations of the valid model: whatever the damage, an error or a model, never a crash.
    rng = random.Random(7)
    crashes, slow, silent = [], [], []
    n_mut = 100 if quick() else 300
    for i in range(n_mut):
        b = bytearray(data)
        kind = i % 3
        if kind == 0:
            for _ in range(rng.randint(1, 8)):
                b[rng.randrange(len(b))] = rng.randrange(256)
        elif kind == 1:
            b = b[: rng.randrange(len(b))]
        else:
            at = rng.randrange(len(b))
            b[at:at] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 16)))
        p = raw("mut", bytes(b))
        try:
            r = run([CNNC, p, "--summary"], timeout=5)
        except UnicodeDecodeError as e:  # the message must be printable text
            crashes.append((i, "not text", str(e)))
            continue
        except Exception as e:
            slow.append((i, type(e).__name__))
            continue
        if r.returncode < 0 or r.returncode > 2:
            crashes.append((i, r.returncode, r.stderr[-200:]))
        elif r.returncode and p not in r.stderr:
            silent.append((i, r.stderr[:200]))
    checks.check(not crashes, f"{n_mut} mutated models: no crash ({crashes[:3]})")
    checks.check(not slow, f"{n_mut} mutated models: each under 5 s ({slow[:5]})")
    checks.check(not silent, f"{n_mut} mutated models: every rejection names the file ({silent[:3]})")
sys.exit(checks.summary())
