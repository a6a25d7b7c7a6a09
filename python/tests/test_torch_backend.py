"""The torch.distributed backend "pccl" (pccl.torch): every collective against Gloo in the same processes,
objects, async work, DDP, rejected input and a lost rank, with 2 and 3 ranks over env:// rendezvous."""
import json
import os

import pytest

from harness import free_port

torch = pytest.importorskip("torch")

TIMEOUT_S = 90


def run_ranks(procs, scenario, world, env=None, expect_rc=None):
    """Runs peers/torch_backend_peer.py SCENARIO with `world` ranks; returns the ranks' JSON outputs (None
    for a rank that wrote none). expect_rc: {rank: exit code} for ranks expected to fail, others exit 0."""
    base = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port()), "WORLD_SIZE": str(world)}
    base.update(env or {})
    outs = [procs.dir / f"{scenario}{r}.json" for r in range(world)]
    for r in range(world):
        procs.start_peer("torch_backend_peer.py", f"rank{r}", scenario, outs[r], env={**base, "RANK": str(r)})
    for r in range(world):
        rc = procs.wait(f"rank{r}", TIMEOUT_S)
        want = (expect_rc or {}).get(r, 0)
        assert rc == want, f"rank {r} exited {rc}, expected {want}; log:\n{procs.log(f'rank{r}')[-3000:]}"
    return [json.loads(o.read_text()) if o.exists() else None for o in outs]


@pytest.mark.parametrize("world", [2, 3])
def test_collectives_equal_gloo(procs, world):
    results = run_ranks(procs, "collectives", world)
    assert results[0] and all(r == results[0] for r in results), "float results differ between ranks"


@pytest.mark.parametrize("world", [2, 3])
def test_objects(procs, world):
    run_ranks(procs, "objects", world)


def test_async_work_and_futures(procs):
    run_ranks(procs, "async_ops", 3)


@pytest.mark.parametrize("world", [2, 3])
def test_ddp_trains_like_gloo(procs, world):
    results = run_ranks(procs, "ddp", world)
    assert len({r["params"] for r in results}) == 1, f"parameters differ between ranks: {results}"


@pytest.mark.parametrize("world", [2, 3])
def test_mismatched_sizes_raise_on_every_rank(procs, world):
    results = run_ranks(procs, "mismatch", world)
    for r in results:
        first, second = r["error"].split(" | ")
        assert "INVALID_USAGE" in first
        assert "INVALID_USAGE" in second or "allgather output" in second


@pytest.mark.parametrize("world", [2, 3])
def test_lost_rank_raises_on_the_others(procs, world):
    results = run_ranks(procs, "lost", world, expect_rc={world - 1: -9})
    for r in results[:-1]:
        assert r["error"].startswith("pccl:"), r


def test_world_of_one_needs_no_master(procs):
    run_ranks(procs, "objects", 1)


def test_external_master(procs):
    master = procs.start_master()
    run_ranks(procs, "objects", 3, env={"PCCL_MASTER_ADDR": master})  # the subgroup hosts its own master
    assert "listening" in procs.log("master0")


def test_keyed_run(procs, tmp_path):
    key = tmp_path / "run.key"
    key.write_bytes(os.urandom(32) + b"k")  # a trailing newline is not part of a key: never end with one
    key.chmod(0o600)
    run_ranks(procs, "objects", 2, env={"PCCL_KEY_FILE": str(key)})
    assert "this run is open" not in procs.log("rank0")
