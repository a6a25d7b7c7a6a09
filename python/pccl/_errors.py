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


class PCCLError(Exception):
    """A library call returned something other than pcclSuccess.

    Attributes: `result` (a Result member; INTERNAL_ERROR for a code this package does not know),
    `code` (the raw int) and `func_name` (the C function, e.g. "pcclAllReduce").
    """

    def __init__(self, result, func_name):
        self.code = result.value if isinstance(result, Result) else int(result)
        try:
            self.result = Result(self.code)
        except ValueError:
            self.result = Result.INTERNAL_ERROR
        self.func_name = func_name
        super().__init__(f"{func_name} failed: {self.result.name} ({self.code}): {result_string(self.code)}")

    @staticmethod
    def check(result, func_name):
        """Raises PCCLError unless `result` (an int from the library) is pcclSuccess."""
        if result != lib.pcclSuccess:
            raise PCCLError(result, func_name)
