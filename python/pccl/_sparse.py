"""Sparse all-reduce with error feedback (pccl_sparse.h, docs/sparse.md) for NumPy arrays and torch tensors.

Its declarations live here, in an FFI that includes the package's (so a Communicator's handle passes as is);
tests/test_sparse.py checks them against the header.
"""
import sys
from dataclasses import dataclass

from cffi import FFI

from pccl._buffers import describe, describe_pair
from pccl._enums import DataType, ReduceOp
from pccl._errors import PCCLError
from pccl._native import ffi as _ffi, library_path

SPARSE_CDEFS = """
typedef struct pcclExtSparseResidual pcclExtSparseResidual_t;
typedef struct pcclExtSparseInfo_t {
    uint32_t rank;
    uint32_t world_size;
    uint64_t kept;
    uint64_t nonfinite;
    uint64_t pack_bytes;
    uint64_t tx_bytes;
    uint64_t rx_bytes;
} pcclExtSparseInfo_t;
pcclResult_t pcclExtSparseResidualCreate(uint64_t count, pcclDataType_t datatype, pcclExtSparseResidual_t **out);
void pcclExtSparseResidualDestroy(pcclExtSparseResidual_t *residual);
pcclResult_t pcclExtSparseResidualReset(pcclExtSparseResidual_t *residual);
const void *pcclExtSparseResidualData(const pcclExtSparseResidual_t *residual);
pcclResult_t pcclExtSparseAllReduce(const void *sendbuf, void *recvbuf, uint64_t count, pcclDataType_t datatype,
                                    pcclRedOp_t op, double fraction, int bits, pcclExtSparseResidual_t *residual,
                                    uint64_t tag, const pcclComm_t *communicator, pcclExtSparseInfo_t *info);
pcclResult_t pcclExtSparseParse(const char *spec, double *fraction, int *bits);
"""

sffi = FFI()
sffi.include(_ffi)
sffi.cdef(SPARSE_CDEFS)
slib = sffi.dlopen(library_path)
_destroy = slib.pcclExtSparseResidualDestroy  # looked up now, not in __del__ (see _comm.py)

CHUNK = 4096  # PCCL_EXT_SPARSE_CHUNK: elements per selection chunk
BITS = (0, 2, 4)


@dataclass
class SparseInfo:
    """What one sparse all-reduce did on this peer (pcclExtSparseInfo_t): rank and world_size of the exchange,
    kept (values sent within the chunks' budgets), nonfinite (NaN/inf values sent exactly), pack_bytes (this
    peer's pack), tx_bytes / rx_bytes (payload sent / received, settings check included)."""
    rank: int
    world_size: int
    kept: int
    nonfinite: int
    pack_bytes: int
    tx_bytes: int
    rx_bytes: int


def parse_sparsify(spec: str):
    """(fraction, bits) of the CLI's spelling "topk:FRACTION[:BITS]" ("topk:0.03:2"); ValueError otherwise."""
    if not isinstance(spec, str):
        raise TypeError(f"spec must be a str, not {type(spec).__name__}")
    f, b = sffi.new("double *"), sffi.new("int *")
    if slib.pcclExtSparseParse(spec.encode(), f, b) != _ffi.cast("pcclResult_t", 0):
        raise ValueError(f"sparsify {spec!r}: expected topk:FRACTION[:BITS], FRACTION in (0, 1], BITS 0, 2 or 4")
    return f[0], b[0]


def _check_settings(fraction, bits):
    if isinstance(fraction, bool) or not isinstance(fraction, (int, float)) or not 0 < fraction <= 1:
        raise ValueError(f"fraction must be in (0, 1], not {fraction!r}")
    if isinstance(bits, bool) or bits not in BITS:
        raise ValueError(f"bits must be 0, 2 or 4, not {bits!r}")


class SparseAllReduce:
    """Sparse all-reduce with error feedback over `comm` for tensors like `like` (its element count and dtype:
    float32 or float64; NumPy or torch): each call sends the top `fraction` of the values (per chunk of 4096,
    largest magnitude, ties to the lowest index) of input + residual, at `bits` 2 or 4 (0: unquantized), and keeps
    the rest in this object's residual. The output (sum or avg over the exchange's members) is bit-identical on
    every peer. A new object starts with a zero residual; a failed call leaves it (and an in-place buffer)
    unchanged, so the same call may be retried.

        sar = pccl.SparseAllReduce(comm, grad, fraction=0.03, bits=2)
        info = sar(grad, op=pccl.ReduceOp.AVG)        # in place
        info = sar(grad, out)                          # into out
    """

    def __init__(self, comm, like, fraction: float = 0.03, bits: int = 0):
        _check_settings(fraction, bits)
        b = describe(like, "like")
        if b.dtype not in (DataType.FLOAT, DataType.DOUBLE):
            raise TypeError(f"sparse all-reduce takes float32 or float64, not {b.dtype.name.lower()}")
        self.comm, self.count, self.dtype, self.fraction, self.bits = comm, b.numel, b.dtype, float(fraction), bits
        out = sffi.new("pcclExtSparseResidual_t **")
        PCCLError.check(slib.pcclExtSparseResidualCreate(self.count, self.dtype.value, out),
                        "pcclExtSparseResidualCreate")
        self._res = out[0]

    def __del__(self):
        res, self._res = getattr(self, "_res", None), None
        if res is not None:
            _destroy(res)

    def __call__(self, send, recv=None, op: ReduceOp = ReduceOp.SUM, tag: int = 0) -> SparseInfo:
        """Reduces send into recv (None: in place in send). Raises PCCLError (INVALID_USAGE when the peers'
        settings differ, RANK_CONNECTION_LOST when aborted: retry), ValueError/TypeError for bad arguments."""
        if op not in (ReduceOp.SUM, ReduceOp.AVG):
            raise ValueError(f"op must be ReduceOp.SUM or ReduceOp.AVG, not {op!r}")
        s, r = describe_pair(send, send if recv is None else recv)
        if s.numel != self.count or s.dtype != self.dtype:
            raise ValueError(f"this SparseAllReduce takes {self.count} {self.dtype.name.lower()} elements, "
                             f"not {s.numel} {s.dtype.name.lower()}")
        staged = s.kind == "torch" and s.obj.device.type != "cpu"
        sh, rh = (s.obj.cpu(), r.obj.cpu()) if staged else (s.obj, r.obj)
        sptr, rptr = describe(sh, "send").ptr, describe(rh, "recv").ptr
        info = sffi.new("pcclExtSparseInfo_t *")
        rc = slib.pcclExtSparseAllReduce(sffi.NULL if s is r else sffi.cast("void *", sptr),
                                         sffi.cast("void *", rptr), self.count, self.dtype.value, op.value,
                                         self.fraction, self.bits, self._res, tag, self.comm._comm, info)
        PCCLError.check(rc, "pcclExtSparseAllReduce")
        if staged:
            r.obj.copy_(rh)
        return SparseInfo(info.rank, info.world_size, info.kept, info.nonfinite, info.pack_bytes, info.tx_bytes,
                          info.rx_bytes)

    @property
    def residual(self):
        """A NumPy copy of this peer's residual (what it has not sent yet)."""
        np = sys.modules.get("numpy") or __import__("numpy")
        buf = sffi.buffer(slib.pcclExtSparseResidualData(self._res), self.count * self.dtype.itemsize)
        return np.frombuffer(bytes(buf), dtype=np.float32 if self.dtype == DataType.FLOAT else np.float64)

    def reset(self):
        """Sets the residual back to zero."""
        PCCLError.check(slib.pcclExtSparseResidualReset(self._res), "pcclExtSparseResidualReset")
