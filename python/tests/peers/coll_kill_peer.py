"""Peer of test_coll_kill: MASTER ID OUT STOPFILE WORLD_BEFORE_START BIG_STEP DIE.

Each step accepts newcomers (update_topology), learns the step number from id 0 (a broadcast, so that a
newcomer falls in step), then runs broadcast (root: id 0, in place), all-gather (out of place),
all-gather (output allocated by Python), all-gather-v (output allocated by Python), reduce-scatter (SUM,
in place) and barrier, every operation with rank_key = id, so that ranks are the ids of the members:
0..W-1 while the peers with the highest ids are the ones that leave and rejoin. An operation aborted
with RANK_CONNECTION_LOST is retried after checking that its in-place buffer holds its content from
before the call. Each result is checked against NumPy's for the world it ran in. One JSON line per
step: step, worlds, errors (empty when all is right), retries so far, big_s. At steps BIG_STEP - 2 to
BIG_STEP every peer also runs a reduce-scatter of BIG elements (big_s: the shortest so far; the first is
the slowest, its memory is fresh); with DIE 1 this peer SIGKILLs itself a quarter of big_s into the third,
from another thread while the call is in the library. Stops after the step that STOPFILE names (the same step
on every peer) or after 120 s (exit 1)."""
import os
import signal
import sys
import threading
import time

import numpy as np

import pccl
from common import JsonLines, join

N = 1 << 19  # float32 elements
BIG = 1 << 24  # float32 elements: a transfer long enough to be killed in the middle of


def data(peer_id, step, n=N):
    """Exact in float32, and so are sums of up to 16 of them."""
    return (np.arange(n, dtype=np.float32) % 1024) + np.float32(1024 * peer_id + step % 7)


def agv_count(peer_id):
    return N // 4 + 1000 * peer_id


class Retrying:
    def __init__(self, comm):
        self.comm, self.retries, self.errors, self.big_s = comm, 0, [], 0.0

    def run(self, call, buffer=None):
        """call() until it is not aborted; buffer: an in-place buffer that an abort must leave as it was."""
        before = None if buffer is None else buffer.copy()
        while True:
            try:
                return call()
            except pccl.PCCLError as e:
                if e.result is not pccl.Result.RANK_CONNECTION_LOST:
                    raise
                self.retries += 1
                if before is not None and not np.array_equal(buffer, before):
                    self.errors.append(f"{e.func_name}: aborted in-place buffer not restored")


def big_step(r, pid, step, die):
    """The reduce-scatter of BIG elements that a peer may die in; returns its world size."""
    x = data(pid, step, BIG)
    r.run(lambda: r.comm.barrier(tag=8))  # every peer enters the reduce-scatter at about the same time
    if die:
        threading.Timer(r.big_s / 4, os.kill, (os.getpid(), signal.SIGKILL)).start()
    start = time.monotonic()
    blk, info = r.run(lambda: r.comm.reduce_scatter(x, x, op=pccl.ReduceOp.SUM, tag=7, rank_key=pid), x)
    took = time.monotonic() - start
    r.big_s = min(r.big_s, took) if r.big_s else took
    total = sum(data(i, step, BIG) for i in range(info.world_size))
    if not np.array_equal(blk, total[info.offset:info.offset + info.count]):
        r.errors.append("big reduce_scatter")
    return info.world_size


def step_once(r, pid, step, big_step_no=0, die=False):
    c, errors, worlds = r.comm, r.errors, set()
    n = np.array([step], np.int64)
    info = r.run(lambda: c.broadcast(n, is_root=pid == 0, tag=6, rank_key=pid), n)
    step = int(n[0])
    worlds.add(info.world_size)
    if big_step_no - 2 <= step <= big_step_no:
        worlds.add(big_step(r, pid, step, die and step == big_step_no))
    t = data(0, step) if pid == 0 else np.zeros(N, np.float32)
    info = r.run(lambda: c.broadcast(t, is_root=pid == 0, tag=1, rank_key=pid), t)
    worlds.add(info.world_size)
    if not np.array_equal(t, data(0, step)):
        errors.append("broadcast")

    send, recv = data(pid, step, N // 4), np.zeros(3 * (N // 4), np.float32)
    out, info = r.run(lambda: c.all_gather(send, recv, tag=2, rank_key=pid))
    worlds.add(info.world_size)
    if not np.array_equal(out, np.concatenate([data(i, step, N // 4) for i in range(info.world_size)])):
        errors.append("all_gather")

    out, info = r.run(lambda: c.all_gather(send, tag=2, rank_key=pid))
    worlds.add(info.world_size)
    if out.shape != (info.world_size, N // 4) or not np.array_equal(
            out.reshape(-1), np.concatenate([data(i, step, N // 4) for i in range(info.world_size)])):
        errors.append("all_gather into an allocated output")

    out, counts, info = r.run(lambda: c.all_gather_v(data(pid, step, agv_count(pid)), tag=3, rank_key=pid))
    worlds.add(info.world_size)
    if counts != [agv_count(i) for i in range(info.world_size)] or not np.array_equal(
            out, np.concatenate([data(i, step, agv_count(i)) for i in range(info.world_size)])):
        errors.append("all_gather_v")

    x = data(pid, step)
    blk, info = r.run(lambda: c.reduce_scatter(x, x, op=pccl.ReduceOp.SUM, tag=4, rank_key=pid), x)
    worlds.add(info.world_size)
    total = sum(data(i, step) for i in range(info.world_size))
    if info.rank != pid or not np.array_equal(blk, total[info.offset:info.offset + info.count]):
        errors.append("reduce_scatter")

    info = r.run(lambda: c.barrier(tag=5, rank_key=pid))
    worlds.add(info.world_size)
    return step, worlds


def stop_step(path):
    try:
        return int(open(path).read())
    except (FileNotFoundError, ValueError):
        return None


def main(master, pid, out, stopfile, first_world, big_step_no, die):
    comm = join(master, first_world, 60)
    log, r = JsonLines(out), Retrying(comm)
    deadline = time.monotonic() + 120
    step, just_joined = 0, True  # the peers that accepted this one go on with a step, so must this one
    while time.monotonic() < deadline:
        if not just_joined and comm.are_peers_pending():
            comm.update_topology()
        just_joined = False
        step, worlds = step_once(r, pid, step + 1, big_step_no, die)
        log.write(id=pid, step=step, worlds=sorted(worlds), errors=r.errors, retries=r.retries, big_s=r.big_s)
        stop = stop_step(stopfile)
        if stop is not None and step >= stop:
            return 0
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], int(sys.argv[5]), int(sys.argv[6]),
                  sys.argv[7] == "1"))
