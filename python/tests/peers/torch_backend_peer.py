"""One rank of a torch.distributed run on the "pccl" backend (env:// rendezvous from the environment).

    torch_backend_peer.py SCENARIO OUT_JSON

Scenarios compare each pccl collective with Gloo's on a second process group of the same processes, and
write what the test compares across ranks (hashes of float results) to OUT_JSON. A failed check raises,
so the rank exits non-zero with the reason on stderr.
"""
import hashlib
import json
import os
import signal
import sys
from datetime import timedelta

import torch
import torch.distributed as dist

import pccl.torch  # noqa: F401  (registers the backend)

# The dtypes Gloo reduces and gathers on CPU (torch 1.13: no bfloat16, int16 or bool).
GLOO_DTYPES = [torch.float32, torch.float64, torch.float16, torch.int8, torch.uint8, torch.int32, torch.int64]
OPS = ["SUM", "PRODUCT", "MIN", "MAX"]


def digest(t):
    return hashlib.sha256(t.contiguous().view(-1).view(torch.uint8).numpy().tobytes()).hexdigest()


def data(rank, dtype, n=37, salt=0):
    g = torch.Generator().manual_seed(1000 * rank + salt)
    if dtype.is_floating_point:
        return (torch.randn(n, generator=g, dtype=torch.float64) * 3).to(dtype)
    info = torch.iinfo(dtype)
    lo, hi = max(info.min, -100), min(info.max, 100)  # sums and products wrap around in int8/uint8 too
    return torch.randint(lo, hi + 1, (n,), generator=g, dtype=torch.int64).to(dtype)


def same(ours, gloo, what):
    if ours.dtype.is_floating_point:
        if ours.dtype == torch.float16:
            ok = torch.allclose(ours.double(), gloo.double(), rtol=1e-2, atol=1e-2, equal_nan=True)
        else:
            ok = torch.allclose(ours, gloo, rtol=1e-4, atol=1e-5, equal_nan=True)
    else:
        ok = torch.equal(ours, gloo)
    if not ok:
        raise AssertionError(f"{what}: pccl {ours.tolist()} != gloo {gloo.tolist()}")


def collectives(rank, world, gloo):
    hashes = {}
    for dtype in GLOO_DTYPES:
        for op in OPS:
            ours, ref = data(rank, dtype), data(rank, dtype)
            dist.all_reduce(ours, op=getattr(dist.ReduceOp, op))
            dist.all_reduce(ref, op=getattr(dist.ReduceOp, op), group=gloo)
            same(ours, ref, f"all_reduce {op} {dtype}")
            hashes[f"all_reduce {op} {dtype}"] = digest(ours)
        outs = [torch.zeros(37, dtype=dtype) for _ in range(world)]
        refs = [torch.zeros(37, dtype=dtype) for _ in range(world)]
        dist.all_gather(outs, data(rank, dtype, salt=1))
        dist.all_gather(refs, data(rank, dtype, salt=1), group=gloo)
        for r in range(world):
            if not torch.equal(outs[r], refs[r]):
                raise AssertionError(f"all_gather {dtype}: block {r} differs")
        for root in range(world):
            ours, ref = data(rank, dtype, salt=2), data(rank, dtype, salt=2)
            dist.broadcast(ours, root)
            dist.broadcast(ref, root, group=gloo)
            if not torch.equal(ours, ref):
                raise AssertionError(f"broadcast {dtype} from {root} differs")
        # Gloo on torch 1.13 has no reduce_scatter: compare with its all-reduce, sliced.
        for op in OPS:
            ins = [data(rank, dtype, n=5, salt=3 + r) for r in range(world)]
            out = torch.zeros(5, dtype=dtype)
            dist.reduce_scatter(out, ins, op=getattr(dist.ReduceOp, op))
            ref = torch.cat(ins)
            dist.all_reduce(ref, op=getattr(dist.ReduceOp, op), group=gloo)
            same(out, ref[5 * rank:5 * rank + 5], f"reduce_scatter {op} {dtype}")
    for dtype in [torch.int64, torch.uint8]:
        for op in ["BAND", "BOR", "BXOR"]:
            ours, ref = data(rank, dtype, salt=4), data(rank, dtype, salt=4)
            dist.all_reduce(ours, op=getattr(dist.ReduceOp, op))
            dist.all_reduce(ref, op=getattr(dist.ReduceOp, op), group=gloo)
            same(ours, ref, f"all_reduce {op} {dtype}")
    # Beyond Gloo: AVG (floats), bool and bfloat16, a non-contiguous tensor, all_gather_into_tensor.
    avg = data(rank, torch.float32, salt=5)
    expect = sum(data(r, torch.float32, salt=5) for r in range(world)) / world
    dist.all_reduce(avg, op=dist.ReduceOp.AVG)
    same(avg, expect, "all_reduce AVG")
    hashes["avg"] = digest(avg)
    z = torch.complex(data(rank, torch.float32, salt=6), data(rank, torch.float32, salt=7))
    zref = z.clone()
    dist.all_reduce(z)
    dist.all_reduce(zref, group=gloo)
    same(torch.view_as_real(z), torch.view_as_real(zref), "all_reduce SUM complex64")
    hashes["complex"] = digest(torch.view_as_real(z))
    flags = torch.tensor([rank == 0, True, False])
    dist.all_reduce(flags)
    if flags.tolist() != [True, True, False]:
        raise AssertionError(f"bool all_reduce: {flags.tolist()}")
    bf = torch.full((8,), float(rank + 1), dtype=torch.bfloat16)
    dist.all_reduce(bf)
    if bf.tolist() != [float(world * (world + 1) // 2)] * 8:
        raise AssertionError(f"bfloat16 all_reduce: {bf.tolist()}")
    grid = torch.arange(12, dtype=torch.int32).reshape(3, 4) * (rank + 1)
    col = grid[:, 1]
    dist.all_reduce(col)
    if col.tolist() != [sum(range(1, world + 1)) * v for v in (1, 5, 9)] or grid[:, 1].tolist() != col.tolist():
        raise AssertionError(f"non-contiguous all_reduce: {col.tolist()}")
    flat = torch.zeros(world * 3, dtype=torch.int64)
    dist.all_gather_into_tensor(flat, torch.full((3,), rank, dtype=torch.int64))
    if flat.tolist() != [r for r in range(world) for _ in range(3)]:
        raise AssertionError(f"all_gather_into_tensor: {flat.tolist()}")
    block = torch.zeros(2, dtype=torch.int64)
    dist.reduce_scatter_tensor(block, torch.arange(world * 2, dtype=torch.int64) * (rank + 1))
    if block.tolist() != [v * world * (world + 1) // 2 for v in (2 * rank, 2 * rank + 1)]:
        raise AssertionError(f"reduce_scatter_tensor: {block.tolist()}")
    return hashes


def objects(rank, world, gloo):
    gathered = [None] * world
    dist.all_gather_object(gathered, {"rank": rank, "text": "x" * (10 + 50 * rank)})
    if gathered != [{"rank": r, "text": "x" * (10 + 50 * r)} for r in range(world)]:
        raise AssertionError(f"all_gather_object: {gathered}")
    for src in range(world):
        objs = [("from", rank, list(range(rank * 7)))] if rank == src else [None]
        dist.broadcast_object_list(objs, src=src)
        if objs != [("from", src, list(range(src * 7)))]:
            raise AssertionError(f"broadcast_object_list from {src}: {objs}")
    dist.barrier()
    # A second pccl group, of the ranks but 0: its group rank 0 (global rank 1) hosts its master.
    members = list(range(1, world))
    sub = dist.new_group(ranks=members, backend="pccl") if members else None
    if rank in members:
        t = torch.full((5,), rank, dtype=torch.int64)
        dist.all_reduce(t, group=sub)
        if t.tolist() != [sum(members)] * 5:
            raise AssertionError(f"subgroup all_reduce: {t.tolist()}")
        dist.barrier(group=sub)
    return {}


def async_ops(rank, world, gloo):
    tensors = [torch.full((1000,), float(rank + i)) for i in range(4)]
    works = [dist.all_reduce(t, async_op=True) for t in tensors]
    futs = [w.get_future() for w in works]
    chained = futs[1].then(lambda f: f.value()[0] * 2)
    gathered = [torch.zeros(3, dtype=torch.int64) for _ in range(world)]
    gw = dist.all_gather(gathered, torch.full((3,), rank, dtype=torch.int64), async_op=True)
    bw = dist.barrier(async_op=True)
    for w in reversed(works):
        w.wait()
    base = sum(range(world))
    for i, (t, f) in enumerate(zip(tensors, futs)):
        if t.tolist() != [float(base + world * i)] * 1000 or f.wait()[0] is not t:
            raise AssertionError(f"async all_reduce {i}: {t[:3].tolist()}")
    if chained.wait().tolist() != [2.0 * (base + world)] * 1000:
        raise AssertionError("future chained with then() got a wrong value")
    gw.wait()
    bw.wait()
    if [g.tolist() for g in gathered] != [[r] * 3 for r in range(world)] or not gw.is_completed():
        raise AssertionError(f"async all_gather: {gathered}")
    return {}


def model():
    torch.manual_seed(7)
    return torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.Tanh(), torch.nn.Linear(16, 3))


def train(rank, group, steps=12):
    torch.manual_seed(100 + rank)  # ranks start different: DDP's construction broadcasts rank 0's weights
    net = model()
    if rank != 0:
        with torch.no_grad():
            for p in net.parameters():
                p.add_(torch.randn_like(p))
    ddp = torch.nn.parallel.DistributedDataParallel(net, process_group=group, bucket_cap_mb=0.0001)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05)
    g = torch.Generator().manual_seed(rank)
    for _ in range(steps):
        x = torch.randn(8, 6, generator=g)
        y = torch.randn(8, 3, generator=g)
        opt.zero_grad()
        torch.nn.functional.mse_loss(ddp(x), y).backward()
        opt.step()
    return [p.detach().clone() for p in net.parameters()]


def ddp(rank, world, gloo):
    ours = train(rank, None)
    ref = train(rank, gloo)
    for i, (a, b) in enumerate(zip(ours, ref)):
        same(a, b, f"DDP parameter {i}")
    return {"params": hashlib.sha256(b"".join(digest(p).encode() for p in ours)).hexdigest()}


def mismatch(rank, world, gloo):
    bad = torch.ones(10 + rank)
    try:
        dist.all_reduce(bad)
    except RuntimeError as e:
        raised = str(e)
    else:
        raise AssertionError("all_reduce of different sizes succeeded")
    if bad.tolist() != [1.0] * (10 + rank):
        raise AssertionError("a rejected all_reduce changed its tensor")
    outs = [torch.zeros(4) for _ in range(world)]
    try:
        dist.all_gather(outs, torch.ones(4 if rank else 5))
    except (RuntimeError, ValueError) as e:
        raised += " | " + str(e)
    else:
        raise AssertionError("all_gather of different sizes succeeded")
    good = torch.ones(3)
    dist.all_reduce(good)  # the group goes on after rejected operations
    if good.tolist() != [float(world)] * 3:
        raise AssertionError(f"all_reduce after the rejections: {good.tolist()}")
    return {"error": raised}


def lost(rank, world, gloo):
    """The last rank dies before the operation; the others' all_reduce raises instead of waiting."""
    if rank == world - 1:
        os.kill(os.getpid(), signal.SIGKILL)
    t = torch.ones(1000)
    try:
        dist.all_reduce(t)
    except RuntimeError as e:
        if t.tolist() != [1.0] * 1000:
            raise AssertionError("a failed all_reduce changed its tensor")
        return {"error": str(e)}
    raise AssertionError("all_reduce succeeded without the lost rank")


def main():
    scenario, out = sys.argv[1], sys.argv[2]
    dist.init_process_group("pccl", timeout=timedelta(seconds=60))
    if dist.get_backend() != "pccl":
        raise AssertionError(f"backend {dist.get_backend()}")
    gloo = dist.new_group(backend="gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    result = globals()[scenario](rank, world, gloo)
    if scenario != "lost":
        dist.barrier(group=gloo)  # rank 0 hosts the master: it leaves last
        pg = dist.distributed_c10d._get_default_group()
        pg.shutdown()
        if pg._master is not None and pg._master._running:
            raise AssertionError("shutdown() left rank 0's master running")
        try:
            dist.all_reduce(torch.ones(1))
        except RuntimeError as e:
            if "shut down" not in str(e):
                raise
        else:
            raise AssertionError("all_reduce after shutdown() succeeded")
    with open(out, "w") as f:
        json.dump(result, f)
    if scenario == "lost":
        os._exit(0)  # skips the finalizers of the Gloo group, which may abort with a member killed


if __name__ == "__main__":
    main()
