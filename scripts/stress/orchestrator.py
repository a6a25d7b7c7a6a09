#!/usr/bin/env python3
"""orchestrator.py - the chaos loop of scripts/stress.sh (see docs/reliability.md).

Starts a `pccl master`, keeps between 2 and --peers-max `pccl join --workload synthetic`
peers running, SIGKILLs one every 500-1000 ms, at a lower rate SIGSTOPs one for longer
than the timeout (then SIGCONT) and cuts one's network (a peer in its own network
namespace whose veth is taken down, then up again); with --master-kills it also SIGKILLs
the master every 30-60 s and starts a new one on the same port 0.5-2 s later (the peers
must live through it). The schedule comes from --seed.
It reads the peers' JSON events as they arrive and checks:
  consistent  no two peers logged different "hash" (when the step events carry one) or
              different all-reduce world sizes for the same revision, and no peer that
              was already stepping needed a shared-state repair (ss_rx_bytes > 0)
  progress    the run's revision never stalled longer than the timeout + one step (after a
              master restart: + the outage + MSM_REBUILD_MS, 3 s)
  exits       no peer exited except by the orchestrator's signals (a peer that was stopped
              or cut may exit 1 or 3 after it resumes: the master dropped it; or it joins
              again as a newcomer, and counts as holding the run's state only once it
              stepped again)
  master      the master stays up (but for the restarts), its VmRSS at the end is at most 10%
              above its value after the first minute (half of the run for runs under 2
              minutes; after a restart: 20 s later, measured on the new master), and it
              exits 0 on the SIGTERM at the end
  sanitizers  no process wrote a sanitizer report (ASan, LSan, UBSan, TSan) to its log,
              whatever its exit status; the report is printed and the logs are kept
Prints a summary and exits 0 (PASS) or 1 (FAIL). Every process it started is killed by
PID and every namespace/link it created is deleted on exit, also on SIGINT/SIGTERM.
"""
import argparse
import ctypes
import json
import os
import random
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

STEPS_HUGE = 1 << 30
RETRY_RE = re.compile(r"(all-reduce|sync|collective).*(failed|aborted)")
# The first line of a sanitizer report: "==PID==ERROR: AddressSanitizer: ...", "ERROR: LeakSanitizer",
# "WARNING: ThreadSanitizer: data race", UBSan's "file:line:col: runtime error: ...".
SANITIZER_RE = re.compile(r"(ERROR|WARNING): [A-Za-z]*Sanitizer|: runtime error: ")
REPORT_CHARS = 4000  # how much of a report is printed (the work directory keeps all of it)


def sanitizer_report(path):
    """The first sanitizer report in the file at path (its first REPORT_CHARS characters), or None."""
    try:
        text = open(path, errors="replace").read()
    except OSError:
        return None
    m = SANITIZER_RE.search(text)
    if not m:
        return None
    start = text.rfind("\n", 0, m.start()) + 1
    return text[start:start + REPORT_CHARS].rstrip()


class Abort(Exception):
    pass


def on_signal(signum, _frame):
    raise Abort("received signal %d" % signum)


_libc = ctypes.CDLL(None, use_errno=True)


def die_with_parent():
    _libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG: no orphan survives a killed orchestrator


def master_preexec_ignore_sigpipe():
    die_with_parent()
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)  # inherited across exec: the --master-ignore-sigpipe workaround


def sh(*cmd, check=True):
    r = subprocess.run(list(cmd), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=20)
    if check and r.returncode != 0:
        raise RuntimeError("%s: %s" % (" ".join(cmd), r.stderr.strip()))
    return r


class NetLab:
    """A bridge in the root namespace and N network namespaces wired to it by veth pairs."""

    def __init__(self):
        self.created_links, self.created_ns, self.slots = [], [], []

    def setup(self, slots):
        self.tag = "%04d" % (os.getpid() % 10000)
        self.bridge = "pstb" + self.tag
        used = sh("ip", "-4", "-o", "addr").stdout
        third = None
        for k in range(250):
            cand = (os.getpid() + k) % 250 + 1
            if " 10.213.%d." % cand not in used:
                third = cand
                break
        if third is None:
            raise RuntimeError("no free 10.213.x.0/24 subnet")
        self.prefix = "10.213.%d." % third
        self.host_ip = self.prefix + "1"
        sh("ip", "link", "add", self.bridge, "type", "bridge")
        self.created_links.append(self.bridge)
        sh("ip", "addr", "add", self.host_ip + "/24", "dev", self.bridge)
        sh("ip", "link", "set", self.bridge, "up")
        for i in range(slots):
            ns, host, inner = "pccl-stress-%s-%d" % (self.tag, i), "pst%sh%d" % (self.tag, i), "pst%sn%d" % (self.tag, i)
            sh("ip", "netns", "add", ns)
            self.created_ns.append(ns)
            sh("ip", "link", "add", host, "type", "veth", "peer", "name", inner)
            self.created_links.append(host)
            sh("ip", "link", "set", inner, "netns", ns)
            sh("ip", "link", "set", host, "master", self.bridge)
            sh("ip", "link", "set", host, "up")
            sh("ip", "netns", "exec", ns, "ip", "addr", "add", "%s%d/24" % (self.prefix, 10 + i), "dev", inner)
            sh("ip", "netns", "exec", ns, "ip", "link", "set", inner, "up")
            sh("ip", "netns", "exec", ns, "ip", "link", "set", "lo", "up")
            self.slots.append({"ns": ns, "host": host, "peer": None})

    def cut(self, slot, down):
        sh("ip", "link", "set", self.slots[slot]["host"], "down" if down else "up")

    def cleanup(self):
        for link in reversed(self.created_links):
            sh("ip", "link", "del", link, check=False)
        for ns in self.created_ns:
            sh("ip", "netns", "del", ns, check=False)
        self.created_links, self.created_ns = [], []


def netlab_usable():
    if os.geteuid() != 0 or not shutil.which("ip"):
        return False
    name = "pccl-stress-probe-%d" % os.getpid()
    ok = sh("ip", "netns", "add", name, check=False).returncode == 0
    if ok:
        sh("ip", "netns", "del", name, check=False)
    return ok


class Peer:
    def __init__(self, idx, proc, out, err, slot):
        self.idx, self.proc, self.out_path, self.err_path, self.slot = idx, proc, out, err, slot
        self.offset, self.partial = 0, b""
        self.steps, self.last_rev = 0, None
        # steps since it last resumed from a stop or cut: a peer that comes back may have been dropped and
        # joined again as a newcomer, so it holds the run's state only once it stepped again
        self.fresh_steps = 0
        self.killed = False        # SIGKILLed by the orchestrator
        self.disturbed = False     # was stopped or cut (a later exit 1 is expected)
        self.stopped_until = None  # SIGSTOPped until (monotonic)
        self.cut_until = None      # link down until
        self.status = None

    def healthy(self):
        return self.status is None and not self.killed and self.stopped_until is None and self.cut_until is None


class Stress:
    def __init__(self, a):
        self.a = a
        self.rng = random.Random(a.seed)
        self.work = tempfile.mkdtemp(prefix="pccl-stress.")
        self.peers, self.live = [], []
        self.master = None
        self.lab = None
        self.failures = []
        self.kept = False  # keep the work directory (a failure's logs)
        self.master_reported = False  # the master's end was reported with its log
        self.counts = {"spawned": 0, "killed": 0, "stopped": 0, "cut": 0, "exited_after_disturbance": 0,
                       "master_restarts": 0}
        self.events = {}
        self.rev = {}  # revision -> (hash or None, world_size, first peer)
        self.max_rev, self.last_adv, self.max_stall = 0, None, 0.0
        self.step_ms = []
        self.repairs = 0
        self.op_failures = 0
        self.nsteps = 0
        self.rss_ref = self.rss_end = None
        self.t0 = time.monotonic()
        self.actions = open(os.path.join(self.work, "actions.log"), "w", buffering=1)
        self.last_action_t, self.last_action_what = None, "none"

    # ---------- processes ----------
    def fail(self, msg):
        if len(self.failures) < 50:
            self.failures.append(msg)
        print("stress: FAILURE: " + msg, flush=True)

    def start_master(self, port=0):
        listen = ("0.0.0.0:%d" if self.lab else "127.0.0.1:%d") % port
        env = dict(os.environ, PCCL_LOG_LEVEL=self.a.master_log_level,
                   PCCL_PEER_TIMEOUT_MS=str(self.a.timeout_ms), PCCL_TIMEOUT_MS=str(self.a.timeout_ms))
        env.update(self.a.master_env)
        self.master_log = os.path.join(self.work, "master.log" if not port else "master-%d.log"
                                       % self.counts["master_restarts"])
        cmd = [self.a.pccl, "master", "--listen", listen]
        helptext = subprocess.run([self.a.pccl, "master", "--help"], stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True, timeout=20).stdout
        if "--admin HOST:PORT" in helptext:
            cmd += ["--admin", "127.0.0.1:0"]  # the admin port's default is fixed: runs side by side collide
        with open(self.master_log, "wb") as f:
            self.master = subprocess.Popen(cmd, stdout=f,
                                           stderr=subprocess.STDOUT, env=env,
                                           preexec_fn=master_preexec_ignore_sigpipe if self.a.master_ignore_sigpipe
                                           else die_with_parent)
        for _ in range(200):
            m = re.search(rb"listening on [0-9.]+:([0-9]+)", open(self.master_log, "rb").read())
            if m:
                self.port = int(m.group(1))
                host = self.lab.host_ip if self.lab else "127.0.0.1"
                self.master_addr = "%s:%d" % (host, self.port)
                return
            if self.master.poll() is not None:
                break
            time.sleep(0.05)
        raise RuntimeError("master did not start: " + self.master_log_tail())

    def restart_master(self):
        """SIGKILL the master, wait 0.5-2 s, start a new one on the same port; returns the outage (s)."""
        self.master.kill()
        self.master.wait()
        self.act("SIGKILL master")
        down = self.rng.uniform(0.5, 2.0)
        time.sleep(down)
        self.counts["master_restarts"] += 1
        self.start_master(self.port)
        self.act("master restarted on port %d after %.1f s" % (self.port, down))
        return down

    def master_log_tail(self):
        """The master's sanitizer report if it wrote one, else the tail of its log."""
        rep = sanitizer_report(self.master_log)
        if rep:
            return rep
        try:
            return open(self.master_log, errors="replace").read()[-2000:]
        except OSError:
            return ""

    def spawn(self, use_ns):
        idx = self.counts["spawned"]
        slot = None
        if use_ns and self.lab:
            free = [i for i, s in enumerate(self.lab.slots) if s["peer"] is None]
            if free:
                slot = self.rng.choice(free)
        cmd = [self.a.pccl, "join", "--master", self.master_addr, "--workload", "synthetic", "--json",
               "--tensors", str(self.a.tensors), "--size", str(self.a.size), "--steps", str(STEPS_HUGE)]
        if slot is not None:
            cmd = ["ip", "netns", "exec", self.lab.slots[slot]["ns"]] + cmd  # ip execs pccl: same PID
        env = dict(os.environ, PCCL_TIMEOUT_MS=str(self.a.timeout_ms), PCCL_CONNECT_TIMEOUT_MS=str(self.a.timeout_ms),
                   PCCL_PEER_TIMEOUT_MS=str(self.a.timeout_ms), PCCL_LOG_LEVEL="warn", OMP_NUM_THREADS="1")
        out, err = os.path.join(self.work, "peer%d.log" % idx), os.path.join(self.work, "peer%d.err" % idx)
        with open(out, "wb") as fo, open(err, "wb") as fe:
            proc = subprocess.Popen(cmd, stdout=fo, stderr=fe, env=env, preexec_fn=die_with_parent)
        p = Peer(idx, proc, out, err, slot)
        if slot is not None:
            self.lab.slots[slot]["peer"] = p
        self.peers.append(p)
        self.live.append(p)
        self.counts["spawned"] += 1
        self.act("spawn peer%d pid %d%s" % (idx, proc.pid, " in %s" % self.lab.slots[slot]["ns"] if slot is not None else ""))
        return p

    def act(self, what):
        self.actions.write("%9.3f %s\n" % (time.monotonic() - self.t0, what))
        self.last_action_t, self.last_action_what = time.monotonic(), what

    def signal_peer(self, p, sig):
        try:
            os.kill(p.proc.pid, sig)
        except ProcessLookupError:
            pass

    def kill(self, p):
        p.killed = True
        if p.stopped_until is not None:
            self.signal_peer(p, signal.SIGCONT)
        self.signal_peer(p, signal.SIGKILL)
        self.counts["killed"] += 1
        self.act("SIGKILL peer%d (%d steps)" % (p.idx, p.steps))

    # ---------- logs ----------
    def read_events(self, p):
        try:
            with open(p.out_path, "rb") as f:
                f.seek(p.offset)
                data = f.read(1 << 20)
        except OSError:
            return
        p.offset += len(data)
        data = p.partial + data
        lines = data.split(b"\n")
        p.partial = lines.pop()
        for line in lines:
            line = line.strip()
            if not line.startswith(b"{"):
                continue
            try:
                e = json.loads(line)
            except ValueError:
                self.fail("peer%d: unparsable output line %r" % (p.idx, line[:200]))
                continue
            self.on_event(p, e)

    def on_event(self, p, e):
        kind = e.get("event", "?")
        self.events[kind] = self.events.get(kind, 0) + 1
        if kind != "step":
            return
        r = int(e.get("revision", -1))
        if p.last_rev is not None and r <= p.last_rev and not p.disturbed:
            self.fail("peer%d: revision went from %d to %d" % (p.idx, p.last_rev, r))
        if p.steps > 0 and e.get("ss_rx_bytes", 0) > 0 and not p.disturbed:
            self.repairs += 1
            self.fail("peer%d: already stepping, but received %d shared-state bytes at revision %d "
                      "(its state differed from the popular one)" % (p.idx, e["ss_rx_bytes"], r))
        p.steps += 1
        p.fresh_steps += 1
        p.last_rev = r
        h, ws = e.get("hash"), e.get("world_size")
        old = self.rev.get(r)
        if old is None:
            self.rev[r] = (h, ws, p.idx)
        else:
            if h is not None and old[0] is not None and h != old[0]:
                self.fail("revision %d: peer%d logged hash %s, peer%d logged %s" % (r, p.idx, h, old[2], old[0]))
            if ws is not None and old[1] is not None and ws != old[1]:
                self.fail("revision %d: peer%d summed over %s peers, peer%d over %s" % (r, p.idx, ws, old[2], old[1]))
            if old[0] is None and h is not None:
                self.rev[r] = (h, old[1], p.idx)
        self.nsteps += 1
        if "ms" in e:
            if len(self.step_ms) >= 200000:
                del self.step_ms[::2]  # keep a bounded, evenly thinned sample
            self.step_ms.append(float(e["ms"]))
        if r > self.max_rev:
            self.max_rev = r
            self.last_adv = time.monotonic()

    def count_err(self, p):
        """Counts the failed (and then retried or discarded) operations a peer logged on stderr and
        fails the run if the peer wrote a sanitizer report (whatever its exit status)."""
        if getattr(p, "err_counted", False):
            return
        p.err_counted = True
        rep = sanitizer_report(p.err_path)
        if rep:
            self.fail("peer%d wrote a sanitizer report (%s):\n%s" % (p.idx, self.status_text(p.proc.returncode), rep))
            self.kept = True
        try:
            for line in open(p.err_path, errors="replace"):
                if RETRY_RE.search(line):
                    self.op_failures += 1
        except OSError:
            pass

    def reap(self, p):
        st = p.proc.returncode
        p.status = st
        self.read_events(p)
        self.count_err(p)
        if p.slot is not None:
            if p.cut_until is not None:
                self.lab.cut(p.slot, False)
                p.cut_until = None
            self.lab.slots[p.slot]["peer"] = None
        if p in self.live:
            self.live.remove(p)
        ok = False
        if st == -signal.SIGKILL and p.killed:
            ok = True
        elif st in (1, 3) and p.disturbed:  # the run failed for it, or the master kicked it (pccl-join(1))
            ok = True
            self.counts["exited_after_disturbance"] += 1
        if not ok:
            why = {5: "exit 5: WRONG all-reduce result", 0: "exit 0 (it cannot have finished its steps)"}.get(
                st, self.status_text(st))
            # a sanitizer report was printed by count_err above; otherwise the stderr tail tells why
            err = "" if sanitizer_report(p.err_path) else "; stderr tail:\n" + open(
                p.err_path, errors="replace").read()[-1500:]
            self.fail("peer%d ended by itself (%s)%s%s" % (p.idx, why, " after a stop/cut" if p.disturbed else "", err))
            self.kept = True
        elif not self.a.keep and not self.kept:
            for f in (p.out_path, p.err_path):
                try:
                    os.unlink(f)
                except OSError:
                    pass

    @staticmethod
    def status_text(st):
        if st is None:
            return "still running"
        if st < 0:
            try:
                return "signal %d, %s" % (-st, signal.Signals(-st).name)
            except ValueError:
                return "signal %d" % -st
        return "exit %d%s" % (st, " (the sanitizers' exit code after a report)" if st == 66 else "")

    def rss_kb(self):
        try:
            for line in open("/proc/%d/status" % self.master.pid):
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        except OSError:
            return None
        return None

    # ---------- the run ----------
    def run(self):
        a = self.a
        if a.netcut != "off":
            if netlab_usable():
                self.lab = NetLab()
                self.lab.setup(2)
            elif a.netcut == "on":
                raise RuntimeError("network namespaces are not usable here (need root and iproute2)")
            else:
                print("stress: network namespaces not usable here: the network-cut part is skipped", flush=True)
        self.start_master()
        duration = a.minutes * 60.0
        t0 = self.t0 = time.monotonic()
        end = t0 + duration
        rss_at = t0 + (60.0 if duration >= 120 else duration / 2)
        next_mkill = t0 + a.warmup + self.rng.uniform(30.0, 60.0) if a.master_kills else float("inf")
        restarted_at, restart_allow = None, 0.0
        timeout_s = a.timeout_ms / 1000.0
        print("stress: master %s (pid %d), %s peers max, seed %d, %.1f min, timeout %d ms, netcut %s, logs %s"
              % (self.master_addr, self.master.pid, a.peers_max, a.seed, a.minutes, a.timeout_ms,
                 "on" if self.lab else "off", self.work), flush=True)
        for _ in range(2):
            self.spawn(False)
        next_kill = t0 + a.warmup + self.rng.uniform(0.5, 1.0)
        next_stop = t0 + a.warmup + self.rng.uniform(5.0, 10.0)
        next_cut = t0 + a.warmup + self.rng.uniform(8.0, 14.0)
        next_report = t0 + 30
        startup_limit = t0 + 60.0
        max_iters = int(duration / 0.02) + 10000
        iters = 0
        logged_rev, logged_rev_t = -1, 0.0
        while iters < max_iters:
            iters += 1
            now = time.monotonic()
            if now >= end:
                break
            # master alive?
            if self.master.poll() is not None:
                self.fail("the master exited by itself (%s); its log:\n%s" % (
                    self.status_text(self.master.returncode), self.master_log_tail()))
                self.master_reported = True
                break
            # exits and events
            for p in list(self.live):
                if p.proc.poll() is not None:
                    self.reap(p)
                else:
                    self.read_events(p)
            # progress
            if self.last_adv is None:
                if now > startup_limit:
                    self.fail("no step completed in the first 60 s")
                    break
            else:
                step_allow = max(1.0, 2 * statistics.median(self.step_ms[-200:]) / 1000.0) if self.step_ms else 1.0
                stall = now - self.last_adv
                self.max_stall = max(self.max_stall, stall)
                # a stall that spans a master restart may also last the outage and the rebuild
                allow = restart_allow if restarted_at is not None and self.last_adv <= restarted_at else 0.0
                if stall > timeout_s + step_allow + a.stall_slack + allow:
                    self.fail("the revision stalled at %d for %.1f s (limit %.1f s, at %.1f s into the run; "
                              "see actions.log)" % (self.max_rev, stall, timeout_s + step_allow + a.stall_slack,
                                                    self.last_adv - t0))
                    self.act("FAILURE: stall at revision %d since %.3f" % (self.max_rev, self.last_adv - t0))
                    self.last_adv = now  # report each stall once
            if self.max_rev != logged_rev and now - logged_rev_t >= 0.25:
                logged_rev, logged_rev_t = self.max_rev, now
                self.act("revision %d" % self.max_rev)
            if self.rss_ref is None and now >= rss_at:
                self.rss_ref = self.rss_kb()
            # resume stopped peers / restore cut links
            for p in self.live:
                if p.stopped_until is not None and now >= p.stopped_until:
                    self.signal_peer(p, signal.SIGCONT)
                    p.stopped_until, p.fresh_steps = None, 0
                    self.act("SIGCONT peer%d" % p.idx)
                if p.cut_until is not None and now >= p.cut_until:
                    self.lab.cut(p.slot, False)
                    p.cut_until, p.fresh_steps = None, 0
                    self.act("link up peer%d" % p.idx)
            healthy = [p for p in self.live if p.healthy()]
            stepping = [p for p in healthy if p.fresh_steps > 0]
            # one stop or cut at a time: the progress limit is for one silent peer
            disturbing = any(p.stopped_until is not None or p.cut_until is not None for p in self.live)
            # chaos
            if now >= next_mkill and not disturbing:
                next_mkill = now + self.rng.uniform(30.0, 60.0)
                one_step = max(1.0, 2 * statistics.median(self.step_ms[-200:]) / 1000.0) if self.step_ms else 1.0
                restart_allow = self.restart_master() + 3.0 + one_step  # + MSM_REBUILD_MS + one step
                # steps finished before the kill but read only now must not count as progress after
                # the restart: that would start the next stall after the restart, without its allowance
                for p in self.live:
                    if p.proc.poll() is None:
                        self.read_events(p)
                now = restarted_at = time.monotonic()
                if self.rss_ref is not None:  # the reference was the old master's: measure the new one
                    self.rss_ref, rss_at = None, min(now + 20.0, end - 1.0)
            if now >= next_kill:
                next_kill = now + self.rng.uniform(0.5, 1.0)
                # never take out the last peer that holds the run's state: the run would restart from
                # revision 0 (that is the chaos losing the state, not pccl)
                # (and no kills while a peer is stopped or cut: the run must get over one silent peer
                # within the timeout + one step; killing the newcomers it must accept meanwhile would
                # measure the kill rate instead)
                cands = [p for p in healthy if p.fresh_steps == 0 or len(stepping) > 1]
                if cands and not disturbing:
                    victim = self.rng.choice(cands)
                    self.kill(victim)
                    if victim in stepping:
                        stepping.remove(victim)
                target = self.rng.randint(2, a.peers_max)
                healthy = [p for p in self.live if p.healthy()]
                for _ in range(max(0, target - len(healthy))):
                    self.spawn(self.rng.random() < 0.4)
            if now >= next_stop:
                next_stop = now + self.rng.uniform(a.stop_every * 0.7, a.stop_every * 1.3)
                stop_for = timeout_s * self.rng.uniform(1.5, 2.0)
                if len(stepping) > 1 and not disturbing:
                    disturbing = True
                    p = self.rng.choice(stepping)
                    stepping.remove(p)
                    self.signal_peer(p, signal.SIGSTOP)
                    p.stopped_until, p.disturbed = now + stop_for, True
                    self.counts["stopped"] += 1
                    self.act("SIGSTOP peer%d for %.1f s" % (p.idx, stop_for))
            if now >= next_cut and self.lab:
                next_cut = now + self.rng.uniform(a.cut_every * 0.7, a.cut_every * 1.3)
                cut_for = timeout_s * self.rng.uniform(1.5, 2.0)
                cands = [p for p in stepping if p.slot is not None]
                if cands and len(stepping) > 1 and not disturbing:
                    disturbing = True
                    p = self.rng.choice(cands)
                    stepping.remove(p)
                    self.lab.cut(p.slot, True)
                    p.cut_until, p.disturbed = now + cut_for, True
                    self.counts["cut"] += 1
                    self.act("link down peer%d for %.1f s" % (p.idx, cut_for))
            # keep at least 2 healthy peers (a stop or a cut took one out)
            healthy = [p for p in self.live if p.healthy()]
            for _ in range(max(0, 2 - len(healthy))):
                self.spawn(self.rng.random() < 0.4)
            if now >= next_report:
                next_report = now + 30
                print("stress: %4.0f s: revision %d, %d peers live, spawned %d, killed %d, stopped %d, cut %d, "
                      "max stall %.1f s, master VmRSS %s kB" % (now - t0, self.max_rev, len(self.live),
                      self.counts["spawned"], self.counts["killed"], self.counts["stopped"], self.counts["cut"],
                      self.max_stall, self.rss_kb()), flush=True)
            time.sleep(0.02)
        self.rss_end = self.rss_kb()
        if self.rss_ref is None:
            self.rss_ref = self.rss_end
        self.elapsed = time.monotonic() - t0

    def cleanup(self):
        for p in self.live:
            if p.stopped_until is not None:
                self.signal_peer(p, signal.SIGCONT)
            self.signal_peer(p, signal.SIGKILL)
        for p in self.live:
            try:
                p.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
            if p.status is None:
                self.read_events(p)
                self.count_err(p)
        if self.master is not None and self.master.poll() is None:
            self.master.send_signal(signal.SIGTERM)
            try:
                self.master.wait(timeout=10)
                if self.master.returncode != 0:  # e.g. LeakSanitizer at exit, a crash while shutting down
                    self.fail("the master did not exit cleanly on SIGTERM (%s); its log:\n%s" % (
                        self.status_text(self.master.returncode), self.master_log_tail()))
                    self.master_reported = True
            except subprocess.TimeoutExpired:
                self.master.kill()
                self.master.wait(timeout=10)
                self.fail("the master did not exit within 10 s of SIGTERM")
        if self.master is not None and not self.master_reported:
            rep = sanitizer_report(self.master_log)
            if rep:
                self.fail("the master wrote a sanitizer report:\n" + rep)
        if self.lab:
            self.lab.cleanup()

    def summary(self):
        a = self.a
        if self.rss_ref and self.rss_end and self.rss_end > self.rss_ref * 1.10:
            self.fail("master VmRSS grew from %d kB to %d kB (more than 10%%)" % (self.rss_ref, self.rss_end))
        if self.max_rev == 0:
            self.fail("no revision completed")
        hashed = sum(1 for v in self.rev.values() if v[0] is not None)
        retried = sum(self.events.get(k, 0) for k in ("step_discarded", "step_rejected", "sync_failed", "update_topology_failed"))
        ms = sorted(self.step_ms)
        print("==== stress summary (seed %d, %.1f min, peers max %d, timeout %d ms) ====" % (
            a.seed, getattr(self, "elapsed", time.monotonic() - self.t0) / 60.0, a.peers_max, a.timeout_ms))
        print("revisions completed:  %d (%d checked across peers by world size, %d by hash)" % (
            self.max_rev, len(self.rev), hashed))
        print("steps logged:         %d (median %.0f ms, p99 %.0f ms)" % (
            self.nsteps, ms[len(ms) // 2] if ms else 0, ms[int(len(ms) * 0.99)] if ms else 0))
        print("longest stall:        %.1f s (limit: timeout %.1f s + one step%s)" % (
            self.max_stall, a.timeout_ms / 1000, " + slack %.1f s" % a.stall_slack if a.stall_slack else ""))
        print("peers:                spawned %d, killed %d, stopped %d, cut %d, exited after stop/cut %d" % (
            self.counts["spawned"], self.counts["killed"], self.counts["stopped"], self.counts["cut"],
            self.counts["exited_after_disturbance"]))
        print("operations failed and retried: %d (all-reduce/sync failures logged by the peers)" % self.op_failures)
        print("peer events:          %d retries (%s)" % (retried, ", ".join(
            "%s %d" % (k, v) for k, v in sorted(self.events.items()) if k != "step") or "no other events"))
        print("state repairs of stepping peers: %d" % self.repairs)
        print("master VmRSS:         %s kB at the reference point, %s kB at the end" % (self.rss_ref, self.rss_end))
        print("master restarts:      %d (SIGKILL, new master on the same port)" % self.counts["master_restarts"])
        if self.failures:
            print("failures (%d):" % len(self.failures))
            for f in self.failures[:20]:
                print("  - " + f.replace("\n", "\n    "))
            print("logs kept in %s" % self.work)
            print("RESULT: FAIL")
            return 1
        print("RESULT: PASS")
        return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pccl", required=True, help="path of the pccl binary")
    ap.add_argument("--minutes", type=float, default=2.0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--peers-max", type=int, default=4)
    ap.add_argument("--timeout-ms", type=int, default=2000)
    ap.add_argument("--size", type=int, default=2 << 20, help="bytes all-reduced per step (default 2 MiB)")
    ap.add_argument("--tensors", type=int, default=4)
    ap.add_argument("--netcut", choices=("auto", "on", "off"), default="auto")
    ap.add_argument("--stop-every", type=float, default=12.0, help="mean seconds between SIGSTOPs")
    ap.add_argument("--cut-every", type=float, default=15.0, help="mean seconds between network cuts")
    ap.add_argument("--warmup", type=float, default=3.0, help="seconds before the first signal")
    ap.add_argument("--stall-slack", type=float, default=0.0, help="extra seconds allowed on top of timeout + step")
    ap.add_argument("--master-log-level", default="warn")
    ap.add_argument("--master-kills", action="store_true",
                    help="SIGKILL the master every 30-60 s and restart it on the same port")
    ap.add_argument("--master-ignore-sigpipe", action="store_true",
                    help="start the master with SIGPIPE ignored (workaround for a master that dies writing to a "
                         "peer that is gone)")
    ap.add_argument("--master-env", action="append", default=[], metavar="NAME=VALUE",
                    help="an environment variable for the master only (repeatable), e.g. its ASAN_OPTIONS")
    ap.add_argument("--keep", action="store_true", help="keep all logs")
    a = ap.parse_args()
    if a.peers_max < 2:
        ap.error("--peers-max must be at least 2")
    try:
        a.master_env = dict(kv.split("=", 1) for kv in a.master_env)
    except ValueError:
        ap.error("--master-env takes NAME=VALUE")
    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGHUP, on_signal)
    s = Stress(a)
    rc = 1
    try:
        s.run()
    except Abort as e:
        s.fail("interrupted (%s)" % e)
    except Exception as e:  # noqa: BLE001 - report, clean up, fail
        s.fail("orchestrator error: %r" % e)
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        s.cleanup()
    rc = s.summary()
    if rc == 0 and not a.keep and not s.kept:
        shutil.rmtree(s.work, ignore_errors=True)
    return rc


if __name__ == "__main__":
    sys.exit(main())
