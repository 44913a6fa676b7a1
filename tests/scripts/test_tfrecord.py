#!/usr/bin/env python3
"""test_tfrecord.py BUILD SRC -- the TFRecord shard reader (runtime/rt_tfrecord.c) through
BUILD/tests/tfr_dump (tests/unit/tfr_dump.c).  Shards are written here by hand (CRC32C and the
tf.train.Example encoding in Python, no TensorFlow), with small JPEG-like payloads (PIL's JPEGs
when PIL is installed).  Good sets: records, lengths, labels and image hashes as written, in
shard order, an empty shard, the validation split beside the train one, other files ignored,
extra features and unknown fields of every wire type skipped, packed and unpacked labels,
negative labels, Features merged, 4 threads reading at once, rt_tfr_describe, SSE4.2 vs table
CRC32C.  Bad sets: a bad header or data CRC, truncated shards, a missing shard, two sets, a
record claiming 2^60 bytes, an Example without image/encoded, a label as bytes or with two
values, an empty image, malformed protobuf (overrun, group, overlong varint), a directory or a
FIFO as a shard: exit 1 with a message naming the shard and record (and the byte offset), no
signal, no hang.  Then 300 mutated copies of a valid shard: exit 0 or 1, never a signal."""
import io
import os
import random
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from testlib import Checks, build_src, need_built, run  # noqa: E402

BUILD, SRC = build_src(__doc__)
DUMP = os.path.join(BUILD, "tests", "tfr_dump")
need_built(DUMP)
rnd = random.Random(23)
checks = Checks(verbose=True)

from tfrecord_format import (bytes_feature, entry, example, imagenet_example, int64_feature, ld, record,  # noqa: E402
                             tag, varint)


def jpeg(i):
    try:
        from PIL import Image
        im = Image.new("RGB", (8 + i % 5, 6 + i % 3), (i * 40 % 256, 80, 200 - i % 100))
        b = io.BytesIO()
        im.save(b, "JPEG", quality=80)
        return b.getvalue()
    except ImportError:  # JPEG-like bytes: SOI, APP0, random, EOI
        return b"\xff\xd8\xff\xe0\x00\x10JFIF\x00" + bytes(rnd.randrange(256) for _ in range(20 + 7 * i)) + b"\xff\xd9"


def fnv(b):
    h = 0xCBF29CE484222325
    for x in b:
        h = ((h ^ x) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def write(d, name, data):
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def dump(d, *args):
    try:
        r = run([DUMP, d] + list(args), timeout=60)
    except Exception as e:  # a hang (a FIFO opened blocking)
        return -999, "", str(e)
    return r.returncode, r.stdout, r.stderr


tmp = tempfile.mkdtemp(prefix="cnnc-tfr-")

# ---- good sets ----------------------------------------------------------------------------------
good = os.path.join(tmp, "good")
expect = []  # (len, label, hash) in record order
shards = []
unknown = (tag(7, 0) + varint(300) + tag(8, 1) + b"\1" * 8 + tag(9, 5) + b"\2" * 4 + ld(10, b"junk"))
for s, count in enumerate([4, 0, 5]):
    recs = b""
    for k in range(count):
        i = len(expect)
        img = jpeg(i)
        label = [1, 1000, 0, -1, 42, 7, 999, 2**40, 3][i]
        extra = unknown if i % 3 == 0 else b""
        ex = imagenet_example(img, label, packed=i % 2 == 0, extra=extra)
        if i == 4:  # Features in two parts (protobuf merges them), unknown fields inside Features
            ex = (ld(1, entry("image/class/label", int64_feature(label)) + tag(5, 0) + varint(1))
                  + ld(1, entry("image/encoded", bytes_feature(img)) + tag(6, 5) + b"\0" * 4))
        recs += record(ex)
        expect.append((len(img), label, fnv(img)))
    write(good, "train-%05d-of-00003" % s, recs)
val_img = jpeg(77)
write(good, "validation-00000-of-00001", record(imagenet_example(val_img, 500)))
write(good, "train-00000-of-00003.tmp", b"not a shard")  # other names are ignored
write(good, "train-0001-of-00003", b"not a shard")
write(good, "README", b"hello")

want = "records %d\n" % len(expect) + "".join("%d %d %d %016x\n" % (i, n, l, h) for i, (n, l, h) in enumerate(expect))
rc, out, err = dump(good)
checks.check(rc == 0 and out == want, "train: 3 shards (one empty), 9 records as written (rc %d: %s)" % (rc, (err or out)[:300]))
rc, out4, err = dump(good, "--threads", "4")
checks.check(rc == 0 and out4 == want, "train: 4 threads read the same (rc %d: %s)" % (rc, err[:200]))
rc, out, err = dump(good, "--test")
checks.check(rc == 0 and out == "records 1\n0 %d 500 %016x\n" % (len(val_img), fnv(val_img)),
             "validation split beside the train one (rc %d: %s)" % (rc, (err or out)[:200]))
rc, out, err = dump(good, "--describe", "5")
checks.check(out.strip() == good + "/train-00002-of-00003 record 1", "describe record 5: %r" % out.strip())
rc, out, err = dump(good + "/", "--describe", "0")
checks.check(out.strip() == good + "/train-00000-of-00003 record 0", "describe with DIR/: %r" % out.strip())
# TensorFlow Datasets' names (NAME-SPLIT.tfrecord-NNNNN-of-MMMMM) and keys (image, label)
tfds = os.path.join(tmp, "tfds")
tfds_img = [jpeg(30 + i) for i in range(3)]
write(tfds, "imagenet2012-train.tfrecord-00000-of-00002",
      record(example([("file_name", bytes_feature(b"a.JPEG")), ("image", bytes_feature(tfds_img[0])), ("label", int64_feature(5))]))
      + record(example([("label", int64_feature(0)), ("image", bytes_feature(tfds_img[1]))])))
write(tfds, "imagenet2012-train.tfrecord-00001-of-00002", record(example([("image", bytes_feature(tfds_img[2])), ("label", int64_feature(999))])))
write(tfds, "imagenet2012-validation.tfrecord-00000-of-00001", record(example([("image", bytes_feature(val_img)), ("label", int64_feature(3))])))
write(tfds, "dataset_info.json", b"{}")
rc, out, err = dump(tfds)
want_tfds = "records 3\n" + "".join("%d %d %d %016x\n" % (i, len(b), l, fnv(b)) for i, (b, l) in enumerate(zip(tfds_img, [5, 0, 999])))
checks.check(rc == 0 and out == want_tfds, "TFDS names and keys: 2 shards, 3 records (rc %d: %s)" % (rc, (err or out)[:300]))
rc, out, err = dump(tfds, "--test")
checks.check(rc == 0 and out == "records 1\n0 %d 3 %016x\n" % (len(val_img), fnv(val_img)), "TFDS validation split (rc %d: %s)" % (rc, (err or out)[:200]))
rc, out, err = dump(tfds, "--describe", "2")
checks.check(out.strip() == tfds + "/imagenet2012-train.tfrecord-00001-of-00002 record 0", "TFDS describe: %r" % out.strip())
r = run([DUMP, "--crc"])
checks.check(r.returncode == 0 and "crc ok" in r.stdout, "CRC32C: SSE4.2 and table agree (%s)" % (r.stdout + r.stderr).strip())

# ---- bad sets -----------------------------------------------------------------------------------
ok_recs = [record(imagenet_example(jpeg(i), i + 1)) for i in range(3)]


def offset_of(k):
    return sum(len(r) for r in ok_recs[:k])


def bad_case(name, files, phrases, test=False):
    d = os.path.join(tmp, name)
    os.makedirs(d, exist_ok=True)
    for fname, data in files.items():
        if data is None:
            os.makedirs(os.path.join(d, fname), exist_ok=True)
        elif data == "fifo":
            os.mkfifo(os.path.join(d, fname))
        else:
            write(d, fname, data)
    rc, out, err = dump(d, *(["--test"] if test else []))
    msg = err.strip()
    missing = [p for p in phrases if (p.replace("DIR", d)) not in msg]
    checks.check(rc == 1 and msg.startswith("tfr_dump: ") and not missing,
                 "%s: exit %d, %r%s" % (name, rc, msg[:400], " MISSING %r" % missing if missing else ""))


S1 = "DIR/train-00000-of-00001"
one = lambda *recs: {"train-00000-of-00001": b"".join(recs)}
r = ok_recs
hdr_bad = bytearray(r[2])
hdr_bad[9] ^= 0x10
bad_case("header_crc", one(r[0], r[1], bytes(hdr_bad)), [S1 + " record 2 (byte offset %d)" % offset_of(2), "header CRC mismatch"])
data_bad = bytearray(r[1])
data_bad[40] ^= 0x01
bad_case("data_crc", one(r[0], bytes(data_bad), r[2]), [S1 + " record 1 (byte offset %d)" % offset_of(1), "data CRC mismatch"])
bad_case("truncated_data", one(r[0], r[1], r[2][:-5]), [S1 + " record 2 (byte offset %d)" % offset_of(2), "truncated shard"])
bad_case("truncated_header", one(r[0], r[1], r[2][:7]), [S1 + " record 2", "truncated shard: 7 bytes of a 12-byte record header"])
bad_case("missing_shard", {"train-00000-of-00003": r[0], "train-00002-of-00003": r[1]},
         ["DIR: shard train-00001-of-00003 of the set is missing (2 of 3 present)"])
bad_case("missing_val", {"train-00000-of-00001": r[0]}, ["DIR: no TFRecord shards named validation-NNNNN-of-MMMMM"], test=True)
bad_case("two_sets", {"train-00000-of-00002": r[0], "train-00001-of-00003": r[1]}, ["DIR: shards of two sets"])
bad_case("two_names", {"train-00000-of-00002": r[0], "imagenet2012-train.tfrecord-00001-of-00002": r[1]}, ["DIR: shards of two sets"])
bad_case("tfds_missing", {"imagenet2012-train.tfrecord-00000-of-00002": r[0]},
         ["DIR: shard imagenet2012-train.tfrecord-00001-of-00002 of the set is missing (1 of 2 present)"])
bad_case("image_twice", one(record(example([("image/encoded", bytes_feature(b"abc")), ("image", bytes_feature(b"def")),
                                            ("label", int64_feature(1))]))),
         [S1 + " record 0", "feature image appears twice (image/encoded or image)"])
bad_case("beyond_set", {"train-00000-of-00001": r[0], "train-00004-of-00001": r[1]}, ["shard number 4 is outside its set of 1"])
bad_case("huge_record", one(r[0], record(b"x" * 10, length=1 << 60)),
         [S1 + " record 1 (byte offset %d)" % offset_of(1), "claims 1152921504606846976 bytes"])
bad_case("no_image", one(r[0], record(example([("image/class/label", int64_feature(3))]))),
         [S1 + " record 1", "has no feature image/encoded"])
bad_case("no_label", one(record(example([("image/encoded", bytes_feature(b"abc"))]))), [S1 + " record 0", "no feature image/class/label"])
bad_case("empty_example", one(record(b"")),
         [S1 + " record 0", "no feature image/encoded (or image) and no feature image/class/label (or label)"])
bad_case("label_bytes", one(record(example([("image/encoded", bytes_feature(b"abc")), ("image/class/label", bytes_feature(b"3"))]))),
         [S1 + " record 0", "feature image/class/label holds a bytes_list, expected an int64_list"])
bad_case("image_int64", one(record(example([("image/encoded", int64_feature(1)), ("image/class/label", int64_feature(3))]))),
         [S1 + " record 0", "feature image/encoded holds an int64_list, expected a bytes_list"])
bad_case("two_labels", one(record(example([("image/encoded", bytes_feature(b"abc")), ("image/class/label", int64_feature(3, 4))]))),
         [S1 + " record 0", "image/class/label holds 2 values, expected one"])
bad_case("two_images", one(record(example([("image/encoded", bytes_feature(b"a", b"b")), ("image/class/label", int64_feature(3))]))),
         [S1 + " record 0", "image/encoded holds 2 values, expected one"])
bad_case("dup_feature", one(record(example([("image/encoded", bytes_feature(b"a")), ("image/encoded", bytes_feature(b"b")),
                                            ("image/class/label", int64_feature(3))]))), ["feature image/encoded appears twice"])
bad_case("empty_image", one(record(example([("image/encoded", bytes_feature(b"")), ("image/class/label", int64_feature(3))]))),
         [S1 + " record 0", "image/encoded is empty"])
bad_case("no_kind", one(record(example([("image/encoded", b""), ("image/class/label", int64_feature(3))]))),
         ["feature image/encoded has no value"])
bad_case("overrun", one(record(tag(1, 2) + varint(1000) + b"abc")), [S1 + " record 0", "Example at its byte 0", "length 1000 runs past the end"])
bad_case("group", one(record(tag(1, 3) + b"\0")), [S1 + " record 0", "is a group (wire type 3)"])
bad_case("wire_type_7", one(record(ld(1, tag(2, 7)))), [S1 + " record 0", "Example at its byte 2", "invalid wire type 7"])
bad_case("varint_overflow", one(record(tag(3, 0) + b"\xff" * 10 + b"\x01")), [S1 + " record 0", "overflows 64 bits"])
bad_case("tag_cut", one(record(b"\x80")), [S1 + " record 0", "cut short"])
bad_case("field_zero", one(record(b"\x02\x00")), [S1 + " record 0", "field number 0"])
bad_case("packed_cut", one(record(example([("image/encoded", bytes_feature(b"a")), ("image/class/label", ld(3, ld(1, b"\x80")))]))),
         [S1 + " record 0", "packed int64 cut short"])
bad_case("all_empty", {"train-00000-of-00002": b"", "train-00001-of-00002": b""}, ["DIR: the 2 train shards hold no records"])
bad_case("dir_as_shard", {"train-00000-of-00001": None}, [S1 + ": cannot open: ", "directory"])
bad_case("fifo_as_shard", {"train-00000-of-00001": "fifo"}, [S1 + ": cannot open: ", "FIFO"])
bad_case("not_a_dir", {}, ["no TFRecord shards"])
rc, out, err = dump(os.path.join(tmp, "nonexistent"))
checks.check(rc == 1 and "cannot list the TFRecord directory" in err, "no such directory: %r" % err.strip())

# ---- mutations ----------------------------------------------------------------------------------
base = b"".join(ok_recs)
mut = os.path.join(tmp, "mut")
signals = 0
for k in range(300):
    b = bytearray(base)
    kind = k % 3
    if kind == 0:
        for _ in range(rnd.randrange(1, 6)):
            b[rnd.randrange(len(b))] = rnd.randrange(256)
    elif kind == 1:
        b = b[:rnd.randrange(len(b))]
    else:
        at = rnd.randrange(len(b))
        b[at:at] = bytes(rnd.randrange(256) for _ in range(rnd.randrange(1, 9)))
    # half of them with the CRCs made right again, so the Example parser sees the damage
    if k % 2 and kind == 0:
        out, at = bytearray(), 0
        for rr in ok_recs:
            data = bytes(b[at + 12: at + len(rr) - 4])
            out += record(data)
            at += len(rr)
        b = out
    write(mut, "train-00000-of-00001", bytes(b))
    rc, o, e = dump(mut)
    if rc not in (0, 1) or (rc == 1 and mut + "/train-00000-of-00001" not in e and mut not in e):
        signals += 1
        if signals <= 3:
            print("mutation %d: exit %d: %s" % (k, rc, e.strip()[:300]))
checks.check(signals == 0, "300 mutated shards: exit 0 or 1 naming the shard (%d bad)" % signals)

import shutil  # noqa: E402
shutil.rmtree(tmp, ignore_errors=True)
sys.exit(checks.summary())
