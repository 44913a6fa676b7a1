#!/usr/bin/python3
"""test_train_gconv_torch.py BUILD SRC — compiled training of grouped and depthwise convs
(codegen/gen_train_gconv.c) against PyTorch.

tests/train/gconv_mix.yml (an EfficientNet-like MBConv block: depthwise 3x3 stride 2,
squeeze-excitation with a broadcast multiply, swish/sigmoid; a ResNeXt-like grouped 3x3 with a
residual add; batch norm in training mode) without its dropout layer (PyTorch's dropout masks
are not cnnc's), and a ResNeXt-like variant at 32 groups of 4 channels:
  * a PyTorch twin of the model with torch.manual_seed(0) weights and randomised BatchNorms,
    exported to safetensors with cnnc names;
  * `cnnc --mode training --weights W --optimizer momentum --batch-size 4`, then
    BUILD/tests/train_so runs 2 steps on one seeded batch (2 threads);
  * PyTorch (CrossEntropyLoss + SGD momentum 0.9, lr 0.05) from the same weights;
  * compared: the first loss, the first step's gradients (the momentum buffers after step 1)
    and every param and BN running statistic after step 2: max |cnnc - torch| / max |torch|
    <= 1e-4 per tensor.
Prints one line per comparison and ends with "N passed, M failed"; exit 1 on failure."""
import os
import sys
import tempfile

import testlib  # tests/scripts/testlib.py: skip (77) without PyTorch

BUILD, SRC = testlib.build_src(__doc__)
E = testlib.need_torchvision(SRC)
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torchtrain  # noqa: E402

torch.set_num_threads(2)
BATCH, STEPS, TOL, LR = 4, 2, 1e-4, 0.05


class Mix(nn.Module):
    """tests/train/gconv_mix.yml without the dropout (cnnc layer names in NAMES)."""

    def __init__(self):
        super().__init__()
        self.stem, self.stem_bn = nn.Conv2d(3, 6, 3, padding=1, bias=False), nn.BatchNorm2d(6)
        self.expand = nn.Conv2d(6, 10, 1, bias=False)
        self.dw, self.dw_bn = nn.Conv2d(10, 10, 3, stride=2, padding=1, groups=10, bias=False), nn.BatchNorm2d(10)
        self.se_fc1, self.se_fc2 = nn.Conv2d(10, 3, 1), nn.Conv2d(3, 10, 1)
        self.project = nn.Conv2d(10, 6, 1, bias=False)
        self.g_conv = nn.Conv2d(6, 6, 3, padding=1, groups=3)
        self.fc = nn.Linear(6, 5)

    def forward(self, x):
        s = nn.functional.silu
        x = s(self.stem_bn(self.stem(x)))
        x = s(self.dw_bn(self.dw(s(self.expand(x)))))
        g = torch.sigmoid(self.se_fc2(s(self.se_fc1(x.mean((2, 3), keepdim=True)))))
        p = self.project(x * g)
        x = s(self.g_conv(p)) + p
        return self.fc(x.mean((2, 3)))


WIDE_YML = """name: gconv_wide
input: {shape: [8, 11, 13], dtype: f32, classes: 6}
layers:
  - {name: c0, op: conv, filters: 128, kernel: 1, bias: false}
  - {name: bn0, op: norm}
  - {name: r0, op: relu}
  - {name: g1, op: conv, filters: 128, kernel: 3, stride: 2, padding: 1, groups: 32, bias: false}
  - {name: bn1, op: norm}
  - {name: r1, op: relu}
  - {name: g2, op: conv, filters: 128, kernel: 3, padding: 1, groups: 32, bias: false}
  - {name: pool, op: global_avgpool}
  - {name: flatten, op: flatten}
  - {name: fc, op: dense, units: 6}
"""


class Wide(nn.Module):
    """WIDE_YML: ResNeXt-like grouped 3x3 convs, 32 groups of 4 channels, stride 2 and 1."""

    def __init__(self):
        super().__init__()
        self.c0, self.bn0 = nn.Conv2d(8, 128, 1, bias=False), nn.BatchNorm2d(128)
        self.g1, self.bn1 = nn.Conv2d(128, 128, 3, stride=2, padding=1, groups=32, bias=False), nn.BatchNorm2d(128)
        self.g2 = nn.Conv2d(128, 128, 3, padding=1, groups=32, bias=False)
        self.fc = nn.Linear(128, 6)

    def forward(self, x):
        x = torch.relu(self.bn0(self.c0(x)))
        x = torch.relu(self.bn1(self.g1(x)))
        return self.fc(self.g2(x).mean((2, 3)))


def named(model):
    """{cnnc name: (tensor, trainable)}: conv/dense weight, bias; BN gamma, beta, running stats."""
    out = {}
    bn = {"weight": "gamma", "bias": "beta", "running_mean": "running_mean", "running_var": "running_var"}
    for mname, m in model.named_modules():
        if not mname:
            continue
        for k, t in m.named_parameters(recurse=False):
            out[mname + "/" + (bn[k] if isinstance(m, nn.BatchNorm2d) else k)] = (t, True)
        for k, t in m.named_buffers(recurse=False):
            if k != "num_batches_tracked":
                out[mname + "/" + bn[k]] = (t, False)
    return out


def run(report, tmp, label, yml, model, shape, classes):
    E.randomize_bn(model, torch.Generator().manual_seed(1))
    tens = named(model)
    w = os.path.join(tmp, label + ".safetensors")
    E.write_safetensors(w, {n: t.detach().numpy() for n, (t, _) in tens.items()}, {"format": "cnnc"})
    g = torch.Generator().manual_seed(2)
    x = torch.randn((BATCH,) + shape, generator=g)
    y = torch.randint(0, classes, (BATCH,), generator=g)
    xp, lp = os.path.join(tmp, label + ".x.f32"), os.path.join(tmp, label + ".y.f32")
    x.numpy().astype("<f4").tofile(xp)
    y.numpy().astype("<f4").tofile(lp)
    so, dump = os.path.join(tmp, label + ".so"), os.path.join(tmp, label + "_dump")
    got = torchtrain.compiled(report, BUILD, label, [yml, "--mode", "training", "--batch-size", str(BATCH), "--weights", w,
                                                    "--optimizer", "momentum", "--momentum", "0.9"], so, xp, lp, STEPS, LR, dump)
    if got is None:
        return
    model.train()
    t_loss, t_grads, t_vals = torchtrain.torch_steps(tens, model, x, y, lambda p: torch.optim.SGD(p, lr=LR, momentum=0.9), STEPS)
    torchtrain.compare_dump(report, label, TOL, STEPS, *got, t_loss, t_grads, t_vals)


def main():
    checks = testlib.Checks(verbose=True, marks=("PASS  ", "FAIL  "))
    report = checks.check
    with tempfile.TemporaryDirectory() as tmp:
        with open(os.path.join(SRC, "tests", "train", "gconv_mix.yml")) as f:
            text = f.read()
        drop = "  - {name: drop, op: dropout, rate: 0.2}\n"
        if drop not in text:
            sys.exit("test_train_gconv_torch: gconv_mix.yml has no '%s'" % drop.strip())
        mix = os.path.join(tmp, "gconv_mix_nodrop.yml")
        with open(mix, "w") as f:
            f.write(text.replace(drop, ""))
        torch.manual_seed(0)
        run(report, tmp, "gconv_mix", mix, Mix(), (3, 9, 11), 5)
        wide = os.path.join(tmp, "gconv_wide.yml")
        with open(wide, "w") as f:
            f.write(WIDE_YML)
        torch.manual_seed(0)
        run(report, tmp, "gconv_wide", wide, Wide(), (8, 11, 13), 6)
    return checks.summary()


if __name__ == "__main__":
    sys.exit(main())
