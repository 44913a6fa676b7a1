#!/usr/bin/python3
"""fmnist_xinit.py — swap initial weights between cnnc's fmnist_cnn and the PyTorch anchor
(/work/shared/anchors/fmnist_torch.py), to tell the draw of the initial weights apart from
the training itself (docs/training.md, "Fashion-MNIST: cross-initialisation").

Run with /usr/bin/python3 (it needs torch and numpy).  Commands:

  torch2ckpt --template T.safetensors --seed S -o OUT.safetensors
      Builds the anchor's model after torch.manual_seed(S) (S = 0 is the anchor) and writes
      its initial weights as a cnnc checkpoint of step 0: every tensor of the template (a
      checkpoint cnnrun wrote for the same .so, e.g. `cnnrun f.so train --limit 64 --lr 0
      --checkpoint-dir D`) is kept by name, dtype and shape; the weights and biases are the
      torch ones, every other state tensor (P/momentum, optimizer step counters) is zero and
      "step" is 0 — a fresh start.  Train it with `cnnrun f.so train --restore OUT ...`.

  train --seed S [--init CKPT] [--epochs E] [--threads T] [--log-every N]
      The anchor's training loop (same data, model, optimizer, batch, loop and evaluation as
      fmnist_torch.py, a copy of it) with torch.manual_seed(S) in place of manual_seed(0)
      and, with --init, the weights of a cnnc checkpoint loaded after the model is built (the
      model is still built first, so the RNG stream, i.e. the epoch permutations, is the one
      of the plain seed-S run).  Prints the anchor's per-epoch lines (and with --log-every N
      the mean training loss of every N steps; nan shows a diverged run).

  loss0 --init CKPT [--n 64]
      The anchor model's mean cross-entropy loss on the first N training images in file order
      with the checkpoint's weights (what `cnnrun ... --seed 0 --limit N` logs for its first
      step; used by tests/scripts/test_fmnist_xinit.py to check the layout).

Layout: cnnc names conv1..conv4, fc1, fc2 (models/fmnist_cnn.yml) = Sequential indices 0, 2,
5, 7, 11, 13; conv weights [out, in, kh, kw] and dense weights [out, in] as torch, the dense
input flattened in NCHW order as nn.Flatten: the bytes are copied as they are.
"""
import argparse
import gzip
import json
import os
import struct
import sys
import time

import numpy as np

NAMES = {"conv1": 0, "conv2": 2, "conv3": 5, "conv4": 7, "fc1": 11, "fc2": 13}
D = os.environ.get("CNNC_FMNIST_DIR", "/usr/share/datasets/fashion-mnist").rstrip("/") + "/"
DT = {"F32": np.float32, "I32": np.int32, "I64": np.int64}


def read_st(path):
    """(metadata, [(name, dtype, shape, ndarray)]) of a safetensors file, in file order."""
    b = open(path, "rb").read()
    if len(b) < 8:
        sys.exit(f"{path}: too short for a safetensors file")
    n = struct.unpack("<Q", b[:8])[0]
    h = json.loads(b[8:8 + n])
    meta = h.pop("__metadata__", {})
    out = []
    for name, e in sorted(h.items(), key=lambda kv: kv[1]["data_offsets"][0]):
        lo, hi = e["data_offsets"]
        a = np.frombuffer(b[8 + n + lo:8 + n + hi], DT[e["dtype"]]).reshape(e["shape"]).copy()
        out.append((name, e["dtype"], e["shape"], a))
    return meta, out


def write_st(path, meta, tensors):
    hdr, off, blobs = {"__metadata__": meta}, 0, []
    for name, dt, shape, a in tensors:
        raw = np.ascontiguousarray(a, DT[dt]).tobytes()
        hdr[name] = {"dtype": dt, "shape": list(shape), "data_offsets": [off, off + len(raw)]}
        off += len(raw)
        blobs.append(raw)
    h = json.dumps(hdr, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def anchor_model(seed):
    import torch
    import torch.nn as nn
    torch.manual_seed(seed)
    return nn.Sequential(nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.Conv2d(32, 32, 3, padding=1), nn.ReLU(),
                         nn.MaxPool2d(2), nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.Conv2d(64, 64, 3, padding=1),
                         nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(64 * 7 * 7, 512), nn.ReLU(),
                         nn.Linear(512, 10))


def cnnc_name(tname):
    """'0.weight' -> 'conv1/weight'."""
    idx, kind = tname.split(".")
    return {v: k for k, v in NAMES.items()}[int(idx)] + "/" + kind


def cnnc_name_or_none(name):
    """'conv1/weight' -> '0.weight'; None for optimizer state, step counters and "step"."""
    parts = name.split("/")
    if len(parts) != 2 or parts[0] not in NAMES or parts[1] not in ("weight", "bias"):
        return None
    return f"{NAMES[parts[0]]}.{parts[1]}"


def load_ckpt_into(m, path):
    import torch
    _, ts = read_st(path)
    got = {n: a for n, _, _, a in ts}
    sd = m.state_dict()
    for tname, t in sd.items():
        a = got.get(cnnc_name(tname))
        if a is None:
            sys.exit(f"{path}: no tensor '{cnnc_name(tname)}' (not a fmnist_cnn checkpoint)")
        if tuple(a.shape) != tuple(t.shape):
            sys.exit(f"{path}: '{cnnc_name(tname)}' is {list(a.shape)}, the anchor model has {list(t.shape)}")
        sd[tname] = torch.from_numpy(a.astype(np.float32))
    m.load_state_dict(sd)


def cmd_torch2ckpt(a):
    m = anchor_model(a.seed)
    sd = {cnnc_name(k): v.detach().numpy() for k, v in m.state_dict().items()}
    meta, ts = read_st(a.template)
    out, used = [], set()
    for name, dt, shape, arr in ts:
        if name in sd:
            if list(sd[name].shape) != list(shape):
                sys.exit(f"{a.template}: '{name}' is {shape}, the anchor's is {list(sd[name].shape)}")
            out.append((name, dt, shape, sd[name]))
            used.add(name)
        else:  # optimizer state, step counters, "step": a fresh start
            out.append((name, dt, shape, np.zeros(shape, DT[dt])))
    missing = set(sd) - used
    if missing:
        sys.exit(f"{a.template}: lacks {sorted(missing)} (not a fmnist_cnn checkpoint)")
    meta = dict(meta)
    meta["step"] = "0"
    meta["init"] = f"torch.manual_seed({a.seed}) anchor model (tools/fmnist_xinit.py)"
    write_st(a.o, meta, out)
    print(f"{a.o}: {len(out)} tensors, weights of the anchor model with torch.manual_seed({a.seed}), the rest zero, step 0")


def data():
    import torch

    def idx(name, off):
        return np.frombuffer(gzip.open(D + name).read(), np.uint8, offset=off)
    xtr = torch.tensor(idx("train-images-idx3-ubyte.gz", 16).reshape(-1, 1, 28, 28) / 255.0, dtype=torch.float32)
    ytr = torch.tensor(idx("train-labels-idx1-ubyte.gz", 8).astype(np.int64))
    xte = torch.tensor(idx("t10k-images-idx3-ubyte.gz", 16).reshape(-1, 1, 28, 28) / 255.0, dtype=torch.float32)
    yte = torch.tensor(idx("t10k-labels-idx1-ubyte.gz", 8).astype(np.int64))
    return xtr, ytr, xte, yte


def cmd_loss0(a):
    import torch
    import torch.nn as nn
    xtr, ytr, _, _ = data()
    m = anchor_model(0)
    load_ckpt_into(m, a.init)
    with torch.no_grad():
        print(f"loss {nn.CrossEntropyLoss()(m(xtr[:a.n]), ytr[:a.n]).item():.6f}")


def cmd_train(a):
    import torch
    import torch.nn as nn
    xtr, ytr, xte, yte = data()
    m = anchor_model(a.seed)  # manual_seed(S), then the model: the anchor's RNG stream
    torch.set_num_threads(a.threads)
    if a.init:
        load_ckpt_into(m, a.init)  # no RNG use: the permutations stay those of seed S
    print(f"seed {a.seed}, init {a.init or f'torch.manual_seed({a.seed})'}, {a.threads} threads", flush=True)
    opt = torch.optim.SGD(m.parameters(), lr=0.05, momentum=0.9)
    lossf = nn.CrossEntropyLoss()
    B = 64
    for ep in range(a.epochs):
        perm = torch.randperm(len(xtr))
        t0 = time.perf_counter()
        m.train()
        lsum, nsteps = 0.0, 0
        for i in range(0, len(xtr) - B + 1, B):
            j = perm[i:i + B]
            opt.zero_grad()
            loss = lossf(m(xtr[j]), ytr[j])
            loss.backward()
            opt.step()
            if a.log_every:
                lsum, nsteps = lsum + loss.item(), nsteps + 1
                if nsteps % a.log_every == 0:
                    print(f"  epoch {ep+1} step {nsteps}: mean train loss of the last {a.log_every} steps {lsum / a.log_every:.4f}",
                          flush=True)
                    lsum = 0.0
        dt = time.perf_counter() - t0
        m.eval()
        with torch.no_grad():
            acc = (m(xte).argmax(1) == yte).float().mean().item()
        print(f"epoch {ep+1}: {dt:.1f} s ({len(xtr)/dt:.0f} img/s), test accuracy {acc*100:.2f}%", flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("torch2ckpt")
    s.add_argument("--template", required=True)
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("-o", required=True)
    s = sub.add_parser("train")
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--init")
    s.add_argument("--epochs", type=int, default=3)
    s.add_argument("--threads", type=int, default=2)
    s.add_argument("--log-every", type=int, default=0, help="print the mean training loss every N steps")
    s = sub.add_parser("loss0")
    s.add_argument("--init", required=True)
    s.add_argument("--n", type=int, default=64)
    a = p.parse_args()
    {"torch2ckpt": cmd_torch2ckpt, "train": cmd_train, "loss0": cmd_loss0}[a.cmd](a)


if __name__ == "__main__":
    main()
