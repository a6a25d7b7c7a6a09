"""Descriptors: PCCL 1.0's defaults, and the C structs they fill."""
import numpy as np

import pccl
from pccl import DataType, DistributionHint, QuantizationAlgorithm, ReduceOp
from pccl._native import ffi


def test_defaults():
    assert pccl.ReduceOperandDescriptor(DataType.FLOAT).distribution_hint is DistributionHint.NONE
    q = pccl.QuantizationOptions()
    assert (q.quantized_datatype, q.algorithm) == (DataType.UINT8, QuantizationAlgorithm.MIN_MAX)
    d = pccl.ReduceDescriptor(10, ReduceOp.AVG, 3, pccl.ReduceOperandDescriptor(DataType.BFLOAT16))
    assert (d.quantization_options.quantized_datatype, d.quantization_options.algorithm) == (
        DataType.BFLOAT16, QuantizationAlgorithm.NONE)


def test_reduce_op_descriptor_fills_the_c_struct():
    send, recv = np.zeros(6, np.int16), np.zeros(6, np.int16)
    d = pccl.ReduceDescriptor(6, ReduceOp.PROD, (1 << 64) - 1,
                              pccl.ReduceOperandDescriptor(DataType.INT16, DistributionHint.UNIFORM),
                              pccl.QuantizationOptions(DataType.UINT16, QuantizationAlgorithm.ZERO_POINT_SCALE))
    c = ffi.new("pcclReduceOpDescriptor_t *", pccl.ReduceOpDescriptor.from_numpy(send, recv, d)._c_init())
    assert int(ffi.cast("uintptr_t", c.sendbuf)) == send.ctypes.data
    assert int(ffi.cast("uintptr_t", c.recvbuf)) == recv.ctypes.data
    x = c.descriptor
    assert (x.count, x.op, x.tag) == (6, ReduceOp.PROD.value, (1 << 64) - 1)
    assert (x.src_descriptor.datatype, x.src_descriptor.distribution_hint) == (
        DataType.INT16.value, DistributionHint.UNIFORM.value)
    assert (x.quantization_options.quantized_datatype, x.quantization_options.algorithm) == (
        DataType.UINT16.value, QuantizationAlgorithm.ZERO_POINT_SCALE.value)


def test_raw_pointer_descriptor():
    d = pccl.ReduceDescriptor(4, ReduceOp.SUM, 0, pccl.ReduceOperandDescriptor(DataType.FLOAT),
                              pccl.QuantizationOptions(DataType.FLOAT, QuantizationAlgorithm.NONE))
    op = pccl.ReduceOpDescriptor(0x1000, 0x2000, d)
    assert (op.sendbuf_ptr, op.recvbuf_ptr, op.reduce_descriptor) == (0x1000, 0x2000, d)


def test_infos_are_plain_records():
    assert pccl.ReduceInfo(3, 10, 20) == pccl.ReduceInfo(local_world_size=3, tx_bytes=10, rx_bytes=20)
    info = pccl.SharedStateSyncInfo(5, 6)
    assert (info.tx_bytes, info.rx_bytes) == (5, 6)
