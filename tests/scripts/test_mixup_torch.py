"""test_mixup_torch.py BUILD SRC -- the mixed-label loss (cnnc --mixed-labels, docs/training.md)
against PyTorch: a flatten + dense model compiled with --mixed-labels --optimizer sgd
--label-smoothing 0.1 at batch 4 takes three SGD steps through cnnrt_train_step_mixed on
random f32 inputs and rows (a, b, lam) (a == b, lam 0 and 1 included), the last through the
Python method Model.train_step_mixed.  PyTorch computes, in
double from the same weights, the loss as timm's mixup does, lam CE(z, a) + (1 - lam) CE(z, b)
with F.cross_entropy(label_smoothing=0.1), also as a soft-target cross-entropy against
lam onehot(a) + (1 - lam) onehot(b) smoothed (both forms must agree), its gradient, and the
step w - lr g.  Checks per step: cnnc's loss within 1e-5 (relative), the accuracy (the label
of the larger weight), and the weights after the step within 1e-5.  Skipped without PyTorch.
Ends with "N passed, M failed"."""
import ctypes
import os
import subprocess
import sys
import tempfile

import numpy as np

import testlib

BUILD, SRC = testlib.build_src(__doc__)
torch = testlib.need_module("torch", "Debian python3-torch")
F = torch.nn.functional
sys.path.insert(0, os.path.join(BUILD, "python"))
import cnnrt  # noqa: E402
from cnnrt._lib import lib  # noqa: E402

K, B, LS, LR = 5, 4, 0.1, 0.5
MODEL = """name: mix_dense
input: {shape: [2, 3, 3], dtype: f32, classes: 5}
layers:
  - {name: f, op: flatten}
  - {name: d, op: dense, units: 5}
"""
CHECKS = testlib.Checks()
check = CHECKS.check


def close(got, want, tol=1e-5):
    return np.allclose(got, want, rtol=tol, atol=tol)


def main():
    tmp = tempfile.mkdtemp(prefix="cnnc-mixup-")
    yml, so = os.path.join(tmp, "m.yml"), os.path.join(tmp, "m.so")
    with open(yml, "w") as f:
        f.write(MODEL)
    subprocess.run([os.path.join(BUILD, "cnnc"), yml, "--mode", "training", "--mixed-labels", "--optimizer", "sgd",
                    "--label-smoothing", str(LS), "--batch-size", str(B), "--seed", "3", "-o", so], check=True)
    m = cnnrt.Model(so)
    check(lib.cnnrt_mixed_labels(m._h.get()) == 1, "cnnrt_mixed_labels")
    m.set_learning_rate(LR)
    rng = np.random.default_rng(5)
    moved = 0
    for step in range(3):
        sd = m.state_dict(kinds=("param",))
        w, b = sd["d/weight"].astype(np.float64), sd["d/bias"].astype(np.float64)
        x = rng.uniform(-1, 1, (B, 2, 3, 3)).astype(np.float32)
        rows = np.zeros((B, 3), np.float32)
        rows[:, 0] = rng.integers(0, K, B)
        rows[:, 1] = rng.integers(0, K, B)
        rows[:, 2] = rng.uniform(0, 1, B)
        rows[1, 1] = rows[1, 0]
        rows[2, 2] = step % 2
        if step < 2:  # the C function, then the Python method
            loss, acc = ctypes.c_float(), ctypes.c_float()
            st = lib.cnnrt_train_step_mixed(m._h.get(), x.ctypes.data, x.nbytes, rows.ctypes.data, 1,
                                            ctypes.byref(loss), ctypes.byref(acc))
            check(st == 0, "step %d: cnnrt_train_step_mixed status %d" % (step, st))
        else:
            lv, av = m.train_step_mixed(x, rows)
            loss, acc = ctypes.c_float(lv), ctypes.c_float(av)
        tw = torch.tensor(w, requires_grad=True)
        tb = torch.tensor(b, requires_grad=True)
        z = torch.tensor(x.reshape(B, -1), dtype=torch.float64) @ tw.T + tb
        ya, yb = torch.tensor(rows[:, 0], dtype=torch.long), torch.tensor(rows[:, 1], dtype=torch.long)
        lam = torch.tensor(rows[:, 2], dtype=torch.float64)
        per = lam * F.cross_entropy(z, ya, reduction="none", label_smoothing=LS) + \
            (1 - lam) * F.cross_entropy(z, yb, reduction="none", label_smoothing=LS)
        ref = per.mean()
        target = (1 - LS) * (lam[:, None] * F.one_hot(ya, K) + (1 - lam[:, None]) * F.one_hot(yb, K)) + LS / K
        soft = -(target * F.log_softmax(z, 1)).sum(1).mean()
        check(abs(soft.item() - ref.item()) < 1e-12, "step %d: torch's two forms agree" % step)
        ref.backward()
        check(close(loss.value, ref.item()), "step %d: loss %.7f, PyTorch %.7f" % (step, loss.value, ref.item()))
        want_label = torch.where(lam >= 0.5, ya, yb)
        want_acc = (z.argmax(1) == want_label).double().mean().item()
        check(abs(acc.value - want_acc) < 1e-6, "step %d: accuracy %g, PyTorch %g" % (step, acc.value, want_acc))
        sd2 = m.state_dict(kinds=("param",))
        w2 = (tw - LR * tw.grad).detach().numpy()
        b2 = (tb - LR * tb.grad).detach().numpy()
        check(close(sd2["d/weight"], w2) and close(sd2["d/bias"], b2),
              "step %d: weights after the step, max diff %.3g" % (step, float(np.abs(sd2["d/weight"] - w2).max())))
        moved += not np.allclose(sd2["d/weight"], w)
        # the oracle can fail: the same step with the labels of the smaller weight gives another loss
        alt = ((1 - lam) * F.cross_entropy(z.detach(), ya, reduction="none", label_smoothing=LS) +
               lam * F.cross_entropy(z.detach(), yb, reduction="none", label_smoothing=LS)).mean().item()
        check(abs(alt - ref.item()) > 1e-4, "step %d: swapped weights change the loss (%.6f vs %.6f)" % (step, alt, ref.item()))
    check(moved == 3, "the weights moved in every step")
    try:
        m.train_step_mixed(np.zeros((B, 2, 3, 3), np.float32), np.zeros((B, 2), np.float32))
        check(False, "rows of 2 columns accepted")
    except cnnrt.InputError as e:
        check("want (4, 3)" in str(e), "rows of 2 columns: %s" % e)
    m.close()
    for p in (yml, so):
        os.unlink(p)
    os.rmdir(tmp)
    return CHECKS.summary()


if __name__ == "__main__":
    sys.exit(main())
