"""Seed 004's grid on CPU: 2 replicas x 2 sharded ranks (examples/python/fsdp_grid.py: FlatShard over Gloo inside a
replica, pccl across replicas, one peer group per shard). Replica 1 is SIGKILLed (both its processes) mid-run and
restarted, its shard-1 rank joining the pccl run 2 s after its shard-0 rank (a half-populated grid); it rejoins,
receives both shards' state, and at every revision each shard's state is equal on every replica."""
import sys
from pathlib import Path

from harness import free_port, read_json_lines, wait_until

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "python" / "fsdp_grid.py"
AHEAD = 10  # revisions past the latest when the test names the last one
TIMEOUT_S = 150


class Grid:
    def __init__(self, procs):
        self.procs = procs
        self.master = procs.start_master()
        self.stop = procs.dir / "stop"

    def start_replica(self, replica, incarnation, delays=(0, 0)):
        port = free_port()
        for shard in (0, 1):
            self.procs.spawn(self.name(replica, shard, incarnation),
                             [sys.executable, str(EXAMPLE), "--master", self.master, "--stop-file", self.stop,
                              "--replica", replica, "--out", self.out(replica, shard),
                              "--connect-delay", delays[shard], "--timeout", 100, "--gloo-timeout", 100],
                             env={"RANK": str(shard), "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1",
                                  "MASTER_PORT": str(port)})

    @staticmethod
    def name(replica, shard, incarnation):
        return f"r{replica}s{shard}i{incarnation}"

    def out(self, replica, shard):
        return self.procs.dir / f"r{replica}s{shard}.jsonl"

    def records(self, replica, shard):
        return read_json_lines(self.out(replica, shard))

    def revision(self, replica):
        """The lower of the two shards' latest revisions (-1 before both stepped)."""
        last = [[r["revision"] for r in self.records(replica, s) if r["event"] == "step"][-1:] for s in (0, 1)]
        return min(last[0] + last[1]) if last[0] and last[1] else -1


def test_grid_survives_a_replica_killed_and_restarted(procs):
    procs.spawn = _spawn_with_str_args(procs.spawn)
    grid = Grid(procs)
    grid.start_replica(0, 0)
    grid.start_replica(1, 0)
    wait_until(lambda: grid.revision(1) >= 6, TIMEOUT_S, "6 steps of the full grid")
    for shard in (0, 1):
        procs.kill(Grid.name(1, shard, 0))
    killed_at = grid.revision(0)
    wait_until(lambda: grid.revision(0) >= killed_at + 4, TIMEOUT_S, "replica 0 training alone")
    grid.start_replica(1, 1, delays=(0, 2))
    wait_until(lambda: grid.revision(1) > killed_at + 4, TIMEOUT_S, "the restarted replica's steps")
    last = max(grid.revision(0), grid.revision(1)) + AHEAD
    grid.stop.write_text(str(last))
    procs.expect_success([Grid.name(r, s, i) for r, i in ((0, 0), (1, 1)) for s in (0, 1)], TIMEOUT_S)

    for shard in (0, 1):
        by_rev = {}
        for replica in (0, 1):
            for rec in grid.records(replica, shard):
                if rec["event"] in ("step", "done"):
                    by_rev.setdefault(rec["revision"], set()).add(rec["hash"])
        bad = {rev: hashes for rev, hashes in by_rev.items() if len(hashes) != 1}
        assert not bad, f"shard {shard}: replicas held different state at one revision: {bad}"
        done = [[r for r in grid.records(replica, shard) if r["event"] == "done"] for replica in (0, 1)]
        assert len(done[0]) == len(done[1]) == 1, done
        done = [d[0] for d in done]
        assert done[0]["revision"] == done[1]["revision"] == last and done[0]["hash"] == done[1]["hash"], done
        assert done[1]["rx"] > 0, "the restarted replica received no shard state"
        joins = [r for r in grid.records(1, shard) if r["event"] == "joined"]
        assert len(joins) == 2 and joins[1]["revision"] > killed_at, joins
        steps0 = [r for r in grid.records(0, shard) if r["event"] == "step"]
        alone = [r for r in steps0 if r["replicas"] == 1]
        assert alone, "replica 0 never trained alone"
        assert steps0[-1]["waits"] > alone[-1]["waits"], "replica 0 never waited for the half-populated grid"
        assert all(r["replicas"] == 2 for r in grid.records(1, shard) if r["event"] == "step"), \
            "the restarted replica stepped before the grid was full"


def _spawn_with_str_args(spawn):
    return lambda name, argv, env=None: spawn(name, [str(a) for a in argv], env)
