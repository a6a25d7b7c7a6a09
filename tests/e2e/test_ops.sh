#!/usr/bin/env bash
# Every dtype x reduce op, in place and out of place, async concurrency,
# parameter mismatch and argument errors, checked exactly on 3 peers: once with
# every op's sends copied (PCCL_ZEROCOPY_MIN_BYTES=-1) and once with every op's
# sends spliced (=0), pcclAvg's all-gather exception included.
. "$(dirname "$0")/lib.sh"
start_master
for zc in -1 0; do
    pids=()
    for r in 0 1 2; do
        PCCL_ZEROCOPY_MIN_BYTES=$zc "$BIN/ops_peer" "$PORT" "$r" 3 > "$WORK/ops$r-$zc.log" 2>&1 &
        pids+=($!); PIDS+=($!)
    done
    for r in 0 1 2; do wait_pid "${pids[$r]}" 120 || fail "ops peer $r failed (PCCL_ZEROCOPY_MIN_BYTES=$zc)"; done
done
echo "ok: all ops checked on 3 peers, copied and spliced"
