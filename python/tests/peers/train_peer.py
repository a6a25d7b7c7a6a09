"""Peer of test_kill_rejoin: MASTER RANK OUT STOPFILE WORLD_BEFORE_START.

A training-shaped loop: accept newcomers, sync the shared state (a NumPy float32 array, a torch
float64 tensor and a NumPy int64 step counter: STATE_BYTES), all-reduce two all-ones gradients
(SUM) with all_reduce_multiple_with_retry, apply them, revision += 1. One JSON line per step:
revision, world, state hash, sync tx/rx, and the gradients' values, which must each be one
integer, the number of peers its reduce ran with (a retry after a lost peer must restore the
in-place buffers first). Stops after the revision that STOPFILE names (the same step on every
peer) or after 90 s (exit 1)."""
import hashlib
import sys
import time

import numpy as np
import torch

import pccl
from common import JsonLines, join

N = 4096
STATE_BYTES = N * 4 + N // 2 * 8 + 8


def state_hash(tensors):
    h = hashlib.sha256()
    for t in tensors:
        h.update((t.numpy() if isinstance(t, torch.Tensor) else t).tobytes())
    return h.hexdigest()[:16]


def stop_revision(path):
    try:
        return int(open(path).read())
    except (FileNotFoundError, ValueError):
        return None


def main(master, rank, out, stopfile, first_world):
    rng = np.random.default_rng(rank)  # every peer starts from different content; the sync decides
    w_np = rng.standard_normal(N).astype(np.float32)
    w_pt = torch.from_numpy(rng.standard_normal(N // 2))
    step = np.zeros(1, np.int64)
    tensors = [w_np, w_pt, step]
    state = pccl.SharedState([pccl.TensorInfo.from_numpy(w_np, "w_np"), pccl.TensorInfo.from_torch(w_pt, "w_pt"),
                              pccl.TensorInfo.from_numpy(step, "step")])
    comm = join(master, first_world, 60)
    log = JsonLines(out)
    deadline = time.monotonic() + 90
    just_joined = True  # the peers that accepted this one go on with a sync, so must this one
    while time.monotonic() < deadline:
        if not just_joined and comm.are_peers_pending():
            comm.update_topology()
        just_joined = False
        world = comm.get_attribute(pccl.Attribute.GLOBAL_WORLD_SIZE)
        if world < 2:
            time.sleep(0.02)
            continue
        sync = comm.sync_shared_state(state)
        g_np = np.ones(N, np.float32)
        g_pt = torch.ones(N // 2, dtype=torch.float64)
        d = [pccl.ReduceOpDescriptor.from_numpy(g_np, g_np, pccl.ReduceDescriptor(
                 N, pccl.ReduceOp.SUM, 1, pccl.ReduceOperandDescriptor(pccl.DataType.FLOAT))),
             pccl.ReduceOpDescriptor.from_torch(g_pt, g_pt, pccl.ReduceDescriptor(
                 N // 2, pccl.ReduceOp.SUM, 2, pccl.ReduceOperandDescriptor(pccl.DataType.DOUBLE)))]
        try:
            info = comm.all_reduce_multiple_with_retry(d, max_in_flight=2)
        except pccl.PCCLError as e:
            if e.result != pccl.Result.TOO_FEW_PEERS:
                raise
            continue  # alone now: the step is dropped, its gradients are not applied
        grads = [float(g_np[0]), float(g_pt[0])]
        uniform = bool((g_np == g_np[0]).all() and (g_pt == g_pt[0]).all())
        w_np += g_np * np.float32(0.001)
        w_pt += g_pt * 0.001
        step += 1
        state.revision += 1
        log.write(rank=rank, revision=state.revision, world=world, reduce_world=info.local_world_size,
                  hash=state_hash(tensors), sync_tx=sync.tx_bytes, sync_rx=sync.rx_bytes, grads=grads,
                  uniform=uniform, step=int(step[0]))
        stop = stop_revision(stopfile)
        if stop is not None and state.revision >= stop:
            return 0
        time.sleep(0.01)
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], int(sys.argv[5])))
