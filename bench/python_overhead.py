#!/usr/bin/python3
"""bench/python_overhead.py -- what the Python binding (python/cnnrt, docs/python.md) costs
against the C API, in rounds that alternate the C and Python sides (a drift of the host's
speed hits both).  Run with Debian's python3 (numpy) after building BUILD.

  /usr/bin/python3 bench/python_overhead.py [--build build] [--rounds 5] [--only overhead,resnet50,two]

overhead   a 1x1 model (1x1x1 f32 input, one 1x1 conv, batch 1; tiny.yml below) compiled into
           BUILD/bench/py_tiny.so, one micro-batch per call, --threads T (default 1): per call
           `cnnrun benchmark --batches 1 --runs CALLS` (the C API: 1e6 / img/s), Model.run(None,
           {name: x}), Model.run with out= (the general path) and cnnrt_infer through ctypes
           with the pointers cached (the ctypes crossing alone); overhead = run - C.
resnet50   models/resnet50.yml batch 1 (BUILD/bench/py_resnet50_b1.so): `cnnrun benchmark
           --batches 1 --threads 2 --warmup 1 --seconds S` against Model.run of one image per
           call for S seconds after one warm-up call (threads=2), img/s and the ratio; and, in
           the same process, Model.run and a bare ctypes cnnrt_infer alternately call by call
           for S seconds (insensitive to the host's load drifting): the ratio of their times.
two        two models of ResNet-50 b1 with 1 thread each: CALLS2 calls on one then the other
           (sequential) against both at once from two Python threads: wall time ratio, and the
           process's CPU seconds per wall second in each (2 when the two models ran at once).
Prints every round, then the medians; the host line for bench/RESULTS.md."""
import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TINY = """name: tiny
input: {shape: [1, 1, 1], dtype: f32, classes: 2}
layers:
  - {name: conv, op: conv, filters: 1, kernel: 1}
"""


def host():
    cpu = "?"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    return f"{cpu}, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}"


def compile_once(a, yml, so, *args):
    if not os.path.exists(so):
        subprocess.run([os.path.join(a.build, "cnnc"), yml, "-o", so] + list(args), check=True)
    return so


def cnnrun_bench(a, so, *args):
    out = subprocess.run([os.path.join(a.build, "cnnrun"), so, "benchmark", "--json"] + list(args), check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out)


def timed(fn, calls):
    t = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - t) / calls * 1e6


def overhead(a, cnnrt, np):
    yml = os.path.join(a.work, "py_tiny.yml")
    with open(yml, "w") as f:
        f.write(TINY)
    so = compile_once(a, yml, os.path.join(a.work, "py_tiny.so"))
    m = cnnrt.Model(so, threads=a.threads_tiny)
    x = np.ones((1, 1, 1, 1), np.float32)
    feed, oname = {m.inputs[0].name: x}, [m.outputs[0].name]
    y = [np.empty((1,) + m.outputs[0].shape[1:], np.float32)]
    lib, p = cnnrt._lib.lib, m._h.ptr
    xi, yi = x.ctypes.data, y[0].ctypes.data
    rows = []
    for r in range(a.rounds):
        c = 1e6 / cnnrun_bench(a, so, "--batches", "1", "--runs", str(a.calls), "--warmup", "1000", "--threads",
                               str(a.threads_tiny))["images_per_second"]
        timed(lambda: m.run(None, feed), 1000)
        run = timed(lambda: m.run(None, feed), a.calls)
        run_out = timed(lambda: m.run(oname, feed, out=y), a.calls)
        raw = timed(lambda: lib.cnnrt_infer(p, xi, 4, yi, 4, 1), a.calls)
        rows.append((c, run, run_out, raw))
        print(f"overhead round {r + 1}: C {c:.2f} us/call  Model.run {run:.2f}  run(out=) {run_out:.2f}  "
              f"ctypes cnnrt_infer {raw:.2f}  -> overhead {run - c:.2f} us (ctypes alone {raw - c:.2f})", flush=True)
    m.close()
    med = [statistics.median(col) for col in zip(*rows)]
    print(f"overhead median: C {med[0]:.2f} us/call, Model.run {med[1]:.2f} (+{med[1] - med[0]:.2f}), run(out=) "
          f"{med[2]:.2f} (+{med[2] - med[0]:.2f}), ctypes {med[3]:.2f} (+{med[3] - med[0]:.2f})  [threads {a.threads_tiny}, "
          f"{a.calls} calls per figure]")


def resnet50(a, cnnrt, np):
    so = compile_once(a, os.path.join(ROOT, "models", "resnet50.yml"), os.path.join(a.work, "py_resnet50_b1.so"),
                      "--batch-size", "1")
    m = cnnrt.Model(so, threads=2)
    x = np.random.RandomState(1).uniform(-1, 1, (1,) + m.inputs[0].shape[1:]).astype(np.float32)
    feed = {m.inputs[0].name: x}
    y = np.empty((1,) + m.outputs[0].shape[1:], np.float32)
    lib, p, xi, yi = cnnrt._lib.lib, m._h.ptr, x.ctypes.data, y.ctypes.data
    rows = []
    for r in range(a.rounds):
        # in-process, call by call alternately (a drift of the host's speed hits both alike)
        tp = tc = 0.0
        t_end = time.perf_counter() + a.seconds
        while time.perf_counter() < t_end:
            t0 = time.perf_counter()
            m.run(None, feed)
            t1 = time.perf_counter()
            lib.cnnrt_infer(p, xi, x.nbytes, yi, y.nbytes, 1)
            t2 = time.perf_counter()
            tp, tc = tp + t1 - t0, tc + t2 - t1
        print(f"resnet50 b1 round {r + 1}, in-process call by call: Model.run / bare ctypes cnnrt_infer time "
              f"{tp / tc:.4f}", flush=True)
        c = cnnrun_bench(a, so, "--batches", "1", "--threads", "2", "--warmup", "1", "--seconds", str(a.seconds))
        m.run(None, feed)
        t0, n = time.perf_counter(), 0
        while n < 5 or time.perf_counter() - t0 < a.seconds:
            m.run(None, feed)
            n += 1
        py = n / (time.perf_counter() - t0)
        rows.append((c["images_per_second"], py, py / c["images_per_second"], tc / tp))
        print(f"resnet50 b1 round {r + 1}: cnnrun benchmark {rows[-1][0]:.2f} img/s  Python {py:.2f} img/s  "
              f"ratio {rows[-1][2]:.3f}", flush=True)
    m.close()
    med = [statistics.median(col) for col in zip(*rows)]
    print(f"resnet50 b1 median: cnnrun {med[0]:.2f} img/s, Python {med[1]:.2f} img/s, median ratio {med[2]:.3f} "
          f"(min {min(r[2] for r in rows):.3f}, max {max(r[2] for r in rows):.3f}); {a.seconds} s each, 2 threads; "
          f"in-process Python / C speed median {med[3]:.4f}")


def two(a, cnnrt, np):
    so = compile_once(a, os.path.join(ROOT, "models", "resnet50.yml"), os.path.join(a.work, "py_resnet50_b1.so"),
                      "--batch-size", "1")
    ms = [cnnrt.Model(so, threads=1) for _ in range(2)]
    x = np.random.RandomState(1).uniform(-1, 1, (1,) + ms[0].inputs[0].shape[1:]).astype(np.float32)
    feed = {ms[0].inputs[0].name: x}
    for m in ms:
        m.run(None, feed)
    calls = lambda m: [m.run(None, feed) for _ in range(a.calls2)]  # noqa: E731
    rows = []
    for r in range(a.rounds):
        t, c = time.perf_counter(), time.process_time()
        calls(ms[0]), calls(ms[1])
        seq, seq_cpu = time.perf_counter() - t, time.process_time() - c
        ts = [threading.Thread(target=calls, args=(m,)) for m in ms]
        t, c = time.perf_counter(), time.process_time()
        [th.start() for th in ts]
        [th.join() for th in ts]
        par, par_cpu = time.perf_counter() - t, time.process_time() - c
        rows.append((seq, par, par / seq))
        print(f"two models round {r + 1}: sequential {seq:.2f} s ({seq_cpu / seq:.2f} CPUs busy)  two threads {par:.2f} s "
              f"({par_cpu / par:.2f} CPUs busy)  ratio {par / seq:.3f}", flush=True)
    [m.close() for m in ms]
    print(f"two models median ratio {statistics.median(r[2] for r in rows):.3f} ({a.calls2} ResNet-50 b1 calls per model, "
          "1 thread each)")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--calls", type=int, default=20000, help="calls per overhead figure")
    ap.add_argument("--threads-tiny", type=int, default=1, help="threads of the 1x1 model")
    ap.add_argument("--seconds", type=float, default=10, help="seconds per ResNet-50 figure")
    ap.add_argument("--calls2", type=int, default=10, help="ResNet-50 calls per model in 'two'")
    ap.add_argument("--only", default="overhead,resnet50,two")
    a = ap.parse_args()
    a.build = os.path.abspath(a.build)
    a.work = os.path.join(a.build, "bench")
    os.makedirs(a.work, exist_ok=True)
    sys.path.insert(0, os.path.join(a.build, "python"))
    import numpy as np
    import cnnrt
    print(f"host: {host()}; {time.strftime('%Y-%m-%d %H:%M')}; libcnnrt {cnnrt.library_path}", flush=True)
    for part in a.only.split(","):
        {"overhead": overhead, "resnet50": resnet50, "two": two}[part](a, cnnrt, np)
    print(f"load after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
