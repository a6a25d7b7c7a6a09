#!/usr/bin/env bash
# bench/barrier.sh - the barrier's latency against OpenMPI's MPI_Barrier: K interleaved rounds, each running build
# A's pccl_coll barrier, build B's (--b, optional) and OpenMPI back to back at every peer count, so a slow phase of
# the shared machine hits all of them; then a table per peer count: the median of the round medians (us) and the
# ratio to OpenMPI's. A pccl barrier is one exchange with the master (docs/protocol.md, "Pipelined collectives").
#
# usage: bench/barrier.sh --a DIR [--b DIR] [--rounds K (6)] [--reps N (200)] [PEERS ... (2 4 8)]
#   DIR   a build's bin directory with pccl_coll; OpenMPI's mpi_coll is taken from B's, else A's
set -euo pipefail
A="" B="" K=6 REPS=200
while [ $# -gt 0 ]; do
    case $1 in
    --a) A=$2; shift ;;
    --b) B=$2; shift ;;
    --rounds) K=$2; shift ;;
    --reps) REPS=$2; shift ;;
    -h | --help) sed -n '2,8p' "$0"; exit 0 ;;
    -*) echo "barrier.sh: unknown argument $1" >&2; exit 2 ;;
    *) break ;;
    esac
    shift
done
PEERS=${*:-2 4 8}
for v in "$K" "$REPS" $PEERS; do
    case $v in '' | *[!0-9]* | 0) echo "barrier.sh: '$v' is not a positive integer" >&2; exit 2 ;; esac
done
for d in "$A" ${B:+"$B"}; do
    [ -x "$d/pccl_coll" ] || { echo "barrier.sh: no pccl_coll in '$d' (--a/--b)" >&2; exit 2; }
done
MPI_BIN=${B:-$A}/mpi_coll
HERE=$(dirname "$0")
. "$HERE/lib.sh"
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for k in $(seq "$K"); do
    for n in $PEERS; do
        echo "[$(date -u +%H:%M:%S)] round $k of $K: $n peers" >&2
        "$A/pccl_coll" oop barrier "$n" 0 "$REPS" 20 2>/dev/null | sed "s/\$/ build=a/" >>"$out" || true
        [ -z "$B" ] || "$B/pccl_coll" oop barrier "$n" 0 "$REPS" 20 2>/dev/null | sed "s/\$/ build=b/" >>"$out" || true
        [ ! -x "$MPI_BIN" ] || "${MPIRUN[@]}" -np "$n" "$MPI_BIN" barrier 0 "$REPS" 20 2>/dev/null >>"$out" || true
    done
done
python3 - "$out" <<'PY'
import statistics, sys
t = {}
for line in open(sys.argv[1]):
    f = dict(kv.split("=", 1) for kv in line.split()[1:] if "=" in kv)
    if "median_s" not in f:
        continue
    name = "OpenMPI" if f["impl"] == "mpi" else f"pccl ({f.get('build', 'a')})"
    t.setdefault(int(f["peers"]), {}).setdefault(name, []).append(float(f["median_s"]) * 1e6)
print("\n| peers | implementation | rounds | median of round medians (us) | vs OpenMPI |")
print("| --- | --- | --- | --- | --- |")
for n in sorted(t):
    mpi = statistics.median(t[n]["OpenMPI"]) if "OpenMPI" in t[n] else None
    for name in sorted(t[n], key=lambda s: (s == "OpenMPI", s)):
        m = statistics.median(t[n][name])
        ratio = f"{m / mpi:.2f}x" if mpi else "-"
        print(f"| {n} | {name} | {len(t[n][name])} | {m:.1f} | {ratio} |")
PY
