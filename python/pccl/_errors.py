"""Result codes and the exception every failing library call raises."""
from enum import Enum

from pccl._native import ffi, lib


class Result(Enum):
    """pcclResult_t, with the C library's values."""
    SUCCESS = lib.pcclSuccess
    NOT_INITIALIZED = lib.pcclNotInitialized
    INTERNAL_ERROR = lib.pcclInternalError
    INVALID_ARGUMENT = lib.pcclInvalidArgument
    INVALID_USAGE = lib.pcclInvalidUsage
    TOO_FEW_PEERS = lib.pcclTooFewPeers
    MASTER_CONNECTION_FAILED = lib.pcclMasterConnectionFailed
    RANK_CONNECTION_FAILED = lib.pcclRankConnectionFailed
    RANK_CONNECTION_LOST = lib.pcclRankConnectionLost
    NO_SHARED_STATE_AVAILABLE = lib.pcclNoSharedStateAvailable
    PENDING_ASYNC_OPS = lib.pcclPendingAsyncOps
    UPDATE_TOPOLOGY_FAILED = lib.pcclUpdateTopologyFailed
    TOPOLOGY_OPTIMIZATION_FAILED = lib.pcclTopologyOptimizationFailed
    # Extension (pccl_leave.h, pcclExtRunShutDown): the master ended the run (`pccl shutdown`); every later call
    # of the communicator fails with it and the peer never reconnects.
    RUN_SHUT_DOWN = 15


def result_string(code):
    """The library's description of a result code (pcclResultString)."""
    return ffi.string(lib.pcclResultString(int(code))).decode("utf-8", "replace")


# Failures a program heals by starting the step over (update the topology, sync, retry): a peer left or could not be
# reached, the world changed under a vote, no peer held the requested shared state.
RETRYABLE_RESULTS = frozenset({Result.TOO_FEW_PEERS, Result.RANK_CONNECTION_FAILED, Result.RANK_CONNECTION_LOST,
                               Result.UPDATE_TOPOLOGY_FAILED, Result.TOPOLOGY_OPTIMIZATION_FAILED,
                               Result.NO_SHARED_STATE_AVAILABLE})


class PCCLError(Exception):
    """A library call returned something other than pcclSuccess.

    Attributes: `result` (a Result member; INTERNAL_ERROR for a code this package does not know),
    `code` (the raw int) and `func_name` (the C function, e.g. "pcclAllReduce").
    `PCCLError(result, func_name)` builds the subclass the result belongs to: PCCLRetryableError or
    PCCLFatalError; `except PCCLError` catches both.
    """

    def __new__(cls, result=Result.INTERNAL_ERROR, func_name="?"):
        if cls is PCCLError:
            code = result.value if isinstance(result, Result) else int(result)
            retryable = any(code == r.value for r in RETRYABLE_RESULTS)
            cls = PCCLRetryableError if retryable else PCCLFatalError
        return super().__new__(cls)

    def __init__(self, result=Result.INTERNAL_ERROR, func_name="?"):
        self.code = result.value if isinstance(result, Result) else int(result)
        try:
            self.result = Result(self.code)
        except ValueError:
            self.result = Result.INTERNAL_ERROR
        self.func_name = func_name
        super().__init__(f"{func_name} failed: {self.result.name} ({self.code}): {result_string(self.code)}")

    def __reduce__(self):
        return PCCLError, (self.code, self.func_name)

    @property
    def retryable(self) -> bool:
        """True for a PCCLRetryableError."""
        return isinstance(self, PCCLRetryableError)

    @staticmethod
    def check(result, func_name):
        """Raises PCCLError (its retryable or fatal subclass) unless `result` (an int from the library) is
        pcclSuccess."""
        if result != lib.pcclSuccess:
            raise PCCLError(result, func_name)


class PCCLRetryableError(PCCLError):
    """A failure the peers heal by starting the step over: a peer left or could not be reached (RANK_CONNECTION_*),
    the world changed under a vote (UPDATE_TOPOLOGY_FAILED, TOPOLOGY_OPTIMIZATION_FAILED), too few peers for a
    collective, no peer held the shared state asked for. The operation was aborted on every member alike."""


class PCCLFatalError(PCCLError):
    """A failure that retrying the same call does not heal: a bad argument (INVALID_ARGUMENT), a call out of order
    (INVALID_USAGE, PENDING_ASYNC_OPS, NOT_INITIALIZED), the master lost or this peer kicked
    (MASTER_CONNECTION_FAILED; Communicator.departure tells which), the run shut down (RUN_SHUT_DOWN), an internal
    error."""
