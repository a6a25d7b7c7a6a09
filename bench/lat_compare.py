#!/usr/bin/env python3
"""Per-call latencies from C and from the pccl Python package, in the same run, as one table.

usage: bench/lat_compare.py [--build DIR] [--rounds K] [--reps N] [--count N]

docs/benchmarks.md section 2 (PCCL report 2.6): update topology, sync shared
state, all-reduce launch, await; COUNT floats (default 101,770: the
784-128-10 MLP), 2 peers on loopback. C is `pccl_allreduce lat 2 COUNT N`
(forked peers, in-process master); Python is bench/pccl_lat.py (the same
steps through the package, against `pccl master`), once with NumPy arrays and
once with torch tensors. All time each call
alone with a monotonic clock; per step the max over both peers, per run the
median over N steps. The three alternate for K rounds so that a slow phase
of a shared machine hits all. The table gives, in microseconds, the median
of the K run medians of each, and what Python adds: the median over the
rounds of (Python - C) within a round.

Builds DIR (default /tmp/build-bench-lat, Release, as bench/run.sh) unless
--no-build. Exit status 0 (also when the target is missed), 1 a run failed,
2 usage error.
"""
import argparse
import os
import re
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
CALLS = ("pcclUpdateTopology", "pcclSynchronizeSharedState", "pcclAllReduceAsync", "pcclAwaitAsyncReduce")
TARGET_US = 20  # Python may add at most this much per call
RUN_TIMEOUT_S = 300


def build(build_dir):
    subprocess.run(["cmake", "-S", ROOT, "-B", build_dir, "-DCMAKE_BUILD_TYPE=Release"], check=True,
                   stdout=subprocess.DEVNULL)
    subprocess.run(["cmake", "--build", build_dir, "-j", str(os.cpu_count() or 1), "--target", "pccl",
                    "pccl_cli", "pccl_allreduce"], check=True, stdout=subprocess.DEVNULL)


def medians(cmd):
    """{call: median ms} from the RESULT lines of one run of `cmd`, which is re-run once if it
    fails (as bench/run.sh does: under load a peer may give up waiting for the other); raises
    RuntimeError if the second run fails too."""
    for attempt in (1, 2):
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
        found = {m.group(1): float(m.group(2))
                 for m in re.finditer(r"^RESULT .*call=(\S+) median_ms=([0-9.]+)", out.stdout, re.M)}
        if out.returncode == 0 and set(found) == set(CALLS):
            return found
        print(f"lat_compare: {' '.join(cmd)} failed ({out.returncode}), attempt {attempt} of 2:\n"
              f"{out.stdout}{out.stderr[-2000:]}", file=sys.stderr)
    raise RuntimeError(f"{' '.join(cmd)} failed twice")


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--build", default="/tmp/build-bench-lat", help="build directory")
    p.add_argument("--no-build", action="store_true", help="use --build as it is")
    p.add_argument("--rounds", type=int, default=5, help="alternating C/Python rounds")
    p.add_argument("--reps", type=int, default=500, help="timed steps per run")
    p.add_argument("--count", type=int, default=101770, help="floats")
    args = p.parse_args()
    if args.rounds < 1 or not 1 <= args.reps <= 4096 or args.count < 1:
        p.error("--rounds >= 1, 1 <= --reps <= 4096 (the C binary's limit), --count >= 1")
    if not args.no_build:
        build(args.build)
    bindir = os.path.join(args.build, "bin")
    c_cmd = [os.path.join(bindir, "pccl_allreduce"), "lat", "2", str(args.count), str(args.reps)]
    py_cmd = [sys.executable, os.path.join(HERE, "pccl_lat.py"), "--bin", bindir, "--count", str(args.count),
              "--reps", str(args.reps), "--kind"]
    runs = {"C": c_cmd, "NumPy": py_cmd + ["numpy"], "torch": py_cmd + ["torch"]}
    rounds = {impl: [] for impl in runs}
    try:
        for k in range(args.rounds):
            for impl, cmd in runs.items():
                rounds[impl].append(medians(cmd))
            print(f"round {k + 1}/{args.rounds} (us, {'/'.join(runs)}): " + ", ".join(
                f"{c} " + "/".join(f"{rounds[i][-1][c] * 1e3:.0f}" for i in runs) for c in CALLS),
                file=sys.stderr, flush=True)
    except (RuntimeError, subprocess.TimeoutExpired) as e:
        print(f"lat_compare: {e}", file=sys.stderr)
        sys.exit(1)

    print(f"Per-call latency, {args.count:,} floats, 2 peers, loopback: median over {args.reps} steps of the max "
          f"over both peers; median of {args.rounds} alternating rounds (us)")
    print(f"{'call':28} {'C':>7} {'NumPy':>7} {'torch':>7} {'NumPy-C':>8} {'torch-C':>8}  adds <= {TARGET_US} us")
    for c in CALLS:
        m = {impl: statistics.median(r[c] for r in rounds[impl]) * 1e3 for impl in runs}
        d = [statistics.median(py[c] - cr[c] for py, cr in zip(rounds[impl], rounds["C"])) * 1e3
             for impl in ("NumPy", "torch")]
        print(f"{c:28} {m['C']:>7.1f} {m['NumPy']:>7.1f} {m['torch']:>7.1f} {d[0]:>+8.1f} {d[1]:>+8.1f}  "
              + ("yes" if max(d) <= TARGET_US else "NO"))


if __name__ == "__main__":
    main()
