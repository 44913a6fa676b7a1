"""_dataset.py -- cnnrt.Dataset: the runtime's in-memory image classification datasets
(cnnrt_dataset_*: Fashion-MNIST, MNIST, CIFAR-10/100, synthetic) and image folders decoded when
read, with cnnrun's sample order, so a
Python training run sees the same samples in the same order as cnnrun train."""
import ctypes

import numpy as np

from . import _lib
from ._lib import lib, check, InputError, Handle

DEFAULT_DIRS = {"fashion-mnist": "/usr/share/datasets/fashion-mnist", "mnist": "/usr/share/datasets/mnist",
                "cifar10": "/usr/share/datasets/cifar10", "cifar100": "/usr/share/datasets/cifar100"}
AUGMENT = {"imagenet": 0, "none": 1}


class Dataset:
    """Images u8 [N, C, H, W] and labels held by libcnnrt.  Make one with Dataset.open,
    Dataset.synthetic or Dataset.for_model; read samples in the current order with read()."""

    def __init__(self, ptr, what):
        self._h = Handle(ptr, lib.cnnrt_dataset_close, what)
        self.what = what

    @classmethod
    def open(cls, kind, data_dir=None, test=False):
        """The train (or test) split of kind: "fashion-mnist", "mnist", "cifar10" (idx / binary
        files in data_dir, default /usr/share/datasets/<kind>) or "synthetic" (1x28x28, 10
        classes)."""
        d = data_dir if data_dir is not None else DEFAULT_DIRS.get(kind, ".")
        p = ctypes.c_void_p()
        check(lib.cnnrt_dataset_open(str(kind).encode(), _lib.encode_path(d), 1 if test else 0, ctypes.byref(p)))
        return cls(p.value, f"dataset {kind} ({'test' if test else 'train'})")

    @classmethod
    def folder(cls, data_dir, shape, test=False, augment="imagenet", threads=None, skip_bad=False, tfrecord=False,
               classes=0, label_base=0):
        """An image folder (data_dir/train/CLASS/*.jpg|png or data_dir/val/...) decoded to shape
        (C, H, W) when read: augment "imagenet" (random-resized crop + flip; val: resize +
        centre crop) or "none" (resize); threads: decoder threads (None: half the cores);
        skip_bad: replace images that fail to decode instead of failing the read.  tfrecord:
        TensorFlow's ImageNet shards in data_dir (train-NNNNN-of-MMMMM, validation-..., or TFDS's
        NAME-train.tfrecord-NNNNN-of-MMMMM) with `classes` classes, label_base subtracted from
        the stored labels."""
        if augment not in AUGMENT:
            raise InputError(_lib.INVALID_ARGUMENT, f"folder: augment {augment!r}; 'imagenet' or 'none'")
        o = _lib.FolderOptions()
        lib.cnnrt_folder_options_init(ctypes.byref(o))
        o.channels, o.height, o.width = (int(v) for v in shape)
        o.augment = AUGMENT[augment]
        if threads is not None:
            o.threads = int(threads)
        o.skip_bad = 1 if skip_bad else 0
        o.classes, o.label_base = int(classes), int(label_base)
        p = ctypes.c_void_p()
        fn = lib.cnnrt_dataset_open_tfrecord if tfrecord else lib.cnnrt_dataset_open_folder
        check(fn(_lib.encode_path(data_dir), 1 if test else 0, ctypes.byref(o), ctypes.byref(p)))
        return cls(p.value, f"folder {data_dir} ({'val' if test else 'train'})")

    def class_name(self, k):
        """The name of class k (a folder's class folder)."""
        with self._h.lock:
            v = lib.cnnrt_dataset_class_name(self._h.get(), int(k))
        return v.decode(errors="replace") if v is not None else None

    def stats(self):
        """Images decoded, skipped and ignored, and the seconds reads took (folders)."""
        st = _lib.DatasetStats()
        with self._h.lock:
            lib.cnnrt_dataset_stats_get(self._h.get(), ctypes.byref(st))
        return {"decoded": st.decoded, "skipped": st.skipped, "ignored": st.ignored, "wait_seconds": st.wait_seconds,
                "last_skipped": st.last_skipped.decode(errors="replace")}

    @classmethod
    def synthetic(cls, n, c, h, w, classes, seed):
        """n samples of c x h x w, classes classes (2 .. min(256, h)), deterministic in seed."""
        p = ctypes.c_void_p()
        check(lib.cnnrt_dataset_synthetic(int(n), int(c), int(h), int(w), int(classes), int(seed), ctypes.byref(p)))
        return cls(p.value, f"synthetic dataset {n}x{c}x{h}x{w}")

    @classmethod
    def for_model(cls, model, kind="fashion-mnist", data_dir=None, test=False):
        """The dataset cnnrun train / validate --dataset kind would use for model: "synthetic"
        takes the model's input shape and min(classes, H, 256) classes, 1024 train samples
        (seed 1) or 256 test samples (seed 2); the sample shape must match the input's."""
        if kind == "synthetic":
            shp = model.inputs[0].shape
            if len(shp) != 4:
                raise InputError(_lib.INVALID_ARGUMENT, f"synthetic: the model input '{model.inputs[0].name}' is not [N, C, H, W]")
            out = model.outputs[0].shape
            classes = min(out[-1] if len(out) >= 2 else 2, shp[2], 256)
            ds = cls.synthetic(256 if test else 1024, shp[1], shp[2], shp[3], classes, 2 if test else 1)
        elif kind == "folder":
            shp = model.inputs[0].shape
            if len(shp) != 4 or data_dir is None:
                raise InputError(_lib.INVALID_ARGUMENT, "folder: needs data_dir and a [N, C, H, W] model input")
            ds = cls.folder(data_dir, shp[1:], test)
        else:
            ds = cls.open(kind, data_dir, test)
        per = int(np.prod(model.inputs[0].shape[1:]))
        if int(np.prod(ds.shape)) != per:
            ds.close()
            raise InputError(_lib.SHAPE_MISMATCH, f"{kind} samples are {'x'.join(map(str, ds.shape))}, the model input "
                             f"'{model.inputs[0].name}' takes {per} values per sample")
        return ds

    def close(self):
        self._h.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def __len__(self):
        with self._h.lock:
            return int(lib.cnnrt_dataset_size(self._h.get()))

    def _shape(self):
        c, h, w, k = (ctypes.c_int() for _ in range(4))
        with self._h.lock:
            lib.cnnrt_dataset_shape(self._h.get(), ctypes.byref(c), ctypes.byref(h), ctypes.byref(w), ctypes.byref(k))
        return (c.value, h.value, w.value), k.value

    @property
    def shape(self):
        """(C, H, W) of a sample."""
        return self._shape()[0]

    @property
    def classes(self):
        return self._shape()[1]

    def limit(self, n):
        """Keeps only the first n samples (file order again)."""
        with self._h.lock:
            check(lib.cnnrt_dataset_limit(self._h.get(), int(n)))

    def shuffle(self, seed):
        """Sets the sample order to the permutation of seed (0: file order), as cnnrun train
        does at the start of epoch e with seed + e."""
        with self._h.lock:
            lib.cnnrt_dataset_shuffle(self._h.get(), int(seed))

    def read(self, first, count, dtype=np.uint8, out=None):
        """Samples first .. first+count-1 in the current order: (images [count, C, H, W] of
        dtype uint8, or float32 = x/255, labels float32 [count]).  out: (images, labels)
        arrays of those shapes to fill instead."""
        dt = np.dtype(dtype)
        code = {np.dtype(np.uint8): _lib.U8, np.dtype(np.float32): _lib.F32}.get(dt)
        if code is None:
            raise InputError(_lib.INVALID_ARGUMENT, f"read: dtype {dt}; uint8 or float32")
        count = int(count)
        if out is None:
            x = np.empty((count,) + self.shape, dt)
            y = np.empty(count, np.float32)
        else:
            x, y = out
            if (not isinstance(x, np.ndarray) or x.dtype != dt or x.shape != (count,) + self.shape or not x.flags.c_contiguous
                    or not isinstance(y, np.ndarray) or y.dtype != np.float32 or y.shape != (count,) or not y.flags.c_contiguous):
                raise InputError(_lib.SHAPE_MISMATCH, f"read: out must be C-contiguous arrays {(count,) + self.shape} {dt} "
                                 f"and ({count},) float32")
        with self._h.lock:
            check(lib.cnnrt_dataset_read(self._h.get(), int(first), count, code, x.ctypes.data, y.ctypes.data))
        return x, y

    def __repr__(self):
        return f"<cnnrt.Dataset {self.what}>"

