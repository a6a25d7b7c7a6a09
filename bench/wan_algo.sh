#!/usr/bin/env bash
# bench/wan_algo.sh - one small all-reduce per repetition under the WAN emulation (bench/wan.sh, WAN_POOL=1) at
# several world sizes, for each algorithm (PCCL_ALGO: ring, rhd, auto; docs/algorithms.md), and a markdown table
# of the medians (time = the slowest member's, median over the repetitions).
#
# usage: bench/wan_algo.sh BIN_DIR [REPS (10)] ["PEERS" ("4 8 16")] ["ALGOS" ("ring rhd auto")]   (root)
# env:   WAN_BYTES (4096), WAN_COLL (reduce_scatter: that collective instead of the all-reduce, bench/pccl_coll.c)
#        and the rest of bench/wan.sh's settings (WAN_DELAY: 20 ms one way under wanemu)
set -euo pipefail
BIN=$1 REPS=${2:-10} PEERS=${3:-"4 8 16"} ALGOS=${4:-"ring rhd auto"}
BYTES=${WAN_BYTES:-4096}
HERE=$(dirname "$0")
OUT=$(mktemp /tmp/pcclb-algo-XXXXXX)
trap 'rm -f "$OUT"' EXIT
for n in $PEERS; do
    for a in $ALGOS; do
        echo "[$(date -u +%H:%M:%S)] $n peers, $BYTES B, PCCL_ALGO=$a" >&2
        PCCL_ALGO=$a WAN_POOL=1 WAN_PEERS=$n WAN_BYTES=$BYTES WAN_TAG=$a "$HERE/wan.sh" "$BIN" "$REPS" 1 |
            grep -E "mode=wan(pool|coll) " | tee -a "$OUT"
    done
done
python3 - "$OUT" "$PEERS" "$ALGOS" "$BYTES" "${WAN_COLL:-all_reduce}" <<'PY'
import re, sys
rows = {}
for line in open(sys.argv[1]):
    f = dict(kv.split("=", 1) for kv in line.split()[1:] if "=" in kv)
    rows[(f["peers"], f["scenario"])] = f.get("median_s", f.get("status", "?"))
algos = sys.argv[3].split()
print(f"\n| peers | {sys.argv[5]} of {sys.argv[4]} B: " + " | ".join(f"PCCL_ALGO={a} (s)" for a in algos) + " |")
print("| --- |" + " --- |" * len(algos))
for n in sys.argv[2].split():
    print(f"| {n} | " + " | ".join(rows.get((n, a), "-") for a in algos) + " |")
PY
