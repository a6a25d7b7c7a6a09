"""The public surface: PCCL 1.0's names, pccl._pccl, pccl.cuda, pccl_master's command line."""
import pccl

PCCL1_ALL = ["cuda", "Communicator", "MasterNode", "ReduceOp", "Attribute", "SharedStateSyncStrategy", "DataType",
             "DistributionHint", "QuantizationAlgorithm", "ReduceOperandDescriptor", "QuantizationOptions",
             "ReduceDescriptor", "TensorInfo", "SharedState", "SharedStateSyncInfo", "ReduceInfo",
             "ReduceOpDescriptor", "AsyncReduceHandle", "PCCLError"]


def test_all_starts_with_pccl1s_list():
    assert pccl.__all__[:len(PCCL1_ALL)] == PCCL1_ALL
    assert set(pccl.__all__) - set(PCCL1_ALL) == {"DeviceType", "Result"}
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
