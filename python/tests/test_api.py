"""The public surface: PCCL 1.0's names, pccl._pccl, pccl.cuda, pccl_master's command line, and
working with NumPy alone or torch alone (PCCL 1.0's numpy_only and pytorch_only tests)."""
import pytest

import pccl

PCCL1_ALL = ["cuda", "Communicator", "MasterNode", "ReduceOp", "Attribute", "SharedStateSyncStrategy", "DataType",
             "DistributionHint", "QuantizationAlgorithm", "ReduceOperandDescriptor", "QuantizationOptions",
             "ReduceDescriptor", "TensorInfo", "SharedState", "SharedStateSyncInfo", "ReduceInfo",
             "ReduceOpDescriptor", "AsyncReduceHandle", "PCCLError"]


def test_all_starts_with_pccl1s_list():
    assert pccl.__all__[:len(PCCL1_ALL)] == PCCL1_ALL
    assert set(pccl.__all__) - set(PCCL1_ALL) == {"DeviceType", "Result", "CollectiveKind", "CollectiveInfo",
                                                   "CollectiveOp", "AsyncCollectiveHandle",
                                                   "PCCLRetryableError", "PCCLFatalError", "Departure",
                                                   "log_to_logging", "log_to_stderr",
                                                   "SparseAllReduce", "SparseInfo", "parse_sparsify"}
    for name in pccl.__all__:
        assert getattr(pccl, name) is not None


def test_star_import_and_pccl1_module_path():
    ns = {}
    exec("from pccl import *", ns)
    assert set(PCCL1_ALL) <= set(ns)
    from pccl._pccl import Communicator, ReduceOpDescriptor
    assert Communicator is pccl.Communicator and ReduceOpDescriptor is pccl.ReduceOpDescriptor


def test_cuda_is_available_is_the_librarys_build_info():
    info = pccl._native.ffi.new("pcclBuildInfo_t *")
    assert pccl._native.lib.pcclGetBuildInfo(info) == 0
    assert pccl.cuda.is_available() is bool(info.has_cuda_support)


def test_version():
    assert pccl.__version__.count(".") == 2


def test_master_command_runs_until_sigterm(procs):
    addr = procs.start_master()
    comm = pccl.Communicator(addr)
    comm.connect(n_attempts=1)
    assert comm.get_attribute(pccl.Attribute.GLOBAL_WORLD_SIZE) == 1
    procs.procs["master0"].terminate()
    assert procs.wait("master0", 10) == 0


def run_isolated(code, blocked=None):
    """Runs code in a fresh interpreter in which importing `blocked` fails; (returncode, stdout)."""
    import subprocess
    import sys
    from harness import child_env
    prelude = f"import sys; sys.modules[{blocked!r}] = None\n" if blocked else ""
    p = subprocess.run([sys.executable, "-c", prelude + code], capture_output=True, text=True, timeout=60,
                       env=child_env())
    return p.returncode, p.stdout.strip() or p.stderr


def test_imports_neither_numpy_nor_torch():
    assert run_isolated("import sys, pccl; print(sorted({'numpy', 'torch'} & set(sys.modules)))") == (0, "[]")


@pytest.mark.parametrize("blocked,make_x", [("torch", "import numpy as np; x = np.random.rand(27)"),
                                            ("numpy", "import torch; x = torch.rand(27)")])
def test_alone_async_without_the_other_package(blocked, make_x):
    from harness import free_port
    addr = f"127.0.0.1:{free_port()}"
    code = f"""{make_x}
import pccl
m = pccl.MasterNode("{addr}"); m.run()
c = pccl.Communicator("{addr}"); c.connect()
try:
    c.all_reduce_async(x, x, op=pccl.ReduceOp.SUM)
except pccl.PCCLError as e:
    print(e.result.name)
m.interrupt()"""
    assert run_isolated(code, blocked) == (0, "TOO_FEW_PEERS")
