"""test_fmnist_xinit.py BUILD SRC -- tools/fmnist_xinit.py (docs/training.md, Fashion-MNIST
cross-initialisation) moves initial weights between cnnc's fmnist_cnn and the PyTorch anchor
with the right names and layouts:
  (1) cnnc -> torch: fmnist_cnn is compiled for training (--seed 3, batch 64); one step at
      --lr 0 (weights unchanged) on the first 64 images in file order (--seed 0 --limit 64)
      writes a checkpoint holding the initial weights; the anchor model with those weights
      (`fmnist_xinit.py loss0`) gives the loss cnnrun logged for that step (rel. 1e-4);
  (2) torch -> cnnc: `torch2ckpt --seed 0` writes the anchor's initial weights as a step-0
      checkpoint (momentum zero); `cnnrun train --restore` of it logs torch's loss on the same
      64 images (rel. 1e-4) and does not call itself "(restored)" (step 0, a fresh start);
      the checkpoint's weights are bitwise the anchor's;
  (3) a template of another model is refused with a message, exit != 0.
Ends with "N passed, M failed"."""
import os
import re
import sys
import tempfile

import numpy as np

import testlib
from testlib import run_output as run

BUILD, SRC = sys.argv[1], sys.argv[2]
CNNC, CNNRUN = os.path.join(BUILD, "cnnc"), os.path.join(BUILD, "cnnrun")
X = os.path.join(SRC, "tools", "fmnist_xinit.py")
CHECKS = testlib.Checks(verbose=True)
check = CHECKS.check


def step_loss(out):
    m = re.search(r"step 1/1\): loss ([0-9.]+)", out)
    return float(m.group(1)) if m else None


def main():
    data = testlib.need_fmnist_torch()
    sys.path.insert(0, os.path.join(SRC, "tools"))
    import fmnist_xinit as FX
    with tempfile.TemporaryDirectory() as t:
        so = os.path.join(t, "f.so")
        if not testlib.fmnist_cnn_training(CHECKS, CNNC, SRC, so, "3"):
            return 1
        one = ["--dataset", "fashion-mnist", "--data-dir", data, "--limit", "64", "--epochs", "1", "--seed", "0"]
        # (1) cnnc's initial weights into torch
        rc, out = run([CNNRUN, so, "train", *one, "--lr", "0", "--checkpoint-dir", os.path.join(t, "ck")])
        ck = os.path.join(t, "ck", "ckpt-step-00000001.safetensors")
        lc = step_loss(out)
        check(rc == 0 and lc is not None and os.path.exists(ck), f"cnnrun --lr 0 step writes {os.path.basename(ck)}")
        if rc or lc is None:
            return 1
        rc, out = run([sys.executable, X, "loss0", "--init", ck])
        m = re.search(r"loss ([0-9.]+)", out)
        lt = float(m.group(1)) if m else None
        check(rc == 0 and lt is not None and abs(lt - lc) <= 1e-4 * lc + 5e-5,
              f"anchor model with cnnc's weights: loss {lt} vs cnnrun's {lc}")
        # (2) torch's initial weights into cnnc
        tc = os.path.join(t, "torch0.safetensors")
        rc, out = run([sys.executable, X, "torch2ckpt", "--template", ck, "--seed", "0", "-o", tc])
        check(rc == 0, f"torch2ckpt ({out.strip()[-200:]})")
        _, ts = FX.read_st(tc)
        got = {n: a for n, _, _, a in ts}
        sd = FX.anchor_model(0).state_dict()
        check(all(np.array_equal(got[FX.cnnc_name(k)], v.numpy()) for k, v in sd.items()),
              "checkpoint weights bitwise the anchor's torch.manual_seed(0) weights")
        rest = [n for n in got if FX.cnnc_name_or_none(n) is None]
        check(len(rest) > 1 and all(not got[n].any() for n in rest), f"the other {len(rest)} tensors (momentum, step) are zero")
        rc, out = run([sys.executable, X, "loss0", "--init", tc])
        m = re.search(r"loss ([0-9.]+)", out)
        lt = float(m.group(1)) if m else None
        rc2, out2 = run([CNNRUN, so, "train", *one, "--lr", "0.05", "--restore", tc])
        lc = step_loss(out2)
        check(rc == 0 and rc2 == 0 and lt is not None and lc is not None and abs(lt - lc) <= 1e-4 * lt + 5e-5,
              f"cnnrun --restore of the torch weights: loss {lc} vs torch's {lt}")
        check("(restored)" not in out2, "step 0: a fresh start, not a restored run")
        # (3) a template of another model
        bad = os.path.join(t, "bad.safetensors")
        FX.write_st(bad, {}, [("conv1/weight", "F32", [8, 1, 3, 3], np.zeros((8, 1, 3, 3), np.float32)),
                              ("step", "I64", [], np.zeros((), np.int64))])
        rc, out = run([sys.executable, X, "torch2ckpt", "--template", bad, "--seed", "0", "-o", os.path.join(t, "x.st")])
        check(rc != 0 and "bad.safetensors" in out and "conv1/weight" in out, f"wrong template refused: {out.strip()[-160:]}")
    return CHECKS.summary()


if __name__ == "__main__":
    sys.exit(main())
