#!/usr/bin/env python3
"""bench/opcmp.py — compare compiled models op by op on a loaded machine: runs
`cnnrun A.so benchmark --profile --json` and the same for B.so alternately, REPEATS times
each, and keeps per op the minimum thread-CPU time per micro-batch (the run least disturbed
by other processes).  Prints per op GFLOP per CPU-second (and % of --peak) for A and B,
the ratio, and totals.  Ops are matched by index, so A and B should come from the same
model (e.g. two compiler versions).

  python3 bench/opcmp.py A.so B.so [--repeats 3] [--threads 1] [--cnnrun build/cnnrun] [--peak 102]
"""
import argparse, json, os, subprocess, sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def profile(cnnrun, so, threads, peak):
    out = subprocess.run([cnnrun, so, "benchmark", "--profile", "--json", "--runs", "1", "--batches", "1",
                          "--threads", str(threads), "--peak", str(peak)], check=True, capture_output=True, text=True).stdout
    p = json.loads(out)["profile"]
    return [(o["name"], o["kernel"], o["flops"], o["cpu_seconds"] / o["calls"], o["seconds"] / o["calls"]) for o in p["ops"]]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("a"), ap.add_argument("b")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--peak", type=float, default=102.0, help="per-core GFLOP/s")
    ap.add_argument("--cnnrun", default=os.path.join(ROOT, "build", "cnnrun"))
    a = ap.parse_args()
    best = {a.a: None, a.b: None}
    for _ in range(a.repeats):
        for so in (a.a, a.b):
            r = profile(a.cnnrun, so, a.threads, a.peak)
            best[so] = r if best[so] is None else [(x[0], x[1], x[2], min(x[3], y[3]), min(x[4], y[4])) for x, y in zip(best[so], r)]
    A, B = best[a.a], best[a.b]
    if len(A) != len(B):
        sys.exit(f"op counts differ: {len(A)} vs {len(B)}")
    print(f"{'op':>3} {'layer':<24} {'A GF/cpu':>9} {'%pk':>4} {'B GF/cpu':>9} {'%pk':>4} {'B/A':>6}  kernel (B)")
    ta = tb = fl = 0.0
    for i, (x, y) in enumerate(zip(A, B)):
        ga, gb = x[2] / x[3] / 1e9 if x[3] > 0 else 0, y[2] / y[3] / 1e9 if y[3] > 0 else 0
        ta, tb, fl = ta + x[3], tb + y[3], fl + x[2]
        print(f"{i:3d} {x[0]:<24} {ga:9.2f} {100 * ga / a.peak:3.0f}% {gb:9.2f} {100 * gb / a.peak:3.0f}% {gb / ga if ga else 0:6.3f}  {y[1]}")
    print(f"total CPU s per micro-batch (min of {a.repeats}): A {ta:.4f}  B {tb:.4f}  B/A time {tb / ta:.3f}; "
          f"GF/cpu A {fl / ta / 1e9:.2f} B {fl / tb / 1e9:.2f}")


if __name__ == "__main__":
    main()
