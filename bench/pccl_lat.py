#!/usr/bin/env python3
"""Per-call latencies through the pccl Python package: `pccl_allreduce lat` in Python.

usage: pccl_lat.py --bin DIR [--count N] [--reps N] [--kind numpy|torch]

Starts `DIR/pccl master` on 127.0.0.1 and two peer processes (this script with
--peer) that each step, like `pccl_allreduce lat PEERS COUNT REPS`:
update_topology; sync_shared_state of one float32 tensor of COUNT elements
(revision + 1 per step, ENFORCE_POPULAR); fill the gradient (untimed);
all_reduce_async of COUNT floats (the launch); wait() on its handle (the
await); apply the update. The buffers are NumPy arrays, or with --kind torch
CPU tensors over the same memory. Two warm-up steps, then REPS timed ones. Each call
is timed with a monotonic clock around the package call alone; per step the
max over both peers, then median, min and max over the steps.

Output, one line per call in the C binary's format (times in ms):
RESULT impl=pccl-python-KIND mode=lat peers=2 count=N call=pcclUpdateTopology median_ms=... min_ms=... max_ms=...
Exit status 0, 1 if a peer failed, 2 usage error. The library comes from
DIR/../lib/libpccl.so unless PCCL_LIBRARY is set.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CALLS = ("pcclUpdateTopology", "pcclSynchronizeSharedState", "pcclAllReduceAsync", "pcclAwaitAsyncReduce")
WARMUP = 2
PEERS = 2
DEADLINE_S = 120


def peer(address, count, reps, kind):
    """One peer: prints {"times": [[s per call, in CALLS order] per timed step]} as JSON."""
    import numpy as np
    from pccl import (Attribute, Communicator, ReduceOp, SharedState, SharedStateSyncStrategy, TensorInfo)

    comm = Communicator(address, peer_group=0, p2p_connection_pool_size=1)
    comm.connect(n_attempts=10)
    # Update until both are in; the peers' interpreters start up to a second apart, so the
    # bound is time rather than the C peer's 1000 tries.
    deadline = time.monotonic() + 30
    while comm.get_attribute(Attribute.GLOBAL_WORLD_SIZE) < PEERS:
        if time.monotonic() > deadline:
            sys.exit(f"world size {comm.get_attribute(Attribute.GLOBAL_WORLD_SIZE)}, want {PEERS}")
        comm.update_topology()
        time.sleep(0.001)
    w = (np.arange(count, dtype=np.float32) % 13) * np.float32(0.5)
    g = np.empty(count, dtype=np.float32)
    step = np.empty(count, dtype=np.float32)
    # The C peer's gradient, (i + revision) % 7, takes one of 7 patterns: copying one keeps the
    # untimed work between the calls about as short as C's loop (a longer one skews the peers).
    patterns = [((np.arange(count) + k) % 7).astype(np.float32) for k in range(7)]
    if kind == "torch":
        import torch
        wb, gb = torch.from_numpy(w), torch.from_numpy(g)  # the same memory, seen as tensors
        state = SharedState([TensorInfo.from_torch(wb, "weights")])
    else:
        gb = g
        state = SharedState([TensorInfo.from_numpy(w, "weights")])
    clock = time.perf_counter
    times = []
    for r in range(-WARMUP, reps):
        t0 = clock()
        comm.update_topology()
        t1 = clock()
        comm.sync_shared_state(state, SharedStateSyncStrategy.ENFORCE_POPULAR)
        t2 = clock()
        np.copyto(g, patterns[state.revision % 7])
        t3 = clock()
        handle = comm.all_reduce_async(gb, gb, op=ReduceOp.SUM, tag=r + WARMUP + 1)
        t4 = clock()
        ok, status, _ = handle.wait()
        t5 = clock()
        if not ok:
            sys.exit(f"all-reduce failed with status {status}")
        np.multiply(g, np.float32(0.01), out=step)
        w -= step
        state.revision += 1
        if r >= 0:
            times.append([t1 - t0, t2 - t1, t4 - t3, t5 - t4])
    comm.are_peers_pending()  # nobody leaves while the other still runs
    print(json.dumps({"times": times}), flush=True)


def start_master(pccl):
    """(Popen, port) of a master on 127.0.0.1:0; raises RuntimeError if it does not come up."""
    m = subprocess.Popen([pccl, "master", "--listen", "127.0.0.1:0", "--no-admin"], stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, text=True)
    line = m.stdout.readline()  # "pccl master listening on IP:PORT", or EOF if it died
    found = re.search(r"listening on [0-9.]+:([0-9]+)", line)
    if not found:
        m.kill()
        raise RuntimeError(f"master did not start: {line.strip()}")
    return m, int(found.group(1))


def stats_ms(values):
    """(median, min, max) of seconds, in ms."""
    return statistics.median(values) * 1e3, min(values) * 1e3, max(values) * 1e3


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--bin", default=os.path.join(ROOT, "build", "bin"), help="directory of the pccl command")
    p.add_argument("--count", type=int, default=101770, help="floats in the shared state and the all-reduce")
    p.add_argument("--reps", type=int, default=200, help="timed steps")
    p.add_argument("--kind", choices=("numpy", "torch"), default="numpy", help="buffers handed to the package")
    p.add_argument("--peer", metavar="HOST:PORT", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.count < 1 or args.reps < 1:
        p.error("--count and --reps must be positive")
    if args.peer:
        peer(args.peer, args.count, args.reps, args.kind)
        return
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        x for x in (os.path.join(ROOT, "python"), os.environ.get("PYTHONPATH")) if x))
    lib = os.path.join(args.bin, "..", "lib", "libpccl.so")
    env.setdefault("PCCL_LIBRARY", os.path.abspath(lib))
    master, port = start_master(os.path.join(args.bin, "pccl"))
    peers = []
    try:
        peers = [subprocess.Popen([sys.executable, os.path.abspath(__file__), "--peer", f"127.0.0.1:{port}",
                                   "--count", str(args.count), "--reps", str(args.reps), "--kind", args.kind],
                                  stdout=subprocess.PIPE, env=env, text=True) for _ in range(PEERS)]
        outs = [q.communicate(timeout=DEADLINE_S)[0] for q in peers]
        if any(q.returncode != 0 for q in peers):
            print(f"RESULT impl=pccl-python-{args.kind} mode=lat peers={PEERS} count={args.count} status=FAILED")
            sys.exit(1)
    finally:
        for q in peers + [master]:
            if q.poll() is None:
                q.kill()
            q.wait()
    per_peer = [json.loads(o.strip().splitlines()[-1])["times"] for o in outs]
    for c, name in enumerate(CALLS):
        worst = [max(t[r][c] for t in per_peer) for r in range(args.reps)]
        med, lo, hi = stats_ms(worst)
        print(f"RESULT impl=pccl-python-{args.kind} mode=lat peers={PEERS} count={args.count} call={name} "
              f"median_ms={med:.4f} min_ms={lo:.4f} max_ms={hi:.4f}")


if __name__ == "__main__":
    main()
