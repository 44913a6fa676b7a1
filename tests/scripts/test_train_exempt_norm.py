"""test_train_exempt_norm.py BUILD SRC -- `cnnc --mode training --weight-decay W --exempt-norm`
end to end (issue 5, docs/training.md): a small batchnorm + groupnorm CNN is compiled three
times with the same seed and SGD, batch 32: (a) no weight decay, (b) --weight-decay 0.1
--exempt-norm, (c) --weight-decay 0.1.  (a) trains one step on the synthetic dataset with
`cnnrun train --checkpoint-dir` (after it every param, beta included, is non-zero); each of
(a), (b), (c) restores that checkpoint (--restore) and trains one more step on the same batch,
so all three see the same weights P and the same gradient g, and decoupled decay gives
w' = P - lr*(g + wd*P).  Checks on the checkpoints after that step:
  - gamma and beta of every batchnorm/groupnorm: (b) bitwise equal to (a); (c) - (a) = -lr*wd*P;
  - every conv/dense weight and bias: (b) bitwise equal to (c); (b) - (a) = -lr*wd*P;
  - the running statistics are the same in all three.
Ends with "N passed, M failed"."""
import json
import os
import struct
import sys
import tempfile

import numpy as np

import testlib

BUILD, SRC = sys.argv[1], sys.argv[2]
CNNC, CNNRUN = os.path.join(BUILD, "cnnc"), os.path.join(BUILD, "cnnrun")
LR, WD = 0.1, 0.1
MODEL = """name: exempt_norm_cnn
input: {shape: [1, 28, 28], dtype: u8, mean: [0.5], std: [0.25], classes: 10}
layers:
  - {name: conv1, op: conv, filters: 8, kernel: 3, padding: 1, bias: false}
  - {name: bn1, op: batchnorm}
  - {name: relu1, op: relu}
  - {name: pool1, op: maxpool, kernel: 2}
  - {name: conv2, op: conv, filters: 12, kernel: 3, padding: 1}
  - {name: gn2, op: groupnorm, groups: 4}
  - {name: relu2, op: relu}
  - {name: gap, op: global_avgpool}
  - {name: flatten, op: flatten}
  - {name: fc, op: dense, units: 10}
"""

CHECKS = testlib.Checks()
check = CHECKS.check


def run(cmd):
    """cmd's stdout + stderr; a failure fails the test at once."""
    rc, out = testlib.run_output(cmd)
    if rc != 0:
        check(False, "%s -> exit %d\n%s" % (" ".join(cmd), rc, out[-2000:]))
        sys.exit(CHECKS.summary())
    return out


def safetensors(path):
    """name -> float32 array of every F32 tensor of a safetensors file."""
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    head = json.loads(blob[8:8 + n])
    out = {}
    for name, t in head.items():
        if name == "__metadata__" or t["dtype"] != "F32":
            continue
        a, b = t["data_offsets"]
        out[name] = np.frombuffer(blob[8 + n + a:8 + n + b], dtype=np.float32).reshape(t["shape"])
    return out


def one_ckpt(d):
    files = sorted(f for f in os.listdir(d) if f.endswith(".safetensors"))
    return os.path.join(d, files[-1])


with tempfile.TemporaryDirectory() as T:
    yml = os.path.join(T, "m.yml")
    with open(yml, "w") as f:
        f.write(MODEL)
    help_text = run([CNNC, "--help"])
    check("--exempt-norm" in help_text, "cnnc --help does not list --exempt-norm")
    variants = {"a": [], "b": ["--weight-decay", str(WD), "--exempt-norm"], "c": ["--weight-decay", str(WD)]}
    so = {}
    for k, extra in variants.items():
        so[k] = os.path.join(T, k + ".so")
        run([CNNC, yml, "--mode", "training", "--optimizer", "sgd", "--batch-size", "32", "--seed", "3", "-o", so[k]] + extra)
    train = ["train", "--dataset", "synthetic", "--limit", "32", "--lr", str(LR), "--logs-per-epoch", "1"]
    d0 = os.path.join(T, "ck0")
    run([CNNRUN, so["a"]] + train + ["--epochs", "1", "--checkpoint-dir", d0])
    p = safetensors(one_ckpt(d0))
    after = {}
    for k in variants:
        d = os.path.join(T, "ck_" + k)
        run([CNNRUN, so[k]] + train + ["--epochs", "2", "--restore", one_ckpt(d0), "--checkpoint-dir", d])
        after[k] = safetensors(one_ckpt(d))
    norm = [n for n in p if n.endswith("/gamma") or n.endswith("/beta")]
    weights = [n for n in p if n.endswith("/weight") or n.endswith("/bias")]
    stats = [n for n in p if "running_" in n]
    check(len(norm) == 4 and len(weights) == 5 and len(stats) == 2,
          "tensors in the checkpoint: norm %s, weights %s, stats %s" % (norm, weights, stats))
    for n in norm + weights:
        check(np.all(p[n] != 0) or n.endswith("/bias"), "%s: zeros after one step (the test needs P != 0)" % n)
    a, b, c = after["a"], after["b"], after["c"]
    for n in norm:
        check(np.array_equal(b[n], a[n]), "%s: decayed with --exempt-norm (max |b-a| %g)" % (n, np.abs(b[n] - a[n]).max()))
        want = -LR * WD * p[n]
        check(np.allclose(c[n] - a[n], want, rtol=2e-2, atol=1e-6 * np.abs(p[n]).max()),
              "%s: without --exempt-norm c-a should be -lr*wd*P (max err %g)" % (n, np.abs(c[n] - a[n] - want).max()))
    for n in weights:
        check(np.array_equal(b[n], c[n]), "%s: differs between --exempt-norm and plain decay" % n)
        want = -LR * WD * p[n]
        check(np.allclose(b[n] - a[n], want, rtol=2e-2, atol=1e-6 * np.abs(p[n]).max()),
              "%s: not decayed with --exempt-norm (max err %g)" % (n, np.abs(b[n] - a[n] - want).max()))
    for n in stats:
        check(np.array_equal(a[n], b[n]) and np.array_equal(a[n], c[n]), "%s: running statistics differ" % n)

sys.exit(CHECKS.summary())
