#!/usr/bin/env python3
"""Python's cost per all-reduce call: torch.distributed.all_reduce on the "pccl" backend, the same all-reduce
through pccl's Communicator, the C API directly (bench/pccl_allreduce, `ar` mode) and Gloo; 2 ranks on loopback,
float32 SUM in place.

    PCCL_LIBRARY=build/lib/libpccl.so python3 bench/torch_backend_overhead.py [--rounds R] [--iters N]
        [--sizes 4096,1048576,67108864] [--c-bench build/bin/pccl_allreduce]

Without RANK in the environment it starts both ranks itself (env:// on a free port) and runs R interleaved rounds:
each round runs the C benchmark at every size, then one pass of the three Python paths at every size (their order
rotating per round), so that load from other processes hits every path alike. A path's figure is the median over
the rounds of its per-round median (rank 0's per-call time; the C benchmark's: the slower rank's per repetition).
Prints the table (markdown) and, with --json FILE, every round's numbers.
"""
import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SIZES = [4 << 10, 1 << 20, 64 << 20]
PATHS = ("backend", "direct", "gloo")


def timed(fn, iters):
    fn()  # warm-up: connections, allocations
    samples = []
    for _ in range(iters):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples) * 1e6


def iters_for(size, iters):
    """Calls per path and round: `iters` at 1 MiB, more below (up to 4x), fewer above (at least 3)."""
    return max(3, min(4 * iters, (iters * (1 << 20)) // size))


def rank_main(args):
    """One rank: waits for a line on stdin per round, runs the round, rank 0 answers with one JSON line."""
    import torch
    import torch.distributed as dist
    import pccl
    import pccl.torch  # noqa: F401

    dist.init_process_group("pccl")
    gloo = dist.new_group(backend="gloo")
    pg = dist.distributed_c10d._get_default_group()
    tags = iter(range(1 << 40, 1 << 41))
    tensors = {size: torch.ones(size // 4) for size in args.sizes}
    calls = {
        # The worker is idle between blocking calls, so this thread may use the communicator directly.
        "backend": lambda t: dist.all_reduce(t),
        "direct": lambda t: pg._comm.all_reduce(t, t, op=pccl.ReduceOp.SUM, tag=next(tags)),
        "gloo": lambda t: dist.all_reduce(t, group=gloo),
    }
    for round_no, _ in enumerate(sys.stdin):
        order = PATHS[round_no % 3:] + PATHS[:round_no % 3]
        out = {}
        for size in args.sizes:
            t = tensors[size]
            for path in order:
                dist.barrier(group=gloo)
                out[f"{path}/{size}"] = timed(lambda: calls[path](t), iters_for(size, args.iters))
        dist.barrier(group=gloo)
        if dist.get_rank() == 0:
            print(json.dumps(out), flush=True)
    pg.shutdown()  # in order: rank 0's hosted master stops after every rank closed its communicator


def c_api_us(c_bench, size, iters):
    """The C API's median microseconds per in-place all-reduce (pccl_allreduce ar 2 SIZE REPS)."""
    run = subprocess.run([c_bench, "ar", "2", str(size), str(iters_for(size, iters)), "1"], capture_output=True,
                         text=True, timeout=600)
    for line in run.stdout.splitlines():
        if line.startswith("RESULT"):
            fields = dict(kv.split("=", 1) for kv in line.split()[1:])
            return float(fields["median_s"]) * 1e6
    raise RuntimeError(f"{c_bench}: no RESULT line:\n{run.stdout}{run.stderr}")


def launch(args):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), WORLD_SIZE="2",
               PYTHONPATH=os.pathsep.join(p for p in (str(ROOT / "python"), os.environ.get("PYTHONPATH")) if p))
    argv = [sys.executable, __file__, "--iters", str(args.iters), "--sizes", ",".join(map(str, args.sizes))]
    procs = [subprocess.Popen(argv, env=dict(env, RANK=str(r)), stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE if r == 0 else subprocess.DEVNULL, text=True)
             for r in range(2)]
    rounds = []
    deadline = time.monotonic() + args.timeout
    try:
        for _ in range(args.rounds):
            if time.monotonic() > deadline:
                raise TimeoutError(f"past --timeout {args.timeout} s")
            row = {f"c/{size}": c_api_us(args.c_bench, size, args.iters) for size in args.sizes}
            for p in procs:
                p.stdin.write("round\n")
                p.stdin.flush()
            line = procs[0].stdout.readline()  # bounded: the ranks' own deadlines end a hung collective
            if not line:
                raise RuntimeError("rank 0 ended early")
            row.update(json.loads(line))
            rounds.append(row)
        for p in procs:
            p.stdin.close()
        for p in procs:
            p.wait(timeout=60)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    report(args, rounds)
    return 0


def report(args, rounds):
    med = {k: statistics.median(r[k] for r in rounds) for k in rounds[0]}
    print(f"{len(rounds)} interleaved rounds; median over rounds of each round's median, microseconds per call\n")
    print("| bytes | C API | Communicator | torch pccl backend | Gloo | Communicator - C | backend - Communicator |")
    print("|---|---|---|---|---|---|---|")
    for size in args.sizes:
        c, d, b, g = (med[f"{p}/{size}"] for p in ("c", "direct", "backend", "gloo"))
        print(f"| {size} | {c:.0f} | {d:.0f} | {b:.0f} | {g:.0f} | {d - c:+.0f} | {b - d:+.0f} |")
    if args.json:
        Path(args.json).write_text(json.dumps(rounds, indent=1))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5, help="interleaved rounds")
    ap.add_argument("--iters", type=int, default=30, help="calls per path and round at 1 MiB (more below, fewer above)")
    ap.add_argument("--sizes", type=lambda s: [int(x) for x in s.split(",")], default=SIZES, help="bytes, comma-separated")
    ap.add_argument("--c-bench", default=str(ROOT / "build" / "bin" / "pccl_allreduce"), help="the C benchmark")
    ap.add_argument("--json", help="write every round's numbers to this file")
    ap.add_argument("--timeout", type=float, default=1200, help="seconds before the ranks are killed")
    args = ap.parse_args()
    if "RANK" in os.environ:
        rank_main(args)
        return 0
    return launch(args)


if __name__ == "__main__":
    sys.exit(main())
