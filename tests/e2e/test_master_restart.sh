#!/usr/bin/env bash
# A run survives its master: 3 peers (restart_peer.c) train; the master is
# SIGKILLed mid-run and started again on the same port 2 s later; no peer
# process exits, revisions go past the pre-crash maximum (no restart from 1),
# and the final shared state is the same everywhere. Then twice more: once
# while a newcomer is being accepted. The restarted master logs the rebuild.
. "$(dirname "$0")/lib.sh"
END=${RESTART_END:-260}
start_master
start_master_on() { # PORT: a new master on the same address
    PCCL_LOG_LEVEL=info "$PCCL" master --listen "127.0.0.1:$1" --admin 127.0.0.1:0 >> "$WORK/master.log" 2>&1 &
    MASTER_PID=$!; PIDS+=("$MASTER_PID")
    for _ in $(seq 1 100); do
        [ "$(grep -c "listening on 127.0.0.1:$1" "$WORK/master.log")" -ge "$2" ] && return 0; sleep 0.05
    done
    fail "master $2 did not start on port $1"
}
kill_master() { kill -9 "$MASTER_PID"; wait "$MASTER_PID" 2>/dev/null; }

start_restart_peers 3 "$END"
wait_rev peer0 40 60
kill_master
before=$(rev_of peer0)
sleep 2
for r in 0 1 2; do kill -0 "${pids[$r]}" 2>/dev/null || fail "peer $r exited while the master was down"; done
start_master_on "$PORT" 2
wait_rev peer0 $((before + 20)) 60
grep -q "rebuilt run from 3 peers at revision" "$WORK/master.log" || fail "no rebuild logged"

# A newcomer registers; the master dies while it is being accepted. (Killed before its WELCOME reached the
# newcomer, pcclConnect would fail as PCCL's does: the caller retries. So the kill waits for the welcome.)
PCCL_LOG_LEVEL=info "$BIN/restart_peer" "$PORT" "$END" 15 > "$WORK/newcomer.log" 2> "$WORK/newcomer.err" &
pids+=($!); PIDS+=($!)
for _ in $(seq 1 1000); do grep -q 'waiting to be accepted' "$WORK/newcomer.err" && break; sleep 0.01; done
grep -q 'waiting to be accepted' "$WORK/newcomer.err" || fail "the newcomer was not registered within 10 s"
kill_master
sleep 1
start_master_on "$PORT" 3
wait_rev newcomer 1 60
mid=$(rev_of peer0)
kill_master
sleep 1
start_master_on "$PORT" 4
for i in 0 1 2 3; do wait_pid "${pids[$i]}" 120 || fail "peer $i failed"; done

sums=$(grep -h '^done' "$WORK"/peer*.log "$WORK/newcomer.log" | sort -u)
[ "$(echo "$sums" | wc -l)" = 1 ] || fail "shared states differ: $sums"
echo "$sums" | grep -q "^done $END " || fail "the run did not reach revision $END: $sums"
[ "$(grep -c 'rebuilt run from' "$WORK/master.log")" -ge 3 ] || fail "fewer than 3 rebuilds logged"
grep -q 'master back after' "$WORK/peer0.err" || fail "peer 0 did not log the outage"
for r in 0 1 2; do grep -q '^revision 1 ' "$WORK/peer$r.log" && [ "$(grep -c '^revision 1 ' "$WORK/peer$r.log")" -gt 1 ] && fail "peer $r restarted from revision 1"; done
echo "ok: 3 master restarts (one during an accept round); revisions $before -> $mid -> $END; shared state equal"
