"""Blocking calls release the GIL: a Python thread keeps counting while another thread waits in C,
about as fast as while that thread sleeps in time.sleep (which releases the GIL). A call that held
the GIL would let it count only in the switch intervals before and after (a few percent)."""
import socket
import threading
import time

import pytest

import pccl
from harness import free_port


def count_during(blocking_call):
    """Runs blocking_call() while a thread counts; returns (seconds it blocked, counts made meanwhile)."""
    stop, counter = threading.Event(), [0]

    def count():
        while not stop.is_set():
            counter[0] += 1

    t = threading.Thread(target=count)
    t.start()
    try:
        time.sleep(0.05)  # the counter is running
        before, start = counter[0], time.monotonic()
        blocking_call()
        return time.monotonic() - start, counter[0] - before
    finally:
        stop.set()
        t.join(10)


def assert_counted_freely(blocked, counts):
    slept, baseline = count_during(lambda: time.sleep(0.5))
    rate, free_rate = counts / blocked, baseline / slept
    assert rate > 0.3 * free_rate, f"counted {rate:.0f}/s during the call, {free_rate:.0f}/s during time.sleep"


def test_connect_to_a_silent_master_releases_the_gil(monkeypatch):
    monkeypatch.setenv("PCCL_CONNECT_TIMEOUT_MS", "1000")  # read when the communicator is created
    with socket.socket() as silent:  # accepts TCP connections (backlog) but never answers the handshake
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        comm = pccl.Communicator(f"127.0.0.1:{silent.getsockname()[1]}")

        def connect():
            with pytest.raises(pccl.PCCLError) as e:
                comm.connect(n_attempts=1)
            assert e.value.result is pccl.Result.MASTER_CONNECTION_FAILED

        blocked, counts = count_during(connect)
    assert blocked >= 0.9, "pcclConnect did not wait for the handshake"
    assert_counted_freely(blocked, counts)


def test_master_await_termination_releases_the_gil():
    master = pccl.MasterNode(f"127.0.0.1:{free_port()}")
    master.run()

    def await_termination():
        threading.Timer(1.0, master.interrupt).start()
        master.await_termination()

    blocked, counts = count_during(await_termination)
    assert blocked >= 0.9
    assert_counted_freely(blocked, counts)
