#!/usr/bin/env bash
# bench/overhead.sh - the per-operation cost of a small all-reduce against OpenMPI: K interleaved rounds, each
# running build A's pccl (in place, out of place), build B's and OpenMPI back to back (bench/rounds.sh, one round
# each), so a slow phase of the shared machine hits all of them; then a table: per implementation the median of
# the round medians and its ratio to OpenMPI's (time; below 1 is faster), and OpenMPI's spread over the rounds.
#
# usage: bench/overhead.sh --a DIR --b DIR [--rounds K (6)] [PEERS (2) BYTES (400000)]
#   DIR   a build's bin directory with pccl_allreduce; B's also needs mpi_allreduce (OpenMPI)
set -euo pipefail
A="" B="" K=6
while [ $# -gt 0 ]; do
    case $1 in
    --a) A=$2; shift ;;
    --b) B=$2; shift ;;
    --rounds) K=$2; shift ;;
    -h | --help) sed -n '2,8p' "$0"; exit 0 ;;
    -*) echo "overhead.sh: unknown argument $1" >&2; exit 2 ;;
    *) break ;;
    esac
    shift
done
N=${1:-2} S=${2:-400000}
for d in "$A" "$B"; do
    [ -x "$d/pccl_allreduce" ] || { echo "overhead.sh: no pccl_allreduce in '$d' (--a/--b)" >&2; exit 2; }
done
[ -x "$B/mpi_allreduce" ] || { echo "overhead.sh: no mpi_allreduce in '$B'" >&2; exit 2; }
HERE=$(dirname "$0")
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for k in $(seq "$K"); do
    echo "[$(date -u +%H:%M:%S)] round $k of $K: $N peers x $S B" >&2
    "$HERE/rounds.sh" --bin "$A" --impls "pccl pccl-oop" "$N" "$S" 1 2>/dev/null | sed "s/\$/ build=a k=$k/" | tee -a "$out"
    "$HERE/rounds.sh" --bin "$B" --impls "pccl pccl-oop mpi" "$N" "$S" 1 2>/dev/null | sed "s/\$/ build=b k=$k/" |
        tee -a "$out"
done
python3 - "$out" "$N" "$S" <<'PY'
import statistics, sys
t = {}
for line in open(sys.argv[1]):
    f = dict(kv.split("=", 1) for kv in line.split()[1:] if "=" in kv)
    if "median_s" in f:
        name = f["impl"] if f["impl"] == "mpi" else f"{f['impl']} ({f['build']})"
        t.setdefault(name, []).append(float(f["median_s"]) * 1e3)
mpi = statistics.median(t["mpi"]) if "mpi" in t else None
print(f"\n| {sys.argv[2]} peers x {sys.argv[3]} B | median of {len(t.get('mpi', []))} round medians (ms) | vs OpenMPI |")
print("| --- | --- | --- |")
for name in sorted(t, key=lambda n: (n == "mpi", n)):
    m = statistics.median(t[name])
    print(f"| {name} | {m:.3f} | {m / mpi:.2f}x |" if mpi else f"| {name} | {m:.3f} | - |")
if mpi:
    print(f"\nOpenMPI's round medians: {', '.join(f'{v:.3f}' for v in t['mpi'])} ms")
PY
