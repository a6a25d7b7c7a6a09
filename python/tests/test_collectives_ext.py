"""Broadcast, all-gather, all-gather-v, reduce-scatter and barrier over 3 peer processes and a master, in
place, out of place, into outputs Python allocates, async, with rank keys, for NumPy arrays and torch
tensors of several dtypes, against outputs NumPy computes from the ranks the peers report; input the
master must reject, rejected on every peer with the same error and nothing overwritten."""
import numpy as np
import pytest

import pccl
from cases import make
from coll_cases import (BAD, COUNT, ROOT_ID, SHARED_ID, WORLD, agv_count, block, case_ids, digest, expected_values,
                        ranked_key)
from harness import free_port, run_peers_once

GOOD = [c for c in case_ids() if not c.startswith("bad-")]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """Runs the peers once; ({case: [record of each peer]}, the directory of their logs)."""
    workdir = tmp_path_factory.mktemp("collectives_ext")
    return run_peers_once(workdir, "coll_peer.py", WORLD, 240), workdir


@pytest.fixture(scope="module")
def results(run):
    return run[0]


def ranked(recs):
    """The peer ids in rank order, after checking the ranks are 0..WORLD-1."""
    assert sorted(r["rank"] for r in recs) == list(range(WORLD)), [r["rank"] for r in recs]
    return [r["id"] for r in sorted(recs, key=lambda r: r["rank"])]


@pytest.mark.parametrize("case", GOOD)
def test_case(results, case):
    recs = results.get(case, [])
    assert len(recs) == WORLD, f"{len(recs)} of {WORLD} peers reported {case}"
    for r in recs:
        assert r["ok"], f"peer {r['id']}: {r['error']}"
        assert r["world"] == WORLD
    ids_by_rank = ranked(recs)
    kind, dt, coll, mode = case.split("-")
    if mode == "ranked":
        assert ids_by_rank == sorted(range(WORLD), key=ranked_key), "ranks do not follow the rank keys"
    if coll == "barrier":
        return
    for r in recs:
        want = expected_values(case, ids_by_rank, r["rank"])
        assert r["count"] == len(want), f"peer {r['id']}: info.count"
        if mode == "quant":
            assert r["quant_excess"] <= 0, f"peer {r['id']}: quantization error above the bound by {r['quant_excess']}"
        else:
            assert r["digest"] == digest(make(kind, dt, want)), f"peer {r['id']} (rank {r['rank']}): wrong output"
        if coll == "bcast":
            assert r["root"] == ids_by_rank.index(ROOT_ID)
        if coll == "agv":
            assert r["counts"] == [agv_count(i, mode == "zero") for i in ids_by_rank]
        if coll.startswith("rs_"):
            assert r["offset"] == block(COUNT, WORLD, r["rank"])[0]
        assert r.get("send_intact", True), f"peer {r['id']}: out-of-place input was modified"


@pytest.mark.parametrize("name", BAD)
def test_rejected_on_every_peer(run, name):
    """The same error on every peer, the master's reason in every peer's log, the buffers untouched."""
    results, workdir = run
    recs = results.get(f"bad-{name}", [])
    assert len(recs) == WORLD
    error, reason = BAD[name]
    for r in recs:
        assert r["error"] == error, f"peer {r['id']}: got {r['error'] or 'success'}"
        assert r["func"] == "pcclExtCollective"
        assert r["intact"], f"peer {r['id']}: a rejected operation changed the buffer"
        log = (workdir / f"peer{r['id']}.log").read_text()
        assert f"tag {r['tag']} rejected by the master: {reason}" in log, f"peer {r['id']}: no reason logged"


def test_traffic(results):
    """Ring all-gather: each peer receives and sends the other W-1 blocks once; broadcast: each non-root
    that lacks the data receives it once; reduce-scatter: each peer sends about (W-1)/W of its input."""
    n, itemsize = COUNT, 4
    for r in results["numpy-float32-ag-outofplace"]:
        assert r["rx"] == r["tx"] == (WORLD - 1) * n * itemsize, r
    for r in results["numpy-float32-bcast-inplace"]:
        assert r["rx"] == (0 if r["id"] == ROOT_ID else n * itemsize), r
    for r in results["numpy-float32-bcast-shared"]:  # a member that holds the data receives nothing
        assert r["rx"] == (0 if r["id"] in (ROOT_ID, SHARED_ID) else n * itemsize), r
    for r in results["numpy-float32-rs_SUM-outofplace"]:
        ideal = (WORLD - 1) * n * itemsize / WORLD
        assert abs(r["tx"] - ideal) <= WORLD * itemsize, r


def test_unconnected():
    """Before connect: INVALID_USAGE at launch, from the C function named."""
    comm = pccl.Communicator(f"127.0.0.1:{free_port()}")
    for call, func in ((comm.barrier, "pcclExtCollective"), (comm.barrier_async, "pcclExtCollectiveAsync")):
        with pytest.raises(pccl.PCCLError) as e:
            call()
        assert e.value.result is pccl.Result.INVALID_USAGE and e.value.func_name == func


def test_alone():
    """Alone in the run: TOO_FEW_PEERS, the buffers untouched."""
    addr = f"127.0.0.1:{free_port()}"
    master = pccl.MasterNode(addr)
    master.run()
    try:
        comm = pccl.Communicator(addr)
        comm.connect()
        x = np.arange(10, dtype=np.float32)
        for call in (lambda: comm.broadcast(x, is_root=True), lambda: comm.all_gather(x),
                     lambda: comm.all_gather_v(x), lambda: comm.reduce_scatter(x, x, op=pccl.ReduceOp.SUM),
                     lambda: comm.barrier(), lambda: comm.all_gather_async(x).result()):
            with pytest.raises(pccl.PCCLError) as e:
                call()
            assert e.value.result is pccl.Result.TOO_FEW_PEERS
            assert np.array_equal(x, np.arange(10, dtype=np.float32))
    finally:
        master.interrupt()
        master.await_termination()
