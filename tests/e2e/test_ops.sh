#!/usr/bin/env bash
# Every dtype x reduce op, in place and out of place, async concurrency,
# parameter mismatch and argument errors, checked exactly on 3 peers.
. "$(dirname "$0")/lib.sh"
start_master
pids=()
for r in 0 1 2; do
    "$BIN/ops_peer" "$PORT" "$r" 3 > "$WORK/ops$r.log" 2>&1 &
    pids+=($!); PIDS+=($!)
done
for r in 0 1 2; do wait_pid "${pids[$r]}" 120 || fail "ops peer $r failed"; done
echo "ok: all ops checked on 3 peers"
