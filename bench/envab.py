#!/usr/bin/env python3
"""bench/envab.py — interleaved A/B of runtime settings (cnnrt_options, given as cnnrun flags
or trainstep arguments) on one model, for a loaded machine: per round every variant runs once,
in turn; compare CPU, not wall time.

  python3 bench/envab.py infer MODEL.so [--rounds 8] [--batches 2] [--cnnrun build/cnnrun]
      cnnrun MODEL.so benchmark --profile --json --threads 2: kernel CPU-s per micro-batch
      (the ops' thread CPU time) and img/s, per variant min and median over the rounds
  python3 bench/envab.py train MODEL.so [--rounds 2] [--steps 3] [--trainstep ./trainstep]
      bench/trainstep.c: CPU-s (user + sys) of the open, step 1 and the later steps, step 1's
      page faults and the calling thread's CPU in step 1

Variants (--variants a,b,...): default (--hugepages inference), nohuge (--hugepages off),
trainhuge (--hugepages all); --spin-us N applies to every variant (default: the runtime's)."""
import argparse, json, os, re, statistics, subprocess

VARIANTS = {"nohuge": "off", "default": "inference", "trainhuge": "all"}  # --hugepages
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def infer_once(a, v):
    spin = ["--spin-us", str(a.spin_us)] if a.spin_us is not None else []
    out = subprocess.run([a.cnnrun, a.model, "benchmark", "--profile", "--json", "--threads", "2", "--batches",
                          str(a.batches), "--runs", "1", "--peak", "102.5", "--hugepages", VARIANTS[v]] + spin,
                         check=True, capture_output=True, text=True).stdout
    d = json.loads(out)
    p = d["profile"]
    return {"cpu_ms": 1e3 * sum(o["cpu_seconds"] for o in p["ops"]) / p["micro_batches"], "img_s": d["images_per_second"]}


def train_once(a, v):
    spin = [str(a.spin_us)] if a.spin_us is not None else []
    out = subprocess.run([a.trainstep, a.model, str(a.steps), "2", VARIANTS[v]] + spin, check=True, capture_output=True,
                         text=True).stdout
    rows = {}
    for line in out.splitlines():
        m = re.match(r"(open|step \d+|close)\s+wall\s+([\d.]+)\s+user\s+([\d.]+)\s+sys\s+([\d.]+)\s+caller-cpu\s+([\d.]+)\s+faults\s+(\d+)", line)
        if m:
            rows[m.group(1)] = [float(x) for x in m.groups()[1:]]
    later = [rows[f"step {i}"] for i in range(2, a.steps + 1)]
    return {"open_cpu": rows["open"][1] + rows["open"][2], "step1_cpu": rows["step 1"][1] + rows["step 1"][2],
            "step1_sys": rows["step 1"][2], "step1_caller": rows["step 1"][3], "step1_faults": rows["step 1"][4],
            "step1_wall": rows["step 1"][0], "later_cpu": statistics.mean(x[1] + x[2] for x in later),
            "later_wall": statistics.mean(x[0] for x in later)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["infer", "train"])
    ap.add_argument("model")
    ap.add_argument("--rounds", type=int, default=0)
    ap.add_argument("--batches", type=int, default=2)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--variants", default="nohuge,default")
    ap.add_argument("--spin-us", type=int, default=None)
    ap.add_argument("--cnnrun", default=os.path.join(ROOT, "build", "cnnrun"))
    ap.add_argument("--trainstep", default="./trainstep")
    a = ap.parse_args()
    rounds = a.rounds or (8 if a.mode == "infer" else 2)
    vs = a.variants.split(",")
    once = infer_once if a.mode == "infer" else train_once
    res = {v: [] for v in vs}
    for r in range(rounds):
        for v in vs:
            res[v].append(once(a, v))
            print(f"round {r} {v:9s} " + "  ".join(f"{k} {x:.3f}" for k, x in res[v][-1].items()) +
                  f"  load {os.getloadavg()[0]:.1f}", flush=True)
    print("min / median over rounds:")
    for v in vs:
        keys = res[v][0].keys()
        print(f"{v:9s} " + "  ".join(f"{k} {min(x[k] for x in res[v]):.3f}/{statistics.median(x[k] for x in res[v]):.3f}" for k in keys))


if __name__ == "__main__":
    main()
