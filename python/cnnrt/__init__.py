"""cnnrt -- Python binding of libcnnrt, the cnnc runtime (runtime/cnnrt.h), over ctypes and
numpy: no build step.  docs/python.md is the guide.

    import cnnrt, numpy as np
    with cnnrt.Model("resnet50.so") as m:
        (logits,) = m.run(None, {m.inputs[0].name: images})   # as onnxruntime's run

Model (inference, training, state, checkpoints), Dataset (the runtime's datasets),
LrSchedule, fit (cnnrun train's loop), load_safetensors / save_safetensors (checkpoints and
weights files as numpy), CnnrtError / InputError (failures, with the runtime's message and
status).  $CNNRT_LIBRARY overrides which libcnnrt.so is loaded."""
from ._lib import CnnrtError, InputError, version, STATUS_NAMES, path as library_path
from ._model import Model, TensorInfo, StateInfo, checkpoint_step
from ._dataset import Dataset
from ._schedule import LrSchedule, log_period, parse_fraction
from ._fit import fit
from ._safetensors import load_safetensors, save_safetensors

__all__ = ["Model", "Dataset", "LrSchedule", "fit", "CnnrtError", "InputError", "TensorInfo", "StateInfo",
           "checkpoint_step", "load_safetensors", "save_safetensors", "log_period", "parse_fraction", "version", "library_path", "STATUS_NAMES"]
__version__ = "0.1.0"
