#!/usr/bin/python3
"""test_round16_torch.py BUILD_DIR SRC_DIR — the reference round16 (ir/ref_round16.c, issue 6,
docs/precision.md) against PyTorch bit for bit: x.to(torch.bfloat16).float() for format 0 and
x.half().float() for format 1, on round-to-nearest-even ties (even and odd), values just
off a tie, f32 and fp16 subnormals, the fp16 overflow edge (65504 / 65520), FLT_MAX, inf, NaN
(compared as NaN: torch's bf16 NaN is always +0x7fc0, ours keeps the sign) and 200k random
bit patterns, through BUILD_DIR/tests/ref_runner."""
import os
import subprocess
import sys
import tempfile

import numpy as np
import testlib  # tests/scripts/testlib.py: skip (77) without PyTorch
testlib.need_module("torch", "Debian python3-torch")
import torch  # noqa: E402


def patterns():
    rng = np.random.default_rng(6)
    p = [rng.integers(0, 2**32, 200000, dtype=np.uint64).astype(np.uint32)]
    # every exponent with mantissa low halves at the bf16 / fp16 tie points and around them
    exps = np.arange(0, 256, dtype=np.uint32) << 23
    mants = []
    for hi in (0x000000, 0x010000, 0x7f0000, 0x002000, 0x7fe000):
        for lo in (0x8000, 0x7fff, 0x8001, 0x1000, 0x0fff, 0x1001, 0x3000, 0x0000, 0xffff):
            mants.append(hi | lo)
    m = np.array(mants, dtype=np.uint32) & 0x7fffff
    grid = (exps[:, None] | m[None, :]).ravel()
    p += [grid, grid | np.uint32(0x80000000)]
    p.append(np.array([0x477fefff, 0x477ff000, 0x477fe000, 0x47800000, 0x7f7fffff, 0x7f800000, 0xff800000,
                       0x7fc00000, 0xffc00001, 0x7f800001, 0x00000001, 0x33000000, 0x33000001, 0x33800000,
                       0x387fe000, 0x38800000, 0], dtype=np.uint32))
    return np.concatenate(p)


def main():
    exe = os.path.join(sys.argv[1], "tests", "ref_runner")
    if not os.path.exists(exe):
        print("missing %s (build the ref_runner target)" % exe, file=sys.stderr)
        return 1
    bits = patterns()
    x = bits.view(np.float32)
    bad = 0
    with tempfile.TemporaryDirectory() as tmp:
        xin = os.path.join(tmp, "x.bin")
        x.astype("<f4").tofile(xin)
        for fmt, name, conv in ((0, "bf16", lambda t: t.to(torch.bfloat16).float()), (1, "fp16", lambda t: t.half().float())):
            out = os.path.join(tmp, "y%d.bin" % fmt)
            spec = os.path.join(tmp, "spec%d.txt" % fmt)
            with open(spec, "w") as fh:
                fh.write("op round16\nattr format %d\ninput 1 %d %s\noutput %s\n" % (fmt, x.size, xin, out))
            r = subprocess.run([exe, spec], capture_output=True, text=True)
            if r.returncode != 0:
                print("ref_runner failed: " + r.stderr.strip(), file=sys.stderr)
                return 1
            got = np.fromfile(out, dtype="<f4")
            want = conv(torch.from_numpy(x.copy())).numpy()
            nan_w, nan_g = np.isnan(want), np.isnan(got)
            diff = (nan_w != nan_g) | (~nan_w & (got.view(np.uint32) != want.view(np.uint32)))
            n = int(diff.sum())
            print("%s: %d values, %d NaN, %d differ from torch" % (name, x.size, int(nan_w.sum()), n))
            for i in np.nonzero(diff)[0][:5]:
                print("  x=%08x ours=%08x torch=%08x" % (bits[i], got.view(np.uint32)[i], want.view(np.uint32)[i]))
            bad += n
    print("FAIL" if bad else "ok")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
