#!/usr/bin/env python3
"""bench/int8_agree.py BUILD [MODEL.yml] [N] — int8 against fp32 on one model (issue 21's
"top-1 agrees on at least 99 % of 1,000 inputs"): compiles MODEL (default models/resnet50.yml)
at batch 16 with --seed 5 weights twice, fp32 and --precision int8 calibrated on 32 N(0,1)
samples (seed 1), runs N (default 1000) other N(0,1) inputs (seed 2) through both with the
Python binding and prints the top-1 agreement and the worst per-batch max |logit difference| /
max |logit|.  The zoo has no trained ImageNet weights here, so this checks the quantisation of
random-weight models on random inputs, not accuracy.  Work files go to the current directory.
Run it with /usr/bin/python3 (numpy)."""
import os, subprocess, sys
if len(sys.argv) < 2:
    sys.exit(__doc__)
B = sys.argv[1]
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
M = sys.argv[2] if len(sys.argv) > 2 else os.path.join(ROOT, "models", "resnet50.yml")
N = int(sys.argv[3]) if len(sys.argv) > 3 else 1000
sys.path.insert(0, os.path.join(B, "python"))
import numpy as np
import cnnrt

def compile_so(tag, extra):
    so = f"agree_{tag}.so"
    subprocess.run([os.path.join(B, "cnnc"), M, "--batch-size", "16", "--seed", "5", *extra, "-o", so], check=True)
    return cnnrt.Model(so)

f = compile_so("f32", [])
in_name, dims = f.get_inputs()[0].name, tuple(f.get_inputs()[0].shape[1:])
np.random.default_rng(1).standard_normal((32, *dims), dtype=np.float32).tofile("agree_cal.f32")
q = compile_so("i8", ["--precision", "int8", "--calibrate", "agree_cal.f32"])
rng = np.random.default_rng(2)
agree = n = 0
worst = 0.0
while n < N:
    x = rng.standard_normal((16, *dims), dtype=np.float32)
    yf, yq = f.run(None, {in_name: x})[0], q.run(None, {in_name: x})[0]
    k = min(16, N - n)
    agree += int((yf[:k].argmax(1) == yq[:k].argmax(1)).sum())
    n += k
    worst = max(worst, float(np.abs(yf - yq).max() / np.abs(yf).max()))
print(f"{os.path.basename(M)}: int8 vs fp32 top-1 agreement {agree}/{n} = {agree / n:.4f}; "
      f"worst per-batch max |logit diff| / max |logit| {worst:.4g}")
