#!/usr/bin/env python3
"""Drive a run of the Python examples: a master, N peers, one SIGKILLed, one newcomer.

Starts `pccl master` on loopback and N peers of ddp.py or diloco.py; once
peer1 reaches a third of the steps (--kill-at) the last peer is SIGKILLed and
a new one joins through the accept phase. At the end it hashes every
surviving peer's final shared state with `pccl hash-tensor --json`
(SimpleHash) and checks that the hashes are equal, that the newcomer received
the state, and that the test accuracy reaches --min-accuracy.

Exit status: 0 all checks passed, 1 a check failed, 2 usage error.
Every wait has a deadline (--timeout bounds the whole run); every process
started here is killed by its PID on the way out.
"""
import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
POLL_S = 0.1
NEWCOMER_GRACE_S = 30


class Run:
    """The processes of one run and their logs under `work`."""

    def __init__(self, args, work):
        self.args, self.work = args, work
        self.procs = {}  # name -> Popen
        self.deadline = time.monotonic() + args.timeout
        lib = os.path.join(args.bin, "..", "lib", "libpccl.so")
        self.env = dict(os.environ, PYTHONPATH=os.pathsep.join(
            p for p in (os.path.join(ROOT, "python"), os.environ.get("PYTHONPATH")) if p))
        if "PCCL_LIBRARY" not in os.environ and os.path.exists(lib):
            self.env["PCCL_LIBRARY"] = os.path.abspath(lib)
        self.port = None

    def left(self):
        """Seconds until the run's deadline; raises TimeoutError once it passed."""
        s = self.deadline - time.monotonic()
        if s <= 0:
            raise TimeoutError(f"run exceeded --timeout {self.args.timeout} s")
        return s

    def _spawn(self, name, cmd):
        with open(os.path.join(self.work, name + ".log"), "w") as out, \
                open(os.path.join(self.work, name + ".err"), "w") as err:
            self.procs[name] = subprocess.Popen(cmd, stdout=out, stderr=err, env=self.env)

    def start_master(self):
        self._spawn("master", [os.path.join(self.args.bin, "pccl"), "master", "--listen", "127.0.0.1:0",
                               "--admin", "127.0.0.1:0"])
        for _ in range(100):
            text = self.read("master.log") + self.read("master.err")
            m = re.search(r"listening on [0-9.]+:([0-9]+)", text)
            if m:
                self.port = int(m.group(1))
                return
            if self.procs["master"].poll() is not None:
                break
            time.sleep(0.05)
        raise RuntimeError("master did not start:\n" + self.read("master.err"))

    def start_peer(self, name, seed, min_world, extra=()):
        a = self.args
        cmd = [sys.executable, os.path.join(HERE, a.example + ".py"), "--master", f"127.0.0.1:{self.port}",
               "--steps", str(a.steps), "--seed", str(seed), "--min-world", str(min_world),
               "--out", os.path.join(self.work, name), "--timeout", str(int(a.timeout)), *extra] + a.peer_args
        self._spawn(name, cmd)

    def read(self, fname):
        try:
            with open(os.path.join(self.work, fname)) as f:
                return f.read()
        except OSError:
            return ""

    def events(self, name, event):
        """The JSON objects with this "event" that NAME printed so far."""
        out = []
        for line in self.read(name + ".log").splitlines():
            if line.startswith("{"):
                o = json.loads(line)
                if o.get("event") == event:
                    out.append(o)
        return out

    def revision(self, name):
        steps = self.events(name, "step")
        return steps[-1]["revision"] if steps else 0

    def wait(self, name, limit=None):
        """Exit status of NAME; raises subprocess.TimeoutExpired after `limit` s or at the run's deadline."""
        return self.procs[name].wait(timeout=min(self.left(), limit or self.left()))

    def stop_all(self):
        for name, p in self.procs.items():
            if p.poll() is None:
                p.send_signal(signal.SIGINT if name == "master" else signal.SIGKILL)
        for p in self.procs.values():
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def hashes(pccl, out_dir):
    """{tensor name: SimpleHash hex} of every .npy in out_dir, from `pccl hash-tensor --json`."""
    result = {}
    for f in sorted(os.listdir(out_dir)):
        if f.endswith(".npy"):
            o = json.loads(subprocess.run([pccl, "hash-tensor", os.path.join(out_dir, f), "--json"], check=True,
                                          capture_output=True, text=True, timeout=30).stdout)
            result[f[:-4]] = o["tensors"][0]["hash"]
    return result


def drive(run):
    """The run itself; returns the list of failed checks (empty: success)."""
    a = run.args
    run.start_master()
    print(f"master on 127.0.0.1:{run.port}; {a.example}: {a.peers} peers, {a.steps} steps", flush=True)
    t0 = time.monotonic()
    peers = [f"peer{i}" for i in range(1, a.peers + 1)]
    for i, name in enumerate(peers, 1):
        run.start_peer(name, seed=i, min_world=a.peers)
    # The newcomer loads torch and the data now and connects when `go` appears: its join
    # then lands a second after the kill however slow the machine is.
    go = os.path.join(run.work, "go")
    run.start_peer("newcomer", seed=a.peers + 1, min_world=2, extra=("--wait-for", go))
    victim = peers[-1]
    kill_rev = max(1, int(a.steps * a.kill_at))
    while run.revision("peer1") < kill_rev:
        run.left()
        if run.procs["peer1"].poll() is not None:
            return [f"peer1 exited ({run.procs['peer1'].returncode}) before revision {kill_rev}"]
        time.sleep(POLL_S)
    run.procs[victim].kill()
    run.procs[victim].wait()
    print(f"t={time.monotonic() - t0:.1f}s revision {run.revision('peer1')}: SIGKILLed {victim}", flush=True)
    time.sleep(1)  # the newcomer joins a run that already noticed the loss
    open(go, "w").close()
    print(f"t={time.monotonic() - t0:.1f}s newcomer connects", flush=True)

    survivors = peers[:-1] + ["newcomer"]
    failed = []
    for name in survivors:
        try:
            # A newcomer not accepted before the others ended would wait for peers for ever.
            rc = run.wait(name, NEWCOMER_GRACE_S if name == "newcomer" else None)
        except subprocess.TimeoutExpired:
            failed.append(f"{name} still running {NEWCOMER_GRACE_S} s after the others ended (not accepted?)")
            continue
        if rc != 0:
            failed.append(f"{name} exited with {rc}: {run.read(name + '.err').strip()[-500:]}")
    print(f"finished in {time.monotonic() - t0:.1f}s", flush=True)
    if failed:
        return failed

    pccl = os.path.join(a.bin, "pccl")
    rows = []
    for name in survivors:
        done = run.events(name, "done")
        if not done:
            failed.append(f"{name}: no final report")
            continue
        rows.append((name, done[-1], hashes(pccl, os.path.join(run.work, name))))
    if failed:
        return failed
    print(f"{'peer':10} {'first rev':>9} {'final rev':>9} {'state rx B':>10} {'discarded':>9} {'test acc':>8}"
          "  SimpleHash of the state (per tensor)")
    for name, d, h in rows:
        print(f"{name:10} {d['first_revision']:>9} {d['revision']:>9} {d['ss_rx_bytes']:>10} {d['discarded']:>9} "
              f"{d['test_accuracy']:>8.4f}  {' '.join(h[k] for k in sorted(h))}")
    print("tensors: " + " ".join(sorted(rows[0][2])))
    equal = all(h == rows[0][2] for _, _, h in rows) and rows[0][2]
    print("shared-state hashes equal on all surviving peers:", "yes" if equal else "NO")
    acc = min(d["test_accuracy"] for _, d, _ in rows)
    print(f"test accuracy: {acc:.4f}")
    if not equal:
        failed.append("shared-state hashes differ")
    for name, d, _ in rows:
        if d["revision"] != a.steps:
            failed.append(f"{name} ended at revision {d['revision']}, not {a.steps}")
        if not d["final_sync_ok"]:
            failed.append(f"{name}: final sync failed")
    newcomer = rows[-1][1]
    if not (newcomer["first_revision"] or 0) > 0 or newcomer["ss_rx_bytes"] <= 0:
        failed.append(f"the newcomer did not join mid-run and receive the state: {newcomer}")
    if acc < a.min_accuracy:
        failed.append(f"test accuracy {acc:.4f} below {a.min_accuracy}")
    return failed


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                epilog="Flags after -- go to every peer (e.g. -- --inner-steps 10).")
    p.add_argument("--example", choices=("diloco", "ddp"), default="diloco")
    p.add_argument("--bin", default=os.path.join(ROOT, "build", "bin"), help="directory of the pccl command")
    p.add_argument("--peers", type=int, default=4, help="peers at the start (>= 3: one is killed)")
    p.add_argument("--steps", type=int, default=None, help="final revision (default: diloco 40, ddp 600)")
    p.add_argument("--kill-at", type=float, default=1 / 3, help="kill a peer at this fraction of the steps")
    p.add_argument("--min-accuracy", type=float, default=0.8, help="fail below this test accuracy")
    p.add_argument("--timeout", type=float, default=110, help="seconds for the whole run")
    p.add_argument("--keep-logs", action="store_true", help="keep the peers' logs and states (path printed)")
    p.add_argument("peer_args", nargs="*", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.peers < 3 or not 0 < args.kill_at < 1:
        p.error("--peers must be >= 3 and --kill-at in (0, 1)")
    if args.steps is None:
        args.steps = 40 if args.example == "diloco" else 600
    if not os.access(os.path.join(args.bin, "pccl"), os.X_OK):
        p.error(f"no pccl command in {args.bin} (build first: scripts/build.sh)")

    work = tempfile.mkdtemp(prefix="pccl-pyex.")
    run = Run(args, work)
    # SIGTERM (e.g. from `timeout`) unwinds through the finally below, which kills the peers.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        failed = drive(run)
    except (TimeoutError, RuntimeError, subprocess.TimeoutExpired) as e:
        failed = [str(e)]
    finally:
        run.stop_all()
    for f in failed:
        print("FAIL:", f, file=sys.stderr)
    if failed or args.keep_logs:
        print(f"logs: {work}", file=sys.stderr)
    else:
        shutil.rmtree(work, ignore_errors=True)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
