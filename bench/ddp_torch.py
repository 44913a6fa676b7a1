#!/usr/bin/python3
"""ddp_torch.py — the PyTorch peer of `mpirun -np P cnnrun X.so train` (docs/scaling.md):
torchvision ResNet-18 under DistributedDataParallel (gloo backend), P processes started with
torch.multiprocessing (no torchrun; MASTER_ADDR=127.0.0.1), T threads each
(torch.set_num_threads), batch B per process, SGD with momentum, cross-entropy, synthetic data
(one random batch per process, fed every step, as `cnnrun benchmark` does).  W warm-up steps,
then steps for at least S seconds (the step count is agreed by all ranks: rank 0 decides and
broadcasts whether to go on, so every rank runs the same number of allreduces).  Prints one JSON
line: global img/s = P * B * steps / the slowest rank's wall time.

  /usr/bin/python3 bench/ddp_torch.py --procs 2 --threads 1 --batch 16 --size 64 --classes 1000

Run it with Debian's python3 (python3-torch 1.13, python3-torchvision).  --procs 1 runs the
same loop without DDP (no process group) for reference."""
import argparse
import json
import os
import time


def worker(rank, a, q):
    import torch
    import torch.distributed as dist
    import torchvision

    torch.set_num_threads(a.threads)
    torch.manual_seed(1 + rank)
    model = torchvision.models.resnet18(num_classes=a.classes)
    model.train()
    if a.procs > 1:
        os.environ["MASTER_ADDR"] = "127.0.0.1"
        os.environ["MASTER_PORT"] = str(a.port)
        dist.init_process_group("gloo", rank=rank, world_size=a.procs)
        model = torch.nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=0.9)
    lossf = torch.nn.CrossEntropyLoss()
    x = torch.randn(a.batch, 3, a.size, a.size)
    y = torch.randint(0, a.classes, (a.batch,))

    def step():
        opt.zero_grad(set_to_none=True)
        loss = lossf(model(x), y)
        loss.backward()
        opt.step()
        return loss

    for _ in range(a.warmup):
        step()
    if a.procs > 1:
        dist.barrier()
    t0 = time.perf_counter()
    steps = 0
    go = torch.ones(1)
    while True:
        step()
        steps += 1
        if steps >= a.min_steps:
            go[0] = 1.0 if time.perf_counter() - t0 < a.seconds else 0.0
            if a.procs > 1:
                dist.broadcast(go, 0)
            if go[0] == 0:
                break
    el = time.perf_counter() - t0
    if a.procs > 1:
        t = torch.tensor([el], dtype=torch.float64)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        el = t.item()
        dist.destroy_process_group()
    if rank == 0:
        q.put((steps, el))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--procs", type=int, default=2)
    p.add_argument("--threads", type=int, default=1, help="torch.set_num_threads per process")
    p.add_argument("--batch", type=int, default=16, help="per process")
    p.add_argument("--size", type=int, default=224, help="input H = W (3 channels)")
    p.add_argument("--classes", type=int, default=1000)
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--seconds", type=float, default=20.0)
    p.add_argument("--min-steps", type=int, default=3)
    p.add_argument("--port", type=int, default=29517)
    a = p.parse_args()
    import torch
    import torch.distributed as dist
    import torch.multiprocessing as mp

    if a.procs > 1 and not dist.is_gloo_available():
        raise SystemExit("ddp_torch.py: this torch has no gloo backend")
    ctx = mp.get_context("spawn")
    q = ctx.SimpleQueue()
    procs = [ctx.Process(target=worker, args=(r, a, q)) for r in range(a.procs)]
    for pr in procs:
        pr.start()
    for pr in procs:
        pr.join()
        if pr.exitcode:
            raise SystemExit(f"ddp_torch.py: a worker exited with {pr.exitcode}")
    steps, el = q.get()
    img_s = a.procs * a.batch * steps / el
    print(json.dumps({"peer": "torch-ddp-gloo" if a.procs > 1 else "torch", "torch": torch.__version__, "procs": a.procs,
                      "threads": a.threads, "batch_per_proc": a.batch, "input": [3, a.size, a.size], "classes": a.classes,
                      "steps": steps, "seconds": round(el, 3), "ms_per_step": round(1e3 * el / steps, 2),
                      "images_per_second": round(img_s, 2)}))


if __name__ == "__main__":
    main()
