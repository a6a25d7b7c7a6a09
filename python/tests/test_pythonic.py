"""The Pythonic surface: context managers, reprs, the exception hierarchy, the library's log in `logging`, leaving
a run, connecting with a deadline, run keys from memory, py.typed."""
import logging
import pickle
import threading
import time
from pathlib import Path

import numpy as np
import pytest

import pccl
from common import join
from harness import free_port
from pccl import Attribute, Departure, PCCLError, PCCLFatalError, PCCLRetryableError, ReduceOp, Result

TIMEOUT_S = 60
KEY = b"k" * 40


def in_threads(*bodies):
    """Runs each body on its own thread; returns their results, raises the first error; every join bounded."""
    results, errors = [None] * len(bodies), []

    def run(i):
        try:
            results[i] = bodies[i]()
        except BaseException as e:  # handed to the test thread
            errors.append(e)
    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(bodies))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(TIMEOUT_S)
    assert not any(t.is_alive() for t in threads), "a peer thread hung"
    if errors:
        raise errors[0]
    return results


def test_error_classes_by_result():
    for r in (Result.RANK_CONNECTION_LOST, Result.TOO_FEW_PEERS, Result.UPDATE_TOPOLOGY_FAILED):
        e = PCCLError(r, "f")
        assert type(e) is PCCLRetryableError and e.retryable and e.result is r and e.code == r.value
    for r in (Result.INVALID_ARGUMENT, Result.INVALID_USAGE, Result.RUN_SHUT_DOWN, Result.MASTER_CONNECTION_FAILED):
        e = PCCLError(r.value, "f")
        assert type(e) is PCCLFatalError and not e.retryable and e.result is r
    e = pickle.loads(pickle.dumps(PCCLError(Result.RANK_CONNECTION_LOST, "pcclAllReduce")))
    assert type(e) is PCCLRetryableError and e.func_name == "pcclAllReduce" and "RANK_CONNECTION_LOST" in str(e)


def test_calls_raise_the_subclass():
    with pytest.raises(PCCLFatalError) as e:
        pccl.Communicator("127.0.0.1:1").set_run_key(b"short")
    assert e.value.result is Result.INVALID_ARGUMENT and e.value.func_name == "pcclExtCommSetRunKey"
    with pytest.raises(PCCLFatalError) as e:
        pccl.Communicator("127.0.0.1:1").connect(n_attempts=1)
    assert e.value.result is Result.MASTER_CONNECTION_FAILED


def test_context_managers_reprs_and_a_two_peer_all_reduce():
    addr = f"127.0.0.1:{free_port()}"
    with pccl.MasterNode(addr) as master:
        assert repr(master) == f"<pccl.MasterNode {addr} running>"

        def peer(rank):
            with join(addr, 2, TIMEOUT_S) as comm:
                assert repr(comm) == f"<pccl.Communicator {addr} peer_group=0 connected, world_size=2>"
                x = np.full(64, rank + 1.0, np.float32)
                comm.all_reduce(x, x, op=ReduceOp.SUM)
            assert comm.closed and repr(comm) == f"<pccl.Communicator {addr} peer_group=0 closed>"
            with pytest.raises(PCCLFatalError):
                comm.get_attribute(Attribute.GLOBAL_WORLD_SIZE)
            return x
        a, b = in_threads(lambda: peer(0), lambda: peer(1))
    assert (a == 3).all() and (b == 3).all()
    assert repr(master) == f"<pccl.MasterNode {addr} closed>"
    master.close()  # idempotent


def test_library_log_goes_to_logging():
    records = []

    class Keep(logging.Handler):
        def emit(self, record):
            records.append(record)
    logger = logging.getLogger("pccl.test_lib")
    handler = Keep()
    logger.addHandler(handler)
    try:
        pccl.log_to_logging(logger, level=logging.WARNING)
        with pccl.MasterNode(f"127.0.0.1:{free_port()}"):
            pass
        pccl.log_to_stderr()
        n = len(records)
        with pccl.MasterNode(f"127.0.0.1:{free_port()}"):
            pass
    finally:
        pccl.log_to_stderr()
        logger.removeHandler(handler)
    opened = [r for r in records if "this run is open" in r.getMessage()]
    assert opened and opened[0].levelno == logging.WARNING and opened[0].pccl_component == "master"
    assert opened[0].getMessage().startswith("[master] ")
    assert len(records) == n, "records after log_to_stderr()"


def test_leave_and_departure():
    addr = f"127.0.0.1:{free_port()}"
    left = threading.Event()
    with pccl.MasterNode(addr):
        def stays():
            with join(addr, 2, TIMEOUT_S) as comm:
                assert left.wait(TIMEOUT_S)
                deadline = time.monotonic() + TIMEOUT_S
                while comm.get_attribute(Attribute.GLOBAL_WORLD_SIZE) > 1 and time.monotonic() < deadline:
                    comm.update_topology()
                    time.sleep(0.05)
                return comm.get_attribute(Attribute.GLOBAL_WORLD_SIZE), comm.departure

        def leaves():
            with join(addr, 2, TIMEOUT_S) as comm:
                assert comm.departure is Departure.IN_RUN
                comm.leave()
                left.set()
                assert repr(comm).endswith(" left>")
                return comm.departure
        (world, stayed), gone = in_threads(stays, leaves)
    assert (world, stayed, gone) == (1, Departure.IN_RUN, Departure.LEFT)


def test_leave_while_a_sync_waits_for_its_plan():
    """A leave from another thread while the peer syncs in a loop. When the leave comes after every member's vote
    reached the master, the master has commenced the sync and keeps the peer as its member until it reports; the
    leaving peer must still answer the plan, or its leave waits out the grace and ends as a departure (the library
    warns "did not remove this peer"). The window is a master round trip wide, so several trials, each leaving
    at another moment of the loop."""
    records = []

    class Keep(logging.Handler):
        def emit(self, record):
            records.append(record.getMessage())
    logger = logging.getLogger("pccl.test_leave_sync")
    handler = Keep()
    logger.addHandler(handler)
    pccl.log_to_logging(logger, level=logging.WARNING)
    try:
        for trial in range(8):
            addr = f"127.0.0.1:{free_port()}"
            with pccl.MasterNode(addr):
                joined, left, synced_once = threading.Barrier(3, timeout=TIMEOUT_S), threading.Event(), threading.Event()
                leaver = {}

                def sync_loop(comm, until):
                    x = np.zeros(16, np.float32)
                    state = pccl.SharedState([pccl.TensorInfo.from_numpy(x, "x")])
                    n, deadline = 0, time.monotonic() + TIMEOUT_S
                    while not until() and time.monotonic() < deadline:
                        state.revision += 1
                        try:
                            comm.sync_shared_state(state)
                        except PCCLError:
                            break
                        n += 1
                        synced_once.set()
                    return n

                def stays():
                    with join(addr, 2, TIMEOUT_S) as comm:
                        joined.wait()
                        return sync_loop(comm, left.is_set)

                def leaves():
                    with join(addr, 2, TIMEOUT_S) as comm:
                        leaver["comm"] = comm
                        joined.wait()
                        sync_loop(comm, lambda: comm.departure is not Departure.IN_RUN)
                        assert left.wait(TIMEOUT_S)
                        return comm.departure

                def trigger():
                    joined.wait()
                    assert synced_once.wait(TIMEOUT_S)
                    time.sleep(0.002 + 0.003 * trial)  # another moment of the sync loop each trial
                    leaver["comm"].leave()
                    left.set()
                synced, gone, _ = in_threads(stays, leaves, trigger)
            assert gone is Departure.LEFT
            assert synced >= 1
            grace = [r for r in records if "did not remove this peer" in r]
            assert not grace, f"trial {trial}: the leave became a departure: {grace}"
    finally:
        pccl.log_to_stderr()
        logger.removeHandler(handler)


def test_connect_with_a_deadline():
    """The accepted peer never updates the topology, so pcclConnect would wait forever: the deadline cancels it."""
    addr = f"127.0.0.1:{free_port()}"
    with pccl.MasterNode(addr), pccl.Communicator(addr) as first:
        first.connect(timeout_s=TIMEOUT_S)
        late = pccl.Communicator(addr)
        t0 = time.monotonic()
        with pytest.raises(TimeoutError):
            late.connect(timeout_s=1.0)
        assert time.monotonic() - t0 < 15
        late.close()
        assert first.get_attribute(Attribute.GLOBAL_WORLD_SIZE) == 1


def test_run_keys_from_memory():
    addr = f"127.0.0.1:{free_port()}"
    with pccl.MasterNode(addr) as master:
        with pytest.raises(PCCLFatalError):
            master.set_run_key(KEY)  # running already
    master = pccl.MasterNode(addr)
    master.set_run_key(KEY + b"\n")
    with master:
        with pccl.Communicator(addr) as keyed:
            keyed.set_run_key(KEY)
            keyed.connect(n_attempts=1, timeout_s=TIMEOUT_S)
            assert keyed.get_attribute(Attribute.GLOBAL_WORLD_SIZE) == 1
        with pccl.Communicator(addr) as stranger:
            with pytest.raises(PCCLError) as e:
                stranger.connect(n_attempts=1, timeout_s=TIMEOUT_S)
            assert e.value.result is Result.MASTER_CONNECTION_FAILED


def test_py_typed_marker():
    assert (Path(pccl.__file__).parent / "py.typed").is_file()


EXIT_DURING_RECONNECT = r'''
import logging, os, signal, subprocess, sys, threading, time
import pccl
master = subprocess.Popen([sys.executable, "-m", "pccl.master", "--listen-address", ADDR],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
assert "listening" in master.stdout.readline() + master.stdout.readline()
logging.basicConfig(level=logging.DEBUG)
pccl.log_to_logging(level=logging.DEBUG)  # library threads call into Python while the interpreter exits
c = pccl.Communicator(ADDR)
c.connect(timeout_s=30)
def vote():
    while True:
        try:
            c.update_topology()
        except pccl.PCCLError:
            time.sleep(0.01)
threading.Thread(target=vote, daemon=True).start()
os.kill(master.pid, signal.SIGKILL)
master.wait()
time.sleep(0.3)  # the communicator now reconnects to the stopped master
print("exiting", flush=True)
'''


def test_exit_while_reconnecting_to_a_stopped_master(tmp_path):
    """A process exits while its communicator reconnects to a killed master, a thread blocked in a call and the
    library's log routed into Python: it exits cleanly (no SIGSEGV, no hang)."""
    import subprocess
    import sys
    from harness import child_env
    code = f"ADDR = '127.0.0.1:{free_port()}'\n" + EXIT_DURING_RECONNECT
    for _ in range(2):
        t0 = time.monotonic()
        run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                             env=child_env(), cwd=tmp_path)
        assert run.returncode == 0 and "exiting" in run.stdout, (run.returncode, run.stdout, run.stderr[-2000:])
        assert "reconnecting" in run.stderr, run.stderr[-2000:]
        assert time.monotonic() - t0 < 30
