#!/usr/bin/env bash
# A peer that comes back after the restarted master rebuilt the run without it
# joins again as a new peer: 3 peers (restart_peer.c) train; the master is
# SIGKILLed and one peer SIGSTOPped; the new master rebuilds from the other two
# (after its rebuild window), then the stopped peer resumes, is answered
# "RESUMED ok=0", is accepted at the next accept round, receives the state it
# missed, and finishes with the same shared state as the others. No peer exits
# with an error.
. "$(dirname "$0")/lib.sh"
END=${RESTART_END:-200}
start_master

start_restart_peers 3 "$END"
wait_rev peer0 30 60
kill -STOP "${pids[2]}"
kill -9 "$MASTER_PID"; wait "$MASTER_PID" 2>/dev/null
stopped_at=$(rev_of peer2)
sleep 1
rebuild_without_peer2

grep -q "joining again as a new peer" "$WORK/peer2.err" || fail "peer 2 did not rejoin as a new peer"
grep -q "resumed after the run was rebuilt: joins as a new peer" "$WORK/master2.log" ||
    fail "the master did not take peer 2 as a new peer"
sums=$(grep -h '^done' "$WORK"/peer*.log | sort -u)
[ "$(echo "$sums" | wc -l)" = 1 ] || fail "shared states differ: $sums"
echo "$sums" | grep -q "^done $END " || fail "the run did not reach revision $END: $sums"
echo "ok: peer 2 stopped at revision $stopped_at through the restart, rejoined as a new peer; shared state equal at $END"
