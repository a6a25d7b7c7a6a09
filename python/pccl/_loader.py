"""Finds libpccl and opens it with cffi (ABI mode).

Search order, first that loads wins:
  1. $PCCL_LIBRARY (a file, or a directory holding libpccl.so); when set, nothing else is tried,
     so a wrong value fails loudly instead of silently picking another copy;
  2. next to this package (libpccl.so, libpccl.so.0: a wheel or a copy placed by hand);
  3. the library directory recorded by `cmake --install` in _install_libdir.py;
  4. the system loader (libpccl.so.0 through ld.so.cache / LD_LIBRARY_PATH).
"""
import os
from pathlib import Path

from cffi import FFI

from pccl._cdefs import CDEFS
from pccl._cdefs_ext import EXT_CDEFS

ENV_VAR = "PCCL_LIBRARY"
SONAME = "libpccl.so.0"
PACKAGE_DIR = Path(__file__).resolve().parent
_LOCAL_NAMES = ("libpccl.so", SONAME)


def recorded_libdir():
    """The libdir `cmake --install` wrote next to the package, or None outside such an install."""
    try:
        from pccl._install_libdir import LIBDIR
    except ImportError:
        return None
    return LIBDIR


def candidates(environ=None, package_dir=PACKAGE_DIR, install_libdir=None):
    """Where to look, in order: a list of (place, path) pairs; path is what dlopen gets."""
    environ = os.environ if environ is None else environ
    explicit = environ.get(ENV_VAR)
    if explicit:
        path = os.path.join(explicit, "libpccl.so") if os.path.isdir(explicit) else explicit
        return [(f"${ENV_VAR}", path)]
    found = [("next to the package", str(Path(package_dir) / name)) for name in _LOCAL_NAMES]
    if install_libdir:
        found.append(("install prefix", os.path.join(install_libdir, SONAME)))
    found.append(("system loader", SONAME))
    return found


def load(places=None):
    """Opens the first candidate that is a pccl library.

    Returns (ffi, lib, path). Raises ImportError naming every place tried and why it failed.
    """
    if places is None:
        places = candidates(install_libdir=recorded_libdir())
    ffi = FFI()
    ffi.cdef(CDEFS + EXT_CDEFS)
    tried = []
    for place, path in places:
        if os.sep in path and not os.path.exists(path):
            tried.append(f"  {place}: {path}: no such file")
            continue
        try:
            lib = ffi.dlopen(path)
        except OSError as e:
            tried.append(f"  {place}: {path}: {e}")
            continue
        try:
            lib.pcclResultString  # pccl's own symbol: rejects PCCL 1.0 or an unrelated library
        except AttributeError:
            tried.append(f"  {place}: {path}: not a pccl library (no pcclResultString)")
            continue
        return ffi, lib, path
    raise ImportError("pccl: cannot load the native library libpccl; looked in:\n" + "\n".join(tried) +
                      f"\nBuild it (cmake --build build) and set {ENV_VAR}=/path/to/libpccl.so, "
                      "or install it (cmake --install build).")


def load_native_module():
    """PCCL 1.0's name for the loaded library: (ffi, lib), the ones the package itself uses.

    Programs and tests written against PCCL 1.0's package import it from pccl._loader.
    """
    from pccl._native import ffi, lib
    return ffi, lib
