"""PyTorch training wrappers over pccl: fault-tolerant data parallelism, DiLoCo and Streaming DiLoCo.

Importing this package imports torch (the rest of pccl does not). See docs/python-training.md.
"""
from pccl.train._session import RETRYABLE, TrainStats, is_retryable
from pccl.train._state import StateDictSync
from pccl.train.diloco import DiLoCo, StreamingDiLoCo, fragments_of, nesterov_sgd
from pccl.train.ft import FaultTolerantManager
from pccl.train.grid import FlatShard, GridReplica, grid_full

__all__ = ["FaultTolerantManager", "DiLoCo", "StreamingDiLoCo", "StateDictSync", "TrainStats", "is_retryable",
           "RETRYABLE", "fragments_of", "nesterov_sgd",
           "FlatShard", "GridReplica", "grid_full"]
