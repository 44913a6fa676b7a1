#!/usr/bin/env python3
"""test_ref_vs_torch.py — every op of the reference interpreter against PyTorch.

Usage: python3 test_ref_vs_torch.py BUILD_DIR SRC_DIR

For each op, several fixed-seed random cases (shapes, attributes, values) are run through
BUILD_DIR/tests/ref_runner and compared with PyTorch computed in float64 on the same f32
inputs.  A case passes when |ref - torch| <= TOL * (1 + |torch|) everywhere.  Prints one line
per case and ends with "N passed, M failed"; exits non-zero on any failure.
"""
import os
import subprocess
import sys
import tempfile

import numpy as np
import testlib  # tests/scripts/testlib.py: skip (77) without PyTorch
testlib.need_module("torch", "Debian python3-torch")
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

TOL = 1e-5
torch.set_grad_enabled(False)


class Runner:
    """Writes operands and a spec into a scratch directory and runs ref_runner."""

    def __init__(self, exe, tmp):
        self.exe, self.tmp, self.count = exe, tmp, 0

    def path(self, name):
        return os.path.join(self.tmp, "%d_%s" % (self.count, name))

    def run(self, op, attrs, operands, dumps=()):
        """operands: list of (kind, array) with kind in input/param/label; attrs: dict key ->
        list of values; dumps: operand indices whose (param) data to return after the run.
        Returns (output, [dumped arrays]) as flat float32 arrays, or raises RuntimeError."""
        self.count += 1
        lines = ["op " + op]
        lines += ["attr %s %s" % (k, " ".join(str(v) for v in vs)) for k, vs in attrs.items()]
        for i, (kind, arr) in enumerate(operands):
            f = self.path("op%d.bin" % i)
            np.ascontiguousarray(arr, dtype="<f4").tofile(f)
            dims = "" if kind == "label" else " ".join(str(d) for d in arr.shape) + " "
            lines.append("%s %s%s" % (kind, dims, f))
        out = self.path("out.bin")
        lines.append("output " + out)
        dump_files = [self.path("dump%d.bin" % i) for i in dumps]
        lines += ["dump %d %s" % (i, f) for i, f in zip(dumps, dump_files)]
        spec = self.path("spec.txt")
        with open(spec, "w") as fh:
            fh.write("\n".join(lines) + "\n")
        r = subprocess.run([self.exe, spec], capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError("ref_runner failed: " + r.stderr.strip())
        return np.fromfile(out, dtype="<f4"), [np.fromfile(f, dtype="<f4") for f in dump_files]


def f32(rng, *shape, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def t64(a):
    return torch.from_numpy(np.asarray(a, dtype=np.float64))


def compare(got, want):
    """Returns (ok, max abs error, max scaled error)."""
    want = np.asarray(want, dtype=np.float64).ravel()
    got = np.asarray(got, dtype=np.float64).ravel()
    if got.shape != want.shape:
        return False, float("inf"), float("inf")
    err = np.abs(got - want)
    scaled = err / (1.0 + np.abs(want))
    return bool(np.all(scaled <= TOL)), float(err.max(initial=0)), float(scaled.max(initial=0))


# ---- cases: each yields (label, op, attrs, operands, torch result[, dumps, dump results]) ----

def conv_cases(rng):
    #      N  Cin  H   W  Cout  k       stride  pad[t,l,b,r]   dil    groups bias
    cfgs = [(2, 3, 8, 8, 4, (3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1, True),
            (1, 4, 9, 7, 6, (3, 3), (2, 2), (1, 1, 1, 1), (1, 1), 2, False),
            (2, 8, 10, 10, 8, (3, 3), (1, 1), (2, 2, 2, 2), (2, 2), 8, True),
            (1, 3, 11, 9, 5, (5, 3), (2, 1), (0, 1, 2, 0), (1, 2), 1, True),
            (2, 6, 7, 7, 6, (3, 3), (2, 2), (0, 0, 1, 1), (1, 1), 6, False),
            (1, 16, 5, 5, 32, (1, 1), (1, 1), (0, 0, 0, 0), (1, 1), 1, False),
            (1, 3, 32, 32, 8, (7, 7), (2, 2), (3, 3, 3, 3), (1, 1), 1, False),
            (2, 12, 6, 6, 12, (3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 3, True),
            (1, 4, 6, 6, 8, (3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 4, True)]  # depth multiplier 2
    for n, cin, h, w, cout, k, s, p, d, g, bias in cfgs:
        x, wt = f32(rng, n, cin, h, w), f32(rng, cout, cin // g, *k, scale=0.3)
        ops = [("input", x), ("param", wt)]
        b = None
        if bias:
            b = f32(rng, cout)
            ops.append(("param", b))
        xp = F.pad(t64(x), (p[1], p[3], p[0], p[2]))
        want = F.conv2d(xp, t64(wt), None if b is None else t64(b), stride=s, dilation=d, groups=g)
        attrs = {"kernel": k, "stride": s, "pad": p, "dilation": d, "groups": [g]}
        yield ("x%s k%s s%s p%s d%s g%d%s" % (list(x.shape), k, s, p, d, g, " bias" if bias else ""),
               "conv2d", attrs, ops, want)


def batchnorm_cases(rng):
    #        shape          training momentum eps
    cfgs = [((4, 3, 5, 5), 0, 0.1, 1e-5),
            ((2, 5), 0, 0.1, 1e-5),
            ((4, 3, 5, 5), 1, 0.1, 1e-5),
            ((3, 6, 2, 3), 1, 0.3, 1e-3),
            ((8, 4), 1, 0.1, 1e-5)]
    for shape, training, mom, eps in cfgs:
        c = shape[1]
        x = f32(rng, *shape, scale=2.0) + 0.5
        gamma, beta = f32(rng, c) + 1, f32(rng, c)
        rm, rv = f32(rng, c, scale=0.2), (rng.uniform(0.5, 2.0, c)).astype(np.float32)
        trm, trv = t64(rm), t64(rv)
        want = F.batch_norm(t64(x), trm, trv, t64(gamma), t64(beta), training=bool(training),
                            momentum=mom, eps=eps)
        ops = [("input", x), ("param", gamma), ("param", beta), ("param", rm), ("param", rv)]
        attrs = {"eps": [eps], "momentum": [mom], "training": [training]}
        label = "x%s training=%d momentum=%g eps=%g" % (list(shape), training, mom, eps)
        yield (label, "batchnorm", attrs, ops, want, (3, 4), (trm, trv))


def groupnorm_cases(rng):
    for shape, groups, eps in [((2, 8, 4, 4), 4, 1e-5), ((1, 6, 3, 5), 3, 1e-3),
                               ((3, 4, 2, 2), 1, 1e-5), ((2, 4, 3, 3), 4, 1e-5)]:
        c = shape[1]
        x, gamma, beta = f32(rng, *shape, scale=3.0) - 1, f32(rng, c) + 1, f32(rng, c)
        want = F.group_norm(t64(x), groups, t64(gamma), t64(beta), eps)
        yield ("x%s groups=%d eps=%g" % (list(shape), groups, eps), "groupnorm",
               {"groups": [groups], "eps": [eps]},
               [("input", x), ("param", gamma), ("param", beta)], want)


def activation_cases(rng):
    fns = {"relu": (F.relu, {}), "sigmoid": (torch.sigmoid, {}), "swish": (lambda t: t * torch.sigmoid(t), {}),
           "hardswish": (F.hardswish, {}), "clip": (F.relu6, {"lo": [0.0], "hi": [6.0]}),
           "hardsigmoid": (F.hardsigmoid, {"alpha": [1 / 6], "beta": [0.5]}),
           "leaky_relu": (lambda t: F.leaky_relu(t, 0.1), {"alpha": [0.1]})}
    for op, (fn, attrs) in fns.items():
        for shape, scale in [((2, 3, 4, 5), 3.0), ((3, 17), 30.0), ((1, 1, 1, 7), 1.0)]:
            x = f32(rng, *shape, scale=scale)
            yield ("x%s scale=%g" % (list(shape), scale), op, attrs, [("input", x)], fn(t64(x)))


def lrn_cases(rng):
    # torch.nn.functional.local_response_norm divides alpha by size and pads size//2 channels
    # before, (size-1)//2 after: ONNX's window for odd size
    for shape, size, alpha, beta, bias, scale in [((2, 7, 4, 5), 5, 1e-4, 0.75, 1.0, 3.0),
                                                  ((1, 6, 3, 3), 3, 0.5, 0.6, 2.0, 2.0),
                                                  ((2, 4, 9), 7, 2.0, 1.5, 0.5, 1.0),
                                                  ((1, 3, 2, 2), 1, 1.0, -0.4, 1.5, 1.0)]:
        x = f32(rng, *shape, scale=scale)
        want = F.local_response_norm(t64(x), size, alpha, beta, bias)
        yield ("x%s size=%d alpha=%g beta=%g bias=%g" % (list(shape), size, alpha, beta, bias), "lrn",
               {"size": [size], "alpha": [alpha], "beta": [beta], "bias": [bias]}, [("input", x)], want)


def broadcast_cases(rng):
    pairs = [((2, 3, 4, 5), (2, 3, 4, 5)), ((2, 3, 4, 5), (2, 3, 1, 1)), ((2, 3, 4, 5), (5,)),
             ((2, 3, 4, 5), (3, 1, 1)), ((2, 3, 4, 5), (1, 1, 4, 1)), ((4, 6), (6,)),
             ((2, 3, 4, 5), (1,)), ((2, 3, 4, 5), (1, 3, 4, 5))]
    for op, fn in [("add", torch.add), ("mul", torch.mul)]:
        for sa, sb in pairs:
            a, b = f32(rng, *sa), f32(rng, *sb)
            yield ("%s %s %s" % (list(sa), "+" if op == "add" else "*", list(sb)), op, {},
                   [("input", a), ("param", b)], fn(t64(a), t64(b)))


def pool_cases(rng):
    #  N  C  H   W   k       s       pad[t,l,b,r]  ceil count_include_pad
    cfgs = [(2, 3, 8, 8, (3, 3), (2, 2), (1, 1, 1, 1), 0, 1),
            (1, 2, 7, 7, (2, 2), (2, 2), (0, 0, 0, 0), 1, 1),
            (1, 2, 8, 8, (3, 3), (2, 2), (1, 1, 1, 1), 1, 1),
            (1, 2, 6, 6, (3, 3), (2, 2), (1, 1, 1, 1), 1, 0),
            (2, 3, 5, 5, (3, 3), (1, 1), (1, 1, 1, 1), 0, 0),
            (1, 3, 9, 6, (3, 2), (2, 1), (1, 0, 1, 0), 0, 1),
            (1, 2, 10, 9, (3, 3), (3, 2), (1, 1, 1, 1), 1, 0),
            (1, 2, 7, 8, (3, 3), (2, 2), (0, 0, 1, 1), 0, 1),   # asymmetric (TF SAME-like)
            (2, 2, 6, 7, (2, 3), (2, 2), (1, 0, 0, 1), 0, 1)]   # asymmetric
    for op in ("maxpool", "avgpool"):
        for n, c, h, w, k, s, p, ceil, cip in cfgs:
            x = f32(rng, n, c, h, w)
            sym = p[0] == p[2] and p[1] == p[3]
            if sym:
                if op == "maxpool":
                    want = F.max_pool2d(t64(x), k, s, (p[0], p[1]), ceil_mode=bool(ceil))
                else:
                    want = F.avg_pool2d(t64(x), k, s, (p[0], p[1]), ceil_mode=bool(ceil),
                                        count_include_pad=bool(cip))
            else:  # torch pads symmetrically only: pad explicitly (-inf / 0), pool unpadded
                assert not ceil and (cip or op == "maxpool")
                fill = float("-inf") if op == "maxpool" else 0.0
                xp = F.pad(t64(x), (p[1], p[3], p[0], p[2]), value=fill)
                want = F.max_pool2d(xp, k, s) if op == "maxpool" else F.avg_pool2d(xp, k, s)
            attrs = {"kernel": k, "stride": s, "pad": p, "ceil_mode": [ceil]}
            if op == "avgpool":
                attrs["count_include_pad"] = [cip]
            label = "x%s k%s s%s p%s ceil=%d" % ([n, c, h, w], k, s, p, ceil)
            if op == "avgpool":
                label += " count_include_pad=%d" % cip
            yield (label, op, attrs, [("input", x)], want)


def global_avgpool_cases(rng):
    for shape in [(2, 3, 7, 7), (1, 16, 1, 1), (4, 5, 3, 2)]:
        x = f32(rng, *shape) + 3
        yield ("x%s" % list(shape), "global_avgpool", {}, [("input", x)],
               F.adaptive_avg_pool2d(t64(x), 1))


def dense_cases(rng):
    for n, fin, fout, bias in [(4, 10, 5, True), (1, 64, 10, False), (3, 7, 1, True), (8, 256, 100, True)]:
        x, w = f32(rng, n, fin), f32(rng, fout, fin, scale=fin ** -0.5)
        ops = [("input", x), ("param", w)]
        b = None
        if bias:
            b = f32(rng, fout)
            ops.append(("param", b))
        want = F.linear(t64(x), t64(w), None if b is None else t64(b))
        yield ("x[%d,%d] w[%d,%d]%s" % (n, fin, fout, fin, " bias" if bias else ""), "dense",
               {"units": [fout]}, ops, want)


def softmax_cases(rng):
    for shape, scale in [((4, 10), 1.0), ((2, 3, 4, 5), 5.0), ((3, 7), 50.0), ((2, 1000), 3.0)]:
        x = f32(rng, *shape, scale=scale)
        yield ("x%s scale=%g" % (list(shape), scale), "softmax", {}, [("input", x)],
               torch.softmax(t64(x), dim=-1))


def xent_cases(rng):
    for n, k, s, scale in [(4, 10, 0.0, 1.0), (8, 5, 0.1, 3.0), (3, 1000, 0.2, 2.0), (16, 2, 0.0, 20.0)]:
        x = f32(rng, n, k, scale=scale)
        y = rng.integers(0, k, n).astype(np.float32)
        want = F.cross_entropy(t64(x), torch.from_numpy(y.astype(np.int64)), label_smoothing=s)
        yield ("logits[%d,%d] label_smoothing=%g" % (n, k, s), "softmax_xent",
               {"label_smoothing": [s]}, [("input", x), ("label", y)], want.reshape(1))


def reshape_cases(rng):
    for sa, sb in [((2, 3, 4, 5), (2, -1)), ((2, 60), (2, 3, 4, 5)), ((1, 8, 1, 1), (1, 8))]:
        x = f32(rng, *sa)
        yield ("%s -> %s" % (list(sa), list(sb)), "reshape", {"shape": sb}, [("input", x)],
               t64(x).reshape(sb))


def normalize_cases(rng):
    cfgs = [((2, 3, 4, 4), 1 / 255, (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)),
            ((1, 1, 5, 3), 1.0, (0.5,), (2.0,)),
            ((3, 4, 2, 2), 1 / 255, (0.1, 0.2, 0.3, 0.4), (0.5, 0.6, 0.7, 0.8))]
    for shape, scale, mean, std in cfgs:
        x = rng.integers(0, 256, shape).astype(np.float32)
        scale32 = float(np.float32(scale))
        m, sd = t64(np.float32(mean)).reshape(1, -1, 1, 1), t64(np.float32(std)).reshape(1, -1, 1, 1)
        want = (t64(x) * scale32 - m) / sd
        attrs = {"scale": ["%.9g" % scale32], "channels": [len(mean)], "mean": mean, "std": std}
        yield ("x%s scale=%.4g" % (list(shape), scale), "normalize", attrs, [("input", x)], want)


def dropout_inference_cases(rng):
    for shape, rate in [((2, 3, 4, 4), 0.5), ((4, 10), 0.1)]:
        x = f32(rng, *shape)
        yield ("x%s rate=%g training=0" % (list(shape), rate), "dropout",
               {"rate": [rate], "training": [0], "seed": [1]}, [("input", x)],
               F.dropout(t64(x), rate, training=False))


CASES = [conv_cases, batchnorm_cases, groupnorm_cases, activation_cases, lrn_cases, broadcast_cases, pool_cases,
         global_avgpool_cases, dense_cases, softmax_cases, xent_cases, dropout_inference_cases,
         reshape_cases, normalize_cases]


# ---- dropout in training: PyTorch's mask is not reproducible, so check its properties and
# the documented hash (ir/ref_eltwise.c) bit for bit -------------------------------------------

M64 = (1 << 64) - 1


def mix64(z):
    z = (z + 0x9E3779B97F4A7C15) & M64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


def dropout_training_check(runner, rng):
    """Yields (label, ok, detail)."""
    for shape, rate, seed in [((4, 8, 8, 8), 0.5, 1), ((16, 100), 0.2, 12345), ((2, 3, 5, 5), 0.9, 7)]:
        x = f32(rng, *shape) + 5.0  # never 0, so zero outputs are dropped elements
        got, _ = runner.run("dropout", {"rate": [rate], "training": [1], "seed": [seed]}, [("input", x)])
        xf = x.ravel().astype(np.float64)
        keep = np.array([np.float32((mix64(seed ^ mix64(i)) >> 40) * 2.0 ** -24) >= np.float32(rate)
                         for i in range(xf.size)])
        want = np.where(keep, xf / (1.0 - np.float64(rate)), 0.0)
        ok, abs_err, rel_err = compare(got, want)
        frac = keep.mean()
        sd = (rate * (1 - rate) / xf.size) ** 0.5
        ok = ok and abs(frac - (1 - rate)) < 5 * sd
        yield ("x%s rate=%g training=1 seed=%d" % (list(shape), rate, seed), ok,
               "kept %.3f (expect %.3f) max_abs=%.2e max_rel=%.2e" % (frac, 1 - rate, abs_err, rel_err))


def run_case(runner, case):
    label, op, attrs, ops, want = case[:5]
    dumps, dump_want = (case[5], case[6]) if len(case) > 5 else ((), ())
    got, dumped = runner.run(op, attrs, ops, dumps)
    ok, abs_err, rel_err = compare(got, want.numpy())
    for d, w in zip(dumped, dump_want):  # updated running statistics
        ok2, a2, r2 = compare(d, w.numpy())
        ok, abs_err, rel_err = ok and ok2, max(abs_err, a2), max(rel_err, r2)
    return ok, "max_abs=%.2e max_rel=%.2e" % (abs_err, rel_err)


def main():
    if len(sys.argv) != 3:
        print("usage: test_ref_vs_torch.py BUILD_DIR SRC_DIR", file=sys.stderr)
        return 2
    exe = os.path.join(sys.argv[1], "tests", "ref_runner")
    if not os.path.exists(exe):
        print("missing %s (build the ref_runner target)" % exe, file=sys.stderr)
        return 1
    passed = failed = 0
    with tempfile.TemporaryDirectory(prefix="ref_vs_torch_") as tmp:
        runner = Runner(exe, tmp)
        for gen in CASES:
            rng = np.random.default_rng(20240 + CASES.index(gen))
            for case in gen(rng):
                try:
                    ok, detail = run_case(runner, case)
                except RuntimeError as e:
                    ok, detail = False, str(e)
                print("%s %-14s %s: %s" % ("PASS" if ok else "FAIL", case[1], case[0], detail))
                passed, failed = passed + ok, failed + (not ok)
        for label, ok, detail in dropout_training_check(runner, np.random.default_rng(777)):
            print("%s %-14s %s: %s" % ("PASS" if ok else "FAIL", "dropout", label, detail))
            passed, failed = passed + ok, failed + (not ok)
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
