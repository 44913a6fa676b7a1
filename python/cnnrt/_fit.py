"""_fit.py -- cnnrt.fit: cnnrun train's loop in Python over the same runtime calls (dataset
order, learning-rate schedule, log period, device iterations per call, checkpoints), so a
Python run writes the checkpoints cnnrun train writes, byte for byte."""
import os
import time

import numpy as np

from . import _lib
from ._lib import InputError
from ._dataset import Dataset
from ._schedule import LrSchedule, log_period


def _events(cb, log):
    def emit(ev):
        log.append(ev)
        if cb is not None:
            cb(ev)
    return emit


def fit(model, dataset, epochs=1, logs_per_epoch=1, lr=0.05, lr_schedule="constant", lr_decay_epochs=(),
        lr_factor=None, warmup_epochs=0.0, checkpoint_dir=None, restore=None, seed=1, limit=None, data_dir=None,
        validation=None, callback=None):
    """Trains model as `cnnrun MODEL.so train` does with the same options and returns the list
    of events (dicts as cnnrun train --json prints them: "log", "checkpoint", "validation").

    dataset: a cnnrt.Dataset, or a kind for Dataset.for_model ("fashion-mnist", "mnist",
    "cifar10", "synthetic"; data_dir as --data-dir).  Epoch e (counted from 0) reads the
    samples in the order of dataset.shuffle(seed + e) (seed 0: file order), steps per epoch =
    samples // (batch x grad_accum); each log period runs as train_step calls of several
    weight updates (at most one epoch per call) and ends with a "log" event and, with
    checkpoint_dir, a checkpoint DIR/ckpt-step-NNNNNNNN.safetensors.  lr_schedule: a kind with
    lr, lr_decay_epochs, lr_factor, warmup_epochs (as --lr-schedule and its options) or a
    cnnrt.LrSchedule.  restore: a checkpoint to start from (a run restored mid-epoch reads the
    rest of that epoch in its shuffled order).  validation: a Dataset, or True for the test
    split of the dataset kind, evaluated at the end ("validation" event).  callback(event) is
    called as each event happens."""
    model._need_training("fit")
    log = []
    emit = _events(callback, log)
    own = isinstance(dataset, str)
    kind = dataset if own else None
    ds = Dataset.for_model(model, dataset, data_dir) if own else dataset
    try:
        if limit:
            ds.limit(min(int(limit), len(ds)))
        per_step = model.batch_size * model.grad_accum
        spe = len(ds) // per_step
        if spe < 1:
            raise InputError(_lib.INVALID_ARGUMENT, f"{len(ds)} training samples, fewer than one step of {per_step}")
        total = spe * int(epochs)
        spl, _used, _rounded = log_period(logs_per_epoch, spe, epochs)
        sched = lr_schedule if isinstance(lr_schedule, LrSchedule) else LrSchedule(
            lr_schedule, lr, warmup_epochs, epochs, lr_factor, lr_decay_epochs)
        if checkpoint_dir:
            os.makedirs(checkpoint_dir, exist_ok=True)
        if restore:
            model.restore(restore)
        step = model.steps_done
        model.set_lr_schedule(sched, spe)
        rows = min(spl, spe) * per_step
        x = np.empty((rows,) + model.inputs[0].shape[1:], model.inputs[0].dtype)
        y = np.empty(rows, np.float32)
        ordered = -1  # the epoch whose order ds has
        while step < total:
            end = min((step // spl + 1) * spl, total)
            t0, lsum, asum, done = time.monotonic(), 0.0, 0.0, 0
            while step < end:
                in_epoch, epoch = step % spe, step // spe
                n = min(end - step, spe - in_epoch)
                if epoch != ordered:
                    ds.shuffle(seed + epoch if seed else 0)
                    ordered = epoch
                k = n * per_step
                ds.read(in_epoch * per_step, k, x.dtype, out=(x[:k], y[:k]))
                loss, acc = model.train_step(x[:k], y[:k])
                lsum, asum, done, step = lsum + float(loss) * n, asum + float(acc) * n, done + n, step + n
            dt = time.monotonic() - t0
            ev = {"event": "log", "epoch": step / spe, "step": step, "loss": lsum / done, "accuracy": asum / done,
                  "lr": model.learning_rate, "images_per_second": done * per_step / (dt if dt > 0 else 1e-9)}
            try:
                ev["loss_scale"], ev["skipped_steps"] = model.loss_scale()
            except _lib.CnnrtError:
                pass
            emit(ev)
            if checkpoint_dir:
                path = os.path.join(checkpoint_dir, "ckpt-step-%08d.safetensors" % step)
                model.save(path)
                emit({"event": "checkpoint", "step": step, "path": path})
        if validation is not None and validation is not False:
            if validation is True:
                if kind is None:
                    raise InputError(_lib.INVALID_ARGUMENT, "validation=True needs dataset given by name")
                with Dataset.for_model(model, kind, data_dir, test=True) as test:
                    emit(_validate(model, test, step))
            else:
                emit(_validate(model, validation, step))
    finally:
        if own:
            ds.close()
    return log


def _validate(model, test, step):
    n = len(test)
    images, labels = test.read(0, n, model.inputs[0].dtype)
    loss, acc = model.evaluate(images, labels)
    return {"event": "validation", "step": step, "samples": n, "loss": loss, "accuracy": acc}
