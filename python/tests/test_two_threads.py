"""Two peers as two threads of this process (each makes its own calls, as the C API requires):
async handle semantics, and CUDA tensors where torch has CUDA."""
import gc
import threading
import weakref

import numpy as np
import pytest
import torch

import pccl
from common import join
from harness import free_port
from pccl import ReduceOp

TIMEOUT_S = 60
needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="torch has no CUDA device")


def run_peers(body, world=2):
    """Runs body(rank, comm) on `world` threads joined to a fresh in-process master; returns their results."""
    addr = f"127.0.0.1:{free_port()}"
    master = pccl.MasterNode(addr)
    master.run()
    results, errors = [None] * world, []

    def peer(rank):
        try:
            comm = join(addr, world, TIMEOUT_S)
            results[rank] = body(rank, comm)
            del comm
        except BaseException as e:  # reported by the test thread below
            errors.append(e)

    threads = [threading.Thread(target=peer, args=(r,)) for r in range(world)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(TIMEOUT_S)
    master.interrupt()
    master.await_termination()
    assert not any(t.is_alive() for t in threads), "a peer thread hung"
    if errors:
        raise errors[0]
    return results


def test_async_wait_is_idempotent_and_info_counts():
    def body(rank, comm):
        x = np.full(1000, rank + 1, np.float64)
        h = comm.all_reduce_async(x, x, op=ReduceOp.SUM, tag=5)
        first = h.wait()
        assert h.wait() is first
        return first, x

    for (ok, status, info), x in run_peers(body):
        assert (ok, status, info.local_world_size) == (True, 0, 2)
        assert info.tx_bytes == info.rx_bytes == 8000  # 2 (W-1)/W of 8000 bytes
        assert (x == 3).all()


def test_dropped_handle_keeps_buffers_alive():
    def body(rank, comm):
        t = torch.full((4096,), float(rank))
        ref = weakref.ref(t)
        comm.all_reduce_async(t, t, op=ReduceOp.MAX, tag=9)  # handle dropped at once
        del t
        gc.collect()
        alive = ref() is not None
        return alive, ref

    for alive, _ in run_peers(body):
        assert alive, "the communicator let go of a buffer the library still uses"


def test_host_staging_round_trip():
    from pccl._staging import HostStaging
    send, recv = torch.arange(6.0).reshape(2, 3), torch.zeros(2, 3)
    s = HostStaging(send, recv)
    s.prepare()
    assert s.host_send.tolist() == [0, 1, 2, 3, 4, 5] and s.recv_ptr != s.send_ptr
    s.host_recv.copy_(s.host_send * 2)
    s.finish()
    assert recv.flatten().tolist() == [0, 2, 4, 6, 8, 10]
    in_place = HostStaging(send, send)
    assert in_place.send_ptr == in_place.recv_ptr


@needs_cuda
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.int64])
def test_cuda_all_reduce_in_and_out_of_place(dtype):
    def body(rank, comm):
        x = torch.full((3001,), rank + 1, dtype=dtype, device="cuda")
        y = torch.empty_like(x)
        comm.all_reduce(x, y, op=ReduceOp.SUM, tag=1)
        info = comm.all_reduce(x, x, op=ReduceOp.MAX, tag=2)
        h = comm.all_reduce_async(y, y, op=ReduceOp.PROD, tag=3)
        assert h.wait()[0]
        z = torch.full((3001,), rank + 1, dtype=dtype, device="cuda")
        d = pccl.ReduceDescriptor(z.numel(), ReduceOp.MIN, 4,
                                  pccl.ReduceOperandDescriptor(pccl.DataType.from_torch_dtype(dtype)))
        comm.all_reduce_multiple_with_retry([pccl.ReduceOpDescriptor.from_torch(z, z, d)])
        return x.cpu(), y.cpu(), z.cpu(), info

    for x, y, z, info in run_peers(body):
        assert info.local_world_size == 2
        assert (x == 2).all() and (y == 9).all() and (z == 1).all()


@needs_cuda
def test_cuda_and_cpu_tensors_in_one_shared_state():
    def body(rank, comm):
        gpu = torch.full((1000,), float(rank), device="cuda")
        cpu = np.full(500, rank, np.int32)
        state = pccl.SharedState([pccl.TensorInfo.from_torch(gpu, "gpu"), pccl.TensorInfo.from_numpy(cpu, "cpu")])
        state.revision = 1 if rank == 0 else 0
        strategy = pccl.SharedStateSyncStrategy.SEND_ONLY if rank == 0 else pccl.SharedStateSyncStrategy.RECEIVE_ONLY
        try:
            info = comm.sync_shared_state(state, strategy)
        except pccl.PCCLError as e:
            return e.result
        return info.rx_bytes, gpu.cpu(), cpu

    results = run_peers(body)
    if not pccl.cuda.is_available():  # the library refuses CUDA pointers it was not built for
        assert results == [pccl.Result.INVALID_ARGUMENT] * 2
        return
    rx, gpu, cpu = results[1]
    assert rx == 1000 * 4 + 500 * 4 and (gpu == 0).all() and (cpu == 0).all()
