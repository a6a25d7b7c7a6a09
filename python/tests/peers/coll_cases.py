"""The cases of test_collectives_ext: broadcast, all-gather(v), reduce-scatter and barrier over 3 peers,
their inputs (per peer id, exact in every dtype: cases.inputs) and the outputs NumPy computes for them.

A case id is 'kind-dtype-collective-mode': kind numpy, torch or cuda (where torch has a GPU); collective
bcast, ag, agv, rs_OP or barrier; mode inplace, outofplace, alloc (Python allocates the output), async,
multi (collectives_multiple_with_retry), ranked, zero (an all-gather-v where peer 1 sends nothing), quant
(a quantized reduce-scatter) or shared (a broadcast with shared sources: peer SHARED_ID holds the root's
data already). 'bad-NAME' is input the master must reject on every peer. Ranks are ring positions unless
the mode is 'ranked', where peer id i passes rank_key ranked_key(i) (so ranks run opposite to the ids).
"""
import hashlib

import numpy as np

from cases import OPS, cast_values, expected, inputs

WORLD = 3
COUNT = 1031  # not a multiple of the world size: uneven reduce-scatter blocks
ROOT_ID = 1
SHARED_ID = 0
NUMPY_DTYPES = ["uint8", "int16", "uint32", "int64", "float16", "float32", "float64"]
TORCH_DTYPES = ["int8", "int32", "bfloat16", "float32", "float64"]
MODES = {"bcast": ["inplace", "outofplace"], "ag": ["inplace", "outofplace", "alloc"],
         "agv": ["outofplace", "alloc"], "rs_SUM": ["inplace", "outofplace", "alloc"],
         **{f"rs_{op}": ["outofplace"] for op in OPS if op != "SUM"}}
ASYNC_DTYPES = [("numpy", "float32"), ("torch", "bfloat16"), ("numpy", "int64")]  # every collective at once
RANKED = [("numpy", "float64"), ("torch", "int32")]
MULTI_DTYPES = [("numpy", "float64"), ("torch", "float32")]  # every collective in one multiple-with-retry
QUANT = ("numpy", "float32", "MIN_MAX", "UINT8")
# name: the result every peer must get, and the master's reason that every peer logs
BAD = {"bcast_noroot": ("INVALID_USAGE", "no member is the root"),
       "bcast_tworoots": ("INVALID_USAGE", "two roots"),
       "ag_counts": ("INVALID_USAGE", "counts differ"),
       "rs_counts": ("INVALID_USAGE", "counts differ"),
       "ag_dtype": ("INVALID_USAGE", "dtypes differ"),
       "ag_small": ("INVALID_USAGE", "output too small"),
       "agv_maxworld": ("INVALID_USAGE", "counts too small"),
       "rank_key_some": ("INVALID_USAGE", "rank keys on only some members"),
       "rank_key_equal": ("INVALID_USAGE", "duplicate rank key"),
       "kinds_differ": ("INVALID_USAGE", "kinds differ")}


def ranked_key(peer_id):
    return 1000 - 7 * peer_id


def agv_count(peer_id, zero=False):
    """Peer id's element count in an all-gather-v (the 'zero' case: peer 1 sends nothing)."""
    return 0 if zero and peer_id == 1 else 400 + 300 * peer_id


def case_ids():
    out = [f"{kind}-{dt}-{coll}-{mode}" for kind, dts in (("numpy", NUMPY_DTYPES), ("torch", TORCH_DTYPES))
           for dt in dts for coll, modes in MODES.items() for mode in modes]
    out += [f"{kind}-{dt}-{coll}-async" for kind, dt in ASYNC_DTYPES for coll in ("bcast", "ag", "agv", "rs_SUM")]
    out += [f"{kind}-{dt}-{coll}-ranked" for kind, dt in RANKED for coll in ("bcast", "ag", "agv", "rs_SUM")]
    out += [f"{kind}-{dt}-{coll}-multi" for kind, dt in MULTI_DTYPES for coll in ("bcast", "ag", "agv", "rs_SUM")]
    out += ["numpy-float32-agv-zero", "numpy-float32-bcast-shared", "torch-float16-bcast-shared",
            "none-none-barrier-plain", "none-none-barrier-async",
            "numpy-float32-rs_SUM-quant"]
    if _has_cuda():  # staged through pinned host memory
        out += [f"cuda-float32-{c}" for c in ("bcast-inplace", "bcast-outofplace", "ag-inplace", "ag-alloc",
                                               "agv-alloc", "rs_SUM-inplace", "rs_SUM-outofplace", "rs_SUM-async")]
    return out + [f"bad-{name}" for name in BAD]


def _has_cuda():
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


def values(coll, dt, peer_id, zero=False):
    """Peer id's input values (float64 / int64 / uint64) for a collective."""
    if coll == "agv":
        return inputs(dt, "MAX", peer_id, agv_count(peer_id, zero))
    if coll.startswith("rs_"):
        return inputs(dt, coll[3:], peer_id, COUNT)
    return inputs(dt, "MAX", peer_id, COUNT)


def block(count, world, rank):
    """Rank's reduce-scatter block: (offset, length)."""
    q, r = divmod(count, world)
    return rank * q + min(rank, r), q + (rank < r)


def expected_values(case, ids_by_rank, rank):
    """What the peer of `rank` must hold after the case, as float64/int64/uint64 values in dt."""
    _, dt, coll, mode = case.split("-")
    if coll == "bcast":
        return cast_values(values(coll, dt, ROOT_ID), dt)
    if coll in ("ag", "agv"):
        return np.concatenate([cast_values(values(coll, dt, i, mode == "zero"), dt) for i in ids_by_rank])
    op = coll[3:]
    full = cast_values(expected(dt, op, len(ids_by_rank), COUNT), dt)  # AVG of 16-bit floats: rounded once
    off, n = block(COUNT, len(ids_by_rank), rank)
    return full[off:off + n]


def as_numpy(x):
    """float64/int64/uint64 values of an array or tensor (bfloat16 widened exactly), flattened."""
    if not isinstance(x, np.ndarray):
        import torch
        x = (x.double() if x.dtype == torch.bfloat16 else x).cpu().numpy()
    x = x.reshape(-1)
    return x.astype(np.float64) if x.dtype.kind == "f" else x


def digest(x):
    """sha256 of the raw bytes of an array or tensor."""
    if not isinstance(x, np.ndarray):
        import torch
        x = (x.view(torch.int16) if x.dtype == torch.bfloat16 else x).cpu().numpy()
    return hashlib.sha256(np.ascontiguousarray(x).tobytes()).hexdigest()[:16]
