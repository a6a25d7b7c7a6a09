"""3 peers run broadcast, all-gather, all-gather-v, reduce-scatter and barrier in a loop; one is SIGKILLed
in the middle of it. The survivors retry what the kill aborted (their in-place buffers restored), go on
as a world of 2 with results right for that world, and stop together."""
from harness import read_json_lines, wait_until


def test_kill_during_collectives(procs):
    master = procs.start_master()
    stopfile = procs.dir / "stop"
    out = {i: procs.dir / f"id{i}.jsonl" for i in range(3)}
    for i in range(3):
        procs.start_peer("coll_kill_peer.py", f"id{i}", master, i, out[i], stopfile)

    def records(i):
        return read_json_lines(out[i])

    wait_until(lambda: all(len([x for x in records(i) if x["worlds"] == [3]]) >= 3 for i in range(3)), 90,
               "3 steps of 3 peers")
    procs.kill("id2")
    killed_at = max(x["step"] for x in records(2))
    wait_until(lambda: all(len([x for x in records(i) if x["step"] > killed_at and x["worlds"] == [2]]) >= 3
                           for i in (0, 1)), 60, "3 steps of the 2 survivors")
    stop = max(x["step"] for i in (0, 1) for x in records(i)) + 20
    stopfile.write_text(str(stop))
    procs.expect_success(["id0", "id1"], 60)

    for i in range(3):
        for x in records(i):
            assert not x["errors"], f"peer {i} step {x['step']}: {x['errors']}"
    for i in (0, 1):
        assert records(i)[-1]["step"] == stop
        assert records(i)[-1]["worlds"] == [2]
    print("retries of the survivors:", [records(i)[-1]["retries"] for i in (0, 1)])
