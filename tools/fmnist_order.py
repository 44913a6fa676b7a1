#!/usr/bin/python3
"""fmnist_order.py — feed cnnc the PyTorch anchor's exact sample order (/work/shared/anchors/
fmnist_torch.py), and run PyTorch step by step on that same order, to compare the two
trainings without shuffle noise (docs/training.md, "Fashion-MNIST: the anchor's run replicated").

Run with /usr/bin/python3 (it needs torch and numpy).  Commands:

  order --seed S --epochs E -o DIR [--keep-all] [--first N]
      Replays the anchor's RNG stream: torch.manual_seed(S), the model is built (that draws the
      initial weights), then one torch.randperm(60000) per epoch, in the anchor's order.  Each
      epoch's first 937*64 = 59968 indices (the anchor drops the last 32 images of every
      permutation) are written one after the other as an uncompressed idx pair
      DIR/train-images-idx3-ubyte + DIR/train-labels-idx1-ubyte (E*59968 images); the test
      files are symlinked from the dataset.  `cnnrun f.so train --data-dir DIR --seed 0` reads
      the file in file order (seed 0 = no shuffle), so one cnnrun "epoch" over DIR is E anchor
      epochs: use `--epochs 1 --logs-per-epoch E --checkpoint-dir CK` and `cnnrun f.so validate
      --checkpoint CK` for the test accuracy after each anchor epoch.  (`--keep-all` writes the
      whole permutations, 60000 per epoch; not the anchor.  `--first N` writes only the first N
      images of that order, for short checks.)

  steps --seed S --steps N (--order DIR | --source anchor) [--init CKPT] [--dtype float32|float64]
        [--threads T] [--save PREFIX [--save-steps K1,K2,..]]
      PyTorch's SGD (lr 0.05, momentum 0.9, batch 64, the anchor's model and loss) for N steps,
      printing "step k loss L" with L to 9 significant digits.  The batches are the next 64
      images of DIR's file (the order written above), or with --source anchor the anchor's own
      loop (randperm after the model is built) — the two must print identical losses, which is
      the check that DIR is the anchor's order.  The weights are the anchor's manual_seed(S)
      draw, or with --init those of a cnnc checkpoint (fmnist_xinit.py layout).  --dtype float64
      runs the same steps in double precision (model, data and optimizer): the reference both
      float32 trajectories are measured against.  --save writes the final weights and momentum
      buffers (cnnc checkpoint names: conv1/weight, conv1/weight/momentum, ...) after the last
      step, and after each of --save-steps, to PREFIX-step-K.npz.

  compare A B
      Two "step k loss L" logs (this tool's `steps` output, or `cnnrun ... --json` log events,
      one per step): the first step where they differ by more than 1e-6, 1e-4, 1e-2 (relative),
      and the relative difference at steps 1, 10, 20, 50, 100, 200, ...
"""
import argparse
import gzip
import json
import os
import re
import struct
import sys

import numpy as np

D = os.environ.get("CNNC_FMNIST_DIR", "/usr/share/datasets/fashion-mnist").rstrip("/") + "/"
B = 64
STEPS_PER_EPOCH = 60000 // B  # 937: the anchor's range(0, 60000 - 64 + 1, 64)


def idx(path, off):
    op = gzip.open if path.endswith(".gz") else open
    with op(path, "rb") as f:
        return np.frombuffer(f.read(), np.uint8, offset=off)


def anchor_permutations(seed, epochs):
    """The anchor's per-epoch permutations under torch.manual_seed(seed): model first, then randperm."""
    import torch
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import fmnist_xinit as FX
    FX.anchor_model(seed)  # manual_seed(seed) + the model's init draws
    return [torch.randperm(60000).numpy() for _ in range(epochs)]


def write_idx(path, magic, dims, data):
    with open(path, "wb") as f:
        f.write(struct.pack(">I", magic) + b"".join(struct.pack(">I", d) for d in dims))
        f.write(np.ascontiguousarray(data, np.uint8).tobytes())


def cmd_order(a):
    x = idx(D + "train-images-idx3-ubyte.gz", 16).reshape(-1, 28, 28)
    y = idx(D + "train-labels-idx1-ubyte.gz", 8)
    keep = 60000 if a.keep_all else STEPS_PER_EPOCH * B
    order = np.concatenate([p[:keep] for p in anchor_permutations(a.seed, a.epochs)])
    if a.first:
        order = order[:a.first]
    os.makedirs(a.o, exist_ok=True)
    write_idx(os.path.join(a.o, "train-images-idx3-ubyte"), 0x803, [len(order), 28, 28], x[order])
    write_idx(os.path.join(a.o, "train-labels-idx1-ubyte"), 0x801, [len(order)], y[order])
    np.save(os.path.join(a.o, "order.npy"), order)
    for n in ("t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"):
        dst = os.path.join(a.o, n)
        if not os.path.lexists(dst):
            os.symlink(D + n, dst)
    what = f"the first {len(order)} of " if a.first else ""
    print(f"{a.o}: {what}{a.epochs} anchor epochs of {keep} training images (torch.manual_seed({a.seed}), "
          f"model, then randperm per epoch); first indices {order[:5].tolist()}")


def cmd_steps(a):
    import torch
    import torch.nn as nn
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import fmnist_xinit as FX
    dt = torch.float64 if a.dtype == "float64" else torch.float32
    m = FX.anchor_model(a.seed)  # the anchor: manual_seed, model; randperm comes after
    torch.set_num_threads(a.threads)
    if a.init:
        FX.load_ckpt_into(m, a.init)
    m = m.to(dt)
    if a.source == "anchor":
        xtr = idx(D + "train-images-idx3-ubyte.gz", 16).reshape(-1, 1, 28, 28)
        ytr = idx(D + "train-labels-idx1-ubyte.gz", 8)
        perms = []
    else:
        xtr = idx(os.path.join(a.order, "train-images-idx3-ubyte"), 16).reshape(-1, 1, 28, 28)[:a.steps * B]
        ytr = idx(os.path.join(a.order, "train-labels-idx1-ubyte"), 8)[:a.steps * B]  # only what the steps read
    # x/255 as the anchor: float64 division, then the working dtype (float32: correctly rounded)
    X = torch.tensor(xtr / 255.0, dtype=dt)
    Y = torch.tensor(ytr.astype(np.int64))
    opt = torch.optim.SGD(m.parameters(), lr=0.05, momentum=0.9)
    lossf = nn.CrossEntropyLoss()
    save_at = {int(t) for t in a.save_steps.split(",") if t} if a.save_steps else set()
    for k in range(a.steps):
        if a.source == "anchor":
            ep, i = divmod(k, STEPS_PER_EPOCH)
            while len(perms) <= ep:
                perms.append(torch.randperm(60000))
            j = perms[ep][i * B:(i + 1) * B]
        else:
            j = torch.arange(k * B, (k + 1) * B)
            if (k + 1) * B > len(X):
                sys.exit(f"{a.order}: {len(X)} images, fewer than {a.steps} steps of {B}")
        opt.zero_grad()
        loss = lossf(m(X[j]), Y[j])
        loss.backward()
        opt.step()
        print(f"step {k + 1} loss {loss.item():.9g}", flush=True)
        if a.save and (k + 1 == a.steps or k + 1 in save_at):
            save_state(m, opt, f"{a.save}-step-{k + 1}.npz", FX)


def save_state(m, opt, path, FX):
    """Weights and momentum buffers under cnnc's checkpoint names, as float64 arrays."""
    out = {}
    for tname, p in m.named_parameters():
        out[FX.cnnc_name(tname)] = p.detach().double().numpy()
        buf = opt.state[p].get("momentum_buffer")
        if buf is not None:
            out[FX.cnnc_name(tname) + "/momentum"] = buf.double().numpy()
    np.savez(path, **out)


def read_losses(path):
    """{step: loss} from `steps` output or cnnrun --json log events (one step per event)."""
    got = {}
    for line in open(path):
        line = line.strip()
        m = re.match(r"step (\d+) loss (\S+)$", line)
        if m:
            got[int(m.group(1))] = float(m.group(2))
        elif line.startswith("{"):
            e = json.loads(line)
            if e.get("event") == "log":
                got[int(e["step"])] = float(e["loss"])
    return got


def cmd_compare(a):
    la, lb = read_losses(a.a), read_losses(a.b)
    common = sorted(set(la) & set(lb))
    if not common:
        sys.exit(f"{a.a}, {a.b}: no common steps")
    rel = {k: abs(la[k] - lb[k]) / max(abs(lb[k]), 1e-30) for k in common}
    print(f"{len(common)} common steps ({common[0]}..{common[-1]})")
    for tol in (1e-6, 1e-4, 1e-2, 1e-1):
        first = next((k for k in common if rel[k] > tol), None)
        print(f"  first step with relative difference > {tol:g}: {first if first else 'none'}")
    marks = [k for k in (1, 2, 5, 10, 20, 30, 50, 75, 100, 150, 200, 300, 500, 1000, 2000) if k in rel]
    for k in marks:
        print(f"  step {k}: {la[k]:.6f} vs {lb[k]:.6f}  rel {rel[k]:.2e}")
    if a.window:
        for lo in range(common[0], common[-1] + 1, a.window):
            ks = [k for k in common if lo <= k < lo + a.window]
            if ks:
                print(f"  steps {ks[0]}-{ks[-1]}: mean {np.mean([la[k] for k in ks]):.4f} vs {np.mean([lb[k] for k in ks]):.4f}, "
                      f"median rel {np.median([rel[k] for k in ks]):.2e}")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("order")
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--epochs", type=int, default=3)
    s.add_argument("--keep-all", action="store_true", help="whole permutations (60000 per epoch), not the anchor's 59968")
    s.add_argument("--first", type=int, default=0, help="write only the first N images of that order")
    s.add_argument("-o", required=True)
    s = sub.add_parser("steps")
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--steps", type=int, required=True)
    s.add_argument("--order")
    s.add_argument("--source", choices=("order", "anchor"), default="order")
    s.add_argument("--init")
    s.add_argument("--dtype", choices=("float32", "float64"), default="float32")
    s.add_argument("--threads", type=int, default=2)
    s.add_argument("--save", metavar="PREFIX", help="write PREFIX-step-K.npz after the last step (and --save-steps)")
    s.add_argument("--save-steps", default="", help="comma-separated steps to save as well")
    s = sub.add_parser("compare")
    s.add_argument("a")
    s.add_argument("b")
    s.add_argument("--window", type=int, default=0, help="also mean loss per window of N steps")
    a = p.parse_args()
    if a.cmd == "steps" and a.source == "order" and not a.order:
        p.error("steps: --order DIR or --source anchor")
    {"order": cmd_order, "steps": cmd_steps, "compare": cmd_compare}[a.cmd](a)


if __name__ == "__main__":
    main()
