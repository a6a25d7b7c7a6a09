"""Communicator's collectives beyond the all-reduce (pccl_coll.h): broadcast, all-gather, all-gather of
variable counts, reduce-scatter and barrier, blocking and async.

The contract is the all-reduce's: every member of the peer group calls the same collective with the same
tag; the master cross-checks the members' parameters and rejects a mismatch on every member
(PCCLError INVALID_USAGE, the reason in each member's log); a failure anywhere aborts the operation on
every member (RANK_CONNECTION_LOST: in place the output holds its content from before the call, out of
place the input is untouched, so the same call may be retried); alone, TOO_FEW_PEERS. Counts are in
elements, never bytes. Buffers are contiguous NumPy arrays or torch tensors (CPU, or CUDA staged through
host memory), one dtype per operation.

Ranks: by default a member's rank is its position in the operation's ring, which changes as peers come
and go (read it from the returned CollectiveInfo); with rank_key (a uint64 unique among the members,
given by every member or none) ranks follow the keys in ascending order.
"""
from typing import Any, List, Tuple

from pccl._buffers import describe
from pccl._coll import CollectiveInfo
import pccl._coll as coll
from pccl._descriptors import check_multiple, of_type, uint
from pccl._enums import Attribute, CollectiveKind
from pccl._errors import PCCLError
from pccl._native import ffi, lib


class AsyncCollectiveHandle:
    """A collective launched by one of Communicator's *_async methods; wait() or result() for its outcome.

    Must be waited on by the thread that launched it. Until then the buffers must not be touched; the
    communicator keeps them alive even if this handle is dropped.
    """

    def __init__(self, handle, op, comm):
        self._handle, self._op, self._comm = handle, op, comm
        self._outcome, self._value = None, None

    @property
    def kind(self) -> CollectiveKind:
        """The CollectiveKind of the operation."""
        return self._op.kind

    def wait(self) -> Tuple[bool, int, CollectiveInfo]:
        """Blocks until the operation ended. Returns (is_success, status, CollectiveInfo); status is the
        pcclResult_t as an int (Result(status) names it). Never raises for a failed operation: on failure
        an in-place output holds its content from before the launch. Later calls return the same tuple."""
        if self._outcome is None:
            info = ffi.new("pcclExtCollInfo_t *")
            status = lib.pcclExtAwaitCollective(self._handle, info)
            ok = status == lib.pcclSuccess
            if ok:
                self._value = self._op.finish(info)
            self._comm._pending.pop(self._handle.tag, None)
            self._outcome = (ok, status, CollectiveInfo._from_c(info))
        return self._outcome

    def result(self) -> Any:
        """Waits, then returns what the blocking form returns (e.g. (output, info) of all_gather), or
        raises PCCLError (func_name "pcclExtAwaitCollective") with the operation's result."""
        ok, status, _ = self.wait()
        if not ok:
            raise PCCLError(status, "pcclExtAwaitCollective")
        return self._value


class CollectiveOp:
    """One collective for Communicator.collectives_multiple_with_retry, built by the class method of its
    kind, whose arguments are those of the Communicator's call of that name. Outputs are not sized against a
    world here: all_gather and all_gather_v need recv (and all_gather_v max_world); reduce_scatter may
    allocate (the largest block of a world of 2)."""
    __slots__ = ("_op",)

    def __init__(self, op):
        self._op = op

    @property
    def kind(self) -> CollectiveKind:
        """The CollectiveKind of the operation."""
        return self._op.kind

    @property
    def tag(self) -> int:
        return self._op.desc.tag

    @classmethod
    def broadcast(cls, tensor, *, is_root: bool, send=None, tag: int = 0, rank_key: int = None,
                  shared_sources: bool = False) -> "CollectiveOp":
        return cls(coll.broadcast(tensor, is_root, send, tag, rank_key, shared_sources))

    @classmethod
    def all_gather(cls, send, recv, *, tag: int = 0, rank_key: int = None) -> "CollectiveOp":
        if recv is None:
            raise ValueError("CollectiveOp.all_gather needs recv")
        return cls(coll.all_gather(send, recv, tag, rank_key, 0))

    @classmethod
    def all_gather_v(cls, send, recv, *, max_world: int, tag: int = 0, rank_key: int = None) -> "CollectiveOp":
        if recv is None:
            raise ValueError("CollectiveOp.all_gather_v needs recv")
        return cls(coll.all_gather_v(send, recv, tag, rank_key, max_world))

    @classmethod
    def reduce_scatter(cls, send, recv=None, *, op, tag: int = 0, quantization_options=None, rank_key: int = None) -> "CollectiveOp":
        return cls(coll.reduce_scatter(send, recv, op, tag, quantization_options, rank_key))

    @classmethod
    def barrier(cls, *, tag: int = 0, rank_key: int = None) -> "CollectiveOp":
        return cls(coll.barrier(tag, rank_key))


class CollectivesMixin:
    """The collectives of Communicator (which provides _comm, _pending and get_attribute)."""

    def _group_world(self):
        """The peer group's world size for sizing outputs, at least 2 (alone, the library's TOO_FEW_PEERS
        is the answer). An operation's world is at most this until this peer's next update_topology."""
        return max(self.get_attribute(Attribute.PEER_GROUP_WORLD_SIZE), 2)

    def _run(self, op):
        op.prepare()
        info = ffi.new("pcclExtCollInfo_t *")
        PCCLError.check(lib.pcclExtCollective(op.desc, self._comm, info), "pcclExtCollective")
        return op.finish(info)

    def _launch(self, op):
        op.prepare()
        handle = ffi.new("pcclExtAsyncCollOp_t *")
        PCCLError.check(lib.pcclExtCollectiveAsync(op.desc, self._comm, handle), "pcclExtCollectiveAsync")
        self._pending[op.desc.tag] = op
        return AsyncCollectiveHandle(handle, op, self)

    def broadcast(self, tensor, *, is_root: bool, send=None, tag: int = 0, rank_key: int = None,
                  shared_sources: bool = False) -> CollectiveInfo:
        """The root's elements reach `tensor` on every member.

        tensor: the output, the same element count and dtype on every member; the root's is also its
        input unless it passes `send` (same count and dtype as tensor: out of place; tensor receives a
        copy). is_root: exactly one member passes True (none, or two, is rejected on every member:
        INVALID_USAGE). shared_sources: members whose tensor already equals the root's send too (costs a
        hash of the buffer per member). Returns CollectiveInfo (root: the root's rank). Raises
        TypeError/ValueError for bad arguments, PCCLError as the module says."""
        return self._run(coll.broadcast(tensor, is_root, send, tag, rank_key, shared_sources))

    def broadcast_async(self, tensor, *, is_root: bool, send=None, tag: int = 0, rank_key: int = None,
                        shared_sources: bool = False) -> AsyncCollectiveHandle:
        """broadcast, launched: returns at once; result() gives the CollectiveInfo."""
        return self._launch(coll.broadcast(tensor, is_root, send, tag, rank_key, shared_sources))

    def all_gather(self, send, recv=None, *, tag: int = 0, rank_key: int = None) -> Tuple[Any, CollectiveInfo]:
        """Every member's `send` (count elements, the same count on every member), ordered by rank.

        recv: the output, holding at least world_size * count elements; block r (elements
        [r*count, (r+1)*count)) is rank r's send. In place: send is the first count elements of recv
        (e.g. recv[:count]), moved to this member's block. recv None: allocated with shape
        (W, *send.shape) for the peer group's world size W (Attribute.PEER_GROUP_WORLD_SIZE), which an
        operation's world never exceeds until the next update_topology; a smaller world (a peer left)
        fills its first world_size rows. Returns (output, CollectiveInfo): output is recv when the
        operation filled it, the first world_size rows of an allocated recv, else a 1-D view of the first
        info.count elements. An output too small for the world is rejected on every member (INVALID_USAGE)."""
        return self._run(coll.all_gather(send, recv, tag, rank_key, self._group_world() if recv is None else 0))

    def all_gather_async(self, send, recv=None, *, tag: int = 0, rank_key: int = None) -> AsyncCollectiveHandle:
        """all_gather, launched: returns at once; result() gives (output, CollectiveInfo)."""
        return self._launch(coll.all_gather(send, recv, tag, rank_key, self._group_world() if recv is None else 0))

    def all_gather_v(self, send, recv=None, *, tag: int = 0, rank_key: int = None, max_world: int = None) -> Tuple[Any, List[int], CollectiveInfo]:
        """Every member's `send`, each member with its own element count (0 allowed), packed in rank order.

        recv: the output, holding at least the sum of the counts (the members must agree on passing
        recv: every member or none). recv None: the members first all-gather their counts (one more
        operation of the same tag) and recv is allocated for their sum; a peer that leaves in between
        only shrinks what is needed. max_world: the most members the counts output holds (default: the
        peer group's world size); a larger world is rejected on every member. Returns
        (output, counts, CollectiveInfo): output is a 1-D view of the info.count gathered elements, rank
        r's block starting at sum(counts[:r]); counts is a list of world_size ints."""
        max_world = self._group_world() if max_world is None else uint(max_world, 32, "max_world")
        total = None
        if recv is None:
            s = describe(send, "send", allow_empty=True)  # bad input fails here, before the first operation
            counts, _ = self._run(coll.gather_counts(s.numel, tag, rank_key, max_world))
            total = sum(counts)
        return self._run(coll.all_gather_v(send, recv, tag, rank_key, max_world, total))

    def all_gather_v_async(self, send, recv, *, tag: int = 0, rank_key: int = None,
                           max_world: int = None) -> AsyncCollectiveHandle:
        """all_gather_v, launched: returns at once; result() gives (output, counts, CollectiveInfo).
        recv is required (allocating it takes a blocking exchange of the counts)."""
        if recv is None:
            raise ValueError("all_gather_v_async needs recv (all_gather_v allocates it)")
        max_world = self._group_world() if max_world is None else uint(max_world, 32, "max_world")
        return self._launch(coll.all_gather_v(send, recv, tag, rank_key, max_world))

    def reduce_scatter(self, send, recv=None, *, op, tag: int = 0, quantization_options=None,
                       rank_key: int = None) -> Tuple[Any, CollectiveInfo]:
        """Reduces `send` (count elements, the same count on every member) with op across the members;
        rank r of a world of W keeps block r: elements [r*(count//W) + min(r, count%W), ...) of length
        count//W + (r < count%W) (info.offset, info.count). ReduceOp.AVG divides by W. Bit-identical on
        every member; quantization_options as all_reduce's.

        recv: out of place, the block is written to its start (it holds at least the largest block); in
        place (recv is send) the block stays at its own offset. recv None: allocated for the largest block
        any world of 2 or more gives, since the world is known only once the operation commenced.
        Returns (block, CollectiveInfo): block is a 1-D view of recv holding this member's info.count
        elements."""
        return self._run(coll.reduce_scatter(send, recv, op, tag, quantization_options, rank_key))

    def reduce_scatter_async(self, send, recv=None, *, op, tag: int = 0, quantization_options=None,
                             rank_key: int = None) -> AsyncCollectiveHandle:
        """reduce_scatter, launched: returns at once; result() gives (block, CollectiveInfo)."""
        return self._launch(coll.reduce_scatter(send, recv, op, tag, quantization_options, rank_key))

    def barrier(self, *, tag: int = 0, rank_key: int = None) -> CollectiveInfo:
        """Returns once every member of the peer group entered a barrier of this tag."""
        return self._run(coll.barrier(tag, rank_key))

    def barrier_async(self, *, tag: int = 0, rank_key: int = None) -> AsyncCollectiveHandle:
        """barrier, launched: returns at once; result() gives the CollectiveInfo."""
        return self._launch(coll.barrier(tag, rank_key))

    def collectives_multiple_with_retry(self, ops, *, max_in_flight: int = 4) -> list:
        """Runs the CollectiveOps (distinct tags), at most max_in_flight at once, and retries those aborted
        with RANK_CONNECTION_LOST (every member retries the same ones, in-place outputs restored first)
        until all succeeded. Returns, per operation in order, what its blocking call returns. Raises
        PCCLError with the first result that is not a retryable abort (TOO_FEW_PEERS, INVALID_USAGE...)."""
        ops = [of_type(CollectiveOp, o, "each operation")._op for o in ops]
        check_multiple([o.desc.tag for o in ops], max_in_flight)
        if not ops:
            return []
        descs = ffi.new("pcclExtCollDescriptor_t[]", len(ops))
        for i, o in enumerate(ops):
            o.prepare()
            descs[i] = o.desc[0]
        infos = ffi.new("pcclExtCollInfo_t[]", len(ops))
        PCCLError.check(lib.pcclExtCollectiveMultipleWithRetry(descs, len(ops), self._comm, infos, max_in_flight),
                        "pcclExtCollectiveMultipleWithRetry")
        return [o.finish(infos[i]) for i, o in enumerate(ops)]
