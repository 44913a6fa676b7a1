#!/usr/bin/env python3
"""bench/opcmp_names.py — bench/opcmp.py for two builds whose op lists differ (e.g. 16-bit
inference storage adds widen16 ops, docs/precision.md): runs `cnnrun X.so benchmark --profile
--json --runs 1 --batches 1 --threads T` for A and B alternately REPEATS times (opcmp's
profile()), prints the total thread-CPU seconds per micro-batch of every run, the speed B/A
from the minimum totals and from the sums of per-op minima, and the ops (matched by name) that
changed most.

  python3 bench/opcmp_names.py A.so B.so [--repeats 5] [--threads 2] [--cnnrun build/cnnrun]
"""
import argparse, os, sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import opcmp  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("a"), ap.add_argument("b")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--cnnrun", default=os.path.join(opcmp.ROOT, "build", "cnnrun"))
    ap.add_argument("--show", type=int, default=10, help="ops with the largest gains and losses")
    a = ap.parse_args()
    runs, opmin, kern = {a.a: [], a.b: []}, {a.a: {}, a.b: {}}, {a.a: {}, a.b: {}}
    for _ in range(a.repeats):
        for so in (a.a, a.b):
            r = opcmp.profile(a.cnnrun, so, a.threads, 102.0)
            runs[so].append(sum(x[3] for x in r))
            for x in r:
                opmin[so][x[0]] = min(opmin[so].get(x[0], 1e9), x[3])
                kern[so][x[0]] = x[1]
    for so in (a.a, a.b):
        t = sorted(runs[so])
        print(f"{os.path.basename(so)}: CPU-s per micro-batch min {t[0]:.3f} median {t[len(t) // 2]:.3f} "
              f"runs {' '.join('%.3f' % x for x in runs[so])}; sum of per-op minima {sum(opmin[so].values()):.3f}")
    print(f"B/A speed: {min(runs[a.a]) / min(runs[a.b]):.3f} (minimum totals), "
          f"{sum(opmin[a.a].values()) / sum(opmin[a.b].values()):.3f} (sums of per-op minima)")
    rows = sorted((opmin[a.b][n] - opmin[a.a].get(n, 0.0), n, opmin[a.a].get(n, 0.0), opmin[a.b][n], kern[a.b][n])
                  for n in opmin[a.b])
    print("largest per-op changes, B - A thread-CPU ms (gains, then losses):")
    for d, n, ta, tb, k in rows[:a.show] + rows[-a.show:]:
        print(f"  {d * 1e3:+8.2f}  {n:<40} A {ta * 1e3:8.2f} B {tb * 1e3:8.2f}  {k}")


if __name__ == "__main__":
    main()
