"""The shared state: named tensors kept bit-identical across a peer group."""
from pccl._buffers import describe
from pccl._descriptors import of_type, uint
from pccl._enums import DataType, DeviceType
from pccl._native import ffi

_MAX_NAME_BYTES = 255


class TensorInfo:
    """One tensor of the shared state: `numel` elements of `dtype` at `data_ptr` on `device_type`.

    With allow_content_inequality, a differing hash of this tensor never triggers a transfer.
    Raises ValueError for a null pointer, an empty or over-long (> 255 UTF-8 bytes) name, numel 0.
    """

    def __init__(self, name: str, data_ptr: int, *, numel: int, dtype: DataType, device_type: DeviceType,
                 allow_content_inequality: bool):
        if not isinstance(name, str):
            raise TypeError(f"name must be a str, not {name!r}")
        if not 0 < len(name.encode("utf-8")) <= _MAX_NAME_BYTES:
            raise ValueError(f"name must be 1 to {_MAX_NAME_BYTES} UTF-8 bytes, got {name!r}")
        if uint(data_ptr, 64, "data_ptr") == 0:
            raise ValueError("Invalid data pointer: nullptr")
        if uint(numel, 64, "numel") == 0:
            raise ValueError(f"tensor {name!r} has 0 elements")
        self.name = name
        self.data_ptr = data_ptr
        self.numel = numel
        self.dtype = of_type(DataType, dtype, "dtype")
        self.device_type = of_type(DeviceType, device_type, "device_type")
        self.allow_content_inequality = bool(allow_content_inequality)
        self._owner = None  # the array or tensor behind data_ptr, when built from one

    @classmethod
    def _from_buffer(cls, tensor, name, allow_content_inequality, kind):
        b = describe(tensor, name if isinstance(name, str) else "tensor")
        if b.kind != kind:
            raise TypeError(f"from_{kind} needs a {kind} buffer, got {b.kind}")
        info = cls(name, b.ptr, numel=b.numel, dtype=b.dtype, device_type=b.device,
                   allow_content_inequality=allow_content_inequality)
        info._owner = tensor
        return info

    @classmethod
    def from_torch(cls, tensor, name: str, *, allow_content_inequality: bool = False) -> "TensorInfo":
        """From a contiguous CPU or CUDA tensor (CUDA needs a library built with CUDA)."""
        return cls._from_buffer(tensor, name, allow_content_inequality, "torch")

    @classmethod
    def from_numpy(cls, tensor, name: str, *, allow_content_inequality: bool = False) -> "TensorInfo":
        """From a C-contiguous NumPy array."""
        return cls._from_buffer(tensor, name, allow_content_inequality, "numpy")


class SharedState:
    """A list of TensorInfos with distinct names and a `revision` (uint64, starts at 0).

    A sync overwrites an outdated peer's tensors in place and sets its revision to the group's.
    Raises ValueError for an empty list or repeated names.
    """

    def __init__(self, tensor_infos):
        infos = list(tensor_infos)
        if not infos:
            raise ValueError("At least one tensor info must be provided")
        for i in infos:
            of_type(TensorInfo, i, "each tensor info")
        names = [i.name for i in infos]
        if len(set(names)) != len(names):
            raise ValueError(f"tensor names must be distinct: {names}")
        self._tensor_infos = infos  # keeps the arrays alive
        self._names = [ffi.new("char[]", n.encode("utf-8")) for n in names]
        self._infos = ffi.new("pcclTensorInfo_t[]", len(infos))
        for c, info, cname in zip(self._infos, infos, self._names):
            c.name = cname
            c.data = ffi.cast("void *", info.data_ptr)
            c.count = info.numel
            c.datatype = info.dtype.value
            c.device_type = info.device_type.value
            c.allow_content_inequality = info.allow_content_inequality
        self._state = ffi.new("pcclSharedState_t *", {"revision": 0, "count": len(infos), "infos": self._infos})

    @property
    def revision(self) -> int:
        return self._state.revision

    @revision.setter
    def revision(self, value: int):
        self._state.revision = uint(value, 64, "revision")

    def push_revision(self) -> None:
        """revision += 1."""
        self._state.revision += 1
