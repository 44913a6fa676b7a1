#!/usr/bin/env python3
"""bench/run.py — cnnc, ONNX Runtime and PyTorch side by side, in one run on this machine.

For every workload it compiles the cnnc model, exports the torchvision model to ONNX (once,
into the work dir), then runs cnnc, ORT and PyTorch back to back and prints one table:
model, batch, img/s of each, cnnc/ORT, and % of the fp32 peak measured by bench/peak_avx2.c
in the same run.  The machine may be shared: quote ratios, and read the load average printed
with every row.

  python3 bench/run.py [--build build-perf] [--work build-perf/bench] [--only resnet50/1 ...]
                       [--threads 2] [--seconds 20] [--no-torch] [--no-ort]
Environment: ORT_NODE (default /work/ort/node_modules/onnxruntime-node), ANCHORS
(default /work/shared/anchors), TORCH_PY (default /usr/bin/python3).
"""
import argparse, json, math, os, re, subprocess, sys, time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WORKLOADS = [("resnet50", 1), ("resnet50", 16), ("resnext50_32x4d", 16), ("efficientnet_b0", 16)]


def sh(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode:
        sys.exit(f"failed ({r.returncode}): {' '.join(cmd)}\n{r.stdout}{r.stderr}")
    return r.stdout


def loadavg():
    return os.getloadavg()[0]


def peak(work):
    exe = os.path.join(work, "peak_avx2")
    sh(["gcc", "-O2", "-mavx2", "-mfma", os.path.join(ROOT, "bench", "peak_avx2.c"), "-o", exe, "-lpthread"])
    g1, g2, c1, c2 = map(float, sh([exe, "--gflops"]).split())
    return g1, g2, c1, c2


def cnnc_run(a, model, batch):
    so = os.path.join(a.work, f"{model}_b{batch}.so")
    yml = os.path.join(ROOT, "models", f"{model}.yml")
    if not os.path.exists(so) or os.path.getmtime(so) < os.path.getmtime(os.path.join(a.build, "cnnc")):
        t0 = time.time()
        sh([os.path.join(a.build, "cnnc"), yml, "--batch-size", str(batch), "-o", so])
        print(f"  compiled {so} in {time.time() - t0:.1f} s", file=sys.stderr)
    run = [os.path.join(a.build, "cnnrun"), so, "benchmark", "--threads", str(a.threads), "--json", "--batches", "1"]
    probe = json.loads(sh(run + ["--runs", "1"]))
    runs = max(3, math.ceil(a.seconds / max(probe["latency_ms"]["mean"] / 1000, 1e-3)))
    r = json.loads(sh(run + ["--runs", str(runs)]))
    return r["images_per_second"], r["gflops_per_second"] / r["images_per_second"]


def ort_run(a, model, batch):
    onnx = os.path.join(a.work, f"{model}.onnx")
    if not os.path.exists(onnx):
        sh([a.torch_py, os.path.join(a.anchors, "export_onnx.py"), model, onnx])
    env = dict(os.environ, ORT_NODE=a.ort_node)
    out = sh(["node", os.path.join(a.anchors, "ort_bench.js"), onnx, str(batch), str(a.threads)], env=env)
    return float(re.search(r"([0-9.]+) img/s", out).group(1))


def torch_run(a, model, batch):
    out = sh([a.torch_py, os.path.join(a.anchors, "torch_bench.py"), model, "infer", str(batch), str(a.threads)])
    return float(re.search(r"([0-9.]+) img/s", out).group(1))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--build", default=os.path.join(ROOT, "build-perf"))
    p.add_argument("--work", default=None, help="compiled models, ONNX files (default BUILD/bench)")
    p.add_argument("--only", nargs="*", help="MODEL/BATCH, e.g. resnet50/16")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--seconds", type=float, default=20, help="cnnc timed seconds per workload (peers: 20)")
    p.add_argument("--no-ort", action="store_true")
    p.add_argument("--no-torch", action="store_true")
    a = p.parse_args()
    a.work = a.work or os.path.join(a.build, "bench")
    a.anchors = os.environ.get("ANCHORS", "/work/shared/anchors")
    a.ort_node = os.environ.get("ORT_NODE", "/work/ort/node_modules/onnxruntime-node")
    a.torch_py = os.environ.get("TORCH_PY", "/usr/bin/python3")
    os.makedirs(a.work, exist_ok=True)
    work = [w for w in WORKLOADS if not a.only or f"{w[0]}/{w[1]}" in a.only]
    g1, g2, c1, c2 = peak(a.work)
    pk = g2 if a.threads > 1 else g1
    print(f"fp32 AVX2 FMA peak (bench/peak_avx2.c, measured now): 1 thread {g1:.1f}, 2 threads {g2:.1f} GFLOP/s "
          f"(per CPU-second: {c1:.1f} / {c2:.1f}); % of peak below uses {pk:.1f}")
    rows = []
    hdr = f"{'model':<17}{'batch':>5}{'cnnc':>9}{'ORT':>9}{'torch':>9}{'cnnc/ORT':>10}{'cnnc %pk':>10}{'ORT %pk':>9}{'load':>6}"
    for model, batch in work:
        la = loadavg()
        ips, gflop_img = cnnc_run(a, model, batch)
        ort = None if a.no_ort else ort_run(a, model, batch)
        tor = None if a.no_torch else torch_run(a, model, batch)
        f = lambda v: f"{v:9.2f}" if v is not None else f"{'-':>9}"
        row = (f"{model:<17}{batch:>5}{f(ips)}{f(ort)}{f(tor)}"
               f"{(f'{ips / ort:10.2f}' if ort else f'{chr(45):>10}')}"
               f"{100 * ips * gflop_img / pk:9.0f}%"
               f"{(f'{100 * ort * gflop_img / pk:8.0f}%' if ort else f'{chr(45):>9}')}"
               f"{(la + loadavg()) / 2:6.1f}")
        rows.append(row)
        print(row if len(rows) > 1 else hdr + "\n" + row, flush=True)
    print(f"\nimg/s, {a.threads} threads; cnnc {ROOT}; peers from {a.anchors}; load = 1-min load average")


if __name__ == "__main__":
    main()
