"""Processes for multi-process tests: a master and peer scripts on loopback.

Every wait has a deadline; every process started here is SIGKILLed by PID in close() (the
`procs` fixture calls it at teardown), so a failed or hung test leaves nothing running.
"""
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

PYTHON_DIR = Path(__file__).resolve().parents[1]
PEERS_DIR = Path(__file__).resolve().parent / "peers"


def free_port():
    """A TCP port that was free on 127.0.0.1 a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def child_env(extra=None):
    """This environment, with the source tree's package first on PYTHONPATH."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(PYTHON_DIR), env.get("PYTHONPATH")) if p)
    env["PCCL_LOG_LEVEL"] = "warn"  # into the process's log file
    env.update(extra or {})
    return env


def wait_until(predicate, timeout_s, what):
    """Polls predicate() every 50 ms until it is truthy; AssertionError naming `what` after timeout_s."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(0.05)


def read_json_lines(path):
    """The complete JSON lines of a file that may still be written to (a partial last line is skipped)."""
    try:
        text = Path(path).read_text()
    except FileNotFoundError:
        return []
    return [json.loads(line) for line in text.split("\n")[:-1] if line]


class Procs:
    """Starts processes with their output in DIR/NAME.log and kills them all on close()."""

    def __init__(self, workdir):
        self.dir = Path(workdir)
        self.procs = {}

    def spawn(self, name, argv, env=None):
        with open(self.dir / f"{name}.log", "wb") as log:
            p = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=child_env(env),
                                 cwd=self.dir, start_new_session=True)
        self.procs[name] = p
        return p

    def log(self, name):
        try:
            return (self.dir / f"{name}.log").read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def start_master(self, timeout_s=10):
        """Runs `python -m pccl.master` on a free loopback port; returns its 'IP:PORT'."""
        for attempt in range(3):  # another process may take the port between free_port() and bind
            addr = f"127.0.0.1:{free_port()}"
            name = f"master{attempt}"
            p = self.spawn(name, [sys.executable, "-m", "pccl.master", "--listen-address", addr])
            wait_until(lambda: "listening" in self.log(name) or p.poll() is not None, timeout_s, "the master")
            if p.poll() is None:
                return addr
        raise AssertionError(f"master did not start:\n{self.log(name)}")

    def start_peer(self, script, name, *args, env=None):
        """Runs tests/peers/SCRIPT with args (converted to str)."""
        return self.spawn(name, [sys.executable, str(PEERS_DIR / script), *map(str, args)], env)

    def wait(self, name, timeout_s):
        """Exit code of process `name`; AssertionError with its log if it runs past timeout_s."""
        try:
            return self.procs[name].wait(timeout_s)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"{name} still running after {timeout_s} s; log:\n{self.log(name)[-3000:]}")

    def expect_success(self, names, timeout_s):
        """Waits for every process in names (one shared deadline); asserts each exited 0."""
        deadline = time.monotonic() + timeout_s
        for name in names:
            rc = self.wait(name, max(0.1, deadline - time.monotonic()))
            assert rc == 0, f"{name} exited {rc}; log:\n{self.log(name)[-3000:]}"

    def kill(self, name):
        p = self.procs[name]
        if p.poll() is None:
            os.kill(p.pid, signal.SIGKILL)
        p.wait(10)

    def close(self):
        for name in list(self.procs):
            self.kill(name)


def run_peers_once(workdir, script, world, timeout_s, env=None):
    """A master and `world` processes of peers/SCRIPT (args: MASTER INDEX OUT; env: added to the peers'
    environment), run to completion; returns {record["case"]: [record of peer 0, 1, ...]} from their JSON
    lines. Kills everything on the way out."""
    procs = Procs(workdir)
    try:
        master = procs.start_master()
        outs = [procs.dir / f"peer{i}.jsonl" for i in range(world)]
        for i in range(world):
            procs.start_peer(script, f"peer{i}", master, i, outs[i], env=env)
        procs.expect_success([f"peer{i}" for i in range(world)], timeout_s)
        by_case = {}
        for out in outs:
            for rec in read_json_lines(out):
                by_case.setdefault(rec["case"], []).append(rec)
        return by_case
    finally:
        procs.close()
