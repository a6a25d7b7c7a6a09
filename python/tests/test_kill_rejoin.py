"""A run of 3 peer processes loses one to SIGKILL, goes on with 2, and accepts a newcomer that
receives the shared state: the survivors' all_reduce_multiple_with_retry completes, the
newcomer gets in through update_topology, and no two peers ever hold different state at one
revision."""
from harness import read_json_lines, wait_until
from train_peer import STATE_BYTES


def test_kill_and_rejoin(procs):
    master = procs.start_master()
    stopfile = procs.dir / "stop"
    out = {r: procs.dir / f"rank{r}.jsonl" for r in range(4)}
    for r in range(3):
        procs.start_peer("train_peer.py", f"rank{r}", master, r, out[r], stopfile, 3)

    def records(r):
        return read_json_lines(out[r])

    def steps_with(r, **fields):
        return [x for x in records(r) if all(x[k] == v for k, v in fields.items())]

    wait_until(lambda: all(len(steps_with(r, reduce_world=3)) >= 5 for r in range(3)), 60, "5 steps of 3 peers")
    procs.kill("rank2")
    killed_at = max(x["revision"] for x in records(2))
    wait_until(lambda: all(len([x for x in records(r) if x["revision"] > killed_at and x["reduce_world"] == 2]) >= 5
                           for r in (0, 1)), 30, "5 steps of the 2 survivors")

    procs.start_peer("train_peer.py", "rank3", master, 3, out[3], stopfile, 2)
    wait_until(lambda: len(steps_with(3, reduce_world=3)) >= 5, 60, "5 steps with the newcomer")
    # 50 steps ahead (about a second): the peers must read the file before they pass that revision
    stop = max(x["revision"] for r in (0, 1, 3) for x in records(r)) + 50
    stopfile.write_text(str(stop))
    procs.expect_success(["rank0", "rank1", "rank3"], 30)

    everything = [x for r in range(4) for x in records(r)]
    by_revision = {}
    for x in everything:
        by_revision.setdefault(x["revision"], set()).add(x["hash"])
        assert x["uniform"] and all(g == int(g) and 2 <= g <= 3 for g in x["grads"]), x
    assert all(len(h) == 1 for h in by_revision.values()), "peers held different state at one revision"
    for r in (0, 1, 3):
        assert records(r)[-1]["revision"] == stop
    first = records(3)[0]
    assert first["sync_rx"] == STATE_BYTES, f"newcomer received {first['sync_rx']} of {STATE_BYTES} bytes"
    assert first["revision"] > killed_at + 5, "newcomer did not take over the run's revision"
    served = sum(x["sync_tx"] for r in (0, 1) for x in records(r) if x["revision"] == first["revision"])
    assert served == STATE_BYTES, f"survivors sent {served} bytes to the newcomer"
