"""scripts/build_wheel.sh: a wheel with libpccl inside, built offline from the tree; unpacked into a directory of its
own, it imports without PCCL_LIBRARY, loads its own copy of the library and runs a 2-peer all-reduce."""
import os
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PEERS = r'''
import threading, numpy as np, pccl, socket
assert pccl.library_path.startswith(TARGET), pccl.library_path
with socket.socket() as s:
    s.bind(("127.0.0.1", 0)); addr = "127.0.0.1:%d" % s.getsockname()[1]
out, errors = [], []
def peer(rank):
    try:
        with pccl.Communicator(addr) as c:
            c.connect(timeout_s=60)
            while c.get_attribute(pccl.Attribute.GLOBAL_WORLD_SIZE) < 2:
                if c.are_peers_pending():
                    c.update_topology()
            x = np.full(256, rank + 1.0, np.float32)
            c.all_reduce(x, x, op=pccl.ReduceOp.SUM)
            out.append(float(x.min()) == float(x.max()) == 3.0)
    except BaseException as e:
        errors.append(e)
with pccl.MasterNode(addr):
    ts = [threading.Thread(target=peer, args=(r,)) for r in range(2)]
    [t.start() for t in ts]; [t.join(60) for t in ts]
assert not errors and out == [True, True], (errors, out)
print("ok", pccl.library_path)
'''


def test_wheel_bundles_the_library(tmp_path):
    lib = os.environ["PCCL_LIBRARY"]
    built = subprocess.run([str(ROOT / "scripts" / "build_wheel.sh"), lib, str(tmp_path / "dist")],
                           capture_output=True, text=True, timeout=300, env={**os.environ, "PYTHON": sys.executable})
    assert built.returncode == 0, built.stderr
    wheels = list((tmp_path / "dist").glob("pccl-*.whl"))
    assert len(wheels) == 1 and "linux" in wheels[0].name, wheels
    names = zipfile.ZipFile(wheels[0]).namelist()
    assert {"pccl/libpccl.so", "pccl/py.typed", "pccl/train/grid.py", "pccl/torch/__init__.py"} <= set(names)
    assert not any("tests/" in n for n in names)
    target = tmp_path / "site"
    zipfile.ZipFile(wheels[0]).extractall(target)
    env = {k: v for k, v in os.environ.items() if k not in ("PCCL_LIBRARY", "PYTHONPATH", "LD_LIBRARY_PATH")}
    env["PYTHONPATH"] = str(target)
    run = subprocess.run([sys.executable, "-c", f"TARGET = {str(target)!r}\n" + PEERS], capture_output=True,
                         text=True, timeout=120, env=env, cwd=tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.startswith("ok " + str(target / "pccl" / "libpccl.so")), run.stdout
