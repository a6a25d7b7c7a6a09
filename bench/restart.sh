#!/usr/bin/env bash
# bench/restart.sh [--bin DIR] [--reps K] [PEERS...] - how long a run stalls when its master
# restarts: PEERS restart_peer processes (tests/e2e/restart_peer.c, 8192 floats, no pause
# between steps) run on loopback; the master is SIGKILLed, and a new one starts on the same port
# 0.5 s later. Measured: from the new master's start to the first all-reduce completed after it
# (peer 0's next revision line; polled every 5 ms). Prints one table: peers, median of K, min,
# max (ms). Defaults: build/bin, K = 5, peers 4 and 16.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=build/bin REPS=5 SIZES=()
while [ $# -gt 0 ]; do
    case $1 in
        --bin) BIN=$2; shift 2 ;;
        --reps) REPS=$2; shift 2 ;;
        -h|--help) sed -n '2,7p' "$0"; exit 0 ;;
        [0-9]*) SIZES+=("$1"); shift ;;
        *) echo "unknown argument $1" >&2; exit 2 ;;
    esac
done
[ ${#SIZES[@]} -gt 0 ] || SIZES=(4 16)
[ -x "$BIN/restart_peer" ] && [ -x "$BIN/pccl" ] || { echo "build first: $BIN/restart_peer, $BIN/pccl" >&2; exit 2; }
WORK=$(mktemp -d /tmp/pccl-restart-bench.XXXXXX)
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$WORK"; }
trap cleanup EXIT
now_ms() { echo $(( $(date +%s%N) / 1000000 )); }
master() { # PORT LOG: starts a master, sets MPID
    PCCL_LOG_LEVEL=warn "$BIN/pccl" master --listen "127.0.0.1:$1" --no-admin > "$2" 2>&1 &
    MPID=$!; PIDS+=("$MPID")
}
lines() { local c; c=$(grep -c '^revision' "$WORK/p0.log" 2>/dev/null) || true; echo "${c:-0}"; }

echo "| peers | stall after restart, median (ms) | min | max |"
echo "|---|---|---|---|"
for n in "${SIZES[@]}"; do
    master 0 "$WORK/m.log"
    for _ in $(seq 1 100); do grep -q 'listening on' "$WORK/m.log" && break; sleep 0.05; done
    port=$(grep -o 'listening on [0-9.]*:[0-9]*' "$WORK/m.log" | sed 's/.*://')
    peers=()
    for i in $(seq 0 $((n - 1))); do
        PCCL_LOG_LEVEL=error "$BIN/restart_peer" "$port" 1000000000 0 > "$WORK/p$i.log" 2>/dev/null &
        peers+=($!); PIDS+=($!)
    done
    for _ in $(seq 1 1200); do [ "$(lines)" -ge 20 ] && break; sleep 0.05; done
    [ "$(lines)" -ge 20 ] || { echo "the $n peers made no progress" >&2; exit 1; }
    times=()
    for _ in $(seq 1 "$REPS"); do
        kill -9 "$MPID"; wait "$MPID" 2>/dev/null || true
        sleep 0.5
        seen=$(lines)
        t0=$(now_ms)
        master "$port" "$WORK/m.log"
        for _ in $(seq 1 2000); do [ "$(lines)" -gt "$seen" ] && break; sleep 0.005; done
        [ "$(lines)" -gt "$seen" ] || { echo "no all-reduce within 10 s of the restart ($n peers)" >&2; exit 1; }
        t=$(( $(now_ms) - t0 ))
        times+=("$t")
        [ -z "${RESTART_BENCH_VERBOSE:-}" ] || echo "  $n peers: $t ms" >&2
        sleep 0.5
    done
    sorted=$(printf '%s\n' "${times[@]}" | sort -n)
    echo "| $n | $(echo "$sorted" | sed -n "$(( (REPS + 1) / 2 ))p") | $(echo "$sorted" | head -1) | $(echo "$sorted" | tail -1) |"
    kill -9 "$MPID" "${peers[@]}" 2>/dev/null || true
    wait 2>/dev/null || true
done
