#!/usr/bin/env python3
"""test_image_pil.py BUILD SRC -- runtime/rt_image.c (through BUILD/tests/image_load) against
PIL and torchvision 0.14 on images made here with PIL: RESIZE (Image.resize BILINEAR) and
CENTER (Resize + CenterCrop, also with CenterCrop's zero padding) must agree within one grey
level on at least 99% of the pixels (the resample is PIL's own arithmetic, so in practice
exactly), for PNG (every colour type) and JPEG decoded at full scale, colour and grey ("L")
samples; TRAIN: the crop image_load reports, cropped and resized by PIL and mirrored when the
flip says so, matches the sample; over 4000 seeds the crop areas and aspect ratios stay in
the scale / ratio ranges and their means match torchvision's get_params; half the samples
flip.  A JPEG decoded at a reduced DCT scale stays close to PIL's full decode.  Skips (77)
without PIL, numpy or torchvision."""
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import testlib  # noqa: E402

BUILD, SRC = testlib.build_src(__doc__)
Image = testlib.need_module("PIL.Image", "python3-pil")
np = testlib.need_module("numpy", "python3-numpy")
torch = testlib.need_module("torch", "python3-torch")
T = testlib.need_module("torchvision.transforms", "python3-torchvision")
TOOL = os.path.join(BUILD, "tests", "image_load")
testlib.need_built(TOOL)
checks = testlib.Checks()


def smooth(w, h, seed, mode="RGB"):
    """A smooth random image: low-resolution noise upscaled bicubically, plus fine noise."""
    rng = np.random.default_rng(seed)
    small = Image.fromarray(rng.integers(0, 256, (max(2, h // 40), max(2, w // 40), 3), dtype=np.uint8))
    img = np.asarray(small.resize((w, h), Image.BICUBIC)).astype(np.int16)
    img = np.clip(img + rng.integers(-12, 13, img.shape), 0, 255).astype(np.uint8)
    return Image.fromarray(img).convert(mode)


def load(path, kind, c, h, w, seed=0, resize_short=None):
    cmd = [TOOL, "load", path, kind, str(c), str(h), str(w), str(seed)] + ([str(resize_short)] if resize_short else [])
    r = subprocess.run(cmd, capture_output=True)
    if r.returncode != 0:
        return None, r.stderr.decode(errors="replace").strip()
    return np.frombuffer(r.stdout, dtype=np.uint8).reshape(c, h, w), ""


def dct_scaled(path, box_w, box_h, n_w, n_h):
    """Whether rt_image.c decodes the JPEG path at a reduced DCT scale: some n/8 < 1 keeps the
    source box (box_w x box_h) at least the virtual output size (n_w x n_h)."""
    return path.endswith(".jpg") and any(box_w * k / 8 >= n_w and box_h * k / 8 >= n_h for k in range(1, 8))


def compare(got, ref, what, exact_frac=0.99, scaled=False):
    """ref: a PIL image (RGB or L) of the sample's size.  scaled: the JPEG was decoded at a
    reduced DCT scale, whose smoothing differs from PIL's full decode + bilinear: only close."""
    want = np.asarray(ref)
    want = want[None] if want.ndim == 2 else want.transpose(2, 0, 1)
    if got is None or got.shape != want.shape:
        return checks.check(False, "%s: shape %s, want %s" % (what, None if got is None else got.shape, want.shape))
    d = np.abs(got.astype(int) - want.astype(int))
    if scaled:
        return checks.check(d.mean() < 3 and np.percentile(d, 99) <= 16, "%s (scaled DCT): mean diff %.2f, p99 %d" %
                            (what, d.mean(), np.percentile(d, 99)))
    frac = float((d <= 1).mean())
    return checks.check(frac >= exact_frac and not (want.std() == 0), "%s: %.4f within 1 (max diff %d, %.4f exact)" %
                        (what, frac, d.max(), float((d == 0).mean())))


def pil_open(path, c):
    img = Image.open(path)
    return img.convert("RGB" if c == 3 else "L")


def main():
    tmp = tempfile.mkdtemp(prefix="cnnc-image-")
    files = []
    for i, (w, h) in enumerate([(500, 375), (333, 247), (120, 400), (37, 29), (256, 256)]):
        img = smooth(w, h, i)
        for fmt, mode in [("png", "RGB"), ("png", "RGBA"), ("png", "L"), ("png", "P"), ("jpg", "RGB"), ("jpg", "L")]:
            p = os.path.join(tmp, "im%d_%s.%s" % (i, mode, fmt))
            (img.convert(mode) if mode != "P" else img.quantize(64)).save(p, quality=90)
            files.append(p)
    p16 = os.path.join(tmp, "g16.png")
    Image.fromarray((np.asarray(smooth(90, 70, 9, "L")).astype(np.uint16) * 257)).save(p16)
    cmyk = os.path.join(tmp, "cmyk.jpg")
    smooth(160, 120, 8).convert("CMYK").save(cmyk, quality=95)
    files.append(cmyk)

    n_exact = n_scaled = 0
    for p in files:
        name = os.path.basename(p)
        W, H = Image.open(p).size
        for c in (3, 1):
            for h, w in ((224, 224), (57, 91)):
                got, err = load(p, "resize", c, h, w)
                sc = dct_scaled(p, W, H, w, h)
                compare(got, pil_open(p, c).resize((w, h), Image.BILINEAR), "%s resize %dx%d c%d %s" % (name, h, w, c, err),
                        scaled=sc)
                n_scaled, n_exact = n_scaled + sc, n_exact + (not sc)
            for out, short in ((224, 256), ((64, 50), 48)):  # the second is wider than some resized sides: padding
                got, err = load(p, "center", c, *((out, out) if isinstance(out, int) else out), resize_short=short)
                ref = T.Resize(short)(pil_open(p, c))
                sc = dct_scaled(p, W, H, *ref.size)
                compare(got, T.CenterCrop(out)(ref), "%s center %s/%d c%d %s" % (name, out, short, c, err), scaled=sc)
                n_scaled, n_exact = n_scaled + sc, n_exact + (not sc)
    checks.check(n_exact > 100 and n_scaled > 10, "%d exact and %d scaled-DCT comparisons" % (n_exact, n_scaled))
    # 16-bit grey: the high byte (PIL itself would clip I;16 to 255 in convert("L"))
    got, err = load(p16, "resize", 1, 70, 90)
    compare(got, smooth(90, 70, 9, "L"), "g16.png identity %s" % err, 1.0)

    # TRAIN: the reported crop, through PIL
    src = files[0]
    for seed in range(12):
        r = subprocess.run([TOOL, "crops", "500", "375", str(seed), "1"], capture_output=True, text=True)
        x0, y0, cw, ch, fl = map(int, r.stdout.split())
        ref = pil_open(src, 3).crop((x0, y0, x0 + cw, y0 + ch)).resize((224, 224), Image.BILINEAR)
        if fl:
            ref = ref.transpose(Image.FLIP_LEFT_RIGHT)
        got, err = load(src, "train", 3, 224, 224, seed)
        compare(got, ref, "train seed %d crop %d,%d %dx%d flip %d %s" % (seed, x0, y0, cw, ch, fl, err))
    n = 4000
    r = subprocess.run([TOOL, "crops", "500", "375", "1000", str(n)], capture_output=True, text=True)
    cr = np.array([list(map(int, line.split())) for line in r.stdout.split("\n") if line.strip()])
    area, ratio = cr[:, 2] * cr[:, 3] / (500 * 375), cr[:, 2] / cr[:, 3]
    torch.manual_seed(0)
    img = Image.new("RGB", (500, 375))
    tv = np.array([T.RandomResizedCrop.get_params(img, [0.08, 1.0], [3 / 4, 4 / 3]) for _ in range(n)])
    tarea, tratio = tv[:, 2] * tv[:, 3] / (500 * 375), tv[:, 3] / tv[:, 2]
    checks.check(len(cr) == n and area.min() >= 0.079 and area.max() <= 1.0, "train areas %.4f..%.4f" % (area.min(), area.max()))
    checks.check(ratio.min() >= 0.74 and ratio.max() <= 1.34, "train ratios %.3f..%.3f" % (ratio.min(), ratio.max()))
    checks.check(abs(area.mean() - tarea.mean()) < 0.02 and abs(ratio.mean() - tratio.mean()) < 0.02,
                 "train means: area %.3f ratio %.3f, torchvision %.3f %.3f" % (area.mean(), ratio.mean(), tarea.mean(),
                                                                              tratio.mean()))
    checks.check(0.46 < cr[:, 4].mean() < 0.54, "flip fraction %.3f" % cr[:, 4].mean())
    checks.check((cr[:, 0] + cr[:, 2] <= 500).all() and (cr[:, 1] + cr[:, 3] <= 375).all() and (cr[:, :2] >= 0).all(),
                 "train crops inside the image")
    xs = (cr[:, 0] + cr[:, 2] / 2) / 500
    checks.check(abs(xs.mean() - 0.5) < 0.02, "crop centres: mean x %.3f" % xs.mean())

    # a scaled DCT decode (2000x1500 -> 224x168 at 1/8) stays near PIL's full-scale result
    big = os.path.join(tmp, "big.jpg")
    smooth(2000, 1500, 5).save(big, quality=92)
    got, err = load(big, "resize", 3, 168, 224)
    want = np.asarray(pil_open(big, 3).resize((224, 168), Image.BILINEAR)).transpose(2, 0, 1).astype(int)
    d = np.abs(got.astype(int) - want) if got is not None else np.array([255])
    checks.check(d.mean() < 2.5 and np.percentile(d, 99) <= 12, "scaled DCT decode: mean diff %.2f, p99 %d %s" %
                 (d.mean(), np.percentile(d, 99), err))
    for p in [os.path.join(tmp, x) for x in os.listdir(tmp)]:
        os.remove(p)
    os.rmdir(tmp)
    return checks.summary()


sys.exit(main())
