"""`pip install --no-build-isolation` of python/ into a venv, offline: plain (the library comes from
$PCCL_LIBRARY) and with PCCL_BUNDLE_LIBRARY (the library travels inside the package)."""
import os
import shutil
import subprocess
import sys

import pytest

from harness import PYTHON_DIR

LIB = os.environ["PCCL_LIBRARY"]


def pip_install(tmp_path, env=None):
    """A --system-site-packages venv with python/ (copied, so the build leaves the tree alone) installed."""
    src = tmp_path / "src"
    shutil.copytree(PYTHON_DIR, src, ignore=shutil.ignore_patterns(
        "tests", "build", "*.egg-info", "__pycache__", ".pytest_cache", "_install_libdir.py", "libpccl.so*"))
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", "--system-site-packages", str(venv)], check=True,
                   timeout=120)
    python = venv / "bin" / "python"
    subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-build-isolation", "--no-index", str(src)],
                   check=True, timeout=300, env={**os.environ, **(env or {})})
    return venv


def venv_python(venv, code, env):
    env = {k: v for k, v in {**os.environ, **env}.items() if v is not None}
    return subprocess.run([str(venv / "bin" / "python"), "-c", code], capture_output=True, text=True, timeout=60,
                          env=env, cwd=venv)


def test_plain_install(tmp_path):
    venv = pip_install(tmp_path)
    site = venv_python(venv, "import pccl, os; print(os.path.dirname(pccl.__file__))", {"PCCL_LIBRARY": LIB})
    assert site.returncode == 0, site.stderr
    assert site.stdout.strip().startswith(str(venv)), "imported pccl from outside the venv"
    assert not list((venv / "lib").glob("python3*/site-packages/pccl/libpccl.so*"))
    assert (venv / "bin" / "pccl_master").exists()
    help_text = subprocess.run([str(venv / "bin" / "pccl_master"), "--help"], capture_output=True, text=True,
                               timeout=60, env={**os.environ, "PCCL_LIBRARY": LIB})
    assert "--listen-address" in help_text.stdout


def test_install_with_bundled_library(tmp_path):
    venv = pip_install(tmp_path, {"PCCL_BUNDLE_LIBRARY": LIB})
    p = venv_python(venv, "import pccl; print(pccl.library_path)", {"PCCL_LIBRARY": None})
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip().startswith(str(venv)) and p.stdout.strip().endswith("/pccl/libpccl.so")


def test_bundling_a_missing_library_fails(tmp_path):
    with pytest.raises(subprocess.CalledProcessError):
        pip_install(tmp_path, {"PCCL_BUNDLE_LIBRARY": str(tmp_path / "nope.so")})
