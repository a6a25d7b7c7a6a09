"""Peer of test_sync_strategies: MASTER RANK OUT.

Rank 0 holds the reference state and syncs with SEND_ONLY, ranks 1 and 2 hold other content
and sync with RECEIVE_ONLY (they take every differing tensor). Then each peer writes its rank
into the tensor marked allow_content_inequality and all sync again with ENFORCE_POPULAR: that
tensor must not travel between up-to-date peers. The state mixes NumPy and torch tensors
(float32, int16, float16, bfloat16, uint8). Writes one JSON line per sync (tx/rx, revision)
to OUT.jsonl and the final state to OUT.npz."""
import sys

import numpy as np
import torch

import pccl
from common import JsonLines, join

WORLD = 3
SHAPES = {"np_f32": 1000, "np_i16": 333, "pt_f16": 250, "pt_bf16": 125, "private": 64}


def reference(name):
    """The reference content of a tensor as float64 values (exact in its dtype)."""
    return np.arange(SHAPES[name], dtype=np.float64) * 0.5 - 7


def state_for(rank):
    offset = 0 if rank == 0 else 100 + rank  # receivers start with different content
    tensors = {
        "np_f32": (reference("np_f32") + offset).astype(np.float32),
        "np_i16": (reference("np_i16") * 2 + offset).astype(np.int16),
        "pt_f16": torch.from_numpy(reference("pt_f16") + offset).half(),
        "pt_bf16": torch.from_numpy(reference("pt_bf16") + offset).bfloat16(),
        "private": np.full(SHAPES["private"], rank, np.uint8),
    }
    infos = [pccl.TensorInfo.from_numpy(t, k, allow_content_inequality=k == "private") if isinstance(t, np.ndarray)
             else pccl.TensorInfo.from_torch(t, k) for k, t in tensors.items()]
    return tensors, pccl.SharedState(infos)


def main(master, rank, out):
    tensors, state = state_for(rank)
    state.revision = 7 if rank == 0 else 0
    comm = join(master, WORLD, 60)
    log = JsonLines(out + ".jsonl")
    S = pccl.SharedStateSyncStrategy
    info = comm.sync_shared_state(state, S.SEND_ONLY if rank == 0 else S.RECEIVE_ONLY)
    log.write(sync=1, tx=info.tx_bytes, rx=info.rx_bytes, revision=state.revision)
    tensors["private"][:] = rank + 10
    state.revision += 1
    info = comm.sync_shared_state(state)
    log.write(sync=2, tx=info.tx_bytes, rx=info.rx_bytes, revision=state.revision)
    np.savez(out + ".npz", **{k: (t.double().numpy() if isinstance(t, torch.Tensor) else t)
                              for k, t in tensors.items()})


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), sys.argv[3])
