"""_safetensors.py -- reading and writing safetensors files with numpy (the format of cnnrun's
checkpoints and of cnnc --weights): an 8-byte little-endian header length, a JSON header
{name: {dtype, shape, data_offsets}, "__metadata__": {...}}, then the data, little-endian."""
import json
import os

import numpy as np

_DT = {"F32": "<f4", "F16": "<f2", "I32": "<i4", "I64": "<i8", "U8": "u1", "I8": "i1", "F64": "<f8", "BF16": "<u2",
       "U16": "<u2", "I16": "<i2", "BOOL": "?"}
_NAME = {np.dtype("float32"): "F32", np.dtype("float16"): "F16", np.dtype("int32"): "I32", np.dtype("int64"): "I64",
         np.dtype("uint8"): "U8", np.dtype("int8"): "I8", np.dtype("float64"): "F64", np.dtype("int16"): "I16",
         np.dtype("uint16"): "U16", np.dtype("bool"): "BOOL"}


def load_safetensors(path):
    """(tensors: dict name -> numpy array, metadata: dict) of a safetensors file, e.g. a
    checkpoint of Model.save / cnnrun train (its "step" is an I64 scalar)."""
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 8:
        raise ValueError(f"{path}: not a safetensors file (shorter than 8 bytes)")
    n = int.from_bytes(data[:8], "little")
    if n > len(data) - 8:
        raise ValueError(f"{path}: header of {n} bytes in a file of {len(data)}")
    header = json.loads(data[8:8 + n].decode())
    meta = header.pop("__metadata__", {}) or {}
    base, out = 8 + n, {}
    for name, t in header.items():
        if t["dtype"] not in _DT:
            raise ValueError(f"{path}: tensor '{name}': dtype {t['dtype']} not supported")
        b, e = t["data_offsets"]
        a = np.frombuffer(data, _DT[t["dtype"]], count=(e - b) // np.dtype(_DT[t["dtype"]]).itemsize, offset=base + b)
        out[name] = a.reshape(t["shape"]).astype(a.dtype.newbyteorder("="))
    return out, meta


def save_safetensors(path, tensors, metadata=None):
    """Writes tensors (name -> array) to path as safetensors, names in sorted order, with
    metadata (str -> str) under __metadata__ when given; returns path."""
    header, blobs, off = {}, [], 0
    for name in sorted(tensors):
        a = np.asarray(tensors[name])
        if a.dtype not in _NAME:
            raise ValueError(f"tensor '{name}': dtype {a.dtype} has no safetensors name here")
        b = np.ascontiguousarray(a, a.dtype.newbyteorder("<")).tobytes()
        header[name] = {"dtype": _NAME[a.dtype], "shape": list(a.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    tmp = f"{os.fspath(path)}.tmp.{os.getpid()}"
    with open(tmp, "wb") as f:
        f.write(len(h).to_bytes(8, "little"))
        f.write(h)
        for b in blobs:
            f.write(b)
    os.replace(tmp, path)
    return os.fspath(path)
