#!/usr/bin/env bash
# bench/run.sh - pccl all-reduce benchmarks against Gloo and OpenMPI on loopback.
#
# usage: bench/run.sh [--quick] [--wan] [--rounds K] [--reps N] [--build DIR] [--out FILE]
#
#   --quick   subset (2 and 4 peers; 400 KB and 16 MiB; concurrency 1,2,4;
#             no 256 MiB / 1 GiB): a few minutes.
#   --wan     also run the concurrency series across network namespaces with
#             tc netem, or bench/wanemu where the kernel has no sch_netem
#             (4 peers, 40 ms RTT, 1 Gbit/s per link); needs root.
#   --rounds K  also run the target points (section 1b) in K interleaved rounds of pccl, Gloo and
#             OpenMPI (bench/rounds.sh) and judge the targets on the median of the round medians: on a
#             shared machine one run per point is too noisy to call a 5 % difference (K >= 3; ~10 min
#             for K = 5). One point alone: bench/rounds.sh --help.
#   --reps N  timed repetitions per point (default 5; median reported).
#   --build   build directory (default /tmp/build-bench); configured and built here.
#   --out     markdown written (default docs/benchmarks.md of this checkout).
#
# Everything is measured in the same run, each implementation as separate
# processes on 127.0.0.1. Prints a table and writes the markdown report.
# Raw "RESULT" lines are kept in $BUILD/bench-results.txt. Installs what it needs
# (scripts/deps.sh --bench: the build, Gloo, OpenMPI, iperf3); optional: perf +
# strace (profiles).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
QUICK=0 WAN=0 REPS=5 ROUNDS=0
BUILD=/tmp/build-bench
OUT=$ROOT/docs/benchmarks.md
while [ $# -gt 0 ]; do
    case $1 in
    --quick) QUICK=1 ;;
    --wan) WAN=1 ;;
    --reps) REPS=$2; shift ;;
    --rounds) ROUNDS=$2; shift ;;
    --build) BUILD=$2; shift ;;
    --out) OUT=$2; shift ;;
    -h | --help) sed -n '2,20p' "$0"; exit 0 ;;
    *) echo "run.sh: unknown argument $1" >&2; exit 2 ;;
    esac
    shift
done
[ "$REPS" -ge 5 ] || { echo "run.sh: --reps must be >= 5" >&2; exit 2; }
[ "$ROUNDS" = 0 ] || [ "$ROUNDS" -ge 3 ] 2>/dev/null || { echo "run.sh: --rounds must be >= 3" >&2; exit 2; }

T_START=$(date +%s)
"$ROOT/scripts/deps.sh" --bench >&2
echo "== building in $BUILD" >&2
cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release >"$BUILD.cmake.log" 2>&1 ||
    { cat "$BUILD.cmake.log" >&2; exit 1; }
grep "bench:" "$BUILD.cmake.log" >&2 || true
TARGETS="bench_hash pccl_allreduce pccl_coll wanemu" # pccl_coll and the *_coll comparators: bench/coll.sh
grep -q "mpi_allreduce" "$BUILD/bench/Makefile" 2>/dev/null && TARGETS="$TARGETS mpi_allreduce mpi_coll"
grep -q "gloo_allreduce" "$BUILD/bench/Makefile" 2>/dev/null && TARGETS="$TARGETS gloo_allreduce gloo_coll"
# shellcheck disable=SC2086
cmake --build "$BUILD" -j"$(nproc)" --target $TARGETS >"$BUILD.build.log" 2>&1 ||
    { tail -30 "$BUILD.build.log" >&2; exit 1; }
BIN=$BUILD/bin
[ -x "$BIN/pccl_allreduce" ] || BIN=$BUILD/bench

RES=$BUILD/bench-results.txt
META=$BUILD/bench-meta.txt
: >"$RES"
: >"$META"
: >"$BUILD/bench-failures.txt"
meta() { echo "$1=$2" >>"$META"; }
meta date "$(date -u +%Y-%m-%dT%H:%M:%SZ)"
meta nproc "$(nproc)"
meta cpu "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
meta mem_gib "$(awk '/MemTotal/ {printf "%.1f", $2/1048576}' /proc/meminfo)"
meta kernel "$(uname -r)"
meta load_start "$(cut -d' ' -f1-3 /proc/loadavg)"
meta quick "$QUICK"
meta reps "$REPS"
meta reps_small "x10 with 20 warm-ups up to 1 MiB, x6 with 3 warm-ups up to 16 MiB"
meta zerocopy_min_bytes "${PCCL_ZEROCOPY_MIN_BYTES:-50331648 (default)}"
meta rcvbuf_rule "(from the first such op on)"
[ -n "${PCCL_ZEROCOPY_MIN_BYTES:-}" ] ||
    meta splice_spare_rule "(from 4 MiB on same-host edges while the host has two CPUs per local peer)"
meta local_notsent_bytes "${PCCL_LOCAL_NOTSENT_BYTES:-65536 (default)}"
meta git "$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown) (working tree, may be dirty)"
meta gloo "$(dpkg-query -W -f='${Version}' libgloo-dev 2>/dev/null || echo none)"
meta openmpi "$(dpkg-query -W -f='${Version}' libopenmpi-dev 2>/dev/null || echo none)"
meta iperf3 "$(dpkg-query -W -f='${Version}' iperf3 2>/dev/null || echo none)"

# shellcheck source=bench/lib.sh
. "$ROOT/bench/lib.sh"
have() { [ -x "$BIN/$1" ]; }
log() { echo "[$(date -u +%H:%M:%S) load $(cut -d' ' -f1 /proc/loadavg)] $*" >&2; }
# run_point LABEL CMD...: appends the RESULT lines; a failure is recorded, not fatal.
run_point() {
    local label=$1; shift
    log "$label"
    local out
    if out=$(timeout 900 "$@" 2>"$BUILD/bench-last.err"); then
        grep '^RESULT' <<<"$out" >>"$RES" || true
    else
        { echo "=== $label"; grep -v HEARTBEAT "$BUILD/bench-last.err" | tail -20; } >>"$BUILD/bench-failures.txt"
        log "  failed (stderr in $BUILD/bench-failures.txt), retrying once"
        if out=$(timeout 900 "$@" 2>"$BUILD/bench-last.err"); then
            grep '^RESULT' <<<"$out" | sed 's/$/ retried=1/' >>"$RES" || true
        else
            echo "RESULT $label status=FAILED" >>"$RES"
            { echo "=== $label (retry)"; grep -v HEARTBEAT "$BUILD/bench-last.err" | tail -20; } >>"$BUILD/bench-failures.txt"
        fi
    fi
}

# ---- memory budget: buffers per process (pccl: buffer + backup copy; gloo/mpi: ~2x)
mem_avail=$(($(awk '/MemAvailable/ {print $2}' /proc/meminfo) * 1024))
fits() { # peers bytes
    local need=$(($1 * $2 * 5 / 2))
    [ "$need" -lt $((mem_avail * 3 / 4)) ]
}

# ---- 1. SimpleHash vs memcpy
log "bench_hash 256 MiB"
"$BIN/bench_hash" 256 | tee "$BUILD/bench-hash.txt" >&2

# ---- 2. loopback iperf3
if command -v iperf3 >/dev/null; then
    IPORT=$((20000 + RANDOM % 20000))
    iperf3 -s -1 -p "$IPORT" >/dev/null 2>&1 &
    ipid=$!
    sleep 0.5
    log "iperf3 loopback, 3 runs"
    for i in 1 2 3; do
        if [ "$i" -gt 1 ]; then
            iperf3 -s -1 -p "$IPORT" >/dev/null 2>&1 &
            ipid=$!
            sleep 0.5
        fi
        bps=$(iperf3 -c 127.0.0.1 -p "$IPORT" -t 3 -J | jq '.end.sum_received.bits_per_second')
        echo "RESULT impl=iperf3 mode=loopback run=$i bps=$bps" >>"$RES"
        wait "$ipid" 2>/dev/null || true
    done
else
    log "iperf3 not installed (apt-get install iperf3): no loopback floor"
fi

# ---- 3. throughput matrix
if [ "$QUICK" = 1 ]; then
    PEERS="2 4"
    SIZES="409600 16777216"
    CONCS="1 2 4"
else
    PEERS="2 4 8"
    SIZES="409600 16777216 268435456 1073741824"
    CONCS="1 2 4 8 16"
fi
for n in $PEERS; do
    for s in $SIZES; do
        if ! fits "$n" "$s"; then
            echo "RESULT impl=all mode=ar peers=$n bytes=$s status=SKIPPED_MEMORY" >>"$RES"
            log "skip $n peers x $s B: needs ~$((n * s * 5 / 2 >> 30)) GiB of $((mem_avail >> 30)) GiB available"
            continue
        fi
        reps_for "$s" "$REPS"
        run_point "impl=pccl mode=ar peers=$n bytes=$s" "$BIN/pccl_allreduce" ar "$n" "$s" "$r" "$warm"
        run_point "impl=pccl-oop mode=ar peers=$n bytes=$s" "$BIN/pccl_allreduce" oop "$n" "$s" "$r" "$warm"
        have gloo_allreduce &&
            run_point "impl=gloo mode=ar peers=$n bytes=$s" "$BIN/gloo_allreduce" "$n" "$s" "$r" "$warm"
        have mpi_allreduce &&
            run_point "impl=mpi mode=ar peers=$n bytes=$s" "${MPIRUN[@]}" -np "$n" "$BIN/mpi_allreduce" "$s" "$r" "$warm"
    done
done

# ---- 3b. the target points again, in interleaved rounds (pccl, Gloo, OpenMPI per round)
if [ "$ROUNDS" -gt 0 ]; then
    RPOINTS="2:409600 2:16777216 4:16777216 8:16777216"
    [ "$QUICK" = 1 ] || RPOINTS="$RPOINTS 2:268435456 4:268435456 8:268435456 2:1073741824 4:1073741824 8:1073741824"
    for pt in $RPOINTS; do
        IFS=: read -r n s <<<"$pt"
        fits "$n" "$s" || continue
        "$ROOT/bench/rounds.sh" --bin "$BIN" --reps "$REPS" --errlog "$BUILD/bench-failures.txt" "$n" "$s" "$ROUNDS" \
            >>"$RES" || log "  rounds.sh failed"
    done
fi

# ---- 4. per-call latencies (PCCL report 2.6): 101,770 floats, 2 peers
run_point "impl=pccl mode=lat peers=2" "$BIN/pccl_allreduce" lat 2 101770 $((REPS * 10))

# ---- 5. concurrency: C concurrent 64 MiB all-reduces, pool size C, 4 peers, loopback
for c in $CONCS; do
    if ! fits $((4 * c)) 67108864; then
        echo "RESULT impl=pccl mode=conc peers=4 conc=$c status=SKIPPED_MEMORY" >>"$RES"
        continue
    fi
    run_point "impl=pccl mode=conc peers=4 conc=$c" "$BIN/pccl_allreduce" conc 4 67108864 "$REPS" "$c"
done

# ---- 6. optional: the same across network namespaces with WAN emulation
# Two settings: the WAN target's example (40 ms RTT, no loss, the kernel's congestion control; 500 Mbit/s
# because the userspace emulator and 4 peers on 2 cores cannot carry 4 links at 1 Gbit/s), and a
# lossy internet path (0.1 % loss, cubic, MTU 1500), where one TCP stream is loss-limited.
if [ "$WAN" = 1 ]; then
    WAN_TAG=clean WAN_RATE=500mbit "$ROOT/bench/wan.sh" "$BIN" "$REPS" "$CONCS" >>"$RES" ||
        log "WAN series (clean) failed"
    WAN_TAG=lossy WAN_CC=cubic WAN_LOSS=0.1% WAN_MTU=1500 "$ROOT/bench/wan.sh" "$BIN" 3 "$CONCS" >>"$RES" ||
        log "WAN series (lossy) failed"
fi

# ---- 6b. quantized vs unquantized: 4 peers, 256 MiB (the quantization issue's size, also with --quick),
#          loopback, and with --wan across namespaces with the same shaping
QBYTES=268435456
QUANTS="none minmax:uint8 zps:int8 minmax:uint16"
if fits 4 "$QBYTES"; then
    for q in $QUANTS; do
        run_point "impl=pccl mode=ar peers=4 bytes=$QBYTES quant=$q" \
            env PCCL_BENCH_QUANT="$q" "$BIN/pccl_allreduce" ar 4 "$QBYTES" "$REPS" 1
    done
    if [ "$WAN" = 1 ]; then
        for q in none minmax:uint8; do
            PCCL_BENCH_QUANT=$q WAN_BYTES=$QBYTES "$ROOT/bench/wan.sh" "$BIN" "$REPS" 1 | grep -v wanenv >>"$RES" ||
                log "WAN quantization series ($q) failed"
        done
    fi
else
    echo "RESULT impl=pccl mode=ar peers=4 bytes=$QBYTES quant=all status=SKIPPED_MEMORY" >>"$RES"
fi

# ---- 6c. 8, 4 and 2 bits: the kernels' throughput (bench_quant: encode, decode, decode-and-sum; one thread and
#          all), and a 16 MiB float all-reduce on 2 and 4 peers per width (time and the bytes a peer sends)
run_point "impl=pccl mode=qkernel" "$BIN/bench_quant" 16 "$REPS"
LBYTES=16777216
for p in 2 4; do
    for q in none minmax:uint8 minmax:uint4 minmax:uint2; do
        run_point "impl=pccl mode=ar peers=$p bytes=$LBYTES quant=$q" \
            env PCCL_BENCH_QUANT="$q" "$BIN/pccl_allreduce" ar "$p" "$LBYTES" "$REPS" 1
    done
done

# ---- 7. profiles of pccl where the targets are usually missed (time split, perf, syscalls)
PROF=$BUILD/bench-profile.md
: >"$PROF"
if command -v perf >/dev/null && [ "$(id -u)" = 0 ]; then
    PPOINTS="2:409600:40 2:16777216:10 4:16777216:10"
    [ "$QUICK" = 1 ] || PPOINTS="$PPOINTS 4:268435456:3"
    for pp in $PPOINTS; do
        IFS=: read -r n s r <<<"$pp"
        log "profile pccl $n peers $s B"
        "$ROOT/bench/profile.sh" "$BIN" "$n" "$s" "$r" >>"$PROF" 2>/dev/null || echo "(profile failed)" >>"$PROF"
        echo "" >>"$PROF"
    done
else
    echo "(perf not available or not root: no profiles)" >>"$PROF"
fi

meta load_end "$(cut -d' ' -f1-3 /proc/loadavg)"
meta duration_s "$(($(date +%s) - T_START))"
python3 "$ROOT/bench/report.py" "$RES" "$META" "$BUILD/bench-hash.txt" "$ROOT/bench/analysis.md" "$OUT" "$PROF"
log "wrote $OUT (raw results: $RES)"
