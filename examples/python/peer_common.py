"""The parts of PCCL's canonical training loop that the DDP and DiLoCo peers share.

A peer connects, then each step: updates the topology (accepting newcomers,
dropping the gone), waits while fewer than two peers are in the run,
synchronizes the shared state (revision + 1 per step), all-reduces, and
applies an update that is bit-identical on every peer. A failed step
(PCCLError) starts over from the topology update.

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
from pccl import (Attribute, Communicator, DataType, DistributionHint, PCCLError, QuantizationAlgorithm,
                  QuantizationOptions, ReduceDescriptor, ReduceOp, ReduceOperandDescriptor, ReduceOpDescriptor,
                  SharedState, SharedStateSyncStrategy, TensorInfo)

import fashion_mnist

# Pause between polls of the world size while too few peers are in the run (and of --wait-for).
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


class Peer:
    """This process's communicator and the prologue of every step.

    Raises TimeoutError once `timeout` seconds have passed since construction,
    and PCCLError when the master is lost (nothing to retry then).
    """

    def __init__(self, args):
        self.deadline = time.monotonic() + args.timeout
        self.min_world = args.min_world
        self.first = True
        while args.wait_for and not os.path.exists(args.wait_for):
            self._check_deadline()
            time.sleep(WAIT_POLL_S)
        self.comm = Communicator(args.master, peer_group=0, p2p_connection_pool_size=1)
        # Blocks until the run accepts this peer (a newcomer: in the others' update_topology).
        self.comm.connect(n_attempts=15)

    def _check_deadline(self):
        if time.monotonic() > self.deadline:
            raise TimeoutError("peer deadline passed")

    def _update_topology(self):
        """True when the topology is up to date; False when the update must be retried."""
        if self.first:
            # connect() returned inside the accept round the others' update completed:
            # a newcomer updating now would vote alone.
            self.first = False
            return True
        try:
            self.comm.update_topology()
            return True
        except PCCLError as e:
            if e.result.name == "MASTER_CONNECTION_FAILED":
                raise
            emit("update_topology_failed", error=str(e))
            return False

    def begin_step(self, state):
        """Update the topology, wait for peers, synchronize `state`.

        Returns the SharedStateSyncInfo, or None when the sync failed and the
        step must start over.
        """
        polls = 0
        while True:
            self._check_deadline()
            if self._update_topology():
                world = self.comm.get_attribute(Attribute.GLOBAL_WORLD_SIZE)
                if world >= self.min_world:
                    break
                if polls % 50 == 0:
                    emit("waiting_for_peers", world_size=world, revision=state.revision)
                polls += 1
            time.sleep(WAIT_POLL_S)
        self.min_world = 2  # --min-world only holds the start
        return self.sync(state)

    def all_reduce_avg(self, tensors):
        """Average `tensors` (contiguous float32, in place) over the peers.

        Lost peers are retried around inside the library. Returns ReduceInfo;
        raises PCCLError (the step is then discarded) when fewer than two peers
        remain or the master is gone.
        """
        fp32 = ReduceOperandDescriptor(DataType.FLOAT, DistributionHint.NORMAL)
        unquantized = QuantizationOptions(DataType.FLOAT, QuantizationAlgorithm.NONE)
        ops = [ReduceOpDescriptor.from_torch(t, t, ReduceDescriptor(count=t.numel(), op=ReduceOp.AVG, tag=i,
                                                                    operand_descriptor=fp32,
                                                                    quantization_options=unquantized))
               for i, t in enumerate(tensors)]
        return self.comm.all_reduce_multiple_with_retry(ops, max_in_flight=len(ops))

    def sync(self, state):
        """Synchronize `state` (popular content wins; revision: the last + 1).

        Returns the SharedStateSyncInfo (tx_bytes, rx_bytes), or None when it
        failed and may be retried; raises PCCLError when the master is lost.
        """
        try:
            return self.comm.sync_shared_state(state, SharedStateSyncStrategy.ENFORCE_POPULAR)
        except PCCLError as e:
            if e.result.name == "MASTER_CONNECTION_FAILED":
                raise
            emit("sync_failed", error=str(e))
            return None


def train(args, peer, state, step):
    """PCCL's canonical loop until the shared-state revision reaches args.steps.

    step() runs one step's local work and all-reduce and applies the update;
    it returns (loss, ReduceInfo) or raises PCCLError, which discards the step
    (its update must not have been applied). The revision goes up by one per
    completed step. Returns a dict for the "done" report: first_revision,
    steps, discarded, ss_rx_bytes, final_sync_ok.
    """
    stats = {"first_revision": None, "steps": 0, "discarded": 0, "ss_rx_bytes": 0}
    while state.revision < args.steps:
        sync = peer.begin_step(state)
        if sync is None:
            continue
        stats["ss_rx_bytes"] += sync.rx_bytes
        if state.revision >= args.steps:  # a newcomer may receive the final revision
            break
        if stats["first_revision"] is None:
            stats["first_revision"] = state.revision
        t0 = time.monotonic()
        try:
            loss, info = step()
        except PCCLError as e:
            if e.result.name == "MASTER_CONNECTION_FAILED":
                raise
            stats["discarded"] += 1
            emit("step_discarded", revision=state.revision, error=str(e))
            continue
        state.revision += 1
        stats["steps"] += 1
        emit("step", revision=state.revision, world_size=info.local_world_size, loss=round(loss, 5),
             ss_rx_bytes=sync.rx_bytes, ms=round((time.monotonic() - t0) * 1e3, 2))
    final = peer.sync(state)  # every survivor ends with the same bits
    stats["final_sync_ok"] = final is not None
    if final is not None:
        stats["ss_rx_bytes"] += final.rx_bytes
    return stats


def finish(args, state, named, test_accuracy, stats):
    """Write the shared state (--out) and print the "done" report."""
    if args.out:
        save_state(args.out, named)
    emit("done", revision=state.revision, test_accuracy=round(test_accuracy, 4), **stats)


def nesterov_sgd(named_params, lr, momentum):
    """torch's SGD with Nesterov momentum, set up for a shared state.

    named_params: {name: leaf tensor}. Each gets a zero .grad and a zero
    momentum buffer up front (zero gives the same first step as torch's lazy
    clone of the gradient) so that a SharedState can point at them; step()
    updates them in place, never reallocates. Returns (optimizer,
    {"momentum.NAME": buffer}).
    """
    opt = torch.optim.SGD(named_params.values(), lr=lr, momentum=momentum, nesterov=True)
    buffers = {}
    for name, prm in named_params.items():
        prm.grad = torch.zeros_like(prm)
        buffers[f"momentum.{name}"] = opt.state[prm]["momentum_buffer"] = torch.zeros_like(prm)
    return opt, buffers


def shared_state(named):
    """A SharedState over `named` {name: contiguous CPU tensor}; the tensors are synced in place."""
    return SharedState([TensorInfo.from_torch(t, name) for name, t in named.items()])


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
