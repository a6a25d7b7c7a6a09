#!/usr/bin/env bash
# 4- and 2-bit quantization on 3 peers (quant_peer.c low): the all-reduce for every source dtype x algorithm x
# width x reduce op and the reduce-scatter, each within the documented bound of the exact float64 reduction and
# bit-identical on every peer (the hashes are compared here); peers asking for different widths are all refused
# with the master's reason, and the run goes on.
. "$(dirname "$0")/lib.sh"
start_master
pids=()
for r in 0 1 2; do
    "$BIN/quant_peer" "$PORT" "$r" 3 "$WORK/hashes$r.txt" low > "$WORK/quant$r.log" 2>&1 &
    pids+=($!); PIDS+=($!)
done
for r in 0 1 2; do wait_pid "${pids[$r]}" 300 || { tail -5 "$WORK/quant$r.log" >&2; fail "quant peer $r failed"; }; done
n=$(wc -l < "$WORK/hashes0.txt")
[ "$n" -ge 248 ] || fail "only $n results hashed"
for r in 1 2; do
    diff -q "$WORK/hashes0.txt" "$WORK/hashes$r.txt" > /dev/null || {
        diff "$WORK/hashes0.txt" "$WORK/hashes$r.txt" | head -5 >&2
        fail "peer $r ended with different bits than peer 0"
    }
done
for r in 0 1 2; do
    grep -Eq "quantizations differ: min_max to uint[42] on .*min_max to uint[24] on" "$WORK/quant$r.log" ||
        fail "peer $r did not log the master's reason for the mismatch"
done
echo "ok: $n 4- and 2-bit all-reduces and reduce-scatters bit-identical on 3 peers and within bounds; a mismatch refused"
