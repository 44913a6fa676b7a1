"""fmnist_torch.py's training loop timed like torch_bench.py: steady-state steps, not a whole epoch.

The model, optimizer (SGD momentum 0.9, lr 0.05), batch (64), data (Fashion-MNIST train split
/ 255, a torch.randperm order, the index gather xtr[j] inside every step) and thread count (2)
are those of the anchors' fmnist_torch.py (bench/README.md, "Peers"); instead of one 937-step
epoch it runs 2 warm-up steps, then steps until >= SECONDS (default 20) and >= 3 steps, and
prints img/s of the timed steps.  For bench/run.py --train --fmnist-torch steps, when a full epoch of the
anchor does not fit (a loaded machine).  Usage: fmnist_torch_steps.py [SECONDS]"""
import gzip, sys, time, numpy as np, torch, torch.nn as nn
D = "/usr/share/datasets/fashion-mnist/"
def idx(name, off): return np.frombuffer(gzip.open(D + name).read(), np.uint8, offset=off)
xtr = torch.tensor(idx("train-images-idx3-ubyte.gz", 16).reshape(-1, 1, 28, 28) / 255.0, dtype=torch.float32)
ytr = torch.tensor(idx("train-labels-idx1-ubyte.gz", 8).astype(np.int64))
torch.manual_seed(0); torch.set_num_threads(2)
m = nn.Sequential(nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.Conv2d(32, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                  nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.Conv2d(64, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                  nn.Flatten(), nn.Linear(64 * 7 * 7, 512), nn.ReLU(), nn.Linear(512, 10))
opt = torch.optim.SGD(m.parameters(), lr=0.05, momentum=0.9); lossf = nn.CrossEntropyLoss(); B = 64
seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 20
perm = torch.randperm(len(xtr)); m.train(); i = 0
def step():
    global i
    if i + B > len(xtr): i = 0
    j = perm[i:i + B]; i += B; opt.zero_grad(); lossf(m(xtr[j]), ytr[j]).backward(); opt.step()
step(); step()
n, t0 = 0, time.perf_counter()
while time.perf_counter() - t0 < seconds or n < 3:
    step(); n += 1
dt = (time.perf_counter() - t0) / n
print(f"torch {torch.__version__} fmnist_cnn train steps batch={B} threads={torch.get_num_threads()}: {B/dt:.2f} img/s ({dt*1000:.1f} ms/step, {n} steps)")
