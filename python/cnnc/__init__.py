"""cnnc -- the cnnc compiler from Python: runs the cnnc executable (docs/python.md).

    import cnnc
    cnnc.compile("models/resnet50.yml", "resnet50.so", batch_size=16, shards=2)

Keyword options are cnnc's command-line options with '_' for '-' (batch_size=16 ->
--batch-size=16; True -> a flag, False / None -> left out; a list -> comma-separated; a dict
-> name=value pairs, for tune={"winograd": 0}).  A failed compile raises CompileError carrying
cnnc's exit status and stderr.

Which cnnc runs, first match wins: $CNNC_EXECUTABLE; _config.py beside this file (written by
CMake: the build tree's cnnc, or the installed one); a build/ directory next to python/ in the
source tree; cnnc on $PATH."""
import os
import shutil
import subprocess

__all__ = ["compile", "run", "version", "executable", "CompileError"]
__version__ = "0.1.0"

_HERE = os.path.dirname(os.path.abspath(__file__))


class CompileError(RuntimeError):
    """cnnc exited non-zero: .returncode (1 error in the model or the compile, 2 usage), .stderr
    (cnnc's messages), .cmd (the command line)."""

    def __init__(self, returncode, stderr, cmd):
        self.returncode, self.stderr, self.cmd = returncode, stderr, cmd
        super().__init__(f"cnnc failed (exit {returncode}): {stderr.strip()}")


def executable():
    """The path of the cnnc executable this module runs (see the module's doc)."""
    env = os.environ.get("CNNC_EXECUTABLE")
    if env:
        return env
    try:
        from . import _config
        if os.path.exists(_config.CNNC):
            return _config.CNNC
    except (ImportError, AttributeError):
        pass
    src_build = os.path.join(os.path.dirname(os.path.dirname(_HERE)), "build", "cnnc")
    if os.path.exists(src_build):
        return src_build
    found = shutil.which("cnnc")
    if found:
        return found
    raise FileNotFoundError("cnnc: the cnnc executable was not found; set CNNC_EXECUTABLE to its path")


def _option(name, value):
    """The command-line words of keyword option name=value ([] when value is None or False)."""
    if not name.isidentifier():
        raise ValueError(f"cnnc option {name!r}: not a name")
    flag = "--" + name.replace("_", "-")
    if value is None or value is False:
        return []
    if value is True:
        return [flag]
    if isinstance(value, dict):
        value = ",".join(f"{k}={int(v) if isinstance(v, bool) else v}" for k, v in value.items())
    elif isinstance(value, (list, tuple)):
        value = ",".join(str(v) for v in value)
    return [f"{flag}={value}"]


def run(args, check=True):
    """Runs cnnc with the list args; returns the CompletedProcess (text stdout and stderr).
    check: raise CompileError on a non-zero exit."""
    cmd = [executable()] + [os.fspath(a) for a in args]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if check and r.returncode != 0:
        raise CompileError(r.returncode, r.stderr or r.stdout, cmd)
    return r


def compile(model_path, out_path, **options):  # noqa: A001 -- the verb of the issue's API
    """Compiles the model file model_path (YAML) into the shared object out_path with cnnc's
    options given as keywords; returns out_path.  Raises CompileError with cnnc's stderr."""
    args = [os.fspath(model_path), "-o", os.fspath(out_path)]
    for k, v in options.items():
        args += _option(k, v)
    run(args)
    return os.fspath(out_path)


def version():
    """`cnnc --version`'s first line."""
    return run(["--version"]).stdout.strip().splitlines()[0]
