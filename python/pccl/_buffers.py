"""Checks NumPy arrays and torch tensors handed to the library and reads their raw buffers.

Every problem is a ValueError or TypeError raised here, before any pointer reaches C.
"""
import sys
from pccl._enums import DataType, DeviceType


class Buffer:
    """One contiguous buffer: `ptr` (address), `numel` (elements), `dtype`, `device`, `kind` ('numpy' or
    'torch') and `obj` (the array or tensor, kept so its memory outlives the call). A plain class with
    slots: one is built per buffer per all-reduce, on the launch path."""
    __slots__ = ("obj", "kind", "ptr", "numel", "dtype", "device", "writeable")

    def __init__(self, obj, kind, ptr, numel, dtype, device, writeable):
        self.obj, self.kind, self.ptr, self.numel = obj, kind, ptr, numel
        self.dtype, self.device, self.writeable = dtype, device, writeable


def is_numpy(x):
    np = sys.modules.get("numpy")
    return np is not None and isinstance(x, np.ndarray)


def is_torch(x):
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(x, torch.Tensor)


def describe(x, what, allow_empty=False):
    """Buffer of a NumPy array or torch tensor. `what` names it in messages ("send", "recv").

    Raises TypeError (neither array nor tensor, DTensor) or ValueError (non-contiguous, empty unless
    allow_empty, unsupported dtype or device).
    """
    if is_numpy(x):
        if not x.flags.c_contiguous:
            raise ValueError(f"{what} array must be C-contiguous (use numpy.ascontiguousarray)")
        dtype, device, numel, ptr, writeable = (DataType.from_numpy_dtype(x.dtype), DeviceType.CPU,
                                                x.size, x.ctypes.data, x.flags.writeable)
        kind = "numpy"
    elif is_torch(x):
        if type(x).__name__ == "DTensor":
            raise TypeError(f"{what} is a distributed DTensor; pass its local tensor")
        if not x.is_contiguous():
            raise ValueError(f"{what} tensor must be contiguous (use .contiguous())")
        device = DeviceType.from_torch_device_type(x.device.type)
        if device is None:
            raise ValueError(f"{what} tensor is on unsupported device {x.device} (cpu and cuda only)")
        dtype, numel, ptr, writeable, kind = DataType.from_torch_dtype(x.dtype), x.numel(), x.data_ptr(), True, "torch"
    else:
        raise TypeError(f"{what} must be a numpy.ndarray or a torch.Tensor, not {type(x).__name__}")
    if numel == 0 and not allow_empty:
        raise ValueError(f"{what} is empty (0 elements)")
    return Buffer(x, kind, ptr, numel, dtype, device, writeable)


def describe_pair(send, recv):
    """Buffers of an all-reduce's input and output (the same object for in place).

    Raises TypeError (mixed NumPy/torch, different dtypes) or ValueError (different element counts
    or devices, read-only output) besides describe()'s errors.
    """
    if send is recv:  # in place, the common case: one buffer to check
        s = describe(send, "recv")
        if not s.writeable:
            raise ValueError("recv array is read-only")
        return s, s
    s, r = describe_matching(send, recv)
    if s.numel != r.numel:
        raise ValueError(f"send and recv element counts differ: {s.numel} and {r.numel}")
    return s, r


def describe_matching(send, recv, allow_empty_send=False):
    """Buffers of an input and a distinct output of one kind, dtype and device (element counts may differ).

    Raises TypeError (mixed NumPy/torch, different dtypes) or ValueError (different devices, read-only
    output) besides describe()'s errors.
    """
    s, r = describe(send, "send", allow_empty_send), describe(recv, "recv")
    if s.kind != r.kind:
        raise TypeError(f"send and recv must both be numpy.ndarray or both torch.Tensor, not {s.kind} and {r.kind}")
    if s.dtype != r.dtype:
        raise TypeError(f"send and recv dtypes differ: {s.obj.dtype} and {r.obj.dtype}")
    if s.kind == "torch" and send.device != recv.device:
        raise ValueError(f"send and recv are on different devices: {send.device} and {recv.device}")
    if not r.writeable:
        raise ValueError("recv array is read-only")
    return s, r
