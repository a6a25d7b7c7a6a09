"""The communicator: one peer's connection to a run, its collectives and its shared-state syncs.

Every method that talks to the network blocks in C with the GIL released, so other Python
threads keep running.
"""
import enum
import logging
import threading
import time
from typing import Optional, Tuple, Union

from pccl._address import is_host_name, socket_address
from pccl._coll_comm import CollectivesMixin
from pccl._descriptors import (ReduceInfo, ReduceOpDescriptor, SharedStateSyncInfo, check_multiple, key_bytes, of_type,
                               uint)
from pccl._enums import Attribute, SharedStateSyncStrategy
from pccl._errors import PCCLError
from pccl._native import ffi, lib
from pccl._shared_state import SharedState

# Looked up now, not in __del__: cffi resolves a function on its first use under the lock its parser holds,
# and a collection that runs a finalizer in the middle of a parse (ffi.sizeof, ffi.new of a new type) would
# wait on that lock forever.
_destroy_communicator = lib.pcclDestroyCommunicator
_leave = lib.pcclExtLeave
_NULL = ffi.NULL

log = logging.getLogger("pccl")
_CONNECT_RETRY_S = 1.0
_CANCEL_POLL_S = 0.05
_CANCEL_WAIT_S = 30.0  # a cancelled pcclConnect returns within the library's connect timeout


class Departure(enum.Enum):
    """How this peer's part in the run ended (pcclExtDeparture_t, pccl_leave.h)."""
    IN_RUN = lib.pcclExtInRun          # still in the run, or not connected yet
    LEFT = lib.pcclExtLeft             # leave() succeeded
    KICKED = lib.pcclExtKicked         # the master removed this peer
    MASTER_LOST = lib.pcclExtMasterLost  # the master was lost for good, or refused this peer
    SHUT_DOWN = lib.pcclExtShutDown    # the master ended the run


class AsyncReduceHandle:
    """An all-reduce launched by Communicator.all_reduce_async; wait() for its outcome.

    Must be waited on by the thread that launched it. Until then the buffers must not be touched;
    the communicator keeps them alive even if this handle is dropped.
    """

    def __init__(self, handle, op=None, comm=None):
        self._handle = handle
        self._op = op
        self._comm = comm  # the C handle points into the communicator
        self._outcome = None

    def wait(self) -> Tuple[bool, int, ReduceInfo]:
        """Blocks until the operation ended. Returns (is_success, status, ReduceInfo); status is the
        pcclResult_t as an int (Result(status) names it). Never raises for a failed operation:
        on failure an in-place buffer holds its content from before the launch. Later calls return
        the same tuple."""
        if self._outcome is None:
            info = ffi.new("pcclReduceInfo_t *")
            status = lib.pcclAwaitAsyncReduce(self._handle, info)
            ok = status == lib.pcclSuccess
            if self._op is not None:
                if ok:
                    self._op._finish()
                self._comm._pending.pop(self._handle.tag, None)
            self._outcome = (ok, status, ReduceInfo._from_c(info))
            self._op = None
        return self._outcome


class Communicator(CollectivesMixin):
    """A peer of a run coordinated by the master at `address` ('IP:PORT', '[IPv6]:PORT' or 'HOST:PORT'; a host
    name is resolved again at every connect, and each of its addresses tried in getaddrinfo's order).

    Collectives: all_reduce here; broadcast, all_gather, all_gather_v, reduce_scatter and barrier (each
    with an _async form) in CollectivesMixin (pccl/_coll_comm.py).

    peer_group (uint32): collectives and shared state span only peers of the same group.
    p2p_connection_pool_size (uint32): connections per ring neighbour, one per concurrent all-reduce (0 = 1).
    Raises ValueError/TypeError for bad arguments, PCCLError if the library refuses them.
    """

    def __init__(self, address: str, peer_group: int = 0, p2p_connection_pool_size: int = 0):
        params = ffi.new("pcclCommCreateParams_t *")
        params.master_address = socket_address(address, "address")[0]
        params.peer_group = uint(peer_group, 32, "peer_group")
        params.p2p_connection_pool_size = uint(p2p_connection_pool_size, 32, "p2p_connection_pool_size")
        out = ffi.new("pcclComm_t **")
        PCCLError.check(lib.pcclCreateCommunicator(params, out), "pcclCreateCommunicator")
        self._comm = out[0]
        if is_host_name(address):
            # the library resolves the name at every connect and tries each address it gives, in order
            PCCLError.check(lib.pcclExtCommSetMasterHost(self._comm, address.encode()), "pcclExtCommSetMasterHost")
        self._pending = {}  # tag -> ReduceOpDescriptor or Collective of unawaited async ops (keeps buffers alive)
        self.address = address
        self.peer_group = params.peer_group
        self._phase = "created"  # created, connected, left, closed

    def __del__(self):
        comm, self._comm = getattr(self, "_comm", _NULL), _NULL
        if comm != _NULL:
            _destroy_communicator(comm)  # awaits outstanding ops before _pending is released

    def __enter__(self) -> "Communicator":
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        world = ""
        if self._phase == "connected":
            try:
                world = f", world_size={self.get_attribute(Attribute.GLOBAL_WORLD_SIZE)}"
            except PCCLError:
                pass
        return f"<pccl.Communicator {self.address} peer_group={self.peer_group} {self._phase}{world}>"

    @property
    def closed(self) -> bool:
        return self._comm == _NULL

    def close(self, leave: bool = True) -> None:
        """Leaves the run (when connected and `leave`; see leave()) and destroys the communicator, awaiting its
        outstanding operations. Idempotent; later calls of other methods raise PCCLFatalError."""
        if self._comm == _NULL:
            return
        if leave and self._phase == "connected":
            _leave(self._comm)  # its outcome does not matter: the communicator goes either way
        comm, self._comm = self._comm, _NULL  # later calls pass NULL: the library refuses them
        self._phase = "closed"
        _destroy_communicator(comm)
        self._pending.clear()

    def leave(self) -> None:
        """Leaves the run (pcclExtLeave): the master removes this peer without failing anyone's collective; a
        pcclConnect in progress on another thread is cancelled. Callable from any thread. Afterwards only close()
        is useful. Raises PCCLFatalError (INVALID_USAGE: not connecting or connected, or already left;
        MASTER_CONNECTION_FAILED / RUN_SHUT_DOWN: the run had already ended for this peer)."""
        PCCLError.check(lib.pcclExtLeave(self._comm), "pcclExtLeave")
        self._phase = "left"

    @property
    def departure(self) -> Departure:
        """How this peer's part in the run ended (Departure.IN_RUN while it goes on): tells a MASTER_CONNECTION_FAILED
        apart (left, kicked, master lost)."""
        out = ffi.new("pcclExtDeparture_t *")
        PCCLError.check(lib.pcclExtGetDeparture(self._comm, out), "pcclExtGetDeparture")
        return Departure(out[0])

    def set_run_key(self, key: Optional[Union[bytes, str]]) -> None:
        """Joins only the run keyed with `key` (at least 32 secret bytes; a trailing newline is not part of it;
        None: open runs only), instead of PCCL_KEY_FILE; before connect(). Only a digest is kept.
        Raises PCCLFatalError (INVALID_ARGUMENT: too short; INVALID_USAGE: already connected)."""
        key = key_bytes(key, "key")
        PCCLError.check(lib.pcclExtCommSetRunKey(self._comm, key if key is not None else ffi.NULL,
                                                 len(key) if key is not None else 0), "pcclExtCommSetRunKey")

    def set_name(self, name: str) -> None:
        """Names this peer in the master's status and logs (at most 63 printable ASCII bytes); before connect()."""
        if not isinstance(name, str):
            raise TypeError(f"name must be a str, not {type(name).__name__}")
        PCCLError.check(lib.pcclExtCommSetName(self._comm, name.encode("utf-8")), "pcclExtCommSetName")

    def get_attribute(self, attribute: Attribute) -> int:
        """The attribute's value (world sizes as of this peer's last topology update)."""
        value = ffi.new("int *")
        PCCLError.check(lib.pcclGetAttribute(self._comm, of_type(Attribute, attribute, "attribute").value, value),
                        "pcclGetAttribute")
        return value[0]

    def connect(self, n_attempts: int = 5, timeout_s: Optional[float] = None) -> None:
        """Connects to the master and blocks until the run accepts this peer (the existing peers'
        next update_topology). An unreachable master is retried n_attempts times, 1 s apart;
        raises PCCLError with the last failure.

        timeout_s: the deadline of the whole call. Past it the connect is cancelled (leave()) and TimeoutError
        raised; the communicator is then spent (close it, create another). Without it the call waits for as
        long as the run takes to accept this peer, which is forever when its peers never update the topology."""
        n_attempts = uint(n_attempts, 32, "n_attempts")
        if n_attempts == 0:
            raise ValueError("n_attempts must be at least 1")
        if timeout_s is None:
            return self._connect(n_attempts, lambda: False)
        cancelled = threading.Event()
        outcome = []

        def attempt():
            try:
                self._connect(n_attempts, cancelled.is_set)
                outcome.append(None)
            except BaseException as e:  # handed to the caller's thread
                outcome.append(e)
        t = threading.Thread(target=attempt, name="pccl-connect", daemon=True)
        t.start()
        t.join(timeout_s)
        if t.is_alive():
            cancelled.set()
            give_up = time.monotonic() + _CANCEL_WAIT_S
            while t.is_alive() and time.monotonic() < give_up:
                _leave(self._comm)  # cancels a pcclConnect in progress; refused (harmlessly) between attempts
                t.join(_CANCEL_POLL_S)
            self._phase = "left"
            raise TimeoutError(f"not accepted into the run at {self.address} within {timeout_s} s")
        if outcome and outcome[0] is not None:
            raise outcome[0]

    def _connect(self, n_attempts, cancelled):
        for attempt in range(1, n_attempts + 1):
            if cancelled():
                raise TimeoutError("connect cancelled")
            result = lib.pcclConnect(self._comm)
            if result != lib.pcclMasterConnectionFailed or attempt == n_attempts:
                break
            log.warning("pcclConnect failed (attempt %d/%d): master unreachable; retrying in %.0f s",
                        attempt, n_attempts, _CONNECT_RETRY_S)
            time.sleep(_CONNECT_RETRY_S)
        PCCLError.check(result, "pcclConnect")
        self._phase = "connected"

    def update_topology(self) -> None:
        """Votes to accept pending peers and drop vanished ones; blocks until the new ring is wired.
        Raises PCCLError (UPDATE_TOPOLOGY_FAILED: retry; PENDING_ASYNC_OPS: wait on handles first)."""
        PCCLError.check(lib.pcclUpdateTopology(self._comm), "pcclUpdateTopology")

    def are_peers_pending(self) -> bool:
        """Joint vote of the accepted peers: True if peers wait to be accepted (then call update_topology)."""
        pending = ffi.new("bool *")
        PCCLError.check(lib.pcclArePeersPending(self._comm, pending), "pcclArePeersPending")
        return bool(pending[0])

    def optimize_topology(self) -> None:
        """Joint vote to re-order the ring by measured bandwidth. Raises PCCLError
        (TOPOLOGY_OPTIMIZATION_FAILED: retry)."""
        PCCLError.check(lib.pcclOptimizeTopology(self._comm), "pcclOptimizeTopology")

    def sync_shared_state(self, shared_state: SharedState,
                          strategy: SharedStateSyncStrategy = SharedStateSyncStrategy.ENFORCE_POPULAR
                          ) -> SharedStateSyncInfo:
        """Makes shared_state bit-identical across the peer group; an outdated peer's tensors are
        overwritten in place and its revision set to the group's. Returns the payload bytes sent
        and received. Raises PCCLError (e.g. INVALID_USAGE for a revision ahead of the group's)."""
        of_type(SharedState, shared_state, "shared_state")
        info = ffi.new("pcclSharedStateSyncInfo_t *")
        PCCLError.check(lib.pcclSynchronizeSharedState(
            self._comm, shared_state._state, of_type(SharedStateSyncStrategy, strategy, "strategy").value, info),
            "pcclSynchronizeSharedState")
        return SharedStateSyncInfo(info.tx_bytes, info.rx_bytes)

    def all_reduce(self, send, recv, *, op, tag: int = 0, operand_descriptor=None,
                   quantization_options=None) -> ReduceInfo:
        """Reduces `send` over the peer group into `recv` (the same array or tensor for in place).

        send, recv: contiguous NumPy arrays or torch tensors (CPU, or CUDA staged through host
        memory) of one dtype and element count. Every peer ends with the same bits. Raises
        TypeError/ValueError for bad buffers, PCCLError (TOO_FEW_PEERS alone, RANK_CONNECTION_LOST:
        retry; in place, recv then holds its content from before the call)."""
        rop = ReduceOpDescriptor._for_call(send, recv, op, tag, operand_descriptor, quantization_options)
        c = self._c_op(rop)
        info = ffi.new("pcclReduceInfo_t *")
        PCCLError.check(lib.pcclAllReduce(c.sendbuf, c.recvbuf, ffi.addressof(c, "descriptor"), self._comm, info),
                        "pcclAllReduce")
        rop._finish()
        return ReduceInfo._from_c(info)

    def all_reduce_async(self, send, recv, *, op, tag: int = 0, operand_descriptor=None,
                         quantization_options=None) -> AsyncReduceHandle:
        """Launches all_reduce and returns at once; the outcome comes from the handle's wait().
        Concurrent operations need distinct tags. Raises as all_reduce for what fails at launch
        (bad arguments, TOO_FEW_PEERS, a tag in flight)."""
        # The launch path: Python's share of a launch is all work done here (bench/lat_compare.py).
        rop = ReduceOpDescriptor._for_call(send, recv, op, tag, operand_descriptor, quantization_options)
        rop._prepare()
        sendbuf, recvbuf, desc = rop._c_init()
        handle = ffi.new("pcclAsyncReduceOp_t *")
        PCCLError.check(lib.pcclAllReduceAsync(sendbuf, recvbuf, ffi.new("pcclReduceDescriptor_t *", desc),
                                               self._comm, handle), "pcclAllReduceAsync")
        self._pending[rop.reduce_descriptor.tag] = rop
        return AsyncReduceHandle(handle, rop, self)

    def all_reduce_multiple_with_retry(self, descriptors, *, max_in_flight: int = 4) -> ReduceInfo:
        """Runs the ReduceOpDescriptors (distinct tags), at most max_in_flight at once, retrying
        failed ones until all succeeded or the group fell below 2 peers. Returns tx/rx bytes summed
        over all and the last world size. Raises PCCLError (TOO_FEW_PEERS)."""
        ops = [of_type(ReduceOpDescriptor, d, "each descriptor") for d in descriptors]
        check_multiple([d.reduce_descriptor.tag for d in ops], max_in_flight)
        c = ffi.new("pcclReduceOpDescriptor_t[]", len(ops))
        for i, rop in enumerate(ops):
            rop._prepare()
            c[i] = rop._c_init()
        info = ffi.new("pcclReduceInfo_t *")
        PCCLError.check(lib.pcclAllReduceMultipleWithRetry(c, len(ops), self._comm, info, max_in_flight),
                        "pcclAllReduceMultipleWithRetry")
        for rop in ops:
            rop._finish()
        return ReduceInfo._from_c(info)

    @staticmethod
    def _c_op(rop):
        rop._prepare()
        return ffi.new("pcclReduceOpDescriptor_t *", rop._c_init())

