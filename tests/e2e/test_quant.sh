#!/usr/bin/env bash
# Quantized all-reduce on 4 peers: every source dtype x algorithm x quantized
# dtype x reduce op, edge-case data, three tags in flight; every result within
# the documented bound of the exact float64 reduction (checked by each peer)
# and bit-identical on all peers (the per-tag hashes are compared here).
. "$(dirname "$0")/lib.sh"
start_master
pids=()
for r in 0 1 2 3; do
    "$BIN/quant_peer" "$PORT" "$r" 4 "$WORK/hashes$r.txt" > "$WORK/quant$r.log" 2>&1 &
    pids+=($!); PIDS+=($!)
done
for r in 0 1 2 3; do wait_pid "${pids[$r]}" 300 || fail "quant peer $r failed"; done
n=$(wc -l < "$WORK/hashes0.txt")
[ "$n" -ge 300 ] || fail "only $n results hashed"
for r in 1 2 3; do
    diff -q "$WORK/hashes0.txt" "$WORK/hashes$r.txt" > /dev/null || {
        diff "$WORK/hashes0.txt" "$WORK/hashes$r.txt" | head -5 >&2
        fail "peer $r ended with different bits than peer 0"
    }
done
echo "ok: $n quantized all-reduces bit-identical on 4 peers and within bounds"
