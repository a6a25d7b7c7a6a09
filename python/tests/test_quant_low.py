"""4- and 2-bit quantization codes (pccl_compress.h) in the Python API: DataType.UINT4 / UINT2 are accepted
as QuantizationOptions' wire type only. Their all-reduces over 3 peers run in test_collectives (cases.QUANT)."""
import pytest

import pccl
from pccl import DataType, QuantizationAlgorithm


def test_values_are_the_headers():
    assert DataType.UINT4.value == 64 and DataType.UINT2.value == 65


@pytest.mark.parametrize("wire", [DataType.UINT4, DataType.UINT2])
@pytest.mark.parametrize("algo", [QuantizationAlgorithm.MIN_MAX, QuantizationAlgorithm.ZERO_POINT_SCALE])
def test_quantization_options_accept_them(wire, algo):
    q = pccl.QuantizationOptions(wire, algo)
    d = pccl.ReduceDescriptor(10, pccl.ReduceOp.SUM, 1, pccl.ReduceOperandDescriptor(DataType.FLOAT), q)
    assert d._c_init()[4] == (wire.value, algo.value)


@pytest.mark.parametrize("wire", [DataType.UINT4, DataType.UINT2])
def test_they_are_no_element_type(wire):
    with pytest.raises(ValueError, match="quantization code"):
        wire.itemsize
    with pytest.raises(ValueError):
        wire.to_numpy_dtype()
