"""pccl as a torch.distributed backend: importing this module registers the backend "pccl".

    import pccl.torch
    torch.distributed.init_process_group("pccl")   # env:// (MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE)

See docs/torch-backend.md for the rank mapping, what is supported and the fault-tolerance contract.
"""
import torch.distributed as _dist

from pccl.torch._backend import ProcessGroupPCCL, create_process_group

BACKEND_NAME = "pccl"

if BACKEND_NAME.upper() not in _dist.Backend._plugins:
    _dist.Backend.register_backend(BACKEND_NAME, create_process_group)

__all__ = ["BACKEND_NAME", "ProcessGroupPCCL", "create_process_group"]
