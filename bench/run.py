#!/usr/bin/env python3
"""bench/run.py — cnnc, ONNX Runtime and PyTorch side by side, in one run on this machine.

For every workload it compiles the cnnc model, exports the torchvision model to ONNX (once,
into the work dir), then runs cnnc, ORT and PyTorch back to back and prints one table:
model, batch, img/s of each, cnnc/ORT, cnnc/torch, and % of the peak measured by bench/peak.c
in the same run: the AVX-512 fp32 FMA peak on hosts with avx512f, else the AVX2 one (the line
above the table says which).  The machine may be shared: quote ratios, and read the load
average printed with every row.

  python3 bench/run.py [--build build-perf] [--work build-perf/bench] [--only resnet50/1 ...]
                       [--threads 2] [--seconds 20] [--no-torch] [--no-ort] [--bf16] [--int8]

--onnx: cnnc compiles the same ONNX export ORT runs (export_onnx.py: torchvision, seed-0
weights, symbolic batch) instead of the YAML zoo model, for ONNX_MODELS at batch 1 and 16 (or
--only's); rows are named "MODEL onnx".  `--onnx --yaml-too` adds the YAML model's cnnc
figure (models/MODEL.yml, where the zoo has it) as a column, to compare the two frontends.
--bf16: the bf16 workload, ResNet-50 batch 16 compiled with --precision 16.16 --half-type bf16,
against `torch_bench.py resnet50 infer 16 THREADS bf16` (CPU autocast to bfloat16); no ORT run.
Alone it runs only that row; with --only, the listed fp32 rows too.  Its %pk is against the
vdpbf16ps peak where cnnc's plan takes the vdpbf16ps route (its "# bf16 convs:" line, which
is printed), the AMX tdpbf16ps peak where it takes AMX tiles, else the fp32 peak.
--int8: ResNet-50 batch 16 compiled with --precision int8, calibrated on 32 N(0,1) samples
(seed 0), against bench/torch_int8.py (PyTorch FX post-training int8 on the same random-weight
model, calibrated on N(0,1) batches); no ORT run; %pk against the fp32 peak (the int8 rates
are not measured by peak.c outside AMX).  Alone it runs only that row, as --bf16.
  python3 bench/run.py --train [--rounds 2] [--only resnet50/16 fmnist_cnn/64] [--seconds 20]

--train: steady-state training against PyTorch (issue 5).  cnnc: `cnnrun X.so benchmark` on a
--mode training .so (2 warm-up steps, then steps for --seconds, one synthetic batch every step);
PyTorch: the anchors as they are.  ResNet-50 batch 16 with SGD momentum 0.9, lr 0.01 (as
torch_bench.py ... train 16: 2 warm-up steps, then steps for >= 20 s, the same random batch
every step); fmnist_cnn batch 64 with SGD momentum 0.9, lr 0.05 (fmnist_torch.py's recipe; the
anchor prints 60000 / the wall time of one training epoch: 937 steps over the shuffled real
data, the first step and the per-step index gather included, no warm-up dropped; with
--fmnist-torch steps: bench/fmnist_torch_steps.py, the same loop timed like torch_bench.py).  Each round
runs cnnc then PyTorch (A/B/A/B), so drifts of the host's speed hit both; the table gives the
medians over rounds and the median of the per-round ratios.
Peers: the anchors (export_onnx.py, ort_bench.js, torch_bench.py, fmnist_torch.py) in ANCHORS
(default <repo>/../shared/anchors); onnxruntime-node in ORT_NODE (default
<repo>/bench/.ort/node_modules/onnxruntime-node, installed by `bash bench/setup.sh`); PyTorch
through TORCH_PY (default /usr/bin/python3).
"""
import argparse, json, math, os, re, subprocess, sys, time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WORKLOADS = [("resnet50", 1), ("resnet50", 16), ("resnext50_32x4d", 16), ("efficientnet_b0", 16)]
BF16_WORKLOADS = [("resnet50", 16)]  # --bf16
INT8_WORKLOADS = [("resnet50", 16)]  # --int8
ONNX_MODELS = ["resnet50", "mobilenet_v2", "mobilenet_v3_large", "efficientnet_b0", "squeezenet1_1", "densenet121",
               "googlenet", "shufflenet_v2_x1_0", "vgg16"]  # --onnx
BF16_OPTS = ["--precision", "16.16", "--half-type", "bf16"]


def sh(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode:
        sys.exit(f"failed ({r.returncode}): {' '.join(cmd)}\n{r.stdout}{r.stderr}")
    return r.stdout


def loadavg():
    return os.getloadavg()[0]


def peak(work):
    """bench/peak.c's figures: (isa, {"fp32": (g1, g2, c1, c2), "bf16": (...) if the host has it})."""
    exe = os.path.join(work, "peak")
    sh(["gcc", "-O2", os.path.join(ROOT, "bench", "peak.c"), "-o", exe, "-lpthread"])
    f = sh([exe, "--gflops"]).split()
    pk = {"fp32": tuple(map(float, f[1:5]))}
    for i, w in enumerate(f):  # named groups of four: bf16, amx_bf16, amx_int8
        if w in ("bf16", "amx_bf16", "amx_int8") and len(f) >= i + 5:
            pk[w] = tuple(map(float, f[i + 1:i + 5]))
    return f[0], pk


def onnx_export(a, model):
    onnx = os.path.join(a.work, f"{model}.onnx")
    if not os.path.exists(onnx):
        sh([a.torch_py, os.path.join(a.anchors, "export_onnx.py"), model, onnx])
    return onnx


def calib_file(a, n=32):
    """n N(0,1) ImageNet-shaped f32 samples (seed 0) for --precision int8's --calibrate."""
    path = os.path.join(a.work, f"calib_n{n}.f32")
    if not os.path.exists(path):
        import random, struct
        rng = random.Random(0)
        with open(path + ".tmp", "wb") as f:
            for _ in range(n):
                f.write(struct.pack("<%df" % (3 * 224 * 224), *(rng.gauss(0, 1) for _ in range(3 * 224 * 224))))
        os.replace(path + ".tmp", path)
    return path


def cnnc_run(a, model, batch, kind="fp32", onnx=False):
    so = os.path.join(a.work, f"{model}_b{batch}{'' if kind == 'fp32' else '_' + kind}{'_onnx' if onnx else ''}.so")
    src = onnx_export(a, model) if onnx else os.path.join(ROOT, "models", f"{model}.yml")
    if not os.path.exists(so) or os.path.getmtime(so) < os.path.getmtime(os.path.join(a.build, "cnnc")):
        t0 = time.time()
        opts = BF16_OPTS if kind == "bf16" else ["--precision", "int8", "--calibrate", calib_file(a)] if kind == "int8" else []
        sh([os.path.join(a.build, "cnnc"), src, "--batch-size", str(batch), *opts, "-o", so])
        print(f"  compiled {so} in {time.time() - t0:.1f} s", file=sys.stderr)
    run = [os.path.join(a.build, "cnnrun"), so, "benchmark", "--threads", str(a.threads), "--json", "--batches", "1"]
    probe = json.loads(sh(run + ["--runs", "1"]))
    runs = max(3, math.ceil(a.seconds / max(probe["latency_ms"]["mean"] / 1000, 1e-3)))
    r = json.loads(sh(run + ["--runs", str(runs)]))
    return r["images_per_second"], r["gflops_per_second"] / r["images_per_second"]


def bf16_route(a, model, batch):
    """The "# bf16 convs:" line of cnnc's plan for the bf16 workload (codegen/cores.def decides)."""
    plan = sh([os.path.join(a.build, "cnnc"), os.path.join(ROOT, "models", f"{model}.yml"), "--batch-size", str(batch),
               *BF16_OPTS, "--emit", "plan"])
    return next((l[len("# bf16 convs: "):] for l in plan.splitlines() if l.startswith("# bf16 convs: ")), "?")


def ort_run(a, model, batch):
    onnx = onnx_export(a, model)
    if not os.path.isdir(a.ort_node):
        sys.exit(f"no onnxruntime-node at {a.ort_node}: run `bash bench/setup.sh`, set ORT_NODE, or pass --no-ort")
    env = dict(os.environ, ORT_NODE=a.ort_node)
    out = sh(["node", os.path.join(a.anchors, "ort_bench.js"), onnx, str(batch), str(a.threads)], env=env)
    return float(re.search(r"([0-9.]+) img/s", out).group(1))


def torch_run(a, model, batch, kind="fp32"):
    if kind == "int8":
        out = sh([a.torch_py, os.path.join(ROOT, "bench", "torch_int8.py"), model, str(batch), str(a.threads)])
    else:
        out = sh([a.torch_py, os.path.join(a.anchors, "torch_bench.py"), model, "infer", str(batch), str(a.threads),
                  *(["bf16"] if kind == "bf16" else [])])
    print(f"  {out.strip().splitlines()[-1]}", file=sys.stderr)
    return float(re.search(r"([0-9.]+) img/s", out).group(1))


TRAIN_WORKLOADS = {  # name/batch: (model file, cnnc options, lr, target ratio)
    "resnet50/16": ("resnet50", ["--mode", "training", "--optimizer", "momentum", "--momentum", "0.9", "--batch-size", "16"],
                    0.01, 1.6),
    "fmnist_cnn/64": ("fmnist_cnn", ["--mode", "training", "--optimizer", "momentum", "--momentum", "0.9", "--batch-size", "64"],
                      0.05, 3.0),
}


def median(v):
    v = sorted(v)
    return (v[(len(v) - 1) // 2] + v[len(v) // 2]) / 2


def cnnc_train_so(a, key):
    model, opts, _, _ = TRAIN_WORKLOADS[key]
    so = os.path.join(a.work, f"{model}_train_b{key.split('/')[1]}.so")
    cnnc = os.path.join(a.build, "cnnc")
    if not os.path.exists(so) or os.path.getmtime(so) < os.path.getmtime(cnnc):
        t0 = time.time()
        sh([cnnc, os.path.join(ROOT, "models", f"{model}.yml"), *opts, "-o", so])
        print(f"  compiled {so} in {time.time() - t0:.1f} s: {' '.join(opts)}", file=sys.stderr)
    return so


def cnnc_train_run(a, key, so):
    lr = TRAIN_WORKLOADS[key][2]
    r = json.loads(sh([os.path.join(a.build, "cnnrun"), so, "benchmark", "--threads", str(a.threads), "--json",
                       "--warmup", "2", "--runs", "3", "--seconds", str(a.seconds), "--lr", str(lr)]))
    return r["images_per_second"], r


def torch_train_run(a, key):
    if key.startswith("fmnist_cnn/") and a.fmnist_torch == "steps":
        out = sh([a.torch_py, os.path.join(ROOT, "bench", "fmnist_torch_steps.py"), str(a.seconds)])
        return float(re.search(r"([0-9.]+) img/s", out).group(1)), out.strip()
    if key.startswith("fmnist_cnn/"):
        out = sh([a.torch_py, os.path.join(a.anchors, "fmnist_torch.py"), "1"])
        return float(re.search(r"epoch 1: [0-9.]+ s \(([0-9.]+) img/s\)", out).group(1)), out.strip()
    model, batch = key.split("/")
    out = sh([a.torch_py, os.path.join(a.anchors, "torch_bench.py"), model, "train", batch, str(a.threads)])
    return float(re.search(r"([0-9.]+) img/s", out).group(1)), out.strip()


def main_train(a):
    keys = [k for k in TRAIN_WORKLOADS if not a.only or k in a.only]
    if a.only and len(keys) != len(a.only):
        sys.exit(f"--train workloads: {', '.join(TRAIN_WORKLOADS)}")
    sos = {k: cnnc_train_so(a, k) for k in keys}
    rows = []
    for k in keys:
        cs, ts, ratios, loads = [], [], [], []
        for rnd in range(1, a.rounds + 1):
            l0 = loadavg()
            c, cj = cnnc_train_run(a, k, sos[k])
            l1 = loadavg()
            t, tline = (None, "") if a.no_torch else torch_train_run(a, k)
            l2 = loadavg()
            loads += [l0, l1, l2]
            cs.append(c)
            if t:
                ts.append(t)
                ratios.append(c / t)
            print(f"{k} round {rnd}: cnnc {c:.2f} img/s ({cj['timed_steps']} steps in {cj['total_seconds']:.1f} s, "
                  f"p50 {cj['step_ms']['p50']:.1f} ms/step, {1e3 * cj['cpu_seconds'] / cj['timed_steps']:.1f} CPU-ms/step, "
                  f"{cj['gflops_per_second']:.1f} GFLOP/s, loss {cj['loss']['first']:.4f} -> {cj['loss']['last']:.4f}, "
                  f"load {l0:.1f}-{l1:.1f})"
                  + (f" | torch {t:.2f} img/s (load {l1:.1f}-{l2:.1f}): {tline.splitlines()[-1]} | ratio {c / t:.2f}"
                     if t else ""), flush=True)
        rows.append((k, median(cs), median(ts) if ts else None, median(ratios) if ratios else None,
                     TRAIN_WORKLOADS[k][3], len(cs), min(loads), max(loads)))
    print(f"\n{'model':<12}{'batch':>6}{'cnnc img/s':>12}{'torch img/s':>13}{'ratio':>8}{'target':>8}{'rounds':>8}{'load':>12}")
    busy = False
    for k, c, t, r, tg, n, lmin, lmax in rows:
        m, b = k.split("/")
        f = lambda v, w: f"{v:{w}.2f}" if v is not None else f"{'-':>{w}}"
        busy |= lmax > 2 * a.threads
        print(f"{m:<12}{b:>6}{f(c, 12)}{f(t, 13)}{f(r, 8)}{tg:7.1f}x{n:>8}{f'{lmin:.1f}-{lmax:.1f}':>12}"
              + ("" if r is None else "  (>= target)" if r >= tg else "  (below target)"))
    if busy:
        print(f"\nWARNING: load average up to {max(x[7] for x in rows):.1f} on this machine: both programs got a fraction of "
              "the cores, and PyTorch slowed down more than cnnc under load when measured here (bench/RESULTS.md, Zen 3, "
              "'training on a loaded machine'), so these ratios are not quiet-machine ratios, which the issue's targets are about.")
    print(f"\nimg/s medians over rounds, ratio = median of the per-round cnnc/torch ratios; {a.threads} threads "
          f"(fmnist_torch.py sets 2); cnnc: cnnrun benchmark, 2 warm-up steps, >= {a.seconds:g} s of steps on one synthetic "
          "batch; torch: torch_bench.py train (same protocol) / "
          + ("fmnist_torch.py 1 (one epoch of real data, first step and data gather included)" if a.fmnist_torch == "epoch"
             else f"bench/fmnist_torch_steps.py {a.seconds:g} (fmnist_torch.py's loop, 2 warm-up steps, >= {a.seconds:g} s)")
          + "; load = 1-min load average")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--build", default=os.path.join(ROOT, "build-perf"))
    p.add_argument("--work", default=None, help="compiled models, ONNX files (default BUILD/bench)")
    p.add_argument("--only", nargs="*", help="MODEL/BATCH, e.g. resnet50/16")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--seconds", type=float, default=20, help="cnnc timed seconds per workload (peers: 20)")
    p.add_argument("--no-ort", action="store_true")
    p.add_argument("--no-torch", action="store_true")
    p.add_argument("--bf16", action="store_true", help="ResNet-50 b16 at --precision 16.16 --half-type bf16 vs PyTorch "
                   "bf16 autocast (alone: only that row; with --only: those rows too)")
    p.add_argument("--int8", action="store_true", help="ResNet-50 b16 at --precision int8 vs PyTorch FX int8 "
                   "(bench/torch_int8.py; alone: only that row; with --only: those rows too)")
    p.add_argument("--onnx", action="store_true", help="cnnc compiles the ONNX export ORT runs (ONNX_MODELS at b1 and b16)")
    p.add_argument("--yaml-too", action="store_true", help="--onnx: also the YAML zoo model's cnnc img/s, where there is one")
    p.add_argument("--train", action="store_true", help="training against PyTorch: resnet50/16, fmnist_cnn/64")
    p.add_argument("--rounds", type=int, default=2, help="--train: cnnc/torch rounds per workload (A/B/A/B)")
    p.add_argument("--fmnist-torch", choices=["epoch", "steps"], default="epoch",
                   help="--train: PyTorch fmnist_cnn figure: fmnist_torch.py's one-epoch img/s (default), or the same "
                        "loop timed like torch_bench.py (bench/fmnist_torch_steps.py, --seconds)")
    a = p.parse_args()
    if a.rounds < 1:
        p.error("--rounds must be at least 1")
    a.work = a.work or os.path.join(a.build, "bench")
    a.anchors = os.path.abspath(os.environ.get("ANCHORS", os.path.join(ROOT, "..", "shared", "anchors")))
    a.ort_node = os.path.abspath(os.environ.get("ORT_NODE", os.path.join(ROOT, "bench", ".ort", "node_modules",
                                                                          "onnxruntime-node")))
    if not (a.no_ort and a.no_torch) and not os.path.isdir(a.anchors):
        sys.exit(f"no peer scripts at {a.anchors}: set ANCHORS to the anchors folder (bench/README.md)")
    a.torch_py = os.environ.get("TORCH_PY", "/usr/bin/python3")
    os.makedirs(a.work, exist_ok=True)
    if a.train:
        return main_train(a)
    if a.onnx:
        work = [(m, b, "fp32") for m in ONNX_MODELS for b in (1, 16) if not a.only or f"{m}/{b}" in a.only]
    else:
        work = [(m, b, "fp32") for m, b in WORKLOADS
                if (not a.only and not a.bf16 and not a.int8) or (a.only and f"{m}/{b}" in a.only)]
        work += [(m, b, "bf16") for m, b in BF16_WORKLOADS if a.bf16]
        work += [(m, b, "int8") for m, b in INT8_WORKLOADS if a.int8]
    isa, pks = peak(a.work)
    g1, g2, c1, c2 = pks["fp32"]
    pk = g2 if a.threads > 1 else g1
    print(f"fp32 {isa} FMA peak (bench/peak.c, measured now): 1 thread {g1:.1f}, 2 threads {g2:.1f} GFLOP/s "
          f"(per CPU-second: {c1:.1f} / {c2:.1f}); % of peak below uses {pk:.1f}")
    pk_bf = pk
    if "bf16" in pks:
        b1, b2, bc1, bc2 = pks["bf16"]
        pk_bf = b2 if a.threads > 1 else b1
        print(f"bf16 avx512_bf16 vdpbf16ps peak: 1 thread {b1:.1f}, 2 threads {b2:.1f} GFLOP/s (per CPU-second: "
              f"{bc1:.1f} / {bc2:.1f})" + (f"; % of peak of the bf16 row uses it where cnnc's plan takes vdpbf16ps" if a.bf16 else ""))
    elif a.bf16:
        print("no AVX512_BF16 on this host: % of peak of the bf16 row uses the fp32 peak")
    pk_amx = None
    if "amx_bf16" in pks:
        x1, x2, xc1, xc2 = pks["amx_bf16"]
        i1, i2, ic1, ic2 = pks.get("amx_int8", (0, 0, 0, 0))
        pk_amx = x2 if a.threads > 1 else x1
        print(f"AMX tdpbf16ps peak: 1 thread {x1:.1f}, 2 threads {x2:.1f} GFLOP/s (per CPU-second: {xc1:.1f} / {xc2:.1f}); "
              f"tdpbssd: {i1:.1f} / {i2:.1f} GOP/s" + ("; % of peak of the bf16 row uses it where cnnc's plan takes AMX" if a.bf16 else ""))
    rows = []
    hdr = (f"{'model':<22}{'batch':>5}{'cnnc':>9}{'ORT':>9}{'torch':>9}{'cnnc/ORT':>10}{'cnnc/torch':>11}{'cnnc %pk':>10}"
           f"{'ORT %pk':>9}{'load':>6}" + (f"{'yaml':>9}{'onnx/yaml':>10}" if a.yaml_too else ""))
    for model, batch, kind in work:
        la = loadavg()
        bf16 = kind == "bf16"
        ips, gflop_img = cnnc_run(a, model, batch, kind, a.onnx)
        has_yml = os.path.exists(os.path.join(ROOT, "models", f"{model}.yml"))
        yml = cnnc_run(a, model, batch)[0] if a.onnx and a.yaml_too and has_yml else None
        ort = None if a.no_ort or kind != "fp32" else ort_run(a, model, batch)
        tor = None if a.no_torch else torch_run(a, model, batch, kind)
        p = pk
        if bf16:
            route = bf16_route(a, model, batch)
            print(f"  bf16 convs: {route}", file=sys.stderr)
            p = pk_bf if route.startswith("vdpbf16ps") else pk_amx if route.startswith("AMX tdpbf16ps") and pk_amx else pk
        f = lambda v: f"{v:9.2f}" if v is not None else f"{'-':>9}"
        name = model + ("" if kind == "fp32" else " " + kind) + (" onnx" if a.onnx else "")
        row = (f"{name:<22}{batch:>5}{f(ips)}{f(ort)}{f(tor)}"
               f"{(f'{ips / ort:10.2f}' if ort else f'{chr(45):>10}')}"
               f"{(f'{ips / tor:11.2f}' if tor else f'{chr(45):>11}')}"
               f"{100 * ips * gflop_img / p:9.0f}%"
               f"{(f'{100 * ort * gflop_img / p:8.0f}%' if ort else f'{chr(45):>9}')}"
               f"{(la + loadavg()) / 2:6.1f}"
               + ((f"{f(yml)}{(f'{ips / yml:10.2f}' if yml else f'{chr(45):>10}')}") if a.yaml_too else ""))
        rows.append(row)
        print(row if len(rows) > 1 else hdr + "\n" + row, flush=True)
    print(f"\nimg/s, {a.threads} threads; cnnc {ROOT}; peers from {a.anchors}; load = 1-min load average"
          + ("; bf16 row: cnnc --precision 16.16 --half-type bf16, torch_bench.py ... bf16 (autocast)" if a.bf16 else "")
          + ("; int8 row: cnnc --precision int8 (calibrated on N(0,1)), bench/torch_int8.py (FX PTQ)" if a.int8 else ""))


if __name__ == "__main__":
    main()
