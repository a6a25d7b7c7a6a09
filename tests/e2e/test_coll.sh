#!/usr/bin/env bash
# The collectives on 4 peers, checked exactly against results computed in coll_peer.c: broadcast (a shared-sources
# one too), all-gather, all-gather of variable counts and reduce-scatter (every reduce op), every dtype, in place
# and out of place mixed within each operation, ranks by rank key and by ring position, barrier, async operations
# of several kinds at once and the with-retry form.
. "$(dirname "$0")/lib.sh"
start_master
pids=()
for id in 0 1 2 3; do
    "$BIN/coll_peer" "$PORT" "$id" 4 all > "$WORK/c$id.log" 2>&1 &
    pids+=($!); PIDS+=($!)
done
for id in 0 1 2 3; do wait_pid "${pids[$id]}" 120 || fail "coll peer $id failed"; done
echo "ok: every collective checked on 4 peers"
