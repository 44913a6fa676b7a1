"""test_folder_dataset.py BUILD SRC -- image folders as training data (issue 23;
runtime/rt_folder.c, `cnnrun train --dataset folder`).

1. Exactness: Fashion-MNIST samples written as a PNG folder (lossless, 28x28, `--augment none`:
   the identity resize), as idx files in the folder's order (class by class) and as TFRecord
   shards (PNG payloads, labels 1..10 read with --label-base 1) train fmnist_cnn to
   byte-identical checkpoints (the same --seed shuffles all alike): the folder and TFRecord
   paths decode, order and label exactly as the idx path.
2. Threads do not change the data: a JPEG folder trained with --loader-threads 0 and 2 (and
   the ImageNet augmentation on an RGB folder for cifar_resnet8, random crops and flips drawn
   from the seed) gives byte-identical checkpoints; the validation split is read too.
3. Learning: the JPEG Fashion-MNIST folder (1000 training images) trains fmnist_cnn well above
   chance.
4. Bad folders: a corrupt JPEG and a truncated PNG stop the run naming the file (--bad-images
   stop, the default) or are skipped and counted (--bad-images skip); an empty class folder,
   train/val classes that differ, a missing val split, no --data-dir and more classes than the
   model scores each give a clear message and exit status 1 or 2.
5. CIFAR-100 binary files give the fine labels and pixels as written (a coarse label of 20 is
   refused naming the record), and the Python binding's Dataset.folder reads a folder.
Skips (77) without Fashion-MNIST, numpy or PIL (Debian dataset-fashion-mnist, python3-numpy,
python3-pil)."""
import gzip
import hashlib
import io
import os
import shutil
import sys
import tempfile

from testlib import Checks, build_src, need_module, run, SKIP
from tfrecord_format import imagenet_example, record

BUILD, SRC = build_src(__doc__)
np = need_module("numpy", "Debian python3-numpy")
Image = need_module("PIL.Image", "Debian python3-pil")
FMNIST = os.environ.get("CNNC_FMNIST_DIR", "/usr/share/datasets/fashion-mnist")
if not os.path.exists(os.path.join(FMNIST, "train-images-idx3-ubyte.gz")):
    print(f"skip: no Fashion-MNIST in {FMNIST} (Debian dataset-fashion-mnist)")
    sys.exit(SKIP)
CNNC, CNNRUN = os.path.join(BUILD, "cnnc"), os.path.join(BUILD, "cnnrun")


def idx(name):
    b = gzip.open(os.path.join(FMNIST, name + ".gz")).read()
    if "images" in name:
        return np.frombuffer(b, np.uint8, offset=16).reshape(-1, 28, 28)
    return np.frombuffer(b, np.uint8, offset=8)


def per_class(images, labels, n):
    """n samples of each class, class by class (the folder's order)."""
    pick = np.concatenate([np.nonzero(labels == k)[0][:n] for k in range(10)])
    return images[pick], labels[pick]


def write_folder(root, split, images, labels, ext, mode="L", size=None, classes=None):
    for i, (im, lab) in enumerate(zip(images, labels)):
        d = os.path.join(root, split, (classes or [f"class{k}" for k in range(10)])[lab])
        os.makedirs(d, exist_ok=True)
        img = Image.fromarray(im, "L").convert(mode)
        if size:
            img = img.resize(size, Image.BILINEAR)
        img.save(os.path.join(d, f"{i:06d}.{ext}"), quality=95) if ext == "jpg" else img.save(os.path.join(d, f"{i:06d}.{ext}"))


def write_idx(d, prefix, images, labels):
    os.makedirs(d, exist_ok=True)
    n = len(labels)
    with open(os.path.join(d, prefix + "-images-idx3-ubyte"), "wb") as f:
        f.write(bytes([0, 0, 8, 3]) + n.to_bytes(4, "big") + (28).to_bytes(4, "big") * 2 + images.tobytes())
    with open(os.path.join(d, prefix + "-labels-idx1-ubyte"), "wb") as f:
        f.write(bytes([0, 0, 8, 1]) + n.to_bytes(4, "big") + labels.astype(np.uint8).tobytes())


def last_ckpt(d):
    names = sorted(n for n in os.listdir(d) if n.endswith(".safetensors")) if os.path.isdir(d) else []
    return hashlib.sha256(open(os.path.join(d, names[-1]), "rb").read()).hexdigest() if names else None


def accuracy(out):
    for line in out.splitlines():
        if line.startswith("validation:"):
            return float(line.split("accuracy")[1].split()[0])
    return -1.0


checks = Checks()
with tempfile.TemporaryDirectory(prefix="cnnc-folder-") as tmp:
    tx, ty = per_class(idx("train-images-idx3-ubyte"), idx("train-labels-idx1-ubyte"), 100)
    vx, vy = per_class(idx("t10k-images-idx3-ubyte"), idx("t10k-labels-idx1-ubyte"), 20)
    fm = os.path.join(tmp, "fmnist.so")
    r = run([CNNC, os.path.join(SRC, "models", "fmnist_cnn.yml"), "--mode", "training", "--optimizer", "momentum",
             "--batch-size", "50", "-o", fm])
    checks.check(r.returncode == 0, f"compile fmnist_cnn for training ({r.stderr.strip()[-300:]})")
    train = [CNNRUN, fm, "train", "--epochs", "8", "--lr", "0.05", "--logs-per-epoch", "1"]

    # 1. the PNG folder = the idx files in its order
    png, idxd = os.path.join(tmp, "png"), os.path.join(tmp, "idx")
    write_folder(png, "train", tx, ty, "png")
    write_folder(png, "val", vx, vy, "png")
    write_idx(idxd, "train", tx, ty)
    write_idx(idxd, "t10k", vx, vy)
    a = run(train + ["--dataset", "folder", "--data-dir", png, "--augment", "none", "--seed", "3", "--checkpoint-dir",
                     os.path.join(tmp, "ck_png")])
    b = run(train + ["--dataset", "fashion-mnist", "--data-dir", idxd, "--seed", "3", "--checkpoint-dir",
                     os.path.join(tmp, "ck_idx")])
    checks.check(a.returncode == 0 and b.returncode == 0, f"train on the PNG folder and the idx files ({a.stderr.strip()[-300:]}"
                 f"{b.stderr.strip()[-300:]})")
    checks.check(last_ckpt(os.path.join(tmp, "ck_png")) == last_ckpt(os.path.join(tmp, "ck_idx")) is not None,
                 "PNG folder and idx files: byte-identical checkpoints")
    checks.check(accuracy(a.stdout) == accuracy(b.stdout) >= 0, f"the same validation ({accuracy(a.stdout)}, {accuracy(b.stdout)})")
    print(f"PNG folder: validation accuracy {accuracy(a.stdout)}", flush=True)

    # 1'. the same PNGs as TensorFlow's ImageNet TFRecord shards (labels 1..10, --label-base 1)
    tfr = os.path.join(tmp, "tfr")
    os.makedirs(tfr)
    for split, xs, ys, shards in (("train", tx, ty, 3), ("validation", vx, vy, 2)):
        recs = []
        for im, lab in zip(xs, ys):
            buf = io.BytesIO()
            Image.fromarray(im, "L").save(buf, "PNG")
            recs.append(record(imagenet_example(buf.getvalue(), int(lab) + 1)))
        per = (len(recs) + shards - 1) // shards
        for k in range(shards):
            with open(os.path.join(tfr, f"{split}-{k:05d}-of-{shards:05d}"), "wb") as f:
                f.write(b"".join(recs[k * per:(k + 1) * per]))
    c = run(train + ["--dataset", "tfrecord", "--data-dir", tfr, "--label-base", "1", "--augment", "none", "--seed", "3",
                     "--checkpoint-dir", os.path.join(tmp, "ck_tfr")])
    checks.check(c.returncode == 0, f"train on TFRecord shards ({c.stderr.strip()[-300:]})")
    checks.check(last_ckpt(os.path.join(tmp, "ck_tfr")) == last_ckpt(os.path.join(tmp, "ck_png")) is not None,
                 "TFRecord shards and the PNG folder: byte-identical checkpoints")
    c = run(train + ["--dataset", "tfrecord", "--data-dir", tfr, "--augment", "none"])
    checks.check(c.returncode == 1 and "label 10, outside 0..9" in c.stderr,
                 f"TFRecord labels 1..10 without --label-base: refused naming the record ({c.stderr.strip()[-300:]})")

    # 2. + 3. a JPEG folder, decoder threads 0 and 2, shuffled (seed 3)
    jpg = os.path.join(tmp, "jpg")
    write_folder(jpg, "train", tx, ty, "jpg")
    write_folder(jpg, "val", vx, vy, "jpg")
    outs = []
    for t in ("0", "2"):
        r = run(train + ["--dataset", "folder", "--data-dir", jpg, "--augment", "none", "--seed", "3", "--loader-threads", t,
                         "--checkpoint-dir", os.path.join(tmp, "ck_jpg" + t), "--json"])
        checks.check(r.returncode == 0 and '"loader_wait_seconds"' in r.stdout,
                     f"train on the JPEG folder with {t} decoder threads ({r.stderr.strip()[-300:]})")
        outs.append(r.stdout)
    checks.check(last_ckpt(os.path.join(tmp, "ck_jpg0")) == last_ckpt(os.path.join(tmp, "ck_jpg2")) is not None,
                 "JPEG folder: 0 and 2 decoder threads give byte-identical checkpoints")
    acc = [float(l.split('"accuracy": ')[1].split(",")[0].rstrip("}")) for l in outs[0].splitlines() if '"validation"' in l]
    checks.check(acc and acc[0] > 0.6, f"JPEG folder: fmnist_cnn learns (validation accuracy {acc}, chance 0.1)")

    # 2'. RGB 40x40 images, the ImageNet augmentation, cifar_resnet8 (3x32x32)
    rgb = os.path.join(tmp, "rgb")
    write_folder(rgb, "train", tx[:400], ty[:400], "jpg", "RGB", (40, 40))
    write_folder(rgb, "val", vx[:80], vy[:80], "png", "RGB", (40, 40))
    # per_class's first 400 are classes 0..3: give the splits the same class folders
    rs = os.path.join(tmp, "rs.so")
    r = run([CNNC, os.path.join(SRC, "models", "cifar_resnet8.yml"), "--mode", "training", "--batch-size", "16", "-o", rs])
    checks.check(r.returncode == 0, f"compile cifar_resnet8 for training ({r.stderr.strip()[-300:]})")
    hashes = []
    for t in ("0", "2"):
        d = os.path.join(tmp, "ck_rgb" + t)
        r = run([CNNRUN, rs, "train", "--dataset", "folder", "--data-dir", rgb, "--epochs", "1", "--seed", "5",
                 "--loader-threads", t, "--checkpoint-dir", d])
        checks.check(r.returncode == 0 and "validation:" in r.stdout,
                     f"cifar_resnet8 on an RGB folder, ImageNet augmentation, {t} threads ({r.stderr.strip()[-300:]})")
        hashes.append(last_ckpt(d))
    checks.check(hashes[0] == hashes[1] is not None, "random crops and flips: the same with 0 and 2 decoder threads")

    # 4. bad folders
    def bad(name, setup, args, want, rc=(1,), extra=()):
        d = os.path.join(tmp, "bad_" + name)
        shutil.copytree(jpg, d)
        setup(d)
        r = run([CNNRUN, fm, "train", "--dataset", "folder", "--data-dir", d, "--augment", "none", "--epochs", "1",
                 "--loader-threads", "2"] + list(args))
        msg = (r.stderr + r.stdout).strip()
        checks.check(r.returncode in rc and want in msg and "Traceback" not in msg and all(e in msg for e in extra),
                     f"{name}: exit {r.returncode}, wants '{want}' ({msg[-300:]})")
        return r

    def corrupt(d):
        with open(os.path.join(d, "train", "class3", "zz_corrupt.jpg"), "wb") as f:
            f.write(b"\xff\xd8\xff\xe0 this is not a JPEG" * 20)

    def truncated(d):
        p = os.path.join(d, "train", "class5", "zz_trunc.png")
        Image.fromarray(tx[0], "L").save(p)
        b = open(p, "rb").read()
        open(p, "wb").write(b[: len(b) // 2])

    bad("corrupt JPEG stops", corrupt, [], "zz_corrupt.jpg")
    bad("corrupt JPEG skipped", corrupt, ["--bad-images", "skip"], "1 training images failed to decode", (0,), ["zz_corrupt.jpg"])
    bad("truncated PNG stops", truncated, [], "zz_trunc.png")
    bad("empty class folder", lambda d: os.makedirs(os.path.join(d, "train", "class9b")), [], "class9b: no .jpg")
    bad("classes differ", lambda d: shutil.move(os.path.join(d, "val", "class7"), os.path.join(d, "val", "class7x")), [],
        "class7")
    bad("no val split", lambda d: shutil.rmtree(os.path.join(d, "val")), [], "val")
    def eleven(d):
        for split in ("train", "val"):
            shutil.copytree(os.path.join(d, split, "class0"), os.path.join(d, split, "class10"))

    bad("11 classes, 10 scores", eleven, [], "has 11 classes")
    r = run([CNNRUN, fm, "train", "--dataset", "folder"])
    checks.check(r.returncode == 2 and "--data-dir" in r.stderr, f"folder without --data-dir: usage error ({r.stderr.strip()})")
    r = run([CNNRUN, fm, "train", "--dataset", "folder", "--data-dir", jpg, "--augment", "random"])
    checks.check(r.returncode == 2 and "imagenet" in r.stderr, f"--augment random: usage error ({r.stderr.strip()})")
    # 5. CIFAR-100 binary (in memory): the fine label of each 3074-byte record, pixels after it;
    # and the Python binding's folder dataset: class names, stats, a read equal to cnnrun's data
    sys.path.insert(0, os.path.join(BUILD, "python"))
    import cnnrt  # noqa: E402
    rng = np.random.default_rng(7)
    c100 = os.path.join(tmp, "c100")
    os.makedirs(c100)
    for name, n in (("train.bin", 30), ("test.bin", 10)):
        rec = np.zeros((n, 3074), np.uint8)
        rec[:, 0] = rng.integers(0, 20, n)
        rec[:, 1] = rng.integers(0, 100, n)
        rec[:, 2:] = rng.integers(0, 256, (n, 3072))
        rec.tofile(os.path.join(c100, name))
        ds = cnnrt.Dataset.open("cifar100", c100, test=name == "test.bin")
        x, y = ds.read(0, n)
        checks.check(ds.shape == (3, 32, 32) and ds.classes == 100 and (y == rec[:, 1]).all() and
                     (x.reshape(n, -1) == rec[:, 2:]).all(), f"cifar100 {name}: fine labels and pixels as written")
        ds.close()
    rec[3, 0] = 20
    rec.tofile(os.path.join(c100, "test.bin"))
    try:
        cnnrt.Dataset.open("cifar100", c100, test=True)
        checks.check(False, "cifar100: a coarse label of 20 is refused")
    except cnnrt.CnnrtError as e:
        checks.check("test.bin: record 3 has coarse label 20" in str(e), f"cifar100: a coarse label of 20 is refused ({e})")
    ds = cnnrt.Dataset.folder(jpg, (1, 28, 28), augment="none", threads=2)
    checks.check(len(ds) == 1000 and ds.classes == 10 and ds.class_name(3) == "class3" and ds.class_name(10) is None,
                 f"Dataset.folder: {len(ds)} samples, {ds.classes} classes, class 3 '{ds.class_name(3)}'")
    x, y = ds.read(0, 100)
    st = ds.stats()
    checks.check(x.shape == (100, 1, 28, 28) and (y == 0).all() and st["decoded"] >= 100 and st["skipped"] == 0,
                 f"Dataset.folder read: the first 100 samples are class 0 ({st})")
    ds.close()
sys.exit(checks.summary())
