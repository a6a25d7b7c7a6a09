"""Bad arguments raise ValueError or TypeError with a clear message before anything reaches C."""
import numpy as np
import pytest
import torch

import pccl
from harness import free_port
from pccl import DataType, ReduceOp

SUM = ReduceOp.SUM


@pytest.fixture(scope="module")
def comm():
    """A communicator that never connects: every check below must fire before the library is called."""
    return pccl.Communicator(f"127.0.0.1:{free_port()}")


def descriptor(count, dtype=DataType.FLOAT, tag=0):
    return pccl.ReduceDescriptor(count, SUM, tag, pccl.ReduceOperandDescriptor(dtype))


def read_only(a):
    a.flags.writeable = False
    return a


BAD_PAIRS = [
    (lambda: (np.zeros(8, np.float32)[::2],) * 2, ValueError, "C-contiguous"),
    (lambda: (torch.zeros(4, 4).t(),) * 2, ValueError, "contiguous"),
    (lambda: (np.zeros(4, np.float32), np.zeros(4, np.float64)), TypeError, "dtypes differ"),
    (lambda: (torch.zeros(4), torch.zeros(4, dtype=torch.bfloat16)), TypeError, "dtypes differ"),
    (lambda: (np.zeros(4, np.float32), np.zeros(5, np.float32)), ValueError, "element counts differ"),
    (lambda: (np.zeros(4, bool),) * 2, ValueError, "unsupported NumPy dtype"),
    (lambda: (torch.zeros(4, dtype=torch.complex64),) * 2, ValueError, "unsupported torch dtype"),
    (lambda: (np.zeros(4, np.float32), torch.zeros(4)), TypeError, "must both be numpy.ndarray or both torch.Tensor"),
    (lambda: ([1.0, 2.0],) * 2, TypeError, "must be a numpy.ndarray or a torch.Tensor"),
    (lambda: (np.zeros(0, np.float32),) * 2, ValueError, "empty"),
    (lambda: (np.zeros(4, np.float32), read_only(np.zeros(4, np.float32))), ValueError, "read-only"),
    (lambda: (torch.zeros(4, device="meta"),) * 2, ValueError, "unsupported device"),
]


@pytest.mark.parametrize("make,exc,message", BAD_PAIRS)
@pytest.mark.parametrize("call", ["all_reduce", "all_reduce_async"])
def test_bad_buffers(comm, call, make, exc, message):
    send, recv = make()
    with pytest.raises(exc, match=message):
        getattr(comm, call)(send, recv, op=SUM)


@pytest.mark.parametrize("kwargs,exc,message", [
    ({"op": "sum"}, TypeError, "op must be a pccl.ReduceOp"),
    ({"op": SUM, "tag": -1}, ValueError, r"tag must be in \[0, 2\*\*64\)"),
    ({"op": SUM, "tag": 1 << 64}, ValueError, "tag must be in"),
    ({"op": SUM, "tag": 1.5}, TypeError, "tag must be an integer"),
    ({"op": SUM, "operand_descriptor": pccl.ReduceOperandDescriptor(DataType.DOUBLE)}, TypeError, "datatype"),
    ({"op": SUM, "quantization_options": "minmax"}, TypeError, "QuantizationOptions"),
])
def test_bad_reduce_arguments(comm, kwargs, exc, message):
    a = np.zeros(4, np.float32)
    with pytest.raises(exc, match=message):
        comm.all_reduce(a, a, **kwargs)


def test_reduce_op_descriptor_checks_buffers_against_descriptor():
    a = np.zeros(4, np.float32)
    with pytest.raises(ValueError, match="count 5 != 4"):
        pccl.ReduceOpDescriptor.from_numpy(a, a, descriptor(5))
    with pytest.raises(TypeError, match="datatype"):
        pccl.ReduceOpDescriptor.from_numpy(a, a, descriptor(4, DataType.INT32))
    with pytest.raises(TypeError, match="from_torch needs torch buffers"):
        pccl.ReduceOpDescriptor.from_torch(a, a, descriptor(4))
    with pytest.raises(TypeError, match="reduce_descriptor"):
        pccl.ReduceOpDescriptor.from_numpy(a, a, None)
    op = pccl.ReduceOpDescriptor.from_numpy(a, a, descriptor(4))
    assert op.sendbuf_ptr == op.recvbuf_ptr == a.ctypes.data


def test_multiple_with_retry_arguments(comm):
    a, b = np.zeros(4, np.float32), np.zeros(4, np.float32)
    ops = [pccl.ReduceOpDescriptor.from_numpy(x, x, descriptor(4, tag=7)) for x in (a, b)]
    with pytest.raises(ValueError, match="distinct tags"):
        comm.all_reduce_multiple_with_retry(ops)
    with pytest.raises(ValueError, match="max_in_flight"):
        comm.all_reduce_multiple_with_retry(ops[:1], max_in_flight=0)
    with pytest.raises(TypeError, match="ReduceOpDescriptor"):
        comm.all_reduce_multiple_with_retry([a])


@pytest.mark.parametrize("address,exc", [("no-such-host.invalid:48148", ValueError), ("10.0.0.1", ValueError),
                                         ("10.0.0.1:70000", ValueError), ("10.0.0.1:x", ValueError),
                                         ("[localhost]:48148", ValueError), (":48148", ValueError),
                                         (48148, TypeError)])
def test_bad_addresses(address, exc):
    with pytest.raises(exc, match="IP:PORT"):
        pccl.Communicator(address)
    with pytest.raises(exc, match="IP:PORT"):
        pccl.MasterNode(address)


def test_bad_communicator_numbers():
    with pytest.raises(ValueError, match="peer_group"):
        pccl.Communicator("127.0.0.1:1", peer_group=-1)
    with pytest.raises(ValueError, match="p2p_connection_pool_size"):
        pccl.Communicator("127.0.0.1:1", p2p_connection_pool_size=1 << 32)
    with pytest.raises(ValueError, match="n_attempts"):
        pccl.Communicator("127.0.0.1:1").connect(n_attempts=0)


def test_enum_arguments_are_checked(comm):
    with pytest.raises(TypeError, match="pccl.Attribute"):
        comm.get_attribute(1)
    with pytest.raises(TypeError, match="pccl.DataType"):
        pccl.ReduceOperandDescriptor("float")
    with pytest.raises(TypeError, match="pccl.QuantizationAlgorithm"):
        pccl.QuantizationOptions(DataType.UINT8, "minmax")


def test_tensor_info_checks():
    kw = dict(numel=4, dtype=DataType.FLOAT, device_type=pccl.DeviceType.CPU, allow_content_inequality=False)
    with pytest.raises(ValueError, match="nullptr"):
        pccl.TensorInfo("w", 0, **kw)
    with pytest.raises(ValueError, match="1 to 255 UTF-8 bytes"):
        pccl.TensorInfo("x" * 256, 1, **kw)
    with pytest.raises(ValueError, match="1 to 255 UTF-8 bytes"):
        pccl.TensorInfo("", 1, **kw)
    with pytest.raises(ValueError, match="0 elements"):
        pccl.TensorInfo("w", 1, **{**kw, "numel": 0})
    with pytest.raises(ValueError, match="C-contiguous"):
        pccl.TensorInfo.from_numpy(np.zeros((4, 4), np.float32).T, "w")
    with pytest.raises(TypeError, match="from_numpy needs a numpy buffer"):
        pccl.TensorInfo.from_numpy(torch.zeros(4), "w")
    with pytest.raises(ValueError, match="unsupported torch dtype"):
        pccl.TensorInfo.from_torch(torch.zeros(4, dtype=torch.bool), "w")


def test_shared_state_checks():
    a = np.zeros(4, np.float32)
    with pytest.raises(ValueError, match="At least one"):
        pccl.SharedState([])
    with pytest.raises(ValueError, match="distinct"):
        pccl.SharedState([pccl.TensorInfo.from_numpy(a, "w"), pccl.TensorInfo.from_numpy(a, "w")])
    state = pccl.SharedState([pccl.TensorInfo.from_numpy(a, "w")])
    with pytest.raises(ValueError, match="revision"):
        state.revision = -1
    state.revision = 41
    state.push_revision()
    assert state.revision == 42


def test_shared_state_describes_its_tensors():
    a, t = np.zeros(6, np.int16), torch.zeros(3, dtype=torch.bfloat16)
    state = pccl.SharedState([pccl.TensorInfo.from_numpy(a, "a", allow_content_inequality=True),
                              pccl.TensorInfo.from_torch(t, "t")])
    c = state._state
    assert c.count == 2 and c.revision == 0
    assert (pccl._native.ffi.string(c.infos[0].name), c.infos[0].count, c.infos[0].datatype,
            c.infos[0].allow_content_inequality) == (b"a", 6, DataType.INT16.value, True)
    assert int(pccl._native.ffi.cast("uintptr_t", c.infos[1].data)) == t.data_ptr()
    assert (c.infos[1].datatype, c.infos[1].device_type) == (DataType.BFLOAT16.value, pccl.DeviceType.CPU.value)


@pytest.mark.parametrize("text,family,packed,port", [
    ("localhost:48148", "inetIPv4", bytes([127, 0, 0, 1]), 48148),
    ("127.0.0.2:1", "inetIPv4", bytes([127, 0, 0, 2]), 1),
    ("[::1]:48148", "inetIPv6", bytes(15) + b"\x01", 48148)])
def test_addresses_names_and_ipv6(text, family, packed, port):
    from pccl._address import socket_address
    a = socket_address(text, "address")
    assert a.inet.protocol == getattr(pccl._native.lib, family) and a.port == port
    data = a.inet.ipv4.data if family == "inetIPv4" else a.inet.ipv6.data
    assert bytes(data) == packed
