"""DataType's mappings to and from NumPy and torch dtypes, and the other enums' conveniences."""
import numpy as np
import pytest
import torch

import pccl
from pccl import DataType

NUMPY = {"uint8": DataType.UINT8, "int8": DataType.INT8, "int16": DataType.INT16, "uint16": DataType.UINT16,
         "uint32": DataType.UINT32, "int32": DataType.INT32, "uint64": DataType.UINT64, "int64": DataType.INT64,
         "float16": DataType.FLOAT16, "float32": DataType.FLOAT, "float64": DataType.DOUBLE}
TORCH = {n: t for n, t in NUMPY.items() if hasattr(torch, n)}
TORCH["bfloat16"] = DataType.BFLOAT16


@pytest.mark.parametrize("name", NUMPY)
def test_numpy_both_ways(name):
    t = NUMPY[name]
    assert DataType.from_numpy_dtype(np.dtype(name)) is t
    assert DataType.from_numpy_dtype(getattr(np, name)) is t  # scalar types too
    assert t.to_numpy_dtype() == np.dtype(name)
    assert t.itemsize == np.dtype(name).itemsize


@pytest.mark.parametrize("name", TORCH)
def test_torch_both_ways(name):
    t = TORCH[name]
    assert DataType.from_torch_dtype(getattr(torch, name)) is t
    assert t.to_torch_dtype() is getattr(torch, name)
    assert t.itemsize == torch.empty(0, dtype=getattr(torch, name)).element_size()


def test_torch_aliases():
    assert DataType.from_torch_dtype(torch.float) is DataType.FLOAT
    assert DataType.from_torch_dtype(torch.half) is DataType.FLOAT16
    assert DataType.from_torch_dtype(torch.long) is DataType.INT64


def test_every_type_maps_somewhere():
    assert set(NUMPY.values()) | set(TORCH.values()) == set(DataType) - {DataType.UINT4, DataType.UINT2}


@pytest.mark.parametrize("name", ["uint16", "uint32", "uint64"])
def test_unsigned_types_torch_may_lack(name):
    t = NUMPY[name]
    if hasattr(torch, name):
        assert t.to_torch_dtype() is getattr(torch, name)
    else:
        with pytest.raises(ValueError, match="no dtype in torch"):
            t.to_torch_dtype()


def test_bfloat16_has_no_numpy_dtype():
    with pytest.raises(ValueError, match="no NumPy dtype"):
        DataType.BFLOAT16.to_numpy_dtype()


@pytest.mark.parametrize("dtype", [np.bool_, np.complex64, np.dtype(">f4"), np.dtype(">i8"), object, "datetime64[s]",
                                   np.float128 if hasattr(np, "float128") else np.longdouble])
def test_unsupported_numpy(dtype):
    with pytest.raises(ValueError, match="unsupported NumPy dtype"):
        DataType.from_numpy_dtype(dtype)


@pytest.mark.parametrize("dtype", [torch.bool, torch.complex64, torch.quint8])
def test_unsupported_torch(dtype):
    with pytest.raises(ValueError, match="unsupported torch dtype"):
        DataType.from_torch_dtype(dtype)


def test_torch_conversion_rejects_non_torch():
    with pytest.raises(ValueError, match="not a torch.dtype"):
        DataType.from_torch_dtype(np.float32)


def test_device_type_from_torch():
    assert pccl.DeviceType.from_torch_device_type("cpu") is pccl.DeviceType.CPU
    assert pccl.DeviceType.from_torch_device_type("cuda") is pccl.DeviceType.CUDA
    assert pccl.DeviceType.from_torch_device_type("meta") is None


def test_attribute_alias():
    assert pccl.Attribute.PEER_GROUP_WORLD_SIZE is pccl.Attribute.LOCAL_WORLD_SIZE
    assert [a.name for a in pccl.Attribute] == ["GLOBAL_WORLD_SIZE", "LOCAL_WORLD_SIZE", "NUM_DISTINCT_PEER_GROUPS",
                                                "LARGEST_PEER_GROUP_WORLD_SIZE"]
