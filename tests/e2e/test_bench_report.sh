#!/usr/bin/env bash
# bench/report.py on synthetic results: the interleaved-round ratios, the "rounds won" count and
# its sign-test p (a round counts only against the comparators measured in that same round;
# failed rounds are left out), and the Must verdicts derived from them. Then report.py --rounds
# and bench/rounds.sh, which runs the rounds (stand-in programs, then one tiny real run).
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
    for k in 1 2 3 4 5; do row pccl-oop $k 2 $S16 0.0058; done # out of place: 6.45 / 5.80 = 1.11x
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
case "$line2" in *"| 6.20 | 5.80 | 9.00 | 6.45 | 1.04x | 3 of 5, p = 1.00 | 1.11x |"*) ;;
    *) fail "2-peer row: $line2" ;; esac
case "$line4" in *"| 0.80x | 0 of 4, p = 0.12 |"*) ;; *) fail "4-peer row: $line4" ;; esac
# The verdict follows the rounds (1.04x), not the single plain run (0.78x).
grep -q "2 peers 16 MiB: pccl in place >= 0.9x best comparator | yes | 1.04x (5 rounds) |" "$WORK/out.md" ||
    fail "in-place Must line for 2 peers: $(grep '2 peers 16 MiB: pccl in place' "$WORK/out.md")"
grep -q "2 peers 16 MiB: pccl out of place >= best comparator | yes | 1.11x (5 rounds) |" "$WORK/out.md" ||
    fail "out-of-place Must line for 2 peers: $(grep '2 peers 16 MiB: pccl out of place' "$WORK/out.md")"
echo "ok: rounds won and ratios from synthetic rounds"

# report.py --rounds prints section 1b alone: the same rows as in the full report.
python3 "$ROOT/bench/report.py" --rounds "$res" > "$WORK/rounds.md" 2>"$WORK/report.log" || fail "report.py --rounds failed"
grep -qF "$line2" "$WORK/rounds.md" || fail "--rounds: 2-peer row differs from the full report's"
grep -qF "$line4" "$WORK/rounds.md" || fail "--rounds: 4-peer row differs from the full report's"
[ "$(grep -c '^| [0-9]' "$WORK/rounds.md")" = 2 ] || fail "--rounds: want exactly the two rows"
for bad in "--rounds" "--round $res" "$res"; do
    # shellcheck disable=SC2086 # the cases are word lists on purpose
    python3 "$ROOT/bench/report.py" $bad > "$WORK/bad.txt" 2>&1 && fail "report.py accepted '$bad'"
    grep -q "^usage: report.py" "$WORK/bad.txt" || fail "report.py '$bad': $(cat "$WORK/bad.txt")"
done
echo "ok: report.py --rounds"

# bench/rounds.sh with stand-in programs: each round runs the implementations in the order given,
# pccl's lines are relabelled mode=round with the round number, and a comparator that fails (or
# prints nothing) becomes a status=FAILED line instead of ending the series.
fake="$WORK/fakebin"
mkdir -p "$fake"
cat > "$fake/pccl_allreduce" <<'SH'
#!/bin/sh
echo "$*" >> "$(dirname "$0")/calls"
impl=pccl; [ "$1" = oop ] && impl=pccl-oop
echo "HEARTBEAT not a result"
echo "RESULT impl=$impl mode=ar peers=$2 bytes=$3 conc=1 reps=$4 median_s=0.0050 min_s=0.005 max_s=0.005 GBps=1"
SH
# shellcheck disable=SC2016 # expanded by the stand-in, not here
printf '#!/bin/sh\necho "gloo $*" >> "$(dirname "$0")/calls"\nexit 3\n' > "$fake/gloo_allreduce"
chmod +x "$fake/pccl_allreduce" "$fake/gloo_allreduce"
"$ROOT/bench/rounds.sh" --bin "$fake" --impls "pccl gloo pccl-oop" 2 $S16 2 > "$WORK/fake.txt" 2>"$WORK/fake.log" ||
    fail "rounds.sh with stand-ins failed"
want="RESULT impl=pccl mode=round round=1 peers=2 bytes=$S16 conc=1 reps=30 median_s=0.0050 min_s=0.005 max_s=0.005 GBps=1
RESULT impl=gloo mode=round round=1 peers=2 bytes=$S16 status=FAILED
RESULT impl=pccl-oop mode=round round=1 peers=2 bytes=$S16 conc=1 reps=30 median_s=0.0050 min_s=0.005 max_s=0.005 GBps=1
RESULT impl=pccl mode=round round=2 peers=2 bytes=$S16 conc=1 reps=30 median_s=0.0050 min_s=0.005 max_s=0.005 GBps=1
RESULT impl=gloo mode=round round=2 peers=2 bytes=$S16 status=FAILED
RESULT impl=pccl-oop mode=round round=2 peers=2 bytes=$S16 conc=1 reps=30 median_s=0.0050 min_s=0.005 max_s=0.005 GBps=1"
[ "$(cat "$WORK/fake.txt")" = "$want" ] || fail "rounds.sh output: $(cat "$WORK/fake.txt")"
# Small points get 10x the repetitions and 20 warm-ups (bench/lib.sh), 16 MiB 6x and 3, large ones 1 warm-up.
grep -qx "ar 2 $S16 30 3" "$fake/calls" || fail "rounds.sh: 16 MiB arguments: $(head -1 "$fake/calls")"
: > "$fake/calls"
"$ROOT/bench/rounds.sh" --bin "$fake" --impls pccl 2 $((S16 + 4)) 1 > /dev/null 2>&1 || fail "rounds.sh above 16 MiB"
grep -qx "ar 2 $((S16 + 4)) 5 1" "$fake/calls" || fail "rounds.sh: above 16 MiB arguments: $(cat "$fake/calls")"
: > "$fake/calls"
"$ROOT/bench/rounds.sh" --bin "$fake" --impls pccl --reps 6 2 409600 1 > /dev/null 2>&1 || fail "rounds.sh 400 KB"
grep -qx "ar 2 409600 60 20" "$fake/calls" || fail "rounds.sh: 400 KB arguments: $(cat "$fake/calls")"
: > "$fake/calls"
for bad in "2 $S16" "1 $S16 3" "2 -5 3" "2 $S16 x" "--reps 0 2 $S16 1" "--impls nccl 2 $S16 1"; do
    # shellcheck disable=SC2086 # the cases are word lists on purpose
    if "$ROOT/bench/rounds.sh" --bin "$fake" $bad > /dev/null 2>&1; then fail "rounds.sh accepted '$bad'"; fi
done
"$ROOT/bench/rounds.sh" --bin "$WORK/nowhere" 2 $S16 1 > /dev/null 2>&1 && fail "rounds.sh ran without pccl_allreduce"
[ -s "$fake/calls" ] && fail "rounds.sh ran programs for refused arguments: $(cat "$fake/calls")"

# And once for real, if the benchmark program was built: two tiny rounds of pccl in and out of place.
if [ -x "$BIN/pccl_allreduce" ]; then
    "$ROOT/bench/rounds.sh" --bin "$BIN" --impls "pccl pccl-oop" --reps 5 2 65536 2 > "$WORK/real.txt" 2>"$WORK/real.log" ||
        fail "rounds.sh (real) failed"
    [ "$(grep -c 'mode=round round=[12] peers=2 bytes=65536 .*median_s=' "$WORK/real.txt")" = 4 ] ||
        fail "rounds.sh (real): $(cat "$WORK/real.txt")"
    python3 "$ROOT/bench/report.py" --rounds "$WORK/real.txt" > "$WORK/real.md" || fail "report.py --rounds (real)"
    grep -q '^| 2 | 64 KiB |' "$WORK/real.md" || fail "no 64 KiB row: $(cat "$WORK/real.md")"
    echo "ok: rounds.sh, stand-ins and a real run"
else
    echo "ok: rounds.sh with stand-ins ($BIN/pccl_allreduce not built: no real run)"
fi
