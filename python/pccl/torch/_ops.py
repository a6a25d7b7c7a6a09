"""torch's reduce ops and dtypes in pccl's terms: which library op reduces a dtype, and the byte views
that let data-moving collectives carry every dtype."""
import functools

import torch
import torch.distributed as dist

import pccl

# Arithmetic reductions the library runs; bool reduces as uint8 (sum and max are "or", product and min "and").
_ARITH = [(dist.ReduceOp.SUM, pccl.ReduceOp.SUM), (dist.ReduceOp.PRODUCT, pccl.ReduceOp.PROD),
          (dist.ReduceOp.MIN, pccl.ReduceOp.MIN), (dist.ReduceOp.MAX, pccl.ReduceOp.MAX),
          (dist.ReduceOp.AVG, pccl.ReduceOp.AVG)]
_BOOL = [(dist.ReduceOp.SUM, pccl.ReduceOp.MAX), (dist.ReduceOp.MAX, pccl.ReduceOp.MAX),
         (dist.ReduceOp.PRODUCT, pccl.ReduceOp.MIN), (dist.ReduceOp.MIN, pccl.ReduceOp.MIN)]
# Bitwise reductions: an all-gather, then the rows reduced locally in rank order (exact for integers).
_BITWISE = [(dist.ReduceOp.BAND, torch.bitwise_and), (dist.ReduceOp.BOR, torch.bitwise_or),
            (dist.ReduceOp.BXOR, torch.bitwise_xor)]


def _lookup(table, op):
    for key, value in table:
        if op == key:
            return value
    return None


def plan(op, dtype):
    """("pccl", ReduceOp, view dtype) for a reduction the library runs, or ("gather", fn, None) for one
    reduced locally after an all-gather. Raises ValueError for what pccl cannot reduce."""
    if dtype == torch.bool:
        found = _lookup(_BOOL, op)
        if found is not None:
            return "pccl", found, torch.uint8
    else:
        found = _lookup(_ARITH, op)
        if found is not None:
            pccl.DataType.from_torch_dtype(dtype)  # ValueError naming the supported dtypes
            if found is pccl.ReduceOp.AVG and not dtype.is_floating_point:
                raise ValueError(f"pccl: ReduceOp.AVG needs a floating-point tensor, not {dtype}")
            return "pccl", found, dtype
    fn = _lookup(_BITWISE, op)
    if fn is not None and (dtype == torch.bool or not (dtype.is_floating_point or dtype.is_complex)):
        return "gather", fn, None
    raise ValueError(f"pccl: reduce op {op} is not supported for {dtype}")


def reduce_rows(fn, rows):
    """rows (W, ...) reduced by fn in rank order."""
    return functools.reduce(fn, list(rows.unbind(0)))


def as_bytes(t):
    """A flat uint8 view of contiguous tensor t (any dtype)."""
    return t.reshape(-1).view(torch.uint8)


def check_tensor(t, what):
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"pccl: {what} must be a torch.Tensor, not {type(t).__name__}")
    if t.is_sparse:
        raise ValueError(f"pccl: {what} is sparse; only dense tensors are supported")


def per_rank(lists, ref, world, what):
    """The one list of `world` tensors torch passes (one per rank), each with ref's element count and dtype."""
    if len(lists) != 1 or len(lists[0]) != world:
        raise ValueError(f"pccl: {what} must be one list of {world} tensors")
    for t in lists[0]:
        check_tensor(t, what)
        if t.numel() != ref.numel() or t.dtype != ref.dtype:
            raise ValueError(f"pccl: every {what} must have {ref.numel()} elements of {ref.dtype}, "
                             f"got {t.numel()} of {t.dtype}")
    return lists[0]


def single(tensors, what):
    """The one tensor of a list (this backend runs one tensor per rank, as Gloo on CPU)."""
    if len(tensors) != 1:
        raise ValueError(f"pccl: {what} takes exactly one tensor per rank, got {len(tensors)}")
    check_tensor(tensors[0], what)
    return tensors[0]
