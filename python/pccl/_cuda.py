"""pccl.cuda: whether the native library was built with CUDA."""
from pccl._native import ffi, lib

_info = ffi.new("pcclBuildInfo_t *")
is_cuda_available = lib.pcclGetBuildInfo(_info) == lib.pcclSuccess and bool(_info.has_cuda_support)


def is_available() -> bool:
    """True if libpccl was built with CUDA (shared state may then hold CUDA tensors)."""
    return is_cuda_available
