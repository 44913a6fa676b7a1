"""tfrecord_format.py -- TFRecord shards and tf.train.Example written by hand (CRC32C, the
record framing, protobuf wire format), for the tests that make TFRecords without TensorFlow
(test_tfrecord.py, test_folder_dataset.py)."""
import struct

_TAB = []
for i in range(256):
    c = i
    for _ in range(8):
        c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
    _TAB.append(c)


def crc32c(b):
    c = 0xFFFFFFFF
    for x in b:
        c = _TAB[(c ^ x) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


assert crc32c(b"123456789") == 0xE3069283


def mask(c):
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def record(data, length=None, hdr_crc=None, data_crc=None):
    n = struct.pack("<Q", len(data) if length is None else length)
    return (n + struct.pack("<I", mask(crc32c(n)) if hdr_crc is None else hdr_crc) + data
            + struct.pack("<I", mask(crc32c(data)) if data_crc is None else data_crc))


def varint(v):
    v &= (1 << 64) - 1  # negative int64: ten bytes, two's complement
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        out.append(b | (0x80 if v else 0))
        if not v:
            return bytes(out)


def tag(num, wt):
    return varint(num << 3 | wt)


def ld(num, payload):  # a length-delimited field
    return tag(num, 2) + varint(len(payload)) + payload


def bytes_feature(*values):
    return ld(1, b"".join(ld(1, v) for v in values))


def int64_feature(*values, packed=True):
    if packed:
        return ld(3, ld(1, b"".join(varint(v) for v in values)))
    return ld(3, b"".join(tag(1, 0) + varint(v) for v in values))


def float_feature(*values):
    return ld(2, ld(1, struct.pack("<%df" % len(values), *values)))


def entry(key, feature):
    return ld(1, ld(1, key.encode()) + ld(2, feature))


def example(entries, extra=b""):
    """entries: [(key, Feature bytes)] -> Example { Features { map } } (extra: raw bytes appended
    to the Example)."""
    return ld(1, b"".join(entry(k, f) for k, f in entries)) + extra


def imagenet_example(img, label, packed=True, extra=b""):
    """The features of TensorFlow's ImageNet shards (build_imagenet_data.py), the label last."""
    return example([("image/height", int64_feature(6)), ("image/width", int64_feature(8)),
                    ("image/colorspace", bytes_feature(b"RGB")), ("image/channels", int64_feature(3)),
                    ("image/class/synset", bytes_feature(b"n01440764")), ("image/class/text", bytes_feature(b"tench")),
                    ("image/object/bbox/xmin", float_feature(0.1, 0.2)), ("image/format", bytes_feature(b"JPEG")),
                    ("image/filename", bytes_feature(b"n01440764_10026.JPEG")), ("image/encoded", bytes_feature(img)),
                    ("image/class/label", int64_feature(label, packed=packed))], extra)
