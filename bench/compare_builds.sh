#!/usr/bin/env bash
# bench/compare_builds.sh - is build B as fast as build A? For each point (PEERS x BYTES), K rounds that
# alternate the two builds' pccl_allreduce (in place and out of place) back to back, so a slow phase of a
# shared machine hits both; then a table: each build's median of the round medians, the ratio B/A, and in
# how many rounds B was slower than A by more than the noise margin (--margin, default 5%).
#
# usage: bench/compare_builds.sh --a DIR --b DIR [--rounds K] [--reps N] [--margin PCT] [POINT...]
#   DIR     a build's bin directory with pccl_allreduce (cmake --build BUILD builds it: BUILD/bin)
#   POINT   PEERSxBYTES, default: 2x409600 2x16777216 4x16777216 2x268435456
# Prints RESULT lines (build=a|b) on stdout as it goes, then the table. Used for changes that must not
# change speed (bench/analysis.md, "Builds compared").
set -u
A="" B="" K=5 REPS=5 MARGIN=5
while [ $# -gt 0 ]; do
    case $1 in
    --a) A=$2; shift ;;
    --b) B=$2; shift ;;
    --rounds) K=$2; shift ;;
    --reps) REPS=$2; shift ;;
    --margin) MARGIN=$2; shift ;;
    -h | --help) sed -n '2,11p' "$0"; exit 0 ;;
    -*) echo "compare_builds.sh: unknown argument $1" >&2; exit 2 ;;
    *) break ;;
    esac
    shift
done
for d in "$A" "$B"; do
    [ -x "$d/pccl_allreduce" ] || { echo "compare_builds.sh: no pccl_allreduce in '$d' (--a/--b)" >&2; exit 2; }
done
for v in "$K" "$REPS" "$MARGIN"; do
    case $v in '' | *[!0-9]*) echo "compare_builds.sh: '$v' is not a non-negative integer" >&2; exit 2 ;; esac
done
points=("$@")
[ ${#points[@]} -gt 0 ] || points=(2x409600 2x16777216 4x16777216 2x268435456)
out=$(mktemp)
trap 'rm -f "$out"' EXIT
# shellcheck source=bench/lib.sh
. "$(dirname "$0")/lib.sh"
for p in "${points[@]}"; do
    n=${p%x*} s=${p#*x}
    case "$n$s" in '' | *[!0-9]*) echo "compare_builds.sh: point '$p' is not PEERSxBYTES" >&2; exit 2 ;; esac
    reps_for "$s" "$REPS"
    for k in $(seq 1 "$K"); do
        echo "[$(date -u +%H:%M:%S) load $(cut -d' ' -f1 /proc/loadavg)] $p round $k/$K" >&2
        # Alternate which build goes first, so neither always runs on a warmer machine.
        order="a b"; [ $((k % 2)) = 0 ] && order="b a"
        for build in $order; do
            dir=$A; [ "$build" = b ] && dir=$B
            for mode in ar oop; do
                if res=$(timeout 900 "$dir/pccl_allreduce" "$mode" "$n" "$s" "$r" "$warm" 2>/dev/null) &&
                    grep -q '^RESULT' <<<"$res"; then
                    grep '^RESULT' <<<"$res" | sed "s/^RESULT /RESULT build=$build round=$k /" | tee -a "$out"
                else
                    echo "RESULT build=$build round=$k mode=$mode peers=$n bytes=$s status=FAILED" | tee -a "$out"
                fi
            done
        done
    done
done
python3 - "$out" "$MARGIN" <<'PY'
import re, statistics, sys
rows = {}
for line in open(sys.argv[1]):
    f = dict(kv.split('=', 1) for kv in line.split()[1:])
    if 'median_s' not in f:
        continue
    key = (int(f['peers']), int(f['bytes']), f.get('impl', f['mode']))
    rows.setdefault(key, {}).setdefault(int(f['round']), {})[f['build']] = float(f['median_s'])
margin = 1 + float(sys.argv[2]) / 100
print(f"{'point':>16} {'impl':>8} {'A median ms':>12} {'B median ms':>12} {'B/A':>6} {'B slower (rounds)':>18}")
for (n, s, mode), rounds in sorted(rows.items()):
    both = [r for r in rounds.values() if 'a' in r and 'b' in r]
    if not both:
        continue
    a = statistics.median(r['a'] for r in both)
    b = statistics.median(r['b'] for r in both)
    slower = sum(r['b'] > r['a'] * margin for r in both)
    print(f"{f'{n} x {s}':>16} {mode:>8} {a * 1e3:12.3f} {b * 1e3:12.3f} {b / a:6.3f} {f'{slower} of {len(both)}':>18}")
PY
