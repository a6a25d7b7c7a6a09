"""The collectives' argument checks: bad buffers and values raise TypeError/ValueError before anything
reaches C, on an unconnected communicator (a call that reached C would fail with PCCLError instead)."""
import numpy as np
import pytest
import torch

import pccl
from harness import free_port


@pytest.fixture(scope="module")
def comm():
    return pccl.Communicator(f"127.0.0.1:{free_port()}")


X = np.arange(8, dtype=np.float32)


@pytest.mark.parametrize("call, error, match", [
    (lambda c: c.broadcast(X.copy(), is_root=1), TypeError, "is_root must be a bool"),
    (lambda c: c.broadcast(X.copy(), is_root=False, send=X), ValueError, "not the root"),
    (lambda c: c.broadcast(X.copy(), is_root=True, send=X[:4]), ValueError, "counts differ"),
    (lambda c: c.broadcast(np.arange(4.0)[::2], is_root=True), ValueError, "C-contiguous"),
    (lambda c: c.broadcast(X.copy(), is_root=True, tag=-1), ValueError, "tag"),
    (lambda c: c.broadcast(X.copy(), is_root=True, rank_key=1 << 64), ValueError, "rank_key"),
    (lambda c: c.broadcast([1.0], is_root=True), TypeError, "numpy.ndarray or a torch.Tensor"),
    (lambda c: c.all_gather(X, torch.zeros(24)), TypeError, "both be numpy.ndarray or both torch.Tensor"),
    (lambda c: c.all_gather(X, np.zeros(24, np.float64)), TypeError, "dtypes differ"),
    (lambda c: c.all_gather(np.zeros(0, np.float32)), ValueError, "empty"),
    (lambda c: c.all_gather(X, np.zeros(24, np.bool_)), ValueError, "unsupported NumPy dtype"),
    (lambda c: c.all_gather_v(X, np.zeros(24, np.int8)), TypeError, "dtypes differ"),
    (lambda c: c.all_gather_v(X, np.zeros(24, np.float32), max_world=1), ValueError, "max_world"),
    (lambda c: c.all_gather_v(X, np.zeros(24, np.float32), max_world=1 << 32), ValueError, "max_world"),
    (lambda c: c.all_gather_v_async(X, None), ValueError, "needs recv"),
    (lambda c: c.reduce_scatter(X, op="sum"), TypeError, "pccl.ReduceOp"),
    (lambda c: c.reduce_scatter(X, X[:], op=pccl.ReduceOp.SUM), ValueError, "same object for in place"),
    (lambda c: c.reduce_scatter(X, op=pccl.ReduceOp.SUM, quantization_options=1), TypeError, "QuantizationOptions"),
    (lambda c: c.reduce_scatter(torch.zeros(4), torch.zeros(2, dtype=torch.float64), op=pccl.ReduceOp.SUM),
     TypeError, "dtypes differ"),
    (lambda c: c.barrier(tag=1.5), TypeError, "tag must be an integer"),
    (lambda c: pccl.CollectiveOp.all_gather(X, None), ValueError, "needs recv"),
    (lambda c: pccl.CollectiveOp.all_gather_v(X, None, max_world=3), ValueError, "needs recv"),
    (lambda c: c.collectives_multiple_with_retry([pccl.CollectiveOp.barrier(tag=1), pccl.CollectiveOp.barrier(tag=1)]),
     ValueError, "distinct tags"),
    (lambda c: c.collectives_multiple_with_retry([pccl.CollectiveOp.barrier()], max_in_flight=0), ValueError,
     "max_in_flight"),
    (lambda c: c.collectives_multiple_with_retry([c.barrier]), TypeError, "pccl.CollectiveOp"),
], ids=lambda x: x if isinstance(x, str) else "")
def test_rejected_before_c(comm, call, error, match):
    with pytest.raises(error, match=match):
        call(comm)


def test_read_only_outputs(comm):
    ro = np.zeros(24, np.float32)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        comm.all_gather(X, ro)
    with pytest.raises(ValueError, match="read-only"):
        comm.broadcast(ro, is_root=True)
    with pytest.raises(ValueError, match="read-only"):
        comm.reduce_scatter(ro, ro, op=pccl.ReduceOp.SUM)


def test_staging_of_a_prefix_shares_the_host_buffer():
    """An in-place all-gather's input is a prefix of its output: the host copies must be one buffer too,
    and finish() copies back only the range it is given."""
    from pccl._staging import HostStaging
    recv = torch.arange(10.0)
    st = HostStaging(recv[:4], recv)
    assert st.send_ptr == st.recv_ptr and st.host_send.numel() == 4 and st.host_recv.numel() == 10
    st.prepare()
    st.host_recv[:] = -1
    st.finish(2, 5)
    assert recv.tolist() == [0, 1, -1, -1, -1, 5, 6, 7, 8, 9]
    out_of_place = HostStaging(torch.ones(3), torch.zeros(9))
    assert out_of_place.send_ptr != out_of_place.recv_ptr and out_of_place.host_send.numel() == 3
