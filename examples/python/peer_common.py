"""What the DDP and DiLoCo peers share: flags, connecting, the loop around a pccl.train wrapper, reporting.

The wrappers (python/pccl/train, docs/python-training.md) run PCCL's canonical
loop: each step they update the topology (accepting newcomers, dropping the
gone), synchronize the shared state built from state_dict()s, all-reduce, and
apply an update that is bit-identical on every peer, or skip it on every peer.

Every peer prints one JSON object per line on stdout ("step", "done", ...)
for the driver (run_examples.py) to follow.
"""
import argparse
import json
import os
import sys
import time

import numpy as np
import torch
from pccl import Communicator, PCCLError

import fashion_mnist

# Pause between polls of --wait-for.
WAIT_POLL_S = 0.1


def parser(description):
    """Flags common to both examples; each adds its own hyper-parameters."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--master", required=True, metavar="HOST:PORT", help="master control address")
    p.add_argument("--steps", type=int, required=True, help="stop when the shared-state revision reaches N")
    p.add_argument("--seed", type=int, default=None, help="data-order seed of this peer (default: the pid)")
    p.add_argument("--init-seed", type=int, default=42, help="initial weights (the same on every peer)")
    p.add_argument("--min-world", type=int, default=2, help="peers to wait for before the first step")
    p.add_argument("--batch", type=int, default=64, help="mini-batch size")
    p.add_argument("--out", metavar="DIR", help="write the final shared state here, one .npy per tensor")
    p.add_argument("--data", default=fashion_mnist.DATA_DIR, help="Fashion-MNIST directory")
    p.add_argument("--threads", type=int, default=1, help="torch threads (peers share the machine's cores)")
    p.add_argument("--timeout", type=float, default=600, help="give up (exit 3) after this many seconds")
    p.add_argument("--wait-for", metavar="FILE",
                   help="connect only once FILE exists (a driver starts a newcomer ahead of time, so that "
                        "loading torch and the data does not delay its join)")
    return p


def emit(event, **fields):
    """One JSON object on stdout: {"event": EVENT, ...fields}."""
    print(json.dumps({"event": event, **fields}), flush=True)


def connect(args):
    """This peer's Communicator, connected (blocks until the run accepts it).

    With --wait-for it first waits for that file. Raises TimeoutError past --timeout."""
    deadline = time.monotonic() + args.timeout
    while args.wait_for and not os.path.exists(args.wait_for):
        if time.monotonic() > deadline:
            raise TimeoutError("peer deadline passed")
        time.sleep(WAIT_POLL_S)
    comm = Communicator(args.master, peer_group=0, p2p_connection_pool_size=1)
    comm.connect(n_attempts=15)
    return comm


def train(args, wrapper, train_step):
    """Calls train_step() (one mini-batch: forward, backward, wrapper.step(); returns the loss) until the run's
    revision reaches args.steps, printing a "step" event per revision. Returns the "done" report's counters.

    The wrapper (pccl.train) averages, commits or skips on every peer alike and syncs the state; a newcomer may
    receive the final revision in its constructor. Raises TimeoutError past --timeout."""
    deadline = time.monotonic() + args.timeout
    stats = wrapper.stats
    losses = []
    t0 = time.monotonic()
    while wrapper.revision < args.steps:
        if time.monotonic() > deadline:
            raise TimeoutError("peer deadline passed")
        before = wrapper.revision
        losses.append(train_step())
        if wrapper.revision != before:
            emit("step", revision=wrapper.revision, world_size=stats.world_size,
                 loss=round(sum(losses) / len(losses), 5), ss_rx_bytes=stats.state_rx_bytes,
                 ms=round((time.monotonic() - t0) * 1e3, 2))
            losses, t0 = [], time.monotonic()
    # Every step ends with the next step's sync, so the last one left every peer with the same bits.
    return {"first_revision": stats.first_revision, "steps": stats.committed, "discarded": stats.skipped,
            "ss_rx_bytes": stats.state_rx_bytes, "final_sync_ok": True}


def finish(args, revision, named, test_accuracy, stats):
    """Write the shared state (--out) and print the "done" report."""
    if args.out:
        save_state(args.out, named)
    emit("done", revision=revision, test_accuracy=round(test_accuracy, 4), **stats)


def optimizer_tensors(opt, prefix):
    """{PREFIX.INDEX.KEY: tensor} of an optimizer's state tensors (what pccl.train shares of it)."""
    state = opt.state_dict()["state"]
    return {f"{prefix}.{i}.{k}": v for i in sorted(state) for k, v in sorted(state[i].items()) if torch.is_tensor(v)}


def save_state(out_dir, named):
    """Write each tensor of `named` {name: tensor} to OUT_DIR/NAME.npy (float32, C order)."""
    os.makedirs(out_dir, exist_ok=True)
    for name, t in named.items():
        np.save(os.path.join(out_dir, name + ".npy"), t.detach().numpy())


def setup(args):
    """Common start of a peer: threads, seed, data. Returns (train, test) as fashion_mnist.load gives them."""
    torch.set_num_threads(args.threads)
    if args.seed is None:
        args.seed = os.getpid()
    return fashion_mnist.load("train", args.data), fashion_mnist.load("t10k", args.data)


def main_guard(run):
    """Run `run()` and map the failures to exit codes: 1 PCCLError, 3 deadline passed."""
    try:
        run()
    except PCCLError as e:
        print(f"peer: {e}", file=sys.stderr)
        sys.exit(1)
    except TimeoutError as e:
        print(f"peer: {e}", file=sys.stderr)
        sys.exit(3)
