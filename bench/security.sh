#!/usr/bin/env bash
# bench/security.sh [--bin DIR] [--rounds K] [--wan] [PEERS...] - what a keyed run and an encrypted
# run cost: in-place float sum all-reduce throughput of an open run, a keyed run (every connection
# authenticated, PCCL_KEY_FILE) and an encrypted one (PCCL_KEY_FILE + PCCL_ENCRYPT=1: AEAD on every
# byte), at 16 MiB and 256 MiB. Loopback (default): pccl_allreduce ar, forked peers and an
# in-process master on 127.0.0.1; 16 MiB: 10 timed repetitions after 3 warm-ups, 256 MiB: 3 after 1.
# --wan (root): the same three modes in the same emulated WAN (bench/wan.sh: one namespace per peer
# and a master of its own, netem or bench/wanemu; WAN_RATE default 1gbit, WAN_DELAY as wan.sh),
# one all-reduce at a time; 16 MiB: 5 timed repetitions, 256 MiB: 2, each after 1 warm-up.
# Each round runs the three modes back to back at one point, so a slow phase of a shared machine
# hits all three; per mode the median over K rounds of each run's median. Prints a markdown table:
# GB/s (ms) per mode and each mode's throughput relative to the open run. Defaults: build/bin,
# K = 3, peers 2 and 4. The cipher is each machine's choice (PCCL_CIPHER overrides it).
# --cpu (loopback): instead of throughput, the CPU time per all-reduce of each mode (user + system of
# every process, from the difference between a run of R and one of 3R repetitions, so setup and
# warm-up cancel out; R = 10 at 16 MiB, 3 at 256 MiB), the wall time per all-reduce and how many of
# the machine's cores the all-reduce kept busy (CPU / wall). Where an open run already keeps every
# core busy, an encrypted one can be no faster than (its CPU time) / (cores).
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=build/bin ROUNDS=3 PEERS=() WAN=0 CPU=0
while [ $# -gt 0 ]; do
    case $1 in
        --bin) BIN=$2; shift 2 ;;
        --rounds) ROUNDS=$2; shift 2 ;;
        --wan) WAN=1; shift ;;
        --cpu) CPU=1; shift ;;
        -h|--help) sed -n '2,18p' "$0"; exit 0 ;;
        [0-9]*) PEERS+=("$1"); shift ;;
        *) echo "security.sh: unknown argument $1" >&2; exit 2 ;;
    esac
done
[ ${#PEERS[@]} -gt 0 ] || PEERS=(2 4)
[ -x "$BIN/pccl_allreduce" ] || { echo "build first: $BIN/pccl_allreduce" >&2; exit 2; }
BIN=$(cd "$BIN" && pwd)
WORK=$(mktemp -d /tmp/pccl-security-bench.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
head -c 48 /dev/urandom | base64 > "$WORK/run.key"
chmod 600 "$WORK/run.key"

run() { # MODE PEERS BYTES: prints the run's median time in seconds (empty when it failed)
    env_of "$1"
    local env=("${ENV[@]}")
    if [ "$WAN" = 1 ]; then # master and peers inherit the mode's environment through wan.sh
        local reps=5
        [ "$3" -gt $((64 << 20)) ] && reps=2
        PCCL_LOG_LEVEL=error WAN_PEERS=$2 WAN_BYTES=$3 WAN_RATE=${WAN_RATE:-1gbit} WAN_PREFIX=${WAN_PREFIX:-pccls} \
            "${env[@]}" bench/wan.sh "$BIN" "$reps" 1 2>> "$WORK/err" | tee -a "$WORK/wan.out" |
            grep -o 'mode=wan .*median_s=[0-9.]*' | grep -o 'median_s=[0-9.]*' | cut -d= -f2 || true
        return
    fi
    local reps=10 warm=3
    [ "$3" -gt $((64 << 20)) ] && reps=3 warm=1
    PCCL_LOG_LEVEL=error timeout 600 "${env[@]}" "$BIN/pccl_allreduce" ar "$2" "$3" "$reps" "$warm" 2>> "$WORK/err" |
        grep -o 'median_s=[0-9.]*' | cut -d= -f2 || true
}
env_of() { # MODE: the environment of that mode
    ENV=(env -u PCCL_KEY_FILE -u PCCL_ENCRYPT)
    case $1 in
        keyed) ENV+=(PCCL_KEY_FILE="$WORK/run.key") ;;
        encrypted) ENV+=(PCCL_KEY_FILE="$WORK/run.key" PCCL_ENCRYPT=1) ;;
    esac
}
usage_of() { # COMMAND...: prints "cpu_s wall_s" of the command and its children
    python3 -c 'import resource, subprocess, sys, time
t = time.monotonic(); r = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL); w = time.monotonic() - t
u = resource.getrusage(resource.RUSAGE_CHILDREN)
print("%.4f %.4f" % (u.ru_utime + u.ru_stime, w) if r.returncode == 0 else "")' "$@"
}
median() { tr ' ' '\n' | grep . | sort -g | awk '{v[NR] = $1} END {if (NR) print v[int((NR + 1) / 2)]}'; }

if [ "$CPU" = 1 ]; then
    cores=$(nproc)
    echo "| peers | size | mode | wall ms per all-reduce | CPU ms per all-reduce | cores busy (of $cores) |"
    echo "|---|---|---|---|---|---|"
    for n in "${PEERS[@]}"; do
        for bytes in $((16 << 20)) $((256 << 20)); do
            r=10
            [ "$bytes" -gt $((64 << 20)) ] && r=3
            for mode in open keyed encrypted; do
                env_of "$mode"
                cpu=() wall=()
                for k in $(seq 1 "$ROUNDS"); do # per round: the difference between 3R and R repetitions
                    echo "  round $k/$ROUNDS: $n peers, $((bytes >> 20)) MiB, $mode" >&2
                    a=$(PCCL_LOG_LEVEL=error usage_of "${ENV[@]}" "$BIN/pccl_allreduce" ar "$n" "$bytes" "$r" 1)
                    b=$(PCCL_LOG_LEVEL=error usage_of "${ENV[@]}" "$BIN/pccl_allreduce" ar "$n" "$bytes" $((3 * r)) 1)
                    [ -n "$a" ] && [ -n "$b" ] || continue
                    cpu+=("$(awk -v a="${a% *}" -v b="${b% *}" -v r="$r" 'BEGIN {printf "%.3f", (b - a) / (2 * r) * 1e3}')")
                    wall+=("$(awk -v a="${a#* }" -v b="${b#* }" -v r="$r" 'BEGIN {printf "%.3f", (b - a) / (2 * r) * 1e3}')")
                done
                c=$(median <<< "${cpu[*]:-}") w=$(median <<< "${wall[*]:-}")
                if [ -n "$c" ] && [ -n "$w" ]; then
                    echo "| $n | $((bytes >> 20)) MiB | $mode | $w | $c | $(awk -v c="$c" -v w="$w" 'BEGIN {printf "%.2f", c / w}') |"
                else
                    echo "| $n | $((bytes >> 20)) MiB | $mode | failed | | |"
                fi
            done
        done
    done
    exit 0
fi
[ "$WAN" = 1 ] && { [ "$(id -u)" = 0 ] || { echo "security.sh: --wan needs root (namespaces)" >&2; exit 2; }; }
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
# The emulation's own line (which path, delay, rate), once.
if [ "$WAN" = 1 ]; then grep -m1 -o 'emu=[^ ]*' "$WORK/wan.out" | tr _ ' ' || true; fi
