"""Descriptions of all-reduce operations and of their results."""
from dataclasses import dataclass

from pccl._buffers import describe_pair
from pccl._enums import DataType, DistributionHint, QuantizationAlgorithm, ReduceOp
from pccl._native import ffi
from pccl._staging import stage_if_cuda


def of_type(cls, value, what):
    """`value` if it is an instance of `cls` (an Enum member, a descriptor); TypeError otherwise."""
    if not isinstance(value, cls):
        raise TypeError(f"{what} must be a pccl.{cls.__name__}, not {value!r}")
    return value


def uint(value, bits, what):
    """`value` as an int in [0, 2**bits); TypeError for non-integers, ValueError out of range."""
    if isinstance(value, bool) or not hasattr(value, "__index__"):
        raise TypeError(f"{what} must be an integer, not {value!r}")
    value = value.__index__()
    if not 0 <= value < 1 << bits:
        raise ValueError(f"{what} must be in [0, 2**{bits}), got {value}")
    return value


def check_multiple(tags, max_in_flight):
    """The checks of a multiple-with-retry call: distinct tags, max_in_flight an int >= 1 (ValueError)."""
    if len(set(tags)) != len(tags):
        raise ValueError(f"operations need distinct tags, got {tags}")
    if isinstance(max_in_flight, bool) or not isinstance(max_in_flight, int) or max_in_flight < 1:
        raise ValueError(f"max_in_flight must be an int >= 1, got {max_in_flight!r}")


@dataclass
class ReduceInfo:
    """Result of an all-reduce: `local_world_size` (peers that took part), `tx_bytes` / `rx_bytes`
    (payload bytes this peer sent / received)."""
    local_world_size: int
    tx_bytes: int
    rx_bytes: int

    @classmethod
    def _from_c(cls, c):
        return cls(c.local_world_size, c.tx_bytes, c.rx_bytes)


@dataclass
class SharedStateSyncInfo:
    """Result of a shared-state sync: payload bytes this peer sent to / received from other peers."""
    tx_bytes: int
    rx_bytes: int


class ReduceOperandDescriptor:
    """Element type of the reduced buffers and a hint on their values' distribution."""
    __slots__ = ("datatype", "distribution_hint")  # slots: cheaper on the launch path

    def __init__(self, datatype: DataType, distribution_hint: DistributionHint = DistributionHint.NONE):
        self.datatype = of_type(DataType, datatype, "datatype")
        self.distribution_hint = of_type(DistributionHint, distribution_hint, "distribution_hint")


class QuantizationOptions:
    """How values travel on the wire. With algorithm NONE the quantized type is ignored."""
    __slots__ = ("quantized_datatype", "algorithm")

    def __init__(self, quantized_datatype: DataType = DataType.UINT8,
                 algorithm: QuantizationAlgorithm = QuantizationAlgorithm.MIN_MAX):
        self.quantized_datatype = of_type(DataType, quantized_datatype, "quantized_datatype")
        self.algorithm = of_type(QuantizationAlgorithm, algorithm, "algorithm")


class ReduceDescriptor:
    """One all-reduce: `count` elements, `op`, `tag` (unique among operations in flight, < 2**64)."""
    __slots__ = ("count", "op", "tag", "operand_descriptor", "quantization_options")

    def __init__(self, count: int, op: ReduceOp, tag: int, operand_descriptor: ReduceOperandDescriptor,
                 quantization_options: QuantizationOptions = None):
        self.count = uint(count, 64, "count")
        self.op = of_type(ReduceOp, op, "op")
        self.tag = uint(tag, 64, "tag")
        self.operand_descriptor = of_type(ReduceOperandDescriptor, operand_descriptor, "operand_descriptor")
        if quantization_options is None:
            quantization_options = QuantizationOptions(self.operand_descriptor.datatype, QuantizationAlgorithm.NONE)
        self.quantization_options = of_type(QuantizationOptions, quantization_options, "quantization_options")

    def _c_init(self):
        """pcclReduceDescriptor_t's fields in declaration order, for cffi (positional: the fastest)."""
        o, q = self.operand_descriptor, self.quantization_options
        return (self.count, self.op._value_, self.tag, (o.datatype._value_, o.distribution_hint._value_),
                (q.quantized_datatype._value_, q.algorithm._value_))


class ReduceOpDescriptor:
    """An all-reduce with its buffers: `sendbuf_ptr` and `recvbuf_ptr` (host addresses; equal for in
    place) and a ReduceDescriptor. Build it with from_numpy / from_torch, which check the buffers
    against the descriptor and keep them alive; the raw constructor trusts its pointers."""
    __slots__ = ("sendbuf_ptr", "recvbuf_ptr", "reduce_descriptor", "_buffers", "_staging")

    def __init__(self, sendbuf_ptr: int, recvbuf_ptr: int, reduce_descriptor: ReduceDescriptor):
        self.sendbuf_ptr = uint(sendbuf_ptr, 64, "sendbuf_ptr")
        self.recvbuf_ptr = uint(recvbuf_ptr, 64, "recvbuf_ptr")
        self.reduce_descriptor = of_type(ReduceDescriptor, reduce_descriptor, "reduce_descriptor")
        self._buffers = ()  # the arrays or tensors behind the pointers
        self._staging = None  # HostStaging when the tensors are on CUDA

    @classmethod
    def _checked(cls, s, r, d, kind):
        """The operation on Buffers s, r after checking them against descriptor d."""
        if s.kind != kind:
            raise TypeError(f"from_{kind} needs {kind} buffers, got {s.kind}")
        if d.count != s.numel:
            raise ValueError(f"descriptor count {d.count} != {s.numel} elements in the buffers")
        if d.operand_descriptor.datatype != s.dtype:
            raise TypeError(f"descriptor datatype {d.operand_descriptor.datatype} != buffers' dtype {s.dtype}")
        staging = stage_if_cuda(s, r)
        op = cls(staging.send_ptr, staging.recv_ptr, d) if staging else cls(s.ptr, r.ptr, d)
        op._buffers, op._staging = (s.obj, r.obj), staging
        return op

    @classmethod
    def from_numpy(cls, send, recv, reduce_descriptor: ReduceDescriptor):
        """From two NumPy arrays (the same array for in place). Raises TypeError/ValueError on mismatches."""
        d = of_type(ReduceDescriptor, reduce_descriptor, "reduce_descriptor")
        return cls._checked(*describe_pair(send, recv), d, "numpy")

    @classmethod
    def from_torch(cls, send, recv, reduce_descriptor: ReduceDescriptor):
        """From two torch tensors on the same device (CPU, or CUDA staged through host memory)."""
        d = of_type(ReduceDescriptor, reduce_descriptor, "reduce_descriptor")
        return cls._checked(*describe_pair(send, recv), d, "torch")

    @classmethod
    def _for_call(cls, send, recv, op, tag, operand_descriptor, quantization_options):
        """The descriptor Communicator.all_reduce* builds from its arguments. It runs on every launch,
        so it checks only what the buffers do not already guarantee (op, tag, given descriptors) and
        builds the descriptor objects without their constructors' checks."""
        s, r = describe_pair(send, recv)
        of_type(ReduceOp, op, "op")
        tag = uint(tag, 64, "tag")
        if operand_descriptor is None:
            operand_descriptor = ReduceOperandDescriptor.__new__(ReduceOperandDescriptor)
            operand_descriptor.datatype, operand_descriptor.distribution_hint = s.dtype, DistributionHint.NONE
        elif of_type(ReduceOperandDescriptor, operand_descriptor, "operand_descriptor").datatype != s.dtype:
            raise TypeError(f"descriptor datatype {operand_descriptor.datatype} != buffers' dtype {s.dtype}")
        if quantization_options is None:
            quantization_options = QuantizationOptions.__new__(QuantizationOptions)
            quantization_options.quantized_datatype = s.dtype
            quantization_options.algorithm = QuantizationAlgorithm.NONE
        else:
            of_type(QuantizationOptions, quantization_options, "quantization_options")
        d = ReduceDescriptor.__new__(ReduceDescriptor)
        d.count, d.op, d.tag = s.numel, op, tag
        d.operand_descriptor, d.quantization_options = operand_descriptor, quantization_options
        staging = stage_if_cuda(s, r)
        rop = cls.__new__(cls)
        rop.sendbuf_ptr, rop.recvbuf_ptr = (staging.send_ptr, staging.recv_ptr) if staging else (s.ptr, r.ptr)
        rop.reduce_descriptor, rop._buffers, rop._staging = d, (s.obj, r.obj), staging
        return rop

    def _c_init(self):
        """pcclReduceOpDescriptor_t's fields in declaration order: ffi.new's initializer, or an array item."""
        return (ffi.cast("void *", self.sendbuf_ptr), ffi.cast("void *", self.recvbuf_ptr),
                self.reduce_descriptor._c_init())

    def _prepare(self):
        if self._staging:
            self._staging.prepare()

    def _finish(self):
        if self._staging:
            self._staging.finish()


def key_bytes(key, what):
    """A run key as bytes (str: its UTF-8), or None."""
    if key is None:
        return None
    if isinstance(key, str):
        key = key.encode("utf-8")
    if not isinstance(key, (bytes, bytearray, memoryview)):
        raise TypeError(f"{what} must be bytes, str or None, not {type(key).__name__}")
    return bytes(key)
