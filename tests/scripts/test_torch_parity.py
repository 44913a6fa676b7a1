#!/usr/bin/python3
"""test_torch_parity.py BUILD SRC [MODEL...] — cnnc against PyTorch on identical weights.

For each model (default: resnet50, resnext50_32x4d, efficientnet_b0 — the external-truth set
of issue 3 — plus the cheap cifar_resnet20, cifar10_keras_cnn and fmnist_cnn):
  * build the PyTorch model (torchvision's where it exists; tools/export_torchvision.py) with
    torch.manual_seed(0), randomise every BatchNorm's gamma/beta so BN is not the identity,
    then set its running mean/var from data: a seeded random calibration batch runs through
    the model in eval mode and a hook gives each BatchNorm, layer by layer, the statistics of
    the activations it sees (calibrate_bn).  Random running statistics do not normalise:
    they blow ResNet-50's logits up to ~200 and flatten EfficientNet-B0's to the same vector
    for every input (spread 2.7e-7).  The weights go to safetensors with cnnc names (numpy
    writer);
  * run PyTorch (fp32) on another seeded random batch of 2, and require its logits to differ
    between the two samples by at least MIN_SPREAD of their max |logit| (a FAIL otherwise:
    a comparison of near-constant logits cannot fail);
  * run cnnc's reference interpreter on the same input and weights
    (BUILD/tests/run_interp --weights W --input X --output Y, raw f32); for the ImageNet-sized
    models only on the first image, to keep the slow interpreter's time down;
  * if the compiler and runtime are built (BUILD/cnnrun exists): compile with
    `cnnc X.yml --weights W --batch-size 2 -o X.so` and run `cnnrun X.so infer --input X
    --output Y`; a compiler that answers "not implemented" is reported as SKIP;
  * compare logits: max |cnnc - torch| / max |torch| <= 1e-4.
u8 models (fmnist_cnn) get integers 0..255 (f32 values for run_interp, raw bytes for cnnrun),
and PyTorch gets them divided by 255 as the anchor does.  Prints one line per check, then
"N passed, M failed[, K skipped]".  Exits 77 (skip) without PyTorch, torchvision or numpy."""
import os
import re
import subprocess
import sys
import tempfile
import time

import testlib  # tests/scripts/testlib.py: skip (77) without PyTorch

BUILD, SRC = testlib.build_src(__doc__)
testlib.need_module("numpy", "Debian python3-numpy")
E = testlib.need_torchvision(SRC)
import numpy as np  # noqa: E402
import torch  # noqa: E402

torch.set_num_threads(2)
DEFAULT = ["resnet50", "resnext50_32x4d", "efficientnet_b0", "squeezenet1_1", "cifar_resnet20", "cifar10_keras_cnn",
           "fmnist_cnn"]
B1_TOO = {"squeezenet1_1"}  # also compiled at batch 1: its concats are then in place (docs/codegen.md)
U8_MODELS = {"fmnist_cnn"}
BATCH = 2
TOL = 1e-4
CALIB_BATCH = BATCH  # BN statistics from 2 other images (one more eval forward, same shapes)
MIN_SPREAD = 0.01  # max_j |logit[0,j] - logit[1,j]| / max |logit|


def rel_err(got, want):
    scale = max(float(np.abs(want).max()), 1e-30)
    return float(np.abs(got.astype(np.float64) - want.astype(np.float64)).max()) / scale


def run(cmd, timeout=900):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


def msg_of(r):
    return ((r.stderr or "") + (r.stdout or "")).strip().replace("\n", " | ")[:300]


def make_input(name, n, gen):
    """A seeded random batch of n: (what cnnc reads, what PyTorch reads)."""
    shape = (n,) + E.INPUT_SHAPES[name]
    if name in U8_MODELS:
        x = torch.randint(0, 256, shape, generator=gen).float()
        return x, x / 255.0
    x = torch.randn(shape, generator=gen)
    return x, x


def calibrate_bn(model, name, gen):
    """Sets every BatchNorm's running mean/var from data, layer by layer: a seeded random batch
    of CALIB_BATCH runs through the model in eval mode, and a hook sets each BatchNorm's
    statistics to those of its input just before it runs (so the layers above are already
    set).  Each BatchNorm then normalises the calibration batch exactly; gamma/beta are not
    touched.  One eval forward of the test batch's shape, cheaper than train mode."""
    def set_stats(bn, inp):
        x = inp[0]
        var, mean = torch.var_mean(x, dim=[0] + list(range(2, x.dim())), unbiased=False)
        bn.running_mean.copy_(mean)
        bn.running_var.copy_(var)

    hooks = [m.register_forward_pre_hook(set_stats) for m in model.modules()
             if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
    if not hooks:
        return
    model.eval()
    try:
        with torch.no_grad():
            model(make_input(name, CALIB_BATCH, gen)[1])
    finally:
        for h in hooks:
            h.remove()


def spread(want):
    """How much the logits differ between the samples, relative to their max magnitude."""
    w = want.reshape(want.shape[0], -1).astype(np.float64)
    return float(np.abs(w - w[:1]).max()) / max(float(np.abs(w).max()), 1e-30)


def prepare(name, tmp):
    """Exports weights and input; returns (weights path, input path, torch logits)."""
    torch.manual_seed(0)
    m = E.build(name)
    E.randomize_bn(m, torch.Generator().manual_seed(1))  # gamma/beta; statistics from data:
    calibrate_bn(m, name, torch.Generator().manual_seed(3))
    w = os.path.join(tmp, name + ".safetensors")
    E.write_safetensors(w, E.cnnc_state(m, name), {"format": "cnnc"})
    x, tx = make_input(name, BATCH, torch.Generator().manual_seed(2))
    xp = os.path.join(tmp, name + ".in.f32")
    x.numpy().astype("<f4").tofile(xp)
    if name in U8_MODELS:  # cnnrun reads raw input in the model's dtype
        x.numpy().astype(np.uint8).tofile(os.path.join(tmp, name + ".in.u8"))
    with torch.no_grad():
        want = m(tx).numpy()
    return w, xp, want


def interp_batch(name):
    """The slow interpreter runs only the first image of the ImageNet-sized models."""
    c, h, w = E.INPUT_SHAPES[name]
    return BATCH if c * h * w <= 3 * 32 * 32 else 1


def interp_logits(name, w, xp, tmp):
    yml = os.path.join(SRC, "models", name + ".yml")
    out = os.path.join(tmp, name + ".interp.f32")
    nb = interp_batch(name)
    if nb != BATCH:  # the first nb samples of the input file
        per = int(np.prod(E.INPUT_SHAPES[name]))
        sub = os.path.join(tmp, name + ".in%d.f32" % nb)
        np.fromfile(xp, "<f4")[:nb * per].tofile(sub)
        xp = sub
    r = run([os.path.join(BUILD, "tests", "run_interp"), yml, "--batch", str(nb), "--weights", w,
             "--input", xp, "--output", out])
    if r.returncode != 0:
        raise RuntimeError("run_interp exited %d: %s" % (r.returncode, msg_of(r)))
    return np.fromfile(out, "<f4")


def compiled_logits(name, w, xp, tmp, batch=None):
    """Logits from the compiled .so (--batch-size batch, default BATCH), or None (with a
    reason) when codegen is not there yet."""
    cnnrun = os.path.join(BUILD, "cnnrun")
    if not os.path.exists(cnnrun):
        return None, "BUILD/cnnrun not built"
    yml = os.path.join(SRC, "models", name + ".yml")
    so = os.path.join(tmp, "%s_b%d.so" % (name, batch or BATCH))
    r = run([os.path.join(BUILD, "cnnc"), yml, "--weights", w, "--batch-size", str(batch or BATCH), "-o", so])
    if r.returncode != 0:
        if re.search(r"not implemented", r.stderr + r.stdout):
            return None, "compiler: " + msg_of(r)
        raise RuntimeError("cnnc -o exited %d: %s" % (r.returncode, msg_of(r)))
    out = os.path.join(tmp, name + ".so.f32")
    if name in U8_MODELS:
        xp = os.path.join(tmp, name + ".in.u8")
    r = run([cnnrun, so, "infer", "--input", xp, "--output", out])
    if r.returncode != 0:
        raise RuntimeError("cnnrun infer exited %d: %s" % (r.returncode, msg_of(r)))
    return np.fromfile(out, "<f4"), None


def main():
    names = sys.argv[3:] or DEFAULT
    passed = failed = skipped = 0

    def report(ok, label, text):
        nonlocal passed, failed
        print("%s %-34s %s" % ("PASS" if ok else "FAIL", label, text), flush=True)
        passed += ok
        failed += not ok

    with tempfile.TemporaryDirectory(prefix="cnnc_parity_") as tmp:
        for name in names:
            try:
                t0 = time.time()
                w, xp, want = prepare(name, tmp)
                sp = spread(want)
                report(sp >= MIN_SPREAD, name + " torch logits spread",
                       "%.3g between samples (>= %g, %.1f s)" % (sp, MIN_SPREAD, time.time() - t0))
                if sp < MIN_SPREAD:  # near-constant logits: the comparisons below prove nothing
                    continue
                t0 = time.time()
                got = interp_logits(name, w, xp, tmp)
                want_i = want[:interp_batch(name)]
                if got.size != want_i.size:
                    raise RuntimeError("interpreter gave %d values, PyTorch %s" % (got.size, want_i.shape))
                e = rel_err(got.reshape(want_i.shape), want_i)
                report(e <= TOL, name + " interp vs torch", "max rel err %.2e (logit scale %.3g, %.1f s)" % (
                    e, float(np.abs(want).max()), time.time() - t0))
            except Exception as ex:  # keep going: one model must not hide the others
                report(False, name + " interp vs torch", str(ex))
                continue
            for batch in (BATCH, 1) if name in B1_TOO else (BATCH,):
                label = name + (" .so vs torch" if batch == BATCH else " .so b%d vs torch" % batch)
                try:
                    t0 = time.time()
                    got, why = compiled_logits(name, w, xp, tmp, batch)
                    if got is None:
                        print("SKIP %-34s %s" % (label, why), flush=True)
                        skipped += 1
                        continue
                    if got.size != want.size:
                        raise RuntimeError("the .so gave %d values, PyTorch %s" % (got.size, want.shape))
                    e = rel_err(got.reshape(want.shape), want)
                    report(e <= TOL, label, "max rel err %.2e (%.1f s)" % (e, time.time() - t0))
                except Exception as ex:
                    report(False, label, str(ex))
    print("%d passed, %d failed%s" % (passed, failed, ", %d skipped" % skipped if skipped else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
