#!/usr/bin/env bash
# bench/wan_algo.sh - one all-reduce per repetition under the WAN emulation (bench/wan.sh, WAN_POOL=1) at
# several world sizes, for each algorithm (PCCL_ALGO: ring, rhd, auto; docs/algorithms.md), in interleaved
# rounds (each round runs every algorithm of a world size back to back, so a slow phase of the shared machine
# hits them all), and a markdown table: per algorithm the median of the round medians (time = the slowest
# member's, median over the repetitions), and auto's speed-up over the ring (the median of the per-round ratios);
# the RESULT lines name the algorithms the master commenced (algo=, from its debug log).
#
# usage: bench/wan_algo.sh BIN_DIR [REPS (10)] ["PEERS" ("4 8 16")] ["ALGOS" ("ring rhd auto")]   (root)
# env:   WAN_BYTES (4096), WAN_ROUNDS (1), WAN_COLL (reduce_scatter: that collective instead of the all-reduce,
#        bench/pccl_coll.c), PCCL_BENCH_OPTIMIZE=1 (every peer optimizes the topology first, so the master
#        chooses from the bandwidths and round trips it measured; bench/bench_peer.h) and the rest of
#        bench/wan.sh's settings (WAN_DELAY: 20 ms one way under wanemu)
set -euo pipefail
BIN=$1 REPS=${2:-10} PEERS=${3:-"4 8 16"} ALGOS=${4:-"ring rhd auto"}
BYTES=${WAN_BYTES:-4096} ROUNDS=${WAN_ROUNDS:-1}
HERE=$(dirname "$0")
OUT=$(mktemp /tmp/pcclb-algo-XXXXXX)
trap 'rm -f "$OUT"' EXIT
for n in $PEERS; do
    for k in $(seq "$ROUNDS"); do
        for a in $ALGOS; do
            echo "[$(date -u +%H:%M:%S)] $n peers, $BYTES B, PCCL_ALGO=$a, round $k" >&2
            PCCL_ALGO=$a WAN_MASTER_LOG=debug WAN_POOL=1 WAN_PEERS=$n WAN_BYTES=$BYTES WAN_TAG=$a "$HERE/wan.sh" "$BIN" "$REPS" 1 |
                grep -E "mode=wan(pool|coll) " | sed "s/\$/ round=$k/" | tee -a "$OUT"
        done
    done
done
python3 - "$OUT" "$PEERS" "$ALGOS" "$BYTES" "${WAN_COLL:-all_reduce}" <<'PY'
import statistics, sys
runs = {}
for line in open(sys.argv[1]):
    f = dict(kv.split("=", 1) for kv in line.split()[1:] if "=" in kv)
    if "median_s" in f:
        runs.setdefault((f["peers"], f["scenario"]), {})[f["round"]] = float(f["median_s"])
algos = sys.argv[3].split()
ratio = "ring" in algos and "auto" in algos
def cell(n, a):
    r = runs.get((n, a))
    return f"{statistics.median(r.values()):.3f}" if r else "-"
head = f"| peers | {sys.argv[5]} of {sys.argv[4]} B: " + " | ".join(f"PCCL_ALGO={a} (s)" for a in algos)
print("\n" + head + (" | auto vs ring |" if ratio else " |"))
print("| --- |" + " --- |" * (len(algos) + ratio))
for n in sys.argv[2].split():
    row = f"| {n} | " + " | ".join(cell(n, a) for a in algos)
    if ratio:
        ring, auto = runs.get((n, "ring"), {}), runs.get((n, "auto"), {})
        both = [ring[k] / auto[k] for k in ring if k in auto]
        row += f" | {statistics.median(both):.2f}x" if both else " | -"
    print(row + " |")
PY
