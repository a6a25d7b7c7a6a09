"""Peer of test_sparse: MASTER ID OUT.

Joins a run of 3 peers and runs the sparse all-reduce's cases, one JSON line each: ok or the error (a PCCLError's
result name), the SparseInfo, the output and the residual (lists), so the test can replay every peer's selection
with NumPy and compare bits across peers."""
import sys

import numpy as np

import pccl
from common import JsonLines, join

WORLD = 3
COUNT = 2 * 4096 + 300


def inputs(pid, rnd, dtype=np.float32):
    """Integers in [-1000, 1000] (exact sums in any order), distinct per peer and round."""
    return np.random.default_rng(1000 * pid + rnd).integers(-1000, 1001, COUNT).astype(dtype)


def main():
    master, pid, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    comm = join(master, WORLD, 60)
    log = JsonLines(out)

    def record(case, sar, info=None, output=None, error=""):
        log.write(case=case, id=pid, ok=not error, error=error, rank=info.rank if info else -1,
                  world=info.world_size if info else 0, kept=info.kept if info else 0,
                  tx=info.tx_bytes if info else 0, out=[] if output is None else [float(v) for v in output],
                  residual=[float(v) for v in sar.residual])

    sar = pccl.SparseAllReduce(comm, np.zeros(COUNT, np.float32), fraction=0.05, bits=0)
    for rnd in range(3):  # out of place, sum
        x, y = inputs(pid, rnd), np.empty(COUNT, np.float32)
        info = sar(x, y, op=pccl.ReduceOp.SUM, tag=5)
        record(f"bits0-round{rnd}", sar, info, y)
    x = inputs(pid, 3)
    info = sar(x, op=pccl.ReduceOp.AVG, tag=5)  # in place, avg
    record("bits0-avg-inplace", sar, info, x)

    sar2 = pccl.SparseAllReduce(comm, np.zeros(COUNT, np.float64), fraction=0.02, bits=2)
    for rnd in range(2):
        x = inputs(pid, rnd, np.float64)
        x[7] = np.nan if rnd == 0 and pid == 1 else x[7]
        info = sar2(x, tag=6)
        record(f"bits2-round{rnd}", sar2, info, x)

    try:
        import torch
    except ImportError:
        torch = None
    if torch is not None:
        sar3 = pccl.SparseAllReduce(comm, torch.zeros(COUNT), fraction=0.03, bits=4)
        t = torch.from_numpy(inputs(pid, 9))
        info = sar3(t, tag=7)
        record("torch-bits4", sar3, info, t.numpy())

    # peer 0 asks for another fraction, then every peer for its own: refused on every peer whatever the ranks,
    # nothing written
    for case, fraction, tag in (("mismatch", 0.1 if pid == 0 else 0.05, 8), ("mismatch3", 0.05 * (pid + 1), 9)):
        x = inputs(pid, 4)
        sar_m = pccl.SparseAllReduce(comm, x, fraction=fraction, bits=0)
        try:
            info = sar_m(x, tag=tag)
            record(case, sar_m, info, x)
        except pccl.PCCLError as e:
            log.write(case=case, id=pid, ok=False, error=e.result.name,
                      unchanged=bool((sar_m.residual == 0).all() and (x == inputs(pid, 4)).all()))


if __name__ == "__main__":
    main()
