"""The API's enums, with the C library's values, and DataType's NumPy/PyTorch mappings.

NumPy and PyTorch are optional: nothing here imports either until a conversion needs it.
"""
import sys
from enum import Enum

from pccl._native import lib


class ReduceOp(Enum):
    """pcclRedOp_t. AVG is the sum divided by the world size (integer division for integer types)."""
    SUM = lib.pcclSum
    AVG = lib.pcclAvg
    PROD = lib.pcclProd
    MAX = lib.pcclMax
    MIN = lib.pcclMin


class Attribute(Enum):
    """pcclAttribute_t. LOCAL_WORLD_SIZE is PCCL 1.0's name for the peer group's world size."""
    GLOBAL_WORLD_SIZE = lib.PCCL_ATTRIBUTE_GLOBAL_WORLD_SIZE
    LOCAL_WORLD_SIZE = lib.PCCL_ATTRIBUTE_PEER_GROUP_WORLD_SIZE
    PEER_GROUP_WORLD_SIZE = lib.PCCL_ATTRIBUTE_PEER_GROUP_WORLD_SIZE  # alias of LOCAL_WORLD_SIZE
    NUM_DISTINCT_PEER_GROUPS = lib.PCCL_ATTRIBUTE_NUM_DISTINCT_PEER_GROUPS
    LARGEST_PEER_GROUP_WORLD_SIZE = lib.PCCL_ATTRIBUTE_LARGEST_PEER_GROUP_WORLD_SIZE


class SharedStateSyncStrategy(Enum):
    """pcclSharedStateSyncStrategy_t."""
    ENFORCE_POPULAR = lib.PCCL_SHARED_STATE_SYNC_STRATEGY_ENFORCE_POPULAR
    RECEIVE_ONLY = lib.PCCL_SHARED_STATE_SYNC_STRATEGY_RECEIVE_ONLY
    SEND_ONLY = lib.PCCL_SHARED_STATE_SYNC_STRATEGY_SEND_ONLY


class DistributionHint(Enum):
    """pcclDistributionHint_t."""
    NONE = lib.pcclDistributionNone
    NORMAL = lib.pcclDistributionNormal
    UNIFORM = lib.pcclDistributionUniform


class QuantizationAlgorithm(Enum):
    """pcclQuantizationAlgorithm_t."""
    NONE = lib.pcclQuantNone
    MIN_MAX = lib.pcclQuantMinMax
    ZERO_POINT_SCALE = lib.pcclQuantZeroPointScale


class CollectiveKind(Enum):
    """pcclExtCollKind_t: the collective an operation runs. `name.lower()` is the kind's name in the
    master's JSON, metrics and logs ("all_reduce", "broadcast", ...)."""
    ALL_REDUCE = lib.pcclExtCollAllReduce
    BROADCAST = lib.pcclExtCollBroadcast
    ALL_GATHER = lib.pcclExtCollAllGather
    ALL_GATHER_V = lib.pcclExtCollAllGatherV
    REDUCE_SCATTER = lib.pcclExtCollReduceScatter
    BARRIER = lib.pcclExtCollBarrier


class DeviceType(Enum):
    """pcclDeviceType_t."""
    CPU = lib.pcclDeviceCpu
    CUDA = lib.pcclDeviceCuda

    @classmethod
    def from_torch_device_type(cls, device_type):
        """'cpu' -> CPU, 'cuda' -> CUDA; None for any other torch device type (as PCCL 1.0)."""
        return {"cpu": cls.CPU, "cuda": cls.CUDA}.get(device_type)


class DataType(Enum):
    """pcclDataType_t. INT16 is beyond PCCL 1.0's Python API (its C API has it). UINT4 and UINT2
    (pccl_compress.h) are codes of QuantizationOptions.quantized_datatype only: 4 and 2 bits per value,
    never a buffer's type (no itemsize, NumPy or torch dtype)."""
    UINT8 = lib.pcclUint8
    INT8 = lib.pcclInt8
    INT16 = lib.pcclInt16
    UINT16 = lib.pcclUint16
    UINT32 = lib.pcclUint32
    INT32 = lib.pcclInt32
    UINT64 = lib.pcclUint64
    INT64 = lib.pcclInt64
    FLOAT16 = lib.pcclFloat16
    BFLOAT16 = lib.pcclBFloat16
    FLOAT = lib.pcclFloat
    DOUBLE = lib.pcclDouble
    UINT4 = lib.pcclExtUint4
    UINT2 = lib.pcclExtUint2

    @property
    def itemsize(self):
        """Bytes per element. Raises ValueError for the quantization codes UINT4 and UINT2."""
        if self not in _ITEMSIZE:
            raise ValueError(f"{self} is a quantization code, not an element type")
        return _ITEMSIZE[self]

    def to_numpy_dtype(self):
        """The numpy.dtype of this type. Raises ValueError for BFLOAT16 (NumPy has none), UINT4 and UINT2."""
        import numpy as np
        if _NAMES.get(self) not in _NUMPY_NAMES:
            raise ValueError(f"{self} has no NumPy dtype")
        return np.dtype(_NAMES[self])

    def to_torch_dtype(self):
        """The torch.dtype of this type. Raises ValueError where this torch lacks it (uint16/32/64 before 2.3)."""
        import torch
        dtype = getattr(torch, _NAMES.get(self, ""), None)
        if not _is_torch_dtype(dtype):
            raise ValueError(f"{self} has no dtype in torch {torch.__version__}")
        return dtype

    @classmethod
    def from_numpy_dtype(cls, dtype):
        """DataType of a NumPy dtype (anything numpy.dtype() accepts). Raises ValueError if unsupported
        (bool, complex, non-native byte order, ...)."""
        found = _cached(_FROM_NUMPY, dtype)  # a call per all-reduce: skip np.dtype() for known dtypes
        if found is not None:
            return found
        import numpy as np
        dt = np.dtype(dtype)
        if dt.name in _NUMPY_NAMES and dt.isnative:
            _FROM_NUMPY[dt] = _BY_NAME[dt.name]
            return _BY_NAME[dt.name]
        raise ValueError(f"unsupported NumPy dtype {dt.str} ({dt}); supported: {', '.join(_NUMPY_NAMES)}, "
                         "native byte order")

    @classmethod
    def from_torch_dtype(cls, dtype):
        """DataType of a torch.dtype. Raises ValueError if unsupported (bool, complex, ...)."""
        found = _cached(_FROM_TORCH, dtype)
        if found is not None:
            return found
        if not _is_torch_dtype(dtype):
            raise ValueError(f"not a torch.dtype: {dtype!r}")
        name = str(dtype).rpartition(".")[2]
        if name in _BY_NAME:
            _FROM_TORCH[dtype] = _BY_NAME[name]
            return _BY_NAME[name]
        raise ValueError(f"unsupported torch dtype {dtype}; supported: "
                         + ", ".join(n for n in _BY_NAME if hasattr(sys.modules["torch"], n)))


def _cached(cache, key):
    try:
        return cache.get(key)
    except TypeError:  # unhashable: not a dtype; the full conversion says why
        return None


def _is_torch_dtype(x):
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(x, torch.dtype)


# One name per type, valid in both NumPy and torch where the library has it.
_NAMES = {
    DataType.UINT8: "uint8", DataType.INT8: "int8", DataType.INT16: "int16", DataType.UINT16: "uint16",
    DataType.UINT32: "uint32", DataType.INT32: "int32", DataType.UINT64: "uint64", DataType.INT64: "int64",
    DataType.FLOAT16: "float16", DataType.BFLOAT16: "bfloat16", DataType.FLOAT: "float32",
    DataType.DOUBLE: "float64",
}
_BY_NAME = {name: t for t, name in _NAMES.items()}
_NUMPY_NAMES = tuple(n for n in _BY_NAME if n != "bfloat16")
_FROM_NUMPY, _FROM_TORCH = {}, {}  # caches of the conversions to DataType
_ITEMSIZE = {t: (1 if n.endswith("8") else int(n[-2:]) // 8) for t, n in _NAMES.items()}
