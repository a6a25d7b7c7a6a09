#!/usr/bin/env bash
# bench/scale.sh [--bin DIR] [--steps S] [PEERS...] - hundreds of peers on one host: for each PEERS, that many
# `pccl join --workload synthetic` peers (4 KiB all-reduces) are started before their master on loopback, so that
# the whole burst dials it at once when it comes up, and run S steps (default 20). Measured on the master:
# join time (its start to the last peer accepted), the accept rounds (count, longest: its log's "accept round"
# lines), its CPU time (utime + stime, /proc/PID/stat) and resident memory (/proc/PID/status) after the join
# and at the end, and the operations it ran (/metrics: collectives and shared-state syncs). Prints one table;
# CPU per peer per operation is the CPU of the steps divided by peers x operations (each step's
# update-topology vote counted in the CPU, not as an operation). Defaults: build/bin, 16 64 128 256 peers.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=build/bin STEPS=20 NS=()
while [ $# -gt 0 ]; do
    case $1 in
        --bin) BIN=$2; shift 2 ;;
        --steps) STEPS=$2; shift 2 ;;
        -h|--help) sed -n '2,9p' "$0"; exit 0 ;;
        [0-9]*) NS+=("$1"); shift ;;
        *) echo "unknown argument $1" >&2; exit 2 ;;
    esac
done
[ ${#NS[@]} -gt 0 ] || NS=(16 64 128 256)
PCCL=$BIN/pccl
WORK=$(mktemp -d /tmp/pccl-scale.XXXXXX)
PIDS=()
cleanup() {
    for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null || true; done
    rm -rf "$WORK"
}
trap cleanup EXIT
TICK=$(getconf CLK_TCK)

now() { date +%s.%N; }
cpu_s() { awk -v t="$TICK" '{printf "%.2f", ($14 + $15) / t}' "/proc/$1/stat"; }
mem_kib() { awk -v k="$2:" '$1 == k {print $2}' "/proc/$1/status"; }
metric() { awk -v n="$1" '$1 == n {s += $2} END {print s + 0}' "$WORK/metrics"; }
ms_of() { # the log's ISO time stamp as ms since the epoch
    date -u -d "$(echo "$1" | sed 's/T/ /; s/Z$//')" +%s%3N
}
# The accept rounds of the log: "count longest_ms", from each "wiring" line to its "accepted" line.
rounds() {
    local start='' n=0 max=0 line t d
    while read -r line; do
        t=$(ms_of "${line%% *}")
        case $line in
            *"accept round: wiring"*) start=$t ;;
            *"newcomers accepted"*) [ -n "$start" ] && { d=$((t - start)); n=$((n + 1)); [ "$d" -gt "$max" ] && max=$d; start=''; } ;;
        esac
    done < <(grep 'accept round:' "$1")
    echo "$n $max"
}

printf '| peers | join time (s) | accept rounds | longest round (ms) | master RSS after join / end (MiB) | RSS per peer (KiB) | master CPU join (s) | CPU per peer per op (us) | steps (s) |\n'
printf '|---|---|---|---|---|---|---|---|---|\n'
for n in "${NS[@]}"; do
    port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    rm -f "$WORK"/*.log
    peers=()
    for i in $(seq 1 "$n"); do
        "$PCCL" join --master "127.0.0.1:$port" --json --workload synthetic --steps "$STEPS" --size 4096 \
            --min-world "$n" --connect-timeout 120 > "$WORK/p$i.log" 2> /dev/null &
        peers+=($!)
        PIDS+=($!)
    done
    sleep 2 # every peer is dialling (and refused) by now
    t0=$(now)
    PCCL_LOG_LEVEL=info "$PCCL" master --listen "127.0.0.1:$port" --admin 127.0.0.1:0 > "$WORK/master.log" 2>&1 &
    mp=$!
    PIDS+=("$mp")
    aport=''
    for _ in $(seq 1 200); do
        aport=$(grep -o 'admin on [^ ]*' "$WORK/master.log" | sed 's/.*://' || true)
        [ -n "$aport" ] && break
        sleep 0.05
    done
    base_rss=$(mem_kib "$mp" VmRSS)
    for _ in $(seq 1 2400); do
        [ "$(grep -c 'accepted into group' "$WORK/master.log")" -ge "$n" ] && break
        sleep 0.05
    done
    t1=$(now)
    cpu_join=$(cpu_s "$mp") rss_join=$(mem_kib "$mp" VmRSS)
    for p in "${peers[@]}"; do timeout 600 tail --pid="$p" -f /dev/null; done
    t2=$(now)
    curl -s "http://127.0.0.1:$aport/metrics" > "$WORK/metrics"
    cpu_end=$(cpu_s "$mp") rss_end=$(mem_kib "$mp" VmRSS)
    ops=$(( $(metric pccl_collectives_total) + $(metric pccl_syncs_total) ))
    read -r nrounds longest < <(rounds "$WORK/master.log")
    hashes=$(grep -h '"event":"done"' "$WORK"/p*.log | grep -o '"hash":"[0-9a-f]*"' | sort -u | wc -l)
    done_n=$(grep -l '"event":"done"' "$WORK"/p*.log | wc -l)
    kill -INT "$mp"
    wait "$mp" 2>/dev/null || true
    [ "$done_n" -eq "$n" ] && [ "$hashes" -eq 1 ] || echo "WARNING: $done_n of $n peers finished, $hashes distinct hashes" >&2
    awk -v n="$n" -v j="$(echo "$t1 - $t0" | bc)" -v nr="$nrounds" -v lr="$longest" -v bj="$base_rss" -v rj="$rss_join" \
        -v re="$rss_end" -v cj="$cpu_join" -v ce="$cpu_end" -v ops="$ops" -v st="$(echo "$t2 - $t1" | bc)" 'BEGIN {
        printf "| %d | %.1f | %d | %d | %.1f / %.1f | %.0f | %.2f | %.0f | %.1f |\n", n, j, nr, lr, rj / 1024, re / 1024,
            (re - bj) / n, cj, ops ? (ce - cj) * 1e6 / (n * ops) : 0, st }'
done
echo
echo "Load after: $(uptime)"
