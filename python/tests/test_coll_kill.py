"""3 peers run broadcast, all-gather, all-gather-v, reduce-scatter and barrier in a loop; one SIGKILLs
itself in the middle of a large reduce-scatter. The survivors retry what the kill aborted (their in-place
buffers restored), go on as a world of 2 with results right for that world, accept a newcomer in its
place, go on as 3 again, and stop together."""
import signal

from harness import read_json_lines, wait_until

BIG_STEP = 4


def test_kill_and_rejoin_during_collectives(procs):
    master = procs.start_master()
    stopfile = procs.dir / "stop"
    out = {name: procs.dir / f"{name}.jsonl" for name in ("id0", "id1", "id2", "new2")}
    for i in range(3):
        procs.start_peer("coll_kill_peer.py", f"id{i}", master, i, out[f"id{i}"], stopfile, 3, BIG_STEP, int(i == 2))

    def records(name):
        return read_json_lines(out[name])

    def steps(name, worlds, after=0):
        return [x for x in records(name) if x["worlds"] == worlds and x["step"] > after]

    assert procs.wait("id2", 90) == -signal.SIGKILL, procs.log("id2")[-3000:]
    killed_at = max(x["step"] for x in records("id2"))
    assert killed_at == BIG_STEP - 1
    wait_until(lambda: all(len(steps(n, [2], killed_at)) >= 3 for n in ("id0", "id1")), 60,
               "3 steps of the 2 survivors")
    procs.start_peer("coll_kill_peer.py", "new2", master, 2, out["new2"], stopfile, 2, 0, 0)
    wait_until(lambda: len(steps("new2", [3])) >= 3, 60, "3 steps with the newcomer")
    stop = max(x["step"] for n in ("id0", "id1", "new2") for x in records(n)) + 20
    stopfile.write_text(str(stop))
    procs.expect_success(["id0", "id1", "new2"], 60)

    for name in out:
        for x in records(name):
            assert not x["errors"], f"{name} step {x['step']}: {x['errors']}"
    for name in ("id0", "id1", "new2"):
        assert records(name)[-1]["step"] == stop and records(name)[-1]["worlds"] == [3]
    assert records("new2")[0]["step"] > killed_at, "the newcomer did not take over the run's step"
    for name in ("id0", "id1"):
        assert [x["worlds"] for x in records(name) if x["step"] == BIG_STEP] == [[2, 3]]
        assert records(name)[-1]["retries"] >= 1, f"{name} retried nothing: the kill missed the operation"
