#!/usr/bin/python3
"""test_python_train.py BUILD SRC -- training from Python (python/cnnrt, docs/python.md) writes the
checkpoints `cnnrun train` writes, byte for byte.  fmnist_cnn compiled for training as the anchor
trains it (momentum 0.9, batch 64, --seed 0):
  (1) `cnnrun train --dataset synthetic --limit 512 --epochs 2 --logs-per-epoch 2 --seed 3
      --checkpoint-dir A` against cnnrt.fit(...) with the same options into B: the same four
      checkpoint files, cmp-identical; the log losses and the validation as cnnrun's --json;
  (2) the same run as an explicit loop (Dataset.shuffle(seed + epoch), Dataset.read,
      Model.train_step of 4 weight updates per call, Model.save): cmp-identical to A;
  (3) the comparison can fail: successive checkpoints differ, and --seed 4 gives another file;
  (4) restore / save of a cnnrun checkpoint gives the same bytes; state_dict / load_state_dict
      carry the state into a fresh model (both then train the same step to the same state);
      load_state_dict refuses a wrong shape or name and leaves the state as it was;
  (5) a fit restored mid-epoch (step 6 of 8 per epoch) writes the last checkpoint of the
      uninterrupted run (it reads the rest of the epoch in that epoch's shuffled order);
  (6) Model.evaluate on 100 test samples (a partial last micro-batch) gives `cnnrun validate
      --limit 100`'s loss and accuracy; load_safetensors of a checkpoint holds state_dict and
      the step; save_weights -> cnnc.compile(weights=) -> an inference model whose logits give
      evaluate's loss (1e-5) and accuracy on the 256 synthetic test images;
  (7) with Fashion-MNIST ($CNNC_FMNIST_DIR or /usr/share/datasets/fashion-mnist; skipped when
      missing): --limit 640 --lr-schedule cosine --warmup-epochs 0.5 --lr 0.1, cmp-identical
      checkpoints and the same validation on the 10000 test images.
Ends with "N passed, M failed"."""
import filecmp
import json
import os
import sys
import tempfile

import numpy as np

import testlib

BUILD, SRC = testlib.build_src(__doc__)
BUILD = os.path.abspath(BUILD)
CNNC, CNNRUN = os.path.join(BUILD, "cnnc"), os.path.join(BUILD, "cnnrun")
testlib.need_built(CNNC, CNNRUN, os.path.join(BUILD, "python", "cnnrt", "_config.py"))
os.environ.pop("CNNRT_LIBRARY", None)
sys.path.insert(0, os.path.join(BUILD, "python"))
import cnnrt  # noqa: E402

CHECKS = testlib.Checks(verbose=True)
check = CHECKS.check
RUN = ["--limit", "512", "--epochs", "2", "--logs-per-epoch", "2", "--seed", "3"]
FIT = dict(limit=512, epochs=2, logs_per_epoch=2, seed=3)


def cnnrun_train(so, ckdir, args):
    r = testlib.run([CNNRUN, so, "train", "--json", "--checkpoint-dir", ckdir] + args)
    check(r.returncode == 0, f"cnnrun train {' '.join(args)}" + (f" ({r.stderr.strip()[-200:]})" if r.returncode else ""))
    return [json.loads(line) for line in r.stdout.splitlines() if line.startswith("{")]


def ckpts(d):
    return sorted(f for f in os.listdir(d) if f.endswith(".safetensors")) if os.path.isdir(d) else []


def same_files(a, b, what):
    fa, fb = ckpts(a), ckpts(b)
    same = fa == fb and len(fa) > 0 and all(filecmp.cmp(os.path.join(a, f), os.path.join(b, f), shallow=False) for f in fa)
    check(same, f"{what}: checkpoints {fb} cmp-identical to cnnrun's {fa}")


def close6(a, b):
    return abs(a - b) <= 1.5e-6 * max(1.0, abs(b))


def same_events(ref, got, what):
    rl = [e for e in ref if e["event"] == "log"]
    gl = [e for e in got if e["event"] == "log"]
    ok = len(rl) == len(gl) > 0 and all(r["step"] == g["step"] and close6(g["loss"], r["loss"])
                                        and close6(g["accuracy"], r["accuracy"]) for r, g in zip(rl, gl))
    check(ok, f"{what}: log steps and losses as cnnrun's ({[round(g['loss'], 6) for g in gl]})")
    rv = [e for e in ref if e["event"] == "validation"]
    gv = [e for e in got if e["event"] == "validation"]
    ok = len(rv) == len(gv) == 1 and rv[0]["samples"] == gv[0]["samples"] and close6(gv[0]["loss"], rv[0]["loss"]) \
        and close6(gv[0]["accuracy"], rv[0]["accuracy"])
    check(ok, f"{what}: validation as cnnrun's ({gv[:1]} vs {rv[:1]})")


def explicit_loop(so, out):
    """The run of RUN written out with the primitive calls (docs/python.md's example)."""
    os.makedirs(out)
    with cnnrt.Model(so) as m, cnnrt.Dataset.for_model(m, "synthetic") as ds:
        ds.limit(512)
        m.learning_rate = 0.05
        per_update = m.batch_size * m.grad_accum
        steps_per_epoch = len(ds) // per_update  # 8
        for epoch in range(2):
            ds.shuffle(3 + epoch)
            for half in range(2):
                first = half * 4 * per_update
                images, labels = ds.read(first, 4 * per_update, m.inputs[0].dtype)
                m.train_step(images, labels)
                m.save(os.path.join(out, "ckpt-step-%08d.safetensors" % m.steps_done))
        return steps_per_epoch


def state_checks(so, tmp, a_dir):
    ck8 = os.path.join(a_dir, "ckpt-step-00000008.safetensors")
    with cnnrt.Model(so) as m, cnnrt.Model(so) as fresh, cnnrt.Dataset.for_model(m, "synthetic") as ds:
        m.restore(ck8)
        check(m.steps_done == 8 and cnnrt.checkpoint_step(ck8) == 8, f"restore: steps_done {m.steps_done}")
        resaved = os.path.join(tmp, "resaved.safetensors")
        m.save(resaved)
        check(filecmp.cmp(ck8, resaved, shallow=False), "restore + save of cnnrun's checkpoint: the same bytes")
        sd = m.state_dict()
        names = {s.name: s for s in m.state_info}
        check(set(sd) == {n for n, s in names.items() if s.kind != "grad_accum"} and "conv1/weight" in sd
              and sd["conv1/weight"].shape == (32, 1, 3, 3), f"state_dict: {len(sd)} tensors, conv1/weight {sd['conv1/weight'].shape}")
        before = fresh.state_dict()
        check(not np.array_equal(before["conv1/weight"], sd["conv1/weight"]), "a fresh model's state differs (can fail)")
        bad = dict(sd)
        bad["conv1/weight"] = sd["conv1/weight"][:16]
        for what, d, word in (("wrong shape", bad, "shape"), ("unknown name", dict(sd, nonsense=np.zeros(1)), "unknown"),
                              ("missing tensor (strict)", {"conv1/weight": sd["conv1/weight"]}, "missing")):
            try:
                fresh.load_state_dict(d)
                check(False, f"load_state_dict with a {what} raises")
            except cnnrt.InputError as e:
                check(word in str(e), f"load_state_dict refuses a {what}: {e}")
        after = fresh.state_dict()
        check(all(np.array_equal(before[k], after[k]) for k in before), "refused loads left the state unchanged")
        fresh.load_state_dict(sd)
        got = fresh.state_dict()
        check(all(np.array_equal(sd[k], got[k]) for k in sd), "load_state_dict: state_dict round trip")
        ds.shuffle(7)
        x, y = ds.read(0, 64, m.inputs[0].dtype)
        m.learning_rate = fresh.learning_rate = 0.05
        la, lb = m.train_step(x, y), fresh.train_step(x, y)
        sa, sb = m.state_dict(), fresh.state_dict()
        check(la == lb and all(np.array_equal(sa[k], sb[k]) for k in sa) and not np.array_equal(sa["fc2/weight"], sd["fc2/weight"]),
              f"after load_state_dict both train a step to the same state (loss {la[0]:.6f})")


def evaluate_check(so, tmp, a_dir):
    ck = os.path.join(a_dir, "ckpt-step-00000016.safetensors")
    r = testlib.run([CNNRUN, so, "validate", "--checkpoint", ck, "--dataset", "synthetic", "--limit", "100", "--json"])
    if not check(r.returncode == 0, "cnnrun validate --limit 100" + (f" ({r.stderr.strip()[-200:]})" if r.returncode else "")):
        return
    ref = json.loads(r.stdout.splitlines()[0])
    with cnnrt.Model(so) as m, cnnrt.Dataset.for_model(m, "synthetic", test=True) as ds:
        m.restore(ck)
        ds.limit(100)
        x, y = ds.read(0, 100, m.inputs[0].dtype)
        loss, acc = m.evaluate(x, y)
        l64, _ = m.evaluate(x[:64], y[:64])
        tk = m.evaluate_topk(x, y)
        ls, rk = m.evaluate_samples(x, y)
    check(close6(loss, ref["loss"]) and close6(acc, ref["accuracy"]) and loss != l64,
          f"evaluate on 100 samples (36 in a padded micro-batch): {loss:.6f} {acc:.6f} as cnnrun validate "
          f"{ref['loss']:.6f} {ref['accuracy']:.6f}")
    check(ls.shape == (100,) and rk.shape == (100,) and close6(tk["loss"], ref["loss"]) and close6(tk["top1"], acc)
          and close6(tk["top5"], ref["top5_accuracy"]),
          f"evaluate_topk / evaluate_samples on 100 samples: {tk} as cnnrun validate {ref} (evaluate: {acc})")


def weights_check(tmp, a_dir):
    import cnnc
    ck = os.path.join(a_dir, "ckpt-step-00000016.safetensors")
    so = os.path.join(tmp, "fmnist_cnn_train.so")
    with cnnrt.Model(so) as m, cnnrt.Dataset.for_model(m, "synthetic", test=True) as ds:
        m.restore(ck)
        tensors, meta = cnnrt.load_safetensors(ck)
        sd = m.state_dict()
        check(set(tensors) == set(sd) | {"step"} and int(tensors["step"]) == 16 and meta.get("model") == "fmnist_cnn"
              and all(np.array_equal(tensors[k], sd[k]) for k in sd), f"load_safetensors of a checkpoint: {meta}")
        w = m.save_weights(os.path.join(tmp, "weights.safetensors"))
        x, y = ds.read(0, len(ds))
        loss, acc = m.evaluate(x, y)
    inf = cnnc.compile(os.path.join(SRC, "models", "fmnist_cnn.yml"), os.path.join(tmp, "fmnist_inf.so"), weights=w,
                       batch_size=64)
    with cnnrt.Model(inf) as m:
        (logits,) = m.run(None, {m.inputs[0].name: x})
    z = logits.astype(np.float64)
    lse = np.log(np.exp(z - z.max(1, keepdims=True)).sum(1)) + z.max(1)
    ce = float((lse - z[np.arange(len(y)), y.astype(int)]).mean())
    hits = float((logits.argmax(1) == y).mean())
    check(abs(ce - loss) <= 1e-5 * abs(loss) and hits == acc,
          f"save_weights -> cnnc --weights -> inference: loss {ce:.6f} accuracy {hits:.4f} as evaluate {loss:.6f} {acc:.4f}")


def fmnist_part(so, tmp):
    data = os.environ.get("CNNC_FMNIST_DIR", "/usr/share/datasets/fashion-mnist")
    if not os.path.exists(os.path.join(data, "train-images-idx3-ubyte.gz")):
        print(f"skip (part): no Fashion-MNIST in {data} (Debian dataset-fashion-mnist)")
        return
    args = ["--dataset", "fashion-mnist", "--data-dir", data, "--limit", "640", "--epochs", "2", "--logs-per-epoch", "1",
            "--lr-schedule", "cosine", "--warmup-epochs", "0.5", "--lr", "0.1", "--seed", "5"]
    a, b = os.path.join(tmp, "fA"), os.path.join(tmp, "fB")
    ref = cnnrun_train(so, a, args)
    with cnnrt.Model(so) as m:
        got = m.fit("fashion-mnist", data_dir=data, limit=640, epochs=2, logs_per_epoch=1, lr_schedule="cosine",
                    warmup_epochs=0.5, lr=0.1, seed=5, checkpoint_dir=b, validation=True)
    same_files(a, b, "Fashion-MNIST, cosine schedule")
    same_events(ref, got, "Fashion-MNIST")


def main():
    with tempfile.TemporaryDirectory(prefix="cnnc_py_train_") as tmp:
        so = os.path.join(tmp, "fmnist_cnn_train.so")
        if not testlib.fmnist_cnn_training(CHECKS, CNNC, SRC, so, "0"):
            return CHECKS.summary()
        a, b, c = (os.path.join(tmp, d) for d in ("A", "B", "C"))
        ref = cnnrun_train(so, a, ["--dataset", "synthetic"] + RUN)
        with cnnrt.Model(so) as m:
            got = m.fit("synthetic", checkpoint_dir=b, validation=True, **FIT)
        same_files(a, b, "cnnrt.fit")
        same_events(ref, got, "cnnrt.fit")
        check([e["path"] for e in got if e["event"] == "checkpoint"] == [os.path.join(b, f) for f in ckpts(b)],
              "fit's checkpoint events name the files")
        explicit_loop(so, c)
        same_files(a, c, "explicit train_step loop")
        files = [os.path.join(a, f) for f in ckpts(a)]
        check(len(files) == 4 and not any(filecmp.cmp(x, y, shallow=False) for x, y in zip(files, files[1:])),
              "successive checkpoints differ")
        d = os.path.join(tmp, "D")
        with cnnrt.Model(so) as m:
            m.fit("synthetic", checkpoint_dir=d, **dict(FIT, seed=4))
        check(not filecmp.cmp(files[-1], os.path.join(d, ckpts(d)[-1]), shallow=False), "seed 4 gives another checkpoint")
        state_checks(so, tmp, a)
        # (5) resume mid-epoch: checkpoints every 2 steps, restart from step 6
        e, f = os.path.join(tmp, "E"), os.path.join(tmp, "F")
        with cnnrt.Model(so) as m:
            m.fit("synthetic", checkpoint_dir=e, **dict(FIT, logs_per_epoch=4))
        with cnnrt.Model(so) as m:
            m.fit("synthetic", checkpoint_dir=f, restore=os.path.join(e, "ckpt-step-00000006.safetensors"),
                  **dict(FIT, logs_per_epoch=4))
        check(ckpts(f)[0] == "ckpt-step-00000008.safetensors" and
              filecmp.cmp(os.path.join(e, ckpts(e)[-1]), os.path.join(f, ckpts(f)[-1]), shallow=False) and
              filecmp.cmp(os.path.join(e, ckpts(e)[-1]), files[-1], shallow=False),
              f"fit restored at step 6 ends on the uninterrupted run's checkpoint ({ckpts(f)})")
        evaluate_check(so, tmp, a)
        weights_check(tmp, a)
        fmnist_part(so, tmp)
    return CHECKS.summary()


if __name__ == "__main__":
    sys.exit(main())
