#!/usr/bin/env python3
"""make_jpeg_folder.py DIR [options] -- an ImageNet-layout image folder for the folder dataset's
tests and the loader benchmark: DIR/train/CLASS/*.jpg and DIR/val/CLASS/*.jpg, CLASS the
zero-padded label ("00", "01", ...: sorted names are label order, as torchvision's ImageFolder
numbers them).  Two sources:

  --fmnist [IDXDIR]   Fashion-MNIST idx files (default /usr/share/datasets/fashion-mnist, the
                      Debian package dataset-fashion-mnist; .gz or plain): train from
                      train-*, val from t10k-*; --limit-per-class N (default 20) images per
                      class and split; --size S upscales the 28x28 images (bilinear);
                      --rgb stores colour JPEGs (grey replicated) instead of greyscale ones
  --synthetic N       N images per split (default split: N train, N/4 val) of smooth random
                      colour images of --wh WxH (default 500x375; every fifth one portrait),
                      --classes K (default 4) classes told apart by their mean colour

--png writes PNG instead of JPEG; --quality Q (default 90); --seed S.  Prints one JSON line
{"dir":..., "train":N, "val":M, "classes":K}.  Needs python3-pil and numpy."""
import argparse
import gzip
import json
import os
import struct
import sys

try:
    import numpy as np
    from PIL import Image
except ImportError as e:
    sys.exit("make_jpeg_folder.py: needs numpy and PIL (python3-numpy, python3-pil): %s" % e)


def read_idx(path):
    op = gzip.open if path.endswith(".gz") else open
    with op(path, "rb") as f:
        data = f.read()
    ndim = data[3]
    dims = struct.unpack(">%dI" % ndim, data[4:4 + 4 * ndim])
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


def find(idxdir, name):
    for p in (os.path.join(idxdir, name), os.path.join(idxdir, name + ".gz")):
        if os.path.exists(p):
            return p
    sys.exit("make_jpeg_folder.py: no %s(.gz) in %s" % (name, idxdir))


def save(img, path, args):
    if args.png:
        img.save(path + ".png")
    else:
        img.save(path + ".jpg", quality=args.quality)


def fmnist(args):
    counts = {}
    for split, prefix in (("train", "train"), ("val", "t10k")):
        images = read_idx(find(args.fmnist, prefix + "-images-idx3-ubyte"))
        labels = read_idx(find(args.fmnist, prefix + "-labels-idx1-ubyte"))
        per = {}
        for i, (im, lab) in enumerate(zip(images, labels)):
            lab = int(lab)
            if per.get(lab, 0) >= args.limit_per_class:
                if len(per) == 10 and all(v >= args.limit_per_class for v in per.values()):
                    break
                continue
            per[lab] = per.get(lab, 0) + 1
            d = os.path.join(args.dir, split, "%02d" % lab)
            os.makedirs(d, exist_ok=True)
            img = Image.fromarray(im)
            if args.size and args.size != 28:
                img = img.resize((args.size, args.size), Image.BILINEAR)
            if args.rgb:
                img = img.convert("RGB")
            save(img, os.path.join(d, "%s_%05d" % (split, i)), args)
        counts[split] = sum(per.values())
    return counts, 10


def synthetic(args):
    rng = np.random.default_rng(args.seed)
    w, h = map(int, args.wh.lower().split("x"))
    base = rng.integers(40, 216, (args.classes, 3))
    counts = {}
    for split, n in (("train", args.synthetic), ("val", max(1, args.synthetic // 4))):
        for i in range(n):
            lab = i % args.classes
            iw, ih = (h, w) if i % 5 == 4 else (w, h)
            small = rng.normal(0, 40, (max(2, ih // 60), max(2, iw // 60), 3)) + base[lab]
            img = Image.fromarray(np.clip(small, 0, 255).astype(np.uint8)).resize((iw, ih), Image.BICUBIC)
            a = np.asarray(img).astype(np.int16) + rng.integers(-6, 7, (ih, iw, 3))
            img = Image.fromarray(np.clip(a, 0, 255).astype(np.uint8))
            d = os.path.join(args.dir, split, "%02d" % lab)
            os.makedirs(d, exist_ok=True)
            save(img, os.path.join(d, "%s_%05d" % (split, i)), args)
        counts[split] = n
    return counts, args.classes


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dir")
    ap.add_argument("--fmnist", nargs="?", const="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--synthetic", type=int)
    ap.add_argument("--limit-per-class", type=int, default=20)
    ap.add_argument("--size", type=int, default=0)
    ap.add_argument("--rgb", action="store_true")
    ap.add_argument("--png", action="store_true")
    ap.add_argument("--wh", default="500x375")
    ap.add_argument("--classes", type=int, default=4)
    ap.add_argument("--quality", type=int, default=90)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    if (args.fmnist is None) == (args.synthetic is None):
        ap.error("give one of --fmnist [IDXDIR] or --synthetic N")
    counts, classes = fmnist(args) if args.fmnist is not None else synthetic(args)
    print(json.dumps({"dir": args.dir, "train": counts["train"], "val": counts["val"], "classes": classes}))


main()
