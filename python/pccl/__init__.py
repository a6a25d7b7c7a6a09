"""pccl: fault-tolerant collective communications over TCP, with PCCL 1.0's Python API.

A thin layer over libpccl (cffi, ABI mode). Buffers are NumPy arrays or torch tensors; neither
package is imported by pccl itself. See python/README.md for the library search order.
"""
from pccl._version import __version__
from pccl._native import lib as _lib, library_path
from pccl._errors import PCCLError, PCCLFatalError, PCCLRetryableError, Result
from pccl._enums import (Attribute, CollectiveKind, DataType, DeviceType, DistributionHint, QuantizationAlgorithm,
                         ReduceOp, SharedStateSyncStrategy)
from pccl._descriptors import (QuantizationOptions, ReduceDescriptor, ReduceInfo, ReduceOpDescriptor,
                               ReduceOperandDescriptor, SharedStateSyncInfo)
from pccl._shared_state import SharedState, TensorInfo
from pccl._coll import CollectiveInfo
from pccl._coll_comm import AsyncCollectiveHandle, CollectiveOp
from pccl._comm import AsyncReduceHandle, Communicator, Departure
from pccl._master import MasterNode
from pccl._sparse import SparseAllReduce, SparseInfo, parse_sparsify
from pccl._log import log_to_logging, log_to_stderr
import pccl._cuda as cuda

PCCLError.check(_lib.pcclInit(), "pcclInit")

# PCCL 1.0's list, then the names it exports without listing them, then the collectives' (pccl_coll.h).
__all__ = ["cuda",
           "Communicator", "MasterNode", "ReduceOp", "Attribute", "SharedStateSyncStrategy",
           "DataType", "DistributionHint", "QuantizationAlgorithm", "ReduceOperandDescriptor", "QuantizationOptions",
           "ReduceDescriptor", "TensorInfo", "SharedState", "SharedStateSyncInfo", "ReduceInfo", "ReduceOpDescriptor",
           "AsyncReduceHandle", "PCCLError",
           "DeviceType", "Result",
           "CollectiveKind", "CollectiveInfo", "CollectiveOp", "AsyncCollectiveHandle",
           "SparseAllReduce", "SparseInfo", "parse_sparsify",
           "PCCLRetryableError", "PCCLFatalError", "Departure", "log_to_logging", "log_to_stderr"]
