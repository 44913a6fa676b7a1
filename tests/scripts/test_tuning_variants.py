#!/usr/bin/env python3
"""test_tuning_variants.py BUILD SRC — the A/B knobs of ir/tuning.def that no other test sets:
they are compiled at their non-default values next to a default build of the same model, and
  * the knobs must reach the generated code: the disassembly (addresses stripped) differs
    from the default build's;
  * the results must agree: inference logits within 1e-5 of the largest |logit| (the same
    sums in another order at most), training losses after 3 steps on one synthetic batch
    within 1e-4 relative.
Inference cases run tests/store16/resnetish.yml (7x7 stem, maxpool, bottlenecks with flat
1x1, 3x3 stride 1 and 2 and strided 1x1 projections) at batch 2; bf16 cases compile
--precision 16.16 --tune bf16_emulate=1, so they run on any x86-64 host with FMA; training
cases with verify=1 also run the IR verifier after every pass.  Last line: "N passed, M
failed"."""
import array, json, os, re, subprocess, sys, tempfile

import testlib

BUILD, SRC = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
CNNC, CNNRUN = os.path.join(BUILD, "cnnc"), os.path.join(BUILD, "cnnrun")
MODEL = os.path.join(SRC, "tests", "store16", "resnetish.yml")
BASE = ["--batch-size", "2", "--seed", "3"]
BF16 = ["--precision", "16.16", "--half-type", "bf16", "--tune", "bf16_emulate=1,bf16=2"]
TRAIN = ["--mode", "training", "--optimizer", "momentum"]
AVX512 = ["--target-cpu", "skylake-avx512"]
# Groups of knobs at a non-default value, each compiled in one build against a default build
# with the same arguments (one build per group keeps the test at ~8 compiles; each knob was
# also checked alone to change the code of this model when the test was written).
CASES = [
    ("vc_transpose=0,vc_panel=0", []),
    ("bf16_round16_in=1,bf16_epi_pf=0,bf16_kxk_x16=0,bf16_x_pf=0", BF16),
    ("train_residual_fusion=0,train_pconv=0,train_pgw=0,verify=1", TRAIN),
    ("pgw_chunk_px=64,pgw_cisplit=1,pgw_gather=1,verify=1", TRAIN + ["--shards", "2"]),
]
T = tempfile.mkdtemp()
CHECKS = testlib.Checks()
check = CHECKS.check


def compile_(args, out, tune=None):
    cmd = [CNNC, MODEL] + BASE + args + (["--tune", tune] if tune else []) + ["-o", out]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    return p


def code(so):
    d = subprocess.run(["objdump", "-d", "--no-show-raw-insn", so], capture_output=True, text=True).stdout
    d = "\n".join(d.split("\n")[2:])
    d = re.sub(r"^ *[0-9a-f]+:\s*", "", d, flags=re.M)
    d = re.sub(r"0x[0-9a-f]+", "", d)
    d = re.sub(r"\b[0-9a-f]+ <", "<", d)
    return re.sub(r"\b[0-9a-f]{6,}\b", "", d)


def host_avx512():
    return " avx512f " in " " + open("/proc/cpuinfo").read().replace("\n", " ") + " "


def run_infer(so, batch):
    n = batch * 3 * 40 * 40
    x = array.array("f", [((i * 2654435761) % 1000) / 1000.0 for i in range(n)])
    xin = os.path.join(T, "in.raw")
    x.tofile(open(xin, "wb"))
    out = so + ".out"
    p = subprocess.run([CNNRUN, so, "infer", "--input", xin, "--output", out, "--format", "raw"], capture_output=True,
                       text=True, timeout=300)
    if p.returncode:
        return None, p.stderr
    y = array.array("f")
    y.frombytes(open(out, "rb").read())
    return y, ""


def run_train(so):
    p = subprocess.run([CNNRUN, so, "benchmark", "--runs", "3", "--warmup", "0", "--json"], capture_output=True,
                       text=True, timeout=300)
    if p.returncode:
        return None, p.stderr
    return json.loads(p.stdout)["loss"]["last"], ""


defaults = {}
for item, args in CASES:
    key = tuple(args)
    name = "g%d" % CASES.index((item, args))
    if key not in defaults:
        so = os.path.join(T, "def%d.so" % len(defaults))
        p = compile_(args, so)
        defaults[key] = so if p.returncode == 0 else None
        check(p.returncode == 0, "default build %s: %s" % (" ".join(args), p.stderr.strip()[-300:]))
    base = defaults[key]
    so = os.path.join(T, name + ".so")
    p = compile_(args, so, item)
    check(p.returncode == 0, "%s: compile failed: %s" % (item, p.stderr.strip()[-300:]))
    if p.returncode or not base:
        continue
    check(code(so) != code(base), "%s: the generated code is the default build's (the knob reached nothing)" % item)
    if "--target-cpu" in args and not host_avx512():
        print("%s: compiled only (the host has no AVX-512F)" % item)
        continue
    if "training" in args:
        (a, ea), (b, eb) = run_train(base), run_train(so)
        check(a is not None and b is not None and abs(a - b) <= 1e-4 * max(abs(a), 1e-3),
              "%s: training loss %s vs default %s %s%s" % (item, b, a, ea, eb))
    else:
        batch = int(args[args.index("--batch-size") + 1]) if "--batch-size" in args else 2
        (ya, ea), (yb, eb) = run_infer(base, batch), run_infer(so, batch)
        ok = ya is not None and yb is not None and len(ya) == len(yb) and len(ya) > 0
        if ok:
            m = max(abs(v) for v in ya) or 1.0
            err = max(abs(u - v) for u, v in zip(ya, yb)) / m
            ok = err <= 1e-5
            if not ok:
                print("%s: logits differ by %.3g of the largest" % (item, err))
        check(ok, "%s: inference results differ from the default build's %s%s" % (item, ea, eb))
sys.exit(CHECKS.summary())
