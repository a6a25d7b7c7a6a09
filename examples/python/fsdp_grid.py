#!/usr/bin/env python3
"""One rank of a sharded replica in a pccl run: seed 004's grid (replicas x shards).

Inside a replica the ranks shard the model (pccl.train.FlatShard over a Gloo process group: each rank keeps 1/W of
the parameters and their optimizer state; the full parameters are all-gathered for forward and backward). Across
replicas, shard s of every replica is one pccl peer group: its gradient is averaged there and its parameters and
optimizer state are that group's shared state, so a replica that was killed and restarted receives every shard.
pccl.train.GridReplica waits for a full grid before any collective of the replica runs (docs/python-training.md,
"Sharded replicas").

Launch each replica with torchrun (or set RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT per process, as torchrun
does; MASTER_* is the replica's own Gloo rendezvous, --master the pccl master):

    pccl master --listen-address 0.0.0.0:48148 &
    torchrun --nproc-per-node 2 --master-port 29500 examples/python/fsdp_grid.py --master 127.0.0.1:48148
    torchrun --nproc-per-node 2 --master-port 29501 examples/python/fsdp_grid.py --master 127.0.0.1:48148

usage: fsdp_grid.py --master HOST:PORT [--steps N | --stop-file F] [--replica R] [--out FILE] [--connect-delay S]
Prints (and with --out appends to FILE) one JSON object per line: "step" records and a "done" record with the
shard's hash.
"""
import argparse
import datetime
import hashlib
import json
import sys
import time

import torch
import torch.distributed as dist

from pccl.train import FlatShard, GridReplica


def make_model():
    torch.manual_seed(1234)  # every rank of every replica starts from the same parameters
    return torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.Tanh(), torch.nn.Linear(64, 4))


def batch(replica, rank, step):
    """A deterministic mini-batch of a regression toward a fixed linear map."""
    g = torch.Generator().manual_seed(replica * 1_000_003 + rank * 10_007 + step)
    x = torch.randn(32, 16, generator=g)
    w = torch.linspace(-1, 1, 64).reshape(16, 4)
    return x, torch.tanh(x @ w)


def shard_hash(grid):
    """SHA-256 of the shard's parameters and every optimizer state tensor, in the shared state's order."""
    h = hashlib.sha256()
    for name, t in grid.session.state.collect().items():
        h.update(name.encode())
        h.update(t.detach().reshape(-1).contiguous().view(torch.uint8).numpy().tobytes())
    return h.hexdigest()[:16]


def target(args):
    """The revision to train to."""
    if not args.stop_file:
        return args.steps
    try:
        return int(open(args.stop_file).read())
    except (FileNotFoundError, ValueError):
        return float("inf")


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--master", required=True, help="the pccl master, HOST:PORT")
    p.add_argument("--steps", type=int, default=200, help="committed steps to train (revision to reach)")
    p.add_argument("--replica", type=int, default=0, help="this replica's number (only to vary the data)")
    p.add_argument("--out", help="also append the JSON records to this file")
    p.add_argument("--stop-file", help="train until the revision this file names (instead of --steps) once it "
                                       "exists; name one ahead of every rank's, so that all stop at it")
    p.add_argument("--connect-delay", type=float, default=0.0, help="seconds to wait before joining the pccl run")
    p.add_argument("--gloo-timeout", type=float, default=60.0, help="deadline of each Gloo collective, seconds")
    p.add_argument("--timeout", type=float, default=120.0, help="deadline of each step prologue, seconds")
    args = p.parse_args()
    out = open(args.out, "a") if args.out else None

    def emit(**rec):
        line = json.dumps(rec)
        print(line, flush=True)
        if out:
            out.write(line + "\n")
            out.flush()

    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=args.gloo_timeout))
    rank = dist.get_rank()
    model = make_model()
    shard = FlatShard(model)
    opt = torch.optim.AdamW([shard.param], lr=3e-3)
    time.sleep(args.connect_delay)
    grid = GridReplica(args.master, shard, opt, timeout_s=args.timeout, connect_timeout_s=args.timeout)
    emit(event="joined", replica=args.replica, shard=rank, revision=grid.revision)
    step = 0
    while grid.revision < target(args):
        shard.gather()
        x, y = batch(args.replica, rank, step)
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        committed = grid.step()
        step += 1
        emit(event="step", replica=args.replica, shard=rank, revision=grid.revision, committed=committed,
             loss=round(loss.item(), 6), replicas=grid.replicas, waits=grid.stats.waits, hash=shard_hash(grid))
    emit(event="done", replica=args.replica, shard=rank, revision=grid.revision, hash=shard_hash(grid),
         committed=grid.stats.committed, skipped=grid.stats.skipped, rx=grid.stats.state_rx_bytes)
    grid.close()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
