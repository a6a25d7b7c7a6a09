#!/usr/bin/env python3
"""report.py - turns bench/run.sh's RESULT lines into a table (stdout) and docs/benchmarks.md.

usage: report.py RESULTS META HASH_TXT ANALYSIS_MD OUT_MD [PROFILE_MD]
       report.py --rounds RESULTS      (section 1b alone, e.g. from bench/rounds.sh)
       report.py --coll RESULTS        (the collectives' section, bench/coll.md, from bench/coll.sh)
"""
import math
import statistics
import os
import sys


def parse(path):
    rows = []
    for line in open(path):
        if not line.startswith("RESULT"):
            continue
        kv = {}
        for tok in line.split()[1:]:
            if "=" in tok:
                k, v = tok.split("=", 1)
                kv[k] = v
        rows.append(kv)
    return rows


def sign_test_p(won, n):
    """Two-sided sign test: the chance of a split at least as lopsided as won of n under p = 1/2."""
    k = min(won, n - won)
    tail = sum(math.comb(n, i) for i in range(k + 1)) / 2 ** n
    return min(1.0, 2 * tail)


def human(b):
    b = int(b)
    if b >= 1 << 30 and b % (1 << 30) == 0:
        return f"{b >> 30} GiB"
    if b >= 1 << 20 and b % (1 << 20) == 0:
        return f"{b >> 20} MiB"
    if b % 1024 == 0:
        return f"{b >> 10} KiB"
    return f"{b / 1000:.0f} KB"


class Rounds:
    """Interleaved rounds (bench/rounds.sh): per (impl, peers, bytes) the median of the round medians,
    and per round who beat whom."""

    def __init__(self, rows, mode="round", coll=None):
        """Rows of one mode; with coll, only that collective's (bench/coll.sh: mode=coll coll=KIND)."""
        self.by_round = {}  # (impl, peers, bytes) -> {round number: median_s}, to compare within a round
        for r in rows:
            if r.get("mode") == mode and r.get("coll") == coll and "round" in r and not r.get("status"):
                key = (r["impl"], int(r["peers"]), int(r["bytes"]))
                self.by_round.setdefault(key, {})[int(r["round"])] = float(r["median_s"])
        self.rounds = {k: list(v.values()) for k, v in self.by_round.items()}
        self.rmed = {k: statistics.median(v) for k, v in self.rounds.items()}
        self.nrounds = max((len(v) for v in self.rounds.values()), default=0)

    def won(self, n, s, impl="pccl"):
        """(rounds where impl beat the best comparator of that same round, rounds compared)."""
        mine = self.by_round.get((impl, n, s), {})
        comps = [self.by_round.get((c, n, s), {}) for c in ("gloo", "mpi")]
        won = total = 0
        for k, t in mine.items():
            best = [c[k] for c in comps if k in c]
            if best:
                total += 1
                won += t < min(best)
        return won, total

    def ratio(self, n, s, impl="pccl"):
        """impl's speed vs the best comparator over the rounds (time of best / time of impl), or None."""
        pt = self.rmed.get((impl, n, s))
        comps = [self.rmed[k] for k in (("gloo", n, s), ("mpi", n, s)) if k in self.rmed]
        return min(comps) / pt if pt and comps else None

    def section(self):
        """Section 1b of docs/benchmarks.md as markdown lines (none without rounds)."""
        if not self.rmed:
            return []
        nr, out = self.nrounds, []
        p = out.append
        p(f"### 1b. Target points in {nr} interleaved rounds (median of the round medians, ms)")
        p("")
        p("Each round runs pccl, Gloo and OpenMPI back to back at one point (`bench/rounds.sh`, called by "
          "`bench/run.sh --rounds K`), so slow phases of a shared machine hit all three; the targets (section 6) "
          "are judged on these where present.")
        p("")
        p("\"Rounds won\" counts the rounds in which pccl's median beat the best comparator's median of the same "
          "round; p is the two-sided sign test's chance of a count at least that lopsided if the two were "
          f"equally fast (with {nr} rounds, {nr} of {nr} or 0 of {nr} gives "
          f"p = {sign_test_p(nr, nr):.3f}, the smallest possible).")
        p("")
        p("| peers | size | pccl | pccl out of place | Gloo ring | OpenMPI | pccl speed vs best | rounds won | "
          "out of place vs best | pccl rounds (ms) |")
        p("|---|---|---|---|---|---|---|---|---|---|")
        for (n, s) in sorted({(k[1], k[2]) for k in self.rmed}, key=lambda x: (x[1], x[0])):
            def ms(impl):
                v = self.rmed.get((impl, n, s))
                return f"{v * 1e3:.2f}" if v is not None else "n/a"
            rr, ro = self.ratio(n, s), self.ratio(n, s, "pccl-oop")
            each = ", ".join(f"{v * 1e3:.2f}" for v in self.rounds.get(("pccl", n, s), []))
            won, total = self.won(n, s)
            wins = f"{won} of {total}, p = {sign_test_p(won, total):.2f}" if total else "n/a"
            p(f"| {n} | {human(s)} | {ms('pccl')} | {ms('pccl-oop')} | {ms('gloo')} | {ms('mpi')} | "
              f"{rr and f'{rr:.2f}x' or 'n/a'} | {wins} | {ro and f'{ro:.2f}x' or 'n/a'} | {each} |")
        p("")
        return out


COLL_KINDS = (("broadcast", "broadcast", "MPI_Bcast"), ("all_gather", "all-gather", "MPI_Allgather"),
              ("reduce_scatter", "reduce-scatter", "MPI_Reduce_scatter_block"))


def coll_section(rows, meta):
    """bench/coll.md: the collectives against Gloo and OpenMPI in interleaved rounds, and the WAN broadcast."""
    out = []
    p = out.append
    nr = max((Rounds(rows, "coll", k).nrounds for k, _, _ in COLL_KINDS), default=0)
    wanflag = " --wan" if any(r.get("mode") == "wancoll" for r in rows) else ""
    p(f"Measured by `bench/coll.sh --rounds {meta.get('rounds', nr)} --reps {meta.get('reps', '?')}{wanflag}` on "
      f"{meta.get('start', '?')} in {meta.get('duration_s', '?')} s, build {meta.get('git', '?')}; load average "
      f"{meta.get('load_start', '?').replace('_', ' ')} at the start, {meta.get('load_end', '?').replace('_', ' ')} at "
      "the end. Generated by `report.py --coll`; do not edit by hand.")
    p("")
    p("Size as nccl-tests counts it: the broadcast buffer, the all-gather's output, the reduce-scatter's input "
      "(each member's block is size / peers); throughput = size / time. pccl runs out of place "
      "(`pccl_coll oop`: pcclExtBroadcast, pcclExtAllGather, pcclExtReduceScatter; float, sum), pool size 1, "
      "the broadcast from the first forked peer; Gloo: `gloo_coll` (`gloo::broadcast` from rank 0, "
      "`gloo::allgather` (ring), `ReduceScatterHalvingDoubling`, in place: Gloo has no other); OpenMPI: "
      "`mpi_coll` (`MPI_Bcast`, `MPI_Allgather`, `MPI_Reduce_scatter_block`, TCP BTL on loopback as in section "
      "1). Every run checks its output. Each round runs the implementations back to back at one point; a cell "
      "is the median over the rounds of each run's median time (the max over members per repetition); "
      "\"pccl vs best\" is the best comparator's time over pccl's, and \"rounds won\" counts the rounds where "
      "pccl beat the best comparator of that round (p: the two-sided sign test).")
    p("")
    ip = any(r.get("mode") == "coll" and r.get("impl") == "pccl-ip" for r in rows)
    if ip:
        p("pccl in place (`pccl_coll ip`, `--impls` with `pccl-ip`) runs in the same rounds: `MPI_Bcast` is in place "
          "by definition and Gloo's reduce-scatter has no other form; the target is judged out of place.")
        p("")
    p("| collective | peers | size | pccl ms (GB/s) | Gloo ms (GB/s) | OpenMPI ms (GB/s) | pccl vs best | rounds won |"
      + (" pccl in place ms (GB/s) | in place vs best | in place rounds won |" if ip else ""))
    p("|---|---|---|---|---|---|---|---|" + ("---|---|---|" if ip else ""))
    for kind, name, _ in COLL_KINDS:
        rs = Rounds(rows, "coll", kind)
        for (n, sz) in sorted({(k[1], k[2]) for k in rs.rmed}, key=lambda x: (x[1], x[0])):
            def cell(impl):
                v = rs.rmed.get((impl, n, sz))
                return f"{v * 1e3:.1f} ({sz / v / 1e9:.2f})" if v else "n/a"

            def versus(impl):
                ratio = rs.ratio(n, sz, impl)
                won, total = rs.won(n, sz, impl)
                wins = f"{won} of {total}, p = {sign_test_p(won, total):.2f}" if total else "n/a"
                return f"{ratio and f'{ratio:.2f}x' or 'n/a'} | {wins} |"
            p(f"| {name} | {n} | {human(sz)} | {cell('pccl')} | {cell('gloo')} | {cell('mpi')} | {versus('pccl')}"
              + (f" {cell('pccl-ip')} | {versus('pccl-ip')}" if ip else ""))
    failed = [r for r in rows if r.get("mode") == "coll" and r.get("status")]
    if failed:
        p("")
        p("Runs that failed (left out of the medians): " + ", ".join(
            f"{r.get('impl')} {r.get('coll')} {r.get('peers')} x {human(r.get('bytes', 0))} round {r.get('round')}"
            for r in failed) + ".")
    p("")
    p("What this shows and why: [bench/analysis.md, \"Broadcast, all-gather and reduce-scatter\"]"
      "(../bench/analysis.md#broadcast-all-gather-and-reduce-scatter).")
    wan = [r for r in rows if r.get("mode") in ("wancoll", "wanlink")]
    for scen in sorted({r.get("scenario", "") for r in wan}, key=lambda x: (x != "clean", x)):
        series = [r for r in wan if r.get("scenario", "") == scen]
        emu = next((r["emu"].replace("_", " ") for r in rows
                    if r.get("mode") == "wanenv" and r.get("scenario", "") == scen), "?")
        link = {int(r["conc"]): float(r["median_s"]) for r in series if r["mode"] == "wanlink" and not r.get("status")}
        p("")
        p(f"WAN emulation{f' ({scen})' if scen else ''}, `bench/wan.sh`: {emu}; every member in its own namespace. "
          "One out-of-place broadcast from one root to 7 peers with a connection pool of P, and the time of sending "
          "the same bytes once from one member to another over P fresh TCP streams (`pccl_coll send`, the floor "
          "of any broadcast).")
        p("")
        p("| what | connections | size | time (s, median) | MB/s | vs one link, 1 stream | vs one link, same streams |")
        p("|---|---|---|---|---|---|---|")
        for r in sorted(series, key=lambda r: (r["mode"] != "wanlink", int(r.get("conc", 0)))):
            c = int(r.get("conc", 0))
            what = "one link (TCP)" if r["mode"] == "wanlink" else f"pccl broadcast, {r['peers']} members"
            if r.get("status"):
                p(f"| {what} | {c} | {human(r.get('bytes', 0))} | {r['status']} | | | |")
                continue
            t = float(r["median_s"])
            one, same = link.get(1), link.get(c)
            p(f"| {what} | {c} | {human(r['bytes'])} | {t:.2f} | {int(r['bytes']) / t / 1e6:.1f} | "
              f"{one and f'{t / one:.2f}x' or 'n/a'} | {same and f'{t / same:.2f}x' or 'n/a'} |")
    return out


def include(p, name, heading):
    """Emits bench/NAME under HEADING, if it exists: a hand-kept section measured outside run.sh."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), name)
    if os.path.exists(path):
        p(f"{heading} (bench/{name}, not measured in this run)")
        p("")
        with open(path) as f:
            p(f.read().rstrip())
        p("")


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--rounds":  # section 1b alone, from bench/rounds.sh output
        print("\n".join(Rounds(parse(sys.argv[2])).section()))
        return
    if len(sys.argv) == 3 and sys.argv[1] == "--coll":  # bench/coll.md, from bench/coll.sh output
        metas = [l.split()[1:] for l in open(sys.argv[2]) if l.startswith("META")]
        meta = dict(kv.split("=", 1) for kv in (metas[-1] if metas else []) if "=" in kv)
        print("\n".join(coll_section(parse(sys.argv[2]), meta)))
        return
    if len(sys.argv) not in (6, 7) or sys.argv[1].startswith("-"):
        print(__doc__.strip().split("\n\n", 1)[1], file=sys.stderr)
        sys.exit(2)
    res_path, meta_path, hash_path, analysis_path, out_path = sys.argv[1:6]
    prof_path = sys.argv[6] if len(sys.argv) > 6 else None
    rows = parse(res_path)
    meta = dict(l.rstrip("\n").split("=", 1) for l in open(meta_path) if "=" in l)
    out = []
    p = out.append

    bps = [float(r["bps"]) for r in rows if r.get("impl") == "iperf3" and r.get("bps") not in (None, "null")]
    lo_Bps = statistics.median(bps) / 8 if bps else None

    p("# pccl benchmarks")
    p("")
    nr = len({r.get("round") for r in rows if r.get("mode") == "round"})
    flags = ((" --quick" if meta.get("quick") == "1" else "") + (" --wan" if any(r.get("mode") == "wan" for r in rows) else "")
             + (f" --rounds {nr}" if nr else ""))
    p("Generated by `bench/run.sh" + flags + "` on "
      + meta.get("date", "?") + f" in {meta.get('duration_s', '?')} s. Do not edit by hand: re-run the script.")
    p("")
    p("## Machine and method")
    p("")
    p(f"- CPU: {meta.get('cpu')}, nproc = {meta.get('nproc')}, memory {meta.get('mem_gib')} GiB, kernel {meta.get('kernel')}")
    p(f"- load average (1/5/15 min) at start: {meta.get('load_start')}, at end: {meta.get('load_end')} "
      "(the machine is shared with other builds/tests; numbers are noisy)")
    p(f"- pccl {meta.get('git')}; Gloo {meta.get('gloo')} (Debian libgloo-dev); OpenMPI {meta.get('openmpi')}; iperf3 {meta.get('iperf3')}")
    p(f"- every point: separate processes on 127.0.0.1, warm-up, then {meta.get('reps')} timed repetitions "
      f"({meta.get('reps_small', 'x10 for 400 KB')}); per repetition the max over ranks, then the median "
      "over repetitions")
    p("- pccl: `pccl_allreduce` forks N peers against one in-process master (C API), barrier = joint "
      "`pcclArePeersPending` before each repetition, in-place float sum `pcclAllReduce`, pool size 1; "
      "\"out of place\" (`pccl_allreduce oop`) is the same with separate input and output buffers; "
      f"ring sends on the same host are paced to `PCCL_LOCAL_NOTSENT_BYTES` = "
      f"{meta.get('local_notsent_bytes', 'not recorded')} unsent bytes; where the host's peers do not outnumber "
      f"its CPUs (the 2-peer points on a 2-core machine) ops of at least `PCCL_ZEROCOPY_MIN_BYTES` = "
      f"{meta.get('zerocopy_min_bytes', 'not recorded')} bytes "
      f"{meta['splice_spare_rule'] + ' ' if meta.get('splice_spare_rule') else ''}also send the buffer's pages by `splice` instead "
      f"of copying them, and ring streams get a 256 KiB receive buffer "
      f"{meta.get('rcvbuf_rule', '(from the start)')}")
    p("- Gloo: `gloo_allreduce` forks N processes, TCP transport on 127.0.0.1, FileStore rendezvous in /tmp, "
      "`gloo::allreduce` with `Algorithm::RING`, `gloo::barrier` before each repetition")
    p("- OpenMPI: `mpirun --allow-run-as-root --oversubscribe --mca btl tcp,self --mca btl_tcp_if_include lo "
      "--mca pml ob1 --bind-to none -np N mpi_allreduce`, `MPI_Allreduce(MPI_IN_PLACE, ..., MPI_SUM)`, `MPI_Barrier` before each repetition")
    p("- throughput = implementation-agnostic throughput of seed 003 section 6.1: bytes of one peer's "
      "contribution / wall time of the all-reduce (GB = 1e9 bytes)")
    if lo_Bps:
        p(f"- loopback: iperf3 single stream, median of {len(bps)} x 3 s runs = {lo_Bps * 8 / 1e9:.1f} Gbit/s "
          f"({lo_Bps / 1e9:.2f} GB/s). Loopback floor time = 2(N-1)·S / that rate (all ring traffic shares the "
          "machine's loopback); floor throughput = S / floor time")
    p("- duration: `bench/run.sh --quick` ~2-3 min (2 and 4 peers, 400 KB and 16 MiB, concurrency 1/2/4); "
      "the full run (with `--wan`) ~15-20 min on this loaded 2-core machine (this one: "
      f"{int(meta.get('duration_s', '0')) // 60} min {int(meta.get('duration_s', '0')) % 60} s)")
    p("- memory rule: a point runs only if N x S x 2.5 < 3/4 of MemAvailable (pccl in place keeps a full backup "
      "copy of the buffer per op, out of place a second buffer); skipped points are marked")
    p("- OpenMPI's TCP BTL busy-polls: with N ranks on 2 oversubscribed cores under external load its times "
      "vary by 10x or more between runs (e.g. 2 peers x 400 KB: 0.2 ms in one run, 10.9 ms in another)")
    p("")

    # ---- throughput matrix
    ar = [r for r in rows if r.get("mode") == "ar" and "quant" not in r]
    keys = sorted({(int(r["peers"]), int(r["bytes"])) for r in ar})
    get = {}
    for r in ar:
        get[(r["impl"], int(r["peers"]), int(r["bytes"]))] = r
    rs = Rounds(rows)
    rmed, nrounds, round_ratio = rs.rmed, rs.nrounds, rs.ratio

    p("## 1. All-reduce throughput (GB/s, median time in ms)")
    p("")
    p("pccl runs in place like both comparators (the targets are judged on that column); \"out of place\" is pccl "
      "with separate input and output buffers, where it needs no backup and copies nothing.")
    p("")
    hdr = ("| peers | size | pccl | pccl out of place | Gloo ring | OpenMPI | best comparator | pccl / best | "
           "loopback floor | pccl % of floor |")
    p(hdr)
    p("|---|---|---|---|---|---|---|---|---|---|")
    table_txt = []
    must, aim = [], []
    for (n, s) in keys:
        if ("all", n, s) in get:
            p(f"| {n} | {human(s)} | skipped: does not fit in memory | | | | | | | |")
            table_txt.append(f"{n:>5} {human(s):>8}  skipped (memory)")
            continue

        def cell(impl):
            r = get.get((impl, n, s))
            if r is None:
                return None, "n/a"
            if r.get("status"):
                return None, r["status"]
            g = float(r["GBps"])
            return g, f"{g:.3f} ({float(r['median_s']) * 1e3:.2f} ms)"

        pg, pc = cell("pccl")
        og, oc = cell("pccl-oop")
        gg, gc = cell("gloo")
        mg, mc = cell("mpi")
        comps = [x for x in (gg, mg) if x is not None]
        best = max(comps) if comps else None
        ratio = pg / best if (pg is not None and best) else None
        floor_g = lo_Bps / (2 * (n - 1)) / 1e9 if lo_Bps else None
        pf = pg / floor_g if (pg is not None and floor_g) else None
        p(f"| {n} | {human(s)} | {pc} | {oc} | {gc} | {mc} | {best and f'{best:.3f}' or 'n/a'} | "
          f"{ratio and f'{ratio:.2f}x' or 'n/a'} | {floor_g and f'{floor_g:.3f}' or 'n/a'} | {pf and f'{pf * 100:.0f}%' or 'n/a'} |")
        table_txt.append(f"{n:>5} {human(s):>8}  pccl {pc:>22}  oop {oc:>22}  gloo {gc:>22}  mpi {mc:>22}  "
                         f"pccl/best {ratio and f'{ratio:.2f}' or 'n/a':>5}  floor% {pf and f'{pf * 100:.0f}' or 'n/a'}")
        oratio, how = (og / best if (og is not None and best) else None), ""
        if round_ratio(n, s) is not None:  # the rounds are the sturdier measurement: judge on them
            ratio, oratio, how = round_ratio(n, s), round_ratio(n, s, "pccl-oop"), f" ({nrounds} rounds)"
        if s >= 16 << 20 and ratio is not None:
            must.append((f"{n} peers {human(s)}: pccl in place >= 0.9x best comparator", ratio >= 0.9,
                         f"{ratio:.2f}x{how}"))
            if oratio is not None:
                must.append((f"{n} peers {human(s)}: pccl out of place >= best comparator", oratio >= 1.0,
                             f"{oratio:.2f}x{how}"))
            aim.append((f"{n} peers {human(s)}: pccl >= 1.2x best comparator", ratio >= 1.2, f"{ratio:.2f}x{how}"))
        if s >= 16 << 20 and pf is not None:
            aim.append((f"{n} peers {human(s)}: >= 70% of loopback floor", pf >= 0.7, f"{pf * 100:.0f}%"))
        if n == 2 and s == 409600 and pg is not None:
            t = float(get[("pccl", n, s)]["median_s"]) * 1e3
            if ("pccl", n, s) in rmed:
                t, how = rmed[("pccl", n, s)] * 1e3, f", {nrounds} rounds"
            must.append(("2 peers 400 KB in <= 0.5 ms", t <= 0.5, f"{t:.3f} ms ({t / 0.5:.2f}x the limit{how})"))
            aim.append(("2 peers 400 KB in <= 0.3 ms", t <= 0.3, f"{t:.3f} ms ({t / 0.3:.2f}x the limit{how})"))
    p("")

    out.extend(rs.section())
    include(p, "security.md", "### 1c. Keyed and encrypted runs")
    include(p, "strangers.md", "### 1d. Strangers: floods of unauthenticated connections")
    include(p, "coll.md", "### 1e. Broadcast, all-gather and reduce-scatter (`bench/coll.sh`)")

    # ---- latencies
    lat = [r for r in rows if r.get("mode") == "lat" and r.get("call")]
    ref = {"pcclUpdateTopology": 0.097, "pcclSynchronizeSharedState": 1.16, "pcclAllReduceAsync": 0.005,
           "pcclAwaitAsyncReduce": 7.03}
    p("## 2. Per-call latencies, 101,770-parameter model, 2 peers, loopback (PCCL report section 2.6)")
    p("")
    p("One float tensor of 101,770 elements as shared state (revision + 1 per step), all-reduce of 101,770 floats; "
      "median over steps of the max over both peers.")
    p("")
    p("| call | pccl median (ms) | min | max | PCCL report (ms) | pccl / report |")
    p("|---|---|---|---|---|---|")
    for r in lat:
        m = float(r["median_ms"])
        rf = ref.get(r["call"])
        p(f"| {r['call']} | {m:.3f} | {float(r['min_ms']):.3f} | {float(r['max_ms']):.3f} | {rf} | "
          f"{rf and f'{m / rf:.2f}x' or ''} |")
    if not lat:
        p("| (failed) | | | | | |")
    p("")
    include(p, "python_lat.md", "### 2b. The same calls from Python")

    # ---- concurrency
    conc = [r for r in rows if r.get("mode") == "conc" and not r.get("status") and r.get("impl") == "pccl"
            and "quant" not in r]
    p("## 3. Concurrent all-reduces (seed 003 tables 6.3.2-6.5.1), loopback, 4 peers")
    p("")
    p("C concurrent 64 MiB float all-reduces (`pcclAllReduceAsync` x C, then await all) with "
      "`p2p_connection_pool_size` = C. Effective throughput = C x 64 MiB / time.")
    p("")
    p("| # CON | time (s, median) | min | max | eff. TPT (GB/s) | vs 1 connection |")
    p("|---|---|---|---|---|---|")
    base = None
    for r in sorted(conc, key=lambda r: int(r["conc"])):
        g = float(r["GBps"])
        if int(r["conc"]) == 1:
            base = g
        p(f"| {r['conc']} | {float(r['median_s']):.3f} | {float(r['min_s']):.3f} | {float(r['max_s']):.3f} | "
          f"{g:.3f} | {base and f'{g / base:.2f}x' or ''} |")
    for r in rows:
        if r.get("mode") == "conc" and r.get("status"):
            p(f"| {r.get('conc')} | {r['status']} | | | | |")
    p("")

    wan = [r for r in rows if r.get("mode") == "wan" and "quant" not in r]
    retried = [r for r in rows if r.get("retried")]
    failed = [r for r in rows if r.get("status") == "FAILED"]
    include(p, "restart.md", "## 3b. A master restart (`bench/restart.sh --reps 5 4 16`)")
    include(p, "ss_join.md", "## 3c. A join fed by every source (`bench/ss_join.sh build/bin 3`)")
    p("## 4. Concurrent all-reduces under WAN emulation")
    p("")
    scen_names = {"clean": "the WAN target's example: delay, no loss", "lossy": "a lossy internet path"}
    scenarios = sorted({r.get("scenario", "") for r in wan}, key=lambda x: (x != "clean", x))
    for scen in scenarios:
        series = [r for r in wan if r.get("scenario", "") == scen]
        emu = [r.get("emu", "") for r in rows if r.get("mode") == "wanenv" and r.get("scenario", "") == scen]
        emu = emu[0].replace("_", " ") if emu else "?"
        if scen:
            p(f"### {scen}: {scen_names.get(scen, scen)}")
            p("")
        if emu.startswith("wanemu"):
            p("4 peers and the master, each in a network namespace (`pcclb-p*`, `pcclb-m`) behind a TUN interface "
              f"forwarded by the userspace emulator `bench/wanemu.c` (the kernel has no sch_netem): **{emu}**. "
              "C concurrent all-reduces of the given size, pool size C.")
        else:
            p("4 peers in network namespaces `pcclb-p*` on a bridge `pcclb-br0` (master on the bridge), both ends of "
              f"every veth shaped with: **{emu}**. C concurrent all-reduces of the given size, pool size C.")
        p("")
        p("| # CON | size | time (s, median) | eff. TPT (GB/s) | vs 1 connection |")
        p("|---|---|---|---|---|")
        wbase = None
        for r in sorted(series, key=lambda r: int(r.get("conc", 0))):
            if r.get("status"):
                p(f"| {r.get('conc')} | | {r['status']} | | |")
                continue
            g = float(r["GBps"])
            if int(r["conc"]) == 1:
                wbase = g
            p(f"| {r['conc']} | {human(r['bytes'])} | {float(r['median_s']):.3f} | {g:.4f} | {wbase and f'{g / wbase:.2f}x' or ''} |")
            if int(r["conc"]) == 8 and wbase:
                label = f"WAN ({scen}): 8 connections >= 4x single connection" if scen else \
                    "WAN: 8 connections >= 4x single connection"
                aim.append((label, g / wbase >= 4, f"{g / wbase:.2f}x"))
        p("")
    if not wan:
        p("Not run in this invocation (`bench/run.sh --wan` runs it; needs root for `ip netns` and `tc`).")
        p("")

    # ---- quantized vs unquantized
    quant = [r for r in rows if "quant" in r]
    p("## 4b. Quantized all-reduce (docs/quantization.md)")
    p("")
    if quant:
        p("One float sum all-reduce, `PCCL_BENCH_QUANT=ALGO:TYPE pccl_allreduce ar ...` (loopback) and "
          "`bench/wan.sh` with one connection (namespaces, shaping as in section 4). Time = max over ranks, median "
          "over repetitions; all series of one setting ran back to back. Sent = the bytes rank 0 sent in one "
          "all-reduce.")
        p("")
        p("| setting | peers | size | quantization | time (s, median) | min | max | throughput (GB/s) | sent | "
          "speed-up vs unquantized |")
        p("|---|---|---|---|---|---|---|---|---|---|")
        for setting, mode in (("loopback", "ar"), ("shaped link", "wan")):
            base = {}
            for r in [r for r in quant if r.get("mode") == mode]:
                if r.get("status"):
                    p(f"| {setting} | {r.get('peers', '')} | | {r['quant']} | {r['status']} | | | | | |")
                    continue
                t, key = float(r["median_s"]), (r.get("peers"), r["bytes"])
                if r["quant"] == "none":
                    base[key] = t
                b = base.get(key)
                p(f"| {setting} | {r.get('peers', '')} | {human(r['bytes'])} | {r['quant']} | {t:.3f} | "
                  f"{float(r['min_s']):.3f} | {float(r['max_s']):.3f} | {float(r['GBps']):.4f} | "
                  f"{human(r['tx_bytes']) if r.get('tx_bytes') else ''} | {b and f'{b / t:.2f}x' or ''} |")
        kern = [r for r in rows if r.get("mode") == "qkernel" and not r.get("status")]
        if kern:
            p("")
            p(f"Kernels (`bench_quant`, {human(kern[0]['bytes'])} of float, GB/s of float processed, median): encode, "
              "decode, and decode-and-sum (the reduce-scatter's step, one thread).")
            p("")
            p("| algorithm | codes | wire | threads | encode | decode | decode-and-sum |")
            p("|---|---|---|---|---|---|---|")
            seen = {}
            for r in kern:
                seen.setdefault((r["algo"], r["qdt"], r["threads"], r["wire_bytes"]), {})[r["op"]] = r["GBps"]
            for (algo, qdt, threads, wire), ops in seen.items():
                p(f"| {algo} | {qdt} | {human(wire)} | {threads} | {ops.get('encode', '')} | {ops.get('decode', '')} "
                  f"| {ops.get('decode_sum', '')} |")
    else:
        p("Not run in this invocation.")
    p("")
    include(p, "stripe.md", "## 4c. Striped all-reduce: one op over the connection pool (`bench/stripe.sh`)")
    include(p, "compress.md", "## 4d. Compressed and Streaming DiLoCo on Fashion-MNIST (`bench/compress.sh`)")
    include(p, "algo.md", "## 4e. Algorithm by regime under WAN emulation (`bench/wan_algo.sh`)")
    include(p, "pipeline.md", "## 4f. Pipelined collectives: one master round trip per operation")
    include(p, "overhead.md", "## 4g. Per-operation overhead: 2 x 400 KB on loopback against OpenMPI (`bench/overhead.sh`)")
    include(p, "nat.md", "## 4h. NAT traversal: one relayed ring edge against none under WAN emulation "
            "(`bench/nat.sh`)")
    include(p, "barrier.md", "## 4i. The barrier: one master round trip (`bench/barrier.sh`)")

    if retried or failed:
        p("Points that failed once and were re-run: " + (", ".join(f"{r.get('impl')} {r.get('mode')} "
          f"{r.get('peers')} peers {human(r.get('bytes', 0)) if r.get('bytes') else ''}" for r in retried) or "none")
          + "; points that failed twice: " + (", ".join(f"{r.get('impl')} {r.get('mode')} {r.get('peers')} peers "
          f"{r.get('bytes', '')}" for r in failed) or "none") + " (stderr in $BUILD/bench-failures.txt).")
        p("")

    # ---- hash
    p("## 5. SimpleHash vs memcpy (`bench_hash 256`)")
    p("")
    p("```")
    p(open(hash_path).read().rstrip())
    p("```")
    p("")
    p("Reference (docs/simplehash.md, this machine idle): 1 thread memcpy 12.9 GB/s vs SimpleHash 13.1 GB/s; "
      "2 threads 11.8 vs 20.8 GB/s on 256 MiB.")
    p("")
    include(p, "hash_gpu.md", "### 5b. SimpleHash on a GPU")

    # ---- targets
    p("## 6. Targets")
    p("")
    p("Both comparators run in place and restore nothing. In place, pccl also keeps a backup of the buffer so "
      "that a failed all-reduce gives the input back (seed 003 section 4): one more memory pass, which a 2-core "
      "loopback machine measures. So in place may trail the best comparator by at most 10%; out of place, the "
      "same all-reduce without that backup, must be at least level with it (16 MiB and above). The Aim lines "
      "judge in place.")
    p("")
    p("| level | target | met | measured |")
    p("|---|---|---|---|")
    for lvl, lst in (("Must", must), ("Aim", aim)):
        for name, ok, val in lst:
            p(f"| {lvl} | {name} | {'yes' if ok else '**no**'} | {val} |")
    p("")
    if prof_path:
        p("## 7. Profiles of pccl (this run)")
        p("")
        p("Generated by `bench/profile.sh` (uprobes via `perf probe`, `perf record`, `strace -f -c`).")
        p("")
        try:
            p(open(prof_path).read().rstrip())
        except OSError:
            p("(none)")
        p("")
    if os.path.exists(analysis_path):  # linked, not copied: the analysis is kept in one place
        p("## 8. Analysis")
        p("")
        p("What these tables mean, why each setting is what it is, and the measurements behind the code's rules:")
        p(f"[bench/{os.path.basename(analysis_path)}](../bench/{os.path.basename(analysis_path)}).")
        p("")

    open(out_path, "w").write("\n".join(out) + "\n")
    print("peers     size  results (GB/s and median time)")
    print("\n".join(table_txt))
    for r in lat:
        print(f"latency {r['call']:<28} {float(r['median_ms']):8.3f} ms (report {ref.get(r['call'])} ms)")
    for r in sorted(conc, key=lambda r: int(r["conc"])):
        print(f"concurrency {r['conc']:>3}: {float(r['median_s']):.3f} s, eff {float(r['GBps']):.3f} GB/s")
    for r in wan:
        if not r.get("status"):
            print(f"wan conc {r['conc']:>3}: {float(r['median_s']):.3f} s, eff {float(r['GBps']):.4f} GB/s")
    if lo_Bps:
        print(f"iperf3 loopback: {lo_Bps * 8 / 1e9:.1f} Gbit/s")
    for lvl, lst in (("MUST", must), ("AIM", aim)):
        for name, ok, val in lst:
            print(f"{lvl:<4} {'ok  ' if ok else 'MISS'} {name}: {val}")


if __name__ == "__main__":
    main()
