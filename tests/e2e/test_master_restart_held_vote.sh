#!/usr/bin/env bash
# An all-reduce launched while the master is down, by a peer the restarted master then takes back
# only as a newcomer: 3 peers (restart_peer.c) train; the master is SIGKILLed, peer 2 launches an
# all-reduce at once (its vote waits for the master) and is SIGSTOPped; the new master rebuilds from
# the other two and they go on. Resumed, peer 2 is answered "RESUMED ok=0": its library holds the
# vote back (a newcomer may not vote), so the call must return pcclTooFewPeers (5) at once instead
# of waiting for a COMMENCE that cannot come until the master kicks it; then peer 2 gets in at the
# next accept round and finishes with the others' state.
. "$(dirname "$0")/lib.sh"
END=${RESTART_END:-200}
start_master
pids=()
for r in 0 1 2; do
    hold=(); [ "$r" = 2 ] && hold=("$WORK")
    PCCL_LOG_LEVEL=info "$BIN/restart_peer" "$PORT" "$END" 15 "${hold[@]}" > "$WORK/peer$r.log" 2> "$WORK/peer$r.err" &
    pids+=($!); PIDS+=($!)
done
wait_rev peer0 30 60
# peer 2 pauses between two steps (no call under way), the master dies, and peer 2 launches its
# all-reduce once its library saw the master go: the call's vote waits for a master
touch "$WORK/pause"
for _ in $(seq 1 200); do grep -q '^paused' "$WORK/peer2.log" && break; sleep 0.05; done
grep -q '^paused' "$WORK/peer2.log" || fail "peer 2 did not pause"
kill -9 "$MASTER_PID"; wait "$MASTER_PID" 2>/dev/null
for _ in $(seq 1 200); do grep -q "lost the master" "$WORK/peer2.err" && break; sleep 0.05; done
grep -q "lost the master" "$WORK/peer2.err" || fail "peer 2 did not notice the master's death"
touch "$WORK/outage"
sleep 0.5
kill -STOP "${pids[2]}"
rebuild_without_peer2

grep -q "joining again as a new peer" "$WORK/peer2.err" || fail "peer 2 was not taken back as a newcomer"
[ "$(grep '^held' "$WORK/peer2.log")" = "held 5" ] || fail "the held all-reduce returned '$(grep '^held' "$WORK/peer2.log")', not 'held 5'"
grep -q "did not report its ring wiring" "$WORK/master2.log" && fail "the master had to kick peer 2"
sums=$(grep -h '^done' "$WORK"/peer*.log | sort -u)
[ "$(echo "$sums" | wc -l)" = 1 ] || fail "shared states differ: $sums"
echo "$sums" | grep -q "^done $END " || fail "the run did not reach revision $END: $sums"
echo "ok: an all-reduce launched during the outage returned pcclTooFewPeers once peer 2 was a newcomer; it rejoined"
