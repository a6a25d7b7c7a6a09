#!/usr/bin/env bash
# bench/security.sh [--bin DIR] [--rounds K] [PEERS...] - what a keyed run and an encrypted run
# cost: in-place float sum all-reduce throughput (pccl_allreduce ar: forked peers and an in-process
# master on 127.0.0.1) of an open run, a keyed run (every connection authenticated, PCCL_KEY_FILE)
# and an encrypted one (PCCL_KEY_FILE + PCCL_ENCRYPT=1: AEAD on every byte), at 16 MiB and 256 MiB.
# Each round runs the three modes back to back at one point, so a slow phase of a shared machine
# hits all three; per mode the median over K rounds of each run's median (16 MiB: 10 timed
# repetitions after 3 warm-ups; 256 MiB: 3 after 1). Prints a markdown table: GB/s (ms) per mode
# and each mode's throughput relative to the open run. Defaults: build/bin, K = 3, peers 2 and 4.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=build/bin ROUNDS=3 PEERS=()
while [ $# -gt 0 ]; do
    case $1 in
        --bin) BIN=$2; shift 2 ;;
        --rounds) ROUNDS=$2; shift 2 ;;
        -h|--help) sed -n '2,9p' "$0"; exit 0 ;;
        [0-9]*) PEERS+=("$1"); shift ;;
        *) echo "security.sh: unknown argument $1" >&2; exit 2 ;;
    esac
done
[ ${#PEERS[@]} -gt 0 ] || PEERS=(2 4)
[ -x "$BIN/pccl_allreduce" ] || { echo "build first: $BIN/pccl_allreduce" >&2; exit 2; }
WORK=$(mktemp -d /tmp/pccl-security-bench.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
head -c 48 /dev/urandom | base64 > "$WORK/run.key"
chmod 600 "$WORK/run.key"

run() { # MODE PEERS BYTES: prints the run's median time in seconds (empty when it failed)
    local reps=10 warm=3
    [ "$3" -gt $((64 << 20)) ] && reps=3 warm=1
    local env=(env -u PCCL_KEY_FILE -u PCCL_ENCRYPT)
    case $1 in
        keyed) env+=(PCCL_KEY_FILE="$WORK/run.key") ;;
        encrypted) env+=(PCCL_KEY_FILE="$WORK/run.key" PCCL_ENCRYPT=1) ;;
    esac
    PCCL_LOG_LEVEL=error timeout 600 "${env[@]}" "$BIN/pccl_allreduce" ar "$2" "$3" "$reps" "$warm" 2>> "$WORK/err" |
        grep -o 'median_s=[0-9.]*' | cut -d= -f2 || true
}
median() { tr ' ' '\n' | grep . | sort -g | awk '{v[NR] = $1} END {if (NR) print v[int((NR + 1) / 2)]}'; }

echo "| peers | size | open | keyed | encrypted | keyed / open | encrypted / open |"
echo "|---|---|---|---|---|---|---|"
for n in "${PEERS[@]}"; do
    for bytes in $((16 << 20)) $((256 << 20)); do
        declare -A t=([open]="" [keyed]="" [encrypted]="")
        for k in $(seq 1 "$ROUNDS"); do
            for mode in open keyed encrypted; do
                echo "  round $k/$ROUNDS: $n peers, $((bytes >> 20)) MiB, $mode" >&2
                t[$mode]+=" $(run "$mode" "$n" "$bytes")"
            done
        done
        row="| $n | $((bytes >> 20)) MiB"
        declare -A m=()
        for mode in open keyed encrypted; do
            m[$mode]=$(median <<< "${t[$mode]}")
            if [ -n "${m[$mode]}" ]; then
                row+=$(awk -v s="${m[$mode]}" -v b="$bytes" 'BEGIN {printf " | %.3f (%.1f ms)", b / s / 1e9, s * 1e3}')
            else
                row+=" | failed"
            fi
        done
        for mode in keyed encrypted; do
            if [ -n "${m[$mode]}" ] && [ -n "${m[open]}" ]; then
                row+=$(awk -v o="${m[open]}" -v x="${m[$mode]}" 'BEGIN {printf " | %.2fx", o / x}')
            else
                row+=" | "
            fi
        done
        echo "$row |"
        unset t m
    done
done
