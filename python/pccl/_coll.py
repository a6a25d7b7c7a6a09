"""The collectives of pccl_coll.h as operation records: one C descriptor with the buffers behind it,
their host staging (CUDA), and how the caller's result is read back once the operation succeeded.

Builders check the arguments (TypeError/ValueError before anything reaches C); what only the whole
group can judge (counts, roots, capacities against the world) is the master's check, which rejects a
mismatch on every member alike.
"""
import sys
from dataclasses import dataclass

from pccl._buffers import describe, describe_matching, is_numpy
from pccl._descriptors import QuantizationOptions, of_type, uint
from pccl._enums import CollectiveKind, DataType, QuantizationAlgorithm, ReduceOp
from pccl._native import ffi, lib
from pccl._staging import stage_if_cuda


@dataclass
class CollectiveInfo:
    """What one collective did on this peer (pcclExtCollInfo_t).

    rank: this peer's rank in the operation (0..world_size-1: its ring position, or its place among the
    members' rank_keys in ascending order); world_size: the operation's members; root: the broadcast
    root's rank (0 for other kinds); offset: reduce-scatter: element offset of this peer's block in the
    input; count: elements written to the output (the block, or all gathered blocks); tx_bytes /
    rx_bytes: payload bytes this peer sent / received."""
    rank: int
    world_size: int
    root: int
    offset: int
    count: int
    tx_bytes: int
    rx_bytes: int

    @classmethod
    def _from_c(cls, c):
        return cls(c.rank, c.world_size, c.root, c.offset, c.count, c.tx_bytes, c.rx_bytes)


def flat(x):
    """A 1-D view of a contiguous array or tensor."""
    return x.reshape(-1) if is_numpy(x) else x.view(-1)


def empty_like(b, shape):
    """An uninitialized output of `shape` with the kind, dtype and device of Buffer b."""
    if b.kind == "numpy":
        return sys.modules["numpy"].empty(shape, b.obj.dtype)
    return sys.modules["torch"].empty(shape, dtype=b.obj.dtype, device=b.obj.device)


class Collective:
    """One collective: `desc` (the pcclExtCollDescriptor_t), the objects it points into (kept alive
    until the operation ended) and `_result`, which turns the C info into the caller's return value."""
    __slots__ = ("kind", "desc", "_keep", "_staging", "_result")

    def __init__(self, kind, tag, flags, rank_key):
        self.kind = kind
        self.desc = ffi.new("pcclExtCollDescriptor_t *")
        self.desc.kind, self.desc.tag, self.desc.flags = kind.value, tag, flags
        if rank_key is not None:
            self.desc.flags |= lib.PCCL_EXT_COLL_RANKED
            self.desc.rank_key = rank_key
        self._keep, self._staging, self._result = [], None, None

    @classmethod
    def _new(cls, kind, tag, rank_key, flags=0):
        return cls(kind, uint(tag, 64, "tag"), flags, None if rank_key is None else uint(rank_key, 64, "rank_key"))

    def _buffers(self, s, r, count, capacity):
        """Points the descriptor at Buffers s and r (the same for in place), staging CUDA tensors through
        host memory."""
        self._keep += [s.obj, r.obj]
        self._staging = stage_if_cuda(s, r)
        sptr, rptr = (self._staging.send_ptr, self._staging.recv_ptr) if self._staging else (s.ptr, r.ptr)
        if s.numel == 0:  # an empty input may have no address; in place, its 0 elements are recv's first 0
            sptr = rptr
        d = self.desc
        d.sendbuf, d.recvbuf = ffi.cast("void *", sptr), ffi.cast("void *", rptr)
        d.count, d.recv_capacity, d.datatype = count, capacity, r.dtype.value
        d.quantization_options = (r.dtype.value, lib.pcclQuantNone)

    def prepare(self):
        """Copies CUDA inputs to host memory; right before the launch."""
        if self._staging:
            self._staging.prepare()

    def finish(self, info):
        """The caller's return value of the succeeded operation (info: pcclExtCollInfo_t *)."""
        return self._result(CollectiveInfo._from_c(info))

    def _copy_back(self, start, stop):
        if self._staging:
            self._staging.finish(start, stop)


def broadcast(tensor, is_root, send, tag, rank_key, shared_sources):
    if not isinstance(is_root, bool):
        raise TypeError(f"is_root must be a bool, not {is_root!r}")
    c = Collective._new(CollectiveKind.BROADCAST, tag, rank_key,
                        (lib.PCCL_EXT_COLL_ROOT if is_root else 0) |
                        (lib.PCCL_EXT_COLL_SHARED_SOURCES if shared_sources else 0))
    if send is None or send is tensor:
        r = describe(tensor, "tensor")
        if not r.writeable:
            raise ValueError("tensor array is read-only")
        s = r
    else:
        if not is_root:
            raise ValueError("send is the root's input: a peer that is not the root passes only tensor")
        s, r = describe_matching(send, tensor)
        if s.numel != r.numel:
            raise ValueError(f"send and tensor element counts differ: {s.numel} and {r.numel}")
    c._buffers(s, r, r.numel, r.numel)

    def result(info):
        c._copy_back(0, None)
        return info
    c._result = result
    return c


def _view_of_written(recv, allocated, count):
    """The part of recv an all-gather wrote: recv itself when it is all of it; an allocated (W, ...)
    output's first rows; else a 1-D view of the first count elements."""
    n = recv.size if is_numpy(recv) else recv.numel()
    if count == n:
        return recv
    if allocated:
        return recv[:count // (n // recv.shape[0])]
    return flat(recv)[:count]


def all_gather(send, recv, tag, rank_key, world):
    """world: the blocks to allocate when recv is None."""
    c = Collective._new(CollectiveKind.ALL_GATHER, tag, rank_key)
    s, r = _gather_buffers(send, recv, lambda b: (world, *b.obj.shape))
    c._buffers(s, r, s.numel, r.numel)

    def result(info):
        c._copy_back(0, info.count)
        return _view_of_written(r.obj, recv is None, info.count), info
    c._result = result
    return c


def _gather_buffers(send, recv, alloc_shape, allow_empty=False):
    """Buffers of a gather's input and output; recv None: allocated with alloc_shape(send's Buffer)."""
    if recv is None:
        s = describe(send, "send", allow_empty)
        recv = empty_like(s, alloc_shape(s))
        return s, describe(recv, "recv")
    return describe_matching(send, recv, allow_empty)


def all_gather_v(send, recv, tag, rank_key, max_world, total=None):
    """max_world: entries of the counts output (the largest world the operation may have); total: the
    sum of the members' counts when recv is None (the caller learned it with gather_counts)."""
    c = Collective._new(CollectiveKind.ALL_GATHER_V, tag, rank_key)
    max_world = uint(max_world, 32, "max_world")
    if max_world < 2:
        raise ValueError(f"max_world must be at least 2, got {max_world}")
    if recv is None and total is None:
        raise ValueError("all_gather_v needs recv, or the total of the counts to allocate it")
    s, r = _gather_buffers(send, recv, lambda b: (max(total or 0, 1),), allow_empty=True)
    c._buffers(s, r, s.numel, r.numel)
    counts = ffi.new("uint64_t[]", max_world)
    c._keep.append(counts)
    c.desc.counts, c.desc.counts_capacity = counts, max_world

    def result(info):
        c._copy_back(0, info.count)
        return flat(r.obj)[:info.count], [int(x) for x in counts[0:info.world_size]], info
    c._result = result
    return c


def gather_counts(count, tag, rank_key, world):
    """The all-gather of every member's element count that precedes an all-gather-v whose output
    Python allocates: a Collective whose result is (counts, info)."""
    c = Collective._new(CollectiveKind.ALL_GATHER, tag, rank_key)
    send, recv = ffi.new("uint64_t[1]", [count]), ffi.new("uint64_t[]", world)
    c._keep += [send, recv]
    d = c.desc
    d.sendbuf, d.recvbuf, d.count, d.recv_capacity = send, recv, 1, world
    d.datatype = d.quantization_options.quantized_datatype = lib.pcclUint64
    c._result = lambda info: ([int(x) for x in recv[0:info.world_size]], info)
    return c


def reduce_scatter(send, recv, op, tag, quantization_options, rank_key):
    c = Collective._new(CollectiveKind.REDUCE_SCATTER, tag, rank_key)
    of_type(ReduceOp, op, "op")
    in_place = recv is send
    if recv is None:
        s = describe(send, "send")
        # A world of 2 gives the largest block; the operation's world is known only once it commenced.
        recv = empty_like(s, ((s.numel + 1) // 2,))
        r = describe(recv, "recv")
    elif in_place:
        s = r = describe(send, "recv")
        if not r.writeable:
            raise ValueError("recv array is read-only")
    else:
        s, r = describe_matching(send, recv)
        if s.ptr == r.ptr:
            raise ValueError("send and recv start at the same address: pass the same object for in place")
    c._buffers(s, r, s.numel, r.numel)
    c.desc.op = op.value
    if quantization_options is not None:
        q = of_type(QuantizationOptions, quantization_options, "quantization_options")
        c.desc.quantization_options = (q.quantized_datatype.value, q.algorithm.value)

    def result(info):
        start = info.offset if in_place else 0
        c._copy_back(start, start + info.count)
        return flat(r.obj)[start:start + info.count], info
    c._result = result
    return c


def barrier(tag, rank_key):
    c = Collective._new(CollectiveKind.BARRIER, tag, rank_key)
    c.desc.datatype = c.desc.quantization_options.quantized_datatype = DataType.UINT8.value
    c.desc.quantization_options.algorithm = QuantizationAlgorithm.NONE.value
    c._result = lambda info: info
    return c
