#!/usr/bin/python3
"""test_train_torch.py BUILD SRC — cnnc training (reference interpreter and compiled .so) against PyTorch.

For fmnist_cnn, cifar_resnet8 and (label long, CNNC_TRAIN_TORCH_MODELS=resnet18) resnet18 at a
small input (models/*.yml, resnet18's input shape rewritten to RESNET18_INPUT; PyTorch twins
from tools/export_torchvision.py):
  * build the PyTorch model with torch.manual_seed(0), randomise its BatchNorms, export the
    weights with cnnc names, put it in train mode (batch statistics);
  * a seeded batch of BATCH images and labels (u8 models: integers 0..255, divided by 255 for
    PyTorch as the anchor does);
  * for each optimizer configuration, run BUILD/tests/train_interp (fe_load in training mode
    -> passes/autodiff.c -> passes/optimizer.c -> STEPS steps of ir_train_step on the same
    batch) and PyTorch (CrossEntropyLoss + torch.optim) from the same weights;
  * compare the first step's loss and gradient of every trainable param, and every param
    (weights and BN running statistics) after the last step:
    max |cnnc - torch| / max |torch| <= TOL (fp32) per tensor.
Optimizer mapping (docs/training.md): sgd/momentum/nesterov = torch.optim.SGD (dampening 0;
--l2-regularization = SGD's weight_decay), rmsprop = torch.optim.RMSprop (alpha = rho, eps
outside the root), adam = torch.optim.Adam, adam + --weight-decay = torch.optim.AdamW;
--loss-scaling S: the gradients come out scaled by S (compared against S x torch's) and the
update divides them back, so the weights match an unscaled torch run.  RMSprop and Adam are
checked on cnnc's gradients (see ADAPTIVE below).
resnet18 runs the configurations in RESNET18_CONFIGS only (the interpreter is slow at its size).
Compiled path (COMPILED): the same weights compiled with `cnnc --mode training --weights W
--optimizer O` and run through the runtime by BUILD/tests/train_so (cnnrt_train_step on the
same batch): the first loss, the first step's gradients (read back from the momentum buffers
P/momentum after step 1: v = g with no L2 and no loss scaling) and every param incl. BN
running statistics after STEPS steps, vs PyTorch, same tolerance.
Prints one line per comparison group and ends with "N passed, M failed"; exit 1 on failure."""
import copy
import os
import subprocess
import sys
import tempfile

import numpy as np

import testlib  # tests/scripts/testlib.py: skip (77) without PyTorch

BUILD, SRC = testlib.build_src(__doc__)
E = testlib.need_torchvision(SRC)
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torchtrain  # noqa: E402
from torchtrain import dump_tensor, fname  # noqa: E402

torch.set_num_threads(2)
BATCH = 4
STEPS = 2
TOL = 1e-4
U8_MODELS = {"fmnist_cnn"}
# CNNC_TRAIN_TORCH_MODELS="..." selects models; resnet18 runs as the ctest `long` test
# test_train_torch_resnet18 (~25 s of CPU in the interpreter per configuration), only with
# CNNC_RUN_LONG=1 in the environment.
MODELS = os.environ.get("CNNC_TRAIN_TORCH_MODELS", "fmnist_cnn cifar_resnet8").split()
# 64x64: layer4 at 2x2, 16 values per BN channel.  At 32x32 (1x1, 4 values) the BN gradient is
# so ill-conditioned that PyTorch fp32 itself is 18% off its own float64 result.
RESNET18_INPUT = (3, 64, 64)
# resnet18's configurations: CONFIGS rows by label, plus its own rows.  Momentum at lr 0.05
# moves ResNet-18 so far in one step that PyTorch fp32 differs from its own float64 run by
# 8e-4 after the second step (cnnc's interpreter accumulates in double); at lr 0.005 by ~1e-5.
RESNET18_CONFIGS = ("adam", "momentum lr 0.005")
EXTRA_CONFIGS = [
    ("momentum lr 0.005", ["--optimizer", "momentum", "--momentum", "0.9", "--lr", "0.005"],
     lambda p: torch.optim.SGD(p, lr=0.005, momentum=0.9), 0.0),
]
# (model, cnnc --optimizer, torch optimizer factory) run compiled (cnnc --mode training + train_so)
COMPILED = [("cifar_resnet8", "momentum", lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9)),
            ("cifar_resnet8", "nesterov", lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9, nesterov=True))]

# (label, train_interp flags, torch optimizer factory(params), label smoothing).  Adaptive
# optimizers (RMSprop, Adam) take cnnc's gradients (see ADAPTIVE).
CONFIGS = [
    ("sgd", ["--optimizer", "sgd", "--lr", "0.05"], lambda p: torch.optim.SGD(p, lr=0.05), 0.0),
    ("momentum", ["--optimizer", "momentum", "--momentum", "0.9", "--lr", "0.05"],
     lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9), 0.0),
    ("nesterov", ["--optimizer", "nesterov", "--momentum", "0.9", "--lr", "0.05"],
     lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9, nesterov=True), 0.0),
    ("momentum + l2 1e-3", ["--optimizer", "momentum", "--momentum", "0.9", "--lr", "0.05",
                            "--l2-regularization", "1e-3"],
     lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9, weight_decay=1e-3), 0.0),
    ("rmsprop", ["--optimizer", "rmsprop", "--rho", "0.99", "--eps", "1e-8", "--lr", "1e-3"],
     lambda p: torch.optim.RMSprop(p, lr=1e-3, alpha=0.99, eps=1e-8), 0.0),
    ("adam", ["--optimizer", "adam", "--lr", "1e-3"], lambda p: torch.optim.Adam(p, lr=1e-3), 0.0),
    ("adam + weight decay 1e-2 (AdamW)", ["--optimizer", "adam", "--lr", "1e-3", "--weight-decay", "1e-2"],
     lambda p: torch.optim.AdamW(p, lr=1e-3, weight_decay=1e-2), 0.0),
    ("sgd, loss scaling 128, label smoothing 0.1",
     ["--optimizer", "sgd", "--lr", "0.05", "--loss-scaling", "128", "--label-smoothing", "0.1"],
     lambda p: torch.optim.SGD(p, lr=0.05), 0.1),
]


# RMSprop and Adam divide each element by the root of its own squared gradient, so an element
# whose gradient is ~1e-6 of the tensor's largest still moves by ~lr: the fp32-vs-double
# summation noise of such tiny gradients becomes a 1e-3 relative weight difference.  For them
# the update is checked on cnnc's own gradients (torch.optim gets cnnc's gradient of each step
# in place of its own): that checks the optimizer's semantics exactly, while the gradients
# themselves are compared above it for every configuration.
ADAPTIVE = ("rmsprop", "adam")


def named_tensors(model):
    """{cnnc name: (tensor, trainable)} — parameters and BN running statistics, as
    export_torchvision.cnnc_state names them."""
    out = {}
    bn_leaf = {"weight": "gamma", "bias": "beta", "running_mean": "running_mean", "running_var": "running_var"}
    for mname, m in model.named_modules():
        own = [(k, t, True) for k, t in m.named_parameters(recurse=False)]
        own += [(k, t, False) for k, t in m.named_buffers(recurse=False) if k != "num_batches_tracked"]
        for leaf, t, trainable in own:
            if isinstance(m, nn.BatchNorm2d):
                name = mname.replace(".", "/") + "/" + bn_leaf[leaf]
            else:
                name = E.cnnc_name(model.zoo_name, (mname + "." if mname else "") + leaf)
            out[name] = (t, trainable)
    return out


def torch_run(model, x, y, make_opt, smoothing, inject=None):
    """STEPS steps on (x, y); returns (first loss, {name: first grad}, {name: final value}).
    inject(step, name) -> array: the gradient to use in the update instead of torch's."""
    return torchtrain.torch_steps(named_tensors(model), model, x, y, make_opt, STEPS, smoothing, inject)


def model_yml(name, tmp):
    """The zoo model file; resnet18 with its input shape rewritten to RESNET18_INPUT."""
    src = os.path.join(SRC, "models", name + ".yml")
    if name != "resnet18":
        return src
    with open(src) as f:
        text = f.read()
    old = "shape: [3, 224, 224]"
    if old not in text:
        sys.exit("test_train_torch: %s has no '%s' to rewrite" % (src, old))
    out = os.path.join(tmp, "resnet18_small.yml")
    with open(out, "w") as f:
        f.write(text.replace(old, "shape: [%d, %d, %d]" % RESNET18_INPUT, 1))
    return out


def run_compiled(report, tmp, name, base, w, xp, lp, tx, labels, opt, make_opt):
    """cnnc --mode training + train_so vs PyTorch on the same weights and batch."""
    what = "%s %s (compiled .so)" % (name, opt)
    so, dump = os.path.join(tmp, "%s_%s.so" % (name, opt)), os.path.join(tmp, "%s_%s_so" % (name, opt))
    got = torchtrain.compiled(report, BUILD, what, [model_yml(name, tmp), "--mode", "training", "--batch-size", str(BATCH),
                                                   "--weights", w, "--optimizer", opt, "--momentum", "0.9"],
                              so, xp, lp, STEPS, "0.05", dump)
    if got is None:
        return
    model = copy.deepcopy(base).train()
    model.zoo_name = name
    t_loss, t_grads, t_vals = torch_run(model, tx, labels, make_opt, 0.0)
    torchtrain.compare_dump(report, what, TOL, STEPS, *got, t_loss, t_grads, t_vals)


def main():
    if "resnet18" in MODELS and os.environ.get("CNNC_RUN_LONG") != "1":
        print("skip: resnet18 runs only with CNNC_RUN_LONG=1 (CNNC_RUN_LONG=1 ctest -L long)")
        return 77  # SKIP_RETURN_CODE (tests/CMakeLists.txt)
    exe = os.path.join(BUILD, "tests", "train_interp")
    checks = testlib.Checks(verbose=True, marks=("PASS  ", "FAIL  "))
    report = checks.check
    with tempfile.TemporaryDirectory() as tmp:
        for name in MODELS:
            torch.manual_seed(0)
            base = E.build(name)
            E.randomize_bn(base, torch.Generator().manual_seed(1))
            base.zoo_name = name
            w = os.path.join(tmp, name + ".safetensors")
            E.write_safetensors(w, E.cnnc_state(base, name), {"format": "cnnc"})
            g = torch.Generator().manual_seed(2)
            shape = (BATCH,) + (RESNET18_INPUT if name == "resnet18" else E.INPUT_SHAPES[name])
            if name in U8_MODELS:
                xr = torch.randint(0, 256, shape, generator=g).float()
                tx = xr / 255.0
            else:
                xr = torch.randn(shape, generator=g)
                tx = xr
            labels = torch.randint(0, 10, (BATCH,), generator=g)
            xp, lp = os.path.join(tmp, name + ".x.f32"), os.path.join(tmp, name + ".y.f32")
            xr.numpy().astype("<f4").tofile(xp)
            labels.numpy().astype("<f4").tofile(lp)
            configs = [c for c in CONFIGS + EXTRA_CONFIGS if c[0] in RESNET18_CONFIGS] if name == "resnet18" else CONFIGS
            for ci, (label, flags, make_opt, smoothing) in enumerate(configs):
                what = "%s %s" % (name, label)
                dump = os.path.join(tmp, "%s_%d" % (name, ci))
                os.makedirs(dump, exist_ok=True)
                cmd = [exe, model_yml(name, tmp), "--batch", str(BATCH), "--weights", w,
                       "--input", xp, "--labels", lp, "--steps", str(STEPS), "--dump-dir", dump] + flags
                r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
                if r.returncode != 0:
                    report(False, "%s: train_interp failed: %s" % (what, (r.stderr + r.stdout).strip()[:300]))
                    continue
                model = copy.deepcopy(base).train()
                model.zoo_name = name
                adaptive = label.startswith(ADAPTIVE)
                inject = (lambda s, n, d=dump: np.fromfile(os.path.join(d, "grad" if s == 0 else "grad%d" % (s + 1), fname(n)),
                                                            dtype="<f4")) if adaptive else None
                t_loss, t_grads, t_vals = torch_run(model, tx, labels, make_opt, smoothing, inject)
                scale = float(flags[flags.index("--loss-scaling") + 1]) if "--loss-scaling" in flags else 1.0
                c_loss = float(np.fromfile(os.path.join(dump, "loss.f32"), dtype="<f4")[0])

                def grad(n, t, d=dump, k=scale):
                    g = dump_tensor(os.path.join(d, "grad", fname(n)), t.shape)
                    return None if g is None else g / k

                def param(n, t, d=dump):
                    return dump_tensor(os.path.join(d, "param", fname(n)), t.shape)
                torchtrain.compare(report, what, TOL, STEPS, c_loss, t_loss, grad, t_grads, param, t_vals,
                                   " (/ loss scale %g)" % scale if scale != 1 else "", " (cnnc's gradients)" if adaptive else "")
            for cname, opt, make_opt in COMPILED:
                if cname == name:
                    run_compiled(report, tmp, name, base, w, xp, lp, tx, labels, opt, make_opt)
    return checks.summary()


if __name__ == "__main__":
    sys.exit(main())
