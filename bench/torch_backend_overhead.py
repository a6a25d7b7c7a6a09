#!/usr/bin/env python3
"""Per-call time of torch.distributed.all_reduce on the "pccl" backend, against the same all-reduce through
pccl's Communicator directly and against Gloo, 2 ranks on loopback, float32 SUM in place.

    PCCL_LIBRARY=build/lib/libpccl.so python3 bench/torch_backend_overhead.py [--iters N] [--sizes 4096,1048576]

Without RANK in the environment it starts both ranks itself (env:// on a free port) and prints rank 0's table:
median microseconds per call of each path and size, and the backend's overhead over the Communicator.
"""
import argparse
import os
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

SIZES = [4 << 10, 1 << 20, 64 << 20]


def timed(fn, iters):
    fn()  # warm-up: connections, allocations
    samples = []
    for _ in range(iters):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples) * 1e6


def rank_main(args):
    import torch
    import torch.distributed as dist
    import pccl
    import pccl.torch  # noqa: F401

    dist.init_process_group("pccl")
    gloo = dist.new_group(backend="gloo")
    pg = dist.distributed_c10d._get_default_group()
    rows = []
    tags = iter(range(1 << 40, 1 << 41))
    for size in args.sizes:
        t = torch.ones(size // 4)
        iters = max(3, min(args.iters, (args.iters * (1 << 20)) // size))
        backend = timed(lambda: dist.all_reduce(t), iters)
        # The worker is idle between blocking calls, so this thread may use the communicator directly.
        direct = timed(lambda: pg._comm.all_reduce(t, t, op=pccl.ReduceOp.SUM, tag=next(tags)), iters)
        ref = timed(lambda: dist.all_reduce(t, group=gloo), iters)
        rows.append((size, iters, backend, direct, ref))
    dist.barrier(group=gloo)
    if dist.get_rank() == 0:
        print(f"{'bytes':>10} {'iters':>5} {'pccl backend us':>16} {'Communicator us':>16} {'overhead us':>12} "
              f"{'gloo us':>10}")
        for size, iters, backend, direct, ref in rows:
            print(f"{size:>10} {iters:>5} {backend:>16.1f} {direct:>16.1f} {backend - direct:>12.1f} {ref:>10.1f}")


def launch(args):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    python_dir = str(Path(__file__).resolve().parents[1] / "python")
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), WORLD_SIZE="2",
               PYTHONPATH=os.pathsep.join(p for p in (python_dir, os.environ.get("PYTHONPATH")) if p))
    argv = [sys.executable, __file__, "--iters", str(args.iters), "--sizes", ",".join(map(str, args.sizes))]
    procs = [subprocess.Popen(argv, env=dict(env, RANK=str(r))) for r in range(2)]
    try:
        rcs = [p.wait(timeout=args.timeout) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    return max(rcs)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--iters", type=int, default=50, help="calls per path at 1 MiB (more below, fewer above)")
    ap.add_argument("--sizes", type=lambda s: [int(x) for x in s.split(",")], default=SIZES, help="bytes, comma-separated")
    ap.add_argument("--timeout", type=float, default=600, help="seconds before the ranks are killed")
    args = ap.parse_args()
    if "RANK" in os.environ:
        rank_main(args)
        return 0
    return launch(args)


if __name__ == "__main__":
    sys.exit(main())
