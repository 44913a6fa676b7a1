#!/usr/bin/env python3
"""test_onnx_backend.py BUILD SRC [--write] [--only PATTERN] [-v]

Runs the ONNX backend tests of Debian's libonnx-testdata (node/ and pytorch-converted/: a
model.onnx with test_data_set_0/input_*.pb and output_*.pb) through cnnc's importer, compiler
and `cnnrun infer`, and compares every output at the backend tests' own tolerance
(|got - want| <= 1e-7 + 1e-3 |want|, as onnx.backend.test does).

The cases that matter to CNNs are listed in tests/onnx/backend_cases.txt, one per line:
`NAME pass` or `NAME fail REASON`.  Every listed case is run; the test fails when a `pass`
case fails or a `fail` case passes (the list must stay true), and prints the coverage.
--write rewrites the list from this run (reasons: the first line of cnnc's or cnnrun's error,
or the mismatch).

Node tests pass every tensor as a graph input; cnnc models take one run-time input, so the
inputs after the first are baked into initializers (the values of the test's input_K.pb).  The
input is fed raw in its dtype and each output is read in the dtype the test expects (cnnrun
writes integer outputs as such: bool as one byte), so a wrong output dtype is a size mismatch.

CNNC_TEST_QUICK=1 (the default suite; the whole list runs as test_onnx_backend_full, label
"long"): every second listed case, in the list's order.
"""
import argparse
import fnmatch
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import testlib  # noqa: E402
from testlib import SKIP, need_module, run  # noqa: E402

DATA = os.environ.get("CNNC_ONNX_TESTDATA", "/usr/share/libonnx-testdata/data")


def read_pb(onnx, path):
    t = onnx.TensorProto()
    with open(path, "rb") as f:
        t.ParseFromString(f.read())
    return t


def first_line(text):
    for line in text.splitlines():
        line = line.strip()
        if line:
            return line
    return ""


def run_case(onnx, nh, np, build, case_dir, tmp):
    """('pass', '') or ('fail', reason)."""
    model = onnx.load(os.path.join(case_dir, "model.onnx"))
    ds = os.path.join(case_dir, "test_data_set_0")
    inits = {i.name for i in model.graph.initializer}
    rt = [i for i in model.graph.input if i.name not in inits]
    ins = [nh.to_array(read_pb(onnx, os.path.join(ds, f"input_{k}.pb"))) for k in range(len(rt))]
    outs = []
    while os.path.exists(os.path.join(ds, f"output_{len(outs)}.pb")):
        outs.append(nh.to_array(read_pb(onnx, os.path.join(ds, f"output_{len(outs)}.pb"))))
    if not rt:
        return "fail", "the model has no run-time input"
    for k in range(1, len(rt)):  # bake the other inputs into initializers
        model.graph.initializer.append(nh.from_array(ins[k], name=rt[k].name))
        model.graph.input.remove(rt[k])
    path = os.path.join(tmp, "m.onnx")
    onnx.save(model, path)
    so = os.path.join(tmp, "m.so")
    r = run([os.path.join(build, "cnnc"), path, "-o", so], timeout=120)
    if r.returncode:
        msg = first_line(r.stderr)
        return "fail", msg.replace(path + ": ", "").replace("error: ", "", 1)
    x = ins[0]  # raw, in its dtype (cnnc's ONNX inputs: float32, or uint8 / int8 / int32)
    xin, yout = os.path.join(tmp, "x.raw"), os.path.join(tmp, "y.raw")
    np.ascontiguousarray(x).tofile(xin)
    r = run([os.path.join(build, "cnnrun"), so, "infer", "--input", xin, "--output", yout, "--format", "raw"],
            timeout=120)
    if r.returncode:
        return "fail", "cnnrun: " + first_line(r.stderr + r.stdout)
    raw = np.fromfile(yout, dtype=np.uint8)  # every output, in order, each in its dtype (one micro-batch)
    want_n = sum(w.nbytes for w in outs)
    if raw.size != want_n:
        return "fail", f"the outputs have {raw.size} bytes, expected {want_n} ({', '.join(str(w.dtype) for w in outs)})"
    off = 0
    for k, want in enumerate(outs):
        got = raw[off:off + want.nbytes].view(want.dtype).reshape(want.shape).astype(np.float64)
        off += want.nbytes
        want = want.astype(np.float64)
        bad = np.abs(got - want) > 1e-7 + 1e-3 * np.abs(want)
        if bad.any():
            return "fail", (f"mismatch in output {k}: {int(bad.sum())} of {want.size} values, "
                            f"max abs err {float(np.abs(got - want).max()):.3g}")
    return "pass", ""


def read_list(path):
    cases = {}
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            parts = line.split(None, 2)
            cases[parts[0]] = (parts[1], parts[2] if len(parts) > 2 else "")
    return cases


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[1], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("build")
    ap.add_argument("src")
    ap.add_argument("--write", action="store_true", help="rewrite the list from this run")
    ap.add_argument("--only", help="run only the cases matching this glob")
    ap.add_argument("-v", action="store_true", help="print every case")
    a = ap.parse_args()
    onnx = need_module("onnx", "Debian python3-onnx")
    nh = need_module("onnx.numpy_helper", "Debian python3-onnx")
    np = need_module("numpy", "Debian python3-numpy")
    if not os.path.isdir(os.path.join(DATA, "node")):
        print(f"skip: no ONNX backend tests in {DATA} (Debian libonnx-testdata)", flush=True)
        sys.exit(SKIP)
    lst = os.path.join(a.src, "tests", "onnx", "backend_cases.txt")
    cases = read_list(lst)
    results, unexpected = {}, []
    quick = testlib.quick() and not a.only
    if quick and a.write:
        sys.exit("--write needs every case: unset CNNC_TEST_QUICK")
    if quick:
        print(f"CNNC_TEST_QUICK: every second of the {len(cases)} listed cases", flush=True)
    with tempfile.TemporaryDirectory(prefix="cnnc-onnx-") as tmp:
        for i, (name, (want, why)) in enumerate(cases.items()):
            if a.only and not fnmatch.fnmatch(name, a.only):
                continue
            if quick and i % 2:
                continue
            d = None
            for sub in ("node", "pytorch-converted"):
                if os.path.isdir(os.path.join(DATA, sub, name)):
                    d = os.path.join(DATA, sub, name)
            if d is None:
                unexpected.append(f"{name}: not in {DATA}")
                continue
            try:
                got, reason = run_case(onnx, nh, np, a.build, d, tmp)
            except Exception as e:  # a broken case file is a failure with its message
                got, reason = "fail", f"harness: {type(e).__name__}: {e}"
            results[name] = (got, reason)
            if a.v:
                print(f"{got:4} {name} {reason}", flush=True)
            if got != want:
                unexpected.append(f"{name}: listed {want}, got {got} {reason}")
    n = len(results)
    p = sum(1 for g, _ in results.values() if g == "pass")
    for group in ("node", "pytorch-converted"):
        names = [k for k in results if os.path.isdir(os.path.join(DATA, group, k))]
        gp = sum(1 for k in names if results[k][0] == "pass")
        if names:
            print(f"{group}: {gp} of {len(names)} listed cases pass ({100.0 * gp / len(names):.1f} %)")
    if a.write:
        with open(lst) as f:
            head = [l for l in f if l.startswith("#")]
        with open(lst, "w") as f:
            f.writelines(head)
            for name in sorted(cases):
                got, reason = results.get(name, cases[name])
                f.write(f"{name} {got}{' ' + reason if reason else ''}\n")
        print(f"wrote {lst}")
        return 0
    for u in unexpected:
        print("UNEXPECTED", u)
    print(f"{p} of {n} cases pass; {len(unexpected)} differ from {os.path.relpath(lst, a.src)}")
    return 1 if unexpected else 0


if __name__ == "__main__":
    sys.exit(main())
