#!/usr/bin/python3
"""bench/loader.py -- the image loader's throughput (issue 23): cnnc's folder dataset
(libcnnrt through python/cnnrt, rt_folder.c + rt_image.c) against torchvision's ImageFolder +
DataLoader (bench/loader_torch.py) on the same folder, the training transform to 224x224
(random-resized crop + flip; cnnc: u8 -> f32 x/255 as cnnrun feeds a model, torchvision:
ToTensor), the same number of workers, rounds alternating the two.

  /usr/bin/python3 bench/loader.py DIR [--build build] [--workers 2] [--batch 64] [--seconds 10] [--rounds 3]

DIR holds DIR/train/CLASS/*.jpg (tests/scripts/make_jpeg_folder.py --synthetic N makes ~500x375
JPEGs).  cnnc: Dataset.folder(DIR, (3, 224, 224), threads=W), shuffled, reads of --batch
images until --seconds have passed (the read-ahead decodes the next batch while the caller
converts; the reading thread decodes too).  Prints one JSON line per side and round, then the
medians and their ratio; the host line for bench/RESULTS.md."""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def cnnc_rate(build, d, workers, batch, seconds, epoch):
    sys.path.insert(0, os.path.join(HERE, "..", "python"))
    os.environ.setdefault("CNNRT_LIBRARY", os.path.abspath(os.path.join(build, "libcnnrt.so")))
    import numpy as np
    import cnnrt
    ds = cnnrt.Dataset.folder(d, (3, 224, 224), threads=workers)
    ds.shuffle(1 + epoch)
    n = len(ds)
    x = np.empty((batch, 3, 224, 224), np.float32)
    y = np.empty(batch, np.float32)
    ds.read(0, batch, np.float32, out=(x, y))  # warm-up: the first batch, and the read-ahead starts
    first, done, t0 = batch, 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        if first + batch > n:
            first = 0
        ds.read(first, batch, np.float32, out=(x, y))
        first += batch
        done += batch
    dt = time.perf_counter() - t0
    ds.close()
    return done / dt


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dir")
    ap.add_argument("--build", default=os.path.join(HERE, "..", "build"))
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--side", choices=["cnnc"], help=argparse.SUPPRESS)  # one side in a child process
    a = ap.parse_args()
    if a.side:
        print(json.dumps({"peer": "cnnc", "workers": a.workers, "img_per_s": cnnc_rate(a.build, a.dir, a.workers, a.batch,
                                                                                       a.seconds, a.rounds)}))
        return
    rates = {"cnnc": [], "torchvision": []}
    for r in range(a.rounds):
        cmds = {"cnnc": [sys.executable, os.path.abspath(__file__), a.dir, "--build", a.build, "--workers", str(a.workers),
                         "--batch", str(a.batch), "--seconds", str(a.seconds), "--rounds", str(r), "--side", "cnnc"],
                "torchvision": [sys.executable, os.path.join(HERE, "loader_torch.py"), a.dir, "--workers", str(a.workers),
                                "--batch", str(a.batch), "--seconds", str(a.seconds)]}
        for side in (("cnnc", "torchvision") if r % 2 == 0 else ("torchvision", "cnnc")):
            out = subprocess.run(cmds[side], capture_output=True, text=True)
            if out.returncode != 0:
                sys.exit(f"{side}: {out.stderr.strip()[-800:]}")
            line = [l for l in out.stdout.splitlines() if l.startswith("{")][-1]
            rate = json.loads(line)["img_per_s"]
            rates[side].append(rate)
            print(json.dumps({"round": r, "side": side, "workers": a.workers, "img_per_s": round(rate, 1)}), flush=True)
    mc, mt = statistics.median(rates["cnnc"]), statistics.median(rates["torchvision"])
    host = open("/proc/cpuinfo").read().split("model name")[1].split("\n")[0].strip(": \t")
    print(json.dumps({"median_img_per_s": {"cnnc": round(mc, 1), "torchvision": round(mt, 1)}, "ratio": round(mc / mt, 2),
                      "workers": a.workers, "host": host, "cores": os.cpu_count()}))


if __name__ == "__main__":
    main()
