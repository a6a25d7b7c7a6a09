#!/usr/bin/env bash
# Revision poisoning at a restart, two strangers against two peers: 2 peers (restart_peer.c) train; the
# master is SIGKILLed and started again; two strangers (tests/e2e/resume_flood.py poison) RESUME into the
# run's group claiming revision 2^60, naming a peer that never comes (the rebuild waits for its deadline),
# and leave when the master asks them to wire their ring. The rebuilt revision is one a wired peer holds:
# the run goes on, its syncs succeed, and both peers reach END with the same state.
. "$(dirname "$0")/lib.sh"
END=${RESTART_END:-120}
start_master
start_restart_peers 2 "$END"
wait_rev peer0 30 60
kill -9 "$MASTER_PID"; wait "$MASTER_PID" 2>/dev/null
before=$(rev_of peer0)
python3 "$(dirname "$0")/resume_flood.py" poison "$PORT" 2 $((1 << 60)) > "$WORK/poison.json" 2>&1 &
POISON=$!; PIDS+=("$POISON")
sleep 0.5
PCCL_LOG_LEVEL=info "$PCCL" master --listen "127.0.0.1:$PORT" --admin 127.0.0.1:0 > "$WORK/master2.log" 2>&1 &
MASTER_PID=$!; PIDS+=("$MASTER_PID")
wait_pid "$POISON" 40 || fail "resume_flood.py failed: $(cat "$WORK/poison.json")"
echo "strangers: $(cat "$WORK/poison.json")"
grep -q '"connected": 2' "$WORK/poison.json" || fail "the strangers did not reach the new master"
[ "$(grep -c 're-registered' "$WORK/master2.log")" -ge 4 ] || fail "the strangers and the peers did not all resume"
for i in 0 1; do wait_pid "${pids[$i]}" 120 || fail "peer $i failed: $(tail -3 "$WORK/peer$i.err")"; done
rebuilt=$(grep -o 'rebuilt run from 2 peers at revision [0-9]*' "$WORK/master2.log" | awk '{print $NF}')
[ -n "$rebuilt" ] && [ "$rebuilt" -le "$before" ] ||
    fail "the run was not rebuilt from the 2 peers at their revision ($before): $(grep 'rebuilt run' "$WORK/master2.log")"
sums=$(grep -h '^done' "$WORK"/peer*.log | sort -u)
[ "$(echo "$sums" | wc -l)" = 1 ] || fail "shared states differ: $sums"
echo "$sums" | grep -q "^done $END " || fail "the run did not reach revision $END: $sums"
echo "ok: two strangers claiming revision 2^60 at a restart did not stop the run (revision $before -> $END)"
