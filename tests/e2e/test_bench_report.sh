#!/usr/bin/env bash
# bench/report.py on synthetic results: the interleaved-round ratios, the "rounds won" count and
# its sign-test p (a round counts only against the comparators measured in that same round;
# failed rounds are left out), and the Must verdicts derived from them.
. "$(dirname "$0")/lib.sh"
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
command -v python3 >/dev/null || fail "python3 missing (scripts/deps.sh installs it)"

S16=$((16 << 20))
res="$WORK/results.txt"
row() { # impl round peers bytes median_s [status]
    echo "RESULT impl=$1 mode=round round=$2 peers=$3 bytes=$4 conc=1 reps=5 median_s=$5 min_s=$5 max_s=$5 GBps=1${6:+ status=$6}"
}
{
    # 2 peers x 16 MiB: pccl beats the best comparator of its round in rounds 1, 2 and 4.
    row pccl 1 2 $S16 0.0060; row gloo 1 2 $S16 0.0090; row mpi 1 2 $S16 0.0065
    row pccl 2 2 $S16 0.0061; row gloo 2 2 $S16 0.0090; row mpi 2 2 $S16 0.0070
    row pccl 3 2 $S16 0.0080; row gloo 3 2 $S16 0.0090; row mpi 3 2 $S16 0.0064
    row pccl 4 2 $S16 0.0062; row gloo 4 2 $S16 0.0090 # OpenMPI missing: Gloo alone is the best
    row pccl 5 2 $S16 0.0090; row gloo 5 2 $S16 0.0085; row mpi 5 2 $S16 0.0063
    # 4 peers x 16 MiB: pccl loses every round, and its round 5 failed (not counted).
    for k in 1 2 3 4 5; do row gloo $k 4 $S16 0.020; done
    for k in 1 2 3 4; do row pccl $k 4 $S16 0.025; done
    row pccl 5 4 $S16 0.001 "failed"
    # One plain run of the 2-peer point (section 1), which on its own would say pccl loses.
    echo "RESULT impl=pccl mode=ar peers=2 bytes=$S16 conc=1 reps=5 median_s=0.0090 min_s=0.009 max_s=0.009 GBps=1.8"
    for impl in gloo mpi; do
        echo "RESULT impl=$impl mode=ar peers=2 bytes=$S16 conc=1 reps=5 median_s=0.0070 min_s=0.007 max_s=0.007 GBps=2.4"
    done
} > "$res"
printf 'date=test\nnproc=2\nduration_s=1\nreps=5\n' > "$WORK/meta.txt"
: > "$WORK/hash.txt"
printf '## 8. Analysis\n' > "$WORK/analysis.md"
python3 "$ROOT/bench/report.py" "$res" "$WORK/meta.txt" "$WORK/hash.txt" "$WORK/analysis.md" "$WORK/out.md" \
    > "$WORK/report.log" 2>&1 || fail "report.py failed: $(tail -5 "$WORK/report.log")"

# Section 1b's rows are the ones with a "rounds won" cell.
line2=$(grep '^| 2 | 16 MiB |' "$WORK/out.md" | grep ' of ') || fail "no 2-peer row in section 1b"
line4=$(grep '^| 4 | 16 MiB |' "$WORK/out.md" | grep ' of ') || fail "no 4-peer row in section 1b"
# Medians of the round medians: pccl 6.20 ms, Gloo 9.00, OpenMPI 6.45 (rounds 1, 2, 3, 5).
case "$line2" in *"| 6.20 "*"| 9.00 "*"| 6.45 "*"| 1.04x | 3 of 5, p = 1.00 |"*) ;;
    *) fail "2-peer row: $line2" ;; esac
case "$line4" in *"| 0.80x | 0 of 4, p = 0.12 |"*) ;; *) fail "4-peer row: $line4" ;; esac
# The verdict follows the rounds (1.04x), not the single plain run (0.78x).
grep -q "2 peers 16 MiB: pccl >= best comparator.*1.04x" "$WORK/out.md" || fail "Must line for 2 peers"
echo "ok: rounds won and ratios from synthetic rounds"
