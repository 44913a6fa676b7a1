#!/usr/bin/python3
"""test_python_api.py BUILD SRC -- the Python packages cnnrt and cnnc (python/, docs/python.md)
on small models compiled for the test, imported from BUILD/python as the build leaves them:
  (1) Model.run / run_batches / out= / output_names give bitwise `cnnrun infer --output` on a
      u8 model with two outputs and batch 2 (7 samples: the last micro-batch padded), and
      inputs / outputs describe the tensors as `cnnrun info --json`;
  (2) bad input raises InputError (a ValueError) naming the fault and the model still runs:
      wrong dtype, sample shape, sample count, input name, output name, a list, a
      non-contiguous or misaligned array, bad out= arrays, bad labels, a closed model;
      runtime failures raise CnnrtError with the runtime's message and status (a file that is
      not a model, inference on a training model, 0 threads, a negative learning rate);
  (3) threads: 4 Python threads on one model and 2 on two models get the serial results; a
      close while another thread runs ends that thread with InputError, not a crash; another
      Python thread keeps running during a long call (the GIL is released);
  (4) cnnc.compile passes keyword options as cnnc's flags (batch_size, a dict tune, a flag) and
      raises CompileError with cnnc's stderr and exit status;
  (5) `cmake --install BUILD --prefix TMP` installs packages that find the installed libcnnrt
      and cnnc; $CNNRT_LIBRARY overrides the library.
Ends with "N passed, M failed"."""
import json
import os
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np

import testlib

BUILD, SRC = testlib.build_src(__doc__)
BUILD = os.path.abspath(BUILD)
CNNC, CNNRUN = os.path.join(BUILD, "cnnc"), os.path.join(BUILD, "cnnrun")
testlib.need_built(CNNC, CNNRUN, os.path.join(BUILD, "python", "cnnrt", "_config.py"))
for var in ("CNNRT_LIBRARY", "CNNC_EXECUTABLE"):
    os.environ.pop(var, None)
sys.path.insert(0, os.path.join(BUILD, "python"))
import cnnrt  # noqa: E402
import cnnc  # noqa: E402

CHECKS = testlib.Checks(verbose=True)
check = CHECKS.check

TWO = """name: two
input: {shape: [2, 4, 4], dtype: u8, classes: 3}
outputs: [pool, fc]
layers:
  - {name: conv, op: conv, filters: 3, kernel: 3, padding: 1}
  - {name: pool, op: global_avgpool}
  - {name: flatten, op: flatten}
  - {name: fc, op: dense, units: 3}
"""
TINY = """name: tiny
input: {shape: [1, 1, 1], dtype: f32, classes: 2}
layers:
  - {name: conv, op: conv, filters: 1, kernel: 1}
"""
SMALL_TRAIN = """name: small_train
input: {shape: [1, 8, 8], dtype: u8, classes: 3}
layers:
  - {name: conv, op: conv, filters: 4, kernel: 3, padding: 1}
  - {name: relu, op: relu}
  - {name: flatten, op: flatten}
  - {name: fc, op: dense, units: 3}
"""


def raises(fn, exc, *words):
    """(True, message) when fn() raises exc with every word in its message."""
    try:
        fn()
    except exc as e:
        msg = str(e)
        return all(w in msg for w in words), msg
    except Exception as e:  # noqa: BLE001 -- the wrong kind is a failure, reported
        return False, f"raised {type(e).__name__}: {e}"
    return False, "did not raise"


def expect_raise(what, fn, exc, *words):
    ok, msg = raises(fn, exc, *words)
    check(ok, f"{what}: {msg}")


def compile_yml(tmp, name, text, *args):
    yml = os.path.join(tmp, name + ".yml")
    with open(yml, "w") as f:
        f.write(text)
    so = os.path.join(tmp, name + ".so")
    r = testlib.run([CNNC, yml, "-o", so] + list(args))
    if r.returncode != 0:
        print(r.stderr)
        sys.exit(1)
    return yml, so


def infer_reference(tmp, so, x):
    raw, out = os.path.join(tmp, "in.raw"), os.path.join(tmp, "out.raw")
    x.tofile(raw)
    r = testlib.run([CNNRUN, so, "infer", "--input", raw, "--format", "raw", "--output", out, "--batches", "2"])
    check(r.returncode == 0, f"cnnrun infer ({r.stderr.strip()[-200:]})")
    return np.fromfile(out, np.uint8).tobytes()


def part_inference(tmp, two_so):
    x = np.random.RandomState(5).randint(0, 256, (7, 2, 4, 4)).astype(np.uint8)
    ref = infer_reference(tmp, two_so, x)
    info = testlib.so_info(CNNRUN, two_so)
    with cnnrt.Model(two_so) as m:
        ts = info["tensors"]
        desc = lambda t: (t.name, t.type, list(t.shape), t.bytes)  # noqa: E731
        want = lambda i: (ts[i]["name"], ts[i]["dtype"], ts[i]["shape"], ts[i]["bytes"])  # noqa: E731
        check([desc(t) for t in m.inputs + m.outputs] == [want(i) for i in [info["input"]] + info["outputs"]],
              f"inputs / outputs as cnnrun info --json: {m.inputs} {m.outputs}")
        check(m.inputs[0].shape == (2, 2, 4, 4) and m.inputs[0].dtype == np.uint8 and m.outputs[0].shape == (2, 3, 1, 1)
              and m.outputs[1].shape == (2, 3) and m.outputs[1].dtype == np.float32 and m.batch_size == 2,
              "shapes and dtypes of the tensors")
        outs = m.run(None, {"input": x}, pad=True)
        check(b"".join(o.tobytes() for o in outs) == ref, "run(pad=True) is bitwise cnnrun infer --output")
        check(not np.array_equal(outs[1][0], outs[1][1]), "outputs differ between samples (the comparison can fail)")
        outs1 = m.run_batches(x, 1, pad=True)
        check(b"".join(o.tobytes() for o in outs1) == ref, "run_batches(x, 1) is bitwise the same")
        even = m.run(None, {"input": x[:6]})
        check(all(np.array_equal(a, b[:6]) for a, b in zip(even, outs)), "6 samples without padding: the same rows")
        (fc,) = m.run(["fc"], {"input": x[:6]})
        check(np.array_equal(fc, outs[1][:6]), "output_names=['fc']")
        bufs = [np.full((6, 3, 1, 1), np.nan, np.float32), np.full((6, 3), np.nan, np.float32)]
        got = m.run(None, {"input": x[:6]}, out=bufs)
        check(got[0] is bufs[0] and got[1] is bufs[1] and all(np.array_equal(a, b) for a, b in zip(bufs, even)),
              "out= arrays are filled in place and returned")
        check(m.get_inputs() == m.inputs and m.get_outputs() == m.outputs, "get_inputs / get_outputs")
        return x, outs


def part_bad_input(tmp, two_so, tiny_so, train_so, x, ref):
    m = cnnrt.Model(two_so)
    run = lambda feed, **kw: m.run(None, feed, **kw)  # noqa: E731
    expect_raise("wrong dtype", lambda: run({"input": x.astype(np.float32)}), cnnrt.InputError, "dtype float32", "uint8")
    expect_raise("wrong sample shape", lambda: run({"input": x[:, :, :3]}), cnnrt.InputError, "shape (7, 2, 3, 4)")
    expect_raise("sample count not a multiple of the batch", lambda: run({"input": x}), cnnrt.InputError, "7 samples",
                 "micro-batch 2")
    expect_raise("no samples", lambda: run({"input": x[:0]}), cnnrt.InputError, "N >= 1")
    expect_raise("wrong input name", lambda: run({"image": x[:6]}), cnnrt.InputError, "'image'", "'input'")
    expect_raise("two inputs", lambda: run({"input": x[:6], "other": x[:6]}), cnnrt.InputError, "only input")
    expect_raise("a list, not an array", lambda: run({"input": x[:6].tolist()}), cnnrt.InputError, "numpy.ndarray")
    expect_raise("feed not a dict", lambda: m.run(None, [x[:6]]), cnnrt.InputError, "dict")
    expect_raise("wrong output name", lambda: m.run(["logits"], {"input": x[:6]}), cnnrt.InputError, "'logits'", "'fc'")
    wide = np.zeros((6, 2, 4, 8), np.uint8)
    wide[..., ::2] = x[:6]
    expect_raise("non-contiguous array", lambda: run({"input": wide[..., ::2]}), cnnrt.InputError, "C-contiguous")
    expect_raise("Fortran-order array", lambda: run({"input": np.asfortranarray(x[:6])}), cnnrt.InputError, "C-contiguous")
    expect_raise("out= of the wrong shape", lambda: run({"input": x[:6]}, out=[np.empty((6, 3, 1, 1), np.float32),
                                                                             np.empty((4, 3), np.float32)]),
                 cnnrt.InputError, "'fc'")
    ro = np.empty((6, 3), np.float32)
    ro.flags.writeable = False
    expect_raise("read-only out=", lambda: run({"input": x[:6]}, out=[np.empty((6, 3, 1, 1), np.float32), ro]),
                 cnnrt.InputError, "writeable")
    expect_raise("out= not a list", lambda: run({"input": x[:6]}, out=np.empty((6, 3))), cnnrt.InputError, "list of 2")
    expect_raise("threads for 2 shards on 1", lambda: m.set_threads([1, 1]), cnnrt.InputError, "1 shards")
    try:
        m.set_threads(0)
        check(False, "0 threads raises")
    except cnnrt.CnnrtError as e:
        check(not isinstance(e, cnnrt.InputError) and e.status == 1 and e.status_name == "INVALID_ARGUMENT"
              and "thread" in e.message, f"0 threads: the runtime's status and message: {e.status} {e.message!r}")
    expect_raise("training call on an inference model", lambda: m.train_step(x[:6], [0] * 6), cnnrt.CnnrtError,
                 "inference model")
    expect_raise("unknown hugepages", lambda: cnnrt.Model(two_so, hugepages="big"), cnnrt.InputError, "'big'")
    # the model still works after every refusal
    outs = m.run(None, {"input": x}, pad=True)
    check(all(np.array_equal(a, b) for a, b in zip(outs, ref)), "the model runs unchanged after the refusals")
    m.close()
    m.close()
    expect_raise("closed model: run", lambda: run({"input": x[:6]}), cnnrt.InputError, "closed")
    expect_raise("closed model: threads", lambda: m.threads, cnnrt.InputError, "closed")
    check(m.closed and "closed" in repr(m), "closed, twice, and repr says so")
    with cnnrt.Model(two_so) as m2:
        pass
    check(m2.closed, "a with block closes the model")

    # misaligned f32 input (tiny: batch 1, f32)
    with cnnrt.Model(tiny_so) as t:
        raw = np.zeros(4 * 3 + 1, np.uint8)
        mis = raw[1:].view(np.float32).reshape(3, 1, 1, 1)
        expect_raise("misaligned array", lambda: t.run(None, {"input": mis}), cnnrt.InputError, "aligned")

    # runtime failures: CnnrtError with the runtime's message and status
    yml = os.path.join(tmp, "two.yml")
    try:
        cnnrt.Model(yml)
        check(False, "opening a YAML file as a model raises")
    except cnnrt.CnnrtError as e:
        check(e.status_name in ("BAD_MODEL", "IO") and yml in e.message and not isinstance(e, cnnrt.InputError),
              f"open of a non-model: {e}")
    expect_raise("missing file", lambda: cnnrt.Model(os.path.join(tmp, "nothing.so")), cnnrt.CnnrtError, "nothing.so",
                 "[IO]")
    with cnnrt.Model(train_so) as tm:
        try:
            tm.run(None, {tm.inputs[0].name: np.zeros(tm.inputs[0].shape, np.uint8)})
            check(False, "inference on a training model raises")
        except cnnrt.CnnrtError as e:
            check(e.status_name == "UNSUPPORTED" and e.message == e.args[0] and "train" in e.message,
                  f"cnnrt_infer on a training model: the runtime's message: {e}")
        b = tm.batch_size
        imgs = np.random.RandomState(1).randint(0, 256, (b,) + tm.inputs[0].shape[1:]).astype(np.uint8)
        labels = np.arange(b) % 3
        expect_raise("label out of range", lambda: tm.train_step(imgs, np.full(b, 3)), cnnrt.InputError, "labels[0]",
                     "0..2")
        expect_raise("label not an integer", lambda: tm.train_step(imgs, np.full(b, 0.5)), cnnrt.InputError, "labels[0]")
        expect_raise("negative label", lambda: tm.train_step(imgs, np.r_[labels[:-1], -1]), cnnrt.InputError,
                     f"labels[{b - 1}]")
        expect_raise("too few labels", lambda: tm.train_step(imgs, labels[:-1]), cnnrt.InputError, "labels")
        expect_raise("images not a whole update", lambda: tm.train_step(imgs[:-1], labels[:-1]), cnnrt.InputError,
                     "weight update takes")
        expect_raise("steps= disagrees", lambda: tm.train_step(imgs, labels, steps=2), cnnrt.InputError, "2 steps")
        check(tm.steps_done == 0, "no step was taken by the refused calls")
        loss, acc = tm.train_step(imgs, labels)
        check(tm.steps_done == 1 and np.isfinite(loss) and 0 <= acc <= 1, f"a step with int labels: loss {loss}")
        expect_raise("negative learning rate", lambda: tm.set_learning_rate(-1), cnnrt.CnnrtError, "[INVALID_ARGUMENT]")
        tm.learning_rate = 0.025
        check(tm.learning_rate == 0.025, "learning_rate set and read")


def part_threads(two_so, tiny_so):
    rnd = np.random.RandomState(9)
    xs = [rnd.randint(0, 256, (4, 2, 4, 4)).astype(np.uint8) for _ in range(8)]
    with cnnrt.Model(two_so, threads=1) as m:
        want = [m.run(None, {"input": x}) for x in xs]
        errors, same = [], [True]

        def worker(k, model, reps):
            try:
                for r in range(reps):
                    i = (k + r) % len(xs)
                    got = model.run(None, {"input": xs[i]})
                    same[0] &= all(np.array_equal(a, b) for a, b in zip(got, want[i]))
            except Exception as e:  # noqa: BLE001
                errors.append(e)

        ts = [threading.Thread(target=worker, args=(k, m, 200)) for k in range(4)]
        [t.start() for t in ts]
        [t.join() for t in ts]
        check(not errors and same[0], f"4 threads x 200 runs on one model: serial results ({errors[:1]})")
        with cnnrt.Model(two_so, threads=1) as m2:
            ts = [threading.Thread(target=worker, args=(k, mm, 200)) for k, mm in enumerate((m, m2))]
            [t.start() for t in ts]
            [t.join() for t in ts]
            check(not errors and same[0], f"2 threads on 2 models: serial results ({errors[:1]})")

    # close while another thread runs: that thread gets InputError, the process survives
    m = cnnrt.Model(two_so, threads=1)
    runs, ended = [0], []

    def loop():
        try:
            while True:
                m.run(None, {"input": xs[0]})
                runs[0] += 1
        except cnnrt.InputError as e:
            ended.append(str(e))
        except Exception as e:  # noqa: BLE001
            ended.append(f"unexpected {type(e).__name__}: {e}")

    t = threading.Thread(target=loop)
    t.start()
    while runs[0] < 50:
        time.sleep(0.001)
    m.close()
    t.join(30)
    check(not t.is_alive() and ended and "closed" in ended[0] and runs[0] >= 50,
          f"close during runs on another thread: {ended[:1]} after {runs[0]} runs")

    # the GIL is released during a call: this thread counts while another one is inside run()
    with cnnrt.Model(tiny_so, threads=1) as t1:
        big = np.ones((40000, 1, 1, 1), np.float32)
        span = {}

        def long_call():
            span["in"] = time.monotonic()
            t1.run(None, {"input": big})
            span["out"] = time.monotonic()

        th = threading.Thread(target=long_call)
        stamps = []
        th.start()
        while th.is_alive():
            stamps.append(time.monotonic())
        th.join()
        lo, hi = span["in"] + 0.01, span["out"]
        inside = sum(1 for s in stamps if lo < s < hi)
        check(hi - lo > 0.02 and inside > 1000,
              f"GIL released: {inside} iterations of this thread during a {1e3 * (hi - lo):.0f} ms call")


def part_cnnc(tmp):
    yml = os.path.join(tmp, "two.yml")
    so = os.path.join(tmp, "two_b4.so")
    out = cnnc.compile(yml, so, batch_size=4, tune={"winograd": 0}, exempt_norm=True, enable_half_partials=False,
                       target_cache=["1M", "4M"])
    with cnnrt.Model(out) as m:
        o = m.options
        check(m.batch_size == 4 and o["batch_size"] == 4 and o["tune"]["winograd"] == 0 and o["exempt_norm"] is True
              and o["target_cache"] == "1M,4M" and o["enable_half_partials"] is False,
              "cnnc.compile: batch_size=4, tune={'winograd': 0}, exempt_norm=True, a list reach the .so's options")
    try:
        cnnc.compile(yml, so, batch_sise=4)
        check(False, "an unknown option raises")
    except cnnc.CompileError as e:
        check(e.returncode == 2 and "--batch-sise" in e.stderr and "--batch-sise" in str(e),
              f"unknown option: CompileError exit 2 with cnnc's stderr: {e.stderr.strip()[:120]!r}")
    bad = os.path.join(tmp, "bad.yml")
    with open(bad, "w") as f:
        f.write(TWO.replace("filters: 3, kernel: 3", "filters: 3, kernel: 0"))
    try:
        cnnc.compile(bad, so)
        check(False, "a bad model raises")
    except cnnc.CompileError as e:
        check(e.returncode == 1 and "bad.yml" in e.stderr and "kernel" in e.stderr,
              f"bad model: CompileError exit 1 naming the file: {e.stderr.strip()[:120]!r}")
    check(cnnc.version().startswith("cnnc "), f"cnnc.version(): {cnnc.version()}")


def part_install(tmp, tiny_yml):
    prefix = os.path.join(tmp, "prefix")
    r = testlib.run(["cmake", "--install", BUILD, "--prefix", prefix])
    check(r.returncode == 0, f"cmake --install --prefix {prefix}" + (f" ({(r.stderr or r.stdout).strip()[-300:]})"
                                                                      if r.returncode else ""))
    pydirs = [d for d, sub, files in os.walk(prefix) if "cnnrt" in sub and "cnnc" in sub]
    if not check(len(pydirs) == 1, f"one installed package directory: {pydirs}"):
        return
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "CNNRT_LIBRARY", "CNNC_EXECUTABLE")}
    env["PYTHONPATH"] = pydirs[0]
    script = ("import cnnrt, cnnc, json, numpy as np, sys\n"
              f"so = cnnc.compile({tiny_yml!r}, {os.path.join(tmp, 'inst_tiny.so')!r})\n"
              "with cnnrt.Model(so) as m:\n"
              "    (y,) = m.run(None, {'input': np.ones((2, 1, 1, 1), np.float32)})\n"
              "print(json.dumps({'lib': cnnrt.library_path, 'cnnc': cnnc.executable(), 'file': cnnrt.__file__,\n"
              "                  'y': y.ravel().tolist()}))\n")
    r = subprocess.run([sys.executable, "-c", script], cwd=tmp, env=env, capture_output=True, text=True)
    if not check(r.returncode == 0, f"import the installed packages ({r.stderr.strip()[-300:]})"):
        return
    got = json.loads(r.stdout)
    check(got["lib"].startswith(prefix) and got["cnnc"].startswith(prefix) and got["file"].startswith(prefix)
          and len(got["y"]) == 2, f"installed packages use the installed libcnnrt and cnnc: {got}")
    env["CNNRT_LIBRARY"] = os.path.join(tmp, "no-such-libcnnrt.so")
    r = subprocess.run([sys.executable, "-c", "import cnnrt"], cwd=tmp, env=env, capture_output=True, text=True)
    check(r.returncode != 0 and "CNNRT_LIBRARY" in r.stderr and "no-such-libcnnrt.so" in r.stderr,
          f"$CNNRT_LIBRARY overrides (a missing one fails the import naming it): {r.stderr.strip()[-160:]!r}")


def main():
    with tempfile.TemporaryDirectory(prefix="cnnc_py_api_") as tmp:
        _, two_so = compile_yml(tmp, "two", TWO, "--batch-size", "2")
        tiny_yml, tiny_so = compile_yml(tmp, "tiny", TINY)
        _, train_so = compile_yml(tmp, "small_train", SMALL_TRAIN, "--mode", "training", "--batch-size", "4")
        x, ref = part_inference(tmp, two_so)
        part_bad_input(tmp, two_so, tiny_so, train_so, x, ref)
        part_threads(two_so, tiny_so)
        part_cnnc(tmp)
        part_install(tmp, tiny_yml)
    return CHECKS.summary()


if __name__ == "__main__":
    sys.exit(main())
