"""testlib.py -- shared by the Python script tests (tests/scripts/test_*.py): SKIP, the exit status
ctest reads as "Skipped" (SKIP_RETURN_CODE of the script tests, tests/CMakeLists.txt; the shell
tests' lib.sh uses the same), and need_module(), which exits with it when an optional Python
module (PyTorch) is not installed, instead of failing on the import or passing silently.
The steps the tests repeat: build_src() (the BUILD SRC arguments), need_torchvision() (PyTorch's
zoo models, tools/export_torchvision.py), need_fmnist_torch() (the dataset and PyTorch of the
Fashion-MNIST anchor tests) with fmnist_cnn_training(), run() / run_output() (a command and its output), need_built(),
zoo_models() / input_elems() / each_model() (the per-model zoo tests) and Checks (pass/fail
counts and the closing "N passed, M failed" line).  The Python checkers the shell tests write
into their temporary directory import it too (lib.sh puts tests/scripts on PYTHONPATH): Expect
(the conditions a checker collects), close() and so_info() (a .so's `cnnrun info --json`)."""
import glob
import importlib
import json
import os
import re
import subprocess
import sys

SKIP = 77


def quick():
    """CNNC_TEST_QUICK=1 (the default suite, tests/CMakeLists.txt CNNC_QUICK_TESTS): fewer cases."""
    return os.environ.get("CNNC_TEST_QUICK", "0") not in ("", "0")


def need_module(name, package):
    """Imports module name, or prints "skip: ..." and exits SKIP (package: where it comes from)."""
    try:
        return importlib.import_module(name)
    except ImportError as e:
        print(f"skip: no {name} ({package}): {e}", flush=True)
        sys.exit(SKIP)


def build_src(doc):
    """(BUILD, SRC): the test's two arguments (ctest gives the build and the source directory);
    exits with doc, the test's usage, when one is missing."""
    build, src = (sys.argv[1:3] + [None, None])[:2]
    if not build or not src:
        sys.exit(doc)
    return build, src


def need_torchvision(src):
    """The module tools/export_torchvision.py of the source tree src (PyTorch twins of the zoo
    models), once torch and torchvision import; exits SKIP when one of them does not."""
    need_module("torch", "Debian python3-torch")
    need_module("torchvision", "Debian python3-torchvision")
    sys.path.insert(0, os.path.join(src, "tools"))
    return importlib.import_module("export_torchvision")


def need_fmnist_torch():
    """The Fashion-MNIST directory ($CNNC_FMNIST_DIR as in lib.sh; tools/fmnist_*.py read the
    same); prints "skip: ..." and exits SKIP when its training images or PyTorch are missing."""
    data = os.environ.get("CNNC_FMNIST_DIR", "/usr/share/datasets/fashion-mnist")
    if not os.path.exists(os.path.join(data, "train-images-idx3-ubyte.gz")):
        print(f"skip: no Fashion-MNIST in {data} (Debian dataset-fashion-mnist)", flush=True)
        sys.exit(SKIP)
    need_module("torch", "Debian python3-torch")  # the PyTorch side (tools/fmnist_*.py)
    return data


def fmnist_cnn_training(checks, cnnc, src, so, seed):
    """models/fmnist_cnn.yml compiled for training as the anchor trains it (momentum 0.9, batch
    64) with --seed seed into so: one check of checks; True when it compiled."""
    rc, out = run_output([cnnc, os.path.join(src, "models", "fmnist_cnn.yml"), "--mode", "training", "--optimizer",
                          "momentum", "--momentum", "0.9", "--batch-size", "64", "--seed", seed, "-o", so])
    return checks.check(rc == 0, f"compile fmnist_cnn for training ({out.strip()[-200:]})")


def run(cmd, timeout=900, env=None):
    """cmd's CompletedProcess, its stdout and stderr captured as text."""
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)


def compiles(checks, cnnc, model, what, args=()):
    """cnnc MODEL -o MODEL.so ARGS as one check ("WHAT: compiles"): the .so's path, or None."""
    so = model + ".so"
    r = run([cnnc, model, "-o", so] + list(args), timeout=120)
    return so if checks.check(r.returncode == 0, what + ": compiles (" + r.stderr.strip()[:200] + ")") else None


def infer_raw(checks, cnnrun, so, x, what, tmp):
    """cnnrun SO infer on the array x written raw (f32) in tmp, as one check ("WHAT: runs"): the
    output as a flat float32 array, or None."""
    np = importlib.import_module("numpy")
    xin, yout = os.path.join(tmp, "x.raw"), os.path.join(tmp, "y.raw")
    np.asarray(x, dtype=np.float32).tofile(xin)
    r = run([cnnrun, so, "infer", "--input", xin, "--output", yout, "--format", "raw"], timeout=120)
    if not checks.check(r.returncode == 0, what + ": runs (" + (r.stderr + r.stdout).strip()[:200] + ")"):
        return None
    return np.fromfile(yout, dtype=np.float32)


def run_output(cmd, env=None):
    """(exit status, stdout + stderr) of cmd, without a time limit."""
    r = run(cmd, timeout=None, env=env)
    return r.returncode, r.stdout + r.stderr


def first_line(r):
    """The first line of a CompletedProcess's stderr + stdout, as a one-element list."""
    return ((r.stderr or "") + (r.stdout or "")).strip().splitlines()[:1] or ["(no output)"]


def need_built(*paths):
    """Prints "FAIL X not built" and "0 passed, 1 failed" and exits 1 when a path is missing."""
    for need in paths:
        if not os.path.exists(need):
            print("FAIL %s not built" % need)
            print("0 passed, 1 failed")
            sys.exit(1)


def zoo_models(src):
    """The zoo's model files, src/models/*.yml, sorted."""
    return sorted(glob.glob(os.path.join(src, "models", "*.yml")))


def input_elems(text):
    """The product of the first `shape: [...]` in text (a model's input line: the per-sample
    input elements), read without a YAML module."""
    n = 1
    for v in re.search(r"shape:\s*\[([\d,\s]+)\]", text).group(1).split(","):
        n *= int(v)
    return n


def each_model(ymls, src, check, width, label=os.path.basename):
    """Runs check(yml) -> (ok, message) for every model of ymls (a timeout fails the model),
    prints "PASS|FAIL LABEL MESSAGE" per model and then "N passed, M failed" (no model at all
    fails too); returns the exit status, 1 on any failure."""
    passed = failed = 0
    for yml in ymls:
        try:
            ok, msg = check(yml)
        except subprocess.TimeoutExpired as e:
            ok, msg = False, "timed out: %s" % " ".join(e.cmd)
        print("%s %-*s %s" % ("PASS" if ok else "FAIL", width, label(yml), msg), flush=True)
        passed += ok
        failed += not ok
    if not ymls:
        print("FAIL no models under %s/models" % src)
        failed += 1
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


class Checks:
    """A test's checks: check(ok, what) counts one, printing "FAIL WHAT" when it failed (and
    "ok   WHAT" when it passed, with verbose; marks: the two prefixes); summary() prints
    "N passed, M failed" and returns the exit status, 1 on any failure."""

    def __init__(self, verbose=False, marks=("ok   ", "FAIL ")):
        self.verbose, self.marks, self.passed, self.failed = verbose, marks, 0, 0

    def check(self, ok, what):
        if ok:
            self.passed += 1
        else:
            self.failed += 1
        if self.verbose or not ok:
            print(self.marks[0 if ok else 1] + what, flush=True)
        return ok

    def summary(self):
        print("%d passed, %d failed" % (self.passed, self.failed))
        return 1 if self.failed else 0


class Expect:
    """The conditions of a checker: expect(cond, msg) keeps msg when cond is false;
    exit_on_errors(most) prints the first most of the messages kept (all without most) and
    exits 1 when there are any."""

    def __init__(self):
        self.errs = []

    def __call__(self, cond, msg):
        if not cond:
            self.errs.append(msg)

    def exit_on_errors(self, most=None):
        if self.errs:
            print("\n".join(self.errs[:most]))
            sys.exit(1)


def close(a, b):
    """a and b equal up to rounding (1e-9 relative, or absolute below 1)."""
    return abs(a - b) <= 1e-9 * max(1.0, abs(a), abs(b))


def so_info(cnnrun, so):
    """`cnnrun SO info --json`, parsed."""
    return json.loads(subprocess.run([cnnrun, so, "info", "--json"], check=True, capture_output=True, text=True).stdout)
