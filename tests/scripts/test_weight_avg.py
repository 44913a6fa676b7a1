"""test_weight_avg.py BUILD SRC -- `cnnrun train --weight-avg-exp D` (issue 23: the recipes'
exponential moving average of the weights, tools/cnnrun_train.inc).

fmnist_cnn (batch 64) on the synthetic dataset, 4 updates an epoch with a checkpoint after each:
1. ckpt-step-N.ema.safetensors holds avg_N = D avg_(N-1) + (1 - D) w_N from avg_0 = the initial
   weights, for the parameters (recomputed here in float64 from the initial weights and the
   checkpoints of every step: agree to 1e-6), and the live checkpoint's optimizer state,
   batch-norm statistics and step otherwise;
2. the end of the run validates the trained and the averaged weights ("validation (weight
   average)");
3. a run of 2 epochs and a run of 1 epoch + `--restore` for the second (which reads the .ema
   checkpoint beside the restored one) end in byte-identical .ema checkpoints;
4. `cnnc --weights` compiles the .ema checkpoint (a training checkpoint) for inference;
5. --weight-avg-exp 1 or 0: usage errors."""
import os
import sys
import tempfile

from testlib import Checks, build_src, need_module, run

BUILD, SRC = build_src(__doc__)
np = need_module("numpy", "Debian python3-numpy")
sys.path.insert(0, os.path.join(BUILD, "python"))
import cnnrt  # noqa: E402

CNNC, CNNRUN = os.path.join(BUILD, "cnnc"), os.path.join(BUILD, "cnnrun")
D = 0.75
checks = Checks()
with tempfile.TemporaryDirectory(prefix="cnnc-ema-") as tmp:
    so = os.path.join(tmp, "f.so")
    r = run([CNNC, os.path.join(SRC, "models", "fmnist_cnn.yml"), "--mode", "training", "--optimizer", "momentum",
             "--batch-size", "64", "-o", so])
    checks.check(r.returncode == 0, f"compile fmnist_cnn for training ({r.stderr.strip()[-300:]})")
    m = cnnrt.Model(so)
    init = m.state_dict(kinds=("param",))
    m.close()
    base = [CNNRUN, so, "train", "--dataset", "synthetic", "--limit", "256", "--logs-per-epoch", "4", "--lr", "0.05",
            "--weight-avg-exp", str(D)]
    a = os.path.join(tmp, "a")
    r = run(base + ["--epochs", "2", "--checkpoint-dir", a])
    checks.check(r.returncode == 0 and "validation (weight average): loss" in r.stdout and "(weight average)" in r.stdout,
                 f"train with --weight-avg-exp {D} ({(r.stdout + r.stderr).strip()[-400:]})")
    avg = {k: v.astype(np.float64) for k, v in init.items()}
    worst = 0.0
    for step in range(1, 9):
        live, _ = cnnrt.load_safetensors(os.path.join(a, f"ckpt-step-{step:08d}.safetensors"))
        ema, _ = cnnrt.load_safetensors(os.path.join(a, f"ckpt-step-{step:08d}.ema.safetensors"))
        for k in avg:
            avg[k] = D * avg[k] + (1 - D) * live[k].astype(np.float64)
            worst = max(worst, float(np.max(np.abs(ema[k] - avg[k]) / (np.abs(avg[k]) + 1e-3))))
        same = all(np.array_equal(ema[k], live[k]) for k in live if k not in avg)
        checks.check(same and set(ema) == set(live), f"step {step}: the .ema checkpoint's other tensors are the live ones")
    checks.check(worst < 1e-6, f"the .ema checkpoints hold the average of the steps' weights (worst relative error {worst:.2e})")
    b = os.path.join(tmp, "b")
    r1 = run(base + ["--epochs", "1", "--checkpoint-dir", b])
    r2 = run(base + ["--epochs", "2", "--checkpoint-dir", b, "--restore", os.path.join(b, "ckpt-step-00000004.safetensors")])
    checks.check(r1.returncode == 0 and r2.returncode == 0 and "weight average restored from" in r2.stdout,
                 f"1 epoch, then --restore for the second ({(r2.stdout + r2.stderr).strip()[-300:]})")
    same = open(os.path.join(a, "ckpt-step-00000008.ema.safetensors"), "rb").read() == \
        open(os.path.join(b, "ckpt-step-00000008.ema.safetensors"), "rb").read()
    checks.check(same, "--restore continues the average: the same .ema checkpoint as the run without a stop")
    r = run([CNNC, os.path.join(SRC, "models", "fmnist_cnn.yml"), "--weights", os.path.join(a, "ckpt-step-00000008.ema.safetensors"),
             "-o", os.path.join(tmp, "inf.so")])
    checks.check(r.returncode == 0, f"cnnc --weights compiles the .ema checkpoint ({r.stderr.strip()[-300:]})")
    for bad in ("1", "0", "x"):
        r = run([CNNRUN, so, "train", "--dataset", "synthetic", "--weight-avg-exp", bad])
        checks.check(r.returncode == 2 and "--weight-avg-exp" in r.stderr, f"--weight-avg-exp {bad}: usage error ({r.stderr.strip()})")
sys.exit(checks.summary())
