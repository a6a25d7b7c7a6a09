#!/usr/bin/env bash
# bench/sparse.sh - the sparse all-reduce with error feedback against the dense ring all-reduce of the same floats on
# loopback (bench/pccl_sparse.c): per point, the bytes one peer sends and the time, both against dense fp32.
# Writes the markdown table to --md and prints it.
#
# usage: bench/sparse.sh --bin DIR [--reps N] [--count N] [--worlds "2 3 4"] [--settings "0.03:2 ..."] [--md FILE]
#   --bin       directory with pccl_sparse (build/bin)
#   --reps      timed repetitions per point (default 5)
#   --count     floats per tensor (default 4194304: 16 MiB)
#   --worlds    peers per point (default "2 3 4")
#   --settings  FRACTION:BITS pairs (default "0.03:2 0.03:4 0.01:2 0.03:0")
#   --md        markdown written (default bench/sparse.md)
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN="" REPS=5 COUNT=4194304 WORLDS="2 3 4" SETTINGS="0.03:2 0.03:4 0.01:2 0.03:0" MD=$ROOT/bench/sparse.md
while [ $# -gt 0 ]; do
    case $1 in
    --bin) BIN=$2; shift ;;
    --reps) REPS=$2; shift ;;
    --count) COUNT=$2; shift ;;
    --worlds) WORLDS=$2; shift ;;
    --settings) SETTINGS=$2; shift ;;
    --md) MD=$2; shift ;;
    -h | --help) sed -n '2,13p' "$0"; exit 0 ;;
    *) echo "sparse.sh: unknown argument $1" >&2; exit 2 ;;
    esac
    shift
done
[ -x "$BIN/pccl_sparse" ] || { echo "sparse.sh: no $BIN/pccl_sparse (--bin build/bin)" >&2; exit 2; }
{
    echo "| peers | top-k | bits | pack B | sent B per peer | dense ring B per peer | less on the wire | pack vs fp32 | sparse ms | dense ms |"
    echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
    for w in $WORLDS; do
        for s in $SETTINGS; do
            line=$(PCCL_LOG_LEVEL=error timeout 300 "$BIN/pccl_sparse" "$w" "$COUNT" "${s%%:*}" "${s#*:}" "$REPS" | grep '^sparse ') ||
                { echo "sparse.sh: point $w $s failed" >&2; exit 1; }
            v() { sed -E "s/.* $1=([^ ]*).*/\1/" <<< "$line"; }
            echo "| $w | $(v fraction) | $(v bits) | $(v pack_bytes) | $(v tx_per_peer) | $(v dense_tx_per_peer) | $(v wire_less) | $(v vs_fp32) | $(v sparse_ms) | $(v dense_ms) |"
        done
    done
} > "$MD.tmp" && mv "$MD.tmp" "$MD"
cat "$MD"
