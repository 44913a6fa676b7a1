"""torchtrain.py -- shared by the training-against-PyTorch tests (test_train_torch.py,
test_train_gconv_torch.py): rel_err, the tensors a --dump-dir holds (dump_tensor, fname),
compare (the first loss, the first step's gradients and the params after the steps, each
tensor within a relative tolerance), compiled (cnnc --mode training, then tests/train_so,
whose dump compare_dump checks) and torch_steps (PyTorch's side of it)."""
import os

import numpy as np
import torch
import torch.nn as nn

from testlib import run


def rel_err(got, want):
    """max |got - want| / max |want|, in float64."""
    scale = max(float(np.abs(want).max(initial=0)), 1e-30)
    return float(np.abs(got.astype(np.float64) - want.astype(np.float64)).max(initial=0)) / scale


def fname(name):
    """The file a dump names tensor name by."""
    return name.replace("/", ".") + ".f32"


def dump_tensor(path, shape):
    """The f32 array of that shape dumped at path, or None when it was not written."""
    return np.fromfile(path, dtype="<f4").reshape(shape) if os.path.exists(path) else None


def compare(report, what, tol, steps, c_loss, t_loss, c_grads, t_grads, c_vals, t_vals, gnote="", pnote=""):
    """Reports the loss, the gradients (c_grads(name, torch array) -> array, None when
    missing) and the params after the steps (c_vals likewise), each within tol."""
    report(abs(c_loss - t_loss) <= tol * max(1.0, abs(t_loss)), "%s: loss cnnc %.7g torch %.7g" % (what, c_loss, t_loss))
    for kind, cv, tv, note in (("gradients", c_grads, t_grads, gnote), ("params after %d steps" % steps, c_vals, t_vals, pnote)):
        worst, missing = (0.0, ""), []
        for n, t in tv.items():
            got = cv(n, t)
            if got is None:
                missing.append(n)
                continue
            worst = max(worst, (rel_err(got, t), n))
        report(not missing and worst[0] <= tol, "%s: %d %s%s, worst rel err %.2e (%s)%s" % (
            what, len(tv), kind, note, worst[0], worst[1],
            "; missing " + ", ".join(missing[:4]) if missing else ""))


def compiled(report, build, what, cnnc_args, so, xp, lp, steps, lr, dump):
    """cnnc CNNC_ARGS -o so (a --mode training compile), then BUILD/tests/train_so: steps steps
    at lr on the batch of xp (inputs) and lp (labels), 2 threads, dumping into dump.  Returns
    (the first loss, state(step, name, torch array) -> the dumped array or None), or None after
    reporting the failure of either."""
    r = run([os.path.join(build, "cnnc")] + cnnc_args + ["-o", so], timeout=600)
    if r.returncode != 0:
        report(False, "%s: cnnc failed: %s" % (what, (r.stderr + r.stdout).strip()[:300]))
        return None
    r = run([os.path.join(build, "tests", "train_so"), so, "--input", xp, "--labels", lp, "--steps", str(steps),
             "--lr", str(lr), "--threads", "2", "--dump-dir", dump], timeout=600)
    if r.returncode != 0:
        report(False, "%s: train_so failed: %s" % (what, (r.stderr + r.stdout).strip()[:300]))
        return None
    c_loss = float(np.fromfile(os.path.join(dump, "loss.f32"), dtype="<f4")[0])
    return c_loss, lambda step, n, t: dump_tensor(os.path.join(dump, "step%d" % step, fname(n)), t.shape)


def torch_steps(tens, model, x, y, make_opt, steps, smoothing=0.0, inject=None):
    """steps steps of model on (x, y) with the optimizer make_opt(trainable tensors) and the
    cross-entropy loss; tens: {cnnc name: (tensor, trainable)} of the model.  Returns (first
    loss, {name: first grad}, {name: final value}).  inject(step, name) -> array: the gradient
    to use in the update instead of torch's."""
    opt = make_opt([t for t, tr in tens.values() if tr])
    crit = nn.CrossEntropyLoss(label_smoothing=smoothing)
    first_loss, grads = None, {}
    for s in range(steps):
        opt.zero_grad()
        loss = crit(model(x), y)
        loss.backward()
        if s == 0:
            first_loss = float(loss)
            grads = {n: t.grad.detach().numpy().copy() for n, (t, tr) in tens.items() if tr}
        if inject:
            with torch.no_grad():
                for n, (t, tr) in tens.items():
                    if tr:
                        t.grad.copy_(torch.from_numpy(inject(s, n).reshape(t.shape)))
        opt.step()
    return first_loss, grads, {n: t.detach().numpy().copy() for n, (t, _) in tens.items()}


def compare_dump(report, what, tol, steps, c_loss, state, t_loss, t_grads, t_vals):
    """compare() of a train_so dump (compiled's state): its gradients are the momentum buffers
    after step 1, its params those after the last step."""
    compare(report, what, tol, steps, c_loss, t_loss, lambda n, t: state(1, n + "/momentum", t), t_grads,
            lambda n, t: state(steps, n, t), t_vals)
