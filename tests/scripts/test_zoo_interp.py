#!/usr/bin/python3
"""test_zoo_interp.py BUILD SRC — every zoo model parses, verifies, prints and runs.

For each models/*.yml:
  1. `cnnc X.yml --emit ir` exits 0 and prints the graph (non-empty, names the model);
  2. `cnnc X.yml --summary` exits 0;
  3. `BUILD/tests/run_interp X.yml --batch B` (fe_load verifies the graph; the reference
     interpreter runs on seeded random input) exits 0, the output shape is [B, classes] and
     every logit is finite; small models run twice and must give identical checksums.
Batch 2 for the CIFAR/MNIST-sized models, 1 for the ImageNet ones (the interpreter is slow).
Prints one line per model, then "N passed, M failed"; exit status 1 on any failure."""
import os
import re
import sys
import time

import testlib
from testlib import first_line, run

BUILD, SRC = testlib.build_src(__doc__)
CNNC = os.path.join(BUILD, "cnnc")
RUN_INTERP = os.path.join(BUILD, "tests", "run_interp")
SMALL_INPUT = 32 * 32 * 3  # per-sample elements at or below which a model counts as small


def model_info(yml):
    """(name, classes, per-sample input elements) read from the YAML text (no YAML module)."""
    text = open(yml).read()
    name = re.search(r"^name:\s*(\S+)", text, re.M).group(1)
    classes = re.search(r"classes:\s*(\d+)", text)
    return name, int(classes.group(1)) if classes else None, testlib.input_elems(text)


def check(yml):
    """Returns (ok, message)."""
    name, classes, n_in = model_info(yml)
    r = run([CNNC, yml, "--emit", "ir"])
    if r.returncode != 0:
        return False, "--emit ir exited %d: %s" % (r.returncode, first_line(r)[0])
    if name not in r.stdout or len(r.stdout.splitlines()) < 3:
        return False, "--emit ir printed no graph for '%s'" % name
    n_ir = len(r.stdout.splitlines())
    r = run([CNNC, yml, "--summary"])
    if r.returncode != 0:
        return False, "--summary exited %d: %s" % (r.returncode, first_line(r)[0])
    small = n_in <= SMALL_INPUT
    batch = 2 if small else 1
    t0 = time.time()
    sums = []
    for _ in range(2 if small else 1):
        r = run([RUN_INTERP, yml, "--batch", str(batch), "--seed", "0", "--input-seed", "7"])
        if r.returncode != 0:
            return False, "run_interp exited %d: %s" % (r.returncode, first_line(r)[0])
        m = re.search(r"shape \[([\d,]+)\] sum (\S+) abs_sum (\S+) .* nonfinite (\d+)", r.stdout)
        if not m:
            return False, "run_interp printed no output line: %s" % first_line(r)[0]
        shape = [int(v) for v in m.group(1).split(",")]
        if shape[0] != batch or (classes and shape[-1] != classes):
            return False, "output shape %s, expected [%d, %s]" % (shape, batch, classes)
        if int(m.group(4)) or float(m.group(3)) == 0.0:
            return False, "output has %s non-finite values, abs_sum %s" % (m.group(4), m.group(3))
        sums.append((m.group(2), m.group(3)))
    if len(set(sums)) != 1:
        return False, "two runs with the same seeds differ: %s" % sums
    return True, "ir %d lines, batch %d, output %s, abs_sum %s, %.1f s" % (
        n_ir, batch, shape, sums[0][1], time.time() - t0)


def main():
    testlib.need_built(CNNC, RUN_INTERP)
    return testlib.each_model(testlib.zoo_models(SRC), SRC, check, 22)


if __name__ == "__main__":
    sys.exit(main())
