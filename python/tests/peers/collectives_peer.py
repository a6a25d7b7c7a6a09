"""Peer of test_collectives: MASTER RANK OUT.

Joins a run of cases.WORLD peers, runs every case of cases.case_ids() (blocking in and out of
place, async with all ops of a dtype in flight at once, multiple-with-retry over all of a
kind, quantized sums) and writes one JSON line per case to OUT: ok, an error, a digest of the
result, the ReduceInfo."""
import hashlib
import sys

import numpy as np
import torch

import pccl
from cases import (NUMPY_DTYPES, OPS, QUANT, TORCH_DTYPES, WORLD, cast_values, expected, inputs, make,
                   quant_tolerance)
from common import JsonLines, join


def as_numpy(x):
    """float64/int64/uint64 values of an array or tensor (bfloat16 widened exactly)."""
    if isinstance(x, torch.Tensor):
        x = x.double() if x.dtype == torch.bfloat16 else x
        x = x.numpy()
    return x.astype(np.float64) if x.dtype.kind == "f" else x


def check(kind, dt, op, send, recv, original):
    """'' if recv holds the expected result (and an out-of-place send is unchanged), else why not."""
    want = cast_values(expected(dt, op), dt) if dt in ("float16", "bfloat16") else expected(dt, op)
    got = as_numpy(recv)
    if not np.array_equal(got, want):
        bad = np.flatnonzero(got != want)
        return f"{len(bad)} wrong, first at {bad[0]}: got {got[bad[0]]}, want {want[bad[0]]}"
    if send is not recv and not np.array_equal(as_numpy(send), original):
        return "out-of-place input was modified"
    return ""


def check_quantized(dt, wire, recv):
    """'' if a quantized sum is within docs/quantization.md's bound of the exact sum."""
    exact = sum(cast_values(inputs(dt, "MAX", r), dt) for r in range(WORLD))
    err = np.abs(as_numpy(recv) - exact)
    excess = err - quant_tolerance(dt, wire)
    return "" if (excess <= 0).all() else f"error {err[excess.argmax()]:.3g} above the bound at {excess.argmax()}"


def digest(x):
    data = x.view(torch.int16).numpy() if isinstance(x, torch.Tensor) and x.dtype == torch.bfloat16 else x
    return hashlib.sha256(np.ascontiguousarray(data).tobytes()).hexdigest()[:16]


def operands(kind, dt, op, rank, in_place):
    send = make(kind, dt, inputs(dt, op, rank))
    original = as_numpy(send).copy()
    recv = send if in_place else make(kind, dt, np.zeros_like(inputs(dt, op, rank)))
    return send, recv, original


def main(master, rank, out):
    comm = join(master, WORLD, 60)
    results = JsonLines(out)
    tag = 0

    def report(case, send, recv, original, info, error=None):
        """error: None to compare with the exact result."""
        kind, dt, op, _ = case.split("-")
        if error is None:
            error = check(kind, dt, op, send, recv, original)
        results.write(case=case, ok=not error, error=error, digest=digest(recv),
                      world=info.local_world_size if info else 0, tx=info.tx_bytes if info else 0,
                      rx=info.rx_bytes if info else 0)

    for kind, dts in (("numpy", NUMPY_DTYPES), ("torch", TORCH_DTYPES)):
        multi = []
        for dt in dts:
            for op in OPS:
                for mode in ("inplace", "outofplace"):
                    send, recv, original = operands(kind, dt, op, rank, mode == "inplace")
                    tag += 1
                    info = comm.all_reduce(send, recv, op=pccl.ReduceOp[op], tag=tag)
                    report(f"{kind}-{dt}-{op}-{mode}", send, recv, original, info)
            launched = []
            for i, op in enumerate(OPS):
                send, recv, original = operands(kind, dt, op, rank, i % 2 == 0)
                tag += 1
                handle = comm.all_reduce_async(send, recv, op=pccl.ReduceOp[op], tag=tag)
                launched.append((f"{kind}-{dt}-{op}-async", send, recv, original, handle))
            for case, send, recv, original, handle in launched:
                ok, status, info = handle.wait()
                report(case, send, recv, original, info, None if ok else f"status {pccl.Result(status).name}")
            for i, op in enumerate(OPS):
                send, recv, original = operands(kind, dt, op, rank, i % 2 == 1)
                tag += 1
                dtype = pccl.DataType.from_numpy_dtype(dt) if kind == "numpy" else \
                    pccl.DataType.from_torch_dtype(getattr(torch, dt))
                d = pccl.ReduceDescriptor(send.size if kind == "numpy" else send.numel(), pccl.ReduceOp[op], tag,
                                          pccl.ReduceOperandDescriptor(dtype))
                make_op = pccl.ReduceOpDescriptor.from_numpy if kind == "numpy" else pccl.ReduceOpDescriptor.from_torch
                multi.append((f"{kind}-{dt}-{op}-multi", send, recv, original, make_op(send, recv, d)))
        info = comm.all_reduce_multiple_with_retry([m[4] for m in multi], max_in_flight=4)
        for case, send, recv, original, _ in multi:
            report(case, send, recv, original, info)
    for kind, dt, algo, wire in QUANT:
        x = make(kind, dt, inputs(dt, "MAX", rank))
        tag += 1
        q = pccl.QuantizationOptions(pccl.DataType[wire], pccl.QuantizationAlgorithm[algo])
        info = comm.all_reduce(x, x, op=pccl.ReduceOp.SUM, tag=tag, quantization_options=q)
        report(f"{kind}-{dt}-SUM-quant_{algo}_{wire}", x, x, None, info, check_quantized(dt, wire, x))


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), sys.argv[3])
