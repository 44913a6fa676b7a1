#!/usr/bin/env python3
"""bench/profile.py — per-layer profile of a compiled model with perf: CPU time and GFLOP/s
per kernel (per CPU-second, so it holds on a loaded machine), grouped by layer type.

  python3 bench/profile.py MODEL.yml MODEL.so [--threads 2] [--runs 2] [--top 15] [--peak 100]
Kernel symbols are cnnk_s<shard>_<kind>_n<node>; node = row of `cnnc MODEL.yml --summary`.
--peak is the per-core fp32 peak (bench/peak.c, per CPU-second) for the % column.
"""
import argparse, collections, os, re, subprocess, sys, tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def layers(cnnc, yml):
    out = subprocess.run([cnnc, yml, "--summary"], capture_output=True, text=True, check=True).stdout.splitlines()
    start = next(i for i, l in enumerate(out) if l.startswith("Layer")) + 1
    rows = []
    for l in out[start:]:
        f = l.split()
        if len(f) < 5 or not f[-1].replace(",", "").isdigit():
            break
        rows.append((f[0], f[1], int(f[-1].replace(",", ""))))
    return rows


def category(kind):
    if not kind.startswith("conv2d"):
        return re.sub(r"_f32_.*", "", kind).split("_")[0]
    v = "vc " if "_vc" in kind else ""
    for tag, name in (("_dw", "depthwise"), ("_g_", "grouped"), ("_1x1", "1x1 s1")):
        if tag in kind:
            return v + name
    return v + "conv (kxk / strided / stem)"


def main():
    p = argparse.ArgumentParser()
    p.add_argument("yml"), p.add_argument("so")
    p.add_argument("--build", default=os.path.join(ROOT, "build-perf"))
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--runs", type=int, default=2)
    p.add_argument("--top", type=int, default=15)
    p.add_argument("--peak", type=float, default=100.0, help="per-core GFLOP/s")
    a = p.parse_args()
    rows = layers(os.path.join(a.build, "cnnc"), a.yml)
    info = subprocess.run([os.path.join(a.build, "cnnrun"), a.so, "info", "--json"], capture_output=True, text=True).stdout
    m = re.search(r'"batch_size":\s*(\d+)', info)
    batch = int(m.group(1)) if m else 1
    data = tempfile.mktemp(suffix=".perf")
    freq = 999
    subprocess.run(["perf", "record", "-q", "-o", data, "-F", str(freq), os.path.join(a.build, "cnnrun"), a.so,
                    "benchmark", "--batches", "1", "--runs", str(a.runs), "--warmup", "0", "--threads",
                    str(a.threads)], check=True, capture_output=True)
    rep = subprocess.run(["perf", "report", "-i", data, "-n", "--no-children", "--sort", "sym", "--stdio"],
                         capture_output=True, text=True).stdout
    os.unlink(data)
    calls = a.runs  # one micro-batch per run, no warm-up
    per_kernel, cat = [], collections.defaultdict(lambda: [0.0, 0.0])
    total_samples = 0
    for l in rep.splitlines():
        mm = re.match(r"\s*([\d.]+)%\s+(\d+)\s+\[\.\]\s+(\S+)", l)
        if not mm:
            continue
        n, sym = int(mm.group(2)), mm.group(3)
        total_samples += n
        k = re.match(r"cnnk_s\d+_(.*)_n(\d+)$", sym)
        kind, node = (k.group(1), int(k.group(2))) if k else (sym, -1)
        sec = n / freq / calls
        flop = 2 * rows[node][2] * batch if 0 <= node < len(rows) else 0
        per_kernel.append((sec, rows[node][0] if node >= 0 else "-", kind, flop))
        c = cat[category(kind) if k else "(runtime/other)"]
        c[0] += sec
        c[1] += flop
    tot = total_samples / freq / calls
    print(f"{os.path.basename(a.so)}: batch {batch}, {a.threads} threads, CPU time per batch {tot * 1000:.0f} ms "
          f"(sum over threads); GFLOP/s per CPU-second, % of {a.peak:.0f} per core")
    print(f"{'layer type':<30}{'CPU ms':>9}{'share':>7}{'GFLOP':>8}{'GFLOP/s':>9}{'%pk':>6}")
    for name, (sec, flop) in sorted(cat.items(), key=lambda x: -x[1][0]):
        g = flop / sec / 1e9 if sec else 0
        print(f"{name:<30}{sec * 1000:9.1f}{100 * sec / tot:6.1f}%{flop / 1e9:8.2f}{g:9.1f}{100 * g / a.peak:5.0f}%")
    print(f"\ntop {a.top} kernels")
    for sec, layer, kind, flop in sorted(per_kernel, reverse=True)[:a.top]:
        g = flop / sec / 1e9 if sec else 0
        print(f"{layer:<22}{kind:<44}{sec * 1000:8.1f} ms{g:8.1f} GFLOP/s{100 * g / a.peak:5.0f}%")


if __name__ == "__main__":
    main()
