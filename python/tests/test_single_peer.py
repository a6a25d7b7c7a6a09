"""One process, one master, one peer: what PCCL 1.0's own unit tests check, and what a peer alone gets."""
import numpy as np
import pytest
import torch

import pccl
from harness import free_port
from pccl import PCCLError, ReduceOp, Result


@pytest.fixture
def master():
    """A running in-process MasterNode; its 'IP:PORT'."""
    addr = f"127.0.0.1:{free_port()}"
    m = pccl.MasterNode(addr)
    m.run()
    yield addr
    m.interrupt()
    m.await_termination()


def test_master_run_interrupt_and_port_zero():
    m = pccl.MasterNode("127.0.0.1:0")
    m.run()
    m.interrupt()
    m.await_termination()
    m.await_termination()  # a stopped master returns at once


def test_communicator_lifecycle(master):
    pccl.Communicator(master)  # destroyed unconnected
    comm = pccl.Communicator(master, 0)
    comm.connect()
    assert comm.get_attribute(pccl.Attribute.GLOBAL_WORLD_SIZE) == 1
    assert comm.get_attribute(pccl.Attribute.LOCAL_WORLD_SIZE) == 1
    assert comm.get_attribute(pccl.Attribute.NUM_DISTINCT_PEER_GROUPS) == 1
    assert comm.are_peers_pending() is False
    with pytest.raises(PCCLError) as e:
        comm.connect(n_attempts=1)
    assert e.value.result is Result.INVALID_USAGE
    del comm  # destroyed connected, master still up


@pytest.mark.parametrize("make", [lambda: np.random.rand(27), lambda: torch.rand(27)])
def test_alone_all_reduce_fails_with_too_few_peers(master, make):
    comm = pccl.Communicator(master)
    comm.connect()
    x = make()
    before = x.copy() if isinstance(x, np.ndarray) else x.clone()
    with pytest.raises(PCCLError) as e:
        comm.all_reduce(x, x, op=ReduceOp.SUM)
    assert (e.value.result, e.value.func_name) == (Result.TOO_FEW_PEERS, "pcclAllReduce")
    with pytest.raises(PCCLError) as e:
        comm.all_reduce_async(x, x, op=ReduceOp.SUM)
    assert (e.value.result, e.value.func_name) == (Result.TOO_FEW_PEERS, "pcclAllReduceAsync")
    assert (x == before).all()


def test_alone_multiple_with_retry_fails_with_too_few_peers(master):
    comm = pccl.Communicator(master)
    comm.connect()
    a = np.ones(5, np.float32)
    op = pccl.ReduceOpDescriptor.from_numpy(a, a, pccl.ReduceDescriptor(
        5, ReduceOp.SUM, 0, pccl.ReduceOperandDescriptor(pccl.DataType.FLOAT)))
    with pytest.raises(PCCLError) as e:
        comm.all_reduce_multiple_with_retry([op])
    assert e.value.result is Result.TOO_FEW_PEERS


def test_alone_sync_moves_nothing(master):
    comm = pccl.Communicator(master)
    comm.connect()
    state = pccl.SharedState([pccl.TensorInfo.from_numpy(np.arange(4.0), "w")])
    state.revision = 3
    info = comm.sync_shared_state(state)
    assert (info.tx_bytes, info.rx_bytes, state.revision) == (0, 0, 3)


def test_library_checks_reach_python_as_invalid_argument(master):
    """What only the library checks (overlapping buffers, a quantization it cannot do) fails at once."""
    comm = pccl.Communicator(master)
    comm.connect()
    a = np.zeros(10, np.float32)
    with pytest.raises(PCCLError) as e:
        comm.all_reduce(a[:6], a[4:], op=ReduceOp.SUM)
    assert e.value.result is Result.INVALID_ARGUMENT
    i = np.zeros(10, np.int32)
    q = pccl.QuantizationOptions(pccl.DataType.UINT8, pccl.QuantizationAlgorithm.MIN_MAX)
    with pytest.raises(PCCLError) as e:
        comm.all_reduce(i, i, op=ReduceOp.SUM, quantization_options=q)
    assert e.value.result is Result.INVALID_ARGUMENT
