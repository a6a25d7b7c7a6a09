"""The library search: $PCCL_LIBRARY alone when set, else next to the package, the libdir recorded
by cmake --install, the system loader; an error naming every place tried."""
import ctypes.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness import PYTHON_DIR
from pccl import _loader

LIB = Path(os.environ["PCCL_LIBRARY"]).resolve()


def test_env_var_is_the_only_candidate(tmp_path):
    assert _loader.candidates({"PCCL_LIBRARY": "/x/libpccl.so"}, tmp_path, "/p/lib") == [
        ("$PCCL_LIBRARY", "/x/libpccl.so")]
    assert _loader.candidates({"PCCL_LIBRARY": str(tmp_path)}) == [("$PCCL_LIBRARY", str(tmp_path / "libpccl.so"))]


def test_order_without_env_var(tmp_path):
    assert _loader.candidates({}, tmp_path, "/p/lib") == [
        ("next to the package", str(tmp_path / "libpccl.so")),
        ("next to the package", str(tmp_path / "libpccl.so.0")),
        ("install prefix", "/p/lib/libpccl.so.0"),
        ("system loader", "libpccl.so.0")]
    assert [p for p, _ in _loader.candidates({}, tmp_path, None)] == ["next to the package"] * 2 + ["system loader"]


def test_first_loadable_wins_and_others_are_reported(tmp_path):
    ffi, lib, path = _loader.load([("a", str(tmp_path / "missing.so")), ("b", str(LIB))])
    assert path == str(LIB) and lib.pcclInit() == 0
    zlib = ctypes.util.find_library("z")
    with pytest.raises(ImportError) as e:
        _loader.load([("a", str(tmp_path / "missing.so")), ("b", zlib), ("c", "libnothing-here.so.9")])
    message = str(e.value)
    assert f"a: {tmp_path / 'missing.so'}: no such file" in message
    assert f"b: {zlib}: not a pccl library" in message
    assert "c: libnothing-here.so.9: cannot load library" in message
    assert "PCCL_LIBRARY" in message


def run_import(package_parent, env):
    """Imports pccl from package_parent in a fresh interpreter; (returncode, library path or stderr)."""
    env = {k: v for k, v in {**os.environ, **env}.items() if v is not None}
    p = subprocess.run([sys.executable, "-c", "import pccl; print(pccl.library_path)"], cwd=package_parent,
                       env={**env, "PYTHONPATH": str(package_parent)}, capture_output=True, text=True, timeout=60)
    return p.returncode, (p.stdout.strip() if p.returncode == 0 else p.stderr)


@pytest.fixture
def package_copy(tmp_path):
    """A copy of the package, without a library or a recorded libdir, in tmp_path/pccl."""
    shutil.copytree(PYTHON_DIR / "pccl", tmp_path / "pccl",
                    ignore=shutil.ignore_patterns("__pycache__", "_install_libdir.py", "libpccl.so*"))
    return tmp_path


def test_library_next_to_the_package(package_copy):
    shutil.copy(LIB, package_copy / "pccl" / "libpccl.so")
    assert run_import(package_copy, {"PCCL_LIBRARY": None}) == (0, str(package_copy / "pccl" / "libpccl.so"))


def test_recorded_install_libdir(package_copy, tmp_path):
    libdir = tmp_path / "prefix" / "lib"
    libdir.mkdir(parents=True)
    shutil.copy(LIB, libdir / "libpccl.so.0")
    (package_copy / "pccl" / "_install_libdir.py").write_text(f"LIBDIR = {str(libdir)!r}\n")
    assert run_import(package_copy, {"PCCL_LIBRARY": None}) == (0, str(libdir / "libpccl.so.0"))


def test_system_loader(package_copy, tmp_path):
    libdir = tmp_path / "ld"
    libdir.mkdir()
    shutil.copy(LIB, libdir / "libpccl.so.0")
    assert run_import(package_copy, {"PCCL_LIBRARY": None, "LD_LIBRARY_PATH": str(libdir)}) == (0, "libpccl.so.0")


def test_env_var_wins_over_the_package_dir(package_copy, tmp_path):
    shutil.copy(LIB, package_copy / "pccl" / "libpccl.so")
    rc, err = run_import(package_copy, {"PCCL_LIBRARY": str(tmp_path / "nowhere.so")})
    assert rc != 0 and f"$PCCL_LIBRARY: {tmp_path / 'nowhere.so'}: no such file" in err


def test_nothing_found_names_every_place(package_copy):
    if ctypes.util.find_library("pccl"):
        pytest.skip("a libpccl is installed system-wide")
    rc, err = run_import(package_copy, {"PCCL_LIBRARY": None, "LD_LIBRARY_PATH": None})
    assert rc != 0 and "ImportError: pccl: cannot load the native library" in err
    for place in ("next to the package", "system loader: libpccl.so.0"):
        assert place in err


def test_pccl1_load_native_module_gives_the_loaded_library():
    """PCCL 1.0's own modules call pccl._loader.load_native_module(); it must be the package's library."""
    from pccl import _loader, _native
    ffi, lib = _loader.load_native_module()
    assert ffi is _native.ffi and lib is _native.lib
    assert ffi.string(lib.pcclResultString(lib.pcclTooFewPeers)).decode() == "too few peers (world size below 2)"
