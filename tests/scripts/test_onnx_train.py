#!/usr/bin/env python3
"""test_onnx_train.py BUILD SRC -- a small CNN exported from PyTorch with torch.onnx (eval mode,
no constant folding, so its batch norms stay) trains after import: cnnc --mode training on the
.onnx, two SGD-momentum steps through the runtime (tests/train_so) against PyTorch's two steps
in train mode on the same batch and weights: the loss, the first step's gradients and every
parameter and running statistic after the steps within 2e-4 (relative).  The net has what the
importer turns into the new ops: Clip (relu6), Slice into two halves, HardSigmoid * x
(hardswish), Concat, ShuffleNet's channel shuffle (Reshape, Transpose, Reshape), a zero Pad
before an AveragePool, Gemm, an LRN (F.local_response_norm in PyTorch; torch.onnx exports it
as many ops, so a Relu stands in at export and is made an LRN node), a Transpose of H and W,
a Softmax over H (transposes around cnnc's last-axis softmax), a grouped ConvTranspose of
stride 2 (a conv over the input with zeros spread in: its weight is compared flipped, channels
swapped per group) and a LogSoftmax at the end
(cross-entropy of log-probabilities is that of the logits: its gradient runs through
log_softmax_grad).  Compiled with --mixed-labels, cnnrun train on synthetic data without mixing
writes the plain build's checkpoint bytes, and with --mixup other bytes."""
import os
import re
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from testlib import Checks, build_src, need_module, run  # noqa: E402

BUILD, SRC = build_src(__doc__)
torch = need_module("torch", "Debian python3-torch")
np = need_module("numpy", "Debian python3-numpy")
onnx = need_module("onnx", "Debian python3-onnx")
import torchtrain  # noqa: E402

nn, F = torch.nn, torch.nn.functional
BATCH, STEPS, LR, TOL = 4, 2, 0.05, 2e-4


LRN = (3, 0.5, 0.75, 1.5)  # size, alpha, beta, bias


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(4, 4, 3, padding=1, groups=2)
        self.bn2 = nn.BatchNorm2d(8)
        self.up = nn.ConvTranspose2d(8, 6, 2, stride=2, groups=2)
        self.fc = nn.Linear(6 * 4 * 4, 5)
        self.exporting = False  # torch exports local_response_norm as many ops: a Relu stands in, made LRN below

    def forward(self, x):
        y = self.bn1(F.relu6(self.conv1(x)))  # a batch norm right after a conv is folded into it by the export
        a, b = y.chunk(2, dim=1)
        b = F.hardswish(self.conv2(b))
        y = torch.cat([a, b], 1)
        n, c, h, w = y.shape
        y = y.view(n, 2, c // 2, h, w).transpose(1, 2).reshape(n, c, h, w)  # channel shuffle
        y = self.bn2(y)
        y = torch.relu(y) if self.exporting else F.local_response_norm(y, LRN[0], LRN[1], LRN[2], LRN[3])
        y = self.up(y.transpose(2, 3) * torch.softmax(y, dim=2))
        y = F.avg_pool2d(F.pad(y, (0, 0, 0, 0)), 4)
        return F.log_softmax(self.fc(torch.flatten(y, 1)), dim=1)


def clean(name):
    """The layer name cnnc gives an ONNX node (frontend/onnx.c clean_name)."""
    s = re.sub(r"[^A-Za-z0-9_.\-/]", "_", name)
    return "/".join(p for p in s.split("/") if p)


checks = Checks(verbose=True)
torch.manual_seed(0)
model = Net()
g = torch.Generator().manual_seed(3)
with torch.no_grad():
    for bn in (model.bn1, model.bn2):
        bn.running_mean.copy_(torch.randn(8, generator=g) * 0.1)
        bn.running_var.copy_(torch.rand(8, generator=g) + 0.5)
        bn.weight.copy_(torch.rand(8, generator=g) + 0.5)
x = torch.randn(BATCH, 3, 8, 8, generator=g)
y = torch.tensor([0, 3, 1, 4])
with tempfile.TemporaryDirectory(prefix="cnnc-onnx-train-") as T:
    path = os.path.join(T, "net.onnx")
    model.eval()
    model.exporting = True
    torch.onnx.export(model, x, path, opset_version=13, do_constant_folding=False, input_names=["input"],
                      output_names=["logits"], dynamic_axes={"input": {0: "n"}, "logits": {0: "n"}})
    model.exporting = False
    m = onnx.load(path)
    node = [n for n in m.graph.node if n.op_type == "Relu"][-1]  # the stand-in (relu6 exports as Relu, Clip)
    node.op_type = "LRN"
    node.attribute.extend([onnx.helper.make_attribute(k, v) for k, v in zip(("size", "alpha", "beta", "bias"), LRN)])
    onnx.save(m, path)
    ops = {n.op_type for n in m.graph.node}
    want_ops = {"Clip", "Slice", "HardSigmoid", "Concat", "Transpose", "Pad", "AveragePool", "BatchNormalization", "Gemm", "LRN",
                "Softmax", "LogSoftmax", "ConvTranspose"}
    checks.check(want_ops <= ops, f"the export has {sorted(want_ops)} (it has {sorted(ops)})")
    # cnnc's state names of the torch parameters: "<layer>/weight" ... by the nodes reading them
    state = dict(model.named_parameters())
    bufs = dict(model.named_buffers())
    roles = {"Conv": ["weight", "bias"], "Gemm": ["weight", "bias"], "ConvTranspose": ["weight", "bias"],
             "BatchNormalization": ["gamma", "beta", "running_mean", "running_var"]}

    def convt_weight(w, groups=2):  # [Cin, Cout/g, kh, kw] -> cnnc's conv weight [Cout, Cin/g, kh, kw], flipped
        cin, cout_g = w.shape[:2]
        w = w.reshape(groups, cin // groups, cout_g, *w.shape[2:]).swapaxes(1, 2)
        return np.ascontiguousarray(w.reshape(groups * cout_g, cin // groups, *w.shape[3:])[:, :, ::-1, ::-1])

    tens, layout = {}, {}
    for node in m.graph.node:
        for k, role in enumerate(roles.get(node.op_type, [])):
            if k + 1 < len(node.input) and node.input[k + 1] in {**state, **bufs}:
                t = state.get(node.input[k + 1], bufs.get(node.input[k + 1]))
                tens[clean(node.name) + "/" + role] = (t, node.input[k + 1] in state)
                if node.op_type == "ConvTranspose" and role == "weight":
                    layout[clean(node.name) + "/" + role] = convt_weight
    checks.check(len(tens) == len(state) + len(bufs) - 2,  # num_batches_tracked x2 are not state
                 f"every parameter maps to a cnnc state tensor ({len(tens)} of {len(state) + len(bufs) - 2})")
    xp, lp = os.path.join(T, "x.f32"), os.path.join(T, "y.f32")
    x.numpy().astype(np.float32).tofile(xp)
    y.numpy().astype(np.float32).tofile(lp)
    got = torchtrain.compiled(checks.check, BUILD, "imported net", [path, "--mode", "training", "--batch-size", str(BATCH),
                                                                    "--optimizer", "momentum", "--momentum", "0.9"],
                              os.path.join(T, "net.so"), xp, lp, STEPS, LR, os.path.join(T, "dump"))
    if got is not None:
        c_losses = np.fromfile(os.path.join(T, "dump", "loss.f32"), dtype="<f4")
        model.train()
        losses = []
        opt = torch.optim.SGD([t for t, tr in tens.values() if tr], lr=LR, momentum=0.9)
        crit = nn.CrossEntropyLoss()
        t_grads = {}
        for s in range(STEPS):
            opt.zero_grad()
            loss = crit(model(x), y)
            loss.backward()
            losses.append(float(loss))
            if s == 0:
                t_grads = {n: layout.get(n, np.copy)(t.grad.detach().numpy().copy()) for n, (t, tr) in tens.items() if tr}
            opt.step()
        for s in range(STEPS):
            checks.check(abs(c_losses[s] - losses[s]) <= TOL * max(1.0, abs(losses[s])),
                         f"step {s + 1} loss: cnnc {c_losses[s]:.7g}, torch {losses[s]:.7g}")
        t_vals = {n: layout.get(n, np.copy)(t.detach().numpy().copy()) for n, (t, _) in tens.items()}
        torchtrain.compare_dump(checks.check, "imported net", TOL, STEPS, *got, losses[0], t_grads, t_vals)
    # --mixed-labels on the imported net (the loss as for YAML models, tested against PyTorch by
    # test_mixup_torch.py): unmixed (y, y, 1) rows train to the plain build's bytes, --mixup not
    cnnc, cnnrun, ck = os.path.join(BUILD, "cnnc"), os.path.join(BUILD, "cnnrun"), {}
    for tag, extra in (("plain", []), ("mixed", ["--mixed-labels"])):
        r = run([cnnc, path, "--mode", "training", "--batch-size", str(BATCH), *extra, "-o", os.path.join(T, tag + ".so")])
        checks.check(r.returncode == 0, f"cnnc {' '.join(extra) or '(plain)'} on the .onnx: {r.stderr.strip()[:300]}")
    for tag, so, extra in (("plain", "plain", []), ("unmixed", "mixed", []), ("mixup", "mixed", ["--mixup", "0.4"])):
        d = os.path.join(T, "ck_" + tag)
        r = run([cnnrun, os.path.join(T, so + ".so"), "train", "--dataset", "synthetic", "--epochs", "1", "--limit", "32",
                 "--lr", "0.05", "--seed", "3", "--no-validation", "--checkpoint-dir", d, *extra])
        files = sorted(f for f in os.listdir(d) if f.endswith(".safetensors")) if os.path.isdir(d) else []
        checks.check(r.returncode == 0 and files, f"cnnrun train {tag}: {(r.stderr + r.stdout).strip()[-300:]}")
        ck[tag] = open(os.path.join(d, files[-1]), "rb").read() if files else tag.encode()
    checks.check(ck["plain"] == ck["unmixed"], "--mixed-labels without mixing: checkpoint bytes equal the plain build's")
    checks.check(ck["mixup"] != ck["unmixed"], "--mixup 0.4 changes the trained bytes")
sys.exit(checks.summary())
