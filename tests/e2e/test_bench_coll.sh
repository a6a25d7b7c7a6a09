#!/usr/bin/env bash
# bench/coll.sh and report.py --coll: the collectives' rounds (each round runs the implementations in the
# order given, a failing one becomes a status=FAILED line, the repetitions follow bench/lib.sh), the
# table's medians of the round medians, ratios and rounds won per collective, and the WAN broadcast's
# ratios to one link. Stand-in programs, then one tiny real run of the programs that were built.
. "$(dirname "$0")/lib.sh"
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
command -v python3 >/dev/null || fail "python3 missing (scripts/deps.sh installs it)"
S16=$((16 << 20))

# ---- report.py --coll on synthetic rows
res="$WORK/results.txt"
row() { # impl round coll peers median_s [status]
    echo "RESULT impl=$1 mode=coll round=$2 coll=$3 peers=$4 bytes=$S16 reps=18 median_s=$5 min_s=$5 max_s=$5 GBps=1${6:+ status=$6}"
}
{
    echo "META start=T0 load_start=1_2_3 load_end=4_5_6 duration_s=9 rounds=3 reps=3 git=abc1234"
    # broadcast, 2 peers: pccl 10 ms in every round; best comparator 12, 9, 15 ms: won 2 of 3.
    row pccl 1 broadcast 2 0.010; row gloo 1 broadcast 2 0.012; row mpi 1 broadcast 2 0.020
    row pccl 2 broadcast 2 0.010; row gloo 2 broadcast 2 0.009; row mpi 2 broadcast 2 0.020
    row pccl 3 broadcast 2 0.010; row gloo 3 broadcast 2 0.015; row mpi 3 broadcast 2 0.020
    # all-gather, 4 peers: pccl's round 3 failed (left out); Gloo alone measured.
    row pccl 1 all_gather 4 0.030; row gloo 1 all_gather 4 0.020
    row pccl 2 all_gather 4 0.040; row gloo 2 all_gather 4 0.020
    row pccl 3 all_gather 4 0.001 FAILED; row gloo 3 all_gather 4 0.020
    # A plain all-reduce round with the same numbers is not a collective's row.
    echo "RESULT impl=pccl mode=round round=1 peers=2 bytes=$S16 conc=1 reps=5 median_s=0.5 min_s=0.5 max_s=0.5 GBps=1"
    echo "RESULT impl=env mode=wanenv emu=wanemu_delay_20ms"
    echo "RESULT impl=tcp mode=wanlink peers=1 bytes=268435456 conc=1 reps=1 median_s=10.000 min_s=10 max_s=10 GBps=1"
    echo "RESULT impl=tcp mode=wanlink peers=1 bytes=268435456 conc=8 reps=1 median_s=8.000 min_s=8 max_s=8 GBps=1"
    echo "RESULT impl=pccl mode=wancoll peers=8 bytes=268435456 conc=1 reps=1 median_s=12.000 min_s=12 max_s=12 GBps=1 coll=broadcast"
    echo "RESULT impl=pccl mode=wancoll peers=8 bytes=268435456 conc=8 reps=1 median_s=10.000 min_s=10 max_s=10 GBps=1 coll=broadcast"
    # A second setting: its rows compare with its own link only.
    echo "RESULT impl=env mode=wanenv emu=wanemu_lossy scenario=lossy"
    echo "RESULT impl=tcp mode=wanlink peers=1 bytes=268435456 conc=1 reps=1 median_s=40.000 min_s=40 max_s=40 GBps=1 scenario=lossy"
    echo "RESULT impl=pccl mode=wancoll peers=8 bytes=268435456 conc=8 reps=1 median_s=20.000 min_s=20 max_s=20 GBps=1 scenario=lossy coll=broadcast"
} > "$res"
python3 "$ROOT/bench/report.py" --coll "$res" > "$WORK/coll.md" 2>"$WORK/report.log" ||
    fail "report.py --coll failed: $(tail -5 "$WORK/report.log")"
grep -q "^| broadcast | 2 | 16 MiB | 10.0 (1.68) | 12.0 (1.40) | 20.0 (0.84) | 1.20x | 2 of 3, p = 1.00 |$" \
    "$WORK/coll.md" || fail "broadcast row: $(grep '^| broadcast' "$WORK/coll.md")"
grep -q "^| all-gather | 4 | 16 MiB | 35.0 (0.48) | 20.0 (0.84) | n/a | 0.57x | 0 of 2, p = 0.50 |$" \
    "$WORK/coll.md" || fail "all-gather row: $(grep '^| all-gather' "$WORK/coll.md")"
[ "$(grep -c '^| [a-z-]* | [0-9]' "$WORK/coll.md")" = 2 ] || fail "want exactly two collective rows: $(cat "$WORK/coll.md")"
grep -q "pccl all_gather 4 x 16 MiB round 3" "$WORK/coll.md" || fail "the failed run is not named"
grep -q "abc1234" "$WORK/coll.md" || fail "the build is not named"
grep -q "^| pccl broadcast, 8 members | 1 | 256 MiB | 12.00 | 22.4 | 1.20x | 1.20x |$" "$WORK/coll.md" ||
    fail "WAN pool 1 row: $(grep '^| pccl broadcast' "$WORK/coll.md")"
grep -q "^| pccl broadcast, 8 members | 8 | 256 MiB | 10.00 | 26.8 | 1.00x | 1.25x |$" "$WORK/coll.md" ||
    fail "WAN pool 8 row: $(grep '^| pccl broadcast' "$WORK/coll.md")"
grep -q "^WAN emulation (lossy), \`bench/wan.sh\`: wanemu lossy;" "$WORK/coll.md" || fail "no lossy WAN table"
grep -q "^| pccl broadcast, 8 members | 8 | 256 MiB | 20.00 | 13.4 | 0.50x | n/a |$" "$WORK/coll.md" ||
    fail "lossy WAN row: $(grep '^| pccl broadcast' "$WORK/coll.md")"
echo "ok: report.py --coll"

# ---- coll.sh with stand-ins
fake="$WORK/fakebin"
mkdir -p "$fake"
cat > "$fake/pccl_coll" <<'SH'
#!/bin/sh
echo "pccl $*" >> "$(dirname "$0")/calls"
echo "RESULT impl=pccl mode=coll coll=$2 peers=$3 bytes=$4 reps=$5 median_s=0.0050 min_s=0.005 max_s=0.005 GBps=1"
SH
# shellcheck disable=SC2016 # expanded by the stand-in, not here
printf '#!/bin/sh\necho "gloo $*" >> "$(dirname "$0")/calls"\nexit 3\n' > "$fake/gloo_coll"
chmod +x "$fake/pccl_coll" "$fake/gloo_coll"
"$ROOT/bench/coll.sh" --bin "$fake" --impls "pccl gloo" --kinds "broadcast reduce_scatter" --points "2:$S16" \
    --rounds 2 --results "$WORK/fake.txt" --md "$WORK/fake.md" > /dev/null 2>"$WORK/fake.log" ||
    fail "coll.sh with stand-ins failed: $(tail -5 "$WORK/fake.log")"
want="pccl oop broadcast 2 $S16 18 3
gloo broadcast 2 $S16 18 3
pccl oop broadcast 2 $S16 18 3
gloo broadcast 2 $S16 18 3
pccl oop reduce_scatter 2 $S16 18 3
gloo reduce_scatter 2 $S16 18 3
pccl oop reduce_scatter 2 $S16 18 3
gloo reduce_scatter 2 $S16 18 3"
[ "$(cat "$fake/calls")" = "$want" ] || fail "coll.sh calls: $(cat "$fake/calls")"
[ "$(grep -c 'impl=gloo mode=coll round=[12] coll=[a-z_]* peers=2 .*status=FAILED' "$WORK/fake.txt")" = 4 ] ||
    fail "coll.sh: gloo's failures: $(cat "$WORK/fake.txt")"
grep -q "impl=pccl mode=coll round=2 coll=reduce_scatter peers=2 bytes=$S16 reps=18 median_s=" "$WORK/fake.txt" ||
    fail "coll.sh: pccl's lines: $(cat "$WORK/fake.txt")"
grep -q '^| reduce-scatter | 2 | 16 MiB | 5.0 ' "$WORK/fake.md" || fail "coll.sh table: $(cat "$WORK/fake.md")"
: > "$fake/calls"
for bad in "--rounds 0" "--kinds all_reduce" "--impls nccl" "--points 3:1000" "--points 2" "--bogus"; do
    # shellcheck disable=SC2086 # the cases are word lists on purpose
    "$ROOT/bench/coll.sh" --bin "$fake" --results "$WORK/bad.txt" --md "$WORK/bad.md" $bad > /dev/null 2>&1 &&
        fail "coll.sh accepted '$bad'"
done
"$ROOT/bench/coll.sh" --bin "$WORK/nowhere" --results "$WORK/bad.txt" --md "$WORK/bad.md" > /dev/null 2>&1 &&
    fail "coll.sh ran without pccl_coll"
[ -s "$fake/calls" ] && fail "coll.sh ran programs for refused arguments: $(cat "$fake/calls")"
echo "ok: coll.sh with stand-ins"

# ---- once for real where the programs were built: 2 peers x 64 KiB, one round, each kind
impls=""
for p in pccl_coll:pccl gloo_coll:gloo mpi_coll:mpi; do [ -x "$BIN/${p%%:*}" ] && impls="$impls ${p#*:}"; done
if [ -n "$impls" ]; then
    # Under AddressSanitizer, OpenMPI's own allocations outlive MPI_Finalize: leak reports about the comparator's
    # library, not pccl's (the rest of the suite checks pccl for leaks).
    [ -n "${ASAN_OPTIONS:-}" ] && export ASAN_OPTIONS="$ASAN_OPTIONS:detect_leaks=0"
    "$ROOT/bench/coll.sh" --bin "$BIN" --impls "${impls# }" --points 2:65536 --rounds 1 --reps 1 \
        --results "$WORK/real.txt" --md "$WORK/real.md" > /dev/null 2>"$WORK/real.log" ||
        fail "coll.sh (real) failed: $(tail -5 "$WORK/real.log")"
    n=$(grep -c 'mode=coll round=1 coll=.* peers=2 bytes=65536 .*median_s=' "$WORK/real.txt")
    [ "$n" = $((3 * $(wc -w <<<"$impls"))) ] || fail "coll.sh (real): $(cat "$WORK/real.txt")"
    echo "ok: coll.sh, a real run of$impls"
else
    echo "ok: coll.sh with stand-ins (no program built: no real run)"
fi
