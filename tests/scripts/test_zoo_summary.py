#!/usr/bin/python3
"""test_zoo_summary.py BUILD SRC — `cnnc models/X.yml --summary` totals against PyTorch.

For every zoo model (models/*.yml; each must have a PyTorch equivalent in
tools/export_torchvision.py: torchvision's where it exists), the "Total params:" line must
equal the PyTorch model's parameter count exactly ("Non-trainable values:", when printed,
its BatchNorm running_mean + running_var elements), and "MACs/image:" must be within 0.5 % of
the conv + linear MACs counted with forward hooks on one image of the model's input size.
Prints one line per model, then "N passed, M failed"; exit status 1 on any failure."""
import os
import re
import subprocess
import sys

import testlib  # tests/scripts/testlib.py: skip (77) without PyTorch

BUILD, SRC = testlib.build_src(__doc__)
E = testlib.need_torchvision(SRC)
import torch  # noqa: E402

torch.set_num_threads(2)
UNITS = {"": 1, "K": 1e3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}
MAC_TOL = 0.005


def cnnc_totals(yml):
    """(params, macs) from the driver's summary, or raise with its stderr."""
    r = subprocess.run([os.path.join(BUILD, "cnnc"), yml, "--summary"], capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        raise RuntimeError("cnnc --summary exited %d: %s" % (r.returncode, (r.stderr or r.stdout).strip()[:300]))
    p = re.search(r"Total params:\s*([\d,]+)", r.stdout)
    m = re.search(r"MACs/image:\s*([\d.]+)\s*([KkMGT]?)", r.stdout)
    if not p or not m:
        raise RuntimeError("summary lacks 'Total params:' or 'MACs/image:' lines")
    exact = re.search(r"MACs/image:[^(\n]*\(([\d,]+)\)", r.stdout)  # "4.089 G (4,089,184,256)"
    macs = int(exact.group(1).replace(",", "")) if exact else float(m.group(1)) * UNITS[m.group(2)]
    nt = re.search(r"Non-trainable values:\s*([\d,]+)", r.stdout)
    return int(p.group(1).replace(",", "")), macs, int(nt.group(1).replace(",", "")) if nt else None


def model_name(yml):
    return os.path.splitext(os.path.basename(yml))[0]


def check(yml):
    """(ok, the model's row: cnnc's and PyTorch's params and MACs, their difference)."""
    name = model_name(yml)
    try:
        params, macs, stats = cnnc_totals(yml)
        torch.manual_seed(0)
        m = E.build(name)
        t_params = sum(p.numel() for p in m.parameters())
        t_macs = E.count_macs(m, E.INPUT_SHAPES[name])
        rel = abs(macs - t_macs) / t_macs
        t_stats = sum(b.numel() for k, b in m.named_buffers() if k.endswith(("running_mean", "running_var")))
        ok = params == t_params and rel <= MAC_TOL and stats in (None, t_stats)
        why = "" if ok else (" params differ by %+d" % (params - t_params) if params != t_params
                             else " MACs off by %.2f %%" % (100 * rel) if rel > MAC_TOL
                             else " BN running statistics %d, torch %d" % (stats, t_stats))
        return ok, "%14s %14s %12s %12s %7.3f%%%s" % (
            "{:,}".format(params), "{:,}".format(t_params), "%.4g G" % (macs / 1e9), "%.4g G" % (t_macs / 1e9), 100 * rel, why)
    except Exception as e:  # one broken model must not hide the others
        return False, str(e).splitlines()[0] if str(e) else type(e).__name__


def main():
    print("     %-20s %14s %14s %12s %12s %8s" % ("model", "cnnc params", "torch params", "cnnc MACs", "torch MACs", "diff"))
    return testlib.each_model(testlib.zoo_models(SRC), SRC, check, 20, model_name)


if __name__ == "__main__":
    sys.exit(main())
