"""_lib.py -- finds and loads libcnnrt with ctypes, declares the C API of runtime/cnnrt.h
(structs and prototypes), and turns a failed call into CnnrtError.

Where libcnnrt comes from, first match wins (docs/python.md "Where the library comes from"):
  1. $CNNRT_LIBRARY, the path of libcnnrt.so;
  2. _config.py beside this file, written by CMake: the build tree's libcnnrt (build/python)
     or the installed one (cmake --install);
  3. a build/ directory next to python/ when the package is imported from the source tree;
  4. the dynamic loader's search (LD_LIBRARY_PATH, ldconfig) for libcnnrt.so.
ctypes.CDLL releases the GIL around every call into the library."""
import ctypes
import ctypes.util
import os
import threading

_HERE = os.path.dirname(os.path.abspath(__file__))

# cnnrt_status (stable values) and cnnrt_dtype.
STATUS_NAMES = ("OK", "INVALID_ARGUMENT", "IO", "BAD_MODEL", "ABI_MISMATCH", "SHAPE_MISMATCH", "OUT_OF_MEMORY",
                "UNSUPPORTED", "INTERNAL")
OK, INVALID_ARGUMENT, IO, BAD_MODEL, ABI_MISMATCH, SHAPE_MISMATCH, OUT_OF_MEMORY, UNSUPPORTED, INTERNAL = range(9)
F32, BF16, F16, U8, I32, I8, I64 = range(7)
DTYPE_NAMES = ("f32", "bf16", "f16", "u8", "i32", "i8", "i64")


class CnnrtError(Exception):
    """A failed libcnnrt call (or a request the binding refused before calling it): .status is
    the cnnrt_status value (an int; .status_name its name) and .message the runtime's message
    (cnnrt_last_error, read on the calling thread right after the call)."""

    def __init__(self, status, message):
        self.status = int(status)
        self.message = message
        super().__init__(message)

    @property
    def status_name(self):
        return STATUS_NAMES[self.status] if 0 <= self.status < len(STATUS_NAMES) else "UNKNOWN"

    def __str__(self):
        return f"{self.message} [{self.status_name}]"


class InputError(CnnrtError, ValueError):
    """Bad input caught by the binding before any C call: wrong name, dtype, shape, layout,
    label, or a closed model.  Also a ValueError."""


def _config_value(name):
    try:
        from . import _config  # written by CMake into the build tree's and the installed copy
    except ImportError:
        return None
    return getattr(_config, name, None)


def _candidates():
    env = os.environ.get("CNNRT_LIBRARY")
    if env:
        return [("$CNNRT_LIBRARY", env)]  # an explicit choice: nothing else is tried
    out = []
    cfg = _config_value("LIBCNNRT")
    if cfg:
        out.append(("_config.py", cfg))
    src_build = os.path.join(os.path.dirname(os.path.dirname(_HERE)), "build", "libcnnrt.so")
    out.append(("source tree", src_build))
    found = ctypes.util.find_library("cnnrt")
    out.append(("loader search", found or "libcnnrt.so"))
    return out


def _load():
    tried = []
    cands = _candidates()
    for where, path in cands:
        if os.sep in path and not os.path.exists(path):
            tried.append(f"{where}: {path} (missing)")
            continue
        try:
            return ctypes.CDLL(path), path
        except OSError as e:
            tried.append(f"{where}: {path} ({e})")
    raise ImportError("cnnrt: libcnnrt.so not found; set CNNRT_LIBRARY to its path.  Tried: " + "; ".join(tried))


class TensorInfoC(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("dtype", ctypes.c_int), ("rank", ctypes.c_int),
                ("dims", ctypes.c_int64 * 4), ("bytes", ctypes.c_size_t)]


class StateInfoC(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("dtype", ctypes.c_int), ("kind", ctypes.c_int), ("rank", ctypes.c_int),
                ("dims", ctypes.c_int64 * 4), ("bytes", ctypes.c_size_t)]


class OptionsC(ctypes.Structure):
    """cnnrt_options as this binding knows it; struct_size tells the runtime how much of it."""
    _fields_ = [("struct_size", ctypes.c_uint32), ("threads_per_shard", ctypes.c_int), ("pin", ctypes.c_int),
                ("allocator", ctypes.c_void_p), ("spin_us", ctypes.c_int), ("hugepages", ctypes.c_int),
                ("replica_mode", ctypes.c_int)]


class LrScheduleC(ctypes.Structure):
    _fields_ = [("kind", ctypes.c_int), ("base_lr", ctypes.c_double), ("warmup_epochs", ctypes.c_double),
                ("total_epochs", ctypes.c_double), ("factor", ctypes.c_double), ("n_decay", ctypes.c_int),
                ("decay_epochs", ctypes.POINTER(ctypes.c_double))]


class LogPlanC(ctypes.Structure):
    _fields_ = [("steps_per_log", ctypes.c_int64), ("logs_per_epoch", ctypes.c_double), ("rounded", ctypes.c_int)]


class FolderOptions(ctypes.Structure):
    _fields_ = [("channels", ctypes.c_int), ("height", ctypes.c_int), ("width", ctypes.c_int), ("augment", ctypes.c_int),
                ("threads", ctypes.c_int), ("skip_bad", ctypes.c_int), ("classes", ctypes.c_int), ("label_base", ctypes.c_int)]


class DatasetStats(ctypes.Structure):
    _fields_ = [("decoded", ctypes.c_int64), ("skipped", ctypes.c_int64), ("ignored", ctypes.c_int64),
                ("wait_seconds", ctypes.c_double), ("last_skipped", ctypes.c_char * 512)]


_P, _S, _I, _I64, _D, _F = ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int64, ctypes.c_double, ctypes.c_float
_CS = ctypes.c_char_p
_PF = ctypes.POINTER(ctypes.c_float)

# name: (restype, argtypes).  Pointers to numpy data are passed as c_void_p integers.
_PROTOS = {
    "cnnrt_last_error": (_CS, []),
    "cnnrt_status_name": (_CS, [_I]),
    "cnnrt_version": (_CS, []),
    "cnnrt_options_init": (None, [_P]),
    "cnnrt_open": (_I, [_CS, ctypes.POINTER(OptionsC), ctypes.POINTER(_P)]),
    "cnnrt_close": (None, [_P]),
    "cnnrt_model_name": (_CS, [_P]),
    "cnnrt_batch_size": (_I, [_P]),
    "cnnrt_num_shards": (_I, [_P]),
    "cnnrt_num_outputs": (_I, [_P]),
    "cnnrt_compiler_version": (_CS, [_P]),
    "cnnrt_model_flops": (_D, [_P]),
    "cnnrt_input_info": (_I, [_P, ctypes.POINTER(TensorInfoC)]),
    "cnnrt_output_info": (_I, [_P, _I, ctypes.POINTER(TensorInfoC)]),
    "cnnrt_input_bytes": (_S, [_P]),
    "cnnrt_output_bytes": (_S, [_P]),
    "cnnrt_options_json": (_CS, [_P]),
    "cnnrt_describe_json": (_CS, [_P]),
    "cnnrt_set_threads": (_I, [_P, _I, _I]),
    "cnnrt_set_cpus": (_I, [_P, _I, ctypes.POINTER(_I), _I]),
    "cnnrt_threads": (_I, [_P, _I]),
    "cnnrt_infer": (_I, [_P, _P, _S, _P, _S, _I]),
    "cnnrt_trace_begin": (_I, [_P, _S]),
    "cnnrt_trace_write": (_I, [_P, _CS]),
    "cnnrt_is_training": (_I, [_P]),
    "cnnrt_grad_accum": (_I, [_P]),
    "cnnrt_train_steps_done": (_I64, [_P]),
    "cnnrt_set_learning_rate": (_I, [_P, _D]),
    "cnnrt_learning_rate": (_D, [_P]),
    "cnnrt_set_lr_schedule": (_I, [_P, ctypes.POINTER(LrScheduleC), _I64]),
    "cnnrt_train_step": (_I, [_P, _P, _S, _P, _I, _PF, _PF]),
    "cnnrt_train_step_mixed": (_I, [_P, _P, _S, _P, _I, _PF, _PF]),
    "cnnrt_mixed_labels": (_I, [_P]),
    "cnnrt_loss_scale": (_I, [_P, ctypes.POINTER(_D), ctypes.POINTER(_I64)]),
    "cnnrt_evaluate": (_I, [_P, _P, _S, _P, _I, _PF, _PF]),
    "cnnrt_evaluate_samples": (_I, [_P, _P, _S, _P, _I, _PF, ctypes.POINTER(ctypes.c_int32)]),
    "cnnrt_num_state": (_I, [_P]),
    "cnnrt_state_info_at": (_I, [_P, _I, ctypes.POINTER(StateInfoC)]),
    "cnnrt_get_state": (_I, [_P, _CS, _P, _S]),
    "cnnrt_set_state": (_I, [_P, _CS, _P, _S]),
    "cnnrt_save_checkpoint": (_I, [_P, _CS]),
    "cnnrt_load_checkpoint": (_I, [_P, _CS]),
    "cnnrt_checkpoint_step": (_I, [_CS, ctypes.POINTER(_I64)]),
    "cnnrt_lr_at": (_D, [ctypes.POINTER(LrScheduleC), _D]),
    "cnnrt_lr_kind_parse": (_I, [_CS, ctypes.POINTER(_I)]),
    "cnnrt_log_period": (_I, [_D, _I64, _I, ctypes.POINTER(LogPlanC)]),
    "cnnrt_parse_fraction": (_I, [_CS, ctypes.POINTER(_D)]),
    "cnnrt_dataset_open": (_I, [_CS, _CS, _I, ctypes.POINTER(_P)]),
    "cnnrt_dataset_synthetic": (_I, [_I64, _I, _I, _I, _I, ctypes.c_uint64, ctypes.POINTER(_P)]),
    "cnnrt_dataset_close": (None, [_P]),
    "cnnrt_dataset_size": (_I64, [_P]),
    "cnnrt_dataset_shape": (None, [_P, ctypes.POINTER(_I), ctypes.POINTER(_I), ctypes.POINTER(_I), ctypes.POINTER(_I)]),
    "cnnrt_dataset_limit": (_I, [_P, _I64]),
    "cnnrt_dataset_shuffle": (None, [_P, ctypes.c_uint64]),
    "cnnrt_dataset_read": (_I, [_P, _I64, _I64, _I, _P, _P]),
    "cnnrt_dataset_open_folder": (_I, [_CS, _I, ctypes.POINTER(FolderOptions), ctypes.POINTER(_P)]),
    "cnnrt_dataset_open_tfrecord": (_I, [_CS, _I, ctypes.POINTER(FolderOptions), ctypes.POINTER(_P)]),
    "cnnrt_folder_options_init": (None, [ctypes.POINTER(FolderOptions)]),
    "cnnrt_dataset_class_name": (_CS, [_P, _I]),
    "cnnrt_dataset_stats_get": (None, [_P, ctypes.POINTER(DatasetStats)]),
}

lib, path = _load()
for _name, (_res, _args) in _PROTOS.items():
    try:
        _fn = getattr(lib, _name)
    except AttributeError as _e:
        raise ImportError(f"cnnrt: {path} lacks {_name}: an older libcnnrt than this binding") from _e
    _fn.restype, _fn.argtypes = _res, _args


def last_error():
    """cnnrt_last_error() of the calling thread, as str."""
    return lib.cnnrt_last_error().decode("utf-8", "replace")


def check(status):
    """Raises CnnrtError(status, cnnrt_last_error()) unless status is CNNRT_OK; call it on the
    thread that made the call, before any other cnnrt_ call (the message is thread-local)."""
    if status != OK:
        raise CnnrtError(status, last_error() or f"libcnnrt call failed (status {status})")


def encode_path(p):
    return os.fsencode(os.fspath(p))


def version():
    """The runtime's version and model ABI, e.g. "0.1.0 (model ABI 1)"."""
    return lib.cnnrt_version().decode()


def default_options():
    """A cnnrt_options filled by cnnrt_options_init (in a buffer big enough for a newer runtime's
    struct), struct_size set to what this binding passes."""
    buf = ctypes.create_string_buffer(1024)
    lib.cnnrt_options_init(buf)
    o = OptionsC.from_buffer_copy(buf.raw[:ctypes.sizeof(OptionsC)])
    o.struct_size = ctypes.sizeof(OptionsC)
    return o


class Handle:
    """An owned C pointer with the lock that serialises its users and its close: closing
    waits for a call in progress on another thread, and a call after close raises."""

    def __init__(self, ptr, closer, what):
        self.ptr, self._closer, self.what = ptr, closer, what
        self.lock = threading.Lock()

    def get(self):
        """The pointer (call with self.lock held); raises InputError once closed."""
        p = self.ptr
        if p is None:
            raise InputError(INVALID_ARGUMENT, f"{self.what} is closed")
        return p

    def close(self):
        with self.lock:
            p, self.ptr = self.ptr, None
            if p is not None and self._closer is not None:
                self._closer(p)
