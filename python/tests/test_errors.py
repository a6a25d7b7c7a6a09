"""PCCLError: the result code, the C function's name and pcclResultString in every failure."""
import time

import pytest

import pccl
from harness import free_port
from pccl import PCCLError, Result


def test_message_has_name_function_and_description():
    e = PCCLError(Result.TOO_FEW_PEERS, "pcclAllReduce")
    assert e.result is Result.TOO_FEW_PEERS and e.code == 5 and e.func_name == "pcclAllReduce"
    assert str(e) == "pcclAllReduce failed: TOO_FEW_PEERS (5): too few peers (world size below 2)"


def test_every_result_has_a_description():
    descriptions = {pccl._errors.result_string(r.value) for r in Result}
    assert len(descriptions) == len(Result) and "" not in descriptions


def test_check():
    PCCLError.check(0, "pcclInit")
    with pytest.raises(PCCLError) as e:
        PCCLError.check(Result.RANK_CONNECTION_LOST.value, "pcclAllReduce")
    assert e.value.result is Result.RANK_CONNECTION_LOST


def test_unknown_code():
    e = PCCLError(99, "pcclX")
    assert e.result is Result.INTERNAL_ERROR and e.code == 99
    assert "unknown result code" in str(e)


def test_calls_before_connect_fail_with_their_name():
    comm = pccl.Communicator(f"127.0.0.1:{free_port()}")
    for call, name in ((comm.update_topology, "pcclUpdateTopology"), (comm.are_peers_pending, "pcclArePeersPending"),
                       (comm.optimize_topology, "pcclOptimizeTopology")):
        with pytest.raises(PCCLError) as e:
            call()
        assert e.value.result is Result.INVALID_USAGE and e.value.func_name == name


def test_connect_retries_an_unreachable_master():
    comm = pccl.Communicator(f"127.0.0.1:{free_port()}")  # nothing listens there
    start = time.monotonic()
    with pytest.raises(PCCLError) as e:
        comm.connect(n_attempts=2)
    assert e.value.result is Result.MASTER_CONNECTION_FAILED and e.value.func_name == "pcclConnect"
    assert 1.0 <= time.monotonic() - start < 10, "one retry, 1 s after the first attempt"


def test_master_on_a_taken_port():
    port = free_port()
    first = pccl.MasterNode(f"127.0.0.1:{port}")
    with pytest.raises(PCCLError) as e:
        pccl.MasterNode(f"127.0.0.1:{port}")
    assert e.value.func_name == "pcclCreateMaster" and e.value.result is Result.INTERNAL_ERROR
    del first


def test_run_shut_down_is_its_own_result():
    e = PCCLError(15, "pcclAllReduce")
    assert e.result is Result.RUN_SHUT_DOWN and e.code == 15
    assert "shut down" in str(e)

