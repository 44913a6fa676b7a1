"""_schedule.py -- learning-rate schedules and log periods: the runtime's pure functions
(cnnrt_lr_at, cnnrt_log_period, cnnrt_parse_fraction) behind Python objects, so a Python
training run feeds exactly the learning rates cnnrun train does."""
import ctypes

from . import _lib
from ._lib import lib, check, InputError

LR_KINDS = ("constant", "step", "cosine", "exponential")


class LrSchedule:
    """lr(e) for a fractional epoch e (docs/runtime.md "Training", runtime/cnnrt.h):
    kind constant, step (base_lr * factor^k, k = decay_epochs passed), cosine (over
    warmup_epochs .. total_epochs) or exponential (factor per epoch); each with a linear
    warmup from 0 over warmup_epochs.  factor defaults as cnnrun's --lr-factor: 0.1 for step,
    0.9 otherwise."""

    def __init__(self, kind="constant", base_lr=0.05, warmup_epochs=0.0, total_epochs=1.0, factor=None,
                 decay_epochs=()):
        if kind not in LR_KINDS:
            raise InputError(_lib.INVALID_ARGUMENT, f"lr schedule {kind!r}: not one of {', '.join(LR_KINDS)}")
        self.kind, self.base_lr = kind, float(base_lr)
        self.warmup_epochs, self.total_epochs = float(warmup_epochs), float(total_epochs)
        self.factor = float(factor) if factor is not None else (0.1 if kind == "step" else 0.9)
        self.decay_epochs = tuple(float(e) for e in decay_epochs)
        if any(b <= a for a, b in zip(self.decay_epochs, self.decay_epochs[1:])):
            raise InputError(_lib.INVALID_ARGUMENT, f"decay_epochs {self.decay_epochs}: not strictly increasing")
        if kind == "step" and not self.decay_epochs:
            raise InputError(_lib.INVALID_ARGUMENT, "lr schedule step needs decay_epochs")

    def _c(self):
        """(cnnrt_lr_schedule, the array it points to: keep both alive during the call)."""
        arr = (ctypes.c_double * max(1, len(self.decay_epochs)))(*self.decay_epochs)
        s = _lib.LrScheduleC(LR_KINDS.index(self.kind), self.base_lr, self.warmup_epochs, self.total_epochs,
                             self.factor, len(self.decay_epochs), ctypes.cast(arr, ctypes.POINTER(ctypes.c_double)))
        return s, arr

    def lr_at(self, epoch):
        """The learning rate at fractional epoch epoch (cnnrt_lr_at)."""
        s, _keep = self._c()
        return lib.cnnrt_lr_at(ctypes.byref(s), float(epoch))

    def __repr__(self):
        return (f"LrSchedule({self.kind!r}, base_lr={self.base_lr}, warmup_epochs={self.warmup_epochs}, "
                f"total_epochs={self.total_epochs}, factor={self.factor}, decay_epochs={self.decay_epochs})")


def parse_fraction(text):
    """"4", "0.5", "1/2" -> a float > 0 (cnnrt_parse_fraction)."""
    v = ctypes.c_double()
    check(lib.cnnrt_parse_fraction(str(text).encode(), ctypes.byref(v)))
    return v.value


def log_period(logs_per_epoch, steps_per_epoch, epochs):
    """(steps per log, logs per epoch as used, rounded?) as cnnrun train decides it
    (cnnrt_log_period); logs_per_epoch may be a number or a string such as "1/2"."""
    x = parse_fraction(logs_per_epoch) if isinstance(logs_per_epoch, str) else float(logs_per_epoch)
    p = _lib.LogPlanC()
    check(lib.cnnrt_log_period(x, int(steps_per_epoch), int(epochs), ctypes.byref(p)))
    return int(p.steps_per_log), p.logs_per_epoch, bool(p.rounded)
