"""_model.py -- cnnrt.Model: one model .so opened with libcnnrt; ONNX Runtime-shaped inference
(run(None, {name: array})), device iterations, training steps, state and checkpoints.

Arrays go to the C library by pointer (no copy) when they are C-contiguous, aligned and of the
model's dtype; anything else is refused with InputError before a C call is made.  Every call
that uses the C model holds the model's lock, so a close waits for a call in progress on
another thread and a call after close raises instead of touching freed memory; the runtime
itself serialises runs on one model (docs/runtime.md "Threads and safety")."""
import ctypes
import json
import os
from collections import namedtuple

import numpy as np

from . import _lib
from ._lib import lib, check, CnnrtError, InputError, Handle

_NP_DTYPE = {_lib.F32: np.dtype(np.float32), _lib.BF16: np.dtype(np.uint16), _lib.F16: np.dtype(np.float16),
             _lib.U8: np.dtype(np.uint8), _lib.I32: np.dtype(np.int32), _lib.I8: np.dtype(np.int8),
             _lib.I64: np.dtype(np.int64)}
_HUGEPAGES = {"inference": 0, "off": 1, "all": 2}
_REPLICA = {"shared": 0, "parallel": 1}
STATE_KINDS = ("param", "optimizer", "buffer", "grad_accum")
_EVAL_CHUNK = 64  # micro-batches per cnnrt_evaluate call, as cnnrun's validation
_infer_c = lib.cnnrt_infer


class TensorInfo(namedtuple("TensorInfo", "name shape dtype type bytes")):
    """A model input or output: shape of one micro-batch (dim 0 = the batch size), numpy dtype
    (bf16 is shown as uint16: its raw bits), type the runtime's dtype name (f32, u8, ...),
    bytes of one micro-batch."""
    __slots__ = ()


class StateInfo(namedtuple("StateInfo", "name kind shape dtype type bytes")):
    """A tensor of a training model's state: kind is param, optimizer, buffer or grad_accum."""
    __slots__ = ()


def _tensor_info(t):
    return TensorInfo(t.name.decode(), tuple(int(d) for d in t.dims[:t.rank]), _NP_DTYPE.get(t.dtype),
                      _lib.DTYPE_NAMES[t.dtype] if 0 <= t.dtype < len(_lib.DTYPE_NAMES) else "?", int(t.bytes))


def _choice(what, value, table):
    if value not in table:
        raise InputError(_lib.INVALID_ARGUMENT, f"{what} {value!r}: not one of {', '.join(table)}")
    return table[value]


def checkpoint_step(path):
    """The "step" of a checkpoint written by Model.save / cnnrun train, without loading it."""
    step = ctypes.c_int64()
    check(lib.cnnrt_checkpoint_step(_lib.encode_path(path), ctypes.byref(step)))
    return step.value


class Model:
    """A model .so compiled by cnnc, opened with libcnnrt (cnnrt_open).

    threads: an int for every shard or a list with one per shard (default: the usable cores
    divided among the shards); pin: pin each shard's threads to its own cores; spin_us,
    hugepages ("inference", "off", "all"), replica_mode ("shared", "parallel"): the
    cnnrt_options fields of the same names (docs/runtime.md "Runtime options").  Close it with
    close() or a with block (the garbage collector closes it too)."""

    def __init__(self, path, threads=None, pin=False, spin_us=None, hugepages=None, replica_mode=None):
        self.path = os.fspath(path)
        self._h = None
        opts = _lib.default_options()
        opts.pin = 1 if pin else 0
        if spin_us is not None:
            opts.spin_us = int(spin_us)
        if hugepages is not None:
            opts.hugepages = _choice("hugepages", hugepages, _HUGEPAGES)
        if replica_mode is not None:
            opts.replica_mode = _choice("replica_mode", replica_mode, _REPLICA)
        ptr = ctypes.c_void_p()
        check(lib.cnnrt_open(_lib.encode_path(self.path), ctypes.byref(opts), ctypes.byref(ptr)))
        self._h = Handle(ptr.value, lib.cnnrt_close, f"model {self.path}")
        try:
            self._describe_tensors(ptr.value)
            if threads is not None:
                self.set_threads(threads)
        except BaseException:
            self.close()
            raise

    def _describe_tensors(self, p):
        self.name = lib.cnnrt_model_name(p).decode()
        self.batch_size = lib.cnnrt_batch_size(p)
        self.num_shards = lib.cnnrt_num_shards(p)
        self.compiler_version = lib.cnnrt_compiler_version(p).decode()
        self.flops = lib.cnnrt_model_flops(p)
        self.is_training = bool(lib.cnnrt_is_training(p))
        self.grad_accum = lib.cnnrt_grad_accum(p)  # micro-batches per update (x replicas); 0 = inference
        t = _lib.TensorInfoC()
        check(lib.cnnrt_input_info(p, ctypes.byref(t)))
        self.inputs = [_tensor_info(t)]
        outs = []
        for k in range(lib.cnnrt_num_outputs(p)):
            check(lib.cnnrt_output_info(p, k, ctypes.byref(t)))
            outs.append(_tensor_info(t))
        self.outputs = outs
        self._in = self.inputs[0]
        self._in_sample = self._in.shape[1:]
        self._in_sample_bytes = self._in.bytes // self.batch_size
        self._out_sample = [o.shape[1:] for o in outs]
        self._out_offsets = list(np.cumsum([0] + [o.bytes for o in outs])[:-1].tolist())
        self._in_bytes = lib.cnnrt_input_bytes(p)
        self._out_bytes = lib.cnnrt_output_bytes(p)
        self._out_names = {o.name: k for k, o in enumerate(outs)}
        self._single = len(outs) == 1
        self._out_dtype0 = outs[0].dtype if outs else None
        # classes of the loss: the logits' values per sample (training labels must lie below)
        self.classes = int(np.prod(outs[0].shape[1:])) if outs else 0

    # ---- ONNX Runtime's names -------------------------------------------------------------
    def get_inputs(self):
        return list(self.inputs)

    def get_outputs(self):
        return list(self.outputs)

    # ---- life -----------------------------------------------------------------------------
    def close(self):
        """Stops the model's threads and frees it (cnnrt_close); waits for a call in progress
        on another thread.  Later calls raise InputError; closing twice is fine."""
        if self._h is not None:
            self._h.close()

    @property
    def closed(self):
        return self._h is None or self._h.ptr is None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:  # interpreter shutdown: the library may be gone already
            pass

    def __repr__(self):
        state = "closed" if self.closed else f"batch {self.batch_size}, {self.num_shards} shard(s)"
        return f"<cnnrt.Model {self.name!r} ({'training' if self.is_training else 'inference'}, {state}) {self.path}>"

    # ---- queries and settings -------------------------------------------------------------
    def describe(self):
        """cnnrt_describe_json as a dict: tensors, shards with their ops, options, threads."""
        with self._h.lock:
            js = lib.cnnrt_describe_json(self._h.get())
            if js is None:
                check(_lib.INTERNAL)
            return json.loads(js.decode())

    @property
    def options(self):
        """The compile options embedded by cnnc, as a dict."""
        with self._h.lock:
            return json.loads(lib.cnnrt_options_json(self._h.get()).decode())

    @property
    def threads(self):
        """Threads of each shard (a list)."""
        with self._h.lock:
            p = self._h.get()
            return [lib.cnnrt_threads(p, s) for s in range(self.num_shards)]

    def set_threads(self, threads, shard=-1):
        """threads: an int (for shard, -1 = every shard) or a list of one count per shard."""
        with self._h.lock:
            p = self._h.get()
            if isinstance(threads, (list, tuple)):
                if len(threads) != self.num_shards:
                    raise InputError(_lib.INVALID_ARGUMENT,
                                     f"threads has {len(threads)} values, the model has {self.num_shards} shards")
                for s, t in enumerate(threads):
                    check(lib.cnnrt_set_threads(p, s, int(t)))
            else:
                check(lib.cnnrt_set_threads(p, int(shard), int(threads)))

    def set_cpus(self, cpus, shard=-1):
        """Pins shard's thread t (-1: every shard's) to cpus[t % len(cpus)]; [] unpins."""
        arr = (ctypes.c_int * max(1, len(cpus)))(*[int(c) for c in cpus])
        with self._h.lock:
            check(lib.cnnrt_set_cpus(self._h.get(), int(shard), arr, len(cpus)))

    def trace_begin(self, max_events=0):
        """Records the following runs for a Chrome/Perfetto trace (docs/reports.md)."""
        with self._h.lock:
            check(lib.cnnrt_trace_begin(self._h.get(), int(max_events)))

    def trace_write(self, path):
        with self._h.lock:
            check(lib.cnnrt_trace_write(self._h.get(), _lib.encode_path(path)))

    # ---- argument checks --------------------------------------------------------------------
    def _check_images(self, x, what):
        """x as the model's input: an ndarray [N, *sample] of its dtype, C-contiguous and
        aligned (passed by pointer).  Returns N."""
        name = self._in.name
        if not isinstance(x, np.ndarray):
            raise InputError(_lib.INVALID_ARGUMENT, f"{what} '{name}': expected a numpy.ndarray, got {type(x).__name__}")
        if x.dtype != self._in.dtype:
            raise InputError(_lib.INVALID_ARGUMENT, f"{what} '{name}': dtype {x.dtype}, the model takes {self._in.dtype} "
                             f"({self._in.type}); convert it with x.astype(numpy.{self._in.dtype})")
        if x.ndim != len(self._in.shape) or x.shape[1:] != self._in_sample or x.shape[0] == 0:
            raise InputError(_lib.SHAPE_MISMATCH, f"{what} '{name}': shape {x.shape}, the model takes "
                             f"(N, {', '.join(map(str, self._in_sample))}) with N >= 1 samples")
        if not x.flags.c_contiguous or not x.flags.aligned:
            raise InputError(_lib.INVALID_ARGUMENT, f"{what} '{name}': the array is not C-contiguous and aligned; "
                             "pass numpy.ascontiguousarray(x)")
        return x.shape[0]

    def _check_out(self, out, ks, n):
        if not isinstance(out, (list, tuple)) or len(out) != len(ks):
            raise InputError(_lib.INVALID_ARGUMENT, f"out: a list of {len(ks)} arrays expected (one per output returned)")
        for a, k in zip(out, ks):
            o, want = self.outputs[k], (n,) + self._out_sample[k]
            if not isinstance(a, np.ndarray) or a.dtype != o.dtype or a.shape != want:
                raise InputError(_lib.SHAPE_MISMATCH, f"out for output '{o.name}': want an ndarray {want} of {o.dtype}, got "
                                 f"{getattr(a, 'shape', type(a).__name__)} {getattr(a, 'dtype', '')}")
            if not (a.flags.c_contiguous and a.flags.aligned and a.flags.writeable):
                raise InputError(_lib.INVALID_ARGUMENT, f"out for output '{o.name}': not a C-contiguous, aligned, "
                                 "writeable array")
        return list(out)

    def _output_indices(self, output_names):
        if output_names is None:
            return list(range(len(self.outputs)))
        if isinstance(output_names, str):
            output_names = [output_names]
        ks = []
        for nm in output_names:
            if nm not in self._out_names:
                raise InputError(_lib.INVALID_ARGUMENT, f"no output named {nm!r}; the outputs are "
                                 f"{', '.join(repr(o.name) for o in self.outputs)}")
            ks.append(self._out_names[nm])
        return ks

    # ---- inference --------------------------------------------------------------------------
    def run(self, output_names, input_feed, run_options=None, *, out=None, pad=False):
        """ONNX Runtime's InferenceSession.run: input_feed maps the input's name to an array of
        N samples [N, C, H, W] of the input dtype, N a multiple of the micro-batch (pad=True:
        any N, the last micro-batch padded with zeros); the N / batch micro-batches run as
        device iterations of one cnnrt_infer call.  Returns a list of arrays [N, ...], one per
        name of output_names (None: every output, in order); out= a list of such arrays to
        fill instead.  The GIL is released during the call."""
        if output_names is None and out is None and type(input_feed) is dict and len(input_feed) == 1 and self._single:
            # the common call, checked and made with as little Python as possible (docs/python.md "Overhead")
            x = input_feed.get(self._in.name)
            if type(x) is np.ndarray and x.dtype == self._in.dtype and x.shape[1:] == self._in_sample:
                f, n = x.flags, x.shape[0]
                if f.c_contiguous and f.aligned and n and not n % self.batch_size:
                    y = np.empty((n,) + self._out_sample[0], self._out_dtype0)
                    h = self._h
                    with h.lock:
                        p = h.ptr
                        if p is None:
                            h.get()  # raises: closed
                        st = _infer_c(p, x.ctypes.data, x.nbytes, y.ctypes.data, y.nbytes, n // self.batch_size)
                    if st:
                        check(st)
                    return [y]
        if not isinstance(input_feed, dict):
            raise InputError(_lib.INVALID_ARGUMENT, f"input_feed: a dict {{name: array}} expected, got "
                             f"{type(input_feed).__name__}")
        name = self._in.name
        if len(input_feed) != 1 or name not in input_feed:
            raise InputError(_lib.INVALID_ARGUMENT, f"input_feed has {sorted(input_feed)!r}; the model's only input is "
                             f"{name!r}")
        return self._infer(input_feed[name], self._output_indices(output_names), out, pad, None)

    def run_batches(self, x, batches_per_call=None, *, output_names=None, out=None, pad=False):
        """Runs the samples of x (as run) in calls of batches_per_call micro-batches each
        (device iterations; default: all in one call), like cnnrun infer --batches."""
        if batches_per_call is not None and int(batches_per_call) < 1:
            raise InputError(_lib.INVALID_ARGUMENT, f"batches_per_call is {batches_per_call}, must be >= 1")
        return self._infer(x, self._output_indices(output_names), out, pad, batches_per_call)

    def _infer(self, x, ks, out, pad, per_call):
        n = self._check_images(x, "input")
        b = self.batch_size
        if n % b and not pad:
            raise InputError(_lib.SHAPE_MISMATCH, f"input '{self._in.name}': {n} samples is not a multiple of the "
                             f"micro-batch {b} (pad=True pads the last one with zeros)")
        res = self._check_out(out, ks, n) if out is not None else \
            [np.empty((n,) + self._out_sample[k], self.outputs[k].dtype) for k in ks]
        nmb = -(-n // b)
        per_call = nmb if per_call is None else min(int(per_call), nmb)
        direct = len(self.outputs) == 1 and ks == [0]  # the runtime's output buffer is the array itself
        ib, ob, sib = self._in_bytes, self._out_bytes, self._in_sample_bytes
        stage = padded = None
        h = self._h
        for mb0 in range(0, nmb, per_call):
            nb = min(per_call, nmb - mb0)
            s0, s1 = mb0 * b, min((mb0 + nb) * b, n)
            whole = s1 - s0 == nb * b
            if whole:
                in_ptr = x.ctypes.data + s0 * sib
            else:  # the last, partial micro-batch, padded with zeros (as cnnrun infer)
                padded = np.zeros(nb * ib, np.uint8)
                padded[:(s1 - s0) * sib] = x[s0:s1].reshape(-1).view(np.uint8)
                in_ptr = padded.ctypes.data
            if direct and whole:
                out_ptr, osize = res[0].ctypes.data + s0 * (ob // b), nb * ob
            else:
                if stage is None or stage.shape[0] < nb:
                    stage = np.empty((nb, ob), np.uint8)
                out_ptr, osize = stage.ctypes.data, nb * ob
            with h.lock:
                st = lib.cnnrt_infer(h.get(), in_ptr, nb * ib, out_ptr, osize, nb)
            if st:
                check(st)
            if not (direct and whole):
                self._unstage(stage[:nb], ks, res, s0, s1)
        return res

    def _unstage(self, stage, ks, res, s0, s1):
        """Copies outputs ks of the micro-batches in stage (per micro-batch: every output in
        order) to samples s0..s1 of res."""
        nb, b = stage.shape[0], self.batch_size
        for r, k in zip(res, ks):
            o, off = self.outputs[k], self._out_offsets[k]
            block = np.ascontiguousarray(stage[:, off:off + o.bytes]).view(o.dtype)
            r[s0:s1] = block.reshape((nb * b,) + self._out_sample[k])[:s1 - s0]

    # ---- training ---------------------------------------------------------------------------
    def _need_training(self, fn):
        if not self.is_training:
            raise CnnrtError(_lib.UNSUPPORTED, f"{fn}: {self.path} is an inference model (compile with --mode training)")

    def _labels(self, labels, n):
        """labels as a contiguous f32 array of n class ids in 0 .. classes-1 (checked: the
        generated loss reads the logit at the label's index)."""
        y = np.asarray(labels)
        if y.ndim != 1 or y.shape[0] != n:
            raise InputError(_lib.SHAPE_MISMATCH, f"labels: shape {y.shape}, want ({n},): one class id per image")
        if y.dtype.kind not in "iuf":
            raise InputError(_lib.INVALID_ARGUMENT, f"labels: dtype {y.dtype}; integer or float class ids expected")
        yf = np.ascontiguousarray(y, dtype=np.float32)
        bad = ~((yf >= 0) & (yf < self.classes) & (np.floor(yf) == yf))
        if bad.any():
            i = int(np.argmax(bad))
            raise InputError(_lib.INVALID_ARGUMENT, f"labels[{i}] is {y[i]}: class ids are integers 0..{self.classes - 1}")
        return yf

    def train_step(self, images, labels, steps=None):
        """Weight updates (device iterations) on images [n * grad_accum * batch, C, H, W] and
        their labels (class ids), all in one cnnrt_train_step call: n = the samples divided by
        batch x grad_accum (steps, if given, must equal it).  Returns (mean loss, accuracy)
        over the forward passes of the call."""
        self._need_training("train_step")
        n = self._check_images(images, "images")
        per = self.batch_size * self.grad_accum
        if n % per or (steps is not None and n != int(steps) * per):
            raise InputError(_lib.SHAPE_MISMATCH, f"images: {n} samples; a weight update takes {per} (batch "
                             f"{self.batch_size} x {self.grad_accum} micro-batches)" +
                             (f", {steps} steps take {int(steps) * per}" if steps is not None else ""))
        y = self._labels(labels, n)
        loss, acc = ctypes.c_float(), ctypes.c_float()
        with self._h.lock:
            st = lib.cnnrt_train_step(self._h.get(), images.ctypes.data, images.nbytes, y.ctypes.data, n // per,
                                      ctypes.byref(loss), ctypes.byref(acc))
        check(st)
        return loss.value, acc.value

    def train_step_mixed(self, images, rows, steps=None):
        """train_step with mixed labels (a model compiled with --mixed-labels): rows [n, 3] of
        (class a, class b, lam), the loss lam CE(a) + (1 - lam) CE(b) (docs/training.md); the
        runtime checks the rows (cnnrt_train_step_mixed).  Returns (mean loss, accuracy)."""
        self._need_training("train_step_mixed")
        n = self._check_images(images, "images")
        per = self.batch_size * self.grad_accum
        if n % per or (steps is not None and n != int(steps) * per):
            raise InputError(_lib.SHAPE_MISMATCH, f"images: {n} samples; a weight update takes {per}")
        r = np.ascontiguousarray(rows, dtype=np.float32)
        if r.shape != (n, 3):
            raise InputError(_lib.SHAPE_MISMATCH, f"rows: shape {r.shape}, want ({n}, 3): (a, b, lam) per image")
        loss, acc = ctypes.c_float(), ctypes.c_float()
        with self._h.lock:
            st = lib.cnnrt_train_step_mixed(self._h.get(), images.ctypes.data, images.nbytes, r.ctypes.data, n // per,
                                            ctypes.byref(loss), ctypes.byref(acc))
        check(st)
        return loss.value, acc.value

    def _evaluate_call(self, images, y, nmb):
        loss, acc = ctypes.c_float(), ctypes.c_float()
        with self._h.lock:
            st = lib.cnnrt_evaluate(self._h.get(), images.ctypes.data, nmb * self._in_bytes, y.ctypes.data, nmb,
                                    ctypes.byref(loss), ctypes.byref(acc))
        check(st)
        return loss.value, acc.value

    def evaluate(self, images, labels):
        """(mean loss, accuracy) of the eval program (no state change) over any number of
        samples, computed as cnnrun validates: calls of 64 micro-batches, then a last partial
        micro-batch padded with copies of its first sample whose own contribution is measured
        on a batch of copies and taken out."""
        self._need_training("evaluate")
        n = self._check_images(images, "images")
        y = self._labels(labels, n)
        b = self.batch_size
        nmb, r = divmod(n, b)
        lsum = hits = 0.0
        for first in range(0, nmb, _EVAL_CHUNK):
            k = min(_EVAL_CHUNK, nmb - first)
            s0 = first * b
            l, a = self._evaluate_call(images[s0:s0 + k * b], y[s0:s0 + k * b], k)
            lsum += float(l) * k * b
            hits += np.floor(float(a) * k * b + 0.5)
        if r:
            xs = np.empty((2 * b,) + self._in_sample, images.dtype)
            ys = np.empty(2 * b, np.float32)
            xs[:r], ys[:r] = images[nmb * b:], y[nmb * b:]
            xs[r:], ys[r:] = images[nmb * b], y[nmb * b]
            lp, ap = self._evaluate_call(xs[:b], ys[:b], 1)
            l0, a0 = self._evaluate_call(xs[b:], ys[b:], 1)
            lsum += float(lp) * b - float(l0) * (b - r)
            hits += np.floor(float(ap) * b + 0.5) - np.floor(float(a0) + 0.5) * (b - r)
        return float(np.float32(lsum / n)), float(np.float32(hits / n))

    def evaluate_samples(self, images, labels):
        """Per sample, as cnnrt_evaluate_samples: (loss float32 [n], the plain softmax
        cross-entropy of its logits against its label; rank int32 [n], the classes ranked
        before its label: 0 = a top-1 hit, < 5 = a top-5 hit).  Any number of samples: the
        last partial micro-batch is padded with copies of its first sample, whose rows are
        dropped."""
        self._need_training("evaluate_samples")
        n = self._check_images(images, "images")
        y = self._labels(labels, n)
        b = self.batch_size
        nmb = -(-n // b)
        loss = np.empty(nmb * b, np.float32)
        rank = np.empty(nmb * b, np.int32)
        for first in range(0, nmb, _EVAL_CHUNK):
            k = min(_EVAL_CHUNK, nmb - first)
            s0, real = first * b, min(k * b, n - first * b)
            xs, ys = images[s0:s0 + real], y[s0:s0 + real]
            if real < k * b:  # the partial micro-batch: copies of its first sample
                pad0 = real - real % b
                xs = np.concatenate([xs, np.repeat(xs[pad0:pad0 + 1], k * b - real, axis=0)])
                ys = np.concatenate([ys, np.repeat(ys[pad0:pad0 + 1], k * b - real)])
            xs, ys = np.ascontiguousarray(xs), np.ascontiguousarray(ys, np.float32)
            with self._h.lock:
                st = lib.cnnrt_evaluate_samples(self._h.get(), xs.ctypes.data, k * self._in_bytes, ys.ctypes.data, k,
                                                loss[s0:].ctypes.data_as(ctypes.POINTER(ctypes.c_float)),
                                                rank[s0:].ctypes.data_as(ctypes.POINTER(ctypes.c_int32)))
            check(st)
        return loss[:n], rank[:n]

    def evaluate_topk(self, images, labels):
        """{"loss", "top1", "top5"} over the samples (plain cross-entropy; top5 None with fewer
        than 5 classes), as cnnrun validate reports them."""
        loss, rank = self.evaluate_samples(images, labels)
        classes = self.outputs[0].shape[-1] if len(self.outputs[0].shape) >= 2 else 0
        return {"loss": float(np.mean(loss, dtype=np.float64)), "top1": float(np.mean(rank < 1)),
                "top5": float(np.mean(rank < 5)) if classes >= 5 else None}

    @property
    def steps_done(self):
        """Weight updates done so far (restored by restore())."""
        with self._h.lock:
            return int(lib.cnnrt_train_steps_done(self._h.get()))

    @property
    def learning_rate(self):
        """The lr fed to the last weight update (or the one set, before any); setting it
        removes any schedule."""
        with self._h.lock:
            return lib.cnnrt_learning_rate(self._h.get())

    @learning_rate.setter
    def learning_rate(self, lr):
        self.set_learning_rate(lr)

    def set_learning_rate(self, lr):
        self._need_training("set_learning_rate")
        with self._h.lock:
            check(lib.cnnrt_set_learning_rate(self._h.get(), float(lr)))

    def set_lr_schedule(self, schedule, steps_per_epoch):
        """Drives the lr from schedule (a cnnrt.LrSchedule; None removes it): before each
        weight update the runtime feeds schedule.lr_at(steps done / steps_per_epoch)."""
        self._need_training("set_lr_schedule")
        with self._h.lock:
            if schedule is None:
                check(lib.cnnrt_set_lr_schedule(self._h.get(), None, int(steps_per_epoch)))
            else:
                s, _keep = schedule._c()
                check(lib.cnnrt_set_lr_schedule(self._h.get(), ctypes.byref(s), int(steps_per_epoch)))

    def loss_scale(self):
        """(loss scale, skipped updates) of an --auto-loss-scaling model."""
        scale, skipped = ctypes.c_double(), ctypes.c_int64()
        with self._h.lock:
            check(lib.cnnrt_loss_scale(self._h.get(), ctypes.byref(scale), ctypes.byref(skipped)))
        return scale.value, skipped.value

    # ---- state and checkpoints --------------------------------------------------------------
    @property
    def state_info(self):
        """Every state tensor of a training model ([] for inference), as StateInfo."""
        if not self.is_training:
            return []
        out, t = [], _lib.StateInfoC()
        with self._h.lock:
            p = self._h.get()
            for i in range(lib.cnnrt_num_state(p)):
                check(lib.cnnrt_state_info_at(p, i, ctypes.byref(t)))
                out.append(StateInfo(t.name.decode(), STATE_KINDS[t.kind] if 0 <= t.kind < 4 else str(t.kind),
                                     tuple(int(d) for d in t.dims[:t.rank]), _NP_DTYPE.get(t.dtype),
                                     _lib.DTYPE_NAMES[t.dtype] if 0 <= t.dtype < len(_lib.DTYPE_NAMES) else "?", int(t.bytes)))
        return out

    def state_dict(self, kinds=("param", "optimizer", "buffer")):
        """A dict name -> copy of the state tensor (numpy; rank 0 for scalars), for the state
        kinds asked (default: what a checkpoint holds, except its "step": see steps_done)."""
        self._need_training("state_dict")
        d = {}
        infos = [s for s in self.state_info if s.kind in kinds]
        with self._h.lock:
            p = self._h.get()
            for s in infos:
                a = np.empty(s.shape, s.dtype)
                check(lib.cnnrt_get_state(p, s.name.encode(), a.ctypes.data, a.nbytes))
                d[s.name] = a
        return d

    def load_state_dict(self, state, strict=True):
        """Copies the arrays of state (name -> array of the tensor's shape; other float dtypes
        are converted) into the model.  strict: every param, optimizer and buffer tensor
        must be given.  Everything is checked before anything is copied."""
        self._need_training("load_state_dict")
        infos = {s.name: s for s in self.state_info}
        unknown = [k for k in state if k not in infos]
        missing = [k for k, s in infos.items() if s.kind != "grad_accum" and k not in state]
        if unknown or (strict and missing):
            raise InputError(_lib.INVALID_ARGUMENT, "load_state_dict: " + "; ".join(
                ([f"unknown tensors {unknown[:5]}"] if unknown else []) + ([f"missing {missing[:5]}"] if strict and missing else [])))
        arrays = []
        for k, v in state.items():
            s, a = infos[k], np.asarray(v)
            if a.shape != s.shape:
                raise InputError(_lib.SHAPE_MISMATCH, f"load_state_dict: '{k}' has shape {a.shape}, the model's is {s.shape}")
            if a.dtype != s.dtype and not np.can_cast(a.dtype, s.dtype, "same_kind"):
                raise InputError(_lib.INVALID_ARGUMENT, f"load_state_dict: '{k}' is {a.dtype}, the model's is {s.dtype}")
            arrays.append((k, np.ascontiguousarray(a, dtype=s.dtype)))
        with self._h.lock:
            p = self._h.get()
            for k, a in arrays:
                check(lib.cnnrt_set_state(p, k.encode(), a.ctypes.data, a.nbytes))

    def save(self, path):
        """Writes a checkpoint (safetensors: the state and "step", as cnnrun train)."""
        self._need_training("save")
        with self._h.lock:
            check(lib.cnnrt_save_checkpoint(self._h.get(), _lib.encode_path(path)))

    def restore(self, path):
        """Loads a checkpoint written by save() or cnnrun train: state and steps done."""
        self._need_training("restore")
        with self._h.lock:
            check(lib.cnnrt_load_checkpoint(self._h.get(), _lib.encode_path(path)))

    def save_weights(self, path):
        """Writes the params and buffers (batchnorm statistics) as safetensors for `cnnc
        --weights` (cnnc.compile(..., weights=path)): the trained model for inference."""
        from ._safetensors import save_safetensors
        return save_safetensors(path, self.state_dict(("param", "buffer")))

    def fit(self, dataset, **kw):
        """cnnrun train from Python: see cnnrt.fit."""
        from ._fit import fit
        return fit(self, dataset, **kw)
