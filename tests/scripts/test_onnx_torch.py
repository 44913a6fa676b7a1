#!/usr/bin/env python3
"""test_onnx_torch.py BUILD SRC -- models exported from PyTorch with torch.onnx (opset 13, a
symbolic batch as shared/anchors/export_onnx.py exports) are imported by cnnc, compiled, run with
`cnnrun infer` and compared with PyTorch: max |diff| <= 1e-4 of max |logit| and equal top-1.
Small inputs keep it quick: torchvision ResNet-18, EfficientNet-B0, MobileNetV2 (Clip = relu6)
MobileNetV3-Large (HardSigmoid: hardswish and squeeze-excite gates), SqueezeNet 1.1 and GoogLeNet
(Concat), DenseNet-121 (Concat, Pad before AveragePool) and ShuffleNetV2 (Slice, channel shuffle,
ReduceMean) at 64x64 (BN folded into the convs by the export, Mul(x, Sigmoid(x)) fused into
swish), and a net whose batch norms cannot be
folded, with Sub and Div, Gemm, MatMul, average pools excluding padding, ceil-mode max pooling, Dropout,
Reshape and a final Softmax, at batch 3 (--batch-size binds the symbolic batch).  `--emit yaml`
of the imports gives YAML models (+ safetensors) whose outputs are the import's bit for bit."""
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from testlib import Checks, build_src, need_module, run  # noqa: E402

BUILD, SRC = build_src(__doc__)
torch = need_module("torch", "Debian python3-torch")
torchvision = need_module("torchvision", "Debian python3-torchvision")
np = need_module("numpy", "Debian python3-numpy")
onnx = need_module("onnx", "Debian python3-onnx")
nn = torch.nn


class Mixed(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(3, 8, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(8)
        self.c2 = nn.Conv2d(8, 8, 3, stride=2, padding=1, groups=2, bias=False)
        self.bn2 = nn.BatchNorm2d(8)
        self.pool = nn.AvgPool2d(3, stride=2, padding=1, count_include_pad=False)
        self.mp = nn.MaxPool2d(3, stride=2, ceil_mode=True)
        self.drop = nn.Dropout(0.3)
        self.fc1 = nn.Linear(8 * 2 * 2, 16)
        self.w2 = nn.Parameter(torch.randn(16, 10) * 0.1)

    def forward(self, x):
        x = (x - 0.5) / 0.25  # Sub and Div by constants
        y = torch.relu(self.c1(x))
        y = y - 0.5 * torch.relu(y - 1.0)  # Sub of activations
        y = self.bn1(y + 0.5)  # after an add: not folded into a conv
        y = torch.sigmoid(self.bn2(self.c2(y)))
        y = self.mp(self.pool(y))
        y = self.drop(y.reshape(y.shape[0], -1))
        y = torch.relu(self.fc1(y))
        return torch.softmax(torch.matmul(y, self.w2), dim=1)


def randomize_bn(m):
    g = torch.Generator().manual_seed(1)
    for mod in m.modules():
        if isinstance(mod, nn.BatchNorm2d):
            with torch.no_grad():
                mod.running_mean.copy_(torch.randn(mod.num_features, generator=g) * 0.1)
                mod.running_var.copy_(torch.rand(mod.num_features, generator=g) + 0.5)
                mod.weight.copy_(torch.rand(mod.num_features, generator=g) + 0.5)
                mod.bias.copy_(torch.randn(mod.num_features, generator=g) * 0.1)
    return m


def yaml_roundtrip(checks, tmp, name, path, batch, xin, got):
    """cnnc X.onnx --emit yaml -o m.yml, then cnnc m.yml: the same outputs, bit for bit."""
    yml, so, yout = (os.path.join(tmp, name + s) for s in ("_emit.yml", "_emit.so", "_emit.y"))
    r = run([os.path.join(BUILD, "cnnc"), path, "--emit", "yaml", "-o", yml])
    if not checks.check(r.returncode == 0 and os.path.exists(yml[:-4] + ".safetensors"),
                        f"{name}: --emit yaml writes the model and its weights ({(r.stderr or '').strip()[-300:]})"):
        return
    r = run([os.path.join(BUILD, "cnnc"), yml, "--batch-size", str(batch), "-o", so])
    if not checks.check(r.returncode == 0, f"{name}: the emitted YAML compiles ({(r.stderr or '').strip()[-300:]})"):
        return
    r = run([os.path.join(BUILD, "cnnrun"), so, "infer", "--input", xin, "--output", yout, "--format", "raw"])
    same = r.returncode == 0 and np.array_equal(np.fromfile(yout, dtype=np.float32), got)
    checks.check(same, f"{name}: the emitted YAML model's outputs are the imported model's, bit for bit")


def case(checks, tmp, name, model, shape, batch, ops=(), yaml=False):
    torch.manual_seed(0)
    model = randomize_bn(model).eval()
    x = torch.randn(batch, *shape)
    path = os.path.join(tmp, name + ".onnx")
    torch.onnx.export(model, x[:1], path, opset_version=13, input_names=["input"], output_names=["logits"],
                      dynamic_axes={"input": {0: "n"}, "logits": {0: "n"}})
    have = {n.op_type for n in onnx.load(path).graph.node}
    checks.check(set(ops) <= have, f"{name}: the export has {sorted(ops)} (it has {sorted(have)})")
    with torch.no_grad():
        want = model(x).numpy()
    so, xin, yout = (os.path.join(tmp, name + s) for s in (".so", ".x", ".y"))
    r = run([os.path.join(BUILD, "cnnc"), path, "--batch-size", str(batch), "-o", so])
    if not checks.check(r.returncode == 0, f"{name}: cnnc compiles the export ({(r.stderr or '').strip()[-300:]})"):
        return
    x.numpy().astype(np.float32).tofile(xin)
    r = run([os.path.join(BUILD, "cnnrun"), so, "infer", "--input", xin, "--output", yout, "--format", "raw"])
    if not checks.check(r.returncode == 0, f"{name}: cnnrun infer ({(r.stderr or '').strip()[-300:]})"):
        return
    got = np.fromfile(yout, dtype=np.float32)
    if not checks.check(got.size == want.size, f"{name}: {got.size} outputs, {want.size} expected"):
        return
    if yaml:
        yaml_roundtrip(checks, tmp, name, path, batch, xin, got)
    got = got.reshape(want.shape)
    err = float(np.abs(got - want).max() / np.abs(want).max())
    checks.check(err <= 1e-4, f"{name}: max |cnnc - torch| / max |torch| = {err:.2e} (<= 1e-4)")
    checks.check(bool((got.argmax(1) == want.argmax(1)).all()), f"{name}: top-1 equal for {batch} images")


checks = Checks(verbose=True)
with tempfile.TemporaryDirectory(prefix="cnnc-onnx-torch-") as tmp:
    case(checks, tmp, "resnet18", torchvision.models.resnet18(), (3, 64, 64), 2,
         ("Conv", "Relu", "MaxPool", "Add", "GlobalAveragePool", "Flatten", "Gemm"), yaml=True)
    case(checks, tmp, "efficientnet_b0", torchvision.models.efficientnet_b0(), (3, 64, 64), 1,
         ("Conv", "Sigmoid", "Mul", "GlobalAveragePool", "Add", "Gemm"))
    case(checks, tmp, "mobilenet_v2", torchvision.models.mobilenet_v2(), (3, 64, 64), 1, ("Conv", "Clip", "Add"))
    case(checks, tmp, "mobilenet_v3_large", torchvision.models.mobilenet_v3_large(), (3, 64, 64), 1,
         ("Conv", "HardSigmoid", "Mul", "GlobalAveragePool", "Gemm"))
    for name, ops in (("squeezenet1_1", ("Concat", "MaxPool")), ("googlenet", ("Concat", "MaxPool")),
                      ("densenet121", ("Concat", "Pad", "AveragePool", "BatchNormalization")),
                      ("shufflenet_v2_x1_0", ("Transpose", "Slice", "Concat", "ReduceMean"))):
        case(checks, tmp, name, getattr(torchvision.models, name)(), (3, 64, 64), 1, ops, yaml=name != "googlenet")
    r = run([os.path.join(BUILD, "cnnc"), os.path.join(tmp, "resnet18.onnx"), "--emit", "yaml"])
    checks.check(r.returncode == 2 and "needs -o" in r.stderr, f"--emit yaml without -o: usage error ({r.stderr.strip()})")
    w = os.path.join(tmp, "resnet18_emit.safetensors")  # the roundtrip's weights, an input now
    before = open(w, "rb").read()
    r = run([os.path.join(BUILD, "cnnc"), os.path.join(tmp, "resnet18.onnx"), "--weights", w, "--emit", "yaml", "-o",
             os.path.join(tmp, "resnet18_emit.yml")])
    checks.check(r.returncode == 1 and "is the input" in r.stderr and open(w, "rb").read() == before,
                 f"--emit yaml never writes its weights over an input ({r.stderr.strip()[:200]})")
    case(checks, tmp, "mixed", Mixed(), (3, 16, 16), 3,
         ("BatchNormalization", "AveragePool", "MaxPool", "Gemm", "MatMul", "Softmax", "Shape", "Gather", "Reshape",
          "Sub", "Div"))
    yml = os.path.join(tmp, "mixed.yml")
    r = run([os.path.join(BUILD, "cnnc"), os.path.join(tmp, "mixed.onnx"), "--emit", "yaml", "-o", yml])
    checks.check(r.returncode == 1 and "has no YAML form" in r.stderr and not os.path.exists(yml),
                 f"--emit yaml of an add of a constant: a clear error, no file ({r.stderr.strip()[:200]})")
sys.exit(checks.summary())
