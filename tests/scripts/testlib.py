"""testlib.py -- shared by the Python script tests (tests/scripts/test_*.py): SKIP, the exit status
ctest reads as "Skipped" (SKIP_RETURN_CODE of the script tests, tests/CMakeLists.txt; the shell
tests' lib.sh uses the same), and need_module(), which exits with it when an optional Python
module (PyTorch) is not installed, instead of failing on the import or passing silently."""
import importlib
import sys

SKIP = 77


def need_module(name, package):
    """Imports module name, or prints "skip: ..." and exits SKIP (package: where it comes from)."""
    try:
        return importlib.import_module(name)
    except ImportError as e:
        print(f"skip: no {name} ({package}): {e}", flush=True)
        sys.exit(SKIP)
