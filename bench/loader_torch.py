#!/usr/bin/env python3
"""loader_torch.py DIR [--workers W] [--batch B] [--seconds S | --images N] [--val] -- the
PyTorch peer of the image loader benchmark: torchvision.datasets.ImageFolder(DIR/train) through
a DataLoader(num_workers=W, batch_size=B, shuffle=True) with the training recipe
RandomResizedCrop(224) + RandomHorizontalFlip + ToTensor + Normalize (--val: Resize(256) +
CenterCrop(224) on DIR/val), looping over epochs until S seconds (default 20) or N images.
The first batch (worker start-up) is not timed.  Prints one JSON line:
{"peer":"torchvision","workers":W,"batch":B,"images":N,"seconds":T,"img_per_s":R} (with
--workers 0, everything runs in this process: also "cpu_ms_per_img", its CPU time per image).
DIR: an ImageNet-layout folder (tests/scripts/make_jpeg_folder.py makes one)."""
import argparse
import json
import os
import sys
import time

try:
    import torch
    import torchvision.datasets as datasets
    import torchvision.transforms as T
except ImportError as e:
    sys.exit("loader_torch.py: needs torch and torchvision (python3-torch, python3-torchvision): %s" % e)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dir")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--images", type=int, default=0)
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--val", action="store_true")
    ap.add_argument("--threads", type=int, default=1, help="torch intra-op threads of the main process")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    norm = T.Normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225])
    if args.val:
        tf = T.Compose([T.Resize(round(args.size * 256 / 224)), T.CenterCrop(args.size), T.ToTensor(), norm])
    else:
        tf = T.Compose([T.RandomResizedCrop(args.size), T.RandomHorizontalFlip(), T.ToTensor(), norm])
    ds = datasets.ImageFolder(os.path.join(args.dir, "val" if args.val else "train"), transform=tf)
    dl = torch.utils.data.DataLoader(ds, batch_size=args.batch, shuffle=True, num_workers=args.workers,
                                     persistent_workers=args.workers > 0, drop_last=False)
    n, t0, first = 0, None, True
    while True:
        for x, _ in dl:
            if first:  # worker start-up and the first batch are not timed
                first, t0, c0 = False, time.perf_counter(), time.process_time()
                continue
            n += x.shape[0]
            dt = time.perf_counter() - t0
            if (args.images and n >= args.images) or (not args.images and dt >= args.seconds):
                r = {"peer": "torchvision", "workers": args.workers, "batch": args.batch,
                     "kind": "center" if args.val else "train", "images": n, "seconds": round(dt, 2),
                     "img_per_s": round(n / dt, 1)}
                if args.workers == 0:
                    r["cpu_ms_per_img"] = round(1e3 * (time.process_time() - c0) / n, 3)
                print(json.dumps(r))
                return


main()
