#!/usr/bin/env python3
"""bench/thrcmp.py — one compiled model at 1 and 2 threads, op by op: runs
`cnnrun M.so benchmark --profile --json` with --threads 1 and --threads 2 alternately, REPEATS
times each, keeps per op the minimum thread-CPU time and the minimum wall time per
micro-batch, and prints GFLOP per CPU-second at 1 and 2 threads (their ratio: what the second
thread costs inside the kernels — cache/L3 contention, duplicated weight streams) and the
2-thread GFLOP/s by wall time (what waiting, imbalance and barriers cost on top).  On a loaded
machine the wall column is preemption as much as anything; the CPU-second columns hold.

  python3 bench/thrcmp.py M.so [--repeats 6] [--cnnrun build/cnnrun] [--peak 102]
"""
import argparse, os, sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from opcmp import profile, ROOT  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("so")
    ap.add_argument("--repeats", type=int, default=6)
    ap.add_argument("--peak", type=float, default=102.0, help="per-core GFLOP/s")
    ap.add_argument("--cnnrun", default=os.path.join(ROOT, "build", "cnnrun"))
    a = ap.parse_args()
    best = {1: None, 2: None}
    for _ in range(a.repeats):
        for t in (1, 2):
            r = profile(a.cnnrun, a.so, t, a.peak)
            best[t] = r if best[t] is None else [(x[0], x[1], x[2], min(x[3], y[3]), min(x[4], y[4])) for x, y in zip(best[t], r)]
    A, B = best[1], best[2]
    print(f"{'op':>3} {'layer':<24} {'1t GF/cpu':>9} {'2t GF/cpu':>9} {'2t/1t':>6} {'2t wall GF/s':>12}  kernel")
    ta = tb = tw = fl = 0.0
    for i, (x, y) in enumerate(zip(A, B)):
        ga = x[2] / x[3] / 1e9 if x[3] else 0
        gb = y[2] / y[3] / 1e9 if y[3] else 0
        gw = y[2] / y[4] / 1e9 if y[4] else 0
        ta, tb, tw, fl = ta + x[3], tb + y[3], tw + y[4], fl + x[2]
        print(f"{i:3d} {x[0]:<24} {ga:9.2f} {gb:9.2f} {gb / ga if ga else 0:6.3f} {gw:12.2f}  {x[1]}")
    print(f"total (min of {a.repeats}): CPU s per micro-batch 1t {ta:.4f} 2t {tb:.4f} (GF/cpu {fl / ta / 1e9:.1f} vs "
          f"{fl / tb / 1e9:.1f}); 2t wall {tw:.4f} s = {fl / tw / 1e9:.1f} GF/s ({100 * fl / tw / 1e9 / (2 * a.peak):.0f} % of "
          f"2 x {a.peak:g}; ideal from the 2t CPU time {tb / 2:.4f} s)")


if __name__ == "__main__":
    main()
