#!/usr/bin/env bash
# No peer can stall the run (master --vote-timeout, here PCCL_VOTE_TIMEOUT_MS=2000):
# 1. a member that joins and then stops calling the library (its heartbeats go
#    on) is kicked when a vote it does not cast is 2 s old; the others go on;
# 2. a stranger that registers with a HELLO of its own and then only heartbeats (it never wires
#    its ring) fails at most one accept round: the members keep stepping while it
#    stays connected.
. "$(dirname "$0")/lib.sh"
export PCCL_VOTE_TIMEOUT_MS=2000
start_master
args=(--workload synthetic --steps 100000 --size 20000 --step-delay 20 --min-world 2)
start_peer p1 "${args[@]}"; P1=$LAST_PID
start_peer p2 "${args[@]}"; P2=$LAST_PID
wait_events "$WORK/p1.log" step 10 30

"$BIN/idle_peer" "$PORT" 60 > "$WORK/idle.log" 2> "$WORK/idle.err" &
IDLE=$!; PIDS+=("$IDLE")
for _ in $(seq 1 300); do grep -q accepted "$WORK/idle.log" && break; sleep 0.05; done
grep -q accepted "$WORK/idle.log" || fail "the idle peer was not accepted"
joined_at=$(count_events "$WORK/p1.log" step)
wait_events "$WORK/p1.log" step $((joined_at + 20)) 20
grep -q "did not vote or report" "$WORK/master.log" || fail "the master did not kick the idle member"

# The stranger: a signed HELLO and a heartbeat every 500 ms until the harness is done with it (at most 60 s),
# however long the members take for their 100 steps.
"$BIN/raw_hello" "$PORT" "$WORK/stranger.stop" 60 > "$WORK/stranger.log" 2>&1 &
STRANGER=$!; PIDS+=("$STRANGER")
for _ in $(seq 1 100); do grep -q registered "$WORK/stranger.log" && break; sleep 0.05; done
before=$(count_events "$WORK/p1.log" step)
wait_events "$WORK/p1.log" step $((before + 100)) 60
kill -0 "$STRANGER" 2>/dev/null || fail "the stranger left before the members' 100 steps: $(cat "$WORK/stranger.log")"
touch "$WORK/stranger.stop"
wait_pid "$STRANGER" 30 || fail "the stranger's connection broke: $(cat "$WORK/stranger.log")"
grep -q "still connected" "$WORK/stranger.log" || fail "the stranger did not stay connected"
kill "$P1" "$P2"
echo "ok: an idle member was kicked at the vote deadline; a stranger that never wires did not stop the run"
