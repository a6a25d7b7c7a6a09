"""Peer of test_train_wrappers: KIND MASTER RANK OUT STOPFILE MIN_WORLD [OPTIONS as key=value].

KIND: ft (FaultTolerantManager), diloco (DiLoCo) or streaming (StreamingDiLoCo). A synthetic task: a 16-32-4 MLP
classifies points of 4 Gaussian blobs (the same blobs on every peer, each peer draws its own samples). One JSON
line per commit point: revision, the hashes of the shared state (model or global parameters, optimizer state), the
number of shared tensors, world size, state bytes received. Stops once the revision reaches the one STOPFILE names,
or `steps` (exit 0), or after 90 s (exit 1); the last line has "final": true and the held-out loss and accuracy.

Options: optim=sgd|adam (ft), steps=N, inner=H, fragments=K, overlap=T, alpha=A, quant=0|1, realloc=REV (ft, rank 0:
after reaching REV, replace the first Adam moment with a new tensor of other content once), mismatch=REV (ft, rank 0:
at REV, all-reduce one element more once, which the master rejects for every member), sleep=S (per step),
sparse=topk:F[:B] and decay=BETA (diloco, streaming: the outer gradients through pccl.SparseAllReduce).
"""
import faulthandler
import hashlib
import signal
import sys
import time

import torch
import torch.nn.functional as F

import pccl
from pccl.train import DiLoCo, FaultTolerantManager, StreamingDiLoCo
from common import JsonLines

DIM, CLASSES = 16, 4


def blobs(seed, n):
    """n points of the 4 blobs (centres fixed for every peer; samples from `seed`): (x [n, 16], y [n])."""
    centres = torch.randn(CLASSES, DIM, generator=torch.Generator().manual_seed(1234)) * 2.0
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(0, CLASSES, (n,), generator=g)
    return centres[y] + torch.randn(n, DIM, generator=g), y


def digest(tensors):
    h = hashlib.sha256()
    for t in tensors:
        h.update(t.detach().contiguous().view(-1).view(torch.uint8).numpy().tobytes()
                 if t.dtype != torch.bool else t.numpy().tobytes())
    return h.hexdigest()[:16]


def optim_tensors(opt):
    sd = opt.state_dict()["state"]
    return [sd[i][k] for i in sorted(sd) for k in sorted(sd[i]) if torch.is_tensor(sd[i][k])]


def main(kind, master, rank, out, stopfile, min_world, opts):
    faulthandler.register(signal.SIGUSR1)  # a hung peer's stacks, on demand
    torch.set_num_threads(1)
    torch.manual_seed(7)  # equal initial weights (a newcomer's are overwritten anyway)
    model = torch.nn.Sequential(torch.nn.Linear(DIM, 32), torch.nn.ReLU(), torch.nn.Linear(32, CLASSES))
    x, y = blobs(100 + rank, 4096)
    tx, ty = blobs(99, 1024)
    steps = int(opts.get("steps", 10**9))
    log = JsonLines(out)
    quant = pccl.QuantizationOptions(pccl.DataType.UINT8, pccl.QuantizationAlgorithm.MIN_MAX) \
        if opts.get("quant") == "1" else None
    sparse = dict(sparsify=opts["sparse"], sparse_decay=float(opts.get("decay", 1.0))) if "sparse" in opts else {}
    if kind == "ft":
        opt = (torch.optim.Adam(model.parameters(), lr=1e-2) if opts.get("optim") == "adam"
               else torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9))
        w = FaultTolerantManager(master, model, opt, min_world=min_world, timeout_s=60)
        shared = lambda: list(model.state_dict().values())  # noqa: E731
        opt_state = lambda: optim_tensors(opt)  # noqa: E731
    else:
        inner = torch.optim.AdamW(model.parameters(), lr=3e-3)
        if kind == "diloco":
            w = DiLoCo(master, model, inner, inner_steps=int(opts.get("inner", 10)), quantization=quant,
                       min_world=min_world, timeout_s=60, **sparse)
        else:
            w = StreamingDiLoCo(master, model, inner, inner_steps=int(opts.get("inner", 12)),
                                fragments=int(opts.get("fragments", 3)), overlap_steps=int(opts.get("overlap", 1)),
                                alpha=float(opts.get("alpha", 0.5)), quantization=quant, min_world=min_world,
                                timeout_s=60, **sparse)
        shared = lambda: list(w._global)  # noqa: E731
        opt_state = lambda: optim_tensors(w.outer_optimizer)  # noqa: E731

    def record(**extra):
        log.write(rank=rank, revision=w.revision, model=digest(shared()), optim=digest(opt_state()),
                  n_optim=len(opt_state()), world=w.stats.world_size, rx=w.stats.state_rx_bytes,
                  first=w.stats.first_revision, committed=w.stats.committed, skipped=w.stats.skipped, **extra)

    record()
    realloc = int(opts.get("realloc", -1)) if rank == 0 else -1
    mismatch = int(opts.get("mismatch", -1)) if rank == 0 else -1
    deadline = time.monotonic() + 90
    i = 0
    while time.monotonic() < deadline:
        try:
            stop = int(open(stopfile).read())
        except (FileNotFoundError, ValueError):
            stop = steps
        if w.revision >= min(stop, steps):
            if kind != "ft":
                w.use_global_params()
            with torch.no_grad():
                logits = model(tx)
            record(final=True, loss=F.cross_entropy(logits, ty).item(),
                   accuracy=(logits.argmax(1) == ty).float().mean().item())
            return 0
        idx = torch.arange(i * 32, i * 32 + 32) % len(y)
        i += 1
        if kind == "ft":
            opt.zero_grad()
        F.cross_entropy(model(x[idx]), y[idx]).backward()
        before = w.revision
        if w.revision == mismatch:
            mismatch = -1
            w._buckets = lambda real=w._buckets: [(torch.cat([b, b.new_zeros(1)]), o, f) for b, o, f in real()]
            committed = w.step()
            del w._buckets
        else:
            committed = w.step()
        if w.revision != before:
            record()
        elif not committed:
            record(not_committed=True)
        if w.revision == realloc:
            realloc = -1
            st = opt.state[next(iter(model.parameters()))]
            st["exp_avg"] = torch.full_like(st["exp_avg"], 7.0)  # a new tensor: the old one is garbage now
            record(reallocated=True)
        time.sleep(float(opts.get("sleep", 0)))
    return 1


if __name__ == "__main__":
    a = sys.argv[1:]
    sys.exit(main(a[0], a[1], int(a[2]), a[3], a[4], int(a[5]), dict(kv.split("=", 1) for kv in a[6:])))
