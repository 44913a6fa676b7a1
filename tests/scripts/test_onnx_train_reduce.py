#!/usr/bin/env python3
"""test_onnx_train_reduce.py BUILD SRC -- a small CNN with the ops of the ONNX import's second
round, exported from PyTorch (torch.onnx, opset 13), trains after import: a softmax over the
channels written out (ReduceMax, Sub, Exp, ReduceSum, Div of two activations), a dilated
MaxPool, Mul, an Add of a constant, Sqrt, ReduceMean over the channels and Neg.  cnnc --mode
training, two SGD-momentum steps through tests/train_so against PyTorch's two steps on the same
batch and weights: the loss, the first step's gradients and the parameters after the steps
within 2e-4 (relative); the gradients run through reduce_max_grad, expand, div, exp, sqrt, neg
and the dilated maxpool_grad kernels.  Also: an inference compile of the same export matches
PyTorch's logits, and a MaxPool whose Indices output is used is refused in training naming the
node; an Exp of a constant (a unary op on a param) computes its values."""
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from testlib import Checks, build_src, need_module, run  # noqa: E402

BUILD, SRC = build_src(__doc__)
torch = need_module("torch", "Debian python3-torch")
np = need_module("numpy", "Debian python3-numpy")
onnx = need_module("onnx", "Debian python3-onnx")
need_module("onnx.numpy_helper", "Debian python3-onnx")
import torchtrain  # noqa: E402

nn, F = torch.nn, torch.nn.functional
BATCH, STEPS, LR, TOL = 4, 2, 0.05, 2e-4


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 6, 3, padding=1)
        self.fc = nn.Linear(6 * 6 * 6, 5)

    def forward(self, x):
        y = self.conv1(x)
        att = torch.exp(y - y.amax(dim=1, keepdim=True))
        y = y * (att / att.sum(dim=1, keepdim=True))
        y = F.max_pool2d(y, 2, stride=1, dilation=2)
        y = -(torch.sqrt(y * y + 1.0) - y.mean(dim=1, keepdim=True))
        return self.fc(torch.flatten(y, 1))


checks = Checks(verbose=True)
torch.manual_seed(0)
model = Net()
g = torch.Generator().manual_seed(5)
x = torch.randn(BATCH, 3, 8, 8, generator=g)
y = torch.tensor([0, 3, 1, 4])
with tempfile.TemporaryDirectory(prefix="cnnc-onnx-train-reduce-") as T:
    path = os.path.join(T, "net.onnx")
    model.eval()
    torch.onnx.export(model, x, path, opset_version=13, do_constant_folding=False, input_names=["input"],
                      output_names=["logits"], dynamic_axes={"input": {0: "n"}, "logits": {0: "n"}})
    m = onnx.load(path)
    ops = {n.op_type for n in m.graph.node}
    want_ops = {"ReduceMax", "ReduceSum", "ReduceMean", "Exp", "Div", "Sqrt", "Neg", "MaxPool", "Sub"}
    checks.check(want_ops <= ops, f"the export has {sorted(want_ops)} (it has {sorted(ops)})")
    names = {}
    for node in m.graph.node:
        if node.op_type in ("Conv", "Gemm"):
            for k, role in ((1, "weight"), (2, "bias")):
                names[node.input[k]] = node.name.strip("/") + "/" + role
    tens = {names[n]: (t, True) for n, t in model.named_parameters() if n in names}
    checks.check(len(tens) == 4, f"every parameter maps to a cnnc state tensor ({sorted(tens)})")
    xp, lp = os.path.join(T, "x.f32"), os.path.join(T, "y.f32")
    x.numpy().astype(np.float32).tofile(xp)
    y.numpy().astype(np.float32).tofile(lp)
    # inference first: the compiled logits against PyTorch's
    so = os.path.join(T, "infer.so")
    r = run([os.path.join(BUILD, "cnnc"), path, "--batch-size", str(BATCH), "-o", so])
    checks.check(r.returncode == 0, f"cnnc (inference): {r.stderr.strip()[:300]}")
    if r.returncode == 0:
        out = os.path.join(T, "logits.raw")
        r = run([os.path.join(BUILD, "cnnrun"), so, "infer", "--input", xp, "--output", out, "--format", "raw"])
        want = model(x).detach().numpy()
        got = np.fromfile(out, dtype="<f4").reshape(want.shape) if r.returncode == 0 else np.zeros_like(want)
        err = torchtrain.rel_err(got, want)
        checks.check(r.returncode == 0 and err <= 1e-4, f"inference logits: rel err {err:.2e} {r.stderr.strip()[:200]}")
    got = torchtrain.compiled(checks.check, BUILD, "imported net", [path, "--mode", "training", "--batch-size", str(BATCH),
                                                                    "--optimizer", "momentum", "--momentum", "0.9"],
                              os.path.join(T, "net.so"), xp, lp, STEPS, LR, os.path.join(T, "dump"))
    if got is not None:
        model.train()
        t_loss, t_grads, t_vals = torchtrain.torch_steps(tens, model, x, y, lambda p: torch.optim.SGD(p, lr=LR, momentum=0.9), STEPS)
        torchtrain.compare_dump(checks.check, "imported net", TOL, STEPS, *got, t_loss, t_grads, t_vals)
    # a unary op of a constant (an IR param operand: a module constant, no kernel argument)
    c = np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)
    gr = onnx.helper.make_graph([onnx.helper.make_node("Exp", ["c"], ["e"]), onnx.helper.make_node("Add", ["x", "e"], ["z"])], "g",
                                [onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2, 3, 4])],
                                [onnx.helper.make_tensor_value_info("z", onnx.TensorProto.FLOAT, None)],
                                [onnx.numpy_helper.from_array(c, name="c")])
    p3, so3 = os.path.join(T, "exp_const.onnx"), os.path.join(T, "exp_const.so")
    onnx.save(onnx.helper.make_model(gr, opset_imports=[onnx.helper.make_opsetid("", 13)]), p3)
    xe = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    xe.tofile(os.path.join(T, "xe.raw"))
    r = run([os.path.join(BUILD, "cnnc"), p3, "-o", so3])
    r = r if r.returncode else run([os.path.join(BUILD, "cnnrun"), so3, "infer", "--input", os.path.join(T, "xe.raw"), "--output",
                                    os.path.join(T, "ye.raw"), "--format", "raw"])
    ye = np.fromfile(os.path.join(T, "ye.raw"), dtype="<f4") if r.returncode == 0 else np.zeros(24, np.float32)
    err = torchtrain.rel_err(ye.reshape(2, 3, 4), xe + np.exp(c))
    checks.check(r.returncode == 0 and err <= 1e-6, f"Exp of a constant, added: rel err {err:.2e} {r.stderr.strip()[:200]}")
    # MaxPool's Indices output crosses dim 0 (flat indices over the whole tensor): refused in training
    node = onnx.helper.make_node("MaxPool", ["x"], ["y", "i"], name="pool_with_indices", kernel_shape=[2, 2], strides=[2, 2])
    tid = onnx.TensorProto.FLOAT
    gr = onnx.helper.make_graph([node], "g", [onnx.helper.make_tensor_value_info("x", tid, ["n", 2, 4, 4])],
                                [onnx.helper.make_tensor_value_info("y", tid, None),
                                 onnx.helper.make_tensor_value_info("i", onnx.TensorProto.INT64, None)])
    p2 = os.path.join(T, "idx.onnx")
    onnx.save(onnx.helper.make_model(gr, opset_imports=[onnx.helper.make_opsetid("", 12)]), p2)
    r = run([os.path.join(BUILD, "cnnc"), p2, "--mode", "training", "-o", os.path.join(T, "idx.so")])
    checks.check(r.returncode != 0 and "pool_with_indices" in r.stderr and "Indices" in r.stderr and "crosses dim 0" in r.stderr,
                 f"MaxPool indices in training: refused naming the node ({r.stderr.strip()[:300]})")
sys.exit(checks.summary())
