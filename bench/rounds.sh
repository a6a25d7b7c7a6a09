#!/usr/bin/env bash
# bench/rounds.sh - one point (PEERS x BYTES) in K interleaved rounds: each round runs pccl in place,
# pccl out of place, Gloo and OpenMPI back to back, so a slow phase of a shared machine hits all of
# them. Prints RESULT lines (mode=round round=k) on stdout; a run that fails prints status=FAILED.
#
# usage: bench/rounds.sh --bin DIR [--reps N] [--impls "pccl pccl-oop gloo mpi"] [--errlog FILE]
#                        PEERS BYTES K
#
#   --bin    directory with pccl_allreduce (and gloo_allreduce, mpi_allreduce where built);
#            bench/run.sh builds them into /tmp/build-bench/bin
#   --reps   timed repetitions per run (default 5; x10 with 20 warm-ups at <= 1 MiB, x6 with 3 at <= 16 MiB)
#   --impls  which implementations, in round order (missing comparator binaries are skipped)
#   --errlog append the programs' stderr to FILE (default: this script's stderr, with the progress)
#
# The table: python3 bench/report.py --rounds FILE (section 1b of docs/benchmarks.md, alone).
# bench/run.sh --rounds K calls this for each target point.
set -u
BIN="" REPS=5 IMPLS="pccl pccl-oop gloo mpi" ERRLOG=/dev/stderr
while [ $# -gt 0 ]; do
    case $1 in
    --bin) BIN=$2; shift ;;
    --reps) REPS=$2; shift ;;
    --impls) IMPLS=$2; shift ;;
    --errlog) ERRLOG=$2; shift ;;
    -h | --help) sed -n '2,16p' "$0"; exit 0 ;;
    -*) echo "rounds.sh: unknown argument $1" >&2; exit 2 ;;
    *) break ;;
    esac
    shift
done
[ $# -eq 3 ] || { echo "rounds.sh: want PEERS BYTES K (see --help)" >&2; exit 2; }
n=$1 s=$2 k_max=$3
for v in "$n" "$s" "$k_max" "$REPS"; do
    case $v in '' | *[!0-9]*) echo "rounds.sh: '$v' is not a positive integer" >&2; exit 2 ;; esac
done
if [ "$n" -lt 2 ] || [ "$k_max" -lt 1 ] || [ "$REPS" -lt 1 ]; then
    echo "rounds.sh: want PEERS >= 2, K >= 1 and --reps >= 1" >&2; exit 2
fi
for impl in $IMPLS; do
    case $impl in pccl | pccl-oop | gloo | mpi) ;; *) echo "rounds.sh: unknown implementation $impl" >&2; exit 2 ;; esac
done
[ -x "$BIN/pccl_allreduce" ] || { echo "rounds.sh: no pccl_allreduce in '$BIN' (--bin)" >&2; exit 2; }

# shellcheck source=bench/lib.sh
. "$(dirname "$0")/lib.sh"
reps_for "$s" "$REPS"
for k in $(seq 1 "$k_max"); do
    echo "[$(date -u +%H:%M:%S) load $(cut -d' ' -f1 /proc/loadavg)] round $k/$k_max: $n peers x $s B" >&2
    for impl in $IMPLS; do
        case $impl in
        pccl) cmd=("$BIN/pccl_allreduce" ar "$n" "$s" "$r" "$warm") ;;
        pccl-oop) cmd=("$BIN/pccl_allreduce" oop "$n" "$s" "$r" "$warm") ;;
        gloo) [ -x "$BIN/gloo_allreduce" ] || continue; cmd=("$BIN/gloo_allreduce" "$n" "$s" "$r" "$warm") ;;
        mpi) [ -x "$BIN/mpi_allreduce" ] || continue; cmd=("${MPIRUN[@]}" -np "$n" "$BIN/mpi_allreduce" "$s" "$r" "$warm") ;;
        esac
        # Bounded: a hung run is killed and recorded as failed; the round goes on.
        if out=$(timeout 900 "${cmd[@]}" 2>>"$ERRLOG") && grep -q '^RESULT' <<<"$out"; then
            grep '^RESULT' <<<"$out" | sed "s/ mode=ar / mode=round round=$k /"
        else
            echo "RESULT impl=$impl mode=round round=$k peers=$n bytes=$s status=FAILED"
        fi
    done
done
